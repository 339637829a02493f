"""Where the jobs run: a local pool or a Dask cluster, the same :func:`run_job` on both.

Both take the jobs to run and a callback, called in the runner's process once per finished job
(in the order jobs finish, which varies; the JSONL is written in manifest order afterwards).

*Local pool*: ``workers`` threads, each starting one job process at a time and waiting on it, so
at most ``workers`` job processes run at once; a thread only waits, the work is in the processes.

*Dask*: every job is one task (``pure=False``; its key names the job key) running
:func:`run_job` on a worker, which starts the job's process there. ``scheduler="local"`` starts
a ``LocalCluster`` (processes, ``workers`` workers of one thread each) and stops it after the
batch; any other value is a scheduler address. Dask is imported only here (extra ``dask``).
"""

from __future__ import annotations

import logging
import signal
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from contextlib import contextmanager
from types import FrameType
from typing import Any

from cda.adapters.jobs.isolate import Outcome, kill_running, run_job
from cda.adapters.jobs.manifest import JobSpec
from cda.errors import CDAError

__all__ = ["DaskUnavailable", "run_local", "run_dask"]

Done = Callable[[JobSpec, Outcome], None]


class DaskUnavailable(CDAError, RuntimeError):
    """``--dask`` without dask.distributed installed, or a scheduler that cannot be reached."""


_POLL_S = 0.05


@contextmanager
def _ctrl_c_as_flag() -> Iterator[list[bool]]:
    """While the pool runs, Ctrl-C (SIGINT) only sets a flag, polled by the runner's loop.

    The default handler raises ``KeyboardInterrupt`` at whatever bytecode the main thread is at:
    inside ``concurrent.futures``/``threading`` code that holds a lock (a future's condition, an
    event's), which then stays held, the pool's thread that finishes its job blocks on it and the
    batch waits for that thread forever; or halfway through a store commit. The handler only
    appends to a list (no lock), and the loop raises ``KeyboardInterrupt`` itself between jobs.
    Outside the main thread (a runner embedded in another program) signals are left alone."""
    hit: list[bool] = []
    if threading.current_thread() is not threading.main_thread():
        yield hit
        return

    def handler(signum: int, frame: FrameType | None) -> None:
        hit.append(True)

    previous = signal.signal(signal.SIGINT, handler)
    try:
        yield hit
    finally:
        signal.signal(signal.SIGINT, previous)
    if hit:  # a Ctrl-C that came as the pool was ending still stops the batch
        raise KeyboardInterrupt


def run_local(jobs: Sequence[JobSpec], workers: int, done: Done) -> None:
    stop = threading.Event()
    with _ctrl_c_as_flag() as interrupted, ThreadPoolExecutor(max_workers=workers,
                                                              thread_name_prefix="cda-job") as pool:
        futures = {pool.submit(run_job, spec, stop): spec for spec in jobs}
        pending = set(futures)
        try:
            while pending:
                if interrupted:
                    raise KeyboardInterrupt
                finished, pending = wait(pending, timeout=_POLL_S, return_when=FIRST_COMPLETED)
                for future in finished:
                    done(futures[future], future.result())
        except BaseException:  # Ctrl-C, a store that cannot be written: stop the batch, kill its jobs
            for future in futures:
                future.cancel()
            kill_running(stop)
            raise


def _crash(spec: JobSpec, exc: BaseException) -> Outcome:
    return Outcome(spec.key, "crashed", None, f"the Dask task failed: {type(exc).__name__}: {exc}", 0.0)


def run_dask(jobs: Sequence[JobSpec], scheduler: str, workers: int, done: Done) -> None:
    try:
        from dask.distributed import Client, LocalCluster
        from dask.distributed import as_completed as dask_completed
    except ImportError:
        raise DaskUnavailable("--dask needs dask.distributed: pip install 'cda[dask]'") from None
    cluster: Any = None
    if scheduler == "local":
        try:
            cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=":0",
                                   silence_logs=logging.ERROR)
        except Exception as exc:  # ports, process start: Dask's own errors, translated here
            raise DaskUnavailable(f"--dask local: cannot start a LocalCluster ({type(exc).__name__}: {exc})") from None
        address: Any = cluster
    else:
        address = scheduler
    try:
        try:
            client = Client(address, timeout="10s")
        except Exception as exc:  # OSError, TimeoutError, ValueError (a malformed address): Dask's, translated
            raise DaskUnavailable(f"--dask {scheduler}: cannot reach the scheduler ({exc})") from None
        try:
            futures = [client.submit(run_job, spec, key=f"cda-job-{spec.key}", pure=False) for spec in jobs]
            by_key = {future.key: spec for future, spec in zip(futures, jobs)}
            try:
                for future in dask_completed(futures):
                    spec = by_key[future.key]
                    try:
                        outcome = future.result()
                    except Exception as exc:  # a worker lost mid-task: recorded, the batch goes on
                        outcome = _crash(spec, exc)
                    done(spec, outcome)
            except BaseException:  # Ctrl-C: queued tasks are dropped (a running one ends with its job)
                client.cancel(futures)
                raise
        finally:
            client.close()
    finally:
        if cluster is not None:
            cluster.close()

