"""The QA scenarios of spec §12 over the wire, approvals, cancel, restarts and the store's edge cases.

Real server processes, real clients (``websockets``, ``httpx`` + ``httpx-sse``). The restart tests
kill the server with SIGKILL while an action is in flight and check, on the next server, that the
action is reported interrupted (a terminal event, never "running"), that a resumed stream is the
complete timeline and that the receipt chain verifies.
"""

from __future__ import annotations

import asyncio
import http.server
import json
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from cda.actions.event_chain import EVENT_SCHEMA
from cda.actions.receipts import ReceiptLog
from cda.service.event_reads import StoredEvent, last_events, read_stream, sweep
from tests.service_harness import Server, call, example_inputs, follow, serving, toolbus, wait_signed
from tests.timing import HANG, wait_until


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with serving(tmp_path_factory.mktemp("svc") / "receipts.sqlite") as s:
        yield s


def _start(ws: Any, inputs: dict[str, Any]) -> str:
    answer = call(ws, "actions.start", {"ability": "cda", "inputs": inputs})
    assert "result" in answer, answer
    return str(answer["result"]["action_id"])


def test_qa1_conflicting_observations_cycle_to_a_banded_summary_with_next_tests(server: Server) -> None:
    inputs = example_inputs("qa1", observations=[
        {"kind": "span", "source": "pager:1", "excerpt": "observe slow(auth)"},
        {"kind": "span", "source": "probe:2", "excerpt": "observe not slow(api)"},
    ], goals={"kind": "best_explanation", "claims": ["down(auth)"]})
    with toolbus(server) as ws:
        action_id = _start(ws, inputs)
    events = follow(server, action_id)
    kinds = [e["data"]["kind"] for e in events if e["event"] == "action_checkpoint"]
    assert sum(1 for x, y in zip(kinds, kinds[1:]) if (x, y) == ("verifier_update", "plan_delta")) >= 2
    assert kinds[-1] == "boundary_summary"
    outputs = events[-1]["data"]["outputs"]
    assert events[-1]["event"] == "action_completed" and outputs["next_tests"]
    assert all(v["band"] in ("low", "medium", "high") for v in outputs["verdicts"])
    assert any("conflict" in c for c in outputs["caveats"])


def test_qa4_a_spent_budget_is_a_terminal_partial_with_caveats_and_next_tests(server: Server) -> None:
    with toolbus(server) as ws:
        action_id = _start(ws, example_inputs("qa4", budgets={"wall": 0.05}))
        events = follow(server, action_id)
        last = events[-1]
        assert last["event"] == "action_partial"
        assert any("budget" in c for c in last["data"]["caveats"]), last["data"]["caveats"]
        assert last["data"]["caveats"] == last["data"]["outputs"]["caveats"]  # explicit on the terminal event
        assert call(ws, "actions.get", {"action_id": action_id})["result"]["status"] == "partial"


class _Chat(http.server.BaseHTTPRequestHandler):
    hits: list[bytes] = []

    def do_POST(self) -> None:  # noqa: N802 - http.server's naming
        _Chat.hits.append(self.rfile.read(int(self.headers["Content-Length"])))
        # the reply contract only: a key outside it (failclosed, issue 14) is no judgement, so fails closed
        content = json.dumps({"agrees": "yes", "flagged": [], "rationale": "ok"})
        body = json.dumps({"choices": [{"message": {"role": "assistant", "content": content}}]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def chat() -> Iterator[str]:
    _Chat.hits = []
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Chat)
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True)  # shutdown() waits one interval
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    httpd.shutdown()
    httpd.server_close()


def test_qa3_denied_egress_waits_then_gives_a_conservative_summary_with_receipt_stubs(
        tmp_path: Path, chat: str) -> None:
    db = tmp_path / "receipts.sqlite"
    llm = {"provider": "openai", "base_url": chat, "model": "m", "egress_class": "external", "when": "always"}
    with serving(db) as server, toolbus(server) as ws:
        denied = _start(ws, example_inputs("qa3-deny", llm=llm, policies={"egress": "external"}))
        head = follow(server, denied, stop_after=2)  # the stream is open while the action waits
        assert [e["event"] for e in head] == ["action_started", "action_waiting_user"]  # started first
        assert head[1]["data"]["approvals_needed"] == ["egress:external"] and head[1]["data"]["ts"] is not None
        got = call(ws, "actions.get", {"action_id": denied})["result"]
        assert got["status"] == "waiting_user" and got["approvals_needed"] == ["egress:external"]
        wrong = call(ws, "actions.approve", {"action_id": denied, "approval": "pii:consent"})
        assert wrong["error"]["code"] == "conflict"
        call(ws, "actions.deny", {"action_id": denied, "approval": "egress:external", "reason": "no external calls"})
        events = follow(server, denied, last_event_id=0)
        outputs = events[-1]["data"]["outputs"]
        assert events[-1]["event"] == "action_completed" and _Chat.hits == []  # nothing left the server
        assert all(v["band"] != "high" for v in outputs["verdicts"])
        assert any("receipt stubs" in c for c in outputs["caveats"])
        evidence = json.loads((tmp_path / denied / "evidence.json").read_text(encoding="utf-8"))
        assert [s for s in evidence["missing_evidence"] if s["name"] == "llm.judge" and s["status"] == "denied"]

        allowed = _start(ws, example_inputs("qa3-approve", llm=llm, policies={"egress": "external"}))
        call(ws, "actions.approve", {"action_id": allowed, "approval": "egress:external"})
        events = follow(server, allowed)
        assert events[-1]["event"] == "action_completed" and _Chat.hits  # approved: the endpoint was asked
        assert any(v["band"] == "high" for v in events[-1]["data"]["outputs"]["verdicts"])
    log = ReceiptLog(db)
    try:
        # the reviewer's decision (the service's receipt), then the run's refused use of the egress
        # (issue 14's approvals: every use and refusal is receipted, a refusal as a denied stub)
        assert [(e.receipt.kind, e.receipt.name, e.receipt.status) for e in log.entries(denied)
                if e.receipt.name.startswith("approval.")] == [("action", "approval.denied", "denied"),
                                                               ("stub", "approval.refused", "denied")]
        assert any(e.receipt.name == "approval.granted" for e in log.entries(allowed))
        assert log.verify().ok
    finally:
        log.close()


@pytest.mark.slow
def test_qa4_a_heavy_search_keeps_the_reserve_degrades_in_verification_and_says_the_budget(server: Server) -> None:
    """22 free atoms beside the outage example and budgets.wall 10: the search and every verifier
    share the search budget (the cross-check splits what is left between the backends), the ladder
    runs during verification and is recorded, and the partial ends inside the wall (+10%)."""
    inputs = example_inputs("qa4-heavy", budgets={"wall": 10}, ken=None)
    inputs["dsl"] += "\ndomain F = {" + ", ".join(f"f{i}" for i in range(22)) + "}\nhyp flaky(F)\n"
    with toolbus(server) as ws:
        action_id = _start(ws, inputs)
    events = follow(server, action_id, timeout=120)
    started = next(e for e in events if e["event"] == "action_started")["data"]["ts"]
    last = events[-1]
    assert last["event"] == "action_partial", last["event"]
    assert last["data"]["ts"] - started <= 10 * 1.1, last["data"]["ts"] - started
    ladder = [e["data"]["payload"] for e in events if e["event"] == "action_checkpoint"
              and "degradation" in e["data"]["payload"]]
    # the search spends its budget and the ladder walks on in verification: before a check ("verify"),
    # or, when the budget runs out inside the last check (a loaded machine), as the summary is written
    assert [p["degradation"] for p in ladder][-1] == "conservative_summary"
    assert ladder[-1]["stage"] in ("verify", "report"), ladder
    assert any("budget" in c for c in last["data"]["caveats"]), last["data"]["caveats"]
    assert all(v["band"] != "high" for v in last["data"]["outputs"]["verdicts"])
    assert last["data"]["next_tests"]


def test_a_live_stream_is_woken_by_the_writer_and_cancel_ends_a_waiting_action(server: Server) -> None:
    with toolbus(server) as ws:
        action_id = _start(ws, example_inputs("live", policies={"pii_posture": "consent"}))
        got: list[dict[str, Any]] = []
        reader = threading.Thread(target=lambda: follow(server, action_id, into=got))
        reader.start()  # connected before the run starts: everything after is pushed to it
        wait_until(lambda: got, "the reader's first event (it is connected, the action waits for consent)")
        call(ws, "actions.approve", {"action_id": action_id, "approval": "pii:consent"})
        reader.join(60)
        assert [e["id"] for e in got] == list(range(len(got))) and got[-1]["event"] == "action_completed"
        assert [e["event"] for e in got][:3] == ["action_started", "action_waiting_user", "action_progress"]
        assert all(isinstance(e["data"]["ts"], float) for e in got)  # the service's events too

        cancelled = _start(ws, example_inputs("cancel", policies={"pii_posture": "consent"}))
        call(ws, "actions.cancel", {"action_id": cancelled})
        events = follow(server, cancelled)
        assert events[-1]["event"] == "action_failed" and events[-1]["data"]["error_type"] == "ActionCancelled"
        assert call(ws, "actions.get", {"action_id": cancelled})["result"]["status"] == "cancelled"


@pytest.mark.slow
def test_kill_9_mid_action_restart_reports_interrupted_and_the_chain_verifies(tmp_path: Path) -> None:
    db = tmp_path / "receipts.sqlite"
    first = Server(db)
    with toolbus(first) as ws:
        done = _start(ws, example_inputs("before-crash"))
        follow(first, done)
        waiting = _start(ws, example_inputs("crash", policies={"pii_posture": "consent"}))
        head = follow(first, waiting, stop_after=2)  # action_started, action_waiting_user
        racing = [_start(ws, example_inputs(f"racing{i}")) for i in range(3)]  # killed mid-run, or just done
    assert first.stop(signal.SIGKILL) == -signal.SIGKILL
    with serving(db) as second, toolbus(second) as ws:
        state = call(ws, "actions.get", {"action_id": waiting})["result"]
        assert state["status"] == "interrupted"
        rest = follow(second, waiting, last_event_id=head[-1]["id"])
        assert [e["id"] for e in rest] == [head[-1]["id"] + 1]  # resumed: the rest, nothing twice
        assert rest[0]["event"] == "action_failed" and rest[0]["data"]["error_type"] == "ActionInterrupted"
        assert call(ws, "actions.get", {"action_id": done})["result"]["status"] == "completed"
        # nothing is left "running"; "start it again" runs a new attempt (tests/test_service_state.py)
        again = call(ws, "actions.start", {"ability": "cda", "inputs": example_inputs(
            "crash", policies={"pii_posture": "consent"})})["result"]
        assert again["existing"] is False and again["status"] == "waiting_user"
        for action_id in racing:  # whatever the kill cut, each stream is whole and ends exactly once
            events = follow(second, action_id)
            assert [e["id"] for e in events] == list(range(len(events)))
            assert [e["event"] for e in events].count("action_started") <= 1
            assert sum(e["event"] in ("action_completed", "action_failed", "action_partial") for e in events) == 1
            assert call(ws, "actions.get", {"action_id": action_id})["result"]["status"] in ("completed",
                                                                                             "interrupted")
        assert second.stop() == 0  # SIGTERM: a clean stop
    log = ReceiptLog(db)
    try:
        assert log.verify().ok
        assert any(e.receipt.name == "action.interrupted" for e in log.entries(waiting))
    finally:
        log.close()
    # the whole file too: events against their action.end receipts, attempts, the signed head
    audit = subprocess.run([sys.executable, "-m", "cda", "receipts", "verify", str(db)], capture_output=True,
                           text=True, timeout=60)
    assert audit.returncode == 0, audit.stdout + audit.stderr


def test_sigterm_ends_open_streams_and_a_running_server_exits_0(tmp_path: Path) -> None:
    db = tmp_path / "receipts.sqlite"
    server = Server(db)
    with toolbus(server) as ws:
        waiting = _start(ws, example_inputs("term", policies={"pii_posture": "consent"}))
    got: list[dict[str, Any]] = []
    ended: list[str] = []

    def read() -> None:
        follow(server, waiting, into=got)  # raises (httpx's read timeout, 60 s) if the stream is left open
        ended.append("closed by the server")

    reader = threading.Thread(target=read)
    reader.start()
    wait_until(lambda: got, "the reader's first event (its stream is open, the action waits for consent)")
    assert server.stop() == 0
    reader.join(HANG)
    assert not reader.is_alive() and ended == ["closed by the server"]
    events = read_stream(db, waiting)
    assert events[-1].type == "action_failed" and "ActionInterrupted" in events[-1].data


def test_a_bad_stored_event_is_skipped_with_a_notice_and_old_streams_are_swept(server: Server, tmp_path: Path) -> None:
    with toolbus(server) as ws:
        action_id = _start(ws, example_inputs("bad-row"))
    full = follow(server, action_id)
    db = Path(server.proc.args[4])  # type: ignore[index]
    # events are append-only (issue 13: a trigger refuses UPDATE), so damage a row as a bad disk or an
    # outside writer would: past the trigger. Closed whatever happens: an open write transaction here
    # would lock the module's shared server file for the next tests.
    with closing(sqlite3.connect(db, isolation_level=None)) as conn:
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("DROP TRIGGER events_no_update")
        conn.execute("UPDATE events SET body = '{not json' WHERE action_id = ? AND seq = 2", (action_id,))
        conn.execute(EVENT_SCHEMA[1])
        conn.execute("COMMIT")
    again = follow(server, action_id)
    assert [e["id"] for e in again] == [e["id"] for e in full]  # the same ids, no gap, the stream ends
    assert again[2]["event"] == "action_notice" and "could not be read" in again[2]["data"]["message"]
    assert again[-1]["event"] == "action_completed"
    with toolbus(server) as ws:  # the signed head moves on to another action (the sweep spares its attempt)
        later = _start(ws, example_inputs("bad-row-later"))
    follow(server, later)
    wait_signed(db, later)
    assert sweep(db, retention_s=24 * 3600) == 0  # young: kept
    assert sweep(db, retention_s=3600, now=time.time() + 2 * 24 * 3600) >= len(full)
    assert read_stream(db, action_id) == []


def test_a_reader_that_does_not_read_is_dropped_with_a_bounded_buffer() -> None:
    from cda.service.streams import Hub

    async def scenario() -> tuple[int, bool, bool]:
        hub = Hub(Path("/nonexistent.sqlite"), buffer=4)
        slow, fast = hub.subscribe("a"), hub.subscribe("a")
        for seq in range(10):
            hub.publish("a", StoredEvent(seq, "action_progress", "{}"))
            fast.buffer.clear()  # the fast reader keeps up
        return len(slow.buffer), slow.dropped, fast.dropped

    held, slow_dropped, fast_dropped = asyncio.run(scenario())
    assert (held, slow_dropped, fast_dropped) == (0, True, False)


def test_streams_serve_the_latest_attempt_and_the_sweep_spares_the_signed_heads_attempt(tmp_path: Path) -> None:
    from cda.adapters.event_store import EventStore
    from cda.contracts.events import ActionCompleted, ActionProgress, ActionStarted

    db = tmp_path / "receipts.sqlite"
    store = EventStore(db)
    try:
        for attempt in (1, 2):  # two runs of one action id (store format 2 keeps both)
            store.append(ActionStarted(action_id="a", seq=0, attempt=attempt, ts=1000.0))
            store.append(ActionProgress(action_id="a", seq=1, attempt=attempt, phase=f"run{attempt}",
                                        fraction=0.5, ts=1000.0))
            store.append(ActionCompleted(action_id="a", seq=2, attempt=attempt, ts=1000.0))
        store.append(ActionStarted(action_id="b", seq=0, ts=1000.0))
        store.append(ActionCompleted(action_id="b", seq=1, ts=1000.0))
    finally:
        store.close()
    stream = read_stream(db, "a")
    assert [e.seq for e in stream] == [0, 1, 2] and all(json.loads(e.data)["attempt"] == 2 for e in stream)
    assert json.loads(last_events(db)["a"].data)["attempt"] == 2
    (tmp_path / "receipts.sqlite.head.json").write_text("{}", encoding="utf-8")  # read as the head below:
    real_head = {"action_id": "a", "attempt": 2, "phase": "end"}  # `cda run` signed a's attempt 2
    import cda.keys.signing as signing
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(signing, "read_head", lambda _path: real_head)
        assert sweep(db, retention_s=3600, now=1000.0 + 7200) == 3 + 2  # a's attempt 1 and all of b
    assert [e.seq for e in read_stream(db, "a")] == [0, 1, 2] and read_stream(db, "b") == []


def test_the_service_relaxes_fsync_on_its_own_connections_only(tmp_path: Path) -> None:
    from cda.actions.receipts import ReceiptLog as Log
    from cda.adapters.event_store import EventStore
    from cda.service.actions import relax_fsync

    log, events = Log(tmp_path / "r.sqlite"), EventStore(tmp_path / "r.sqlite")
    try:
        relax_fsync(log)
        relax_fsync(events)
        assert [s.file.conn.execute("PRAGMA synchronous").fetchone()[0] for s in (log, events)] == [1, 1]  # NORMAL
        other = sqlite3.connect(tmp_path / "r.sqlite")
        assert other.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL: nobody else's setting changed
        other.close()
    finally:
        log.close()
        events.close()


def test_an_action_written_by_another_process_is_followed_live(server: Server) -> None:
    from cda.adapters.event_store import EventStore
    from cda.contracts.events import ActionCompleted, ActionProgress, ActionStarted

    db = Path(server.proc.args[4])  # type: ignore[index]
    writer = EventStore(db)  # as `cda run --out` beside the server would
    try:
        writer.append(ActionStarted(action_id="ext-1", seq=0))
        got: list[dict[str, Any]] = []
        reader = threading.Thread(target=lambda: follow(server, "ext-1", into=got))
        reader.start()
        wait_until(lambda: got, "the reader's first event (it follows the stream live)")
        for seq in range(1, 60):
            writer.append(ActionProgress(action_id="ext-1", seq=seq, phase="solve", fraction=0.5))
        writer.append(ActionCompleted(action_id="ext-1", seq=60))
        reader.join(30)
    finally:
        writer.close()
    assert [e["id"] for e in got] == list(range(61)) and got[-1]["event"] == "action_completed"


def test_a_damaged_store_is_a_plain_error_on_both_transports_never_a_traceback(tmp_path: Path) -> None:
    db = tmp_path / "receipts.sqlite"
    with serving(db) as server:
        with toolbus(server) as ws:
            action_id = _start(ws, example_inputs("damaged"))
            follow(server, action_id)
            junk = tmp_path / "junk"
            junk.write_bytes(b"this is not an SQLite file any more" * 200)
            for side in ("-wal", "-shm"):
                Path(f"{db}{side}").unlink(missing_ok=True)
            junk.replace(db)  # the file is replaced under the running server
            answer = call(ws, "actions.get", {"action_id": action_id})
            assert answer["error"]["code"] == "internal" and str(tmp_path) not in answer["error"]["message"]
        import httpx

        r = httpx.get(f"{server.base}/streams/actions/{action_id}", timeout=10)
        assert r.status_code == 500 and "cannot read the event store" in r.text and str(tmp_path) not in r.text
        server.stop()
        assert "Traceback" not in server.stderr()


def test_an_action_acknowledged_but_killed_before_its_first_event_is_interrupted_after_restart(tmp_path: Path) -> None:
    from cda.contracts.receipt import Receipt

    db = tmp_path / "receipts.sqlite"
    log = ReceiptLog(db)  # what a server leaves when killed between answering actions.start and the run
    log.append(Receipt(action_id="cda-ghost", seq=0, kind="action", name="service.start", inputs_hash="0" * 64))
    log.close()
    with serving(db) as server, toolbus(server) as ws:
        assert call(ws, "actions.get", {"action_id": "cda-ghost"})["result"]["status"] == "interrupted"
        events = follow(server, "cda-ghost")
        assert [(e["id"], e["event"]) for e in events] == [(0, "action_failed")]
