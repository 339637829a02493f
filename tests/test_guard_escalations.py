"""Escalations without the gateway around them: an approval is used once (also by racing
callers), lapses at its expiry or with its policy store, and a resolution's every signed field
is checked (cda.guardian.escalations)."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path

import pytest

from cda.guardian import escalations as esc
from cda.guardian.decision import Decision, DecisionRecord
from cda.guardian.guardian_db import GuardianStore
from cda.guardian.ledger import Ledger
from cda.guardian.proposal import read_action
from cda.guardian.signers import SignerRegistry, create_signer_key, load_signer_key, signer_key_path

POLICY = "a" * 64


class Clock:
    def __init__(self) -> None:
        self.now = datetime(2026, 11, 27, 12, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now


@pytest.fixture()
def world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Ledger, Clock, str]:
    monkeypatch.setenv("CDA_KEY_DIR", str(tmp_path / "keys"))
    clock = Clock()
    ledger = Ledger(GuardianStore.open(tmp_path / "g.db", clock))
    ledger.set_budget("agent-7", "USD", Decimal(100))
    SignerRegistry(ledger.store).register_root("alice", create_signer_key("alice"))
    return ledger, clock, load_signer_key(signer_key_path("alice"))


def _held(ledger: Ledger, name: str = "spring") -> esc.Escalation:
    action = read_action({"action_id": f"mcp-{name}", "agent_id": "agent-7", "tool": {"name": "launch", "version": "1"},
                          "action_type": "launch", "cost_estimate": "150", "parameters": {"name": name}})
    record = DecisionRecord(decision=Decision.ESCALATE, reason="budget_exceeded", action_digest=action.digest(),
                            policy_digest=POLICY, receipt="b" * 64)
    return esc.escalate(ledger.store, key=esc.call_key("agent-7", "launch@1", {"name": name}), action=action,
                        tool_id="launch@1", record=record)[0]


def test_an_approval_is_used_once_even_by_racing_callers(world: tuple[Ledger, Clock, str]) -> None:
    ledger, clock, key = world
    e = _held(ledger)
    assert _held(ledger).escalation_id == e.escalation_id  # the same call again: the same open escalation
    esc.resolve(ledger, e.escalation_id, decision="approve", by="alice", key=key, reason="ok")
    assert ledger.balance("agent-7").committed == 150  # reserved past the 100 USD budget: consent to overspend
    path = ledger.store.where
    wins: list[bool] = []

    def take() -> None:
        other = Ledger.open(path, clock)  # the test's clock: the wall clock would outlive the approval
        try:
            wins.append(esc.claim(other, e.call_key, POLICY).approved)
        finally:
            other.close()

    threads = [threading.Thread(target=take) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(wins) == [False] * 7 + [True]


def test_an_approval_lapses_at_its_expiry_and_with_its_policy_store(world: tuple[Ledger, Clock, str]) -> None:
    ledger, clock, key = world
    first, second = _held(ledger, "one"), _held(ledger, "two")
    for e in (first, second):
        esc.resolve(ledger, e.escalation_id, decision="approve", by="alice", key=key, reason="ok", ttl_hours=1)
    assert ledger.balance("agent-7").committed == 300
    assert not esc.claim(ledger, second.call_key, "c" * 64).approved  # another policy store is in force: void
    clock.now += timedelta(hours=1)
    assert esc.sweep_expired(ledger) == [first.escalation_id]
    assert not esc.claim(ledger, first.call_key, POLICY).approved
    states = {e.escalation_id: e.state for e in esc.escalations(ledger.store)}
    assert states == {first.escalation_id: "void", second.escalation_id: "void"}
    assert ledger.balance("agent-7").committed == 0  # both reservations went back to the budget


@pytest.mark.parametrize("field, value", [("cost", "1"), ("reason", "ok!"), ("decision", "reject"),
                                          ("expires_at", "2099-01-01T00:00:00+00:00"), ("by", "bob")])
def test_every_signed_field_of_a_resolution_is_checked(world: tuple[Ledger, Clock, str], field: str,
                                                      value: str) -> None:
    import json

    ledger, _, key = world
    e = _held(ledger)
    esc.resolve(ledger, e.escalation_id, decision="approve", by="alice", key=key, reason="ok")
    found = esc.get(ledger.store, e.escalation_id)
    assert found is not None and esc.resolution_problems(ledger.store, found, POLICY) == []
    doc = {**(found.resolution or {}), field: value}
    with ledger.store.transaction() as conn:
        conn.execute("UPDATE escalations SET resolution = ? WHERE escalation_id = ?", (json.dumps(doc), e.escalation_id))
    altered = esc.get(ledger.store, e.escalation_id)
    assert altered is not None and esc.resolution_problems(ledger.store, altered, POLICY) != []
    assert not esc.claim(ledger, e.call_key, POLICY).approved


def test_a_resolution_is_refused_for_a_stranger_a_bad_reason_or_twice(world: tuple[Ledger, Clock, str]) -> None:
    ledger, _, key = world
    e = _held(ledger)
    with pytest.raises(esc.EscalationError, match="mallory"):
        esc.resolve(ledger, e.escalation_id, decision="approve", by="mallory", key=key, reason="ok")
    with pytest.raises(esc.EscalationError, match="reason"):
        esc.resolve(ledger, e.escalation_id, decision="approve", by="alice", key=key, reason="  ")
    with pytest.raises(esc.EscalationError, match="hours"):
        esc.resolve(ledger, e.escalation_id, decision="approve", by="alice", key=key, reason="ok", ttl_hours=0)
    with pytest.raises(esc.EscalationError, match="no escalation"):
        esc.resolve(ledger, "esc-99", decision="reject", by="alice", key=key, reason="ok")
    esc.resolve(ledger, e.escalation_id, decision="reject", by="alice", key=key, reason="no")
    with pytest.raises(esc.EscalationError, match="made once"):
        esc.resolve(ledger, e.escalation_id, decision="approve", by="alice", key=key, reason="ok")
    assert ledger.balance("agent-7").committed == 0 and ledger.entries() == []  # a refusal holds nothing
