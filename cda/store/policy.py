"""The one connection policy of CDA's files: write-ahead logging, a busy timeout, and how hard
each commit is pushed to the disk.

*WAL.* Every file CDA writes is in write-ahead logging, so readers never block the writer and
a process killed at any instant leaves the last commit whole. A file system where SQLite
refuses WAL is a :class:`~cda.store.format.StoreFileError`, never a silent fallback.

*Busy timeout.* A writer waits up to :data:`BUSY_TIMEOUT_S` for another process's write lock.

*Durability* (``PRAGMA synchronous``). :attr:`Durability.FULL` fsyncs every commit: it survives
a power loss. :attr:`Durability.NORMAL` does not fsync a commit in WAL mode: it still survives
the death of the process (``kill -9``) and never corrupts the file; a power loss or kernel crash
may lose the last commits (a hash chain stays valid up to them). Each product picks its default;
``cda serve --fsync`` asks for FULL on every file the server writes. Measured for the server: an
action writes ~125 receipts and ~25 events, each its own commit; fsyncing each took 0.6-1.2 s per
action on a 2-core machine, 0.09 s without.
"""

from __future__ import annotations

import enum
import sqlite3

__all__ = ["BUSY_TIMEOUT_S", "Durability", "apply_durability"]

BUSY_TIMEOUT_S = 60.0
"""How long a connection waits for another's lock before it gives up (seconds)."""


class Durability(enum.Enum):
    """How far a commit is pushed before it returns (see the module's docstring)."""

    NORMAL = "NORMAL"
    FULL = "FULL"


def apply_durability(conn: sqlite3.Connection, durability: Durability) -> None:
    """Set ``PRAGMA synchronous`` for ``durability`` on a connection (outside a transaction)."""
    conn.execute(f"PRAGMA synchronous = {durability.value}")
