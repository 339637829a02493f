"""The one rule by which a check changes a verdict: every ceiling applied at once with ``min``.

A verifier returns outcomes with ceilings; only ``under_ceilings`` turns them into the final
status and confidence (cda/verifiers/protocol.py). The property: whatever the checks say, in
whatever order, a verdict never goes up, a refutation is never made, and the answer is the
lowest ceiling.
"""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cda.actions.checks import VERIFIERS
from cda.contracts.status import VerdictStatus
from cda.verifiers.llm_gate import LLMJudgement, apply_llm_gate, llm_ceiling
from cda.verifiers.protocol import Ceiling, Outcome, under_ceilings

statuses = st.sampled_from(list(VerdictStatus))
confidences = st.floats(min_value=0.0, max_value=1.0, allow_nan=False)
ceilings = st.builds(Ceiling, st.sampled_from([VerdictStatus.INCONCLUSIVE, VerdictStatus.SUPPORTED]), confidences)


@given(statuses, confidences, st.lists(ceilings, max_size=8), st.randoms())
def test_no_ceiling_ever_raises_a_verdict(status: VerdictStatus, confidence: float, caps: list[Ceiling], rnd) -> None:  # type: ignore[no-untyped-def]
    new_status, new_confidence = under_ceilings(status, confidence, caps)
    assert new_status <= status and new_confidence <= confidence
    # only a solver refutes: a check never makes a refutation, and never undoes one
    assert (new_status is VerdictStatus.REFUTED) == (status is VerdictStatus.REFUTED)
    # the lowest ceiling decides, whatever the order the checks ran in
    shuffled = list(caps)
    rnd.shuffle(shuffled)
    assert under_ceilings(status, confidence, shuffled) == (new_status, new_confidence)
    assert new_confidence == min([confidence, *(c.confidence for c in caps)])
    if status is VerdictStatus.SUPPORTED:
        opened = any(c.status is VerdictStatus.INCONCLUSIVE for c in caps)
        assert new_status is (VerdictStatus.INCONCLUSIVE if opened else VerdictStatus.SUPPORTED)


@given(statuses, confidences, st.sampled_from(["yes", "no", "unsure"]), st.none() | confidences,
       st.lists(st.text(min_size=1, max_size=4), max_size=2))
def test_the_llm_gate_is_its_ceiling(status: VerdictStatus, confidence: float, agrees: str,  # type: ignore[no-untyped-def]
                                     own: float | None, flagged: list[str]) -> None:
    judgement = LLMJudgement(provider="p", agrees=agrees, confidence=own, flagged=flagged)
    ceiling = llm_ceiling(status, confidence, judgement)
    assert apply_llm_gate(status, confidence, judgement)[:2] == under_ceilings(status, confidence, [ceiling])


@pytest.mark.parametrize("bad", [float("nan"), -0.1, 1.5, math.inf])
def test_a_ceiling_is_a_probability(bad: float) -> None:
    with pytest.raises(ValueError, match="confidence cap"):
        Ceiling(confidence=bad)


def test_no_check_may_refute() -> None:
    with pytest.raises(ValueError, match="never at refuted"):
        Ceiling(VerdictStatus.REFUTED)


def test_an_outcome_caps_the_claims_it_names() -> None:
    everyone = Outcome(ceiling=Ceiling.open(0.5, "x"))
    some = Outcome(ceiling=Ceiling.open(0.5, "x"), claims=(1,))
    none = Outcome(ceiling=Ceiling.open(0.5, "x"), claims=())
    evidence_only = Outcome()
    assert [everyone.caps(i) for i in range(3)] == [True, True, True]
    assert [some.caps(i) for i in range(3)] == [False, True, False]
    assert not any(none.caps(i) or evidence_only.caps(i) for i in range(3))


def test_every_check_of_an_action_is_a_verifier() -> None:
    names = [v.name for v in VERIFIERS]
    assert len(names) == len(set(names)) == 9
    assert all(callable(getattr(v, "verify", None)) for v in VERIFIERS)
