"""Cancellation reaches the solver through the server: ``actions.cancel``, SIGTERM, the partner wall
cap, and one partner's actions not holding every worker. A real ``cda serve`` on loopback.

The issue's reproduction: a partner's action on a pigeonhole of 15 pigeons (z3) with no
``budgets.wall``: ``actions.cancel`` left it ``running`` 60 s later, other partners' small actions
waited behind it (one 106 s), and SIGTERM left the server alive past 40 s. The pigeonhole cannot
finish in these tests' bounds (see tests/test_cancel.py), so ending inside them is the cancel's
doing. The issue's "within 2 s of actions.cancel" is asserted on the server's CPU from the cancel
to the action's terminal event (a solver that went on would spend it; load cannot stretch it);
wall-clock bounds are hang guards only (a loaded 2-core machine), the latencies measured in
``benchmarks/bench_cancel.py``.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import sqlite3
from pathlib import Path
from typing import Any

import httpx
from httpx_sse import connect_sse

from cda.adapters.auth import token_hash
from cda.service.scheduler import DRAFT, StageScheduler
from cda.service.serve import EXIT_WITHIN_S
from cda.testing import pigeonhole
from tests.service_harness import Server, call, example_inputs, follow, serving, toolbus, wait_for
from tests.test_cancel import BOUND_S, CANCEL_WITHIN_S, process_cpu_seconds
from tests.timing import Stopwatch


def hard(purpose: str, backend: str = "z3", **changes: Any) -> dict[str, Any]:
    return {"problem": "fifteen pigeons, fourteen holes", "dsl": pigeonhole(15), "backend": backend,
            "seed": {"purpose": purpose}, **changes}


def _solving(server: Server, action_id: str, token: str | None = None) -> None:
    """Follow the stream until the run is in its first solver round (its ``propagate`` progress)."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    with httpx.Client(timeout=60) as client, \
            connect_sse(client, "GET", f"{server.base}/streams/actions/{action_id}", headers=headers) as source:
        for sse in source.iter_sse():
            if sse.event == "action_progress" and json.loads(sse.data)["phase"] == "propagate":
                return
            assert sse.event not in ("action_completed", "action_partial", "action_failed"), sse.data
    raise AssertionError("the stream ended before the run solved")


def _start(ws: Any, inputs: dict[str, Any]) -> str:
    answer = call(ws, "actions.start", {"ability": "cda", "inputs": inputs})
    assert "result" in answer, answer
    return str(answer["result"]["action_id"])


def _status(ws: Any, action_id: str) -> str:
    return str(call(ws, "actions.get", {"action_id": action_id})["result"]["status"])


def test_actions_cancel_interrupts_the_solver_and_ends_with_what_was_found(tmp_path: Path, backend: str) -> None:
    with serving(tmp_path / "receipts.sqlite") as server, toolbus(server) as ws:
        action_id = _start(ws, hard(f"cancel-{backend}", backend))
        _solving(server, action_id)
        spent = process_cpu_seconds(server.proc.pid)
        assert call(ws, "actions.cancel", {"action_id": action_id})["result"]["status"] in ("running", "cancelled")
        events = follow(server, action_id, timeout=BOUND_S)  # to its terminal event (a hang guard)
        took = process_cpu_seconds(server.proc.pid) - spent  # the server's CPU from the cancel to the end
        result = call(ws, "actions.get", {"action_id": action_id})["result"]
    assert result["status"] == "cancelled", result
    last = events[-1]
    assert last["event"] == "action_partial" and last["data"]["stopped"] == "cancelled", last
    outputs = last["data"]["outputs"]
    assert outputs["status"] == "partial" and outputs["summary_artifact_id"] == result["summary_artifact_id"]
    assert outputs["caveats"][0].startswith("cancelled by the client (actions.cancel): the run stopped")
    assert "cancelled by the client" in (result["boundary_summary"] or "")  # the summary says it too
    assert took < CANCEL_WITHIN_S, (took, os.getloadavg())  # a solver that went on would spend it


def test_sigterm_stops_the_server_with_a_hard_action_running(tmp_path: Path, backend: str) -> None:
    db = tmp_path / "receipts.sqlite"
    server = Server(db)
    try:
        with toolbus(server) as ws:
            action_id = _start(ws, hard(f"sigterm-{backend}", backend))
            _solving(server, action_id)
            before, spent = resource.getrusage(resource.RUSAGE_CHILDREN), process_cpu_seconds(server.proc.pid)
            with Stopwatch() as watch:  # the server is our child: its waits for a core are not its time
                code = server.stop(signal.SIGTERM, timeout=4 * EXIT_WITHIN_S)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)  # the server's whole life, now it is reaped
    finally:
        if server.proc.poll() is None:
            server.proc.kill()
    assert code == 0, server.stderr()
    assert watch.uncontended < EXIT_WITHIN_S, watch  # the promise, in time uncontended for a CPU (tests/timing.py)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime) - spent
    assert cpu < CANCEL_WITHIN_S, (cpu, os.getloadavg())  # its solver stopped at the signal, not at the exit
    with serving(db) as again, toolbus(again) as ws:  # the run ended interrupted, with what it found
        assert _status(ws, action_id) == "interrupted"
        last = follow(again, action_id)[-1]
    assert last["event"] == "action_partial" and last["data"]["stopped"] == "interrupted", last
    assert last["data"]["outputs"]["caveats"][0].startswith("interrupted: the server is stopping")


def test_a_partners_action_runs_under_the_wall_cap(tmp_path: Path) -> None:
    db = tmp_path / "receipts.sqlite"
    with serving(db, "--partner-wall", "3") as server, toolbus(server) as ws:
        action_id = _start(ws, hard("capped"))  # no budgets.wall: before, it ran for ever
        events = follow(server, action_id, timeout=3 + BOUND_S)
    last = events[-1]
    assert last["event"] == "action_partial" and "stopped" not in last["data"], last  # a budget, not a cancel
    assert "round 1 ran out of time: hypotheses are those found so far" in last["data"]["caveats"], last["data"]
    with sqlite3.connect(db) as conn:
        caps = [{k: v for k, v in json.loads(body)["result"].items() if k != "vouched"} for (body,) in conn.execute(
            "SELECT body FROM receipts WHERE action_id = ? AND json_extract(body, '$.name') = 'service.wall_cap'",
            (action_id,))]
    assert caps == [{"wall": 3.0, "asked": None}]


def test_one_partners_hard_actions_do_not_hold_every_worker(tmp_path: Path) -> None:
    """Two workers: partner A's two hard actions would take both; A holds one, the other waits
    its turn, and partner B's small action runs and completes meanwhile."""
    auth = tmp_path / "auth.json"
    auth.write_text(json.dumps({"tokens": [
        {"name": "a", "sha256": token_hash("tok-a"), "profile": "partner"},
        {"name": "b", "sha256": token_hash("tok-b"), "profile": "partner"}]}), encoding="utf-8")
    with serving(tmp_path / "receipts.sqlite", "--auth", str(auth), "--workers", "2") as server, \
            toolbus(server, "tok-a") as a, toolbus(server, "tok-b") as b:
        first, second = _start(a, hard("fair-1")), _start(a, hard("fair-2"))
        _solving(server, first, "tok-a")
        small = _start(b, example_inputs("fair-small"))
        done = follow(server, small, token="tok-b", timeout=120)
        assert done[-1]["event"] == "action_completed", done[-1]
        assert _status(a, first) == "running"  # still solving: B did not wait behind it
        assert call(a, "actions.get", {"action_id": second})["result"].get("last_event_id") is None  # queued
        for action_id in (first, second):
            call(a, "actions.cancel", {"action_id": action_id})
        wait_for(lambda: {_status(a, first), _status(a, second)} == {"cancelled"}, BOUND_S)


def test_the_per_owner_limit_passes_an_owner_at_its_limit_over() -> None:
    """No timing: the order of grants. One owner holding its one slot does not block another's
    action from the free slot; its own next action gets a slot once it gives one back."""
    sched = StageScheduler(2, per_owner=1)
    a1, a2, b1 = sched.ticket("a"), sched.ticket("a"), sched.ticket("b")
    sched.acquire(a1)
    import threading

    granted: list[str] = []
    t = threading.Thread(target=lambda: (sched.acquire(a2), granted.append("a2")))
    t.start()
    wait_for(lambda: sched.waiting() == [(DRAFT, a2.arrival)], BOUND_S, 0.01)
    sched.acquire(b1)  # a slot is free and b is under its limit: at once, though a2 came first
    assert sched.holding("a") == 1 and sched.holding("b") == 1 and not granted
    sched.release(b1)  # a slot frees, but a is still at its limit: a2 waits
    assert sched.waiting() == [(DRAFT, a2.arrival)] and not granted
    sched.release(a1)
    t.join(BOUND_S)
    assert granted == ["a2"] and sched.holding("a") == 1 and sched.running == 1
    sched.release(a2)
    assert sched.running == 0 and sched.holding("a") == 0
