"""The results store: one row per finished job, keyed by the job key, in CDA's SQLite file (WAL).

A row is committed as soon as its job finishes, so a batch killed at any moment keeps every
job finished before the kill; a re-run reads the finished keys and skips them. The file also
holds the receipt log (:class:`cda.actions.receipts.ReceiptLog`, table ``receipts``): one
receipt per job attempt, appended after the row; a receipt lost to a kill between the two is
appended on the next run (:meth:`ResultStore.missing_receipts`).

Only the runner's process writes the file; the job processes return their outcome to it.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

from cda.actions.audit import Companion
from cda.actions.receipts import LogRow
from cda.actions.store_file import create_if_missing, open_store
from cda.adapters.jobs.isolate import Outcome
from cda.contracts.receipt import canonical_json, sha256_hex

__all__ = ["COMPANION", "ResultStore", "Row", "answer_of"]

_TABLE = (
    "CREATE TABLE job_results (key TEXT PRIMARY KEY, kind TEXT NOT NULL, status TEXT NOT NULL, "
    "result TEXT, error TEXT, seconds REAL NOT NULL, attempt INTEGER NOT NULL, run_id TEXT NOT NULL, "
    "finished_at REAL NOT NULL)"
)

Row = dict[str, Any]


def answer_of(row: Row) -> Any:
    """What a job's receipt hashes (``answer_sha256``): the result when ok, else the error; for
    a result that is not a pass (a negative verdict, a partial answer) the two together."""
    if row["status"] == "ok":
        return row["result"]
    if row["result"] is not None:
        return {"error": row["error"], "result": row["result"]}
    return row["error"]


def _check_rows(conn: sqlite3.Connection, log: list[LogRow]) -> tuple[list[str], list[str]]:
    """``cda receipts verify`` on a results store: each row is the answer its attempt's receipt
    vouches for (status and hash), and no job with a receipt lost its row. A row whose receipt is
    not written yet (a batch killed between the two; the next run appends it) is a note."""
    receipts = {(r.receipt.action_id, r.receipt.seq): r.receipt for r in log
                if r.receipt is not None and r.receipt.action_id.startswith("job-")}
    problems: list[str] = []
    notes: list[str] = []
    keys: set[str] = set()
    for key, status, result, error, attempt in conn.execute(
            "SELECT key, status, result, error, attempt FROM job_results ORDER BY key"):
        keys.add(str(key))
        receipt = receipts.get((f"job-{key}", attempt))
        if receipt is None:
            notes.append(f"job {str(key)[:16]}…: attempt {attempt} has no receipt yet (a batch stopped between the "
                         "two; the next run appends it)")
            continue
        try:
            row = {"status": status, "error": error, "result": None if result is None else json.loads(result)}
            digest = sha256_hex(canonical_json(answer_of(row)))
        except ValueError:
            digest = None
        if receipt.result.get("status") != status or receipt.result.get("answer_sha256") != digest:
            problems.append(f"job_results: job {str(key)[:16]}… is not the answer its receipt vouches for (edited)")
    for action_id, _ in sorted(receipts):
        if action_id[len("job-"):] not in keys:
            problems.append(f"job_results: the row of {action_id[:20]}… is gone, yet a receipt names it (deleted)")
    return problems, sorted(set(notes))


#: the results table as a companion of the receipt log in the same file (cda receipts verify)
COMPANION = Companion(schema=(_TABLE,), check=_check_rows)


class ResultStore:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._conn = open_store(path)
        self._conn.execute(create_if_missing(_TABLE))

    def finished(self) -> dict[str, Row]:
        """Every recorded job by key: status, result (JSON), error, attempt, run_id, seconds."""
        with self._lock:
            rows = self._conn.execute(
                "SELECT key, kind, status, result, error, attempt, run_id, seconds FROM job_results").fetchall()
        return {
            key: {"kind": kind, "status": status, "result": None if result is None else json.loads(result),
                  "error": error, "attempt": attempt, "run_id": run_id, "seconds": seconds}
            for key, kind, status, result, error, attempt, run_id, seconds in rows
        }

    def record(self, kind: str, outcome: Outcome, run_id: str) -> int:
        """Store ``outcome`` (replacing a failed attempt being retried); returns its attempt number."""
        result = None if outcome.result is None else json.dumps(outcome.result, sort_keys=True, ensure_ascii=False)
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                row = self._conn.execute("SELECT attempt FROM job_results WHERE key = ?", (outcome.key,)).fetchone()
                attempt = 0 if row is None else int(row[0]) + 1
                self._conn.execute(
                    "INSERT OR REPLACE INTO job_results VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (outcome.key, kind, outcome.status, result, outcome.error, outcome.seconds, attempt, run_id,
                     time.time()),
                )
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
            self._conn.execute("COMMIT")
        return attempt

    def close(self) -> None:
        with self._lock:
            self._conn.close()
