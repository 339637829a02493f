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

from cda.actions.store_file import LOG_FORMAT
from cda.contracts.events import ActionNotice, parse_event
from cda.contracts.receipt import canonical_json
from cda.store import Durability, connect_read_only, open_store

__all__ = ["POST_TERMINAL", "TERMINAL", "StoredEvent", "ended", "last_events", "latest_attempt", "read_after", "read_stream", "started_without_events",
           "sweep"]

TERMINAL = frozenset({"action_completed", "action_partial", "action_failed"})
POST_TERMINAL = frozenset({"action_update_available"})
"""Events that follow an attempt's terminal event: a revision offered to a consumer that has
ended (docs/service.md, "Sub-actions"). An attempt whose last event is one of these has ended."""

_RUN_EVENT = "(NOT json_valid(body) OR json_extract(body, '$.type') IS NOT 'action_update_available')"
"""SQL: a stored row that is not a :data:`POST_TERMINAL` event (the run's own last event is the
last row that passes)."""


@dataclass(frozen=True)
class StoredEvent:
    """One event as a stream sends it: its ``seq``, its SSE name, its JSON text and the attempt
    (the run of its action id) it belongs to; its SSE id is :attr:`sse_id`."""

    seq: int
    type: str
    data: str
    attempt: int = 1

    @property
    def sse_id(self) -> str:
        """``seq`` for a first attempt (as ever); ``attempt:seq`` for a re-run, so a client's
        ``Last-Event-ID`` names the attempt it followed and its resume never crosses into another."""
        return str(self.seq) if self.attempt == 1 else f"{self.attempt}:{self.seq}"


_LATEST = "attempt = (SELECT MAX(attempt) FROM events AS a WHERE a.action_id = events.action_id)"
"""Store format 2 (issue 13) keeps every attempt of an action id; a stream is its latest one
(as :meth:`~cda.adapters.event_store.EventStore.since` serves it)."""


def _connect(db: Path) -> sqlite3.Connection:
    """A read-only connection (the server's writer is live, so it adds no file beside the log)."""
    return connect_read_only(f"{db.resolve().as_uri()}?mode=ro", db)


def decode(action_id: str, seq: int, body: str, attempt: int = 1) -> StoredEvent:
    """A stored row as a stream message; a row that is not a CDA event becomes a notice."""
    try:
        event = parse_event(json.loads(body))
        if event.action_id != action_id or event.seq != seq or (event.attempt or 1) != attempt:
            raise ValueError("its action id, attempt or seq does not match its row")
        return StoredEvent(seq, event.type, body, attempt)
    except (ValueError, ValidationError, TypeError) as exc:
        reason = type(exc).__name__
        notice = ActionNotice(action_id=action_id, seq=seq, level="warning",
                              message=f"event {seq} of this action could not be read ({reason}): skipped")
        return StoredEvent(seq, notice.type, canonical_json(notice.model_dump(mode="json")), attempt)


def ended(events: list[StoredEvent]) -> StoredEvent | None:
    """The terminal event of an attempt's ``events`` (in order) when it has ended: its last event
    that is not :data:`POST_TERMINAL`, if that is terminal; None while it runs."""
    for event in reversed(events):
        if event.type not in POST_TERMINAL:
            return event if event.type in TERMINAL else None
    return None


def read_stream(db: Path, action_id: str, after: int | None = None, attempt: int | None = None) -> list[StoredEvent]:
    """The events of ``action_id``'s latest attempt (or of ``attempt``) after ``after`` (all for
    None), in order; [] for none."""
    if not db.exists():
        return []
    conn = _connect(db)
    which = _LATEST if attempt is None else "attempt = ?"
    try:
        rows = conn.execute(f"SELECT seq, body, attempt FROM events WHERE action_id = ? AND seq > ? AND {which} "
                            "ORDER BY seq", (action_id, -1 if after is None else after,
                                             *(() if attempt is None else (attempt,)))).fetchall()
    except sqlite3.OperationalError:  # no events table yet
        return []
    finally:
        conn.close()
    return [decode(action_id, int(seq), str(body), int(n)) for seq, body, n in rows]


def read_after(db: Path, action_id: str, attempt: int, seq: int) -> list[StoredEvent]:
    """The events of ``action_id`` after the cursor (``attempt``, ``seq``): the rest of that
    attempt, then any newer attempt, in order (what a watcher that has seen up to there needs)."""
    if not db.exists():
        return []
    conn = _connect(db)
    try:
        rows = conn.execute("SELECT seq, body, attempt FROM events WHERE action_id = ? AND "
                            "(attempt > ? OR (attempt = ? AND seq > ?)) ORDER BY attempt, seq",
                            (action_id, attempt, attempt, seq)).fetchall()
    except sqlite3.OperationalError:  # no events table yet
        return []
    finally:
        conn.close()
    return [decode(action_id, int(s), str(body), int(n)) for s, body, n in rows]


def latest_attempt(db: Path, action_id: str) -> int | None:
    """The number of ``action_id``'s latest attempt that has events (None: none)."""
    if not db.exists():
        return None
    conn = _connect(db)
    try:
        row = conn.execute("SELECT MAX(attempt) FROM events WHERE action_id = ?", (action_id,)).fetchone()
    except sqlite3.OperationalError:
        return None
    finally:
        conn.close()
    return None if row is None or row[0] is None else int(row[0])


def last_events(db: Path) -> dict[str, StoredEvent]:
    """The last stored event of every action's run (what a restart checks for unfinished runs):
    :data:`POST_TERMINAL` events after it are not the run's."""
    if not db.exists():
        return {}
    conn = _connect(db)
    try:
        rows = conn.execute(
            "SELECT e.action_id, e.seq, e.body, e.attempt FROM events e JOIN "
            "(SELECT action_id, attempt, MAX(seq) AS m FROM events AS events "
            f"WHERE {_LATEST} AND {_RUN_EVENT} GROUP BY action_id) l "
            "ON e.action_id = l.action_id AND e.attempt = l.attempt AND e.seq = l.m").fetchall()
    except sqlite3.OperationalError:
        return {}
    finally:
        conn.close()
    return {str(a): decode(str(a), int(s), str(b), int(n)) for a, s, b, n in rows}


def started_without_events(db: Path) -> list[tuple[str, int]]:
    """Attempts the service began (a ``service.start`` receipt) that stored no event: a crash
    between the answer and the attempt's first event; (action id, attempt), the attempt 1 for a
    receipt of a server that did not number them."""
    if not db.exists():
        return []
    conn = _connect(db)
    try:
        rows = conn.execute(
            "SELECT s.action_id, s.n FROM (SELECT action_id, MAX(COALESCE(json_extract(body, '$.attempt'), 1)) AS n "
            "FROM receipts WHERE json_extract(body, '$.name') = 'service.start' GROUP BY action_id) s "
            "WHERE s.n > COALESCE((SELECT MAX(attempt) FROM events WHERE events.action_id = s.action_id), 0)"
        ).fetchall()
    except sqlite3.OperationalError:
        return []
    finally:
        conn.close()
    return sorted((str(a), int(n)) for a, n in rows)


def sweep(db: Path, retention_s: float, now: float | None = None) -> int:
    """Delete the events of finished actions whose last event is older than ``retention_s``.

    A running action's events are kept whatever their age (its stream must stay complete). Age is
    the events' own ``ts`` (store format 2 has no ``stored_at``); whole attempts go, never a part
    of one (that would look tampered to ``cda receipts verify``), and never the attempt the signed
    head beside the file vouches for (deleting it is tampering: the head says those events exist).

    *Streams without a time.* A server before every event had its ``ts`` stored the service's own
    events (sub-action revisions, waits, notices) with ``ts: null``, so some streams have no time
    at all. Their rows cannot be changed (a trigger refuses it, and the chain covers the body),
    so their age is bounded from the file: events are only appended, so the first dated event
    stored after such a stream's last row was emitted after it ended, and the stream is aged by
    that event's ``ts``. One with no dated event after it is kept (its age is unknown).
    """
    cutoff = (time.time() if now is None else now) - retention_s
    vouched = _vouched(db)
    store = open_store(db, LOG_FORMAT, durability=Durability.NORMAL)  # the server's own file, recognised
    conn = store.conn
    try:
        groups = conn.execute(
            "SELECT action_id, MAX(attempt), MAX(CASE WHEN json_valid(body) THEN json_extract(body, '$.ts') END), "
            "MAX(rowid) FROM events GROUP BY action_id").fetchall()
        # every age first: a dated stream deleted below may be what dates an undated one before it
        aged = [(a, attempt, _dated_after(conn, int(last_row)) if ts is None else ts)
                for a, attempt, ts, last_row in groups]
        removed = 0
        for action_id, attempt, ts in aged:
            if not isinstance(ts, int | float) or not ts < cutoff:
                continue
            last = conn.execute(f"SELECT seq, body FROM events WHERE action_id = ? AND attempt = ? AND {_RUN_EVENT} "
                                "ORDER BY seq DESC LIMIT 1", (action_id, attempt)).fetchone()
            if last is None or decode(action_id, last[0], last[1], attempt).type not in TERMINAL:
                continue
            keep = vouched[1] if vouched is not None and vouched[0] == action_id else None
            removed += conn.execute("DELETE FROM events WHERE action_id = ? AND attempt IS NOT ?",
                                    (action_id, keep)).rowcount
        return removed
    finally:
        store.close()


def _dated_after(conn: sqlite3.Connection, row: int) -> float | None:
    """The ``ts`` of the first event stored after rowid ``row`` that has one (None: none has)."""
    found = conn.execute(
        "SELECT json_extract(body, '$.ts') FROM events WHERE rowid > ? AND json_valid(body) "
        "AND json_type(body, '$.ts') IN ('real', 'integer') ORDER BY rowid LIMIT 1", (row,)).fetchone()
    return None if found is None else float(found[0])


def _vouched(db: Path) -> tuple[str, int] | None:
    """The (action id, attempt) whose events the signed head beside ``db`` covers, if any."""
    from cda.keys.signing import SigningError, head_path, read_head

    path = head_path(db)
    if not path.exists():
        return None
    try:
        doc = read_head(path)
    except SigningError:
        return None  # not ours to judge here: `cda receipts verify` reports it
    return (str(doc["action_id"]), int(doc["attempt"])) if doc["phase"] == "end" else None
