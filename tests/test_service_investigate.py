"""``investigate.*`` over the ToolBus: a real ``cda serve``, the ``websockets`` client, the committed schemas.

An investigation started, observed, undone, read and closed over the wire; bad problems and
observations answered with the DSL position (never a dropped socket); a partner names no server
file; sessions are their starter's; a session survives a restart of the server.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from cda.adapters.auth import token_hash
from tests.conftest import ROOT
from tests.service_harness import Server, call, serving, toolbus
from tests.timing import wait_until

SCHEMAS = ROOT / "schemas" / "toolbus"
OUTAGE = (ROOT / "examples" / "service_outage.cda").read_text(encoding="utf-8").replace(
    "observe slow(api)\nobserve not slow(cache)\n", "")
KEN = ROOT / "examples" / "action" / "ken_services.json"


def _valid(frame: dict[str, Any], method: str) -> dict[str, Any]:
    """The answer matches the committed frame schema and the method's result schema; its result."""
    assert "error" not in frame, frame
    jsonschema.validate(frame, json.loads((SCHEMAS / "result.schema.json").read_text(encoding="utf-8")))
    jsonschema.validate(frame["result"], json.loads((SCHEMAS / f"{method}.result.schema.json").read_text(
        encoding="utf-8")))
    return frame["result"]  # type: ignore[no-any-return]


def _error(frame: dict[str, Any]) -> dict[str, Any]:
    assert "result" not in frame, frame
    jsonschema.validate(frame, json.loads((SCHEMAS / "error.schema.json").read_text(encoding="utf-8")))
    assert "Traceback" not in frame["error"]["message"]
    return frame["error"]  # type: ignore[no-any-return]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    db = tmp_path_factory.mktemp("inv") / "receipts.sqlite"
    with serving(db) as s:
        yield s


def test_start_observe_undo_history_close_over_the_wire(server: Server) -> None:
    with toolbus(server) as ws:
        started = _valid(call(ws, "investigate.start", {"dsl": OUTAGE, "task_id": "outage"}), "investigate.start")
        sid = started["session_id"]
        assert started["memory"]["step"] == 0 and started["memory"]["task_id"] == "outage"
        assert started["memory"]["observations"] == []  # the observations of the session (none yet)
        before = started["memory"]["hypotheses_total"]
        seen = _valid(call(ws, "investigate.observe", {"session_id": sid, "observation": "not slow(api)"}),
                      "investigate.observe")["memory"]
        assert seen["step"] == 1 and "not slow(api)" in seen["observations"]
        assert seen["hypotheses_total"] < before  # the observation narrowed the hypotheses
        assert all("down(web)" in h["statement"] for h in seen["candidate_hypotheses"])
        status = _valid(call(ws, "investigate.status", {"session_id": sid}), "investigate.status")["memory"]
        assert status == seen
        undone = _valid(call(ws, "investigate.undo", {"session_id": sid}), "investigate.undo")["memory"]
        assert undone["step"] == 2 and "not slow(api)" not in undone["observations"]
        assert undone["hypotheses_total"] == before
        nothing = _error(call(ws, "investigate.undo", {"session_id": sid}))
        assert nothing["code"] == "conflict" and "nothing to undo" in nothing["message"]
        closed = _valid(call(ws, "investigate.close", {"session_id": sid}), "investigate.close")["memory"]
        assert closed["closed"] is True
        late = _error(call(ws, "investigate.observe", {"session_id": sid, "observation": "slow(db)"}))
        assert late["code"] == "conflict" and "closed" in late["message"]
        history = _valid(call(ws, "investigate.history", {"session_id": sid}), "investigate.history")["steps"]
        assert [(s["step"], s["kind"], s["observation"]) for s in history] == [
            (0, "start", None), (1, "observe", "not slow(api)"), (2, "undo", None), (3, "close", None)]
        assert history[2]["undoes"] == 1


def test_bad_problems_and_observations_are_frames_with_the_dsl_position(server: Server) -> None:
    with toolbus(server) as ws:
        bad = _error(call(ws, "investigate.start", {"dsl": "hyp a\nobservable o\nhard: o iff (a or\n"}))
        assert bad["code"] == "invalid_params" and bad["path"][:3] == ["params", "dsl", 3]
        assert isinstance(bad["path"][3], int) and "line 3" in bad["message"]
        typed = _error(call(ws, "investigate.start", {"dsl": "hyp a\nhard: a and b\n"}))
        assert typed["code"] == "invalid_params" and typed["path"][:3] == ["params", "dsl", 2]
        sid = call(ws, "investigate.start", {"dsl": OUTAGE})["result"]["session_id"]
        syntax = _error(call(ws, "investigate.observe", {"session_id": sid, "observation": "slow(api) and"}))
        assert syntax["code"] == "invalid_params" and syntax["path"][:2] == ["params", "observation"]
        assert len(syntax["path"]) == 3 and 1 <= syntax["path"][2] <= len("slow(api) and") + 1
        unknown = _error(call(ws, "investigate.observe", {"session_id": sid, "observation": "slow(nowhere)"}))
        assert unknown["code"] == "invalid_params" and "nowhere" in unknown["message"]
        abducible = _error(call(ws, "investigate.observe", {"session_id": sid, "observation": "down(db)"}))
        assert abducible["code"] == "invalid_params"
        missing = _error(call(ws, "investigate.status", {"session_id": "0123456789abcdef"}))
        assert missing["code"] == "not_found" and missing["path"] == ["params", "session_id"]
        shape = _error(call(ws, "investigate.observe", {"session_id": sid}))
        assert shape["code"] == "invalid_params" and shape["path"] == ["params", "observation"]
        weird = _error(call(ws, "investigate.status", {"session_id": "../etc"}))
        assert weird["code"] == "invalid_params" and weird["path"] == ["params", "session_id"]
        # after all that the socket still answers, and the session did not move
        memory = _valid(call(ws, "investigate.status", {"session_id": sid}), "investigate.status")["memory"]
        assert memory["step"] == 0


def test_a_partner_names_no_server_file(server: Server, tmp_path: Path) -> None:
    problem = tmp_path / "outage.cda"
    problem.write_text(OUTAGE, encoding="utf-8")
    with toolbus(server) as ws:
        path = _error(call(ws, "investigate.start", {"path": str(problem)}))
        assert path["code"] == "forbidden" and path["path"] == ["params", "path"]
        ken = _error(call(ws, "investigate.start", {"dsl": OUTAGE, "ken": {"path": str(KEN)}}))
        assert ken["code"] == "forbidden" and ken["path"] == ["params", "ken", "path"]
        both = _error(call(ws, "investigate.start", {"dsl": OUTAGE, "path": str(problem)}))
        assert both["code"] == "invalid_params"
        # an inline graph is fine: its communities are the parts the focus is chosen among
        graph = json.loads(KEN.read_text(encoding="utf-8"))
        inline = {"nodes": [{"id": n["id"]} for n in graph["nodes"]],
                  "edges": [{"source": e["source"], "relation": e.get("relation", "related_to"),
                             "target": e["target"]} for e in graph.get("links", graph.get("edges", []))]}
        started = _valid(call(ws, "investigate.start", {"dsl": OUTAGE, "ken": inline}), "investigate.start")
        assert started["memory"]["focus_subsystem"] is not None
        step = _valid(call(ws, "investigate.observe", {"session_id": started["session_id"], "observation": "slow(api)"}),
                      "investigate.observe")  # reopened from the store with the graph kept beside it
        assert step["memory"]["step"] == 1 and step["memory"]["focus_subsystem"] is not None


def test_sessions_are_their_starters_and_survive_a_restart(tmp_path: Path) -> None:
    auth = tmp_path / "auth.json"
    auth.write_text(json.dumps({"tokens": [
        {"name": "alice", "sha256": token_hash("tok-alice"), "profile": "partner"},
        {"name": "bob", "sha256": token_hash("tok-bob"), "profile": "partner"},
        {"name": "ops", "sha256": token_hash("tok-ops"), "profile": "internal"},
        {"name": "oncall", "sha256": token_hash("tok-oncall"), "profile": "approver"},
    ]}), encoding="utf-8")
    problem = tmp_path / "outage.cda"
    problem.write_text(OUTAGE, encoding="utf-8")
    db = tmp_path / "receipts.sqlite"
    with serving(db, "--auth", str(auth)) as server:
        with toolbus(server, "tok-alice") as alice:
            sid = call(alice, "investigate.start", {"dsl": OUTAGE})["result"]["session_id"]
            seen = _valid(call(alice, "investigate.observe", {"session_id": sid, "observation": "slow(api)"}),
                          "investigate.observe")["memory"]
        with toolbus(server, "tok-bob") as bob:
            for method in ("investigate.status", "investigate.undo", "investigate.close"):
                assert _error(call(bob, method, {"session_id": sid}))["code"] == "not_found"
        with toolbus(server, "tok-oncall") as oncall:  # an approver approves; it takes no step in alice's session
            assert _error(call(oncall, "investigate.observe", {"session_id": sid, "observation": "slow(db)"}))[
                "code"] == "not_found"
            assert _error(call(oncall, "investigate.status", {"session_id": sid}))["code"] == "not_found"
        with toolbus(server, "tok-ops") as ops:
            assert _valid(call(ops, "investigate.status", {"session_id": sid}), "investigate.status")["memory"] == seen
            # an internal reviewer names no server file either (files: the local user only); whether the
            # file exists is not told
            own = _error(call(ops, "investigate.start", {"path": str(problem), "ken": {"path": str(KEN)}}))
            gone = _error(call(ops, "investigate.start", {"path": str(tmp_path / "none.cda")}))
            assert own["code"] == gone["code"] == "forbidden" and own["path"] == gone["path"] == ["params", "path"]
            assert own["message"] == gone["message"]
        assert server.stop() == 0
    assert (tmp_path / "receipts.sqlite.investigations.sqlite").is_file()  # beside the server's store
    with serving(db, "--auth", str(auth)) as server, toolbus(server, "tok-alice") as alice:
        again = _valid(call(alice, "investigate.status", {"session_id": sid}), "investigate.status")["memory"]
        assert again == seen
        after = _valid(call(alice, "investigate.observe", {"session_id": sid, "observation": "not slow(auth)"}),
                       "investigate.observe")["memory"]
        assert after["step"] == 2 and after["observations"][-2:] == ["slow(api)", "not slow(auth)"]


def test_solver_work_runs_off_the_event_loop(server: Server) -> None:
    """While one socket's start enumerates 4,096 hypotheses (~2 s), another socket is answered."""
    names = ", ".join(f"s{i}" for i in range(12))
    heavy = f"domain S = {{{names}}}\nhyp down(S)\nobservable slow(S)\nhard p: forall s in S: slow(s) iff down(s)\n"
    with toolbus(server) as slow, toolbus(server) as quick:
        idle = server.cpu()
        slow.send(json.dumps({"id": "heavy", "method": "investigate.start", "params": {"dsl": heavy}}))
        wait_until(lambda: server.cpu() > idle + 0.2, "the server working on the heavy start")
        light = _valid(call(quick, "investigate.start", {"dsl": "hyp a\nobservable o\nhard: o iff a\n"}),
                       "investigate.start")
        assert light["memory"]["hypotheses_total"] == 2
        with pytest.raises(TimeoutError):
            slow.recv(timeout=0)  # the heavy one was still running when the light one was answered
        answer = json.loads(slow.recv(timeout=30))
        assert answer["id"] == "heavy" and answer["result"]["memory"]["hypotheses_total"] == 4096


def test_an_unexpected_failure_is_an_internal_frame_without_its_detail(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    from types import SimpleNamespace

    from cda.investigation.session import Investigation
    from cda.operations import Principal
    from cda.operations.base import OperationError as EdgeError
    from cda.operations.investigate import InvestigateObserveParams, InvestigateStartParams, InvestigationDesk

    desk = InvestigationDesk(tmp_path / "receipts.sqlite")
    who = SimpleNamespace(principal=Principal("anonymous", "partner"), base_dir=tmp_path)
    sid = desk.call(who, "investigate.start", InvestigateStartParams(dsl=OUTAGE)).session_id  # type: ignore[attr-defined]

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError(f"solver crashed in {tmp_path}")

    monkeypatch.setattr(Investigation, "observe", broken)
    with pytest.raises(EdgeError) as failed:
        desk.call(who, "investigate.observe", InvestigateObserveParams(session_id=sid, observation="slow(db)"))
    assert failed.value.code == "internal" and str(failed.value) == "the investigation failed (RuntimeError)"


def test_a_partner_loads_no_ken_file_from_the_problem_text(server: Server, tmp_path: Path) -> None:
    """``ken "FILE"`` inside the problem text would be read from the server's folder: refused, with its position."""
    secret = tmp_path / "secret.csv"
    secret.write_text("SECRET-FIRST-LINE,x\n", encoding="utf-8")
    with toolbus(server) as ws:
        for name in (str(secret), str(tmp_path / "missing.json"), str(KEN)):
            problem = OUTAGE + f'\nken "{name}"\n'
            line = problem.split("\n").index(f'ken "{name}"') + 1
            refused = _error(call(ws, "investigate.start", {"dsl": problem}))
            assert refused["code"] == "forbidden", refused
            assert refused["path"] == ["params", "dsl", line, 5], refused  # the file name's column
            assert "SECRET" not in refused["message"] and str(tmp_path) not in refused["message"]
        # the same problem without the statement starts
        assert _valid(call(ws, "investigate.start", {"dsl": OUTAGE}), "investigate.start")["session_id"]


def test_an_action_dsl_ken_statement_reads_no_server_file(server: Server, tmp_path: Path) -> None:
    """``inputs.dsl`` with ``ken "FILE"`` must not read the file: an existing, a missing and a secret file end alike."""
    from tests.service_harness import example_inputs, follow

    secret = tmp_path / "secret.csv"
    secret.write_text("SECRET-FIRST-LINE,x\n", encoding="utf-8")
    ends = []
    with toolbus(server) as ws:
        for name in (str(secret), str(tmp_path / "missing.json"), str(KEN)):
            inputs = example_inputs("kenload")
            inputs["dsl"] = f'ken "{name}"\n' + inputs.get("dsl", "")
            answer = call(ws, "actions.start", {"ability": "cda", "inputs": inputs})
            text = json.dumps(answer)
            assert "SECRET" not in text and str(tmp_path) not in text, answer
            if "error" in answer:
                ends.append(("error", answer["error"]["code"]))
                continue
            events = follow(server, answer["result"]["action_id"])
            text = json.dumps(events)
            assert "SECRET" not in text and str(tmp_path) not in text and "No such file" not in text
            ends.append(("event", events[-1]["event"]))
    assert len(set(ends)) == 1, ends


def test_slow_investigations_do_not_stall_the_streams(tmp_path: Path) -> None:
    """investigate.* has its own few threads: 44 slow starts in flight, a stream still opens at once."""
    import signal

    import httpx

    names = ", ".join(f"s{i}" for i in range(10))
    heavy = f"domain S = {{{names}}}\nhyp down(S)\nobservable slow(S)\nhard p: forall s in S: slow(s) iff down(s)\n"
    from contextlib import ExitStack

    server = Server(tmp_path / "receipts.sqlite")
    sockets = ExitStack()
    try:
        idle = server.cpu()
        for i in range(44):
            ws = sockets.enter_context(toolbus(server))
            ws.send(json.dumps({"id": f"heavy{i}", "method": "investigate.start", "params": {"dsl": heavy}}))
        wait_until(lambda: server.cpu() > idle + 0.5, "the server working on the starts")
        began = server.cpu()
        with httpx.Client(timeout=60) as client:
            answer = client.head(f"{server.base}/streams/actions/cda-nothing")
        took = server.cpu() - began  # the server's CPU time, not the wall clock: the same on a busy machine
        assert answer.status_code == 204
        assert took < 1.0, f"a stream waited for {took:.1f} s of the server's work on the investigations"
    finally:
        sockets.close()
        server.stop(signal.SIGKILL)
