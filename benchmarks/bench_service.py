"""Service benchmark (issue 15): ``cda serve`` under load, server and load generator in separate processes.

The server is ``python -m cda serve DB`` on a loopback port (a child process); this script is the
load generator (asyncio: the ``websockets`` client for the ToolBus, a small HTTP/1.0 SSE reader for
the streams, so a thousand subscribers cost the generator little). Every phase is bounded in
count and time (``--timeout`` per phase).

0. **Cost to the draft** (in this process, before any server starts): ``--cost-n`` actions run
   one after another through the runner with the server's stores (one SQLite file, WAL,
   ``synchronous=NORMAL``): CPU seconds (``process_time``) from the inputs to the draft boundary
   summary and to the end, median; and the floor that cost sets: ``actions x cost / cores``.
1. **Actions**: ``--actions`` (200) actions started at once over the ToolBus (20 connections), each
   followed on its stream; TTFS = from sending ``actions.start`` to the draft boundary summary
   (the first ``action_checkpoint`` with ``kind: boundary_summary`` and ``draft: true``, spec
   §10) seen by the subscriber; p50 / p95 / max; the queue wait apart (from sending
   ``actions.start`` to the action's ``action_started``, the runner's first event: before it the
   action only waited for a slot); the time to finish all, events/s delivered, the server's CPU
   seconds. ``--repeat K`` runs this phase K times on fresh servers (the spread; the load average
   of the machine is read before each run), ``--actions-only`` skips phases 2-4.
2. **Subscribers**: ``--subscribers`` (1,000): half idle (on actions waiting for an approval that
   never comes), half live (on 10 actions, approved once every subscriber is connected); every live
   subscriber's timeline is checked against the store (every event once, in order: 0 lost,
   0 duplicated); first-event latency; plus 40 clients that never read while the live actions run
   (server RSS, sampled).
3. **Idle**: server CPU (utime + stime from /proc) over ``--idle-s`` seconds with 1,000 idle
   subscribers connected.
4. **Reconnect storm**: the server is stopped (SIGTERM) and started again on the same port;
   ``--storm`` (500) clients reconnect at once with a ``Last-Event-ID`` from the middle of a
   finished stream; each must get exactly the rest. Time to all done, first-event p50 / p95.

Usage: ``python benchmarks/bench_service.py [--write]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.doc_section import machine, write_section  # noqa: E402

EXAMPLE = ROOT / "examples" / "action" / "service_outage.json"
TERMINAL = {"action_completed", "action_partial", "action_failed"}
START, END = "<!-- bench_service:start -->", "<!-- bench_service:end -->"
CORES = os.cpu_count() or 1


def inputs(purpose: str, **extra: Any) -> dict[str, Any]:
    data = json.loads(EXAMPLE.read_text(encoding="utf-8"))
    ken = json.loads((EXAMPLE.parent / "ken_services.json").read_text(encoding="utf-8"))
    data["ken"] = {"nodes": [{"id": n["id"]} for n in ken["nodes"]],
                   "edges": [{"source": e["source"], "relation": e["relation"], "target": e["target"]}
                             for e in ken["links"]]}
    data["seed"] = {"purpose": purpose}
    data.update(extra)
    return data


class Server:
    def __init__(self, db: Path, port: int = 0, workers: int = 2, processes: int = 0) -> None:
        env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"}
        self.proc = subprocess.Popen([sys.executable, "-m", "cda", "serve", str(db), "--port", str(port),
                                      "--workers", str(workers), "--processes", str(processes)],
                                     stdout=subprocess.PIPE, text=True, env=env)
        assert self.proc.stdout is not None
        match = re.search(r"http://([0-9.]+):([0-9]+)/", self.proc.stdout.readline())
        assert match, "server did not start"
        self.host, self.port = match.group(1), int(match.group(2))

    def cpu_s(self, children: bool = True) -> float:
        """CPU seconds of the server and (unless ``children`` is False) of its runner processes."""
        total = 0
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                fields = stat.read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if stat.parent.name == str(self.proc.pid) or (children and fields[1] == str(self.proc.pid)):
                total += int(fields[11]) + int(fields[12])
        return total / os.sysconf("SC_CLK_TCK")

    def rss_mb(self) -> float:
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        return 0.0

    def stop(self) -> int:
        self.proc.send_signal(signal.SIGTERM)
        code = self.proc.wait(30)
        if self.proc.stdout:
            self.proc.stdout.close()
        return code


async def sse(host: str, port: int, action_id: str, last: int | None = None, *,
              want: str | None = None, t0: float | None = None, on_want: Any = None) -> dict[str, Any]:
    """Read one stream to its end: ids, the time of the first message, of ``action_started`` and of
    the first ``want`` checkpoint (for ``boundary_summary``: the draft, ``"draft":true``)."""
    reader, writer = await asyncio.open_connection(host, port, limit=1 << 22)
    extra = f"Last-Event-ID: {last}\r\n" if last is not None else ""
    writer.write(f"GET /streams/actions/{action_id} HTTP/1.0\r\nHost: {host}:{port}\r\n"  # the server's Host guard
                 f"Accept: text/event-stream\r\n{extra}\r\n"
                 .encode())
    began = time.perf_counter() if t0 is None else t0
    status = int((await reader.readline()).split()[1])
    while (await reader.readline()) not in (b"\r\n", b""):
        pass
    out: dict[str, Any] = {"status": status, "ids": [], "first": None, "want": None, "started": None}
    while status == 200:  # one message (lines up to a blank line) per read: the generator shares the cores
        try:
            block = await reader.readuntil(b"\n\n")
        except asyncio.IncompleteReadError:
            break
        fields = dict(line.partition(": ")[::2] for line in block.decode().split("\n") if line)
        if "data" in fields:
            now = time.perf_counter()
            out["ids"].append(int(fields["id"]))
            out["first"] = out["first"] or now - began
            if out["started"] is None and fields.get("event") == "action_started":
                out["started"] = now - began
            if want and out["want"] is None and '"kind":"' + want + '"' in fields["data"] and (
                    want != "boundary_summary" or '"draft":true' in fields["data"]):
                out["want"] = now - began
                if on_want is not None:
                    on_want()
            if fields.get("event") in TERMINAL:
                break
    writer.close()
    return out


class Bus:
    """One ToolBus connection; calls may overlap (answers matched by id)."""

    def __init__(self, ws: Any) -> None:
        self.ws, self.next, self.waiting = ws, 0, {}
        self.task = asyncio.create_task(self._read())

    async def _read(self) -> None:
        async for text in self.ws:
            frame = json.loads(text)
            self.waiting.pop(frame["id"]).set_result(frame)

    async def call(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self.next += 1
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self.waiting[self.next] = future
        await self.ws.send(json.dumps({"id": self.next, "method": method, "params": params}))
        frame = await future
        if "error" in frame:
            raise RuntimeError(frame["error"])
        return frame["result"]  # type: ignore[no-any-return]


async def buses(server: Server, n: int) -> list[Bus]:
    from websockets.asyncio.client import connect

    return [Bus(await connect(f"ws://{server.host}:{server.port}/toolbus", max_size=1 << 22)) for _ in range(n)]


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


async def phase_actions(server: Server, n: int, tag: str) -> dict[str, Any]:
    conns = await buses(server, 20)
    drafts: list[int] = []  # drafts seen so far
    at_p95: list[float] = []  # CPU seconds (server, its own process, this one) when the p95 draft came
    target = min(n, int(0.95 * n) + 1)

    def on_draft() -> None:
        drafts.append(1)
        if len(drafts) == target:  # read /proc once, not at every draft (it costs this process CPU)
            at_p95.extend([server.cpu_s() - cpu0, server.cpu_s(False) - main0, time.process_time() - own0])

    async def one(i: int) -> dict[str, Any]:
        t0 = time.perf_counter()
        started = await conns[i % len(conns)].call("actions.start", {"ability": "cda", "inputs": inputs(f"{tag}{i}")})
        return await sse(server.host, server.port, started["action_id"], want="boundary_summary", t0=t0,
                         on_want=on_draft)

    load = Path("/proc/loadavg").read_text().split()[0]
    cpu0, main0, own0 = server.cpu_s(), server.cpu_s(False), time.process_time()
    began = time.perf_counter()
    results = await asyncio.gather(*(one(i) for i in range(n)))
    wall = time.perf_counter() - began
    for c in conns:
        await c.ws.close()
    ttfs = [r["want"] for r in results if r["want"] is not None]
    queued = [r["started"] for r in results if r["started"] is not None]
    events = sum(len(r["ids"]) for r in results)
    complete = sum(1 for r in results if r["ids"] == list(range(len(r["ids"]))) and r["ids"])
    return {"actions": n, "ttfs_p50": pct(ttfs, 0.5), "ttfs_p95": pct(ttfs, 0.95), "ttfs_max": max(ttfs),
            "drafts": len(ttfs), "queue_p50": pct(queued, 0.5), "queue_p95": pct(queued, 0.95),
            "wall": wall, "events": events, "events_per_s": events / wall, "complete": complete,
            "server_cpu_s": server.cpu_s() - cpu0, "load": float(load),
            "server_cpu_p95_draft": at_p95[0] if at_p95 else float("nan"),
            "main_cpu_p95_draft": at_p95[1] if at_p95 else float("nan"),
            "client_cpu_p95_draft": at_p95[2] if at_p95 else float("nan")}


def cost_to_draft(n: int) -> dict[str, Any]:
    """CPU seconds of one action up to its draft and to its end, in this process, with the server's
    stores (median of ``n`` actions, after two to warm the imports)."""
    from cda.actions.receipts import ReceiptLog
    from cda.actions.runner import run_action
    from cda.adapters.event_store import EventStore
    from cda.contracts.action import CDAInputs
    from cda.contracts.events import ActionEvent
    from cda.contracts.receipt import canonical_json
    from cda.service.actions import is_draft, relax_fsync, share_write_lock

    folder = Path(tempfile.mkdtemp(prefix="bench_service_cost_"))
    db = folder / "receipts.sqlite"
    events, log = EventStore(db), ReceiptLog(db)
    for store in (events, log):
        relax_fsync(store)
    share_write_lock(events, log)
    drafts: list[float] = []
    totals: list[float] = []
    for i in range(n + 2):
        mark: list[float] = []

        def on_event(event: ActionEvent, mark: list[float] = mark) -> None:
            events.append(event)
            canonical_json(event.model_dump(mode="json"))  # what the server sends
            if is_draft(event):
                mark.append(time.process_time())

        c0 = time.process_time()
        run_action(CDAInputs.model_validate(inputs(f"cost{i}")), out_dir=folder, receipts=log,
                   subscribers=[on_event])
        if i >= 2:
            drafts.append(mark[0] - c0)
            totals.append(time.process_time() - c0)
    events.close()
    log.close()
    return {"n": n, "draft_cpu": pct(drafts, 0.5), "total_cpu": pct(totals, 0.5)}


async def phase_subscribers(server: Server, n: int, idle_s: float) -> dict[str, Any]:
    (bus,) = await buses(server, 1)
    consent = {"policies": {"pii_posture": "consent"}}
    live_ids = [(await bus.call("actions.start", {"ability": "cda", "inputs": inputs(f"live{i}", **consent)}))[
        "action_id"] for i in range(10)]
    idle_ids = [(await bus.call("actions.start", {"ability": "cda", "inputs": inputs(f"idle{i}", **consent)}))[
        "action_id"] for i in range(10)]
    half = n // 2
    idle = [asyncio.create_task(sse(server.host, server.port, idle_ids[i % 10])) for i in range(half)]
    live = [asyncio.create_task(sse(server.host, server.port, live_ids[i % 10])) for i in range(half)]
    # 40 clients that never read, on the live actions
    silent = []
    for i in range(40):
        _, w = await asyncio.open_connection(server.host, server.port)
        w.transport.pause_reading()
        w.write(f"GET /streams/actions/{live_ids[i % 10]} HTTP/1.0\r\nHost: b\r\n\r\n".encode())
        silent.append(w)
    await asyncio.sleep(3)  # every subscriber connected and holding its first event
    rss = [server.rss_mb()]
    began = time.perf_counter()
    for action_id in live_ids:
        await bus.call("actions.approve", {"action_id": action_id, "approval": "pii:consent"})
    sampling = True

    async def sample() -> None:
        while sampling:
            rss.append(server.rss_mb())
            await asyncio.sleep(0.2)

    sampler = asyncio.create_task(sample())
    done = await asyncio.gather(*live)
    delivered_s = time.perf_counter() - began
    sampling = False
    await sampler
    expected = {a: (await bus.call("actions.get", {"action_id": a}))["last_event_id"] for a in live_ids}
    lost = dup = 0
    for i, r in enumerate(done):
        want = list(range(expected[live_ids[i % 10]] + 1))
        lost += len(set(want) - set(r["ids"]))
        dup += len(r["ids"]) - len(set(r["ids"]))
    first = [r["first"] for r in done if r["first"] is not None]
    # idle CPU: top up to n idle subscribers, then measure
    idle += [asyncio.create_task(sse(server.host, server.port, idle_ids[i % 10])) for i in range(n - half)]
    await asyncio.sleep(3)
    cpu0, t0 = server.cpu_s(), time.perf_counter()
    await asyncio.sleep(idle_s)
    idle_cpu = (server.cpu_s() - cpu0) / (time.perf_counter() - t0)
    for w in silent:
        w.close()
    for t in idle:
        t.cancel()
    await bus.ws.close()
    return {"live": half, "idle_subscribers": n, "lost": lost, "duplicated": dup,
            "in_order": sum(1 for i, r in enumerate(done) if r["ids"] == list(range(expected[live_ids[i % 10]] + 1))),
            "first_p50": pct(first, 0.5), "first_p95": pct(first, 0.95), "delivered_s": delivered_s,
            "events": sum(len(r["ids"]) for r in done), "rss_before": rss[0], "rss_peak": max(rss),
            "idle_cpu": idle_cpu}


async def phase_storm(server: Server, n: int, finished: list[str]) -> dict[str, Any]:
    began = time.perf_counter()
    results = await asyncio.gather(*(sse(server.host, server.port, finished[i % len(finished)], last=10)
                                     for i in range(n)))
    wall = time.perf_counter() - began
    ok = sum(1 for r in results if r["ids"] and r["ids"][0] == 11 and r["ids"] == list(range(11, r["ids"][-1] + 1)))
    first = [r["first"] for r in results if r["first"] is not None]
    return {"clients": n, "complete": ok, "wall": wall, "first_p50": pct(first, 0.5), "first_p95": pct(first, 0.95)}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    out: dict[str, Any] = {"workers": args.workers, "processes": args.processes, "cost": cost_to_draft(args.cost_n), "runs": []}
    print("cost", out["cost"], flush=True)
    for k in range(args.repeat - 1):  # the extra runs, each on a fresh server and file
        folder = Path(tempfile.mkdtemp(prefix="bench_service_"))
        server = Server(folder / "receipts.sqlite", free_port(), args.workers, args.processes)
        try:
            out["runs"].append(await asyncio.wait_for(phase_actions(server, args.actions, f"r{k}x"), args.timeout))
            print("actions", out["runs"][-1], flush=True)
        finally:
            server.stop()
    folder = Path(tempfile.mkdtemp(prefix="bench_service_"))
    db = folder / "receipts.sqlite"
    port = free_port()
    server = Server(db, port, args.workers, args.processes)
    try:
        out["actions"] = await asyncio.wait_for(phase_actions(server, args.actions, "a"), args.timeout)
        out["runs"].append(out["actions"])
        print("actions", out["actions"], flush=True)
        if args.actions_only:
            return out
        out["subscribers"] = await asyncio.wait_for(phase_subscribers(server, args.subscribers, args.idle_s),
                                                    args.timeout)
        print("subscribers", out["subscribers"], flush=True)
        finished = [f"a{i}" for i in range(10)]
        (bus,) = await buses(server, 1)
        ids = [(await bus.call("actions.start", {"ability": "cda", "inputs": inputs(p)}))["action_id"]
               for p in finished]
        await bus.ws.close()
        assert server.stop() == 0
        server = Server(db, port, args.workers, args.processes)
        out["storm"] = await asyncio.wait_for(phase_storm(server, args.storm, ids), args.timeout)
        print("storm", out["storm"], flush=True)
    finally:
        if server.proc.poll() is None:
            server.stop()
    return out


def render(r: dict[str, Any]) -> str:
    a, c, runs = r["actions"], r["cost"], r["runs"]
    floor = a["actions"] * c["draft_cpu"] / CORES
    layout = (f"{r['processes']} runner processes x {r['workers']} slots" if r["processes"]
              else f"{r['workers']} threads")
    lines = [
        START,
        "## Service: ToolBus + SSE under load (`benchmarks/bench_service.py`)",
        "",
        f"{machine()}; server (`cda serve --processes {r['processes']} --workers {r['workers']}`: {layout}; actions "
        "scheduled by stage: every draft before any action's rest) and load generator in separate processes on "
        "loopback, sharing the 2 cores (the load averages below include both).",
        "",
        "| what | measured | target |",
        "|---|---|---|",
        f"| {a['actions']} concurrent actions over the ToolBus: TTFS (to the draft) p50 / p95 / max | "
        f"{a['ttfs_p50']:.2f} / {a['ttfs_p95']:.2f} / {a['ttfs_max']:.2f} s (load avg {a['load']:.2f}) "
        "| p95 <= 3.0 s |",
        f"| ... of it, waiting for a slot (start sent to `action_started` received) p50 / p95 | "
        f"{a['queue_p50']:.2f} / {a['queue_p95']:.2f} s | |",
        f"| ... all {a['actions']} finished, streams complete | {a['wall']:.1f} s, {a['complete']}/{a['actions']} "
        f"complete, {a['events_per_s']:.0f} events/s; server CPU {a['server_cpu_s']:.1f} s | |",
        f"| one action's CPU to its draft / to its end (runner + stores, in-process, median of {c['n']}) | "
        f"{c['draft_cpu'] * 1000:.1f} / {c['total_cpu'] * 1000:.1f} ms | |",
        f"| the floor that cost sets: {a['actions']} x CPU to the draft / {CORES} cores | {floor:.2f} s | |",
        f"| the server's CPU (with its runner processes) until 95% of the drafts were out | "
        f"{a['server_cpu_p95_draft']:.2f} s = {a['server_cpu_p95_draft'] / (0.95 * a['actions']) * 1000:.1f} ms "
        f"per action, of which the server's own process {a['main_cpu_p95_draft'] / (0.95 * a['actions']) * 1000:.1f} ms; "
        f"the load generator meanwhile: {a['client_cpu_p95_draft']:.2f} s | |",
    ]
    if "subscribers" in r:
        s, st = r["subscribers"], r["storm"]
        lines += [
            f"| {s['live']} live + {s['idle_subscribers'] - s['live']} idle subscribers: lost / duplicated | "
            f"{s['lost']} / {s['duplicated']} ({s['in_order']}/{s['live']} timelines exact) | 0 / 0 |",
            f"| ... first-event latency p50 / p95 | {s['first_p50'] * 1000:.0f} / {s['first_p95'] * 1000:.0f} ms | |",
            f"| ... {s['events']} events delivered to the live subscribers in | {s['delivered_s']:.1f} s | |",
            f"| server RSS with 40 clients that never read (before / peak) | {s['rss_before']:.0f} / "
            f"{s['rss_peak']:.0f} MB | < 500 MB |",
            f"| server CPU with {s['idle_subscribers']} idle subscribers | {s['idle_cpu'] * 100:.1f}% of a core "
            f"| < 5% |",
            f"| reconnect storm after a restart: {st['clients']} clients with Last-Event-ID | {st['complete']}/"
            f"{st['clients']} got exactly the rest in {st['wall']:.1f} s; first event p50 / p95 "
            f"{st['first_p50'] * 1000:.0f} / {st['first_p95'] * 1000:.0f} ms | |",
        ]
    if len(runs) > 1:
        lines += ["", f"The actions phase, {len(runs)} runs, each on a fresh server (load average: `/proc/loadavg`, "
                  "1 minute, as the run began):", "",
                  "| run | load avg | TTFS p50 | TTFS p95 | queue wait p95 | all finished |", "|---|---|---|---|---|---|"]
        lines += [f"| {i + 1} | {x['load']:.2f} | {x['ttfs_p50']:.2f} s | {x['ttfs_p95']:.2f} s | "
                  f"{x['queue_p95']:.2f} s | {x['wall']:.1f} s |" for i, x in enumerate(runs)]
    lines += ["", "TTFS is almost all waiting for a slot; why the p95 moves with the machine's load, and what "
              "would cut it further: docs/service.md, \"Throughput\"."]
    return "\n".join([*lines, END])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--actions", type=int, default=200)
    parser.add_argument("--subscribers", type=int, default=1000)
    parser.add_argument("--storm", type=int, default=500)
    parser.add_argument("--idle-s", type=float, default=10.0)
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds per phase at most")
    parser.add_argument("--workers", type=int, default=2, help="the server's slots (actions running at once)")
    parser.add_argument("--processes", type=int, default=2, help="the server's runner processes (0: threads)")
    parser.add_argument("--repeat", type=int, default=1, help="runs of the actions phase (the spread)")
    parser.add_argument("--actions-only", action="store_true", help="only the cost and the actions phase")
    parser.add_argument("--cost-n", type=int, default=20, help="actions measured in-process for the cost")
    parser.add_argument("--write", action="store_true", help="rewrite this script's section of docs/benchmarks.md (else print only)")
    args = parser.parse_args()
    result = asyncio.run(main_async(args))
    text = render(result)
    print(text)
    if args.write:
        write_section(ROOT / "docs" / "benchmarks.md", START, END, text)


if __name__ == "__main__":
    main()
