"""Sessions on disk: one SQLite file in WAL mode, a row per session and a row per step.

The ``sessions`` row is the investigation's memory block (docs/investigate.md) (``session_id, task_id,
focus_subsystem, global_invariants, candidate_hypotheses, selected_hypothesis_id, next_probe,
updated_at_utc``) plus what a restart needs to rebuild the solver (the problem text, the
backend). The ``steps`` table is the trace: one row per start, observation, undo and close.

A step is computed in memory first and written in one transaction (the step's row and the new
memory block together, fsynced: :attr:`cda.store.Durability.FULL`): a process killed while
computing leaves the session as it was before the step, one killed while writing leaves it
before or after, never between.

The file is :data:`INVESTIGATIONS_FORMAT` (opened, marked "CDAI" and migrated by
:mod:`cda.store`, as every CDA file): another program's file, another CDA product's (a receipt
log), a text file or a folder is refused by name and left as it was. A reader
(``SessionStore(path, read_only=True)``: ``cda investigate status|history``) never creates or
changes the file. The ``owners`` table is the server's (who started a session over the ToolBus:
:mod:`cda.service.investigations`). A file an earlier CDA wrote (unmarked, these tables)
is recognised and marked when a writer opens it.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from cda.errors import CDAError
from cda.store import INVESTIGATIONS_MARK, FileFormat, Store, columns_of, open_store, read_store, tables_of

__all__ = ["INVESTIGATIONS_FORMAT", "Note", "SessionMoved", "SessionStore", "StoredSession", "StoredStep", "UnknownSession"]

T = TypeVar("T")

_SESSIONS = """
CREATE TABLE IF NOT EXISTS sessions (
    session_id TEXT PRIMARY KEY,
    task_id TEXT NOT NULL,
    problem TEXT NOT NULL,
    filename TEXT,
    ken TEXT,
    backend TEXT NOT NULL,
    top INTEGER NOT NULL,
    closed INTEGER NOT NULL DEFAULT 0,
    last_step INTEGER NOT NULL,
    focus_subsystem TEXT,
    global_invariants TEXT NOT NULL,
    candidate_hypotheses TEXT NOT NULL,
    selected_hypothesis_id TEXT,
    next_probe TEXT,
    updated_at_utc TEXT NOT NULL,
    memory TEXT NOT NULL
)"""
_STEPS = """
CREATE TABLE IF NOT EXISTS steps (
    session_id TEXT NOT NULL REFERENCES sessions(session_id),
    step INTEGER NOT NULL,
    kind TEXT NOT NULL,
    observation TEXT,
    undoes INTEGER,
    trace TEXT NOT NULL,
    at_utc TEXT NOT NULL,
    PRIMARY KEY (session_id, step)
)"""
_OWNERS = "CREATE TABLE IF NOT EXISTS owners (session_id TEXT PRIMARY KEY, owner TEXT NOT NULL)"
_TABLES = {"sessions": _SESSIONS, "steps": _STEPS, "owners": _OWNERS}
# version 3: a team's sessions (docs/investigate.md, "Two analysts"): each step's author, reason and
# revision of the model; the members a session is shared with; free-text notes on any step
_TEAM = (
    "ALTER TABLE steps ADD COLUMN author TEXT",
    "ALTER TABLE steps ADD COLUMN reason TEXT",
    "ALTER TABLE steps ADD COLUMN revision TEXT",
    "CREATE TABLE IF NOT EXISTS members (session_id TEXT NOT NULL, member TEXT NOT NULL, added_by TEXT NOT NULL, "
    "at_utc TEXT NOT NULL, PRIMARY KEY (session_id, member))",
    "CREATE TABLE IF NOT EXISTS notes (session_id TEXT NOT NULL, step INTEGER NOT NULL, author TEXT NOT NULL, "
    "text TEXT NOT NULL, at_utc TEXT NOT NULL)",
)


def _legacy(conn: sqlite3.Connection, app_id: int, version: int, where: str) -> int | None:
    """A file an earlier CDA wrote: unmarked, its tables some of these, each of this shape."""
    if app_id != 0 or version != 0:
        return None
    tables = tables_of(conn)
    if not tables or set(tables) - set(_TABLES) or "sessions" not in tables:
        return None
    have = {t: [tuple(r[1:]) for r in conn.execute(f"PRAGMA table_info({t})")] for t in tables}
    return 0 if all(have[t] == columns_of(_TABLES[t].strip()) for t in tables) else None


INVESTIGATIONS_FORMAT = FileFormat("a CDA investigations file", INVESTIGATIONS_MARK,
                                   ((_SESSIONS, _STEPS), (_OWNERS,), _TEAM), legacy=_legacy)
"""The investigations file, as :mod:`cda.store` opens it: version 1 the sessions and their steps,
version 2 the server's ``owners``, version 3 a team's (authors, reasons, revisions, members, notes)."""


class UnknownSession(CDAError, KeyError):
    """No session by that id in this store."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else "unknown session"


class SessionMoved(CDAError):
    """Another process wrote a step of this session since this one read it."""


@dataclass(frozen=True)
class StoredSession:
    session_id: str
    task_id: str
    problem: str
    filename: str | None
    ken: str | None
    backend: str
    top: int
    closed: bool
    last_step: int
    memory: dict[str, Any]


@dataclass(frozen=True)
class StoredStep:
    """One row of ``steps``. ``revision``: a revise step's ``{"add": [...], "retract": [...]}``."""

    step: int
    kind: str
    observation: str | None
    undoes: int | None
    trace: dict[str, Any]
    at_utc: str
    author: str | None = None
    reason: str | None = None
    revision: dict[str, list[str]] | None = None


@dataclass(frozen=True)
class Note:
    step: int
    author: str
    text: str
    at_utc: str


class SessionStore:
    """The sessions of one SQLite file (``":memory:"`` for a session that lives in this process).

    ``read_only``: the file must exist and is only read (each read a fresh snapshot); otherwise it
    is opened for writing, created when missing unless ``create`` is False."""

    def __init__(self, path: str | Path, *, read_only: bool = False, create: bool = True) -> None:
        self.path = str(path)
        self._store: Store | None = None
        if read_only and self.path != ":memory:":
            read_store(self.path, INVESTIGATIONS_FORMAT, lambda conn: None)  # missing or foreign: refused now
        else:
            self._store = open_store(path, INVESTIGATIONS_FORMAT, create=create)

    def _read(self, read: Callable[[sqlite3.Connection], T]) -> T:
        if self._store is None:
            return read_store(self.path, INVESTIGATIONS_FORMAT, read)
        with self._store.lock:
            return read(self._store.conn)

    def _writer(self) -> Store:
        if self._store is None:
            raise CDAError(f"{self.path} was opened to be read only")
        return self._store

    def close(self) -> None:
        if self._store is not None:
            self._store.close()

    def create(self, session: StoredSession, trace: dict[str, Any], at: str, *, author: str | None = None) -> None:
        self._write(session, StoredStep(0, "start", None, None, trace, at, author), insert=True)

    def step(self, session: StoredSession, step: StoredStep) -> None:
        self._write(session, step, insert=False)

    def _write(self, s: StoredSession, step: StoredStep, *, insert: bool) -> None:
        m = s.memory
        row = (s.task_id, s.problem, s.filename, s.ken, s.backend, s.top, int(s.closed), s.last_step,
               m.get("focus_subsystem"), json.dumps(m.get("global_invariants", [])),
               json.dumps(m.get("candidate_hypotheses", [])), m.get("selected_hypothesis_id"), m.get("next_probe"),
               m["updated_at_utc"], json.dumps(m, sort_keys=True), s.session_id)
        with self._writer().transaction() as c:
            if insert:
                c.execute("INSERT INTO sessions (task_id, problem, filename, ken, backend, top, closed, last_step, "
                          "focus_subsystem, global_invariants, candidate_hypotheses, selected_hypothesis_id, "
                          "next_probe, updated_at_utc, memory, session_id) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)", row)
            else:  # optimistic: the step this one follows must still be the last one written
                current = c.execute("SELECT last_step FROM sessions WHERE session_id=?", (s.session_id,)).fetchone()
                if current is None or current[0] != step.step - 1:
                    raise SessionMoved(
                        f"investigation {s.session_id} moved on (step {current[0] if current else '?'} was written by another "
                        f"process since this one opened it at step {step.step - 1}): reopen it")
                c.execute("UPDATE sessions SET task_id=?, problem=?, filename=?, ken=?, backend=?, top=?, closed=?, "
                          "last_step=?, focus_subsystem=?, global_invariants=?, candidate_hypotheses=?, "
                          "selected_hypothesis_id=?, next_probe=?, updated_at_utc=?, memory=? WHERE session_id=?", row)
            c.execute("INSERT INTO steps (session_id, step, kind, observation, undoes, trace, at_utc, author, reason, "
                      "revision) VALUES (?,?,?,?,?,?,?,?,?,?)",
                      (s.session_id, step.step, step.kind, step.observation, step.undoes,
                       json.dumps(step.trace, sort_keys=True), step.at_utc, step.author, step.reason,
                       None if step.revision is None else json.dumps(step.revision, sort_keys=True)))

    def load(self, session_id: str) -> StoredSession:
        row = self._read(lambda conn: conn.execute(
            "SELECT session_id, task_id, problem, filename, ken, backend, top, closed, last_step, memory "
            "FROM sessions WHERE session_id=?", (session_id,)).fetchone())
        if row is None:
            raise UnknownSession(f"no investigation {session_id!r} in {self.path}")
        return StoredSession(row[0], row[1], row[2], row[3], row[4], row[5], row[6], bool(row[7]), row[8],
                             json.loads(row[9]))

    def last_step(self, session_id: str) -> int:
        """The last step written (what another process may have moved on since this one read it)."""
        row = self._read(lambda conn: conn.execute("SELECT last_step FROM sessions WHERE session_id=?",
                                                   (session_id,)).fetchone())
        if row is None:
            raise UnknownSession(f"no investigation {session_id!r} in {self.path}")
        return int(row[0])

    def steps(self, session_id: str) -> list[StoredStep]:
        rows = self._read(lambda conn: conn.execute(
            "SELECT step, kind, observation, undoes, trace, at_utc, author, reason, revision FROM steps "
            "WHERE session_id=? ORDER BY step", (session_id,)).fetchall())
        return [StoredStep(r[0], r[1], r[2], r[3], json.loads(r[4]), r[5], r[6], r[7],
                           None if r[8] is None else json.loads(r[8])) for r in rows]

    def trace(self, session_id: str, step: int) -> dict[str, Any] | None:
        row = self._read(lambda conn: conn.execute("SELECT trace FROM steps WHERE session_id=? AND step=?",
                                                   (session_id, step)).fetchone())
        return None if row is None else json.loads(row[0])  # type: ignore[no-any-return]

    def in_force(self, session_id: str) -> list[StoredStep]:
        """The observe and revise steps in force (taken and not undone), in order."""
        steps = self.steps(session_id)
        undone = {s.undoes for s in steps if s.kind == "undo"}
        return [s for s in steps if s.kind in ("observe", "revise") and s.step not in undone]

    # ---- a team's session: members and notes
    def members(self, session_id: str) -> list[str]:
        rows = self._read(lambda conn: conn.execute("SELECT member FROM members WHERE session_id=? ORDER BY at_utc, "
                                                    "member", (session_id,)).fetchall())
        return [str(r[0]) for r in rows]

    def add_member(self, session_id: str, member: str, added_by: str, at: str) -> None:
        with self._writer().transaction() as conn:
            conn.execute("INSERT OR IGNORE INTO members (session_id, member, added_by, at_utc) VALUES (?, ?, ?, ?)",
                         (session_id, member, added_by, at))

    def notes(self, session_id: str) -> list[Note]:
        rows = self._read(lambda conn: conn.execute("SELECT step, author, text, at_utc FROM notes WHERE session_id=? "
                                                    "ORDER BY rowid", (session_id,)).fetchall())
        return [Note(int(r[0]), str(r[1]), str(r[2]), str(r[3])) for r in rows]

    def add_note(self, session_id: str, note: Note) -> None:
        with self._writer().transaction() as conn:
            conn.execute("INSERT INTO notes (session_id, step, author, text, at_utc) VALUES (?, ?, ?, ?, ?)",
                         (session_id, note.step, note.author, note.text, note.at_utc))

    # ---- the server's owners of sessions (cda.service.investigations)
    def owner(self, session_id: str) -> str | None:
        """The principal who started ``session_id`` over the ToolBus (None: none recorded)."""
        row = self._read(lambda conn: conn.execute("SELECT owner FROM owners WHERE session_id=?",
                                                   (session_id,)).fetchone())
        return None if row is None else str(row[0])

    def set_owner(self, session_id: str, owner: str) -> None:
        with self._writer().transaction() as conn:
            conn.execute("INSERT INTO owners (session_id, owner) VALUES (?, ?)", (session_id, owner))
