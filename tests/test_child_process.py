"""benchmarks/child_process.py: a command measured from outside, as the benchmarks' whole-process
columns measure ``cda`` against its peers (docs/benchmarks.md).

What it promises, each checked here: the exit code and output passed through; the CPU time is the
command's own (a sleeping child has little, a spinning one at least what it spun); the peak
memory is the command's own, not the high-water mark of the large process that launched it; a
command past its timeout is stopped and labelled so.
"""

from __future__ import annotations

import sys
from pathlib import Path

from tests.conftest import benchmark_module

child_process = benchmark_module("child_process")


def test_exit_code_and_output_pass_through(tmp_path: Path) -> None:
    run = child_process.run_child(
        [sys.executable, "-c", "import sys; print('out'); print('err', file=sys.stderr); sys.exit(3)"], cwd=tmp_path
    )
    assert (run.returncode, run.stdout, run.stderr) == (3, "out\n", "err\n")
    assert not run.timed_out
    assert run.wall > 0.0


def test_cpu_time_is_the_commands_own() -> None:
    spin = child_process.run_child([sys.executable, "-c",
                                    "import time\nwhile time.process_time() < 0.4: pass"])
    sleep = child_process.run_child([sys.executable, "-c", "import time; time.sleep(1.0)"])
    assert spin.returncode == 0 and sleep.returncode == 0
    assert spin.cpu >= 0.4  # it spun that long on its own clock
    assert sleep.cpu < 0.9 <= sleep.wall  # waiting is not CPU time


def test_peak_memory_is_not_the_launchers() -> None:
    ballast = b"x" * (300 * 2**20)  # this process holds 300 MiB, touched
    small = child_process.run_child([sys.executable, "-c", "pass"])
    big = child_process.run_child([sys.executable, "-c", "b = b'y' * (200 * 2**20)"])
    assert len(ballast) == 300 * 2**20
    assert small.returncode == 0 and big.returncode == 0
    assert small.peak_mb < 100  # an interpreter's start, not this process's 300 MiB
    assert big.peak_mb >= 200  # the command's own allocation is counted


def test_a_command_past_its_timeout_is_stopped() -> None:
    run = child_process.run_child([sys.executable, "-c", "import time; time.sleep(600)"], timeout=0.5)
    assert run.timed_out and run.returncode is None
    assert run.wall < 300  # stopped, not waited for
