"""Cancelling an MCP tool call stops its solver: a real ``cda mcp`` process (over stdio, and over
streamable HTTP), the SDK's own client, a pigeonhole that neither solver finishes, and the
client cancelling the call (the SDK sends ``notifications/cancelled``). What is asserted is what
a person relies on: the call's run stops (the server's receipt ``mcp.cancelled`` says it ended,
and why), no thread of the server is left solving (its CPU stops), and the server goes on
answering. Bounds are :data:`~tests.timing.HANG` only: load slows each step, none of it is timed.
Before: the call's thread ran the solver to its end (forever, here) after the client gave up."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import pytest

pytest.importorskip("mcp", reason="the MCP SDK is in the test extra (cda[mcp])")

from mcp import Client  # noqa: E402
from mcp.client.stdio import StdioServerParameters  # noqa: E402
from mcp.server.mcpserver import Context  # noqa: E402  (a probe tool's annotation, resolved by the SDK)

from cda.actions.receipts import ReceiptLog  # noqa: E402
from cda.contracts.receipt import Receipt  # noqa: E402
from cda.testing import pigeonhole  # noqa: E402
from tests.conftest import ROOT  # noqa: E402
from tests.mcp_harness import busy_threads, children_running, cpu_seconds, started_http  # noqa: E402
from tests.timing import HANG, wait_until  # noqa: E402

pytestmark = pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="reads the server's threads from /proc")

SOLVING_CPU_S = 1.5  # CPU the server spends on the call before it is cancelled: start-up is done, it is solving
PUMP = "hyp leak, spill\nobservable wet\nobserve wet\nhard: wet iff (leak or spill)\ngoal prove leak or spill\n"


def _cancelled_receipts(out: Path) -> list[Receipt]:
    db = out / "gate.sqlite"
    if not db.exists():
        return []
    log = ReceiptLog(db)
    try:
        return [e.receipt for e in log.entries("mcp") if e.receipt.name == "mcp.cancelled"]
    finally:
        log.close()


def _idle(pid: int, samples: int = 50) -> tuple[float, list[str]]:
    """Wait until ``samples`` looks in a row find no thread of ``pid`` running (a solver thread is
    running or waiting for a CPU at every look, whatever the load); the CPU it spent meanwhile."""
    streak = [0]
    before = cpu_seconds(pid)

    def quiet() -> bool:
        streak[0] = 0 if busy_threads(pid) else streak[0] + 1
        return streak[0] >= samples

    wait_until(quiet, f"no thread of the server running for {samples} looks in a row")
    return cpu_seconds(pid) - before, busy_threads(pid)


def _action(backend: str) -> dict[str, Any]:
    """A CDAInputs object whose problem is the pigeonhole (an Action that does not end)."""
    dsl = pigeonhole(15).replace("goal best_explanation top 1\n", "")
    return {"problem": "Seat every pigeon.", "dsl": dsl, "observations": [],
            "goals": {"kind": "best_explanation", "claims": [], "top": 1}, "constraints": {"hard": [], "soft": []},
            "policies": {"pii_posture": "off", "egress": "local"}, "budgets": {"wall": 3600}, "risk_class": "low",
            "seed": {"purpose": "cancel-test"}, "backend": backend}


async def _cancel_a_long_solve(client: Client, pid: int, backend: str, out: Path,
                               tool: str = "solve") -> dict[str, Any]:
    """Start a solve that does not end, cancel it once the server is solving, and see it stop."""
    assert not (await client.call_tool("check", {"dsl": PUMP})).is_error  # started, imports done
    start = cpu_seconds(pid)
    answered: list[Any] = []
    arguments = {"dsl": pigeonhole(15), "backend": backend} if tool == "solve" else {"inputs": _action(backend)}

    async def solve() -> None:
        answered.append(await client.call_tool(tool, arguments))

    async with anyio.create_task_group() as calls:
        calls.start_soon(solve)
        with anyio.fail_after(HANG):
            while cpu_seconds(pid) < start + SOLVING_CPU_S:
                await anyio.sleep(0.05)  # a wait on the server's CPU, which only its solving raises
        solving = busy_threads(pid)
        calls.cancel_scope.cancel()  # the SDK sends notifications/cancelled for the call
    receipts = await anyio.to_thread.run_sync(lambda: wait_until(lambda: _cancelled_receipts(out),
                                                                 "the mcp.cancelled receipt"))
    spent, still = await anyio.to_thread.run_sync(_idle, pid)
    after = await client.call_tool("solve", {"dsl": PUMP, "backend": backend})  # the server goes on
    return {"answered": answered, "solving": solving, "receipts": receipts, "spent": spent, "still": still,
            "after": after}


def _assert_stopped(seen: dict[str, Any], backend: str, how: str) -> None:
    assert seen["answered"] == []  # a cancelled request gets no answer (the MCP specification)
    assert seen["solving"], "the server was not solving when the call was cancelled"
    [receipt] = seen["receipts"]
    assert receipt.status == "cancelled" and receipt.result["operation"] == "solve"
    assert receipt.result["stopped"] == "cancelled" and receipt.result["reason"] == f"cancelled by the client ({how})"
    assert receipt.result["run_ended"] is True and receipt.result["ended_after_s"] is not None
    assert seen["still"] == [] and seen["spent"] < 0.25, (seen["spent"], seen["still"], os.getloadavg())
    after = seen["after"]
    assert not after.is_error and after.structured_content["verdicts"][0]["status"] == "supported", backend


def _over_stdio(tmp_path: Path, out: Path, backend: str, tool: str) -> dict[str, Any]:
    """A ``cda mcp --out OUT`` the SDK's client starts over stdio, and a call of ``tool`` cancelled."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "CDA_KEY_DIR": str(tmp_path / "keys")}
    server = StdioServerParameters(command=sys.executable, args=["-m", "cda", "mcp", "--out", str(out)],
                                   env=env, cwd=str(ROOT))

    async def main() -> dict[str, Any]:
        async with Client(server, read_timeout_seconds=HANG) as client:
            [pid] = children_running(f"cda mcp --out {out}")
            return await _cancel_a_long_solve(client, pid, backend, out, tool=tool)

    return anyio.run(main)  # type: ignore[no-any-return]


@pytest.mark.parametrize("backend", ["z3", "clingo"])
def test_cancelling_a_call_over_stdio_stops_the_solver(tmp_path: Path, backend: str) -> None:
    out = tmp_path / "out"
    seen = _over_stdio(tmp_path, out, backend, "solve")

    _assert_stopped(seen, backend, "notifications/cancelled")


@pytest.mark.slow
def test_cancelling_a_call_over_streamable_http_stops_the_solver(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "out"
    monkeypatch.setenv("CDA_KEY_DIR", str(tmp_path / "keys"))
    proc, url = started_http(["mcp", "--out", str(out)], tmp_path, "cda mcp")
    try:
        async def main() -> dict[str, Any]:
            async with Client(url, read_timeout_seconds=HANG) as client:
                return await _cancel_a_long_solve(client, proc.pid, "clingo", out)

        # the 2026 protocol's streamable HTTP: a client cancels by closing the call's response stream
        _assert_stopped(anyio.run(main), "clingo", "it closed the call's response stream")
    finally:
        proc.terminate()
        proc.communicate(timeout=HANG)


GATEWAY_POLICIES = """
[facts]
deletes = { action_type = ["*delete*"] }

[[policy]]
id = "no_delete"
dsl = "not deletes"

[[tool]]
name = "solve"
cost = 3
"""


@pytest.mark.slow
def test_cancelling_a_call_at_the_guardian_gateway_cancels_it_upstream(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """``cda guard proxy`` in front of ``cda mcp``: the agent's cancel reaches the upstream (its
    solver stops, its receipt says the client cancelled), the call's reservation is released, and
    the gateway's receipt log says the call was cancelled."""
    import io

    from cda.cli.main import main
    from cda.guardian.ledger import Ledger

    monkeypatch.setenv("CDA_KEY_DIR", str(tmp_path / "keys"))
    (tmp_path / "policies.toml").write_text(GATEWAY_POLICIES, encoding="utf-8")
    db = tmp_path / "guardian.db"
    assert main(["task", "budget", "agent-7", "100", "--store", str(db)], io.StringIO(), io.StringIO()) == 0
    out = tmp_path / "out"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    gateway = StdioServerParameters(command=sys.executable, env=env, cwd=str(tmp_path), args=[
        "-m", "cda", "guard", "proxy", "--upstream", f"cda={sys.executable} -m cda mcp --out {out}",
        "--agent", "agent-7", "--policies", str(tmp_path / "policies.toml"), "--ledger", str(db)])

    async def agent() -> dict[str, Any]:
        async with Client(gateway, read_timeout_seconds=HANG) as client:
            [proxy] = children_running("guard proxy")
            [upstream] = children_running(f"cda mcp --out {out}", parent=proxy)
            return await _cancel_a_long_solve(client, upstream, "clingo", out)

    _assert_stopped(anyio.run(agent), "clingo", "notifications/cancelled")
    ledger = Ledger.open(db)
    try:
        solves = [(str(e.amount), e.status) for e in ledger.entries("agent-7") if e.amount == 3]
    finally:
        ledger.close()
    assert solves == [("3", "released"), ("3", "settled")]  # the cancelled solve, then the one after it
    log = ReceiptLog(tmp_path / "guardian.db.receipts.sqlite")
    try:
        [cancelled] = [e.receipt for e in log.entries("guard.proxy") if e.receipt.name == "guard.proxy.cancelled"]
    finally:
        log.close()
    assert cancelled.status == "cancelled" and cancelled.result["tool"] == "solve"


def test_cancelling_run_action_over_stdio_ends_the_action_partial_with_its_receipts(tmp_path: Path) -> None:
    """An Action cancelled through MCP ends as ``cda serve``'s cancelled actions do: partial,
    ``stopped: cancelled``, its ``action.end`` receipt written; the door's receipt names it."""
    out = tmp_path / "out"
    seen = _over_stdio(tmp_path, out, "clingo", "run_action")
    assert seen["answered"] == [] and seen["solving"]
    [receipt] = seen["receipts"]
    assert receipt.result["operation"] == "actions.run" and receipt.result["stopped"] == "cancelled"
    assert receipt.result["run_ended"] is True and seen["still"] == [], seen
    [action_id] = receipt.result["action_ids"]
    log = ReceiptLog(out / "receipts.sqlite")
    try:
        ends = [e.receipt.result for e in log.entries(action_id) if e.receipt.name == "action.end"]
    finally:
        log.close()
    assert ends and ends[-1]["status"] == "partial", ends


def _probed_server(seen: list[Any], started: anyio.Event) -> Any:
    """``cda mcp``'s server with one more tool: it waits until its call is cancelled, then says what
    :func:`cda.mcp.server.cancel_requested` read (the SDK's cancel signal, as the door reads it)."""
    from cda.mcp.server import build_server, cancel_requested

    server = build_server()

    @server.tool()
    async def cancel_probe(ctx: Context, wait: bool) -> bool:
        if not wait:
            return cancel_requested(ctx)
        started.set()
        try:
            await anyio.sleep_forever()
        finally:
            seen.append(cancel_requested(ctx))
        return False  # pragma: no cover - never reached: cancelled

    return server


def test_the_door_reads_the_client_s_cancel_where_the_installed_sdk_keeps_it() -> None:
    """The SDK exposes no public cancel signal to an ``MCPServer`` tool (its ``BaseContext.cancel_requested``
    is the low-level API's), so the door reads the session's private dispatch context in one function.
    Through the SDK's own client: a call not cancelled reads False, a call the client cancels reads
    True. An SDK that moves the event fails here with :class:`~cda.mcp.server.SdkChanged`, loudly,
    instead of every cancel being reported as a lost connection."""
    seen: list[Any] = []

    async def main() -> Any:
        started = anyio.Event()
        server = _probed_server(seen, started)
        # in memory over JSON-RPC (the stdio and HTTP transports' dispatcher); the SDK's direct
        # in-process peers ("auto" with a Server object) send no notifications/cancelled at all
        async with Client(server, read_timeout_seconds=HANG, mode="legacy") as client:
            plain = await client.call_tool("cancel_probe", {"wait": False})
            async with anyio.create_task_group() as calls:
                calls.start_soon(client.call_tool, "cancel_probe", {"wait": True})
                with anyio.fail_after(HANG):
                    await started.wait()
                calls.cancel_scope.cancel()  # the SDK sends notifications/cancelled for the call
            with anyio.fail_after(HANG):
                while not seen:
                    await anyio.sleep(0.01)
            return plain

    plain = anyio.run(main)
    assert not plain.is_error, plain.content
    assert plain.structured_content == {"result": False}
    assert seen == [True]


def test_an_sdk_that_moved_the_cancel_event_is_said_not_taken_for_a_lost_connection() -> None:
    from types import SimpleNamespace

    from cda.mcp.server import SdkChanged, cancel_requested

    for ctx in (SimpleNamespace(request_context=SimpleNamespace(session=SimpleNamespace())), SimpleNamespace()):
        with pytest.raises(SdkChanged, match="ServerSession._request_outbound.cancel_requested"):
            cancel_requested(ctx)
