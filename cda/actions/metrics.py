"""The runner measuring its own metrics (:class:`cda.contracts.metrics.ActionMetrics`, docs/operations.md).

Two jobs, matching the two parts of the contract:

* :class:`ActionProbe` times the run on the runner's clock (``time.monotonic`` unless a caller
  injects one): it is the first subscriber of the event stream, so it stamps the first
  ``boundary_summary`` checkpoint with ``draft: true`` (TTFS) as the runner emits it, before any
  other subscriber (a store, a socket) spends time on it; and it hands the run a view of Ken
  (:class:`TimedKen`, sharing the graph's storage) that times every query of the safe set.
* :func:`action_counts` counts what follows from the inputs alone: frontier sizes, constraints
  satisfied and violated, verifier outcomes, citation coverage. These go into ``CDAOutputs``
  and are byte-identical between runs; the times never do (they ride on the terminal event,
  which :func:`cda.contracts.events.without_time` strips for determinism).

Why the terminal event and not a receipt: receipts form a hash chain whose head must be the
same for two runs of the same inputs, and a time would change it; the event store already
keeps wall time (``ts``) outside determinism, so the measurements sit beside it, and
``cda metrics`` reads every attempt's numbers from its terminal event in the SQLite store.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable, Iterable, Sequence

from cda.contracts.action import ActionVerdict
from cda.contracts.events import ActionEvent
from cda.contracts.metrics import (
    ActionMeasurements,
    ActionMetrics,
    ApprovalWait,
    CitationCoverage,
    ConstraintMetrics,
    FrontierMetrics,
    LatencySummary,
    Ratio,
    UncitedClaim,
    VerifierMetrics,
)
from cda.contracts.receipt import Receipt
from cda.contracts.result import SolveResult
from cda.contracts.verification import VerifierOutcome
from cda.encodings.ir import GroundProblem
from cda.ken.graph import KenGraph

__all__ = [
    "PROBLEM_LINE_SOURCE",
    "ActionProbe",
    "TimedKen",
    "action_counts",
    "citation_coverage",
    "constraint_counts",
    "frontier_counts",
    "verifier_counts",
    "verifier_results",
]

_US = 1_000_000

PROBLEM_LINE_SOURCE = "dsl:line:"
"""The source prefix of a SpanRef that points at a line of the problem's own text (an ``observe``
line no input observation stands behind): the problem restating itself, not a citation."""
_OUTCOME_STATUSES = ("passed", "failed", "inconclusive", "skipped")  # VerifierStatus


def _us(seconds: float) -> int:
    """Seconds (a clock difference) as whole microseconds, never negative."""
    return max(0, round(seconds * _US))


class TimedKen(KenGraph):
    """A view of a Ken graph (same storage, no copy) whose safe-set queries are timed.

    Only the four queries of the safe set are timed (``search``, ``neighborhood``,
    ``related_by``, ``path``), on this view and on what :meth:`merged` makes of it; a memoised
    answer that never reaches Ken is not a query.
    """

    _clock: Callable[[], float]
    _spent: list[int]

    @classmethod
    def over(cls, ken: KenGraph, clock: Callable[[], float], spent: list[int]) -> TimedKen:
        """A timed view of ``ken``: durations (microseconds) are appended to ``spent``."""
        view = copy.copy(ken)  # a holder like any copy: a write through either copies first
        view.__class__ = cls
        assert isinstance(view, TimedKen)
        view._clock = clock
        view._spent = spent
        return view

    def merged(self, other: KenGraph) -> KenGraph:
        """The merged graph, timed too: the grounder asks its ``related_by`` and ``path`` on a
        merge of Ken with the problem's facts."""
        merged = super().merged(other)
        merged.__class__ = TimedKen  # the same object: no extra holder of its storage
        assert isinstance(merged, TimedKen)
        merged._clock, merged._spent = self._clock, self._spent
        return merged

    # Each query is timed inline: no closure is made between the two clock readings, so that
    # the view adds as little as it can (an allocation there could start a garbage collection).
    def search(self, text: str, limit: int = 50) -> list[str]:
        start = self._clock()
        try:
            return KenGraph.search(self, text, limit)
        finally:
            self._spent.append(_us(self._clock() - start))

    def neighborhood(self, node: str, hops: int = 1, relation: str | None = None) -> list[str]:
        start = self._clock()
        try:
            return KenGraph.neighborhood(self, node, hops, relation)
        finally:
            self._spent.append(_us(self._clock() - start))

    def related_by(self, node: str, relation: str) -> list[str]:
        start = self._clock()
        try:
            return KenGraph.related_by(self, node, relation)
        finally:
            self._spent.append(_us(self._clock() - start))

    def path(self, source: str, target: str, relation: str | None = None,
             max_hops: int | None = None) -> list[str] | None:
        start = self._clock()
        try:
            return KenGraph.path(self, source, target, relation, max_hops)
        finally:
            self._spent.append(_us(self._clock() - start))


class ActionProbe:
    """The wall-clock side of one run: started when made, read by :meth:`measurements`.

    >>> ticks = iter([0.0, 0.25, 1.0])
    >>> probe = ActionProbe(lambda: next(ticks))
    >>> from cda.contracts.events import ActionCheckpoint
    >>> probe.see(ActionCheckpoint(action_id="a", seq=3, kind="boundary_summary", payload={"draft": True}))
    >>> m = probe.measurements(); (m.ttfs_us, m.first_summary_us, m.total_us)
    (250000, 250000, 1000000)
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic,
                 approval_waits: Sequence[ApprovalWait] = (), queued_since: float | None = None) -> None:
        """``queued_since``: when a server took the action in (actions.start, on ``clock``, moved
        on by the time it waited for a person), so ``queued_us`` is its queue."""
        self._clock = clock
        self._start = clock()
        self.queued_us = None if queued_since is None else _us(max(0.0, self._start - queued_since))
        self.ttfs_us: int | None = None
        self.first_summary_us: int | None = None
        self.ken_us: list[int] = []
        self.approval_waits = list(approval_waits)

    def elapsed_us(self) -> int:
        return _us(self._clock() - self._start)

    def see(self, event: ActionEvent) -> None:
        """A stream subscriber: note the first boundary summary, and the first draft one."""
        if event.type != "action_checkpoint" or event.kind != "boundary_summary" or self.ttfs_us is not None:
            return  # once a draft is stamped, both fields are set
        now = self.elapsed_us()
        if self.first_summary_us is None:
            self.first_summary_us = now
        if event.payload.get("draft") is True:
            self.ttfs_us = now

    def timed(self, ken: KenGraph | None) -> KenGraph | None:
        """The run's view of Ken, every safe-set query timed (None stays None)."""
        return None if ken is None else TimedKen.over(ken, self._clock, self.ken_us)

    def measurements(self) -> ActionMeasurements:
        """What was measured so far; ``total_us`` is now minus the start."""
        return ActionMeasurements(
            total_us=self.elapsed_us(), ttfs_us=self.ttfs_us, first_summary_us=self.first_summary_us,
            queued_us=self.queued_us,
            ken=LatencySummary.of(self.ken_us),
            approvals=LatencySummary.of([w.waited_us for w in self.approval_waits]),
            approval_waits=list(self.approval_waits),
        )


# ---------------------------------------------------------------- the deterministic counts


def frontier_counts(seeds: int, rounds: Sequence[SolveResult], final: SolveResult | None) -> FrontierMetrics:
    """Frontier sizes: the seeds of round 0, each round's hypotheses, the frontier reported."""
    per_round = [len(r.hypotheses) for r in rounds]
    last = final if final is not None else (rounds[-1] if rounds else None)
    return FrontierMetrics(
        seeds=seeds, per_round=per_round, final=len(last.hypotheses) if last is not None else 0,
        max=max(per_round, default=0), enumerated=last.hypotheses_enumerated if last is not None else 0,
        complete=last.enumeration_complete if last is not None else False,
    )


def constraint_counts(gp: GroundProblem | None, result: SolveResult | None) -> ConstraintMetrics:
    """Constraints satisfied/violated on the reported model (see ConstraintMetrics.basis)."""
    if gp is None or result is None:
        return ConstraintMetrics()
    hard = [c.name for c in gp.clauses]
    soft = [s.name for s in gp.soft]
    if result.conflict is not None and result.status == "unsat":
        in_core = sorted({n for core in result.conflict.cores for n in core} & set(hard))
        return ConstraintMetrics(basis="conflict", hard_total=len(hard), hard_satisfied=len(hard) - len(in_core),
                                 hard_violated=len(in_core), soft_total=len(soft),
                                 satisfied=len(hard) - len(in_core), violated=len(in_core), violated_names=in_core)
    if result.status == "sat" and result.hypotheses:
        violated = sorted(set(result.hypotheses[0].violated) & set(soft))
        return ConstraintMetrics(basis="best_hypothesis", hard_total=len(hard), hard_satisfied=len(hard),
                                 soft_total=len(soft), soft_satisfied=len(soft) - len(violated),
                                 soft_violated=len(violated), satisfied=len(hard) + len(soft) - len(violated),
                                 violated=len(violated), violated_names=violated)
    return ConstraintMetrics(hard_total=len(hard), soft_total=len(soft))


def verifier_results(receipts: Iterable[Receipt]) -> list[tuple[str, str]]:
    """``(verifier, status)`` of every verifier receipt: each outcome a verifier reported left
    one (``verifier.<name>``, its status in ``result``), including checks such as the abstain gate's
    low-coverage pass that lower nothing themselves. Receipts of kind ``verifier`` that are not
    an outcome (the enforcement pass's list of violations, the review's verdict) are left out."""
    return [(r.name.removeprefix("verifier."), str(r.result["status"])) for r in receipts
            if r.kind == "verifier" and r.result.get("status") in _OUTCOME_STATUSES]


def verifier_counts(results: Iterable[tuple[str, str]]) -> VerifierMetrics:
    """Verifier pass rate: passed / (passed + failed), overall and per verifier.

    >>> verifier_counts([("units", "passed"), ("llm", "failed"), ("llm", "passed"), ("ken", "skipped")]).pass_rate
    Ratio(numerator=2, denominator=3)
    """
    passed = failed = undecided = 0
    by: dict[str, tuple[int, int]] = {}
    for verifier, status in results:
        ok, decided = by.get(verifier, (0, 0))
        if status == "passed":
            passed += 1
            by[verifier] = (ok + 1, decided + 1)
        elif status == "failed":
            failed += 1
            by[verifier] = (ok, decided + 1)
        else:
            undecided += 1
            by.setdefault(verifier, (ok, decided))
    return VerifierMetrics(
        pass_rate=Ratio(numerator=passed, denominator=passed + failed), passed=passed, failed=failed,
        undecided=undecided,
        by_verifier={name: Ratio(numerator=n, denominator=d) for name, (n, d) in sorted(by.items())},
    )


def _claim_keys(verdict: ActionVerdict, result: SolveResult | None) -> tuple[set[str], list[str]]:
    """The texts a verifier outcome may name this claim by (its own text, its formula, the
    atoms an explanation assumes), and the clauses the solver's verdict rests on."""
    keys = {verdict.claim}
    justification: list[str] = []
    if result is not None:
        for v in result.verdicts:
            if v.name == verdict.hypothesis_id:
                keys.add(v.claim)
                justification = list(v.justification)
        for h in result.hypotheses:
            if h.id == verdict.hypothesis_id and verdict.claim.startswith("explanation:"):
                keys.update(h.assumed)
    return keys, justification


def citation_coverage(verdicts: Sequence[ActionVerdict], outcomes: Sequence[VerifierOutcome],
                      result: SolveResult | None) -> CitationCoverage:
    """Supported claims carrying >= 1 citation (an input observation or Ken evidence, from a
    verifier outcome about the claim or one of its atoms) over all supported claims.

    A claim the solver proves from clauses alone is uncited and ``stands_on`` ``solver``: its
    clause names are listed, not counted as citations; nor is a line of the problem's own text
    (``dsl:line:N``, :data:`PROBLEM_LINE_SOURCE`): an ``observe`` line nothing outside the
    problem stands behind cites the problem to itself.
    """
    cited_by: dict[str, int] = {}
    for o in outcomes:
        outside = [c for c in o.citations if not c.source.startswith(PROBLEM_LINE_SOURCE)]
        if outside:
            cited_by[o.claim] = cited_by.get(o.claim, 0) + len(outside)
    supported = [v for v in verdicts if v.status == "supported"]
    cited: list[str] = []
    uncited: list[UncitedClaim] = []
    for v in supported:
        keys, justification = _claim_keys(v, result)
        if any(cited_by.get(k) for k in keys):
            cited.append(v.hypothesis_id)
            continue
        explained = v.claim.startswith("explanation:")  # the only hypothesis of a complete enumeration
        uncited.append(UncitedClaim(hypothesis_id=v.hypothesis_id, claim=v.claim, justification=justification,
                                    stands_on="solver" if justification or explained else "nothing"))
    return CitationCoverage(coverage=Ratio(numerator=len(cited), denominator=len(supported)), cited=cited,
                            uncited=uncited)


def action_counts(
    action_id: str,
    status: str,
    *,
    seeds: int = 0,
    rounds: Sequence[SolveResult] = (),
    result: SolveResult | None = None,
    gp: GroundProblem | None = None,
    outcomes: Sequence[VerifierOutcome] = (),
    verdicts: Sequence[ActionVerdict] = (),
    receipts: Sequence[Receipt] = (),
    ken_queries: int = 0,
) -> ActionMetrics:
    """The deterministic part of a run's metrics (``measurements`` None).

    ``outcomes`` give the citations of each claim, ``receipts`` (the attempt's) the verifier
    results counted by the pass rate.
    """
    return ActionMetrics(
        action_id=action_id, status=status, partial=status == "partial",
        frontier=frontier_counts(seeds, rounds, result), constraints=constraint_counts(gp, result),
        verifiers=verifier_counts(verifier_results(receipts)), citations=citation_coverage(verdicts, outcomes, result),
        ken_queries=ken_queries,
    )
