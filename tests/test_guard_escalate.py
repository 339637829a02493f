"""An ESCALATE from ``cda guard`` (the ``guard.evaluate`` operation, at every door) reaches a
person and, once approved, runs exactly once (docs/guardian.md, "Escalations a person resolves"):

* each door's ESCALATE is one escalation row, the same one when the same action is asked again
  (the receipt log says new, then the same), listed by ``guard.escalations``;
* the gate refuses a resolution by the one who proposed it: the principal whose ToolBus call
  escalated it, or a signer named as the action's agent;
* ``cda task execute --escalation`` runs the approved action only with its exact bytes (a changed
  amount is refused), once under racing executors (separate processes and threads), never after a
  reject, and not when the budget was lowered meanwhile or a stricter policy store is pinned.

Every test here fails on the code before this change: ``cda guard`` recorded no escalation row and
``cda task execute`` had no way to run an approved escalation.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from cda.cli.main import main
from tests.conftest import EXAMPLES, ROOT
from tests.service_harness import call, serving, toolbus, write_tokens

GUARDIAN = EXAMPLES / "guardian"
POLICIES = GUARDIAN / "policies.toml"
BIG = json.loads((GUARDIAN / "big_launch.json").read_text(encoding="utf-8"))  # 2,500 USD: over a 2,000 USD budget


def cda(*argv: Any) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main([str(a) for a in argv], stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


@pytest.fixture
def folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A guardian file: agent-7 with 2,000 USD, signer alice (its first), the example store pinned."""
    monkeypatch.setenv("CDA_KEY_DIR", str(tmp_path / "keys"))
    g = tmp_path / "guardian.db"
    for argv in (("task", "budget", "agent-7", "2000", "--store", g), ("task", "add-signer", "alice", "--store", g),
                 ("task", "pin-policies", POLICIES, "--store", g, "--by", "alice")):
        code, _, err = cda(*argv)
        assert code == 0, err
    return tmp_path


def guard(folder: Path, action: dict[str, Any], *extra: Any) -> tuple[int, dict[str, Any]]:
    path = folder / f"{action['action_id']}.json"
    path.write_text(json.dumps(action), encoding="utf-8")
    code, out, err = cda("guard", path, "--policies", POLICIES, "--ledger", folder / "guardian.db", "--json", *extra)
    assert err == "", err
    return code, json.loads(out)


def escalations(folder: Path) -> list[dict[str, Any]]:
    code, out, _ = cda("guard", "escalations", "--ledger", folder / "guardian.db", "--json")
    assert code == 0
    return json.loads(out)["escalations"]  # type: ignore[no-any-return]


def resolve(folder: Path, decision: str, by: str = "alice", escalation: str = "esc-1") -> tuple[int, str, str]:
    return cda("guard", "resolve", escalation, f"--{decision}", "--by", by, "--reason", "finance signed off",
               "--ledger", folder / "guardian.db")


def signed_task(folder: Path, action: dict[str, Any], task_id: str) -> Path:
    """The task a person signs for ``action`` (written as given: the bytes the executor is shown)."""
    path = folder / f"{task_id}.action.json"
    path.write_text(json.dumps(action), encoding="utf-8")
    draft, signed = folder / f"{task_id}.draft.json", folder / f"{task_id}.signed.json"
    assert cda("task", "draft", path, "--task-id", task_id, "--out", draft)[0] == 0
    assert cda("task", "sign", draft, "--store", folder / "guardian.db", "--signer", "alice", "--out", signed)[0] == 0
    return signed


def execute(folder: Path, task: Path, *extra: Any) -> tuple[int, str, str]:
    return cda("task", "execute", task, "--store", folder / "guardian.db", "--escalation", "esc-1", *extra)


def balance(folder: Path) -> dict[str, Any]:
    code, out, _ = cda("task", "budget", "agent-7", "2000", "--store", folder / "guardian.db", "--json")
    assert code == 0
    return json.loads(out)  # type: ignore[no-any-return]


def test_the_cli_escalate_is_one_row_listed_and_receipted_as_the_same(folder: Path) -> None:
    log = folder / "receipts.sqlite"
    first_code, first = guard(folder, BIG, "--receipts", log)
    again_code, again = guard(folder, BIG, "--receipts", log)
    assert (first_code, again_code) == (3, 3) and first["decision"] == again["decision"] == "ESCALATE"
    assert first["escalation"] == {"escalation_id": "esc-1", "state": "open", "new": True}
    assert again["escalation"] == {"escalation_id": "esc-1", "state": "open", "new": False}
    listed = escalations(folder)
    assert [(e["escalation_id"], e["state"], e["reason"], e["cost"], e["action_digest"], e["proposed_by"])
            for e in listed] == [("esc-1", "open", "budget_exceeded", "2500", first["action_digest"], "local:local")]
    from cda.actions.receipts import ReceiptLog

    receipts = ReceiptLog(log)
    try:
        held = [r for r in (e.receipt for e in receipts.entries()) if r.name == "guardian.escalation"]
        assert receipts.verify().ok
    finally:
        receipts.close()
    assert [(r.result["escalation_id"], r.result["new"]) for r in held] == [("esc-1", True), ("esc-1", False)]
    assert held[0].result["decision_receipt"] == first["receipt"]
    _, text, _ = cda("guard", GUARDIAN / "big_launch.json", "--policies", POLICIES, "--ledger", folder / "guardian.db")
    assert "escalation: esc-1 open, as when this action was escalated before" in text
    code, out, _ = cda("guard", GUARDIAN / "launch.json", "--policies", POLICIES, "--ledger", folder / "guardian.db",
                       "--json")
    assert code == 0 and "escalation" not in json.loads(out)  # an APPROVE holds nothing
    assert len(escalations(folder)) == 1


def test_an_approved_escalation_runs_its_exact_action_once(folder: Path) -> None:
    assert guard(folder, BIG)[0] == 3
    assert resolve(folder, "approve")[0] == 0
    code, _, err = resolve(folder, "approve")
    assert code == 1 and "approved already" in err  # approved twice: refused
    assert balance(folder)["committed"] == "2500"  # the approval's reservation: consent to the overspend
    cheaper = signed_task(folder, {**BIG, "cost_estimate": 2400, "parameters": {**BIG["parameters"], "budget_usd": 2400}},
                          "t-cheaper")
    code, _, err = execute(folder, cheaper)
    assert code == 1 and "not the escalated action" in err  # a changed amount is another action
    assert escalations(folder)[0]["state"] == "approved"  # a task not bound to it does not spend it, nor void it
    code, out, err = execute(folder, signed_task(folder, BIG, "t-1"), "--policies", POLICIES)
    assert code == 0, err
    done = json.loads(out)
    assert (done["state"], done["audit_ref"]) == ("executed", "ledger://esc:esc-1")
    assert "escalation:esc-1" in done["receipts"]
    code, _, err = execute(folder, signed_task(folder, BIG, "t-2"))
    assert code == 1 and "used already by task:t-1" in err  # one run: another task is told which one ran it
    [e] = escalations(folder)
    assert (e["state"], e["used_by"]) == ("used", "task:t-1")
    assert balance(folder)["committed"] == "2500"  # settled once
    _, text, _ = cda("guard", "escalations", "--ledger", folder / "guardian.db")
    assert "used by task:t-1" in text


def test_two_executor_processes_at_once_run_it_once(folder: Path) -> None:
    assert guard(folder, BIG)[0] == 3 and resolve(folder, "approve")[0] == 0
    tasks = [signed_task(folder, BIG, f"t-{n}") for n in range(3)]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    procs = [subprocess.Popen([sys.executable, "-m", "cda", "task", "execute", str(task), "--store",
                               str(folder / "guardian.db"), "--escalation", "esc-1", "--json"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
             for task in tasks]
    ends = [(p.wait(timeout=300), p.stdout.read() if p.stdout else "", p.stderr.read() if p.stderr else "")
            for p in procs]
    for p in procs:
        for stream in (p.stdout, p.stderr):
            if stream is not None:
                stream.close()
    assert sorted(code for code, _, _ in ends) == [0, 1, 1], ends
    winner = next(json.loads(out)["task_id"] for code, out, _ in ends if code == 0)
    for code, out, _ in ends:
        if code == 1:
            assert f"used already by task:{winner}" in " ".join(json.loads(out)["problems"])
    assert escalations(folder)[0]["used_by"] == f"task:{winner}"
    assert balance(folder)["committed"] == "2500"


def test_racing_threads_run_it_once(folder: Path) -> None:
    from cda.guardian.execution import ExecutionRefused
    from cda.guardian.execution import execute as run_task
    from cda.guardian.ledger import Ledger
    from cda.guardian.tasks import read_task

    assert guard(folder, BIG)[0] == 3 and resolve(folder, "approve")[0] == 0
    tasks = [read_task(signed_task(folder, BIG, f"t-{n}").read_text(encoding="utf-8")) for n in range(8)]
    ran: list[str] = []
    refused: list[str] = []
    start = threading.Barrier(len(tasks))

    def one(task: Any) -> None:
        ledger = Ledger.open(folder / "guardian.db")
        try:
            start.wait()
            ran.append(run_task(task, None, ledger, escalation="esc-1", run=lambda t: {"ran": t.task_id}).task_id)
        except ExecutionRefused as exc:
            refused.append(str(exc))
        except Exception as exc:  # noqa: BLE001 - anything else is the failure this test looks for
            refused.append(f"unexpected {type(exc).__name__}: {exc}")
        finally:
            ledger.close()

    threads = [threading.Thread(target=one, args=(t,)) for t in tasks]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(ran) == 1 and len(refused) == 7, (ran, refused)
    assert all("already" in r for r in refused), refused


def test_an_executor_that_read_the_approval_before_another_ran_it_is_told_it_ran(
        folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The race the racing tests above meet under load, made certain: the loser read the escalation
    as approved, the winner then ran it and settled its reservation."""
    from cda.guardian import escalations as esc
    from cda.guardian.execution import ExecutionRefused
    from cda.guardian.execution import execute as run_task
    from cda.guardian.ledger import Ledger
    from cda.guardian.tasks import read_task

    assert guard(folder, BIG)[0] == 3 and resolve(folder, "approve")[0] == 0
    late = read_task(signed_task(folder, BIG, "t-2").read_text(encoding="utf-8"))
    ledger = Ledger.open(folder / "guardian.db")
    try:
        stale = esc.get(ledger.store, "esc-1")
        assert execute(folder, signed_task(folder, BIG, "t-1"))[0] == 0
        reads = iter([stale])
        real = esc.get
        monkeypatch.setattr(esc, "get", lambda store, ident: next(reads, None) or real(store, ident))
        with pytest.raises(ExecutionRefused) as refused:
            run_task(late, None, ledger, escalation="esc-1")
    finally:
        ledger.close()
    assert "used already by task:t-1" in str(refused.value) and "void" not in str(refused.value)
    [e] = escalations(folder)
    assert (e["state"], e["used_by"]) == ("used", "task:t-1") and balance(folder)["committed"] == "2500"


def test_a_rejected_escalation_stays_rejected_when_the_action_is_asked_again(folder: Path) -> None:
    assert guard(folder, BIG)[0] == 3
    assert resolve(folder, "reject")[0] == 0
    code, again = guard(folder, BIG)
    assert code == 3 and again["escalation"] == {"escalation_id": "esc-1", "state": "rejected", "new": False}
    assert [e["state"] for e in escalations(folder)] == ["rejected"]  # no new open escalation to approve
    code, _, err = resolve(folder, "approve")
    assert code == 1 and "rejected already" in err
    code, _, err = execute(folder, signed_task(folder, BIG, "t-1"))
    assert code == 1 and "rejected by a person" in err
    assert balance(folder)["committed"] == "0"
    pushy = json.loads((GUARDIAN / "pushy_launch.json").read_text(encoding="utf-8"))
    code, record = guard(folder, pushy, "--sim", GUARDIAN / "marketing_launch.toml")
    assert (code, record["escalation"]["escalation_id"]) == (3, "esc-2")
    assert resolve(folder, "reject", escalation="esc-2")[0] == 0
    assert cda("task", "budget", "agent-7", "1000", "--store", folder / "guardian.db")[0] == 0
    code, again = guard(folder, pushy)  # asked again without the simulation: over budget now, another reason
    assert (code, again["reason"]) == (3, "budget_exceeded")
    assert again["escalation"] == {"escalation_id": "esc-2", "state": "rejected", "new": False}  # not reopened
    assert [e["state"] for e in escalations(folder)] == ["rejected", "rejected"]
    assert cda("task", "budget", "agent-7", "2500", "--store", folder / "guardian.db")[0] == 0
    code, record = guard(folder, BIG)  # within the raised budget: the gate approves it now
    assert record["decision"] == "APPROVE"
    decision = folder / "decision.json"
    decision.write_text(json.dumps(record), encoding="utf-8")
    code, _, err = cda("task", "execute", signed_task(folder, BIG, "t-2"), "--store", folder / "guardian.db",
                       "--decision", decision)
    assert code == 1 and "a person rejected this action (escalation esc-1)" in err  # the refusal outlives it
    assert balance(folder)["committed"] == "0"


def test_the_agent_does_not_resolve_its_own_escalation(folder: Path) -> None:
    g = folder / "guardian.db"
    assert cda("task", "add-signer", "agent-7", "--store", g, "--by", "alice")[0] == 0  # the agent as a signer
    assert guard(folder, BIG)[0] == 3
    code, _, err = resolve(folder, "approve", by="agent-7")
    assert code == 1 and "its own proposer" in err
    assert escalations(folder)[0]["state"] == "open" and balance(folder)["committed"] == "0"
    assert resolve(folder, "approve", by="alice")[0] == 0  # another signer may


def test_an_approval_does_not_outlive_a_lowered_budget(folder: Path) -> None:
    pushy = json.loads((GUARDIAN / "pushy_launch.json").read_text(encoding="utf-8"))
    code, record = guard(folder, pushy, "--sim", GUARDIAN / "marketing_launch.toml")
    assert (code, record["reason"]) == (3, "causal_risk")  # within budget: the person approves the risk only
    assert resolve(folder, "approve")[0] == 0
    assert balance(folder)["committed"] == "1200"
    assert cda("task", "budget", "agent-7", "1000", "--store", folder / "guardian.db")[0] == 0  # lowered meanwhile
    code, _, err = execute(folder, signed_task(folder, pushy, "t-1"))
    assert code == 1 and "no longer fits" in err and "void" in err
    assert escalations(folder)[0]["state"] == "void"
    assert balance(folder)["committed"] == "0"  # the reservation went back


def test_an_approval_does_not_outlive_a_stricter_pinned_store(folder: Path) -> None:
    assert guard(folder, BIG)[0] == 3 and resolve(folder, "approve")[0] == 0
    stricter = folder / "stricter.toml"
    stricter.write_text(POLICIES.read_text(encoding="utf-8") + '\n[[policy]]\nid = "no_launch"\nkind = "hard"\n'
                        'action_types = ["ads.launch"]\ndsl = "false"\n', encoding="utf-8")
    code, _, err = execute(folder, signed_task(folder, BIG, "t-0"), "--policies", stricter)
    assert code == 1 and "not the one in force" in err  # the store given is not the one approved under
    assert escalations(folder)[0]["state"] == "approved"  # an executor's wrong file does not void it
    assert cda("task", "pin-policies", stricter, "--store", folder / "guardian.db", "--by", "alice")[0] == 0
    code, _, err = execute(folder, signed_task(folder, BIG, "t-1"))
    assert code == 1 and "now pins the policy store" in err
    assert escalations(folder)[0]["state"] == "void" and balance(folder)["committed"] == "0"


def test_over_the_toolbus_the_proposer_does_not_resolve_and_an_approver_does(folder: Path) -> None:
    tokens = write_tokens(folder / "tokens.json", {"ops": ("tok-ops", "internal"), "carol": ("tok-carol", "approver"),
                                                   "pat": ("tok-pat", "partner")})
    params = {"escalation_id": "esc-1", "decision": "approve", "by": "alice", "reason": "signed off"}
    with serving(folder / "receipts.sqlite", "--auth", str(tokens), "--guard-policies", str(POLICIES),
                 "--guard-ledger", str(folder / "guardian.db")) as server:
        with toolbus(server, "tok-ops") as ops:
            held = call(ops, "guard.evaluate", {"action": BIG})["result"]
            own = call(ops, "guard.resolve", params)["error"]
        with toolbus(server, "tok-pat") as pat:
            partner = call(pat, "guard.resolve", params)["error"]
            pat_held = call(pat, "guard.evaluate", {"action": BIG})["result"]
        with toolbus(server, "tok-carol") as carol:
            listed = call(carol, "guard.escalations", {"state": "open"})["result"]["escalations"]
            approved = call(carol, "guard.resolve", params)["result"]["escalations"]
    assert held["decision"] == "ESCALATE" and held["escalation"] == {"escalation_id": "esc-1", "state": "open",
                                                                      "new": True}
    assert own["code"] == "forbidden" and "the one who proposes does not approve" in own["message"]
    assert own["path"] == ["params", "escalation_id"]
    assert partner["code"] == "unknown_method"  # a partner resolves nothing
    assert pat_held["escalation"]["escalation_id"] == "esc-1" and not pat_held["escalation"]["new"]
    assert [(e["escalation_id"], e["proposed_by"]) for e in listed] == [("esc-1", "internal:ops")]
    assert [(e["state"], e["resolution"]["by"]) for e in approved] == [("approved", "alice")]
    from cda.actions.receipts import ReceiptLog

    log = ReceiptLog(folder / "receipts.sqlite")
    try:
        refusals = [r.result for r in (e.receipt for e in log.entries())
                    if r.name == "gate.refused" and r.result.get("need") == "approve"]
    finally:
        log.close()
    assert any("proposed by internal 'ops'" in r["reason"] and r["where"] == ["escalation_id"] for r in refusals)
    trail = ReceiptLog(folder / "guardian.db.receipts.sqlite")  # the guardian's own log at the server's door
    try:
        said = [(e.receipt.name, e.receipt.result.get("escalation_id"), e.receipt.result.get("new"))
                for e in trail.entries()]
        assert trail.verify().ok
    finally:
        trail.close()
    assert said == [("guardian.evaluate", None, None), ("guardian.escalation", "esc-1", True),
                    ("guardian.evaluate", None, None), ("guardian.escalation", "esc-1", False)]
    code, _, err = execute(folder, signed_task(folder, BIG, "t-1"))
    assert code == 0, err


def test_over_mcp_the_agent_escalates_and_a_person_resolves(folder: Path) -> None:
    pytest.importorskip("mcp")
    import anyio
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    server = StdioServerParameters(command=sys.executable, args=[
        "-m", "cda", "mcp", "--out", str(folder / "out"), "--guard-policies", str(POLICIES),
        "--guard-ledger", str(folder / "guardian.db")], env={**os.environ, "PYTHONPATH": str(ROOT)}, cwd=str(folder))

    async def agent() -> dict[str, Any]:
        async with Client(server, read_timeout_seconds=120) as client:
            first = (await client.call_tool("guard_evaluate", {"action": BIG})).structured_content
            again = (await client.call_tool("guard_evaluate", {"action": BIG})).structured_content
            listed = (await client.call_tool("guard_escalations", {"state": "open"})).structured_content
            own = await client.call_tool("guard_resolve", {"escalation_id": "esc-1", "decision": "approve",
                                                           "by": "alice", "reason": "I approve my own launch"})
            return {"first": first, "again": again, "listed": listed, "own": own}

    out = anyio.run(agent)
    assert out["first"]["decision"] == "ESCALATE"
    assert out["first"]["escalation"] == {"escalation_id": "esc-1", "state": "open", "new": True}
    assert out["again"]["escalation"] == {"escalation_id": "esc-1", "state": "open", "new": False}
    assert [e["escalation_id"] for e in out["listed"]["escalations"]] == ["esc-1"]
    assert out["own"].is_error and "approver" in out["own"].content[0].text  # the agent over stdio approves nothing
    assert escalations(folder)[0]["state"] == "open" and balance(folder)["committed"] == "0"
    assert resolve(folder, "approve")[0] == 0  # the person at the CLI
    code, _, err = execute(folder, signed_task(folder, BIG, "t-1"))
    assert code == 0, err


def test_a_guard_job_holds_its_escalate_for_a_person(folder: Path) -> None:
    (folder / "big.json").write_text(json.dumps(BIG), encoding="utf-8")
    (folder / "policies.toml").write_bytes(POLICIES.read_bytes())  # a job reads only files inside its folder
    (folder / "jobs.toml").write_text('''[[job]]
kind = "guard"
file = "big.json"
params = { policies = "policies.toml", ledger = "guardian.db" }
''', encoding="utf-8")
    code, out, err = cda("jobs", "run", folder / "jobs.toml", "--out", folder / "runs", "--json")
    assert code == 3, (out, err)  # no verdict: a person decides
    [row] = [json.loads(line) for line in (folder / "runs" / "results.jsonl").read_text(encoding="utf-8").splitlines()]
    assert row["status"] == "escalated" and "held for a person as escalation esc-1" in row["error"]
    assert row["result"]["escalation"] == {"escalation_id": "esc-1", "state": "open", "new": True}
    [e] = escalations(folder)
    assert (e["state"], e["proposed_by"], e["action_digest"]) == ("open", "local:local", row["result"]["action_digest"])
    assert guard(folder, BIG)[1]["escalation"]["new"] is False  # the CLI sees the job's escalation as the same
