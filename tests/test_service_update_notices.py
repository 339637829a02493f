"""The consumer's own stream carries the updates offered to it (issue 33): after its terminal event,
an ``action_update_available`` event with an ``update.offered`` receipt of its own, which
``cda receipts verify`` accepts, and nothing else after ``action.end`` (docs/service.md, "Sub-actions").

A real ``cda serve`` with local providers and real clients (``websockets`` for the ToolBus, ``httpx``
+ ``httpx-sse`` for the streams); the tampering is done on real copies of the server's SQLite file.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import httpx
import pytest

from cda.actions.audit import AuditReport, audit_file
from cda.actions.receipts import ReceiptLog, entry_hash
from cda.actions.store_file import EVENT_SCHEMA
from cda.contracts.receipt import canonical_json, sha256_hex
from cda.keys.signing import head_path, load_signer, read_head
from cda.service.event_reads import last_events, read_stream, sweep
from tests.service_harness import HANG, call, example_inputs, follow, serving, toolbus, wait_for
from tests.test_service_page import CHROMIUM, browser


@pytest.fixture(scope="module")
def offered(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """A server, a consumer that bound a research output and ended, and what a live follower
    (``?updates=1``, connected before the refresh) received when a newer revision was offered."""
    root = tmp_path_factory.mktemp("notices")
    source = root / "providers" / "research" / "probe.txt"
    source.parent.mkdir(parents=True)
    source.write_text("observe slow(auth)\n", encoding="utf-8")
    db = root / "receipts.sqlite"
    with pytest.MonkeyPatch.context() as env:  # a module fixture starts before conftest's per-test key folder
        env.setenv("CDA_KEY_DIR", str(tmp_path_factory.getbasetemp() / "cda-keys"))
        with serving(db, "--providers", str(root / "providers")) as server, toolbus(server) as ws:
            started = call(ws, "actions.start", {"ability": "cda", "inputs": example_inputs("notice"),
                                                 "subactions": [{"ability": "research", "source": "probe", "edge": "bind"}]})
            consumer, (locked,) = started["result"]["action_id"], started["result"]["linked"]
            before = follow(server, consumer)
            assert before[-1]["event"] == "action_completed"
            end = before[-1]["id"]
            live: list[dict[str, Any]] = []
            reader = threading.Thread(target=follow, args=(server, consumer), daemon=True,
                                      kwargs={"query": "?updates=1", "into": live, "stop_after": end + 2})
            reader.start()
            wait_for(lambda: len(live) == end + 1)  # connected: it has the whole backlog and waits past the end
            source.write_text("observe slow(auth)\nobserve not slow(db)\n", encoding="utf-8")
            refreshed = call(ws, "actions.refresh", {"action_id": locked})["result"]
            reader.join(HANG)
            assert not reader.is_alive(), live
            wait_for(lambda: read_head(head_path(db))["action_id"] == consumer and read_head(head_path(db))["events"] == end + 2)
            yield {"server": server, "ws": ws, "db": db, "consumer": consumer, "end": end, "live": live,
                   "revision": refreshed["action_id"], "source": source, "locked": locked}


def test_a_live_follower_that_asked_gets_the_offered_update_after_the_terminal_event(offered: dict[str, Any]) -> None:
    live, end = offered["live"], offered["end"]
    assert [m["event"] for m in live[end:]] == ["action_completed", "action_update_available"]
    notice = live[-1]["data"]
    assert live[-1]["id"] == end + 1 and notice["seq"] == end + 1 and isinstance(notice["ts"], float)
    assert notice["sub_action"] == offered["revision"] and notice["revision"] == 2
    assert notice["sha256"] == sha256_hex("observe slow(auth)\nobserve not slow(db)\n")


def test_every_other_reader_gets_it_from_the_store_and_its_stream_still_ends(offered: dict[str, Any]) -> None:
    server, consumer, end = offered["server"], offered["consumer"], offered["end"]
    whole = follow(server, consumer)  # the default: the stored stream, then the end (no wait past it)
    assert [m["event"] for m in whole[-2:]] == ["action_completed", "action_update_available"]
    resumed = follow(server, consumer, last_event_id=end)  # cut off at the terminal event
    assert [(m["id"], m["event"]) for m in resumed] == [(end + 1, "action_update_available")]
    assert follow(server, consumer, last_event_id=end + 1) == []  # 204: nothing after it
    with httpx.Client(timeout=30) as client:
        bad = client.get(f"{server.base}/streams/actions/{consumer}?updates=maybe")
    assert bad.status_code == 400 and "updates must be" in bad.text
    got = call(offered["ws"], "actions.get", {"action_id": consumer})["result"]
    assert got["status"] == "completed" and got["last_event_id"] == end + 1  # the update does not reopen it
    assert got["updates_available"] == [offered["revision"]]


def test_the_receipted_update_verifies_and_the_integrity_drawer_says_intact(offered: dict[str, Any]) -> None:
    db, consumer, end = offered["db"], offered["consumer"], offered["end"]
    with closing(ReceiptLog(db)) as log:
        receipts = [e.receipt for e in log.entries(consumer) if e.receipt.name == "update.offered"]
    (receipt,) = receipts
    (body,) = [e.data for e in read_stream(db, consumer, end)]
    assert {k: v for k, v in receipt.result.items() if k != "vouched"} == {
        "event_seq": end + 1, "event_sha256": sha256_hex(body)} and receipt.attempt == 1
    assert receipt.result["vouched"]["key"] == load_signer().public_key  # the server vouched for it
    report = _audit(db)
    assert report.status == "intact", report.problems
    integrity = call(offered["ws"], "artifacts.integrity", {"action_id": consumer})["result"]
    assert integrity["status"] == "intact" and integrity["covered"] is True, integrity


def _copy(offered: dict[str, Any], folder: Path) -> Path:
    """A consistent copy of the live server's file (SQLite's backup) and its signed head."""
    target = folder / "copy.sqlite"
    with closing(sqlite3.connect(offered["db"])) as src, closing(sqlite3.connect(target)) as dst:
        src.backup(dst)
    shutil.copy(head_path(offered["db"]), head_path(target))
    return target


def _audit(db: Path) -> AuditReport:
    return audit_file(db, trusted_key=load_signer().public_key)


def _last_row(conn: sqlite3.Connection, action_id: str) -> tuple[int, str, str, str]:
    return conn.execute("SELECT seq, body, prev_hash, entry_hash FROM events WHERE action_id = ? "
                        "ORDER BY seq DESC LIMIT 1", (action_id,)).fetchone()  # type: ignore[no-any-return]


def test_an_unreceipted_event_after_the_end_is_tampering(offered: dict[str, Any], tmp_path: Path) -> None:
    db, consumer = _copy(offered, tmp_path), offered["consumer"]
    assert _audit(db).status == "intact"
    with closing(sqlite3.connect(db, isolation_level=None)) as conn:
        seq, body, _, last = _last_row(conn, consumer)
        forged = canonical_json({**json.loads(body), "seq": seq + 1, "sub_action": "research-forged.r9"})
        conn.execute("INSERT INTO events VALUES (?, 1, ?, ?, ?, ?)", (consumer, seq + 1, forged, last,
                                                                     entry_hash(last, forged)))  # chained as the store does
    report = _audit(db)
    assert report.status == "tampered"
    assert any(f"event {seq + 1} of {consumer}#1 follows its action.end and no update.offered receipt" in p
               for p in report.problems), report.problems


def test_an_edited_or_deleted_update_is_tampering(offered: dict[str, Any], tmp_path: Path) -> None:
    consumer = offered["consumer"]
    (tmp_path / "edit").mkdir()
    (tmp_path / "delete").mkdir()
    edited, deleted = _copy(offered, tmp_path / "edit"), _copy(offered, tmp_path / "delete")
    with closing(sqlite3.connect(edited, isolation_level=None)) as conn:  # past the append-only trigger, rechained
        seq, body, prev, _ = _last_row(conn, consumer)
        changed = canonical_json({**json.loads(body), "revision": 7})
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("DROP TRIGGER events_no_update")
        conn.execute("UPDATE events SET body = ?, entry_hash = ? WHERE action_id = ? AND seq = ?",
                     (changed, entry_hash(prev, changed), consumer, seq))
        conn.execute(EVENT_SCHEMA[1])
        conn.execute("COMMIT")
    report = _audit(edited)
    assert report.status == "tampered"
    assert f"event {seq} of {consumer}#1 (an offered update) is not the one its update.offered receipt vouches " \
           "for: edited" in report.problems, report.problems
    with closing(sqlite3.connect(deleted, isolation_level=None)) as conn:
        conn.execute("DELETE FROM events WHERE action_id = ? AND seq = ?", (consumer, seq))
    report = _audit(deleted)
    assert report.status == "tampered"
    assert any(f"event {seq} of {consumer}#1, an offered update its update.offered receipt names, is missing" in p
               for p in report.problems), report.problems


def test_an_update_after_the_end_neither_reopens_the_run_nor_keeps_it_from_the_sweep(
        offered: dict[str, Any], tmp_path: Path) -> None:
    """A restart marks unfinished runs interrupted, and the sweep ages finished ones: both read the
    run's own last event, which the offered update follows."""
    db, consumer = _copy(offered, tmp_path), offered["consumer"]
    assert read_stream(db, consumer)[-1].type == "action_update_available"
    assert last_events(db)[consumer].type == "action_completed"
    head_path(db).unlink()  # the sweep spares the attempt a signed head vouches for (the consumer's, here)
    assert sweep(db, retention_s=3600, now=4102444800.0) >= len(read_stream(offered["db"], consumer))  # in 2100
    assert read_stream(db, consumer) == []  # ended, so aged and swept like any finished stream


def test_a_server_restarted_on_the_file_leaves_the_consumer_completed(offered: dict[str, Any], tmp_path: Path) -> None:
    db, consumer = _copy(offered, tmp_path), offered["consumer"]
    with serving(db, "--providers", str(tmp_path)) as again, toolbus(again) as ws:
        got = call(ws, "actions.get", {"action_id": consumer})["result"]
        assert got["status"] == "completed"
    with closing(ReceiptLog(db)) as log:
        assert not [e for e in log.entries(consumer) if e.receipt.name == "action.interrupted"]
    assert _audit(db).status == "intact"



@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install -y chromium)")
def test_the_page_lists_the_offered_updates_and_a_new_one_without_a_reload(offered: dict[str, Any], tmp_path: Path) -> None:
    """Last in this file: it offers one more revision."""
    server, consumer = offered["server"], offered["consumer"]
    with browser(tmp_path) as page:
        page.send("Page.navigate", {"url": f"{server.base}/?action={consumer}"})
        page.wait("document.querySelectorAll('#updates li').length === 1")
        assert page.js("document.body.dataset.state") == "done action_completed"  # an update does not reopen it
        assert page.js("document.querySelector('#updates li').dataset.subAction") == offered["revision"]
        assert page.js("document.getElementById('updates-box').hidden") is False
        offered["source"].write_text("observe slow(auth)\nobserve slow(api)\n", encoding="utf-8")
        newer = call(offered["ws"], "actions.refresh", {"action_id": offered["locked"]})["result"]["action_id"]
        page.wait("document.querySelectorAll('#updates li').length === 2")  # live: the stream stayed open
        assert page.js("[...document.querySelectorAll('#updates li')].map(li => li.dataset.subAction)") == \
            [offered["revision"], newer]
        assert page.js("document.body.dataset.state") == "done action_completed"
        ids = page.timeline()
        assert ids == list(range(len(ids)))  # nothing twice, no gap
