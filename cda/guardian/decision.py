"""What the guardian answers: a :class:`Decision` and the :class:`DecisionRecord` that carries it.

The decisions are ordered by how far they hold an action back, ``APPROVE < ESCALATE < REJECT``,
so "a stricter input may only hold an action back further" is a ``max`` and the monotonicity the
gate promises (adding a hard policy never turns REJECT into APPROVE; lowering a budget never
turns ESCALATE into APPROVE) is a comparison a test can make.

The reasons are the gate's five (docs/guardian.md): ``malformed_action``, ``policy:<id>``, ``budget_exceeded``,
``causal_risk`` and ``policy_clear``; ``details`` says why in data (the path of the first
malformed field, the violated policy's minimal facts, the budget left, the simulated risk).
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from cda.contracts.status import OrderedStrEnum

__all__ = ["REASONS", "Decision", "DecisionRecord", "exit_code", "render"]


class Decision(OrderedStrEnum):
    """The gate's answer, least to most restrictive. Only APPROVE lets a side effect run."""

    APPROVE = "APPROVE"
    ESCALATE = "ESCALATE"
    REJECT = "REJECT"


#: The fixed reasons; a policy reason is ``policy:`` followed by the policy's id.
REASONS = ("malformed_action", "budget_exceeded", "causal_risk", "policy_clear")
_POLICY_REASON = re.compile(r"policy:[A-Za-z_][A-Za-z0-9_.:-]{0,127}")


class DecisionRecord(BaseModel):
    """One decision of the gate on one action, the same bytes for the same inputs and seed.

    ``action_digest`` is the SHA-256 of the action's canonical JSON (what was decided on);
    ``receipt`` is the id of the receipt that records the decision (empty until it is written).

    What produced the decision is part of it, so an APPROVE cannot be passed off as another's:
    ``policy_digest`` is the digest of the policy store it was decided under
    (:attr:`cda.guardian.policies.PolicyStore.digest`; a guardian file pins the one it accepts,
    :mod:`cda.guardian.execution`), and when the causal step ran, ``sim_id``, ``samples`` and
    ``model_digest`` name the simulation (empty / 0 when it did not run).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    decision: Decision
    reason: str
    details: dict[str, Any] = Field(default_factory=dict)
    action_digest: str = ""
    seed: int = 0
    policy_digest: str = ""
    sim_id: str = ""
    samples: int = Field(default=0, ge=0)
    model_digest: str = ""
    receipt: str = ""

    @field_validator("reason")
    @classmethod
    def _known_reason(cls, reason: str) -> str:
        if reason in REASONS or _POLICY_REASON.fullmatch(reason):
            return reason
        raise ValueError(f"unknown reason {reason!r}: one of {', '.join(REASONS)} or policy:<id>")

    @property
    def approved(self) -> bool:
        """Whether a side-effecting tool may run on this decision (only on APPROVE)."""
        return self.decision is Decision.APPROVE


def exit_code(decision: Decision) -> int:
    """``cda guard``'s exit status, from the CLI's one table: 0 approve (answered), 1 reject (a check
    failed), 3 escalate (not decided here: a human decides), 2 stays a usage error."""
    return {Decision.APPROVE: 0, Decision.REJECT: 1, Decision.ESCALATE: 3}[decision]

def render(record: DecisionRecord) -> str:
    """The decision in a few lines: the decision and reason, then the details that say why (what
    ``cda guard`` prints, and the text of the gateway's refusals)."""
    out = [f"{record.decision.value} {record.reason}"]
    details = record.details
    if record.reason == "malformed_action":
        out.append(f"  at {details['path']}: {details['message']}")
    elif "facts" in details:
        if details.get("problem"):
            out.append(f"  {details['problem']}")
        for fact in details["facts"]:
            out.append(f"  fact {fact['fact']} = {fact['value']}  ({', '.join(fact['paths'])})")
    else:
        money = {"cost", "remaining"}
        for key in ("cost", "remaining", "risk", "threshold", "sim_id", "soft_score", "soft_violated", "error"):
            value = details.get(key)
            if value is not None and value != []:
                shown = ", ".join(value) if isinstance(value, list) else value
                out.append(f"  {key}: {shown}{' ' + details['currency'] if key in money else ''}")
    out.append(f"  receipt: {record.receipt}")
    return "\n".join(out) + "\n"
