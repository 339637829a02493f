"""The clingo path (issue 34): CDA end to end against the direct clingo program, 1,000 to 400,000 clauses.

bench_core's family and its two measured sides, on clingo only (`bench_core.py` has the family,
the z3 side and the thinnest Python front end): the direct program (a choice rule, integrity
constraints, ``#show``, projective enumeration; its text built, parsed, grounded and solved)
and ``cda.solve(text, backend="clingo", top=3)``, stage by stage. Both must find the same 254
hypotheses (asserted).

The machine is shared by several engineers, so the clock is each process's **CPU time**
(``time.process_time``: clingo's threads included, waiting for a core left out), and the two
sides run in **interleaved pairs** (raw, then CDA, then raw …), each pair giving one ratio; the
tables show medians and the load is stated. A busy core still runs slower (shared caches,
the other hyperthread), and not equally for both sides: ``--instructions`` adds instruction
counts under ``valgrind --tool=callgrind`` at the smaller sizes (slow: minutes per size), which no
load changes.

Targets: CDA at most 1.5× the direct program at 1,000 clauses and 1.15× from 10,000 up; each
stage's growth exponent between consecutive sizes from 10,000 to 400,000 at most 1.1 (1.0 is
linear).

``python benchmarks/bench_clingo_path.py`` (about 15 minutes on the shared 2-core machine; writes
its section of docs/benchmarks.md), ``--quick`` (1,000 and 10,000, prints only), ``--sizes``,
``--repeats``, ``--instructions 1000,10000``.
"""

from __future__ import annotations

import argparse
import gc
import math
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import types
from dataclasses import dataclass
from pathlib import Path

import clingo

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench_core, doc_section, when run as a file
import bench_core as core  # noqa: E402
from doc_section import machine, write_section  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "benchmarks.md"
START, END = "<!-- bench_clingo_path:start -->", "<!-- bench_clingo_path:end -->"
SIZES = (1_000, 10_000, 50_000, 100_000, 200_000, 400_000)
QUICK = (1_000, 10_000)
STAGES = ("parse", "ground", "encode", "enumerate", "other_calls", "decode", "glue")
STAGE_NAMES = {
    "parse": "parse", "ground": "check+ground", "encode": "encode+build", "enumerate": "enumerate",
    "other_calls": "initial check", "decode": "decode+verify+rank", "glue": "glue",
}
TARGET_SMALL, TARGET_LARGE, TARGET_EXPONENT = 1.5, 1.15, 1.1


@dataclass
class Size:
    n: int
    runs: int
    raw: float  # CPU seconds, median
    raw_build: float
    raw_enum: float
    cda: dict[str, float]  # stage -> CPU seconds, medians; "e2e" the whole call
    ratio: float  # median over the pairs of cda / raw
    hyps: int


def _cpu_clock() -> None:
    """bench_core's timers read the process's CPU time from here on."""
    core.time = types.SimpleNamespace(perf_counter=time.process_time)  # type: ignore[assignment]


def measure(n: int, repeats: int, budget: float, log: object) -> Size:
    p = core.generate(n, 0)
    text = core.to_dsl(p)
    raws: list[core.RawRun] = []
    cdas: list[core.CdaRun] = []
    started = time.perf_counter()
    while len(raws) < repeats and (not raws or time.perf_counter() - started < budget):
        gc.collect()
        raw = core.raw_clingo(p)
        gc.collect()
        cda = core.cda_run(text, "clingo")
        assert cda.hyps == raw.hyps and cda.count == len(raw.hyps), f"N={n}: CDA and the direct program disagree"
        raws.append(raw)
        cdas.append(cda)
        print(f"  N={n:>7,} raw {raw.total:7.3f}s  cda {cda.e2e:7.3f}s  ratio {cda.e2e / raw.total:.2f}",
              file=sys.stderr, flush=True)
    med = statistics.median
    return Size(
        n, len(raws), med(r.total for r in raws), med(r.build for r in raws), med(r.enumerate for r in raws),
        {k: med(getattr(c, k) for c in cdas) for k in (*STAGES, "e2e")},
        med(c.e2e / r.total for r, c in zip(raws, cdas)), len(raws[0].hyps),
    )


def exponent(a: float, b: float, n1: int, n2: int) -> float:
    return math.log(b / a) / math.log(n2 / n1) if a > 0 and b > 0 else math.nan


def _shown_exponent(k: float) -> str:
    """An exponent as the table shows it: "—" for a stage that took no time (no solver call of
    its kind since the enumeration answers satisfiability itself)."""
    return "—" if math.isnan(k) else f"{k:.2f}"


# ---- instruction counts ------------------------------------------------------------------------
_COUNTED = '''
import os, sys
sys.path.insert(0, {bench!r})
import bench_core as core
from cda import api
n = {n}
p = core.generate(n, 0); text = core.to_dsl(p)
core.warm_up()
mark = os.sched_yield  # callgrind --dump-before=sched_yield: a dump at each call
import clingo
for side in ("raw", "cda"):
    mark()
    if side == "raw":  # bench_core.raw_clingo's timed part: build and enumerate
        rules = [f"{{{{ h(0..{{p.abducibles - 1}}) }}}}.", "#show h/1."]
        for c in p.clauses:
            rules.append(":- " + ", ".join(f"not h({{a}})" if pos else f"h({{a}})" for a, pos in c.lits) + ".")
        ctl = clingo.Control(["--models=0", "--project=show"])
        ctl.add("base", [], "\\n".join(rules))
        ctl.ground([("base", [])])
        found = []
        with ctl.solve(yield_=True) as handle:
            for m in handle:
                found.append(m.symbols(shown=True))
        del ctl, rules  # released, as cda.solve releases its own solver
    else:
        r = api.solve(text, backend="clingo", top=3)
    mark()
'''


def instructions(n: int) -> tuple[int, int]:
    """(direct program, cda.solve) instructions at ``n`` clauses, counted by callgrind: each side
    alone, between two dumps, after a warm-up (imports, the parser built) in the same process."""
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "counted.py"
        script.write_text(_COUNTED.format(bench=str(Path(__file__).resolve().parent), n=n))
        out = Path(tmp) / "cg.out"
        env = {**os.environ, "PYTHONHASHSEED": "0", "PYTHONPATH": str(ROOT)}
        subprocess.run(
            ["valgrind", "--tool=callgrind", "--dump-before=sched_yield", f"--callgrind-out-file={out}",
             sys.executable, str(script)], check=True, capture_output=True, env=env,
        )
        dumps = sorted(Path(tmp).glob("cg.out.*"), key=lambda f: int(f.name.rsplit(".", 1)[1]))
        counts = [int(f.read_text().split("summary: ", 1)[1].split()[0]) for f in dumps]
    # dump 1: everything before the first mark; then (raw), (between), (cda)
    return counts[1], counts[3]


def stage_instructions(n: int) -> dict[str, object]:
    """Instructions per stage of ``cda.solve`` and of the direct program at ``n`` clauses, and the
    collections during the call: ``stage_instructions.py`` under callgrind, one dump per clock
    reading, each stage's linear form over the dumps evaluated on their cumulative counts."""
    import json

    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "cg.out"
        env = {**os.environ, "PYTHONHASHSEED": "0", "PYTHONPATH": str(ROOT)}
        done = subprocess.run(
            ["valgrind", "--tool=callgrind", "--dump-before=sched_yield", f"--callgrind-out-file={out}",
             sys.executable, str(Path(__file__).resolve().parent / "stage_instructions.py"), str(n)],
            check=True, capture_output=True, env=env, text=True,
        )
        report = json.loads(done.stdout)
        dumps = sorted(Path(tmp).glob("cg.out.*"), key=lambda f: int(f.name.rsplit(".", 1)[1]))
        counts = [int(f.read_text().split("summary: ", 1)[1].split()[0]) for f in dumps]
    assert len(counts) >= report["marks"], "a dump per clock reading (another sched_yield would shift them)"
    upto = [0]
    for c in counts:
        upto.append(upto[-1] + c)  # upto[k]: instructions before mark k returned

    def value(form: dict[str, int]) -> int:
        return sum(c * upto[int(i)] for i, c in form.items())

    a, b = report["raw"]
    marks = report["gc_marks"]
    return {
        "direct": upto[b] - upto[a],
        **{k: value(form) for k, form in report["stages"].items()},
        "gc": sum(upto[stop] - upto[start] for start, stop in zip(marks[::2], marks[1::2])),
        "collections": report["gc"],
    }


def growth_table(counted: dict[int, dict[str, object]]) -> list[str]:
    """Per-stage instructions and their growth exponents between consecutive sizes."""
    keys = ("direct", "e2e", *STAGES, "gc")
    names = {"direct": "direct", "e2e": "CDA", **STAGE_NAMES, "gc": "in GC"}
    ns = sorted(counted)
    lines = [
        "",
        "Instructions per stage (callgrind, one dump per clock reading of bench_core's stage timer; "
        "no load changes them), millions:",
        "",
        "| N clauses | " + " | ".join(names[k] for k in keys) + " | collections (gen 0/1/2) |",
        "|---:|" + "---:|" * (len(keys) + 1),
    ]
    for n in ns:
        c = counted[n]
        gens = c["collections"]
        assert isinstance(gens, dict)
        lines.append(f"| {n:,} | " + " | ".join(f"{int(c[k]) / 1e6:,.1f}" for k in keys)  # type: ignore[call-overload]
                     + " | " + "/".join(str(gens.get(str(g), 0)) for g in range(3)) + " |")
    if len(ns) > 1:
        lines += ["", "Growth exponents in instructions (∝ N^k; stages under 1 M instructions left out):", "",
                  "| from → to | " + " | ".join(names[k] for k in keys) + " |", "|---|" + "---:|" * len(keys)]
        for a, b in zip(ns, ns[1:]):
            cells = []
            for k in keys:
                x, y = int(counted[a][k]), int(counted[b][k])  # type: ignore[call-overload]
                cells.append(f"{exponent(x, y, a, b):.2f}" if min(x, y) > 1e6 else "–")
            lines.append(f"| {a:,} → {b:,} | " + " | ".join(cells) + " |")
    return lines


# ---- the report --------------------------------------------------------------------------------
def section(sizes: list[Size], counted: dict[int, tuple[int, int]], args: argparse.Namespace,
            load: tuple[float, float], elapsed: float, staged: dict[int, dict[str, object]] | None = None) -> str:
    small = [s for s in sizes if s.n < 10_000]
    large = [s for s in sizes if s.n >= 10_000]
    lines = [
        START,
        "## The clingo path: CDA end to end against the direct clingo program (`benchmarks/bench_clingo_path.py`)",
        "",
        "bench_core's family on clingo only, 1,000 to 400,000 clauses (254 hypotheses at every size, found alike "
        "by both sides: asserted). *Direct*: the program as text (a choice rule, one integrity constraint per "
        "clause, `#show`), parsed, grounded and enumerated by clingo (`--project=show`). *CDA*: `cda.solve(text, "
        "backend=\"clingo\", top=3)`, stage by stage. CPU seconds (`time.process_time`, clingo's threads "
        "included), the two sides in interleaved pairs (direct, then CDA, per run), medians over the runs; "
        "*CDA / direct* is the median of the pairs' ratios.",
        "",
        "| N clauses | runs | direct (s) | of which build | CDA (s) | CDA / direct | parse | check+ground "
        "| encode+build | enumerate | initial check | decode+verify+rank | glue |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for s in sizes:
        c = s.cda
        lines.append(
            f"| {s.n:,} | {s.runs} | {core.fmt_s(s.raw)} | {core.fmt_s(s.raw_build)} | {core.fmt_s(c['e2e'])} "
            f"| {s.ratio:.2f}× | " + " | ".join(core.fmt_s(c[k]) for k in STAGES) + " |"
        )
    grow = [(a, b) for a, b in zip(large, large[1:])]
    if grow:
        lines += [
            "",
            "Growth exponents between consecutive sizes (time ∝ N^k; 1.00 is linear):",
            "",
            "| from → to | direct | CDA | " + " | ".join(STAGE_NAMES[k] for k in STAGES) + " |",
            "|---|---:|---:|" + "---:|" * len(STAGES),
        ]
        for a, b in grow:
            lines.append(
                f"| {a.n:,} → {b.n:,} | {exponent(a.raw, b.raw, a.n, b.n):.2f} "
                f"| {exponent(a.cda['e2e'], b.cda['e2e'], a.n, b.n):.2f} | "
                + " | ".join(_shown_exponent(exponent(a.cda[k], b.cda[k], a.n, b.n)) for k in STAGES) + " |"
            )
    if counted:
        lines += [
            "",
            "Instructions (callgrind, each side alone in one process after a warm-up; no load changes them):",
            "",
            "| N clauses | direct | CDA | CDA / direct |",
            "|---:|---:|---:|---:|",
            *(f"| {n:,} | {raw / 1e6:,.0f} M | {cda / 1e6:,.0f} M | {cda / raw:.2f}× |" for n, (raw, cda) in sorted(counted.items())),
        ]
    if staged:
        lines += growth_table(staged)
    lines += ["", "**Targets** (issue 34):", ""]
    if small:
        s = small[-1]
        lines.append(
            f"- CDA at most {TARGET_SMALL}× the direct program at 1,000 clauses: "
            f"**{'met' if s.ratio <= TARGET_SMALL else 'not met'}** in CPU time ({s.ratio:.2f}×)"
            + (f"; in instructions {counted[s.n][1] / counted[s.n][0]:.2f}×" if s.n in counted else "")
        )
    if large:
        worst = max(large, key=lambda s: s.ratio)
        lines.append(
            f"- CDA at most {TARGET_LARGE}× the direct program from 10,000 clauses up: "
            f"**{'met' if worst.ratio <= TARGET_LARGE else 'not met'}** in CPU time (worst {worst.ratio:.2f}× at "
            f"N={worst.n:,}; " + ", ".join(f"{s.ratio:.2f}× at {s.n:,}" for s in large) + ")"
            + "".join(f"; in instructions {c / r:.2f}× at {n:,}" for n, (r, c) in sorted(counted.items()) if n >= 10_000)
        )
    if grow:
        exps = [(exponent(a.cda[k], b.cda[k], a.n, b.n), STAGE_NAMES[k], a.n, b.n) for a, b in grow for k in STAGES
                if a.cda[k] > 0.005 and b.cda[k] > 0.005]  # stages of a few ms are noise, not growth
        top = max(exps) if exps else (math.nan, "-", 0, 0)
        lines.append(
            f"- every stage's growth exponent at most {TARGET_EXPONENT} from 10,000 to {large[-1].n:,} clauses: "
            f"**{'met' if top[0] <= TARGET_EXPONENT else 'not met'}** (largest {top[0]:.2f}: {top[1]}, "
            f"{top[2]:,} → {top[3]:,}; stages under 5 ms left out)"
        )
    lines += [
        "",
        f"Measured on {time.strftime('%Y-%m-%d')}, {args.cda_label or core.cda_revision()}, Python {platform.python_version()}, "
        f"clingo {clingo.__version__}, {machine()}, in {elapsed / 60:.1f} min; load average {load[0]:.1f} at the "
        f"start and {load[1]:.1f} at the end (8 engineers share the 2 cores: CPU time keeps the waiting out, "
        "not the slower cores). Up to "
        f"{args.repeats} pairs per size, no new pair once {args.budget:.0f} s have gone on a size.",
        "",
        "Reproduce: `pip install -e . && python benchmarks/bench_clingo_path.py --write` (rewrites this section; "
        "`--quick` prints 1,000 and 10,000 only; `--instructions 1000,10000` adds the callgrind counts).",
        END,
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--sizes", type=core._sizes, default=None)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--budget", type=float, default=120.0)
    ap.add_argument("--instructions", type=core._sizes, default=(), help="sizes to count under callgrind")
    ap.add_argument("--growth-instructions", type=core._sizes, default=(),
                    help="sizes whose per-stage instructions and GC are counted under callgrind")
    ap.add_argument("--write", action="store_true", help="write the doc section even with --quick or --sizes")
    ap.add_argument("--cda-label", help="how to name the measured cda in the doc (default: its git commit)")
    args = ap.parse_args(argv)
    sizes = args.sizes or (QUICK if args.quick else SIZES)
    load = os.getloadavg()[0]
    started = time.perf_counter()
    _cpu_clock()
    core.warm_up()
    measured = [measure(n, args.repeats if n <= 100_000 else min(args.repeats, 2), args.budget, None) for n in sizes]
    counted = {n: instructions(n) for n in args.instructions}
    staged = {n: stage_instructions(n) for n in args.growth_instructions}
    text = section(measured, counted, args, (load, os.getloadavg()[0]), time.perf_counter() - started, staged)
    print(text)
    if args.write:
        write_section(DOC, START, END, text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
