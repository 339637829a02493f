"""``cda prove FILE.fol``: check first-order claims written in the ``.fol`` format.

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
3 a solver said unknown or time ran out.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, TextIO

from cda.contracts.fol import ProofResult
from cda.errors import CDAError
from cda.operations.fol import fol_blocks_of, read_fol_file

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


def prove_options(p: Any, op: Any) -> dict[str, Any]:
    """``cda prove``'s own option: ``--json``."""
    p.add_argument("--json", action="store_true", help="print one JSON object")
    return {"metavars": {"path": "FILE"}}


def present_prove(op: Any, args: Any, out: TextIO, err: TextIO, inp: TextIO | None = None) -> int:
    from cda.cli.generate import params_of

    return _prove(params_of(op, args), str(args.path), args.json, out, err)


def main_prove(
    path: Path | str,
    as_json: bool = False,
    out: TextIO | None = None,
    *,
    err: TextIO | None = None,
    timeout: float | None = 10.0,
    backend: str = "auto",
    cross_check: bool = False,
    unique_names: bool = False,
) -> int:
    """Prove every claim of a ``.fol`` file and print the answers (``--json``: one object with
    ``file`` and ``results``; ``unique_names``: the unique-names reading). Returns the exit code; input mistakes print like a compiler
    (``file:line:col: syntax error: …`` and a caret), never a traceback."""
    params = {"path": str(path), "timeout": timeout, "backend": backend, "cross_check": cross_check,
              "unique_names": unique_names}
    return _prove(params, str(path), as_json, out or sys.stdout, err or sys.stderr)


def _prove(params: dict[str, Any], path: str, as_json: bool, stream: TextIO, errors: TextIO) -> int:
    from cda.cli.call import call_local

    try:
        results = call_local("prove", params).results
    except CDAError as exc:
        if as_json:  # a mistake is a JSON object on stdout, as `cda solve --json` prints it
            from cda.cli.ci_report import error_object

            stream.write(json.dumps(error_object(exc, path), ensure_ascii=False, indent=2) + "\n")
        else:
            print(exc.render(), file=errors)
        return EXIT_BAD_INPUT
    if as_json:
        data = {"file": path, "results": [r.model_dump() for r in results]}
        stream.write(json.dumps(data, ensure_ascii=False, indent=2) + "\n")
    else:
        stream.write(render_results(results))
    return exit_code(results)
