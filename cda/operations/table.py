"""Who may do what: the operation x principal table of docs/service.md and docs/agents.md, made
from the registry (``tests/test_operations.py`` checks the documents hold this very table)."""

from __future__ import annotations

from cda.operations.registry import Door, Operation, all_operations

__all__ = ["NOTES", "who_may_do_what"]

NOTES = """\
Notes: **files** — the local user names files only under its allowed roots (`cda mcp`: `--allow-root`,
else the client's MCP roots, else the working directory; the CLI: any file it can read); nobody
else names a file on the machine (a path parameter, `ken "…"` anywhere in DSL text, `ken.path`):
they send the content inline. **code** — an Action's `functions` run for the local user at the CLI,
under `cda mcp --allow-code`, and for the internal role on `cda serve --allow-code`; never for a
partner. **egress** — above the door's cap (`--egress-cap`) an `actions.start` waits for an
approver's `actions.approve`; any other call is refused. **endpoints** — an LLM endpoint (an
Action's `llm.base_url`, the conductor's `llm_base_url`) is the CLI user's choice; any other caller
may name only one the operator lists in `CDA_LLM_ENDPOINTS`. **approvals** — `policies.approvals` in a
caller's own inputs count only from an approver; anyone else's are removed with a receipt.
**proposals** — `guard.resolve` is refused to the token whose call proposed the escalation and to a
signer named as its agent: nobody approves their own proposal. Every refusal is a receipt
(`gate.refused`, `gate.approvals_ignored`, `access.refused`).
"""

_DOOR_NAMES = {Door.CLI: "CLI", Door.TOOLBUS: "ToolBus", Door.MCP: "MCP", Door.JOBS: "jobs",
               Door.CONDUCTOR: "conductor"}


_LOCAL_DOORS = {Door.CLI, Door.MCP, Door.JOBS, Door.CONDUCTOR}  # where the caller is the local user
_REMOTE_DOORS = {Door.TOOLBUS, Door.MCP}  # where it is a token's principal (MCP over HTTP with --auth)


def _cell(op: Operation, role: str) -> str:
    if role not in op.roles or not (op.doors & (_LOCAL_DOORS if role == "local" else _REMOTE_DOORS)):
        return "—"
    if op.approves:
        return {"local": "yes (CLI; not MCP)", "partner": "no", "internal": "yes", "approver": "yes"}[role] \
            if role != "partner" else "no (may deny)" if op.name == "actions.approve" else "no"
    notes = []
    if op.needs.files:
        notes.append("files" if role == "local" else "inline")
    if op.needs.code:
        notes.append("code" if role in ("local", "internal") else "no code")
    if op.needs.egress:
        notes.append("egress")
    return "yes" + (f" ({', '.join(notes)})" if notes else "")


def who_may_do_what() -> str:
    """The Markdown table: one row per operation, its doors, and what each role may do."""
    lines = ["| operation | doors | local user | partner | internal | approver |",
             "|---|---|---|---|---|---|"]
    for name, op in sorted(all_operations().items()):
        doors = ", ".join(_DOOR_NAMES[d] for d in Door if d in op.doors)
        cells = " | ".join(_cell(op, role) for role in ("local", "partner", "internal", "approver"))
        lines.append(f"| `{name}` | {doors} | {cells} |")
    return "\n".join(lines) + "\n\n" + NOTES
