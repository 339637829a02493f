"""One batch: read the manifest, skip the jobs already finished, run the rest, record each as
it finishes (row, then receipt), write the JSONL in manifest order.

The JSONL (``results.jsonl``) has one line per job of the manifest, keys sorted:
``index``, ``name``, ``kind``, ``key``, ``status`` (ok, failed, timeout, memory, crashed),
``result`` (the kind's JSON, or null) and ``error`` (null when ok). A job whose result is a
negative verdict (a policy analysis that does not hold, a Cedar test that disagrees) is
``failed`` with its error and keeps its result. It holds no timing and
nothing about the run (which runner, which attempt, when): the same manifest and inputs give
the same bytes on the local pool and on Dask, in one run or resumed after a kill. Timings stay
in the results store (``seconds`` of table ``job_results``).
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cda.actions.receipts import ReceiptLog
from cda.adapters.jobs.isolate import Outcome
from cda.adapters.jobs.manifest import JobSpec, Manifest
from cda.adapters.jobs.runners import run_dask, run_local
from cda.adapters.jobs.store import ResultStore, Row, answer_of
from cda.contracts.receipt import Receipt, canonical_json, sha256_hex

__all__ = ["BatchReport", "run_batch", "jsonl_line", "DB_NAME", "JSONL_NAME"]

DB_NAME = "results.sqlite"
JSONL_NAME = "results.jsonl"


@dataclass
class BatchReport:
    total: int
    skipped: int = 0
    ran: int = 0
    statuses: dict[str, int] = field(default_factory=dict)
    jsonl: Path | None = None

    @property
    def failed(self) -> int:
        return sum(n for status, n in self.statuses.items() if status != "ok")


def jsonl_line(spec: JobSpec, row: Row) -> str:
    """The job's line: sorted keys, no spaces, no timing."""
    record = {"index": spec.index, "name": spec.name, "kind": spec.kind, "key": spec.key, "status": row["status"],
              "result": row["result"], "error": row["error"]}
    return json.dumps(record, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def _receipt(spec: JobSpec, row: Row) -> Receipt:
    answer = answer_of(row)
    seed = spec.params.get("seed")
    return Receipt(
        action_id=f"job-{spec.key}", seq=row["attempt"], kind="action", name=f"job.{spec.kind}",
        inputs_hash=spec.key, seed=None if seed is None else str(seed),
        caps={"timeout_s": spec.timeout_s, "memory_mb": spec.memory_mb},
        result={"job": spec.name, "status": row["status"], "answer_sha256": sha256_hex(canonical_json(answer))},
        status="ok" if row["status"] == "ok" else "timeout" if row["status"] == "timeout" else "failed",
    )


def _add_missing_receipts(log: ReceiptLog, spec: JobSpec, row: Row) -> None:
    """Append the receipt of the row's attempt if the log does not hold it (a kill came between)."""
    if log.count(f"job-{spec.key}") <= row["attempt"]:
        log.append(_receipt(spec, row))


def run_batch(
    manifest: Manifest,
    out_dir: Path,
    *,
    workers: int,
    dask: str | None = None,
    retry_failed: bool = False,
    progress: Callable[[BatchReport, JobSpec | None], None] | None = None,
) -> BatchReport:
    """Run the manifest's unfinished jobs; the store and the JSONL go to ``out_dir``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    store = ResultStore(out_dir / DB_NAME)
    log = ReceiptLog(out_dir / DB_NAME)
    try:
        finished = store.finished()
        todo = [s for s in manifest.jobs
                if s.key not in finished or (retry_failed and finished[s.key]["status"] != "ok")]
        report = BatchReport(total=len(manifest.jobs), skipped=len(manifest.jobs) - len(todo))
        for spec in manifest.jobs:
            if spec.key in finished:
                _add_missing_receipts(log, spec, finished[spec.key])
        run_id = uuid.uuid4().hex
        if progress is not None:
            progress(report, None)

        def done(spec: JobSpec, outcome: Outcome) -> None:
            attempt = store.record(spec.kind, outcome, run_id)
            row: dict[str, Any] = {"status": outcome.status, "result": outcome.result, "error": outcome.error,
                                   "attempt": attempt}
            log.append(_receipt(spec, row))
            report.ran += 1
            if progress is not None:
                progress(report, spec)

        if todo:
            if dask is None:
                run_local(todo, workers, done)
            else:
                run_dask(todo, dask, workers, done)
        finished = store.finished()
        lines = [jsonl_line(spec, finished[spec.key]) for spec in manifest.jobs]
        for spec in manifest.jobs:
            status = finished[spec.key]["status"]
            report.statuses[status] = report.statuses.get(status, 0) + 1
        target = out_dir / JSONL_NAME
        partial = target.with_name(target.name + ".part")
        partial.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
        os.replace(partial, target)
        report.jsonl = target
        return report
    finally:
        log.close()
        store.close()
