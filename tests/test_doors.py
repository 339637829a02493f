"""The products at every door, through the registry: ``guard.evaluate``, ``conduct.request``,
``investigate.*``, ``reflect.approve`` and ``artifacts.get`` on the ToolBus (a real ``cda serve``),
as MCP tools (the SDK's client over stdio) and, for ``reflect approve``, on the command line.

Each answer is checked against the product called directly (the guardian's decision, the
conductor's reply, the artifact files the run wrote, the trace the reflection store keeps), and
the owner-only and internal-only rules are tried from the other side.
"""

from __future__ import annotations

import io
import json
import os
import sys
from decimal import Decimal
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.conftest import EXAMPLES, ROOT
from tests.service_harness import call, example_inputs, follow, serving, toolbus, wait_signed, write_tokens
from tests.test_guard_cli import POLICIES

ACTION = {"action_id": "a1", "agent_id": "agent-7", "tool": {"name": "sql", "version": "1.0"},
          "action_type": "db.read", "resources": ["staging/db"], "cost_estimate": 12.5}


def _guardian(folder: Path) -> tuple[Path, Path]:
    from cda.guardian.ledger import Ledger

    (folder / "policies.toml").write_text(POLICIES, encoding="utf-8")
    ledger = Ledger.open(folder / "guardian.db")
    ledger.set_budget("agent-7", "USD", Decimal(100))
    ledger.close()
    return folder / "policies.toml", folder / "guardian.db"


def _tokens(tmp_path: Path) -> Path:
    return write_tokens(tmp_path / "tokens.json", {"alice": ("tok-alice", "partner"), "bob": ("tok-bob", "partner"),
                                                   "reviewer": ("tok-internal", "internal")})


def test_guard_and_conduct_over_the_toolbus_answer_as_the_products_do(tmp_path: Path) -> None:
    from cda.conductor.conduct import Conductor
    from cda.conductor.irdb import IRDatabase

    policies, ledger = _guardian(tmp_path)
    db = tmp_path / "receipts.sqlite"
    with serving(db, "--auth", str(_tokens(tmp_path)), "--guard-policies", str(policies),
                 "--guard-ledger", str(ledger)) as server, toolbus(server, "tok-alice") as ws:
        approved = call(ws, "guard.evaluate", {"action": ACTION})["result"]
        over = call(ws, "guard.evaluate", {"action": {**ACTION, "action_id": "a2", "cost_estimate": 250}})["result"]
        malformed = call(ws, "guard.evaluate", {"action": {"agent_id": "x"}})["result"]
        by_path = call(ws, "guard.evaluate", {"action_path": str(EXAMPLES / "guardian" / "launch.json")})["error"]
        reply = call(ws, "conduct.request", {"utterance": "compute (1 + 2) * 0.1"})["result"]
    assert (approved["decision"], approved["reason"]) == ("APPROVE", "policy_clear")
    assert (over["decision"], over["reason"]) == ("ESCALATE", "budget_exceeded")
    assert (malformed["decision"], malformed["reason"]) == ("REJECT", "malformed_action")
    assert by_path["code"] == "forbidden" and by_path["path"] == ["params", "action_path"]
    direct = Conductor(IRDatabase(":memory:")).handle("compute (1 + 2) * 0.1")
    assert reply["status"] == direct.status == "answered" and reply["answer"] == direct.answer
    assert (tmp_path / "receipts.sqlite.conductor.sqlite").is_file()  # the server's IR database, beside its store


def test_artifacts_get_returns_what_the_ids_name_to_the_owner_only(tmp_path: Path) -> None:
    from cda.actions.artifacts import content_id

    db = tmp_path / "receipts.sqlite"
    with serving(db, "--auth", str(_tokens(tmp_path))) as server:
        with toolbus(server, "tok-alice") as alice:
            action_id = call(alice, "actions.start", {"ability": "cda", "inputs": example_inputs("art")})[
                "result"]["action_id"]
            follow(server, action_id, token="tok-alice")
            got = call(alice, "actions.get", {"action_id": action_id})["result"]
            ids = [got["summary_artifact_id"], got["plan_bundle_id"], got["evidence_bundle_id"]]
            summary, plan, evidence = (call(alice, "artifacts.get", {"id": i})["result"] for i in ids)
        with toolbus(server, "tok-bob") as bob:
            assert all(call(bob, "artifacts.get", {"id": i})["error"]["code"] == "not_found" for i in ids)
        with toolbus(server, "tok-internal") as reviewer:  # the owner's only: not a reviewer's either
            assert call(reviewer, "artifacts.get", {"id": ids[0]})["error"]["code"] == "not_found"
        folder = tmp_path / action_id
        assert summary["text"] == (folder / "summary.md").read_text(encoding="utf-8")
        assert content_id("summary", summary["text"]) == ids[0]
        assert plan["files"]["hypotheses.json"] == (folder / "cda_plan" / "hypotheses.json").read_text(encoding="utf-8")
        assert evidence["evidence"] == json.loads((folder / "evidence.json").read_text(encoding="utf-8"))
        (folder / "summary.md").write_text(summary["text"] + "\nedited after the run\n", encoding="utf-8")
        with toolbus(server, "tok-alice") as alice:
            changed = call(alice, "artifacts.get", {"id": ids[0]})["error"]
            assert changed["code"] == "conflict" and "no longer match" in changed["message"]
            assert call(alice, "artifacts.get", {"id": "summary:nothex"})["error"]["code"] == "invalid_params"


def test_artifacts_integrity_says_intact_to_the_owner_and_tampered_after_an_edit(tmp_path: Path) -> None:
    db = tmp_path / "receipts.sqlite"
    with serving(db, "--auth", str(_tokens(tmp_path))) as server:
        with toolbus(server, "tok-alice") as alice:
            action_id = call(alice, "actions.start", {"ability": "cda", "inputs": example_inputs("integ")})[
                "result"]["action_id"]
            follow(server, action_id, token="tok-alice")
            wait_signed(db, action_id)  # the server signs the log's head just after the terminal event
            got = call(alice, "artifacts.integrity", {"action_id": action_id})["result"]
        with toolbus(server, "tok-bob") as bob:
            assert call(bob, "artifacts.integrity", {"action_id": action_id})["error"]["code"] == "not_found"
        assert (got["status"], got["signature"], got["covered"]) == ("intact", "valid", True), (got["problems"], got["notes"])
        assert got["action_receipts"] > 0 and got["signed_count"] == got["log_entries"] and not got["problems"]
        from tests.test_receipts import _tamper

        _tamper(db, lambda conn: conn.execute(  # a receipt of the action edited in place, the triggers put back
            "UPDATE receipts SET body = replace(body, '\"ok\"', '\"OK\"') WHERE seq = (SELECT min(seq) FROM receipts "
            "WHERE action_id = ? AND body LIKE '%\"ok\"%')", (action_id,)))
        with toolbus(server, "tok-alice") as alice:
            after = call(alice, "artifacts.integrity", {"action_id": action_id})["result"]
        assert after["status"] == "tampered" and after["problems"], after


def test_reflect_approve_on_the_cli_and_the_toolbus_and_the_trace_it_opens(tmp_path: Path) -> None:
    from cda.cli.main import main

    out_dir = tmp_path / "runs"
    out, err = io.StringIO(), io.StringIO()
    assert main(["run", str(EXAMPLES / "action" / "service_outage.json"), "--out", str(out_dir), "--json"],
                out, err) in (0, 3), err.getvalue()
    action_id = json.loads(out.getvalue().splitlines()[-1])["action_id"]
    db = out_dir / "receipts.sqlite"
    out, err = io.StringIO(), io.StringIO()
    assert main(["reflect", "approve", action_id, "--store", str(db), "--reviewer", "reviewer"], out, err) == 0, \
        err.getvalue()
    token = out.getvalue().strip()
    assert main(["reflect", "approve", action_id, "--store", str(tmp_path / "none.sqlite"), "--reviewer", "x"],
                io.StringIO(), err) == 2 and "no such receipt log" in err.getvalue()
    with serving(db, "--auth", str(_tokens(tmp_path))) as server:
        with toolbus(server, "tok-internal") as reviewer:
            trace = call(reviewer, "reflect.trace", {"action_id": action_id, "approval": token})["result"]["trace"]
            issued = call(reviewer, "reflect.approve", {"action_id": action_id, "reviewer": "reviewer"})["result"]
            assert call(reviewer, "reflect.trace", {"action_id": action_id, "approval": issued["approval"]})[
                "result"]["trace"] == trace
        with toolbus(server, "tok-alice") as partner:
            for method in ("reflect.approve", "reflect.trace"):
                assert call(partner, method, {"action_id": action_id, "reviewer": "alice", "approval": token})[
                    "error"]["code"] == "unknown_method"
    assert trace["action_id"] == action_id and trace["rounds"]
    from cda.actions.receipts import ReceiptLog

    log = ReceiptLog(db)
    try:
        names = [e.receipt.name for e in log.entries(action_id)]
        assert names.count("reflection.approve") == 2 and "reflection.read" in names and log.verify().ok
    finally:
        log.close()


def test_the_products_as_mcp_tools(tmp_path: Path) -> None:
    pytest.importorskip("mcp")
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    policies, ledger = _guardian(tmp_path)
    inputs = example_inputs("mcp-art")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    server = StdioServerParameters(command=sys.executable, args=[
        "-m", "cda", "mcp", "--out", str(tmp_path / "out"), "--guard-policies", str(policies),
        "--guard-ledger", str(ledger)], env=env, cwd=str(tmp_path))

    async def body() -> dict[str, Any]:
        async with Client(server, read_timeout_seconds=120) as client:
            out: dict[str, Any] = {"tools": {t.name for t in (await client.list_tools()).tools}}
            out["guard"] = (await client.call_tool("guard_evaluate", {"action": ACTION})).structured_content
            out["conduct"] = (await client.call_tool("conduct_request", {"utterance": "compute 2 ** -2"})
                              ).structured_content
            started = (await client.call_tool("investigate_start", {
                "dsl": "hyp a, b\nobservable o\nhard: o iff (a or b)\n"})).structured_content
            out["observed"] = (await client.call_tool("investigate_observe", {
                "session_id": started["session_id"], "observation": "o"})).structured_content
            out["revised"] = (await client.call_tool("investigate_revise", {
                "session_id": started["session_id"], "add": ["hard: not b"], "reason": "b is ruled out"})
                              ).structured_content
            out["report"] = (await client.call_tool("report_check", {
                "draft": {"conclusion": {"root_cause": "db", "confidence": 0.9, "nodes": ["db"]}},
                "observations": ["db slow"]})).structured_content
            run = (await client.call_tool("run_action", {"inputs": inputs})).structured_content
            out["summary"] = (await client.call_tool("artifacts_get", {"id": run["summary_artifact_id"]})
                              ).structured_content
            out["run"] = run
            return out

    out = anyio.run(body)
    assert {"guard_evaluate", "conduct_request", "investigate_start", "investigate_observe", "investigate_status",
            "investigate_history", "investigate_undo", "investigate_close", "investigate_revise", "report_check",
            "reflect_approve",
            "artifacts_get"} <= out["tools"]
    assert out["guard"]["decision"] == "APPROVE"
    assert out["conduct"]["status"] == "answered" and "1/4" in out["conduct"]["answer"]
    assert out["observed"]["memory"]["observations"] == ["o"]
    revised = out["revised"]
    assert revised["memory"]["change"]["vanished"] and revised["memory"]["hypotheses_total"] == 1  # only a is left
    assert revised["trace"]["selected_hypothesis_id"] == revised["memory"]["selected_hypothesis_id"]
    assert out["report"]["verdict"] == "ABSTAIN" and out["report"]["enforced"]["conclusion"]["band"] != "high"
    summary = tmp_path / "out" / out["run"]["action_id"] / "summary.md"
    assert out["summary"]["text"] == summary.read_text(encoding="utf-8")
