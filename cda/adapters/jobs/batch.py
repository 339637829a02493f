"""One batch: read the manifest, skip the jobs already finished, run the rest, record each as
it finishes (its row and its receipt in one transaction), write the JSONL in manifest order.

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

import contextlib
import fcntl
import hashlib
import json
import os
import sqlite3
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from cda.actions.log_guard import AuditLogError, check_signed_head, refuse_lost_log
from cda.actions.receipts import GENESIS_HASH, ReceiptLog
from cda.adapters.jobs.isolate import Outcome
from cda.adapters.jobs.manifest import JobSpec, Manifest
from cda.adapters.jobs.results_store import JOBS_FORMAT, RUN_COLUMNS, ResultStore, Row, answer_of, unaccounted_problem
from cda.adapters.jobs.runners import run_dask, run_local
from cda.contracts.receipt import Receipt, canonical_json, sha256_hex
from cda.errors import CDAError
from cda.keys.signing import Signer, head_path, load_signer, write_head

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
    unaccounted: list[str] = field(default_factory=list)
    """Keys of ``job_results`` rows no receipt accounted for when the batch began: left out (and
    run again when the manifest names them); ``cda receipts verify`` reports them until then."""

    @property
    def failed(self) -> int:
        return sum(n for status, n in self.statuses.items() if status != "ok")


def jsonl_line(spec: JobSpec, row: Row) -> str:
    """The job's line: sorted keys, no spaces, no timing."""
    record = {"index": spec.index, "name": spec.name, "kind": spec.kind, "key": spec.key, "status": row["status"],
              "result": row["result"], "error": row["error"]}
    return json.dumps(record, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def _receipt(spec: JobSpec, row: Row) -> Receipt:
    """The receipt of one attempt: it vouches for every column of the job's ``job_results`` row
    (the answer by its hash; the run's columns, ``seconds``, ``run_id`` and ``finished_at``, as
    they are), so an edit to any of them is tampering (:func:`~cda.adapters.jobs.results_store.row_problems`)."""
    answer = answer_of(row)
    seed = spec.params.get("seed")
    return Receipt(
        action_id=f"job-{spec.key}", seq=row["attempt"], kind="action", name=f"job.{spec.kind}",
        inputs_hash=spec.key, seed=None if seed is None else str(seed),
        caps={"timeout_s": spec.timeout_s, "memory_mb": spec.memory_mb},
        result={"job": spec.name, "status": row["status"], "answer_sha256": sha256_hex(canonical_json(answer)),
                **{column: row[column] for column in RUN_COLUMNS}},
        status="ok" if row["status"] == "ok" else "timeout" if row["status"] in _NO_COMPLETE_ANSWER else "failed",
    )


_NO_COMPLETE_ANSWER = ("timeout", "partial", "unknown", "escalated")
"""Job statuses whose receipt says ``timeout``: the receipt's status keeps its three words; the
job's own status is in the receipt's ``result``. (``memory`` has always been ``failed`` there.)"""

SIGN_EVERY = 1.0
"""Seconds between two signatures of the head while jobs finish (the end is always signed)."""


class _Heads:
    """The batch's receipts, appended and signed as ``cda run`` signs its log
    (:mod:`cda.keys.signing`): the head is signed after a job's receipt (at most once a
    :data:`SIGN_EVERY`: a signature and its durable write cost about 10 ms, measured at load 15),
    before the batch stops on Ctrl-C, and once more at the end, so a batch killed at any moment
    leaves at most the receipts of its last second after the signed head (the next run signs
    them). Before each signature the receipts appended since the last one are read back
    (:meth:`ReceiptLog.confirm`); at the end, the head before the batch must still be in the
    log: a log rewritten while the batch ran is never signed, and the batch says so."""

    def __init__(self, db: Path, log: ReceiptLog, signer: Signer, run_id: str) -> None:
        self.db, self.log, self.signer, self.run_id = db, log, signer, run_id
        self.lock = threading.Lock()  # the pool's threads report jobs at once
        self.pending: list[str] = []
        self.problems: list[str] = []
        self.first = log.tip()
        self.signed_at = -SIGN_EVERY

    def record(self, store: ResultStore, spec: JobSpec, outcome: Outcome) -> Row:
        """Write the job's row and its receipt in one transaction (a kill leaves both or neither),
        the receipt vouched for by the batch's key where it lands (the log's signer,
        :func:`~cda.keys.signing.vouch`): until the next head is signed it is in the log's unsigned
        tail, and a batch killed meanwhile leaves receipts the next one can tell from rows
        someone else appended."""
        row: Row = {}

        def write(conn: sqlite3.Connection) -> Receipt:
            row.update(store.record_into(conn, spec.kind, outcome, self.run_id))
            return _receipt(spec, row)

        with self.lock:
            self.pending.append(self.log.append_with(write)[1])
        return row

    def sign(self, *, final: bool = False, now: bool = True) -> None:
        """Sign the log's head (not ``now``: only if the last signature is older than
        :data:`SIGN_EVERY`); a problem found stops signing, and ``final`` raises it."""
        with self.lock:
            if not (now or final) and time.monotonic() - self.signed_at < SIGN_EVERY:
                return
            if not self.problems:
                self.problems = self.log.confirm(self.pending)
                if final and not self.log.holds(*self.first):
                    self.problems.append(f"the head before this batch (entry {self.first[1]}) is no longer in the log")
            if self.problems:
                if final:
                    raise AuditLogError(f"{self.db}: the receipt log was changed while the batch ran; its head is "
                                        f"not signed: {'; '.join(self.problems[:3])} (run `cda receipts verify "
                                        f"{self.db}`)")
                return
            head, count = self.log.tip()
            write_head(head_path(self.db), self.signer.sign_head(head, count, f"jobs-{self.run_id}", 1, "end",
                                                                 meta=GENESIS_HASH))
            self.pending.clear()
            self.signed_at = time.monotonic()


def run_batch(
    manifest: Manifest,
    out_dir: Path,
    *,
    workers: int,
    dask: str | None = None,
    retry_failed: bool = False,
    progress: Callable[[BatchReport, JobSpec | None], None] | None = None,
) -> BatchReport:
    """Run the manifest's unfinished jobs; the store and the JSONL go to ``out_dir``.

    A ``results.jsonl`` already in ``out_dir`` is replaced only when this store wrote it and it
    is unchanged since (or, beside a store an earlier CDA wrote, when it is that CDA's JSONL of
    this store's jobs); any other is a :class:`~cda.errors.CDAError` before anything is written."""
    target = out_dir / JSONL_NAME
    if target.exists() and not (out_dir / DB_NAME).exists():
        raise CDAError(f"{target}: a file CDA did not write is in the way (no results store beside it); "
                       "give another --out folder")
    out_dir.mkdir(parents=True, exist_ok=True)
    with _only_batch_in(out_dir):
        return _run_locked(manifest, out_dir, target, workers=workers, dask=dask, retry_failed=retry_failed,
                           progress=progress)


@contextlib.contextmanager
def _only_batch_in(out_dir: Path) -> Iterator[None]:
    """Hold an exclusive lock on the ``--out`` folder for the whole batch; a second batch on the
    same folder (by any path to it) is refused at once with a :class:`~cda.errors.CDAError`.

    Why a lock and not per-job claims (docs/jobs.md, "One batch per results folder"): only the
    batch's own process writes the store (the job processes, pool or Dask, hand their outcome
    back to it), so one writer per folder is all "each job done exactly once" needs. The lock is
    the kernel's (``flock`` on the folder), held by an open file that dies with the process: a
    batch killed with ``kill -9`` leaves no stale lock to take back, and the resume just runs."""
    try:
        handle = os.open(out_dir, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as exc:
        raise CDAError(f"{out_dir}: cannot open the results folder ({exc.strerror or exc})") from None
    try:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise CDAError(f"{out_dir}: another `cda jobs run` is running on this results folder; wait for it to "
                           "end (then run again: it skips what that batch finished), or give another --out") from None
        yield
    finally:
        os.close(handle)  # closing the file releases the lock


def _run_locked(manifest: Manifest, out_dir: Path, target: Path, *, workers: int, dask: str | None,
                retry_failed: bool, progress: Callable[[BatchReport, JobSpec | None], None] | None) -> BatchReport:
    """:func:`run_batch` once the folder is this batch's alone."""
    db = out_dir / DB_NAME
    signer = load_signer()  # before anything is written: a key problem stops the batch at once
    refuse_lost_log(db)
    store = ResultStore(db)
    try:
        log = ReceiptLog(db, fmt=JOBS_FORMAT, signer=signer)  # every receipt vouched for where it lands
    except BaseException:
        store.close()
        raise
    try:
        check_signed_head(db, log, signer.public_key, fmt=JOBS_FORMAT)  # and its tail: the next head signs over it
        unaccounted = _accounted_rows(db, store)
        on_disk = _check_jsonl(store, target)
        finished = {key: row for key, row in store.finished().items() if key not in unaccounted}
        todo = [s for s in manifest.jobs
                if s.key not in finished or (retry_failed and finished[s.key]["status"] != "ok")]
        report = BatchReport(total=len(manifest.jobs), skipped=len(manifest.jobs) - len(todo),
                             unaccounted=sorted(unaccounted))
        run_id = uuid.uuid4().hex
        heads = _Heads(db, log, signer, run_id)
        heads.sign()
        if progress is not None:
            progress(report, None)

        def done(spec: JobSpec, outcome: Outcome) -> None:
            heads.record(store, spec, outcome)
            heads.sign(now=False)
            report.ran += 1
            if progress is not None:
                progress(report, spec)

        try:
            if todo:
                if dask is None:
                    run_local(todo, workers, done)
                else:
                    run_dask(todo, dask, workers, done)
        except KeyboardInterrupt:  # the finished jobs' receipts are signed before the batch stops
            with contextlib.suppress(CDAError):  # a head that cannot be written: the stop goes on
                heads.sign()
            raise
        heads.sign(final=True)
        left_out = _accounted_rows(db, store, refuse_new=set(unaccounted))
        finished = {key: row for key, row in store.finished().items() if key not in left_out}
        missing = [spec.name for spec in manifest.jobs if spec.key not in finished]
        if missing:  # only a row no receipt accounts for, left in place of a job that failed to be recorded
            raise AuditLogError(f"{db}: job(s) {', '.join(missing[:5])} have no row their receipt accounts for; "
                                f"results.jsonl is not written (run `cda receipts verify {db}`)")
        lines = [jsonl_line(spec, finished[spec.key]) for spec in manifest.jobs]
        for spec in manifest.jobs:
            status = finished[spec.key]["status"]
            report.statuses[status] = report.statuses.get(status, 0) + 1
        _write_jsonl(store, target, "".join(line + "\n" for line in lines).encode("utf-8"), on_disk)
        report.jsonl = target
        return report
    finally:
        log.close()
        store.close()


def _accounted_rows(db: Path, store: ResultStore, refuse_new: set[str] | None = None) -> set[str]:
    """The keys of rows no receipt accounts for (:func:`~cda.adapters.jobs.results_store.row_findings`),
    which the batch leaves out (it runs such a job of its manifest again, its row replaced);
    :class:`AuditLogError` for a row its receipt does not vouch for, or a receipt whose row is
    gone, since signing on would vouch for the edit. ``refuse_new``: the keys left out at the
    start; one more found at the end was added while the batch ran, and is refused too."""
    found = store.findings()
    problems = list(found.problems)
    if refuse_new is not None and set(found.unaccounted) - refuse_new:
        problems.append(unaccounted_problem(sorted(set(found.unaccounted) - refuse_new)) + " (added while the batch ran)")
    if problems:
        raise AuditLogError(f"{db}: will not sign over this results store: " + "; ".join(problems[:3])
                            + f" (run `cda receipts verify {db}`; keep the folder as evidence and give another --out)")
    return set(found.unaccounted)


def _check_jsonl(store: ResultStore, target: Path) -> str | None:
    """Refuse a ``results.jsonl`` this store did not write (see :func:`run_batch`); the SHA-256 of
    the one there (None: none)."""
    try:
        data = target.read_bytes()
    except FileNotFoundError:
        return None
    except IsADirectoryError:
        raise CDAError(f"{target}: a folder is in the way of the results file; give another --out folder") from None
    except OSError as exc:
        raise CDAError(f"{target}: cannot be read ({exc.strerror or exc})") from None
    digest = hashlib.sha256(data).hexdigest()
    recorded = store.outputs(JSONL_NAME)
    if recorded is not None:
        if digest in recorded:
            return digest
        raise CDAError(f"{target}: changed since this batch wrote it; CDA never overwrites what it did not write "
                       "(move it away, or give another --out folder)")
    if store.file.found_version >= 2 or not _earlier_jsonl(data, set(store.finished())):
        raise CDAError(f"{target}: a file CDA did not write is in the way; give another --out folder")
    return digest


_LINE_KEYS = ["error", "index", "key", "kind", "name", "result", "status"]


def _earlier_jsonl(data: bytes, keys: set[str]) -> bool:
    """Whether ``data`` is the JSONL an earlier CDA wrote for this store: every line an object
    with exactly a job line's fields, naming a job the store holds."""
    try:
        lines = [json.loads(line) for line in data.decode("utf-8").splitlines()]
    except (UnicodeDecodeError, ValueError, RecursionError):
        return False
    return all(isinstance(line, dict) and sorted(line) == _LINE_KEYS and line["key"] in keys for line in lines)


def _write_jsonl(store: ResultStore, target: Path, data: bytes, replaced: str | None) -> None:
    """Write the JSONL atomically (a temporary file of its own, renamed over the one whose hash is
    ``replaced``), its hash recorded first."""
    handle = tempfile.NamedTemporaryFile(dir=target.parent, prefix=f".{target.name}.", delete=False)
    try:
        with handle:
            handle.write(data)
        store.writing(JSONL_NAME, hashlib.sha256(data).hexdigest(), replaced)
        os.replace(handle.name, target)
    except BaseException:
        Path(handle.name).unlink(missing_ok=True)
        raise
