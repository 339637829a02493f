"""The finished runs a CDA store holds, each with its metrics (docs/operations.md): what ``cda metrics`` reads.

``cda run --out DIR`` and ``cda serve DB`` write the same SQLite file (:mod:`cda.actions.store_file`):
receipts, events and traces. Every attempt of an action ends with one terminal event
(``action_completed``, ``action_partial`` or ``action_failed``), and the runner puts the
attempt's whole :class:`~cda.contracts.metrics.ActionMetrics` in it (its wall-clock
measurements included), so one run is one terminal event row, and the store is read, never
written: :func:`~cda.store.read_snapshot` (read-only, no ``-wal``/``-shm`` left
behind), after :func:`~cda.store.recognise` (a file CDA did not create is refused).

A terminal event without metrics (the service's own ``action_failed`` for a cancelled or
interrupted action, a store written before metrics existed) is still a run: it counts in the
statuses and the partial ratio, and no distribution. A row that does not parse, or holds a number
no run could have written (a ``ts`` of ``1e400`` or ``NaN``, a metric that is not a whole
number), is skipped and reported as unreadable, never fatal. Each run is named ``action_id`` (``action_id#attempt`` from the second
attempt on). ``key`` is the row's SQLite rowid: it only grows as terminal events are appended,
which is what the service's ``metrics`` stream resumes by.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import ValidationError

from cda.actions.store_file import LOG_FORMAT
from cda.contracts.metrics import ActionMetrics
from cda.store import read_store

__all__ = ["TERMINAL_TYPES", "RunMetrics", "StoreRuns", "read_runs", "read_runs_conn", "run_of_row"]

TERMINAL_TYPES = ("action_completed", "action_partial", "action_failed")

# A row SQLite cannot read as JSON (a NaN written by hand, a torn row) is selected too (CASE is
# evaluated lazily: json_extract never sees it) and judged in Python: a terminal event there is
# reported as unreadable, anything else is left alone.
_QUERY = ("SELECT rowid, action_id, attempt, body, json_valid(body) FROM events WHERE rowid > ? AND "
          "CASE WHEN json_valid(body) THEN json_extract(body, '$.type') IN (?, ?, ?) "
          "AND (? IS NULL OR json_extract(body, '$.ts') >= ?) ELSE 1 END ORDER BY rowid")


_LAST_TS = 253_402_300_799.0  # 9999-12-31T23:59:59Z: the last instant a report can print


@dataclass(frozen=True)
class RunMetrics:
    """One finished attempt: its name, status, when it ended and (when recorded) its metrics."""

    key: int
    action_id: str
    attempt: int
    status: str
    ended_at: float | None
    metrics: ActionMetrics | None

    @property
    def name(self) -> str:
        return self.action_id if self.attempt <= 1 else f"{self.action_id}#{self.attempt}"


@dataclass
class StoreRuns:
    """What a read found: the runs (in the order they ended) and the rows it could not read."""

    runs: list[RunMetrics] = field(default_factory=list)
    unreadable: list[str] = field(default_factory=list)
    last_key: int = 0


def _status(body: dict[str, object], kind: str, metrics: ActionMetrics | None) -> str:
    outputs = body.get("outputs")
    if isinstance(outputs, dict) and isinstance(outputs.get("status"), str):
        return str(outputs["status"])
    if metrics is not None:
        return metrics.status
    return {"action_completed": "completed", "action_partial": "partial"}.get(kind, "failed")


def run_of_row(key: int, action_id: str, attempt: int, text: str) -> RunMetrics:
    """One terminal event row as a run; ValueError (with the reason) for a row CDA did not write."""
    body = json.loads(text)
    if not isinstance(body, dict):
        raise ValueError("not a JSON object")
    kind = str(body.get("type"))
    raw = body.get("metrics")
    try:
        metrics = None if raw is None else ActionMetrics.model_validate(raw)
    except ValidationError as exc:
        raise ValueError(f"its metrics do not match ActionMetrics ({exc.error_count()} problem(s))") from None
    ts = body.get("ts")
    ended = float(ts) if isinstance(ts, int | float) and not isinstance(ts, bool) else None
    if ended is not None and not 0 <= ended <= _LAST_TS:  # NaN fails both comparisons
        raise ValueError(f"its ts ({str(ts)[:40]}) is not a time")
    return RunMetrics(key, action_id, attempt, _status(body, kind, metrics), ended, metrics)


def _terminal_to_python(text: object) -> bool:
    """Whether a row SQLite could not read as JSON is a terminal event to Python's reader."""
    try:
        body = json.loads(str(text))
    except (ValueError, RecursionError):
        return False
    return isinstance(body, dict) and body.get("type") in TERMINAL_TYPES


def read_runs_conn(conn: sqlite3.Connection, since: float | None = None, after_key: int = 0,
                   limit: int | None = None) -> StoreRuns:
    """The runs on an open connection whose row key is above ``after_key`` and that ended at or
    after ``since`` (Unix time; None: all); only reads. ``limit`` keeps the latest ones."""
    found = StoreRuns(last_key=after_key)
    table = conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'events'").fetchone()
    if table is None:
        return found  # a CDA file whose event store was never opened: no run yet
    columns = {str(row[1]) for row in conn.execute("PRAGMA table_info(events)").fetchall()}
    attempt = "attempt" if "attempt" in columns else "1"  # store format 1 had no attempts
    query = _QUERY.replace("action_id, attempt, body", f"action_id, {attempt}, body")
    rows = conn.execute(query, (after_key, *TERMINAL_TYPES, since, since)).fetchall()
    if limit is not None:
        rows = rows[-limit:]
    for key, action_id, number, text, valid in rows:
        found.last_key = max(found.last_key, int(key))
        if not valid and not _terminal_to_python(text):
            continue  # not a terminal event (nor JSON to Python either): not a run
        try:
            found.runs.append(run_of_row(int(key), str(action_id), int(number), str(text)))
        except (ValueError, TypeError, OverflowError, RecursionError) as exc:
            found.unreadable.append(f"the terminal event of {action_id} (attempt {number}): {exc}")
    return found


def read_runs(path: Path | str, since: float | None = None, after_key: int = 0,
              limit: int | None = None) -> StoreRuns:
    """:func:`read_runs_conn` on the CDA file at ``path``, read-only and without a trace; a
    missing file, one that is not SQLite, or one CDA did not create is a
    :class:`~cda.store.StoreFileError` that says which."""
    return read_store(path, LOG_FORMAT, lambda conn: read_runs_conn(conn, since, after_key, limit))
