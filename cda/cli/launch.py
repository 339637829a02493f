"""How long ago this command was launched: a command's ``--timeout`` is a budget from launch.

``cda diagnose C.bench --timeout 60`` that starts its clock after the interpreter has started and
imported pydantic, clingo and CDA ends 60 s after that, and at load 10 on two cores the start-up
alone takes one to two seconds of wall time (docs/benchmarks.md, the generated all-minimal
problems: a 60 s budget ended 61–65 s after launch). A user who gives 60 s means the command's
life. When the command is the process's own (the console script, ``python -m cda``:
:func:`cda.cli.main.main` without ``argv``), its launch is the process's: on Linux the kernel's
start time of the process (``/proc/self/stat``, in clock ticks since boot) read against the boot
clock; elsewhere, or if either cannot be read, the time since this module was first imported (the
interpreter's own start, some 20 ms, left out). ``main(argv)`` called in a process that goes on
(a test, an embedding program) launches the command when it is called.
"""

from __future__ import annotations

import math
import os
import time

__all__ = ["budget_left", "command_began", "since_launch"]

_IMPORTED = time.monotonic()
#: when ``main(argv)`` began in a process that goes on (monotonic clock); ``None``: the command is
#: the process's own, launched when the process was
_began: float | None = _IMPORTED


def command_began(process: bool) -> None:
    """Mark a command's launch: the process's own (``process``), or now."""
    global _began
    _began = None if process else time.monotonic()


def _kernel_age() -> float | None:
    """Seconds since the kernel started this process, or ``None`` where that cannot be read."""
    try:
        with open("/proc/self/stat", "rb") as f:
            stat = f.read()
        ticks = os.sysconf("SC_CLK_TCK")
        # the command name (field 2) is in parentheses and may hold spaces: fields after its ')'
        started = int(stat[stat.rindex(b")") + 2:].split()[19]) / ticks  # field 22, starttime
        age = time.clock_gettime(time.CLOCK_BOOTTIME) - started
    except (OSError, ValueError, IndexError, AttributeError):
        return None
    return age if 0 <= age < 86_400 * 365 else None  # a clock that disagrees: not trusted


def since_launch() -> float:
    """Seconds since the command was launched (:func:`command_began`)."""
    if _began is not None:
        return time.monotonic() - _began
    fallback = time.monotonic() - _IMPORTED
    age = _kernel_age()
    return fallback if age is None else max(age, fallback)


def budget_left(timeout: float | None) -> float | None:
    """What is left of a budget of ``timeout`` seconds counted from launch: ``None`` and ``inf``
    (no limit) unchanged, else never below 0 (spent: the command stops at once with its partial)."""
    if timeout is None or math.isinf(timeout):
        return timeout
    return max(0.0, timeout - since_launch())
