"""Time in tests on a busy machine: waits on conditions, and clocks a loaded machine cannot fool.

A shared 2-core machine at load 12 gives a process about a sixth of a core, so a wall-clock bound
that holds on an idle machine fails there while the code keeps its promise. Tests therefore
measure what they mean (docs/testing.md, "Tests on a busy machine"):

- :class:`Stopwatch` reads, beside the wall clock, the CPU time of this process and of the
  children it waited for, and the time the run **stalled for want of a CPU**: moments when some
  thread of this process or of a child process was runnable but waiting for a core while no
  other of them ran. ``wall - stalled`` (``uncontended``) is what an idle machine would have
  shown. A budget is asserted on that, with the margin the code promises.
- :func:`wait_until` waits for a condition another thread or process will make true, checking
  it every few milliseconds up to a generous limit: the one kind of sleep a test may contain (a
  wait whose reason is the condition it names), never a pause that hopes another thread has got
  somewhere meanwhile.

Why the stall is measured this way (the kernel's ``run_delay``, field 2 of
``/proc/<pid>/task/<tid>/schedstat``, is each thread's time runnable but not running):

- The calling thread's own delay is not enough: the work a test waits for often runs in another
  thread (a solver thread, a timer that must fire, the holder of the GIL) or in a child process,
  and while the caller sleeps on it only *that* thread's waits for a core lengthen the wall.
- The sum of every thread's delay would over-subtract: two threads waiting at once are one
  stretch of lost time, and a thread waiting while another runs lost the run nothing (the run
  was progressing). So a sampler process reads every thread of this process and of its live
  descendants every few milliseconds and, per interval, counts as stalled
  ``max over threads i of (delay_i - CPU of every other thread)``: a lower bound on the time
  thread ``i`` waited while nothing else of the run was on a CPU, hence never more than the
  interval and never a moment counted twice. An interval in which a thread or a child ended
  counts no stall (the one that ended may have run throughout). Load can only add stall; the
  measure never takes away time the run itself spent on a CPU.
- What stays uncounted (so ``uncontended`` is at worst an over-estimate): the intervals in
  which a thread ended, and a wait overlapping a moment another thread ran.
- The one way it can subtract too much: a thread unrelated to the run (left running by another
  test) waiting for a core while the run itself sleeps on a timer. Tests here start and stop
  what they need, so none is busy beside a measured run.
"""

from __future__ import annotations

import json
import os
import resource
import select
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

__all__ = ["Stopwatch", "wait_until", "HANG"]

T = TypeVar("T")

#: a bound on wall-clock time that only a hang breaks, whatever the load (seconds)
HANG = 120.0

#: seconds between two samples of the threads' clocks: short enough that the intervals lost to a
#: thread that ends are few and the per-interval bound stays tight, long enough that the
#: sampler's own CPU (two small files read per thread) stays around 1% of a core
SAMPLE_EVERY = 0.01

_PROC = Path("/proc")


def _schedstat(path: Path) -> tuple[int, int] | None:
    """(CPU ns, run delay ns) of one thread, ``None`` when it is gone or the kernel keeps none."""
    try:
        fields = path.read_text().split()
        return int(fields[0]), int(fields[1])
    except (OSError, IndexError, ValueError):
        return None


def _children(pid: str) -> list[str]:
    """Live child processes of ``pid`` (every thread's ``children`` list)."""
    out: list[str] = []
    try:
        tasks = list((_PROC / pid / "task").iterdir())
    except OSError:
        return out
    for task in tasks:
        try:
            out += (task / "children").read_text().split()
        except OSError:
            continue
    return out


@dataclass
class Sample:
    """Every thread's (CPU ns, run delay ns) of a process and of its live descendants, keyed
    ``pid/tid``, at one moment."""

    threads: dict[str, tuple[int, int]] = field(default_factory=dict)

    @classmethod
    def take(cls, root: int, skip: int | None = None) -> Sample:
        """The clocks of ``root``'s process tree now, leaving out process ``skip`` (the sampler)."""
        sample = cls()
        todo = [str(root)]
        while todo:
            pid = todo.pop()
            if pid == str(skip):
                continue
            try:
                tasks = list((_PROC / pid / "task").iterdir())
            except OSError:
                continue
            for task in tasks:
                stat = _schedstat(task / "schedstat")
                if stat is not None:
                    sample.threads[f"{pid}/{task.name}"] = stat
            todo += _children(pid)
        return sample


def stall(before: Sample, after: Sample) -> float:
    """A lower bound on the seconds between two samples when some thread waited for a CPU and no
    other thread of the run was on one (module docstring). A thread that ended in between may
    have run all along, so such an interval counts none."""
    if before.threads.keys() - after.threads.keys():
        return 0.0
    moved = []
    for key, (cpu, delay) in after.threads.items():
        cpu0, delay0 = before.threads.get(key, (0, 0))  # a thread started meanwhile: all of it
        moved.append(((cpu - cpu0) / 1e9, (delay - delay0) / 1e9))
    ran = sum(cpu for cpu, _ in moved)
    return max([0.0, *(delay - (ran - cpu) for cpu, delay in moved)])


def _sample_until_told(root: int, every: float) -> None:
    """The sampler process (``python tests/timing.py PID SECONDS``): reads ``root``'s tree every
    ``every`` seconds, prints ``ready`` after the first sample, and on a line (or EOF) on stdin
    prints, as JSON, each interval that stalled: ``[start, end, seconds]`` on the monotonic clock
    (which every process shares). A process, not a thread: a thread would take the GIL from the
    run at every sample, and the run would sit blocked on it while the sampler waited for a
    core, a stall of the measure's own making that no thread of the run shows as run delay."""
    me = os.getpid()
    last, since = Sample.take(root, me), time.monotonic()
    stalls: list[tuple[float, float, float]] = []
    print("ready", flush=True)
    while True:
        told = select.select([sys.stdin], [], [], every)[0]
        now, at = Sample.take(root, me), time.monotonic()
        if (seconds := stall(last, now)) > 0:
            stalls.append((since, at, seconds))
        last, since = now, at
        if told:
            break
    print(json.dumps(stalls), flush=True)


def stalled_within(stalls: list[tuple[float, float, float]], start: float, end: float) -> float:
    """The stall inside ``[start, end]`` of intervals ``(a, b, seconds)``: an interval that sticks
    out of it keeps only what cannot have fallen outside (``seconds`` less the part outside).
    Not clamped to ``b - a``: a sample reads its threads one after another, so one interval's
    figure may run a little over its span and the next's under (the sum telescopes; the caller
    clamps the total to the wall)."""
    total = 0.0
    for a, b, seconds in stalls:
        outside = max(0.0, start - a) + max(0.0, b - end)
        total += max(0.0, seconds - outside)
    return total


def _cpu() -> float:
    """CPU seconds of this process (every thread) and of the children it has waited for."""
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + children.ru_utime + children.ru_stime


class Stopwatch:
    """``with Stopwatch() as watch: …`` then ``watch.wall``, ``watch.cpu``, ``watch.stalled`` and
    ``watch.uncontended`` (``wall - stalled``), all in seconds (module docstring)."""

    wall = cpu = stalled = 0.0

    def __enter__(self) -> Stopwatch:
        self._sampler = subprocess.Popen([sys.executable, __file__, str(os.getpid()), str(SAMPLE_EVERY)],
                                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert self._sampler.stdout is not None
        if self._sampler.stdout.readline() != "ready\n":
            raise RuntimeError(f"the stall sampler did not start (exit {self._sampler.wait()})")
        self._start = (time.monotonic(), _cpu())
        return self

    def __exit__(self, *_: object) -> None:
        wall, cpu = self._start
        self.wall = time.monotonic() - wall
        self.cpu = _cpu() - cpu  # before the sampler is waited for: its CPU is not the run's
        out, _ = self._sampler.communicate("stop\n", timeout=HANG)
        self.stalled = min(self.wall, stalled_within(json.loads(out), wall, wall + self.wall))

    @property
    def uncontended(self) -> float:
        return max(0.0, self.wall - self.stalled)

    def __repr__(self) -> str:
        return (f"Stopwatch(wall={self.wall:.3f}, uncontended={self.uncontended:.3f}, cpu={self.cpu:.3f}, "
                f"stalled={self.stalled:.3f}, load={os.getloadavg()[0]:.1f})")


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


if __name__ == "__main__":
    _sample_until_told(int(sys.argv[1]), float(sys.argv[2]))


def process_alive(pid: int) -> bool:
    """Whether process ``pid`` is running: neither gone nor a zombie waiting to be reaped."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state != "Z"
