"""Where first-order claims come from: a ``.fol`` file, or the ``fol { … }`` blocks of a ``.cda``
file (docs/fol.md). Every door that proves claims reads them here."""

from __future__ import annotations

from pathlib import Path

from cda.errors import CDAError
from cda.files import read_text
from cda.fol.parse import parse_fol
from cda.fol.syntax import FOLProblem

__all__ = ["fol_blocks_of", "read_fol_file"]


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
