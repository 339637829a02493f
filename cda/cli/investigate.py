"""``cda investigate ...``: an analyst's investigation, one command per step, kept in SQLite.

``start PROBLEM`` prints the new session's id (``{"session_id": …}`` with ``--json``);
``observe ID 'slow(auth)'`` (or ``'not slow(auth)'``, or ``'value(metric:m) = 300 ms'``) takes
one step; ``revise ID 'fact depends(a, b)' --retract 'LINE'`` revises the model; ``status ID``
prints the records, the focus and the next probe (``--json``: the memory block and the trace
record); ``history ID`` every step with its author, and the notes; ``undo ID [STEP]`` takes a
step back; ``note ID STEP TEXT`` annotates one; ``close ID`` ends it. ``--as NAME`` names the
author. Each command reopens the session from the store, so a killed process loses at most the
step it was computing.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any, TextIO

from cda.errors import CDAError
from cda.files import is_stdin
from cda.terminal_text import for_terminal

__all__ = ["options", "present", "render_status"]

DEFAULT_DB = Path("investigations.sqlite")
EXIT_OK, EXIT_BAD_INPUT = 0, 2


def options(p: argparse.ArgumentParser, op: Any) -> dict[str, Any]:
    """Every ``cda investigate`` command's own options: the session store and ``--json``."""
    p.add_argument("--db", type=Path, default=DEFAULT_DB, help=f"the session store (default {DEFAULT_DB})")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    return {"metavars": {"path": "PROBLEM", "ken": "FILE", "add": "STATEMENT"},
            "optional": ("step",) if op.name == "investigate.undo" else ()}


def present(op: Any, args: argparse.Namespace, out: TextIO, err: TextIO, inp: TextIO | None = None) -> int:
    from cda.cli.call import LocalEnv, call_local
    from cda.cli.generate import params_of
    from cda.operations.investigate import desk_for

    try:
        params = params_of(op, args)
        if op.name == "investigate.start" and is_stdin(args.path):  # `-`: the problem's text on standard input
            from cda.files import read_text

            params = {**{k: v for k, v in params.items() if k != "path"}, "dsl": read_text(Path(args.path))}
        elif op.name == "investigate.start" and not Path(args.path).exists():
            raise CDAError(f"{args.path}: no such file")
        result = call_local(op, params, LocalEnv(investigations=desk_for(args.db, sessions_file=True)))
    except CDAError as exc:
        err.write(exc.render() + "\n")
        return EXIT_BAD_INPUT
    if op.name == "investigate.start":
        out.write(json.dumps({"session_id": result.session_id}) + "\n" if args.json
                  else for_terminal(result.session_id, keep="") + "\n")
    elif op.name == "investigate.share":
        out.write(result.model_dump_json() + "\n" if args.json
                  else for_terminal(f"owner {result.owner}; members: {', '.join(result.members) or 'none'}", keep="")
                  + "\n")
    elif op.name in ("investigate.history", "investigate.note"):
        if args.json:
            out.write(result.model_dump_json() + "\n")
        else:
            out.write(render_history(result))
    elif args.json:  # observe, revise, undo, close, status: the memory block, its trace record beside it
        block = result.memory.model_dump(mode="json")
        block["trace_record"] = None if result.trace is None else result.trace.model_dump(mode="json")
        out.write(json.dumps(block) + "\n")
    else:
        out.write(render_status(result.memory))
    return EXIT_OK


def _shown(lines: list[str]) -> str:
    """The lines as text for a person: each is one line, so a newline, an escape sequence or a bidi
    override inside it (a note, a reason, an author a remote ToolBus caller wrote) is shown escaped
    (:func:`~cda.terminal_text.for_terminal`) and cannot fake another line or drive the terminal."""
    return "".join(for_terminal(line, keep="\t") + "\n" for line in lines)


def render_history(result: Any) -> str:
    """Every step (who took it, what it did, where it left the hypotheses) and the notes under their step."""
    lines = []
    notes: dict[int, list[Any]] = {}
    for n in result.notes:
        notes.setdefault(n.step, []).append(n)
    for s in result.steps:
        if s.kind == "revise" and s.revision:
            what = "; ".join([*s.revision.get("add", []), *(f"retract {r}" for r in s.revision.get("retract", []))])
        else:
            what = s.observation or (f"step {s.undoes}" if s.undoes is not None else "")
        ex = s.trace.get("execute", {})
        tail = (f" -> {ex.get('selected')} next probe {ex.get('next_probe')}" if ex
                else " -> conflict" if not s.trace.get("integrate", {}).get("consistent", True) else "")
        by = f" [{s.author}]" if s.author else ""
        lines.append(f"{s.step:>3} {s.kind:<8}{by}{' ' + what if what else ''}{tail}".rstrip())
        if s.reason:
            lines.append(f"      why: {s.reason}")
        lines.extend(f"      note [{n.author}]: {n.text}" for n in notes.get(s.step, []))
    return _shown(lines)


def render_status(memory: Any) -> str:
    """The memory block for a person: focus, hypotheses with their evidence, the next probe."""
    lines = [f"investigation {memory.session_id} (task {memory.task_id}), step {memory.step}"
             + (" — closed" if memory.closed else "")]
    if memory.author:
        lines[0] += f", by {memory.author}"
    if memory.observations:
        lines.append("observed: " + "; ".join(memory.observations))
    if memory.change is not None and (memory.change["appeared"] or memory.change["vanished"]):
        c = memory.change
        lines.append(f"change: {c['before']} -> {c['after']} hypotheses"
                     + (f"; appeared: {', '.join(c['appeared'])}" if c["appeared"] else "")
                     + (f"; vanished: {', '.join(c['vanished'])}" if c["vanished"] else ""))
    if memory.conflict is not None:
        lines.append("CONFLICT — the observations contradict the hard clauses; minimal conflict sets:")
        lines.extend("  " + " & ".join(core) for core in memory.conflict.cores)
        lines.append("two ways out:")
        lines.extend("  " + way for way in memory.ways_out)
        return _shown(lines)
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
    return _shown(lines)
