"""Approvals given as input (docs/actions.md, "Approvals as input"): what one Action may do beyond its standing policy.

``policies.egress`` and ``policies.pii_posture`` are the run's standing posture. An *approval*
in ``policies.approvals`` grants one more thing for this action only:

=====================  =====================================================================
grant                  effect
=====================  =====================================================================
``egress:partner``     a ``partner`` endpoint may be called although ``policies.egress`` is ``local``
``egress:external``    an ``external`` (or partner) endpoint may be called whatever ``policies.egress`` says
``pii:consent``        with ``pii_posture: consent``, text is sent to the provider unredacted
=====================  =====================================================================

Under ``pii_posture: on`` text is always redacted (an approval does not lift ``on``); under
``off`` it is never redacted. Other strings in ``approvals`` are kept (they may be meant for
another ability) and have no effect here.

Every decision is receipted by :func:`record_decision`: a use (by policy or by which approval)
is a receipt with status ``ok``; a refusal - an approval that was needed and not given - is a
``denied`` stub, which the evidence bundle lists under ``missing_evidence``.

For a caller that asks a person (the service's ToolBus): :func:`needed_approvals` says which
grants a run would need, :func:`approve` and :func:`deny` return the inputs with a grant added
or removed; the run itself never waits.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from cda.actions.receipts_sink import Recorder
from cda.contracts.action import CDAInputs
from cda.contracts.receipt import ReceiptKind

__all__ = [
    "GRANTS",
    "Decision",
    "approve",
    "deny",
    "egress_decision",
    "needed_approvals",
    "pii_decision",
    "record_decision",
]

GRANTS: tuple[str, ...] = ("egress:partner", "egress:external", "pii:consent")
"""The approvals CDA understands."""

_RANK = {"local": 0, "partner": 1, "external": 2}


@dataclass(frozen=True)
class Decision:
    """Whether something may happen, on what ground, and the sentence a receipt carries."""

    what: str  # "egress:external", "pii:consent"
    allowed: bool
    by: Literal["policy", "approval", "refused"]
    reason: str


def _check(grants: tuple[str, ...]) -> None:
    unknown = [g for g in grants if g not in GRANTS]
    if unknown:
        raise ValueError(f"unknown approval {unknown[0]!r}; CDA understands {', '.join(GRANTS)}")


def approve(inputs: CDAInputs, *grants: str) -> CDAInputs:
    """The inputs with ``grants`` added to ``policies.approvals`` (each once, order kept).

    >>> approve(CDAInputs(problem="p"), "egress:external").policies.approvals
    ['egress:external']
    """
    _check(grants)
    have = list(inputs.policies.approvals)
    have += [g for g in grants if g not in have]
    return inputs.model_copy(update={"policies": inputs.policies.model_copy(update={"approvals": have})})


def deny(inputs: CDAInputs, *grants: str) -> CDAInputs:
    """The inputs with ``grants`` removed from ``policies.approvals``: the run will refuse them."""
    _check(grants)
    kept = [g for g in inputs.policies.approvals if g not in grants]
    return inputs.model_copy(update={"policies": inputs.policies.model_copy(update={"approvals": kept})})


def egress_decision(inputs: CDAInputs, egress_class: Literal["partner", "external"]) -> Decision:
    """May this action call an endpoint of ``egress_class``?

    >>> egress_decision(CDAInputs(problem="p"), "external").by
    'refused'
    """
    policies = inputs.policies
    what = f"egress:{egress_class}"
    if _RANK[egress_class] <= _RANK[policies.egress]:
        return Decision(what, True, "policy", f"policies.egress '{policies.egress}' allows {egress_class}")
    granting = [g for g in ("egress:partner", "egress:external")
                if g in policies.approvals and _RANK[g.split(":")[1]] >= _RANK[egress_class]]
    if granting:
        return Decision(what, True, "approval", f"approval {granting[0]!r} grants {egress_class} for this action")
    return Decision(what, False, "refused",
                    f"policies.egress '{policies.egress}' forbids {egress_class} and no approval "
                    f"'egress:{egress_class}' was given")


def pii_decision(inputs: CDAInputs) -> Decision:
    """Whether personal data may leave unredacted: only under ``consent`` with ``pii:consent``."""
    posture = inputs.policies.pii_posture
    if posture == "off":
        return Decision("pii:consent", True, "policy", "pii_posture 'off': text is sent as written")
    if posture == "on":
        return Decision("pii:consent", False, "policy", "pii_posture 'on': personal data is redacted")
    if "pii:consent" in inputs.policies.approvals:
        return Decision("pii:consent", True, "approval", "approval 'pii:consent' lets text leave unredacted")
    return Decision("pii:consent", False, "refused",
                    "pii_posture 'consent' without approval 'pii:consent': personal data is redacted")


def needed_approvals(inputs: CDAInputs) -> list[str]:
    """The grants this run would ask for and does not have (what a service asks a person)."""
    needed: list[str] = []
    if inputs.llm.provider == "openai" and not egress_decision(inputs, inputs.llm.egress_class).allowed:
        needed.append(f"egress:{inputs.llm.egress_class}")
    if inputs.llm.provider == "openai" and pii_decision(inputs).by == "refused":
        needed.append("pii:consent")
    return needed


def record_decision(recorder: Recorder, decision: Decision, call: str) -> None:
    """One receipt per decision: ``approval.used`` (ok) or ``approval.refused`` (a denied stub)."""
    name = "approval.used" if decision.by == "approval" else "approval.policy" if decision.by == "policy" \
        else "approval.refused"
    status = "denied" if decision.by == "refused" else "ok"
    kind: ReceiptKind = "stub" if decision.by == "refused" else "action"
    recorder.record(kind, name, {"grant": decision.what, "call": call},
                    {"allowed": decision.allowed, "by": decision.by, "reason": decision.reason}, status=status)
