"""One command run as a child process and measured from outside: wall time, its own CPU time
(user + system, the kernel's accounting of that child alone) and its peak memory.

Why CPU time beside wall time: the benchmarks run on a machine shared by several engineers;
the wall clock of a process counts the time it waited for a core that someone else held, its
CPU time does not. Comparing two commands run one after the other (interleaved, a pair per
instance) by their CPU times keeps most of the machine's load out of the ratio; the load is
still stated with every table, since a busy core also runs slower (shared caches).
"""

from __future__ import annotations

import os
import subprocess
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = ["ChildRun", "run_child"]


@dataclass(frozen=True)
class ChildRun:
    returncode: int | None  # None: killed at the timeout
    stdout: str
    stderr: str
    wall: float  # seconds, launch to exit
    cpu: float  # seconds of CPU, user + system, of that child
    peak_mb: float  # the child's peak resident set size, MiB

    @property
    def timed_out(self) -> bool:
        return self.returncode is None


def run_child(
    argv: Sequence[str], *, env: Mapping[str, str] | None = None, timeout: float | None = None,
    cwd: Path | None = None,
) -> ChildRun:
    """Run ``argv`` to its end, or kill it at ``timeout`` seconds, and measure it (see the module
    docstring): ``os.wait4`` reaps the child and gives its own resource usage."""
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        started = time.perf_counter()
        proc = subprocess.Popen(
            list(argv), stdout=out, stderr=err, env=None if env is None else dict(env), cwd=cwd
        )
        killed = threading.Event()

        def kill() -> None:
            killed.set()
            proc.kill()

        timer = threading.Timer(timeout, kill) if timeout is not None else None
        if timer is not None:
            timer.start()
        try:
            _, status, usage = os.wait4(proc.pid, 0)
        finally:
            if timer is not None:
                timer.cancel()
        wall = time.perf_counter() - started
        proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here: Popen must not wait again
        out.seek(0)
        err.seek(0)
        return ChildRun(
            None if killed.is_set() else proc.returncode, out.read(), err.read(), wall,
            usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024,
        )
