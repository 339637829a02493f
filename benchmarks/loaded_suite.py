"""The README's test command on a busy machine: ``python -m pytest -q -n auto`` run ``--runs`` times (3)
beside ``--burners`` (2) processes that do nothing but burn a CPU (``python -c 'while 1: pass'``),
started before the first run and stopped after the last by this script (by their own pids).

It shows what docs/testing.md promises ("Tests on a busy machine"): no test asserts a
wall-clock bound or orders threads with a sleep, so the suite passes however loaded the
machine is; only its time grows. Each run's wall time, its result line and the load average
(1 min) before and after it are printed as a table; ``--write`` puts it in its section of
docs/benchmarks.md. A second table is the same command with no burner, when ``--idle`` is given.

    python benchmarks/loaded_suite.py [--runs 3] [--burners 2] [--idle] [--write] [-- PYTEST ARGS]

Run it from a checkout whose ``pip install -e '.[test]'`` is done (as README command 2). The
suite reads the data sets from ``$CDA_DATA`` or ``../shared/data`` (README.md, "Test data").
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # doc_section, when run as a file
from doc_section import machine, write_section  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "benchmarks.md"
START, END = "<!-- loaded_suite:start -->", "<!-- loaded_suite:end -->"
BURN = "while 1: pass"
#: README command 2's test run, after its install (tests/test_docs.py holds README.md and .ci/run to it)
TEST_COMMAND = ("python", "-m", "pytest", "-q", "-n", "auto")


@dataclass
class Run:
    label: str
    seconds: float
    cpu: float  # user + system seconds of pytest and every process it waited for
    code: int
    summary: str
    load_before: float
    load_after: float


def _summary(output: str) -> str:
    """pytest's last line (``N passed, M skipped in T s``) without its decoration."""
    for line in reversed(output.strip().splitlines()):
        if re.search(r"\b(passed|failed|error)", line):
            return line.strip("= ").strip()
    return "(no summary line)"


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_suite(label: str, extra: list[str], log: Path | None = None) -> Run:
    """One run of the README's command; its CPU is what the processes it waited for used (the
    burners are waited for only after the last run), what an idle 2-core machine's wall time
    approaches. ``log``: a file that keeps the run's whole output (why a run failed)."""
    load_before = os.getloadavg()[0]
    start, cpu = time.monotonic(), _children_cpu()
    proc = subprocess.run([sys.executable, *TEST_COMMAND[1:], *extra], cwd=ROOT,  # the README's command
                          capture_output=True, text=True)
    seconds, cpu = time.monotonic() - start, _children_cpu() - cpu
    if log is not None:
        log.write_text(proc.stdout + proc.stderr, encoding="utf-8")
    failed = [line for line in proc.stdout.splitlines() if line.startswith(("FAILED", "ERROR"))]
    for line in failed:
        print(f"  {line}", file=sys.stderr)
    return Run(label, seconds, cpu, proc.returncode, _summary(proc.stdout), load_before, os.getloadavg()[0])


def burners(n: int) -> list[subprocess.Popen[bytes]]:
    return [subprocess.Popen([sys.executable, "-c", BURN]) for _ in range(n)]


def stop(procs: list[subprocess.Popen[bytes]]) -> None:
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
        proc.wait()


def section(runs: list[Run], n_burners: int) -> str:
    out = [START, "## The test suite on a busy machine (`benchmarks/loaded_suite.py`)", "",
           f"The README's test command (`{' '.join(TEST_COMMAND)}`), each run on {machine()}; "
           f"`loaded` runs have {n_burners} CPU-burning processes (`python -c 'while 1: pass'`) beside them, "
           "started and stopped by the script. Other work on the machine adds to the load shown "
           "(1-minute load average before and after the run).", "",
           "| run | wall time | CPU (user+sys) | exit | result | load before → after |",
           "|---|---:|---:|---:|---|---|"]
    for r in runs:
        out.append(f"| {r.label} | {r.seconds / 60:.1f} min ({r.seconds:.0f} s) | {r.cpu / 60:.1f} min ({r.cpu:.0f} s) | {r.code} | "
                   f"{r.summary} | "
                   f"{r.load_before:.1f} → {r.load_after:.1f} |")
    out += ["", "Reproduce: `pip install -e '.[test]' && python benchmarks/loaded_suite.py --idle --write` "
            "(rewrites this section).", END]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--burners", type=int, default=2)
    ap.add_argument("--idle", action="store_true", help="one more run first, with no burner")
    ap.add_argument("--write", action="store_true", help="rewrite this script's section of docs/benchmarks.md (else print only)")
    ap.add_argument("--logs", type=Path, help="a directory to keep each run's whole output in (RUN.log)")
    ap.add_argument("pytest_args", nargs="*", help="after --: passed to pytest")
    args = ap.parse_args(argv)
    runs: list[Run] = []
    if args.logs is not None:
        args.logs.mkdir(parents=True, exist_ok=True)

    def log(label: str) -> Path | None:
        return None if args.logs is None else args.logs / f"{label.replace(' ', '-')}.log"

    if args.idle:
        runs.append(run_suite("idle", args.pytest_args, log("idle")))
        print(runs[-1], flush=True)
    procs = burners(args.burners)
    try:
        for i in range(args.runs):
            runs.append(run_suite(f"loaded {i + 1}", args.pytest_args, log(f"loaded {i + 1}")))
            print(runs[-1], flush=True)
    finally:
        stop(procs)
    text = section(runs, args.burners)
    print(text)
    if args.write:
        write_section(DOC, START, END, text)
    return max((r.code for r in runs), default=0)


if __name__ == "__main__":
    sys.exit(main())
