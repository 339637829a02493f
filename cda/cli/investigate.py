"""``cda investigate ...``: an analyst's investigation, one command per step, kept in SQLite.

``start PROBLEM`` prints the new session's id (``{"session_id": …}`` with ``--json``);
``observe ID 'slow(auth)'`` (or ``'not slow(auth)'``, or ``'value(metric:m) = 300 ms'``) takes
one step; ``status ID`` prints the records, the focus and the next probe (``--json``: the memory
block); ``history ID`` the trace of every step; ``undo ID`` takes the last observation back;
``close ID`` ends it. Each command reopens the session from the store, so a killed process loses
at most the step it was computing.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any, TextIO

from cda.errors import CDAError

__all__ = ["options", "present", "render_status"]

DEFAULT_DB = Path("investigations.sqlite")
EXIT_OK, EXIT_BAD_INPUT = 0, 2


def options(p: argparse.ArgumentParser, op: Any) -> dict[str, Any]:
    """Every ``cda investigate`` command's own options: the session store and ``--json``."""
    p.add_argument("--db", type=Path, default=DEFAULT_DB, help=f"the session store (default {DEFAULT_DB})")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    return {"metavars": {"path": "PROBLEM", "ken": "FILE"}}


def present(op: Any, args: argparse.Namespace, out: TextIO, err: TextIO, inp: TextIO | None = None) -> int:
    from cda.cli.call import LocalEnv, call_local
    from cda.cli.generate import params_of
    from cda.operations.investigate import desk_for

    try:
        if op.name == "investigate.start" and not Path(args.path).exists():
            raise CDAError(f"{args.path}: no such file")
        result = call_local(op, params_of(op, args), LocalEnv(investigations=desk_for(args.db,
                                                                                        sessions_file=True)))
    except CDAError as exc:
        err.write(exc.render() + "\n")
        return EXIT_BAD_INPUT
    if op.name == "investigate.start":
        out.write(json.dumps({"session_id": result.session_id}) + "\n" if args.json else result.session_id + "\n")
    elif op.name == "investigate.history":
        steps = result.steps
        if args.json:
            out.write(json.dumps([s.model_dump(mode="json") for s in steps], sort_keys=True) + "\n")
        else:
            for s in steps:
                what = s.observation or (f"step {s.undoes}" if s.undoes is not None else "")
                ex = s.trace.get("execute", {})
                tail = (f" -> {ex.get('selected')} next probe {ex.get('next_probe')}" if ex
                        else " -> conflict" if not s.trace.get("integrate", {}).get("consistent", True) else "")
                out.write(f"{s.step:>3} {s.kind:<8} {what}{tail}\n")
    else:  # observe, undo, close, status: the memory block after the step
        out.write(result.memory.model_dump_json() + "\n" if args.json else render_status(result.memory))
    return EXIT_OK


def render_status(memory: Any) -> str:
    """The memory block for a person: focus, hypotheses with their evidence, the next probe."""
    lines = [f"investigation {memory.session_id} (task {memory.task_id}), step {memory.step}"
             + (" — closed" if memory.closed else "")]
    if memory.observations:
        lines.append("observed: " + "; ".join(memory.observations))
    if memory.conflict is not None:
        lines.append("CONFLICT — the observations contradict the hard clauses; cores:")
        lines.extend("  " + " & ".join(core) for core in memory.conflict.cores)
        lines.append("undo an observation of a core to go on")
        return "\n".join(lines) + "\n"
    lines.append(f"focus: {memory.focus_subsystem} ({memory.focus_reason})")
    lines.append(f"hypotheses: {memory.hypotheses_total} consistent; the first {len(memory.candidate_hypotheses)}:")
    for h in memory.candidate_hypotheses:
        mark = "*" if h.id == memory.selected_hypothesis_id else " "
        lines.append(f" {mark}{h.id} {h.statement}  confidence {h.confidence:g}")
        for e in h.evidence_for:
            lines.append(f"     for:     {getattr(e, 'excerpt', e)}")
        for e in h.evidence_against:
            lines.append(f"     against: {getattr(e, 'excerpt', e)}")
        if h.falsifiers:
            lines.append(f"     refuted by: {', '.join(f.removeprefix('observe ') for f in h.falsifiers)}")
        else:
            lines.append(f"     refuted by: nothing observable ({h.falsifiers_note})")
    if memory.global_invariants:
        lines.append("settled: " + "; ".join(memory.global_invariants))
    lines.append(f"why: {memory.selected_hypothesis_reason}")
    lines.append(f"next probe: {memory.next_probe or 'none — nothing left that tells the hypotheses apart'}")
    return "\n".join(lines) + "\n"
