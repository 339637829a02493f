"""``cda prove FILE.fol…``: check first-order claims written in the ``.fol`` format.

The format (see docs/fol.md), one statement per line, ``#`` starts a comment::

    # cats and pets
    premise all_cats: ∀x (Cat(x) → Pet(x))
    premise Cat(tom)
    claim Pet(tom)

``premise [name:] formula`` and ``claim [name:] formula``; unnamed premises are ``p1, p2, …``
and an unnamed claim is ``claim`` (``c1, c2, …`` when there are several). An optional
``domain a, b, c`` line makes the domain exactly those distinct elements (then clingo can
decide the problem too). Every claim is checked against all the premises.

Exit codes: 0 every claim supported, 1 a claim refuted or inconclusive, 2 bad input,
3 a solver said unknown or time ran out; over several files, the worst of theirs (as
``cda solve``). ``--format text|json|jsonl|junit`` as for ``cda solve`` (docs/testing.md).
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

from cda.cli.ci_report import Case, Outcome, error_object, render_json, render_jsonl, render_junit, worst_exit_code
from cda.contracts.fol import ProofResult
from cda.errors import BudgetExceeded, CDAError
from cda.operations.fol import fol_blocks_of, read_fol_file
from cda.terminal_text import for_terminal

__all__ = ["fol_blocks_of", "read_fol_file", "render_results", "main_prove", "present_prove", "prove_options", "EXIT_OK", "EXIT_NOT_SUPPORTED", "EXIT_BAD_INPUT", "EXIT_UNKNOWN"]

EXIT_OK, EXIT_NOT_SUPPORTED, EXIT_BAD_INPUT, EXIT_UNKNOWN = 0, 1, 2, 3


def render_results(results: list[ProofResult]) -> str:
    """The human-readable report: one block per claim."""
    return "\n\n".join(r.text() for r in results) + "\n"


def exit_code(results: list[ProofResult]) -> int:
    if any(r.unknown for r in results):
        return EXIT_UNKNOWN
    if any(r.status != "supported" for r in results):
        return EXIT_NOT_SUPPORTED
    return EXIT_OK


def _cases(results: list[ProofResult]) -> list[Case]:
    """One JUnit case per claim (named ``claim NAME``, as the pytest plugin names its items)."""
    cases = []
    for r in results:
        failed = None if r.status == "supported" and not r.unknown else r.status.upper()
        cases.append(Case(f"claim {r.claim_name}", failure=failed, detail=r.text(), error=r.unknown))
    return cases


def prove_options(p: Any, op: Any) -> dict[str, Any]:
    """``cda prove``'s own options: ``--json`` and ``--format``; its files: one or more, ``-`` for
    standard input."""
    from cda.cli.ci import _outputs

    _outputs(p)
    return {"many": ("path",), "metavars": {"path": "FILE"}}


def present_prove(op: Any, args: Any, out: TextIO, err: TextIO, inp: TextIO | None = None) -> int:
    from cda.cli.generate import params_of

    calls = [params_of(op, args, path=str(name)) for name in args.path]
    return _prove_files(calls, args.format or ("json" if args.json else "text"), out, err)


def main_prove(
    paths: Path | str | Sequence[Path | str],
    as_json: bool = False,
    out: TextIO | None = None,
    *,
    err: TextIO | None = None,
    timeout: float | None = 10.0,
    backend: str = "auto",
    cross_check: bool = False,
    unique_names: bool = False,
    fmt: str | None = None,
) -> int:
    """Prove every claim of each ``.fol`` file (or ``.cda`` file with ``fol`` blocks; ``-`` is
    standard input) in one process and print the answers: ``fmt`` ``text`` (one block per claim,
    a header per file when there are several), ``json`` (one file: ``{"file", "results"}``;
    several: ``{"exit_code", "files"}``), ``jsonl`` (one line per file) or ``junit`` (one test
    case per claim); ``as_json`` is ``fmt="json"``. Returns the worst file's exit code; input
    mistakes print like a compiler (``file:line:col: syntax error: …`` and a caret), never a
    traceback."""
    names = [paths] if isinstance(paths, str | Path) else list(paths)
    calls = [{"path": str(name), "timeout": timeout, "backend": backend, "cross_check": cross_check,
              "unique_names": unique_names} for name in names]
    return _prove_files(calls, fmt or ("json" if as_json else "text"), out or sys.stdout, err or sys.stderr)


def _prove_files(calls: list[dict[str, Any]], fmt: str, stream: TextIO, errors: TextIO) -> int:
    """Each call of the ``prove`` operation (one file each), reported in ``fmt``."""
    from cda.cli.call import call_local

    outcomes: list[Outcome] = []
    for params in calls:
        name = params["path"]
        start = time.perf_counter()
        try:
            results = call_local("prove", params).results
        except CDAError as exc:
            if fmt == "text":
                print(exc.render(), file=errors)
            code = EXIT_UNKNOWN if isinstance(exc, BudgetExceeded) else EXIT_BAD_INPUT  # reading ran out of time
            outcome = Outcome(name, code, error=error_object(exc, name),
                              cases=[Case("prove", failure=str(exc.args[0]).split("\n")[0], detail=exc.render(), error=True)])
        else:
            data = {"file": name, "results": [r.model_dump() for r in results]}
            outcome = Outcome(name, exit_code(results), data=data, text=render_results(results), cases=_cases(results))
        outcome.seconds = time.perf_counter() - start
        outcomes.append(outcome)
        if fmt == "text" and outcome.error is None:
            if len(calls) > 1:
                stream.write(f"== {for_terminal(name, keep='')} ==\n")
            stream.write(for_terminal(outcome.text))  # claims and names of the input, escaped
        elif fmt == "jsonl":
            stream.write(render_jsonl([outcome]))
            stream.flush()
    if fmt == "json":
        if len(outcomes) == 1:  # one file: its object, as `cda prove --json` always printed it
            only = outcomes[0]
            stream.write(json.dumps(only.error if only.error is not None else only.data, ensure_ascii=False, indent=2) + "\n")
        else:
            stream.write(render_json(outcomes))
    elif fmt == "junit":
        stream.write(render_junit(outcomes, "cda prove"))
    return worst_exit_code([o.code for o in outcomes])
