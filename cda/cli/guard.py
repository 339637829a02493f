"""``cda guard ACTION.json --policies P --ledger L [--sim MODEL] [--json]``: the guardian's gate
on one proposed action, from the command line (docs/guardian.md).

Exit status: 0 APPROVE, 1 REJECT, 4 ESCALATE (a malformed action is a decision: REJECT
``malformed_action``, exit 1); 2 when the command cannot decide (a missing or unreadable file, a
bad policy store, a bad option), with one clear line on stderr and never a traceback.

Each decision is recorded in the guardian file given as ``--ledger`` (its ``decisions`` table,
with the action's agent, task id, cost and currency): ``cda task execute`` accepts only the latest
decision the guardian recorded there for the action, made under the policy store the file pins.
With ``--sim``, each simulation that ran is also stored as the seed's CAUSAL_HYPOTHESIS (the
``causal_hypothesis`` table, id ``hyp-<sim_id>``).

This module is imported when ``cda`` builds its parser, so it imports nothing heavy at the top.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, TextIO

__all__ = ["guard_options", "present_guard"]

EXIT_BAD_INPUT = 2


def guard_options(p: Any, op: Any) -> dict[str, Any]:
    """``cda guard``'s own options: the guardian's files (the operation's door facilities)."""
    p.add_argument("--policies", type=Path, required=True, help="the policy store (TOML)")
    p.add_argument("--ledger", type=Path, required=True, help="the guardian's SQLite file holding the CFO ledger")
    p.add_argument("--receipts", type=Path, default=None, help="append the decision's receipt to this receipt log")
    p.add_argument("--json", action="store_true", help="print the decision record as one JSON object")
    return {"metavars": {"action_path": "ACTION", "sim": "MODEL"}}


def _render(record: Any) -> str:
    """The decision in a few lines: the decision and reason, then the details that say why."""
    out = [f"{record.decision.value} {record.reason}"]
    details = record.details
    if record.reason == "malformed_action":
        out.append(f"  at {details['path']}: {details['message']}")
    elif "facts" in details:
        if details.get("problem"):
            out.append(f"  {details['problem']}")
        for fact in details["facts"]:
            out.append(f"  fact {fact['fact']} = {fact['value']}  ({', '.join(fact['paths'])})")
    else:
        money = {"cost", "remaining"}
        for key in ("cost", "remaining", "risk", "threshold", "sim_id", "soft_score", "soft_violated", "error"):
            value = details.get(key)
            if value is not None and value != []:
                shown = ", ".join(value) if isinstance(value, list) else value
                out.append(f"  {key}: {shown}{' ' + details['currency'] if key in money else ''}")
    out.append(f"  receipt: {record.receipt}")
    return "\n".join(out) + "\n"


def present_guard(op: Any, args: argparse.Namespace, out: TextIO, err: TextIO, inp: TextIO | None = None) -> int:
    """Run ``cda guard`` with parsed ``args``; returns the exit status."""
    from cda.cli.call import LocalEnv, call_local
    from cda.cli.generate import params_of
    from cda.errors import CDAError
    from cda.guardian.decision import exit_code
    from cda.operations.guard import GuardDesk

    params = params_of(op, args)
    if args.action_path == "-":  # standard input: the action's text (a malformed one is a decision)
        params = {**{k: v for k, v in params.items() if k != "action_path"}, "action": (inp or sys.stdin).read()}
    env = LocalEnv(guardian=GuardDesk(args.policies, args.ledger, args.receipts))
    try:
        record = call_local(op, params, env)
    except CDAError as exc:
        err.write(exc.render() + "\n")
        return EXIT_BAD_INPUT
    out.write(record.model_dump_json() + "\n" if args.json else _render(record))
    return exit_code(record.decision)
