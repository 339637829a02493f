"""``cda receipts verify DB [--head HASH] [--json]``: check that a receipt log was not tampered with.

Re-walks the hash chain of the log (see :mod:`cda.actions.receipts`) and prints what it found.
``--head`` is an anchor recorded earlier (an Action's receipts head): the log must still
contain that entry, which is how a truncated tail is caught.

Exit codes: 0 the log is intact (prints the entry count and the head), 1 it was tampered with
(prints each problem), 2 bad input (no such file, not a receipt log, a malformed ``--head``),
with a one-line message and never a traceback.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import TextIO

from cda.actions.receipts import VerifyReport, verify
from cda.errors import CDAError

__all__ = ["main_receipts_verify", "render_report", "EXIT_INTACT", "EXIT_TAMPERED", "EXIT_BAD_INPUT"]

EXIT_INTACT, EXIT_TAMPERED, EXIT_BAD_INPUT = 0, 1, 2

_HASH = re.compile(r"[0-9a-f]{64}")


def render_report(db: Path | str, report: VerifyReport) -> str:
    """The human-readable verdict: one line when intact, then one indented line per problem.

    >>> print(render_report("r.db", VerifyReport(ok=True, entries=0, head="0" * 64, problems=[])), end="")
    r.db: intact: 0 entries, head 0000000000000000000000000000000000000000000000000000000000000000
    """
    if report.ok:
        text = f"{db}: intact: {report.entries} entries, head {report.head}\n"
        if report.anchor_seq is not None:
            after = report.entries - report.anchor_seq - 1
            text += f"anchor found at seq {report.anchor_seq} ({after} entries after it)\n"
        return text
    count = len(report.problems)
    text = f"{db}: TAMPERED: {count} problem{'s' if count != 1 else ''} in {report.entries} entries\n"
    return text + "".join(f"  {problem}\n" for problem in report.problems)


def main_receipts_verify(
    db: Path | str,
    expected_head: str | None = None,
    as_json: bool = False,
    out: TextIO | None = None,
    err: TextIO | None = None,
) -> int:
    """Verify the receipt log ``db`` and print the report (``--json``: one object with ``file``
    and the fields of :class:`~cda.actions.receipts.VerifyReport`); returns the exit code."""
    stream, errors = out or sys.stdout, err or sys.stderr
    try:
        if expected_head is not None:
            expected_head = expected_head.strip().lower()
            if not _HASH.fullmatch(expected_head):
                raise CDAError(f"--head must be a SHA-256 hash (64 hex digits), got {expected_head!r}")
        report = verify(db, expected_head=expected_head)
    except CDAError as exc:
        print(exc.render(), file=errors)
        return EXIT_BAD_INPUT
    if as_json:
        stream.write(json.dumps({"file": str(db), **report.model_dump()}, ensure_ascii=False, indent=2) + "\n")
    else:
        stream.write(render_report(db, report))
    return EXIT_INTACT if report.ok else EXIT_TAMPERED
