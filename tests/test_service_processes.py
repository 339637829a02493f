"""``cda serve --processes 2`` over the wire: runs in runner processes continue the service's
attempt exactly as in-process runs do.

The in-process server is the oracle where the scenario is deterministic: the same actions on a
server without runner processes give the same streams (but wall time), the same receipt bodies
and the same artifact bytes. What is checked with runner processes:

- an action that waits for an approval first: its prelude (``action_waiting_user``) and its run
  form one complete, duplicate-free stream; ``cda receipts verify`` finds the file intact;
- cancel mid-run (the run blocked in its LLM call) ends partial, ``stopped: cancelled``, with what
  it found, as in-process;
- a stored event rewritten during the run is found by the audit the child asks the server for
  (``action.tampered``, ``AuditLogTampered``), as in-process;
- bind, a new revision, ``accept_update`` give structure revision 2;
- kill -9 mid-run, restart with ``--processes 2``, start again: attempt 2, never mixed with 1;
- a stop that reaches a child while its run waits for the audit answer unwinds the run's thread.

Mid-run is made deterministic with a fake LLM endpoint (tests/fake_llm.py) that holds its
answer until the test opens a gate. Every server and runner process is stopped, even on failure.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Any

import pytest

from cda.contracts.events import without_time
from cda.contracts.receipt import canonical_json
from tests.conftest import ROOT
from tests.fake_llm import Answer, FakeProvider, fake_provider, judgement
from tests.service_harness import Server, call, example_inputs, follow, toolbus, wait_for, wait_signed
from tests.timing import HANG

PROCESSES = ("--processes", "2")


# ----------------------------------------------------------------------------- processes, files


def _children(pid: int) -> set[int]:
    """Every living descendant of ``pid`` (the runner processes a server spawned)."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", encoding="utf-8") as f:
                    parents[int(entry)] = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
    found, frontier = set(), {pid}
    while frontier:
        frontier = {child for child, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@contextmanager
def _serving(db: Path, *args: str) -> Iterator[Server]:
    """A server whose runner processes are ended with it: they must end by themselves (the
    server closes the pool, or its pipe reaches end of file when it is killed); any left after
    HANG is killed here and the test fails."""
    server = Server(db, *args)
    children = _children(server.proc.pid)
    try:
        if "--processes" in args:
            assert len(children) >= 2, "the runner processes did not start"
        yield server
    finally:
        children |= _children(server.proc.pid) if server.proc.poll() is None else set()
        if server.proc.poll() is None:
            server.stop()
        left = _reap(children)
    assert not left, f"runner processes outlived their server: {left}"


def _reap(pids: set[int], wait_s: float = HANG) -> set[int]:
    """Wait for ``pids`` to end; kill (by pid) those still alive after ``wait_s``; the ones killed."""
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline and any(_alive(p) for p in pids):
        time.sleep(0.05)
    left = {p for p in pids if _alive(p)}
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    return left


def _verify(db: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "cda", "receipts", "verify", str(db)], capture_output=True,
                          text=True, cwd=ROOT, timeout=60)


def _receipts(db: Path, action_id: str) -> list[str]:
    """The action's receipt bodies as their producer made them: without the vouch each log adds,
    which names the receipt's place in that log (docs/actions.md, "Vouched receipts"), and so
    differs between two servers whose logs interleave their actions differently."""
    with closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as conn:
        bodies = [json.loads(b) for (b,) in conn.execute("SELECT body FROM receipts WHERE action_id = ? ORDER BY rowid",
                                                          (action_id,))]
    assert all(b["result"].get("vouched") for b in bodies)  # every one vouched for by the server's key
    return [canonical_json({**b, "result": {k: v for k, v in b["result"].items() if k != "vouched"}}) for b in bodies]


def _files(folder: Path) -> dict[str, bytes]:
    return {str(f.relative_to(folder)): f.read_bytes() for f in sorted(folder.rglob("*")) if f.is_file()}


def _rewrite_event(db: Path, action_id: str, seq: int) -> None:
    """What a check escaping its sandbox does: drop the append-only trigger, edit one stored
    event of the running attempt, put the trigger back."""
    with closing(sqlite3.connect(db, isolation_level=None, timeout=30)) as conn:
        (trigger,) = conn.execute("SELECT sql FROM sqlite_master WHERE name = 'events_no_update'").fetchone()
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("DROP TRIGGER events_no_update")
        conn.execute("UPDATE events SET body = replace(body, '\"seq\":', '\"seq\": ') WHERE action_id = ? AND seq = ?",
                     (action_id, seq))
        conn.execute(trigger)
        conn.execute("COMMIT")


# ---------------------------------------------------------------------------------- the LLM gate


class Gate:
    """The fake LLM's answers wait for :meth:`open` (bounded): the run is held mid-run."""

    def __init__(self, fake: FakeProvider) -> None:
        self.opened = threading.Event()
        self.asked = threading.Event()
        fake.mode = self._answer

    def _answer(self, body: bytes) -> Answer:
        self.asked.set()
        self.opened.wait(HANG)
        return judgement()

    def close(self) -> None:
        self.opened.clear()
        self.asked.clear()

    def open(self) -> None:
        self.opened.set()


def _inputs(purpose: str, fake: FakeProvider) -> dict[str, Any]:
    """An action that waits for ``egress:partner`` (the server's cap is local), then calls the LLM."""
    return example_inputs(purpose, observations=[{"kind": "span", "source": "pager:1", "excerpt": "observe slow(web)"}],
                          llm={"provider": "openai", "base_url": fake.url, "model": "fake", "egress_class": "partner", "when": "always",
                               "timeout_s": 20}, policies={"egress": "partner"})


def _start_approved(server: Server, inputs: dict[str, Any]) -> tuple[str, list[dict[str, Any]]]:
    """Start, see the prelude (``action_started``, ``action_waiting_user``), approve; the id and the prelude seen."""
    with toolbus(server) as ws:
        started = call(ws, "actions.start", {"ability": "cda", "inputs": inputs})["result"]
        assert started["status"] == "waiting_user", started
        prelude = follow(server, started["action_id"], stop_after=2)
        assert call(ws, "actions.approve", {"action_id": started["action_id"], "approval": "egress:partner"})["result"]
    return started["action_id"], prelude


def _quiet(server: Server, action_id: str, still_s: float = 0.4) -> int:
    """The last stored event id once it stops moving (the run is blocked in its LLM call)."""
    with toolbus(server) as ws:
        last, since = -1, time.monotonic()
        while time.monotonic() - since < still_s:
            now = call(ws, "actions.get", {"action_id": action_id})["result"].get("last_event_id", -1)
            if now != last:
                last, since = now, time.monotonic()
            time.sleep(0.05)
    return int(last)


def _scenarios(db: Path, args: tuple[str, ...], fake: FakeProvider) -> dict[str, Any]:
    """Approve-and-complete, cancel mid-run, tamper mid-run on one server; what each gave."""
    gate = Gate(fake)
    out: dict[str, Any] = {}
    db.parent.mkdir()
    with _serving(db, *args) as server:
        gate.open()
        done, prelude = _start_approved(server, _inputs("proc-approved", fake))
        out["done"] = follow(server, done)
        out["prelude"] = prelude
        wait_signed(db, done)
        out["verify"] = _verify(db)  # before the tampering below
        out["done_files"] = _files(db.parent / done)

        gate.close()
        cancelled, _ = _start_approved(server, _inputs("proc-cancel", fake))
        assert gate.asked.wait(HANG)
        _quiet(server, cancelled)
        with toolbus(server) as ws:
            assert call(ws, "actions.cancel", {"action_id": cancelled})["result"]["status"] == "running"
        time.sleep(0.5)  # the child has read the cancel (sent before the answer) while its LLM call waits
        gate.open()
        out["cancelled"] = follow(server, cancelled)
        wait_signed(db, cancelled)

        gate.close()
        tampered, _ = _start_approved(server, _inputs("proc-tamper", fake))
        assert gate.asked.wait(HANG)
        _rewrite_event(db, tampered, 2)  # an event of the run, stored while it runs
        gate.open()
        out["tampered"] = follow(server, tampered)
        wait_signed(db, tampered)
        assert server.stop() == 0  # each run has filed its trace (and its receipt) by then
    out["done_receipts"], out["cancelled_receipts"], out["tampered_receipts"] = (
        _receipts(db, a) for a in (done, cancelled, tampered))
    out["verify_after"] = _verify(db)
    out["verify_after_text"] = out["verify_after"].stdout.replace(str(db), "DB")
    return out


def _comparable(events: list[dict[str, Any]]) -> list[tuple[str, str, dict[str, Any]]]:
    return [(e["sse_id"], e["event"], without_time(e["data"])) for e in events]


@pytest.mark.slow
def test_runner_processes_stream_receipt_and_audit_as_the_in_process_server(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with fake_provider() as fake:
        monkeypatch.setenv("CDA_LLM_ENDPOINTS", fake.url)  # the operator's endpoint (a client names no other)
        there = _scenarios(tmp_path / "processes" / "receipts.sqlite", PROCESSES, fake)
        here = _scenarios(tmp_path / "in-process" / "receipts.sqlite", (), fake)

    # waits for an approval first: its prelude event, then the run, one whole stream
    done = there["done"]
    assert [e["event"] for e in there["prelude"]] == ["action_started", "action_waiting_user"]
    assert [e["event"] for e in done][:3] == ["action_started", "action_waiting_user", "action_progress"]
    assert done[0]["sse_id"] == "0" and [e["event"] for e in done].count("action_started") == 1
    assert [e["id"] for e in done] == list(range(len(done)))  # complete, no duplicate, in order
    assert len({e["sse_id"] for e in done}) == len(done) and {e["data"]["attempt"] for e in done} == {1}
    assert done[-1]["event"] == "action_completed"
    assert there["verify"].returncode == 0 and "intact" in there["verify"].stdout, there["verify"].stdout
    # the oracle: the same run in the server's own threads
    assert _comparable(done) == _comparable(here["done"])
    assert there["done_receipts"] == here["done_receipts"] and len(there["done_receipts"]) > 50
    assert there["done_files"] == here["done_files"] and there["done_files"]

    # cancel mid-run
    cancelled = there["cancelled"]
    assert [e["id"] for e in cancelled] == list(range(len(cancelled)))
    # it ends with what it found (its token cancelled there, as in-process), its status cancelled
    assert cancelled[-1]["event"] == "action_partial" and cancelled[-1]["data"]["stopped"] == "cancelled"
    assert any(c.startswith("cancelled by the client (actions.cancel): the run stopped") for c in cancelled[-1]["data"]["caveats"])
    assert any(e["event"] == "action_started" for e in cancelled)  # it was running, not waiting
    assert _comparable(cancelled) == _comparable(here["cancelled"])
    # no more work than in-process past the cancel (a child used to run on to its next event: 4 more
    # LLM calls, 17 more receipts here)
    assert there["cancelled_receipts"] == here["cancelled_receipts"]

    # a stored event rewritten during the run: the child's audit (asked of the server) finds it
    tampered = there["tampered"]
    assert tampered[-1]["event"] == "action_failed", tampered[-1]
    assert tampered[-1]["data"]["error_type"] == "AuditLogTampered"
    assert "differ from the ones the run streamed" in tampered[-1]["data"]["error"]
    assert any('"name":"action.tampered"' in body for body in there["tampered_receipts"])
    assert there["tampered_receipts"] == here["tampered_receipts"]
    assert _comparable(tampered) == _comparable(here["tampered"])
    for side in (there, here):
        assert side["verify_after"].returncode == 1 and "rewritten while it ran" in side["verify_after"].stdout
    assert there["verify_after_text"] == here["verify_after_text"]


def _bind_and_accept(root: Path, *args: str) -> dict[str, Any]:
    """Bind a research output, refresh it to revision 2 at once, accept it: what each step gave."""
    providers = root / "providers"
    (providers / "research").mkdir(parents=True)
    source = providers / "research" / "probe-auth.txt"
    source.write_text("observe slow(auth)\n", encoding="utf-8")
    db = root / "receipts.sqlite"
    inputs = example_inputs("proc-bind", observations=[{"kind": "span", "source": "pager:1",
                                                         "excerpt": "observe slow(web)"}])
    with _serving(db, "--providers", str(providers), *args) as server:
        with toolbus(server) as ws:
            started = call(ws, "actions.start", {"ability": "cda", "inputs": inputs, "subactions": [
                {"ability": "research", "source": "probe-auth", "edge": "bind"}]})["result"]
            consumer, (sub_r1,) = started["action_id"], started["linked"]
            before = follow(server, consumer)
            # refreshed as soon as the consumer's terminal event is seen: it is offered the update
            source.write_text("observe slow(auth)\nobserve not slow(db)\n", encoding="utf-8")
            refreshed = call(ws, "actions.refresh", {"action_id": sub_r1})["result"]
            accepted = call(ws, "actions.accept_update", {"action_id": consumer,
                                                          "update": refreshed["action_id"]})["result"]
        after = follow(server, accepted["action_id"])
        wait_signed(db, accepted["action_id"])
        assert server.stop() == 0
    return {"consumer": consumer, "before": before, "refreshed": refreshed, "accepted": accepted, "after": after,
            "receipts": _receipts(db, accepted["action_id"]), "files": _files(root / accepted["action_id"]),
            "verify": _verify(db)}


@pytest.mark.slow
def test_bind_new_revision_accept_update_gives_revision_2_in_runner_processes(tmp_path: Path) -> None:
    there = _bind_and_accept(tmp_path / "processes", *PROCESSES)
    before, after = there["before"], there["after"]
    assert before[-1]["event"] == "action_completed" and before[-1]["data"]["outputs"]["revision"] == 1
    assert there["refreshed"]["revision"] == 2 and there["refreshed"]["updates_for"] == [there["consumer"]]
    assert there["accepted"]["revision"] == 2
    outputs = after[-1]["data"]["outputs"]
    assert after[-1]["event"] == "action_completed" and outputs["revision"] == 2
    assert outputs["supersedes"] == before[-1]["data"]["outputs"]["plan_bundle_id"]
    assert [e["id"] for e in after] == list(range(len(after)))
    binds = [json.loads(b) for b in there["receipts"]]
    assert [b["result"]["revision"] for b in binds if b["name"] == "bind"] == [2]
    assert {b["attempt"] for b in binds} == {1}  # the runner's receipts continue the service's attempt
    assert there["verify"].returncode == 0 and "intact" in there["verify"].stdout, there["verify"].stdout
    # the oracle: the same revision in the server's own threads
    here = _bind_and_accept(tmp_path / "in-process")
    assert _comparable(after) == _comparable(here["after"])
    assert there["receipts"] == here["receipts"] and there["files"] == here["files"] and there["files"]


@pytest.mark.slow  # a kill-and-restart loop: .ci/run's slow step (README: the test command leaves it out)
def test_kill_9_mid_run_restart_and_rerun_is_attempt_2_never_mixed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                  ) -> None:
    db = tmp_path / "receipts.sqlite"
    with fake_provider() as fake:
        monkeypatch.setenv("CDA_LLM_ENDPOINTS", fake.url)  # the operator's endpoint (a client names no other)
        gate = Gate(fake)
        inputs = _inputs("proc-rerun", fake)
        with _serving(db, *PROCESSES) as first:
            action_id, _ = _start_approved(first, inputs)
            assert gate.asked.wait(HANG)  # mid-run: the child waits for its LLM answer
            last = _quiet(first, action_id)
            seen = follow(first, action_id, stop_after=last + 1)
            runners = _children(first.proc.pid)
            first.proc.kill()
            # they end at once, their LLM calls still held (they used to run on until those returned,
            # which the gate holds for HANG): half of that is the bound, not a time a loaded machine keeps
            assert not _reap(runners, HANG / 2), "runner processes outlived a killed server"
            assert first.stop() == -signal.SIGKILL
            after_kill = _receipts(db, action_id)
        gate.open()
        with _serving(db, *PROCESSES) as second:
            with toolbus(second) as ws:
                assert call(ws, "actions.get", {"action_id": action_id})["result"]["status"] == "interrupted"
            again, prelude = _start_approved(second, inputs)
            assert again == action_id and prelude[0]["sse_id"] == "2:0"
            second_run = follow(second, action_id)
            first_run = follow(second, action_id, query="?attempt=1")
            wait_signed(db, action_id, attempt=2)
            assert second.stop() == 0
    assert [e["event"] for e in seen][:2] == ["action_started", "action_waiting_user"]
    assert first_run[:-1] == seen  # attempt 1 as it was streamed, then its interruption
    assert first_run[-1]["data"]["error_type"] == "ActionInterrupted"
    assert {e["attempt"] for e in first_run} == {e["data"]["attempt"] for e in first_run} == {1}
    assert [e["sse_id"] for e in second_run] == [f"2:{i}" for i in range(len(second_run))]
    assert {e["data"]["attempt"] for e in second_run} == {2} and second_run[-1]["event"] == "action_completed"
    with closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as conn:
        stored = conn.execute("SELECT attempt, seq, json_extract(body, '$.attempt') FROM events WHERE action_id = ? "
                              "ORDER BY attempt, seq", (action_id,)).fetchall()
        receipts = [json.loads(b) for (b,) in conn.execute("SELECT body FROM receipts WHERE action_id = ?",
                                                            (action_id,))]
    assert stored == [(1, i, 1) for i in range(len(first_run))] + [(2, i, 2) for i in range(len(second_run))]
    assert [r["attempt"] for r in receipts if r["name"] == "action.start"] == [1, 2]
    first_attempt = [r for r in receipts if r["attempt"] == 1]
    assert first_attempt[-1]["name"] == "action.interrupted"  # nothing of the killed run's came after it
    # (as _receipts reads them: without the vouch, which the verify below checks where each stands)
    unvouched = [{**r, "result": {k: v for k, v in r["result"].items() if k != "vouched"}} for r in first_attempt[:-1]]
    assert [json.dumps(r, sort_keys=True, separators=(",", ":")) for r in unvouched] == [
        json.dumps(json.loads(b), sort_keys=True, separators=(",", ":")) for b in after_kill]
    ends = [r for r in receipts if r["name"] == "action.end"]
    assert [(r["attempt"], r["result"]["events"]) for r in ends] == [(2, len(second_run))]
    done = _verify(db)
    assert done.returncode == 0 and "intact" in done.stdout, done.stdout


# ------------------------------------------------------------------------ a child's run unwinds


class _Refused(Exception):
    """What the server's side raises in these tests (a store error, a stop)."""


def _threads(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/task"))


def test_a_stop_while_the_child_waits_for_its_audit_answer_unwinds_its_run(tmp_path: Path) -> None:
    """In a runner process the run asks the server for its audit and waits. When the server's
    side fails there (the audit raises), or stops the run at the last event before it (the stop
    is then queued while the child waits for the audit's answer), the child's run must unwind:
    its thread ends, and the next run in that child is served as usual."""
    from cda.contracts.abstain import AbstainThresholds
    from cda.contracts.action import CDAInputs
    from cda.service.workers import RunnerJob, RunnerPool

    inputs = CDAInputs.model_validate(example_inputs("unwind"))
    pool = RunnerPool(1, tmp_path / "receipts.sqlite")
    pid = pool.children[0].process.pid
    try:
        def job(n: int) -> RunnerJob:
            return RunnerJob("cda-unwind", inputs, tmp_path, AbstainThresholds(), attempt=n)

        seen: list[Any] = []
        done = pool.run(0, job(1), seen.append, audit=lambda events: [])
        assert done.outputs.status == "completed"
        idle = _threads(pid)  # the child's threads between runs (its pools warmed up by the first)

        def refuse(events: Any) -> list[str]:
            raise _Refused("the store failed while auditing")

        try:
            pool.run(0, job(2), lambda e: None, audit=refuse)
        except _Refused:
            pass
        else:
            raise AssertionError("the audit's failure was not raised")
        wait_for(lambda: _threads(pid) <= idle, 10)  # the run's thread ended (it used to wait forever)

        before_audit = len(seen) - 1  # the count of the last event before the audit (the terminal follows)

        def stop_late(event: Any, count: list[int] = [0]) -> None:  # noqa: B006 - a counter
            count[0] += 1
            if count[0] == before_audit:
                raise _Refused("cancelled")

        try:
            pool.run(0, job(3), stop_late, audit=lambda events: [])
        except _Refused:
            pass
        else:
            raise AssertionError("the stop was not raised")
        wait_for(lambda: _threads(pid) <= idle, 10)
        again = pool.run(0, job(4), lambda e: None, audit=lambda events: [])
        assert again.outputs.status == "completed" and again.attempt == 4
    finally:
        pool.close()
    assert not pool.children[0].process.is_alive()


def test_a_service_run_group_commits_its_receipts(tmp_path: Path) -> None:
    """The attempt the service began (AttemptSink, both paths) keeps the runner's group commit:
    one transaction per event, not one per receipt."""
    from cda.actions.receipts import ReceiptLog
    from cda.contracts.abstain import AbstainThresholds
    from cda.contracts.action import CDAInputs
    from cda.service.workers import RunnerJob, run_job

    log = ReceiptLog(tmp_path / "receipts.sqlite")
    commits: list[str] = []
    log.file.conn.set_trace_callback(lambda sql: commits.append(sql) if sql == "COMMIT" else None)
    try:
        job = RunnerJob("cda-grouped", CDAInputs.model_validate(example_inputs("grouped")), tmp_path,
                        AbstainThresholds())
        result = run_job(job, None, log, lambda e: None, None)
    finally:
        log.close()
    assert len(result.appended) > 50 and result.outputs.status == "completed"
    assert len(commits) <= len(result.events) + 2 < len(result.appended) // 2
