"""Events kept in SQLite (WAL) so a client that lost its stream resumes by ``Last-Event-ID``.

Each event is stored under (action id, seq) as its JSON; :meth:`EventStore.since` returns the
events after a given seq in order, which is all a reconnecting SSE client needs to see the same
timeline (spec §7.2, "cursor resume"). Retention is by age (``prune``, default 24 h).
"""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path

from cda.actions.receipts import connect_sqlite
from cda.contracts.events import ActionEvent, parse_event
from cda.contracts.receipt import canonical_json

__all__ = ["EventStore"]

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS events (action_id TEXT NOT NULL, seq INTEGER NOT NULL, "
    "stored_at REAL NOT NULL, body TEXT NOT NULL, PRIMARY KEY (action_id, seq))"
)


class EventStore:
    """Append events as they are emitted (use :meth:`append` as a stream subscriber)."""

    def __init__(self, path: Path | str) -> None:
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection = connect_sqlite(path)
        with self._lock:
            self._conn.execute(_SCHEMA)

    def append(self, event: ActionEvent) -> None:
        body = canonical_json(event.model_dump(mode="json"))
        with self._lock:
            self._conn.execute("INSERT OR IGNORE INTO events VALUES (?, ?, ?, ?)",
                               (event.action_id, event.seq, time.time(), body))

    def since(self, action_id: str, last_event_id: int | None = None) -> list[ActionEvent]:
        """The events of ``action_id`` after ``last_event_id`` (all of them for None), in order."""
        after = -1 if last_event_id is None else last_event_id
        with self._lock:
            rows = self._conn.execute(
                "SELECT body FROM events WHERE action_id = ? AND seq > ? ORDER BY seq", (action_id, after)
            ).fetchall()
        import json

        return [parse_event(json.loads(body)) for (body,) in rows]

    def prune(self, older_than_s: float = 24 * 3600) -> int:
        with self._lock:
            cur = self._conn.execute("DELETE FROM events WHERE stored_at < ?", (time.time() - older_than_s,))
        return cur.rowcount

    def close(self) -> None:
        with self._lock:
            self._conn.close()
