"""What one verifier says about one claim: a contribution to the verdict, never the verdict itself.

Verifiers are independent checks (units, temporal, arithmetic, function tests, Ken evidence,
cross-backend agreement, the LLM gate). Each returns a :class:`VerifierOutcome`; the action
combines them. ``status`` ``failed`` means the claim did not pass the check (or the check itself
could not run: a crash or timeout of a function evaluator is a failed check, with the reason).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from cda.contracts.refs import SpanRef

__all__ = ["VerifierOutcome", "VerifierStatus"]

VerifierStatus = Literal["passed", "failed", "inconclusive", "skipped"]


class VerifierOutcome(BaseModel):
    model_config = ConfigDict(extra="forbid")

    verifier: str = Field(description="'units', 'temporal', 'arithmetic', 'function', 'ken', 'agreement', 'llm', …")
    claim: str = Field(description="the claim or clause checked, as text")
    status: VerifierStatus
    detail: str = Field(description="one line a person can read: why it passed or failed")
    confidence_cap: float | None = Field(
        default=None, ge=0.0, le=1.0,
        description="the highest confidence the claim may keep after this check (None: no cap)",
    )
    citations: list[SpanRef] = Field(default_factory=list)
    data: dict[str, Any] = Field(default_factory=dict, description="machine-readable details (JSON-safe)")
