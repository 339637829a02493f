"""CDA's own SQLite file: marked when created, recognised before it is touched, read without a trace.

One SQLite file (``cda run --out DIR`` writes ``DIR/receipts.sqlite``) holds the receipt log, the
event store and the reflection store. The rule for every other file is simple: **a file CDA did
not create is never modified** — no table added, no journal rolled back, no ``-wal``/``-shm``
left beside it.

*Marked.* :func:`open_store` creates a file with ``PRAGMA application_id`` = :data:`APPLICATION_ID`
("CDA1") and ``PRAGMA user_version`` = :data:`FORMAT_VERSION`, in the same transaction that
writes the file's first page, so no other process ever sees a CDA file without its mark. An
empty (0-byte) file counts as new: it holds nothing to lose, and it is what a second CDA process
sees while the first is creating the file.

*Recognised.* Before an existing file is opened for writing, :func:`recognise` reads it (without
a trace, below): the mark, or — for logs written before the mark existed — a schema made only of
CDA's tables, each exactly as CDA creates it (:data:`TABLES`). Anything else (another program's
``application_id``, a foreign table or view, an empty database someone else made) is a
:class:`StoreFileError` that names what was found.

*Read without a trace.* :func:`read_snapshot` is how a file is read and never written
(``cda receipts verify``, ``cda serve``). SQLite's ``mode=ro`` alone is not enough: a read-only
connection to a WAL-mode database creates ``-wal`` and ``-shm`` when no other connection has,
and cannot delete them when it closes. ``immutable=1`` creates nothing, but reads without locks,
which is wrong while a writer may be live. So: when a ``-wal`` (or a rollback ``-journal``)
exists, some connection is or was live, and the file is read with an ordinary ``mode=ro``
connection, which adds no file; otherwise no writer is live at the start, the file is read
``immutable``, and the read counts only if, before that connection closes, still no ``-wal`` or
``-journal`` exists and the file's inode, size, modification and change times are those seen
before: a writer that started meanwhile can only change the file through a journal or a WAL
checkpoint, and either leaves one of those traces. Otherwise the read is done again.

>>> import tempfile, pathlib
>>> path = pathlib.Path(tempfile.mkdtemp()) / "cda.sqlite"
>>> conn = open_store(path); conn.execute(TABLES["events"]).close(); conn.close()
>>> read_snapshot(path, lambda c: c.execute("PRAGMA application_id").fetchone()[0]) == APPLICATION_ID
True
>>> sorted(p.name for p in path.parent.iterdir())
['cda.sqlite']
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from cda.errors import CDAError

__all__ = [
    "APPLICATION_ID",
    "FORMAT_VERSION",
    "LEGACY_TABLES",
    "TABLES",
    "StoreFileError",
    "create_if_missing",
    "open_store",
    "read_snapshot",
    "recognise",
]

APPLICATION_ID = 0x43444131
"""``PRAGMA application_id`` of every file CDA creates: the bytes of "CDA1"."""

FORMAT_VERSION = 2
"""``PRAGMA user_version`` of a file CDA creates; a larger one was written by a newer CDA.
Format 2 (attempts, chained events, signed heads) replaced format 1's events table."""

TABLES: dict[str, str] = {
    "receipts": (
        "CREATE TABLE receipts ("
        "rowid INTEGER PRIMARY KEY, "
        "seq INTEGER NOT NULL UNIQUE, "
        "action_id TEXT NOT NULL, "
        "body TEXT NOT NULL, "
        "prev_hash TEXT NOT NULL, "
        "entry_hash TEXT NOT NULL)"
    ),
    "events": (
        "CREATE TABLE events (action_id TEXT NOT NULL, attempt INTEGER NOT NULL, seq INTEGER NOT NULL, "
        "body TEXT NOT NULL, prev_hash TEXT NOT NULL, entry_hash TEXT NOT NULL, "
        "PRIMARY KEY (action_id, attempt, seq))"
    ),
    "reflection_traces": "CREATE TABLE reflection_traces (action_id TEXT PRIMARY KEY, body TEXT NOT NULL)",
    "reflection_meta": "CREATE TABLE reflection_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
}
"""Every table a CDA file holds, as SQLite keeps its ``CREATE`` statement (``IF NOT EXISTS`` is
not kept). The stores create their tables from these texts, and :func:`recognise` accepts an
unmarked file only if its tables are among them (or :data:`LEGACY_TABLES`), word for word."""

LEGACY_TABLES: dict[str, str] = {
    "events": (
        "CREATE TABLE events (action_id TEXT NOT NULL, seq INTEGER NOT NULL, "
        "stored_at REAL NOT NULL, body TEXT NOT NULL, PRIMARY KEY (action_id, seq))"
    ),
}
"""Tables as store format 1 wrote them (events without attempts or a chain): still recognised as
CDA's, but no longer written (:class:`~cda.adapters.event_store.EventStore` asks for a new file)."""

BUSY_TIMEOUT_S = 60.0
_SNAPSHOT_ATTEMPTS = 5

T = TypeVar("T")


class StoreFileError(CDAError, ValueError):
    """An SQLite file CDA cannot use: missing, not a file, not SQLite, or not CDA's own."""


def create_if_missing(statement: str) -> str:
    """``CREATE TABLE x`` as ``CREATE TABLE IF NOT EXISTS x`` (SQLite stores both the same way)."""
    return statement.replace("CREATE TABLE ", "CREATE TABLE IF NOT EXISTS ", 1)


def recognise(conn: sqlite3.Connection, where: str) -> None:
    """Raise :class:`StoreFileError` unless the database behind ``conn`` is CDA's own file.

    CDA's own: marked with :data:`APPLICATION_ID` (and a :data:`FORMAT_VERSION` this CDA reads),
    or unmarked with at least one table, every table one of :data:`TABLES` word for word, and
    no view (a log written before the mark existed). Only reads.
    """
    app_id = int(conn.execute("PRAGMA application_id").fetchone()[0])
    version = int(conn.execute("PRAGMA user_version").fetchone()[0])
    if app_id == APPLICATION_ID:
        if version > FORMAT_VERSION:
            raise StoreFileError(
                f"{where}: written by a newer CDA (store format {version}; this CDA reads up to {FORMAT_VERSION})"
            )
        return
    refusal = f"{where}: not a CDA file, and CDA never modifies files it did not create"
    if app_id != 0:
        raise StoreFileError(f"{refusal} (its application_id is {app_id:#010x}, another program's format)")
    objects = conn.execute(
        "SELECT type, name, sql FROM sqlite_master WHERE name NOT GLOB 'sqlite_*' ORDER BY type, name"
    ).fetchall()
    tables = {str(name): sql for kind, name, sql in objects if kind == "table"}
    if not tables:
        raise StoreFileError(f"{refusal} (an SQLite database with no CDA mark and no CDA table)")
    foreign = sorted(name for name, sql in tables.items() if sql not in (TABLES.get(name), LEGACY_TABLES.get(name)))
    foreign += sorted(f"view {name}" for kind, name, _ in objects if kind == "view")
    if foreign:
        raise StoreFileError(f"{refusal} (no CDA mark; tables CDA does not create: {', '.join(foreign)})")


def open_store(path: Path | str) -> sqlite3.Connection:
    """A read-write connection to CDA's file at ``path``, created (and marked) if missing.

    Autocommit mode (transactions are explicit), usable from any thread under the caller's
    lock, waiting up to a minute for other writers, in write-ahead logging so readers never
    block the writer (a file system where SQLite refuses WAL is a :class:`StoreFileError`, not a
    silent fallback). An existing file is first :func:`recognise`-d without a trace, so a foreign
    one is refused before anything is written to it. ``":memory:"`` gives a private database.
    """
    if str(path) == ":memory:":
        conn = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
        conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
        conn.execute(f"PRAGMA user_version = {FORMAT_VERSION}")
        return conn
    target = Path(path)
    if target.exists() and not target.is_file():
        raise StoreFileError(f"{path}: not a file")
    if target.exists() and target.stat().st_size > 0:
        try:
            read_snapshot(target, lambda conn: recognise(conn, str(path)))
        except sqlite3.DatabaseError as exc:
            raise StoreFileError(f"{path}: not an SQLite database ({exc})") from None
    try:
        conn = sqlite3.connect(target.resolve().as_uri() + "?mode=rwc", uri=True, timeout=BUSY_TIMEOUT_S,
                               isolation_level=None, check_same_thread=False)
    except sqlite3.Error as exc:
        raise StoreFileError(f"cannot open {path}: {exc}") from None
    try:
        _mark_or_recognise(conn, target, str(path))
        mode = conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]
        if str(mode).lower() != "wal":
            raise StoreFileError(f"{path}: SQLite would not switch to WAL mode (journal_mode is {mode!r})")
        conn.execute("PRAGMA synchronous=FULL")
    except sqlite3.OperationalError as exc:  # read-only file or folder, locked past the timeout, disk full
        conn.close()
        raise StoreFileError(f"{path}: cannot write the CDA file ({exc})") from None
    except sqlite3.DatabaseError as exc:
        conn.close()
        raise StoreFileError(f"{path}: not an SQLite database ({exc})") from None
    except BaseException:
        conn.close()
        raise
    return conn


def _mark_or_recognise(conn: sqlite3.Connection, target: Path, where: str) -> None:
    """Under SQLite's write lock: mark a file nobody has written yet, recognise any other."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        if target.stat().st_size == 0:  # nothing committed by anyone: the file is ours to make
            conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
            conn.execute(f"PRAGMA user_version = {FORMAT_VERSION}")
        else:  # written meanwhile (another CDA process creating it), or checked before: check again
            recognise(conn, where)
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


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
    read. A missing file or one that is not SQLite is a :class:`StoreFileError`; errors that
    ``read`` raises on a consistent read are passed on.
    """
    target = Path(path)
    if not target.exists():
        raise StoreFileError(f"{path}: no such file")
    if not target.is_file():
        raise StoreFileError(f"{path}: not a file")
    if Path(f"{target}-wal").exists() and not Path(f"{target}-shm").exists():
        # a WAL left by a crash or a copy, with no writer (a live one keeps its -shm): even a
        # read-only connection would make a -shm beside it, so read a copy instead
        return _read_copy(target, read)
    uri = target.resolve().as_uri()
    for attempt in range(_SNAPSHOT_ATTEMPTS):
        if _live(target) or attempt == _SNAPSHOT_ATTEMPTS - 1:
            # a live (or crashed) writer's files exist already: an ordinary reader adds none
            conn = _connect_read_only(uri + "?mode=ro", path)
            try:
                return read(conn)
            finally:
                conn.close()
        before = _stamp(target)
        conn = _connect_read_only(uri + "?mode=ro&immutable=1", path)
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
        conn = _connect_read_only(copy.as_uri() + "?mode=ro", target)
        try:
            return read(conn)
        finally:
            conn.close()


def _connect_read_only(uri: str, where: Path | str) -> sqlite3.Connection:
    try:
        return sqlite3.connect(uri, uri=True, timeout=BUSY_TIMEOUT_S, check_same_thread=False)
    except sqlite3.Error as exc:
        raise StoreFileError(f"cannot open {where}: {exc}") from None
