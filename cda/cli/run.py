"""``cda run inputs.json``: run a CDA Action, stream its events, write its artifacts.

On a terminal the events drive a one-line progress bar on stderr; with ``--json`` every event
is printed as one JSON line on stdout (the last one is the terminal event, carrying the outputs).
Without ``--json`` the boundary summary is printed at the end.

Exit codes: 0 completed (or abstained), 2 bad input (the inputs file, the DSL in it, a Ken
file), 3 partial (budget) or escalated, 1 failed for another reason (among them a receipt log
changed during the run: the terminal event is ``action_failed`` with ``AuditLogTampered``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, TextIO

from cda.adapters.action_entry import AuditLogError
from cda.contracts.events import ActionEvent
from cda.errors import CDAError
from cda.terminal_text import for_terminal

__all__ = ["main_run", "present_run", "run_options"]

_BAR = 24


def _progress_printer(err: TextIO) -> object:
    def show(event: ActionEvent) -> None:
        if event.type == "action_progress":
            filled = int(event.fraction * _BAR)  # type: ignore[union-attr]
            bar = "#" * filled + "-" * (_BAR - filled)
            said = for_terminal(event.message, keep="")[:50]  # type: ignore[union-attr]  # it may quote the input
            err.write(f"\r[{bar}] {event.phase:<10} {said:<50}")  # type: ignore[union-attr]
            err.flush()
        elif event.type in ("action_completed", "action_partial", "action_failed"):
            err.write("\r" + " " * (_BAR + 66) + "\r")
            err.flush()

    return show


def _make_out_dir(out_dir: Path) -> None:
    """Create ``--out`` (and its parents) before anything runs, or say why it cannot be a folder:
    a file of that name, a parent that is a file, no permission."""
    if out_dir.exists() and not out_dir.is_dir():
        raise CDAError(f"--out {out_dir}: a file of that name exists; give a folder (it is created if missing)")
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise CDAError(f"--out {out_dir}: cannot create the folder: {exc.strerror or exc}") from None


def run_options(p: Any, op: Any) -> dict[str, Any]:
    p.add_argument("--out", type=Path, default=None, help="folder for artifacts and receipts.sqlite")
    p.add_argument("--json", action="store_true", help="print every event as one JSON line")
    return {"metavars": {"path": "INPUTS"}}


def present_run(op: Any, args: Any, out: TextIO, err: TextIO, inp: TextIO | None = None) -> int:
    trace: dict[str, Any] = {}
    if getattr(args, "focus", None) is not None:
        trace["focus"] = args.focus
    if getattr(args, "invariants", None):
        trace["invariants"] = list(args.invariants)
    return main_run(Path(args.path), args.out, args.json, out, err, trace)


def main_run(path: Path, out_dir: Path | None, as_json: bool, out: TextIO, err: TextIO,
             trace: dict[str, Any] | None = None) -> int:
    """The ``cda run`` command (the ``actions.run`` operation, for the local user); the exit code.
    ``trace``: ``focus`` and ``invariants`` for the run's trace record (the operation's own params)."""
    from cda.cli.call import LocalEnv, call_local

    if out_dir is not None:
        try:
            _make_out_dir(out_dir)
        except CDAError as exc:
            err.write(exc.render() + "\n")
            return 2
    subscribers = []
    if as_json:
        subscribers.append(lambda e: (out.write(json.dumps(e.model_dump(mode="json"), sort_keys=True) + "\n"),
                                      out.flush()))
    elif err.isatty():
        subscribers.append(_progress_printer(err))  # type: ignore[arg-type]
    env = LocalEnv(out_dir=out_dir, subscribers=subscribers, runs=[])
    try:
        call_local("actions.run", {"path": str(path), **(trace or {})}, env)
    except AuditLogError as exc:  # the log was rewritten behind the run: loud, and not "bad input"
        err.write(exc.render() + "\n")
        return 1
    except CDAError as exc:  # the inputs file, a Ken file that cannot be read, a receipt DB that is not one
        err.write(exc.render() + "\n")
        return 2
    run = env.runs[-1]
    outputs = run.outputs
    if not as_json:
        if run.artifact_dir is not None and (run.artifact_dir / "summary.md").exists():
            out.write(for_terminal((run.artifact_dir / "summary.md").read_text(encoding="utf-8")))
        else:
            for event in reversed(run.events):
                if event.type == "action_checkpoint" and event.kind == "boundary_summary":  # type: ignore[union-attr]
                    out.write(for_terminal(str(event.payload.get("text", ""))))  # type: ignore[union-attr]
                    break
        out.write(f"\nstatus: {outputs.status}   action: {outputs.action_id}   receipts head: {run.receipts_head}\n")
        if run.artifact_dir is not None:
            out.write(f"artifacts: {run.artifact_dir}\n")
    if outputs.status == "failed":
        if not as_json:
            err.write(for_terminal("\n".join(outputs.caveats)) + "\n")
        failed = run.events[-1]
        bad_input = getattr(failed, "error_type", "") in {"DSLSyntaxError", "DSLTypeError", "UnitError", "KenError",
                                                         "DSLError", "BackendUnsupported", "OptionError"}
        return 2 if bad_input else 1
    return 0 if outputs.status in ("completed", "abstained") else 3
