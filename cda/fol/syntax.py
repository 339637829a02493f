"""First-order syntax: the tree a parsed formula becomes, checked problems, and printing.

Every other FOL module works on these types: :mod:`cda.fol.parse` builds them from text,
:mod:`cda.fol.check` checks a problem, :mod:`cda.fol.fragments` classifies it,
:mod:`cda.fol.structures` computes truth in a finite world, :mod:`cda.fol.to_ir` grounds it to the
IR, :mod:`cda.fol.to_z3` compiles it to z3, and :mod:`cda.fol.prove` decides claims.

Semantics: classical first-order logic over a non-empty domain. Without a declared domain,
constants need not denote distinct elements (unless the unique-names reading is asked for).
With ``domain a, b, c`` the domain is exactly those elements, pairwise distinct, and every
constant must be one of them.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Literal

__all__ = [
    "Pos", "Term", "Atom", "Eq", "Not", "And", "Or", "Implies", "Iff", "Xor", "Quant", "BoolConst", "Formula",
    "Statement", "Signature", "FOLProblem", "subformulas", "free_names", "is_variable_shaped", "format_formula",
]

Pos = tuple[int, int]


# ---- syntax tree ----------------------------------------------------------------------------
@dataclass(frozen=True)
class Term:
    """A constant, a variable, or a function application ``f(t1, …)`` (``args`` non-empty)."""

    name: str
    args: tuple[Term, ...]
    pos: Pos


@dataclass(frozen=True)
class Atom:
    """``P(t1, …, tn)``; a 0-ary predicate (a proposition) has no arguments."""

    pred: str
    args: tuple[Term, ...]
    pos: Pos


@dataclass(frozen=True)
class Eq:
    lhs: Term
    rhs: Term
    pos: Pos


@dataclass(frozen=True)
class Not:
    arg: Formula
    pos: Pos


@dataclass(frozen=True)
class And:
    args: tuple[Formula, ...]
    pos: Pos


@dataclass(frozen=True)
class Or:
    args: tuple[Formula, ...]
    pos: Pos


@dataclass(frozen=True)
class Implies:
    lhs: Formula
    rhs: Formula
    pos: Pos


@dataclass(frozen=True)
class Iff:
    lhs: Formula
    rhs: Formula
    pos: Pos


@dataclass(frozen=True)
class Xor:
    """Exclusive or of two formulas (``A ⊕ B ⊕ C`` is ``(A ⊕ B) ⊕ C``)."""

    lhs: Formula
    rhs: Formula
    pos: Pos


@dataclass(frozen=True)
class Quant:
    """One quantified variable; ``∀x ∀y φ`` and ``∀x, y φ`` both nest two of these."""

    kind: Literal["forall", "exists"]
    var: str
    body: Formula
    pos: Pos
    var_pos: Pos


@dataclass(frozen=True)
class BoolConst:
    value: bool
    pos: Pos


Formula = Atom | Eq | Not | And | Or | Implies | Iff | Xor | Quant | BoolConst

_VAR_SHAPE = re.compile(r"^[u-z][0-9]?['’]*$")


def is_variable_shaped(name: str) -> bool:
    """Names that read as variables (``x``, ``y``, ``z1``, ``x'``): when such a name is not
    bound by a quantifier it is reported as a free variable, not taken for a constant.

    >>> [is_variable_shaped(n) for n in ("x", "y2", "y1984", "mary", "a")]
    [True, True, False, False, False]
    """
    return bool(_VAR_SHAPE.match(name))


# ---- problems ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class Statement:
    """A named premise or claim, with the text as written and where it came from."""

    kind: Literal["premise", "claim"]
    name: str
    formula: Formula
    text: str
    line: int
    source_line: str
    filename: str | None


@dataclass
class Signature:
    """Predicates and functions with their arities, in order of first use (constants: arity 0)."""

    predicates: dict[str, int] = field(default_factory=dict)
    functions: dict[str, int] = field(default_factory=dict)

    @property
    def constants(self) -> list[str]:
        return [f for f, n in self.functions.items() if n == 0]

    @property
    def function_symbols(self) -> list[str]:
        return [f for f, n in self.functions.items() if n > 0]


@dataclass
class FOLProblem:
    """Premises and claims, checked together; ``domain`` is a declared finite domain or None."""

    premises: list[Statement]
    claims: list[Statement]
    domain: tuple[str, ...] | None = None
    signature: Signature = field(default_factory=Signature)
    filename: str | None = None
    #: the unique-names reading: distinct constants denote distinct objects (an axiom of the
    #: reading, not a premise). Without equality in the problem it cannot change an answer.
    unique_names: bool = False

    @property
    def has_equality(self) -> bool:
        return any(isinstance(n, Eq) for st in self.premises + self.claims for n in subformulas(st.formula))


def subformulas(f: Formula) -> Iterator[Formula]:
    """Every subformula of ``f``, ``f`` included (terms are not formulas)."""
    stack: list[Formula] = [f]
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, Not):
            stack.append(node.arg)
        elif isinstance(node, And | Or):
            stack.extend(node.args)
        elif isinstance(node, Implies | Iff | Xor):
            stack.extend((node.lhs, node.rhs))
        elif isinstance(node, Quant):
            stack.append(node.body)


def free_names(f: Formula, bound: frozenset[str] = frozenset()) -> set[str]:
    """Names occurring free in ``f`` (constants and free variables alike)."""
    out: set[str] = set()

    def term(t: Term, b: frozenset[str]) -> None:
        if t.args or t.name not in b:
            out.add(t.name)
        for a in t.args:
            term(a, b)

    def walk(g: Formula, b: frozenset[str]) -> None:
        if isinstance(g, Atom):
            for t in g.args:
                term(t, b)
        elif isinstance(g, Eq):
            term(g.lhs, b)
            term(g.rhs, b)
        elif isinstance(g, Not):
            walk(g.arg, b)
        elif isinstance(g, And | Or):
            for a in g.args:
                walk(a, b)
        elif isinstance(g, Implies | Iff | Xor):
            walk(g.lhs, b)
            walk(g.rhs, b)
        elif isinstance(g, Quant):
            walk(g.body, b | {g.var})

    walk(f, bound)
    return out


# ---- printing -------------------------------------------------------------------------------
def _fmt_term(t: Term) -> str:
    return f"{t.name}({', '.join(_fmt_term(a) for a in t.args)})" if t.args else t.name


_PREC = {"iff": 1, "implies": 2, "xor": 3, "or": 4, "and": 5}


def format_formula(f: Formula, outer: int = 0) -> str:
    """Print a formula in the Unicode notation, with the parentheses its precedence needs.

    >>> from cda.fol.parse import parse_formula
    >>> format_formula(parse_formula("forall x y (P(x) & ~Q(y) -> R(x, y) ^ S)"))
    '∀x ∀y (P(x) ∧ ¬Q(y) → R(x, y) ⊕ S)'
    """

    def wrap(text: str, prec: int) -> str:
        return f"({text})" if prec < outer or (outer and prec == 0) else text

    if isinstance(f, Atom):
        return f"{f.pred}({', '.join(_fmt_term(a) for a in f.args)})" if f.args else f.pred
    if isinstance(f, Eq):
        return f"{_fmt_term(f.lhs)} = {_fmt_term(f.rhs)}"
    if isinstance(f, BoolConst):
        return "⊤" if f.value else "⊥"
    if isinstance(f, Not):
        if isinstance(f.arg, Eq):
            return f"{_fmt_term(f.arg.lhs)} ≠ {_fmt_term(f.arg.rhs)}"
        return "¬" + format_formula(f.arg, 6)
    if isinstance(f, And | Or):
        op, prec = (" ∧ ", 5) if isinstance(f, And) else (" ∨ ", 4)
        return wrap(op.join(format_formula(a, prec + 1) for a in f.args), prec)
    if isinstance(f, Implies):
        return wrap(f"{format_formula(f.lhs, 3)} → {format_formula(f.rhs, 2)}", 2)
    if isinstance(f, Xor):
        return wrap(f"{format_formula(f.lhs, 3)} ⊕ {format_formula(f.rhs, 4)}", 3)
    if isinstance(f, Iff):
        return wrap(f"{format_formula(f.lhs, 1)} ↔ {format_formula(f.rhs, 2)}", 1)
    sym = "∀" if f.kind == "forall" else "∃"
    body = f.body
    head = f"{sym}{f.var}"
    while isinstance(body, Quant):
        head += f" {'∀' if body.kind == 'forall' else '∃'}{body.var}"
        body = body.body
    inner = format_formula(body, 0)
    if not isinstance(body, Atom | BoolConst | Not | Eq):
        inner = f"({inner})"
    return wrap(f"{head} {inner}", 0)
