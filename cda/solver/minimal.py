"""``goal minimal_explanations``: subset-minimal sets of abducibles, observations added as needed.

The search is counterexample-guided over observation groups (:mod:`cda.solver.observations`).
The backend holds the base and the *active* groups only, starting with one. Each subset-minimal
set it streams is a *candidate*; an oracle checks the candidate against every group:

* consistent with all of them: *confirmed*; it stays minimal whatever groups are added later
  (a proper subset consistent with all groups would be consistent with the active ones, and
  the candidate is minimal there), so it is blocked (its supersets excluded) and kept;
* refuted by an inactive group: that group is built, encoded and switched on, and the
  enumeration restarts, keeping the solver's learnt state and the blocks of the confirmed sets.

Exactness. Let A be the active groups when an enumeration runs to its end with no candidate
refuted. Every minimal explanation M under all groups is consistent with A, so it contains a
set m minimal under A. Either m is a superset of a confirmed set c (then M ⊇ c; c is an
explanation and M minimal, so M = c) or m was streamed in that last run and confirmed (then
m is an explanation under all groups and m ⊆ M, so m = M). Hence the confirmed sets are all
the minimal explanations. A set minimal in the blocked program is minimal in the unblocked
one (a smaller model would be blocked only by being a superset of a confirmed set, and so
would the set itself), so blocking loses nothing. With a size bound (``top k``,
``min_cardinality``) the same argument holds level by level.

Re-checking. The oracle is independent of the backends: the circuit importers give a
bit-parallel simulator; otherwise each group is asked of the backend in turn, with every
model it returns evaluated against that group by the independent evaluator. A candidate the
backend produced under the active groups that the oracle finds inconsistent with one of
them is a disagreement, never output. With ``check_minimality`` each explanation is also
proved minimal by the oracle (each atom removed in turn must be refuted).
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from dataclasses import dataclass, field

from cda.contracts.deadline import NO_DEADLINE
from cda.encodings.evaluate import evaluate_many
from cda.encodings.ir import Clause
from cda.errors import EvaluatorDisagreement
from cda.solver.backend import Backend, Deadline, Lit, _OutOfTime, all_clauses_on, selector
from cda.solver.observations import GroupedProblem, OracleUndecided

__all__ = ["MinimalSearch", "MinimalOutcome"]

#: what :meth:`MinimalSearch._enumerate` returns besides a refuting group's index (0 or more)
_CAPPED = -1  # more explanations than the cap
_UNDECIDED = -2  # stopped early for a candidate the oracle could not decide (the solver did)


@dataclass
class MinimalOutcome:
    """What the search found: explanations in canonical order (size, then names)."""

    explanations: list[list[str]] = field(default_factory=list)
    complete: bool = False
    timed_out: bool = False
    notes: list[str] = field(default_factory=list)


class _BackendOracle:
    """Asks the search's backend about one group at a time (encoding it on first use)."""

    name = "the solver, one observation group at a time (models re-checked by the evaluator)"
    monotone = False

    def __init__(self, search: MinimalSearch) -> None:
        # the search owns this oracle; a strong reference back would be a cycle keeping the search's
        # backend (a solver) alive until the cyclic collector runs (docs/architecture.md, "Freeing
        # solvers")
        self._search = weakref.ref(search)

    def refuting(self, assumed: frozenset[str], groups: Sequence[int], deadline: Deadline = NO_DEADLINE) -> int | None:
        s = self._search()
        assert s is not None, "asked after its search was let go"
        for index in groups:
            s.encode(index)
            group = s.grouped.group(index)
            on = set(s.encoded_names(index))
            lits = s.base_lits() + [(selector(name), name in on) for name in s.encoded_clause_names()]
            lits += [(a, a in assumed) for a in s.hyps]
            out = s.backend.check(lits)
            if out.status == "unknown":
                raise _OutOfTime()
            if out.status == "unsat":
                return index
            if out.model is None:
                raise EvaluatorDisagreement(f"{s.backend.name} said sat but returned no model (observation group)")
            nodes = [c.node for c in group.clauses] + [c.node for c in s.grouped.base.clauses]
            if not all(evaluate_many(nodes, out.model)) or any(bool(out.model[a]) != (a in assumed) for a in s.hyps):
                raise EvaluatorDisagreement(
                    f"{s.backend.name} returned a model violating observation group {group.name}"
                )
        return None


class MinimalSearch:
    """One run of ``goal minimal_explanations`` over a grouped problem on one backend.

    ``backend`` must have been built from ``grouped.base``; groups are added to it as needed.
    """

    def __init__(
        self,
        grouped: GroupedProblem,
        backend: Backend,
        deadline: Deadline,
        *,
        lazy: bool = True,
        cap: int = 10_000,
        check_minimality: bool = False,
    ) -> None:
        self.grouped = grouped
        self.backend = backend
        self.deadline = deadline
        self.lazy = lazy
        self.cap = cap
        self.check_minimality = check_minimality
        self.hyps = grouped.base.hyp_atoms
        self.active: list[int] = []
        self._encoded: dict[int, list[str]] = {}  # group index -> its clauses' names, in encoding order
        self._blocks: list[Clause] = []
        self.confirmed: list[frozenset[str]] = []
        self._confirmed_set: set[frozenset[str]] = set()
        self.max_size: int | None = None
        self._fallback = _BackendOracle(self)
        self.oracle = grouped.oracle or self._fallback

    # ---- what the backend holds
    def _in_time(self) -> None:
        if self.deadline.remaining() == 0:
            raise _OutOfTime()

    def encode(self, index: int) -> None:
        """Build group ``index`` and add it to the backend, switched off (idempotent): as a copy
        of the groups' template when the backend can copy one, else built and encoded."""
        if index in self._encoded:
            return
        self._in_time()
        template = self.grouped.template
        copy = getattr(self.backend, "add_copy", None)
        if template is not None and copy is not None:
            copy(template, index)
            self._encoded[index] = [template.clause_name(index)]
            return
        group = self.grouped.group(index)  # building the nodes is part of encoding: timed too
        self._in_time()
        self.backend.add_clauses(group.clauses, list(group.atoms))
        self._encoded[index] = [c.name for c in group.clauses]

    def activate(self, index: int) -> None:
        self.encode(index)
        if index not in self.active:
            self.active.append(index)

    def encoded_names(self, index: int) -> list[str]:
        return self._encoded[index]

    def encoded_clause_names(self) -> list[str]:
        """The names of every encoded group's clauses (each behind its selector)."""
        return [name for names in self._encoded.values() for name in names]

    def base_lits(self) -> list[Lit]:
        return all_clauses_on(self.grouped.base.clauses)

    def search_lits(self) -> list[Lit]:
        on = set(self.active)
        lits = self.base_lits()
        for index, names in self._encoded.items():
            lits += [(selector(name), index in on) for name in names]
        lits += [(selector(b.name), True) for b in self._blocks]
        return lits

    def _block_confirmed(self) -> None:
        """Exclude the supersets of every confirmed set not yet blocked (one clause each)."""
        f = self.grouped.base.factory
        new: list[Clause] = []
        for chosen in self.confirmed[len(self._blocks) :]:
            node = f.or_([f.not_(f.atom(a)) for a in sorted(chosen)])
            new.append(Clause(f"block!{len(self._blocks) + len(new)}", "hard", node, 0))
        if new:
            self.backend.add_clauses(new, [])
            self._blocks.extend(new)

    # ---- the oracle, with the solver as fallback
    def refuting(self, assumed: frozenset[str], groups: Sequence[int]) -> int | None:
        try:
            return self.oracle.refuting(assumed, groups, self.deadline)
        except OracleUndecided:
            return self._fallback.refuting(assumed, groups, self.deadline)

    def base_consistent(self, assumed: frozenset[str]) -> bool:
        """The base clauses (and background structure) hold with exactly ``assumed`` true: a model
        from the backend, re-checked by the evaluator. Trivially true for a base with no clauses."""
        base = self.grouped.base
        if not base.clauses and not base.background:
            return True
        lits = self.base_lits() + [(selector(name), False) for name in self.encoded_clause_names()]
        out = self.backend.check(lits + [(a, a in assumed) for a in self.hyps])
        if out.status == "unknown":
            raise _OutOfTime()
        if out.status == "unsat":
            return False
        nodes = [c.node for c in base.clauses] + list(base.background)
        if out.model is None or not all(evaluate_many(nodes, out.model)):
            raise EvaluatorDisagreement(f"{self.backend.name} returned a model violating the base clauses")
        return True

    def consistent(self, assumed: frozenset[str]) -> bool:
        """Consistent with the base and with every observation group."""
        return self.base_consistent(assumed) and self.refuting(assumed, range(len(self.grouped))) is None

    def prove_minimal(self, chosen: frozenset[str]) -> None:
        """No proper subset of ``chosen`` is consistent with the base and every group, or
        ``EvaluatorDisagreement``. With a monotone oracle, removing each atom in turn must give an
        inconsistent set; otherwise, for each atom, the solver (every group encoded and on) must
        find no model whose true abducibles lie inside ``chosen`` minus that atom."""
        if self.oracle.monotone:
            for atom in sorted(chosen):
                self._in_time()  # a simulation per atom: 300 explanations of c7552 took 3.1 s, so 10,000 ran far past the budget
                if self.consistent(chosen - {atom}):
                    raise EvaluatorDisagreement(
                        f"{self.backend.name}: explanation {sorted(chosen)} is not subset-minimal "
                        f"(without {atom} it is still consistent, according to {self.oracle.name})"
                    )
            return
        for index in range(len(self.grouped)):
            self.encode(index)
        everything = self.base_lits() + [(selector(name), True) for name in self.encoded_clause_names()]
        for atom in sorted(chosen):
            out = self.backend.check(everything + [(a, False) for a in self.hyps if a not in chosen or a == atom])
            if out.status == "unknown":
                raise _OutOfTime()
            if out.status == "sat":
                raise EvaluatorDisagreement(
                    f"{self.backend.name}: explanation {sorted(chosen)} is not subset-minimal (a model without {atom})"
                )

    def seed(self, known: Sequence[Sequence[str]]) -> None:
        """Start from explanations known to be minimal (e.g. under fewer observations): each one
        consistent with every group and proved minimal here is confirmed and blocked at once;
        the others are ignored. Exact either way: the search only skips what it would find."""
        for names in known:
            chosen = frozenset(names)
            if chosen in self._confirmed_set or not self.consistent(chosen):
                continue
            try:
                self.prove_minimal(chosen)
            except EvaluatorDisagreement:
                continue  # not minimal after all: the search finds what lies below it
            self.confirmed.append(chosen)
            self._confirmed_set.add(chosen)

    def _check_order(self) -> list[int]:
        """Inactive groups first (a refuter among them is the counterexample), then the active ones."""
        on = set(self.active)
        return [i for i in range(len(self.grouped)) if i not in on] + list(self.active)

    # ---- the search
    def run(self, mode: str = "all", k: int | None = None, max_size: int | None = None) -> MinimalOutcome:
        """All minimal explanations (``all``), the least-size ones, or the first ``k`` by size then names;
        with ``max_size``, only those of at most that many abducibles.

        Raises ``_OutOfTime`` when the deadline passes; :attr:`confirmed` then holds what was found.
        """
        self.max_size = max_size
        total = len(self.grouped)
        if total:
            for index in range(total) if not self.lazy else [0]:
                self.activate(index)
        out = MinimalOutcome()
        top = len(self.hyps) if max_size is None else min(max_size, len(self.hyps))
        levels: list[int | None] = [max_size] if mode == "all" else list(range(top + 1))
        for level in levels:
            while True:
                refuter = self._enumerate(level)
                if refuter is None:
                    break
                if refuter == _UNDECIDED:  # the solver decided a candidate: go on from there
                    continue
                if refuter == _CAPPED:
                    out.notes.append(f"minimal explanations capped at {self.cap}; the list is partial")
                    return self._finish(out, complete=False, mode=mode, k=k, max_size=max_size)
                self.activate(refuter)
            if level is not None:
                within = sum(1 for c in self.confirmed if len(c) <= level)  # seeds may be larger
                if mode == "min_cardinality" and within:
                    break
                if mode == "top" and k is not None and within >= k:
                    break
        return self._finish(out, complete=True, mode=mode, k=k, max_size=max_size)

    def _enumerate(self, level: int | None) -> int | None:
        """One enumeration: ``None`` when it ran to its end with every candidate confirmed, a group
        index when a candidate was refuted by that (inactive) group, ``_CAPPED``, or ``_UNDECIDED``
        when it stopped early for a candidate the oracle could not decide (and the solver confirmed).

        A backend cannot be asked anything while it streams, so candidates are checked as they
        come (stopping at the first refuted one) only when the oracle needs no backend and the
        base holds no clause; otherwise they are collected and checked after the call.
        """
        self._block_confirmed()
        order = self._check_order()
        base = self.grouped.base
        streaming = self.grouped.oracle is not None and not base.clauses and not base.background
        pending: list[frozenset[str]] = []
        verdict: list[int] = []

        def on_set(chosen: frozenset[str]) -> bool:
            if chosen in self._confirmed_set or chosen in pending:
                raise EvaluatorDisagreement(f"{self.backend.name} streamed minimal explanation {sorted(chosen)} twice")
            if not streaming or verdict:
                pending.append(chosen)
                return True
            assert self.grouped.oracle is not None
            try:
                r = self.grouped.oracle.refuting(chosen, order, self.deadline)
            except OracleUndecided:
                pending.append(chosen)  # the solver decides it, after this call
                return False
            return self._judge(chosen, r, verdict)

        stream = self.backend.minimal_sets(self.hyps, self.search_lits(), on_set, max_size=level)
        if stream.timed_out:
            raise _OutOfTime()
        for chosen in pending:
            r = self.refuting(chosen, order)
            if r is None and not self.base_consistent(chosen):
                raise EvaluatorDisagreement(
                    f"{self.backend.name} returned {sorted(chosen)}, which violates the clauses that always hold"
                )
            self._judge(chosen, r, verdict)
        if verdict:
            return verdict[0]
        return _UNDECIDED if stream.stopped else None

    def _judge(self, chosen: frozenset[str], refuter: int | None, verdict: list[int]) -> bool:
        """Record a checked candidate; ``False`` when the enumeration should stop."""
        if refuter is not None:
            if refuter in self.active:
                raise EvaluatorDisagreement(
                    f"{self.backend.name} returned {sorted(chosen)}, which observation group "
                    f"{self.grouped.group(refuter).name} (in use) refutes according to {self.oracle.name}"
                )
            if not verdict:
                verdict.append(refuter)
            return False
        self.confirmed.append(chosen)
        self._confirmed_set.add(chosen)
        if len(self.confirmed) > self.cap and not verdict:
            verdict.append(_CAPPED)
        return not verdict

    def _finish(
        self, out: MinimalOutcome, *, complete: bool, mode: str, k: int | None, max_size: int | None
    ) -> MinimalOutcome:
        found = sorted(self.confirmed, key=lambda s: (len(s), sorted(s)))
        if max_size is not None:
            found = [s for s in found if len(s) <= max_size]  # a seed may lie above the bound
        if len(found) > self.cap:
            found = found[: self.cap]
        if mode == "min_cardinality" and found:
            found = [s for s in found if len(s) == len(found[0])]
        if mode == "top" and k is not None:
            found = found[:k]
        if self.check_minimality:
            for chosen in found:
                self.prove_minimal(chosen)
        out.explanations = [sorted(s) for s in found]
        out.complete = complete
        total = len(self.grouped)
        if total > 1:
            out.notes.append(
                f"minimal explanations: {len(self.active)} of {total} observation groups were needed in the search; "
                f"every explanation was checked against all {total} by {self.oracle.name}"
            )
        return out

    def partial(self) -> list[list[str]]:
        """The confirmed explanations so far, canonical (each checked against every group)."""
        kept = [s for s in self.confirmed if self.max_size is None or len(s) <= self.max_size]
        return [sorted(s) for s in sorted(kept, key=lambda s: (len(s), sorted(s)))]
