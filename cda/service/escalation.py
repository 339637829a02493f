"""CUP -> CDA escalation (spec §9): when an upstream caller may hand a decision to CDA, and with what time.

Escalate when **any 2 of the 5 signals** fire (contradictions in evidence, high doubt, a low
confidence band, policy risk, a critical decision), or at once for ``risk_class: "hard"`` (the
runner then escalates to a person before any search). CDA reserves about **20%** of the caller's
remaining wall time, at least **20 s** (:func:`cda.actions.budget.reserve`, the one rule for that
line of the spec); when less than that remains, the action is a terminal ``action_partial`` at
once, with the caveat saying why and the test that would help.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from cda.actions.budget import RESERVE_FLOOR_S, reserve
from cda.service.protocol import Escalation

__all__ = ["EscalationDecision", "decide"]

SIGNALS_NEEDED = 2


@dataclass(frozen=True)
class EscalationDecision:
    escalate: bool
    reason: str
    wall: float | None = None  # the CDA budget (seconds) reserved, None: the inputs' own
    short: bool = False  # less than the reserve remains: partial at once
    fired: list[str] = field(default_factory=list)


def decide(escalation: Escalation, risk_class: str) -> EscalationDecision:
    """Whether to escalate and the wall time CDA gets.

    >>> decide(Escalation(signals=["high_doubt"]), "low").escalate
    False
    >>> d = decide(Escalation(signals=["high_doubt", "policy_risk"], wall_remaining=300), "low")
    >>> (d.escalate, d.wall, d.short)
    (True, 60.0, False)
    >>> decide(Escalation(signals=["high_doubt", "policy_risk"], wall_remaining=12), "low").short
    True
    """
    fired: list[str] = [str(s) for s in escalation.signals]
    if risk_class == "hard":
        return EscalationDecision(True, "risk_class 'hard': escalated at once", fired=fired)
    if len(fired) < SIGNALS_NEEDED:
        return EscalationDecision(False, f"{len(fired)} of 5 signals fired ({', '.join(fired) or 'none'}); "
                                  f"escalation needs {SIGNALS_NEEDED} (spec §9)", fired=fired)
    remaining = escalation.wall_remaining
    if remaining is None:
        return EscalationDecision(True, f"{len(fired)} of 5 signals fired", fired=fired)
    wall = reserve(remaining)
    if remaining < wall:
        return EscalationDecision(True, f"only {remaining:g} s of wall time remain, less than the "
                                        f"{RESERVE_FLOOR_S:g} s CDA reserves", wall=remaining, short=True, fired=fired)
    return EscalationDecision(True, f"{len(fired)} of 5 signals fired; {wall:g} s reserved", wall=wall, fired=fired)
