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
from typing import TextIO

from cda.contracts.fol import ProofResult
from cda.errors import CDAError
from cda.files import read_text
from cda.fol.parse import parse_fol
from cda.fol.prove import prove_all
from cda.fol.syntax import FOLProblem

__all__ = ["read_fol_file", "render_results", "main_prove", "EXIT_OK", "EXIT_NOT_SUPPORTED", "EXIT_BAD_INPUT", "EXIT_UNKNOWN"]

EXIT_OK, EXIT_NOT_SUPPORTED, EXIT_BAD_INPUT, EXIT_UNKNOWN = 0, 1, 2, 3


def read_fol_file(path: Path | str) -> FOLProblem:
    """Read and check a ``.fol`` file, or the ``fol { … }`` blocks of a ``.cda`` file; raises
    ``DSLSyntaxError``/``DSLTypeError`` (with the file name, line, column and a caret) or
    ``CDAError`` when the file cannot be read."""
    path = Path(path)
    text = read_text(path)
    if path.suffix == ".cda":
        text = fol_blocks_of(text, str(path))
    return parse_fol(text, filename=str(path))


def fol_blocks_of(text: str, filename: str) -> str:
    r"""The ``fol`` blocks of a ``.cda`` text, everything else blanked out (newlines kept), so
    the first-order parser reports lines and columns of the original file.

    >>> fol_blocks_of("hyp a\nfol { premise P(a)\n claim P(a) }\n", "x.cda").split("\n")
    ['     ', '      premise P(a)', ' claim P(a)  ', '']
    """
    from cda.encodings.ast import FolBlock  # the DSL's reader, only for a .cda file (not at start-up)
    from cda.encodings.parse import parse_problem

    blocks = [st for st in parse_problem(text, filename).statements if isinstance(st, FolBlock)]
    if not blocks:
        raise CDAError(f"{filename}: no fol {{ … }} block to prove (see docs/fol.md)")
    keep = [False] * len(text)
    starts = _line_starts(text)
    for block in blocks:
        start = starts[block.pos[0] - 1] + block.pos[1] - 1
        body_start = text.index("{", start) + 1
        body_end = start + len(block.text) - 1  # the closing brace
        for i in range(body_start, body_end):
            keep[i] = True
    return "".join(c if keep[i] or c == "\n" else " " for i, c in enumerate(text))


def _line_starts(text: str) -> list[int]:
    starts = [0]
    for i, c in enumerate(text):
        if c == "\n":
            starts.append(i + 1)
    return starts


def render_results(results: list[ProofResult]) -> str:
    """The human-readable report: one block per claim."""
    return "\n\n".join(r.text() for r in results) + "\n"


def exit_code(results: list[ProofResult]) -> int:
    if any(r.unknown for r in results):
        return EXIT_UNKNOWN
    if any(r.status != "supported" for r in results):
        return EXIT_NOT_SUPPORTED
    return EXIT_OK


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
    stream, errors = out or sys.stdout, err or sys.stderr
    try:
        problem = read_fol_file(path)
        if not problem.claims:
            raise CDAError(f"{path}: no claim to prove (add a line 'claim φ')")
        results = prove_all(problem, timeout, backend=backend, cross_check=cross_check, unique_names=unique_names)
    except CDAError as exc:
        if as_json:  # a mistake is a JSON object on stdout, as `cda solve --json` prints it
            from cda.cli.ci_report import error_object

            stream.write(json.dumps(error_object(exc, str(path)), ensure_ascii=False, indent=2) + "\n")
        else:
            print(exc.render(), file=errors)
        return EXIT_BAD_INPUT
    if as_json:
        data = {"file": str(path), "results": [r.model_dump() for r in results]}
        stream.write(json.dumps(data, ensure_ascii=False, indent=2) + "\n")
    else:
        stream.write(render_results(results))
    return exit_code(results)
