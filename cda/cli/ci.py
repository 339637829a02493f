"""``cda solve``/``cda check`` over one or several files (``-`` is standard input), printed in
the format asked (:mod:`cda.cli.ci_report`). The CLI's ``main`` only dispatches here.

One process answers every file: the engine, the solvers and the grammar load once, which is what
makes one call over hundreds of files cheaper than a call per file (benchmarks/bench_suite.py).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from cda.cli.ci_report import Case, Outcome, error_object, render_json, render_jsonl, render_junit, worst_exit_code
from cda.cli.terminal import paint, progress
from cda.errors import CDAError, DSLError

if TYPE_CHECKING:
    from cda.api import Source
    from cda.contracts.result import SolveResult
    from cda.ken.graph import KenGraph

__all__ = ["STDIN", "main_solve_files", "main_check_files", "solve_cases", "read_source"]

STDIN = "-"
EXIT_OK, EXIT_GOAL_FAILED, EXIT_BAD_INPUT, EXIT_UNKNOWN = 0, 1, 2, 3


def read_source(name: str, stdin: TextIO) -> tuple[Source, str]:
    """What to hand the API for ``name`` (the text of standard input for ``-``), and its label."""
    if name == STDIN:
        return stdin.read(), "<stdin>"
    path = Path(name)
    if not path.exists():
        raise CDAError(f"{name}: no such file")
    return path, name


def _labelled(exc: CDAError, label: str) -> CDAError:
    if isinstance(exc, DSLError) and exc.filename is None:
        exc.with_filename(label)
    return exc


def solve_exit_code(result: SolveResult) -> int:
    if result.status == "unknown" or result.partial:
        return EXIT_UNKNOWN
    if any(v.status != "supported" for v in result.verdicts):
        return EXIT_GOAL_FAILED
    if any(not e.passed for e in result.expectations):
        return EXIT_GOAL_FAILED
    return EXIT_OK


def solve_cases(result: SolveResult) -> list[Case]:
    """The JUnit cases of a solved file: one per goal, one per ``expect``, and one for the
    solve itself when it has neither or when it ran out of budget."""
    cases: list[Case] = []
    for v in result.verdicts:
        name = f"{v.goal} {v.claim}"
        if v.status == "supported":
            cases.append(Case(name))
            continue
        lines = [f"{v.goal} {v.claim}: {str(v.status).upper()}"]
        if v.justification:
            lines.append(f"because of: {', '.join(v.justification)}")
        lines += [f"{'holds' if w.holds else 'fails'} under: {', '.join(w.assumed) or '(nothing assumed)'}"
                  for w in v.witnesses]
        if v.reason:
            lines.append(v.reason)
        cases.append(Case(name, failure=f"{str(v.status).upper()}", detail="\n".join(lines)))
    for e in result.expectations:  # named as the pytest plugin names the item
        label = f"expect {e.text}" if e.name.startswith("expect@") else f"expect {e.name}"
        cases.append(Case(label, failure=None if e.passed else e.reason, detail=e.reason))
    incomplete = result.status == "unknown" or result.partial
    if not cases or incomplete:
        why = "; ".join(result.notes) or f"status {result.status}"
        cases.append(Case("solve", failure=why if incomplete else None, error=incomplete))
    return cases


def _emit(outcomes: list[Outcome], fmt: str, suite: str, out: TextIO, err: TextIO) -> int:
    if fmt == "json":
        out.write(render_json(outcomes))
    elif fmt == "jsonl":
        pass  # written as each file finished
    elif fmt == "junit":
        out.write(render_junit(outcomes, suite))
    elif len(outcomes) > 1:
        bad = [o for o in outcomes if o.code != EXIT_OK]
        summary = f"{len(outcomes)} files: {len(outcomes) - len(bad)} ok, {len(bad)} not ok"
        err.write(paint(summary, "red" if bad else "green", err) + "\n")
    return worst_exit_code([o.code for o in outcomes])


def _run_files(
    names: Sequence[str],
    fmt: str,
    suite: str,
    answer: Callable[[Source, str], Outcome],
    out: TextIO,
    err: TextIO,
    stdin: TextIO,
) -> int:
    if list(names).count(STDIN) > 1:
        err.write(CDAError("'-' (standard input) can be given once").render() + "\n")
        return EXIT_BAD_INPUT
    outcomes: list[Outcome] = []
    with progress(err, suite, len(names) if len(names) > 1 else None) as bar:
        for name in names:
            bar.step(f"{suite} {name}")
            start = time.perf_counter()
            try:
                source, label = read_source(name, stdin)
                outcome = answer(source, label)
            except CDAError as exc:
                exc = _labelled(exc, "<stdin>" if name == STDIN else name)
                outcome = Outcome(name, EXIT_BAD_INPUT, error=error_object(exc, name),
                                  cases=[Case(suite.split()[-1], failure=str(exc.args[0]).split("\n")[0],
                                              detail=exc.render(), error=True)])
                if fmt == "text":
                    err.write(_paint_error(exc.render(), err) + "\n")
            outcome.seconds = time.perf_counter() - start
            outcomes.append(outcome)
            if fmt == "text" and outcome.error is None:
                if len(names) > 1 and suite == "cda solve":  # check's line names its file already
                    out.write(f"== {name} ==\n")
                out.write(outcome.text)
            elif fmt == "jsonl":
                out.write(render_jsonl([outcome]))
                out.flush()
    return _emit(outcomes, fmt, suite, out, err)


def _paint_error(text: str, err: TextIO) -> str:
    """The error prefix (``error:``, ``syntax error:``…) in red on a colour terminal."""
    for kind in ("unit error:", "type error:", "syntax error:", "error:"):
        if kind in text:
            return text.replace(kind, paint(kind, "red", err), 1)
    return text


def main_solve_files(
    names: Sequence[str],
    fmt: str,
    options: dict[str, Any],
    cross_check: bool,
    ken: KenGraph | None,
    out: TextIO,
    err: TextIO,
    stdin: TextIO,
) -> int:
    """``cda solve FILE...``: each file solved with the same options; the exit code of the worst."""
    from cda.api import solve, solve_cross_checked
    from cda.cli.main import render_table

    def answer(source: Source, label: str) -> Outcome:
        if cross_check:
            result = solve_cross_checked(source, ken=ken, **{k: v for k, v in options.items() if k != "backend"})
        else:
            result = solve(source, ken=ken, **options)
        return Outcome(label, solve_exit_code(result), data=json.loads(result.json_text()),
                       text=render_table(result) if fmt == "text" else "", cases=solve_cases(result))

    if fmt == "json" and len(names) == 1:  # the result's own canonical JSON, byte for byte as before
        outcomes: list[Outcome] = []
        try:
            source, label = read_source(names[0], stdin)
            if cross_check:
                result = solve_cross_checked(source, ken=ken, **{k: v for k, v in options.items() if k != "backend"})
            else:
                with progress(err, f"solving {label}"):
                    result = solve(source, ken=ken, **options)
        except CDAError as exc:
            exc = _labelled(exc, "<stdin>" if names[0] == STDIN else names[0])
            outcomes.append(Outcome(names[0], EXIT_BAD_INPUT, error=error_object(exc, names[0])))
            return _emit(outcomes, fmt, "cda solve", out, err)
        out.write(result.json_text() + "\n")
        return solve_exit_code(result)
    return _run_files(names, fmt, "cda solve", answer, out, err, stdin)


def main_check_files(
    names: Sequence[str], fmt: str, ken: KenGraph | None, out: TextIO, err: TextIO, stdin: TextIO
) -> int:
    """``cda check FILE...``: parse and type-check each file; ``ok`` and its counts, or the mistake."""
    from cda.api import check

    def answer(source: Source, label: str) -> Outcome:
        report = check(source, ken=ken)
        counts = report.model_dump()
        text = f"{label}: ok — " + ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in counts.items()) + "\n"
        return Outcome(label, EXIT_OK, data={"file": label, "ok": True, **counts}, text=text, cases=[Case("check")])

    return _run_files(names, fmt, "cda check", answer, out, err, stdin)
