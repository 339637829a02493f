"""tests/timing.py's Stopwatch: what it counts as a stall for want of a CPU, and what it never does.

The rule (tests/timing.py's docstring): per sampling interval, the most any one thread waited for
a core less the CPU everything else of the run had meanwhile. Checked on hand-made samples, then
on a real thread that shares its core with a burning process while the caller sleeps waiting
for it (the case the caller's own ``run_delay`` missed: test_budget_realtime failed at load 8).
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.timing import HANG, Sample, Stopwatch, stall, stalled_within, wait_until

MS = 1_000_000  # nanoseconds


def sample(threads: dict[str, tuple[int, int]]) -> Sample:
    return Sample(threads=threads)


def test_two_threads_waiting_at_once_are_one_stall_not_two() -> None:
    before = sample({"1/1": (0, 0), "1/2": (0, 0)})
    after = sample({"1/1": (2 * MS, 8 * MS), "1/2": (2 * MS, 8 * MS)})
    # thread 1 waited 8 ms, but thread 2 ran 2 ms of them: at least 6 ms with nothing running
    assert stall(before, after) == pytest.approx(0.006)


def test_a_wait_while_another_thread_ran_is_no_stall() -> None:
    before = sample({"1/1": (0, 0), "1/2": (0, 0)})
    after = sample({"1/1": (0, 5 * MS), "1/2": (9 * MS, 0)})
    assert stall(before, after) == 0.0  # the run progressed in thread 2 the whole time


def test_a_sleeping_callers_wait_on_a_delayed_worker_is_the_workers_delay() -> None:
    before = sample({"1/main": (0, 0), "1/worker": (0, 0)})
    after = sample({"1/main": (0, 0), "1/worker": (1 * MS, 9 * MS)})
    assert stall(before, after) == pytest.approx(0.009)


def test_a_child_is_part_of_the_run_and_one_that_ends_may_have_run_throughout() -> None:
    before = sample({"1/1": (0, 0), "77/77": (0, 0)})
    assert stall(before, sample({"1/1": (0, 8 * MS), "77/77": (8 * MS, 0)})) == 0.0  # the child ran
    assert stall(before, sample({"1/1": (0, 8 * MS)})) == 0.0  # the child ended: unknown, so none
    started = sample({"1/1": (0, 8 * MS), "77/77": (0, 0), "88/88": (0, 8 * MS)})
    assert stall(before, started) == pytest.approx(0.008)  # a child started meanwhile, waiting too


def test_only_the_stall_inside_the_measured_span_counts() -> None:
    stalls = [(0.0, 1.0, 0.5), (1.0, 2.0, 0.9), (2.0, 3.0, 0.5)]
    # the first and last intervals stick out by 0.8 s: their 0.5 s may all lie outside
    assert stalled_within(stalls, 0.8, 2.2) == pytest.approx(0.9)
    assert stalled_within(stalls, 0.2, 2.2) == pytest.approx(0.3 + 0.9)


def _burner_on(cpu: int) -> int:
    """A CPU-burning process pinned to ``cpu`` that is not our descendant (its CPU is not the
    run's progress): started through a shell that exits at once, so it is reparented."""
    code = f"import os\nos.sched_setaffinity(0, {{{cpu}}})\nwhile 1: pass"
    out = subprocess.run(["sh", "-c", '"$0" -c "$1" >/dev/null 2>&1 & echo $!', sys.executable, code],
                         capture_output=True, text=True, check=True)
    return int(out.stdout)


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@pytest.mark.skipif(not Path("/proc/self/schedstat").exists(), reason="the kernel keeps no schedstat")
def test_a_worker_sharing_its_core_while_the_caller_sleeps_is_counted_as_stalled() -> None:
    core = min(os.sched_getaffinity(0))
    burner = _burner_on(core)
    try:
        wait_until(lambda: _cpu_seconds(burner) > 0.05, "the burner to run")
        worked: list[float] = []
        done, leave = threading.Event(), threading.Event()

        def work() -> None:
            os.sched_setaffinity(0, {core})  # this thread only: it shares the burner's core
            while time.thread_time() < 0.3:
                pass
            worked.append(time.thread_time())
            done.set()
            leave.wait(HANG)  # alive until the watch is read: an interval in which a thread ended counts no
            # stall (tests/timing.py), and at load 17 one sampling interval was 0.5 s of this test's 2.6 s

        worker = threading.Thread(target=work)
        with Stopwatch() as watch:
            worker.start()
            assert done.wait(HANG)
    finally:
        leave.set()
        os.kill(burner, 9)
    worker.join()
    # the worker had at best half its core: it waited about as long as it ran, all of it while
    # the caller slept waiting for it; the caller's own run delay saw none of it
    assert watch.stalled > 0.1, watch
    assert watch.uncontended >= worked[0] - 0.05, watch  # never less than the run's own CPU
    assert watch.uncontended < watch.cpu + 0.15, watch  # about what an idle core would have taken
