"""The one protocol every solver backend implements, and the registry that finds them.

A backend is built once per problem (everything encoded up front, each clause behind a
selector literal) and then asked many small questions under assumptions: is it satisfiable,
enumerate the distinct projections onto some atoms, what is the cheapest model. More clauses
can be added later (:meth:`Backend.add_clauses`, e.g. an observation group a search turned out
to need) without losing what the solver learnt. Literals are
``(key, value)`` pairs whose key is an atom name, a clause selector (:func:`selector`), the
atom that switches every clause on (:data:`ALL_CLAUSES`) or a claim (:func:`claim_key`): the
scheme every backend builds, written once in :mod:`cda.encodings.scheme`. Backends are
registered by name (:data:`REGISTRY`) and imported lazily, so a missing library only removes
that backend. A backend of another kind, one that takes a question other than a
:class:`GroundProblem` (first-order claims: ``fol-z3``, ``fol-finite``), registers the same way
and answers the same literals; what it answers is in its :class:`BackendSpec`, and it refuses the
rest by name. ``cda/solver/TEMPLATE.py`` is where a new backend starts;
``tests/test_backend_conformance.py`` runs on every registered one.
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol

from cda.contracts.deadline import Deadline, OutOfTime
from cda.encodings.keys import ALL_CLAUSES, claim_key, selector, soft_key
from cda.errors import BackendUnavailable, BackendUnsupported
from cda.gcpause import gc_paused

if TYPE_CHECKING:  # the IR is the ground backends' input, imported by them: `cda prove` needs none
    from cda.encodings.ir import Clause, GroundProblem

__all__ = [
    "Backend",
    "Deadline",
    "Lit",
    "Model",
    "Outcome",
    "Enumeration",
    "SetStream",
    "selector",
    "ALL_CLAUSES",
    "all_clauses_on",
    "claim_key",
    "soft_key",
    "integer_weights",
    "CLINGO_MAX_WEIGHT",
    "make_backend",
    "available_backends",
    "BACKENDS",
    "REGISTRY",
    "BackendSpec",
    "EVERY_METHOD",
]

Lit = tuple[str, bool]
#: a full assignment: every atom → bool, every numeric variable → int, every term variable → str
Model = dict[str, "bool | int | str"]


def integer_weights(problem: GroundProblem) -> dict[str, int]:
    """Soft weights scaled by one common factor to integers (solvers need them).

    >>> from fractions import Fraction
    >>> from cda.encodings.ir import GroundProblem, NodeFactory, SoftClause
    >>> f = NodeFactory()
    >>> soft = [SoftClause(n, f.atom(n), Fraction(w), 0) for n, w in (("a", "0.5"), ("b", "2"))]
    >>> integer_weights(GroundProblem(f, soft=soft))
    {'a': 1, 'b': 4}
    """
    scale = math.lcm(*(s.weight.denominator for s in problem.soft)) if problem.soft else 1
    return {s.name: int(s.weight * scale) for s in problem.soft}


#: clingo's weights are signed 32-bit integers; z3's are unbounded
CLINGO_MAX_WEIGHT = 2**31 - 1


def all_clauses_on(clauses: Sequence[Clause]) -> list[Lit]:
    """The assumptions that switch on every clause a backend was built with (none when there is
    no clause, and then no :data:`ALL_CLAUSES` atom either)."""
    return [(ALL_CLAUSES, True)] if clauses else []


#: the one deadline type (in :mod:`cda.contracts.deadline`, so the grounder and the encoders,
#: below the solver, check the same clock); raised as ``_OutOfTime`` when it passes, which the
#: engine turns into a partial result
_OutOfTime = OutOfTime


@dataclass
class Outcome:
    """One answer: ``status`` ``sat``, ``unsat`` or ``unknown``; the ``model`` when sat (a ground
    backend's atoms and integers); ``reason``: why unknown, when the backend can say; ``witness``:
    what a backend of another kind found (a first-order backend's world, read back through it)."""

    status: str  # "sat" | "unsat" | "unknown"
    model: Model | None = None
    reason: str = ""
    witness: Any = None


@dataclass
class Enumeration:
    models: list[Model] = field(default_factory=list)
    complete: bool = True  # False when capped by the limit or stopped by the deadline
    timed_out: bool = False


@dataclass
class SetStream:
    """How a :meth:`Backend.minimal_sets` call ended: ``complete`` when every set was delivered."""

    complete: bool = True
    timed_out: bool = False
    stopped: bool = False  # the consumer asked to stop
    delivered: int = 0


class Backend(Protocol):
    """What the engine may ask of a solver."""

    name: str

    def check(self, assumptions: Sequence[Lit]) -> Outcome:
        """Satisfiability under ``assumptions``; a model when sat."""
        ...

    def enumerate(self, project: Sequence[str], assumptions: Sequence[Lit], limit: int) -> Enumeration:
        """Up to ``limit`` models with pairwise distinct projections onto the atoms ``project``."""
        ...

    def enumerate_ranked(self, project: Sequence[str], assumptions: Sequence[Lit], limit: int) -> Enumeration:
        """The first ``limit`` models with distinct projections onto ``project`` in the canonical
        order of hypotheses (:func:`cda.encodings.scheme.rank_order`: cost, then fewer true
        atoms, then names), each of least cost for its projection: the same list on every backend."""
        ...

    def minimize(self, assumptions: Sequence[Lit]) -> Outcome:
        """A model of least soft cost under ``assumptions``; the engine prices it with the evaluator."""
        ...

    def enumerate_minimal(
        self, project: Sequence[str], assumptions: Sequence[Lit], limit: int, max_size: int | None = None
    ) -> Enumeration:
        """Up to ``limit`` models whose sets of true ``project`` atoms are subset-minimal.

        Subset-minimal among all models under ``assumptions``: no model makes a proper subset
        of those atoms true. Each set appears once. With ``max_size``, only sets of at most that
        many atoms (all the minimal ones of that size or less).
        """
        ...

    def minimal_sets(
        self,
        project: Sequence[str],
        assumptions: Sequence[Lit],
        on_set: Callable[[frozenset[str]], bool],
        max_size: int | None = None,
    ) -> SetStream:
        """Stream the subset-minimal sets of true ``project`` atoms (as :meth:`enumerate_minimal`,
        without decoding whole models) to ``on_set``, stopping as soon as it returns ``False``."""
        ...

    def add_clauses(self, clauses: Sequence[Clause], atoms: Sequence[str]) -> None:
        """Encode more clauses, each behind its selector, over the problem's atoms and the new
        ``atoms`` (free Booleans); what the solver learnt so far is kept."""
        ...


#: every question of the protocol, by method name
EVERY_METHOD = frozenset(
    {"check", "enumerate", "enumerate_ranked", "minimize", "enumerate_minimal", "minimal_sets", "add_clauses"}
)


@dataclass(frozen=True)
class BackendSpec:
    """A registered backend. ``target``: ``module:Class``, imported on first use. ``accepts``:
    what its constructor takes, a :class:`GroundProblem` (``ground``) or a first-order question
    (``fol``: :class:`cda.fol.backends.FolQuestion`). ``answers``: the protocol's methods it
    implements (the others raise ``BackendUnsupported`` naming the method and the backend).
    ``complete``: whether its ``unsat`` is a proof and it answers every question within its
    budget (a finite-model search finds models and never proves their absence)."""

    name: str
    target: str
    accepts: Literal["ground", "fol"] = "ground"
    answers: frozenset[str] = EVERY_METHOD
    complete: bool = True
    summary: str = ""


#: every backend CDA knows, by name; the engine's ``auto`` chooses among the ``ground`` ones
REGISTRY: dict[str, BackendSpec] = {spec.name: spec for spec in (
    BackendSpec("z3", "cda.solver.z3_backend:Z3Backend",
                summary="SMT: Booleans and linear integer arithmetic, optimisation"),
    BackendSpec("clingo", "cda.solver.clingo_backend:ClingoBackend",
                summary="ASP: projective enumeration; difference constraints through clingo-dl"),
    BackendSpec("fol-z3", "cda.fol.backends:FolZ3Backend", accepts="fol", answers=frozenset({"check"}),
                summary="first-order claims straight to z3: quantifiers over an uninterpreted sort, or a declared domain"),
    BackendSpec("fol-finite", "cda.fol.backends:FiniteModelBackend", accepts="fol", answers=frozenset({"check"}),
                complete=False, summary="first-order claims: a world of 1 to 6 elements, or none found"),
)}

#: the backends that take a ground problem, by name (what ``backend=`` of ``cda.solve`` accepts)
BACKENDS: dict[str, str] = {name: spec.target for name, spec in REGISTRY.items() if spec.accepts == "ground"}


def _load(name: str) -> type:
    module, _, cls = REGISTRY[name].target.partition(":")
    try:
        return getattr(importlib.import_module(module), cls)  # type: ignore[no-any-return]
    except ImportError as exc:  # the library behind this backend is missing
        raise BackendUnavailable(f"backend '{name}' is not available: {exc}") from exc


def available_backends(accepts: str = "ground") -> list[str]:
    """The registered backends of kind ``accepts`` whose library is installed."""
    out = []
    for name in (n for n, spec in REGISTRY.items() if spec.accepts == accepts):
        try:
            _load(name)
        except BackendUnavailable:
            continue
        out.append(name)
    return out


def make_backend(name: str, problem: GroundProblem | Any, *, seed: int, deadline: Deadline,
                 weights: dict[str, int]) -> Backend:
    """Build backend ``name`` for ``problem`` (a :class:`GroundProblem`, or the question a backend
    of another kind takes: :attr:`BackendSpec.accepts`); ``weights`` maps soft clause names to
    integer weights."""
    if name not in REGISTRY:
        raise BackendUnsupported(f"unknown backend '{name}' (registered: {', '.join(REGISTRY)})")
    backend_class = _load(name)
    if REGISTRY[name].accepts != "ground":  # z3's Python objects for quantifiers are cyclic garbage: let the GC run
        return backend_class(problem, seed=seed, deadline=deadline, weights=weights)  # type: ignore[no-any-return]
    with gc_paused():  # encoding builds many small objects and frees none
        return backend_class(problem, seed=seed, deadline=deadline, weights=weights)  # type: ignore[no-any-return]
