"""The downgrade-only LLM gate: what a language model says may lower a verdict, never raise one.

CDA states *supported* or *refuted* only when a solver proves it. A language model is a useful
second reader (it notices a number or a name in a claim that the evidence never mentions), but
its word is not proof, so everything it says passes through :func:`apply_llm_gate`, the one
function that turns a judgement into a change of verdict. The gate can only

- lower a confidence (``min`` with a cap derived from the judgement), and
- move *supported* to *inconclusive*.

*refuted* stays refuted, *inconclusive* stays inconclusive, and a judgement that is missing or
malformed changes nothing. The caps, precisely (``cap`` starts at 1.0):

========================================  ==========================================
judgement                                  effect
========================================  ==========================================
``agrees == "no"``                         cap 0.5, supported -> inconclusive
``flagged`` not empty                      cap 0.5, supported -> inconclusive
``agrees == "unsure"``                     cap 0.8
``confidence`` given                       cap at it; below 0.5, supported -> inconclusive
no judgement where one was required        cap 0.5, supported -> inconclusive
                                           (:func:`fail_closed`)
========================================  ==========================================

A provider may also answer in the low-coverage verifier contract (docs/actions.md, "Abstention") (``status``
``OK | NEEDS_REWRITE | ABSTAIN`` with typed ``problems``); :class:`LLMJudgement` keeps that
status and the problems, and reads ``OK`` as agreement and the other two as disagreement.

The caps combine by ``min``; the returned confidence is ``min(confidence, cap)``. A judgement's
``confidence`` has the meaning a verdict's has: the provider's probability that the claim holds.
"""

from __future__ import annotations

import math
import threading
from typing import Literal, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from cda.contracts.abstain import CausalChain, CoverageFigures, CoverageReport, EpistemicReport, RootCause
from cda.contracts.status import VerdictStatus
from cda.contracts.verification import VerifierOutcome, VerifierStatus
from cda.errors import CDAError
from cda.verifiers.protocol import Ceiling, under_ceilings

__all__ = [
    "BoundedLLMProvider",
    "LLMJudgement",
    "LLMProvider",
    "LLMProviderError",
    "ReviewContext",
    "ReviewProblem",
    "Status",
    "DISAGREE_CAP",
    "TokenMeter",
    "UNSURE_CAP",
    "apply_llm_gate",
    "consult",
    "fail_closed",
    "fail_closed_ceiling",
    "judgement_cap",
    "llm_ceiling",
    "llm_outcome",
]

#: a verdict's status as the gate takes it: the ordered enum, or its string
Status = VerdictStatus | str

DISAGREE_CAP = 0.5
"""Highest confidence a claim keeps when the LLM disagrees or flags an unsupported fragment."""

UNSURE_CAP = 0.8
"""Highest confidence a claim keeps when the LLM says it is unsure."""

_STATUSES: tuple[str, ...] = ("supported", "refuted", "inconclusive", "unknown")  # unknown: kept, never raised


class LLMProviderError(CDAError, RuntimeError):
    """An LLM provider gave no usable judgement: HTTP error, timeout, or a malformed reply.

    Callers treat it as "no judgement", which the gate reads as "no change".
    """


ReviewStatus = Literal["OK", "NEEDS_REWRITE", "ABSTAIN"]
ProblemType = Literal[
    "UNSUPPORTED_METRIC", "UNGROUNDED_ROOT_CAUSE", "UNGROUNDED_NODE", "UNKNOWN_NODE", "UNGROUNDED_OBSERVATION"
]


class ReviewProblem(BaseModel):
    """One typed problem of the seed-001 verifier contract: what, where (``span``) and the fix."""

    model_config = ConfigDict(extra="forbid")

    type: ProblemType
    span: str
    fix: Literal["remove", "downgrade_to_hypothesis", "abstain"]


class LLMJudgement(BaseModel):
    """What one LLM provider says about one claim against the evidence it was shown."""

    model_config = ConfigDict(extra="forbid")

    provider: str = Field(description="the provider's name, e.g. 'offline' or 'http:<model>'")
    agrees: Literal["yes", "no", "unsure"] = Field(description="does the evidence support the claim?")
    confidence: float | None = Field(
        default=None, ge=0.0, le=1.0, strict=True,  # true or "1" is not a probability: out of contract
        description="the provider's probability that the claim holds (None: it gave none)",
    )
    flagged: list[str] = Field(
        default_factory=list, description="claim fragments with no support in the evidence"
    )
    rationale: str = Field(default="", description="one or two sentences a person can read")
    review_status: ReviewStatus | None = Field(
        default=None, description="set when the provider answered in the abstain gate's verifier contract (docs/actions.md, Abstention)"
    )
    problems: list[ReviewProblem] = Field(default_factory=list, description="the contract's typed problems")
    rewritten_report: str = Field(
        default="", max_length=100_000,
        description="the verifier contract's rewritten report (text; shown to the reader, never a verdict)")
    tokens: int | None = Field(default=None, ge=0, description="tokens the provider reported for this call")


class CKGSummary(BaseModel):
    """What Ken's traversal found, as the verifier is shown it: root causes, chains, nodes reached."""

    model_config = ConfigDict(extra="forbid")

    root_causes: list[RootCause] = Field(default_factory=list)
    causal_chains: list[CausalChain] = Field(default_factory=list)
    traversal_nodes: list[str] = Field(default_factory=list)


class ReviewContext(BaseModel):
    """What the low-coverage verifier is given beside the claim (docs/actions.md, "The LLM
    verifier"): the draft report, the observations verbatim, a summary of Ken's traversal and the
    coverage report with the reasons it is low. A provider that takes it reads the whole draft, not
    one claim alone; one that does not (the offline checker) judges the claim as before."""

    model_config = ConfigDict(extra="forbid")

    draft_report: EpistemicReport | None = Field(description="the run's report before any review (None: it could not be built)")
    observations: list[str] = Field(description="the input observations, verbatim")
    ckg: CKGSummary
    coverage: CoverageFigures
    low_coverage: list[str] = Field(description="why coverage is low, one line per trigger; empty when it is not")

    @classmethod
    def of(cls, draft: EpistemicReport | None, coverage: CoverageReport, low: list[str]) -> ReviewContext:
        """The context of a run whose coverage is ``coverage`` and whose draft is ``draft``."""
        return cls(
            draft_report=draft, observations=list(coverage.observations),
            ckg=CKGSummary(root_causes=coverage.root_causes, causal_chains=coverage.causal_chains,
                           traversal_nodes=coverage.traversal_nodes()),
            coverage=coverage.figures(), low_coverage=list(low),
        )


@runtime_checkable
class LLMProvider(Protocol):
    """Anything that can judge a claim against evidence strings (offline rules, an HTTP model …)."""

    name: str

    def judge(self, claim: str, evidence: list[str]) -> LLMJudgement:
        """Judge ``claim`` against ``evidence``; raise :class:`LLMProviderError` when no answer."""
        ...


class TokenMeter:
    """Provider tokens of one action against ``budgets.tokens`` (``None``: counted, not limited).

    A call first *reserves* its worst case (prompt estimate + the reply cap it asks for); a
    reservation that does not fit is refused, so concurrent calls cannot overshoot together.
    When the reply arrives the reservation is *settled* at the provider's ``usage`` figure.
    Thread-safe: the calls for several claims run at once.

    >>> meter = TokenMeter(100)
    >>> meter.reserve(80), meter.reserve(30)
    (True, False)
    >>> meter.settle(80, 25); meter.spent, meter.reserve(70)
    (25, True)
    """

    def __init__(self, limit: int | None) -> None:
        self.limit = limit
        self.spent = 0
        self.reserved = 0
        self._lock = threading.Lock()

    def reserve(self, tokens: int) -> bool:
        with self._lock:
            if self.limit is not None and self.spent + self.reserved + tokens > self.limit:
                return False
            self.reserved += tokens
            return True

    def settle(self, reserved: int, actual: int) -> None:
        with self._lock:
            self.reserved -= reserved
            self.spent += max(0, actual)

    def exhausted(self) -> bool:
        with self._lock:
            return self.limit is not None and self.spent >= self.limit


@runtime_checkable
class BoundedLLMProvider(Protocol):
    """A provider that can keep a deadline (``time.monotonic()`` seconds) and a token meter."""

    name: str

    def judge_bounded(
        self, claim: str, evidence: list[str], deadline: float | None, meter: TokenMeter | None,
        context: ReviewContext | None = None,
    ) -> LLMJudgement:
        """:meth:`LLMProvider.judge` that gives up (``LLMProviderError``) at ``deadline`` and is
        shown ``context`` (the draft, the observations, Ken's summary, the coverage) when given."""
        ...


def _valid(judgement: object) -> LLMJudgement | None:
    """Re-validate a judgement (it may have been built with ``model_construct``); None if malformed."""
    if not isinstance(judgement, LLMJudgement):
        return None
    fields = {name: getattr(judgement, name, None) for name in LLMJudgement.model_fields}
    try:
        return LLMJudgement.model_validate(fields, strict=True)
    except ValidationError:
        return None


def judgement_cap(judgement: LLMJudgement | None) -> tuple[float, bool, list[str]]:
    """The cap a judgement puts on confidence, whether it demotes *supported*, and the reasons.

    A missing or malformed judgement gives ``(1.0, False, [])``: no cap, no demotion.

    >>> judgement_cap(LLMJudgement(provider="p", agrees="unsure"))
    (0.8, False, ['unsure'])
    >>> judgement_cap(LLMJudgement(provider="p", agrees="yes", flagged=["3.5"]))
    (0.5, True, ["flagged 1 unsupported fragment(s): '3.5'"])
    """
    valid = _valid(judgement)
    if valid is None:
        return 1.0, False, []
    cap = 1.0
    demote = False
    reasons: list[str] = []
    if valid.review_status in ("NEEDS_REWRITE", "ABSTAIN"):
        cap, demote = min(cap, DISAGREE_CAP), True
        kinds = ", ".join(sorted({p.type for p in valid.problems})) or "no problem listed"
        reasons.append(f"verifier {valid.review_status} ({kinds})")
    elif valid.agrees == "no":
        cap, demote = min(cap, DISAGREE_CAP), True
        reasons.append("disagrees")
    elif valid.agrees == "unsure":
        cap = min(cap, UNSURE_CAP)
        reasons.append("unsure")
    if valid.flagged:
        cap, demote = min(cap, DISAGREE_CAP), True
        shown = ", ".join(repr(f) for f in valid.flagged[:10])
        more = f" and {len(valid.flagged) - 10} more" if len(valid.flagged) > 10 else ""
        reasons.append(f"flagged {len(valid.flagged)} unsupported fragment(s): {shown}{more}")
    if valid.confidence is not None and valid.confidence < cap:
        cap = valid.confidence
        reasons.append(f"own confidence {valid.confidence:.4g}")
    if cap < DISAGREE_CAP:
        demote = True
    return cap, demote, reasons


def llm_ceiling(status: Status, confidence: float, judgement: LLMJudgement | None) -> Ceiling:
    """The :class:`~cda.verifiers.protocol.Ceiling` a judgement puts on a verdict of ``status`` and
    ``confidence``: the judgement's cap, *inconclusive* when it demotes, and caveats saying what
    it changes (none when it changes nothing; no judgement: no ceiling at all).

    >>> c = llm_ceiling("supported", 1.0, LLMJudgement(provider="offline", agrees="unsure"))
    >>> (c.status, c.confidence, c.caveats)
    ('supported', 0.8, ('llm offline: confidence 1 -> 0.8 (unsure)',))
    """
    old = _checked_verdict(status, confidence)
    valid = _valid(judgement)
    if valid is None:
        return Ceiling()
    cap, demote, reasons = judgement_cap(valid)
    ceiling = Ceiling(VerdictStatus.INCONCLUSIVE if demote else VerdictStatus.SUPPORTED, cap)
    new_status, new_confidence = under_ceilings(old, confidence, [ceiling])
    why = "; ".join(reasons)
    caveats: list[str] = []
    if new_status != old:
        caveats.append(f"llm {valid.provider}: {old} -> {new_status} ({why})")
    if new_confidence < confidence:
        caveats.append(f"llm {valid.provider}: confidence {confidence:.4g} -> {new_confidence:.4g} ({why})")
    return Ceiling(ceiling.status, cap, tuple(caveats))


def _checked_verdict(status: Status, confidence: float) -> VerdictStatus:
    if not isinstance(status, str) or status not in _STATUSES:
        raise ValueError(f"status must be one of {', '.join(_STATUSES)}; got {status!r}")
    if not isinstance(confidence, int | float) or math.isnan(confidence) or not 0.0 <= confidence <= 1.0:
        raise ValueError(f"confidence must be a number in [0, 1]; got {confidence!r}")
    return VerdictStatus(status)


def apply_llm_gate(
    status: Status, confidence: float, judgement: LLMJudgement | None
) -> tuple[VerdictStatus, float, list[str]]:
    """THE gate: apply an LLM judgement to a verdict, only ever downwards.

    Returns the new status, the new confidence (never above ``confidence``) and caveats saying
    what the LLM changed (empty when it changed nothing). Both are lowered by a ``min``: the
    confidence under the judgement's cap, the status under a ceiling of *inconclusive* when the
    judgement demotes (:class:`~cda.contracts.status.VerdictStatus` orders refuted < inconclusive
    < supported), so only *supported* can move, and only to *inconclusive*.

    >>> j = LLMJudgement(provider="offline", agrees="no", flagged=["40%"])
    >>> status, confidence, _ = apply_llm_gate("supported", 1.0, j)
    >>> print(status, confidence)
    inconclusive 0.5
    >>> apply_llm_gate("refuted", 0.0, LLMJudgement(provider="x", agrees="yes", confidence=1.0)) == ("refuted", 0.0, [])
    True
    >>> apply_llm_gate("supported", 1.0, None) == ("supported", 1.0, [])
    True
    """
    ceiling = llm_ceiling(status, confidence, judgement)
    new_status, new_confidence = under_ceilings(status, float(confidence), [ceiling])
    return new_status, new_confidence, list(ceiling.caveats)


def llm_outcome(claim: str, judgement: LLMJudgement | None) -> VerifierOutcome:
    """The judgement as a :class:`VerifierOutcome` of verifier ``"llm"`` with its confidence cap.

    ``failed`` when the judgement would demote a supported claim, ``inconclusive`` when the
    provider is unsure, ``passed`` otherwise; ``skipped`` when there is no (valid) judgement.

    >>> llm_outcome("db is down", LLMJudgement(provider="offline", agrees="yes")).status
    'passed'
    >>> llm_outcome("db is down", None).status
    'skipped'
    """
    valid = _valid(judgement)
    if valid is None:
        return VerifierOutcome(
            verifier="llm", claim=claim, status="skipped",
            detail="no usable LLM judgement (no provider, an error, or a malformed reply); nothing changed",
        )
    cap, demote, reasons = judgement_cap(valid)
    status: VerifierStatus = "failed" if demote else ("inconclusive" if valid.agrees == "unsure" else "passed")
    detail = f"llm {valid.provider}: {'; '.join(reasons) or 'agrees'}"
    if valid.rationale:
        detail += f" - {_one_line(valid.rationale)}"
    return VerifierOutcome(
        verifier="llm", claim=claim, status=status, detail=detail,
        confidence_cap=cap if cap < 1.0 else None,
        data=valid.model_dump(mode="json"),
    )


def consult(
    provider: LLMProvider, claim: str, evidence: list[str], *,
    deadline: float | None = None, meter: TokenMeter | None = None, context: ReviewContext | None = None,
) -> tuple[LLMJudgement | None, str | None]:
    """Ask a provider; a :class:`LLMProviderError` becomes ``(None, message)`` - no judgement.

    A :class:`BoundedLLMProvider` is given the deadline, the token meter and the review context
    (a plain :class:`LLMProvider` judges the claim against the evidence alone). A judgement that
    does not re-validate (built with ``model_construct``) is no judgement either. Any other
    exception is a bug in the provider and propagates.
    """
    try:
        if isinstance(provider, BoundedLLMProvider) and (deadline is not None or meter is not None or context):
            judgement = provider.judge_bounded(claim, list(evidence), deadline, meter, context)
        else:
            judgement = provider.judge(claim, list(evidence))
    except LLMProviderError as error:
        return None, str(error)
    if _valid(judgement) is None:
        return None, f"provider {getattr(provider, 'name', '?')} returned a judgement outside the contract"
    return judgement, None


def fail_closed(status: Status, confidence: float, reason: str) -> tuple[VerdictStatus, float, list[str]]:
    """A *required* LLM check delivered no judgement: the claim cannot stay settled.

    The same ceiling as a disagreement (:func:`fail_closed_ceiling`): *supported* becomes
    *inconclusive* and the confidence is capped at :data:`DISAGREE_CAP`; *refuted* stays refuted
    (only a solver refutes, and nothing an LLM fails to say makes a refutation weaker). The caveat
    names the reason.

    >>> fail_closed("supported", 1.0, "HTTP 503") == (
    ...     "inconclusive", 0.5, ["required LLM check gave no judgement (HTTP 503): supported -> inconclusive"])
    True
    """
    ceiling = fail_closed_ceiling(status, confidence, reason)
    new, capped = under_ceilings(status, float(confidence), [ceiling])
    return new, capped, list(ceiling.caveats)


def fail_closed_ceiling(status: Status, confidence: float, reason: str) -> Ceiling:
    """The ceiling of a required LLM check that gave no judgement on a verdict of ``status``."""
    old = _checked_verdict(status, confidence)
    new = min(old, VerdictStatus.INCONCLUSIVE)
    caveat = f"required LLM check gave no judgement ({reason})"
    caveat += f": {old} -> {new}" if new != old else f": confidence capped at {DISAGREE_CAP}"
    return Ceiling.open(DISAGREE_CAP, caveat)


def _one_line(text: str, limit: int = 200) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"
