"""Ken at scale (issue 34): loading a graph of 100k / 1M / 2M edges, before and after.

Target: **a million edges loaded in <= 5 s and <= 600 MB**, in every format Ken loads, with the
safe query set's p95 unchanged or better and every answer unchanged.

**The graph** is ``bench_action``'s service-dependency graph of exactly N edges (labels in
words, three relations, Zipf-weighted platform hubs), written three ways: networkx node-link
JSON (as ``nx.node_link_data`` writes a Ken graph: ``relation`` and ``key`` on every link), a
CSV edge list, and GraphML with a ``relation`` data key.

**Before and after, side by side.** *Before* is CDA's code at ``--before`` (default: the merge
base with ``main``, exported with ``git archive``), *after* the code of this tree. Every
measurement is a fresh process (``python -c`` with the code's folder first on ``sys.path``),
before and after interleaved per size and format, so that both see the same machine. A process
loads the file with ``load_ken`` (CPU time; wall time too, though on a shared machine it
mostly measures the neighbours), builds the search index (``prepare``), reports its peak
resident memory (``ru_maxrss``), then asks :data:`PER_KIND` queries of each kind of the safe
set — ``bench_action``'s seeded mix — each timed in CPU time of its thread, and hashes every
answer. The two hashes must be equal (asserted): the queries answer byte for byte the same.

Run ``python benchmarks/bench_ken.py`` (all sizes: several minutes, and the old code needs
about 5 GB at 2M edges) or ``--quick`` (100k only); ``--write`` rewrites this script's section
of docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any
from xml.sax.saxutils import escape, quoteattr

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "benchmarks.md"
START, END = "<!-- bench_ken:start -->", "<!-- bench_ken:end -->"
sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_action import KINDS, generate, queries  # noqa: E402
from doc_section import load_average, machine, write_section  # noqa: E402

SIZES = (100_000, 1_000_000, 2_000_000)
QUICK_SIZES = (100_000,)
FORMATS = ("json", "csv", "graphml")
PER_KIND = 200
TARGET_S, TARGET_MB, TARGET_EDGES = 5.0, 600, 1_000_000

# One measurement, in a fresh interpreter: the code under test comes first on sys.path.
CHILD = r"""
import hashlib, json, resource, sys, time
sys.path.insert(0, sys.argv[1])
from cda.ken.loaders import load_ken
path, qfile = sys.argv[2], sys.argv[3]
c0, w0 = time.process_time(), time.perf_counter()
ken = load_ken(path)
c1, w1 = time.process_time(), time.perf_counter()
rss_load = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
ken.prepare()
c2 = time.process_time()
qs = json.load(open(qfile))
digest = hashlib.sha256()
spent = {}
for kind, args in qs:
    t = time.thread_time_ns()
    if kind == "search":
        got = ken.search(args[0], limit=args[1])
    elif kind == "neighborhood":
        got = ken.neighborhood(args[0], args[1], args[2])
    elif kind == "path":
        got = ken.path(args[0], args[1], args[2], args[3])
    else:
        got = ken.related_by(args[0], args[1])
    spent.setdefault(kind, []).append(time.thread_time_ns() - t)
    digest.update(json.dumps([kind, args, got]).encode())
print(json.dumps({"load_cpu": c1 - c0, "load_wall": w1 - w0, "index_cpu": c2 - c1, "rss_load_kb": rss_load,
                  "rss_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, "nodes": len(ken),
                  "spent_ns": spent, "answers": digest.hexdigest()}))
"""


def write_files(n_edges: int, folder: Path) -> tuple[dict[str, Path], Path]:
    """The graph of ``n_edges`` in the three formats, and the query file."""
    gen = generate(n_edges)
    paths = {fmt: folder / f"ken{n_edges}.{fmt}" for fmt in FORMATS}
    with paths["json"].open("w", encoding="utf-8") as f:
        json.dump({"directed": True, "multigraph": True, "graph": {},
                   "nodes": [{"label": text, "id": node} for node, text in gen.labels.items()],
                   "links": [{"relation": r, "source": u, "target": v, "key": r} for u, r, v in gen.edges]}, f)
    with paths["csv"].open("w", newline="", encoding="utf-8") as f:
        out = csv.writer(f)
        out.writerow(["source", "relation", "target"])
        out.writerows((u, r, v) for u, r, v in gen.edges)
    with paths["graphml"].open("w", encoding="utf-8") as f:
        f.write('<?xml version="1.0" encoding="utf-8"?>\n<graphml xmlns="http://graphml.graphdrawing.org/xmlns">\n'
                '<key id="d0" for="node" attr.name="label" attr.type="string"/>\n'
                '<key id="d1" for="edge" attr.name="relation" attr.type="string"/>\n<graph edgedefault="directed">\n')
        for node, text in gen.labels.items():
            f.write(f'<node id={quoteattr(node)}><data key="d0">{escape(text)}</data></node>\n')
        for u, r, v in gen.edges:
            f.write(f'<edge source={quoteattr(u)} target={quoteattr(v)}><data key="d1">{escape(r)}</data></edge>\n')
        f.write("</graph></graphml>\n")
    qfile = folder / f"queries{n_edges}.json"
    qfile.write_text(json.dumps(queries(gen, PER_KIND)), encoding="utf-8")
    return paths, qfile


def measure(code: Path, path: Path, qfile: Path) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.run([sys.executable, "-c", CHILD, str(code), str(path), str(qfile)], capture_output=True,
                          text=True, env=env, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"measuring {path} with {code} failed:\n{proc.stderr}")
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def p95(ns: list[int]) -> float:
    """The 95th percentile in milliseconds (nearest rank)."""
    ordered = sorted(ns)
    return ordered[max(0, -(-95 * len(ordered) // 100) - 1)] / 1e6


def export_before(rev: str, folder: Path) -> Path:
    out = folder / "before"
    out.mkdir()
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", rev, "cda"], capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(out)], input=archive, check=True)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="100k edges only")
    ap.add_argument("--sizes", type=int, nargs="*", help="edge counts (default 100k 1M 2M)")
    ap.add_argument("--formats", nargs="*", choices=FORMATS, default=list(FORMATS))
    ap.add_argument("--before", default=None, help="git revision of the code to compare with (default: merge base with main)")
    ap.add_argument("--write", action="store_true", help="rewrite this section of docs/benchmarks.md")
    args = ap.parse_args(argv)
    sizes = args.sizes or (QUICK_SIZES if args.quick else SIZES)
    rev = args.before or subprocess.run(["git", "-C", str(ROOT), "merge-base", "HEAD", "main"], capture_output=True,
                                        text=True, check=True).stdout.strip()
    started, load_start = time.time(), load_average()
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="bench_ken_") as tmp:
        folder = Path(tmp)
        before_code = export_before(rev, folder)
        for n in sizes:
            paths, qfile = write_files(n, folder)
            for i, fmt in enumerate(args.formats):
                runs = {}
                sides = ("before", "after") if i % 2 == 0 else ("after", "before")  # interleaved
                for side in sides:
                    runs[side] = measure(before_code if side == "before" else ROOT, paths[fmt], qfile)
                    print(f"{n:>9,} {fmt:<8} {side:<6} load {runs[side]['load_cpu']:6.2f} s CPU "
                          f"({runs[side]['load_wall']:6.2f} s wall), peak {runs[side]['rss_load_kb'] / 1024:6.0f} MB",
                          flush=True)
                assert runs["before"]["answers"] == runs["after"]["answers"], f"answers differ: {n} {fmt}"
                assert runs["before"]["nodes"] == runs["after"]["nodes"]
                rows.append({"edges": n, "format": fmt, "size_mb": paths[fmt].stat().st_size / 1e6, **runs})
            for p in (*paths.values(), qfile):
                p.unlink()
    text = render(rows, rev, started, load_start)
    print(text)
    if args.write:
        write_section(DOC, START, END, text)
    return 0


def render(rows: list[dict[str, Any]], rev: str, started: float, load_start: str) -> str:
    lines = [START, "## Ken: loading a million edges (`benchmarks/bench_ken.py`)", "",
             f"Issue 34's Ken target: a million edges loaded in <= {TARGET_S:g} s and <= {TARGET_MB} MB, in every "
             "format, the safe query set's p95 unchanged or better, every answer unchanged. *Before* is the code at "
             f"`{rev[:10]}` (networkx graphs), *after* this tree (the compact store of `cda/ken/store.py`); each line "
             "is a fresh process, before and after interleaved. *Load* is `load_ken` in CPU time (the machine is "
             "shared: wall time is shown but is mostly the neighbours'); *peak* is the process's peak resident "
             "memory when `load_ken` returns (interpreter and imports included, about 50 MB); *index* builds the "
             "search index (`prepare`, or the first `search`). Query p95: "
             f"{PER_KIND} queries of each kind (`bench_action`'s mix), each in CPU time of its thread, milliseconds. "
             "The answers of every query hash the same before and after (asserted).", "",
             "| edges | format | file (MB) | load before (s) | load after (s) | speed-up | peak before (MB) | "
             "peak after (MB) | index before / after (s) | " + " | ".join(f"{k} p95 before / after" for k in KINDS)
             + " | answers |",
             "|---:|---|---:|---:|---:|---:|---:|---:|---:|" + "---:|" * len(KINDS) + "---|"]
    for r in rows:
        b, a = r["before"], r["after"]
        cells = [f"{r['edges']:,}", r["format"], f"{r['size_mb']:.0f}", f"{b['load_cpu']:.2f}", f"{a['load_cpu']:.2f}",
                 f"{b['load_cpu'] / a['load_cpu']:.1f}x", f"{b['rss_load_kb'] / 1024:.0f}", f"{a['rss_load_kb'] / 1024:.0f}",
                 f"{b['index_cpu']:.2f} / {a['index_cpu']:.2f}"]
        cells += [f"{p95(b['spent_ns'][k]):.3f} / {p95(a['spent_ns'][k]):.3f}" for k in KINDS]
        cells.append("same")
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    met = [r for r in rows if r["edges"] == TARGET_EDGES]
    for r in met:
        a = r["after"]
        ok = a["load_cpu"] <= TARGET_S and a["rss_load_kb"] / 1024 <= TARGET_MB
        lines.append(f"- {r['format']} at {TARGET_EDGES:,} edges: load {a['load_cpu']:.2f} s CPU, peak "
                     f"{a['rss_load_kb'] / 1024:.0f} MB: **{'MET' if ok else 'NOT MET'}**")
    slower = [(r, k) for r in rows for k in KINDS
              if p95(r["after"]["spent_ns"][k]) > p95(r["before"]["spent_ns"][k])]
    lines.append("- query p95 after > before in: " + (", ".join(f"{k} ({r['edges']:,} {r['format']})" for r, k in slower)
                                                     or "none"))
    lines += ["", f"Measured {time.strftime('%Y-%m-%d', time.gmtime(started))} on {machine()}, in "
              f"{time.time() - started:.0f} s; load average {load_start} at the start and {load_average()} at the end.",
              "", "Reproduce: `pip install -e '.[bench]' && python benchmarks/bench_ken.py --write` (`--quick`: 100k edges).",
              END]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
