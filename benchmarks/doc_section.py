"""What every benchmark script shares: rewriting its own section of ``docs/benchmarks.md``,
and naming the machine it ran on.

Each script owns the text between its two markers (``<!-- bench_x:start -->`` …
``<!-- bench_x:end -->``) and rewrites only that, so the scripts can run in any order.
"""

from __future__ import annotations

import os
import platform
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Child", "cpu_name", "load_average", "machine", "run_child", "write_section"]

_NEW_DOC = "# Benchmarks\n\nEach benchmark script owns one section of this file, between its markers, and rewrites it.\n"


def write_section(path: Path, start: str, end: str, text: str) -> None:
    """Replace the section between ``start`` and ``end`` in ``path`` with ``text`` (which holds
    both markers); append it when the file has no such section; create the file when missing."""
    doc = path.read_text(encoding="utf-8") if path.exists() else _NEW_DOC
    if start in doc and end in doc:
        head, rest = doc.split(start, 1)
        tail = rest.split(end, 1)[1]
        doc = head + text + tail
    else:
        doc = doc.rstrip("\n") + "\n\n" + text + "\n"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(doc, encoding="utf-8")


def cpu_name() -> str:
    """The processor's model name (from /proc/cpuinfo where there is one)."""
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return cpu


def machine() -> str:
    """``<cpu>, <n> CPUs``: the part of every environment line that names the machine."""
    return f"{cpu_name()}, {os.cpu_count()} CPUs"


def load_average() -> str:
    """The one-minute load average (``/proc/loadavg``), ``?`` where there is none."""
    p = Path("/proc/loadavg")
    return p.read_text().split()[0] if p.exists() else "?"


@dataclass(frozen=True)
class Child:
    """One command run to its end: its CPU time (user + system, from ``os.wait4``: on a shared
    machine wall time says more about the neighbours than the command), wall time, peak
    resident memory, stdout and exit status."""

    cpu: float
    wall: float
    peak_mb: float
    out: bytes
    code: int


def run_child(argv: list[str], env: dict[str, str], cwd: Path) -> Child:
    """Run ``argv`` (stderr dropped) and measure it as :class:`Child` says."""
    t0 = time.perf_counter()
    with tempfile.TemporaryFile() as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.DEVNULL, env=env, cwd=cwd)
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        wall = time.perf_counter() - t0
        out.seek(0)
        return Child(usage.ru_utime + usage.ru_stime, wall, usage.ru_maxrss / 1024, out.read(), proc.returncode)
