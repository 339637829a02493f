"""``cda guard ACTION.json --policies P --ledger L [--sim MODEL] [--json]``: the guardian's gate
on one proposed action, from the command line (docs/guardian.md).

Exit status: 0 APPROVE, 1 REJECT, 3 ESCALATE (no verdict here: a person decides) (a malformed action is a decision: REJECT
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
import json
import sys
from pathlib import Path
from typing import Any, TextIO

from cda.terminal_text import for_terminal

__all__ = ["guard_options", "present_guard"]

EXIT_BAD_INPUT = 2


def guard_options(p: Any, op: Any) -> dict[str, Any]:
    """``cda guard``'s own options: the guardian's files (the operation's door facilities)."""
    p.add_argument("--policies", type=Path, required=True, help="the policy store (TOML)")
    p.add_argument("--ledger", type=Path, required=True, help="the guardian's SQLite file holding the CFO ledger")
    p.add_argument("--receipts", type=Path, default=None, help="append the decision's receipt to this receipt log")
    p.add_argument("--json", action="store_true", help="print the decision record as one JSON object")
    return {"metavars": {"action_path": "ACTION", "sim": "MODEL"}}


def present_guard(op: Any, args: argparse.Namespace, out: TextIO, err: TextIO, inp: TextIO | None = None) -> int:
    """Run ``cda guard`` with parsed ``args``; returns the exit status."""
    from cda.cli.call import LocalEnv, call_local
    from cda.cli.generate import params_of
    from cda.errors import CDAError
    from cda.guardian.decision import exit_code, render
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
    if args.json:
        out.write(record.model_dump_json(exclude={"escalation"} if record.escalation is None else None) + "\n")
    else:
        out.write(for_terminal(render(record) + _held(record.escalation)))
    return exit_code(record.decision)


def _held(e: Any) -> str:
    """Where an ESCALATE waits for a person (``cda guard resolve ID``; ``cda guard escalations`` lists it)."""
    if e is None:
        return ""
    again = "" if e.new else ", as when this action was escalated before"
    then = "; a person resolves it: cda guard resolve " + e.escalation_id if e.state == "open" else ""
    return f"  escalation: {e.escalation_id} {e.state}{again}{then}\n"


def _guardian_files(p: Any, policies: bool = False) -> None:
    if policies:
        p.add_argument("--policies", type=Path, required=True, help="the policy store (TOML)")
    p.add_argument("--ledger", type=Path, required=True, help="the guardian's SQLite file (its escalations)")
    p.add_argument("--json", action="store_true", help="print one JSON object")


def escalations_options(p: Any, op: Any) -> dict[str, Any]:
    """``cda guard escalations``'s own options: the guardian file."""
    _guardian_files(p)
    return {}


def resolve_options(p: Any, op: Any) -> dict[str, Any]:
    """``cda guard resolve``'s own options: --approve or --reject, and the guardian file."""
    choice = p.add_mutually_exclusive_group(required=True)
    choice.add_argument("--approve", dest="decision", action="store_const", const="approve",
                        help="the escalated call goes through once (its cost is reserved now)")
    choice.add_argument("--reject", dest="decision", action="store_const", const="reject",
                        help="the escalated call is refused")
    _guardian_files(p)
    return {"metavars": {"escalation_id": "ID", "by": "SIGNER", "by_key": "FILE"}}


def _show(e: dict[str, Any]) -> str:
    args = ", ".join(f"{k}={json.dumps(v)}" for k, v in sorted(e["arguments"].items()))
    line = f"{e['escalation_id']}  {e['state']:<8} {e['agent_id']} -> {e['tool_id']}({args})  {e['reason']}  " \
           f"{e['cost']} {e['currency']}"
    res = e.get("resolution")
    if res:
        line += f"\n    {res['decision'].removesuffix('e')}ed by {res['by']}: {res['reason']}" + (
            f" (until {res['expires_at']}; {e['tx_id']})" if res["decision"] == "approve" else "")
    if e.get("used_by"):
        line += f"\n    used by {e['used_by']}"
    return line + "\n"


def _present_list(op: Any, args: argparse.Namespace, out: TextIO, err: TextIO, params: dict[str, Any]) -> int:
    from cda.cli.call import LocalEnv, call_local
    from cda.errors import CDAError
    from cda.operations.base import OperationError
    from cda.operations.gate import Refused
    from cda.operations.guard import GuardDesk

    env = LocalEnv(guardian=GuardDesk(Path("-"), args.ledger))
    try:
        found = call_local(op, params, env)
    except (OperationError, Refused) as exc:  # the gate's refusal (its own proposal) is a refusal too
        err.write(for_terminal(f"cda: refused: {exc}") + "\n")
        return 1
    except CDAError as exc:
        err.write(exc.render() + "\n")
        return EXIT_BAD_INPUT
    if args.json:
        out.write(found.model_dump_json() + "\n")
    else:
        out.write(for_terminal("".join(_show(e) for e in found.escalations)) or "no escalations\n")
    return 0


def present_escalations(op: Any, args: argparse.Namespace, out: TextIO, err: TextIO, inp: TextIO | None = None) -> int:
    """``cda guard escalations --ledger G [--state S] [--json]``."""
    from cda.cli.generate import params_of

    return _present_list(op, args, out, err, params_of(op, args))


def present_resolve(op: Any, args: argparse.Namespace, out: TextIO, err: TextIO, inp: TextIO | None = None) -> int:
    """``cda guard resolve ID --approve|--reject --by SIGNER --reason TEXT --ledger G``; exit 0
    recorded, 1 refused (resolved already, a signer who speaks for no one, a key not theirs), 2 bad input."""
    from cda.cli.generate import params_of

    return _present_list(op, args, out, err, {**params_of(op, args), "decision": args.decision})


def present_export(op: Any, args: argparse.Namespace, out: TextIO, err: TextIO, inp: TextIO | None = None) -> int:
    """``cda guard export --ledger G [--format jsonl|csv]``: the export on stdout (``--json``: the
    result object, the text in it)."""
    from cda.cli.call import LocalEnv, call_local
    from cda.cli.generate import params_of
    from cda.errors import CDAError
    from cda.operations.guard import GuardDesk

    try:
        done = call_local(op, params_of(op, args), LocalEnv(guardian=GuardDesk(Path("-"), args.ledger)))
    except CDAError as exc:
        err.write(exc.render() + "\n")
        return EXIT_BAD_INPUT
    out.write(done.model_dump_json() + "\n" if args.json else done.text)
    return 0


def add_proxy_parser(sub: Any, seed: Any, count: Any, port: Any, origin: Any, reply_bytes: Any) -> None:
    """``cda guard proxy``: the MCP gateway's options (argparse only; the server is cda.mcp.proxy)."""
    px = sub.add_parser("guard proxy", help="an MCP gateway: upstream MCP servers' tools, each call made only on "
                        "the guardian's APPROVE (docs/guardian.md)")
    px.add_argument("--upstream", action="append", default=[], metavar="NAME=COMMAND",
                    help="an upstream MCP server started as a subprocess over stdio: 'NAME=command args…' "
                    "(repeat for more; with several, tools are listed as NAME.tool)")
    px.add_argument("--upstream-url", action="append", default=[], metavar="NAME=URL",
                    help="an upstream MCP server over streamable HTTP")
    px.add_argument("--agent", required=True, help="the agent whose budget the calls are charged to")
    px.add_argument("--policies", type=Path, required=True, help="the policy store (TOML; [[tool]] rules give costs)")
    px.add_argument("--ledger", type=Path, required=True, help="the guardian's SQLite file (CFO ledger, decisions, "
                    "escalations, tool registry)")
    px.add_argument("--receipts", type=Path, default=None,
                    help="the receipt log of decisions and calls (default: LEDGER.receipts.sqlite)")
    px.add_argument("--fsync", action="store_true", help="fsync every commit of the receipt log too (the guardian "
                    "file's money always is)")
    px.add_argument("--sim", type=Path, default=None, metavar="MODEL", help="a causal model to simulate each call with")
    px.add_argument("--samples", type=count("--samples"), default=1000, help="Monte Carlo samples (default 1000)")
    px.add_argument("--seed", type=seed, default=0, help="the simulation's seed (default 0)")
    px.add_argument("--max-reply-bytes", type=reply_bytes, default=10_000_000, metavar="BYTES",
                    help="the most bytes of one upstream reply (default 10000000); a longer one is refused unread "
                    "and the call answers an error")
    px.add_argument("--http", action="store_true", help="streamable HTTP instead of stdio")
    px.add_argument("--host", default="127.0.0.1", help="with --http: address to listen on (not loopback: --auth)")
    px.add_argument("--port", type=port, default=8000, help="with --http: TCP port (0: any free port)")
    px.add_argument("--auth", type=Path, default=None, help="with --http: JSON file of hashed bearer tokens")
    px.add_argument("--allowed-host", action="append", default=[], metavar="NAME",
                    help="with --http: a further name clients reach it by (Host header)")
    px.add_argument("--cors-origin", action="append", default=[], type=origin,
                    help="with --http: an origin (scheme://host:port) whose pages may call it")
