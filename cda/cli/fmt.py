"""``cda fmt FILE...``: rewrite ``.cda`` files in the canonical layout of
:mod:`cda.encodings.format` (comments kept); ``--check`` only says which files are not formatted
(exit 1), for CI; ``-`` reads standard input and writes the formatted text to standard output.

A file is rewritten only when its formatted text reads back to the same statements (the same
canonical form): a printer bug can never change what a file means.

Exit codes: 0 formatted (or, with ``--check``, already formatted), 1 ``--check`` found files to
format, 2 bad input (the file is left as it was).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

from cda.encodings.format import format_problem, format_source
from cda.encodings.parse import parse_problem
from cda.errors import CDAError, DSLError
from cda.files import read_text

__all__ = ["formatted", "main_fmt"]


def formatted(text: str, filename: str) -> str:
    """The canonical text of ``text``; ``DSLError`` when it does not parse, ``CDAError`` when the
    printer's output would not read back to the same problem."""
    ast = parse_problem(text, filename)
    new = format_source(ast)
    if format_problem(parse_problem(new, filename)) != format_problem(ast):  # pragma: no cover - a printer bug
        raise CDAError(f"{filename}: the formatted text would not mean the same; left unchanged (please report)")
    return new


def main_fmt(names: Sequence[str], check: bool, out: TextIO, err: TextIO, stdin: TextIO) -> int:
    """Format (or with ``check``, only inspect) each file; returns the exit code."""
    code = 0
    for name in names:
        try:
            if name == "-":
                text, label = stdin.read(), "<stdin>"
            else:
                text, label = read_text(Path(name)), name
            new = formatted(text, label)
        except DSLError as exc:
            if exc.filename is None:
                exc.with_filename("<stdin>" if name == "-" else name)
            err.write(exc.render() + "\n")
            code = 2
            continue
        except CDAError as exc:
            err.write(exc.render() + "\n")
            code = 2
            continue
        if name == "-" and not check:
            out.write(new)
        elif new != text:
            if check:
                out.write(f"{label}: not formatted\n")
                code = max(code, 1)
            else:
                Path(name).write_text(new, encoding="utf-8")
                out.write(f"{label}: formatted\n")
    return code
