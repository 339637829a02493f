"""Reading a SQLite file without a trace: what every reader of a CDA file uses.

SQLite's ``mode=ro`` alone is not enough: a read-only connection to a WAL-mode database creates
``-wal`` and ``-shm`` when no other connection has, and cannot delete them when it closes.
``immutable=1`` creates nothing, but reads without locks, which is wrong while a writer may be
live. So: when a ``-wal`` (or a rollback ``-journal``) exists, some connection is or was live,
and the file is read with an ordinary ``mode=ro`` connection, which adds no file; otherwise no
writer is live at the start, the file is read ``immutable``, and the read counts only if, before
that connection closes, still no ``-wal`` or ``-journal`` exists and the file's inode, size,
modification and change times are those seen before: a writer that started meanwhile can only
change the file through a journal or a WAL checkpoint, and either leaves one of those traces.
Otherwise the read is done again. A ``-wal`` left without its ``-shm`` (a crash, a copy) is read
from a copy in a temporary folder, since even a read-only connection would add a ``-shm``.

>>> import tempfile, pathlib, sqlite3
>>> path = pathlib.Path(tempfile.mkdtemp()) / "x.sqlite"
>>> conn = sqlite3.connect(path, isolation_level=None); _ = conn.execute("PRAGMA journal_mode=WAL")
>>> _ = conn.execute("CREATE TABLE t (x)"); conn.close()
>>> read_snapshot(path, lambda c: c.execute("SELECT name FROM sqlite_master").fetchall())
[('t',)]
>>> sorted(p.name for p in path.parent.iterdir())
['x.sqlite']
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from cda.store.format import StoreFileError
from cda.store.policy import BUSY_TIMEOUT_S

__all__ = ["connect_read_only", "read_snapshot"]

_SNAPSHOT_ATTEMPTS = 5

T = TypeVar("T")


def _stamp(path: Path) -> tuple[int, int, int, int]:
    st = os.stat(path)
    return st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns


def _live(path: Path) -> bool:
    """A ``-wal`` or ``-journal`` beside the file: a connection is (or was) writing it."""
    return any(Path(f"{path}{suffix}").exists() for suffix in ("-wal", "-journal"))


def read_snapshot(path: Path | str, read: Callable[[sqlite3.Connection], T]) -> T:
    """``read(conn)`` on a read-only connection to ``path`` that leaves no file behind (see the
    module's docstring for how); returns what ``read`` returns.

    ``read`` may run more than once (when a writer changed the file under it), so it must only
    read. A missing file or a folder is a :class:`StoreFileError`; errors that ``read`` raises on
    a consistent read are passed on.
    """
    target = Path(path)
    if not target.exists():
        raise StoreFileError(f"{path}: no such file")
    if not target.is_file():
        raise StoreFileError(f"{path}: not a file")
    if Path(f"{target}-wal").exists() and not Path(f"{target}-shm").exists():
        return _read_copy(target, read)
    uri = target.resolve().as_uri()
    for attempt in range(_SNAPSHOT_ATTEMPTS):
        if _live(target) or attempt == _SNAPSHOT_ATTEMPTS - 1:
            # a live (or crashed) writer's files exist already: an ordinary reader adds none
            conn = connect_read_only(uri + "?mode=ro", path)
            try:
                return read(conn)
            finally:
                conn.close()
        before = _stamp(target)
        conn = connect_read_only(uri + "?mode=ro&immutable=1", path)
        try:
            try:
                value = read(conn)
            except sqlite3.DatabaseError:
                if _live(target) or _stamp(target) != before:
                    continue  # torn by a writer that started meanwhile: read again
                raise
            if not _live(target) and _stamp(target) == before:
                return value
        finally:
            conn.close()
    raise AssertionError("unreachable: the last attempt reads with an ordinary read-only connection")


def _read_copy(target: Path, read: Callable[[sqlite3.Connection], T]) -> T:
    """``read`` on a copy of ``target`` and its ``-wal`` in a temporary folder, removed after."""
    with tempfile.TemporaryDirectory(prefix="cda-read-") as folder:
        copy = Path(folder) / "store.sqlite"
        shutil.copyfile(target, copy)
        shutil.copyfile(f"{target}-wal", f"{copy}-wal")
        conn = connect_read_only(copy.as_uri() + "?mode=ro", target)
        try:
            return read(conn)
        finally:
            conn.close()


def connect_read_only(uri: str, where: Path | str) -> sqlite3.Connection:
    """A read-only connection to the SQLite URI ``uri`` (``where`` names the file in errors)."""
    try:
        conn = sqlite3.connect(uri, uri=True, timeout=BUSY_TIMEOUT_S, check_same_thread=False)
    except sqlite3.Error as exc:
        raise StoreFileError(f"cannot open {where}: {exc}") from None
    conn.execute("PRAGMA query_only = 1")
    return conn
