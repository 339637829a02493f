"""Events kept in SQLite (WAL) so a client that lost its stream resumes by ``Last-Event-ID``.

Each event is stored under (action id, attempt, seq) as its JSON, chained within its attempt
(:mod:`cda.actions.event_chain`: ``prev_hash``/``entry_hash``), and the attempt's
``action.end`` receipt names the chain's head, so ``cda receipts verify`` detects an edited,
dropped, added or reordered event. Rows are never updated (a trigger refuses it).

:meth:`EventStore.since` returns the events of the action's **latest attempt** after a given
seq, in order: a re-run of an action id starts a new attempt and never mixes its events with an
earlier one's (spec §7.2, "cursor resume"). Retention is by age (``prune``, default 24 h), one
whole earlier attempt at a time. (Format 1 kept a ``stored_at`` column outside any hash; format 2
has none: every column is covered by the chain.)

The writer (:class:`EventStore`) opens CDA's own file only (a foreign database is refused before
anything is written to it); a reader that only serves the events (:func:`read_events`, what
``cda serve`` uses) opens the file read-only and leaves no ``-wal``/``-shm`` behind. A file
whose events table is store format 1's (no attempts, no chain) is migrated when a writer opens
it (:data:`cda.actions.store_file.MIGRATIONS`): its events become attempt 1 of their action, chained.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Sequence
from pathlib import Path

from pydantic import ValidationError

from cda.actions.event_chain import event_body, event_chain
from cda.actions.receipts import GENESIS_HASH
from cda.actions.store_file import LEGACY_TABLES, LOG_FORMAT, TABLES
from cda.contracts.events import ActionEvent, parse_event
from cda.files import parse_json
from cda.store import Durability, StoreFileError, open_store, read_store

__all__ = ["EventStore", "check_event_file", "read_events"]


class EventStore:
    """Append events as they are emitted (use :meth:`append` as a stream subscriber)."""

    def __init__(self, path: Path | str, *, durability: Durability = Durability.FULL) -> None:
        self.path = path
        self.file = open_store(path, LOG_FORMAT, durability=durability)
        self._heads: dict[tuple[str, int], str] = {}
        row = self.file.conn.execute("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'events'").fetchone()
        if row is None or row[0] != TABLES["events"]:
            self.file.close()
            raise StoreFileError(f"{path}: its events table is {'missing' if row is None else 'not the one CDA creates'} "
                                 "(changed since CDA made it: cda receipts verify tells more)")

    def append(self, event: ActionEvent) -> None:
        """Store one event at the end of its attempt's chain (events without an attempt count as 1)."""
        self.store(event)

    def store(self, event: ActionEvent) -> str:
        """:meth:`append`, returning the stored text (what a stream sends: the server need not
        serialise the event a second time)."""
        attempt = event.attempt or 1
        body = event_body(event)
        key = (event.action_id, attempt)
        with self.file.lock:
            prev = self._heads.get(key)
            if prev is None:
                row = self.file.conn.execute(
                    "SELECT entry_hash FROM events WHERE action_id = ? AND attempt = ? ORDER BY seq DESC LIMIT 1", key
                ).fetchone()
                prev = GENESIS_HASH if row is None else str(row[0])
            digest = event_chain([body], prev)[0]
            self.file.conn.execute("INSERT INTO events VALUES (?, ?, ?, ?, ?, ?)",
                               (event.action_id, attempt, event.seq, body, prev, digest))
            self._heads[key] = digest
        return body

    def confirm(self, events: Sequence[ActionEvent]) -> list[str]:
        """Problems found comparing the stored events of an attempt with ``events``, the ones the
        run emitted (same order, same bytes); empty when they match. The run's ``audit`` hook."""
        if not events:
            return []
        action_id, attempt = events[0].action_id, events[0].attempt or 1
        with self.file.lock:
            rows = self.file.conn.execute(
                "SELECT seq, body FROM events WHERE action_id = ? AND attempt = ? ORDER BY seq", (action_id, attempt)
            ).fetchall()
        stored = [(int(seq), str(body)) for seq, body in rows]
        emitted = [(e.seq, event_body(e)) for e in events]
        if stored != emitted:
            return [f"the stored events of {action_id} attempt {attempt} differ from the ones the run streamed"]
        return []

    def since(self, action_id: str, last_event_id: int | None = None) -> list[ActionEvent]:
        """The events of the latest attempt of ``action_id`` after ``last_event_id`` (all of them
        for None), in order."""
        with self.file.lock:
            return _since(self.file.conn, action_id, last_event_id)

    def prune(self, older_than_s: float = 24 * 3600) -> int:
        """Delete every attempt whose last event was emitted more than ``older_than_s`` ago (by
        its ``ts``), except each action's latest attempt (the one a client is served); returns
        how many events went. Whole attempts only: a part of one would look tampered."""
        with self.file.lock:
            cur = self.file.conn.execute(
                "DELETE FROM events WHERE (action_id, attempt) IN (SELECT action_id, attempt FROM events AS e "
                "WHERE attempt < (SELECT MAX(attempt) FROM events WHERE action_id = e.action_id) "
                "GROUP BY action_id, attempt HAVING MAX(json_extract(body, '$.ts')) < ?)", (time.time() - older_than_s,))
            self._heads.clear()
        return cur.rowcount

    def close(self) -> None:
        self.file.close()


def _since(conn: sqlite3.Connection, action_id: str, last_event_id: int | None) -> list[ActionEvent]:
    after = -1 if last_event_id is None else last_event_id
    table = conn.execute("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'events'").fetchone()
    if table is None:
        return []  # a CDA file whose event store was never opened: no events yet
    if table[0] == LEGACY_TABLES["events"]:
        query = "SELECT seq, body FROM events WHERE action_id = ? AND seq > ? ORDER BY seq"
        params: tuple[object, ...] = (action_id, after)
    else:
        query = ("SELECT seq, body FROM events WHERE action_id = ? AND seq > ? AND attempt = "
                 "(SELECT MAX(attempt) FROM events WHERE action_id = ?) ORDER BY seq")
        params = (action_id, after, action_id)
    events = []
    for seq, body in conn.execute(query, params).fetchall():
        where = f"event {seq} of action {action_id}"
        try:
            events.append(parse_event(parse_json(body, where, StoreFileError)))
        except ValidationError as exc:  # a row written by something else than CDA's store
            raise StoreFileError(f"{where}: not an event CDA wrote ({exc.error_count()} problem(s))") from None
    return events


def check_event_file(path: Path | str) -> None:
    """Raise :class:`~cda.actions.store_file.StoreFileError` unless ``path`` is CDA's own file
    (read-only, no trace left)."""
    read_store(path, LOG_FORMAT, lambda conn: None)


def read_events(path: Path | str, action_id: str, last_event_id: int | None = None) -> list[ActionEvent]:
    """:meth:`EventStore.since` on the file at ``path``, read-only and without a trace; a file
    that does not exist yet holds no events, one that is not CDA's (or not SQLite) is a
    :class:`~cda.actions.store_file.StoreFileError`."""
    if not Path(path).exists():
        return []

    # recognised at every read: the file may have been replaced since the server started
    return read_store(path, LOG_FORMAT, lambda conn: _since(conn, action_id, last_event_id))
