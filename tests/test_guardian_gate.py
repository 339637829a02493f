"""The guardian's gate (issue 19): each branch of ``evaluate`` with a minimal action, its
monotonicity and determinism as properties, its receipts, and the one call path for tools."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cda.actions.receipts import ReceiptLog
from cda.guardian.decide import evaluate
from cda.guardian.decision import Decision, exit_code
from cda.guardian.gate import Gate, ToolRegistry, ToolRegistryError
from cda.guardian.ledger import Ledger
from cda.guardian.policies import DslPolicy, PolicyStore, load_policy_store
from cda.guardian.proposal import ProposedAction, read_action

POLICIES = {
    "config": {"max_auto_launch_risk": Decimal("0.2"), "min_soft_score": Decimal("0.5")},
    "parameters": {"replicas": "count"},
    "facts": {
        "deletes": {"action_type": ["db.delete", "db.drop"]},
        "touches_prod": {"resource": ["prod/*"]},
        "dry_run": {"parameter": "dry_run"},
    },
    "policy": [
        {"id": "no_prod_delete", "dsl": "not (deletes and touches_prod and not dry_run)"},
        {"id": "spend_cap", "dsl": "value(metric:cost) <= 500 USD"},
        {"id": "few_replicas", "kind": "soft", "weight": 2, "action_types": ["deploy.*"], "requires": ["replicas"],
         "dsl": "value(metric:param_replicas) <= 3"},
    ],
}  # fmt: skip


@dataclass(frozen=True)
class Prediction:
    risk_score: float
    summary: Mapping[str, Any]
    id: str


class GaussianOverrunSimulator:
    """A real simulator with a closed-form answer: the spend of an action is Normal(mean =
    ``parameters.spend``, sd = ``sd``); the risk is the probability that it overruns ``limit``,
    Φ((mean − limit) / sd). No sampling, so the known risk is exact (up to erf)."""

    def __init__(self, limit: float = 100.0, sd: float = 10.0) -> None:
        self.limit, self.sd = limit, sd
        self.calls = 0

    def simulate(self, action: ProposedAction, *, seed: int) -> Prediction:
        self.calls += 1
        mean = float(action.parameters.get("spend", 0))
        risk = 0.5 * (1 + math.erf((mean - self.limit) / (self.sd * math.sqrt(2))))
        return Prediction(risk, {"spend": {"mean": mean, "sd": self.sd}, "limit": self.limit}, f"gauss:{mean}:{seed}")


def action(**changes: Any) -> dict[str, Any]:
    base: dict[str, Any] = {"action_id": "a1", "agent_id": "agent-7", "tool": {"name": "sql", "version": "1.0"},
                            "action_type": "db.read", "resources": ["staging/db"], "cost_estimate": "12.50"}  # fmt: skip
    base.update(changes)
    return base


@pytest.fixture
def store() -> PolicyStore:
    return load_policy_store(POLICIES)


@pytest.fixture
def ledger(tmp_path: Path) -> Any:
    ledger = Ledger.open(tmp_path / "guardian.db")
    ledger.set_budget("agent-7", "USD", Decimal(100))
    yield ledger
    ledger.close()


def test_a_clear_action_is_approved_with_its_risk(store: PolicyStore, ledger: Ledger) -> None:
    sim = GaussianOverrunSimulator()
    record = evaluate(action(parameters={"spend": 70}), store, sim, ledger)
    assert (record.decision, record.reason) == (Decision.APPROVE, "policy_clear")
    assert record.details["risk"] == pytest.approx(0.5 * (1 + math.erf(-3 / math.sqrt(2))))
    assert record.details["sim_id"] == "gauss:70.0:0" and record.details["matched"] == ["no_prod_delete", "spend_cap"]
    assert record.approved and exit_code(record.decision) == 0


def test_malformed_actions_are_rejected_with_the_path_of_the_first_problem(store: PolicyStore, ledger: Ledger) -> None:
    cases = {
        '{"action_id": "a1"': "$",
        json.dumps(action(cost_estimate=-1)): "$.cost_estimate",
        json.dumps(action(resources=["ok", 7])): "$.resources[1]",
        json.dumps(action(surprise=True)): "$.surprise",
        json.dumps(action(parameters={"n": {"deep": [1, 2, "x" * 5000]}})): "$.parameters.n.deep[2]",
        json.dumps(action())[:-1] + ', "cost_estimate": NaN}': "$.cost_estimate",
        json.dumps(action(cost_estimate=10**10)): "$.cost_estimate",
        json.dumps(action(tool={"name": "sql"})): "$.tool.version",
        "[]": "$",
        "x" * 70000: "$",
    }
    for text, path in cases.items():
        record = evaluate(text, store, GaussianOverrunSimulator(), ledger)
        assert (record.decision, record.reason, record.details["path"]) == (Decision.REJECT, "malformed_action", path), text[:80]
        assert exit_code(record.decision) == 1


def test_a_hard_policy_rejects_with_its_minimal_violating_facts(store: PolicyStore, ledger: Ledger) -> None:
    sim = GaussianOverrunSimulator()
    record = evaluate(action(action_type="db.delete", resources=["staging/x", "prod/users"]), store, sim, ledger)
    assert (record.decision, record.reason) == (Decision.REJECT, "policy:no_prod_delete")
    facts = {f["fact"]: (f["value"], f["paths"]) for f in record.details["facts"]}
    assert facts == {"deletes": (True, ["$.action_type"]), "touches_prod": (True, ["$.resources[1]"]),
                     "dry_run": (False, ["$.parameters.dry_run"])}  # fmt: skip
    assert sim.calls == 0  # a rejected action is not simulated
    # a dry run of the same deletion violates nothing
    assert evaluate(action(action_type="db.delete", resources=["prod/users"], parameters={"dry_run": True}),
                    store, sim, ledger).decision is Decision.APPROVE  # fmt: skip


def test_the_cost_fact_is_exact(store: PolicyStore) -> None:
    """500 USD is allowed and 500.001 is not: no float rounds the cost on its way to the solver."""
    assert evaluate(action(cost_estimate="500"), store, None, None).decision is Decision.APPROVE
    assert evaluate(action(cost_estimate="0.000000001"), store, None, None).decision is Decision.APPROVE
    record = evaluate(action(cost_estimate="500.001"), store, None, None)
    assert record.reason == "policy:spend_cap"
    assert record.details["facts"] == [{"fact": "cost", "value": "500.001 USD", "paths": ["$.cost_estimate", "$.currency"]}]


def test_a_policy_that_cannot_be_checked_holds_the_action_back(store: PolicyStore) -> None:
    record = evaluate(action(currency="EUR"), store, None, None)  # spend_cap compares with USD
    assert (record.decision, record.reason) == (Decision.REJECT, "policy:spend_cap")
    assert "cannot be checked" in record.details["problem"]


def test_over_budget_escalates(store: PolicyStore, ledger: Ledger) -> None:
    record = evaluate(action(cost_estimate="100.01"), store, GaussianOverrunSimulator(), ledger)
    assert (record.decision, record.reason) == (Decision.ESCALATE, "budget_exceeded")
    assert record.details == {"agent_id": "agent-7", "cost": "100.01", "currency": "USD", "remaining": "100"}
    assert exit_code(record.decision) == 3
    assert evaluate(action(cost_estimate="100"), store, None, ledger).decision is Decision.APPROVE


def test_causal_risk_above_the_threshold_escalates(store: PolicyStore, ledger: Ledger) -> None:
    record = evaluate(action(parameters={"spend": 95}), store, GaussianOverrunSimulator(), ledger)
    assert (record.decision, record.reason) == (Decision.ESCALATE, "causal_risk")  # Φ(-0.5) ≈ 0.31 > 0.2
    assert record.details["risk"] == pytest.approx(0.3085375387259869)
    assert record.details["summary"]["limit"] == 100.0 and record.details["threshold"] == "0.2"


def test_a_simulator_answering_outside_0_1_escalates(store: PolicyStore) -> None:
    class Broken(GaussianOverrunSimulator):
        def simulate(self, action: ProposedAction, *, seed: int) -> Prediction:
            return Prediction(float("nan"), {}, "broken")

    record = evaluate(action(), store, Broken(), None)
    assert (record.decision, record.reason) == (Decision.ESCALATE, "causal_risk") and "not a number" in record.details["error"]


def test_soft_policies_lower_the_score_and_escalate_below_the_floor(store: PolicyStore) -> None:
    few = evaluate(action(action_type="deploy.web", parameters={"replicas": 3}), store, None, None)
    assert few.decision is Decision.APPROVE and few.details["soft_score"] == "1"
    many = evaluate(action(action_type="deploy.web", parameters={"replicas": 4}), store, None, None)
    assert (many.decision, many.reason, many.details["soft_score"]) == (Decision.ESCALATE, "policy:few_replicas", "0")
    # a soft policy never approves what a hard one rejects
    both = evaluate(action(action_type="deploy.web", parameters={"replicas": 4}, cost_estimate=900), store, None, None)
    assert (both.decision, both.reason) == (Decision.REJECT, "policy:spend_cap")


def test_each_decision_is_one_receipt_in_the_chain(store: PolicyStore, ledger: Ledger, tmp_path: Path) -> None:
    log = ReceiptLog(tmp_path / "receipts.db")
    records = [evaluate(action(cost_estimate=c), store, None, ledger, receipts=log) for c in ("1", "200", "900")]
    records.append(evaluate("{", store, None, ledger, receipts=log))
    entries = log.entries()
    assert [e.receipt.result["decision"] for e in entries] == ["APPROVE", "ESCALATE", "REJECT", "REJECT"]
    assert [e.receipt.name for e in entries] == ["guardian.evaluate"] * 4
    from cda.contracts.receipt import canonical_json, sha256_hex

    assert [sha256_hex(canonical_json(e.receipt.model_dump(mode="json"))) for e in entries] == [r.receipt for r in records]
    assert log.verify().ok
    log.close()


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    cost=st.decimals(min_value=0, max_value=1000, places=2),
    budget=st.decimals(min_value=0, max_value=1000, places=2),
    spend=st.integers(min_value=0, max_value=200),
    kind=st.sampled_from(["db.read", "db.delete", "deploy.web"]),
    prod=st.booleans(),
)
def test_same_inputs_give_the_same_record_byte_for_byte(tmp_path_factory: pytest.TempPathFactory, cost: Decimal,
                                                        budget: Decimal, spend: int, kind: str, prod: bool) -> None:  # fmt: skip
    store = load_policy_store(POLICIES)
    doc = action(cost_estimate=str(cost), action_type=kind, resources=["prod/a" if prod else "dev/a"], parameters={"spend": spend})
    outs = []
    for _ in range(2):
        ledger = Ledger.open(tmp_path_factory.mktemp("l") / "g.db")
        ledger.set_budget("agent-7", "USD", budget)
        outs.append(evaluate(json.dumps(doc), store, GaussianOverrunSimulator(), ledger, seed=7).model_dump_json())
        ledger.close()
    assert outs[0] == outs[1]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    cost=st.decimals(min_value=0, max_value=800, places=2),
    kind=st.sampled_from(["db.read", "db.delete", "deploy.web"]),
    prod=st.booleans(),
    extra=st.sampled_from(["not deletes", "touches_prod implies dry_run", "value(metric:cost) <= 50 USD", "true", "false"]),
    spend=st.integers(min_value=0, max_value=200),
)
def test_adding_a_hard_policy_never_lowers_the_decision(cost: Decimal, kind: str, prod: bool, extra: str, spend: int) -> None:
    store = load_policy_store(POLICIES)
    doc = action(cost_estimate=str(cost), action_type=kind, resources=["prod/a" if prod else "dev/a"], parameters={"spend": spend})
    sim = GaussianOverrunSimulator()
    before = evaluate(doc, store, sim, None).decision
    stricter = store.with_policy(DslPolicy("extra", True, Fraction(1), (), (), (), extra))
    after = evaluate(doc, stricter, sim, None)
    assert after.decision >= before  # (so a REJECT stays REJECT: it is the most restrictive)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    cost=st.decimals(min_value=0, max_value=400, places=2),
    high=st.decimals(min_value=0, max_value=400, places=2),
    cut=st.decimals(min_value=0, max_value=400, places=2),
    spend=st.integers(min_value=0, max_value=200),
)
def test_lowering_a_budget_never_lowers_the_decision(tmp_path_factory: pytest.TempPathFactory, cost: Decimal, high: Decimal,
                                                     cut: Decimal, spend: int) -> None:  # fmt: skip
    store = load_policy_store(POLICIES)
    doc = action(cost_estimate=str(cost), parameters={"spend": spend})
    ledger = Ledger.open(tmp_path_factory.mktemp("l") / "g.db")
    ledger.set_budget("agent-7", "USD", high)
    before = evaluate(doc, store, GaussianOverrunSimulator(), ledger).decision
    ledger.set_budget("agent-7", "USD", max(Decimal(0), high - cut))
    after = evaluate(doc, store, GaussianOverrunSimulator(), ledger).decision
    ledger.close()
    assert after >= before  # (so an ESCALATE never becomes APPROVE)


@given(st.one_of(st.text(max_size=200), st.binary(max_size=200),
                 st.dictionaries(st.text(max_size=10), st.recursive(st.none() | st.booleans() | st.floats() | st.integers() | st.text(max_size=5),
                                 lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3), max_leaves=8),
                                 max_size=6)))  # fmt: skip
@settings(max_examples=150, deadline=None)
def test_validation_never_raises(doc: Any) -> None:
    result = read_action(doc)
    assert isinstance(result, ProposedAction) or result.path.startswith("$")
    record = evaluate(doc, EMPTY_STORE, None, None)  # the gate answers anything with a decision
    assert record.decision is (Decision.APPROVE if isinstance(result, ProposedAction) else Decision.REJECT)


def test_an_empty_store_approves_a_valid_action() -> None:
    record = evaluate(action(), EMPTY_STORE, GaussianOverrunSimulator(), None)
    assert (record.decision, record.details["threshold"], record.details["matched"]) == (Decision.APPROVE, "0.2", [])


EMPTY_STORE = PolicyStore()


# -- the one call path for side-effecting tools ------------------------------------------------

SQL_SCHEMA = {"type": "object", "properties": {"dry_run": {"type": "boolean"}, "limit": {"type": "integer", "minimum": 1},
                                               "spend": {"type": "number"}},
              "additionalProperties": False}  # fmt: skip


def recording_registry() -> tuple[ToolRegistry, list[dict[str, Any]]]:
    calls: list[dict[str, Any]] = []
    registry = ToolRegistry()
    registry.register("sql", "1.0", SQL_SCHEMA, lambda args: calls.append(dict(args)) or {"rows": 3})
    return registry, calls


def test_the_tool_runs_once_on_approve_and_never_otherwise(store: PolicyStore, ledger: Ledger) -> None:
    sim = GaussianOverrunSimulator()
    cases = [
        (action(action_type="db.delete", resources=["prod/users"]), Decision.REJECT),
        (action(cost_estimate="150"), Decision.ESCALATE),  # over the 100 USD budget
        (action(parameters={"spend": 99}), Decision.ESCALATE),  # causal risk
        (action(parameters={"spend": 60, "limit": 5}), Decision.APPROVE),
    ]
    for doc, expected in cases:
        registry, calls = recording_registry()
        outcome = Gate(registry, store, sim, ledger).call(doc)
        assert outcome.record.decision is expected
        assert calls == ([{"spend": 60, "limit": 5}] if expected is Decision.APPROVE else [])
        assert outcome.called is (expected is Decision.APPROVE)
        assert outcome.result == ({"rows": 3} if outcome.called else None)


def test_arguments_are_checked_against_the_registered_schema(store: PolicyStore) -> None:
    registry, calls = recording_registry()
    gate = Gate(registry, store, None, None)
    bad = gate.call(action(parameters={"limit": 0}))
    assert (bad.record.reason, bad.record.details["path"]) == ("malformed_action", "$.parameters.limit")
    unknown = gate.call(action(tool={"name": "shell", "version": "1.0"}))
    assert (unknown.record.reason, unknown.record.details["path"]) == ("malformed_action", "$.tool")
    assert calls == [] and not bad.called and not unknown.called


def test_registration_is_checked_and_stored(tmp_path: Path) -> None:
    from cda.guardian.guardian_db import GuardianStore

    store = GuardianStore.open(tmp_path / "g.db")
    registry = ToolRegistry(store)
    registry.register("sql", "1.0", SQL_SCHEMA, lambda args: None)
    stored = store.tool("sql@1.0")
    assert stored is not None and stored.schema_ == SQL_SCHEMA and (stored.name, stored.version) == ("sql", "1.0")
    with pytest.raises(ToolRegistryError, match="not a JSON Schema"):
        registry.register("bad", "1", {"type": 5}, lambda args: None)
    with pytest.raises(ToolRegistryError, match="registered already"):
        registry.register("sql", "1.0", {"type": "object"}, lambda args: None)
    store.close()


# -- the gate pays for what it runs: a reservation before the tool, settled after ---------------


def test_repeated_calls_never_overspend_the_budget(tmp_path: Path) -> None:
    """Budget 2000, a launch costing 1500, five calls: exactly one runs, the ledger holds 1500."""
    ledger = Ledger.open(tmp_path / "g.db")
    ledger.set_budget("agent-7", "USD", 2000)
    registry, calls = recording_registry()
    gate = Gate(registry, EMPTY_STORE, None, ledger)
    outcomes = [gate.call(action(action_id=f"launch-{i}", cost_estimate="1500")) for i in range(5)]
    assert len(calls) == 1 and [o.called for o in outcomes] == [True, False, False, False, False]
    assert all(o.record.reason == "budget_exceeded" for o in outcomes[1:])
    assert ledger.balance("agent-7", "USD").committed == 1500 == ledger.recount("agent-7", "USD")
    assert [(e.tx_id, e.status, e.settled_amount) for e in ledger.entries()] == [("call:launch-0", "settled", 1500)]
    ledger.close()


class _StaleLedger(Ledger):
    """A ledger whose budget check answers before another process spent the budget."""

    def within_budget(self, agent_id: str, cost: Decimal | int, currency_code: str = "USD") -> bool:
        return True


def test_a_reservation_the_ledger_refuses_is_escalate_and_runs_nothing(tmp_path: Path) -> None:
    from cda.guardian.guardian_db import GuardianStore

    ledger = _StaleLedger(GuardianStore.open(tmp_path / "g.db"))
    ledger.set_budget("agent-7", "USD", 2000)
    registry, calls = recording_registry()
    gate = Gate(registry, EMPTY_STORE, None, ledger)
    assert gate.call(action(action_id="x1", cost_estimate="1500")).called
    late = gate.call(action(action_id="x2", cost_estimate="1500"))
    assert (late.called, late.record.decision, late.record.reason) == (False, Decision.ESCALATE, "budget_exceeded")
    assert "does not fit the budget" in late.record.details["error"] and late.record.receipt
    assert len(calls) == 1 and ledger.balance("agent-7", "USD").committed == 1500
    ledger.close()


def test_an_action_id_runs_once_and_a_failing_tool_releases_its_money(tmp_path: Path) -> None:
    from cda.guardian.gate import ToolCallRefused

    ledger = Ledger.open(tmp_path / "g.db")
    ledger.set_budget("agent-7", "USD", 2000)
    registry, calls = recording_registry()
    gate = Gate(registry, EMPTY_STORE, None, ledger)
    assert gate.call(action(action_id="once")).called
    with pytest.raises(ToolCallRefused, match="an action id runs once"):
        gate.call(action(action_id="once"))
    assert len(calls) == 1

    def boom(args: Mapping[str, Any]) -> Any:
        raise RuntimeError("tool down")

    failing = ToolRegistry()
    failing.register("sql", "1.0", SQL_SCHEMA, boom)
    with pytest.raises(RuntimeError, match="tool down"):
        Gate(failing, EMPTY_STORE, None, ledger).call(action(action_id="fails", cost_estimate="700"))
    entry = ledger.entry("call:fails")
    assert entry is not None and entry.status == "released"
    assert ledger.balance("agent-7", "USD").committed == Decimal("12.5")  # only the first call's cost
    no_ledger = Gate(registry, EMPTY_STORE, None, None).call(action(action_id="free-1"))
    assert (no_ledger.called, no_ledger.record.reason) == (False, "budget_exceeded") and len(calls) == 1
    ledger.close()


def test_a_signed_task_runs_its_tool_through_the_gate_after_every_check(tmp_path: Path) -> None:
    """Gate.execute: the tool's schema, then execute()'s signature, pinned APPROVE, once-only and
    reservation; the tool runs once and the spend is settled."""
    from cda.guardian.execution import ExecutionRefused
    from cda.guardian.signers import SignerRegistry, pin_policy_store, public_key_of, sign
    from cda.guardian.tasks import TaskDraft

    ledger = Ledger.open(tmp_path / "g.db")
    ledger.set_budget("agent-7", "USD", 100)
    signers = SignerRegistry(ledger.store)
    key = "33" * 32
    signers.register("alice", public_key_of(key))
    pin_policy_store(signers, "ab" * 32, "alice", key)
    registry, calls = recording_registry()
    gate = Gate(registry, EMPTY_STORE, None, ledger)
    bad, good = (read_action(action(task_id="t-1", parameters=p)) for p in ({"limit": 0}, {"limit": 2}))
    assert isinstance(bad, ProposedAction) and isinstance(good, ProposedAction)
    for proposed in (bad, good):
        record = evaluate(proposed, EMPTY_STORE, None, ledger).model_copy(update={"policy_digest": "ab" * 32})
        ledger.store.record_decision(record, proposed)
        signed = sign(TaskDraft.for_action(proposed), "alice", key, signers)
        if proposed is bad:
            with pytest.raises(ExecutionRefused, match=r"malformed at \$.parameters.limit"):
                gate.execute(signed, record, proposed)
            continue
        done = gate.execute(signed, record, proposed)
        assert done.result == {"rows": 3} and calls == [{"limit": 2}] and done.audit_ref == "ledger://tx-1"
        with pytest.raises(ExecutionRefused, match="executes once"):
            gate.execute(signed, record, proposed)
    assert calls == [{"limit": 2}] and ledger.balance("agent-7", "USD").committed == Decimal("12.5")
    ledger.close()


def test_a_cost_the_policies_cannot_state_is_malformed_not_a_policy_violation(store: PolicyStore) -> None:
    """999.999999999 USD would be 999,999,999,999 nUSD, past the DSL's 10^9: REJECT
    malformed_action at $.cost_estimate (was: REJECT policy:no_prod_delete on a harmless read)."""
    record = evaluate(action(cost_estimate="999.999999999"), store, None, None)
    assert (record.reason, record.details["path"]) == ("malformed_action", "$.cost_estimate")
    assert "more digits than the policies can state" in record.details["message"]
    for fits in ("999.999999", "999999.999", "1000000000"):
        assert evaluate(action(cost_estimate=fits), store, None, None).reason != "malformed_action", fits


def test_actions_use_the_ledgers_currency_and_id_rules() -> None:
    """A budget can be set only where an action can spend it: USDC and ids with @ on both sides,
    an agent id with a space on neither."""
    from cda.guardian.guardian_db import GuardianStore, GuardianStoreError

    assert isinstance(read_action(action(currency="USDC", agent_id="ops@agent-7")), ProposedAction)
    ledger = Ledger(GuardianStore.open(":memory:"))
    ledger.set_budget("ops@agent-7", "USDC", 5)
    assert ledger.reserve("ops@agent-7", 5, "USDC").amount == 5
    assert not isinstance(read_action(action(agent_id="a b")), ProposedAction)
    with pytest.raises(GuardianStoreError, match="agent_id must match"):
        ledger.set_budget("a b", "USD", 5)
    ledger.close()
