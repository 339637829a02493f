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
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from cda.cli import terminal
from cda.cli.main import _parser, main
from tests.conftest import EXAMPLES

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


def test_version() -> None:
    code, out, _ = run("--version")
    assert code == 0 and re.fullmatch(r"cda \S+\n", out)


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
    assert f.read_text() == "# header\nhyp a  # two\nhyp b\n\nhard h: a and b\n# why\ngoal prove a\n"
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
        "fol { claim Q(b) }  # one line\nfol { claim R(c) # in\n}\nhard h2: a  # t\n")


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
    time.sleep(0.25)
    bar.close()
    shown = tty.getvalue()
    assert "cda: solving x.cda [1/3]" in shown and shown.endswith("\r\x1b[K")
    quiet = terminal.Progress(tty := _Tty(), "fast", after=5.0)
    quiet.close()
    assert tty.getvalue() == ""  # work shorter than the delay shows nothing
    pipe = io.StringIO()
    terminal.Progress(pipe, "x", after=0.0).close()
    assert pipe.getvalue() == ""
