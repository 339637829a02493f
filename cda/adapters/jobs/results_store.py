"""The results store: one row per finished job, keyed by the job key, in the jobs' SQLite file.

The file is :data:`JOBS_FORMAT` (opened, marked "CDAJ" and migrated by :mod:`cda.store`). A row
is committed as soon as its job finishes, so a batch killed at any moment keeps every job
finished before the kill; a re-run reads the finished keys and skips them. The file also holds
the receipt log (:class:`cda.actions.receipts.ReceiptLog`, table ``receipts``): one receipt per
job attempt, written with its row in one transaction, so that a row no receipt accounts for was
not written by a batch (:func:`row_findings`). ``outputs`` records the SHA-256 of each file the batch wrote beside the store
(``results.jsonl``), so that a later batch replaces only a file it wrote and nobody changed.

A file an earlier CDA made (marked with the receipt log's "CDA1", holding ``job_results`` and
``receipts``) is recognised and migrated. Only the runner's process writes the file; the job
processes return their outcome to it.
"""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path
from typing import Any, NamedTuple

from cda.actions.store_file import APPLICATION_ID as LOG_APPLICATION_ID
from cda.actions.store_file import RECEIPTS_SCHEMA
from cda.adapters.jobs.isolate import Outcome
from cda.contracts.receipt import Receipt, canonical_json, sha256_hex
from cda.keys.signing import head_path
from cda.store import JOBS_RESULTS_MARK, FileFormat, open_store, read_snapshot, tables_of

__all__ = ["JOBS_FORMAT", "RUN_COLUMNS", "ResultStore", "Row", "RowFindings", "answer_of", "row_findings", "row_problems",
           "unaccounted_problem"]

_TABLE = (
    "CREATE TABLE job_results (key TEXT PRIMARY KEY, kind TEXT NOT NULL, status TEXT NOT NULL, "
    "result TEXT, error TEXT, seconds REAL NOT NULL, attempt INTEGER NOT NULL, run_id TEXT NOT NULL, "
    "finished_at REAL NOT NULL)"
)

Row = dict[str, Any]

RUN_COLUMNS = ("seconds", "run_id", "finished_at")
"""The columns of ``job_results`` about the run rather than the answer: each receipt names them
as they are (the JSONL leaves them out, so that it stays the same bytes on every runner)."""


def answer_of(row: Row) -> Any:
    """What a job's receipt hashes (``answer_sha256``): the result when ok, else the error; for
    a result that is not a pass (a negative verdict, a partial answer) the two together."""
    if row["status"] == "ok":
        return row["result"]
    if row["result"] is not None:
        return {"error": row["error"], "result": row["result"]}
    return row["error"]


class RowFindings(NamedTuple):
    """What the receipts say of the ``job_results`` rows (:func:`row_findings`)."""

    problems: list[str]  # a row edited, or gone while a receipt names it
    unaccounted: list[str]  # keys of rows no receipt accounts for (added by hand, or a kill in an old CDA)
    notes: list[str]


def row_findings(conn: sqlite3.Connection) -> RowFindings:
    """Each ``job_results`` row against the receipt of its attempt (status and answer hash, kind,
    and the run's columns :data:`RUN_COLUMNS`), and each job receipt against its row. A row and
    its receipt are written in one transaction (:meth:`ResultStore.record_into` inside
    :meth:`cda.actions.receipts.ReceiptLog.append_with`), so a row without its receipt was not
    written by a batch: the batch never signs over it (docs/jobs.md, "Results")."""
    if "job_results" not in tables_of(conn):
        return RowFindings([], [], [])
    receipts: dict[tuple[str, int], Receipt] = {}
    for (body,) in conn.execute("SELECT body FROM receipts ORDER BY seq"):
        try:
            receipt = Receipt.model_validate_json(body)
        except ValueError:  # the chain check names a body that does not parse
            continue
        if receipt.action_id.startswith("job-"):
            receipts[(receipt.action_id, receipt.seq)] = receipt
    problems: list[str] = []
    unaccounted: list[str] = []
    notes: set[str] = set()
    keys: set[str] = set()
    for key, kind, status, result, error, attempt, *run in conn.execute(
            f"SELECT key, kind, status, result, error, attempt, {', '.join(RUN_COLUMNS)} FROM job_results "
            "ORDER BY key"):
        keys.add(str(key))
        vouching = receipts.get((f"job-{key}", attempt))
        if vouching is None:
            unaccounted.append(str(key))
            continue
        try:
            digest = sha256_hex(canonical_json(answer_of(
                {"status": status, "error": error, "result": None if result is None else json.loads(result)})))
        except ValueError:
            digest = None
        if vouching.result.get("status") != status or vouching.result.get("answer_sha256") != digest \
                or vouching.name != f"job.{kind}":
            problems.append(f"job_results: job {str(key)[:16]}… is not the answer its receipt vouches for (edited)")
        elif any(column in vouching.result and vouching.result[column] != value
                 for column, value in zip(RUN_COLUMNS, run, strict=True)):
            edited = [c for c, v in zip(RUN_COLUMNS, run, strict=True) if c in vouching.result and vouching.result[c] != v]
            problems.append(f"job_results: job {str(key)[:16]}…: {', '.join(edited)} not as its receipt vouches "
                            "(edited)")
        elif not all(column in vouching.result for column in RUN_COLUMNS):
            notes.add("receipts written before CDA covered the columns seconds, run_id and finished_at: those "
                      "columns of their rows are not checked")
    for action_id, _ in sorted(receipts):
        if action_id[len("job-"):] not in keys:
            problems.append(f"job_results: the row of {action_id[:20]}… is gone, yet a receipt names it (deleted)")
    return RowFindings(problems, unaccounted, sorted(notes))


def unaccounted_problem(keys: list[str]) -> str:
    """How verify and the batch name rows no receipt accounts for."""
    shown = ", ".join(f"{key[:16]}…" for key in keys[:5]) + (" and more" if len(keys) > 5 else "")
    return (f"job_results: {len(keys)} row(s) no receipt accounts for (job {shown}): nothing shows a batch wrote "
            "them (added by hand; a CDA before rows and receipts were written together also left one when killed "
            "between the two). `cda jobs run` leaves them out of results.jsonl and runs a manifest's job again")


def row_problems(path: Path | str, *, require_signature: bool = True) -> tuple[list[str], list[str]]:
    """``cda receipts verify`` on a results file, beyond the log's own chain: :func:`row_findings`
    (a row no receipt accounts for is a problem), and (``require_signature``) a file with job
    receipts has its signed head beside it (every batch signs one; without it a deleted last job
    would go unseen); (problems, notes). Read without a trace."""

    def read(conn: sqlite3.Connection) -> tuple[list[str], list[str]]:
        if "job_results" not in tables_of(conn):
            return [], []
        found = row_findings(conn)
        problems = list(found.problems)
        if found.unaccounted:
            problems.append(unaccounted_problem(found.unaccounted))
        has_receipts = conn.execute("SELECT 1 FROM receipts WHERE action_id LIKE 'job-%' LIMIT 1").fetchone()
        if has_receipts and require_signature and not head_path(path).exists():
            problems.append(f"no signed head beside the results store ({head_path(path).name} is missing) although "
                            "jobs finished in it (a store written before batches signed their heads has none: run the same batch again "
                            "to sign it, or verify with --unsigned)")
        return problems, found.notes

    return read_snapshot(path, read)


def _results_and_receipts(conn: sqlite3.Connection) -> None:
    """Version 1: the results table and the receipt log (each unless an earlier CDA made it: a
    receipts table that is there is left as it is, its triggers included)."""
    have = tables_of(conn)
    if "job_results" not in have:
        conn.execute(_TABLE)
    if "receipts" not in have:
        for statement in RECEIPTS_SCHEMA:
            conn.execute(statement)


_OUTPUTS = ("CREATE TABLE outputs (name TEXT PRIMARY KEY, sha256 TEXT NOT NULL, previous TEXT)",)
"""Version 2: the files the batch wrote beside the store: the hash of what it writes and of what
it replaced (either may be on disk when a batch was killed between recording and renaming)."""


def _legacy(conn: sqlite3.Connection, app_id: int, version: int, where: str) -> int | None:
    """A results file an earlier CDA made: marked "CDA1", its tables ``job_results`` (and
    ``receipts``), or none yet."""
    if app_id != LOG_APPLICATION_ID:
        return None
    tables = set(tables_of(conn))
    return 0 if not tables or ("job_results" in tables and tables <= {"job_results", "receipts"}) else None


JOBS_FORMAT = FileFormat("a CDA jobs results file", JOBS_RESULTS_MARK, (_results_and_receipts, _OUTPUTS), legacy=_legacy)
"""The jobs' results file, as :mod:`cda.store` opens it."""


class ResultStore:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.file = open_store(path, JOBS_FORMAT)
        self._lock = self.file.lock
        self._conn = self.file.conn

    def finished(self) -> dict[str, Row]:
        """Every recorded job by key: kind, status, result (JSON), error, attempt, seconds, run_id, finished_at."""
        with self._lock:
            rows = self._conn.execute(
                "SELECT key, kind, status, result, error, attempt, seconds, run_id, finished_at FROM job_results"
            ).fetchall()
        return {
            key: {"kind": kind, "status": status, "result": None if result is None else json.loads(result),
                  "error": error, "attempt": attempt, "seconds": seconds, "run_id": run_id, "finished_at": finished_at}
            for key, kind, status, result, error, attempt, seconds, run_id, finished_at in rows
        }

    def record_into(self, conn: sqlite3.Connection, kind: str, outcome: Outcome, run_id: str) -> Row:
        """Store ``outcome`` on ``conn``, inside the caller's transaction, the one that appends its
        receipt (:meth:`cda.actions.receipts.ReceiptLog.append_with`), replacing a failed attempt
        being retried; returns the row as :meth:`finished` reads it (its attempt number counted here)."""
        result = None if outcome.result is None else json.dumps(outcome.result, sort_keys=True, ensure_ascii=False)
        finished_at = time.time()
        row = conn.execute("SELECT attempt FROM job_results WHERE key = ?", (outcome.key,)).fetchone()
        attempt = 0 if row is None else int(row[0]) + 1
        conn.execute(
            "INSERT OR REPLACE INTO job_results VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (outcome.key, kind, outcome.status, result, outcome.error, outcome.seconds, attempt, run_id, finished_at),
        )
        return {"kind": kind, "status": outcome.status, "result": outcome.result, "error": outcome.error,
                "attempt": attempt, "seconds": outcome.seconds, "run_id": run_id, "finished_at": finished_at}

    def findings(self) -> RowFindings:
        """:func:`row_findings` on this store."""
        with self._lock:
            return row_findings(self._conn)

    def outputs(self, name: str) -> set[str] | None:
        """The SHA-256s ``name`` beside the store may have, as the batch wrote it (None: it never did)."""
        with self._lock:
            row = self._conn.execute("SELECT sha256, previous FROM outputs WHERE name = ?", (name,)).fetchone()
        return None if row is None else {str(h) for h in row if h is not None}

    def writing(self, name: str, sha256: str, replaced: str | None) -> None:
        """Record, before it is renamed into place, that the batch writes ``name`` with these bytes'
        SHA-256, over a file whose SHA-256 is ``replaced`` (None: no file)."""
        with self.file.transaction() as conn:
            conn.execute("INSERT INTO outputs VALUES (?, ?, ?) ON CONFLICT (name) DO UPDATE SET "
                         "sha256 = excluded.sha256, previous = excluded.previous", (name, sha256, replaced))

    def close(self) -> None:
        self.file.close()
