"""The IR database: every piece of the conductor's state, in one SQLite file (WAL).

The conductor's rule (docs/conductor.md) is "all state lives in the IR DB, not in conductor memory": each step of the
loops reads what it needs from here and writes what it did before the next step starts, so a
conductor killed at any point (``kill -9``) resumes from the file alone. A tool run is written
as ``started`` before the tool runs and settled after, which is how a resumed conductor tells
a run cut short from one that finished.

The file is :data:`IR_FORMAT` (opened, marked "CDAC" and migrated by :mod:`cda.store`): a
foreign file, or another CDA product's (a receipt log), is refused before anything is written.
A file an earlier CDA made (marked with the receipt log's "CDA1", some of these tables, requests
perhaps without ``holder``) is brought up to date; one whose tables have another shape is refused
by name, left as it was. Writes use ``synchronous=NORMAL`` (:class:`cda.store.Durability`): in
WAL mode a commit survives a killed process (what resuming needs); only a power loss may drop the
last commits, and the loops then redo those steps.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from cda.conductor.tooling import ConductorError
from cda.contracts.conductor import (
    Assertion,
    ConductEvent,
    Obligation,
    ObligationStatus,
    Source,
    ToolRun,
    ToolRunStatus,
    Verification,
)
from cda.store import (
    CONDUCTOR_IR_MARK,
    RECEIPT_LOG_MARK,
    Durability,
    FileFormat,
    StoreFileError,
    columns_of,
    open_store,
    tables_of,
)

__all__ = ["IR_FORMAT", "IRDatabase", "canonical", "holder_id"]

TABLES: dict[str, str] = {
    "requests": (
        "CREATE TABLE requests (id INTEGER PRIMARY KEY, utterance TEXT NOT NULL, stage TEXT NOT NULL, "
        "status TEXT, answer TEXT, holder TEXT)"
    ),
    "obligations": (
        "CREATE TABLE obligations (id INTEGER PRIMARY KEY, request_id INTEGER NOT NULL, parent_id INTEGER, "
        "type TEXT NOT NULL, inputs TEXT NOT NULL, status TEXT NOT NULL, reason TEXT)"
    ),
    "tool_runs": (
        "CREATE TABLE tool_runs (id INTEGER PRIMARY KEY, obligation_id INTEGER NOT NULL, tool TEXT NOT NULL, "
        "inputs TEXT NOT NULL, outputs TEXT, status TEXT NOT NULL, detail TEXT, duration_ms REAL)"
    ),
    "sources": (
        "CREATE TABLE sources (id INTEGER PRIMARY KEY, kind TEXT NOT NULL, tool_run_id INTEGER, "
        "reference TEXT NOT NULL)"
    ),
    "assertions": (
        "CREATE TABLE assertions (id INTEGER PRIMARY KEY, request_id INTEGER NOT NULL, obligation_id INTEGER, "
        "key TEXT NOT NULL, value TEXT NOT NULL, source_id INTEGER NOT NULL)"
    ),
    "events": (
        "CREATE TABLE events (seq INTEGER PRIMARY KEY, request_id INTEGER NOT NULL, kind TEXT NOT NULL, "
        "body TEXT NOT NULL, at_utc TEXT NOT NULL)"
    ),
    "verifications": (
        "CREATE TABLE verifications (id INTEGER PRIMARY KEY, request_id INTEGER NOT NULL, "
        "obligation_id INTEGER NOT NULL, kind TEXT NOT NULL, ok INTEGER NOT NULL, detail TEXT NOT NULL)"
    ),
}
"""The conductor's tables. ``events.at_utc`` and ``tool_runs.duration_ms`` are the only
measured values, and the trace leaves both out."""


def _start_time(pid: int) -> str:
    """The kernel's start time of process ``pid`` (so a reused pid is not taken for the holder)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return ""
    return stat.rsplit(")", 1)[-1].split()[19]


def holder_id() -> str:
    """This conductor: ``pid:start time:token`` (a token per call, so two in one process differ)."""
    import secrets

    return f"{os.getpid()}:{_start_time(os.getpid())}:{secrets.token_hex(4)}"


def _alive(holder: str) -> bool:
    pid_text, start, _ = (holder.split(":") + ["", ""])[:3]
    try:
        pid = int(pid_text)
        os.kill(pid, 0)
    except (ValueError, ProcessLookupError):
        return False
    except PermissionError:  # another user's live process
        return True
    return _start_time(pid) == start


def canonical(value: Any) -> str:
    """JSON with sorted keys and no spaces: one text per value, so equal values store equal bytes."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


_INDICES = (
    "CREATE INDEX IF NOT EXISTS obligations_by_request ON obligations (request_id, id)",
    "CREATE INDEX IF NOT EXISTS runs_by_obligation ON tool_runs (obligation_id, id)",
    "CREATE INDEX IF NOT EXISTS assertions_by_key ON assertions (key, id)",
)


def _without_holder() -> str:
    return TABLES["requests"].replace(", holder TEXT)", ")")


def _first_tables(conn: sqlite3.Connection) -> None:
    """Version 1: the tables as the first IR database had them (requests without ``holder``);
    a file an earlier CDA made may hold some of them already."""
    for table, statement in TABLES.items():
        first = _without_holder() if table == "requests" else statement
        conn.execute(first.replace("CREATE TABLE ", "CREATE TABLE IF NOT EXISTS ", 1))
    for statement in _INDICES:
        conn.execute(statement)


def _holder(conn: sqlite3.Connection) -> None:
    """Version 2: ``requests.holder``, who holds a request (unless an earlier CDA added it)."""
    if "holder" not in {str(row[1]) for row in conn.execute("PRAGMA table_info(requests)")}:
        conn.execute("ALTER TABLE requests ADD COLUMN holder TEXT")


def _legacy(conn: sqlite3.Connection, app_id: int, version: int, where: str) -> int | None:
    """An IR database an earlier CDA made: marked as the receipt log ("CDA1"), holding conductor
    tables only (or none: killed before it made them), each of today's shape or the first one."""
    if app_id != RECEIPT_LOG_MARK:
        return None
    tables = tables_of(conn)
    if tables and ("requests" not in tables or set(tables) - set(TABLES)):
        return None  # a receipt log, or another file: not this one
    for table in tables:
        have = [tuple(row[1:]) for row in conn.execute(f"PRAGMA table_info({table})")]
        shapes = [columns_of(TABLES[table])] + ([columns_of(_without_holder())] if table == "requests" else [])
        if have not in shapes:
            names = ", ".join(str(column[0]) for column in have)
            want = ", ".join(str(column[0]) for column in shapes[0])
            raise StoreFileError(f"{where}: table {table} has columns {names}, not those of this CDA "
                                 f"({want}): a conductor IR database of another version")
    return 0


IR_FORMAT = FileFormat("a CDA conductor IR database", CONDUCTOR_IR_MARK, (_first_tables, _holder), legacy=_legacy)
"""The conductor's IR database, as :mod:`cda.store` opens it."""


class IRDatabase:
    """The conductor's IR database at ``path`` (``":memory:"`` for a private one)."""

    def __init__(self, path: Path | str) -> None:
        self.path = str(path)
        self.file = open_store(path, IR_FORMAT, durability=Durability.NORMAL)
        self._conn = self.file.conn

    def close(self) -> None:
        self.file.close()

    def __enter__(self) -> IRDatabase:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """One step's writes, all or none."""
        with self.file.transaction() as conn:
            yield conn

    # ---- requests
    def open_request(self, utterance: str) -> int:
        """The request for ``utterance``: an unfinished one with the same words is resumed (the
        same command run again after a crash carries on), otherwise a new one."""
        row = self._conn.execute(
            "SELECT id FROM requests WHERE utterance = ? AND stage != 'answered' ORDER BY id DESC LIMIT 1",
            (utterance,),
        ).fetchone()
        if row is not None:
            return int(row[0])
        with self.transaction() as conn:
            cur = conn.execute("INSERT INTO requests (utterance, stage) VALUES (?, 'new')", (utterance,))
            request_id = int(cur.lastrowid or 0)
            self._event(conn, request_id, "user_utterance", {"utterance": utterance})
        return request_id

    def request(self, request_id: int) -> tuple[str, str, str | None, str | None]:
        """``(utterance, stage, status, answer)``."""
        row = self._conn.execute(
            "SELECT utterance, stage, status, answer FROM requests WHERE id = ?", (request_id,)
        ).fetchone()
        if row is None:
            raise StoreFileError(f"{self.path}: no request {request_id}")
        return str(row[0]), str(row[1]), row[2], row[3]

    def claim(self, request_id: int, holder: str) -> None:
        """Take the request for ``holder`` (``pid:start:token``, see :func:`holder_id`), unless a
        live conductor holds it: two conductors on one request would each run its tools and each
        write an answer. A holder whose process is gone (killed) is taken over."""
        with self.transaction() as conn:
            row = conn.execute("SELECT holder FROM requests WHERE id = ?", (request_id,)).fetchone()
            current = None if row is None else row[0]
            if current and current != holder and _alive(current):
                raise ConductorError(f"request {request_id} is being answered by another conductor "
                                     f"(process {current.split(':')[0]}); run the command again when it ends")
            conn.execute("UPDATE requests SET holder = ? WHERE id = ?", (holder, request_id))

    def release(self, request_id: int, holder: str) -> None:
        with self.transaction() as conn:
            conn.execute("UPDATE requests SET holder = NULL WHERE id = ? AND holder = ?", (request_id, holder))

    def set_stage(self, conn: sqlite3.Connection, request_id: int, stage: str) -> None:
        conn.execute("UPDATE requests SET stage = ? WHERE id = ?", (stage, request_id))

    def finish(self, request_id: int, status: str, answer: str) -> None:
        with self.transaction() as conn:
            conn.execute(
                "UPDATE requests SET stage = 'answered', status = ?, answer = ? WHERE id = ?",
                (status, answer, request_id),
            )
            self._event(conn, request_id, "final_response", {"status": status, "answer": answer})

    # ---- obligations
    def add_obligation(
        self, conn: sqlite3.Connection, request_id: int, type_: str, inputs: dict[str, Any],
        parent_id: int | None = None, reason: str | None = None,
    ) -> int:
        cur = conn.execute(
            "INSERT INTO obligations (request_id, parent_id, type, inputs, status, reason) VALUES (?, ?, ?, ?, ?, ?)",
            (request_id, parent_id, type_, canonical(inputs), ObligationStatus.ACTIVE.value, reason),
        )
        obligation_id = int(cur.lastrowid or 0)
        self._event(conn, request_id, "obligation_added",
                    {"obligation": obligation_id, "type": type_, "parent": parent_id})
        return obligation_id

    def settle(self, conn: sqlite3.Connection, obligation: Obligation, status: ObligationStatus, reason: str) -> None:
        conn.execute("UPDATE obligations SET status = ?, reason = ? WHERE id = ?",
                     (status.value, reason, obligation.id))
        self._event(conn, obligation.request_id, f"obligation_{status.value}",
                    {"obligation": obligation.id, "reason": reason})

    def obligations(self, request_id: int) -> list[Obligation]:
        rows = self._conn.execute(
            "SELECT id, request_id, parent_id, type, inputs, status, reason FROM obligations "
            "WHERE request_id = ? ORDER BY id", (request_id,),
        ).fetchall()
        return [
            Obligation(id=r[0], request_id=r[1], parent_id=r[2], type=r[3], inputs=json.loads(r[4]),
                       status=ObligationStatus(r[5]), reason=r[6])
            for r in rows
        ]

    # ---- tool runs
    def start_run(self, obligation: Obligation, tool: str, inputs: dict[str, Any]) -> int:
        with self.transaction() as conn:
            cur = conn.execute(
                "INSERT INTO tool_runs (obligation_id, tool, inputs, status) VALUES (?, ?, ?, ?)",
                (obligation.id, tool, canonical(inputs), ToolRunStatus.STARTED.value),
            )
            run_id = int(cur.lastrowid or 0)
            self._event(conn, obligation.request_id, "tool_started",
                        {"obligation": obligation.id, "tool": tool, "run": run_id})
        return run_id

    def end_run(
        self, conn: sqlite3.Connection, obligation: Obligation, run_id: int, status: ToolRunStatus,
        outputs: dict[str, Any] | None, detail: str | None, duration_ms: float | None,
    ) -> None:
        cur = conn.execute(
            "UPDATE tool_runs SET status = ?, outputs = ?, detail = ?, duration_ms = ? WHERE id = ? AND status = ?",
            (status.value, None if outputs is None else canonical(outputs), detail, duration_ms, run_id,
             ToolRunStatus.STARTED.value),
        )
        if cur.rowcount != 1:  # taken over meanwhile: this run's answer is not written
            raise ConductorError(f"tool run {run_id} was taken over by another conductor; its answer is not used")
        self._event(conn, obligation.request_id, "tool_finished",
                    {"obligation": obligation.id, "run": run_id, "status": status.value, "detail": detail})

    def mark_interrupted(self, request_id: int) -> int:
        """Runs of this request left ``started`` by a killed conductor become ``interrupted``."""
        with self.transaction() as conn:
            rows = conn.execute(
                "SELECT t.id, t.obligation_id FROM tool_runs t JOIN obligations o ON o.id = t.obligation_id "
                "WHERE o.request_id = ? AND t.status = ? ORDER BY t.id", (request_id, ToolRunStatus.STARTED.value),
            ).fetchall()
            for run_id, obligation_id in rows:
                conn.execute("UPDATE tool_runs SET status = ?, detail = ? WHERE id = ?",
                             (ToolRunStatus.INTERRUPTED.value, "the conductor stopped during this run", run_id))
                self._event(conn, request_id, "tool_interrupted", {"obligation": obligation_id, "run": run_id})
        return len(rows)

    def runs(self, obligation_id: int | None = None, request_id: int | None = None) -> list[ToolRun]:
        where, arg = ("t.obligation_id = ?", obligation_id) if obligation_id is not None else (
            "o.request_id = ?", request_id)
        rows = self._conn.execute(
            "SELECT t.id, t.obligation_id, t.tool, t.inputs, t.outputs, t.status, t.detail, t.duration_ms "
            f"FROM tool_runs t JOIN obligations o ON o.id = t.obligation_id WHERE {where} ORDER BY t.id", (arg,),
        ).fetchall()
        return [
            ToolRun(id=r[0], obligation_id=r[1], tool=r[2], inputs=json.loads(r[3]),
                    outputs=None if r[4] is None else json.loads(r[4]), status=ToolRunStatus(r[5]), detail=r[6],
                    duration_ms=r[7])
            for r in rows
        ]

    # ---- assertions and sources
    def add_source(self, conn: sqlite3.Connection, kind: str, tool_run_id: int | None, reference: str) -> int:
        cur = conn.execute("INSERT INTO sources (kind, tool_run_id, reference) VALUES (?, ?, ?)",
                           (kind, tool_run_id, reference))
        return int(cur.lastrowid or 0)

    def add_assertion(
        self, conn: sqlite3.Connection, request_id: int, obligation_id: int | None, key: str, value: Any,
        source_id: int,
    ) -> int:
        cur = conn.execute(
            "INSERT INTO assertions (request_id, obligation_id, key, value, source_id) VALUES (?, ?, ?, ?, ?)",
            (request_id, obligation_id, key, canonical(value), source_id),
        )
        return int(cur.lastrowid or 0)

    def assertions(self, request_id: int | None = None, key: str | None = None) -> list[Assertion]:
        """Assertions of one request (or of the whole IR), optionally with one key, oldest first."""
        clauses: list[str] = []
        args: list[object] = []
        if request_id is not None:
            clauses.append("request_id = ?")
            args.append(request_id)
        if key is not None:
            clauses.append("key = ?")
            args.append(key)
        where = f"WHERE {' AND '.join(clauses)}" if clauses else ""
        rows = self._conn.execute(
            f"SELECT id, request_id, obligation_id, key, value, source_id FROM assertions {where} ORDER BY id", args
        ).fetchall()
        return [Assertion(id=r[0], request_id=r[1], obligation_id=r[2], key=r[3], value=json.loads(r[4]),
                          source_id=r[5]) for r in rows]

    def source(self, source_id: int) -> Source | None:
        row = self._conn.execute("SELECT id, kind, tool_run_id, reference FROM sources WHERE id = ?",
                                 (source_id,)).fetchone()
        return None if row is None else Source(id=row[0], kind=row[1], tool_run_id=row[2], reference=row[3])

    def run_status(self, run_id: int) -> ToolRunStatus | None:
        row = self._conn.execute("SELECT status FROM tool_runs WHERE id = ?", (run_id,)).fetchone()
        return None if row is None else ToolRunStatus(row[0])

    # ---- verifications and events
    def add_verification(self, conn: sqlite3.Connection, request_id: int, v: Verification) -> None:
        conn.execute(
            "INSERT INTO verifications (request_id, obligation_id, kind, ok, detail) VALUES (?, ?, ?, ?, ?)",
            (request_id, v.obligation_id, v.kind, int(v.ok), v.detail),
        )
        self._event(conn, request_id, "verified", v.model_dump(mode="json"))

    def verifications(self, request_id: int) -> list[Verification]:
        rows = self._conn.execute(
            "SELECT obligation_id, kind, ok, detail FROM verifications WHERE request_id = ? ORDER BY id",
            (request_id,),
        ).fetchall()
        return [Verification(obligation_id=r[0], kind=r[1], ok=bool(r[2]), detail=r[3]) for r in rows]

    def event(self, conn: sqlite3.Connection, request_id: int, kind: str, body: dict[str, Any]) -> None:
        self._event(conn, request_id, kind, body)

    @staticmethod
    def _event(conn: sqlite3.Connection, request_id: int, kind: str, body: dict[str, Any]) -> None:
        at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        conn.execute("INSERT INTO events (request_id, kind, body, at_utc) VALUES (?, ?, ?, ?)",
                     (request_id, kind, canonical(body), at))

    def events(self, request_id: int) -> list[ConductEvent]:
        rows = self._conn.execute(
            "SELECT seq, request_id, kind, body FROM events WHERE request_id = ? ORDER BY seq", (request_id,)
        ).fetchall()
        return [ConductEvent(seq=r[0], request_id=r[1], kind=r[2], body=json.loads(r[3])) for r in rows]
