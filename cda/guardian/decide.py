"""The gate: :func:`evaluate` decides APPROVE, ESCALATE or REJECT on one proposed action, in the
order of docs/guardian.md, and records the decision as one receipt.

1. **validation**: a document that is not a :class:`~cda.guardian.proposal.ProposedAction` is
   REJECT ``malformed_action``, with the JSON path of its first problem;
2. **hard policies**: the first matched hard policy the action violates is REJECT
   ``policy:<id>``, with a minimal set of the action's facts that violate it; then the **soft
   policies**: a soft score below the store's ``min_soft_score`` is ESCALATE ``policy:<id>`` of
   the heaviest violated soft policy (soft policies only ever hold an action back);
3. **budget**: a cost estimate the agent's budget in the CFO ledger cannot cover is ESCALATE
   ``budget_exceeded``;
4. **causal simulation**: a simulated risk above the store's ``max_auto_launch_risk`` (or a
   simulation that fails or answers outside [0, 1]) is ESCALATE ``causal_risk``;
5. otherwise APPROVE ``policy_clear``.

Each step may only hold an action back further than the ones before let it through, so adding a
hard policy never turns REJECT into APPROVE and lowering a budget never turns ESCALATE into
APPROVE. The record is a function of the action, the store, the simulator's answer, the ledger's
budget and the seed: the same inputs give the same bytes.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from decimal import Decimal
from fractions import Fraction
from typing import TYPE_CHECKING, Any

from cda.contracts import limits
from cda.contracts.receipt import Receipt, canonical_json, sha256_hex
from cda.errors import CDAError
from cda.guardian.decision import Decision, DecisionRecord
from cda.guardian.money import text
from cda.guardian.policies import PolicyStore, judge
from cda.guardian.proposal import Malformed, ProposedAction, read_action
from cda.guardian.simulation import BudgetLedger, Simulator
from cda.ir import show_number

if TYPE_CHECKING:
    from cda.contracts.receipt import ReceiptSink

__all__ = ["budget_refusal", "decimal_text", "evaluate", "receipt_for"]


def decimal_text(value: Fraction | Decimal) -> str:
    """An exact number as text: a Decimal as the ledger writes it (:func:`cda.guardian.money.text`),
    a Fraction as the engine writes one (:func:`cda.ir.show_number`)."""
    return text(value) if isinstance(value, Decimal) else show_number(value)


def _json_safe(value: Any, depth: int = 0) -> Any:
    """A simulator's summary as JSON canonical JSON can spell: non-finite floats become text,
    anything not JSON becomes its ``str``; nesting is cut at 16 levels."""
    if depth > 16:
        return "…"
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, Decimal | Fraction):
        return decimal_text(value)
    if isinstance(value, Mapping):
        return {str(k): _json_safe(v, depth + 1) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_json_safe(v, depth + 1) for v in value]
    return str(value)


def receipt_for(record: DecisionRecord, action_id: str, inputs: Mapping[str, Any]) -> Receipt:
    """The receipt of one decision: what was decided on (the hash of ``inputs``), with which
    seed, and the record itself (without its receipt id)."""
    return Receipt(
        action_id=action_id,
        seq=0,
        kind="verifier",
        name="guardian.evaluate",
        inputs_hash=sha256_hex(canonical_json(dict(inputs))),
        seed=str(record.seed),
        result=record.model_dump(mode="json", exclude={"receipt"}),
    )


def evaluate(
    action: ProposedAction | Malformed | str | bytes | Mapping[str, Any],
    policy_store: PolicyStore,
    simulator: Simulator | None,
    ledger: BudgetLedger | None,
    *,
    seed: int = 0,
    receipts: ReceiptSink | None = None,
) -> DecisionRecord:
    """Decide on ``action`` (a model, or a document to validate first) in the seed's order; see
    the module's docstring. ``simulator`` None skips the causal step, ``ledger`` None the budget
    step. The decision's receipt id is the SHA-256 of its receipt's canonical JSON; with
    ``receipts`` the receipt is appended to that hash-chained log."""
    seed = limits.seed("seed", seed)
    checked = action if isinstance(action, ProposedAction | Malformed) else read_action(action)
    inputs: dict[str, Any] = {"policies": policy_store.digest, "seed": seed}
    if isinstance(checked, Malformed):
        inputs["action"] = checked.digest
        record = DecisionRecord(decision=Decision.REJECT, reason="malformed_action",
                                details={"path": checked.path, "message": checked.message},
                                action_digest=checked.digest, seed=seed, policy_digest=policy_store.digest)  # fmt: skip
        return _with_receipt(record, "malformed", inputs, receipts)
    digest = checked.digest()
    inputs["action"] = digest
    record = _decide(checked, policy_store, simulator, ledger, seed, digest, inputs)
    return _with_receipt(record, checked.action_id, inputs, receipts)


def _with_receipt(record: DecisionRecord, action_id: str, inputs: dict[str, Any], receipts: ReceiptSink | None) -> DecisionRecord:
    receipt = receipt_for(record, action_id, inputs)
    if receipts is not None:
        receipts.append(receipt)
    return record.model_copy(update={"receipt": sha256_hex(canonical_json(receipt.model_dump(mode="json")))})


def _simulation_fields(sim_id: str, summary: Any) -> dict[str, Any]:
    """What names a simulation in a DecisionRecord: its id, and (when the simulator's summary says
    them, as the causal model's does) its sample count and model digest."""
    fields: dict[str, Any] = {"sim_id": sim_id}
    if isinstance(summary, Mapping):
        samples, model = summary.get("samples"), summary.get("model_digest")
        if isinstance(samples, int) and not isinstance(samples, bool) and samples >= 0:
            fields["samples"] = samples
        if isinstance(model, str):
            fields["model_digest"] = model
    return fields


def budget_refusal(action: ProposedAction, policy_store: PolicyStore, problem: str, *, seed: int = 0,
                   receipts: ReceiptSink | None = None) -> DecisionRecord:
    """ESCALATE ``budget_exceeded`` for an approved action whose reservation the CFO ledger
    refused (another call spent the budget between the check and the reservation), with its own
    receipt: what :meth:`cda.guardian.gate.Gate.call` answers instead of running the tool."""
    digest = action.digest()
    record = DecisionRecord(decision=Decision.ESCALATE, reason="budget_exceeded",
                            details={"agent_id": action.agent_id, "cost": text(action.cost_estimate),
                                     "currency": action.currency, "error": problem},
                            action_digest=digest, seed=seed, policy_digest=policy_store.digest)  # fmt: skip
    inputs = {"policies": policy_store.digest, "seed": seed, "action": digest, "reservation": "refused"}
    return _with_receipt(record, action.action_id, inputs, receipts)


def _decide(action: ProposedAction, store: PolicyStore, simulator: Simulator | None, ledger: BudgetLedger | None,
            seed: int, digest: str, inputs: dict[str, Any]) -> DecisionRecord:  # fmt: skip
    simulated: dict[str, Any] = {}  # what names the simulation, once it has run

    def record(decision: Decision, reason: str, details: dict[str, Any]) -> DecisionRecord:
        return DecisionRecord(decision=decision, reason=reason, details=details, action_digest=digest, seed=seed,
                              policy_digest=store.digest, **simulated)

    verdict = judge(store, action, seed=seed)
    matched = list(verdict.matched)
    if verdict.violation is not None:
        return record(Decision.REJECT, f"policy:{verdict.violation.policy}", {**verdict.violation.to_json(), "matched": matched})
    soft = {"soft_score": decimal_text(verdict.soft_score), "soft_violated": list(verdict.soft_violated)}
    floor = store.get_threshold("min_soft_score")
    if verdict.soft_score < floor:
        return record(Decision.ESCALATE, f"policy:{verdict.soft_violated[0]}",
                      {**soft, "min_soft_score": decimal_text(floor), "matched": matched})  # fmt: skip

    if ledger is not None and action.cost_estimate > 0:
        try:
            remaining = ledger.remaining(action.agent_id, action.currency)
            fits = ledger.within_budget(action.agent_id, action.cost_estimate, action.currency)
        except CDAError as exc:
            return record(Decision.ESCALATE, "budget_exceeded", {"error": f"the ledger cannot answer: {exc}"})
        inputs["remaining"] = decimal_text(remaining)
        if not fits:
            return record(Decision.ESCALATE, "budget_exceeded",
                          {"agent_id": action.agent_id, "cost": decimal_text(action.cost_estimate),
                           "currency": action.currency, "remaining": decimal_text(remaining)})  # fmt: skip

    risk: dict[str, Any] = {"risk": None, "sim_id": None}
    if simulator is not None:
        threshold = store.get_threshold("max_auto_launch_risk")
        try:
            prediction = simulator.simulate(action, seed=seed)
            score, sim_id, summary = prediction.risk_score, str(prediction.id), _json_safe(dict(prediction.summary))
        except CDAError as exc:
            return record(Decision.ESCALATE, "causal_risk", {"error": f"the simulation failed: {exc}"})
        inputs["simulation"] = sim_id
        simulated.update(_simulation_fields(sim_id, summary))
        valid = isinstance(score, float | int) and not isinstance(score, bool) and math.isfinite(score) and 0 <= score <= 1
        if not valid:
            return record(Decision.ESCALATE, "causal_risk", {"error": f"the simulator's risk {score!r} is not a number in [0, 1]",
                                                             "sim_id": sim_id})  # fmt: skip
        details = {"risk": float(score), "threshold": decimal_text(threshold), "sim_id": sim_id, "approximate": True}
        if Fraction(score) > threshold:
            return record(Decision.ESCALATE, "causal_risk", {**details, "summary": summary})
        risk = details
    return record(Decision.APPROVE, "policy_clear", {**risk, **soft, "matched": matched})
