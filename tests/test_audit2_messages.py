"""Messages the second audit found unclear or inconsistent (findings 9 and 10), each through the
``cda`` command: what a user types, the exit code, and words rather than a Python repr or
pydantic's text. Each door and exit code is run once in a child process (``_cda``); the other
cases of a door read the same words from the same ``main`` in the test's process
(``tests/cli_run.py``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli_run import cda_here
from tests.conftest import EXAMPLES, ROOT

CEDAR = EXAMPLES / "cedar"


def _cda(*args: str, cwd: Path, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "cda", *args], cwd=cwd, env=env, input=stdin, capture_output=True,
                          text=True, timeout=300)


def test_policy_analyze_takes_timeout_0_as_its_help_says(tmp_path: Path) -> None:
    """``--help`` says 0 or more; 0 is no time at all: every property unknown, a partial (exit 3),
    as ``cda solve --timeout 0`` is."""
    helped = cda_here("policy", "analyze", "--help", cwd=tmp_path)
    assert "--timeout" in helped.stdout
    done = _cda("policy", "analyze", "always-allows", str(CEDAR / "new.cedar"), "--schema",
                str(CEDAR / "schema.cedarschema"), "--timeout", "0", cwd=tmp_path)
    assert done.returncode == 3, done.stderr
    assert done.stdout.startswith("UNKNOWN") and "time ran out" in done.stdout
    assert "more than 0" not in done.stderr
    negative = cda_here("policy", "analyze", "always-allows", str(CEDAR / "new.cedar"), "--schema",
                    str(CEDAR / "schema.cedarschema"), "--timeout", "-1", cwd=tmp_path)
    assert negative.returncode == 2 and "0 or more" in negative.stderr


@pytest.mark.parametrize(("typed", "words", "run"), [
    ("1e-400", "--prior 1E-400 is too close to 0 to compute with", _cda),  # the door's exit 2 in a child
    ("0.99999999999999999", "--prior 0.99999999999999999 is too close to 1 to compute with", cda_here),
    ("1.0000000000000001", "strictly between 0 and 1, not 1.0000000000000001", cda_here),  # a float would read 1.0
    ("0", "strictly between 0 and 1, not 0", cda_here),
    ("nan", "strictly between 0 and 1, not NaN", cda_here),
], ids=["1e-400", "0.99999999999999999", "1.0000000000000001", "0", "nan"])
def test_probe_reads_the_prior_exactly_from_its_text(typed: str, words: str, run, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    done = run("probe", str(EXAMPLES / "c17.bench"), "--observations", str(EXAMPLES / "c17.obs"), "--prior", typed,
                cwd=tmp_path)
    assert done.returncode == 2 and words in done.stderr, done.stderr
    assert "not 0.0" not in done.stderr and "Traceback" not in done.stderr


def test_probe_takes_a_tiny_prior_a_float_holds(tmp_path: Path) -> None:
    done = _cda("probe", str(EXAMPLES / "c17.bench"), "--observations", str(EXAMPLES / "c17.obs"), "--prior", "1e-300",
                cwd=tmp_path)
    assert done.returncode == 0, done.stderr


def test_task_budget_says_the_limit_in_words(tmp_path: Path) -> None:
    done = cda_here("task", "budget", "agent-x", "1e400", "--store", str(tmp_path / "g.db"), cwd=tmp_path)
    assert done.returncode == 2
    assert "Decimal(" not in done.stderr
    assert "at most 1,000,000,000,000,000 (a quadrillion, 10 to the power 15), not 1E+400" in done.stderr, done.stderr


def test_solve_of_empty_input_says_the_input_is_empty(tmp_path: Path) -> None:
    done = _cda("solve", "-", cwd=tmp_path, stdin="")
    assert done.returncode == 2
    assert done.stderr.strip() == "cda: error: dsl: the input is empty (no text at all)", done.stderr
    assert "String should have" not in done.stderr


@pytest.mark.parametrize(("statement", "line", "why", "run"), [
    # the first case runs each command in a child: the door's exits 0 and 2 as a user meets them
    ("goal prove down(api)", "line 1 ('goal prove down(api)') is a goal", "decides no claims", _cda),
    ("goal minimal_explanations", "is a goal", "every consistent set", cda_here),
    ("goal best_explanation top 3", "is a goal", "--top", cda_here),
    ("expect status sat", "is an expect line", "checks no expectations", cda_here),
    ("fact depends(web, api)\ngoal disprove down(db)", "line 2 ('goal disprove down(db)') is a goal", "no claims",
     cda_here),
], ids=["goal prove", "goal minimal_explanations", "goal best_explanation", "expect", "fact then goal"])
def test_investigate_revise_refuses_what_an_investigation_ignores(statement: str, line: str, why: str, run,  # type: ignore[no-untyped-def]
                                                                    tmp_path: Path) -> None:
    (tmp_path / "p.cda").write_text((EXAMPLES / "outage_first_symptom.cda").read_text())
    started = run("investigate", "start", "p.cda", "--db", "s.sqlite", cwd=tmp_path)
    assert started.returncode == 0, started.stderr
    sid = started.stdout.strip()
    done = run("investigate", "revise", sid, statement, "--db", "s.sqlite", cwd=tmp_path)
    assert done.returncode == 2, done.stdout
    assert line in done.stderr and why in done.stderr and "which an investigation ignores" in done.stderr
    history = run("investigate", "history", sid, "--db", "s.sqlite", cwd=tmp_path)
    assert "revise" not in history.stdout  # not recorded as a step
    kept = run("investigate", "revise", sid, "fact depends(web, api)", "--db", "s.sqlite", cwd=tmp_path)
    assert kept.returncode == 0, kept.stderr  # what it reads is still taken


SEPARATED = [
    ("metric t : ms\nobserve value(metric:t) = 1_000\n", 2, 28),  # once read as the unit '_000'
    ("metric t : ms\nobserve value(metric:t) = 1_000 ms\n", 2, 28),
    ("metric t : ms\nobserve value(metric:t) = 5\nhard: value(metric:t) <= 2_5.5e1 ms\n", 3, 27),
    ("hyp a\nsoft weight 1_000: not a\n", 2, 14),
    ("hyp a\nsoft: not a weight 1_000\n", 2, 21),
    ("hyp a\ngoal best_explanation top 1_000\n", 2, 28),
]


@pytest.mark.parametrize(("text", "line", "column"), SEPARATED)
def test_digit_separators_are_refused_where_they_stand_by_both_readers(text: str, line: int, column: int) -> None:
    """docs/dsl.md, "Numbers": a number is plain decimal digits. Both readers refuse ``1_000``
    with the same words at the separator (the fast reader hands it to lark's, which says where)."""
    from cda.encodings.numbers import DIGIT_SEPARATORS
    from cda.encodings.parse import parse_problem
    from cda.errors import DSLSyntaxError
    from tests.test_fastparse import same_as_lark

    assert same_as_lark(text) is False  # the fast reader does not take it, and the answers agree
    for fast in (True, False):
        with pytest.raises(DSLSyntaxError) as err:
            parse_problem(text, "t.cda", fast=fast)
        assert (err.value.message, err.value.line, err.value.column) == (DIGIT_SEPARATORS, line, column)


def test_names_with_underscores_and_digits_still_read() -> None:
    from tests.test_fastparse import same_as_lark, same_clause_as_lark

    assert same_as_lark("hyp a1_000, _1, b_2\nhard: a1_000 or _1 or b_2\n")
    assert same_clause_as_lark("a1_000 or _1")


def test_solve_says_where_a_digit_separator_stands(tmp_path: Path) -> None:
    (tmp_path / "p.cda").write_text(SEPARATED[0][0])
    done = _cda("solve", "p.cda", cwd=tmp_path)
    assert done.returncode == 2
    assert "p.cda:2:28: syntax error: digit separators are not allowed: write 1000, not 1_000" in done.stderr
    assert "unknown unit" not in done.stderr


def test_investigate_revise_refuses_a_goal_over_mcp(tmp_path: Path) -> None:
    """The refusal is the operation's: the MCP door gets it as a tool error, and no step is written."""
    pytest.importorskip("mcp", reason="the MCP SDK is in the test extra (cda[mcp])")
    import anyio
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    server = StdioServerParameters(command=sys.executable, args=["-m", "cda", "mcp"],
                                   env={**os.environ, "PYTHONPATH": str(ROOT)}, cwd=str(tmp_path))

    async def body() -> tuple[object, object]:
        async with Client(server, read_timeout_seconds=120) as client:
            started = (await client.call_tool("investigate_start", {
                "dsl": "hyp a, b\nobservable o\nhard: o iff (a or b)\n"})).structured_content
            assert isinstance(started, dict)
            refused = await client.call_tool("investigate_revise", {
                "session_id": started["session_id"], "add": ["goal prove a"]})
            history = await client.call_tool("investigate_history", {"session_id": started["session_id"]})
            return refused, history

    refused, history = anyio.run(body)
    assert refused.is_error  # type: ignore[attr-defined]
    text = refused.content[0].text  # type: ignore[attr-defined]
    assert "is a goal, which an investigation ignores" in text and "invalid_params" in text, text
    assert "revise" not in json.dumps(history.structured_content)  # type: ignore[attr-defined]
