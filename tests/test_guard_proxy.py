"""``cda guard proxy`` end to end: a real upstream MCP server (examples/guardian/records_server.py, the SDK's
MCPServer, counting its calls in a file), the gateway in front of it as a subprocess, and the
SDK's client as the agent. What reaches the upstream is counted by the upstream itself."""

from __future__ import annotations

import io
import json
import os
import sqlite3
import sys
from decimal import Decimal
from pathlib import Path
from typing import Any

import anyio
import pytest

pytest.importorskip("mcp", reason="the MCP SDK is in the test extra (cda[mcp])")

from mcp import Client  # noqa: E402
from mcp.client.stdio import StdioServerParameters  # noqa: E402

from cda.cli.main import main  # noqa: E402
from cda.contracts.receipt import canonical_json, sha256_hex  # noqa: E402
from cda.guardian.ledger import Ledger  # noqa: E402
from tests.conftest import ROOT  # noqa: E402
from tests.mcp_harness import started_http as _started  # noqa: E402
from tests.timing import HANG

UPSTREAM = ROOT / "examples" / "guardian" / "records_server.py"

POLICIES = """
[facts]
deletes = { action_type = ["*delete*"] }
touches_prod = { resource = ["prod/*"] }

[[policy]]
id = "no_prod_delete"
dsl = "not (deletes and touches_prod)"

[[tool]]
name = "launch_*"
cost = 400

[[tool]]
name = "*_record"
cost = "0.25"
resources = ["{table}/{key}"]
"""


@pytest.fixture()
def guardian(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A guardian file with agent-7's budget of 2,000.25 USD and its first signer alice."""
    monkeypatch.setenv("CDA_KEY_DIR", str(tmp_path / "keys"))
    (tmp_path / "policies.toml").write_text(POLICIES)
    db = tmp_path / "guardian.db"
    assert _cda("task", "budget", "agent-7", "2000.25", "--store", str(db))[0] == 0
    assert _cda("task", "add-signer", "alice", "--store", str(db))[0] == 0
    return tmp_path


def _cda(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def _proxy(folder: Path) -> StdioServerParameters:
    upstream = f"records={sys.executable} {UPSTREAM} {folder / 'calls.jsonl'}"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return StdioServerParameters(command=sys.executable, env=env, cwd=str(folder), args=[
        "-m", "cda", "guard", "proxy", "--upstream", upstream, "--agent", "agent-7",
        "--policies", str(folder / "policies.toml"), "--ledger", str(folder / "guardian.db")])


def _as_agent(folder: Path, body: Any) -> Any:
    async def run() -> Any:
        async with Client(_proxy(folder), read_timeout_seconds=120) as client:
            return await body(client)

    return anyio.run(run)


def _calls(folder: Path, tool: str) -> list[dict[str, Any]]:
    path = folder / "calls.jsonl"
    lines = path.read_text().splitlines() if path.exists() else []
    return [c for c in map(json.loads, lines) if c["tool"] == tool]


def _budget(folder: Path, amount: Decimal) -> str:
    """Set agent-7's budget in the folder's guardian file; returns the file's path."""
    db = str(folder / "guardian.db")
    ledger = Ledger.open(db)
    ledger.set_budget("agent-7", "USD", amount)
    ledger.close()
    return db


def _balance(folder: Path) -> tuple[Decimal, list[Any]]:
    ledger = Ledger.open(folder / "guardian.db")
    try:
        return ledger.balance("agent-7").committed, ledger.entries("agent-7")
    finally:
        ledger.close()


def test_reject_approve_and_a_budget_that_covers_five_of_eight_concurrent_calls(guardian: Path) -> None:
    async def body(client: Client) -> dict[str, Any]:
        out: dict[str, Any] = {"tools": sorted(t.name for t in (await client.list_tools()).tools)}
        out["delete"] = await client.call_tool("delete_record", {"table": "prod", "key": 3})
        out["read"] = await client.call_tool("read_record", {"table": "prod", "key": 3})
        out["bad"] = await client.call_tool("read_record", {"table": "prod", "key": "three"})
        results: list[Any] = []

        async def launch(i: int) -> None:
            results.append(await client.call_tool("launch_campaign", {"name": f"c{i}"}))

        async with anyio.create_task_group() as tg:
            for i in range(8):
                tg.start_soon(launch, i)
        out["launches"] = results
        return out

    out = _as_agent(guardian, body)
    assert out["tools"] == ["delete_record", "launch_campaign", "read_record"]
    # REJECT: an error naming the policy and the facts that violate it; the upstream never saw it
    assert out["delete"].is_error
    text = out["delete"].content[0].text
    assert "REJECT policy:no_prod_delete" in text and "fact deletes = True" in text and "touches_prod" in text
    assert _calls(guardian, "delete_record") == []
    # APPROVE: called once with the agent's own arguments, its cost settled
    assert not out["read"].is_error and out["read"].content[0].text == "prod/3: ok"
    assert _calls(guardian, "read_record") == [{"tool": "read_record", "table": "prod", "key": 3}]
    # arguments off the tool's schema are malformed, never forwarded
    assert out["bad"].is_error and "REJECT malformed_action" in out["bad"].content[0].text
    # 8 concurrent launches of 400 USD against 2,000 USD left: exactly 5 reach the upstream
    launches = out["launches"]
    assert sum(not r.is_error for r in launches) == 5 and len(_calls(guardian, "launch_campaign")) == 5
    held = [r for r in launches if r.is_error]
    assert all("ESCALATE" in r.content[0].text and r.structured_content["escalation_id"].startswith("esc-")
               for r in held)
    committed, entries = _balance(guardian)
    assert committed == Decimal("2000.25")  # 0.25 + 5 x 400, exactly
    settled = sorted((e.amount, e.status, e.tool_id) for e in entries)  # each entry names the tool it paid for
    assert settled == [(Decimal("0.25"), "settled", "read_record@1.4")] + [(Decimal(400), "settled",
                                                                           "launch_campaign@1.4")] * 5
    # every decision and call is a receipt; the tools are in the guardian file's registry
    log = sqlite3.connect(guardian / "guardian.db.receipts.sqlite")
    bodies = [r[0] for r in log.execute("SELECT body FROM receipts")]
    names = [json.loads(b)["name"] for b in bodies]
    assert names.count("guard.proxy.call") == 6
    db = sqlite3.connect(guardian / "guardian.db")
    decided = [json.loads(r[0])["receipt"] for r in db.execute("SELECT body FROM decisions")]
    # a decision names its receipt by the SHA-256 of its canonical JSON without the writer's vouch
    # (which the log adds where the receipt lands: docs/actions.md, "Vouched receipts")
    unvouched = [{**json.loads(b), "result": {k: v for k, v in json.loads(b)["result"].items() if k != "vouched"}}
                 for b in bodies]
    assert all(json.loads(b)["result"].get("vouched") for b in bodies)  # the gateway vouches for each
    assert len(decided) == 11 and set(decided) <= {sha256_hex(canonical_json(b)) for b in unvouched}
    assert {r[0] for r in db.execute("SELECT tool_id FROM mcp_tool_registry")} == {
        "read_record@1.4", "delete_record@1.4", "launch_campaign@1.4"}
    assert db.execute("SELECT COUNT(*) FROM decisions").fetchone()[0] == 11


def test_an_escalation_resolved_by_a_signer_goes_through_exactly_once(guardian: Path) -> None:
    db = _budget(guardian, Decimal(300))

    async def ask(client: Client) -> Any:
        return await client.call_tool("launch_campaign", {"name": "spring"})

    first = _as_agent(guardian, ask)
    assert first.is_error and "ESCALATE budget_exceeded" in first.content[0].text
    ident = first.structured_content["escalation_id"]
    assert _calls(guardian, "launch_campaign") == [] and _balance(guardian)[0] == 0  # nothing held
    code, listed, _ = _cda("guard", "escalations", "--ledger", db, "--state", "open")
    assert code == 0 and f"{ident}  open" in listed and 'name="spring"' in listed
    # a signer who speaks for no one cannot resolve it (a key of its own does not make it one)
    assert _cda("task", "add-signer", "mallory", "--store", str(guardian / "other.db"))[0] == 0
    code, _, err = _cda("guard", "resolve", ident, "--approve", "--by", "mallory", "--reason", "ok", "--ledger", db)
    assert code == 1 and "mallory" in err
    code, out, err = _cda("guard", "resolve", ident, "--approve", "--by", "alice", "--reason",
                          "spring launch signed off by finance", "--ledger", db, "--json")
    assert code == 0, err
    assert json.loads(out)["escalations"][0]["state"] == "approved"
    assert _balance(guardian)[0] == 400  # the approval reserved the cost, past the budget: consent to overspend
    code, _, err = _cda("guard", "resolve", ident, "--reject", "--by", "alice", "--reason", "changed my mind",
                        "--ledger", db)
    assert code == 1 and "resolution is made once" in err

    async def twice(client: Client) -> list[Any]:
        return [await ask(client), await ask(client), await client.call_tool("launch_campaign", {"name": "autumn"})]

    again, third, other = _as_agent(guardian, twice)
    assert not again.is_error and again.content[0].text == "campaign spring launched"
    assert third.is_error and "ESCALATE" in third.content[0].text  # used once; the next is decided anew
    assert other.is_error  # another call does not ride the approval
    assert _calls(guardian, "launch_campaign") == [{"tool": "launch_campaign", "name": "spring"}]
    committed, entries = _balance(guardian)
    assert committed == 400 and [(e.tx_id, e.status, e.tool_id) for e in entries] == [
        (f"esc:{ident}", "settled", "launch_campaign@1.4")]


def test_a_forged_or_altered_resolution_is_refused_and_a_rejection_holds(guardian: Path) -> None:
    db = _budget(guardian, Decimal(0))

    async def ask(client: Client) -> Any:
        return [await client.call_tool("launch_campaign", {"name": n}) for n in ("a", "b")]

    held = _as_agent(guardian, ask)
    first, second = (r.structured_content["escalation_id"] for r in held)
    # a signer row inserted by hand, endorsed by no one: it speaks for no one
    conn = sqlite3.connect(db)
    alice_key = conn.execute("SELECT public_key FROM signers WHERE signer_id = 'alice'").fetchone()[0]
    conn.execute("INSERT INTO signers (signer_id, public_key, registered_at) VALUES ('eve', ?, '2026-01-01')",
                 (alice_key,))
    conn.commit()
    code, _, err = _cda("guard", "resolve", first, "--approve", "--by", "eve", "--reason", "ok", "--ledger", db,
                        "--by-key", str(guardian / "keys" / "signers" / "alice.ed25519.key"))
    assert code == 1 and "eve" in err
    # approved by alice, then its signed reason altered in the file: void, released, decided anew
    assert _cda("guard", "resolve", first, "--approve", "--by", "alice", "--reason", "one launch", "--ledger", db)[0] == 0
    row = conn.execute("SELECT resolution FROM escalations WHERE escalation_id = ?", (first,)).fetchone()
    doc = json.loads(row[0])
    doc["reason"] = "any launch you like"
    conn.execute("UPDATE escalations SET resolution = ? WHERE escalation_id = ?", (json.dumps(doc), first))
    conn.commit()
    assert _cda("guard", "resolve", second, "--reject", "--by", "alice", "--reason", "not now", "--ledger", db)[0] == 0
    again = _as_agent(guardian, ask)
    assert again[0].is_error and "ESCALATE" in again[0].content[0].text
    assert again[1].is_error and "rejected: not now" in again[1].content[0].text
    assert _calls(guardian, "launch_campaign") == []
    state = dict(conn.execute("SELECT escalation_id, state FROM escalations").fetchall())
    assert state[first] == "void" and state[second] == "rejected"
    committed, entries = _balance(guardian)
    assert committed == 0 and [(e.tx_id, e.status) for e in entries] == [(f"esc:{first}", "released")]


def test_the_agent_cannot_resolve_its_own_escalation_over_mcp(guardian: Path) -> None:
    """guard.resolve is an approver's operation: through ``cda mcp`` (the agent's door) it is refused."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    params = StdioServerParameters(command=sys.executable, env=env, cwd=str(guardian), args=[
        "-m", "cda", "mcp", "--guard-policies", str(guardian / "policies.toml"),
        "--guard-ledger", str(guardian / "guardian.db")])

    async def body() -> Any:
        async with Client(params, read_timeout_seconds=120) as client:
            names = {t.name for t in (await client.list_tools()).tools}
            listed = await client.call_tool("guard_escalations", {})
            tried = await client.call_tool("guard_resolve", {"escalation_id": "esc-1", "decision": "approve",
                                                             "by": "alice", "reason": "I approve myself"})
            return names, listed, tried

    names, listed, tried = anyio.run(body)
    assert {"guard_evaluate", "guard_escalations", "guard_resolve"} <= names
    assert not listed.is_error and listed.structured_content == {"escalations": []}
    assert tried.is_error and "approv" in tried.content[0].text


def test_bad_proxy_options_are_one_line_errors(guardian: Path) -> None:
    code, _, err = _cda("guard", "proxy", "--agent", "agent-7", "--policies", str(guardian / "policies.toml"),
                        "--ledger", str(guardian / "guardian.db"))
    assert code == 2 and "at least one upstream" in err
    code, _, err = _cda("guard", "proxy", "--upstream", "x=true", "--agent", "bad agent", "--policies",
                        str(guardian / "policies.toml"), "--ledger", str(guardian / "guardian.db"))
    assert code == 2 and "--agent" in err and "Traceback" not in err
    code, _, err = _cda("guard", "proxy", "--upstream", "x=true", "--agent", "a", "--policies",
                        str(guardian / "policies.toml"), "--ledger", str(guardian / "missing.db"))
    assert code == 2 and "missing.db" in err


def _gateway_section() -> str:
    text = (ROOT / "docs" / "guardian.md").read_text(encoding="utf-8")
    start = text.index("## The gateway: `cda guard proxy`")
    return text[start:text.index("\n## ", start + 1)]


def test_the_docs_agent_pointed_at_the_gateway_runs_as_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import re
    import subprocess

    section = _gateway_section()
    consoles = re.findall(r"```console\n(.*?)```", section, re.S)
    python = re.findall(r"```python\n(.*?)```", section, re.S)
    assert len(python) == 1 and len(consoles) == 3  # the budget, the resolution, the export
    monkeypatch.setenv("CDA_KEY_DIR", str(tmp_path / "keys"))
    monkeypatch.chdir(tmp_path)
    (tmp_path / "examples").symlink_to(ROOT / "examples")
    assert _cda("task", "add-signer", "orchestrator:alice", "--store", "guardian.db")[0] == 0
    for block in consoles:  # each command as written, its first line of output as shown
        command, first = block.splitlines()[0], block.splitlines()[1]
        if "resolve" in command:
            (tmp_path / "agent.py").write_text(python[0])
            env = {**os.environ, "PYTHONPATH": str(ROOT)}
            run = subprocess.run([sys.executable, "agent.py"], cwd=tmp_path, env=env, capture_output=True,
                                 text=True, timeout=300)
            assert run.returncode == 0, run.stderr
            assert run.stdout.splitlines() == ["['delete_record', 'launch_campaign', 'read_record']", "customers/7: ok",
                                               "True REJECT policy:no_prod_delete", "esc-1"]
            assert [c["tool"] for c in map(json.loads, (tmp_path / "records-calls.jsonl").read_text().splitlines())] \
                == ["read_record"]  # the delete and the launch never reached the records server
        import shlex

        code, out, err = _cda(*shlex.split(command.removeprefix("$ cda ")))
        assert code == 0, err
        assert out.splitlines()[0] == first


@pytest.mark.slow
def test_over_http_behind_tokens_and_host_checks_in_front_of_a_stdio_and_an_http_upstream(guardian: Path) -> None:
    """Two upstreams — the records server over stdio and ``cda mcp`` over streamable HTTP — behind
    the gateway over streamable HTTP with ``--auth``: tools prefixed by upstream, the token and the
    Host header checked before the SDK sees a request, the policy matching the prefixed name."""
    import httpx

    from tests.service_harness import write_tokens

    tokens = write_tokens(guardian / "tokens.json", {"agent": ("s3cret-token-for-the-agent", "partner")})
    upstream, upstream_url = _started(["mcp"], guardian, "cda mcp")
    records = f"records={sys.executable} {UPSTREAM} {guardian / 'calls.jsonl'}"
    gateway = None
    try:
        gateway, url = _started(["guard", "proxy", "--upstream", records, "--upstream-url", f"cda={upstream_url}",
                                 "--agent", "agent-7", "--policies", str(guardian / "policies.toml"),
                                 "--ledger", str(guardian / "guardian.db"), "--auth", str(tokens)], guardian, "proxy")
        init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-03-26", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
        headers = {"accept": "application/json, text/event-stream"}
        assert httpx.post(url, json=init, headers=headers, timeout=60).status_code == 401  # no token
        assert httpx.post(url, json=init, headers={**headers, "authorization": "Bearer s3cret-token-for-the-agent",
                                                   "host": "evil.example"}, timeout=60).status_code == 421

        async def body() -> Any:
            async with Client(f"{url}?token=s3cret-token-for-the-agent", read_timeout_seconds=120) as client:
                names = {t.name for t in (await client.list_tools()).tools}
                check = await client.call_tool("cda.check", {"dsl": "hyp a\nhard: a\n"})
                delete = await client.call_tool("records.delete_record", {"table": "prod", "key": 1})
                read = await client.call_tool("records.read_record", {"table": "prod", "key": 1})
                return names, check, delete, read

        names, check, delete, read = anyio.run(body)
        assert {"records.read_record", "records.delete_record", "cda.check", "cda.solve"} <= names
        assert not check.is_error and check.structured_content["abducibles"] == 1  # through to cda mcp, over HTTP
        assert delete.is_error and "REJECT policy:no_prod_delete" in delete.content[0].text
        assert not read.is_error and _calls(guardian, "delete_record") == [] and len(_calls(guardian, "read_record")) == 1
    finally:
        for proc in (gateway, upstream):
            if proc is not None:
                proc.terminate()
                proc.wait(timeout=HANG)
                proc.stderr.close()


def test_a_template_argument_that_adds_path_structure_is_rejected_and_never_forwarded(guardian: Path) -> None:
    """Audit finding 7: ``{table}/{key}`` filled with ``./prod`` or ``x/../prod`` slipped past a
    ``prod/*`` rule (approved; the upstream deleted). Each such argument is REJECT
    ``malformed_action`` naming it, receipted; matching is case-sensitive (docs/guardian.md)."""
    probes = ["./prod", "x/../prod", "prod/", "..", ".", "", "prod\\x", "prod\u2215x", "pr\u200bod", "prod\nx"]

    async def body(client: Client) -> list[Any]:
        return [await client.call_tool("delete_record", {"table": table, "key": 7}) for table in probes]

    results = _as_agent(guardian, body)
    for table, result in zip(probes, results):
        text = result.content[0].text
        assert result.is_error and "REJECT malformed_action" in text, (table, text)
        assert "table" in text, text
    assert _calls(guardian, "delete_record") == []  # the upstream never saw one
    db = sqlite3.connect(guardian / "guardian.db")
    assert db.execute("SELECT COUNT(*) FROM decisions").fetchone()[0] == len(probes)  # each decision recorded
