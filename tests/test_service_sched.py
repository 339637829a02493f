"""The service's scheduler: every queued action reaches its draft before any action's rest (TTFS).

Nothing here is timed: the order is checked, not the speed. A test holds the only slot while
the actions queue up (it waits until the scheduler shows them all waiting), then lets go; from
then on the order is fixed by (stage, arrival) alone.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from cda.adapters.auth import Principal
from cda.contracts.action import CDAInputs
from cda.contracts.events import ActionCheckpoint, ActionStarted
from cda.service.actions import ActionManager, is_draft
from cda.service.scheduler import DRAFT, REST, StageScheduler
from cda.service.streams import Hub
from tests.service_harness import example_inputs, wait_for
from tests.timing import HANG


def _queued(sched: StageScheduler, n: int) -> Callable[[], bool]:
    return lambda: len(sched.waiting()) == n


def _jobs(sched: StageScheduler, n: int, log: list[tuple[str, int]]) -> list[threading.Thread]:
    """n actions, each: its way to the draft (logged), advance, its rest (logged); queued in order."""
    def job(i: int, ticket: Any) -> None:
        sched.acquire(ticket)
        try:
            log.append(("draft", i))
            sched.advance(ticket, REST)
            log.append(("rest", i))
        finally:
            sched.release(ticket)

    threads = [threading.Thread(target=job, args=(i, sched.ticket())) for i in range(n)]
    return threads


def test_one_slot_every_draft_before_any_rest_in_arrival_order() -> None:
    sched = StageScheduler(1)
    blocker = sched.ticket()
    sched.acquire(blocker)
    log: list[tuple[str, int]] = []
    threads = _jobs(sched, 12, log)
    for t in reversed(threads):  # started in reverse: the order must come from the tickets, not the threads
        t.start()
    wait_for(_queued(sched, 12), every=0.01)
    assert sched.waiting() == [(DRAFT, i) for i in range(1, 13)]  # arrival 0 is the blocker
    sched.release(blocker)
    for t in threads:
        t.join(HANG)
    assert log == [("draft", i) for i in range(12)] + [("rest", i) for i in range(12)]
    assert sched.running == 0 and sched.waiting() == []


def test_two_slots_no_rest_starts_while_a_draft_waits() -> None:
    sched = StageScheduler(2)
    blockers = [sched.ticket(), sched.ticket()]
    for b in blockers:
        sched.acquire(b)
    log: list[tuple[str, int]] = []
    threads = _jobs(sched, 10, log)
    for t in threads:
        t.start()
    wait_for(_queued(sched, 10), every=0.01)
    for b in blockers:
        sched.release(b)
    for t in threads:
        t.join(HANG)
    first_rest = log.index(next(e for e in log if e[0] == "rest"))
    # with two slots, at most one other draft can still be on its way when the first rest begins
    # (the other slot's holder may still be on its way), and nobody is lost or run twice
    assert sum(1 for kind, _ in log[:first_rest] if kind == "draft") >= 9
    assert sorted(log) == sorted([("draft", i) for i in range(10)] + [("rest", i) for i in range(10)])


def test_an_action_keeps_its_slot_when_nobody_waits_for_an_earlier_stage() -> None:
    sched = StageScheduler(1)
    t = sched.ticket()
    sched.acquire(t)
    sched.advance(t, REST)  # no one waits: no hand-over, no blocking
    assert t.holding and sched.running == 1
    sched.release(t)
    sched.release(t)  # a second release is a no-op, not a slot too many
    assert sched.running == 0
    with pytest.raises(ValueError):
        StageScheduler(0)


def test_is_draft_is_the_draft_boundary_summary_only() -> None:
    def cp(kind: str, payload: dict[str, Any]) -> ActionCheckpoint:
        return ActionCheckpoint(action_id="a", seq=0, kind=kind, payload=payload)  # type: ignore[arg-type]

    assert is_draft(cp("boundary_summary", {"draft": True, "text": "x"}))
    assert not is_draft(cp("boundary_summary", {"draft": False, "text": "x"}))
    assert not is_draft(cp("plan_delta", {"draft": True}))
    assert not is_draft(ActionStarted(action_id="a", seq=0))


def test_the_service_sends_every_queued_draft_before_any_actions_rest(tmp_path: Path) -> None:
    """Five real actions queued behind a held slot (one worker): in the store, every draft
    boundary summary is written before any event that follows a draft (the rowid is the order
    of writing). Without the scheduler the first action would run to its end first."""
    db = tmp_path / "receipts.sqlite"

    async def scenario() -> list[str]:
        hub = Hub(db)
        manager = ActionManager(db, hub, workers=1)
        try:
            held = manager.scheduler.ticket()
            manager.scheduler.acquire(held)
            who = Principal("t", "partner")
            ids = [manager.start(who, CDAInputs.model_validate(example_inputs(f"sched{i}"))).action_id
                   for i in range(5)]
            await asyncio.to_thread(wait_for, _queued(manager.scheduler, 5), 30, 0.01)
            manager.scheduler.release(held)
            await asyncio.to_thread(wait_for, lambda: not manager.runs, 120, 0.05)
            return ids
        finally:
            await asyncio.to_thread(manager.shutdown)

    ids = asyncio.run(scenario())
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT rowid, action_id, seq, body FROM events ORDER BY rowid").fetchall()
    draft_at: dict[str, int] = {}
    for rowid, action_id, _seq, body in rows:
        data = json.loads(body)
        if data.get("kind") == "boundary_summary" and data.get("payload", {}).get("draft") is True:
            draft_at[action_id] = rowid
    assert set(draft_at) == set(ids)
    after_a_draft = [rowid for rowid, a, _, _ in rows if rowid > draft_at[a]]
    assert after_a_draft, "the actions ran on past their drafts"
    assert min(after_a_draft) > max(draft_at.values())  # every draft is out before anyone's rest
    assert sorted(ids, key=draft_at.__getitem__) == ids  # and the drafts came in arrival order
    terminal = {a for _, a, _, body in rows if json.loads(body)["type"] == "action_completed"}
    assert terminal == set(ids)


def test_a_runner_process_gives_the_same_bytes_as_an_in_process_run(tmp_path: Path) -> None:
    """Runner processes (``cda serve --processes``): the same inputs give the same outputs,
    artifact files, events (but their wall-clock ``ts`` and measurements) and receipt bodies as an in-process run."""
    from cda.actions.receipts import ReceiptLog
    from cda.actions.runner import run_action
    from cda.contracts.abstain import AbstainThresholds
    from cda.contracts.events import without_time
    from cda.service.workers import RunnerJob, RunnerPool

    inputs = CDAInputs.model_validate(example_inputs("same-bytes"))
    here, there = tmp_path / "here", tmp_path / "there"
    here.mkdir()
    there.mkdir()
    from cda.keys.signing import load_signer

    log = ReceiptLog(here / "receipts.sqlite", signer=load_signer())  # vouched as the runner vouches: same bytes
    local = run_action(inputs, out_dir=here, receipts=log, thresholds=AbstainThresholds(), action_id="cda-same")
    log.close()
    seen: list[Any] = []
    pool = RunnerPool(1, there / "receipts.sqlite")
    try:
        remote = pool.run(0, RunnerJob("cda-same", inputs, there, AbstainThresholds()), seen.append)
    finally:
        pool.close()

    def files(root: Path) -> dict[str, bytes]:
        return {str(f.relative_to(root)): f.read_bytes() for f in sorted((root / "cda-same").rglob("*")) if f.is_file()}

    def bodies(db: Path) -> list[str]:
        with sqlite3.connect(db) as conn:
            return [str(b) for (b,) in conn.execute("SELECT body FROM receipts ORDER BY rowid")]

    assert remote.outputs.model_dump_json() == local.outputs.model_dump_json()
    assert files(there) == files(here) and files(here)
    assert [without_time(e.model_dump(mode="json")) for e in seen] == \
        [without_time(e.model_dump(mode="json")) for e in local.events]
    assert len(seen) == len(local.events) > 5
    assert bodies(there / "receipts.sqlite") == bodies(here / "receipts.sqlite")
    assert remote.receipts_head == local.receipts_head


def test_the_service_with_runner_processes_keeps_the_stage_order(tmp_path: Path) -> None:
    """The draft-first order holds when the actions run in a runner process (one lane)."""
    db = tmp_path / "receipts.sqlite"

    async def scenario() -> list[str]:
        manager = ActionManager(db, Hub(db), workers=1, processes=1)
        try:
            held = manager.scheduler.ticket()
            manager.scheduler.acquire(held)
            who = Principal("t", "partner")
            ids = [manager.start(who, CDAInputs.model_validate(example_inputs(f"proc{i}"))).action_id
                   for i in range(3)]
            await asyncio.to_thread(wait_for, _queued(manager.scheduler, 3), 30, 0.01)
            manager.scheduler.release(held)
            await asyncio.to_thread(wait_for, lambda: not manager.runs, 120, 0.05)
            return ids
        finally:
            await asyncio.to_thread(manager.shutdown)

    ids = asyncio.run(scenario())
    with sqlite3.connect(db) as conn:
        rows = [(r, a, json.loads(b)) for r, a, b in conn.execute("SELECT rowid, action_id, body FROM events")]
    draft_at = {a: r for r, a, d in rows if d.get("kind") == "boundary_summary" and d["payload"].get("draft")}
    assert sorted(ids, key=draft_at.__getitem__) == ids
    assert min(r for r, a, _ in rows if r > draft_at[a]) > max(draft_at.values())
    assert {a for _, a, d in rows if d["type"] == "action_completed"} == set(ids)
    assert [d["seq"] for _, a, d in rows if a == ids[0]] == list(range(sum(1 for _, x, _ in rows if x == ids[0])))


def test_receipts_are_group_committed_and_in_the_log_before_the_next_event(tmp_path: Path) -> None:
    """Group commit (the runner's cost to the draft): one transaction per event, not per receipt,
    and every receipt recorded before an event is readable (committed) when that event arrives."""
    from cda.actions.receipts import ReceiptLog
    from cda.actions.runner import run_action

    db = tmp_path / "receipts.sqlite"
    log = ReceiptLog(db)
    commits: list[str] = []
    log.file.conn.set_trace_callback(lambda sql: commits.append(sql) if sql == "COMMIT" else None)
    at_draft: list[list[str]] = []

    def on_event(event: Any) -> None:
        if is_draft(event):  # what another connection (the server's readers) sees at the draft
            with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
                at_draft.append([json.loads(b)["name"] for (b,) in conn.execute("SELECT body FROM receipts")])

    result = run_action(CDAInputs.model_validate(example_inputs("grouped")), receipts=log, subscribers=[on_event])
    names = [e.receipt.name for e in log.entries()]
    log.close()
    assert len(names) == len(result.appended) > 50
    assert len(commits) <= len(result.events) + 2 < len(names) // 2  # was one commit per receipt
    (seen,) = at_draft
    assert any(n.endswith(".solve") for n in seen)  # round 1's solver receipts precede the draft
    assert seen == names[:len(seen)] and names[-1] == "action.end"


def test_a_receipt_the_log_refuses_is_dropped_and_the_others_are_written(tmp_path: Path) -> None:
    from cda.actions.receipts import ReceiptLog, ReceiptLogError
    from cda.actions.receipts_sink import Recorder
    from cda.contracts.receipt import Receipt

    class Refusing(ReceiptLog):
        """A log that cannot take one receipt (as NaN in a body once could not be logged)."""

        def append_many(self, receipts: Any) -> list[str]:
            batch = list(receipts)
            if any(r.name == "bad" for r in batch):
                raise ReceiptLogError("receipt bad cannot be logged")
            return super().append_many(batch)

        def append(self, receipt: Receipt) -> str:
            return self.append_many([receipt])[-1]

    log = Refusing(tmp_path / "receipts.sqlite")
    recorder = Recorder(log, "cda-x", "seed")
    recorder.start("0" * 64)
    for name in ("before", "bad", "after"):
        recorder.record("action", name, {}, {"n": 1})
    assert [e.receipt.name for e in log.entries()] == ["action.start"]  # nothing written until a flush
    with pytest.raises(ReceiptLogError):
        recorder.flush()
    assert [e.receipt.name for e in log.entries()] == ["action.start", "before", "after"]
    assert [r.name for r in recorder.receipts] == ["action.start", "before", "after"]
    assert recorder.confirm() == [] and recorder.pending == []
    log.close()


def test_a_cancel_reaches_a_run_in_a_runner_process(tmp_path: Path) -> None:
    """Cancelled while it waits for a slot, an action in a runner process stops at its first
    event: a complete stream ending ``ActionCancelled``, its receipts chained."""
    from cda.actions.receipts import ReceiptLog

    db = tmp_path / "receipts.sqlite"

    async def scenario() -> str:
        manager = ActionManager(db, Hub(db), workers=1, processes=1)
        try:
            held = manager.scheduler.ticket()
            manager.scheduler.acquire(held)
            who = Principal("t", "partner")
            action_id = manager.start(who, CDAInputs.model_validate(example_inputs("cancel-proc"))).action_id
            await asyncio.to_thread(wait_for, _queued(manager.scheduler, 1), 30, 0.01)
            manager.cancel(who, action_id)
            manager.scheduler.release(held)
            await asyncio.to_thread(wait_for, lambda: not manager.runs, 60, 0.05)
            return action_id
        finally:
            await asyncio.to_thread(manager.shutdown)

    action_id = asyncio.run(scenario())
    with sqlite3.connect(db) as conn:
        events = [json.loads(b) for (b,) in conn.execute("SELECT body FROM events WHERE action_id = ? ORDER BY seq",
                                                          (action_id,))]
    assert [e["seq"] for e in events] == list(range(len(events)))
    assert events[-1]["type"] == "action_failed" and events[-1]["error_type"] == "ActionCancelled"
    assert not any(e.get("kind") == "boundary_summary" for e in events)
    log = ReceiptLog(db)
    try:
        names = [e.receipt.name for e in log.entries(action_id)]
        assert log.verify().ok
    finally:
        log.close()
    assert "service.cancel" in names and "action.stopped" in names


def test_a_trace_asked_for_on_the_terminal_event_is_there(tmp_path: Path) -> None:
    """The run files its trace just after its terminal event; ``reflect.trace`` asked at that
    moment waits for it (the trace store is slowed here, so the gap is wide open)."""
    import time

    db = tmp_path / "receipts.sqlite"

    async def scenario() -> tuple[dict[str, Any] | None, int]:
        manager = ActionManager(db, Hub(db), workers=1)
        put = manager.reflection.put

        def slow_put(*args: Any, **kwargs: Any) -> str:
            time.sleep(1.0)
            return put(*args, **kwargs)

        manager.reflection.put = slow_put  # type: ignore[method-assign]
        try:
            who = Principal("t", "internal")
            action_id = manager.start(who, CDAInputs.model_validate(example_inputs("trace-race"))).action_id
            await asyncio.to_thread(wait_for, lambda: manager.get(action_id).status != "running", 60, 0.01)
            approval = manager.reflection.issue_approval(action_id, "alice")
            trace = await asyncio.to_thread(manager.read_trace, action_id, approval)
            return trace, len(manager.runs)
        finally:
            await asyncio.to_thread(manager.shutdown)

    trace, running = asyncio.run(scenario())
    assert trace is not None and trace["rounds"] and running == 0


def test_two_approvals_at_once_submit_the_action_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The ToolBus decides on worker threads: two approvals arriving together (each receipt slow)
    both used to find nothing left to approve and both submit the run; one submits now."""
    import time as clock

    from cda.service.live import LiveAction

    db = tmp_path / "receipts.sqlite"
    who = Principal("t", "partner", approves=True)  # an open server's one client approves its own actions
    submitted: list[str] = []
    run = LiveAction("cda-race", who, CDAInputs.model_validate(example_inputs("race")), status="waiting_user",
               needed=["a", "b"])

    async def scenario() -> None:
        manager = ActionManager(db, Hub(db), workers=1)
        try:
            monkeypatch.setattr(manager, "_submit", lambda r: submitted.append(r.action_id))
            monkeypatch.setattr(manager.attempts, "receipt", lambda *a, **k: clock.sleep(0.2))
            monkeypatch.setattr(manager, "get", lambda action_id: None)
            monkeypatch.setattr(manager, "_own", lambda w, a: run)
            await asyncio.gather(*(asyncio.to_thread(manager.decide, who, "cda-race", name, True, "ok")
                                   for name in "ab"))
        finally:
            manager.shutdown()

    asyncio.run(scenario())
    assert submitted == ["cda-race"] and run.needed == [] and run.status == "running"


def test_a_run_its_runner_process_stopped_ends_as_stopped_not_as_a_crash() -> None:
    """The child may see a cancel first and answer ``stopped``: the pool raises RunnerStopped
    (the service then ends the stream ActionCancelled), not RunnerCrashed (an InternalError)."""
    from cda.service.workers import RunnerCrashed, RunnerJob, RunnerPool, RunnerStopped, _Child

    class Conn:  # the child's side of the pipe: it answers the run with "stopped"
        def send(self, message: tuple[str, str, Any]) -> None:
            if message[0] == "run":
                child.inboxes[message[1]].put(("stopped", None))

    child = _Child(process=None, conn=Conn())  # type: ignore[arg-type]
    pool = object.__new__(RunnerPool)
    pool.children = [child]
    job = RunnerJob("cda-stopped", CDAInputs.model_validate(example_inputs("stopped")), Path("."), None)
    with pytest.raises(RunnerStopped):
        pool.run(0, job, lambda event: None)
    assert not issubclass(RunnerStopped, RunnerCrashed) and child.inboxes == {}
