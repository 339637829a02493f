"""Run one job in a process of its own, with its time limit and memory cap.

:func:`run_job` is what every runner calls, the local pool in a thread and Dask on a worker:
it starts ``python -m cda.adapters.jobs.child`` in a new session (its own process group) in
the manifest's folder, hands it the job, and waits at most the job's ``timeout_s``; past it the
whole process group is killed and the job is recorded as ``timeout``. A process that dies
without an answer (a signal, an abort in a solver's native code under the memory cap) is
recorded as ``crashed`` with its exit status and the tail of its stderr; one the loader ended
for want of memory under the cap (its own message, exit 127) is ``memory``.

The outcome holds no timing but ``seconds``, which the results store keeps and the JSONL leaves
out: results compare byte for byte across runs and runners.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from typing import Any

from cda.adapters.jobs.manifest import JobSpec

__all__ = ["EXIT_OF_STATUS", "Outcome", "kill_running", "run_job"]

#: a job's status → the exit code the CLI gives the same answer (docs/jobs.md, "Results"): 0 an
#: answer; 1 a check that does not hold, an error, a crash; 3 no complete answer — ``partial`` (a
#: budget inside the job ran out, what was found is kept), ``unknown`` (a solver could not decide,
#: nothing was cut short), ``escalated`` (held for a person), ``timeout`` (the job's process was
#: killed at its ``timeout_s``), ``memory`` (it went over its ``memory_mb``)
EXIT_OF_STATUS = {"ok": 0, "failed": 1, "crashed": 1, "partial": 3, "unknown": 3, "escalated": 3, "timeout": 3,
                  "memory": 3}

_STDERR_TAIL = 400
#: glibc's dynamic loader, out of memory for a thread's TLS block (a thread created after the
#: cap, reading a library's thread-local data): it prints this and exits 127 before Python can
#: raise MemoryError, so the cap, not a crash, is why the job ended
_LOADER_OOM = "cannot allocate memory for thread-local data"
_LOADER_EXIT = 127
_LIVE: set[subprocess.Popen[bytes]] = set()  # job processes of this process, for kill_running()
_LIVE_LOCK = threading.Lock()


@dataclass(frozen=True)
class Outcome:
    key: str
    status: str  # a key of EXIT_OF_STATUS
    result: Any
    error: str | None
    seconds: float

    @property
    def ok(self) -> bool:
        return self.status == "ok"


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        proc.kill()


def kill_running(stop: threading.Event | None = None) -> None:
    """Kill every job process this process has running (a batch stopped by Ctrl-C: the jobs run in
    sessions of their own, so the terminal's signal does not reach them).

    ``stop`` (set here, before the kill) is the batch's: a :func:`run_job` given it that starts its
    process after this kill kills that process at once, so no job outlives the stop, whatever the
    moment its thread was at."""
    if stop is not None:
        stop.set()
    with _LIVE_LOCK:
        for proc in list(_LIVE):
            _kill_group(proc)


def _stopped(spec: JobSpec, start: float) -> Outcome:
    return Outcome(spec.key, "crashed", None, "the batch was stopped before the job finished", time.monotonic() - start)


def run_job(spec: JobSpec, stop: threading.Event | None = None) -> Outcome:
    """Run ``spec`` in its own process; never raises for what the job does. Once ``stop`` is set
    (by :func:`kill_running`), the job is not started, or its process is killed."""
    start = time.monotonic()
    if stop is not None and stop.is_set():
        return _stopped(spec, start)
    env = dict(os.environ, CDA_JOB_PARENT=str(os.getpid()))
    proc = subprocess.Popen(
        [sys.executable, "-m", "cda.adapters.jobs.child"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, cwd=spec.base, env=env, start_new_session=True,
    )
    with _LIVE_LOCK:  # under the lock kill_running takes after setting stop: one of the two kills it
        _LIVE.add(proc)
        if stop is not None and stop.is_set():
            _kill_group(proc)
    try:
        out, err = proc.communicate(json.dumps(spec.wire()).encode(), timeout=spec.timeout_s)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        proc.communicate()
        return Outcome(spec.key, "timeout", None, f"killed after its time limit of {spec.timeout_s:g} s",
                       time.monotonic() - start)
    except BaseException:
        _kill_group(proc)
        proc.communicate()
        raise
    finally:
        with _LIVE_LOCK:
            _LIVE.discard(proc)
    seconds = time.monotonic() - start
    lines = out.decode("utf-8", "replace").strip().splitlines()
    if proc.returncode == 0 and lines:
        try:
            answer = json.loads(lines[-1])
        except json.JSONDecodeError:
            answer = None
        if isinstance(answer, dict) and answer.get("status") in EXIT_OF_STATUS and answer["status"] not in ("crashed", "timeout"):
            reads = answer.get("reads")
            problem = spec.reads_problem(reads) if isinstance(reads, dict) else "the job's process named no file it read"
            if problem is not None:  # its answer is about other contents than its key's
                return Outcome(spec.key, "failed", None, problem, seconds)
            return Outcome(spec.key, answer["status"], answer.get("result"), answer.get("error"), seconds)
    if proc.returncode == _LOADER_EXIT and _LOADER_OOM in err.decode("utf-8", "replace"):
        return Outcome(spec.key, "memory", None, f"the job went over its memory cap of {spec.memory_mb} MiB "
                       f"(the loader: {_LOADER_OOM})", seconds)
    return Outcome(spec.key, "crashed", None, _death(proc.returncode, err, spec.memory_mb), seconds)


def _death(code: int, err: bytes, memory_mb: int) -> str:
    if code < 0:
        try:
            how = f"signal {signal.Signals(-code).name}"
        except ValueError:
            how = f"signal {-code}"
    else:
        how = f"exit status {code}"
    tail = err.decode("utf-8", "replace").strip()[-_STDERR_TAIL:]
    text = f"the job's process died without an answer ({how}; its memory cap is {memory_mb} MiB)"
    if tail:
        text += f": {tail.splitlines()[-1]}"
    return text
