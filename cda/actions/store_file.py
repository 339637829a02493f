"""The schema of CDA's log file: the receipt log, the event store and the reflection store.

One SQLite file (``cda run --out DIR`` writes ``DIR/receipts.sqlite``; ``cda serve DB`` serves
one) holds the receipt log (:mod:`cda.actions.receipts`), the event store
(:class:`cda.adapters.event_store.EventStore`) and the reflection store
(:mod:`cda.actions.reflection`). It is opened, marked and migrated by :mod:`cda.store` as
:data:`LOG_FORMAT`: ``PRAGMA application_id`` "CDA1", ``PRAGMA user_version`` the number of
migrations applied (:data:`MIGRATIONS`).

Every object of the file is spelled out here as SQLite keeps its ``CREATE`` statement (``IF NOT
EXISTS`` is not kept), because ``cda receipts verify`` compares the file with them word for word
(:mod:`cda.actions.audit`): an added trigger, view or index, or an altered one, is tampering.

A file written before the mark existed (no ``application_id``, every table one of
:data:`TABLES` or :data:`LEGACY_TABLES` word for word, no view) is CDA's and is migrated; a
file marked "CDA1" by an older CDA's conductor or jobs runner (which shared this mark) is theirs,
not a log, and is refused here.

>>> import tempfile, pathlib
>>> from cda.store import open_store
>>> path = pathlib.Path(tempfile.mkdtemp()) / "cda.sqlite"
>>> store = open_store(path, LOG_FORMAT)
>>> sorted(store.conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall())
[('events',), ('receipts',), ('reflection_meta',), ('reflection_traces',)]
>>> store.close()
"""

from __future__ import annotations

import sqlite3

from cda.store import RECEIPT_LOG_MARK, FileFormat, tables_of

__all__ = [
    "APPLICATION_ID",
    "EVENT_SCHEMA",
    "GENESIS_HASH",
    "LEGACY_TABLES",
    "LOG_FORMAT",
    "MIGRATIONS",
    "RECEIPTS_SCHEMA",
    "REFLECTION_SCHEMA",
    "TABLES",
    "TRIGGERS",
]

APPLICATION_ID = RECEIPT_LOG_MARK
"""``PRAGMA application_id`` of CDA's log file: the bytes of "CDA1"."""

GENESIS_HASH = "0" * 64
"""The ``prev_hash`` of the first entry of a chain, and the head of an empty log."""

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
"""Every table of the log file, as SQLite keeps its ``CREATE`` statement."""

LEGACY_TABLES: dict[str, str] = {
    "events": (
        "CREATE TABLE events (action_id TEXT NOT NULL, seq INTEGER NOT NULL, "
        "stored_at REAL NOT NULL, body TEXT NOT NULL, PRIMARY KEY (action_id, seq))"
    ),
}
"""Tables as log format 1 wrote them (events without attempts or a chain): still recognised as
CDA's, and migrated to :data:`TABLES`' by migration 2."""

# The trigger texts are compared verbatim by verify(): SQLite keeps the CREATE statement as written.
TRIGGERS: dict[str, str] = {
    "receipts_no_update": (
        "CREATE TRIGGER receipts_no_update BEFORE UPDATE ON receipts "
        "BEGIN SELECT RAISE(ABORT, 'receipts are append-only: UPDATE refused'); END"
    ),
    "receipts_no_delete": (
        "CREATE TRIGGER receipts_no_delete BEFORE DELETE ON receipts "
        "BEGIN SELECT RAISE(ABORT, 'receipts are append-only: DELETE refused'); END"
    ),
    # An INSERT must extend the chain: next seq, previous hash, a rowid after the last. This also
    # closes INSERT OR REPLACE, whose implicit delete does not fire the DELETE trigger.
    "receipts_extend_only": (
        "CREATE TRIGGER receipts_extend_only BEFORE INSERT ON receipts "
        "WHEN NEW.seq IS NOT COALESCE((SELECT MAX(seq) FROM receipts), -1) + 1 "
        "OR NEW.prev_hash IS NOT COALESCE((SELECT entry_hash FROM receipts ORDER BY rowid DESC LIMIT 1), "
        f"'{GENESIS_HASH}') "
        "OR (NEW.rowid <> -1 AND NEW.rowid <= COALESCE((SELECT MAX(rowid) FROM receipts), 0)) "
        "BEGIN SELECT RAISE(ABORT, 'receipts are append-only: an entry must extend the chain'); END"
    ),
}
"""The receipt log's triggers: UPDATE and DELETE refused, an INSERT must extend the chain."""

RECEIPTS_SCHEMA = (
    TABLES["receipts"],
    "CREATE INDEX receipts_by_action ON receipts (action_id, rowid)",
    *TRIGGERS.values(),
)
"""The receipt log: its table, index and triggers."""

EVENT_SCHEMA = (
    TABLES["events"],
    "CREATE TRIGGER events_no_update BEFORE UPDATE ON events "
    "BEGIN SELECT RAISE(ABORT, 'events are append-only: UPDATE refused'); END",
)
"""The events table and its trigger."""

REFLECTION_SCHEMA = (TABLES["reflection_traces"], TABLES["reflection_meta"])
"""The reflection store's tables."""


def _events_chained(conn: sqlite3.Connection) -> None:
    """Format 2: format 1's events (no attempts, no chain) become attempt 1 of their action, chained."""
    from cda.actions.event_chain import event_chain

    row = conn.execute("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'events'").fetchone()
    if row is None or row[0] != LEGACY_TABLES["events"]:
        return
    rows = conn.execute("SELECT action_id, seq, body FROM events ORDER BY action_id, seq").fetchall()
    conn.execute("DROP TABLE events")
    for statement in EVENT_SCHEMA:
        conn.execute(statement)
    prev: dict[str, str] = {}
    for action_id, seq, body in rows:
        before = prev.get(action_id, GENESIS_HASH)
        digest = event_chain([str(body)], before)[0]
        conn.execute("INSERT INTO events VALUES (?, 1, ?, ?, ?, ?)", (action_id, seq, body, before, digest))
        prev[action_id] = digest


def _every_table(conn: sqlite3.Connection) -> None:
    """Format 3: every table of the file, each made with its index and triggers when it is
    missing (formats 1 and 2 made each on first use). A table that is there is left exactly as it
    is: a trigger dropped from it is evidence for ``cda receipts verify``, never restored here."""
    have = tables_of(conn)
    for table, schema in (("receipts", RECEIPTS_SCHEMA), ("events", EVENT_SCHEMA),
                          ("reflection_traces", REFLECTION_SCHEMA[:1]), ("reflection_meta", REFLECTION_SCHEMA[1:])):
        if table not in have:
            for statement in schema:
                conn.execute(statement)


MIGRATIONS = (
    (),  # format 1: each store made its own tables on first use (format 3 makes them all)
    _events_chained,
    _every_table,
)
"""The log file's migrations, in order (see :class:`cda.store.FileFormat`)."""


def _ours(tables: dict[str, str]) -> list[str]:
    """The tables that are not the log file's, word for word."""
    return sorted(name for name, sql in tables.items() if sql not in (TABLES.get(name), LEGACY_TABLES.get(name)))


def _legacy(conn: sqlite3.Connection, app_id: int, version: int, where: str) -> int | None:
    """A log written before the mark existed: unmarked, at least one table, each of them the
    log's, word for word, and no view."""
    if app_id != 0 or version != 0:
        return None
    tables = tables_of(conn)
    views = conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'view'").fetchone()
    return 0 if tables and not _ours(tables) and views is None else None


def _check(conn: sqlite3.Connection) -> str | None:
    """A file marked "CDA1" by an older CDA's conductor or jobs runner (which shared the mark) is
    theirs. (Any other table beside the log's is left for ``cda receipts verify`` to report.)"""
    tables = tables_of(conn)
    if "requests" in tables and "receipts" not in tables:
        return "it is a conductor IR database an older CDA marked as its log"
    if "job_results" in tables:
        return "it is a jobs results file an older CDA marked as its log"
    return None


LOG_FORMAT = FileFormat("a CDA receipt log", APPLICATION_ID, MIGRATIONS, legacy=_legacy, check=_check)
"""CDA's log file, as :mod:`cda.store` opens it."""
