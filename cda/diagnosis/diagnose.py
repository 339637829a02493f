"""``cda diagnose``: all subset-minimal diagnoses of a circuit under its observations.

Reads a ``.bench`` netlist with an observation file, or an mbd-mobs ``.wcnf``/``.wcnf.gz``
instance, builds a grouped problem with ``goal minimal_explanations`` (one observation group
per observation, built when the search needs it, and a simulation oracle) and hands it to the
engine: every diagnosis is checked against every observation and proved minimal by simulation.
See docs/diagnosis.md.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict

from cda.contracts import limits
from cda.contracts.deadline import Deadline
from cda.diagnosis.bench_import import load_bench, read_bench, read_observations
from cda.diagnosis.names import counted, diagnosis_order, sorted_gates
from cda.diagnosis.problem import CircuitInstance
from cda.diagnosis.wcnf_import import load_wcnf, read_wcnf
from cda.engine import Options, run
from cda.errors import CDAError
from cda.files import is_stdin
from cda.ir import MinimalGoal

__all__ = ["DiagnosisReport", "load_instance", "diagnose", "render"]

Mode = Literal["all", "top", "min_cardinality"]


class DiagnosisReport(BaseModel):
    model_config = ConfigDict(extra="forbid")

    file: str
    backend: str
    mode: str
    diagnoses: list[list[str]]
    complete: bool
    observations: int
    gates: int
    injected: list[str] | None
    time_s: float
    timed_out: bool
    notes: list[str]
    interrupted: bool = False  # stopped by Ctrl-C / a cancel, not by the budget (then timed_out is false)


def load_instance(path: Path, observations: Path | None, goal: MinimalGoal) -> CircuitInstance:
    """A ``.bench`` (observations required) or mbd-mobs ``.wcnf[.gz]`` file as a diagnosis problem."""
    if not is_stdin(path) and not path.exists():
        raise CDAError(f"{path}: no such file")
    name = "-.bench" if is_stdin(path) else path.name.lower()  # standard input: a netlist (a WCNF is gzipped)
    if name.endswith(".bench"):
        if observations is None:
            raise CDAError(f"{path}: a .bench netlist needs --observations FILE (docs/diagnosis.md)")
        netlist = read_bench(path)
        obs = read_observations(observations, set(netlist.nets))
        return load_bench(netlist, list(obs), goal, str(path))
    if name.endswith(".wcnf") or name.endswith(".wcnf.gz"):
        if observations is not None:
            raise CDAError(f"{path}: a WCNF instance carries its own observations; drop --observations")
        return load_wcnf(read_wcnf(path), goal, str(path))
    raise CDAError(f"{path}: expected a .bench netlist or a .wcnf/.wcnf.gz instance")


def diagnose(
    path: Path,
    observations: Path | None = None,
    *,
    backend: str = "auto",
    mode: Mode = "all",
    k: int | None = None,
    timeout: float | None = None,
    seed: int = 0,
    lazy_observations: bool = True,
    check_minimality: bool = True,
) -> DiagnosisReport:
    """Subset-minimal diagnoses of one instance (``mode``: all, top ``k``, min_cardinality).

    Every diagnosis is checked against every observation, and (``check_minimality``, on by
    default: a few simulations each) proved minimal by removing each gate in turn.
    """
    if mode == "top":
        if k is None:
            raise CDAError("--mode top needs a count of at least 1 (e.g. --mode top 5)")
        limits.count("--mode top K", k)
    if mode not in ("all", "top", "min_cardinality"):
        raise CDAError(f"unknown diagnosis mode {mode!r}: all, top K or min_cardinality")
    start = time.perf_counter()
    options = Options(  # checked before the instance is read (10**400 s is no limit, a float)
        backend=backend, seed=seed, timeout=timeout, lazy_observations=lazy_observations,
        check_minimality=check_minimality,
    )
    deadline = Deadline(options.timeout)  # reading the instance spends the same budget
    goal = MinimalGoal(mode, k if mode == "top" else None)
    inst = load_instance(path, observations, goal)
    result = run(inst.problem, options, deadline)
    name = result.backend
    gate_of = {a.name: a.args[0] for a in inst.problem.base.atoms.values() if a.kind == "hyp"}
    found = [[gate_of[a] for a in d] for d in (result.minimal_explanations or [])]
    found = sorted((sorted_gates(d) for d in found), key=diagnosis_order)  # 7 before 15
    return DiagnosisReport(
        file=str(path), backend=name, mode=mode if mode != "top" else f"top {k}", diagnoses=found,
        complete=result.minimal_complete, observations=inst.observations, gates=len(inst.gates),
        injected=inst.injected, time_s=round(time.perf_counter() - start, 4),
        timed_out=result.partial and not deadline.cancelled(), notes=inst.notes + result.notes,
        interrupted=result.partial and deadline.cancelled(),
    )


def render(report: DiagnosisReport) -> str:
    """The text report: a header, then one diagnosis a line (the empty one, every gate healthy,
    as ``(no fault)``)."""
    out = [
        f"{report.file}: {counted(len(report.diagnoses), 'diagnosis', 'diagnoses')}"
        f" ({'complete' if report.complete else 'INCOMPLETE'}), {counted(report.gates, 'gate', 'gates')}, "
        f"{counted(report.observations, 'observation', 'observations')}, backend {report.backend}, "
        f"{report.time_s:.3f} s"
    ]
    if report.timed_out or report.interrupted:
        out.append(f"{'INTERRUPTED' if report.interrupted else 'TIMEOUT'}: what follows is what was found")
    for d in report.diagnoses:
        out.append("  " + (", ".join(d) or "(no fault)"))
    for note in report.notes:
        out.append(f"note: {note}")
    return "\n".join(out) + "\n"
