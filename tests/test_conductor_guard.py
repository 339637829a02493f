"""The guardian as a conductor tool (``cda.guard``, the operation ``guard.evaluate`` at the
conductor's door; docs/conductor.md): a plan asks it about a proposed action, its APPROVE, REJECT
or ESCALATE is the obligation's result, and the gate decides who may ask — a caller that may not
name the guardian's files is refused, and nothing is decided or recorded for it.

Through real doors: ``cda conduct`` (the local user), and ``cda mcp`` over stdio with the SDK's own
client (the local user under ``--allow-root``)."""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import sqlite3
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from cda.actions.receipts import ReceiptLog
from cda.cli.main import main
from tests.conftest import EXAMPLES, ROOT

GUARDIAN = EXAMPLES / "guardian"


def _cda(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def _guardian_file(folder: Path) -> Path:
    ledger = folder / "guardian.db"
    code, _, err = _cda("task", "budget", "agent-7", "2000", "--store", str(ledger))
    assert code == 0, err
    return ledger


def _decisions(ledger: Path) -> list[tuple[str, str]]:
    with sqlite3.connect(f"file:{ledger}?mode=ro", uri=True) as db:
        return [(row[0], row[1]) for row in db.execute("SELECT decision, reason FROM decisions ORDER BY rowid")]


@pytest.mark.parametrize("action,decision,reason", [
    ("launch.json", "APPROVE", "policy_clear"),
    ("delete.json", "REJECT", "policy:no_prod_delete"),
    ("big_launch.json", "ESCALATE", "budget_exceeded"),
])
def test_cda_conduct_asks_the_guardian_and_its_verdict_is_the_obligation_s_result(
        tmp_path: Path, action: str, decision: str, reason: str) -> None:
    ledger = _guardian_file(tmp_path)
    utterance = f"guard {GUARDIAN / action} {GUARDIAN / 'policies.toml'} {ledger}"
    code, out, err = _cda("conduct", utterance, "--db", str(tmp_path / "ir.sqlite"), "--json")
    assert code == 0, err
    answer = json.loads(out)
    [obligation] = answer["obligations"]
    assert obligation["type"] == "guard" and obligation["status"] == "resolved", obligation
    [run] = answer["tool_runs"]
    assert run["tool"] == "cda.guard" and run["status"] == "ok", run
    assert (run["outputs"]["decision"], run["outputs"]["reason"]) == (decision, reason)
    stated = {a["key"]: a["value"] for a in answer["assertions"] if a["obligation_id"] == obligation["id"]}
    assert stated["decision"] == decision and f'"decision": "{decision}"' in answer["answer"]
    # the guardian recorded the decision in its file, as `cda guard` would, and an ESCALATE is held for a person
    assert _decisions(ledger) == [(decision, reason)]
    held = run["outputs"]["escalation"]
    if decision == "ESCALATE":
        assert held == {"id": "esc-1", "state": "open"}
        code, out, _ = _cda("guard", "escalations", "--ledger", str(ledger), "--json")
        assert code == 0 and "esc-1" in out
    else:
        assert held is None
    # the same verdict as the guardian's own door gives
    code, out, _ = _cda("guard", str(GUARDIAN / action), "--policies", str(GUARDIAN / "policies.toml"),
                        "--ledger", str(ledger), "--json")
    assert json.loads(out)["decision"] == decision


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_caller_the_gate_refuses_gets_no_decision_from_the_conductor_s_guardian(tmp_path: Path) -> None:
    """``cda mcp --allow-root ROOT``: its caller names files under ROOT only. A conductor request
    whose guardian file lies outside is refused by the gate at the tool's call (the guardian decides
    nothing, its file is not touched); the same request with the file inside is answered."""
    pytest.importorskip("mcp", reason="the MCP SDK is in the test extra (cda[mcp])")
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    root, outside = tmp_path / "root", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    for name in ("launch.json", "policies.toml"):
        shutil.copy(GUARDIAN / name, root / name)
    far, near = _guardian_file(outside), _guardian_file(root)
    before = _digest(far)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "CDA_KEY_DIR": str(tmp_path / "keys")}
    server = StdioServerParameters(command=sys.executable, env=env, cwd=str(root),
                                   args=["-m", "cda", "mcp", "--allow-root", str(root), "--out", str(tmp_path / "out")])

    async def ask() -> list[Any]:
        async with Client(server, read_timeout_seconds=120) as client:
            return [await client.call_tool("conduct_request", {
                "utterance": f"guard {root / 'launch.json'} {root / 'policies.toml'} {ledger}"}) for ledger in (far, near)]

    refused, answered = anyio.run(ask)
    text = json.dumps(refused.structured_content) if refused.structured_content else refused.content[0].text
    assert "cda.guard" in text and ("outside" in text or "not allowed" in text), text
    assert '"decision": "APPROVE"' not in text
    assert _digest(far) == before and _decisions(far) == []  # nothing decided, the file untouched
    log = ReceiptLog(tmp_path / "out" / "gate.sqlite")
    try:
        refusals = [e.receipt for e in log.entries("gate") if e.receipt.name in ("gate.refused", "access.refused")]
    finally:
        log.close()
    # the refusal is a receipt: the access check the gate runs the conductor under refused the file
    # before the guardian's tool was called
    assert refusals and all("outside the allowed roots" in json.dumps(r.result) for r in refusals), refusals
    assert not answered.is_error, answered.content
    assert answered.structured_content["tool_runs"][0]["outputs"]["decision"] == "APPROVE"
    assert _decisions(near) == [("APPROVE", "policy_clear")]
