"""How soon a stop takes effect: a cancel, Ctrl-C, SIGTERM and ``--timeout`` on runs that would not end.

Every line stops a run that could not finish on its own in minutes (a pigeonhole of 15 pigeons
in 14 holes: unsatisfiable, and no short resolution proof exists), and measures the seconds from
the stop to the answer. The raw lines are the floor: z3's ``Context.interrupt`` and clingo's
``Control.interrupt`` called from another thread on the same pigeonhole built directly in each
solver, without CDA. ``--diagnose`` adds the issue's ``--timeout`` case: ``cda diagnose`` on
c7552 with 30 observations and ``--timeout 20`` (needs ``../shared/data``; 20 s a backend).

    python benchmarks/bench_cancel.py            # print
    python benchmarks/bench_cancel.py --write    # and rewrite its section of docs/benchmarks.md
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # doc_section, when run as a file
from doc_section import machine, write_section  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "benchmarks.md"
DATA = ROOT.parent / "shared" / "data"
START, END = "<!-- bench_cancel:start -->", "<!-- bench_cancel:end -->"
PIGEONS = 15


def pigeonhole(n: int = PIGEONS) -> str:
    from cda.testing import pigeonhole as text

    return text(n)


def _busy(seconds: float = 0.5) -> None:
    time.sleep(seconds)  # a benchmark, not a test: let the solver get deep into its search


# ---- the floor: the solvers' own interrupts -------------------------------------------------------
def raw_z3() -> float:
    import z3

    ctx = z3.Context()
    x = [[z3.Bool(f"x{i}_{j}", ctx) for j in range(PIGEONS - 1)] for i in range(PIGEONS)]
    s = z3.SolverFor("QF_FD", ctx=ctx)
    for row in x:
        s.add(z3.Or(row))
    for j in range(PIGEONS - 1):
        s.add(z3.AtMost(*[x[i][j] for i in range(PIGEONS)], 1))
    return _stopped(lambda: s.check(), ctx.interrupt)


def raw_clingo() -> float:
    import clingo

    ctl = clingo.Control(["0"])
    ctl.add("base", [], f"p(1..{PIGEONS}). h(1..{PIGEONS - 1}). 1 {{ in(P,H) : h(H) }} :- p(P). "
                        ":- h(H), 2 { in(P,H) : p(P) }.")
    ctl.ground([("base", [])])
    return _stopped(lambda: ctl.solve(), ctl.interrupt)


def _stopped(work: Callable[[], object], stop: Callable[[], object]) -> float:
    done = threading.Event()
    thread = threading.Thread(target=lambda: (work(), done.set()), daemon=True)
    thread.start()
    _busy()
    start = time.monotonic()
    stop()
    assert done.wait(60), "the solver did not stop"
    return time.monotonic() - start


# ---- CDA in one process: the cancel token -----------------------------------------------------------
def cda_token(backend: str) -> float:
    from cda.api import solve
    from cda.contracts.deadline import CancelToken, cancel_scope

    token = CancelToken()
    out: list[object] = []

    def work() -> None:
        with cancel_scope(token):
            out.append(solve(pigeonhole(), backend))

    thread = threading.Thread(target=work, daemon=True)
    thread.start()
    while token.watchers == 0:
        time.sleep(0.005)
    _busy()
    start = time.monotonic()
    token.cancel("cancelled by the benchmark")
    thread.join(60)
    assert not thread.is_alive() and getattr(out[0], "partial", False)
    return time.monotonic() - start


# ---- the CLI: a signal to a cda process ------------------------------------------------------------
def _cpu(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def cli_signal(argv: list[str], signum: int, busy_cpu: float = 1.5) -> tuple[float, int]:
    proc = subprocess.Popen([sys.executable, "-m", "cda", *argv], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, cwd=ROOT)
    while proc.poll() is None and _cpu(proc.pid) < busy_cpu:
        time.sleep(0.01)
    start = time.monotonic()
    proc.send_signal(signum)
    code = proc.wait(60)
    return time.monotonic() - start, code


# ---- the server: actions.cancel and SIGTERM ---------------------------------------------------------
def server_lines(folder: Path) -> dict[str, float]:
    from websockets.sync.client import connect

    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-m", "cda", "serve", str(folder / "receipts.sqlite"), "--port", "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env, cwd=ROOT)
    assert proc.stdout is not None
    match = re.search(r"http://([0-9.]+):([0-9]+)/", proc.stdout.readline())
    assert match is not None, "the server did not start"
    url = f"ws://{match.group(1)}:{match.group(2)}/toolbus"
    ids = iter(range(1, 1 << 30))
    out: dict[str, float] = {}

    def call(ws: object, method: str, params: dict[str, object]) -> dict[str, object]:
        frame = next(ids)
        ws.send(json.dumps({"id": frame, "method": method, "params": params}))  # type: ignore[attr-defined]
        return json.loads(ws.recv(timeout=60))["result"]  # type: ignore[attr-defined,no-any-return]

    def status(ws: object, action_id: str) -> str:
        return str(call(ws, "actions.get", {"action_id": action_id})["status"])

    try:
        with connect(url, open_timeout=10) as ws:
            for backend in ("z3", "clingo"):
                inputs = {"problem": "pigeons", "dsl": pigeonhole(), "backend": backend,
                          "seed": {"purpose": f"bench-{backend}-{random.random()}"}}
                action_id = str(call(ws, "actions.start", {"ability": "cda", "inputs": inputs})["action_id"])
                while not _solving(folder, action_id):
                    time.sleep(0.02)
                _busy()
                start = time.monotonic()
                call(ws, "actions.cancel", {"action_id": action_id})
                while status(ws, action_id) != "cancelled":
                    time.sleep(0.01)
                out[f"actions.cancel ({backend})"] = time.monotonic() - start
            inputs = {"problem": "pigeons", "dsl": pigeonhole(), "backend": "clingo", "seed": {"purpose": "bench-term"}}
            action_id = str(call(ws, "actions.start", {"ability": "cda", "inputs": inputs})["action_id"])
            while not _solving(folder, action_id):
                time.sleep(0.02)
        _busy()
        start = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        proc.wait(60)
        out["SIGTERM to cda serve, to exit"] = time.monotonic() - start
    finally:
        if proc.poll() is None:
            proc.kill()
    return out


def _solving(folder: Path, action_id: str) -> bool:
    import sqlite3

    with sqlite3.connect(folder / "receipts.sqlite") as conn:
        rows = conn.execute("SELECT body FROM events WHERE action_id = ?", (action_id,)).fetchall()
    return any('"phase":"propagate"' in body for (body,) in rows)


# ---- --timeout on the diagnosis ----------------------------------------------------------------
def diagnose_timeout(folder: Path, data: Path, backend: str, budget: float = 20.0) -> float:
    from cda.diagnosis.bench_import import circuit_of, read_bench

    bench = data / "iscas85" / "c7552.bench"
    netlist = read_bench(bench)
    circuit = circuit_of(netlist)
    rng = random.Random(11)
    broken = rng.sample([g for g, _, _ in netlist.gates], 6)
    rows = []
    for _ in range(30):
        inputs = {i: rng.random() < 0.5 for i in netlist.inputs}
        values = circuit.evaluate(inputs, broken)
        rows.append(" ".join(f"{k}={int(v)}" for k, v in {**inputs, **{o: values[o] for o in netlist.outputs}}.items()))
    observations = folder / "c7552.obs"
    observations.write_text("\n".join(rows) + "\n")
    start = time.monotonic()
    subprocess.run([sys.executable, "-m", "cda", "diagnose", str(bench), "--observations", str(observations),
                    "--mode", "all", "--backend", backend, "--timeout", f"{budget:g}"], stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, cwd=ROOT, check=False)
    return time.monotonic() - start


def _load() -> str:
    try:
        return f"{os.getloadavg()[0]:.1f}"
    except OSError:  # pragma: no cover
        return "unknown"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--diagnose", action="store_true", help="add the c7552 --timeout 20 lines (40 s)")
    ap.add_argument("--data", type=Path, default=DATA, help="the external data folder (../shared/data)")
    ap.add_argument("--write", action="store_true", help="rewrite this benchmark's section of docs/benchmarks.md")
    args = ap.parse_args(argv)
    loads = [_load()]
    t0 = time.perf_counter()
    rows: list[tuple[str, list[float], str]] = []
    for name, fn in (("z3 Context.interrupt (raw, the floor)", raw_z3),
                     ("clingo Control.interrupt (raw, the floor)", raw_clingo),
                     ("CDA cancel token, z3", lambda: cda_token("z3")),
                     ("CDA cancel token, clingo", lambda: cda_token("clingo"))):
        rows.append((name, [fn() for _ in range(args.repeats)], ""))
    with tempfile.TemporaryDirectory() as tmp:
        problem = Path(tmp) / "pigeons.cda"
        problem.write_text(pigeonhole())
        for backend in ("z3", "clingo"):
            runs = [cli_signal(["solve", str(problem), "--backend", backend], signal.SIGINT) for _ in range(args.repeats)]
            rows.append((f"Ctrl-C to `cda solve --backend {backend}`, to exit", [t for t, _ in runs],
                         f"exit {sorted({c for _, c in runs})}"))
        served: dict[str, list[float]] = {}
        for i in range(args.repeats):
            folder = Path(tmp) / f"serve{i}"
            folder.mkdir()
            for name, seconds in server_lines(folder).items():
                served.setdefault(name, []).append(seconds)
        rows += [(name, times, "") for name, times in served.items()]
        if args.diagnose and (args.data / "iscas85" / "c7552.bench").exists():
            before = {"z3": "", "clingo": "before: 65.9 s (the search alone, same instance; the issue: 75 s)"}
            for backend in ("z3", "clingo"):
                took = diagnose_timeout(Path(tmp), args.data, backend)
                rows.append((f"`cda diagnose c7552 … --timeout 20 --backend {backend}`, whole process", [took],
                             before[backend]))
    loads.append(_load())
    text = section(rows, args.repeats, time.perf_counter() - t0, loads)
    print(text)
    if args.write:
        write_section(DOC, START, END, text)
    return 0


def section(rows: list[tuple[str, list[float], str]], repeats: int, took: float, loads: list[str]) -> str:
    lines = [START, "## Cancellation: how soon a stop takes effect (`benchmarks/bench_cancel.py`)", "",
             f"Each line stops a run that cannot end on its own (a pigeonhole of {PIGEONS} pigeons in "
             f"{PIGEONS - 1} holes: z3 took 2.7 s for 11 pigeons, 14 s for 12 and did not finish 13 in 60 s; clingo "
             "did not finish 11 in 60 s) and gives the seconds from the stop to the answer (median and worst of "
             f"{repeats}). The raw lines are the floor: each solver's own interrupt, called from another thread "
             "on the same pigeonhole built directly. The CLI lines are whole processes (signal to exit, the "
             "partial printed); the server lines go through a real `cda serve` (cancel to `actions.get` saying "
             "`cancelled`; SIGTERM to the process gone, a hard action running). The code promises an interrupt "
             "within 0.1 s of a cancel (the token calls the solver's interrupt again every 0.1 s), a CLI exit "
             "within 2 s of CPU after Ctrl-C (after that, or 30 s of wall time, it ends the process itself) and a server exit within 10 s of "
             "SIGTERM. The tests (tests/test_cancel*.py) assert the issue's 2 s on what load cannot stretch: "
             "the CPU a run spends after its stop, and a solving thread's wall time less its run delay; their "
             "wall-clock bounds are hang guards.", "",
             "The `--timeout` lines are whole processes (start-up and reading c7552 included, about a second) "
             "on 30 observations of 6 broken gates, where one simulation of a candidate reached 2^22 bits a net "
             "(28 s and 1.8 GB a pass) with no look at the clock before.", "",
             "| stop | median (ms) | worst (ms) | note |", "|---|---:|---:|---|"]
    for name, times, note in rows:
        lines.append(f"| {name} | {1000 * statistics.median(times):.1f} | {1000 * max(times):.1f} | {note} |")
    lines += ["", f"Measured on {machine()}, in {took:.0f} s; load average {loads[0]} at the start and {loads[-1]} "
                  "at the end (a machine shared by other work: the floor lines stretch with it).", "",
              "Reproduce: `pip install -e '.[test]' && python benchmarks/bench_cancel.py --diagnose --write`.", END]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
