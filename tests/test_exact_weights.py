"""An Action's soft weight is exact from the JSON text to the solver (rule 3; audit finding 6):
``1.0000000000000001`` outweighs ``1`` at the CLI's ``cda run`` and at the ToolBus, as it does in
the DSL, and what is no finite positive number in range is refused with the field named."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT
from tests.service_harness import follow, serving, toolbus

DSL = "hyp a, b\nobservable o\nobserve o\nhard h: o iff (a or b)\nhard one: at_most(1, [a, b])\n"
# the weight's digits as text: a Python float would already have rounded them to 1.0
INPUTS_TEXT = ('{"problem": "which of a, b?", "dsl": ' + json.dumps(DSL) + ', "goals": {"kind": "best_explanation", '
               '"top": 2}, "constraints": {"soft": [{"clause": "not a", "weight": 1.0000000000000001, "name": "wa"}, '
               '{"clause": "not b", "weight": 1, "name": "wb"}]}, "budgets": {"wall": 60}, "seed": {"purpose": "w"}}')


def _cda(tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "CDA_KEY_DIR": str(tmp / "keys")}
    return subprocess.run([sys.executable, "-m", "cda", *args], capture_output=True, text=True, env=env, cwd=tmp,
                          timeout=300)


def _ranked(outputs: dict[str, Any]) -> list[list[str]]:
    """The hypotheses in rank order (an abstained run, with no Ken graph, reports them in its
    epistemic report)."""
    return [h["assumed"] for h in outputs["hypotheses"] or outputs["epistemic_report"]["hypotheses"]]


def test_the_dsl_and_cda_run_rank_the_heavier_weight_alike(tmp_path: Path) -> None:
    (tmp_path / "w.cda").write_text(DSL + "soft wa weight 1.0000000000000001: not a\nsoft wb weight 1: not b\n"
                                    "goal best_explanation top 2\n", encoding="utf-8")
    solved = _cda(tmp_path, "solve", "w.cda", "--json")
    assert solved.returncode == 0, solved.stderr
    # the oracle: the DSL's exact ranking (b pays the lighter wb); the JSON prints costs as floats, so by name
    assert [(h["assumed"], h["violated"]) for h in json.loads(solved.stdout)["hypotheses"]] == [(["b"], ["wb"]),
                                                                                                (["a"], ["wa"])]
    (tmp_path / "w.json").write_text(INPUTS_TEXT, encoding="utf-8")
    run = _cda(tmp_path, "run", "w.json", "--json", "--out", "r")
    completed = [json.loads(line) for line in run.stdout.splitlines() if '"action_completed"' in line]
    assert completed, run.stdout[-2000:] + run.stderr
    assert _ranked(completed[-1]["outputs"]) == [["b"], ["a"]]
    # the test tells the difference: equal weights tie, and the tie puts a first
    (tmp_path / "w.json").write_text(INPUTS_TEXT.replace("1.0000000000000001", "1.0"), encoding="utf-8")
    run = _cda(tmp_path, "run", "w.json", "--json", "--out", "r2")
    completed = [json.loads(line) for line in run.stdout.splitlines() if '"action_completed"' in line]
    assert _ranked(completed[-1]["outputs"]) == [["a"], ["b"]]


@pytest.mark.parametrize("weight, says", [
    ("NaN", "got NaN"), ("Infinity", "finite"), ("1e999", "out of range"), ("-1", "greater than 0"), ("0", "greater than 0"),
    ("true", "must be a number"), ("1" + "0" * 45, "out of range"), ("1e-45", "out of range"),
    ('"1.5x"', "must be a number"),
])
def test_a_weight_that_is_no_exact_positive_number_is_refused(tmp_path: Path, weight: str, says: str) -> None:
    (tmp_path / "w.json").write_text(INPUTS_TEXT.replace("1.0000000000000001", weight), encoding="utf-8")
    run = _cda(tmp_path, "run", "w.json", "--out", "r")
    assert run.returncode == 2, run.stdout + run.stderr
    assert says in run.stderr and "Traceback" not in run.stderr, run.stderr


def test_the_toolbus_reads_the_weight_exactly(tmp_path: Path) -> None:
    with serving(tmp_path / "receipts.sqlite") as server, toolbus(server) as ws:
        ws.send('{"id": 1, "method": "actions.start", "params": {"ability": "cda", "inputs": ' + INPUTS_TEXT + '}}')
        answer = json.loads(ws.recv(timeout=60))
        assert "result" in answer, answer
        events = follow(server, answer["result"]["action_id"])
    assert events[-1]["event"] == "action_completed", events[-1]
    assert _ranked(events[-1]["data"]["outputs"]) == [["b"], ["a"]]
