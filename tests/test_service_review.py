"""The service's state and attempts, after the review of /work/wt/review_svc.md (one test per finding).

- every stream ends: an attempt older than the latest is over, even without its terminal event
  (a run killed mid-way, then run again), whatever the client names (``?attempt=``, ``Last-Event-ID``);
- a head is signed only over a log that still holds the head signed before (checked at each
  signature: a server lives for days), otherwise ``action.tampered`` and no signature;
- with ``--auth`` a partner's ids are their own: the same inputs (or sub-action source) from two
  partners are two actions, and neither answer tells the other's exists;
- ``actions.get`` gives the id a client resumes with, attempt included;
- the watcher of other processes' writes reads after its cursor;
- the state file is marked; a foreign, newer or misplaced file, and a lost log under a kept
  signed head, are exit 2 before anything is created or touched.

Real ``cda serve`` processes on 127.0.0.1 (tests/service_harness.py), stopped also when an assertion fails.
"""

from __future__ import annotations

import asyncio
import hashlib
import io
import json
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from contextlib import closing
from pathlib import Path
from typing import Any

import httpx
import pytest

from cda.actions.receipts import TRIGGERS, ReceiptLog
from cda.adapters.auth import token_hash
from cda.adapters.event_store import EventStore
from cda.contracts.events import ActionCompleted, ActionProgress, ActionStarted
from cda.service.state import APPLICATION_ID, ServiceState, state_path
from tests.conftest import ROOT
from tests.service_harness import call, example_inputs, follow, serving, toolbus, wait_for, wait_signed
from tests.timing import HANG

ACTION = "cda-00000000000000aa"


def _inputs(purpose: str) -> dict[str, Any]:
    return example_inputs(purpose, observations=[{"kind": "span", "source": "pager:1", "excerpt": "observe slow(web)"}])


def _drain(url: str, headers: dict[str, str] | None = None) -> tuple[int, list[str]]:
    """(status, the SSE ids) of a stream that must END: a read waits at most 5 s, well under the
    server's 15 s keep-alive, so a stream that is followed for ever fails the test instead of hanging it."""
    ids: list[str] = []
    with httpx.Client(timeout=5) as client, client.stream("GET", url, headers=headers or {}) as response:
        for line in response.iter_lines():
            if line.startswith("id: "):
                ids.append(line[4:])
        return response.status_code, ids


def test_an_older_attempt_without_its_terminal_event_is_sent_and_ended(tmp_path: Path) -> None:
    """Attempt 1 stopped after a progress event (killed mid-run), attempt 2 ran to its end."""
    db = tmp_path / "receipts.sqlite"
    store = EventStore(db)
    try:
        store.append(ActionStarted(action_id=ACTION, seq=0, attempt=1))
        store.append(ActionProgress(action_id=ACTION, seq=1, phase="search", fraction=0.5, attempt=1))
        store.append(ActionStarted(action_id=ACTION, seq=0, attempt=2))
        store.append(ActionCompleted(action_id=ACTION, seq=1, attempt=2))
    finally:
        store.close()
    with serving(db) as server:
        url = f"{server.base}/streams/actions/{ACTION}"
        assert _drain(url + "?attempt=1") == (200, ["0", "1"])
        assert _drain(url, {"Last-Event-ID": "-1"}) == (200, ["0", "1"])
        assert _drain(url, {"Last-Event-ID": "0"}) == (200, ["1"])
        assert _drain(url, {"Last-Event-ID": "1"}) == (204, [])  # all of it sent: stop reconnecting
        assert _drain(url + "?attempt=1", {"Last-Event-ID": "1"}) == (204, [])
        assert _drain(url) == (200, ["2:0", "2:1"])  # the latest, as ever
        assert _drain(url, {"Last-Event-ID": "2:1"}) == (204, [])
        with toolbus(server) as ws:  # what a client resumes with names the latest attempt
            assert call(ws, "actions.get", {"action_id": ACTION})["result"]["last_event_id"] == "2:1"
        assert server.stop() == 0


def test_no_head_is_signed_over_a_log_rewritten_while_the_server_runs(tmp_path: Path) -> None:
    db = tmp_path / "receipts.sqlite"
    head = db.parent / "receipts.sqlite.head.json"
    with serving(db) as server:
        with toolbus(server) as ws:
            first = call(ws, "actions.start", {"ability": "cda", "inputs": _inputs("signed-1")})["result"]["action_id"]
        follow(server, first)
        signed = wait_signed(db, first)
        before = head.read_text(encoding="utf-8")
        with closing(sqlite3.connect(db, isolation_level=None, timeout=30)) as conn:  # past the triggers
            conn.execute("BEGIN IMMEDIATE")
            for name in TRIGGERS:
                conn.execute(f"DROP TRIGGER {name}")
            conn.execute("DELETE FROM receipts WHERE rowid > (SELECT MAX(rowid) - 3 FROM receipts)")
            for statement in TRIGGERS.values():
                conn.execute(statement)
            conn.execute("COMMIT")
        with toolbus(server) as ws:
            second = call(ws, "actions.start", {"ability": "cda", "inputs": _inputs("signed-2")})["result"]["action_id"]
        assert follow(server, second)[-1]["event"] == "action_completed"

        def tampered() -> list[Any]:
            log = ReceiptLog(db)
            try:
                return [e.receipt for e in log.entries(second) if e.receipt.name == "action.tampered"]
            finally:
                log.close()

        (receipt,) = wait_for(tampered)
        assert receipt.attempt == 1 and "no longer in the log" in receipt.result["problems"][0]
        assert head.read_text(encoding="utf-8") == before and signed["action_id"] == first  # not signed over it
        assert server.stop() == 0
        assert "no head is signed any more" in server.stderr()
    verify = subprocess.run([sys.executable, "-m", "cda", "receipts", "verify", str(db)], capture_output=True,
                            text=True, cwd=ROOT, timeout=60)
    assert verify.returncode != 0 and "rewritten" in verify.stdout, verify.stdout


def _auth(tmp_path: Path) -> Path:
    auth = tmp_path / "auth.json"
    auth.write_text(json.dumps({"tokens": [
        {"name": "alice", "sha256": token_hash("tok-alice"), "profile": "partner"},
        {"name": "bob", "sha256": token_hash("tok-bob"), "profile": "partner"},
    ]}), encoding="utf-8")
    return auth


def test_partners_sending_the_same_inputs_and_sources_get_their_own_actions(tmp_path: Path) -> None:
    providers = tmp_path / "providers"
    (providers / "research").mkdir(parents=True)
    source = providers / "research" / "probe.txt"
    source.write_text("observe slow(auth)\n", encoding="utf-8")
    db = tmp_path / "receipts.sqlite"
    params = {"ability": "cda", "inputs": _inputs("shared"),
              "subactions": [{"ability": "research", "source": "probe", "edge": "bind"}]}
    started: dict[str, dict[str, Any]] = {}
    with serving(db, "--auth", str(_auth(tmp_path)), "--providers", str(providers)) as server:
        for who in ("alice", "bob"):
            with toolbus(server, f"tok-{who}") as ws:
                started[who] = call(ws, "actions.start", params)["result"]
            assert started[who]["existing"] is False, started[who]  # not "Alice's, completed"
            assert follow(server, started[who]["action_id"], token=f"tok-{who}")[-1]["event"] == "action_completed"
        alice, bob = started["alice"], started["bob"]
        assert alice["action_id"] != bob["action_id"] and alice["linked"] != bob["linked"]

        def consumers() -> bool:
            with closing(sqlite3.connect(f"file:{state_path(db)}?mode=ro", uri=True)) as conn:
                return int(conn.execute("SELECT COUNT(*) FROM consumers").fetchone()[0]) == 2

        wait_for(consumers)
        source.write_text("observe slow(auth)\nobserve not slow(db)\n", encoding="utf-8")
        for who in ("bob", "alice"):
            with toolbus(server, f"tok-{who}") as ws:
                refreshed = call(ws, "actions.refresh", {"action_id": started[who]["linked"][0]})["result"]
                assert refreshed["revision"] == 2 and refreshed["updates_for"] == [started[who]["action_id"]], who
                other = started["alice" if who == "bob" else "bob"]
                assert call(ws, "actions.get", {"action_id": other["action_id"]})["error"]["code"] == "not_found"
        assert server.stop() == 0


def test_the_watcher_of_other_writers_reads_after_its_cursor(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """One full read at first sight, then only what follows (attempt, seq); a new attempt is seen too."""
    from cda.service import streams

    db = tmp_path / "receipts.sqlite"
    store = EventStore(db)
    store.append(ActionStarted(action_id=ACTION, seq=0, attempt=1))
    store.append(ActionProgress(action_id=ACTION, seq=1, phase="search", fraction=0.5, attempt=1))
    reads: list[tuple[str, tuple[Any, ...]]] = []

    def spy(name: str, real: Callable[..., Any]) -> Callable[..., Any]:
        def read(*args: Any) -> Any:
            reads.append((name, args[2:]))
            return real(*args)
        return read

    monkeypatch.setattr(streams, "read_stream", spy("read_stream", streams.read_stream))
    monkeypatch.setattr(streams, "read_after", spy("read_after", streams.read_after))

    async def until(condition: Callable[[], bool], what: str) -> None:
        """A wait on ``condition``, made true by the watcher's task (tests/timing.py's rule)."""
        deadline = asyncio.get_running_loop().time() + HANG
        while not condition():
            assert asyncio.get_running_loop().time() < deadline, f"timed out waiting for {what}"
            await asyncio.sleep(0.01)

    async def watch() -> list[str]:
        hub = streams.Hub(db, watch_s=0.01)
        sub = hub.subscribe(ACTION)
        task = asyncio.create_task(hub.watch_external())
        got: list[str] = []
        try:
            await until(lambda: len(sub.buffer) == 2, "the watcher's first sight of the stream")
            for event, seen in ((ActionCompleted(action_id=ACTION, seq=2, attempt=1), 3),
                                (ActionStarted(action_id=ACTION, seq=0, attempt=2), 4)):
                await asyncio.to_thread(store.append, event)
                await until(lambda n=seen: len(sub.buffer) >= n, f"the watcher to read event {seen}")
            await until(lambda: len(reads) >= 11, "ten more reads after its cursor")
            got = [e.sse_id for e in sub.buffer]
        finally:
            hub.close()
            await task
        return got

    try:
        assert asyncio.run(watch()) == ["0", "1", "2", "2:0"]
    finally:
        store.close()
    assert reads[0] == ("read_stream", (None,))  # first sight: the latest attempt, whole
    rest = reads[1:]
    assert len(rest) >= 10 and {name for name, _ in rest} == {"read_after"}
    assert rest[-1][1] == (2, 0)  # its cursor: the new attempt's first event


def _serve(db: Path) -> tuple[int, str]:
    from cda.service.serve import main_serve

    out, err = io.StringIO(), io.StringIO()
    return main_serve(db, "127.0.0.1", 0, out, err), err.getvalue()


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_bad_state_and_log_files_are_exit_2_before_anything_is_created(tmp_path: Path) -> None:
    db = tmp_path / "receipts.sqlite"
    state = state_path(db)
    for version in (0, 1):  # another program's SQLite file where the state file goes
        state.unlink(missing_ok=True)
        with closing(sqlite3.connect(state)) as conn:
            conn.execute("CREATE TABLE notes (body TEXT)")
            conn.execute(f"PRAGMA user_version = {version}")
            conn.commit()
        digest = _digest(state)
        code, err = _serve(db)
        assert code == 2 and "not a CDA file" in err and "notes" in err, err
        assert _digest(state) == digest and sorted(p.name for p in tmp_path.iterdir()) == [state.name]
    state.unlink()
    with closing(sqlite3.connect(state)) as conn:  # the service's, from a newer CDA
        conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
        conn.execute("PRAGMA user_version = 7")
        conn.execute("CREATE TABLE owners (key TEXT)")
        conn.commit()
    code, err = _serve(db)
    assert code == 2 and "newer CDA (the CDA service's state file of version 7" in err, err
    state.unlink()
    state.mkdir()  # a folder where the state file goes
    code, err = _serve(db)
    assert code == 2 and "not a file" in err, err
    state.rmdir()
    assert sorted(p.name for p in tmp_path.iterdir()) == []

    head = tmp_path / "receipts.sqlite.head.json"  # a log gone (or wiped) with its signed head kept
    head.write_text('{"kept": "as evidence"}', encoding="utf-8")
    for wiped in (False, True):
        if wiped:
            db.write_bytes(b"")
        done = subprocess.run([sys.executable, "-m", "cda", "serve", str(db), "--port", "0"], capture_output=True,
                              text=True, cwd=ROOT, timeout=60)
        assert done.returncode == 2 and "the log is gone or wiped" in done.stderr, done.stderr
        assert "Traceback" not in done.stderr
        assert sorted(p.name for p in tmp_path.iterdir()) == sorted([head.name, *([db.name] if wiped else [])])
        assert db.exists() == wiped and (not wiped or db.stat().st_size == 0)


def test_the_state_file_is_marked_and_an_unmarked_one_of_version_1_is_taken_over(tmp_path: Path) -> None:
    db = tmp_path / "receipts.sqlite"
    ServiceState(db).close()
    with closing(sqlite3.connect(state_path(db))) as conn:
        assert conn.execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID
        conn.execute("PRAGMA application_id = 0")  # as the state file was written before its mark
        conn.execute("INSERT INTO owners VALUES ('x', 'alice', 'partner')")
        conn.commit()
    state = ServiceState(db)
    try:
        assert state.owner("x") == "alice"
    finally:
        state.close()
    with closing(sqlite3.connect(state_path(db))) as conn:
        assert conn.execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID


def test_a_sub_action_a_server_before_the_state_file_spawned_can_be_refreshed(tmp_path: Path) -> None:
    """That server kept the sub-action's source in memory; its stream ``<base>.r1`` is in the file."""
    from cda.contracts.events import ActionCheckpoint
    from cda.contracts.receipt import sha256_hex

    providers = tmp_path / "providers"
    (providers / "research").mkdir(parents=True)
    source = providers / "research" / "probe-legacy.txt"
    source.write_text("observe slow(auth)\n", encoding="utf-8")
    base = f"research-{sha256_hex('probe-legacy')[:12]}"
    db = tmp_path / "receipts.sqlite"
    store = EventStore(db)  # what the server before the state file streamed for revision 1
    try:
        store.append(ActionStarted(action_id=f"{base}.r1", seq=0, ability="research", inputs_hash=sha256_hex(base)))
        store.append(ActionCheckpoint(action_id=f"{base}.r1", seq=1, kind="context_delta", payload={
            "artifact_id": f"{base}:output", "revision": 1, "sha256": sha256_hex(source.read_text(encoding="utf-8")),
            "text": source.read_text(encoding="utf-8")}))
        store.append(ActionCompleted(action_id=f"{base}.r1", seq=2))
    finally:
        store.close()
    with serving(db, "--providers", str(providers)) as server:
        with toolbus(server) as ws:
            same = call(ws, "actions.refresh", {"action_id": f"{base}.r1"})["error"]
            assert same["code"] == "conflict" and "unchanged" in same["message"], same  # known, and its text too
            source.write_text("observe slow(auth)\nobserve not slow(db)\n", encoding="utf-8")
            refreshed = call(ws, "actions.refresh", {"action_id": f"{base}.r1"})["result"]
            assert (refreshed["action_id"], refreshed["revision"]) == (f"{base}.r2", 2)
        assert [e["event"] for e in follow(server, f"{base}.r2")][-1] == "action_completed"
        assert server.stop() == 0


def test_an_attempt_begun_with_no_event_yet_is_followed_not_answered_204(tmp_path: Path) -> None:
    """One worker, busy with a first action: the second is begun (its ``service.start`` receipt)
    but queued, with no event yet; ``?attempt=1`` follows it to its end instead of telling the
    client to stop reconnecting."""
    db = tmp_path / "receipts.sqlite"
    with serving(db, "--workers", "1") as server:
        with toolbus(server) as ws:
            call(ws, "actions.start", {"ability": "cda", "inputs": _inputs("busy")})
            queued = call(ws, "actions.start", {"ability": "cda", "inputs": _inputs("queued")})["result"]["action_id"]
        events = follow(server, queued, query="?attempt=1", timeout=30)
        assert events and [e["id"] for e in events] == list(range(len(events)))
        assert events[-1]["event"] == "action_completed"
        assert server.stop() == 0
