"""Investigations: the live solver against a rebuild from text at every step, sessions that
survive kill -9 between and during steps, the CLI, the focus part and conflicts."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cda.cli.main import main
from cda.contracts.hypothesis_record import HypothesisRecord, TraceRecord
from cda.investigation.focus import parts
from cda.investigation.live import InvestigationError
from cda.investigation.session import ClosedInvestigation, Investigation, MemoryBlock
from cda.investigation.session_store import SessionMoved, UnknownSession
from tests.test_records import problems

ROOT = Path(__file__).resolve().parents[1]
OUTAGE = (ROOT / "examples" / "service_outage.cda").read_text().replace(
    "observe slow(api)\nobserve not slow(cache)\n", "")


def _same(inv: Investigation) -> None:
    """The live answer equals the answer rebuilt from text."""
    live = inv.status().model_dump(mode="json")
    rebuilt = inv.rebuilt_memory()
    live.pop("updated_at_utc")
    rebuilt.pop("updated_at_utc")
    assert live == rebuilt


@pytest.mark.parametrize("backend", ["z3", "clingo"])
def test_outage_session_incremental_equals_rebuilt_at_every_step(backend: str, tmp_path: Path) -> None:
    db = tmp_path / "s.sqlite"
    inv = Investigation.start(OUTAGE, db=db, backend=backend)
    _same(inv)
    assert inv.status().hypotheses_total == 5 and inv.status().next_probe == "slow(cache)"
    for obs in ["slow(api)", "not slow(cache)", "not slow(auth)"]:
        inv.observe(obs)
        _same(inv)
    m = inv.status()
    assert [h.assumptions for h in m.candidate_hypotheses] == [["down(api)"]]
    [h1] = m.candidate_hypotheses
    assert [e.excerpt for e in h1.evidence_for] == [  # type: ignore[union-attr]
        "observe@18: observe slow(web)", "observe slow(api)", "observe not slow(cache)", "observe not slow(auth)"]
    assert m.next_probe is None and m.policy_fallback_applied
    # a contradiction ends the step with the cores, and undo goes back
    m = inv.observe("slow(cache)")
    _same(inv)
    assert m.conflict is not None and m.candidate_hypotheses == []
    assert m.conflict.cores == [["observe not slow(cache) (step 2)", "observe slow(cache) (step 4)"]]
    m = inv.undo()
    _same(inv)
    assert [h.assumptions for h in m.candidate_hypotheses] == [["down(api)"]] and m.conflict is None
    sid = inv.session_id
    inv.release()
    again = Investigation.open(sid, db)
    assert again.status() == m
    history = again.history()
    assert [s.kind for s in history] == ["start", "observe", "observe", "observe", "observe", "undo"]
    # every hypothesis determined slow(api): the first observation narrowed the ranking without solving it again
    assert history[1].trace["narrowed"] is True and history[0].trace["narrowed"] is False
    _same(again)
    again.close()
    with pytest.raises(ClosedInvestigation):
        again.observe("slow(db)")
    again.release()


@pytest.mark.parametrize("backend", ["z3", "clingo"])
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(p=problems(), steps=st.lists(st.tuples(st.integers(0, 2), st.booleans(), st.booleans()), min_size=1, max_size=4))
def test_random_sessions_incremental_equals_rebuilt(backend: str, p: dict[str, Any],
                                                    steps: list[tuple[int, bool, bool]]) -> None:
    text = p["text"]
    obs = p["obs"]
    inv = Investigation.start(text, backend=backend)
    _same(inv)
    for index, value, undo in steps:
        atom = obs[index % len(obs)]
        if undo and inv.live.active:
            inv.undo()
        else:
            inv.observe(atom if value else f"not {atom}")
        _same(inv)
    inv.release()


def test_persisted_columns_are_the_memory_block(tmp_path: Path) -> None:
    import sqlite3

    db = tmp_path / "s.sqlite"
    inv = Investigation.start(OUTAGE, db=db, task_id="outage-42")
    m = inv.observe("slow(api)")
    inv.release()
    con = sqlite3.connect(db)
    assert con.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    row = con.execute("SELECT session_id, task_id, focus_subsystem, global_invariants, candidate_hypotheses, "
                      "selected_hypothesis_id, next_probe, updated_at_utc FROM sessions").fetchone()
    con.close()
    assert row[0] == m.session_id and row[1] == "outage-42" and row[2] == m.focus_subsystem
    assert json.loads(row[3]) == m.global_invariants
    assert [HypothesisRecord.model_validate(h) for h in json.loads(row[4])] == m.candidate_hypotheses
    assert (row[5], row[6], row[7]) == (m.selected_hypothesis_id, m.next_probe, m.updated_at_utc)


def _cli(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(args), out, err)
    return code, out.getvalue(), err.getvalue()


def _block(out: str) -> MemoryBlock:
    """The memory block ``status --json`` prints (its trace record beside it)."""
    block = json.loads(out)
    block.pop("trace_record")
    return MemoryBlock.model_validate(block)


def test_cli_start_observe_status_history_undo_close(tmp_path: Path) -> None:
    problem = tmp_path / "outage.cda"
    problem.write_text(OUTAGE)
    db = str(tmp_path / "s.sqlite")
    code, out, _ = _cli("investigate", "start", str(problem), "--db", db, "--json")
    assert code == 0
    sid = json.loads(out)["session_id"]
    code, out, _ = _cli("investigate", "observe", sid, "slow(api)", "--db", db)
    assert code == 0 and "next probe: slow(cache)" in out and "for:     observe slow(api)" in out
    code, out, _ = _cli("investigate", "status", sid, "--db", db, "--json")
    block = _block(out)
    assert TraceRecord.model_validate(json.loads(out)["trace_record"]).candidate_hypotheses == block.candidate_hypotheses
    assert block.observations == ["slow(api)"] and block.task_id == "outage"
    assert all(isinstance(h, HypothesisRecord) for h in block.candidate_hypotheses)
    code, out, err = _cli("investigate", "observe", sid, "down(api)", "--db", db)
    assert code == 2 and "abducible" in err and out == ""
    code, out, err = _cli("investigate", "observe", sid, "slow(nowhere)", "--db", db)
    assert code == 2 and "nowhere" in err
    code, out, _ = _cli("investigate", "history", sid, "--db", db, "--json")
    assert [s["kind"] for s in json.loads(out)["steps"]] == ["start", "observe"]
    assert _cli("investigate", "undo", sid, "--db", db)[0] == 0
    code, out, _ = _cli("investigate", "status", sid, "--db", db, "--json")
    assert _block(out).observations == []
    code, out, err = _cli("investigate", "undo", sid, "--db", db)
    assert code == 2 and "nothing to undo" in err
    assert _cli("investigate", "close", sid, "--db", db)[0] == 0
    code, _, err = _cli("investigate", "observe", sid, "slow(api)", "--db", db)
    assert code == 2 and "closed" in err
    code, _, err = _cli("investigate", "status", "nope", "--db", db)
    assert code == 2 and "no investigation 'nope'" in err
    code, _, err = _cli("investigate", "start", str(tmp_path / "missing.cda"), "--db", db)
    assert code == 2 and "no such file" in err


_STEPPER = """
import sys, time
from cda.investigation.session import Investigation
inv = Investigation.open(sys.argv[1], sys.argv[2])
for obs in sys.argv[3:]:
    inv.observe(obs)
    print("done", inv.status().step, flush=True)
time.sleep(60)
"""


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT)}


def test_killed_between_and_during_steps_reopens_where_it_was(tmp_path: Path) -> None:
    db = tmp_path / "s.sqlite"
    inv = Investigation.start(OUTAGE, db=db)
    sid = inv.session_id
    before = inv.status()
    inv.release()
    # between steps: the step was written, then the process died
    proc = subprocess.Popen([sys.executable, "-c", _STEPPER, sid, str(db), "slow(api)"], stdout=subprocess.PIPE,
                            text=True, env=_env())
    assert proc.stdout is not None
    assert proc.stdout.readline().split() == ["done", "1"]
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    proc.stdout.close()
    after = Investigation.open(sid, str(db))
    assert after.status().observations == ["slow(api)"] and after.status().step == 1
    _same(after)
    first = after.status()
    after.release()
    # during a step: killed at several moments of 'observe'; the session is either as it was
    # or one whole step on, never in between
    for delay in (0.05, 0.3, 0.6, 0.9):
        proc = subprocess.Popen([sys.executable, "-m", "cda", "investigate", "observe", sid, "not slow(cache)",
                                 "--db", str(db)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=_env())
        time.sleep(delay)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        again = Investigation.open(sid, str(db))
        m = again.status()
        if m.step == first.step:
            assert m == first
        else:
            assert m.step == first.step + 1 and m.observations == ["slow(api)", "not slow(cache)"]
            _same(again)
            again.undo()  # back to ``first`` for the next round
            first = again.status()
        again.release()
    assert before.step == 0


def test_parts_and_focus_follow_the_best_probe() -> None:
    text = ("hyp a, b, c\nobservable x, y, z\nhard: x iff a\nhard: y iff (b or c)\nhard: z iff c\n"
            "observe y\nsoft: not a weight 1\n")
    inv = Investigation.start(text)
    from cda.api import ground

    names = [sorted(p.atoms) for p in parts(ground(text))]
    assert names == [["a", "x"], ["b", "c", "y", "z"]]
    m = inv.status()
    assert m.next_probe == "z" and m.focus_subsystem is not None and m.focus_subsystem.startswith("part 2")
    m = inv.observe("z")
    assert m.focus_subsystem is not None and m.focus_subsystem.startswith("part 1")  # only x is left open
    inv.release()


def test_two_processes_on_one_session_cannot_both_write_the_next_step(tmp_path: Path) -> None:
    db = tmp_path / "s.sqlite"
    first = Investigation.start(OUTAGE, db=db)
    second = Investigation.open(first.session_id, db)
    first.observe("slow(api)")
    with pytest.raises(SessionMoved, match="moved on"):
        second.observe("not slow(cache)")
    assert second.live.active == [] and second.status().step == 0  # the refused step left nothing behind
    second.release()
    again = Investigation.open(first.session_id, db)
    assert again.status() == first.status() and again.status().observations == ["slow(api)"]
    first.release()
    again.release()


def test_public_name() -> None:
    import cda

    assert cda.Investigation is Investigation


def test_unknown_session_and_bad_observations() -> None:
    with pytest.raises(UnknownSession):
        Investigation.open("nope", ":memory:")
    inv = Investigation.start("hyp a\nobservable o\nmetric m : ms\nhard: o iff (a or value(metric:m) > 5 ms)\n")
    with pytest.raises(InvestigationError, match="an observation is needed"):
        inv.observe("   ")
    m = inv.observe("value(metric:m) = 3 ms")  # a metric value goes through the DSL
    assert m.observations == ["value(metric:m) = 3 ms"]
    _same(inv)
    inv.release()


def test_with_ken_the_parts_are_its_communities_and_the_focus_follows_the_best_probe() -> None:
    ken = ROOT / "examples" / "action" / "ken_services.json"
    inv = Investigation.start(OUTAGE, ken=ken)
    assert [sorted(p.atoms) for p in inv.live.parts] == [
        ["down(api)", "down(cache)", "down(web)", "slow(api)", "slow(cache)", "slow(web)"],
        ["down(auth)", "slow(auth)"],
        ["down(db)", "down(queue)", "slow(db)", "slow(queue)"],
    ]
    m = inv.status()
    assert m.next_probe == "slow(cache)" and m.focus_subsystem == inv.live.parts[0].name
    m = inv.observe("not slow(cache)")
    assert m.next_probe == "slow(auth)" and m.focus_subsystem == inv.live.parts[1].name
    _same(inv)
    inv.release()
