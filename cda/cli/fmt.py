"""``cda fmt FILE...``: rewrite ``.cda`` files in the canonical layout of
:mod:`cda.encodings.format` (comments kept); ``--check`` only says which files are not formatted
(exit 1), for CI; ``-`` reads standard input and writes the formatted text to standard output.

A file is rewritten only when its formatted text reads back to the same statements (the same
canonical form): a printer bug can never change what a file means.

Exit codes: 0 formatted (or, with ``--check``, already formatted), 1 ``--check`` found files to
format, 2 bad input (the file is left as it was).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

from cda.encodings.format import format_problem, format_source
from cda.encodings.parse import parse_problem
from cda.errors import CDAError, DSLError
from cda.files import TEXT_MAX_BYTES, read_text
from cda.terminal_text import for_terminal

__all__ = ["formatted", "main_fmt"]


def formatted(text: str, filename: str) -> str:
    """The canonical text of ``text``; ``DSLError`` when it does not parse, ``CDAError`` when the
    printer's output would not read back to the same problem, or would move a statement to
    another line (an unnamed clause is named by its line: ``soft@20`` would be renamed)."""
    ast = parse_problem(text, filename)
    try:
        new = format_source(ast)
    except ValueError as exc:  # pragma: no cover - a layout the printer cannot keep
        raise CDAError(f"{filename}: cannot be formatted without moving a statement ({exc}); left unchanged") from None
    again = parse_problem(new, filename)
    if format_problem(again) != format_problem(ast):  # pragma: no cover - a printer bug
        raise CDAError(f"{filename}: the formatted text would not mean the same; left unchanged (please report)")
    if [st.pos[0] for st in again.statements] != [st.pos[0] for st in ast.statements]:  # pragma: no cover
        raise CDAError(f"{filename}: formatting would move a statement to another line and rename its clause; "
                       "left unchanged (please report)")
    return new


def main_fmt(names: Sequence[str], check: bool, out: TextIO, err: TextIO, stdin: TextIO, as_json: bool = False) -> int:
    """Format (or with ``check``, only inspect) each file; returns the exit code. ``as_json``: one
    object, ``{"exit_code", "files": [{"file", "formatted" (already in the canonical layout),
    "rewritten", "error"}]}`` (standard input's text is not printed then)."""
    code = 0
    report: list[dict[str, object]] = []
    for name in names:
        try:
            if name == "-":
                text, label = stdin.read(), "<stdin>"
            else:
                text, label = read_text(Path(name), limit=TEXT_MAX_BYTES), name
            new = formatted(text, label)
        except CDAError as exc:
            if isinstance(exc, DSLError) and exc.filename is None:
                exc.with_filename("<stdin>" if name == "-" else name)
            if not as_json:
                err.write(exc.render() + "\n")
            report.append({"file": name, "formatted": False, "rewritten": False, "error": exc.as_dict(name)})
            code = 2
            continue
        entry: dict[str, object] = {"file": name, "formatted": new == text, "rewritten": False, "error": None}
        if name == "-" and not check:
            if not as_json:
                out.write(new)
        elif new != text:
            if check:
                if not as_json:
                    out.write(for_terminal(f"{label}: not formatted\n"))
                code = max(code, 1)
            else:
                Path(name).write_text(new, encoding="utf-8")
                entry["rewritten"] = True
                if not as_json:
                    out.write(for_terminal(f"{label}: formatted\n"))
        report.append(entry)
    if as_json:
        out.write(json.dumps({"exit_code": code, "files": report}, ensure_ascii=False) + "\n")
    return code
