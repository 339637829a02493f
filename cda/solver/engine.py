"""The engine: from a ground problem to hypotheses, verdicts, next-best tests and conflicts.

Semantics (DESIGN.md, "Verdicts, confidence, next-best tests"), for hard clauses H,
observations O and a claim c:

* supported when H ∧ O ∧ ¬c is unsatisfiable, refuted when H ∧ O ∧ c is, inconclusive
  otherwise (with a witness hypothesis for each side);
* hypotheses are the distinct models projected on the abducibles, ranked by cost (sum of
  violated soft weights in their cheapest model), then fewer assumed atoms, then by name;
* when H ∧ O is unsatisfiable, minimal unsatisfiable subsets and minimal correction sets;
* ``goal minimal_explanations``: the subset-minimal sets of abducibles, found by
  :mod:`cda.solver.minimal` with observation groups added as counterexamples require.

Every answer is made canonical (sorted enumerations, cores found in source order), so both
backends give the same bytes; every model a backend returns is re-checked by the
independent evaluator first.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from itertools import compress
from typing import Literal

from cda.contracts import limits
from cda.contracts.result import Conflict, Hypothesis, NextTest, SolveResult, Verdict, Witness
from cda.encodings.evaluate import BatchEvaluator, evaluate_many
from cda.encodings.ir import Atom, Claim, Clause, GroundProblem, Linear, walk
from cda.errors import EvaluatorDisagreement
from cda.solver.backend import (
    ALL_CLAUSES,
    Backend,
    Deadline,
    Lit,
    Model,
    _OutOfTime,
    all_clauses_on,
    claim_key,
    integer_weights,
    make_backend,
    selector,
)
from cda.solver.call_log import RecordingBackend, SolverCallLog
from cda.solver.cores import marco, quickxplain
from cda.solver.information import information_gain, posterior
from cda.solver.minimal import MinimalSearch
from cda.solver.observations import GroupedProblem, split_observations

__all__ = ["EngineOptions", "run"]

Settled = Literal["supported", "refuted"]

MAX_SEED = limits.MAX_SEED


@dataclass(frozen=True)
class EngineOptions:
    top: int = 3
    seed: int = 0
    timeout: float | None = None
    max_hypotheses: int = 10_000  # cap on enumerated projections
    max_tested_hypotheses: int = 256  # hypotheses used for next tests and claim probabilities
    max_conflict_sets: int = 64
    lazy_observations: bool = True  # minimal explanations: add observation groups as counterexamples
    check_minimality: bool = False  # minimal explanations: prove each one minimal (|E| oracle calls)
    max_explanation_size: int | None = None  # minimal explanations: only those of at most this many atoms
    #: minimal explanations known beforehand (e.g. under fewer observations): re-checked, then skipped
    known_explanations: tuple[tuple[str, ...], ...] = ()
    #: called once per solver call (method, inputs, outcome, status): the Action's receipts
    call_log: SolverCallLog | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        """Options a solver would refuse (or misread) are refused here, before any solving.

        >>> EngineOptions(seed=-5)
        Traceback (most recent call last):
        ...
        cda.errors.OptionError: seed must be a whole number from 0 to 4294967295 (both solvers take an unsigned 32-bit seed), not -5
        """
        limits.seed("seed", self.seed)
        if self.timeout is not None:  # stored as a float: 10**400 seconds is no limit, not an OverflowError
            object.__setattr__(self, "timeout", limits.seconds("timeout", self.timeout))
        for name in ("top", "max_hypotheses", "max_tested_hypotheses", "max_conflict_sets"):
            limits.count(name, getattr(self, name))
        if self.max_explanation_size is not None:
            limits.count("max_explanation_size", self.max_explanation_size)


def _backend(name: str, problem: GroundProblem, options: EngineOptions, deadline: Deadline) -> Backend:
    """``make_backend``, its calls reported to ``options.call_log`` when there is one."""
    backend = make_backend(name, problem, seed=options.seed, deadline=deadline, weights=integer_weights(problem))
    return backend if options.call_log is None else RecordingBackend(backend, options.call_log)


def _r(x: float) -> float:
    return round(x, 9) + 0.0


class _Run:
    def __init__(self, problem: GroundProblem, backend: Backend, options: EngineOptions, deadline: Deadline) -> None:
        self.p = problem
        self.b = backend
        self.deadline = deadline
        self._claim_of = {claim_key(c.name): c for c in problem.claims}
        self.o = options
        self.base: list[Lit] = all_clauses_on(problem.clauses)
        self.hyps = problem.hyp_atoms
        self.notes: list[str] = []
        self.partial = False
        self._flips = 0  # disjunctions added by :meth:`forced`
        self._check_nodes = [c.node for c in problem.clauses] + list(problem.background)
        self._batch = BatchEvaluator(self._check_nodes)
        self._soft_nodes = [s.node for s in problem.soft]
        soft_atoms = {n.name for n in walk(self._soft_nodes) if isinstance(n, Atom)}
        soft_numeric = any(isinstance(n, Linear) for n in walk(self._soft_nodes))
        self._soft_on_hyps_only = soft_atoms <= set(self.hyps) and not soft_numeric
        #: the atoms besides the abducibles that soft clauses read: when a hypothesis fixes them
        #: all, every one of its models has the same cost and the same violations
        self._soft_open_atoms = None if soft_numeric else sorted(soft_atoms - set(self.hyps))

    # ---- re-checking every model before it is used
    def verified(self, model: Model | None, assumptions: Sequence[Lit], why: str) -> Model:
        if model is None:
            raise EvaluatorDisagreement(f"{self.b.name} said sat but returned no model ({why})")
        active = {k for k, v in assumptions if v}
        everything = ALL_CLAUSES in active
        values = self._batch.evaluate([model])[:, 0].tolist()  # its walk order is made once
        for clause, ok in zip(self.p.clauses, values):
            if not ok and (everything or selector(clause.name) in active):
                raise EvaluatorDisagreement(
                    f"{self.b.name} returned a model violating clause {clause.name} ({why})"
                )
        if not all(values[len(self.p.clauses) :]):
            raise EvaluatorDisagreement(f"{self.b.name} returned a model violating background structure ({why})")
        for key, value in assumptions:
            if key in model and bool(model[key]) != value:
                raise EvaluatorDisagreement(f"{self.b.name} returned a model ignoring assumption {key} ({why})")
        for key, value in assumptions:
            if key in self._claim_of and evaluate_many([self._claim_of[key].node], model)[0] != value:
                raise EvaluatorDisagreement(f"{self.b.name} returned a model ignoring claim {key} ({why})")
        return model

    def verify_all(self, models: list[Model], why: str) -> None:
        """Re-check many models under the base assumptions at once (every clause is on)."""
        if not models:
            return
        import numpy as np  # here, not at the top: numpy loads only when models are re-checked in bulk

        values = self._batch.evaluate(models)
        bad = np.flatnonzero(~values.all(axis=0))
        if bad.size:
            i = int(bad[0])
            row = int(np.flatnonzero(~values[:, i])[0])
            what = self.p.clauses[row].name if row < len(self.p.clauses) else "background structure"
            raise EvaluatorDisagreement(f"{self.b.name} returned a model violating {what} ({why})")

    def cost_of(self, model: Model) -> tuple[Fraction, list[str]]:
        values = evaluate_many(self._soft_nodes, model) if self._soft_nodes else []
        violated = [s for s, ok in zip(self.p.soft, values) if not ok]
        return sum((s.weight for s in violated), Fraction(0)), [s.name for s in violated]

    def _minimize(self, lits: list[Lit], why: str) -> Model | None:
        best = self.b.minimize(lits)
        if best.status == "unknown":
            raise _OutOfTime()
        return self.verified(best.model, lits, why) if best.status == "sat" else None

    def cheapest(self, lits: list[Lit], assumed: frozenset[str]) -> Model:
        """A least-cost model under ``lits`` whose violated soft clauses are canonical.

        Several cheapest models may violate different soft clauses. The canonical ones: going
        through the soft clauses in source order, each is kept satisfied when some cheapest
        model satisfies it together with those kept before — a question about the problem, not
        about the backend, so both backends report the same ``violated`` list. That is the
        lexicographic optimum below the cost, which both backends compute in one optimisation
        (one priority level per soft clause); asking it clause by clause took one optimisation
        per violated soft clause and hypothesis (3,850 on a 1,000-service graph).
        """
        model = self._minimize(lits, "cost of a hypothesis")
        if model is None:
            raise EvaluatorDisagreement(f"{self.b.name}: hypothesis {sorted(assumed)} has no model when minimising")
        return model

    def hyp_lits(self, assumed: frozenset[str]) -> list[Lit]:
        return [(a, a in assumed) for a in self.hyps]

    def is_sat(self, assumptions: list[Lit], why: str) -> bool | None:
        out = self.b.check(assumptions)
        if out.status == "sat":
            self.verified(out.model, assumptions, why)
            return True
        return False if out.status == "unsat" else None

    # ---- pieces
    def hypotheses(self) -> tuple[list[tuple[frozenset[str], Fraction, list[str], Model]], bool]:
        cap = self.o.max_hypotheses
        enum = self.b.enumerate(self.hyps, self.base, cap + 1)
        models = enum.models[:cap]
        complete = enum.complete or (len(enum.models) <= cap and not enum.timed_out)
        if enum.timed_out:
            self.partial = True
            self.notes.append("time ran out while enumerating hypotheses; the list is partial")
        elif len(enum.models) > cap:
            complete = False
            self.notes.append(
                f"enumeration capped at {cap} hypotheses; posterior is normalised over those enumerated"
            )
        self.verify_all(models, "hypothesis enumeration")
        soft_values = BatchEvaluator(self._soft_nodes).evaluate(models) if self._soft_nodes else None
        out = []
        seen: set[frozenset[str]] = set()
        hyps = self.hyps
        for i, model in enumerate(models):
            assumed = frozenset(compress(hyps, map(model.__getitem__, hyps)))
            if assumed in seen:
                raise EvaluatorDisagreement(f"{self.b.name} enumerated hypothesis {sorted(assumed)} twice")
            seen.add(assumed)
            if self.p.soft and not self._soft_on_hyps_only:
                if not self._soft_fixed(assumed, model):  # else this model is as cheap as any
                    model = self.cheapest(self.base + self.hyp_lits(assumed), assumed)
                cost, violated = self.cost_of(model)
            else:
                ok = soft_values[:, i] if soft_values is not None else ()
                broken = [s for s, good in zip(self.p.soft, ok) if not good]
                cost, violated = sum((s.weight for s in broken), Fraction(0)), [s.name for s in broken]
            out.append((assumed, cost, violated, model))
        # costs are Fractions, whose comparisons run in Python: sort by each distinct cost's rank
        rank = {cost: i for i, cost in enumerate(sorted({h[1] for h in out}))}
        out.sort(key=lambda h: (rank[h[1]], len(h[0]), sorted(h[0])))
        return out, complete

    def _soft_fixed(self, assumed: frozenset[str], model: Model) -> bool:
        """Whether every model of the hypothesis gives the atoms soft clauses read the values
        ``model`` gives them (one solver call, usually unsat). Then its cost and violations are
        ``model``'s and no optimisation is needed: in a root-cause problem the hypothesis
        determines what is slow, and z3 spent most of a minute optimising 70 such hypotheses
        over 343 soft clauses."""
        atoms = self._soft_open_atoms
        return atoms is not None and len(self.forced(assumed, model, atoms)) == len(atoms)

    def likelihood(self, assumed: frozenset[str], model: Model, key: str, value_in_model: bool) -> float:
        """P(key true | hypothesis): 1/0 when the hypothesis forces it, 0.5 when both are possible."""
        other = self.is_sat(self.base + self.hyp_lits(assumed) + [(key, not value_in_model)], "likelihood")
        if other is None:
            raise _OutOfTime()
        if other:
            return 0.5
        return 1.0 if value_in_model else 0.0

    def forced(self, assumed: frozenset[str], model: Model, keys: Sequence[str]) -> set[str]:
        """The ``keys`` (atoms) that take their value in ``model`` in every model of hypothesis
        ``assumed``: its backbone among them, found a block at a time.

        One solver call asks whether some model of the hypothesis flips *any* of the keys still
        open (a disjunction, added behind a fresh selector); unsat settles them all, a model
        frees every key it flips. Asking key by key took one call per hypothesis and key:
        4,930 calls for 17 hypotheses over 290 observables, where observables that the
        hypothesis determines, the usual case, now take one call per hypothesis.
        """
        f = self.p.factory
        lits = self.base + self.hyp_lits(assumed)
        open_keys = list(keys)
        while open_keys:
            self._flips += 1
            name = f"flip!{self._flips}"  # "!" cannot appear in a clause name of the DSL
            node = f.or_([f.not_(f.atom(k)) if model[k] else f.atom(k) for k in open_keys])
            self.b.add_clauses([Clause(name, "hard", node, 0)], [])
            out = self.b.check(lits + [(selector(name), True)])
            if out.status == "unknown":
                raise _OutOfTime()
            if out.status == "unsat":
                break
            other = self.verified(out.model, lits, "a model flipping some of the keys")
            still = [k for k in open_keys if bool(other[k]) == bool(model[k])]
            if len(still) == len(open_keys):
                raise EvaluatorDisagreement(f"{self.b.name} returned a model that flips none of the keys it had to flip")
            open_keys = still
        return set(open_keys)

    def verdict(self, claim: Claim, ranked: list[tuple[frozenset[str], Fraction, list[str], Model]], probs: list[float]) -> Verdict:
        key = claim_key(claim.name)
        can_true = self.is_sat(self.base + [(key, True)], f"claim {claim.name} true")
        can_false = self.is_sat(self.base + [(key, False)], f"claim {claim.name} false")
        names = [c.name for c in self.p.clauses]

        def core(value: bool) -> list[str]:
            def oracle(subset: Sequence[str]) -> bool:
                on = set(subset)
                r = self.is_sat([(selector(n), n in on) for n in names] + [(key, value)], "core")
                if r is None:
                    raise _OutOfTime()
                return r

            return quickxplain(names, oracle) or []

        goal_holds_when = claim.mode == "prove"  # the claim's value that makes the goal hold
        if can_true is None or can_false is None:
            return _undecided(claim, "the solver could not decide in time (unknown)")
        if not can_false or not can_true:
            claim_value = not can_false  # True when the claim is entailed
            status: Settled = "supported" if claim_value == goal_holds_when else "refuted"
            return Verdict(
                name=claim.name, goal=claim.mode, claim=claim.text, status=status,
                confidence=1.0 if status == "supported" else 0.0,
                justification=core(not claim_value), witnesses=[],
                reason=("entailed" if claim_value else "contradicted") + " by the hard clauses and observations",
            )
        witnesses: list[Witness] = []
        for side in (True, False):
            for assumed, _cost, _v, _m in ranked:
                if self.is_sat(self.base + self.hyp_lits(assumed) + [(key, side)], "witness"):
                    witnesses.append(Witness(holds=side, assumed=sorted(assumed)))
                    break
        considered = ranked[: self.o.max_tested_hypotheses]
        weights = probs[: len(considered)]
        total = math.fsum(weights)
        p_true = 0.0
        if total > 0:
            p_true = math.fsum(
                w * self.likelihood(h, m, key, bool(evaluate_many([claim.node], m)[0]))
                for (h, _c, _v, m), w in zip(considered, weights)
            ) / total
        confidence = p_true if goal_holds_when else 1 - p_true
        return Verdict(
            name=claim.name, goal=claim.mode, claim=claim.text, status="inconclusive",
            confidence=_r(confidence), justification=[], witnesses=witnesses,
            reason="consistent with the claim and with its negation",
        )

    def next_tests(self, ranked: list[tuple[frozenset[str], Fraction, list[str], Model]], probs: list[float]) -> list[NextTest]:
        candidates = [o for o in self.p.observable_atoms if o not in self.p.observed]
        if not candidates or not ranked:
            return []
        considered = ranked[: self.o.max_tested_hypotheses]
        if len(considered) < len(ranked):
            self.notes.append(f"next tests computed over the {len(considered)} most probable hypotheses")
        weights = probs[: len(considered)]
        total = math.fsum(weights)
        prior = [w / total for w in weights]
        forced = [self.forced(h, m, candidates) for h, _c, _v, m in considered]
        tests = []
        for obs in candidates:
            # P(obs | hypothesis): its value when every model of the hypothesis agrees, else 1/2
            lik = [(1.0 if m[obs] else 0.0) if obs in fixed else 0.5 for (_h, _c, _v, m), fixed in zip(considered, forced)]
            gain, p_true = information_gain(prior, lik)
            tests.append(NextTest(observable=obs, expected_information_gain=_r(gain), probability_true=_r(p_true)))
        tests.sort(key=lambda t: (-t.expected_information_gain, t.observable))
        return tests

    def conflict(self) -> Conflict:
        names = [c.name for c in self.p.clauses]

        def oracle(subset: Sequence[str]) -> bool:
            on = set(subset)
            r = self.is_sat([(selector(n), n in on) for n in names], "conflict")
            if r is None:
                raise _OutOfTime()
            return r

        def out_of_time() -> bool:
            left = self.deadline.remaining()
            return left is not None and left <= 0

        cores, corrections, complete = marco(names, oracle, self.o.max_conflict_sets, out_of_time)
        if not complete:
            self.notes.append("conflict analysis stopped early; more cores may exist")
        return Conflict(cores=cores, corrections=corrections, complete=complete)


def _undecided(claim: Claim, reason: str) -> Verdict:
    return Verdict(
        name=claim.name, goal=claim.mode, claim=claim.text, status="inconclusive", confidence=0.5,
        justification=[], witnesses=[], reason=reason,
    )


def _every_claim_answered(result: SolveResult, claims: Sequence[Claim]) -> None:
    """A claim the time budget left undecided is still listed: inconclusive, saying why."""
    decided = {v.name for v in result.verdicts}
    for claim in claims:
        if claim.name not in decided:
            result.verdicts.append(_undecided(claim, "the time budget ran out before this claim was decided"))


def _empty_result(backend_name: str, options: EngineOptions) -> SolveResult:
    return SolveResult(
        status="unknown", backend=backend_name, seed=options.seed, hypotheses=[], hypotheses_enumerated=0,
        enumeration_complete=False, verdicts=[], next_tests=[], conflict=None, partial=False, notes=[],
    )


def run(problem: GroundProblem | GroupedProblem, backend_name: str, options: EngineOptions) -> SolveResult:
    """Solve ``problem`` on one backend; never raises for a timeout (returns a partial result).

    A :class:`~cda.solver.observations.GroupedProblem` (or any problem with ``goal
    minimal_explanations``) is answered by :class:`~cda.solver.minimal.MinimalSearch`, which
    encodes observation groups only as its counterexamples require.
    """
    if isinstance(problem, GroupedProblem):
        return _run_minimal(problem, backend_name, options)
    if problem.minimal is not None:
        return _run_minimal(split_observations(problem), backend_name, options)
    deadline = Deadline(options.timeout)
    result = _empty_result(backend_name, options)
    state: _Run | None = None
    try:
        backend = _backend(backend_name, problem, options, deadline)
        state = _Run(problem, backend, options, deadline)
        base_sat = state.is_sat(state.base, "hard clauses and observations")
        if base_sat is None:
            raise _OutOfTime()
        if not base_sat:
            _conflicting(result, state, problem)
            return result
        result.status = "sat"
        ranked, complete = state.hypotheses()
        result.enumeration_complete = complete
        probs = posterior([c for _, c, _, _ in ranked])
        result.hypotheses_enumerated = len(ranked)
        top = options.top
        result.hypotheses = [
            Hypothesis(id=f"h{i + 1}", assumed=sorted(h), cost=_r(float(c)), posterior=_r(p), violated=v)
            for i, ((h, c, v, _m), p) in enumerate(zip(ranked[:top], probs))
        ]
        for claim in problem.claims:
            result.verdicts.append(state.verdict(claim, ranked, probs))
        result.next_tests = state.next_tests(ranked, probs)
    except _OutOfTime:
        result.partial = True
        if state is not None:
            state.notes.append("time budget exhausted; the result is partial")
        else:
            result.notes.append("time budget exhausted before the problem was encoded")
        _every_claim_answered(result, problem.claims)
    finally:
        if state is not None:
            result.partial = result.partial or state.partial
            result.notes.extend(state.notes)
    return result


def _conflicting(result: SolveResult, state: _Run, problem: GroundProblem) -> None:
    """H ∧ O is unsatisfiable: cores and corrections instead of hypotheses; claims inconclusive."""
    result.status = "unsat"
    result.enumeration_complete = True
    result.conflict = state.conflict()
    for claim in problem.claims:
        result.verdicts.append(
            Verdict(
                name=claim.name, goal=claim.mode, claim=claim.text, status="inconclusive",
                confidence=0.0, justification=[], witnesses=[],
                reason="the hard clauses and observations conflict; see conflict",
            )
        )


def _run_minimal(grouped: GroupedProblem, backend_name: str, options: EngineOptions) -> SolveResult:
    """``goal minimal_explanations``: the counterexample-guided search, then claims or conflicts,
    which need every observation, on the whole problem."""
    deadline = Deadline(options.timeout)
    goal = grouped.base.minimal
    mode, k = (goal.mode, goal.k) if goal is not None else ("all", None)
    result = _empty_result(backend_name, options)
    search: MinimalSearch | None = None
    notes: list[str] = []
    try:
        backend = _backend(backend_name, grouped.base, options, deadline)
        search = MinimalSearch(
            grouped, backend, deadline, lazy=options.lazy_observations, cap=options.max_hypotheses,
            check_minimality=options.check_minimality,
        )
        if options.known_explanations:
            search.seed(options.known_explanations)
        found = search.run(mode, k, options.max_explanation_size)
        notes.extend(found.notes)
        result.minimal_explanations = found.explanations
        result.minimal_complete = found.complete
        result.enumeration_complete = found.complete
        result.hypotheses_enumerated = len(found.explanations)
        if found.explanations:
            result.status = "sat"
        elif found.complete:
            result.status = "unsat"  # no set of abducibles is consistent with every observation
        if grouped.base.claims or result.status == "unsat":
            whole = grouped.materialize() if len(grouped) else grouped.base
            state = _Run(
                whole,
                _backend(backend_name, whole, options, deadline),
                options,
                deadline,
            )
            try:
                if result.status == "unsat":
                    _conflicting(result, state, whole)
                else:
                    for claim in whole.claims:
                        result.verdicts.append(state.verdict(claim, [], []))
            finally:
                notes.extend(state.notes)
                result.partial = result.partial or state.partial
    except _OutOfTime:
        result.partial = True
        if search is not None:
            result.minimal_explanations = search.partial()
            result.minimal_complete = False
            result.enumeration_complete = False
            result.hypotheses_enumerated = len(result.minimal_explanations)
            if result.minimal_explanations:
                result.status = "sat"
            notes.append(
                "time budget exhausted; the result is partial (each explanation listed was checked against "
                "every observation)"
            )
        else:
            notes.append("time budget exhausted before the problem was encoded")
        _every_claim_answered(result, grouped.base.claims)
    result.notes.extend(notes)
    return result
