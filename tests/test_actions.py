"""The CDA Action end to end: the QA scenarios of spec §12 that run in-process, determinism,
receipts, budgets, abstention and escalation.

Oracles: the Action's hypotheses and verdicts are compared with ``cda.solve`` on the same
assembled problem (the engine alone), receipts with an independent re-walk of the SQLite chain,
and event streams between runs and backends.
"""

from __future__ import annotations

import http.server
import json
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

import cda
from cda.actions.bindings import BoundOutput
from cda.actions.problem import build, observation_text, observe_literal
from cda.actions.receipts import ReceiptLog, verify
from cda.actions.runner import RunSettings, accept_bump, run_action
from cda.adapters.action_entry import load_inputs, run_inputs
from cda.adapters.event_store import EventStore
from cda.cli.main import main
from cda.contracts.action import CDAInputs
from cda.contracts.events import event_without_time
from cda.contracts.refs import ArtifactRef
from tests.conftest import ROOT

EXAMPLE = ROOT / "examples" / "action" / "service_outage.json"


def _outage(**update: object) -> CDAInputs:
    inputs = load_inputs(EXAMPLE)
    return CDAInputs.model_validate({**inputs.model_dump(mode="json"), **update})


def _as_one_text(inputs: CDAInputs) -> str:
    """The oracle's own reading of the inputs: one ``.cda`` text, the DSL then the adopted observe
    lines, the constraints, the claims and the goal, one per line (for inputs whose clauses are
    one-line and well formed, where a text and the Action's pieces must mean the same problem)."""
    lines = inputs.dsl.rstrip("\n").split("\n")
    for ref in inputs.observations:
        lines += [f"observe {lit}" for raw in observation_text(ref).split("\n") if (lit := observe_literal(raw))]
    lines += [f"hard input_hard_{i}: {c}" for i, c in enumerate(inputs.constraints.hard)]
    lines += [f"soft {s.name or f'input_soft_{i}'} weight {s.weight:f}: {s.clause}"
              for i, s in enumerate(inputs.constraints.soft)]
    mode = "disprove" if inputs.goals.kind == "disprove" else "prove"
    lines += [f"goal {mode} {c}" for c in inputs.goals.claims]
    if inputs.goals.kind in ("best_explanation", "plan") and "goal best_explanation" not in inputs.dsl:
        lines.append(f"goal best_explanation top {inputs.goals.top or 3}")
    return "\n".join(lines) + "\n"


def run_inputs_here(inputs: CDAInputs, out_dir: Path | None = None, **kwargs: object):  # type: ignore[no-untyped-def]
    """run_inputs with relative Ken paths read from the example's folder, as `cda run` does."""
    return run_inputs(inputs, out_dir, base_dir=EXAMPLE.parent, **kwargs)  # type: ignore[arg-type]


def _terminal(run: object) -> str:
    return run.events[-1].type  # type: ignore[attr-defined]


def test_service_outage_matches_the_engine_and_leaves_intact_receipts(tmp_path: Path) -> None:
    inputs = _outage()
    run = run_inputs_here(inputs, tmp_path)
    out = run.outputs
    assert out.status == "completed" and _terminal(run) == "action_completed"
    # oracle: the engine alone on the same assembled problem, with the Ken file
    from cda.ken.loaders import load_ken

    direct = cda.solve(_as_one_text(inputs), ken=load_ken(EXAMPLE.parent / inputs.ken.path))  # type: ignore[union-attr]
    by_id = {v.hypothesis_id: v for v in out.verdicts}
    for v in direct.verdicts:
        assert by_id[v.name].status == v.status
    for h in direct.hypotheses:
        assert by_id[h.id].claim == "explanation: " + ", ".join(h.assumed)
        assert by_id[h.id].confidence <= h.posterior + 1e-9  # verifiers may only lower it
    supported = [v for v in out.verdicts if v.status == "supported"]
    assert supported and all(v.band == "high" for v in supported if v.confidence >= 0.85)
    assert [t.observable for t in out.next_tests if t.observable] == [t.observable for t in direct.next_tests]
    # artifacts
    folder = tmp_path / out.action_id
    summary = (folder / "summary.md").read_text()
    assert len(summary) <= 2400 and "SUPPORTED prove slow(api)" in summary and "pager:alert-1042" in summary
    for name in ("hypotheses.json", "constraints.json", "plan_graph.json", "verifiers.json"):
        assert json.loads((folder / "cda_plan" / name).read_text()) is not None
    receipts = sorted((folder / "cda_plan" / "receipts").glob("*.json"))
    kinds = {json.loads(p.read_text())["kind"] for p in receipts}
    assert {"solver", "verifier", "ken", "llm"} <= kinds
    # the receipt log: intact, anchored at the head the run reported; the bundle holds every receipt
    # but the last three: the one that names the bundle itself, the attempt's end, the trace's put
    report = verify(tmp_path / "receipts.sqlite", expected_head=run.receipts_head)
    assert report.ok and report.entries == len(receipts) + 3
    log = ReceiptLog(tmp_path / "receipts.sqlite")
    last = [e.receipt for e in log.entries()[-3:]]
    log.close()
    assert [r.name for r in last] == ["action.converged", "action.end", "reflection.put"]
    assert last[0].result["plan"] == out.plan_bundle_id
    # the event store holds the same timeline the subscribers saw
    store = EventStore(tmp_path / "receipts.sqlite")
    assert [event_without_time(e) for e in store.since(out.action_id)] == [event_without_time(e) for e in run.events]
    store.close()


def test_every_solver_call_leaves_its_own_receipt(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """One receipt per backend call of the search, counted independently by a proxy around the
    backends the search builds (the cross-backend agreement check is a verifier and has its own)."""
    from cda.solver import engine

    counted: list[str] = []
    made = engine._backend

    class Counting:
        def __init__(self, inner: object) -> None:
            self.inner = inner

        def __getattr__(self, key: str) -> object:
            attr = getattr(self.inner, key)
            if key in ("check", "minimize", "enumerate", "enumerate_minimal", "minimal_sets"):
                def call(*args: object, **kwargs: object) -> object:
                    counted.append(key)
                    return attr(*args, **kwargs)
                return call
            return attr

    def counting_backend(name, problem, options, deadline):  # type: ignore[no-untyped-def]
        backend = made(name, problem, options, deadline)
        return Counting(backend) if options.call_log is not None else backend

    monkeypatch.setattr(engine, "_backend", counting_backend)
    run_inputs_here(_outage(backend="clingo"), tmp_path)
    log = ReceiptLog(tmp_path / "receipts.sqlite")
    receipts = [e.receipt for e in log.entries()]
    log.close()
    calls = [r for r in receipts if r.kind == "solver" and not r.name.endswith(".solve")]
    rounds = [r for r in receipts if r.kind == "solver" and r.name.endswith(".solve")]
    assert rounds and len(calls) == len(counted) > len(rounds)
    assert sorted(r.name.split(".", 1)[1] for r in calls) == sorted(counted)
    assert all(r.name.startswith("clingo.") and r.inputs_hash for r in calls)
    assert {r.name for r in calls} >= {"clingo.check", "clingo.enumerate"}


def test_two_runs_give_identical_outputs_events_and_artifacts(tmp_path: Path) -> None:
    inputs = _outage()
    a = run_inputs_here(inputs, tmp_path / "a")
    b = run_inputs_here(inputs, tmp_path / "b")
    assert a.outputs.model_dump_json() == b.outputs.model_dump_json()
    assert [event_without_time(e) for e in a.events] == [event_without_time(e) for e in b.events]
    assert a.receipts_head == b.receipts_head
    files_a = sorted(p.relative_to(tmp_path / "a") for p in (tmp_path / "a" / a.outputs.action_id).rglob("*.*"))
    for rel in files_a:
        if rel.name == "receipts_head.json":  # signs the events' wall times too (outside determinism)
            heads = [json.loads((tmp_path / run / rel).read_text()) for run in ("a", "b")]
            assert [{k: v for k, v in h.items() if k not in ("events_head", "meta", "signature")} for h in heads] == [
                {k: v for k, v in heads[0].items() if k not in ("events_head", "meta", "signature")}] * 2
            continue
        if rel.name == ".cda-artifacts.json":  # the manifest: every file's SHA-256, the signed head's as above
            listed = [json.loads((tmp_path / run / rel).read_text())["files"] for run in ("a", "b")]
            assert [{k: v for k, v in m.items() if not k.endswith("receipts_head.json")} for m in listed] == [
                {k: v for k, v in listed[0].items() if not k.endswith("receipts_head.json")}] * 2
            assert "summary.md" in listed[0] and "cda_plan/receipts_head.json" in listed[0]
            continue
        assert (tmp_path / "a" / rel).read_bytes() == (tmp_path / "b" / rel).read_bytes(), rel


def test_both_backends_reach_the_same_verdicts() -> None:
    z = run_inputs_here(_outage(backend="z3"))
    c = run_inputs_here(_outage(backend="clingo"))
    strip = lambda run: [(v.hypothesis_id, v.status, v.confidence, v.band, v.claim) for v in run.outputs.verdicts]  # noqa: E731
    assert strip(z) == strip(c)
    assert [t.model_dump() for t in z.outputs.next_tests] == [t.model_dump() for t in c.outputs.next_tests]


def test_qa1_ambiguous_claim_conflicting_observations_cycle_to_a_banded_summary() -> None:
    inputs = _outage(observations=[
        {"kind": "span", "source": "pager:1", "excerpt": "observe slow(auth)"},
        {"kind": "span", "source": "probe:2", "excerpt": "observe not slow(api)"},
    ], goals={"kind": "best_explanation", "claims": ["down(auth)"]})
    run = run_inputs_here(inputs)
    kinds = [e.kind for e in run.events if e.type == "action_checkpoint"]  # type: ignore[union-attr]
    # verifier_update -> plan_delta, at least twice: the conflict, then the softened problem
    cycles = sum(1 for x, y in zip(kinds, kinds[1:]) if (x, y) == ("verifier_update", "plan_delta"))
    assert cycles >= 2
    softened = [e for e in run.events if e.type == "action_checkpoint" and "distrusted_candidates" in e.payload]  # type: ignore[union-attr]
    adopted = {f"observe@{line}" for line in build(inputs, None).observation_of_line}
    assert len(adopted) == 2
    assert softened and set(softened[0].payload["distrusted_candidates"]) == adopted  # type: ignore[union-attr]
    out = run.outputs
    assert out.status == "completed"
    claim = next(v for v in out.verdicts if v.claim == "prove down(auth)")
    assert claim.status == "inconclusive" and claim.band in ("low", "medium")
    conflict = [c for c in out.caveats if "conflict" in c]
    assert conflict and all(f"{source} [observe@" in conflict[0] for source in ("pager:1", "probe:2")), conflict
    assert out.next_tests and all(v.band for v in out.verdicts)
    assert run.events[-1].type == "action_completed"


class _ChatServer(http.server.BaseHTTPRequestHandler):
    requests: list[bytes] = []

    def do_POST(self) -> None:  # noqa: N802
        body = self.rfile.read(int(self.headers["Content-Length"]))
        _ChatServer.requests.append(body)
        content = json.dumps({"agrees": "yes", "flagged": [], "rationale": "ok"})  # a key outside it fails closed
        reply = json.dumps({"choices": [{"message": {"role": "assistant", "content": content}}]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def chat_server() -> Iterator[str]:
    _ChatServer.requests = []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _ChatServer)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True)  # shutdown() waits one interval
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
    server.server_close()


def test_qa3_denied_egress_gives_a_conservative_summary_and_receipt_stubs(tmp_path: Path, chat_server: str) -> None:
    llm = {"provider": "openai", "base_url": chat_server, "model": "m", "egress_class": "external", "when": "always"}
    denied = run_inputs_here(_outage(llm=llm), tmp_path)  # policies.egress is "local"
    assert _ChatServer.requests == []  # nothing left the process
    out = denied.outputs
    assert out.status == "completed"
    assert all(v.band != "high" and v.confidence <= 0.8 for v in out.verdicts)
    assert any("LLM verification missing" in c for c in out.caveats)
    evidence = json.loads((tmp_path / out.action_id / "evidence.json").read_text())
    stubs = [s for s in evidence["missing_evidence"] if s["name"] == "llm.judge"]
    assert stubs and all(s["status"] == "denied" for s in stubs)
    # the same inputs with egress allowed do call the endpoint and keep the solver's high band
    allowed = run_inputs_here(_outage(llm=llm, policies={"egress": "external"}))
    assert _ChatServer.requests
    assert any(v.band == "high" for v in allowed.outputs.verdicts)


class _ScriptedClock:
    """A clock that stands still until the run reaches a phase, then jumps: a deterministic budget."""

    def __init__(self, jumps: dict[str, float]) -> None:
        self.now = 0.0
        self.jumps = jumps

    def __call__(self) -> float:
        return self.now

    def on_event(self, event: object) -> None:
        if getattr(event, "type", "") == "action_progress":
            self.now += self.jumps.get(event.phase, 0.0)  # type: ignore[attr-defined]


def test_qa4_budget_exhaustion_is_a_partial_with_caveats_and_next_tests() -> None:
    inputs = _outage(budgets={"wall": 10.0})
    from cda.ken.loaders import load_ken

    ken = load_ken(EXAMPLE.parent / inputs.ken.path)  # type: ignore[union-attr]
    clock = _ScriptedClock({"verify": 9.0})  # the search took 9 of the 10 s
    run = run_action(inputs, ken=ken, clock=clock, subscribers=[clock.on_event])
    out = run.outputs
    assert out.status == "partial" and run.events[-1].type == "action_partial"
    assert run.events[-1].caveats == out.caveats  # type: ignore[union-attr]
    # the ladder, in the spec's order, each rung recorded once
    rungs = [e.payload["degradation"] for e in run.events
             if e.type == "action_checkpoint" and "degradation" in e.payload]  # type: ignore[union-attr]
    order = ["shrink_beam", "drop_soft_clauses", "reduce_external_calls", "conservative_summary"]
    assert rungs == order[: len(rungs)] and "conservative_summary" in rungs
    assert any("budget" in c for c in out.caveats)
    assert all(v.band != "high" for v in out.verdicts)
    assert out.next_tests  # what would help, even when cut short
    assert not any(e.type == "action_completed" for e in run.events)


def test_a_partial_is_never_labelled_completed_under_a_real_wall_budget() -> None:
    # 2^22 hypotheses with no structure: no machine enumerates and ranks them all in 0.3 s
    names = ", ".join(f"a{i}" for i in range(22))
    inputs = CDAInputs(problem="many", dsl=f"hyp {names}\nobservable o\nhard: o or not o\n",
                       budgets={"wall": 0.3}, backend="z3")
    run = run_action(inputs, settings=RunSettings(base_beam=100_000, max_beam=100_000))
    assert run.outputs.status == "partial" and run.events[-1].type == "action_partial"
    assert any("ran out of time" in c for c in run.outputs.caveats), run.outputs.caveats


def test_risk_class_hard_escalates_without_search() -> None:
    run = run_action(_outage(risk_class="hard", ken=None))
    assert run.outputs.status == "escalated"
    assert not any(e.type == "action_checkpoint" for e in run.events)
    assert run.events[-1].type == "action_partial"
    claims = _outage(risk_class="hard", ken=None).goals.claims
    asked = [t.question for t in run.events[-1].next_tests]  # type: ignore[union-attr]
    assert claims and all(any(c in q for q in asked) for c in claims) and len(asked) == len(claims) + 1
    assert asked == [t.question for t in run.outputs.next_tests]


def test_qa2_bind_bump_yields_a_structure_revision_with_new_receipts(tmp_path: Path) -> None:
    inputs = _outage(observations=[])
    v1 = BoundOutput("research-7", "research", 1, ArtifactRef(artifact_id="probe:auth", text="observe slow(auth)"))
    log = ReceiptLog(tmp_path / "r.sqlite")
    first = run_action(inputs, ken=_ken(inputs), bound=[v1], receipts=log)
    assert any(e.type == "action_linked" and e.edge == "bind" for e in first.events)  # type: ignore[union-attr]
    down_db = next(v for v in first.outputs.verdicts if v.claim == "prove down(db)")
    # the same revision is not an update; new content at a newer revision is
    with pytest.raises(cda.CDAError):
        accept_bump(inputs, first, v1, ken=_ken(inputs), receipts=log)
    v2 = BoundOutput("research-7", "research", 2,
                     ArtifactRef(artifact_id="probe:auth", text="observe slow(auth)\nobserve not slow(db)"))
    second = accept_bump(inputs, first, v2, ken=_ken(inputs), receipts=log)
    assert second.outputs.revision == 2 and second.outputs.supersedes == first.outputs.plan_bundle_id
    assert next(v for v in second.outputs.verdicts if v.claim == "prove down(db)").status == "refuted"
    assert down_db.status == "inconclusive"
    locks = {b.revision: b.sha256 for b in first.bindings + second.bindings}
    assert locks[1] != locks[2]
    assert log.verify(expected_head=second.receipts_head).ok
    actions = {e.receipt.action_id for e in log.entries()}
    assert actions == {first.outputs.action_id, second.outputs.action_id}
    log.close()


def _ken(inputs: CDAInputs):  # type: ignore[no-untyped-def]
    from cda.ken.loaders import load_ken

    return load_ken(EXAMPLE.parent / inputs.ken.path)  # type: ignore[union-attr]


def test_qa5_cursor_loss_resume_by_last_event_id(tmp_path: Path) -> None:
    db = tmp_path / "events.sqlite"
    store = EventStore(db)
    seen: list[int] = []

    def flaky_client(event: object) -> None:  # the connection drops after the fourth event
        if len(seen) < 4:
            seen.append(event.seq)  # type: ignore[attr-defined]

    run = run_inputs_here(_outage(), subscribers=[store.append, flaky_client])
    resumed = EventStore(db).since(run.outputs.action_id, last_event_id=seen[-1])
    timeline = seen + [e.seq for e in resumed]
    assert timeline == list(range(len(run.events)))
    assert [event_without_time(e) for e in resumed] == [event_without_time(e) for e in run.events[4:]]
    store.close()


def test_a_dsl_mistake_fails_the_action_with_a_located_error_and_no_traceback(tmp_path: Path) -> None:
    inputs = _outage(constraints={"hard": ["down(api) and and down(db)"]})
    run = run_inputs_here(inputs)
    assert run.outputs.status == "failed" and run.events[-1].type == "action_failed"
    assert run.events[-1].error.startswith("constraints.hard[0]:1:")  # type: ignore[union-attr]
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(inputs.model_dump(mode="json")))
    import io

    out, err = io.StringIO(), io.StringIO()
    assert main(["run", str(path)], out, err) == 2
    assert "Traceback" not in out.getvalue() + err.getvalue()


def test_cli_run_streams_json_lines_and_bad_inputs_exit_2(tmp_path: Path) -> None:
    import io

    out, err = io.StringIO(), io.StringIO()
    code = main(["run", str(EXAMPLE), "--json", "--out", str(tmp_path)], out, err)
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    assert code == 0 and lines[0]["type"] == "action_started" and lines[-1]["type"] == "action_completed"
    assert [x["seq"] for x in lines] == list(range(len(lines)))
    bad = tmp_path / "bad.json"
    bad.write_text('{"problem": "x", "risk_class": "extreme"}')
    out, err = io.StringIO(), io.StringIO()
    assert main(["run", str(bad)], out, err) == 2
    assert "risk_class" in err.getvalue() and "Traceback" not in err.getvalue()
    assert main(["receipts", "verify", str(tmp_path / "receipts.sqlite")], io.StringIO(), io.StringIO()) == 0
    conn = sqlite3.connect(tmp_path / "receipts.sqlite")
    conn.execute("DROP TRIGGER receipts_no_update")
    conn.execute("UPDATE receipts SET body = replace(body, 'ok', 'OK') WHERE seq = 3")
    conn.commit()
    conn.close()
    assert main(["receipts", "verify", str(tmp_path / "receipts.sqlite")], io.StringIO(), io.StringIO()) == 1


def test_pinned_event_times_are_re_evaluated_by_the_temporal_verifier(tmp_path: Path) -> None:
    dsl = ("event deploy, alert\nhyp bad_deploy\nobservable paged\n"
           "hard t1: time(event:deploy) = 100\nhard t2: time(event:alert) = 1 h\n"
           "hard w: within(event:deploy, 2h of event:alert)\nhard o: before(event:deploy, event:alert)\n"
           "hard: paged iff bad_deploy\nobserve paged\n")
    run = run_inputs_here(CDAInputs(problem="was the deploy bad?", dsl=dsl, goals={"kind": "prove", "claims": ["bad_deploy"]}),
                     tmp_path)
    verifiers = json.loads((tmp_path / run.outputs.action_id / "cda_plan" / "verifiers.json").read_text())
    temporal = [v for v in verifiers if v["verifier"] == "temporal"]
    assert [v["status"] for v in temporal] == ["passed", "passed"]
    assert temporal[1]["data"]["events"] == {"alert": 3600, "deploy": 100}
    assert next(v for v in run.outputs.verdicts if v.claim == "prove bad_deploy").status == "supported"


def test_low_ken_coverage_with_nothing_settled_abstains() -> None:
    dsl = ("domain Service = {api, db}\nhyp down(Service)\nobservable slow(Service)\n"
           "hard: forall s in Service: slow(s) implies down(s) or down(db)\nobserve slow(api)\n")
    ken = {"nodes": [{"id": "api", "label": "api gateway"}, {"id": "db", "label": "database"},
                     {"id": "wiki", "label": "team wiki"}],
           "edges": [{"source": "wiki", "relation": "mentions", "target": "api"}]}
    run = run_action(CDAInputs(problem="why is the api slow?", dsl=dsl, ken=ken))
    assert run.outputs.status == "abstained" and run.events[-1].type == "action_completed"
    assert any(c.startswith("abstained:") for c in run.outputs.caveats)
    # the same problem with a causal edge in Ken is answered
    ken["edges"].append({"source": "api", "relation": "depends", "target": "db"})
    answered = run_action(CDAInputs(problem="why is the api slow?", dsl=dsl, ken=ken))
    assert answered.outputs.status == "completed"


def test_a_failing_user_function_demotes_its_claim_and_a_passing_one_changes_nothing() -> None:
    base = _outage()
    checks = [
        {"name": "api_probe", "source": "def check(claim):\n    return 'api' not in claim\n", "claims": ["slow(api)"]},
    ]
    run = run_inputs_here(CDAInputs.model_validate({**base.model_dump(mode="json"), "functions": checks}))
    v = next(v for v in run.outputs.verdicts if v.claim == "prove slow(api)")
    assert v.status == "inconclusive" and v.confidence <= 0.5
    assert any("function api_probe" in c for c in v.caveats)
    checks[0]["source"] = "def check(claim):\n    return True\n"
    run = run_inputs_here(CDAInputs.model_validate({**base.model_dump(mode="json"), "functions": checks}))
    assert next(v for v in run.outputs.verdicts if v.claim == "prove slow(api)").status == "supported"


def test_boundary_summary_matches_golden() -> None:
    """What a client reads; regenerate on purpose with CDA_UPDATE_GOLDEN=1."""
    import os

    run = run_inputs_here(_outage())
    text = next(e.payload["text"] for e in reversed(run.events)  # type: ignore[union-attr]
                if e.type == "action_checkpoint" and e.kind == "boundary_summary")  # type: ignore[union-attr]
    golden = ROOT / "tests" / "golden" / "action_service_outage_summary.md"
    if os.environ.get("CDA_UPDATE_GOLDEN") == "1":
        golden.write_text(text, encoding="utf-8")
    assert text == golden.read_text(encoding="utf-8")


def test_offline_llm_check_judges_with_the_named_ken_ids_as_with_all_of_them() -> None:
    """The gate hands the offline provider only the Ken ids a claim could name (found through the
    search index); its judgement must be the one it gives with every node id known."""
    import random

    from cda.actions.checks import _ken_ids_named_in
    from cda.ken.graph import KenGraph
    from cda.verifiers.llm_offline import OfflineProvider

    small = KenGraph()
    small.add_node("auth")  # a prefixed word names the plain id: svc:Auth names auth
    assert _ken_ids_named_in(small, ["svc:Auth is down"]) == {"auth"}
    assert OfflineProvider(known_ids=["auth"]).judge("svc:Auth is down", ["nothing"]).flagged == []
    rng = random.Random(5)
    words = ["auth", "db", "Cache", "queue", "api-gw", "svc:Auth", "x:queue", "pager", "Zürich", "42", "n7"]
    ken = KenGraph()
    for i in range(300):
        ken.add_node(f"{rng.choice(['svc:', 'host-', ''])}{rng.choice(words)}{rng.choice(['', str(i)])}",
                     label=rng.choice(["Primary database", "edge proxy", ""]))
    for plain in ("auth", "queue", "host-db"):  # named by a prefixed word too: svc:Auth names auth
        ken.add_node(plain)
    everything = OfflineProvider(known_ids=[str(n) for n in ken.graph.nodes])
    named_some = 0
    for _ in range(200):
        claim = " ".join(rng.choice(words + ["is", "down", "after", "3h"]) for _ in range(rng.randint(1, 6)))
        evidence = [" ".join(rng.sample(words, 2))]
        named = _ken_ids_named_in(ken, [claim])
        assert named <= {str(n) for n in ken.graph.nodes}
        named_some += bool(named) and len(named) < len(ken)
        assert OfflineProvider(known_ids=named).judge(claim, evidence) == everything.judge(claim, evidence), claim
    assert named_some > 50  # the restriction really restricts


def test_a_caveat_that_lowered_a_verdict_is_in_the_text_outputs(tmp_path: Path) -> None:
    """A function check that times out demotes its claim; the terminal output of ``cda run`` and
    summary.md must say why, not only the JSON outputs."""
    import io

    inputs = load_inputs(EXAMPLE).model_dump(mode="json")
    inputs["ken"]["path"] = str(EXAMPLE.parent / inputs["ken"]["path"])
    inputs["functions"] = [{"name": "slow_probe", "source": "def check(claim):\n    while True:\n        pass\n",
                            "claims": ["slow(api)"], "timeout_s": 0.5}]
    path = tmp_path / "inputs.json"
    path.write_text(json.dumps(inputs), encoding="utf-8")
    out, err = io.StringIO(), io.StringIO()
    assert main(["run", str(path), "--out", str(tmp_path / "runs")], out, err) == 0, err.getvalue()
    run = run_inputs_here(CDAInputs.model_validate(inputs))
    verdict = next(v for v in run.outputs.verdicts if v.claim == "prove slow(api)")
    assert verdict.status == "inconclusive" and verdict.caveats, verdict
    caveat = next(c for c in verdict.caveats if c.startswith("function slow_probe"))
    summary = next((tmp_path / "runs").glob("*/summary.md")).read_text(encoding="utf-8")
    for text in (out.getvalue(), summary):
        decisions = text.split("## Decisions", 1)[1].split("\n## ", 1)[0]
        assert f"- INCONCLUSIVE prove slow(api) (confidence {verdict.confidence:.2f}, {verdict.band})\n" \
               f"  - lowered: {caveat}\n" in decisions, text


# ---- input errors name their field ----------------------------------------------------------
def _write_inputs(tmp_path: Path, **update: object) -> Path:
    data = {"problem": "p", "dsl": "hyp a\n", "goals": {"kind": "prove", "claims": ["a"]}, **update}
    path = tmp_path / "in.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


@pytest.mark.parametrize(("ken_text", "words"), [(None, "no such file"), ('{"nodes": 1}', "'nodes' must be a list")])
def test_a_bad_ken_file_in_an_action_names_the_ken_path_field(tmp_path: Path, ken_text: str | None, words: str) -> None:
    if ken_text is not None:
        (tmp_path / "k.json").write_text(ken_text, encoding="utf-8")
    path = _write_inputs(tmp_path, ken={"path": "k.json"})
    err = _cli_err(tmp_path, path)
    assert err.startswith("cda: error: ken.path: ") and "k.json" in err and words in err


def _cli_err(tmp_path: Path, path: Path) -> str:
    import io

    out, err = io.StringIO(), io.StringIO()
    assert main(["run", str(path), "--out", str(tmp_path / "o")], stdout=out, stderr=err) == 2
    return err.getvalue()


def test_schema_errors_name_fields_as_dsl_errors_do_and_say_error_once(tmp_path: Path) -> None:
    path = _write_inputs(tmp_path, constraints={"soft": [{"clause": "a", "weight": -1}]})
    err = _cli_err(tmp_path, path)
    assert "constraints.soft[0].weight: Input should be greater than 0" in err
    assert err.count("error:") == 1


def test_a_nan_weight_is_called_not_a_number(tmp_path: Path) -> None:
    path = tmp_path / "in.json"
    path.write_text(
        '{"problem": "p", "dsl": "hyp a\\n", "goals": {"kind": "prove", "claims": ["a"]},'
        ' "constraints": {"soft": [{"clause": "a", "weight": NaN}]}}', encoding="utf-8",
    )
    err = _cli_err(tmp_path, path)
    assert "constraints.soft[0].weight" in err and "not a number" in err and "greater than" not in err


def test_the_offline_llm_check_does_not_flag_declared_metrics_nor_the_claims_own_bound() -> None:
    # 45359237 mg is exactly 100 lb: both claims hold, and nothing in them is invented
    inputs = CDAInputs.model_validate({
        "problem": "weight check", "dsl": "metric w : mg\n",
        "constraints": {"hard": ["value(metric:w) = 45359237 mg"]},
        "goals": {"kind": "prove", "claims": ["value(metric:w) >= 100 lb", "value(metric:w) <= 100 lb"]},
    })
    run = run_inputs(inputs)
    verdicts = [(v.status, v.confidence) for v in run.outputs.verdicts if v.claim.startswith("prove")]
    assert verdicts == [("supported", 1.0), ("supported", 1.0)]
    assert not any("unsupported fragment" in c for v in run.outputs.verdicts for c in v.caveats)



def test_a_run_takes_one_context_and_keywords_change_it(tmp_path: Path) -> None:
    """run_action(inputs, RunContext(...)) is the same run as the same fields given as keywords;
    a keyword that is no field is refused by name."""
    from cda.actions.context import RunContext

    inputs = _outage(ken=None)
    context = RunContext(out_dir=tmp_path / "a", settings=RunSettings(depth_cap=1))
    by_context = run_action(inputs, context)
    by_keywords = run_action(inputs, out_dir=tmp_path / "b", settings=RunSettings(depth_cap=1))
    assert by_context.outputs.model_dump_json() == by_keywords.outputs.model_dump_json()
    assert [event_without_time(e) for e in by_context.events] == [event_without_time(e) for e in by_keywords.events]
    assert (tmp_path / "a" / by_context.outputs.action_id / "summary.md").read_text() == \
        (tmp_path / "b" / by_keywords.outputs.action_id / "summary.md").read_text()
    with pytest.raises(TypeError, match="outdir"):
        run_action(inputs, outdir=tmp_path)


def test_a_budget_spent_in_the_last_check_still_gives_a_conservative_summary() -> None:
    """The ladder is looked at before each check; a budget spent inside the last one (here: the
    clock jumps past the wall when the summary begins) used to end partial with verdicts still
    high and no rung recorded. The summary is written under the pressure it is written at."""
    inputs = _outage(budgets={"wall": 10.0})
    from cda.ken.loaders import load_ken

    ken = load_ken(EXAMPLE.parent / inputs.ken.path)  # type: ignore[union-attr]
    clock = _ScriptedClock({"report": 20.0})
    run = run_action(inputs, ken=ken, clock=clock, subscribers=[clock.on_event])
    out = run.outputs
    assert out.status == "partial" and run.events[-1].type == "action_partial"
    ladder = [(e.payload["degradation"], e.payload["stage"]) for e in run.events
              if e.type == "action_checkpoint" and "degradation" in e.payload]  # type: ignore[union-attr]
    order = ["shrink_beam", "drop_soft_clauses", "reduce_external_calls", "conservative_summary"]
    assert ladder == [(rung, "report") for rung in order]
    assert all(v.band != "high" for v in out.verdicts)
    unbounded = run_action(_outage(), ken=ken)  # the same run without a wall keeps its high band
    assert any(v.band == "high" for v in unbounded.outputs.verdicts)
