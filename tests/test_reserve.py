"""Spec §9's reserve, one rule: what CDA takes from a caller that escalates to it.

"CDA should reserve ~20% of wall time (>= 20 s) upon escalation; if less remains, emit partial
with explicit caveats." Two rules used to stand for that line: the escalation's
``max(0.2 * remaining, 20 s)`` and the action budget's ``max(0.2 W, min(20 s, W / 2))`` (a share
of the action's own wall kept back for its summary). The line is about escalation, so the first
is the rule (``cda.actions.budget.reserve``) and the escalation uses it; the action keeps only a
finishing margin (tests/test_budget_realtime.py).
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from cda.actions.budget import RESERVE_FLOOR_S, RESERVE_SHARE, reserve
from cda.service.escalation import decide
from cda.service.protocol import Escalation

SIGNALS = ["contradictions", "policy_risk"]


def test_a_fifth_of_what_remains_at_least_twenty_seconds() -> None:
    assert (RESERVE_SHARE, RESERVE_FLOOR_S) == (0.2, 20.0)
    assert reserve(1000) == 200 and reserve(300) == 60 and reserve(100) == 20 and reserve(40) == 20


@given(st.floats(min_value=1e-3, max_value=1e6, allow_nan=False))  # the ToolBus takes up to 10**6 s
def test_the_escalation_takes_the_reserve_or_ends_partial_at_once(remaining: float) -> None:
    d = decide(Escalation(signals=SIGNALS, wall_remaining=remaining), "low")
    assert d.escalate
    if remaining < RESERVE_FLOOR_S:  # less remains than CDA reserves: partial at once
        assert d.short and d.wall == remaining
    else:
        assert not d.short and d.wall == reserve(remaining) == max(0.2 * remaining, 20.0)
        assert d.wall <= remaining  # never more than the caller has
