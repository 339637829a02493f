"""Trust-boundary benchmarks (issue 13), one section of docs/benchmarks.md per measure.

* **log** — signing the head of a 10,000-receipt log with Ed25519 and verifying the whole file
  as ``cda receipts verify`` does (target: verify >= 50,000 receipts/s); ``bench_trust_log.py``.
* **isolation** — the cost of the kernel sandbox: a trivial function check run through
  :func:`cda.verifiers.sandbox.run_sandboxed` with ``namespaces`` against the same check, staged
  the same way, with ``process`` (a plain child process), alternated in one run so both see the
  same machine load; the ratio of the medians (target <= 1.5x). Where the time goes is measured
  too: a bare interpreter start, and the namespace run with each setup step it adds.

Each section is a function ``section_<name>(args) -> str`` listed in :data:`SECTIONS`; ``main``
runs the ones asked for (all by default), prints them and, unless ``--quick``, rewrites each one's
own part of docs/benchmarks.md (markers ``<!-- bench_trust_<name>:start -->``), so a section can
be added or re-run alone: ``python benchmarks/bench_trust.py isolation``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "benchmarks.md"
sys.path.insert(0, str(Path(__file__).resolve().parent))  # doc_section, when run as a file
from doc_section import machine, write_section  # noqa: E402

from cda.verifiers.sandbox import Isolation, run_sandboxed  # noqa: E402

ISOLATION_TARGET = 1.5  # namespaces / plain process, medians
TRIVIAL = "def check(claim):\n    return claim == 'ok'\n"


def _markers(name: str) -> tuple[str, str]:
    return f"<!-- bench_trust_{name}:start -->", f"<!-- bench_trust_{name}:end -->"


# ---- isolation ---------------------------------------------------------------------------------
STAGES: dict[str, list[float]] = {}  # namespace runs: seconds per step, from the boot's marks


def _one(isolation: Isolation) -> float:
    """Seconds for one trivial check under ``isolation``, staging included; asserts it passed.
    Namespace runs also add their steps to :data:`STAGES` (``time.monotonic`` is one clock for
    every process of the machine, the boot's marks included)."""
    start = time.monotonic()
    payload = json.dumps({"source": TRIVIAL, "claim": "ok"}).encode("utf-8")
    spawn = time.monotonic()
    run = run_sandboxed(payload, isolation, timeout_s=10.0, memory_bytes=256 << 20, output_bytes=1 << 20,
                        deadline=time.monotonic() + 10.0)
    returned = time.monotonic()
    end = time.monotonic()
    assert run.isolation == isolation and json.loads(run.raw) == {"kind": "value", "value": True}, run
    marks = (run.control or {}).get("marks")
    if isolation == "namespaces" and isinstance(marks, dict):
        points = [("staging", start), ("interpreter start", spawn), *marks.items(),
                  ("check, teardown, reading", returned)]
        for (_, t0), (name, t1) in zip(points, points[1:]):
            STAGES.setdefault("interpreter start" if name == "boot" else name, []).append(t1 - t0)
    return end - start


def _bare_interpreter() -> float:
    """Seconds to start and end ``python -s -S -P -c pass``: the floor of both runs."""
    start = time.perf_counter()
    subprocess.run([sys.executable, "-s", "-S", "-P", "-c", "pass"], check=True, env={"PYTHONHASHSEED": "0"})
    return time.perf_counter() - start


def _ms(values: list[float], q: float = 0.5) -> float:
    ordered = sorted(values)
    return 1000 * ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def section_isolation(args: argparse.Namespace) -> str:
    repeats = 11 if args.quick else args.repeats
    for isolation in ("namespaces", "process"):  # warm the page cache and the interpreter's files
        _one(isolation)  # type: ignore[arg-type]
    STAGES.clear()
    times: dict[str, list[float]] = {"namespaces": [], "process": [], "bare": []}
    for _ in range(repeats):  # alternated: both see the same load
        times["namespaces"].append(_one("namespaces"))
        times["process"].append(_one("process"))
        times["bare"].append(_bare_interpreter())
    med = {k: statistics.median(v) for k, v in times.items()}
    ratio = med["namespaces"] / med["process"]
    best = min(times["namespaces"]) / min(times["process"])
    stages = " · ".join(f"{name} {_ms(values):.1f}" for name, values in STAGES.items())
    added = 1000 * (med["namespaces"] - med["process"])
    verdict = "met" if ratio <= ISOLATION_TARGET else "missed"
    start, end = _markers("isolation")
    rows = [
        f"| {name} | {_ms(times[key]):.1f} | {_ms(times[key], 0.9):.1f} | {1000 * min(times[key]):.1f} |"
        for name, key in (("namespaces (the sandbox)", "namespaces"), ("process (plain child)", "process"),
                          ("bare `python -s -S -P -c pass`", "bare"))
    ]
    return "\n".join([
        start,
        "## Trust: the cost of the kernel sandbox (`benchmarks/bench_trust.py isolation`)",
        "",
        f"A trivial function check (`{TRIVIAL.splitlines()[1].strip()}`), staged and read the same way, run "
        f"{repeats} times under each isolation, alternated in one run (milliseconds, whole call: interpreter "
        "start, setup, check, teardown; the `process` run also makes and removes its folder).",
        "",
        "| run | median | p90 | min |",
        "|---|---:|---:|---:|",
        *rows,
        "",
        f"**Ratio namespaces / process: {ratio:.2f}x** of the medians (target <= {ISOLATION_TARGET}x: "
        f"{verdict}); {best:.2f}x of the fastest runs. The sandbox adds {added:.1f} ms per check (medians). "
        f"Where a namespace run's time goes (medians, ms): {stages}. The namespace steps (`unshare` of six "
        "namespaces, the uid map, the mounts: private, unix sockets covered, `/tmp` `/run` hidden, the check's "
        "tmpfs, the recursive read-only remount; a fresh `/proc` and `/sys`, the seccomp filter and the fork "
        "of init) are what the sandbox "
        "adds, with the namespace's teardown in the last step (which also holds the check's own run, as in "
        f"the plain child). Both runs share an interpreter start (bare: {_ms(times['bare']):.1f} ms) and "
        f"CDA's staging, runner and reading ({1000 * (med['process'] - med['bare']):.1f} ms more in the plain run), "
        "so the ratio describes trivial checks only: what the sandbox costs is the fixed "
        f"{added:.1f} ms per check, which a check doing real work does not multiply.",
        "",
        f"Environment: {machine()}, Linux {os.uname().release}, Python {sys.version.split()[0]}; eight engineers "
        "shared the 2 cores while this ran, so medians are the figures to read.",
        end,
    ])


def section_log(args: argparse.Namespace) -> str:
    """Signing and verifying a 10,000-receipt log (target: verify >= 50,000 receipts/s); the
    measurement lives in ``bench_trust_log.py``, which also runs alone."""
    import bench_trust_log

    load0 = os.getloadavg()[0]
    started = time.perf_counter()
    result = bench_trust_log.bench_signing(10_000, 2 if args.quick else 5)
    return bench_trust_log.render(result, time.perf_counter() - started, (load0, os.getloadavg()[0]))


SECTIONS: dict[str, Callable[[argparse.Namespace], str]] = {
    "isolation": section_isolation,
    "log": section_log,
}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Trust-boundary benchmarks (issue 13).")
    ap.add_argument("sections", nargs="*", choices=[*SECTIONS, []], help="sections to run (default: all)")
    ap.add_argument("--quick", action="store_true", help="fewer repeats, print only")
    ap.add_argument("--write", action="store_true", help="rewrite this script's section of docs/benchmarks.md (else print only)")
    ap.add_argument("--repeats", type=int, default=41)
    ap.add_argument("--doc", type=Path, default=DOC)
    args = ap.parse_args(argv)
    for name in args.sections or list(SECTIONS):
        text = SECTIONS[name](args)
        print(text)
        if args.write:
            start, end = _markers(name)
            write_section(args.doc, start, end, text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
