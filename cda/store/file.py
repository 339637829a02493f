"""Opening a CDA file: :func:`open_store` for a writer, :func:`read_store` for a reader.

*A writer* (:func:`open_store`) gets a :class:`Store`: the file created and marked when missing
(or 0 bytes: nothing to lose, and what a second process sees while the first creates it), or
recognised and brought to the format's version when it exists — the mark, the tables and the
version written in one transaction, so no other process ever sees a CDA file half made. An
existing file is first recognised without a trace (:func:`~cda.store.snapshot.read_snapshot`),
so a foreign one, another product's, a newer one, a folder or a text file is refused with a
:class:`~cda.store.format.StoreFileError` before anything is written to it, and left byte for
byte as it was.

*A reader* (:func:`read_store`) never creates or changes a file: a missing file is an error, an
existing one is recognised and read through :func:`~cda.store.snapshot.read_snapshot` (no
``-wal``/``-shm`` left behind), at whatever version it is.

>>> import tempfile, pathlib
>>> fmt = FileFormat("a notes file", 0x43444158, (("CREATE TABLE notes (text TEXT NOT NULL)",),))
>>> path = pathlib.Path(tempfile.mkdtemp()) / "notes.sqlite"
>>> with open_store(path, fmt) as store, store.transaction() as conn:
...     _ = conn.execute("INSERT INTO notes VALUES ('hello')")
>>> read_store(path, fmt, lambda conn: conn.execute("SELECT text FROM notes").fetchall())
[('hello',)]
>>> read_store(path.with_name("typo.sqlite"), fmt, lambda conn: None)
Traceback (most recent call last):
cda.store.format.StoreFileError: .../typo.sqlite: no such file
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import TracebackType
from typing import TypeVar

from cda.store.format import FileFormat, StoreFileError, recognise
from cda.store.policy import BUSY_TIMEOUT_S, Durability, apply_durability
from cda.store.snapshot import read_snapshot

__all__ = ["Store", "open_store", "read_store"]

T = TypeVar("T")


class Store:
    """One CDA file open for writing: its connection (autocommit; transactions are explicit), the
    lock its writers share (re-entrant; :func:`share_lock` gives several stores one), and the
    version it had before this open migrated it (``found_version``: 0 for a new file)."""

    def __init__(self, conn: sqlite3.Connection, where: str, fmt: FileFormat, found_version: int,
                 durability: Durability) -> None:
        self.conn = conn
        self.where = where
        self.format = fmt
        self.found_version = found_version
        self.lock = threading.RLock()
        self._durability = durability

    @property
    def durability(self) -> Durability:
        return self._durability

    @durability.setter
    def durability(self, value: Durability) -> None:
        with self.lock:
            apply_durability(self.conn, value)
            self._durability = value

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """Under :attr:`lock`: ``BEGIN IMMEDIATE`` (SQLite's write lock first, so a read-check-write
        inside cannot interleave with another process's) … ``COMMIT``, ``ROLLBACK`` on any exception."""
        with self.lock:
            self.conn.execute("BEGIN IMMEDIATE")
            try:
                yield self.conn
            except BaseException:
                if self.conn.in_transaction:  # some errors (a full disk) have rolled back already
                    self.conn.execute("ROLLBACK")
                raise
            self.conn.execute("COMMIT")

    def close(self) -> None:
        """Close the connection; closing twice is harmless."""
        with self.lock:
            self.conn.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()


def share_lock(*stores: Store) -> threading.RLock:
    """One lock for the writers of several stores of one file (each keeps its own connection).

    Two threads writing through two connections to one file meet at SQLite's file lock instead,
    and the loser sleeps in SQLite's busy handler (1, 2, 5, 10... ms). Measured (40 server
    actions, 2 threads): 3.83 CPU-s with a lock per store, 2.85 with one shared lock."""
    lock = threading.RLock()
    for store in stores:
        store.lock = lock
    return lock


_SQLITE_NOTADB = 26
"""SQLite's result code for a file that is not a database (``SQLITE_NOTADB``)."""


def _unreadable(exc: sqlite3.DatabaseError, where: str, fmt: FileFormat) -> StoreFileError:
    """The error for a file SQLite could not read as ``fmt``'s. (The file's first bytes are never
    read with a file descriptor of our own: closing one would drop every POSIX lock this process
    holds on the file, its SQLite connections' included, and another process could then take
    the write-ahead log from under them.)"""
    if getattr(exc, "sqlite_errorcode", None) == _SQLITE_NOTADB:
        return StoreFileError(f"{where}: not an SQLite database (a file of another kind; CDA never modifies files "
                              "it did not create)")
    return StoreFileError(f"{where}: cannot be read as {fmt.name} ({exc})")


def _existing(target: Path, where: str, fmt: FileFormat) -> int | None:
    """The version of the file at ``target`` read without a trace (None: missing or 0 bytes)."""
    if not target.exists():
        return None
    if not target.is_file():
        raise StoreFileError(f"{where}: not a file")
    if target.stat().st_size == 0:
        return None
    try:
        return read_snapshot(target, lambda conn: recognise(conn, fmt, where))
    except sqlite3.DatabaseError as exc:
        raise _unreadable(exc, where, fmt) from None


def open_store(path: Path | str, fmt: FileFormat, *, durability: Durability = Durability.FULL,
               create: bool = True) -> Store:
    """``fmt``'s file at ``path`` open for writing, created when missing (``create=False``: a
    missing file is a :class:`StoreFileError`) and migrated to ``fmt``'s version; ``":memory:"``
    gives a private database. See the module's docstring."""
    where = str(path)
    if where == ":memory:":
        conn = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
        store = Store(conn, where, fmt, 0, durability)
        with store.transaction():
            fmt.migrate(conn, 0)
        return store
    target = Path(path)
    if target.is_symlink() and not target.exists():
        raise StoreFileError(f"{where}: a symbolic link to nothing; CDA does not create its file at a link's target")
    if not create and not target.exists():
        raise StoreFileError(f"{where}: no such file")
    _existing(target, where, fmt)
    try:
        conn = sqlite3.connect(target.resolve().as_uri() + "?mode=rwc", uri=True, timeout=BUSY_TIMEOUT_S,
                               isolation_level=None, check_same_thread=False)
    except sqlite3.Error as exc:
        raise StoreFileError(f"cannot open {where}: {exc}") from None
    try:
        found = _migrate(conn, target, where, fmt)
        mode = _wal(conn)
        if str(mode).lower() != "wal":
            raise StoreFileError(f"{where}: SQLite would not switch to WAL mode (journal_mode is {mode!r})")
        apply_durability(conn, durability)
    except sqlite3.OperationalError as exc:  # read-only file or folder, locked past the timeout, disk full
        conn.close()
        raise StoreFileError(f"{where}: cannot write {fmt.name} ({exc})") from None
    except sqlite3.DatabaseError as exc:
        conn.close()
        raise _unreadable(exc, where, fmt) from None
    except BaseException:
        conn.close()
        raise
    return Store(conn, where, fmt, found, durability)


def _wal(conn: sqlite3.Connection) -> str:
    """``PRAGMA journal_mode=WAL``, tried again while another connection holds the lock it needs.

    The switch needs the file's exclusive lock while this connection holds a shared one; when
    another connection holds the write lock, SQLite answers "database is locked" at once rather
    than wait (waiting could deadlock), so the busy timeout does not apply: this waits instead,
    up to :data:`BUSY_TIMEOUT_S`."""
    deadline = time.monotonic() + BUSY_TIMEOUT_S
    pause = 0.001
    while True:
        try:
            return str(conn.execute("PRAGMA journal_mode=WAL").fetchone()[0])
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() + pause > deadline:
                raise
        time.sleep(pause)
        pause = min(pause * 2, 0.1)


def _migrate(conn: sqlite3.Connection, target: Path, where: str, fmt: FileFormat) -> int:
    """Under SQLite's write lock: make a file nobody has written yet, or recognise (again: another
    process may have made it meanwhile) and migrate any other; returns the version found."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        found = 0 if target.stat().st_size == 0 else recognise(conn, fmt, where)
        mark = (int(conn.execute("PRAGMA application_id").fetchone()[0]),
                int(conn.execute("PRAGMA user_version").fetchone()[0]))
        if found < fmt.version or mark != (fmt.app_id, fmt.version):  # older, or an earlier CDA's: marked now
            fmt.migrate(conn, found)
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")
    return found


def read_store(path: Path | str, fmt: FileFormat, read: Callable[[sqlite3.Connection], T]) -> T:
    """``read(conn)`` on ``fmt``'s file at ``path``, recognised first, read-only and without a
    trace; a missing file, a folder or a file that is not ``fmt``'s is a :class:`StoreFileError`.
    ``read`` may run more than once (see :func:`~cda.store.snapshot.read_snapshot`)."""
    target = Path(path)
    if target.is_file() and target.stat().st_size == 0:
        raise StoreFileError(f"{path}: an empty file, not {fmt.name}")

    def recognised(conn: sqlite3.Connection) -> T:
        recognise(conn, fmt, str(path))
        return read(conn)

    try:
        return read_snapshot(target, recognised)
    except sqlite3.DatabaseError as exc:
        raise _unreadable(exc, str(path), fmt) from None
