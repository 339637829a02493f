"""The metrics of one CDA Action (docs/operations.md), measured by the runner itself.

Spec §10 names what an operator watches: hypothesis frontier size, constraints satisfied and
violated, verifier pass rate, citation coverage, Ken query p95, TTFS (time to the first
summary), the partial ratio and approvals latency, with three targets (:data:`SLO_TTFS_US`,
:data:`SLO_CITATION_COVERAGE`, :data:`SLO_KEN_P95_US`). :class:`ActionMetrics` is one run's
share of them; :data:`METRICS` says, for each, its unit and how it is measured.

Exact where it can be: a ratio is a :class:`Ratio` of two integers (never a float), a time is
an integer number of microseconds (``*_us``) on the runner's monotonic clock, a percentile is
the nearest-rank one (:func:`nearest_rank`, a value that was observed, not an interpolation).

Two parts, because determinism is a ground rule (same inputs and seed, same bytes):

* the **counts** (frontier, constraints, verifiers, citations, partial) follow from the inputs
  alone; ``CDAOutputs.metrics`` carries them with ``measurements`` set to None, so outputs,
  artifact ids and the receipt chain stay byte-identical between runs and backends;
* the **measurements** (TTFS, total time, Ken latencies, approval waits) are wall-clock; they
  travel only in the terminal event's ``metrics`` (``action_completed|partial|failed``), which
  the event store keeps and :func:`cda.contracts.events.event_without_time` leaves out, as it
  leaves out ``ts``. Everything is therefore recoverable from the SQLite event store after the
  run: the terminal event of each attempt holds the whole :class:`ActionMetrics`.

Field names are stable: later versions add fields, they do not rename them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

__all__ = [
    "METRICS",
    "SLO_CITATION_COVERAGE",
    "SLO_KEN_P95_US",
    "SLO_TTFS_US",
    "ActionMeasurements",
    "ActionMetrics",
    "ApprovalWait",
    "CitationCoverage",
    "ConstraintMetrics",
    "FrontierMetrics",
    "LatencySummary",
    "MetricInfo",
    "Ratio",
    "UncitedClaim",
    "VerifierMetrics",
    "nearest_rank",
]

#: spec §10: "TTFS <= 3.0 s for boundary summary draft"
SLO_TTFS_US = 3_000_000
#: spec §10: "citation coverage >= 95% for supported claims"
SLO_CITATION_COVERAGE = Fraction(95, 100)
#: spec §10: "Ken p95 <= 700 ms @ top-50"
SLO_KEN_P95_US = 700_000


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


def nearest_rank(values: Sequence[int], q: Fraction) -> int | None:
    """The nearest-rank ``q`` percentile of ``values`` (None when there are none).

    The smallest value with at least ``q`` of all values at or below it: always one of the
    values, exact for integers, the same in every language.

    >>> nearest_rank([5, 1, 4, 2, 3], Fraction(95, 100)), nearest_rank([5, 1, 4, 2, 3], Fraction(1, 2))
    (5, 3)
    >>> nearest_rank([], Fraction(95, 100)) is None
    True
    """
    if not values:
        return None
    ordered = sorted(values)
    rank = -(-q.numerator * len(ordered) // q.denominator)  # ceil(q * n), in integers
    return ordered[max(1, rank) - 1]


class Ratio(_Model):
    """``numerator / denominator`` as two integers; ``0/0`` means "nothing to measure".

    >>> Ratio(numerator=19, denominator=20).value
    Fraction(19, 20)
    >>> Ratio(numerator=0, denominator=0).value is None
    True
    """

    numerator: int = Field(ge=0)
    denominator: int = Field(ge=0)

    @model_validator(mode="after")
    def _proper(self) -> Ratio:
        if self.numerator > self.denominator:
            raise ValueError(f"a ratio's numerator ({self.numerator}) exceeds its denominator ({self.denominator})")
        return self

    @property
    def value(self) -> Fraction | None:
        """The exact value, or None for ``0/0``."""
        return Fraction(self.numerator, self.denominator) if self.denominator else None


class LatencySummary(_Model):
    """How long a set of timed operations took, integer microseconds, nearest-rank percentiles."""

    count: int = Field(default=0, ge=0, description="operations timed")
    total_us: int = Field(default=0, ge=0, description="their summed duration, microseconds")
    p50_us: int | None = Field(default=None, ge=0, description="nearest-rank median, microseconds (None: none timed)")
    p95_us: int | None = Field(default=None, ge=0, description="nearest-rank 95th percentile, microseconds")
    max_us: int | None = Field(default=None, ge=0, description="the longest, microseconds")

    @classmethod
    def of(cls, durations_us: Sequence[int]) -> LatencySummary:
        """The summary of these durations.

        >>> LatencySummary.of([300, 100, 200]).model_dump()
        {'count': 3, 'total_us': 600, 'p50_us': 200, 'p95_us': 300, 'max_us': 300}
        """
        return cls(count=len(durations_us), total_us=sum(durations_us),
                   p50_us=nearest_rank(durations_us, Fraction(1, 2)),
                   p95_us=nearest_rank(durations_us, Fraction(95, 100)),
                   max_us=max(durations_us) if durations_us else None)


class FrontierMetrics(_Model):
    """Hypothesis frontier size: how many explanations the search held, round by round."""

    seeds: int = Field(default=0, ge=0, description="abducibles in the initial frontier (Ken's candidate causes "
                       "first, at most 50): the plan_delta of round 0")
    per_round: list[int] = Field(default_factory=list, description="hypotheses listed after each solver round "
                                 "(0 for a round whose answer was unsat)")
    final: int = Field(default=0, ge=0, description="hypotheses in the frontier the run reported")
    max: int = Field(default=0, ge=0, description="the largest frontier of any round")
    enumerated: int = Field(default=0, ge=0, description="hypotheses the last round enumerated before ranking")
    complete: bool = Field(default=False, description="whether the last round's enumeration was complete")


class ConstraintMetrics(_Model):
    """Constraints satisfied / violated, on the model the run reports.

    ``basis`` says which: ``best_hypothesis`` (the top-ranked hypothesis's cheapest model: every
    hard clause and observation holds, the soft clauses it pays for are violated),
    ``conflict`` (unsat: the hard clauses and observations named in an unsat core are violated,
    no soft clause is evaluated) or ``none`` (no solver round finished: nothing evaluated).
    """

    basis: Literal["best_hypothesis", "conflict", "none"] = "none"
    hard_total: int = Field(default=0, ge=0, description="hard clauses and observations of the final problem")
    hard_satisfied: int = Field(default=0, ge=0)
    hard_violated: int = Field(default=0, ge=0, description="clauses named in some unsat core (basis conflict)")
    soft_total: int = Field(default=0, ge=0, description="soft clauses of the final problem (softened observations "
                            "included, dropped soft clauses not)")
    soft_satisfied: int = Field(default=0, ge=0)
    soft_violated: int = Field(default=0, ge=0, description="soft clauses the best hypothesis pays for")
    satisfied: int = Field(default=0, ge=0, description="hard_satisfied + soft_satisfied")
    violated: int = Field(default=0, ge=0, description="hard_violated + soft_violated")
    violated_names: list[str] = Field(default_factory=list, description="which ones, sorted")


class VerifierMetrics(_Model):
    """Verifier pass rate: of the independent checks that decided (passed or failed), how many passed."""

    pass_rate: Ratio = Field(default_factory=lambda: Ratio(numerator=0, denominator=0),
                             description="passed / (passed + failed) over every verifier outcome of the run")
    passed: int = Field(default=0, ge=0)
    failed: int = Field(default=0, ge=0)
    undecided: int = Field(default=0, ge=0, description="outcomes neither passed nor failed (inconclusive, "
                           "skipped): outside the rate")
    by_verifier: dict[str, Ratio] = Field(default_factory=dict, description="the rate of each verifier, by name")


class UncitedClaim(_Model):
    """A supported claim without a citation: a finding, not a footnote."""

    hypothesis_id: str
    claim: str
    stands_on: Literal["solver", "nothing"] = Field(
        description="'solver': justified by clauses (the solver's proof) and by no cited evidence; "
        "'nothing': not even a justification was recorded")
    justification: list[str] = Field(default_factory=list, description="the clause names the solver's verdict rests on")


class CitationCoverage(_Model):
    """Citation coverage: the share of SUPPORTED claims carrying at least one citation.

    A citation is an input observation (its SpanRef, or its artifact id) or Ken evidence (a node
    or edge, as a SpanRef ``ken:…``), attached to the claim by a verifier outcome. A clause name
    is not a citation, nor is a line of the problem's own text (``dsl:line:N``, an ``observe``
    line no input stands behind): a claim the solver proves from its clauses and its own text
    alone stands on the solver and is listed in ``uncited``.
    """

    coverage: Ratio = Field(default_factory=lambda: Ratio(numerator=0, denominator=0),
                            description="supported claims with >= 1 citation / supported claims")
    cited: list[str] = Field(default_factory=list, description="hypothesis ids of the cited supported claims")
    uncited: list[UncitedClaim] = Field(default_factory=list)


class ApprovalWait(_Model):
    """One approval the action waited for, and how long (service: waiting_user -> decision)."""

    approval: str = Field(description="e.g. 'egress:external', 'pii:consent'")
    granted: bool
    waited_us: int = Field(ge=0, description="microseconds from the request to the decision")


class ActionMeasurements(_Model):
    """The wall-clock part: never in outputs, artifact ids or receipts (see the module docstring)."""

    clock: Literal["monotonic"] = Field(default="monotonic", description="the runner's clock (time.monotonic "
                                        "unless injected): durations only, no dates")
    total_us: int = Field(ge=0, description="run_action's start to its terminal event, microseconds")
    ttfs_us: int | None = Field(default=None, ge=0, description="start to the first boundary_summary checkpoint "
                                "with draft true, microseconds; None when the run sent no draft")
    first_summary_us: int | None = Field(default=None, ge=0, description="start to the first boundary_summary "
                                         "checkpoint of either kind (draft or final), microseconds")
    queued_us: int | None = Field(default=None, ge=0, description="a server's actions.start to the run's start "
                                  "(its queue: slots, the draft-first order, a runner process's hand-over), "
                                  "microseconds; time a person took to approve is not in it (approvals has it); "
                                  "None for a run no server queued (cda run)")
    ken: LatencySummary = Field(default_factory=LatencySummary, description="each Ken query of the safe set "
                                "(search, neighborhood, related_by, path) timed around the call")
    approvals: LatencySummary = Field(default_factory=LatencySummary, description="the approval waits below")
    approval_waits: list[ApprovalWait] = Field(default_factory=list)


class ActionMetrics(_Model):
    """Spec §10 for one run of one action; ``measurements`` is None where bytes must not vary."""

    version: Literal[1] = 1
    action_id: str
    status: str = Field(description="the run's status: completed | partial | failed | escalated | abstained")
    partial: bool = Field(description="status is partial (the partial ratio counts these over runs)")
    frontier: FrontierMetrics = Field(default_factory=FrontierMetrics)
    constraints: ConstraintMetrics = Field(default_factory=ConstraintMetrics)
    verifiers: VerifierMetrics = Field(default_factory=VerifierMetrics)
    citations: CitationCoverage = Field(default_factory=CitationCoverage)
    ken_queries: int = Field(default=0, ge=0, description="Ken queries the run made (deterministic; their "
                             "latencies are in measurements.ken)")
    measurements: ActionMeasurements | None = Field(
        default=None, description="wall-clock numbers: present in the terminal event's metrics, None in CDAOutputs")


@dataclass(frozen=True)
class MetricInfo:
    """One §10 metric: where it is in :class:`ActionMetrics`, its unit, how it is measured, its target."""

    name: str
    path: str
    unit: str
    measured: str
    target: str | None = None


METRICS: tuple[MetricInfo, ...] = (
    MetricInfo("hypothesis frontier size", "frontier.final", "hypotheses",
               "len(SolveResult.hypotheses) of each solver round (frontier.per_round), the last reported"),
    MetricInfo("constraints satisfied/violated", "constraints.satisfied, constraints.violated", "clauses",
               "evaluated on the best hypothesis's model (or the unsat cores): constraints.basis says which"),
    MetricInfo("verifier pass rate", "verifiers.pass_rate", "ratio (integers)",
               "passed / (passed + failed) over every VerifierOutcome of the run"),
    MetricInfo("citation coverage", "citations.coverage", "ratio (integers)",
               "supported claims with >= 1 input-observation or Ken citation (not dsl:line:N) / supported "
               "claims; uncited ones listed",
               f">= {SLO_CITATION_COVERAGE.numerator}/{SLO_CITATION_COVERAGE.denominator}"),
    MetricInfo("Ken query p95", "measurements.ken.p95_us", "microseconds",
               "each safe-set Ken query timed by the runner (monotonic clock), nearest-rank p95",
               f"<= {SLO_KEN_P95_US} us"),
    MetricInfo("TTFS", "measurements.ttfs_us", "microseconds",
               "run start (after a server's queue) to the first boundary_summary checkpoint with draft true "
               "(monotonic clock); the SLO judges it from actions.start: measurements.queued_us + ttfs_us; "
               "across runs a run without a draft is timed by first_summary_us, else total_us",
               f"<= {SLO_TTFS_US} us"),
    MetricInfo("partial ratio", "partial", "boolean per run (ratio over runs)", "status == 'partial'"),
    MetricInfo("approvals latency", "measurements.approvals.p95_us", "microseconds",
               "each approval the action waited for: request to decision, as its caller measured it"),
)
"""The §10 catalogue, in the spec's order."""
