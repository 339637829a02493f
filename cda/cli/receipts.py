"""``cda receipts verify DB [--head HASH] [--public-key HEX] [--unsigned] [--json]``: was the log tampered with?

Checks everything :func:`cda.actions.audit.audit_file` checks: the signed head beside the log
(``DB.head.json``: Ed25519, by the local key in ``$CDA_KEY_DIR`` or ``~/.config/cda``, or
``--public-key``), the hash chain, the schema exactly as CDA creates it, the events and
reflection traces the receipts vouch for, and which attempts were interrupted. ``--head`` is an
anchor recorded earlier (the head ``cda run`` printed): the log must still contain that entry.

Exit codes: 0 the log is intact (prints the entry count and the head, then notes such as
interrupted attempts), 1 it was tampered with (prints each problem; a wiped, truncated,
replaced or deleted log is tampered when it carried CDA's mark or its signed head is still
beside it), 2 not a CDA log or bad usage (no such file, another program's file, a malformed
``--head``), with a one-line message and never a traceback, 3 UNVERIFIED: nothing wrong was
found, but the signed head could not be checked for want of a trusted key (another user's
log, no local key: give the signer's ``--public-key``). A missing key is not tampering.

A results store of ``cda jobs run`` (``DIR/results.sqlite``) is a log too: its ``job_results``
table is checked against the receipts that vouch for each row (:func:`cda.adapters.jobs.results_store.row_problems`).
"""

from __future__ import annotations

import json
import re
import sqlite3
import sys
from pathlib import Path
from typing import TextIO

from cda.actions.audit import AuditReport, audit_file
from cda.errors import CDAError
from cda.keys.signing import trusted_public_key
from cda.terminal_text import for_terminal

__all__ = ["main_receipts_verify", "render_report", "EXIT_INTACT", "EXIT_TAMPERED", "EXIT_BAD_INPUT", "EXIT_UNVERIFIED"]

EXIT_INTACT, EXIT_TAMPERED, EXIT_BAD_INPUT, EXIT_UNVERIFIED = 0, 1, 2, 3

_HASH = re.compile(r"[0-9a-f]{64}")


def render_report(db: Path | str, report: AuditReport) -> str:
    """The human-readable verdict: one line, then one indented line per problem, then notes.

    >>> print(render_report("r.db", AuditReport(ok=True, entries=0, head="0" * 64, problems=[])), end="")
    r.db: intact: 0 entries, head 0000000000000000000000000000000000000000000000000000000000000000
    """
    if report.status == "unverified":
        text = f"{db}: UNVERIFIED: {report.entries} entries, head {report.head}: no problem found, but {report.unverified}\n"
    elif report.ok:
        text = f"{db}: intact: {report.entries} entries, head {report.head}\n"
        if report.signed_count is not None:
            text += f"signed head at entry {report.signed_count} ({report.unsigned_tail} entries after it)\n"
        if report.anchor_seq is not None:
            after = report.entries - report.anchor_seq - 1
            text += f"anchor found at seq {report.anchor_seq} ({after} entries after it)\n"
    else:
        count = len(report.problems)
        text = f"{db}: TAMPERED: {count} problem{'s' if count != 1 else ''} in {report.entries} entries\n"
        text += "".join(f"  {problem}\n" for problem in report.problems)
    return text + "".join(f"note: {note}\n" for note in report.notes)


def _hash_option(name: str, value: str | None) -> str | None:
    if value is None:
        return None
    value = value.strip().lower()
    if not _HASH.fullmatch(value):
        raise CDAError(f"{name} must be 64 hex digits, got {value!r}")
    return value


def main_receipts_verify(
    db: Path | str,
    expected_head: str | None = None,
    as_json: bool = False,
    out: TextIO | None = None,
    err: TextIO | None = None,
    *,
    public_key: str | None = None,
    unsigned: bool = False,
) -> int:
    """Verify the log ``db`` and print the report (``--json``: one object with ``file`` and the
    fields of :class:`~cda.actions.audit.AuditReport`); returns the exit code."""
    stream, errors = out or sys.stdout, err or sys.stderr
    try:
        expected_head = _hash_option("--head (a SHA-256 hash)", expected_head)
        trusted = _hash_option("--public-key (an Ed25519 public key)", public_key) or trusted_public_key()
        from cda.actions.store_file import LOG_FORMAT
        from cda.adapters.jobs.results_store import JOBS_FORMAT, row_problems  # a jobs results file: a log too

        report = audit_file(db, expected_head=expected_head, trusted_key=trusted, require_signature=not unsigned,
                            formats=(LOG_FORMAT, JOBS_FORMAT))
        try:  # a jobs file: its job_results rows against the receipts that vouch for them
            found, notes = row_problems(db, require_signature=not unsigned)
        except (sqlite3.DatabaseError, UnicodeDecodeError, CDAError):  # a file the audit found unreadable says so
            found, notes = [], []
        if found or notes:
            report = report.model_copy(update={
                "problems": [*report.problems, *found], "notes": [*report.notes, *notes],
                **({"ok": False, "status": "tampered", "unverified": None} if found else {})})
    except CDAError as exc:
        print(exc.render(), file=errors)
        return EXIT_BAD_INPUT
    if as_json:
        stream.write(json.dumps({"file": str(db), **report.model_dump()}, ensure_ascii=False, indent=2) + "\n")
    else:
        stream.write(for_terminal(render_report(db, report)))
    return {"intact": EXIT_INTACT, "tampered": EXIT_TAMPERED, "unverified": EXIT_UNVERIFIED}[report.status]
