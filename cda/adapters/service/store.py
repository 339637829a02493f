"""The service's reads of the event store: tolerant of a bad row, cheap, and the restart sweep.

The writer is :class:`~cda.adapters.event_store.EventStore` (one per running action); these
functions only read, through a fresh read-only connection (WAL: a reader never blocks the
writer). A stored row CDA cannot parse does not kill its stream: it is served as an
``action_notice`` under the same id, so a client's timeline keeps its numbering.
"""

from __future__ import annotations

import json
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path

from pydantic import ValidationError

from cda.contracts.events import ActionNotice, parse_event
from cda.contracts.receipt import canonical_json

__all__ = ["TERMINAL", "StoredEvent", "last_events", "read_stream", "started_without_events", "sweep"]

TERMINAL = frozenset({"action_completed", "action_partial", "action_failed"})


@dataclass(frozen=True)
class StoredEvent:
    """One event as a stream sends it: its id (``seq``), its SSE name and its JSON text."""

    seq: int
    type: str
    data: str


def _connect(db: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30, check_same_thread=False)
    conn.execute("PRAGMA query_only = 1")
    return conn


def decode(action_id: str, seq: int, body: str) -> StoredEvent:
    """A stored row as a stream message; a row that is not a CDA event becomes a notice."""
    try:
        event = parse_event(json.loads(body))
        if event.action_id != action_id or event.seq != seq:
            raise ValueError("its action id or seq does not match its row")
        return StoredEvent(seq, event.type, body)
    except (ValueError, ValidationError, TypeError) as exc:
        reason = type(exc).__name__
        notice = ActionNotice(action_id=action_id, seq=seq, level="warning",
                              message=f"event {seq} of this action could not be read ({reason}): skipped")
        return StoredEvent(seq, notice.type, canonical_json(notice.model_dump(mode="json")))


def read_stream(db: Path, action_id: str, after: int | None = None) -> list[StoredEvent]:
    """The events of ``action_id`` after ``after`` (all for None), in order; [] for none."""
    if not db.exists():
        return []
    conn = _connect(db)
    try:
        rows = conn.execute("SELECT seq, body FROM events WHERE action_id = ? AND seq > ? ORDER BY seq",
                            (action_id, -1 if after is None else after)).fetchall()
    except sqlite3.OperationalError:  # no events table yet
        return []
    finally:
        conn.close()
    return [decode(action_id, int(seq), str(body)) for seq, body in rows]


def last_events(db: Path) -> dict[str, StoredEvent]:
    """The last stored event of every action (what a restart checks for unfinished runs)."""
    if not db.exists():
        return {}
    conn = _connect(db)
    try:
        rows = conn.execute(
            "SELECT e.action_id, e.seq, e.body FROM events e JOIN "
            "(SELECT action_id, MAX(seq) AS m FROM events GROUP BY action_id) l "
            "ON e.action_id = l.action_id AND e.seq = l.m").fetchall()
    except sqlite3.OperationalError:
        return {}
    finally:
        conn.close()
    return {str(a): decode(str(a), int(s), str(b)) for a, s, b in rows}


def started_without_events(db: Path) -> list[str]:
    """Actions the service acknowledged (a ``service.start`` receipt) that stored no event: a
    crash between the answer and the run's first event."""
    if not db.exists():
        return []
    conn = _connect(db)
    try:
        rows = conn.execute(
            "SELECT DISTINCT action_id FROM receipts WHERE json_extract(body, '$.name') = 'service.start' "
            "AND action_id NOT IN (SELECT action_id FROM events)").fetchall()
    except sqlite3.OperationalError:
        return []
    finally:
        conn.close()
    return sorted(str(a) for (a,) in rows)


def sweep(db: Path, retention_s: float, now: float | None = None) -> int:
    """Delete the events of finished actions whose last event is older than ``retention_s``.

    A running action's events are kept whatever their age (its stream must stay complete).
    """
    cutoff = (time.time() if now is None else now) - retention_s
    conn = sqlite3.connect(str(db), timeout=30, isolation_level=None)
    try:
        old = conn.execute(
            "SELECT action_id, MAX(seq), MAX(stored_at) FROM events GROUP BY action_id HAVING MAX(stored_at) < ?",
            (cutoff,)).fetchall()
        removed = 0
        for action_id, seq, _ in old:
            row = conn.execute("SELECT body FROM events WHERE action_id = ? AND seq = ?", (action_id, seq)).fetchone()
            if decode(action_id, seq, row[0]).type not in TERMINAL:
                continue
            removed += conn.execute("DELETE FROM events WHERE action_id = ?", (action_id,)).rowcount
        return removed
    finally:
        conn.close()
