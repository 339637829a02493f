"""The engine: from a ground problem to hypotheses, verdicts, next-best tests and conflicts.

:func:`run` is the one entry point. It builds the backend, wraps it so that every model is
re-checked by the independent evaluator (:mod:`cda.solver.recheck`), and asks, for hard
clauses H, observations O and each claim c (DESIGN.md, "Verdicts, confidence, next-best tests"):

* is H ∧ O satisfiable? If not, the conflict: minimal unsatisfiable subsets and minimal
  correction sets (:mod:`cda.solver.conflicts`);
* the hypotheses, the distinct models projected on the abducibles, ranked by cost, then fewer
  assumed atoms, then by name (:mod:`cda.solver.hypotheses`);
* each verdict: supported, refuted or inconclusive with a witness each way and a confidence
  over every hypothesis (:mod:`cda.solver.verdicts`);
* the next-best tests (:mod:`cda.solver.next_tests`);
* ``goal minimal_explanations``: the subset-minimal sets of abducibles, found by
  :mod:`cda.solver.minimal` with observation groups added as counterexamples require; its
  claims are answered as above, over every hypothesis of the whole problem.

Every answer is made canonical (sorted enumerations, cores found in source order), so both
backends give the same bytes. A budget that runs out gives a partial result, never an exception.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from fractions import Fraction

from cda.contracts import limits
from cda.contracts.deadline import deadline_scope, stop_signal
from cda.contracts.result import Hypothesis, SolveResult
from cda.contracts.status import SolverStatus
from cda.encodings.ir import Claim, GroundProblem
from cda.errors import OptionError
from cda.solver.backend import Backend, Deadline, _OutOfTime, integer_weights, make_backend
from cda.solver.call_log import RecordingBackend, SolverCallLog
from cda.solver.hypotheses import Ranking, rank_hypotheses
from cda.solver.information import rounded
from cda.solver.next_tests import next_tests
from cda.solver.observations import GroupedProblem, split_observations
from cda.solver.recheck import CheckedBackend
from cda.solver.verdicts import in_conflict, undecided, verdict

__all__ = ["EngineOptions", "Options", "run"]

MAX_SEED = limits.MAX_SEED

#: the most values (models × the atoms and numeric variables of each) a hypothesis enumeration
#: keeps: every model is kept whole, re-checked and priced, so on a problem of 27,000 atoms a
#: 5 s budget enumerated thousands of models, held 2.9 GB and spent as long again re-checking
#: them after the deadline. A problem of more than 800 atoms is capped below max_hypotheses
#: (10,000). Models are copies of one all-false dict (about 30 bytes a value): 8,000,000 values
#: are some 240 MB; bench_core's 400,000-clause problem (254 models of 20,010 atoms, 5.1 M
#: values) solved whole in 1.6 GB, most of it the program itself
MAX_MODEL_VALUES = 8_000_000


@dataclass(frozen=True)
class EngineOptions:
    """Every option of one engine run, carried as one checked object (published as
    :class:`cda.engine.Options`): which backend, how many hypotheses to list, the seed, the time
    budget and the caps. ``backend`` is a registered name or ``auto`` (chosen by what the problem
    needs, :func:`cda.solver.route.choose_backend`); ``top`` None lists the problem's own
    ``goal best_explanation top k``, else 3."""

    top: int | None = None
    seed: int = 0
    timeout: float | None = None
    max_hypotheses: int = 10_000  # cap on enumerated projections
    max_tested_hypotheses: int = 256  # hypotheses used for next tests (claim confidences use every one)
    max_conflict_sets: int = 64
    lazy_observations: bool = True  # minimal explanations: add observation groups as counterexamples
    check_minimality: bool = False  # minimal explanations: prove each one minimal (|E| oracle calls)
    max_explanation_size: int | None = None  # minimal explanations: only those of at most this many atoms
    #: minimal explanations known beforehand (e.g. under fewer observations): re-checked, then skipped
    known_explanations: tuple[tuple[str, ...], ...] = ()
    #: called once per solver call (method, inputs, outcome, status): the Action's receipts
    call_log: SolverCallLog | None = field(default=None, compare=False, repr=False)
    backend: str = "auto"

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
        if self.top is not None:
            limits.count("top", self.top)
        for name in ("max_hypotheses", "max_tested_hypotheses", "max_conflict_sets"):
            limits.count(name, getattr(self, name))
        if not isinstance(self.backend, str):
            raise OptionError(f"backend must be a backend's name or 'auto', not {self.backend!r}")
        if self.max_explanation_size is not None:
            limits.count("max_explanation_size", self.max_explanation_size)


#: the name products read it by (:mod:`cda.engine`)
Options = EngineOptions


def _backend(name: str, problem: GroundProblem, options: EngineOptions, deadline: Deadline) -> Backend:
    """``make_backend``, its calls reported to ``options.call_log`` when there is one."""
    backend = make_backend(name, problem, seed=options.seed, deadline=deadline, weights=integer_weights(problem))
    return backend if options.call_log is None else RecordingBackend(backend, options.call_log)


def _checked(name: str, problem: GroundProblem, options: EngineOptions, deadline: Deadline) -> CheckedBackend:
    return CheckedBackend(problem, _backend(name, problem, options, deadline))


def run(
    problem: GroundProblem | GroupedProblem, backend_name: str, options: EngineOptions, deadline: Deadline | None = None
) -> SolveResult:
    """Solve ``problem`` on one backend; never raises for a timeout (returns a partial result).

    ``deadline`` is the run's budget when it started earlier (``cda.solve`` starts it before
    grounding); else one of ``options.timeout`` starts here.

    A :class:`~cda.solver.observations.GroupedProblem` (or any problem with ``goal
    minimal_explanations``) is answered by :class:`~cda.solver.minimal.MinimalSearch`, which
    encodes observation groups only as its counterexamples require.
    """
    if deadline is None:
        deadline = Deadline(options.timeout)
    if isinstance(problem, GroupedProblem) or problem.minimal is not None:
        grouped = problem if isinstance(problem, GroupedProblem) else split_observations(problem)
        with deadline_scope(deadline):  # an observation oracle reads it (a circuit's simulation)
            return _run_minimal(grouped, backend_name, options, deadline)
    result = _empty_result(backend_name, options)
    notes: list[str] = []
    solver: CheckedBackend | None = None
    try:
        solver = _checked(backend_name, problem, options, deadline)
        # no separate "is there a model?" first: the enumeration under every clause answers it
        # (no hypothesis: unsatisfiable; none before the deadline: unknown), and its models are
        # re-checked all at once (a check of its own was a tenth of a small solve)
        ranking = _ranking(solver, options, result, notes, deadline, first=True)
        if ranking.unsatisfiable:
            _conflicting(result, solver, options, deadline, notes)
            return result
        result.status = SolverStatus.SAT
        result.enumeration_complete = ranking.complete
        result.hypotheses_enumerated = len(ranking)
        result.hypotheses = [
            Hypothesis(
                id=f"h{i + 1}", assumed=sorted(h.assumed), cost=float(h.cost), posterior=rounded(p),
                violated=list(h.violated),
            ).with_exact_cost(Fraction(h.cost))
            for i, (h, p) in enumerate(zip(ranking.hypotheses[: top_of(problem, options)], ranking.posteriors))
        ]
        for claim in problem.claims:
            result.verdicts.append(verdict(solver, claim, ranking))
        result.next_tests, considered = next_tests(solver, ranking, options.max_tested_hypotheses)
        if considered < len(ranking):
            notes.append(f"next tests computed over the {considered} most probable hypotheses")
    except Exception as error:  # noqa: BLE001 - a stop, or raised again (stop_signal)
        exc = stop_signal(error, deadline)
        result.partial = True
        if solver is not None:
            notes.append(f"{deadline.why()}; the result is partial")
        else:
            notes.append(_before_encoded(exc, deadline))
        _every_claim_answered(result, problem.claims, deadline)
    finally:
        result.notes.extend(notes)
    return result


def top_of(problem: GroundProblem, options: EngineOptions) -> int:
    """How many hypotheses a result lists: ``options.top``, else the problem's goal, else 3."""
    return options.top if options.top is not None else problem.top if problem.top is not None else 3


def _ranking(
    solver: CheckedBackend, options: EngineOptions, result: SolveResult, notes: list[str], deadline: Deadline, *,
    listed: bool = True, first: bool = False,
) -> Ranking:
    """The ranked hypotheses; a cap or a timeout noted (``listed``: the result lists them, else
    they serve only the claims' confidences). ``first``: nothing has asked the solver yet, so an
    enumeration that found no model before the deadline leaves even satisfiability unknown
    (``_OutOfTime``, as a check would have)."""
    width = len(solver.problem.atoms) + len(solver.problem.numvars)
    cap = min(options.max_hypotheses, max(1, MAX_MODEL_VALUES // max(1, width)))
    ranking = rank_hypotheses(solver, cap)
    if first and ranking.timed_out and not ranking.hypotheses:
        raise _OutOfTime()
    if ranking.capped and cap < options.max_hypotheses:
        notes.append(
            f"each model holds {width:,} values and an enumeration keeps at most {MAX_MODEL_VALUES:,}: "
            f"hypotheses capped at {cap:,}, not max_hypotheses {options.max_hypotheses:,}"
        )
    if ranking.timed_out:
        result.partial = True
        stop = "time ran out" if not deadline.cancelled() else deadline.why()
        notes.append(
            f"{stop} while enumerating hypotheses; the list is partial" if listed else
            f"{stop} while enumerating hypotheses for the claims' confidences; they are over those found"
        )
    elif ranking.capped:
        notes.append(
            f"enumeration capped at {ranking.cap} hypotheses; posteriors and claim confidences are normalised "
            "over those enumerated" if listed else
            f"claim confidences are normalised over the first {ranking.cap} hypotheses enumerated (more exist)"
        )
    return ranking


def _every_claim_answered(result: SolveResult, claims: Sequence[Claim], deadline: Deadline) -> None:
    """A claim the time budget (or a cancel) left undecided is still listed: inconclusive, saying why."""
    decided = {v.name for v in result.verdicts}
    why = f"the run was stopped ({deadline.why()})" if deadline.cancelled() else "the time budget ran out"
    for claim in claims:
        if claim.name not in decided:
            result.verdicts.append(undecided(claim, f"{why} before this claim was decided"))


def _empty_result(backend_name: str, options: EngineOptions) -> SolveResult:
    """The result every run fills in. Made without validation (``model_construct``: each field
    is set here or has its default; nothing comes from a user), so that a run whose caller
    only reads it, a diagnosis, never builds the result's validator (docs/architecture.md,
    "Start-up"); a result that is printed or dumped builds its serializer then."""
    return SolveResult.model_construct(
        status=SolverStatus.UNKNOWN, backend=backend_name, seed=options.seed, hypotheses=[],
        hypotheses_enumerated=0, enumeration_complete=False, verdicts=[], next_tests=[], conflict=None,
        partial=False, notes=[], minimal_explanations=None, minimal_complete=False,
        expectations=[],  # given: a default_factory would have pydantic inspect list's signature (tokenize, ~10 ms)
    )


def _conflicting(
    result: SolveResult, solver: CheckedBackend, options: EngineOptions, deadline: Deadline, notes: list[str]
) -> None:
    """H ∧ O is unsatisfiable: cores and corrections instead of hypotheses; claims inconclusive."""
    from cda.solver.conflicts import conflict  # on first conflict: most problems have none

    result.status = SolverStatus.UNSAT
    result.enumeration_complete = True
    result.conflict = conflict(solver, options.max_conflict_sets, deadline)
    if not result.conflict.complete:
        notes.append("conflict analysis stopped early; more cores may exist")
    result.verdicts.extend(in_conflict(claim) for claim in solver.problem.claims)


def _before_encoded(exc: _OutOfTime, deadline: Deadline) -> str:
    """The note for a budget that ran out (or a cancel) while the backend was being built, saying where."""
    if exc.where:
        return f"{deadline.why()} {exc.where}, before the problem was solved; the result is partial"
    return f"{deadline.why()} before the problem was encoded"


def _run_minimal(
    grouped: GroupedProblem, backend_name: str, options: EngineOptions, deadline: Deadline
) -> SolveResult:
    """``goal minimal_explanations``: the counterexample-guided search, then claims or conflicts,
    which need every observation, on the whole problem. A claim is answered as without the goal:
    its confidence and witnesses come from every hypothesis of the whole problem, which the
    result does not list (its answer is the minimal explanations)."""
    from cda.solver.minimal import MinimalSearch  # only this goal needs it

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
            result.status = SolverStatus.SAT
        elif found.complete:
            result.status = SolverStatus.UNSAT  # no set of abducibles is consistent with every observation
        if grouped.base.claims or result.status is SolverStatus.UNSAT:
            whole = grouped.materialize() if len(grouped) else grouped.base
            solver = _checked(backend_name, whole, options, deadline)
            bound = options.max_explanation_size
            if result.status is SolverStatus.UNSAT and bound is not None and solver.holds(solver.base, "bounded"):
                # none of at most ``bound`` abducibles, yet the observations can all hold: no conflict
                result.status = SolverStatus.SAT
                notes.append(f"no explanation assumes at most {bound} abducible{'s' if bound != 1 else ''}; every one assumes more")
            if result.status is SolverStatus.UNSAT:
                _conflicting(result, solver, options, deadline, notes)
            else:
                ranking = _ranking(solver, options, result, notes, deadline, listed=False)
                for claim in whole.claims:
                    result.verdicts.append(verdict(solver, claim, ranking))
    except Exception as error:  # noqa: BLE001 - a stop, or raised again (stop_signal)
        exc = stop_signal(error, deadline)
        result.partial = True
        if search is not None:
            result.minimal_explanations = search.partial()
            result.minimal_complete = False
            result.enumeration_complete = False
            result.hypotheses_enumerated = len(result.minimal_explanations)
            if result.minimal_explanations:
                result.status = SolverStatus.SAT
            notes.append(
                f"{deadline.why()}; the result is partial (each explanation listed was checked against "
                "every observation)"
            )
        else:
            notes.append(_before_encoded(exc, deadline))
        _every_claim_answered(result, grouped.base.claims, deadline)
    result.notes.extend(notes)
    return result
