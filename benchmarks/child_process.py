"""One command run as a child process and measured from outside: wall time, its own CPU time
(user + system, the kernel's accounting of that child alone) and its peak memory.

Why CPU time beside wall time: the benchmarks run on a machine shared by several engineers;
the wall clock of a process counts the time it waited for a core that someone else held, its
CPU time does not. Comparing two commands run one after the other (interleaved, a pair per
instance) by their CPU times keeps most of the machine's load out of the ratio; the load is
still stated with every table, since a busy core also runs slower (shared caches).

Why a launcher: a process forked from a large one starts with the parent's memory mapped, and
Linux carries that mapping's high-water mark into the peak (``ru_maxrss``) of whatever the
child then executes, so every command a benchmark ran after loading a few hundred MB of its own
reported at least that much. The command is therefore forked by a small launcher (``python
-S``, a few MB) that waits for it (``os.wait4``), stops it at the timeout, and reports its usage.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = ["ChildRun", "run_child"]

#: argv: report fd, timeout (seconds, or "-" for none), CPU limit (whole seconds, or "-"), the
#: command. It forks the command (under the CPU limit, when there is one: the kernel stops it with
#: SIGXCPU), kills it at the timeout, and writes [exit code, killed, CPU seconds, peak KiB] as JSON
#: to the fd
_LAUNCHER = """\
import json, os, signal, sys
fd, timeout, cpu_limit, argv = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4:]
pid = os.fork()
if pid == 0:
    os.close(fd)
    try:
        if cpu_limit != "-":
            import resource
            resource.setrlimit(resource.RLIMIT_CPU, (int(cpu_limit), int(cpu_limit) + 1))
        os.execvp(argv[0], argv)
    finally:
        os._exit(127)
killed = []
def stop(*_):
    killed.append(True)
    os.kill(pid, signal.SIGKILL)
if timeout != "-":
    signal.signal(signal.SIGALRM, stop)
    signal.setitimer(signal.ITIMER_REAL, float(timeout))
_, status, ru = os.wait4(pid, 0)
signal.setitimer(signal.ITIMER_REAL, 0)
if os.WIFSIGNALED(status) and os.WTERMSIG(status) in (signal.SIGXCPU, signal.SIGKILL) and cpu_limit != "-":
    killed.append(True)  # its CPU limit
os.write(fd, json.dumps([os.waitstatus_to_exitcode(status), bool(killed), ru.ru_utime + ru.ru_stime, ru.ru_maxrss]).encode())
"""


@dataclass(frozen=True)
class ChildRun:
    returncode: int | None  # None: stopped at the timeout
    stdout: str
    stderr: str
    wall: float  # seconds, launch to exit
    cpu: float  # seconds of CPU, user + system, of that child (up to the kill when stopped)
    peak_mb: float  # the child's peak resident set size, MiB

    @property
    def timed_out(self) -> bool:
        return self.returncode is None


def run_child(
    argv: Sequence[str], *, env: Mapping[str, str] | None = None, timeout: float | None = None,
    cwd: Path | None = None, cpu_limit: int | None = None,
) -> ChildRun:
    """Run ``argv`` to its end, or stop it at ``timeout`` seconds, and measure it (see the module
    docstring). The wall time includes the launcher's start, some 10 ms; the CPU time and the
    peak are the command's own.

    ``cpu_limit``: stop it once it has used that many seconds of CPU (``RLIMIT_CPU``; reported as
    timed out). A peer's budget in a CPU-time comparison belongs in CPU time: a wall-clock budget
    gives it however much CPU the machine's load leaves it (under load 10, a quarter of the
    budget), so its lower bound, and any ratio against it, moved with the load."""
    read_end, write_end = os.pipe()
    try:
        with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
            started = time.perf_counter()
            launcher = [sys.executable, "-S", "-c", _LAUNCHER, str(write_end), "-" if timeout is None else str(timeout),
                        "-" if cpu_limit is None else str(cpu_limit)]
            proc = subprocess.Popen(
                [*launcher, *argv], stdout=out, stderr=err, env=None if env is None else dict(env), cwd=cwd,
                pass_fds=(write_end,),
            )
            os.close(write_end)
            write_end = -1
            report = b""
            while chunk := os.read(read_end, 4096):
                report += chunk
            proc.wait()
            wall = time.perf_counter() - started
            out.seek(0)
            err.seek(0)
            if not report:
                raise RuntimeError(f"the launcher reported nothing (exit {proc.returncode}): {err.read()[-500:]}")
            code, killed, cpu, maxrss = json.loads(report)
            return ChildRun(None if killed else code, out.read(), err.read(), wall, cpu, maxrss / 1024)
    finally:
        os.close(read_end)
        if write_end >= 0:
            os.close(write_end)
