"""What the service remembers across a restart, over the wire (issue 15's last gaps).

- a consumer's bound sub-action outputs: after kill -9 and a restart, a new revision of the bound
  output offers ``update_available`` and ``accept_update`` gives structure revision 2;
- owners: after a restart a recovered action is still its starter's (another partner gets what
  an unknown id gets), also for a store written before the state file existed (migrated);
- attempts: everything the service streams is filed under the attempt it belongs to, so a re-run
  of an action id never mixes with the first run, on the wire or in the store.

Each test runs real ``cda serve`` processes (tests/service_harness.py) and checks the file with
``cda receipts verify`` (chain, events against their ``action.end`` receipts, the signed head).
"""

from __future__ import annotations

import json
import shutil
import signal
import sqlite3
import subprocess
import sys
from contextlib import closing
from pathlib import Path
from typing import Any

import httpx
import pytest

from cda.actions.receipts import ReceiptLog
from cda.adapters.auth import token_hash
from cda.contracts.receipt import sha256_hex
from cda.keys.signing import head_path, load_signer
from cda.service.state import state_path
from tests.conftest import ROOT
from tests.service_harness import Server, call, example_inputs, follow, serving, toolbus, wait_signed


def _verify(db: Path) -> str:
    """``cda receipts verify DB``: its report; the test fails unless the file is intact."""
    done = subprocess.run([sys.executable, "-m", "cda", "receipts", "verify", str(db)], capture_output=True,
                          text=True, cwd=ROOT, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def _inputs(purpose: str, **changes: Any) -> dict[str, Any]:
    return example_inputs(purpose, observations=[{"kind": "span", "source": "pager:1", "excerpt": "observe slow(web)"}],
                          **changes)


@pytest.mark.slow  # a kill-and-restart loop: .ci/run's slow step (README: the test command leaves it out)
def test_accept_update_after_kill_9_and_restart_gives_revision_2_and_the_file_verifies(tmp_path: Path) -> None:
    providers = tmp_path / "providers"
    (providers / "research").mkdir(parents=True)
    source = providers / "research" / "probe-auth.txt"
    source.write_text("observe slow(auth)\n", encoding="utf-8")
    db = tmp_path / "receipts.sqlite"
    with serving(db, "--providers", str(providers)) as first:  # stopped even when an assertion fails
        with toolbus(first) as ws:
            started = call(ws, "actions.start", {"ability": "cda", "inputs": _inputs("restart-bind"), "subactions": [
                {"ability": "research", "source": "probe-auth", "edge": "bind"}]})["result"]
        consumer, (sub_r1,) = started["action_id"], started["linked"]
        before = follow(first, consumer)
        assert before[-1]["event"] == "action_completed" and before[-1]["data"]["outputs"]["revision"] == 1
        wait_signed(db, consumer)  # the consumer's attempt has ended (and is signed) when the server dies
        assert first.stop(signal.SIGKILL) == -signal.SIGKILL

    source.write_text("observe slow(auth)\nobserve not slow(db)\n", encoding="utf-8")
    with serving(db, "--providers", str(providers)) as second:
        with toolbus(second) as ws:
            refreshed = call(ws, "actions.refresh", {"action_id": sub_r1})["result"]
            sub_r2 = refreshed["action_id"]
            assert refreshed["revision"] == 2 and refreshed["updates_for"] == [consumer]
            offer = follow(second, sub_r2)
            assert [e["event"] for e in offer] == ["action_started", "action_checkpoint", "action_completed"]
            assert offer[1]["data"]["payload"]["update_available"] == {"consumers": [consumer]}
            got = call(ws, "actions.get", {"action_id": consumer})["result"]
            assert got["updates_available"] == [sub_r2] and got["revision"] == 1
            assert call(ws, "actions.accept_update", {"action_id": consumer, "update": sub_r1})["error"]["code"] == \
                "conflict"  # what the consumer locked is no update
            accepted = call(ws, "actions.accept_update", {"action_id": consumer, "update": sub_r2})["result"]
            assert accepted["revision"] == 2 and accepted["action_id"] != consumer
        after = follow(second, accepted["action_id"])
        outputs = after[-1]["data"]["outputs"]
        assert after[-1]["event"] == "action_completed" and outputs["revision"] == 2
        assert outputs["supersedes"] == before[-1]["data"]["outputs"]["plan_bundle_id"]
        assert [e["id"] for e in after] == list(range(len(after)))  # the stream is whole
        assert second.stop() == 0
    log = ReceiptLog(db)
    try:
        assert "bind.accept" in [e.receipt.name for e in log.entries(consumer)]
        binds = [e.receipt for e in log.entries(accepted["action_id"]) if e.receipt.name == "bind"]
        assert [{k: v for k, v in b.result.items() if k != "vouched"} for b in binds] == [  # the vouch aside
            {"revision": 2, "sha256": sha256_hex(source.read_text(encoding="utf-8"))}]
    finally:
        log.close()
    assert "intact" in _verify(db)


def _auth(tmp_path: Path) -> Path:
    auth = tmp_path / "auth.json"
    auth.write_text(json.dumps({"tokens": [
        {"name": "alice", "sha256": token_hash("tok-alice"), "profile": "partner"},
        {"name": "bob", "sha256": token_hash("tok-bob"), "profile": "partner"},
        {"name": "reviewer", "sha256": token_hash("tok-internal"), "profile": "internal"},
    ]}), encoding="utf-8")
    return auth


def _owner_checks(server: Server, action_id: str) -> None:
    """Bob gets what an unknown id gets; Alice (the starter) and the internal reviewer get the action."""
    with toolbus(server, "tok-bob") as bob:
        for method in ("actions.get", "actions.cancel"):
            mine = call(bob, method, {"action_id": action_id})["error"]
            unknown = call(bob, method, {"action_id": "cda-0000000000000000"})["error"]
            assert mine["code"] == unknown["code"] == "not_found", (method, mine)
            assert mine["message"] == unknown["message"].replace("cda-0000000000000000", action_id)
    for token in ("tok-alice", "tok-internal"):
        with toolbus(server, token) as ws:
            assert call(ws, "actions.get", {"action_id": action_id})["result"]["action_id"] == action_id, token
    assert follow(server, action_id, token="tok-bob") == []  # his stream: 204, as for an unknown id
    assert follow(server, action_id, token="tok-alice")[-1]["event"].startswith("action_")


def test_owners_survive_a_restart_and_an_older_store_is_migrated(tmp_path: Path) -> None:
    db, auth = tmp_path / "receipts.sqlite", _auth(tmp_path)
    with serving(db, "--auth", str(auth)) as first:  # stopped even when an assertion fails
        with toolbus(first, "tok-alice") as alice:
            done = call(alice, "actions.start", {"ability": "cda", "inputs": _inputs("owned")})["result"]["action_id"]
            waiting = call(alice, "actions.start", {"ability": "cda", "inputs": _inputs(
                "owned-waiting", policies={"pii_posture": "consent"})})["result"]["action_id"]
        follow(first, done, token="tok-alice")
        _owner_checks(first, done)
        assert first.stop(signal.SIGKILL) == -signal.SIGKILL
    with serving(db, "--auth", str(auth)) as second:  # recovered: `waiting` is now interrupted
        for action_id in (done, waiting):
            _owner_checks(second, action_id)
    # a store a server before the state file wrote: the owners come back from its service.start receipts
    state_path(db).unlink()
    for suffix in ("-wal", "-shm"):
        Path(f"{state_path(db)}{suffix}").unlink(missing_ok=True)
    with serving(db, "--auth", str(auth)) as third:
        _owner_checks(third, done)
        with toolbus(third, "tok-alice") as alice:  # the store works as before: a new action, its stream
            fresh = call(alice, "actions.start", {"ability": "cda", "inputs": _inputs("after-migration")})["result"]
        assert follow(third, fresh["action_id"], token="tok-alice")[-1]["event"] == "action_completed"
        _owner_checks(third, fresh["action_id"])
    with closing(sqlite3.connect(state_path(db))) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == 1
        owners = dict(conn.execute("SELECT key, principal FROM owners").fetchall())
    assert owners[done] == owners[waiting] == owners[fresh["action_id"]] == "alice"
    assert "token" not in json.dumps(owners)  # the principal's name, never a token
    _verify(db)


def test_a_rerun_of_an_action_id_files_every_event_under_its_own_attempt(tmp_path: Path) -> None:
    db = tmp_path / "receipts.sqlite"
    inputs = _inputs("rerun", policies={"pii_posture": "consent"})
    with serving(db) as first:  # stopped even when an assertion fails
        with toolbus(first) as ws:
            action_id = call(ws, "actions.start", {"ability": "cda", "inputs": inputs})["result"]["action_id"]
        head = follow(first, action_id, stop_after=2)
        assert [(e["event"], e["data"]["attempt"]) for e in head] == [("action_started", 1), ("action_waiting_user", 1)]
        assert first.stop(signal.SIGKILL) == -signal.SIGKILL
    with serving(db) as second:
        with toolbus(second) as ws:
            assert call(ws, "actions.get", {"action_id": action_id})["result"]["status"] == "interrupted"
            again = call(ws, "actions.start", {"ability": "cda", "inputs": inputs})["result"]
            assert again["action_id"] == action_id and again["existing"] is False
            assert again["status"] == "waiting_user"
            waiting = follow(second, action_id, stop_after=2)  # the new attempt's own first events
            assert [(e["sse_id"], e["event"], e["data"]["attempt"]) for e in waiting] == [
                ("2:0", "action_started", 2), ("2:1", "action_waiting_user", 2)]
            call(ws, "actions.approve", {"action_id": action_id, "approval": "pii:consent"})
        second_run = follow(second, action_id)
        assert [e["id"] for e in second_run] == list(range(len(second_run)))
        assert {e["attempt"] for e in second_run} == {e["data"]["attempt"] for e in second_run} == {2}
        assert [e["event"] for e in second_run][:2] == ["action_started", "action_waiting_user"]
        assert second_run[-1]["event"] == "action_completed"

        first_run = follow(second, action_id, query="?attempt=1")
        assert [(e["sse_id"], e["event"]) for e in first_run] == [
            ("0", "action_started"), ("1", "action_waiting_user"), ("2", "action_failed")]
        assert first_run[2]["data"]["error_type"] == "ActionInterrupted" and first_run[2]["data"]["attempt"] == 1
        # resume each attempt by its Last-Event-ID: the rest of that attempt, never the other's
        assert [e["sse_id"] for e in follow(second, action_id, last_event_id=1)] == ["2"]
        assert follow(second, action_id, last_event_id=2) == []  # attempt 1 had it all: 204
        rest = follow(second, action_id, last_event_id="2:3")
        assert [e["sse_id"] for e in rest] == [e["sse_id"] for e in second_run[4:]]
        with httpx.Client(timeout=30) as client:
            url = f"{second.base}/streams/actions/{action_id}"
            assert client.get(url, headers={"Last-Event-ID": str(len(first_run) - 1)}).status_code == 204
            assert client.get(url + "?attempt=2", headers={"Last-Event-ID": "1"}).status_code == 400  # mismatch
            assert client.get(url, headers={"Last-Event-ID": "0:1"}).status_code == 400
        signed = wait_signed(db, action_id, attempt=2)
        assert signed["events"] == len(second_run)
        assert second.stop() == 0
    with closing(sqlite3.connect(db)) as conn:
        stored = conn.execute("SELECT attempt, seq, json_extract(body, '$.type'), json_extract(body, '$.attempt') "
                              "FROM events WHERE action_id = ? ORDER BY attempt, seq", (action_id,)).fetchall()
    assert stored[:3] == [(1, 0, "action_started", 1), (1, 1, "action_waiting_user", 1), (1, 2, "action_failed", 1)]
    assert [row[:2] for row in stored[3:]] == [(2, i) for i in range(len(second_run))]
    assert all(row[3] == 2 for row in stored[3:])
    assert "signed head at entry" in _verify(db)


def test_the_server_signs_what_a_crash_left_and_never_on_top_of_a_rewritten_log(tmp_path: Path) -> None:
    """A server killed between an attempt's ``action.end`` and its signature leaves an ended
    attempt after the signed head; the next start signs it (it is the signer that wrote it). A
    log that no longer holds its signed head is refused, and its head kept as evidence."""
    from cda.actions.receipts import TRIGGERS
    from cda.contracts.receipt import Receipt

    db = tmp_path / "receipts.sqlite"
    with serving(db) as first:
        with toolbus(first) as ws:
            action_id = call(ws, "actions.start", {"ability": "cda", "inputs": _inputs("signed")})["result"]["action_id"]
        follow(first, action_id)
        assert first.stop() == 0
    end = Receipt(action_id=action_id, seq=0, kind="action", name="action.end", inputs_hash="0" * 64,
                  result={"status": "completed", "events": 0}, attempt=2)
    forged = tmp_path / "forged.sqlite"  # the same end appended by someone without the key: never signed over
    shutil.copyfile(db, forged)
    shutil.copyfile(head_path(db), head_path(forged))
    with closing(ReceiptLog(forged)) as log:
        log.append(end)
    unsigned = subprocess.run([sys.executable, "-m", "cda", "receipts", "verify", str(forged)], capture_output=True,
                              text=True, cwd=ROOT, timeout=60)
    assert unsigned.returncode != 0 and "ended after the signed head" in unsigned.stdout
    refused = subprocess.run([sys.executable, "-m", "cda", "serve", str(forged), "--port", "0"], capture_output=True,
                             text=True, cwd=ROOT, timeout=60)
    assert refused.returncode == 2 and "not vouched for by this key where they are" in refused.stderr, refused.stderr
    with closing(ReceiptLog(db, signer=load_signer())) as log:  # what the killed server had written in that instant
        log.append(end)
    vouched = subprocess.run([sys.executable, "-m", "cda", "receipts", "verify", str(db)], capture_output=True,
                             text=True, cwd=ROOT, timeout=60)
    assert vouched.returncode == 0 and "each vouched for by the trusted key" in vouched.stdout, vouched.stdout
    with serving(db) as second:
        assert second.stop() == 0
    assert "signed head at entry" in _verify(db)
    head = (tmp_path / "receipts.sqlite.head.json").read_text(encoding="utf-8")

    with closing(sqlite3.connect(db, isolation_level=None)) as conn:  # truncate the log past its triggers
        conn.execute("BEGIN IMMEDIATE")
        for name in TRIGGERS:
            conn.execute(f"DROP TRIGGER {name}")
        conn.execute("DELETE FROM receipts WHERE rowid > (SELECT MAX(rowid) - 3 FROM receipts)")
        for statement in TRIGGERS.values():
            conn.execute(statement)
        conn.execute("COMMIT")
    refused = subprocess.run([sys.executable, "-m", "cda", "serve", str(db), "--port", "0"], capture_output=True,
                             text=True, cwd=ROOT, timeout=60)
    assert refused.returncode == 2 and "no longer in the log" in refused.stderr, refused.stderr
    assert "Traceback" not in refused.stderr
    assert (tmp_path / "receipts.sqlite.head.json").read_text(encoding="utf-8") == head  # the evidence is kept
