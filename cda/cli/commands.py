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

__all__ = ["Command", "GROUPS", "JOINED", "OPERATION_COMMANDS", "presenter"]


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
    ("guard", "escalations"): Command("guard.escalations", "the calls the guardian escalated, for a person to "
                                      "resolve (docs/guardian.md)", "cda.cli.guard:present_escalations",
                                      "cda.cli.guard:escalations_options"),
    ("guard", "resolve"): Command("guard.resolve", "a person's signed decision on an escalation: --approve "
                                  "(the same call goes through once) or --reject", "cda.cli.guard:present_resolve",
                                  "cda.cli.guard:resolve_options"),
    ("guard", "export"): Command("guard.export", "the guardian file's ledger, decisions and escalations with "
                                 "their evidence and receipt ids (--format jsonl|csv)", "cda.cli.guard:present_export",
                                 "cda.cli.guard:escalations_options"),
    ("check-report",): Command("report.check", "hold a draft epistemic report to the abstain gate's rules "
                               "(docs/actions.md)", "cda.cli.report:present_check_report", "cda.cli.report:report_options"),
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
    ("investigate", "revise"): Command("investigate.revise", "revise the model: add statements, --retract lines; "
                                       "solved again", "cda.cli.investigate:present", "cda.cli.investigate:options"),
    ("investigate", "undo"): Command("investigate.undo", "take a step back (an observation or a revision; default "
                                     "the last)", "cda.cli.investigate:present", "cda.cli.investigate:options"),
    ("investigate", "note"): Command("investigate.note", "attach a note to a step", "cda.cli.investigate:present",
                                     "cda.cli.investigate:options"),
    ("investigate", "share"): Command("investigate.share", "let another principal take steps (a server's sessions)",
                                      "cda.cli.investigate:present", "cda.cli.investigate:options"),
    ("investigate", "close"): Command("investigate.close", "close the investigation", "cda.cli.investigate:present",
                                      "cda.cli.investigate:options"),
    ("policy", "authorize"): Command("policy.authorize", "Allow or Deny one request, with the determining policies "
                                     "and errors", "cda.cli.policy:present_authorize", "cda.cli.policy:authorize_options"),
    ("policy", "test"): Command("policy.test", "run Cedar integration-test JSON files and print agreement",
                                "cda.cli.policy:present_test", "cda.cli.policy:test_options"),
    ("policy", "analyze"): Command("policy.analyze", "decide a property over every request of an environment",
                                   "cda.cli.policy:present_analyze", "cda.cli.policy:analyze_options"),
    ("reflect", "approve"): Command("reflect.approve", "issue a reflection approval: a token that lets a reviewer "
                                    "read one action's raw trace", "cda.cli.reflect:present_approve",
                                    "cda.cli.reflect:approve_options"),
}

GROUPS: dict[str, str] = {
    "investigate": "an investigation over time: observations, records, next probe",
    "reflect": "reflection: approvals to read an action's raw trace",
    "policy": "Cedar policies: authorize a request, run Cedar tests, analyze (docs/policy.md)",
}
"""The commands with subcommands, and their one-line help. A two-word command whose first word
is a command of its own (``cda guard resolve`` beside ``cda guard ACTION``) is not a group: it is
one command named by both words (:data:`JOINED`)."""

JOINED: frozenset[tuple[str, str]] = frozenset(
    {(w[0], w[1]) for w in OPERATION_COMMANDS if len(w) == 2 and w[0] not in GROUPS} | {("guard", "proxy")})
"""The two-word commands read as one word ``"guard resolve"`` (``cda guard proxy`` is no operation:
it is a server, as ``cda mcp`` is)."""


def presenter(spec: str) -> Any:
    """The function a ``module:function`` spec names (imported now)."""
    module, _, name = spec.partition(":")
    return getattr(importlib.import_module(module), name)
