"""The CLI's table of contents for the commands that are operations, and how each one is shown.

``cda WORDS …`` runs the operation of :data:`OPERATION_COMMANDS` for the local user
(:data:`~cda.operations.principals.LOCAL_USER`) through the gate: its arguments are generated from
the operation (:mod:`cda.cli.generate`), its own options (``--json``, ``--format``, the files a
command keeps, like ``--db``) are added by its presenter, which also turns the result into text,
JSON and an exit code. The table holds names and one-line help only, so ``cda --help`` imports no
operation (tests/test_startup_imports.py); ``tests/test_operations.py`` checks it against the
registry's CLI door.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any

__all__ = ["Command", "OPERATION_COMMANDS", "GROUPS", "presenter"]


@dataclass(frozen=True)
class Command:
    operation: str
    help: str
    presenter: str  # "module:function" taking (op, args, out, err, inp) -> exit code
    extras: str = ""  # "module:function" adding the command's own options to its parser


OPERATION_COMMANDS: dict[tuple[str, ...], Command] = {
    ("solve",): Command("solve", "rank explanations, check claims, propose next tests", "cda.cli.ci:present_solve",
                        "cda.cli.ci:solve_options"),
    ("check",): Command("check", "parse and type-check only", "cda.cli.ci:present_check", "cda.cli.ci:check_options"),
    ("prove",): Command("prove", "prove or refute first-order claims (a .fol file; see docs/fol.md)",
                        "cda.cli.fol:present_prove", "cda.cli.fol:prove_options"),
    ("diagnose",): Command("diagnose", "minimal diagnoses of a circuit (.bench + observations, or mbd-mobs .wcnf.gz)",
                           "cda.cli.diagnose:present_diagnose", "cda.cli.diagnose:diagnose_options"),
    ("probe",): Command("probe", "next-best net to measure (expected information gain), or a simulated probing loop",
                        "cda.cli.diagnose:present_probe", "cda.cli.diagnose:probe_options"),
    ("run",): Command("actions.run", "run a CDA Action from inputs.json: events, artifacts, receipts",
                      "cda.cli.run:present_run", "cda.cli.run:run_options"),
    ("guard",): Command("guard.evaluate", "the guardian: APPROVE / REJECT / ESCALATE one proposed action "
                        "(docs/guardian.md)", "cda.cli.guard:present_guard", "cda.cli.guard:guard_options"),
    ("conduct",): Command("conduct.request", "the conductor: a request -> obligations -> tools -> verified reply "
                          "(docs/conductor.md)", "cda.cli.conduct:present_conduct", "cda.cli.conduct:conduct_options"),
    ("investigate", "start"): Command("investigate.start", "start an investigation of a .cda problem; prints its id",
                                      "cda.cli.investigate:present", "cda.cli.investigate:options"),
    ("investigate", "observe"): Command("investigate.observe", "add one observation: 'slow(auth)', 'not slow(auth)', "
                                        "a metric value", "cda.cli.investigate:present", "cda.cli.investigate:options"),
    ("investigate", "status"): Command("investigate.status", "the records, the focus and the next probe",
                                       "cda.cli.investigate:present", "cda.cli.investigate:options"),
    ("investigate", "history"): Command("investigate.history", "the trace of each step", "cda.cli.investigate:present",
                                        "cda.cli.investigate:options"),
    ("investigate", "undo"): Command("investigate.undo", "take the last observation back",
                                     "cda.cli.investigate:present", "cda.cli.investigate:options"),
    ("investigate", "close"): Command("investigate.close", "close the investigation", "cda.cli.investigate:present",
                                      "cda.cli.investigate:options"),
    ("reflect", "approve"): Command("reflect.approve", "issue a reflection approval: a token that lets a reviewer "
                                    "read one action's raw trace", "cda.cli.reflect:present_approve",
                                    "cda.cli.reflect:approve_options"),
}

GROUPS: dict[str, str] = {
    "investigate": "an investigation over time: observations, records, next probe",
    "reflect": "reflection: approvals to read an action's raw trace",
}
"""The commands with subcommands, and their one-line help."""


def presenter(spec: str) -> Any:
    """The function a ``module:function`` spec names (imported now)."""
    module, _, name = spec.partition(":")
    return getattr(importlib.import_module(module), name)
