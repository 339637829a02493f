"""The conductor calling a user's side-effecting MCP tool through ``cda guard proxy``
(docs/conductor.md, "What it does not do": a side-effecting tool should go through the guardian
first; docs/guardian.md, "The gateway"). Real parts: ``cda conduct`` with a registry whose MCP
server is the gateway (started over stdio by the conductor), the gateway starting the user's
server (the SDK's MCPServer, writing each page to its own file), the guardian file with a budget
and a signer, and a person's ``cda guard resolve``. What reached the user's server is read from
its own file: an APPROVE pages once, a REJECT and an ESCALATE never, an approved escalation once."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp", reason="the MCP SDK is in the test extra (cda[mcp])")

from cda.cli.main import main  # noqa: E402
from tests.test_conductor_user_tools import OPS_SERVER, _cda, _lines  # noqa: E402

POLICIES = """
[facts]
pages = { action_type = ["page_oncall"] }
touches_prod = { resource = ["services/prod"] }

[[policy]]
id = "no_paging_prod"
dsl = "not (pages and touches_prod)"

[[tool]]
name = "page_oncall"
cost = 400
resources = ["services/{service}"]

[[tool]]
name = "owner"
cost = "0.25"
"""


def _guard(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out, err)
    return code, out.getvalue(), err.getvalue()


def _registry(folder: Path, keys: Path) -> None:
    """The conductor's registry: the ops server behind the gateway, charged to agent-7. The gateway
    is started with the manifest's env: its receipts are signed with the test's key, not $HOME's."""
    proxy = [sys.executable, "-m", "cda", "guard", "proxy", "--upstream", f"ops={sys.executable} ops_server.py",
             "--agent", "agent-7", "--policies", "policies.toml", "--ledger", "guardian.db"]
    (folder / "tools.toml").write_text(f'''
[[tool]]
name = "ops"
mcp = {{ command = {json.dumps(proxy)}, env = {{ CDA_KEY_DIR = {json.dumps(str(keys))} }}, timeout_s = 120 }}
reliability = "high"
cost = "low"
latency_ms = 100

[tool.each.page_oncall]
satisfies = ["page"]
''', encoding="utf-8")


def _conduct(folder: Path, obligations: list[dict[str, Any]], name: str) -> tuple[int, dict[str, Any], str]:
    (folder / name).write_text(json.dumps({"obligations": obligations}), encoding="utf-8")
    code, out, err = _cda(["conduct", "--obligations", name, "--db", "ir.sqlite", "--registry", "tools.toml",
                           "--json"], folder)
    assert out, err
    return code, json.loads(out), err


@pytest.mark.slow
def test_the_conductor_pages_through_the_guardian_once_per_approval(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path
    keys = tmp_path / "keys"
    monkeypatch.setenv("CDA_KEY_DIR", str(keys))
    (folder / "ops_server.py").write_text(OPS_SERVER, encoding="utf-8")
    (folder / "policies.toml").write_text(POLICIES, encoding="utf-8")
    assert _guard("task", "budget", "agent-7", "500", "--store", str(folder / "guardian.db"))[0] == 0
    assert _guard("task", "add-signer", "alice", "--store", str(folder / "guardian.db"))[0] == 0
    _registry(folder, keys)

    code, trace, err = _conduct(folder, [
        {"type": "owner", "inputs": {"service": "api"}},                              # read-only: APPROVE, 0.25
        {"type": "page", "inputs": {"service": "api", "message": "disk full"}},       # APPROVE: 400 reserved, paged
        {"type": "page", "inputs": {"service": "prod", "message": "disk full"}},      # REJECT: no_paging_prod
        {"type": "page", "inputs": {"service": "db", "message": "disk full"}},        # 400 > 99.75 left: ESCALATE
    ], "first.json")
    runs = {r["obligation_id"]: (r["tool"], r["status"]) for r in trace["tool_runs"]}
    assert runs == {1: ("ops.owner", "ok"), 2: ("ops.page_oncall", "ok"), 3: ("ops.page_oncall", "error"),
                    4: ("ops.page_oncall", "error")}, err
    details = {r["obligation_id"]: r["detail"] for r in trace["tool_runs"]}
    assert "REJECT" in details[3] and "no_paging_prod" in details[3]
    assert "ESCALATE" in details[4] and "esc-1" in details[4]
    assert _lines(folder / "pages.log") == ["api: disk full"]  # the REJECT and the ESCALATE paged no one

    code, out, err = _guard("guard", "resolve", "esc-1", "--approve", "--by", "alice", "--reason",
                            "db pager signed off", "--ledger", str(folder / "guardian.db"))
    assert code == 0, out + err
    page_db = [{"type": "page", "inputs": {"service": "db", "message": "disk full"}}]
    code, trace, err = _conduct(folder, page_db, "again.json")
    assert [(r["tool"], r["status"]) for r in trace["tool_runs"]] == [("ops.page_oncall", "ok")], err
    assert _lines(folder / "pages.log") == ["api: disk full", "db: disk full"]  # the approved call, once
    code, trace, err = _conduct(folder, page_db, "third.json")  # the approval is used: decided anew
    [run] = trace["tool_runs"]
    assert run["status"] == "error" and "ESCALATE" in run["detail"] and "esc-2" in run["detail"]
    assert _lines(folder / "pages.log") == ["api: disk full", "db: disk full"]

    code, out, err = _guard("guard", "export", "--ledger", str(folder / "guardian.db"))
    assert code == 0, err
    records = [json.loads(line) for line in out.splitlines()]
    assert [(r["what"], r["status"]) for r in records if r["kind"] == "decision"] == [
        ("APPROVE", "policy_clear"), ("APPROVE", "policy_clear"), ("REJECT", "policy:no_paging_prod"),
        ("ESCALATE", "budget_exceeded"), ("ESCALATE", "budget_exceeded")]
    assert [(r["id"].split(":")[0], r["amount"], r["status"]) for r in records if r["kind"] == "ledger"] == [
        ("call", "0.25", "settled"), ("call", "400", "settled"), ("esc", "400", "settled")]  # 800.25 of 500: consented
    assert [(r["id"], r["what"]) for r in records if r["kind"] == "escalation"] == [("esc-1", "used"), ("esc-2", "open")]
    assert (folder / "guardian.db.receipts.sqlite").is_file()  # every decision and upstream call, receipted
