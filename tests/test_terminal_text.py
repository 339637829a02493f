"""Audit 2, findings 5 and 6: text from inputs reaches neither a terminal nor a JUnit report raw.

The one function (:func:`cda.terminal_text.for_terminal`) is held to its promise for any text
(hypothesis), then every renderer that builds human-facing lines from user text is held to it
for any text, then each finding is replayed through a real door: ``cda solve`` and ``cda prove``
in a child process, ``cda jobs run`` on a real pseudo-terminal, ``cda investigate history`` after
a note from a remote ToolBus caller of a real ``cda serve``, and the JUnit reports parsed by
``xml.etree``.
"""

from __future__ import annotations

import json
import os
import pty
import select
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from types import SimpleNamespace

from hypothesis import given, settings
from hypothesis import strategies as st

from cda.cli.ci_report import Case, Outcome, render_junit
from cda.cli.investigate import render_history, render_status
from cda.errors import CDAError, DSLSyntaxError
from cda.terminal_text import UNSAFE, for_terminal
from tests.cli_run import cda_here
from tests.conftest import ROOT
from tests.service_harness import call, serving

HOSTILE = "ok\x1b]0;PWNED\x07\x1b[2J\x1b[31mRED\r\x9b2J\u202eevil\u2066\x00\x7f"
# text that mixes the unsafe characters with ordinary ones, tabs and newlines
texts = st.text(alphabet=st.one_of(st.sampled_from(sorted(UNSAFE)), st.characters(), st.sampled_from("\t\n ab^")))
LAYOUT = frozenset("\n\t")


def _unsafe(text: str, allowed: frozenset[str] = LAYOUT) -> set[str]:
    return {c for c in text if c in UNSAFE and c not in allowed}


def _cda(*args: str, cwd: Path, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "cda", *args], capture_output=True, text=True, cwd=cwd, timeout=300,
                          input=stdin, env={**os.environ, "PYTHONPATH": str(ROOT)}, errors="surrogateescape")


# ---- the function ------------------------------------------------------------------------------


@given(texts)
def test_for_terminal_leaves_no_control_but_the_kept_layout(text: str) -> None:
    assert not _unsafe(for_terminal(text))
    assert not _unsafe(for_terminal(text, keep=""), frozenset())
    assert for_terminal(text, keep="").count("\n") == 0
    safe = "".join(c for c in text if c not in UNSAFE)
    assert for_terminal(safe) == safe  # ordinary text is left alone


@given(texts, st.integers(min_value=0, max_value=50))
def test_the_escape_of_a_prefix_is_a_prefix_of_the_escape(text: str, at: int) -> None:
    """What lets a caret be put under the same character of an escaped line."""
    assert for_terminal(text).startswith(for_terminal(text[:at]))
    assert for_terminal(text[:at]) + for_terminal(text[at:]) == for_terminal(text)


def test_for_terminal_shows_what_it_escaped() -> None:
    assert for_terminal(HOSTILE) == ("ok\\x1b]0;PWNED\\x07\\x1b[2J\\x1b[31mRED\\x0d\\x9b2J\\u202eevil\\u2066"
                                     "\\x00\\x7f")


# ---- every renderer, for any text ------------------------------------------------------------


@settings(max_examples=200)
@given(texts, texts, texts, st.integers(min_value=1, max_value=60))
def test_an_error_renders_no_control_and_its_caret_stays_under_the_spot(
        message: str, source: str, filename: str, column: int) -> None:
    error = DSLSyntaxError(message, line=3, column=column, source_line=source, filename=filename)
    text = error.render()
    assert not _unsafe(text)
    lines = text.split("\n")
    assert len(lines) == len(for_terminal(f"{filename}:3:{column}: syntax error: {message}").split("\n")) + 2
    shown, caret = lines[-2].removeprefix("    "), lines[-1].removeprefix("    ")
    assert caret.endswith("^") and set(caret[:-1]) <= {" ", "\t"}
    at = len(caret) - 1  # the caret's index: each character of the lead stands for one of the shown line
    assert [c == "\t" for c in caret[:-1]] == [c == "\t" for c in shown[:at]]
    spot = source.rstrip("\n")[column - 1:column]
    if spot and "…" not in shown[:at]:  # (a line clipped around the spot starts with …)
        assert shown[at:].startswith(for_terminal(spot, keep="\t"))
    assert not _unsafe(CDAError(message).render())


def _history(note: str, reason: str, author: str, observation: str) -> SimpleNamespace:
    step = SimpleNamespace(step=1, kind="observe", revision=None, observation=observation, undoes=None, author=author,
                           reason=reason, trace={"execute": {"selected": "h1", "next_probe": observation}})
    return SimpleNamespace(steps=[step], notes=[SimpleNamespace(step=1, author=author, text=note)])


@given(texts, texts, texts, texts)
def test_history_and_status_render_no_control_and_no_extra_line(note: str, reason: str, author: str,
                                                                  said: str) -> None:
    text = render_history(_history(note, reason, author, said))
    assert not _unsafe(text) and text.count("\n") == (3 if reason else 2)  # the step, its reason, its note
    hyp = SimpleNamespace(id=said, statement=said, confidence=0.5, evidence_for=[said], evidence_against=[note],
                          falsifiers=[said], falsifiers_note=note)
    memory = SimpleNamespace(session_id=author, task_id=note, step=1, closed=False, author=author, observations=[said],
                             change=None, conflict=None, focus_subsystem=said, focus_reason=reason,
                             hypotheses_total=1, candidate_hypotheses=[hyp], selected_hypothesis_id=said,
                             global_invariants=[note], selected_hypothesis_reason=reason, next_probe=said)
    text = render_status(memory)
    assert not _unsafe(text) and text.count("\n") == 11


@settings(max_examples=200)
@given(texts, texts, texts, texts, texts)
def test_a_junit_report_parses_for_any_text(file: str, name: str, failure: str, detail: str, suite: str) -> None:
    outcomes = [Outcome(file, 1, cases=[Case(name, failure=failure, detail=detail), Case(name)]),
                Outcome(name, 2, cases=[Case("solve", failure=failure, error=True)])]
    root = ET.fromstring(render_junit(outcomes, suite).encode("utf-8"))
    cases = list(root.iter("testcase"))
    assert [c.get("classname") for c in cases] == [for_terminal(file, keep=""), for_terminal(file, keep=""),
                                                   for_terminal(name, keep="")]
    failed = cases[0].find("failure")
    assert failed is not None and failed.get("message") == for_terminal(failure, keep="")
    # the body keeps the text's lines (an XML parser reads a CR as a newline: it is escaped)
    assert (failed.text or "") == for_terminal(detail or failure)
    assert root.find("testsuite").get("name") == for_terminal(suite, keep="")  # type: ignore[union-attr]


# ---- through the doors ----------------------------------------------------------------------


def test_a_syntax_error_quotes_the_line_escaped_and_the_caret_under_the_spot(tmp_path: Path) -> None:
    (tmp_path / "esc.cda").write_bytes(b'hyp a\nhard:\ta and "\x1b]0;PWNED\x07\x1b[2J" \xe2\x80\xae\n')
    run = _cda("solve", "esc.cda", cwd=tmp_path)
    assert run.returncode == 2 and run.stdout == ""
    assert not _unsafe(run.stderr), run.stderr
    lines = run.stderr.split("\n")
    assert lines[0].startswith("esc.cda:2:13: syntax error: unexpected '\"\\x1b]0;PWNED\\x07\\x1b[2J\"'")
    assert lines[1] == '    hard:\ta and "\\x1b]0;PWNED\\x07\\x1b[2J" \\u202e'
    assert lines[2] == "    " + " " * 5 + "\t" + " " * 6 + "^"  # under the opening quote, the tab kept
    run = cda_here("solve", "esc.cda", "--json", cwd=tmp_path)  # JSON stays JSON: the message as it was
    assert json.loads(run.stdout)["message"].startswith("unexpected '\"\x1b]0;PWNED\x07")


def test_junit_reports_of_solve_and_prove_parse_with_a_control_in_a_file_or_its_name(tmp_path: Path) -> None:
    (tmp_path / "bad.cda").write_bytes(b"hyp a\nhard: a and \x01\n")
    (tmp_path / "ok\x1b[2J.cda").write_text("hyp a\nhard: a\ngoal prove a\n", encoding="utf-8")
    (tmp_path / "claim.cda").write_text("hyp a, b\nhard: a\ngoal prove b\n", encoding="utf-8")
    run = _cda("solve", "bad.cda", "ok\x1b[2J.cda", "claim.cda", "--format", "junit", cwd=tmp_path)
    assert run.returncode == 2
    cases = list(ET.fromstring(run.stdout.encode("utf-8")).iter("testcase"))
    assert [c.get("classname") for c in cases] == ["bad.cda", "ok\\x1b[2J.cda", "claim.cda"]
    error = cases[0].find("error")
    assert error is not None and "\\x01" in (error.text or "") and "\\x01" in error.get("message", "")
    assert cases[2].find("failure") is not None
    (tmp_path / "bad.fol").write_bytes("premise p1: ∀x (Man(x) → Mortal(x))\npremise Man(socrates)\n"
                                       "claim c: Mortal(socrates) \x01\n".encode())
    (tmp_path / "good.fol").write_text("premise Man(socrates)\nclaim c\x1b[2J: Man(socrates)\n", encoding="utf-8")
    run = _cda("prove", "bad.fol", "good.fol", "--format", "junit", cwd=tmp_path)
    assert run.returncode == 2
    cases = list(ET.fromstring(run.stdout.encode("utf-8")).iter("testcase"))
    assert [c.get("classname") for c in cases] == ["bad.fol", "good.fol"]
    assert "\\x01" in (cases[0].find("error").text or "")  # type: ignore[union-attr]
    assert not _unsafe(run.stdout)
    text = cda_here("prove", "bad.fol", "good.fol", cwd=tmp_path)  # the text report: escaped too
    assert not _unsafe(text.stdout + text.stderr) and "\\x01" in text.stderr


def _on_a_terminal(argv: list[str], cwd: Path) -> tuple[int, str]:
    """Run ``argv`` with stdout and stderr on a new pseudo-terminal; its exit code and every byte it wrote."""
    master, slave = pty.openpty()
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=slave, stderr=slave, cwd=cwd,
                            env={**os.environ, "PYTHONPATH": str(ROOT), "NO_COLOR": "1"})
    os.close(slave)
    got = bytearray()
    try:
        while True:
            ready, _, _ = select.select([master], [], [], 300)
            if not ready:
                raise AssertionError(f"no output for 300 s: {bytes(got)!r}")
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: every end of the terminal's other side is closed
                break
            if not chunk:
                break
            got += chunk
    finally:
        os.close(master)
        code = proc.wait(timeout=300)
    return code, got.decode("utf-8", "replace")


def test_a_job_name_reaches_the_progress_bar_escaped(tmp_path: Path) -> None:
    (tmp_path / "claim.cda").write_text("hyp a, b\nhard: a\ngoal prove a\n", encoding="utf-8")
    (tmp_path / "m.toml").write_text('[[job]]\nname = "a\\u001b]0;PWNED\\u0007\\u001b[2J\\u202eRED"\nkind = "check"\n'
                                     'file = "claim.cda"\n', encoding="utf-8")
    code, shown = _on_a_terminal([sys.executable, "-m", "cda", "jobs", "run", "m.toml", "--workers", "1"], tmp_path)
    assert code == 0, shown
    assert "a\\x1b]0;PWNED\\x07\\x1b[2J\\u202eRED" in shown  # the name, as the bar showed it
    assert "\x1b" not in shown and "\x07" not in shown and "\u202e" not in shown
    assert not set(shown) & (UNSAFE - {"\r", "\n"})  # the bar's own \r and the lines' ends only


def test_history_shows_a_remote_callers_note_and_reason_escaped(tmp_path: Path) -> None:
    problem = (ROOT / "examples" / "outage_first_symptom.cda").read_text(encoding="utf-8")
    with serving(tmp_path / "receipts.sqlite") as server:
        from websockets.sync.client import connect

        with connect(f"ws://{server.host}:{server.port}/toolbus", open_timeout=10) as ws:
            session = call(ws, "investigate.start", {"dsl": problem})["result"]["session_id"]
            noted = call(ws, "investigate.note", {"session_id": session, "step": 0, "text": "fine" + HOSTILE + "\n 9 fake"})
            assert "result" in noted, noted
    sessions = tmp_path / "receipts.sqlite.investigations.sqlite"
    assert sessions.exists(), sorted(p.name for p in tmp_path.iterdir())
    observed = cda_here("investigate", "observe", session, "not slow(cache)", "--reason", "r\x1b[31mRED\u202e",
                    "--db", str(sessions), "--as", "bob", cwd=tmp_path)
    assert observed.returncode == 0, observed.stderr
    assert not _unsafe(observed.stdout)
    run = _cda("investigate", "history", session, "--db", str(sessions), cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert not _unsafe(run.stdout), run.stdout
    assert "note [" in run.stdout and "fine" + for_terminal(HOSTILE + "\n 9 fake", keep="") in run.stdout
    assert "why: r\\x1b[31mRED\\u202e" in run.stdout and "[bob]" in run.stdout
    assert len(run.stdout.splitlines()) == 4  # start, its note, the observation and its reason: no faked line
    raw = json.loads(cda_here("investigate", "history", session, "--db", str(sessions), "--json", cwd=tmp_path).stdout)
    assert raw["notes"][0]["text"] == "fine" + HOSTILE + "\n 9 fake"  # stored as written; JSON keeps it exact


def test_other_text_reports_show_input_text_escaped(tmp_path: Path) -> None:
    """fmt's file labels, argparse's usage errors, the conductor's tree quoting a request, and a
    missing file's name: each printed with its controls escaped, and the exit codes unchanged."""
    name = "f\x1b]0;PWNED\x07.cda"
    (tmp_path / name).write_text("hyp a\n\n\nhard:    a\n", encoding="utf-8")
    runs = {"fmt": (_cda("fmt", "--check", name, cwd=tmp_path), 1),
            "usage": (cda_here("solve", name, "--format", "x\x1b[2J", cwd=tmp_path), 2),  # main's words in process
            "missing": (cda_here("solve", "gone\x1b[2J.cda", cwd=tmp_path), 2),
            "conduct": (_cda("conduct", "why is x\x1b[2J\u202e slow", "--db", "c.sqlite", cwd=tmp_path), 1)}
    for what, (run, code) in runs.items():
        assert run.returncode == code, (what, run.returncode, run.stderr)
        assert not _unsafe(run.stdout + run.stderr), (what, run.stdout + run.stderr)
        assert "\\x1b" in run.stdout + run.stderr, what
    assert runs["fmt"][0].stdout == "f\\x1b]0;PWNED\\x07.cda: not formatted\n"
    assert "why is x\\x1b[2J\\u202e slow" in runs["conduct"][0].stdout
