"""What a client reads in the streams (issue 33): every event has a time, a stream begins with
``action_started``, an accepted update leaves ``updates_available``, TTFS is measured from
``actions.start`` (the queue included) beside the figure after the queue, and spec §13's legacy
aliases (``--legacy-aliases``, off by default).

Real ``cda serve`` processes with real clients (``websockets`` for the ToolBus, ``httpx`` +
``httpx-sse`` for the streams); the sweep of streams written before every event had a time is
checked on a real store file.
"""

from __future__ import annotations

import io
import json
import time
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import httpx
import pytest
from httpx_sse import connect_sse

from cda.actions.metrics import ActionProbe
from cda.actions.metrics_report import summarise, ttfs_sample
from cda.actions.metrics_runs import read_runs
from cda.actions.receipts import ReceiptLog
from cda.adapters.event_store import EventStore
from cda.cli.main import main
from cda.contracts.events import ActionCheckpoint, ActionCompleted, ActionNotice, ActionStarted
from cda.service.event_reads import read_stream, sweep
from tests.service_harness import Server, call, example_inputs, follow, serving, toolbus

TERMINAL = ("action_completed", "action_partial", "action_failed")


@pytest.fixture(scope="module")
def legacy(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, Path, Path]]:
    """A server with local providers, one worker (so actions queue) and the §13 aliases on."""
    root = tmp_path_factory.mktemp("events")
    providers = root / "providers"
    (providers / "research").mkdir(parents=True)
    (providers / "research" / "probe.txt").write_text("observe slow(auth)\n", encoding="utf-8")
    db = root / "receipts.sqlite"
    with serving(db, "--providers", str(providers), "--workers", "1", "--legacy-aliases") as server:
        yield server, providers, db


def _start(ws: Any, inputs: dict[str, Any], **params: Any) -> dict[str, Any]:
    answer = call(ws, "actions.start", {"ability": "cda", "inputs": inputs, **params})
    assert "result" in answer, answer
    return answer["result"]  # type: ignore[no-any-return]


def _raw_stream(server: Server, action_id: str, last_event_id: str | None = None) -> list[tuple[str, str, Any]]:
    """Every SSE message of a stream as (its last event id, event name, data): the aliases
    included. A message without an ``id:`` field keeps the id before it (the SSE rule)."""
    headers = {} if last_event_id is None else {"Last-Event-ID": last_event_id}
    out: list[tuple[str, str, Any]] = []
    with httpx.Client(timeout=60) as client, \
            connect_sse(client, "GET", f"{server.base}/streams/actions/{action_id}", headers=headers) as source:
        source.response.raise_for_status()
        for sse in source.iter_sse():
            if sse.data:
                out.append((sse.id, sse.event, json.loads(sse.data)))
    return out


def test_every_event_has_a_time_and_a_waiting_action_starts_before_it_waits(
        legacy: tuple[Server, Path, Path]) -> None:
    server, providers, _ = legacy
    with toolbus(server) as ws:
        waiting = _start(ws, example_inputs("ts-wait", policies={"pii_posture": "consent"}),
                         subactions=[{"ability": "research", "source": "probe", "edge": "dependsOn"}])
        head = follow(server, waiting["action_id"], stop_after=3)
        assert [e["event"] for e in head] == ["action_started", "action_linked", "action_waiting_user"]
        call(ws, "actions.cancel", {"action_id": waiting["action_id"]})  # the service's own terminal event
        (revision,) = waiting["linked"]
    events = follow(server, waiting["action_id"])
    assert events[-1]["event"] == "action_failed" and events[-1]["data"]["error_type"] == "ActionCancelled"
    assert [e["event"] for e in events].count("action_started") == 1
    sub = follow(server, revision)  # a sub-action revision: every event of it is the service's own
    assert [e["event"] for e in sub] == ["action_started", "action_checkpoint", "action_completed"]
    for event in events + sub:
        ts = event["data"]["ts"]
        assert isinstance(ts, float) and ts > 1.7e9, event  # a Unix time, not null
    times = [e["data"]["ts"] for e in events]
    assert times == sorted(times)  # in the order they were emitted


def test_streams_written_without_times_are_aged_by_the_next_dated_event(tmp_path: Path) -> None:
    """Rows an older server wrote with ``ts: null`` cannot be changed (a trigger refuses it):
    the sweep ages them by the first dated event stored after them, and keeps them while none is."""
    db = tmp_path / "receipts.sqlite"
    store = EventStore(db)
    try:
        for name in ("undated-old", "undated-last"):
            store.append(ActionStarted(action_id=name, seq=0))
            store.append(ActionCheckpoint(action_id=name, seq=1, kind="context_delta", payload={"text": "x"}))
            store.append(ActionCompleted(action_id=name, seq=2))
            if name == "undated-old":  # a dated stream written after it, at t = 1000
                store.append(ActionStarted(action_id="dated", seq=0, ts=1000.0))
                store.append(ActionNotice(action_id="dated", seq=1, message="m", ts=1000.0))
                store.append(ActionCompleted(action_id="dated", seq=2, ts=1000.0))
        store.append(ActionStarted(action_id="undated-running", seq=0))  # no end: never swept
        store.append(ActionStarted(action_id="young", seq=0, ts=5000.0))
        store.append(ActionCompleted(action_id="young", seq=1, ts=5000.0))
    finally:
        store.close()
    assert sweep(db, retention_s=3600, now=1000.0 + 1800) == 0  # nothing is an hour old yet
    assert sweep(db, retention_s=3600, now=1000.0 + 7200) == 3 + 3  # "undated-old" (aged 1000) and "dated"
    assert read_stream(db, "undated-old") == [] and read_stream(db, "dated") == []
    # "undated-last" has only "young" (t = 5000) after it; "undated-running" never ended
    assert len(read_stream(db, "undated-last")) == 3 and len(read_stream(db, "undated-running")) == 1
    assert sweep(db, retention_s=3600, now=5000.0 + 7200) == 3 + 2
    assert [len(read_stream(db, a)) for a in ("undated-last", "young", "undated-running")] == [0, 0, 1]


def test_an_accepted_update_leaves_updates_available(legacy: tuple[Server, Path, Path]) -> None:
    server, providers, _ = legacy
    source = providers / "research" / "bump.txt"
    source.write_text("observe slow(auth)\n", encoding="utf-8")
    with toolbus(server) as ws:
        started = _start(ws, example_inputs("bump", observations=[
            {"kind": "span", "source": "pager:1", "excerpt": "observe slow(web)"}]),
            subactions=[{"ability": "research", "source": "bump", "edge": "bind"}])
        consumer = started["action_id"]
        assert follow(server, consumer)[-1]["event"] == "action_completed"
        base = started["linked"][0].removesuffix(".r1")
        offered = []
        for text in ("observe not slow(db)\n", "observe slow(api)\n"):  # two newer revisions offered in turn
            source.write_text("observe slow(auth)\n" + text, encoding="utf-8")
            refreshed = call(ws, "actions.refresh", {"action_id": f"{base}.r1"})["result"]
            assert refreshed["updates_for"] == [consumer]
            offered.append(refreshed["action_id"])
        assert call(ws, "actions.get", {"action_id": consumer})["result"]["updates_available"] == offered
        accepted = call(ws, "actions.accept_update", {"action_id": consumer, "update": offered[0]})["result"]
        assert call(ws, "actions.get", {"action_id": consumer})["result"]["updates_available"] == offered[1:]
        # accepting the newest withdraws it; accepting an older one again is answered as before
        call(ws, "actions.accept_update", {"action_id": consumer, "update": offered[1]})
        assert call(ws, "actions.get", {"action_id": consumer})["result"]["updates_available"] == []
        again = call(ws, "actions.accept_update", {"action_id": consumer, "update": offered[0]})["result"]
        assert again["existing"] is True and again["action_id"] == accepted["action_id"]
        end = follow(server, accepted["action_id"])[-1]
        assert end["event"] == "action_completed", end["data"]


def test_ttfs_from_actions_start_counts_the_queue_beside_the_figure_after_it(
        legacy: tuple[Server, Path, Path]) -> None:
    """One worker, four actions started at once: the later ones wait for the slot, and that wait
    is in ``queued_us``; ``cda metrics`` shows TTFS from actions.start and after the queue."""
    server, _, db = legacy
    with toolbus(server) as ws:
        before = time.monotonic()
        ids = [_start(ws, example_inputs(f"queue{i}"))["action_id"] for i in range(4)]
        spread_us = (time.monotonic() - before) * 1e6  # every actions.start fell inside this span
    ends = {action_id: follow(server, action_id)[-1] for action_id in ids}
    measured = [e["data"]["metrics"]["measurements"] for e in ends.values()]
    assert all(m["queued_us"] is not None and m["ttfs_us"] is not None for m in measured)
    # One slot: each run holds it from its start to its draft, so those spans (ttfs_us each) do
    # not overlap, and all begin after the first actions.start: the last draft comes at least
    # their sum after it. A TTFS from actions.start that left the queue out could not reach that.
    from_start = [m["queued_us"] + m["ttfs_us"] for m in measured]
    assert max(from_start) + spread_us >= sum(m["ttfs_us"] for m in measured), (measured, spread_us)
    runs = [r for r in read_runs(db).runs if r.action_id in ids]
    for run in runs:  # the SLO's sample is the queue plus the draft's time; the other is without it
        x = run.metrics.measurements  # type: ignore[union-attr]
        assert ttfs_sample(run) == x.queued_us + x.ttfs_us and ttfs_sample(run, queue=False) == x.ttfs_us
    report = summarise(runs)
    assert report.distributions["ttfs_us"].p95 >= report.distributions["ttfs_after_queue_us"].p95  # type: ignore[operator]
    out, err = io.StringIO(), io.StringIO()
    main(["metrics", str(db)], out, err)
    assert "TTFS from actions.start (queue included)" in out.getvalue()
    assert "TTFS after the queue (run start)" in out.getvalue(), out.getvalue()


def test_the_probe_times_the_queue_from_when_the_server_took_the_action_in() -> None:
    ticks = iter([10.0, 10.5, 11.0])  # the run starts at 10.0; actions.start (moved on by the wait) at 9.75
    probe = ActionProbe(lambda: next(ticks), queued_since=9.75)
    probe.see(ActionCheckpoint(action_id="a", seq=1, kind="boundary_summary", payload={"draft": True}))
    m = probe.measurements()
    assert (m.queued_us, m.ttfs_us, m.total_us) == (250_000, 500_000, 1_000_000)
    assert ActionProbe(lambda: 1.0).measurements().queued_us is None  # no server queued it (cda run)


def test_legacy_aliases_stream_wu_events_and_map_work_unit_id(legacy: tuple[Server, Path, Path]) -> None:
    server, _, db = legacy
    inputs = example_inputs("legacy-wu")
    with toolbus(server) as ws:
        started = _start(ws, {**inputs, "work_unit_id": "wu-4711"})
        action_id = started["action_id"]
        again = _start(ws, {**inputs, "work_unit_id": "wu-4712"})  # the same action under a second legacy id
        assert again["action_id"] == action_id and again["existing"] is True
        twice = call(ws, "actions.start", {"ability": "cda", "inputs": {**inputs, "work_unit_id": "wu-1"},
                                           "work_unit_id": "wu-2"})
        assert twice["error"]["code"] == "invalid_params"
    messages = _raw_stream(server, action_id)
    events = [m for m in messages if m[1].startswith("action_")]
    assert events[-1][1] in TERMINAL and len(messages) == 2 * len(events)
    assert [m[0] for m in events] == [str(i) for i in range(len(events))]
    previous = ""
    for (alias_id, alias, alias_data), (event_id, name, data) in zip(messages[::2], messages[1::2]):
        assert alias == "wu_" + name.removeprefix("action_")  # the alias comes first
        assert alias_id == previous  # it sets no id: a client resumes by the action_* ids alone
        assert alias_data == {**data, "type": alias, "work_unit_id": action_id}
        previous = event_id
    rest = _raw_stream(server, action_id, last_event_id=events[2][0])  # resume after the third event
    assert [(m[1], m[2]) for m in rest] == [(m[1], m[2]) for m in messages[6:]]
    log = ReceiptLog(db)
    try:
        aliased = [e.receipt.result["legacy"]["aliases"] for e in log.entries(action_id)
                   if e.receipt.name == "legacy.alias"]
        assert aliased == [[{"work_unit_id": "wu-4711", "action_id": action_id}],
                           [{"work_unit_id": "wu-4712", "action_id": action_id}]]
    finally:
        log.close()


def test_without_the_option_work_unit_id_is_refused_naming_it_and_no_alias_is_streamed(tmp_path: Path) -> None:
    db = tmp_path / "receipts.sqlite"
    with serving(db) as server, toolbus(server) as ws:
        refused = call(ws, "actions.start", {"ability": "cda", "inputs": {**example_inputs("no-wu"),
                                                                          "work_unit_id": "wu-1"}})
        assert refused["error"]["code"] == "invalid_params"
        assert refused["error"]["path"] == ["params", "inputs", "work_unit_id"]
        assert "--legacy-aliases" in refused["error"]["message"]
        action_id = _start(ws, example_inputs("no-wu"))["action_id"]
        messages = _raw_stream(server, action_id)
        assert messages and all(m[0] is not None and m[1].startswith("action_") for m in messages)
    with closing(ReceiptLog(db)) as log:
        assert not [e for e in log.entries(action_id) if e.receipt.name == "legacy.alias"]


def test_a_revision_made_while_its_consumer_waited_is_offered_when_it_ends(legacy: tuple[Server, Path, Path]) -> None:
    server, providers, _ = legacy
    source = providers / "research" / "during.txt"
    source.write_text("observe slow(auth)\n", encoding="utf-8")
    with toolbus(server) as ws:
        started = _start(ws, example_inputs("during", policies={"pii_posture": "consent"}),
                         subactions=[{"ability": "research", "source": "during", "edge": "bind"}])
        consumer, (locked,) = started["action_id"], started["linked"]
        assert started["status"] == "waiting_user"
        source.write_text("observe slow(auth)\nobserve not slow(db)\n", encoding="utf-8")
        refreshed = call(ws, "actions.refresh", {"action_id": locked})["result"]
        assert refreshed["updates_for"] == []  # not a consumer yet: it has not ended
        call(ws, "actions.approve", {"action_id": consumer, "approval": "pii:consent"})
        assert follow(server, consumer)[-1]["event"] == "action_completed"
        got = call(ws, "actions.get", {"action_id": consumer})["result"]
        assert got["updates_available"] == [refreshed["action_id"]]  # offered once it bound r1 and ended
