"""What every benchmark script shares: rewriting its own section of ``docs/benchmarks.md``,
and naming the machine it ran on.

Each script owns the text between its two markers (``<!-- bench_x:start -->`` …
``<!-- bench_x:end -->``) and rewrites only that, so the scripts can run in any order.
"""

from __future__ import annotations

import os
import platform
from pathlib import Path

__all__ = ["cpu_name", "machine", "write_section"]

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
