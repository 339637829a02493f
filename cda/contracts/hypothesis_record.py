"""A competing hypothesis as a record, and the trace of one reasoning step (docs/investigate.md, "The records").

``HypothesisRecord`` is the hypothesis record of docs/investigate.md: what the hypothesis says, what it
assumes, the evidence on each side, what would refute it, a confidence in [0, 1] and the next
probe. The seed writes evidence as plain sentences; CDA cites where it can, so an evidence item
is either a sentence or a :class:`~cda.contracts.refs.SpanRef` whose ``excerpt`` is the sentence
and whose ``source`` says where it came from. ``TraceRecord`` is the investigation's "Trace JSON
template": an internal observability record (never streamed to clients), small enough to pin.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, model_validator

from cda.contracts.refs import SpanRef

__all__ = ["Evidence", "HypothesisRecord", "TraceRecord"]

Evidence = str | SpanRef
"""A sentence (the seed's form) or a cited span (CDA's form)."""


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class HypothesisRecord(_Model):
    """One competing hypothesis. The step to take next is the one whose ``next_probe`` is
    expected to reduce uncertainty most."""

    id: str = Field(min_length=1, description="stable within the cycle, e.g. 'H1'")
    statement: str
    assumptions: list[str] = Field(default_factory=list, description="explicit assumptions (abducibles assumed)")
    evidence_for: list[Evidence] = Field(default_factory=list)
    evidence_against: list[Evidence] = Field(default_factory=list)
    falsifiers: list[str] = Field(default_factory=list, description="observations that would refute it")
    falsifiers_note: str | None = Field(
        default=None, exclude_if=lambda note: note is None,  # the seed's template round-trips unchanged
        description="why falsifiers is empty when it is (the hypothesis predicts nothing observable)")
    confidence: float = Field(ge=0.0, le=1.0)
    next_probe: str | None = Field(default=None, description="the next test step; None when nothing is left to probe")


class TraceRecord(_Model):
    """The state of thinking at one step (the hypothesis record's trace: docs/investigate.md)."""

    focus_subsystem: str
    global_invariants: list[str] = Field(default_factory=list)
    candidate_hypotheses: list[HypothesisRecord] = Field(default_factory=list)
    selected_hypothesis_id: str | None = None
    selected_hypothesis_reason: str | None = None
    integration_risks: list[str] = Field(default_factory=list)
    confidence: float | None = Field(default=None, ge=0.0, le=1.0)
    policy_fallback_applied: bool = False

    @model_validator(mode="after")
    def _consistent_ids(self) -> TraceRecord:
        ids = [h.id for h in self.candidate_hypotheses]
        dup = sorted({i for i in ids if ids.count(i) > 1})
        if dup:
            raise ValueError(f"candidate_hypotheses: id {dup[0]!r} appears twice")
        if self.selected_hypothesis_id is not None and self.selected_hypothesis_id not in ids:
            raise ValueError(
                f"selected_hypothesis_id {self.selected_hypothesis_id!r} is not among the candidates "
                f"({', '.join(ids) or 'none'})"
            )
        return self
