"""The CLI made for CI: several files, ``-`` (stdin), ``--format text|json|jsonl|junit`` (golden
files), ``check --json``, errors as JSON objects, ``--version``, ``cda fmt``, progress and colour
only on a terminal, ``--help`` describing every argument.

Regenerate the golden files on purpose with ``CDA_UPDATE_GOLDEN=1 python -m pytest tests/test_cli_ci.py``.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings

from cda.cli import terminal
from cda.cli.main import _parser, main
from cda.testing import problem_texts
from tests.conftest import EXAMPLES
from tests.timing import wait_until

GOLDEN = Path(__file__).parent / "golden" / "ci"
UPDATE = os.environ.get("CDA_UPDATE_GOLDEN") == "1"

OK = "hyp a, b\nhard: a or b\ngoal prove a or b\n"
FAILS = "hyp a, b\nhard: a or b\ngoal prove a\n"
BAD = "hyp a\nhard: a and\n"


def run(*argv: str, stdin: str = "") -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), stdout=out, stderr=err, stdin=io.StringIO(stdin))
    return code, out.getvalue(), err.getvalue()


@pytest.fixture
def suite(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Three files in the current folder (relative names, so the golden bytes hold anywhere)."""
    monkeypatch.chdir(tmp_path)
    for name, text in (("ok.cda", OK), ("fails.cda", FAILS), ("bad.cda", BAD)):
        Path(name).write_text(text)
    return ["ok.cda", "fails.cda", "bad.cda"]


def golden(name: str, text: str) -> None:
    path = GOLDEN / name
    if UPDATE:
        path.write_text(text)
    assert text == path.read_text()


@pytest.mark.parametrize("fmt", ["text", "json", "jsonl", "junit"])
def test_each_format_matches_its_golden_file(suite: list[str], fmt: str) -> None:
    code, out, err = run("solve", *suite, "--backend", "z3", "--format", fmt)
    assert code == 2  # the worst of 0, 1 and 2
    if fmt == "junit":
        out = re.sub(r'time="[0-9.]+"', 'time="T"', out)
        root = ET.fromstring(out.split("\n", 1)[1])  # well-formed XML
        ts = root.find("testsuite")
        assert ts is not None and (ts.get("tests"), ts.get("failures"), ts.get("errors")) == ("3", "1", "1")
    if fmt == "jsonl":
        rows = [json.loads(line) for line in out.splitlines()]
        assert [(r["file"], r["exit_code"]) for r in rows] == [("ok.cda", 0), ("fails.cda", 1), ("bad.cda", 2)]
        assert rows[2]["error"]["line"] == 2 and rows[2]["error"]["column"] == 12
    if fmt == "text":
        assert "bad.cda:2:12: syntax error" in err and "3 files: 1 ok, 2 not ok" in err
    else:
        assert "Traceback" not in err
    golden(f"solve.{fmt}", out)


def test_one_file_json_is_the_result_itself_as_before(suite: list[str]) -> None:
    code, out, _ = run("solve", "ok.cda", "--json", "--backend", "z3")
    assert code == 0 and json.loads(out)["verdicts"][0]["status"] == "supported"
    assert run("solve", "ok.cda", "--format", "json", "--backend", "z3")[1] == out


def test_json_error_is_an_object_on_stdout(suite: list[str]) -> None:
    code, out, err = run("solve", "bad.cda", "--json")
    assert code == 2 and err == ""
    data = json.loads(out)
    assert {k: data[k] for k in ("file", "line", "column", "kind")} == {
        "file": "bad.cda", "line": 2, "column": 12, "kind": "syntax error"}
    assert data["message"].startswith("unexpected end of input; expected a name")
    assert "a name" in data["expected"] and "'not'" in data["expected"]
    code, out, _ = run("check", "missing.cda", "--json")
    assert code == 2 and json.loads(out) == {
        "file": "missing.cda", "line": None, "column": None, "kind": "error",
        "message": "missing.cda: no such file", "expected": []}
    code, out, _ = run("check", "-", "--json", stdin="hyp a\nhard: b\n")  # a type error: no expected tokens
    data = json.loads(out)
    assert code == 2 and (data["file"], data["line"], data["column"], data["kind"]) == ("<stdin>", 2, 7, "type error")


def test_prove_json_error_is_an_object_on_stdout(tmp_path: Path) -> None:
    f = tmp_path / "bad.fol"
    f.write_text("premise P(a)\nclaim P(a) ∧\n")
    code, out, err = run("prove", str(f), "--json")
    data = json.loads(out)
    assert code == 2 and err == "" and (data["file"], data["line"], data["kind"]) == (str(f), 2, "syntax error")


@pytest.mark.parametrize("command", ["diagnose", "probe"])
def test_diagnose_and_probe_json_errors_are_objects_on_stdout(tmp_path: Path, command: str) -> None:
    bench, obs = tmp_path / "c.bench", tmp_path / "obs.txt"
    bench.write_text("INPUT(a)\nOUTPUT(z)\nz = FOO(a)\n")
    obs.write_text("a=1 z=0\n")
    code, out, err = run(command, str(bench), "--observations", str(obs), "--json")
    data = json.loads(out)
    assert code == 2 and err == "" and data["file"] == str(bench) and "FOO" in data["message"]
    code, out, _ = run(command, str(tmp_path / "none.bench"), "--json")
    assert code == 2 and json.loads(out)["message"].endswith("none.bench: no such file")


def test_check_json_and_stdin(suite: list[str]) -> None:
    code, out, _ = run("check", "-", "--json", stdin=OK)
    assert code == 0
    assert json.loads(out) == {"file": "<stdin>", "ok": True, "abducibles": 2, "observables": 0, "atoms": 2,
                               "numeric_variables": 0, "clauses": 1, "soft_clauses": 0, "claims": 1, "ir_nodes": 5}
    code, out, _ = run("solve", "-", "--json", stdin=FAILS)
    assert code == 1 and json.loads(out)["verdicts"][0]["status"] == "inconclusive"
    code, _, err = run("solve", "-", "-", stdin=OK)
    assert code == 2 and "'-' (standard input) can be given once" in err
    code, out, err = run("solve", "-", stdin=BAD)
    assert code == 2 and out == "" and err.startswith("<stdin>:2:12: syntax error")


def test_check_jsonl_over_files(suite: list[str]) -> None:
    code, out, _ = run("check", *suite, "--format", "jsonl")
    rows = [json.loads(line) for line in out.splitlines()]
    assert code == 2 and [r["exit_code"] for r in rows] == [0, 0, 2]
    assert rows[0]["result"]["ok"] is True and rows[2]["error"]["kind"] == "syntax error"


def test_version_names_the_solvers_versions() -> None:
    """Issue 27: `--version` named no solver: an answer depends on z3's and clingo's versions."""
    import sys

    import clingo
    import z3

    code, out, _ = run("--version")
    match = re.fullmatch(r"cda (\S+) \(z3 (\S+), clingo (\S+), clingo-dl (\S+), lark (\S+); Python (\S+)\)\n", out)
    assert code == 0 and match, out
    assert match[2].startswith(z3.get_version_string()) and match[3] == clingo.__version__
    assert match[6] == sys.version.split()[0]


def test_every_argument_has_help() -> None:
    """``--help`` describes every argument of every subcommand."""
    missing = []

    def walk(parser: argparse.ArgumentParser, path: str) -> None:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, child in action.choices.items():
                    walk(child, f"{path} {name}")
            elif not action.help:
                missing.append(f"{path} {'/'.join(action.option_strings) or action.dest}")

    walk(_parser(), "cda")
    assert missing == []


def test_fmt_check_rewrite_and_stdin(tmp_path: Path) -> None:
    f = tmp_path / "messy.cda"
    f.write_text("# header\nhyp a,b   # two\n\n\nhard  h :a and\n  b # why\ngoal prove   a\n")
    code, out, _ = run("fmt", "--check", str(f))
    assert code == 1 and out == f"{f}: not formatted\n"
    assert f.read_text().startswith("# header\nhyp a,b")  # --check changes nothing
    code, out, _ = run("fmt", str(f))
    assert code == 0 and out == f"{f}: formatted\n"
    # each statement keeps its line (blank lines too); the one written over two lines keeps its breaks
    assert f.read_text() == "# header\nhyp a, b  # two\n\n\nhard  h :a and\n  b # why\ngoal prove a\n"
    assert run("fmt", "--check", str(f)) == (0, "", "")
    assert run("fmt", "-", stdin="hyp  a\n")[1] == "hyp a\n"
    code, out, err = run("fmt", "-", stdin=BAD)
    assert code == 2 and err.startswith("<stdin>:2:12: syntax error")


def test_fmt_keeps_fol_blocks_verbatim_and_the_comments_around_them() -> None:
    text = ("hyp a  # x\nfol {\n premise P(a) # c\n claim P(a)\n} # after\nhard : a\n"
            "fol { claim Q(b) } # one line\nfol { claim R(c) # in\n} hard h2: a # t\n")
    code, out, _ = run("fmt", "-", stdin=text)
    assert code == 0 and out == (
        "hyp a  # x\nfol {\n premise P(a) # c\n claim P(a)\n}  # after\nhard: a\n"
        "fol { claim Q(b) }  # one line\nfol { claim R(c) # in\n} hard h2: a  # t\n")


def test_fmt_keeps_meaning_and_comments_of_the_examples() -> None:
    from cda.api import solve
    from cda.cli.fmt import formatted

    for path in sorted(EXAMPLES.glob("*.cda")):
        text = path.read_text()
        new = formatted(text, str(path))
        assert re.findall(r"#[^\n]*", new) == re.findall(r"#[^\n]*", text), path
        assert formatted(new, str(path)) == new  # idempotent
        if "ken" not in text:
            before, after = solve(text, backend="z3"), solve(new, backend="z3")
            assert [h.assumed for h in before.hypotheses] == [h.assumed for h in after.hypotheses]
            assert [v.status for v in before.verdicts] == [v.status for v in after.verdicts]


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_colour_only_on_a_terminal_and_never_under_no_color(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NO_COLOR", raising=False)
    assert terminal.paint("error:", "red", _Tty()) == "\x1b[31merror:\x1b[0m"
    assert terminal.paint("error:", "red", io.StringIO()) == "error:"
    monkeypatch.setenv("NO_COLOR", "1")
    assert terminal.paint("error:", "red", _Tty()) == "error:"


def test_progress_only_on_a_terminal_after_the_delay() -> None:
    tty = _Tty()
    bar = terminal.Progress(tty, "solving x.cda", total=3, after=0.0)
    bar.step()
    wait_until(lambda: "[1/3]" in tty.getvalue(), "the progress line drawn")
    bar.close()
    shown = tty.getvalue()
    assert "cda: solving x.cda [1/3]" in shown and shown.endswith("\r\x1b[K")
    quiet = terminal.Progress(tty := _Tty(), "fast", after=5.0)
    quiet.close()
    assert tty.getvalue() == ""  # work shorter than the delay shows nothing
    pipe = io.StringIO()
    terminal.Progress(pipe, "x", after=0.0).close()
    assert pipe.getvalue() == ""


def _screen(text: str) -> list[str]:
    """What a terminal shows for ``text``: ``\\r`` goes back to the line's start, ``ESC[K``
    erases to its end, later characters overwrite earlier ones."""
    lines, line, col = [], [], 0
    for part in re.split(r"(\x1b\[K|\r|\n)", text):
        if part == "\n":
            lines.append("".join(line))
            line, col = [], 0
        elif part == "\r":
            col = 0
        elif part == "\x1b[K":
            del line[col:]
        else:
            for ch in part:
                if col < len(line):
                    line[col] = ch
                else:
                    line.append(ch)
                col += 1
    return [*lines, "".join(line)]


@pytest.mark.parametrize("command", ["diagnose", "bench", "solve"])
def test_the_progress_line_is_cleared_before_the_answer(command: str, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 27: the progress ticker of `bench folio` and `diagnose` was never cleared, so the
    results were glued onto it on a terminal (stdout and stderr on one screen). The work waits
    here until the ticker has drawn, so the line is on the screen when the answer comes."""
    import importlib

    screen = _Tty()
    monkeypatch.setattr(terminal, "PROGRESS_AFTER", 0.0)
    module, name, argv = {
        "diagnose": ("cda.diagnosis.diagnose", "diagnose", ["diagnose", str(tmp_path / "c.bench"), "--observations",
                                                               str(tmp_path / "c.obs")]),
        "bench": ("cda.cli.bench", "run_bench", ["bench", "folio", str(tmp_path / "f.jsonl")]),
        "solve": ("cda.api", "solve", ["solve", str(tmp_path / "a.cda"), str(tmp_path / "b.cda")]),
    }[command]
    (tmp_path / "c.bench").write_text("INPUT(a)\nOUTPUT(y)\ny = NOT(a)\n")
    (tmp_path / "c.obs").write_text("a=1 y=1\n")
    (tmp_path / "f.jsonl").write_text(json.dumps({"premises": ["All cats are pets.", "Tom is a cat."],
                                                  "premises-FOL": ["∀x (Cat(x) → Pet(x))", "Cat(tom)"],
                                                  "conclusion": "Tom is a pet.", "conclusion-FOL": "Pet(tom)",
                                                  "label": "True"}) + "\n", encoding="utf-8")
    (tmp_path / "a.cda").write_text(OK)
    (tmp_path / "b.cda").write_text(FAILS)
    target = importlib.import_module(module)
    real = getattr(target, name)

    def after_the_ticker(*args: object, **kwargs: object) -> object:
        wait_until(lambda: "cda: " in screen.getvalue(), "the progress line drawn")
        return real(*args, **kwargs)

    monkeypatch.setattr(target, name, after_the_ticker)
    main(argv, stdout=screen, stderr=screen)
    shown = _screen(screen.getvalue())
    assert not any("cda: " in line and len(line.split("cda: ")[0]) for line in shown), shown
    answer = [line for line in shown if line.strip()]
    assert answer and not any(line.startswith("cda: ") for line in answer), shown  # erased at the end


def test_the_shipped_examples_are_formatted() -> None:
    """Issue 27: all five shipped .cda examples failed `cda fmt --check`."""
    examples = sorted(str(p) for p in EXAMPLES.glob("*.cda"))
    assert len(examples) >= 5
    assert run("fmt", "--check", *examples) == (0, "", "")


def _clause_names(text: str) -> list[str]:
    from cda.api import ground

    problem = ground(text)
    return [c.name for c in problem.clauses] + [c.name for c in problem.soft] + [c.name for c in problem.claims]


def test_fmt_never_renames_a_clause() -> None:
    """Issue 27: `fmt` moved statements (one declaration per line, blank runs collapsed, a
    statement's lines joined), so `soft@20` became `soft@26`: an unnamed clause is named by its
    kind and line. Every example, and messy texts, keep every clause name and every line."""
    messy = ("hyp a,b,c   # three\nobservable o,p\n\n\n\nhard :o iff a or\n   b\nsoft weight 2: not a\n"
             "soft weight 1:\n  not b  # why\nobserve o\ngoal prove a or b\nexpect status sat\n")
    for text in [messy, *(p.read_text() for p in sorted(EXAMPLES.glob("*.cda")) if "ken" not in p.read_text())]:
        new = run("fmt", "-", stdin=text)[1]
        assert new and _clause_names(new) == _clause_names(text), new
    assert "soft@8" in _clause_names(messy) and "soft@9" in _clause_names(messy)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(problem_texts())
def test_fmt_keeps_every_statement_on_its_line_and_is_idempotent(text: str) -> None:
    from cda.cli.fmt import formatted
    from cda.encodings.parse import parse_problem

    new = formatted(text, "p.cda")
    assert [st.pos[0] for st in parse_problem(new).statements] == [st.pos[0] for st in parse_problem(text).statements]
    assert formatted(new, "p.cda") == new


def test_prove_takes_several_files_and_every_format(tmp_path: Path) -> None:
    """Issue 27: `cda prove` took one file and had no --format, so testing.md's route without
    pytest had no JUnit for `.fol` suites. One process answers every file; the worst exit code."""
    good = tmp_path / "good.fol"
    good.write_text("premise ∀x (Man(x) → Mortal(x))\npremise Man(socrates)\nclaim mortal: Mortal(socrates)\n")
    syllogism = str(EXAMPLES / "syllogism.fol")
    code, out, _ = run("prove", str(good), syllogism)
    assert code == 1 and out.startswith(f"== {good} ==\nmortal: Mortal(socrates)") and f"== {syllogism} ==" in out
    code, out, _ = run("prove", str(good), syllogism, "--format", "junit")
    suite = ET.fromstring(out).find("testsuite")
    assert code == 1 and suite is not None and (suite.get("tests"), suite.get("failures")) == ("4", "2")
    assert [c.get("name") for c in suite.iter("testcase")] == ["claim mortal", "claim c1", "claim c2", "claim c3"]
    code, out, _ = run("prove", str(good), "-", "--format", "jsonl", stdin=good.read_text())
    lines = [json.loads(line) for line in out.splitlines()]
    assert code == 0 and [line["exit_code"] for line in lines] == [0, 0]
    assert lines[0]["result"]["results"] == lines[1]["result"]["results"]
    code, out, _ = run("prove", str(good), syllogism, "--json")
    assert code == 1 and [f["exit_code"] for f in json.loads(out)["files"]] == [0, 1]
    code, out, _ = run("prove", str(good), "--json")  # one file: the object `cda prove --json` always printed
    assert code == 0 and set(json.loads(out)) == {"file", "results"}


@pytest.mark.parametrize("command", [["solve", str(EXAMPLES / "service_outage.cda")], ["check", str(EXAMPLES / "claim_check.cda")],
                                     ["prove", str(EXAMPLES / "syllogism.fol")]])
def test_json_with_another_format_is_refused(command: list[str]) -> None:
    """Issue 27: `--json --format junit` printed JUnit silently."""
    code, out, err = run(*command, "--json", "--format", "junit")
    assert code == 2 and "--json and --format junit" in err
    assert json.loads(out)["message"] == "--json and --format junit ask for two reports; give one"  # --json: one object
    assert run(*command, "--json", "--format", "json")[0] in (0, 1)


def test_a_reader_that_closes_the_pipe_early_ends_the_command_quietly(tmp_path: Path) -> None:
    """Issue 27: `cda policy analyze … | head -2` ended in a BrokenPipeError traceback. The
    reader here has gone before the command writes a byte."""
    import subprocess
    import sys

    read, write = os.pipe()
    os.close(read)
    try:
        proc = subprocess.run([sys.executable, "-m", "cda", "solve", str(EXAMPLES / "service_outage.cda")], stdout=write,
                              stderr=subprocess.PIPE, text=True, timeout=300, cwd=tmp_path)
    finally:
        os.close(write)
    assert proc.returncode == 141 and proc.stderr == "", proc.stderr
