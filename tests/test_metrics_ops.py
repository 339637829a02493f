"""``cda metrics STORE``: spec §10 across real runs, judged against the runs' own records.

The store is built the way an operator's is: real small Actions run into one SQLite file
(``run_inputs`` as ``cda run --out`` does, and ``run_action`` on the same file for the two runs
whose clock or approvals a test sets). Every expected number is computed here, independently
of :mod:`cda.actions.metrics_report`: from the terminal events the runs returned in memory,
with numpy's ``inverted_cdf`` percentile (the nearest-rank definition) and plain sums.
"""

from __future__ import annotations

import hashlib
import io
import json
import time
from collections.abc import Callable
from datetime import UTC, datetime
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from cda.actions.receipts import ReceiptLog
from cda.actions.runner import ActionRun, run_action
from cda.adapters.action_entry import run_inputs
from cda.adapters.event_store import EventStore
from cda.cli.main import main
from cda.contracts.action import CDAInputs
from cda.contracts.metrics import ActionMetrics, ApprovalWait
from tests.conftest import ROOT

EXAMPLE = ROOT / "examples" / "action" / "service_outage.json"
#: proved from hard clauses alone: its explanation is a supported claim with no citation
SOLVER_ONLY = "hyp a\nhyp b\nobservable o\nhard: o iff (a or b)\nhard: not b\nobserve o\n"


def cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(["metrics", *argv], out, err)
    return code, out.getvalue(), err.getvalue()


def outage(purpose: str) -> CDAInputs:
    data = json.loads(EXAMPLE.read_text(encoding="utf-8"))
    data["seed"] = {"purpose": purpose}
    return CDAInputs.model_validate(data)


def solver_only(purpose: str) -> CDAInputs:
    return CDAInputs(problem="which one?", dsl=SOLVER_ONLY, goals={"kind": "prove", "claims": ["a"]},
                     seed={"purpose": purpose})


def run_into(db: Path, inputs: CDAInputs, **kwargs: Any) -> ActionRun:
    """``run_action`` writing its events and receipts into the store ``db`` (as the service does)."""
    events, log = EventStore(db), ReceiptLog(db)
    try:
        return run_action(inputs, receipts=log, subscribers=[events.append], **kwargs)
    finally:
        log.close()
        events.close()


def jump_after_first(seconds: float) -> Callable[[], float]:
    """A monotonic clock that is ``seconds`` ahead from its second reading on: the run's first
    reading (its start) and every later one are ``seconds`` apart, as if the run had stalled."""
    calls = 0

    def clock() -> float:
        nonlocal calls
        calls += 1
        return time.monotonic() + (seconds if calls > 1 else 0.0)

    return clock


def name(run: ActionRun) -> str:
    return run.outputs.action_id if run.attempt <= 1 else f"{run.outputs.action_id}#{run.attempt}"


def metrics_of(run: ActionRun) -> ActionMetrics:
    """The metrics the run's own terminal event carried (in memory, not read back from the store)."""
    m = run.events[-1].metrics  # type: ignore[union-attr]
    assert isinstance(m, ActionMetrics) and m.measurements is not None
    return m


def nearest(values: list[int], q: int) -> int | None:
    return None if not values else int(np.percentile(np.array(values), q, method="inverted_cdf"))


def expect_distribution(values: list[int]) -> dict[str, Any]:
    return {"count": len(values), "sum": sum(values), "min": min(values, default=None),
            "p50": nearest(values, 50), "p95": nearest(values, 95), "max": max(values, default=None)}


def file_state(path: Path) -> tuple[str, list[str]]:
    return hashlib.sha256(path.read_bytes()).hexdigest(), sorted(p.name for p in path.parent.iterdir())


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[ActionRun]]:
    """Four real runs in one store: the outage example twice (Ken, cited claims), one proved by
    the solver alone (an uncited supported claim), and one whose clock stalled 4 s before its
    first draft summary, which also waited for an approval."""
    out = tmp_path_factory.mktemp("metrics_store")
    db = out / "receipts.sqlite"
    runs = [run_inputs(outage("m1"), out, base_dir=EXAMPLE.parent),
            run_inputs(outage("m2"), out, base_dir=EXAMPLE.parent),
            run_inputs(solver_only("m3"), out)]
    slow_inputs = outage("m4").model_copy(update={"ken": None})
    runs.append(run_into(db, slow_inputs, clock=jump_after_first(4.0),
                         approval_waits=[ApprovalWait(approval="egress:external", granted=True, waited_us=1_234_567)]))
    return db, runs


def test_distributions_match_the_runs_own_records(store: tuple[Path, list[ActionRun]]) -> None:
    db, runs = store
    before = file_state(db)
    code, text, err = cli(str(db), "--json")
    assert file_state(db) == before  # read-only, no -wal/-shm left
    doc = json.loads(text)
    assert err == "" and doc["runs"] == len(runs)
    ms = [metrics_of(r) for r in runs]
    xs = [m.measurements for m in ms]
    assert all(x is not None for x in xs)
    ttfs = [x.ttfs_us for x in xs if x is not None and x.ttfs_us is not None]
    assert len(ttfs) == len(runs)
    expected = {
        "ttfs_us": ttfs,
        "run_total_us": [x.total_us for x in xs if x is not None],
        "ken_query_p95_us": [x.ken.p95_us for x in xs if x is not None and x.ken.p95_us is not None],
        "ken_query_max_us": [x.ken.max_us for x in xs if x is not None and x.ken.max_us is not None],
        "ken_queries": [m.ken_queries for m in ms],
        "approval_wait_us": [w.waited_us for x in xs if x is not None for w in x.approval_waits],
        "frontier_size": [m.frontier.final for m in ms],
        "constraints_satisfied": [m.constraints.satisfied for m in ms],
        "constraints_violated": [m.constraints.violated for m in ms],
    }
    assert expected["approval_wait_us"] == [1_234_567]
    assert len(expected["ken_query_p95_us"]) == 2  # the two runs with a Ken graph
    for key, values in expected.items():
        got = {k: v for k, v in doc["metrics"][key].items() if k != "unit"}
        assert got == expect_distribution(values), key
    for key, pick in (("verifier_pass_rate", lambda m: m.verifiers.pass_rate),
                      ("citation_coverage", lambda m: m.citations.coverage)):
        num, den = sum(pick(m).numerator for m in ms), sum(pick(m).denominator for m in ms)
        assert (doc["metrics"][key]["numerator"], doc["metrics"][key]["denominator"]) == (num, den), key
    partial = sum(1 for r in runs if r.outputs.status == "partial")
    assert doc["metrics"]["partial_ratio"] | {"percent": None} == {"numerator": partial, "denominator": len(runs),
                                                                   "percent": None}
    assert doc["statuses"] == {s: sum(1 for r in runs if r.outputs.status == s) for s in {r.outputs.status for r in runs}}
    assert doc["uncited_claims"] == sum(len(m.citations.uncited) for m in ms)


def test_slos_name_the_runs_that_break_them(store: tuple[Path, list[ActionRun]]) -> None:
    db, runs = store
    code, text, _ = cli(str(db), "--json")
    doc = json.loads(text)
    slos = {s["slo"]: s for s in doc["slos"]}
    ms = {name(r): metrics_of(r) for r in runs}
    # TTFS: the stalled run (4 s) is over 3 s; nearest-rank p95 of 4 runs is the largest
    over_ttfs = [n for n, m in ms.items() if m.measurements and (m.measurements.ttfs_us or 0) > 3_000_000]
    assert over_ttfs == [name(runs[3])]
    assert slos["ttfs"]["status"] == "not_met" and slos["ttfs"]["breaking_runs"] == over_ttfs
    # citation coverage: pooled over runs, and the runs below 95% named
    ratios = {n: m.citations.coverage for n, m in ms.items()}
    pooled = Fraction(sum(r.numerator for r in ratios.values()), sum(r.denominator for r in ratios.values()))
    low = [n for n, r in ratios.items() if r.denominator and Fraction(r.numerator, r.denominator) < Fraction(95, 100)]
    assert name(runs[2]) in low  # the solver-only run's claim has no citation
    assert pooled < Fraction(95, 100)  # the uncited claim pulls the pool below the target: pinned, not either way
    assert slos["citation_coverage"]["status"] == "not_met"
    assert slos["citation_coverage"]["runs_over_target"] == low
    # Ken: each run's p95 is far below 700 ms on loopback data
    assert slos["ken_p95"]["status"] == "met" and slos["ken_p95"]["samples"] == 2
    assert code == doc["exit_code"] == 1
    code, text, _ = cli(str(db))
    assert code == 1
    assert "NOT MET  TTFS" in text and name(runs[3]) in text


def test_since_keeps_only_the_runs_that_ended_in_the_window(tmp_path: Path) -> None:
    db = tmp_path / "receipts.sqlite"
    old_clock = lambda: time.time() - 3 * 86400  # noqa: E731 - a run that ended three days ago
    run_into(db, outage("old").model_copy(update={"ken": None}), wall_clock=old_clock)
    recent = run_into(db, outage("new").model_copy(update={"ken": None}))
    code, text, _ = cli(str(db), "--since", "2d", "--json")
    doc = json.loads(text)
    assert doc["runs"] == 1 and doc["metrics"]["ttfs_us"]["max"] == metrics_of(recent).measurements.ttfs_us  # type: ignore[union-attr]
    # no run queried Ken: that SLO has no data, so the gate does not pass (exit 3), the others are met
    assert {s["slo"]: s["status"] for s in doc["slos"]} == {"ttfs": "met", "citation_coverage": "met",
                                                            "ken_p95": "no_data"}
    assert code == 3
    assert json.loads(cli(str(db), "--json")[1])["runs"] == 2
    iso = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() - 86400))
    assert json.loads(cli(str(db), "--since", iso, "--json")[1])["runs"] == 1
    after_all = datetime.fromtimestamp(time.time() + 1, UTC).isoformat()  # a second after the last run ended
    code, text, _ = cli(str(db), "--since", after_all)
    assert code == 3 and "no run in the window" in text  # nothing to judge is not "met"
    code, text, _ = cli(str(tmp_path))  # the cda run --out folder is accepted for its store
    assert code == 3 and "2 run(s)" in text  # still no Ken query: exit 3


@pytest.mark.parametrize("since", ["yesterday", "5x", "0s", "-1h", "99999999999w", "2999-01-01", "2026-13-01",
                                   "nan", ""])
def test_a_bad_since_is_a_usage_error(tmp_path: Path, since: str) -> None:
    db = tmp_path / "receipts.sqlite"
    EventStore(db).close()
    code, out, err = cli(str(db), f"--since={since}")
    assert code == 2 and out == "" and err.startswith("cda: error: --since") and "Traceback" not in err


def test_what_is_not_a_store_is_refused_and_left_as_it_was(tmp_path: Path) -> None:
    import sqlite3

    code, _, err = cli(str(tmp_path / "missing.sqlite"))
    assert code == 2 and "no such file" in err
    code, _, err = cli(str(tmp_path))
    assert code == 2 and "without receipts.sqlite" in err
    text = tmp_path / "notes.txt"
    text.write_text("not a database\n" * 100, encoding="utf-8")
    foreign = tmp_path / "other.db"
    conn = sqlite3.connect(foreign)
    conn.execute("CREATE TABLE events (x)")
    conn.commit()
    conn.close()
    for path, says in ((text, "not an SQLite database"), (foreign, "not a CDA file")):
        before = file_state(path)
        code, out, err = cli(str(path), "--json")
        assert code == 2 and says in err and "Traceback" not in err, err
        assert says in json.loads(out)["message"]  # with --json the mistake is one JSON object on stdout too
        assert file_state(path) == before
    empty = tmp_path / "empty.sqlite"
    EventStore(empty).close()  # a CDA store no run has ended in yet
    code, out, _ = cli(str(empty), "--json")
    assert code == 3 and json.loads(out)["runs"] == 0 and {s["status"] for s in json.loads(out)["slos"]} == {"no_data"}


def test_cda_metrics_loads_no_service_and_no_opentelemetry(store: tuple[Path, list[ActionRun]]) -> None:
    from tests.test_startup_imports import loaded

    code, mods = loaded("metrics", str(store[0]))
    assert code == 1
    assert not {"opentelemetry", "starlette", "uvicorn", "cda.actions.runner", "z3", "clingo"} & mods


def otel_points(metrics_data: Any) -> dict[str, dict[str, Any]]:
    """The SDK's collected data as {instrument: {count, sum, min, max} or {value} or {status: value}}."""
    found: dict[str, dict[str, Any]] = {}
    for resource in metrics_data.resource_metrics:
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                for point in metric.data.data_points:
                    if hasattr(point, "bucket_counts"):
                        found[metric.name] = {"count": point.count, "sum": point.sum, "min": point.min,
                                              "max": point.max}
                    elif point.attributes:
                        found.setdefault(metric.name, {})[str(dict(point.attributes))] = point.value
                    else:
                        found[metric.name] = {"value": point.value}
    return found


def test_opentelemetry_in_memory_reader_receives_the_numbers_cda_metrics_prints(
        store: tuple[Path, list[ActionRun]]) -> None:
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader

    from cda.actions.metrics_runs import read_runs
    from cda.adapters.otel_export import OtelExport

    db, runs = store
    reader = InMemoryMetricReader()
    export = OtelExport(MeterProvider(metric_readers=[reader]))
    for run in read_runs(db).runs:  # what the service's feed hands the export, run by run
        export.record(run)
    points = otel_points(reader.get_metrics_data())
    export.shutdown()
    doc = json.loads(cli(str(db), "--json")[1])["metrics"]
    histograms = {"cda.ttfs": "ttfs_us", "cda.run.duration": "run_total_us", "cda.ken.query.p95": "ken_query_p95_us",
                  "cda.ken.query.max": "ken_query_max_us", "cda.ken.queries": "ken_queries",
                  "cda.approval.wait": "approval_wait_us", "cda.frontier.size": "frontier_size",
                  "cda.constraints.satisfied": "constraints_satisfied",
                  "cda.constraints.violated": "constraints_violated"}
    for instrument, key in histograms.items():
        assert points[instrument] == {k: doc[key][k] for k in ("count", "sum", "min", "max")}, instrument
    for num, den, key in (("cda.verifiers.passed", "cda.verifiers.decided", "verifier_pass_rate"),
                          ("cda.claims.cited", "cda.claims.supported", "citation_coverage")):
        assert (points[num]["value"], points[den]["value"]) == (doc[key]["numerator"], doc[key]["denominator"])
    assert sum(points["cda.runs"].values()) == doc["partial_ratio"]["denominator"] == len(runs)
    assert points["cda.runs"] == {str({"status": s}): n for s, n in
                                  json.loads(cli(str(db), "--json")[1])["statuses"].items()}


def test_a_server_without_an_endpoint_never_imports_opentelemetry(tmp_path: Path) -> None:
    from tests.test_startup_imports import loaded

    code = ("from pathlib import Path\nfrom starlette.testclient import TestClient\n"
            "from cda.service.app import ServiceConfig, build_app\n"
            f"with TestClient(build_app(ServiceConfig(db=Path({str(tmp_path / 'r.sqlite')!r}))), base_url='http://127.0.0.1') as client:\n"
            "    assert client.head('/streams/metrics').status_code == 200\n")
    _, mods = loaded("--python", code)
    assert "cda.service.metrics_stream" in mods and "opentelemetry" not in mods
