"""MCP servers as a person starts them, for the tests that drive them with the SDK's client: a
``cda … --http --port 0`` child and the URL it names, and a server process's CPU and threads read
from ``/proc`` (what a solver still running would show, whatever the load)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.conftest import ROOT

__all__ = ["busy_threads", "children_running", "cpu_seconds", "started_http"]


def started_http(argv: list[str], folder: Path, name: str) -> tuple[Any, str]:
    """A ``cda … --http --port 0`` child and the URL its first line on stderr names."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "cda", *argv, "--http", "--port", "0"], cwd=folder, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    assert proc.stderr is not None
    line = proc.stderr.readline()
    found = re.search(r"(http://127\.0\.0\.1:[0-9]+/mcp)", line)
    if found is None:
        proc.kill()
        raise AssertionError(f"{name} did not start: {line!r}{proc.stderr.read()}")
    return proc, found.group(1)


def cpu_seconds(pid: int) -> float:
    """CPU seconds (user and system) process ``pid`` has spent, every thread."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def busy_threads(pid: int) -> list[str]:
    """The threads of ``pid`` running or waiting for a CPU (state ``R``): a solver thread is one of
    them the whole time it solves, however busy the machine; an idle server has none."""
    busy = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            stat = (task / "stat").read_text()
        except OSError:  # the thread ended meanwhile
            continue
        name, rest = stat.split("(", 1)[1].rsplit(")", 1)
        if rest.split()[0] == "R":
            busy.append(f"{task.name}:{name}")
    return busy


def children_running(marker: str, parent: int | None = None) -> list[int]:
    """The pids of the children of ``parent`` (this process) whose command line contains
    ``marker`` (a server the SDK's stdio client started: the client does not say its pid)."""
    me, found = parent if parent is not None else os.getpid(), []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            ppid = int((proc / "stat").read_text().rsplit(")", 1)[1].split()[1])
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except (OSError, ValueError, IndexError):
            continue
        if ppid == me and marker in cmdline:
            found.append(int(proc.name))
    return found
