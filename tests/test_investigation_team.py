"""Investigations for a team (docs/investigate.md, "Two analysts"): the model revised as a step,
undo of any step, notes, authors, shared sessions, the trace record of every step, steps kept
on the live solver at the doors and never lost when two callers step at once.

The answers after a revision are checked against the fallback (the revised problem solved from
scratch on a fresh backend) at every step, as the observations are in tests/test_investigation.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from cda.contracts.hypothesis_record import TraceRecord
from cda.investigation.live import InvestigationError
from cda.investigation.revision import StepRefused, revised_text
from cda.investigation.session import Investigation, MemoryBlock
from cda.investigation.session_store import SessionStore
from cda.operations import Principal
from cda.operations.base import OperationError
from cda.operations.investigate import (
    InvestigateNoteParams,
    InvestigateObserveParams,
    InvestigateReviseParams,
    InvestigateShareParams,
    InvestigateStartParams,
    InvestigateUndoParams,
    InvestigationDesk,
    SessionRef,
)
from tests.conftest import ROOT
from tests.service_harness import call, serving, toolbus, write_tokens

PROBLEM = (ROOT / "examples" / "outage_first_symptom.cda").read_text(encoding="utf-8")
DOMAIN = "domain Service = {web, api, auth, db, cache, queue}"
WIDER = "domain Service = {web, api, auth, db, cache, queue, search}"


def _same_as_fresh(inv: Investigation) -> None:
    live = inv.memory.model_dump(mode="json")
    fresh = inv.rebuilt_memory()
    fresh["updated_at_utc"] = live["updated_at_utc"]
    assert fresh == live


def _statements(block: MemoryBlock) -> set[str]:
    return {h.statement for h in block.candidate_hypotheses}


@pytest.mark.parametrize("backend", ["z3", "clingo"])
def test_a_dependency_learned_mid_incident_is_a_revision_not_a_conflict(backend: str, tmp_path: Path) -> None:
    inv = Investigation.start(PROBLEM, db=tmp_path / "s.sqlite", backend=backend, author="alice")
    inv.observe("not slow(cache)", author="bob")
    assert "assume down(queue)" not in _statements(inv.memory)  # web does not reach the queue
    block = inv.revise(["fact depends(web, queue)"], author="alice", reason="web reads the queue")
    assert block.change == {"before": 4, "after": 5, "appeared": ["assume down(queue)"], "vanished": [],
                            "complete": True}
    assert block.author == "alice" and block.conflict is None
    _same_as_fresh(inv)
    inv.observe("slow(queue)", author="bob")
    _same_as_fresh(inv)
    assert inv.memory.change is not None and set(inv.memory.change["vanished"]) == {
        "assume down(api)", "assume down(auth)", "assume down(web)"}
    # a domain value: the domain written again, one step
    inv.revise([WIDER], [DOMAIN], author="alice")
    _same_as_fresh(inv)
    inv.observe("slow(search)", author="bob")
    _same_as_fresh(inv)
    sid = inv.session_id
    inv.release()
    again = Investigation.open(sid, tmp_path / "s.sqlite")  # the revisions are replayed from the store
    assert again.memory == inv.memory and again.live.text == revised_text(PROBLEM, again.revisions)
    _same_as_fresh(again)
    steps = again.history()
    assert [(s.kind, s.author) for s in steps] == [("start", "alice"), ("observe", "bob"), ("revise", "alice"),
                                                   ("observe", "bob"), ("revise", "alice"), ("observe", "bob")]
    assert steps[2].reason == "web reads the queue" and steps[2].revision == {"add": ["fact depends(web, queue)"],
                                                                             "retract": []}


def test_undo_any_step_keeps_the_later_ones_or_names_what_stands_in_the_way() -> None:
    inv = Investigation.start(PROBLEM, backend="clingo")
    inv.observe("not slow(cache)")                          # 1
    inv.revise([WIDER], [DOMAIN])                           # 2
    inv.observe("slow(search)")                             # 3
    inv.revise(["fact depends(web, queue)"])                # 4
    inv.revise(retract=["fact depends(web, queue)"])        # 5 retracts what 4 added
    with pytest.raises(StepRefused, match="cannot undo step 2: step 3 .observe slow.search.. no longer fits"):
        inv.undo(2)
    with pytest.raises(StepRefused, match="cannot undo step 4: step 5 retracts 'fact depends.web, queue.'"):
        inv.undo(4)
    before = inv.memory
    block = inv.undo(1)  # an observation in the middle: the later steps stay in force
    assert block.step == 6 and block.observations == ["slow(search)"] and inv.memory is not before
    _same_as_fresh(inv)
    with pytest.raises(StepRefused, match="step 1 was undone at step 6"):
        inv.undo(1)
    with pytest.raises(StepRefused, match="step 6 is an undo step"):
        inv.undo(6)
    with pytest.raises(StepRefused, match="there is no step 99"):
        inv.undo(99)
    inv.undo(5)  # the retraction undone: depends(web, queue) is back
    assert "fact depends(web, queue)" in inv.live.text
    _same_as_fresh(inv)
    with pytest.raises(StepRefused, match="retracts 'fact nowhere.a.', which is not a line"):
        inv.revise(retract=["fact nowhere(a)"])
    with pytest.raises(InvestigationError, match="this revision does not read: line .*'nowhere' is not in domain"):
        inv.revise(["fact depends(web, nowhere)"])
    assert inv.memory.step == 7  # the refusals wrote nothing


@pytest.mark.parametrize("way", ["undo", "retract"])
def test_a_conflict_offers_both_ways_out_and_each_works(way: str) -> None:
    inv = Investigation.start(PROBLEM, backend="z3")
    inv.observe("not slow(api)")
    block = inv.observe("slow(auth)")
    assert block.conflict is not None and block.hypotheses_total == 0
    assert any("observe slow(auth) (step 2)" in core for core in block.conflict.cores[0])
    undo = [w for w in block.ways_out if w.startswith("the observation is wrong: undo step")]
    revise = [w for w in block.ways_out if w.startswith("revise the model: retract ")]
    assert undo and revise
    if way == "undo":
        after = inv.undo(int(undo[-1].split("undo step ")[1].split()[0]))
    else:
        line = revise[0].removeprefix("revise the model: retract ")[1:-1]
        after = inv.revise(retract=[line])
    assert after.conflict is None and after.hypotheses_total > 0
    _same_as_fresh(inv)


def test_every_step_writes_its_trace_record() -> None:
    inv = Investigation.start(PROBLEM, backend="clingo")
    inv.observe("not slow(cache)")
    inv.revise(["fact depends(web, queue)"])
    inv.observe("slow(db)")
    for step in inv.history()[1:]:
        record = TraceRecord.model_validate(step.trace["record"])
        chosen = next(h for h in record.candidate_hypotheses if h.id == record.selected_hypothesis_id)
        assert record.confidence == chosen.confidence and record.selected_hypothesis_reason
    last = inv.memory.trace_record()
    assert last.focus_subsystem == inv.memory.focus_subsystem and last.global_invariants == inv.memory.global_invariants
    assert "down(db) (in every hypothesis)" in last.global_invariants  # the only one left


def test_notes_attach_to_any_step() -> None:
    inv = Investigation.start(PROBLEM)
    inv.observe("not slow(cache)")
    inv.note(0, "paged at 02:10", author="alice")
    inv.note(1, "  cache dashboards green  ", author="bob")
    assert [(n.step, n.author, n.text) for n in inv.store.notes(inv.session_id)] == [
        (0, "alice", "paged at 02:10"), (1, "bob", "cache dashboards green")]
    with pytest.raises(StepRefused, match="no step 2"):
        inv.note(2, "x", author="bob")
    with pytest.raises(InvestigationError, match="needs some text"):
        inv.note(1, "   ", author="bob")
    assert inv.memory.step == 1  # a note is not a step


def _who(name: str, role: str = "partner") -> SimpleNamespace:
    return SimpleNamespace(principal=Principal(name, role), base_dir=Path("."))  # type: ignore[arg-type]


def test_the_desk_keeps_the_live_solver_and_reopens_when_another_process_stepped(tmp_path: Path) -> None:
    desk = InvestigationDesk(tmp_path / "receipts.sqlite")
    alice = _who("alice")
    sid = desk.call(alice, "investigate.start", InvestigateStartParams(dsl=PROBLEM, backend="clingo")).session_id  # type: ignore[attr-defined]
    kept = desk.open[sid]
    desk.call(alice, "investigate.observe", InvestigateObserveParams(session_id=sid, observation="not slow(cache)"))
    assert desk.open[sid] is kept  # the same live solver, its records narrowed from the step before
    assert SessionStore(desk.db, read_only=True).trace(sid, 1)["narrowed"] is True
    other = Investigation.open(sid, desk.db)  # another process takes step 2
    other.observe("slow(api)")
    other.release()
    out = desk.call(alice, "investigate.observe", InvestigateObserveParams(session_id=sid, observation="not slow(auth)"))
    assert out.memory.step == 3 and out.memory.observations == ["not slow(cache)", "slow(api)", "not slow(auth)"]  # type: ignore[attr-defined]
    assert desk.open[sid] is not kept  # reopened from the store: nothing lost, nothing written twice
    assert [s.step for s in SessionStore(desk.db, read_only=True).steps(sid)] == [0, 1, 2, 3]


def test_members_and_authors_at_the_desk(tmp_path: Path) -> None:
    desk = InvestigationDesk(tmp_path / "receipts.sqlite")
    alice, bob, eve = _who("alice"), _who("bob"), _who("eve")
    sid = desk.call(alice, "investigate.start", InvestigateStartParams(dsl=PROBLEM)).session_id  # type: ignore[attr-defined]
    with pytest.raises(OperationError) as refused:
        desk.call(bob, "investigate.status", SessionRef(session_id=sid))
    assert refused.value.code == "not_found"
    with pytest.raises(OperationError) as refused:
        desk.call(bob, "investigate.share", InvestigateShareParams(session_id=sid, member="bob"))
    assert refused.value.code == "not_found"  # not a member: the session is not there for bob
    shared = desk.call(alice, "investigate.share", InvestigateShareParams(session_id=sid, member="bob"))
    assert shared.members == ["bob"] and shared.owner == "alice"  # type: ignore[attr-defined]
    with pytest.raises(OperationError) as refused:
        desk.call(bob, "investigate.share", InvestigateShareParams(session_id=sid, member="eve"))
    assert refused.value.code == "forbidden"  # a member does not share it on
    with pytest.raises(OperationError) as refused:
        desk.call(bob, "investigate.observe", InvestigateObserveParams(session_id=sid, observation="slow(api)",
                                                                       author="alice"))
    assert refused.value.code == "forbidden" and refused.value.path == ["params", "author"]
    desk.call(bob, "investigate.revise", InvestigateReviseParams(session_id=sid, add=["fact depends(web, queue)"],
                                                                 reason="found in the runbook"))
    desk.call(bob, "investigate.undo", InvestigateUndoParams(session_id=sid, step=1))
    history = desk.call(alice, "investigate.note", InvestigateNoteParams(session_id=sid, step=1, text="was it?"))
    assert [(s.kind, s.author) for s in history.steps] == [  # type: ignore[attr-defined]
        ("start", "alice"), ("revise", "bob"), ("undo", "bob")]
    assert [(n.step, n.author) for n in history.notes] == [(1, "alice")]  # type: ignore[attr-defined]
    with pytest.raises(OperationError) as refused:
        desk.call(eve, "investigate.undo", InvestigateUndoParams(session_id=sid))
    assert refused.value.code == "not_found"
    with pytest.raises(OperationError) as refused:
        desk.call(bob, "investigate.undo", InvestigateUndoParams(session_id=sid, step=1))
    assert refused.value.code == "conflict" and "undone at step 2" in str(refused.value)


def test_two_analysts_step_at_once_over_the_toolbus(tmp_path: Path) -> None:
    auth = write_tokens(tmp_path / "auth.json", {"alice": ("tok-alice", "partner"), "bob": ("tok-bob", "partner")})
    with serving(tmp_path / "receipts.sqlite", "--auth", str(auth)) as server:
        with toolbus(server, "tok-alice") as a, toolbus(server, "tok-bob") as b:
            sid = call(a, "investigate.start", {"dsl": PROBLEM})["result"]["session_id"]
            assert call(b, "investigate.observe", {"session_id": sid, "observation": "slow(api)"})["error"][
                "code"] == "not_found"
            assert call(a, "investigate.share", {"session_id": sid, "member": "bob"})["result"]["members"] == ["bob"]
            answers: dict[str, dict[str, Any]] = {}
            go = threading.Barrier(2)

            def step(name: str, ws: Any, params: dict[str, Any], method: str) -> None:
                go.wait()
                answers[name] = call(ws, method, params)

            threads = [threading.Thread(target=step, args=("alice", a, {"session_id": sid, "observation":
                                                                        "not slow(cache)"}, "investigate.observe")),
                       threading.Thread(target=step, args=("bob", b, {"session_id": sid, "add": [
                           "fact depends(web, queue)"], "reason": "web reads the queue"}, "investigate.revise"))]
            for t in threads:
                t.start()
            for t in threads:
                t.join(120)
            assert {answers["alice"]["result"]["memory"]["step"], answers["bob"]["result"]["memory"]["step"]} == {1, 2}
            history = call(b, "investigate.history", {"session_id": sid})["result"]
            assert sorted((s["kind"], s["author"]) for s in history["steps"][1:]) == [("observe", "alice"),
                                                                                      ("revise", "bob")]
            status = call(b, "investigate.status", {"session_id": sid})["result"]
            assert status["memory"]["observations"] == ["not slow(cache)"] and status["memory"]["step"] == 2
            assert TraceRecord.model_validate(status["trace"]).selected_hypothesis_id == status["memory"][
                "selected_hypothesis_id"]
            secret = tmp_path / "secret.csv"
            secret.write_text("id\nx\n", encoding="utf-8")
            refused = call(b, "investigate.revise", {"session_id": sid, "add": ["fact depends(web, db)",
                                                                               f'ken "{secret}"']})["error"]
            assert refused["code"] == "forbidden" and refused["path"][:3] == ["params", "add", 1]


def test_two_commands_at_once_on_one_file_are_both_recorded(tmp_path: Path) -> None:
    problem = tmp_path / "outage.cda"
    problem.write_text(PROBLEM, encoding="utf-8")
    db = str(tmp_path / "s.sqlite")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "CDA_KEY_DIR": str(tmp_path / "keys")}
    cda = [sys.executable, "-m", "cda", "investigate"]
    sid = subprocess.run([*cda, "start", str(problem), "--db", db], capture_output=True, text=True, env=env,
                         check=True).stdout.strip()
    runs = [subprocess.Popen([*cda, "observe", sid, obs, "--db", db, "--as", who], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, env=env)
            for obs, who in (("not slow(cache)", "alice"), ("slow(api)", "bob"))]
    for r in runs:
        out, err = r.communicate(timeout=300)
        assert r.returncode == 0, err
    history = json.loads(subprocess.run([*cda, "history", sid, "--db", db, "--json"], capture_output=True, text=True,
                                        env=env, check=True).stdout)
    assert sorted((s["observation"], s["author"]) for s in history["steps"][1:]) == [
        ("not slow(cache)", "alice"), ("slow(api)", "bob")]
    assert [s["step"] for s in history["steps"]] == [0, 1, 2]


def _matches(expected: list[str], got: list[str]) -> bool:
    """``got`` as the page shows it: ``...`` alone stands for any lines, ``…`` inside a line for any text."""
    import re

    if not expected:
        return not got
    head, rest = expected[0], expected[1:]
    if head.strip() == "...":
        return any(_matches(rest, got[i:]) for i in range(len(got) + 1))
    pattern = "^" + ".*".join(re.escape(part) for part in head.split("…")) + "$"
    return bool(got) and re.match(pattern, got[0]) is not None and _matches(rest, got[1:])


@pytest.mark.slow  # the whole two-analyst walk (80 s at load 13): .ci/run's slow step
def test_the_two_analysts_walk_runs_as_written(tmp_path: Path) -> None:
    """docs/investigate.md, "Two analysts, one incident": every command, run in order, prints what the page shows."""
    import re
    import shutil

    page = (ROOT / "docs" / "investigate.md").read_text(encoding="utf-8")
    walk = page[page.index("## Two analysts, one incident"):page.index("## In Python")]
    blocks = re.findall(r"```console\n(.*?)```", walk, re.S)
    assert len(blocks) == 4
    shutil.copytree(ROOT / "examples", tmp_path / "examples")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "CDA_KEY_DIR": str(tmp_path / "keys"),
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    sid = None
    commands: list[tuple[str, list[str]]] = []
    for block in blocks:
        for line in block.rstrip("\n").split("\n"):
            if line.startswith("$ "):
                commands.append((line[2:], []))
            else:
                commands[-1][1].append(line)
    for command, expected in commands:
        if sid is not None:
            command = command.replace("5f2a0c7e9b1d4e36", sid)
            expected = [e.replace("5f2a0c7e9b1d4e36", sid) for e in expected]
        run = subprocess.run(["bash", "-c", command], cwd=tmp_path, env=env, capture_output=True, text=True,
                             timeout=300)
        assert run.returncode == 0, (command, run.stderr)
        got = (run.stdout + run.stderr).rstrip("\n").split("\n") if run.stdout + run.stderr else []
        if sid is None and expected == ["5f2a0c7e9b1d4e36"]:
            sid = got[0]
            continue
        assert _matches(expected, got), (command, got)
    assert sid is not None


def test_integration_risks_are_the_hard_clauses_across_the_focus_boundary() -> None:
    """With Ken's communities ({web, api, cache}, {auth}, {db, queue}) the focus is {web, api, cache};
    propagation ties api to auth (api depends on auth) but no focus atom to db or queue (only auth
    and queue depend on db), and single_fault ties every service to every other."""
    inv = Investigation.start(ROOT / "examples" / "outage_first_symptom.cda",
                              ken=ROOT / "examples" / "action" / "ken_services.json")
    assert inv.memory.focus_subsystem is not None and "api, cache, web" in inv.memory.focus_subsystem
    risks = inv.memory.integration_risks
    assert len(risks) == 3 and [r.split(" ties")[0] for r in risks] == ["propagation", "single_fault", "single_fault"]
    assert "auth" in risks[0] and "auth" in risks[1] and "db" in risks[2]
    assert inv.memory.trace_record().integration_risks == risks
    alone = Investigation.start(PROBLEM)  # one component: nothing crosses its boundary
    assert alone.memory.integration_risks == []
