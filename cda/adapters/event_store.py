"""Events kept in SQLite (WAL) so a client that lost its stream resumes by ``Last-Event-ID``.

Each event is stored under (action id, seq) as its JSON; :meth:`EventStore.since` returns the
events after a given seq in order, which is all a reconnecting SSE client needs to see the same
timeline (spec §7.2, "cursor resume"). Retention is by age (``prune``, default 24 h).

The writer (:class:`EventStore`) opens CDA's own file only (a foreign database is refused before
anything is written to it); a reader that only serves the events (:func:`read_events`, what
``cda serve`` uses) opens the file read-only and leaves no ``-wal``/``-shm`` behind.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path

from pydantic import ValidationError

from cda.actions.store_file import (
    TABLES,
    StoreFileError,
    create_if_missing,
    open_store,
    read_snapshot,
    recognise,
)
from cda.contracts.events import ActionEvent, parse_event
from cda.contracts.receipt import canonical_json
from cda.files import parse_json

__all__ = ["EventStore", "check_event_file", "read_events"]

_SCHEMA = create_if_missing(TABLES["events"])


class EventStore:
    """Append events as they are emitted (use :meth:`append` as a stream subscriber)."""

    def __init__(self, path: Path | str) -> None:
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection = open_store(path)
        with self._lock:
            self._conn.execute(_SCHEMA)

    def append(self, event: ActionEvent) -> None:
        body = canonical_json(event.model_dump(mode="json"))
        with self._lock:
            self._conn.execute("INSERT OR IGNORE INTO events VALUES (?, ?, ?, ?)",
                               (event.action_id, event.seq, time.time(), body))

    def since(self, action_id: str, last_event_id: int | None = None) -> list[ActionEvent]:
        """The events of ``action_id`` after ``last_event_id`` (all of them for None), in order."""
        with self._lock:
            return _since(self._conn, action_id, last_event_id)

    def prune(self, older_than_s: float = 24 * 3600) -> int:
        with self._lock:
            cur = self._conn.execute("DELETE FROM events WHERE stored_at < ?", (time.time() - older_than_s,))
        return cur.rowcount

    def close(self) -> None:
        with self._lock:
            self._conn.close()


def _since(conn: sqlite3.Connection, action_id: str, last_event_id: int | None) -> list[ActionEvent]:
    after = -1 if last_event_id is None else last_event_id
    if conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'events'").fetchone() is None:
        return []  # a CDA file whose event store was never opened: no events yet
    rows = conn.execute(
        "SELECT seq, body FROM events WHERE action_id = ? AND seq > ? ORDER BY seq", (action_id, after)
    ).fetchall()
    events = []
    for seq, body in rows:
        where = f"event {seq} of action {action_id}"
        try:
            events.append(parse_event(parse_json(body, where, StoreFileError)))
        except ValidationError as exc:  # a row written by something else than CDA's store
            raise StoreFileError(f"{where}: not an event CDA wrote ({exc.error_count()} problem(s))") from None
    return events


def check_event_file(path: Path | str) -> None:
    """Raise :class:`~cda.actions.store_file.StoreFileError` unless ``path`` is CDA's own file
    (read-only, no trace left)."""
    try:
        read_snapshot(path, lambda conn: recognise(conn, str(path)))
    except sqlite3.DatabaseError as exc:
        raise StoreFileError(f"{path}: not an SQLite database ({exc})") from None


def read_events(path: Path | str, action_id: str, last_event_id: int | None = None) -> list[ActionEvent]:
    """:meth:`EventStore.since` on the file at ``path``, read-only and without a trace; a file
    that does not exist yet holds no events, one that is not CDA's (or not SQLite) is a
    :class:`~cda.actions.store_file.StoreFileError`."""
    if not Path(path).exists():
        return []

    def read(conn: sqlite3.Connection) -> list[ActionEvent]:
        recognise(conn, str(path))  # the file may have been replaced since the server started
        return _since(conn, action_id, last_event_id)

    try:
        return read_snapshot(path, read)
    except sqlite3.DatabaseError as exc:
        raise StoreFileError(f"{path}: not a readable event store ({exc})") from None
