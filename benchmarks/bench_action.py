"""Action benchmark (issue 5): time to first boundary summary (TTFS) and Ken query latency.

The spec's targets: TTFS ≤ 3.0 s for a root-cause problem over a Ken graph of 10k, 100k and 1M
edges, and a Ken query p95 ≤ 700 ms at top-50.

**The graph** (``generate``) is a seeded, service-dependency-like multigraph with exactly N
edges, built through ``KenGraph.add_node`` / ``add_edge`` like the loaders do:

* *systems* of 40 services in 4 tiers (frontends/gateways → APIs → workers/caches/queues →
  databases/stores); a service ``depends`` on 2–4 services of a lower tier of its own system
  and, with probability 0.7, on one shared *platform* service (auth, dns, kafka, …) drawn with
  Zipf weights, so a few platform services are hubs with thousands of dependants, as in real
  service maps;
* per system, 15 *faults* that ``causes`` 1–3 of its services, and 8 *runbooks* that ``fixes``
  1–2 services or faults;
* every node has a ``label`` in words ("Payments api 7 of system 1234, eu-west, team atlas"),
  so ``search`` has text to match.

**The problem** is a root cause over one system (40 services): ``domain Service``,
``hyp down(Service)``, ``observable slow(Service)``, ``pred depends(Service, Service)`` with no
``fact`` lines (the dependencies are read from Ken), the propagation clause of
``examples/service_outage.cda``, a single-fault bound, a few soft priors, two ``slow``
observations and one ``not slow``, plus a dashboard note in words. It runs through
``cda.actions.runner.run_action(inputs, ken=graph)``, so the action's coverage step searches the
whole graph for the observations' words and walks the causal neighbourhood of the symptoms.

**Measured**, each size in its own process (so memory and indexes start cold):

* graph build time and resident memory (reported, not part of TTFS);
* TTFS: from calling ``run_action`` to the first ``action_checkpoint`` of kind
  ``boundary_summary`` (the draft), seen by a subscriber; the first run after the build (cold:
  Ken's search index is built inside it) and the median of the warm runs that follow; and
  where the first run's time went (stages, by wrapping the runner's steps);
* the whole action's time;
* Ken query latency: a fixed, seeded set of ``--queries`` (default 200) queries of each kind at
  limit 50 — ``search`` for a word of a random node's label, ``neighborhood`` at 1–2 hops (any
  relation or one), ``path`` to a node 2–4 steps away (or a random one) within 3–4 hops, and
  ``related_by`` — p50 / p95 / max per kind and over all;
* a spot check at every size: for a sample of the queries, the answer equals a brute-force scan
  written here from the queries' definitions (asserted);
* the spec §10 metrics as **the runner itself** measured them (``ActionMetrics`` on the terminal
  event: TTFS, Ken query count / p95 / max, frontier, constraints, verifier pass rate, citation
  coverage, partial), beside the benchmark's own timings of the same run, with their ratio
  (runner / benchmark; they should agree within :data:`AGREE`).

Run ``python benchmarks/bench_action.py`` (all sizes, several minutes; prints the table and, with
``--write``, rewrites this script's section of docs/benchmarks.md) or ``--quick`` (10k only).
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import os
import platform
import random
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import networkx as nx

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "benchmarks.md"
START, END = "<!-- bench_action:start -->", "<!-- bench_action:end -->"
sys.path.insert(0, str(Path(__file__).resolve().parent))  # doc_section, when run as a file
from doc_section import machine, write_section  # noqa: E402

SIZES = (10_000, 100_000, 1_000_000)
QUICK_SIZES = (10_000,)
TTFS_TARGET = 3.0  # seconds
AGREE = 0.10  # the runner's own numbers and the benchmark's agree within 10%
P95_TARGET = 0.700  # seconds
LIMIT = 50  # top-50
KINDS = ("search", "neighborhood", "path", "related_by")
RELATIONS = ("depends", "causes", "fixes")

SYSTEM_SIZE = 40  # services per system
TIERS = 4
FAULTS_PER_SYSTEM = 15
RUNBOOKS_PER_SYSTEM = 8
PLATFORM_SHARE = 0.7  # chance that a service depends on one platform service
ZIPF_S = 1.0  # platform hubs: the k-th most popular is chosen with weight 1/k^s

DOMAINS = (
    "payments checkout auth search catalog inventory billing shipping orders cart users profile "
    "notifications email recommendations pricing reviews media analytics reporting ledger fraud tax "
    "currency session loyalty returns warehouse booking identity"
).split()
TIER_KINDS = (
    ("db", "store", "index"),  # tier 0: the bottom
    ("worker", "cache", "queue"),
    ("api", "service", "backend"),
    ("frontend", "gateway", "web"),
)
PLATFORM_KINDS = "auth dns kafka postgres redis vault objectstore mesh config secrets metrics logging".split()
REGIONS = "eu-west eu-central us-east us-west ap-south ap-northeast sa-east".split()
TEAMS = "atlas borealis cobalt dune ember fjord garnet harbor indigo juniper kestrel lumen".split()
FAULTS = (
    "disk pressure", "connection pool exhaustion", "certificate expiry", "memory leak", "bad deploy",
    "network partition", "cpu throttling", "replication lag", "dns misconfiguration", "quota exceeded",
)
RUNBOOK_VERBS = ("restart", "roll back", "scale out", "fail over", "rotate credentials of", "drain")


# ---------------------------------------------------------------------------------------------
# the graph
# ---------------------------------------------------------------------------------------------


@dataclass
class System:
    """One system of the graph: its services by tier (tier 0 = the bottom)."""

    index: int
    domain: str
    tiers: list[list[str]]

    @property
    def services(self) -> list[str]:
        return [s for tier in self.tiers for s in tier]


@dataclass
class Generated:
    """The edges and node labels of one graph, and its systems (for the problem)."""

    edges: list[tuple[str, str, str]]
    labels: dict[str, str]
    systems: list[System]
    platform: list[str]


def generate(n_edges: int, seed: int = 0) -> Generated:
    """A service-dependency-like graph with exactly ``n_edges`` distinct edges (see the module docstring)."""
    rng = random.Random(f"bench_action:{seed}:{n_edges}")
    labels: dict[str, str] = {}
    edges: list[tuple[str, str, str]] = []
    seen: set[tuple[str, str, str]] = set()

    def edge(u: str, rel: str, v: str) -> None:
        if len(edges) < n_edges and u != v and (u, rel, v) not in seen:
            seen.add((u, rel, v))
            edges.append((u, rel, v))

    n_platform = max(24, n_edges // 400)
    platform = []
    for j in range(n_platform):
        kind = PLATFORM_KINDS[j % len(PLATFORM_KINDS)]
        node = f"platform_{kind}_{j}"
        platform.append(node)
        labels[node] = f"Shared platform {kind} {j}, {rng.choice(REGIONS)}, team {rng.choice(TEAMS)}"
    hub_order = platform[:]
    rng.shuffle(hub_order)
    hub_weights = [1.0 / (k + 1) ** ZIPF_S for k in range(len(hub_order))]
    for j, node in enumerate(platform):  # the platform's own, sparse dependencies
        for other in rng.sample(platform[:j], min(j, 2)):
            edge(node, "depends", other)

    systems: list[System] = []
    per_tier = SYSTEM_SIZE // TIERS
    while len(edges) < n_edges:
        c = len(systems)
        domain = DOMAINS[rng.randrange(len(DOMAINS))]
        region, team = rng.choice(REGIONS), rng.choice(TEAMS)
        tiers: list[list[str]] = []
        for t in range(TIERS):
            tier = []
            for k in range(per_tier):
                kind = TIER_KINDS[t][k % len(TIER_KINDS[t])]
                node = f"{domain}_{kind}_{c}_{k}"
                labels[node] = f"{domain.capitalize()} {kind} {k} of system {c}, {region}, team {team}"
                tier.append(node)
            tiers.append(tier)
        system = System(c, domain, tiers)
        systems.append(system)
        for t in range(1, TIERS):
            for node in tiers[t]:
                below = tiers[t - 1] + (tiers[t - 2] if t >= 2 else [])
                for dep in rng.sample(below, rng.randint(2, 4)):
                    edge(node, "depends", dep)
        for node in system.services:
            if rng.random() < PLATFORM_SHARE:
                edge(node, "depends", rng.choices(hub_order, hub_weights)[0])
        faults = []
        for j in range(FAULTS_PER_SYSTEM):
            node = f"fault_{c}_{j}"
            what = rng.choice(FAULTS)
            victims = rng.sample(system.services, rng.randint(1, 3))
            labels[node] = f"{what.capitalize()} on {labels[victims[0]].split(',')[0].lower()}"
            faults.append(node)
            for victim in victims:
                edge(node, "causes", victim)
        for j in range(RUNBOOKS_PER_SYSTEM):
            node = f"runbook_{c}_{j}"
            targets = rng.sample(system.services + faults, rng.randint(1, 2))
            labels[node] = f"Runbook: {rng.choice(RUNBOOK_VERBS)} {labels[targets[0]].split(',')[0].lower()}"
            for target in targets:
                edge(node, "fixes", target)
    used = {u for u, _, _ in edges} | {v for _, _, v in edges}
    labels = {n: text for n, text in labels.items() if n in used}
    return Generated(edges, labels, systems, platform)


def build(gen: Generated) -> Any:
    """The Ken graph, built the way the loaders build one: nodes with labels, then edges."""
    from cda.ken.graph import KenGraph

    ken = KenGraph()
    for node, text in gen.labels.items():
        ken.add_node(node, label=text)
    for u, rel, v in gen.edges:
        ken.add_edge(u, rel, v)
    return ken


# ---------------------------------------------------------------------------------------------
# the problem
# ---------------------------------------------------------------------------------------------


def problem(gen: Generated, seed: int = 0) -> dict[str, Any]:
    """CDAInputs (as JSON) for a root cause over one system, with its dependencies read from Ken."""
    rng = random.Random(f"bench_action:problem:{seed}")
    deps: dict[str, list[str]] = {}
    for u, rel, v in gen.edges:
        if rel == "depends":
            deps.setdefault(u, []).append(v)
    complete = [s for s in gen.systems if all(s.tiers) and all(n in deps for n in s.tiers[-1])]
    system = complete[rng.randrange(len(complete))]
    services = system.services
    top = system.tiers[-1]
    symptoms = rng.sample(top, 2)
    mine = set(services)

    def below(node: str) -> set[str]:
        out, todo = set(), [node]
        while todo:
            for d in deps.get(todo.pop(), []):
                if d in mine and d not in out:
                    out.add(d)
                    todo.append(d)
        return out

    # a "not slow" service that the first symptom does not depend on, when there is one
    reach = below(symptoms[0]) | below(symptoms[1])
    healthy = sorted(set(system.tiers[1]) - reach) or sorted(set(system.tiers[-1]) - set(symptoms))
    fine = healthy[rng.randrange(len(healthy))]
    listed = ", ".join(f"down({s})" for s in services)
    bottom = system.tiers[0]
    dsl = "\n".join([
        f"# Root cause over system {system.index} ({system.domain}): which service is down?",
        f"domain Service = {{{', '.join(services)}}}",
        "hyp down(Service)",
        "observable slow(Service)",
        "pred depends(Service, Service)   # no facts: read from Ken's depends edges",
        "hard propagation: forall s in Service: slow(s) iff (down(s) or exists t in Service: depends(s, t) and slow(t))",
        f"hard single_fault: at_most(1, [{listed}])",
        *(f"soft weight 2: not down({b})" for b in bottom),
        *(f"soft weight 1: not down({s})" for s in top),
        "",
    ])
    first_label = gen.labels[symptoms[0]].split(",")[0]
    return {
        "problem": f"{first_label} and {symptoms[1]} are slow. Which service is down?",
        "dsl": dsl,
        "observations": [
            {"kind": "span", "source": "pager:alert-7", "start": 0, "end": 40,
             "excerpt": f"observe slow({symptoms[0]})\nobserve slow({symptoms[1]})"},
            {"kind": "artifact", "artifact_id": "dashboard:latency", "media_type": "text/plain",
             "text": f"{first_label}: p99 latency 2300 ms, error rate 4%. "
                     f"{gen.labels[fine].split(',')[0]} normal\nobserve not slow({fine})"},
        ],
        "goals": {"kind": "best_explanation", "top": 3},
        "budgets": {"wall": 60},
        "risk_class": "medium",
        "seed": {"purpose": f"bench-action-{seed}"},
    }


# ---------------------------------------------------------------------------------------------
# the queries
# ---------------------------------------------------------------------------------------------

Query = tuple[str, tuple[Any, ...]]


def queries(gen: Generated, per_kind: int, seed: int = 0) -> list[Query]:
    """A fixed, seeded set of ``per_kind`` queries of each kind, interleaved."""
    rng = random.Random(f"bench_action:queries:{seed}:{len(gen.edges)}")
    nodes = sorted(gen.labels.keys() | {u for u, _, _ in gen.edges} | {v for _, _, v in gen.edges})
    out_by: dict[tuple[str, str], list[str]] = {}
    out_any: dict[str, list[str]] = {}
    for u, rel, v in gen.edges:
        out_by.setdefault((u, rel), []).append(v)
        out_any.setdefault(u, []).append(v)
    sources = sorted(out_any)
    words = [w.strip(",:.").lower() for w in " ".join(gen.labels[n] for n in rng.sample(sorted(gen.labels), 500)).split()]
    words = [w for w in words if len(w) >= 2]
    out: list[Query] = []
    for _ in range(per_kind):
        out.append(("search", (rng.choice(words), LIMIT)))
        out.append(("neighborhood", (rng.choice(nodes), rng.choice((1, 2)), rng.choice((None, *RELATIONS)))))
        src = rng.choice(sources)
        rel = rng.choice((None, "depends", "depends", "causes"))
        hops = rng.choice((3, 4))
        dst, cur = src, src
        for _ in range(rng.randint(2, 4)):  # a walk along the relation: a path usually exists
            nxt = out_any.get(cur, []) if rel is None else out_by.get((cur, rel), [])
            if not nxt:
                break
            cur = rng.choice(nxt)
            dst = cur
        if rng.random() < 0.25:
            dst = rng.choice(nodes)  # usually unreachable: the whole ball within the hops is searched
        out.append(("path", (src, dst, rel, hops)))
        node = rng.choice(sources if rng.random() < 0.8 else nodes)
        out.append(("related_by", (node, rng.choice(RELATIONS))))
    return out


def ask(ken: Any, q: Query) -> Any:
    kind, a = q
    if kind == "search":
        return ken.search(a[0], limit=a[1])
    if kind == "neighborhood":
        return ken.neighborhood(a[0], hops=a[1], relation=a[2])
    if kind == "path":
        return ken.path(a[0], a[1], relation=a[2], max_hops=a[3])
    return ken.related_by(a[0], a[1])


class Brute:
    """The four queries by brute force over the edge list, from their definitions (the spot check)."""

    def __init__(self, gen: Generated) -> None:
        self.labels = gen.labels
        self.nodes = gen.labels.keys() | {u for u, _, _ in gen.edges} | {v for _, _, v in gen.edges}
        self.edges = gen.edges
        self._near: dict[str | None, dict[str, set[str]]] = {}
        self._succ: dict[str | None, dict[str, set[str]]] = {}

    def near(self, relation: str | None) -> dict[str, set[str]]:
        """Undirected adjacency along ``relation`` (any when None), from the edge list."""
        if relation not in self._near:
            near: dict[str, set[str]] = {}
            for u, r, v in self.edges:
                if relation is None or r == relation:
                    near.setdefault(u, set()).add(v)
                    near.setdefault(v, set()).add(u)
            self._near[relation] = near
        return self._near[relation]

    def succ(self, relation: str | None) -> dict[str, set[str]]:
        """Directed successors along ``relation`` (any when None), from the edge list."""
        if relation not in self._succ:
            succ: dict[str, set[str]] = {}
            for u, r, v in self.edges:
                if relation is None or r == relation:
                    succ.setdefault(u, set()).add(v)
            self._succ[relation] = succ
        return self._succ[relation]

    def search(self, text: str, limit: int) -> list[str]:
        t = text.lower()
        return sorted(n for n in self.nodes if t in n.lower() or t in self.labels.get(n, "").lower())[:limit]

    def neighborhood(self, node: str, hops: int, relation: str | None) -> list[str]:
        if node not in self.nodes:
            return []
        near = self.near(relation)
        seen, frontier = {node}, {node}
        for _ in range(hops):
            frontier = {m for n in frontier for m in near.get(n, ())} - seen
            seen |= frontier
        return sorted(seen - {node})

    def path(self, source: str, target: str, relation: str | None, max_hops: int) -> list[str] | None:
        if source not in self.nodes or target not in self.nodes:
            return None
        succ = self.succ(relation)
        # every shortest path, level by level, keeping the least node list per node
        best: dict[str, list[str]] = {source: [source]}
        level = [source]
        for _ in range(max_hops + 1):
            if target in best:
                return best[target]
            nxt: dict[str, list[str]] = {}
            for n in level:
                for m in succ.get(n, ()):
                    if m not in best:
                        cand = best[n] + [m]
                        if m not in nxt or cand < nxt[m]:
                            nxt[m] = cand
            best.update(nxt)
            level = list(nxt)
        return None

    def related_by(self, node: str, relation: str) -> list[str]:
        return sorted({v for u, r, v in self.edges if u == node and r == relation})


def spot_check(ken: Any, gen: Generated, qs: list[Query], per_kind: int) -> int:
    """Assert that ``per_kind`` queries of each kind answer as the brute force does; returns how many."""
    brute = Brute(gen)
    checked = 0
    for kind in KINDS:
        for q in [q for q in qs if q[0] == kind][:per_kind]:
            want = getattr(brute, kind)(*q[1])
            got = ask(ken, q)
            assert got == want, f"{kind}{q[1]}: Ken answered {got!r}, brute force {want!r}"
            checked += 1
    return checked


# ---------------------------------------------------------------------------------------------
# one size, in its own process
# ---------------------------------------------------------------------------------------------


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


@contextmanager
def stages(times: dict[str, float]) -> Iterator[None]:
    """Time the runner's steps up to the first boundary summary by wrapping them (first call only)."""
    from cda.actions import checks, runner
    from cda.ken import graph as ken_module

    targets = [
        (runner, "build", "parse+ground"),  # the problem: parse, pieces, ground
        (checks.VerificationState, "initial_frontier", "coverage (Ken)"),
        (runner, "run", "solve round 1"),
        (runner, "choose_backend", "route"),
        (runner, "run_verifiers", "verifiers"),  # after the first summary
        (checks, "_llm", "offline LLM gate"),  # inside the verifiers
    ]
    if hasattr(ken_module, "_TextIndex"):  # Ken's search index, built inside the first run's coverage step
        targets.append((ken_module._TextIndex, "__init__", "search index build"))
    saved = []
    for owner, attr, key in targets:
        inner = getattr(owner, attr)
        saved.append((owner, attr, inner))

        def wrapper(*args: Any, _inner: Any = inner, _key: str = key, **kwargs: Any) -> Any:
            t = time.perf_counter()
            try:
                return _inner(*args, **kwargs)
            finally:
                if _key not in times:
                    times[_key] = time.perf_counter() - t

        setattr(owner, attr, wrapper)
    try:
        yield
    finally:
        for owner, attr, inner in saved:
            setattr(owner, attr, inner)


@contextmanager
def counted(calls: dict[str, list[float]]) -> Iterator[None]:
    """Count and time every Ken query the action makes (on any KenGraph, copies included)."""
    from cda.ken.graph import KenGraph

    saved = {k: getattr(KenGraph, k) for k in KINDS}

    def make(kind: str) -> Any:
        inner = saved[kind]

        def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
            t = time.perf_counter()
            try:
                return inner(self, *args, **kwargs)
            finally:
                calls.setdefault(kind, []).append(time.perf_counter() - t)

        return wrapper

    for kind in KINDS:
        setattr(KenGraph, kind, make(kind))
    try:
        yield
    finally:
        for kind, inner in saved.items():
            setattr(KenGraph, kind, inner)


@dataclass
class ActionTiming:
    ttfs: float
    total: float
    status: str
    hypotheses: int
    stages: dict[str, float] = field(default_factory=dict)
    ken_calls: dict[str, int] = field(default_factory=dict)
    ken_seconds: dict[str, float] = field(default_factory=dict)
    ken_each: list[float] = field(default_factory=list)  # every Ken query of the run, as the benchmark timed it
    runner: dict[str, Any] = field(default_factory=dict)  # the runner's own ActionMetrics (terminal event)


def run_once(inputs: Any, ken: Any, instrument: bool) -> ActionTiming:
    from cda.actions.runner import run_action

    seen: dict[str, float] = {}

    def subscriber(event: Any) -> None:
        if (event.type == "action_checkpoint" and event.kind == "boundary_summary"
                and event.payload.get("draft") and "ttfs" not in seen):
            seen["ttfs"] = time.perf_counter()

    times: dict[str, float] = {}
    calls: dict[str, list[float]] = {}
    pauses: list[tuple[float, float]] = []  # (end, duration) of each cyclic GC collection
    started: list[float] = [0.0]

    def on_gc(phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            started[0] = time.perf_counter()
        else:
            now = time.perf_counter()
            pauses.append((now, now - started[0]))

    gc.callbacks.append(on_gc)
    try:
        if instrument:
            with stages(times), counted(calls):
                t0 = time.perf_counter()
                result = run_action(inputs, ken=ken, subscribers=[subscriber])
                total = time.perf_counter() - t0
        else:
            t0 = time.perf_counter()
            result = run_action(inputs, ken=ken, subscribers=[subscriber])
            total = time.perf_counter() - t0
    finally:
        gc.callbacks.remove(on_gc)
    if "ttfs" not in seen:
        raise SystemExit(f"no draft boundary summary was emitted (status {result.outputs.status}: "
                         f"{result.outputs.caveats})")
    hyps = sum(1 for v in result.outputs.verdicts if v.claim.startswith("explanation:"))
    own = result.events[-1].metrics  # the runner's own §10 metrics, measurements included
    times["cyclic GC"] = sum(d for end, d in pauses if end <= seen["ttfs"])
    return ActionTiming(
        ttfs=seen["ttfs"] - t0, total=total, status=result.outputs.status, hypotheses=hyps, stages=times,
        ken_calls={k: len(v) for k, v in calls.items()}, ken_seconds={k: sum(v) for k, v in calls.items()},
        ken_each=[x for v in calls.values() for x in v], runner=own.model_dump(mode="json") if own is not None else {},
    )


def pct(values: list[float], q: float) -> float:
    """The q-quantile by the nearest-rank method (p95 of 200 values is the 190th smallest)."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


def warm_up() -> None:
    """One small action first, so that imports and the solvers' start-up are not counted as TTFS."""
    from cda.contracts.action import CDAInputs

    tiny = generate(2_000, seed=12345)
    run_once(CDAInputs.model_validate(problem(tiny, 12345)), build(tiny), instrument=False)


def measure(n: int, seed: int, per_kind: int, warm_runs: int, check: int) -> dict[str, Any]:
    """Everything for one size; runs in a fresh process (``--one``)."""
    from cda.contracts.action import CDAInputs

    warm_up()
    t = time.perf_counter()
    gen = generate(n, seed)
    t_gen = time.perf_counter() - t
    rss0 = rss_mb()
    t = time.perf_counter()
    ken = build(gen)
    t_build = time.perf_counter() - t
    rss1 = rss_mb()
    inputs = CDAInputs.model_validate(problem(gen, seed))
    qs = queries(gen, per_kind, seed)
    n_systems = len(gen.systems)
    del gen  # only the graph stays: the generator's lists would lengthen every garbage collection
    gc.collect()
    t = time.perf_counter()
    gc.collect()  # what one full collection of the cyclic GC costs over the graph's objects
    t_full_gc = time.perf_counter() - t

    cold = run_once(inputs, ken, instrument=True)
    warm = [run_once(inputs, ken, instrument=False) for _ in range(warm_runs)]

    lat: dict[str, list[float]] = {k: [] for k in KINDS}
    sizes: dict[str, list[int]] = {k: [] for k in KINDS}
    for q in qs:
        t = time.perf_counter()
        answer = ask(ken, q)
        lat[q[0]].append(time.perf_counter() - t)
        sizes[q[0]].append(len(answer or []))
    checked = spot_check(ken, generate(n, seed), qs, check) if check else 0  # the same graph, again
    every = [x for k in KINDS for x in lat[k]]
    return {
        "n": n,
        "edges": ken.graph.number_of_edges(),
        "nodes": len(ken),
        "systems": n_systems,
        "full_gc_s": t_full_gc,
        "generate_s": t_gen,
        "build_s": t_build,
        "rss_graph_mb": rss1 - rss0,
        "rss_peak_mb": rss_mb(),
        "cold": asdict(cold),
        "warm": [asdict(w) for w in warm],
        "latency": {
            k: {"p50": pct(v, 0.5), "p95": pct(v, 0.95), "max": max(v), "count": len(v),
                "mean_size": statistics.fmean(sizes[k]), "max_size": max(sizes[k])}
            for k, v in lat.items()
        } | {"all": {"p50": pct(every, 0.5), "p95": pct(every, 0.95), "max": max(every), "count": len(every),
                     "mean_size": 0.0, "max_size": 0}},
        "checked": checked,
        "load": os.getloadavg()[0],
    }


# ---------------------------------------------------------------------------------------------
# the report
# ---------------------------------------------------------------------------------------------


def fmt_s(x: float) -> str:
    return f"{x:.3f}" if x < 10 else f"{x:.1f}"


def fmt_ms(x: float) -> str:
    ms = x * 1e3
    return f"{ms:.3f}" if ms < 1 else f"{ms:.2f}" if ms < 10 else f"{ms:.1f}" if ms < 100 else f"{ms:.0f}"


def warm_ttfs(r: dict[str, Any]) -> float:
    return statistics.median(w["ttfs"] for w in r["warm"]) if r["warm"] else r["cold"]["ttfs"]


def tables(results: list[dict[str, Any]]) -> str:
    lines = [
        "| edges | nodes | build (s) | graph memory (MB) | TTFS, first run (s) | TTFS, warm: median / max (s) "
        "| GC pauses in warm TTFS: max (s) | action total, first run (s) | Ken queries in the run | hypotheses "
        "| status |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in results:
        c = r["cold"]
        warm_max = max((w["ttfs"] for w in r["warm"]), default=c["ttfs"])
        warm_gc = max((w["stages"].get("cyclic GC", 0.0) for w in r["warm"]), default=0.0)
        lines.append(
            f"| {r['edges']:,} | {r['nodes']:,} | {fmt_s(r['build_s'])} | {r['rss_graph_mb']:,.0f} "
            f"| {fmt_s(c['ttfs'])} | {fmt_s(warm_ttfs(r))} / {fmt_s(warm_max)} | {fmt_s(warm_gc)} "
            f"| {fmt_s(c['total'])} | {sum(c['ken_calls'].values()):,} | {c['hypotheses']} | {c['status']} |"
        )
    lines += [
        "",
        "Where the first run's time went, in seconds. The first six columns partition TTFS; the next three "
        "overlap them: the time inside Ken's four queries (all steps up to the summary), the part of it "
        "spent building the search index, and the cyclic garbage collector's pauses. The last two come after "
        "the first summary: the independent verifiers, and the offline LLM gate among them.",
        "",
        "| edges | parse+ground | coverage (Ken) | route | solve round 1 | rest | TTFS | Ken queries "
        "| of which index build | GC pauses | after TTFS: verifiers | of which offline LLM gate |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        c = r["cold"]
        s = c["stages"]
        known = sum(s.get(k, 0.0) for k in ("parse+ground", "coverage (Ken)", "route", "solve round 1"))
        lines.append(
            f"| {r['edges']:,} | {fmt_s(s.get('parse+ground', 0))} | {fmt_s(s.get('coverage (Ken)', 0))} "
            f"| {fmt_s(s.get('route', 0))} | {fmt_s(s.get('solve round 1', 0))} | {fmt_s(max(0.0, c['ttfs'] - known))} "
            f"| {fmt_s(c['ttfs'])} | {fmt_s(sum(c['ken_seconds'].values()))} "
            f"| {fmt_s(s.get('search index build', 0))} | {fmt_s(s.get('cyclic GC', 0))} "
            f"| {fmt_s(s.get('verifiers', 0))} | {fmt_s(s.get('offline LLM gate', 0))} |"
        )
    lines += [
        "",
        f"Ken query latency, milliseconds, {results[0]['latency']['search']['count']} queries of each kind "
        f"at limit {LIMIT} (mean / max answer size in brackets):",
        "",
        "| edges | " + " | ".join(f"{k} p50 | {k} p95 | {k} max" for k in KINDS) + " | all p95 | all max |",
        "|---:|" + "---:|" * (3 * len(KINDS) + 2),
    ]
    for r in results:
        lat = r["latency"]
        cells = []
        for k in KINDS:
            cells += [fmt_ms(lat[k]["p50"]), fmt_ms(lat[k]["p95"]),
                      f"{fmt_ms(lat[k]['max'])} ({lat[k]['mean_size']:.0f} / {lat[k]['max_size']:,})"]
        lines.append(f"| {r['edges']:,} | " + " | ".join(cells)
                     + f" | {fmt_ms(lat['all']['p95'])} | {fmt_ms(lat['all']['max'])} |")
    return "\n".join(lines)


def _ratio(own: float, offline: float) -> float:
    return own / offline if offline else math.inf if own else 1.0


def own_vs_offline(r: dict[str, Any]) -> dict[str, tuple[float, float, float]]:
    """(runner, benchmark, ratio) of TTFS (first run, warm median) and Ken (p95, max, total, count), in seconds.

    The Ken figures compare the same queries of the first run: the runner times each one around the
    call (TimedKen), the benchmark inside it (a wrapper on KenGraph's methods), so the runner's include
    the benchmark's wrapper and its own rounding to whole microseconds.
    """
    c = r["cold"]
    own = c["runner"]["measurements"]
    warm_own = statistics.median(w["runner"]["measurements"]["ttfs_us"] / 1e6 for w in r["warm"]) if r["warm"] \
        else own["ttfs_us"] / 1e6
    each = c["ken_each"]
    out = {
        "TTFS, first run": (own["ttfs_us"] / 1e6, c["ttfs"]),
        "TTFS, warm median": (warm_own, warm_ttfs(r)),
        "Ken p95": ((own["ken"]["p95_us"] or 0) / 1e6, pct(each, 0.95) if each else 0.0),
        "Ken max": ((own["ken"]["max_us"] or 0) / 1e6, max(each, default=0.0)),
        "Ken total": (own["ken"]["total_us"] / 1e6, sum(each)),
        "Ken queries": (float(own["ken"]["count"]), float(len(each))),
    }
    return {k: (a, b, _ratio(a, b)) for k, (a, b) in out.items()}


def runner_tables(results: list[dict[str, Any]]) -> str:
    """The §10 metrics from the runner's own measurements, beside the benchmark's."""
    lines = [
        "The spec §10 metrics as the runner measured them itself (`ActionMetrics` on the run's terminal "
        "event), beside the benchmark's own timing of the same run: runner / benchmark (ratio). Times in "
        "seconds (TTFS) and milliseconds (Ken); the Ken figures are over the queries the first run made.",
        "",
        "| edges | TTFS first run | TTFS warm median | Ken queries | Ken p95 (ms) | Ken max (ms) | Ken total (ms) "
        "| frontier: seeds → final | constraints satisfied / violated | verifier pass rate | citation coverage "
        "| partial |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in results:
        cmp = own_vs_offline(r)
        m = r["cold"]["runner"]

        def cell(key: str, scale: float, fmt: Callable[[float], str],
                 cmp: dict[str, tuple[float, float, float]] = cmp) -> str:
            own, off, ratio = cmp[key]
            return f"{fmt(own * scale)} / {fmt(off * scale)} ({ratio:.2f})"

        count = f"{cmp['Ken queries'][0]:.0f} / {cmp['Ken queries'][1]:.0f}"
        pr, cov = m["verifiers"]["pass_rate"], m["citations"]["coverage"]
        c = m["constraints"]
        lines.append(
            f"| {r['edges']:,} | {cell('TTFS, first run', 1, fmt_s)} | {cell('TTFS, warm median', 1, fmt_s)} "
            f"| {count} | {cell('Ken p95', 1, fmt_ms)} | {cell('Ken max', 1, fmt_ms)} | {cell('Ken total', 1, fmt_ms)} "
            f"| {m['frontier']['seeds']} → {m['frontier']['final']} | {c['satisfied']} / {c['violated']} "
            f"| {pr['numerator']}/{pr['denominator']} | {cov['numerator']}/{cov['denominator']} "
            f"| {'yes' if m['partial'] else 'no'} |"
        )
    return "\n".join(lines)


def agreement(results: list[dict[str, Any]]) -> list[str]:
    out = []
    for r in results:
        cmp = own_vs_offline(r)
        parts = []
        for key in ("TTFS, first run", "TTFS, warm median", "Ken p95", "Ken total", "Ken queries"):
            ratio = cmp[key][2]
            parts.append(f"{key} {ratio:.3f}{'' if abs(ratio - 1) <= AGREE else ' (**outside**)'}")
        ok = all(abs(cmp[k][2] - 1) <= AGREE for k in ("TTFS, first run", "TTFS, warm median", "Ken p95",
                                                        "Ken total", "Ken queries"))
        out.append(f"- runner vs benchmark at {r['edges']:,} edges, within {AGREE:.0%}: "
                   f"{'**AGREE**' if ok else '**DISAGREE**'} ({'; '.join(parts)})")
    return out


def reading(results: list[dict[str, Any]]) -> str:
    """What the numbers say, generated with them so that it never goes stale."""
    r = results[-1]
    c, s = r["cold"], r["cold"]["stages"]
    steps = {k: s.get(k, 0.0) for k in ("parse+ground", "coverage (Ken)", "solve round 1")}
    largest = max(steps, key=lambda k: steps[k])
    worst = max(KINDS, key=lambda k: r["latency"][k]["p95"])
    after = c["total"] - c["ttfs"]
    out = [
        f"At {r['edges']:,} edges the graph takes {fmt_s(r['build_s'])} s to build and about "
        f"{r['rss_graph_mb'] * 1e6 / r['edges']:,.0f} bytes of memory per edge ({r['rss_graph_mb']:,.0f} MB in all). "
        f"The first action on it reaches its first summary in {fmt_s(c['ttfs'])} s, of which "
        f"{fmt_s(s.get('search index build', 0.0))} s build Ken's search index (once per graph: "
        "`KenGraph.prepare()` moves it to load time) and the largest step is "
        f"{largest} ({fmt_s(steps[largest])} s); the runs that follow take {fmt_s(warm_ttfs(r))} s.",
        f"The slowest query kind at the 95th percentile is {worst} ({fmt_ms(r['latency'][worst]['p95'])} ms): "
        "a `search` for a word that occurs in no label (or in few) reads the whole index; one that occurs "
        "often stops after 50 hits.",
        f"One full collection of Python's cyclic garbage collector walks every object of the graph and "
        f"takes {fmt_s(r['full_gc_s'])} s here; when one falls inside a run it lengthens that run by as much "
        f"(the most seen inside a warm TTFS: {fmt_s(max((w['stages'].get('cyclic GC', 0.0) for w in r['warm']), default=0.0))} s). "
        "`gc.freeze()` once the graph is loaded puts it out of the collector's reach.",
        f"After the first summary the action runs {fmt_s(after)} s more, {fmt_s(s.get('verifiers', 0.0))} s "
        f"of it in the verifiers, {fmt_s(s.get('offline LLM gate', 0.0))} s of that in the offline LLM gate, "
        "whose cost grows with the number of Ken nodes (it is handed every node id).",
    ]
    return " ".join(out)


def verdicts(results: list[dict[str, Any]]) -> list[str]:
    out = []
    for r in results:
        c = r["cold"]
        worst = max([c["ttfs"]] + [w["ttfs"] for w in r["warm"]])
        out.append(
            f"- TTFS ≤ {TTFS_TARGET:.1f} s at {r['edges']:,} edges: {'**MET**' if worst <= TTFS_TARGET else '**NOT MET**'} "
            f"(first run {fmt_s(c['ttfs'])} s, warm median {fmt_s(warm_ttfs(r))} s, slowest of all runs "
            f"{fmt_s(worst)} s)"
        )
    for r in results:
        lat = r["latency"]
        worst_kind = max(KINDS, key=lambda k: lat[k]["p95"])
        p95 = lat[worst_kind]["p95"]
        out.append(
            f"- Ken query p95 ≤ {P95_TARGET * 1e3:.0f} ms at top-{LIMIT}, {r['edges']:,} edges: "
            f"{'**MET**' if p95 <= P95_TARGET else '**NOT MET**'} (worst kind {worst_kind}: p95 "
            f"{fmt_ms(p95)} ms; all kinds pooled {fmt_ms(lat['all']['p95'])} ms)"
        )
    return out


def cda_revision() -> str:
    """Which cda was measured: the git commit, and whether cda/ had uncommitted changes."""

    def git(*cmd: str) -> str:
        return subprocess.run(["git", "-C", str(ROOT), *cmd], capture_output=True, text=True, check=True).stdout

    try:
        rev = git("rev-parse", "--short", "HEAD").strip()
        dirty = git("status", "--porcelain", "--", "cda").strip()
    except (OSError, subprocess.CalledProcessError):
        return "cda (no git)"
    return f"cda at commit {rev}" + (" with uncommitted changes in cda/" if dirty else "")


def section(results: list[dict[str, Any]], args: argparse.Namespace, elapsed: float,
            load: tuple[float, float]) -> str:
    partial = [r["edges"] for r in results] != list(SIZES)
    measured = ", ".join(f"{r['edges']:,}" for r in results)
    gen_note = (
        f"Systems of {SYSTEM_SIZE} services in {TIERS} tiers; each service `depends` on 2–4 services of a lower "
        f"tier of its system and, with probability {PLATFORM_SHARE}, on one shared platform service chosen with "
        f"Zipf weights (s = {ZIPF_S}; about N/400 platform services, so the largest hubs have thousands of "
        f"dependants); {FAULTS_PER_SYSTEM} faults per system that `causes` 1–3 of its services and "
        f"{RUNBOOKS_PER_SYSTEM} runbooks that `fixes` 1–2 services or faults; every node has a label in words."
    )
    return "\n".join([
        START,
        "## Action: time to first boundary summary and Ken query latency (`benchmarks/bench_action.py`)",
        "",
        "Issue 5's benchmark. A seeded, service-dependency-like Ken graph of exactly N edges (relations "
        "`depends`, `causes`, `fixes`), built with `KenGraph.add_node`/`add_edge` as the loaders do. "
        + gen_note
        + " The problem: which service of one system (40 services) is down — `hyp down(Service)`, "
        "`observable slow(Service)`, `pred depends(Service, Service)` read from Ken (no `fact` lines), the "
        "propagation clause of `examples/service_outage.cda`, one fault at most, soft priors, two `slow` "
        "observations, one `not slow` and a dashboard note in words — run through "
        "`cda.actions.runner.run_action(inputs, ken=graph)`, so the coverage step searches the whole graph. "
        "**TTFS** is the time from calling `run_action` to the first `action_checkpoint` of kind "
        "`boundary_summary` (the draft), seen by a subscriber. *First run*: the first action after the graph "
        "is built (Ken's search index is built inside it); *warm*: the median of the runs that follow on the "
        "same graph. Build time and memory are reported but not part of TTFS. Each size runs in a fresh "
        "process, after one small action on a 2,000-edge graph (so that imports and solver start-up are not "
        "counted).",
        "",
        tables(results),
        "",
        f"**Targets** (spec: TTFS ≤ {TTFS_TARGET:.1f} s; Ken query p95 ≤ {P95_TARGET * 1e3:.0f} ms at top-{LIMIT}):",
        "",
        *verdicts(results),
        "",
        runner_tables(results),
        "",
        *agreement(results),
        "",
        "**What the numbers say.** " + reading(results),
        "",
        "Query mix: `search` for a word taken from a random node's label (common words such as a domain or "
        "a region stop after 50 hits; rare ones, such as a number, scan the whole index); `neighborhood` of a "
        "random node at 1 or 2 hops, any relation or one (the answer is not limited: two hops through a "
        "platform hub returns thousands of nodes); `path` within 3–4 hops to a node 2–4 steps along the "
        "relation, or, one time in four, to a random node (then the whole ball is searched); `related_by` "
        "of a random node. Answers were checked against a brute-force scan of the edge list for "
        f"{results[0]['checked']} queries at every size (asserted).",
        "",
        f"Measured{' (partial run: ' + measured + ' edges)' if partial else ''}"
        f" with seed {args.seed}, {args.cda_label or cda_revision()}, on Python {platform.python_version()}, "
        f"networkx {nx.__version__}, {machine()}, on "
        f"{time.strftime('%Y-%m-%d')}, in {elapsed:.0f} s; load average {load[0]:.1f} at the start and "
        f"{load[1]:.1f} at the end (the machine is shared: a load above the CPU count stretches every time). "
        f"{args.warm} warm run{'s' if args.warm != 1 else ''} per size.",
        "",
        "Reproduce: `pip install -e . && python benchmarks/bench_action.py --write` (rewrites this section; "
        "`--quick` runs 10k edges only; `--help` for sizes, seed and query counts).",
        END,
    ])


def run_child(n: int, args: argparse.Namespace, log: Callable[[str], None]) -> dict[str, Any]:
    cmd = [sys.executable, __file__, "--one", str(n), "--seed", str(args.seed), "--queries", str(args.queries),
           "--warm", str(args.warm), "--check", str(args.check)]
    log(f"  {n:,} edges: " + " ".join(cmd[1:]))
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"size {n} failed:\n{proc.stderr}")
    return dict(json.loads(proc.stdout.strip().splitlines()[-1]))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("--quick", action="store_true", help="10k edges only")
    ap.add_argument("--sizes", type=lambda s: tuple(int(x) for x in s.split(",")), default=None,
                    help="comma-separated edge counts (default 10000,100000,1000000)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--queries", type=int, default=200, help="queries of each kind (default 200)")
    ap.add_argument("--warm", type=int, default=3, help="warm action runs after the first (default 3)")
    ap.add_argument("--check", type=int, default=10,
                    help="queries of each kind checked against brute force at every size (default 10)")
    ap.add_argument("--write", action="store_true", help="rewrite this section of docs/benchmarks.md")
    ap.add_argument("--cda-label", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--one", type=int, default=None, help=argparse.SUPPRESS)  # child: one size, JSON out
    args = ap.parse_args(argv)
    if args.one is not None:
        print(json.dumps(measure(args.one, args.seed, args.queries, args.warm, args.check)))
        return 0
    sizes = args.sizes or (QUICK_SIZES if args.quick else SIZES)

    def log(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    load0 = os.getloadavg()[0]
    t0 = time.perf_counter()
    results = []
    for n in sizes:
        r = run_child(n, args, log)
        log(f"    TTFS {r['cold']['ttfs']:.3f} s (warm {warm_ttfs(r):.3f} s), build {r['build_s']:.1f} s, "
            f"{r['rss_graph_mb']:.0f} MB, p95 {r['latency']['all']['p95'] * 1e3:.2f} ms")
        results.append(r)
    text = section(results, args, time.perf_counter() - t0, (load0, os.getloadavg()[0]))
    print(text)
    if args.write:
        write_section(DOC, START, END, text)
        log(f"wrote {DOC.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
