"""Surface syntax tree of the DSL: what the user wrote, with positions, before any checking.

Nodes are small frozen dataclasses; every node that can be wrong carries ``pos`` (line, column)
so the checker can point at it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from typing import Literal

Pos = tuple[int, int]


@dataclass(frozen=True)
class Term:
    """An argument: a constant, a quantified variable, or a prefixed constant (``entity:api``)."""

    kind: str | None  # "entity" | "provider" | None
    name: str
    pos: Pos


# ---- formulas -------------------------------------------------------------------------------
@dataclass(frozen=True)
class FAtom:
    kind: str | None  # "hyp" | "obs" | "pred" | None: an optional prefix the checker verifies
    pred: str
    args: tuple[Term, ...]
    pos: Pos


@dataclass(frozen=True)
class FConst:
    value: bool
    pos: Pos


@dataclass(frozen=True)
class FNot:
    arg: Formula
    pos: Pos


@dataclass(frozen=True)
class FNary:
    op: str  # "and" | "or" | "iff" | "xor"
    args: tuple[Formula, ...]
    pos: Pos


@dataclass(frozen=True)
class FImplies:
    lhs: Formula
    rhs: Formula
    pos: Pos


@dataclass(frozen=True)
class FCard:
    op: str  # "at_most" | "at_least" | "exactly"
    k: int
    args: tuple[Formula, ...]
    pos: Pos


@dataclass(frozen=True)
class FQuant:
    quantifier: str  # "forall" | "exists"
    var: str
    domain: str
    body: Formula
    pos: Pos
    domain_pos: Pos


@dataclass(frozen=True)
class FBefore:
    first: ARef
    second: ARef
    pos: Pos


@dataclass(frozen=True)
class FWithin:
    first: ARef
    span: AQuantity
    second: ARef
    pos: Pos


@dataclass(frozen=True)
class FPath:
    source: Term
    relation: str
    target: Term
    hops: int
    pos: Pos
    relation_pos: Pos


@dataclass(frozen=True)
class FCompare:
    lhs: Arith
    op: str
    rhs: Arith
    pos: Pos


@dataclass(frozen=True)
class FRisk:
    """``risk <= medium``; with ``provider`` set, ``use(provider:X) only_if risk <= medium``."""

    op: str
    level: str
    provider: Term | None
    pos: Pos


Formula = FAtom | FConst | FNot | FNary | FImplies | FCard | FQuant | FBefore | FWithin | FPath | FCompare | FRisk

#: where a formula read by one of the fast reader's compiled shapes keeps that shape (a tuple of
#: token kinds, plain names abstracted): in the node's ``__dict__``, not a field, so equality,
#: hashing, ``repr`` and ``dataclasses.replace`` ignore it. Formulas of one shape have one
#: structure, so the grounder grounds them all with one function compiled for that shape
#: (:mod:`cda.encodings.ground`); a formula without it is grounded node by node.
SHAPE_KEY = "_shape"


# ---- linear arithmetic ----------------------------------------------------------------------
@dataclass(frozen=True)
class AQuantity:
    value: Fraction
    unit: str | None
    pos: Pos


@dataclass(frozen=True)
class ARef:
    kind: str  # "metric" | "event"
    name: str
    pos: Pos


@dataclass(frozen=True)
class ATerm:
    """``coef * ref`` (ref set) or a constant quantity (quantity set)."""

    coef: Fraction
    ref: ARef | None
    quantity: AQuantity | None
    pos: Pos


@dataclass(frozen=True)
class Arith:
    terms: tuple[ATerm, ...]
    pos: Pos


# ---- statements -----------------------------------------------------------------------------
@dataclass(frozen=True)
class DomainDecl:
    name: str
    values: tuple[str, ...]
    pos: Pos


@dataclass(frozen=True)
class PredDecl:
    kind: str  # "hyp" | "observable" | "pred" | "var"
    name: str
    domains: tuple[str, ...]
    pos: Pos
    domain_pos: tuple[Pos, ...]


@dataclass(frozen=True)
class EventDecl:
    name: str
    pos: Pos


@dataclass(frozen=True)
class MetricDecl:
    name: str
    unit: str
    pos: Pos
    unit_pos: Pos = (0, 0)


@dataclass(frozen=True)
class Fact:
    atom: FAtom
    pos: Pos


@dataclass(frozen=True)
class Observe:
    name: str | None
    formula: Formula
    pos: Pos
    name_pos: Pos = (0, 0)


@dataclass(frozen=True)
class Hard:
    name: str | None
    formula: Formula
    pos: Pos
    name_pos: Pos = (0, 0)


@dataclass(frozen=True)
class Soft:
    name: str | None
    weight: Fraction | None
    formula: Formula
    pos: Pos
    name_pos: Pos = (0, 0)
    weight_pos: Pos = (0, 0)


@dataclass(frozen=True)
class GoalBest:
    top: int | None
    pos: Pos


@dataclass(frozen=True)
class GoalMinimal:
    """``goal minimal_explanations [all | top k | min_cardinality]`` (``k`` set only for top)."""

    mode: Literal["all", "top", "min_cardinality"]
    k: int | None
    pos: Pos


@dataclass(frozen=True)
class GoalClaim:
    mode: Literal["prove", "disprove"]
    formula: Formula
    pos: Pos


@dataclass(frozen=True)
class Expect:
    """``expect [name:] …``: what a suite asserts about the whole answer (docs/dsl.md).

    ``kind`` and ``value``: ``status`` (``"sat"``/``"unsat"``/``"unknown"``), ``best`` (``sets``:
    the assumed atoms of each hypothesis of least cost), ``cost`` (``op`` and a ``Fraction``: the
    least cost), ``core`` (a clause name that every conflict core holds) and ``minimal`` (``op``
    and an ``int``: how many minimal explanations).
    """

    name: str | None
    kind: Literal["status", "best", "cost", "core", "minimal"]
    op: str | None
    value: str | Fraction | int | None
    sets: tuple[tuple[FAtom, ...], ...]
    pos: Pos
    name_pos: Pos = (0, 0)
    value_pos: Pos = (0, 0)


@dataclass(frozen=True)
class KenLoad:
    path: str
    pos: Pos


@dataclass(frozen=True)
class FolBlock:
    """``fol { premise …  claim … }``: first-order text for ``cda prove``, kept verbatim."""

    text: str  # the whole block, from "fol" to the closing brace
    pos: Pos


Statement = (
    FolBlock | DomainDecl | PredDecl | EventDecl | MetricDecl | Fact | Observe | Hard | Soft | GoalBest | GoalMinimal
    | GoalClaim | KenLoad | Expect
)


@dataclass
class ProblemAST:
    """A parsed problem: statements in source order, and the text they came from."""

    statements: list[Statement] = field(default_factory=list)
    source: str = ""
    filename: str | None = None
