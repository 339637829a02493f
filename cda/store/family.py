"""The files CDA keeps beside a store, and how they are named.

A product that keeps state for another's file puts it beside that file, named after it:
``<file>.<role>.sqlite`` (the server's state and its investigations beside the receipt log it
serves: ``runs/receipts.sqlite.service.sqlite``). :func:`companion` is that one rule;
:func:`family` lists a file with everything CDA keeps beside it (companions, their ``-wal`` and
``-shm``, a signed head), which is what a check in the sandbox must not read.

>>> companion(Path("runs/receipts.sqlite"), "service")
PosixPath('runs/receipts.sqlite.service.sqlite')
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["companion", "family"]


def companion(db: Path, role: str) -> Path:
    """The file of ``role`` kept beside the store ``db``: ``<db>.<role>.sqlite``."""
    return db.with_name(f"{db.name}.{role}.sqlite")


def family(db: Path) -> tuple[Path, ...]:
    """``db`` and every file now beside it whose name continues ``db``'s (``<db>-wal``,
    ``<db>.head.json``, ``<db>.<role>.sqlite`` and theirs), in name order."""
    try:
        beside = [p for p in db.parent.iterdir() if p.name.startswith((f"{db.name}.", f"{db.name}-"))]
    except OSError:  # the folder is gone or unreadable: only the file itself is known
        beside = []
    return (db, *sorted(beside))
