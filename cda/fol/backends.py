"""First-order claims decided by backends behind the engine's protocol: ``fol-z3`` and ``fol-finite``.

A first-order question is a problem and one of its claims (:class:`FolQuestion`). Both backends
answer :meth:`~cda.engine.Backend.check` with the literals every backend reads
(docs/architecture.md): ``selector(p)`` switches premise ``p`` on, ``claim_key("claim")``
asserts the claim and ``claim_key("negated")`` its negation, and over a declared domain the name
of a ground atom (``Owns(tom, rex)``) fixes that atom. The other questions of the protocol
(enumeration, optimisation) have no first-order meaning here and are refused by name.

* ``fol-z3`` (:class:`FolZ3Backend`): the problem compiled straight to z3
  (:mod:`cda.fol.to_z3`): an uninterpreted sort with z3's quantifiers over an open domain, an
  enumeration over a declared one. Complete on the decidable fragments; elsewhere it may answer
  ``unknown``, with the reason.
* ``fol-finite`` (:class:`FiniteModelBackend`): a search for a world of 1 to 6 elements
  (quantifiers expanded). It finds models; it never proves there is none (a larger world may
  exist), so it answers ``sat`` or ``unknown``, never ``unsat``.

What either finds is a world, read back with :meth:`structure` and re-checked by the independent
evaluator (:func:`cda.fol.structures.evaluate`) before the prover shows it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from cda.contracts.deadline import Deadline, OutOfTime
from cda.engine import ALL_CLAUSES, Enumeration, Lit, Outcome, SetStream, claim_key, selector
from cda.errors import BackendUnsupported
from cda.fol.budget import spend
from cda.fol.structures import Structure
from cda.fol.syntax import FOLProblem, Statement
from cda.fol.to_z3 import AtomValue, Z3Oracle

__all__ = [
    "FolQuestion", "FolZ3Backend", "FiniteModelBackend", "FINITE_SEARCH_SIZES", "search_sizes", "read_literals",
    "premise_selectors",
]

#: domain sizes tried, in order, by the finite-model search
FINITE_SEARCH_SIZES = range(1, 7)


@dataclass(frozen=True)
class FolQuestion:
    """A first-order problem and the claim asked about it; ``cap``: the most seconds one call may
    take (the prover leaves the rest of its budget to the finite-model search)."""

    problem: FOLProblem
    claim: Statement
    cap: float | None = None


def search_sizes(problem: FOLProblem) -> range:
    """Domain sizes the finite-model search tries: 1…6, or from the number of constants on
    under the unique-names reading (a smaller domain cannot hold them apart)."""
    first = max(1, len(problem.signature.constants)) if problem.unique_names else 1
    return range(first, first + len(FINITE_SEARCH_SIZES))


def read_literals(problem: FOLProblem, assumptions: Sequence[Lit],
                  selectors: dict[str, str] | None = None) -> tuple[list[str], bool | None, list[AtomValue]]:
    """The premises switched on, the claim's value (None: absent) and the atoms fixed by
    ``assumptions``; a literal that is none of these is refused by name. ``selectors``: each
    premise's selector to its name, when the caller keeps it (a backend asked many questions)."""
    by_selector = selectors if selectors is not None else premise_selectors(problem)
    premises: list[str] = []
    claim: bool | None = None
    atoms: list[AtomValue] = []
    for key, value in assumptions:
        name = by_selector.get(key)
        if name is not None:
            if value and name not in premises:
                premises.append(name)
        elif key == _CLAIM or key == _NEGATED:
            if value:
                asserted = key == _CLAIM
                if claim is not None and claim != asserted:
                    raise BackendUnsupported("a first-order backend cannot assume the claim and its negation at once")
                claim = asserted
        elif key == ALL_CLAUSES:
            if value:
                premises.extend(n for n in by_selector.values() if n not in premises)
        else:
            atoms.append(_atom(problem, key, value))
    return premises, claim, atoms


def premise_selectors(problem: FOLProblem) -> dict[str, str]:
    """Each premise's selector literal to its name, in source order."""
    return {selector(st.name): st.name for st in problem.premises}


_CLAIM, _NEGATED = claim_key("claim"), claim_key("negated")


def _atom(problem: FOLProblem, name: str, value: bool) -> AtomValue:
    """``P(a, b)`` (as :func:`cda.fol.to_ir.atom_name` writes it) as ``(P, (a, b), value)``."""
    pred, _, rest = name.partition("(")
    args = tuple(a.strip() for a in rest.rstrip(")").split(",")) if rest else ()
    arity = problem.signature.predicates.get(pred)
    if arity is None or arity != len(args) or (args and problem.domain is None) \
            or any(a not in (problem.domain or ()) for a in args):
        raise BackendUnsupported(f"a first-order backend takes premise selectors, the claim's keys and, over a "
                                 f"declared domain, ground atoms; not the literal {name!r}")
    return pred, args, value


class _ChecksOnly:
    """The protocol's questions a first-order backend has no meaning for, refused by name."""

    name = "fol"

    def _refuse(self, what: str) -> BackendUnsupported:
        return BackendUnsupported(f"the {self.name} backend answers check only, not {what}: it decides first-order "
                                  "claims; enumeration and optimisation are for ground problems (z3, clingo)")

    def enumerate(self, project: Sequence[str], assumptions: Sequence[Lit], limit: int) -> Enumeration:
        raise self._refuse("enumerate")

    def enumerate_ranked(self, project: Sequence[str], assumptions: Sequence[Lit], limit: int) -> Enumeration:
        raise self._refuse("enumerate_ranked")

    def minimize(self, assumptions: Sequence[Lit]) -> Outcome:
        raise self._refuse("minimize")

    def enumerate_minimal(self, project: Sequence[str], assumptions: Sequence[Lit], limit: int,
                          max_size: int | None = None) -> Enumeration:
        raise self._refuse("enumerate_minimal")

    def minimal_sets(self, project: Sequence[str], assumptions: Sequence[Lit], on_set: Any,
                     max_size: int | None = None) -> SetStream:
        raise self._refuse("minimal_sets")

    def add_clauses(self, clauses: Sequence[Any], atoms: Sequence[str]) -> None:
        raise self._refuse("add_clauses")


class FolZ3Backend(_ChecksOnly):
    """``fol-z3``: the question compiled straight to z3 (see the module docstring)."""

    name = "fol-z3"

    def __init__(self, question: FolQuestion, *, seed: int, deadline: Deadline, weights: dict[str, int]) -> None:
        self.question = question
        self.oracle = Z3Oracle(question.problem, question.claim, deadline,
                               mode="closed" if question.problem.domain is not None else "open", cap=question.cap)
        self._selectors = premise_selectors(question.problem)
        self.oracle.solver.set("random_seed", seed)

    @property
    def open_domain(self) -> bool:
        return self.oracle.mode == "open"

    def check(self, assumptions: Sequence[Lit]) -> Outcome:
        premises, claim, atoms = read_literals(self.question.problem, assumptions, self._selectors)
        status, model, reason = self.oracle.check(premises, claim, atoms)
        return Outcome(status, None, reason, model)

    def structure(self, witness: Any) -> Structure:
        """The world a ``sat`` answer's witness describes."""
        return self.oracle.structure(witness)

    def core(self) -> tuple[list[str], bool | None] | None:
        """After an ``unsat`` answer, the premises (and the claim's value) it rests on
        (:meth:`~cda.fol.to_z3.Z3Oracle.core`)."""
        return self.oracle.core()

    def satisfied(self, witness: Any) -> tuple[list[str], bool | None]:
        """The premises a ``sat`` answer's witness makes true, and the claim's value there
        (:meth:`~cda.fol.to_z3.Z3Oracle.satisfied`)."""
        return self.oracle.satisfied(witness)


class FiniteModelBackend(_ChecksOnly):
    """``fol-finite``: a world of :func:`search_sizes` elements, smallest first; ``sat`` with the
    world, or ``unknown`` (none that small, or time ran out), never ``unsat``."""

    name = "fol-finite"

    def __init__(self, question: FolQuestion, *, seed: int, deadline: Deadline, weights: dict[str, int]) -> None:
        self.question = question
        self.deadline = deadline
        self.seed = seed
        self.sizes = search_sizes(question.problem)
        #: the searches that found a world, by size (to read it back); the others are let go at once:
        #: each holds its quantifiers expanded over its elements
        self._found: dict[int, Z3Oracle] = {}

    def check(self, assumptions: Sequence[Lit]) -> Outcome:
        premises, claim, atoms = read_literals(self.question.problem, assumptions)
        if atoms:
            raise BackendUnsupported("the fol-finite backend searches anonymous elements; it takes no ground atoms")
        for size in self.sizes:
            try:
                spend(self.deadline, f"searching for a world of {size} elements")
                q = self.question
                oracle = Z3Oracle(q.problem, q.claim, self.deadline, mode="finite", size=size)
                oracle.solver.set("random_seed", self.seed)
                status, model, _ = oracle.check(premises, claim)
                if status == "unknown" and self.deadline.remaining() == 0:
                    raise OutOfTime(f"time ran out while searching for a world of {size} elements")
            except OutOfTime as exc:
                return Outcome("unknown", reason=str(exc))
            if status == "sat":
                self._found[size] = oracle
                return Outcome("sat", None, "", (size, model))
        return Outcome("unknown", reason=f"no world of {self.sizes.start} to {self.sizes.stop - 1} elements")

    def structure(self, witness: Any) -> Structure:
        size, model = witness
        return self._found[size].structure(model)
