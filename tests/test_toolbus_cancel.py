"""A ToolBus call that runs in a thread stops with its client, the server and the call wall
(cda/service/calls.py). A real ``cda serve`` on loopback with a real WebSocket client.

The audit's reproduction: ``investigate.start`` on a pigeonhole (clingo), the client gone after 5 s:
the investigation's thread kept a core busy for minutes, and SIGTERM left the server alive 66 s
later with a traceback from ``_answer`` on stderr. A pigeonhole of 15 does not finish in these
tests' bounds (tests/test_cancel.py), so a call that ends is the cancel's doing. Whether the solver
still runs is read from the server's threads in ``/proc`` (a thread in a search is always runnable;
load makes it wait for a CPU, never sleep), so no bound here is tighter than a hang guard.
"""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest

from cda.service.serve import EXIT_WITHIN_S
from cda.testing import pigeonhole
from tests.service_harness import Server, call, serving, toolbus
from tests.timing import HANG, wait_until


def _runnable_threads(pid: int) -> int:
    """Threads of process ``pid`` running or waiting for a CPU (state ``R``)."""
    count = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            state = (task / "stat").read_text().rpartition(")")[2].split()[0]
        except (OSError, IndexError):
            continue  # a thread that ended meanwhile
        count += state == "R"
    return count


def _quiet(pid: int, reads: int = 20) -> bool:
    """No thread of ``pid`` runnable in ``reads`` reads in a row (a search never leaves that state)."""
    for _ in range(reads):
        if _runnable_threads(pid):
            return False
    return True


def _send_hard(ws: object, backend: str) -> None:
    ws.send(json.dumps({"id": 1, "method": "investigate.start",  # type: ignore[attr-defined]
                        "params": {"dsl": pigeonhole(15), "backend": backend}}))


def _searching(server: Server, cpu_s: float = 1.0) -> None:
    """Wait until the server has spent ``cpu_s`` of CPU on the call and a thread of it is busy."""
    spent = server.cpu()
    wait_until(lambda: server.cpu() - spent >= cpu_s and _runnable_threads(server.proc.pid) > 0, HANG)


@pytest.mark.parametrize("backend", ["clingo", "z3"])
def test_a_client_leaving_cancels_its_investigation(tmp_path: Path, backend: str) -> None:
    with serving(tmp_path / "receipts.sqlite") as server:
        with toolbus(server) as ws:
            _send_hard(ws, backend)
            _searching(server)
        # the client is gone (its socket closed)
        # the search stopped: no thread of the server left running (it would stay runnable for minutes)
        wait_until(lambda: _quiet(server.proc.pid), HANG)
        with toolbus(server) as again:  # the server goes on answering
            assert call(again, "investigate.start", {"dsl": pigeonhole(3), "backend": backend}).get("result")
        code = server.stop(signal.SIGTERM, timeout=4 * EXIT_WITHIN_S)
    assert code == 0 and "Traceback" not in server.stderr(), server.stderr()


@pytest.mark.parametrize("backend", ["clingo", "z3"])
def test_sigterm_stops_the_server_with_an_investigation_running(tmp_path: Path, backend: str) -> None:
    server = Server(tmp_path / "receipts.sqlite")
    try:
        with toolbus(server) as ws:
            _send_hard(ws, backend)
            _searching(server)
            start = time.monotonic()
            code = server.stop(signal.SIGTERM, timeout=4 * EXIT_WITHIN_S)
            took = time.monotonic() - start
    finally:
        if server.proc.poll() is None:
            server.proc.kill()
    assert code == 0, server.stderr()
    assert "Traceback" not in server.stderr() and "CancelledError" not in server.stderr(), server.stderr()
    assert took < 2 * EXIT_WITHIN_S, (took, os.getloadavg())  # the promise is EXIT_WITHIN_S; load gets twice that


def test_a_product_call_ends_at_the_call_wall(tmp_path: Path) -> None:
    with serving(tmp_path / "receipts.sqlite", "--call-wall", "1") as server, toolbus(server) as ws:
        ws.send(json.dumps({"id": 7, "method": "investigate.start", "params": {"dsl": pigeonhole(15)}}))
        answer = json.loads(ws.recv(timeout=HANG))
        assert answer["id"] == 7 and answer["error"]["code"] == "conflict", answer
        assert "call wall of 1 s" in answer["error"]["message"], answer
        assert "nothing of it was written" in answer["error"]["message"], answer
        # nothing half-made was kept: the session list has none
        assert call(ws, "investigate.start", {"dsl": pigeonhole(3)}).get("result")


def test_the_call_wall_option_is_checked(tmp_path: Path) -> None:
    import subprocess
    import sys

    for bad in ("nan", "-1", "0", "inf", "1e9"):
        proc = subprocess.run([sys.executable, "-m", "cda", "serve", str(tmp_path / "r.sqlite"), "--call-wall", bad],
                              capture_output=True, text=True, timeout=HANG)
        assert proc.returncode == 2 and "--call-wall" in proc.stderr and "Traceback" not in proc.stderr, (bad, proc)
    assert not (tmp_path / "r.sqlite").exists()
