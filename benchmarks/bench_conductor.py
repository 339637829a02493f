"""Conductor benchmark: its own overhead per obligation, requests per second, and the share of a
request's time spent in CDA against the conductor itself.

Two workloads, each on a real SQLite IR database (WAL) in a temporary folder:

* **50 tools** — a registry of 50 synthetic tools over 10 obligation types (5 candidates each,
  random reliability, cost and latency; a tenth fail their precondition and a tenth their
  postcondition, so the plan loop also escalates), each tool answering at once. Requests of 5
  obligations each. The conductor's overhead per obligation is a request's whole time (the
  three loops: translation, selection, conditions, every IR write, verification, the reply)
  minus the time inside tools (measured around every tool call and re-run), divided by its 5
  obligations: what seed 002's "thin policy engine" costs. Target: p95 <= 5 ms.
* **CDA as a tool** — requests ``solve examples/service_outage.cda; compute …`` with the shipped
  registry: the share of the request's time inside ``cda.solve`` (the solve and the verify
  loop's re-solve on the other backend) against the rest.

Run ``python benchmarks/bench_conductor.py`` (with ``--write``, rewrites its section of docs/benchmarks.md) or
``--quick`` (fewer requests, prints only).
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))  # doc_section, when run as a file
from doc_section import machine, write_section  # noqa: E402

from cda.conductor.conduct import Conductor  # noqa: E402
from cda.conductor.irdb import IRDatabase  # noqa: E402
from cda.conductor.registry import load_registry, registry_from_data  # noqa: E402
from cda.conductor.tooling import Tool, Toolbox, ToolContext  # noqa: E402
from cda.conductor.tools import builtin_toolbox  # noqa: E402
from cda.contracts.conductor import ObligationsDoc  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "benchmarks.md"
START, END = "<!-- bench_conductor:start -->", "<!-- bench_conductor:end -->"
TARGET_P95_MS = 5.0


class Clock:
    """Time spent inside tools, measured around the real calls."""

    def __init__(self) -> None:
        self.in_tools = 0.0

    def tool(self, run: Any) -> Any:
        def timed(inputs: Mapping[str, Any], ctx: ToolContext) -> Any:
            start = time.perf_counter()
            try:
                return run(inputs, ctx)
            finally:
                self.in_tools += time.perf_counter() - start

        return timed


def _registry(rng: random.Random, clock: Clock) -> tuple[Any, list[str]]:
    types = [f"type{i}" for i in range(10)]
    tools, impls = [], {}
    for i in range(50):
        name = f"tool{i:02d}"
        failing_post = rng.random() < 0.1
        impls[name] = Tool(clock.tool(lambda inputs, ctx, n=name: {"value": "1" if n else "x"}))
        tools.append({
            "name": name, "satisfies": [types[i % 10]], "inputs": ["x"],
            "preconditions": ["open(x)"] if rng.random() < 0.1 else [],
            "postconditions": ["has(missing)"] if failing_post else ["has(value)"],
            "reliability": rng.choice(["high", "medium", "low"]), "cost": rng.choice(["tiny", "low", "medium", "high"]),
            "latency_ms": rng.randrange(0, 100),
        })
    toolbox = Toolbox(tools=impls, preconditions={"open": lambda i, o, c, a: "closed"},
                      postconditions=builtin_toolbox().postconditions)
    return registry_from_data({"tool": tools}, toolbox), types


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def bench_fifty_tools(requests: int, seed: int = 7) -> dict[str, Any]:
    rng = random.Random(seed)
    clock = Clock()
    registry, types = _registry(rng, clock)
    latencies, overheads = [], []
    with tempfile.TemporaryDirectory() as folder:
        db = IRDatabase(Path(folder) / "ir.sqlite")
        for r in range(requests):
            doc = ObligationsDoc.model_validate(
                {"obligations": [{"type": rng.choice(types), "inputs": {"x": k}} for k in range(5)]})
            c = Conductor(db, registry, lambda u, d=doc: d)
            in_tools, start = clock.in_tools, time.perf_counter()
            c.handle(f"request {r}")
            took = time.perf_counter() - start
            latencies.append(took)
            overheads.append((took - (clock.in_tools - in_tools)) / 5 * 1000)
        db.close()
    return {
        "requests": requests, "obligations": requests * 5,
        "requests_per_s": requests / sum(latencies),
        "request_p50_ms": statistics.median(latencies) * 1000, "request_p95_ms": _percentile(latencies, 0.95) * 1000,
        "overhead_p50_ms": statistics.median(overheads), "overhead_p95_ms": _percentile(overheads, 0.95),
        "tool_share": clock.in_tools / sum(latencies),
    }


def bench_cda_share(requests: int) -> dict[str, Any]:
    clock = Clock()
    base = builtin_toolbox()
    timed = Toolbox(tools={name: Tool(clock.tool(t.run), None if t.recheck is None else _timed_recheck(clock, t.recheck))
                           for name, t in base.tools.items()},
                    preconditions=base.preconditions, postconditions=base.postconditions)
    registry = load_registry(None, timed)
    latencies = []
    with tempfile.TemporaryDirectory() as folder:
        db = IRDatabase(Path(folder) / "ir.sqlite")
        c = Conductor(db, registry, context=ToolContext(ROOT))
        c.handle("solve examples/service_outage.cda; compute 1 / 7")  # untimed: imports solvers and sympy
        clock.in_tools = 0.0
        for r in range(requests):
            start = time.perf_counter()
            trace = c.handle(f"solve examples/service_outage.cda; compute {r} / 7")
            latencies.append(time.perf_counter() - start)
            assert trace.status == "answered", trace.answer
        db.close()
    total = sum(latencies)
    return {"requests": requests, "requests_per_s": requests / total, "request_p50_ms": statistics.median(latencies) * 1000,
            "request_p95_ms": _percentile(latencies, 0.95) * 1000, "cda_share": clock.in_tools / total}


def _timed_recheck(clock: Clock, recheck: Any) -> Any:
    def timed(inputs: Any, outputs: Any, ctx: Any) -> Any:
        start = time.perf_counter()
        try:
            return recheck(inputs, outputs, ctx)
        finally:
            clock.in_tools += time.perf_counter() - start

    return timed


def render(fifty: dict[str, Any], cda: dict[str, Any], seconds: float) -> str:
    met = "met" if fifty["overhead_p95_ms"] <= TARGET_P95_MS else "missed"
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    return "\n".join([
        START,
        "## Conductor: overhead per obligation and CDA's share (`benchmarks/bench_conductor.py`)",
        "",
        "A real SQLite IR database (WAL) in a temporary folder; every step of the loops reads and writes it; "
        "one untimed request first (it imports the solvers and sympy). "
        "*Overhead per obligation* is a request's whole time minus the time inside tools (measured around "
        "every call and re-run), divided by its obligations: translation, selection, precondition and "
        "postcondition checks, the verify loop's own work, every IR write (synchronous=NORMAL, WAL) and the reply.",
        "",
        "| workload | requests | requests/s | request p50 (ms) | request p95 (ms) | overhead per obligation p50 / p95 (ms) | target |",
        "|---|---:|---:|---:|---:|---:|---|",
        f"| 50 tools, 5 obligations per request | {fifty['requests']} | {fifty['requests_per_s']:.1f} | "
        f"{fifty['request_p50_ms']:.1f} | {fifty['request_p95_ms']:.1f} | "
        f"{fifty['overhead_p50_ms']:.2f} / {fifty['overhead_p95_ms']:.2f} | p95 ≤ {TARGET_P95_MS:g} ms ({met}) |",
        f"| CDA as a tool: `solve examples/service_outage.cda; compute r / 7` | {cda['requests']} | "
        f"{cda['requests_per_s']:.1f} | {cda['request_p50_ms']:.1f} | {cda['request_p95_ms']:.1f} | | |",
        "",
        f"With the shipped registry, {cda['cda_share']:.0%} of a request's time is inside CDA's tools (the solve and "
        "the verify loop's re-solve on the other backend) and the rest is the conductor (translation, selection, "
        f"conditions, IR writes, the reply). On the 50-tool registry, tools (instant ones) take {fifty['tool_share']:.0%}.",
        "",
        f"Measured on Python {sys.version.split()[0]}, {machine()}, on {time.strftime('%Y-%m-%d')}, in {seconds:.0f} s; "
        f"load average {load:.1f} (the machine may be shared).",
        "",
        "Reproduce: `pip install -e . && python benchmarks/bench_conductor.py --write` (rewrites this section).",
        END,
    ])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer requests; print only")
    parser.add_argument("--write", action="store_true", help="rewrite this script's section of docs/benchmarks.md (else print only)")
    args = parser.parse_args()
    start = time.perf_counter()
    fifty = bench_fifty_tools(40 if args.quick else 400)
    cda = bench_cda_share(5 if args.quick else 40)
    text = render(fifty, cda, time.perf_counter() - start)
    print(text)
    if args.write:
        write_section(DOC, START, END, text)


if __name__ == "__main__":
    main()
