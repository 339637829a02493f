"""Sub-actions over the wire (QA scenario 2: bind => lock, update_available, structure revision) and
CUP escalation (spec §9: any 2 of 5 signals, at once for risk_class hard, ~20% of wall >= 20 s)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cda.actions.receipts import ReceiptLog
from cda.contracts.receipt import sha256_hex
from tests.service_harness import Server, call, example_inputs, follow, serving, toolbus


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, Path, Path]]:
    root = tmp_path_factory.mktemp("sub")
    providers = root / "providers"
    (providers / "research").mkdir(parents=True)
    (providers / "sandbox").mkdir()
    (providers / "research" / "probe-auth.txt").write_text("observe slow(auth)\n", encoding="utf-8")
    (providers / "sandbox" / "replay").write_text("", encoding="utf-8")
    (providers / "sandbox" / "replay.txt").write_text("observe slow(api)\n", encoding="utf-8")
    db = root / "receipts.sqlite"
    with serving(db, "--providers", str(providers)) as server:
        yield server, providers, db


def _inputs(purpose: str) -> dict[str, Any]:
    return example_inputs(purpose, observations=[{"kind": "span", "source": "pager:1", "excerpt": "observe slow(web)"}])


def test_qa2_bind_locks_a_revision_update_available_and_accept_gives_a_structure_revision(
        env: tuple[Server, Path, Path]) -> None:
    server, providers, db = env
    with toolbus(server) as ws:
        started = call(ws, "actions.start", {"ability": "cda", "inputs": _inputs("qa2"), "subactions": [
            {"ability": "research", "source": "probe-auth", "edge": "bind"}]})["result"]
        consumer, (sub_r1,) = started["action_id"], started["linked"]
        assert sub_r1.endswith(".r1")
        events = follow(server, consumer)
        linked = [e["data"] for e in events if e["event"] == "action_linked"]
        base = sub_r1.removesuffix(".r1")  # the sub-action; each revision streams on <base>.r<n>
        assert linked == [{**linked[0], "linked_action_id": base, "ability": "research", "edge": "bind"}]
        first = events[-1]["data"]["outputs"]
        assert events[-1]["event"] == "action_completed" and first["revision"] == 1
        sub_events = follow(server, sub_r1)
        assert [e["event"] for e in sub_events] == ["action_started", "action_checkpoint", "action_completed"]
        assert sub_events[1]["data"]["payload"]["sha256"] == sha256_hex("observe slow(auth)\n")

        unchanged = call(ws, "actions.refresh", {"action_id": sub_r1})
        assert unchanged["error"]["code"] == "conflict"  # same content: no new revision, nothing offered
        (providers / "research" / "probe-auth.txt").write_text("observe slow(auth)\nobserve not slow(db)\n",
                                                               encoding="utf-8")
        refreshed = call(ws, "actions.refresh", {"action_id": sub_r1})["result"]
        sub_r2 = refreshed["action_id"]
        assert refreshed["revision"] == 2 and refreshed["updates_for"] == [consumer]
        offer = follow(server, sub_r2)[1]["data"]["payload"]
        assert offer["update_available"] == {"consumers": [consumer]} and offer["revision"] == 2
        got = call(ws, "actions.get", {"action_id": consumer})["result"]
        assert got["updates_available"] == [sub_r2] and got["revision"] == 1  # nothing changes until accepted

        wrong = call(ws, "actions.accept_update", {"action_id": consumer, "update": sub_r1})
        assert wrong["error"]["code"] == "conflict"  # the locked revision is no update
        accepted = call(ws, "actions.accept_update", {"action_id": consumer, "update": sub_r2})["result"]
        assert accepted["revision"] == 2 and accepted["action_id"] != consumer
        second = follow(server, accepted["action_id"])
        outputs = second[-1]["data"]["outputs"]
        assert outputs["revision"] == 2 and outputs["supersedes"] == first["plan_bundle_id"]
        assert [e["data"]["linked_action_id"] for e in second if e["event"] == "action_linked"] == [base]
    log = ReceiptLog(db)
    try:
        names = [e.receipt.name for e in log.entries(consumer)]
        assert "bind" in names and "bind.update_available" in names and "bind.accept" in names
        binds = [e.receipt for e in log.entries(accepted["action_id"]) if e.receipt.name == "bind"]
        assert binds and binds[0].result["sha256"] == sha256_hex("observe slow(auth)\nobserve not slow(db)\n")
        assert log.verify().ok
    finally:
        log.close()


def test_depends_on_and_notify_edges_and_unknown_providers(env: tuple[Server, Path, Path]) -> None:
    server, _, _ = env
    with toolbus(server) as ws:
        started = call(ws, "actions.start", {"ability": "cda", "inputs": _inputs("edges"), "subactions": [
            {"ability": "sandbox", "source": "replay", "edge": "dependsOn"},
            {"ability": "research", "source": "probe-auth", "edge": "notify"}]})["result"]
        events = follow(server, started["action_id"])
        edges = [(e["data"]["ability"], e["data"]["edge"]) for e in events if e["event"] == "action_linked"]
        assert edges == [("sandbox", "dependsOn")]
        assert call(ws, "actions.start", {"ability": "cda", "inputs": _inputs("x"), "subactions": [
            {"ability": "default", "source": "nothing-here", "edge": "bind"}]})["error"]["path"] == [
            "params", "subactions", 0, "source"]
        bad = call(ws, "actions.start", {"ability": "cda", "inputs": _inputs("x"), "subactions": [
            {"ability": "research", "source": "../../etc/passwd", "edge": "bind"}]})
        assert bad["error"]["code"] == "invalid_params" and bad["error"]["path"][:3] == ["params", "subactions", 0]


def test_cup_escalation_two_of_five_signals_reserve_and_partial_when_short(env: tuple[Server, Path, Path]) -> None:
    server, _, db = env
    with toolbus(server) as ws:
        one = call(ws, "actions.start", {"ability": "cda", "inputs": _inputs("cup1"),
                                         "escalation": {"signals": ["high_doubt"], "wall_remaining": 300}})
        assert one["error"]["code"] == "conflict" and one["error"]["path"] == ["params", "escalation", "signals"]
        twice = call(ws, "actions.start", {"ability": "cda", "inputs": _inputs("cup1"),
                                           "escalation": {"signals": ["high_doubt", "high_doubt"]}})
        assert twice["error"]["code"] == "invalid_params"
        short = call(ws, "actions.start", {"ability": "cda", "inputs": _inputs("cup-short"), "escalation": {
            "signals": ["contradictions", "policy_risk"], "wall_remaining": 12}})["result"]
        assert short["status"] == "partial"
        events = follow(server, short["action_id"])
        assert [e["event"] for e in events] == ["action_started", "action_partial"]
        assert "less than the 20 s" in events[-1]["data"]["caveats"][0] and events[-1]["data"]["next_tests"]
        ok = call(ws, "actions.start", {"ability": "cda", "inputs": _inputs("cup-ok"), "escalation": {
            "signals": ["contradictions", "critical_decision"], "wall_remaining": 300}})["result"]
        assert follow(server, ok["action_id"])[-1]["event"] == "action_completed"
        hard = call(ws, "actions.start", {"ability": "cda", "inputs": {**_inputs("cup-hard"), "risk_class": "hard"},
                                          "escalation": {"signals": []}})["result"]
        last = follow(server, hard["action_id"])[-1]
        assert last["data"]["outputs"]["status"] == "escalated"
    log = ReceiptLog(db)
    try:
        reserved = [{k: v for k, v in e.receipt.result.items() if k != "vouched"}  # the server's vouch aside
                    for e in log.entries(ok["action_id"]) if e.receipt.name == "cup.escalate"]
        assert reserved == [{"reason": "2 of 5 signals fired; 60 s reserved", "wall": 60.0, "short": False}]
    finally:
        log.close()
