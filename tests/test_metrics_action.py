"""Spec §10 metrics of one action, measured by the runner (cda.actions.metrics).

Oracles: a small action whose every count is derived by hand in the comments below; the
receipt store (each verifier outcome leaves a receipt, counted independently); a fake clock
whose every tick the test controls (TTFS and total time are then exact); the event store in
SQLite, from which the metrics must be recoverable; and a second run / the other backend for
determinism.
"""

from __future__ import annotations

import time
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest

from cda.actions.metrics import ActionProbe, TimedKen, action_counts, citation_coverage
from cda.actions.receipts import ReceiptLog
from cda.actions.runner import run_action
from cda.adapters.action_entry import run_inputs
from cda.adapters.event_store import EventStore
from cda.contracts.action import ActionVerdict, CDAInputs
from cda.contracts.events import ActionEvent, event_without_time
from cda.contracts.metrics import (
    METRICS,
    ActionMetrics,
    ApprovalWait,
    LatencySummary,
    Ratio,
    nearest_rank,
)
from cda.contracts.refs import SpanRef
from cda.contracts.verification import VerifierOutcome
from cda.ken.graph import KenGraph

# Three services; a depends on b. Hypotheses: which one is down.
DSL = """domain S = {a, b, c}
hyp down(S)
observable slow(S)
pred dep(S, S)
fact dep(a, b)
hard prop: forall s in S: slow(s) iff (down(s) or exists t in S: dep(s, t) and slow(t))
hard single: at_most(1, [down(a), down(b), down(c)])
hard c_up: not down(c)
soft a_rare weight 1: not down(a)
soft b_rare weight 2: not down(b)
"""
#: the observation arrives as an input (a pager's span), not as a line of the problem's text
PAGER = {"kind": "span", "source": "pager:17", "excerpt": "observe slow(a)"}


def _small(**update: Any) -> CDAInputs:
    data: dict[str, Any] = {
        "problem": "Why is a slow?",
        "dsl": DSL,
        "goals": {"kind": "best_explanation", "claims": ["slow(a)", "not down(c)", "dep(a, b)"],
                  "success_criteria": ["1 + 1 = 2", "2 + 2 = 5"]},
        "ken": {"nodes": [{"id": "a"}, {"id": "b"}], "edges": [{"source": "a", "relation": "dep", "target": "b"}]},
        "observations": [PAGER],
    }
    data.update(update)
    return CDAInputs.model_validate(data)


def _terminal_metrics(events: list[ActionEvent]) -> ActionMetrics:
    last = events[-1]
    assert last.type in ("action_completed", "action_partial", "action_failed")
    metrics = last.metrics  # type: ignore[union-attr]
    assert metrics is not None and metrics.measurements is not None
    return metrics


def test_a_small_action_counted_by_hand() -> None:
    log = ReceiptLog(":memory:")
    run = run_action(_small(), receipts=log)
    m = run.outputs.metrics
    assert m is not None and m.measurements is None  # outputs carry the counts only
    assert (m.status, m.partial) == ("completed", False) and run.outputs.status == "completed"

    # Frontier. Abducibles: down(a), down(b), down(c) -> 3 seeds. c_up rules out down(c);
    # slow(a) needs down(a), or dep(a, b) and slow(b), i.e. down(b); single fault: exactly one.
    # So the one round lists {down(a)} and {down(b)}: 2, and that enumeration is complete.
    assert (m.frontier.seeds, m.frontier.per_round, m.frontier.final, m.frontier.max) == (3, [2], 2, 2)
    assert m.frontier.complete and m.frontier.enumerated == 2

    # Constraints. Hard: prop, single, c_up and the observation (the fact on the closed
    # predicate dep is folded, not a clause) = 4, all hold. Soft: a_rare, b_rare = 2; the best
    # hypothesis, down(a) (cost 1 < 2), violates a_rare only.
    c = m.constraints
    assert c.basis == "best_hypothesis"
    assert (c.hard_total, c.hard_satisfied, c.hard_violated) == (4, 4, 0)
    assert (c.soft_total, c.soft_satisfied, c.soft_violated) == (2, 1, 1)
    assert (c.satisfied, c.violated, c.violated_names) == (5, 1, ["a_rare"])

    # Verifiers. Passed: citation of "prove slow(a)" (rests on the observation) 1, agreement
    # of z3 and clingo 1, arithmetic "1 + 1 = 2" 1, Ken has the edge a -dep-> b 1, the offline
    # LLM agrees with all 5 claims (3 goals + 2 explanations) 5 -> 9. Failed: "2 + 2 = 5" 1,
    # the low-coverage review (Ken knows no root cause of anything) 1 -> 2. Undecided: Ken has
    # nothing on slow(a), down(a), down(b), and "not down(c)" is no atom it can check -> 4.
    v = m.verifiers
    assert (v.passed, v.failed, v.undecided) == (9, 2, 4)
    assert v.pass_rate == Ratio(numerator=9, denominator=11)
    assert v.by_verifier == {
        "agreement": Ratio(numerator=1, denominator=1), "arithmetic": Ratio(numerator=1, denominator=2),
        "citation": Ratio(numerator=1, denominator=1), "ken": Ratio(numerator=1, denominator=1),
        "llm": Ratio(numerator=5, denominator=5), "low_coverage": Ratio(numerator=0, denominator=1),
    }
    # the same rate from the receipt store, read independently of the runner's count
    statuses = [e.receipt.result.get("status") for e in log.entries() if e.receipt.kind == "verifier"]
    assert (statuses.count("passed"), statuses.count("failed")) == (9, 2)

    # Citation coverage. Supported: the three goals (the explanations are two, so neither is
    # settled). "slow(a)" cites its input observation, "dep(a, b)" Ken's edge; "not down(c)" rests on
    # the hard clause c_up alone: 2 of 3, and the uncited one is listed with its clause.
    supported = [x.hypothesis_id for x in run.outputs.verdicts if x.status == "supported"]
    assert len(supported) == 3
    cov = m.citations
    assert cov.coverage == Ratio(numerator=2, denominator=3) and cov.coverage.value == Fraction(2, 3)
    assert [u.claim for u in cov.uncited] == ["prove not down(c)"]
    assert cov.uncited[0].stands_on == "solver" and cov.uncited[0].justification == ["c_up"]
    assert sorted(cov.cited + [u.hypothesis_id for u in cov.uncited]) == sorted(supported)

    # Ken queries: counted by the runner, timed one by one
    measured = _terminal_metrics(run.events)
    assert m.ken_queries > 0 and measured.measurements is not None
    assert measured.measurements.ken.count == m.ken_queries
    assert measured.model_copy(update={"measurements": None}) == m


def test_the_boundary_summary_says_which_claims_stand_on_the_solver_alone() -> None:
    run = run_action(_small())
    summary = next(e for e in reversed(run.events) if e.type == "action_checkpoint"  # type: ignore[union-attr]
                   and e.kind == "boundary_summary").payload["text"]  # type: ignore[union-attr]
    support = summary.split("## Support\n", 1)[1].split("\n## ", 1)[0]
    assert "citation coverage: 2 of 3 supported claim(s)" in support
    assert "- on the solver alone, no citation: prove not down(c) (clauses c_up)" in support
    assert "slow(a)" not in support and "dep(a, b)" not in support  # the cited ones are the Decisions


def test_the_problems_own_observe_line_is_not_a_citation() -> None:
    # the same observation as a line of the DSL, with no input behind it: it cites the problem to
    # itself (dsl:line:N), so slow(a) now stands on the solver alone
    run = run_action(_small(dsl=DSL + "observe slow(a)\n", observations=[]))
    cov = run.outputs.metrics.citations  # type: ignore[union-attr]
    assert cov.coverage == Ratio(numerator=1, denominator=3)
    assert sorted(u.claim for u in cov.uncited) == ["prove not down(c)", "prove slow(a)"]
    assert all(u.stands_on == "solver" for u in cov.uncited)
    summary = next(e for e in reversed(run.events) if e.type == "action_checkpoint"  # type: ignore[union-attr]
                   and e.kind == "boundary_summary").payload["text"]  # type: ignore[union-attr]
    assert "citation coverage: 1 of 3 supported claim(s)" in summary
    assert "- on the solver alone, no citation: prove slow(a)" in summary
    # and by itself: a dsl:line citation is none, an input's span or a Ken node is one
    verdict = ActionVerdict(hypothesis_id="prove@1", status="supported", confidence=1.0, band="high",
                            claim="prove ok(x)")
    for source, counted in (("dsl:line:3", 0), ("pager:1", 1), ("ken:node:x", 1)):
        outcome = VerifierOutcome(verifier="citation", claim="prove ok(x)", status="passed", detail="cited",
                                  citations=[SpanRef(source=source, excerpt="observe ok(x)")])
        assert citation_coverage([verdict], [outcome], None).coverage == Ratio(numerator=counted, denominator=1)


def test_a_clause_name_is_not_a_citation() -> None:
    verdict = ActionVerdict(hypothesis_id="prove@1", status="supported", confidence=1.0, band="high",
                            claim="prove ok(x)")
    named = VerifierOutcome(verifier="citation", claim="prove ok(x)", status="passed", detail="rests on hard@3",
                            data={"justification": ["hard@3"]})
    assert citation_coverage([verdict], [named], None).coverage == Ratio(numerator=0, denominator=1)
    cited = named.model_copy(update={"citations": [SpanRef(source="pager:1", excerpt="observe ok(x)")]})
    assert citation_coverage([verdict], [cited], None).coverage == Ratio(numerator=1, denominator=1)
    # an uncited claim with no justification at all stands on nothing recorded
    assert citation_coverage([verdict], [named], None).uncited[0].stands_on == "nothing"


def test_an_unsat_problem_counts_the_clauses_of_its_cores() -> None:
    # x and y contradict each other: the one core is {x, y}; z is outside it
    inputs = CDAInputs.model_validate({"dsl": "domain S = {a, b}\nhyp down(S)\nhard x: down(a)\n"
                                              "hard y: not down(a)\nhard z: not down(b)\n"})
    m = run_action(inputs).outputs.metrics
    assert m is not None
    c = m.constraints
    assert (c.basis, c.hard_total, c.hard_violated, c.hard_satisfied, c.violated_names) == (
        "conflict", 3, 2, 1, ["x", "y"])
    assert m.frontier.per_round == [0] and m.frontier.final == 0


class _Ticks:
    """A clock that moves only when told: each event the run emits advances it by one second."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now

    def tick(self, _event: ActionEvent) -> None:
        self.now += 1.0


def test_ttfs_and_total_are_exact_on_a_clock_the_test_controls() -> None:
    ticks = _Ticks()
    run = run_action(_small(), clock=ticks, subscribers=[ticks.tick])
    m = _terminal_metrics(run.events).measurements
    assert m is not None
    # the probe stamps each event before the ticking subscriber sees it: the draft summary is
    # stamped after one tick per earlier event, and the total after every event but the last
    draft = next(e.seq for e in run.events if e.type == "action_checkpoint" and e.kind == "boundary_summary"  # type: ignore[union-attr]
                 and e.payload.get("draft") is True)  # type: ignore[union-attr]
    assert m.ttfs_us == draft * 1_000_000 == m.first_summary_us
    assert m.total_us == (len(run.events) - 1) * 1_000_000
    assert 0 < m.ttfs_us < m.total_us
    assert m.ken.count > 0 and m.ken.max_us == 0  # no tick inside a Ken query


def test_ken_queries_are_timed_one_by_one() -> None:
    ken = KenGraph()
    ken.add_edge("api", "depends", "auth")
    ken.add_edge("auth", "depends", "db")
    clock = iter([0.0, 0.001, 1.0, 1.003, 2.0, 2.010, 3.0, 3.0005])
    spent: list[int] = []
    timed = TimedKen.over(ken, lambda: next(clock), spent)
    assert timed.path("api", "db", relation="depends") == ["api", "auth", "db"]
    assert timed.related_by("api", "depends") == ["auth"]
    assert timed.neighborhood("auth") == ["api", "db"]
    assert timed.search("au") == ["auth"]
    assert spent == [1000, 3000, 10000, 500]
    assert LatencySummary.of(spent) == LatencySummary(count=4, total_us=14500, p50_us=1000, p95_us=10000,
                                                      max_us=10000)
    assert not ken._store.frozen and len(ken) == 3  # a view: the graph was neither copied nor changed


def test_measured_latencies_are_consistent_on_a_real_clock() -> None:
    started = time.monotonic()
    run = run_action(_small())
    wall_us = (time.monotonic() - started) * 1_000_000
    m = _terminal_metrics(run.events).measurements
    assert m is not None and m.ttfs_us is not None and m.ken.p95_us is not None and m.ken.p50_us is not None
    assert m.ttfs_us <= m.total_us <= wall_us
    assert m.ken.p50_us <= m.ken.p95_us <= m.ken.max_us  # type: ignore[operator]
    assert m.ken.max_us <= m.ken.total_us <= m.total_us  # type: ignore[operator]


def test_same_inputs_same_bytes_and_both_backends_the_same_counts(tmp_path: Path) -> None:
    a = run_action(_small())
    b = run_action(_small())
    assert a.outputs.model_dump_json() == b.outputs.model_dump_json()
    assert [event_without_time(e) for e in a.events] == [event_without_time(e) for e in b.events]
    assert a.receipts_head == b.receipts_head
    assert _terminal_metrics(a.events).measurements is not None  # the times are there, outside determinism
    z = run_action(_small(backend="z3")).outputs.metrics
    c = run_action(_small(backend="clingo")).outputs.metrics
    assert z is not None and c is not None
    assert z.model_dump(exclude={"action_id"}) == c.model_dump(exclude={"action_id"})


def test_every_metric_is_recoverable_from_the_sqlite_event_store(tmp_path: Path) -> None:
    run = run_inputs(_small(), tmp_path)
    store = EventStore(tmp_path / "receipts.sqlite")
    try:
        stored = store.since(run.outputs.action_id)
    finally:
        store.close()
    last = stored[-1]
    assert last.type == "action_completed"
    assert last.metrics == _terminal_metrics(run.events)  # type: ignore[union-attr]
    assert last.outputs is not None and last.outputs.metrics == run.outputs.metrics  # type: ignore[union-attr]


def test_a_failed_run_reports_its_metrics_too() -> None:
    run = run_action(CDAInputs.model_validate({"dsl": "domain S = {a\n"}))
    assert run.outputs.status == "failed"
    m = _terminal_metrics(run.events)
    assert (m.status, m.partial, m.frontier.per_round, m.constraints.basis) == ("failed", False, [], "none")
    assert m.measurements is not None and m.measurements.ttfs_us is None and m.measurements.total_us > 0


def test_approval_waits_are_summarised() -> None:
    waits = [ApprovalWait(approval="egress:external", granted=True, waited_us=2_000_000),
             ApprovalWait(approval="pii:consent", granted=False, waited_us=500_000)]
    run = run_action(_small(), approval_waits=waits)
    m = _terminal_metrics(run.events).measurements
    assert m is not None and m.approval_waits == waits
    assert m.approvals == LatencySummary(count=2, total_us=2_500_000, p50_us=500_000, p95_us=2_000_000,
                                         max_us=2_000_000)


def test_the_service_measures_how_long_an_approval_waited(tmp_path: Path) -> None:
    from cda.adapters.auth import Principal
    from cda.service.actions import ActionManager

    class _Hub:
        live: set[str] = set()

        def publish_threadsafe(self, topic: str, event: object) -> None:
            pass

    manager = ActionManager(tmp_path / "svc.sqlite", _Hub(), workers=1)  # type: ignore[arg-type]
    who = Principal(name="t", role="internal", approves=True)
    try:
        asked = time.monotonic()
        started = manager.start(who, _small(policies={"pii_posture": "consent"}))
        assert started.status == "waiting_user"
        time.sleep(0.05)
        manager.decide(who, started.action_id, "pii:consent", True, "ok")
        decided = time.monotonic()
        deadline = time.monotonic() + 30
        while manager.get(started.action_id).status in ("running", "waiting_user") and time.monotonic() < deadline:
            time.sleep(0.02)
        stored = manager.events.since(started.action_id)
    finally:
        manager.shutdown()
    m = _terminal_metrics(stored).measurements
    assert m is not None and [(w.approval, w.granted) for w in m.approval_waits] == [("pii:consent", True)]
    assert 50_000 <= m.approval_waits[0].waited_us <= (decided - asked) * 1_000_000
    assert m.approvals.count == 1 and m.approvals.max_us == m.approval_waits[0].waited_us


def test_the_catalogue_names_a_real_field_for_every_metric() -> None:
    m = _terminal_metrics(run_action(_small()).events)
    for info in METRICS:
        for path in info.path.split(", "):
            value: Any = m
            for part in path.split("."):
                value = getattr(value, part)
            assert value is not None or path.endswith("_us"), (info.name, path)
    assert [i.name for i in METRICS] == [
        "hypothesis frontier size", "constraints satisfied/violated", "verifier pass rate", "citation coverage",
        "Ken query p95", "TTFS", "partial ratio", "approvals latency"]


@pytest.mark.parametrize(("values", "q", "expected"), [
    ([1, 2, 3, 4, 5, 6, 7, 8, 9, 10], Fraction(95, 100), 10),
    ([7], Fraction(95, 100), 7),
    (list(range(1, 101)), Fraction(95, 100), 95),
    (list(range(1, 21)), Fraction(95, 100), 19),
    ([3, 1, 2, 4], Fraction(1, 2), 2),
])
def test_nearest_rank_by_hand(values: list[int], q: Fraction, expected: int) -> None:
    assert nearest_rank(values, q) == expected


def test_counts_of_a_run_without_a_round() -> None:
    m = action_counts("cda-x", "partial")
    assert m.partial and m.frontier.per_round == [] and m.constraints.basis == "none"
    assert m.citations.coverage.value is None and m.verifiers.pass_rate.value is None


def test_a_ratio_is_never_above_one() -> None:
    with pytest.raises(ValueError, match="exceeds its denominator"):
        Ratio(numerator=3, denominator=2)


def test_the_probe_notes_the_first_draft_even_after_a_final_summary() -> None:
    from cda.contracts.events import ActionCheckpoint

    ticks = iter([0.0, 1.0, 2.0, 5.0])
    probe = ActionProbe(lambda: next(ticks))
    probe.see(ActionCheckpoint(action_id="a", seq=0, kind="boundary_summary", payload={"draft": False}))
    probe.see(ActionCheckpoint(action_id="a", seq=1, kind="boundary_summary", payload={"draft": True}))
    m = probe.measurements()
    assert (m.first_summary_us, m.ttfs_us, m.total_us) == (1_000_000, 2_000_000, 5_000_000)


def test_every_ken_query_of_the_run_is_timed_the_grounders_included(monkeypatch: pytest.MonkeyPatch) -> None:
    # the oracle: every call of the four safe-set queries on any KenGraph, counted at the class
    calls: list[str] = []
    for kind in ("search", "neighborhood", "related_by", "path"):
        inner = getattr(KenGraph, kind)

        def counting(self: KenGraph, *args: Any, _inner: Any = inner, _kind: str = kind, **kwargs: Any) -> Any:
            calls.append(_kind)
            return _inner(self, *args, **kwargs)

        monkeypatch.setattr(KenGraph, kind, counting)
    # dep is closed and has no facts here: the grounder reads dep(s, t) from Ken (related_by)
    inputs = _small(dsl=DSL.replace("fact dep(a, b)\n", ""))
    run = run_action(inputs)
    m = _terminal_metrics(run.events)
    assert "related_by" in calls and m.ken_queries == len(calls) == m.measurements.ken.count  # type: ignore[union-attr]


def test_a_merged_view_stays_timed() -> None:
    ken = KenGraph()
    ken.add_edge("a", "dep", "b")
    spent: list[int] = []
    ticks = iter([0.0, 0.002])
    merged = TimedKen.over(ken, lambda: next(ticks), spent).merged(KenGraph())
    assert isinstance(merged, TimedKen) and merged.related_by("a", "dep") == ["b"] and spent == [2000]
