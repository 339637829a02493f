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
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

from cda.errors import CDAError

__all__ = ["add_investigate_parser", "main_investigate"]

DEFAULT_DB = Path("investigations.sqlite")
EXIT_OK, EXIT_BAD_INPUT = 0, 2


def add_investigate_parser(sub: Any, count: Callable[[str], Callable[[str], Any]]) -> None:
    """Register ``investigate`` and its commands on the top-level subparsers; ``count(name)``
    is the CLI's checked whole-number type (cda.contracts.limits)."""
    inv = sub.add_parser("investigate", help="an investigation over time: observations, records, next probe")
    isub = inv.add_subparsers(dest="investigate_command", required=True)

    def common(p: argparse.ArgumentParser) -> None:
        p.add_argument("--db", type=Path, default=DEFAULT_DB, help=f"the session store (default {DEFAULT_DB})")
        p.add_argument("--json", action="store_true", help="print one JSON object")

    st = isub.add_parser("start", help="start an investigation of a .cda problem; prints its id")
    st.add_argument("problem", type=Path, help="the problem file (.cda)")
    st.add_argument("--ken", type=Path, default=None, help="a Ken graph the problem's Ken paths read")
    st.add_argument("--backend", choices=["z3", "clingo"], default="z3", help="the live solver")
    st.add_argument("--task", default=None, help="task id (default: the problem file's name)")
    st.add_argument("--top", type=count("--top"), default=5, help="hypotheses kept as candidate records")
    common(st)
    ob = isub.add_parser("observe", help="add one observation: 'slow(auth)', 'not slow(auth)', a metric value")
    ob.add_argument("session", help="the session id")
    ob.add_argument("observation", help="what was seen: 'slow(auth)', 'not slow(auth)', or a metric's value")
    common(ob)
    for name, text in (("status", "the records, the focus and the next probe"), ("history", "the trace of each step"),
                       ("undo", "take the last observation back"), ("close", "close the investigation")):
        p = isub.add_parser(name, help=text)
        p.add_argument("session", help="the session id")
        common(p)


def main_investigate(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from cda.investigation.session import Investigation

    command = args.investigate_command
    inv = None
    try:
        if command == "start":
            if not args.problem.exists():
                raise CDAError(f"{args.problem}: no such file")
            inv = Investigation.start(args.problem, db=args.db, backend=args.backend, ken=args.ken,
                                      task_id=args.task, top=args.top)
            out.write(json.dumps({"session_id": inv.session_id}) + "\n" if args.json else inv.session_id + "\n")
            return EXIT_OK
        inv = Investigation.open(args.session, args.db, read_only=command in ("status", "history"))
        if command == "observe":
            inv.observe(args.observation)
        elif command == "undo":
            inv.undo()
        elif command == "close":
            inv.close()
        elif command == "history":
            steps = inv.history()
            if args.json:
                out.write(json.dumps([{"step": s.step, "kind": s.kind, "observation": s.observation,
                                       "undoes": s.undoes, "trace": s.trace, "at_utc": s.at_utc} for s in steps],
                                     sort_keys=True) + "\n")
            else:
                for s in steps:
                    what = s.observation or (f"step {s.undoes}" if s.undoes is not None else "")
                    ex = s.trace.get("execute", {})
                    tail = (f" -> {ex.get('selected')} next probe {ex.get('next_probe')}" if ex
                            else " -> conflict" if not s.trace.get("integrate", {}).get("consistent", True) else "")
                    out.write(f"{s.step:>3} {s.kind:<8} {what}{tail}\n")
            return EXIT_OK
        memory = inv.status()
        if args.json:
            out.write(memory.model_dump_json() + "\n")
        else:
            out.write(render_status(memory))
        return EXIT_OK
    except CDAError as exc:
        err.write(exc.render() + "\n")
        return EXIT_BAD_INPUT
    finally:
        if inv is not None:
            inv.release()


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
