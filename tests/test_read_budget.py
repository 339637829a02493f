"""A budget covers reading and translating, not only solving (audit finding B): ``cda solve
--timeout 1`` on 1.5M ``or`` terms took 9.5 s in the DSL reader, and ``cda prove --timeout 1`` on
100k parentheses answered SUPPORTED, exit 0, 11.6 s later. Deadlines here are already passed or
cancelled (a token), so no assertion depends on the machine's speed: what is checked is that the
reader and the z3 translation read the clock at all, and that an answer after the budget is
labelled. And the DSL's "nested too deeply" names its line and column (finding C)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from cda.contracts.deadline import CancelToken, Deadline, OutOfTime, cancel_scope, deadline_scope
from cda.encodings.parse import parse_problem
from tests.conftest import ROOT
from tests.timing import HANG, wait_until

WIDE_DSL = "hyp a, b\nhard x: " + " or ".join(["a", "b"] * 5000) + "\n"
DEEP_DSL = "hyp a\nhard x: " + "(" * 3000 + "a" + ")" * 3000 + "\n"  # past the fast reader: lark reads it


def _cancelled() -> CancelToken:
    token = CancelToken()
    token.cancel("stop")
    return token


@pytest.mark.parametrize("fast", [True, False])
@pytest.mark.parametrize("text", [WIDE_DSL, DEEP_DSL], ids=["wide", "deep"])
def test_the_dsl_reader_stops_at_the_deadline(text: str, fast: bool) -> None:
    assert parse_problem(text, fast=fast).statements  # it reads without a budget
    with deadline_scope(Deadline(0)), pytest.raises(OutOfTime, match="while reading the problem"):
        parse_problem(text, fast=fast)
    with cancel_scope(_cancelled()), pytest.raises(OutOfTime):
        parse_problem(text, fast=fast)


def test_the_lark_path_reads_the_same_under_a_budget() -> None:
    text = "hyp a, b\nhard x: (a or b) and not (a and b)\nsoft s: prefer(a) weight 2\nobserve a\n"
    with deadline_scope(Deadline(3600)):
        assert parse_problem(text, fast=False) == parse_problem(text, fast=False)


def test_a_solve_stopped_while_reading_is_a_labelled_partial() -> None:
    import cda.api as api

    with cancel_scope(_cancelled()):
        result = api.solve(WIDE_DSL)
    assert result.partial and result.status == "unknown", result


def _cda(*argv: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "CDA_KEY_DIR": str(cwd)}
    return subprocess.run([sys.executable, "-m", "cda", *argv], capture_output=True, text=True, timeout=HANG,
                          cwd=cwd, env=env)


def test_cda_prove_that_reads_past_its_timeout_is_not_an_answer(tmp_path: Path) -> None:
    deep = tmp_path / "deep.fol"
    deep.write_text("premise p1: " + "(" * 20000 + "P(a)" + ")" * 20000 + "\nclaim c: P(a)\n")
    done = _cda("prove", str(deep), "--timeout", "0.01", cwd=tmp_path)
    assert done.returncode == 3, (done.stdout, done.stderr)  # on main: SUPPORTED, exit 0
    assert "time ran out while reading the formulas" in done.stderr and "SUPPORTED" not in done.stdout
    assert "Traceback" not in done.stderr
    answered = _cda("prove", str(deep), "--timeout", "inf", cwd=tmp_path)  # with time, it is read and proved
    assert answered.returncode == 0 and "SUPPORTED" in answered.stdout, answered


def test_the_fol_translation_to_z3_reads_the_clock() -> None:
    from cda.fol.parse import parse_fol
    from cda.fol.prove import prove_all

    problem = parse_fol("premise p1: " + " ∧ ".join(f"P{i}(a)" for i in range(3000)) + "\nclaim c: P1(a)\n")
    assert prove_all(problem, None)[0].status == "supported"
    with cancel_scope(_cancelled()):
        result = prove_all(problem, None)[0]
    assert result.unknown and result.status == "inconclusive", result
    assert "for z3" in (result.reason or ""), result  # stopped in the translation, before any check


def test_a_fol_answer_that_came_after_the_budget_is_inconclusive(monkeypatch: pytest.MonkeyPatch) -> None:
    import cda.fol.prove as prove
    from cda.fol.parse import parse_fol

    problem = parse_fol("premise Cat(tom)\nclaim Cat(tom)\n")
    real = prove._within

    def late(problem: object, claim: object, deadline: Deadline, backend: str, cross_check: bool) -> object:
        answer = real(problem, claim, Deadline(None), backend, cross_check)  # type: ignore[arg-type]
        wait_until(deadline.expired, HANG)  # a stage that read no clock: the answer comes after the budget
        return answer

    monkeypatch.setattr(prove, "_within", late)
    result = prove.prove_all(problem, 0.05)[0]
    assert result.unknown and result.status == "inconclusive", result
    assert "time ran out before the answer was complete" in (result.reason or ""), result


def test_a_dsl_nested_too_deeply_names_its_line_and_column(tmp_path: Path) -> None:
    deep = tmp_path / "deep.cda"
    deep.write_text("hyp a\n\nhard x: " + "not (" * 3000 + "a" + ")" * 3000 + "\n")
    done = _cda("solve", str(deep), "--json", cwd=tmp_path)
    assert done.returncode == 2, (done.stdout, done.stderr)
    error = json.loads(done.stdout)
    error = error.get("error", error)
    assert "nested too deeply" in error["message"], error
    # the innermost part: the atom inside the deepest parenthesis (lark_reader._too_deep)
    assert error["line"] == 3 and error["column"] == len("hard x: ") + 5 * 3000 + 1, error


def test_an_action_reads_its_dsl_within_its_budget() -> None:
    """The ToolBus's actions.start with budgets.wall 2 read a 220,000-deep dsl for 13 s: the
    Action's own reading now runs under its deadline (a labelled partial, via OutOfTime)."""
    from cda.actions.problem import build
    from cda.contracts.action import CDAInputs

    inputs = CDAInputs(problem="deep", dsl=WIDE_DSL)
    assert build(inputs, None, Deadline(3600)).assembled is not None
    with pytest.raises(OutOfTime, match="while reading the problem"):
        build(inputs, None, Deadline(0))
