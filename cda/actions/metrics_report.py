"""Spec §10 across runs: each metric's distribution and each SLO judged, from the runs' own records.

One sample per run (the run's :class:`~cda.contracts.metrics.ActionMetrics`), except where the
runs' records allow pooling exactly: a ratio is the sum of the runs' numerators over the sum of
their denominators (so a run with 40 supported claims weighs 40 times one with 1), the approval
waits are pooled wait by wait, and the Ken maximum is the largest query of all. Percentiles are
nearest-rank (:func:`~cda.contracts.metrics.nearest_rank`): every figure is one a run measured.

The SLOs (docs/operations.md, "The SLOs"), each judged over the window, with the runs over the target
always listed (they are the ones that break it when it is not met):

* **TTFS**: the p95 over runs of the time to the first summary <= 3.0 s. Each run's sample is
  :func:`ttfs_sample`: its time from ``actions.start`` (a server's queue included; the figure
  after the queue is shown beside it) to the first *draft* boundary summary; a run that sent no draft
  (it hit its budget in round 1, stopped unsat, ran out of time) gives its first summary of any
  kind, else its whole duration, so the slowest runs are never dropped. Only a ``failed`` or
  ``escalated`` run without a draft is left out (it summarised nothing: its failure is what it
  sent; it counts in the statuses and is noted). A run timed by a fallback is over the target
  like any other when its sample passes 3 s;
* **citation coverage**: supported claims with a citation / supported claims, pooled, >= 95%;
  a run is over the target when its own coverage is below 95%;
* **Ken p95**: the *largest* of the runs' Ken query p95s <= 700 ms (the runner's ``search``
  asks for at most 50 candidates: "at top-50"; ``neighborhood``, ``related_by`` and ``path``
  have no candidate limit and are timed too); a run is over the target when its own p95 is. A
  store keeps each run's summary, not every query, so the pooled p95 of all queries cannot be
  computed exactly; judging on the maximum makes "met" mean every run holds, and then the
  pooled p95 holds too (each run has at most 5% of its queries above 700 ms, so the pool
  does): a met SLO here is never a flattering average.

An SLO is ``met``, ``not_met``, or ``no_data`` (nothing in the window measured it: not met
vacuously, and not broken either).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Literal

from cda.actions.metrics_runs import RunMetrics
from cda.actions.metrics_window import percent
from cda.contracts.metrics import (
    SLO_CITATION_COVERAGE,
    SLO_KEN_P95_US,
    SLO_TTFS_US,
    ActionMetrics,
    Ratio,
    nearest_rank,
)

__all__ = ["UNTIMED_STATUSES", "Distribution", "MetricsReport", "SLOResult", "SLOStatus", "ms", "ratio_json",
           "summarise", "ttfs_sample"]

SLOStatus = Literal["met", "not_met", "no_data"]
_HALF, _P95 = Fraction(1, 2), Fraction(95, 100)

UNTIMED_STATUSES = frozenset({"failed", "escalated"})
"""Statuses of runs that, without a draft, are not in TTFS: they summarised nothing."""


def ttfs_sample(run: RunMetrics, *, queue: bool = True) -> int | None:
    """The run's TTFS sample (µs) for the SLO: ``ttfs_us``, else ``first_summary_us``, else
    ``total_us``; None only for a run without measurements, or a ``failed``/``escalated`` run that
    sent no draft. The one definition ``cda metrics``, the live topic and the OTel export share.

    With ``queue`` (the SLO's figure) it is timed from ``actions.start``: a server's queue
    (``queued_us``) is added, since a client waits through it too; ``queue=False`` is the figure
    from the run's start (after the queue), shown beside it. A run no server queued (``cda run``)
    has no queue: both are the same."""
    x = None if run.metrics is None else run.metrics.measurements
    if x is None:
        return None
    queued = x.queued_us or 0 if queue else 0
    if x.ttfs_us is not None:
        return queued + x.ttfs_us
    if run.status in UNTIMED_STATUSES:
        return None
    return queued + (x.first_summary_us if x.first_summary_us is not None else x.total_us)


@dataclass(frozen=True)
class Distribution:
    """Integer samples (one per run, or per wait) summarised exactly."""

    unit: str
    count: int
    total: int
    min: int | None
    p50: int | None
    p95: int | None
    max: int | None

    @classmethod
    def of(cls, unit: str, samples: Sequence[int]) -> Distribution:
        """The summary of ``samples`` (``None`` figures when there are none).

        >>> Distribution.of("us", [30, 10, 20]).p95
        30
        """
        return cls(unit, len(samples), sum(samples), min(samples) if samples else None,
                   nearest_rank(samples, _HALF), nearest_rank(samples, _P95), max(samples) if samples else None)

    def as_json(self) -> dict[str, Any]:
        return {"unit": self.unit, "count": self.count, "sum": self.total, "min": self.min, "p50": self.p50,
                "p95": self.p95, "max": self.max}


def ratio_json(r: Ratio) -> dict[str, Any]:
    """A pooled ratio as the report shows it: both integers and the percentage."""
    return {"numerator": r.numerator, "denominator": r.denominator, "percent": percent(r.numerator, r.denominator)}


@dataclass(frozen=True)
class SLOResult:
    """One target judged over the window."""

    key: str
    title: str
    target: str
    statistic: str
    status: SLOStatus
    value: str
    samples: int
    over_target: list[str]

    def as_json(self) -> dict[str, Any]:
        return {"slo": self.key, "title": self.title, "target": self.target, "statistic": self.statistic,
                "status": self.status, "value": self.value, "samples": self.samples,
                "runs_over_target": self.over_target,
                "breaking_runs": self.over_target if self.status == "not_met" else []}


@dataclass
class MetricsReport:
    """Everything ``cda metrics`` prints: the runs, each metric, each SLO."""

    runs: int
    statuses: dict[str, int]
    without_metrics: list[str]
    first_end: float | None
    last_end: float | None
    distributions: dict[str, Distribution]
    ratios: dict[str, Ratio]
    slos: list[SLOResult]
    uncited_claims: int = 0
    notes: list[str] = field(default_factory=list)

    @property
    def broken(self) -> list[SLOResult]:
        return [s for s in self.slos if s.status == "not_met"]

    def as_json(self) -> dict[str, Any]:
        return {
            "runs": self.runs, "statuses": dict(sorted(self.statuses.items())),
            "runs_without_metrics": self.without_metrics,
            "first_end": self.first_end, "last_end": self.last_end,
            "metrics": {**{k: d.as_json() for k, d in self.distributions.items()},
                        **{k: ratio_json(r) for k, r in self.ratios.items()}},
            "uncited_claims": self.uncited_claims,
            "slos": [s.as_json() for s in self.slos], "notes": self.notes,
        }


def ms(us: int | None) -> str:
    """Microseconds as exact milliseconds.

    >>> ms(1_203_456)
    '1203.456 ms'
    """
    return "n/a" if us is None else f"{us // 1000}.{us % 1000:03d} ms"


def _limit(us: int) -> str:
    """A target in the unit it is stated in.

    >>> _limit(3_000_000), _limit(700_000)
    ('3.0 s', '700 ms')
    """
    if us % 1_000_000 == 0:
        return f"{us // 1_000_000}.0 s"
    return f"{us // 1000} ms" if us % 1000 == 0 else ms(us)


def _pool(runs: Sequence[tuple[str, ActionMetrics]], get: Callable[[ActionMetrics], tuple[int, int]]) -> Ratio:
    pairs = [get(m) for _, m in runs]
    return Ratio(numerator=sum(n for n, _ in pairs), denominator=sum(d for _, d in pairs))


def _slo_ttfs(timed: list[tuple[str, int]]) -> SLOResult:
    title, target = "TTFS (actions.start to the first boundary summary, queue included)", \
        f"p95 <= {_limit(SLO_TTFS_US)}"
    if not timed:
        return SLOResult("ttfs", title, target, "p95 over runs", "no_data", "no run was timed", 0, [])
    p95 = nearest_rank([us for _, us in timed], _P95)
    assert p95 is not None
    over = [name for name, us in timed if us > SLO_TTFS_US]
    status: SLOStatus = "met" if p95 <= SLO_TTFS_US else "not_met"
    return SLOResult("ttfs", title, target, "p95 over runs", status, ms(p95), len(timed), over)


def _slo_citations(runs: Sequence[tuple[str, ActionMetrics]], pooled: Ratio) -> SLOResult:
    goal = SLO_CITATION_COVERAGE
    title, target = "citation coverage of supported claims", f">= {percent(goal.numerator, goal.denominator)}"
    value = pooled.value
    if value is None:
        return SLOResult("citation_coverage", title, target, "pooled over runs", "no_data",
                         "no supported claim in the window", 0, [])
    over = [name for name, m in runs if (v := m.citations.coverage.value) is not None and v < goal]
    status: SLOStatus = "met" if value >= goal else "not_met"
    shown = f"{percent(pooled.numerator, pooled.denominator)} ({pooled.numerator}/{pooled.denominator})"
    samples = sum(1 for _, m in runs if m.citations.coverage.denominator)
    return SLOResult("citation_coverage", title, target, "pooled over runs", status, shown, samples, over)


def _slo_ken(per_run: list[tuple[str, int]]) -> SLOResult:
    title, target = "Ken query p95 (top-50)", f"p95 <= {_limit(SLO_KEN_P95_US)}"
    statistic = "max over runs of each run's p95"
    if not per_run:
        return SLOResult("ken_p95", title, target, statistic, "no_data", "no Ken query in the window", 0, [])
    worst = max(us for _, us in per_run)
    over = [name for name, us in per_run if us > SLO_KEN_P95_US]
    status: SLOStatus = "met" if worst <= SLO_KEN_P95_US else "not_met"
    return SLOResult("ken_p95", title, target, statistic, status, ms(worst), len(per_run), over)


def summarise(runs: Sequence[RunMetrics]) -> MetricsReport:
    """The report over ``runs`` (in any order; the result does not depend on it)."""
    ordered = sorted(runs, key=lambda r: r.key)
    measured = [(r.name, r.metrics) for r in ordered if r.metrics is not None]
    timed = [(n, m.measurements) for n, m in measured if m.measurements is not None]
    ttfs = [(r.name, us) for r in ordered if (us := ttfs_sample(r)) is not None]
    after_queue = [us for r in ordered if (us := ttfs_sample(r, queue=False)) is not None]
    ken = [(n, x.ken.p95_us) for n, x in timed if x.ken.p95_us is not None]
    waits = [w.waited_us for _, x in timed for w in x.approval_waits]
    ken_max = [x.ken.max_us for _, x in timed if x.ken.max_us is not None]
    dists = {
        "ttfs_us": Distribution.of("us", [us for _, us in ttfs]),
        "ttfs_after_queue_us": Distribution.of("us", after_queue),
        "queue_us": Distribution.of("us", [x.queued_us for _, x in timed if x.queued_us is not None]),
        "ken_query_p95_us": Distribution.of("us", [us for _, us in ken]),
        "ken_query_max_us": Distribution.of("us", ken_max),
        "ken_queries": Distribution.of("queries", [m.ken_queries for _, m in measured]),
        "approval_wait_us": Distribution.of("us", waits),
        "run_total_us": Distribution.of("us", [x.total_us for _, x in timed]),
        "frontier_size": Distribution.of("hypotheses", [m.frontier.final for _, m in measured]),
        "constraints_satisfied": Distribution.of("clauses", [m.constraints.satisfied for _, m in measured]),
        "constraints_violated": Distribution.of("clauses", [m.constraints.violated for _, m in measured]),
    }
    coverage = _pool(measured, lambda m: (m.citations.coverage.numerator, m.citations.coverage.denominator))
    ratios = {
        "verifier_pass_rate": _pool(measured, lambda m: (m.verifiers.pass_rate.numerator,
                                                         m.verifiers.pass_rate.denominator)),
        "citation_coverage": coverage,
        "partial_ratio": Ratio(numerator=sum(1 for r in ordered if r.status == "partial"), denominator=len(ordered)),
    }
    ends = [r.ended_at for r in ordered if r.ended_at is not None]
    report = MetricsReport(
        runs=len(ordered), statuses=dict(Counter(r.status for r in ordered)),
        without_metrics=[r.name for r in ordered if r.metrics is None],
        first_end=min(ends) if ends else None, last_end=max(ends) if ends else None,
        distributions=dists, ratios=ratios,
        slos=[_slo_ttfs(ttfs), _slo_citations(measured, coverage), _slo_ken(ken)],
        uncited_claims=sum(len(m.citations.uncited) for _, m in measured),
    )
    drafted = sum(1 for _, x in timed if x.ttfs_us is not None)
    if len(ttfs) > drafted:
        report.notes.append(f"{len(ttfs) - drafted} run(s) sent no draft: timed in TTFS by their first summary, "
                            "else their whole run")
    untimed = len(timed) - len(ttfs)
    if untimed:
        report.notes.append(f"{untimed} failed or escalated run(s) sent no draft: not in TTFS")
    return report
