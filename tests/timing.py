"""Time in tests on a busy machine: waits on conditions, and clocks a loaded machine cannot fool.

A shared 2-core machine at load 12 gives a process about a sixth of a core, so a wall-clock bound
that holds on an idle machine fails there while the code keeps its promise. Tests therefore
measure what they mean (docs/testing.md, "Tests on a busy machine"):

- :class:`Stopwatch` reads, beside the wall clock, the CPU time of this process and of the
  children it waited for, and the time the calling thread spent **runnable but waiting for a
  CPU** (``run_delay`` in ``/proc/thread-self/schedstat``). ``wall - run_delay`` is the time the
  thread ran or waited on something else (a socket, a child, a lock): what an idle machine
  would have shown. A budget is asserted on that, with the margin the code promises; load can
  only add run delay, never take it away.
- :func:`wait_until` waits for a condition another thread or process will make true, checking
  it every few milliseconds up to a generous limit: the one kind of sleep a test may contain (a
  wait whose reason is the condition it names), never a pause that hopes another thread has got
  somewhere meanwhile.
"""

from __future__ import annotations

import os
import resource
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

__all__ = ["Stopwatch", "wait_until", "HANG"]

T = TypeVar("T")

#: a bound on wall-clock time that only a hang breaks, whatever the load (seconds)
HANG = 120.0

_SCHEDSTAT = Path("/proc/thread-self/schedstat")


def _run_delay() -> float:
    """Seconds the calling thread has spent runnable but waiting for a CPU (0 where unknown)."""
    try:
        return int(_SCHEDSTAT.read_text().split()[1]) / 1e9
    except (OSError, IndexError, ValueError):
        return 0.0


def _cpu() -> float:
    """CPU seconds of this process (every thread) and of the children it has waited for."""
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + children.ru_utime + children.ru_stime


class Stopwatch:
    """``with Stopwatch() as watch: …`` then ``watch.wall``, ``watch.cpu``, ``watch.run_delay``
    and ``watch.uncontended`` (``wall - run_delay``), all in seconds."""

    wall = cpu = run_delay = 0.0

    def __enter__(self) -> Stopwatch:
        self._start = (time.monotonic(), _cpu(), _run_delay())
        return self

    def __exit__(self, *_: object) -> None:
        wall, cpu, delay = self._start
        self.wall = time.monotonic() - wall
        self.cpu = _cpu() - cpu
        self.run_delay = _run_delay() - delay

    @property
    def uncontended(self) -> float:
        return max(0.0, self.wall - self.run_delay)

    def __repr__(self) -> str:
        return (f"Stopwatch(wall={self.wall:.3f}, uncontended={self.uncontended:.3f}, cpu={self.cpu:.3f}, "
                f"run_delay={self.run_delay:.3f}, load={os.getloadavg()[0]:.1f})")


def wait_until(condition: Callable[[], T], what: str, timeout: float = HANG, every: float = 0.01) -> T:
    """``condition()``'s first true value, checked every ``every`` seconds; an ``AssertionError``
    naming ``what`` after ``timeout`` seconds (a hang, not a slow machine)."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(every)  # a wait on `condition`, made true by another thread or process
