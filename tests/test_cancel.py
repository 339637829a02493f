"""Cancellation reaches the solver: one cancel token beside the deadline, Ctrl-C in the CLI.

Before: Ctrl-C in ``cda solve`` on clingo was ignored until the solve ended (a pigeonhole of 15
pigeons: killed after 20 s), on z3 it was swallowed by z3's own handler and the run reported a
*timeout* (exit 3); ``cda diagnose`` printed nothing it had found. Now a cancel interrupts z3
(``Context.interrupt``) and clingo (``Control.interrupt``), every deadline of the run expires
with it, and the command prints its partial, labelled, and exits 130 (143 for SIGTERM).

The hard problem is a pigeonhole: 15 pigeons in 14 holes is unsatisfiable and no resolution
proof is short. Measured here, uncancelled: z3 took 2.7 s for 11 pigeons, 14 s for 12 and did
not finish 13 in 60 s; clingo did not finish 11 in 60 s. So 15 could not end inside the bounds
below without the cancel, which are far wider than the code's promise (an interrupt within
:attr:`CancelToken.POKE_EVERY` of the cancel, a partial within a second; measured in
``benchmarks/bench_cancel.py``) so that they hold on a loaded 2-core machine.
"""

from __future__ import annotations

import gc
import os
import resource
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from cda.contracts.deadline import NO_DEADLINE, CancelToken, Deadline, cancel_scope, current_token
from cda.contracts.result import SolveResult
from cda.testing import pigeonhole
from tests.conftest import ROOT

#: seconds of wall clock a cancelled run may take to come back in these tests: a hang guard only
#: (a process gets a sixth of a core at load 12 on 2 cores)
BOUND_S = 15.0

#: the issue's bound: a hard problem ends within this many seconds of its cancel. Asserted on what
#: load cannot stretch: the CPU the run spent after the cancel, and the solving thread's wall time
#: less the time it sat runnable waiting for a CPU (``run_delay``, /proc/.../schedstat)
CANCEL_WITHIN_S = 2.0


def _run_delay(path: str) -> float | None:
    """Seconds a thread has spent runnable but waiting for a CPU (``None`` where the kernel keeps no schedstat)."""
    try:
        return int(Path(path).read_text().split()[1]) / 1e9
    except (OSError, IndexError, ValueError):
        return None


class ThreadClock:
    """A thread's clocks at one moment: wall, its own CPU time and its run delay; read from
    another thread (:meth:`of`) or by the thread itself (:meth:`mine`)."""

    def __init__(self, cpu: float, delay: float | None) -> None:
        self.wall, self.cpu, self.delay = time.monotonic(), cpu, delay

    @classmethod
    def of(cls, thread: threading.Thread) -> ThreadClock:
        assert thread.ident is not None
        return cls(time.clock_gettime(time.pthread_getcpuclockid(thread.ident)),
                   _run_delay(f"/proc/self/task/{thread.native_id}/schedstat"))

    @classmethod
    def mine(cls) -> ThreadClock:
        return cls(time.thread_time(), _run_delay("/proc/thread-self/schedstat"))

    def until(self, later: ThreadClock) -> tuple[float, float]:
        """CPU seconds and uncontended wall seconds (wall less run delay) from this moment to ``later``."""
        delay = (later.delay - self.delay) if later.delay is not None and self.delay is not None else 0.0
        return later.cpu - self.cpu, max(0.0, later.wall - self.wall - delay)


def wait_for(predicate: Callable[[], object], timeout: float = BOUND_S) -> None:
    end = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < end, "timed out waiting"
        time.sleep(0.01)


# ---- the token ---------------------------------------------------------------------------------
def test_a_cancel_expires_every_deadline_of_the_token_and_calls_its_interrupts_once_each_time() -> None:
    token = CancelToken()
    calls: list[str] = []
    token.on_cancel(lambda: calls.append("a"))
    deadline = Deadline(3600, token)
    assert not deadline.expired() and deadline.remaining() is not None and deadline.remaining() > 3000
    assert token.cancel("cancelled by the client") and not token.cancel("again")
    assert deadline.expired() and deadline.remaining() == 0 and deadline.cancelled()
    assert deadline.why() == "cancelled by the client" and token.kind == "cancelled"
    assert calls[:1] == ["a"]
    token.on_cancel(lambda: calls.append("late"))  # registered after the cancel: called at once
    assert "late" in calls
    ticks = Deadline(None, token)
    assert any(ticks.tick() for _ in range(Deadline.EVERY))  # the grounder's loops see it too
    assert Deadline(5).why() == "time budget exhausted" and not Deadline(5).cancelled()


def test_the_token_holds_a_solvers_interrupt_weakly() -> None:
    """A backend that is gone is neither kept alive by the token nor called (a server's token
    outlives none of its runs, a CLI's outlives thousands of solver calls in a batch)."""

    class Solver:
        interrupted = 0

        def interrupt(self) -> None:
            Solver.interrupted += 1

    token = CancelToken()
    kept, dropped = Solver(), Solver()
    token.on_cancel(kept.interrupt)
    token.on_cancel(dropped.interrupt)
    del dropped
    gc.collect()
    assert token.watchers == 1
    token.cancel("stop")
    assert Solver.interrupted == 1


def test_the_ambient_token_is_the_threads_own() -> None:
    token = CancelToken()
    seen: list[CancelToken | None] = []
    with cancel_scope(token):
        inside = Deadline(None)
        thread = threading.Thread(target=lambda: seen.append(current_token()))
        thread.start()
        thread.join()
        assert current_token() is token and NO_DEADLINE.token is token  # read where it is used
    assert seen == [None]  # another thread has a scope of its own
    assert current_token() is None and NO_DEADLINE.token is None
    token.cancel("stop")
    assert inside.expired() and not NO_DEADLINE.expired()  # captured when made


# ---- the solvers -------------------------------------------------------------------------------
def _solve_in_thread(text: str, backend: str, token: CancelToken,
                     ended: list[ThreadClock] | None = None) -> tuple[threading.Thread, list[SolveResult]]:
    from cda.api import solve

    out: list[SolveResult] = []

    def target() -> None:
        with cancel_scope(token):
            out.append(solve(text, backend))  # no timeout: only the cancel can end it
        if ended is not None:
            ended.append(ThreadClock.mine())

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    return thread, out


def test_a_cancel_stops_a_hard_solve_on_each_backend(backend: str) -> None:
    token, ended = CancelToken(), []
    thread, out = _solve_in_thread(pigeonhole(15), backend, token, ended)
    wait_for(lambda: token.watchers > 0)  # the backend is built: its solve starts now (or has)
    at_cancel = ThreadClock.of(thread)
    token.cancel("cancelled by the test")
    thread.join(BOUND_S)
    assert not thread.is_alive(), f"{backend} still solving {BOUND_S} s after the cancel"
    result = out[0]
    assert result.partial and result.status == "unknown", result  # not a wrong "sat"/"unsat"
    assert any(n.startswith("cancelled by the test") for n in result.notes), result.notes
    cpu, uncontended = at_cancel.until(ended[0])
    assert cpu < CANCEL_WITHIN_S and uncontended < CANCEL_WITHIN_S, (cpu, uncontended, os.getloadavg())


def test_a_cancel_between_two_checks_is_not_lost(backend: str) -> None:
    """z3 drops an interrupt that comes when no check runs; the token calls it again, so a
    cancel made before the check started still stops it (clingo keeps it for the next solve).
    The solver's own deadline knows nothing of the cancel here: only the interrupt can stop it."""
    from cda.api import ground
    from cda.solver.backend import all_clauses_on, integer_weights, make_backend

    gp = ground(pigeonhole(15))
    solver = make_backend(backend, gp, seed=0, deadline=Deadline(None, CancelToken()), weights=integer_weights(gp))
    token = CancelToken()
    handle = solver.ctx if backend == "z3" else solver.ctl  # type: ignore[attr-defined]
    token.on_cancel(lambda: handle.interrupt())  # the raw interrupt, at any time (held strongly: lives as the test)
    token.cancel("before the check")
    out: list[str] = []
    thread = threading.Thread(target=lambda: out.append(solver.check(all_clauses_on(gp.clauses)).status), daemon=True)
    thread.start()
    thread.join(BOUND_S)
    assert not thread.is_alive() and out == ["unknown"]


# ---- the CLI -----------------------------------------------------------------------------------
def process_cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _interrupt(argv: list[str], signum: int = signal.SIGINT, busy_cpu_s: float = 1.5) -> tuple[int, str, str, float]:
    """Run ``cda ARGV``, send ``signum`` once it has spent ``busy_cpu_s`` of CPU (imports and
    grounding take well under that: it is solving), and return its exit status, stdout, stderr
    and the CPU seconds it spent from the signal to its exit (what load cannot stretch: a solver
    that went on would spend them without bound)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-m", "cda", *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env, cwd=ROOT)
    try:
        wait_for(lambda: proc.poll() is not None or process_cpu_seconds(proc.pid) >= busy_cpu_s, 120)
        assert proc.poll() is None, proc.communicate()
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        spent = process_cpu_seconds(proc.pid)
        proc.send_signal(signum)
        out, err = proc.communicate(timeout=BOUND_S)  # a hang guard: the process ends within it
        after = resource.getrusage(resource.RUSAGE_CHILDREN)  # the child's whole life, now it is reaped
        total = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        return proc.returncode, out, err, total - spent
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads a process's CPU time from /proc")
def test_ctrl_c_in_cda_solve_prints_the_partial_and_exits_130(tmp_path: Path, backend: str) -> None:
    problem = tmp_path / "pigeons.cda"
    problem.write_text(pigeonhole(15))
    code, out, err, took = _interrupt(["solve", str(problem), "--backend", backend])
    assert code == 130, (out, err)
    assert "Traceback" not in err and "KeyboardInterrupt" not in err
    assert "PARTIAL: interrupted; what follows is what was found" in out
    assert "note: interrupted (Ctrl-C); the result is partial" in out
    assert err.startswith("cda: interrupted (Ctrl-C): the command stopped"), err
    assert took < CANCEL_WITHIN_S, (took, os.getloadavg())  # CPU after the signal


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads a process's CPU time from /proc")
def test_sigterm_in_cda_solve_exits_143_with_json_saying_why(tmp_path: Path) -> None:
    problem = tmp_path / "pigeons.cda"
    problem.write_text(pigeonhole(15))
    code, out, err, _ = _interrupt(["solve", str(problem), "--backend", "clingo", "--json"], signal.SIGTERM)
    import json

    data = json.loads(out)
    assert code == 143 and data["partial"] and data["status"] == "unknown"
    assert "interrupted (SIGTERM); the result is partial" in data["notes"]
    assert "Traceback" not in err


def _many_diagnoses_bench(folder: Path, outputs: int = 14) -> tuple[Path, Path]:
    """A netlist whose observation has 4**outputs minimal diagnoses: each output is the AND of
    three buffered inputs and is seen 0 with every input 1, so each needs one of its four gates
    broken, independently of the others. The enumeration streams diagnoses for hours."""
    lines, obs = [], []
    for j in range(outputs):
        ins = [f"i{j}_{k}" for k in range(3)]
        lines += [f"INPUT({i})" for i in ins]
        lines.append(f"OUTPUT(y{j})")
        lines += [f"b{j}_{k} = BUFF({i})" for k, i in enumerate(ins)]
        lines.append(f"y{j} = AND({', '.join(f'b{j}_{k}' for k in range(3))})")
        obs += [f"{i}=1" for i in ins] + [f"y{j}=0"]
    bench, observations = folder / "grid.bench", folder / "grid.obs"
    bench.write_text("\n".join(lines) + "\n")
    observations.write_text(" ".join(obs) + "\n")
    return bench, observations


def test_a_wide_circuit_simulation_stops_at_the_runs_deadline() -> None:
    """Issue 27's ``--timeout`` case at its root: one bit-parallel pass over c7552 at 2^22 bits a
    net took 28 s and looked at no deadline, so ``cda diagnose --timeout 20`` ended at 75 s and
    ignored Ctrl-C. A wide pass now looks at the run's deadline (which a cancel expires) every
    few gates; a narrow one (milliseconds) does not, and without a run deadline a wide one ends."""
    from cda.contracts.deadline import OutOfTime, deadline_scope
    from cda.diagnosis.circuit import WIDE_BITS, Circuit, Gate, gate_function

    gates = [Gate(f"g{i}", f"n{i + 1}", (f"n{i}", "b"), gate_function("AND"), "AND") for i in range(40)]
    circuit = Circuit(["n0", "b"], gates)
    wide, narrow = (1 << (WIDE_BITS + 1)) - 1, (1 << 64) - 1
    token = CancelToken()
    token.cancel("stopped by the test")
    with deadline_scope(Deadline(None, token)):
        with pytest.raises(OutOfTime, match="while simulating the circuit"):
            circuit.run([wide, wide], [None] * len(gates), wide)
        assert circuit.run([narrow, narrow], [None] * len(gates), narrow)[-1] == narrow
    assert circuit.run([wide, wide], [None] * len(gates), wide)[-1] == wide


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads a process's CPU time from /proc")
def test_ctrl_c_in_cda_diagnose_prints_the_diagnoses_found_so_far(tmp_path: Path) -> None:
    """The issue's case: ``cda diagnose … --mode all`` ignored two Ctrl-C for 70 s and printed
    nothing it had found."""
    bench, observations = _many_diagnoses_bench(tmp_path)
    code, out, err, took = _interrupt(["diagnose", str(bench), "--observations", str(observations), "--mode", "all"],
                                      busy_cpu_s=3.0)
    assert code == 130, (out[-500:], err)
    assert "Traceback" not in err
    head, label, *rest = out.splitlines()
    assert "(INCOMPLETE)" in head and label == "INTERRUPTED: what follows is what was found"
    found = [line for line in rest if line.startswith("  ")]
    assert found, out[:500]  # what it had found, each a diagnosis checked against the observation
    for line in found:
        gates = line.strip().split(", ")
        assert len(gates) == 14 and len({g.split("_")[0].lstrip("by") for g in gates}) == 14, line
    assert took < CANCEL_WITHIN_S, (took, os.getloadavg())  # CPU after the signal (issue 27: within a second)


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads a process's CPU time from /proc")
def test_ctrl_c_in_cda_bench_folio_scores_the_examples_done(tmp_path: Path) -> None:
    """A benchmark stopped half-way scores the examples it finished, says so, and counts no example
    as answered "interrupted" (before: every example after the stop came back inconclusive and the
    report scored them as misses; a z3 call interrupted as it handed a model over was a traceback)."""
    import json

    example = {"premises": ["Every cat is a pet.", "Tom is a cat."],
               "premises-FOL": ["∀x (Cat(x) → Pet(x))", "Cat(tom)"],
               "conclusion": "Tom is a pet.", "conclusion-FOL": "Pet(tom)", "label": "True"}
    examples = tmp_path / "many.jsonl"
    examples.write_text("".join(json.dumps(example) + "\n" for _ in range(3000)), encoding="utf-8")
    code, out, err, took = _interrupt(["bench", "folio", str(examples)], busy_cpu_s=3.0)
    assert code == 130 and "Traceback" not in err, err
    first, second = out.splitlines()[:2]
    done = int(first.split("scored the first ")[1].split(" of ")[0])
    assert first == f"INTERRUPTED (interrupted (Ctrl-C)): scored the first {done} of 3000 examples" and 0 < done < 3000
    assert second.startswith(f"FOLIO {examples}: {done}/{done} correct (100.0%)")  # no example scored as a miss
    assert took < CANCEL_WITHIN_S, (took, os.getloadavg())  # CPU after the signal
