"""``cda solve``/``cda check`` over one or several files (``-`` is standard input), printed in
the format asked (:mod:`cda.cli.ci_report`). The CLI's ``main`` only dispatches here.

One process answers every file: the engine, the solvers and the grammar load once, which is what
makes one call over hundreds of files cheaper than a call per file (benchmarks/bench_suite.py).
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from cda.cli.ci_report import Case, Outcome, error_object, render_json, render_jsonl, render_junit, worst_exit_code
from cda.cli.terminal import paint, progress
from cda.errors import CDAError, DSLError
from cda.terminal_text import for_terminal

if TYPE_CHECKING:
    from cda.api import Source
    from cda.contracts.result import SolveResult

__all__ = ["STDIN", "check_options", "present_check", "present_solve", "read_source", "solve_cases", "solve_options"]

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
    if result.incomplete() is not None:
        return EXIT_UNKNOWN  # a budget's partial or an undecided claim (a solver's own unknown too): exit 3
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
        # an undecided claim is no failed check: JUnit's <error>, as the run's partial below
        cases.append(Case(name, failure=f"{str(v.status).upper()}", detail="\n".join(lines),
                          error=v.status == "unknown"))
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
        out, err = bar.guard(out), bar.guard(err)
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
                    out.write(f"== {for_terminal(name, keep='')} ==\n")
                out.write(for_terminal(outcome.text))  # names and strings of the input, escaped
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


def _format(args: Any) -> str:
    return str(args.format or ("json" if args.json else "text"))


def _outputs(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="print one JSON object (a mistake in the input too, on stdout)")
    p.add_argument("--format", choices=["text", "json", "jsonl", "junit"], default=None,
                   help="report: text (default), json (one object), jsonl (one line per file), junit (JUnit XML)")


def check_options(p: argparse.ArgumentParser, op: Any) -> dict[str, Any]:
    """``cda check``'s own options; its files: one or more, ``-`` for standard input."""
    _outputs(p)
    return {"many": ("path",), "metavars": {"path": "FILE", "ken": "FILE"}}


def solve_options(p: argparse.ArgumentParser, op: Any) -> dict[str, Any]:
    _outputs(p)
    return {"many": ("path",), "metavars": {"path": "FILE", "ken": "FILE"}}


def _call(op: Any, args: Any, env: Any, source: Source) -> Any:
    """The operation on one file (its text for standard input)."""
    from cda.cli.call import call_local
    from cda.cli.generate import params_of

    params = {k: v for k, v in params_of(op, args).items() if k != "path"}
    params.update({"dsl": source} if isinstance(source, str) else {"path": str(source)})  # standard input: its text
    return call_local(op, params, env)


def _env() -> Any:
    from cda.cli.call import LocalEnv

    return LocalEnv(ken_cache={})  # every file's Ken graphs read once


def present_solve(op: Any, args: Any, out: TextIO, err: TextIO, stdin: TextIO) -> int:
    """``cda solve FILE...``: each file solved with the same options; the exit code of the worst."""
    from cda.cli.main import render_table

    fmt, names, env = _format(args), list(args.path), _env()
    failed = _load_ken(op, args, env, fmt, out, err)
    if failed is not None:
        return failed

    def answer(source: Source, label: str) -> Outcome:
        result = _call(op, args, env, source)
        return Outcome(label, solve_exit_code(result), data=json.loads(result.json_text()),
                       text=render_table(result) if fmt == "text" else "", cases=solve_cases(result))

    if fmt == "json" and len(names) == 1:  # the result's own canonical JSON, byte for byte as before
        try:
            source, label = read_source(names[0], stdin)
            with progress(err, f"solving {label}") if not args.cross_check else _nothing():
                result = _call(op, args, env, source)
        except CDAError as exc:
            exc = _labelled(exc, "<stdin>" if names[0] == STDIN else names[0])
            return _emit([Outcome(names[0], EXIT_BAD_INPUT, error=error_object(exc, names[0]))], fmt, "cda solve",
                         out, err)
        out.write(result.json_text() + "\n")
        return solve_exit_code(result)
    return _run_files(names, fmt, "cda solve", answer, out, err, stdin)


def _load_ken(op: Any, args: Any, env: Any, fmt: str, out: TextIO, err: TextIO) -> int | None:
    """Read the ``--ken`` graphs once (into the command's cache) before the first file: a graph
    that cannot be read is one error naming it (exit 2), before anything is solved."""
    from cda.operations.base import ken_graph
    from cda.operations.gate import Call
    from cda.operations.principals import LOCAL_USER
    from cda.operations.registry import Door

    if not args.ken:
        return None
    call = Call(op, LOCAL_USER, Door.CLI, env, Path("."))
    for name in args.ken:
        try:
            ken_graph(call, [name])
        except CDAError as exc:
            if fmt == "text":
                err.write(exc.render() + "\n")
            else:
                out.write(json.dumps(error_object(exc, name), ensure_ascii=False) + "\n")
            return EXIT_BAD_INPUT
    return None


class _nothing:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


def present_check(op: Any, args: Any, out: TextIO, err: TextIO, stdin: TextIO) -> int:
    """``cda check FILE...``: parse and type-check each file; ``ok`` and its counts, or the mistake."""
    fmt, env = _format(args), _env()
    failed = _load_ken(op, args, env, fmt, out, err)
    if failed is not None:
        return failed

    def answer(source: Source, label: str) -> Outcome:
        report = _call(op, args, env, source)
        counts = report.model_dump()
        text = f"{label}: ok — " + ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in counts.items()) + "\n"
        return Outcome(label, EXIT_OK, data={"file": label, "ok": True, **counts}, text=text, cases=[Case("check")])

    return _run_files(list(args.path), fmt, "cda check", answer, out, err, stdin)
