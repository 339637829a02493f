"""The guardian's gate (issue 19): decisions per second and latency per decision, with 20 DSL
policies, the CFO ledger in SQLite and a 10-node causal model simulated at 1,000 samples.

**Workload**: a policy store of 20 DSL policies (hard and soft, over named facts, the exact cost
and a declared parameter; every policy matches every action, so each decision solves all of them
at once) and a stream of proposed actions cycling through four shapes — a clear one (APPROVE), a
deletion on production (REJECT by a hard policy, with its minimal facts from the engine's
conflict), one over the agent's budget (ESCALATE ``budget_exceeded``) and one whose simulated
risk is above the threshold (ESCALATE ``causal_risk``) — with varying numbers. Each decision is
the whole :func:`cda.guardian.decide.evaluate`: validation from JSON text, the policies
through ``cda.api.solve``, the ledger read, the simulation, the receipt (hashed, not logged).

**Simulator**: gsim's causal simulator (``cda.guardian.causal``) on its 10-node example model
``examples/guardian/marketing_launch.toml``.

**The gateway's overhead** (``cda guard proxy``, issue 31): the MCP SDK's client calls the
example records server (``examples/guardian/records_server.py``, the SDK's MCPServer over stdio)
directly and through the gateway in front of it (``examples/guardian/gateway.toml``), the two
calls interleaved in one run on the same machine; each proxied call is the whole path — the
action built from the call, the policies, the budget, the reservation and its settlement in the
guardian file, the decision and call receipts, the upstream call. The overhead is the proxied
latency minus the direct one, at p50 and p95.

Run ``python benchmarks/bench_guardian.py`` (about two minutes; ``--write`` rewrites this script's
sections of docs/benchmarks.md, ``--quick`` runs 40 decisions and 40 calls, ``--only-proxy`` only
the gateway's).
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import math
import os
import platform
import statistics
import sys
import tempfile
import time
from decimal import Decimal
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.doc_section import machine, write_section  # noqa: E402

DOC = ROOT / "docs" / "benchmarks.md"
START, END = "<!-- bench_guardian:start -->", "<!-- bench_guardian:end -->"
PROXY_START, PROXY_END = "<!-- bench_guardian_proxy:start -->", "<!-- bench_guardian_proxy:end -->"
MODEL = "examples/guardian/marketing_launch.toml"


def causal_simulator() -> tuple[Any, Path, str]:
    """The causal module, the model file and what they are."""
    module = importlib.import_module("cda.guardian.causal")
    return module, ROOT / MODEL, "cda.guardian.causal"


def policy_store() -> Any:
    """20 DSL policies: 14 hard, 6 soft, every one matching every action."""
    from cda.guardian.policies import load_policy_store

    hard = [
        "not (deletes and touches_prod)",
        "value(metric:cost) <= 5000 USD",
        "deletes implies not (touches_prod or touches_billing)",
        "touches_billing implies value(metric:cost) <= 1000 USD",
        "not (uses_shell and touches_prod)",
        "value(metric:param_discount_pct) <= 40",
        "value(metric:param_ads_per_day) <= 12",
        "launches implies value(metric:param_ads_per_day) >= 1",
        "not (launches and deletes)",
        "uses_shell implies not launches",
        "value(metric:cost) >= 0 USD",
        "touches_prod implies value(metric:cost) <= 4000 USD",
        "not (touches_billing and uses_shell)",
        "at_most(2, [deletes, touches_prod, touches_billing, uses_shell])",
    ]
    soft = [
        "value(metric:param_discount_pct) <= 20",
        "value(metric:param_ads_per_day) <= 6",
        "value(metric:cost) <= 2000 USD",
        "not touches_prod",
        "launches implies value(metric:param_discount_pct) <= 30",
        "not (launches and touches_billing)",
    ]
    policies = [{"id": f"h{i}", "dsl": d, "requires": ["discount_pct", "ads_per_day"]} for i, d in enumerate(hard)]
    policies += [{"id": f"s{i}", "kind": "soft", "weight": i + 1, "dsl": d, "requires": ["discount_pct", "ads_per_day"]}
                 for i, d in enumerate(soft)]  # fmt: skip
    return load_policy_store({
        "config": {"max_auto_launch_risk": Decimal("0.5"), "min_soft_score": Decimal("0.2")},
        "parameters": {"discount_pct": "count", "ads_per_day": "count"},
        "facts": {
            "deletes": {"action_type": ["db.delete", "db.drop"]},
            "launches": {"action_type": ["ads.launch"]},
            "touches_prod": {"resource": ["prod/*"]},
            "touches_billing": {"resource": ["billing/*"]},
            "uses_shell": {"tool": ["shell"]},
        },
        "policy": policies,
    })  # fmt: skip


def actions(n: int) -> list[str]:
    """``n`` action documents cycling through the four shapes, with varying numbers."""
    out = []
    for i in range(n):
        shape = i % 4
        doc: dict[str, Any] = {"action_id": f"act-{i}", "agent_id": "agent-7", "tool": {"name": "ads", "version": "2.1"},
                               "action_type": "ads.launch", "resources": [f"campaign/{i}"], "cost_estimate": str(100 + i % 50),
                               "parameters": {"budget_usd": 20000 + 10 * (i % 100), "discount_pct": 5 + i % 10, "ads_per_day": 2 + i % 3}}  # fmt: skip
        if shape == 1:
            doc.update(action_type="db.delete", resources=["prod/users"], tool={"name": "sql", "version": "1.0"})
        elif shape == 2:
            doc["cost_estimate"] = str(2500 + i)  # over the 2,000 USD budget
        elif shape == 3:
            doc["parameters"] = {"budget_usd": 2000 + i % 10, "discount_pct": 35, "ads_per_day": 11}  # a likely loss
        out.append(json.dumps(doc))
    return out


def run(n: int, samples: int) -> dict[str, Any]:
    from cda.guardian.decide import evaluate
    from cda.guardian.ledger import Ledger
    from cda.guardian.simulation import CausalModelSimulator

    causal, model_path, source = causal_simulator()
    model = causal.load_causal_model(model_path)
    simulator = CausalModelSimulator(model, samples=samples)
    store = policy_store()
    with tempfile.TemporaryDirectory() as tmp:
        ledger = Ledger.open(Path(tmp) / "guardian.db")
        ledger.set_budget("agent-7", "USD", Decimal(2000))
        docs = actions(n)
        for doc in docs[:8]:  # warm-up: imports, the first solver calls
            evaluate(doc, store, simulator, ledger, seed=1)
        times: list[float] = []
        cpu: list[float] = []
        by_outcome: dict[str, list[tuple[float, float]]] = {}
        start = time.perf_counter()
        for doc in docs:
            t0, c0 = time.perf_counter(), time.process_time()
            record = evaluate(doc, store, simulator, ledger, seed=1)
            wall_s, cpu_s = time.perf_counter() - t0, time.process_time() - c0
            times.append(wall_s)
            cpu.append(cpu_s)
            by_outcome.setdefault(f"{record.decision.value} {record.reason}", []).append((wall_s, cpu_s))
        wall = time.perf_counter() - start
        ledger.close()
    rows = {k: {"n": len(v), "wall": _stats([w for w, _ in v]), "cpu": _stats([c for _, c in v])} for k, v in sorted(by_outcome.items())}
    return {
        "decisions": n, "samples": samples, "nodes": len(model.nodes), "policies": len(store.policies), "source": source,
        "per_second": n / wall, "wall": _stats(times), "cpu": _stats(cpu), "rows": rows,
    }  # fmt: skip


def _stats(values: list[float]) -> dict[str, float]:
    """Median, p95 (nearest rank) and max, in milliseconds."""
    ordered = sorted(values)
    rank = max(0, math.ceil(0.95 * len(ordered)) - 1)
    return {"p50": 1000 * statistics.median(ordered), "p95": 1000 * ordered[rank], "max": 1000 * ordered[-1]}


def section(r: dict[str, Any]) -> str:
    lines = [
        START,
        "## Guardian: decisions per second and latency (`benchmarks/bench_guardian.py`)",
        "",
        f"{r['decisions']} decisions of `cda.guardian.decide.evaluate`, one after another, each the whole gate: "
        f"validation from JSON text, {r['policies']} DSL policies (14 hard, 6 soft, all matching) decided in one "
        "`cda.api.solve` call, the CFO ledger read from SQLite, the causal simulation "
        f"({r['nodes']}-node model `{MODEL}`, {r['samples']} samples) and the receipt. Simulator: {r['source']}.",
        "",
        f"Decisions per second: **{r['per_second']:.1f}** (one process, one decision at a time).",
        "",
        "| decisions | n | wall p50 | wall p95 | wall max | CPU p50 | CPU p95 |",
        "|---|---:|---:|---:|---:|---:|---:|",
        *[_row(k, v) for k, v in r["rows"].items()],
        _row("**all**", {"n": r["decisions"], "wall": r["wall"], "cpu": r["cpu"]}),
        "",
        "Target: p95 ≤ 50 ms per decision. *Wall* is the latency seen by the caller on the shared machine; *CPU* is "
        "the processor time the decision used (`time.process_time`), which waiting for a core does not count: what a "
        "decision costs on an idle core.",
        "",
        f"Environment: {machine()}, Python {platform.python_version()}, on {time.strftime('%Y-%m-%d', time.gmtime())}; "
        f"load average {r['load'][0]:.1f} before and {r['load'][1]:.1f} after the run (other work on the "
        "machine counts in the wall-clock figures, not in the CPU ones). A REJECT costs more than an APPROVE: the engine then "
        "enumerates the conflict's minimal cores (the violated policy's minimal facts).",
        "",
        "Reproduce: `pip install -e '.[test]' && python benchmarks/bench_guardian.py --write` (rewrites this section; "
        "`--quick` runs 40 decisions and only prints).",
        END,
    ]
    return "\n".join(lines)


def _row(name: str, v: dict[str, Any]) -> str:
    w, c = v["wall"], v["cpu"]
    return f"| {name} | {v['n']} | {w['p50']:.1f} ms | {w['p95']:.1f} ms | {w['max']:.1f} ms | {c['p50']:.1f} ms | {c['p95']:.1f} ms |"


def run_proxy(n: int) -> dict[str, Any]:
    """``n`` read_record calls straight to the records server and ``n`` through the gateway,
    alternated, and ``n // 4`` delete calls the gateway rejects (the upstream never sees them)."""
    import anyio
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        env = {**os.environ, "PYTHONPATH": str(ROOT), "CDA_KEY_DIR": str(folder / "keys")}
        upstream = [sys.executable, str(ROOT / "examples" / "guardian" / "records_server.py"), str(folder / "calls.jsonl")]
        from cda.guardian.ledger import Ledger

        ledger = Ledger.open(folder / "guardian.db")
        ledger.set_budget("agent-7", "USD", Decimal(10**6))
        ledger.close()
        direct = StdioServerParameters(command=upstream[0], args=upstream[1:], env=env)
        gateway = StdioServerParameters(command=sys.executable, env=env, args=[
            "-m", "cda", "guard", "proxy", "--upstream", "records=" + " ".join(upstream), "--agent", "agent-7",
            "--policies", str(ROOT / "examples" / "guardian" / "gateway.toml"), "--ledger", str(folder / "guardian.db")])
        times: dict[str, list[float]] = {"direct": [], "proxied": [], "rejected": []}

        async def measure() -> None:
            async with Client(direct, read_timeout_seconds=120) as plain, Client(gateway, read_timeout_seconds=120) as guarded:
                async def timed(client: Any, name: str, args: dict[str, Any], into: str | None) -> None:
                    t0 = time.perf_counter()
                    result = await client.call_tool(name, args)
                    if into is not None:
                        times[into].append(time.perf_counter() - t0)
                    assert result.is_error == (name == "delete_record"), result.content

                for i in range(8):  # warm-up: imports, the first solver calls
                    await timed(plain, "read_record", {"table": "customers", "key": i}, None)
                    await timed(guarded, "read_record", {"table": "customers", "key": i}, None)
                for i in range(n):
                    await timed(plain, "read_record", {"table": "customers", "key": 100 + i}, "direct")
                    await timed(guarded, "read_record", {"table": "customers", "key": 100 + i}, "proxied")
                    if i % 4 == 0:
                        await timed(guarded, "delete_record", {"table": "prod", "key": i}, "rejected")

        anyio.run(measure)
        calls = (folder / "calls.jsonl").read_text().splitlines()
    deletes = sum('"delete_record"' in c for c in calls)
    return {"calls": n, "direct": _stats(times["direct"]), "proxied": _stats(times["proxied"]),
            "rejected": _stats(times["rejected"]), "n_rejected": len(times["rejected"]), "upstream_calls": len(calls),
            "upstream_deletes": deletes}


def proxy_section(r: dict[str, Any]) -> str:
    d, p, x = r["direct"], r["proxied"], r["rejected"]
    lines = [
        PROXY_START,
        "## Guardian: the MCP gateway's overhead per call (`benchmarks/bench_guardian.py`)",
        "",
        f"The MCP SDK's client calls `read_record` on the example records server (the SDK's MCPServer over stdio) "
        f"{r['calls']} times directly and {r['calls']} times through `cda guard proxy` in front of it, alternated in "
        "one run; a proxied call is the whole path: the action built from the call, the store "
        "`examples/guardian/gateway.toml`, the budget, the reservation and its settlement in the guardian file (SQLite, "
        "WAL, fsync per commit), the decision and call receipts, and the upstream call. Every `delete_record` on "
        f"`prod` ({r['n_rejected']} calls) is rejected by the gateway: the upstream saw {r['upstream_deletes']} of them "
        f"and {r['upstream_calls']} calls in all (the warm-up's 16 included).",
        "",
        "| calls | n | wall p50 | wall p95 | wall max |",
        "|---|---:|---:|---:|---:|",
        f"| direct to the upstream | {r['calls']} | {d['p50']:.1f} ms | {d['p95']:.1f} ms | {d['max']:.1f} ms |",
        f"| through the gateway (APPROVE, called) | {r['calls']} | {p['p50']:.1f} ms | {p['p95']:.1f} ms | {p['max']:.1f} ms |",
        f"| through the gateway (REJECT, not called) | {r['n_rejected']} | {x['p50']:.1f} ms | {x['p95']:.1f} ms | {x['max']:.1f} ms |",
        f"| **overhead** (gateway − direct) | | **{p['p50'] - d['p50']:.1f} ms** | **{p['p95'] - d['p95']:.1f} ms** | |",
        "",
        "Where a proxied call's time goes (cProfile of the gateway in process, 2026-11-27, load ~10): three commits of "
        "the guardian file, each fsynced (the reservation before the call, its settlement after, the decision's "
        "record: about 5.5 ms each on this disk), the decision itself (about 12 ms: the policies through "
        "`cda.api.solve`), the upstream call (as direct), and the hop to a worker thread and back. The receipt log is "
        "fsynced per commit only with `--fsync` (as `cda serve`'s).",
        "",
        f"Environment: {machine()}, Python {platform.python_version()}, on {time.strftime('%Y-%m-%d', time.gmtime())}; "
        f"load average {r['load'][0]:.1f} before and {r['load'][1]:.1f} after (the machine is shared: three "
        "processes — client, gateway, upstream — take turns on its cores; the figures are wall-clock).",
        "",
        "Reproduce: `pip install -e '.[test]' && python benchmarks/bench_guardian.py --only-proxy --write`.",
        PROXY_END,
    ]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--decisions", type=int, default=400)
    parser.add_argument("--samples", type=int, default=1000)
    parser.add_argument("--quick", action="store_true", help="40 decisions, print only")
    parser.add_argument("--calls", type=int, default=200, help="calls direct and through the gateway, each")
    parser.add_argument("--only-proxy", action="store_true", help="only the gateway's overhead")
    parser.add_argument("--write", action="store_true", help="rewrite this script's sections of docs/benchmarks.md")
    args = parser.parse_args()
    if not args.only_proxy:
        before = os.getloadavg()[0]
        result = run(40 if args.quick else args.decisions, args.samples)
        result["load"] = (before, os.getloadavg()[0])
        text = section(result)
        print(text)
        if args.write and not args.quick:
            write_section(DOC, START, END, text)
    before = os.getloadavg()[0]
    proxied = run_proxy(40 if args.quick else args.calls)
    proxied["load"] = (before, os.getloadavg()[0])
    text = proxy_section(proxied)
    print(text)
    if args.write and not args.quick:
        write_section(DOC, PROXY_START, PROXY_END, text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
