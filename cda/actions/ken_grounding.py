"""Seed 001 inside every Action: coverage, enforcement, the low-coverage verifier pass, the abstain rule.

The solver says which explanations are consistent; the abstain gate (docs/actions.md, "Abstention")
asks whether the knowledge graph, Ken, *grounds* them. After the solver and the other verifiers have run, this
step

1. builds the :class:`~cda.contracts.abstain.EpistemicReport` of the run (observations verbatim,
   Ken facts with node ids, hypotheses, a conclusion limited by coverage);
2. applies the enforcement rules (:func:`cda.verifiers.abstain.enforce`: no number that is not
   in an observation with its unit, no unknown node, observations verbatim) as downgrades;
3. runs the low-coverage verifier pass (:func:`cda.verifiers.abstain.low_coverage_review`) when,
   and only when, coverage is low; its ``OK | NEEDS_REWRITE | ABSTAIN`` and typed problems go
   into the outputs (``CDAOutputs.review``), a receipt and a ``verifier_update`` event;
4. decides abstention: the abstain rule, the review's ``ABSTAIN``, or an LLM verifier that
   answered ``ABSTAIN`` in the low-coverage verifier's contract while coverage is low.

What it returns is applied by the caller: confidence caps per hypothesis id (only ever
lowering), caveats, and the ABSTAIN output. Abstention applies when something is to be
explained (a Ken graph or observations were given) and no verdict is settled by proof.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from pydantic import ValidationError

from cda.actions.receipts_sink import Recorder
from cda.contracts.abstain import (
    BAND_CEILING,
    AbstainOutput,
    AbstainThresholds,
    CoverageReport,
    EpistemicReport,
    LowCoverageReview,
    Violation,
)
from cda.contracts.locations import validation_problems
from cda.contracts.result import SolveResult
from cda.ken.graph import KenGraph
from cda.verifiers.abstain import (
    apply_enforcement,
    enforce,
    epistemic_report,
    low_coverage_reasons,
    low_coverage_review,
    should_abstain,
)

__all__ = ["Grounding", "draft_report", "ground_in_ken"]


@dataclass
class Grounding:
    """What the abstain gate (docs/actions.md, Abstention) says about a run: caps per hypothesis id, caveats, the review, the abstain."""

    caps: dict[str, tuple[float, list[str]]] = field(default_factory=dict)
    caveats: list[str] = field(default_factory=list)
    review: LowCoverageReview | None = None
    abstain: AbstainOutput | None = None
    report: EpistemicReport | None = None  # the run's epistemic report, enforced (and rewritten on NEEDS_REWRITE)
    low: list[str] = field(default_factory=list)  # why coverage is low; empty when it is not
    violations: list[Violation] = field(default_factory=list)

    def cap(self, hypothesis_id: str, confidence: float, caveat: str) -> None:
        old, caveats = self.caps.get(hypothesis_id, (1.0, []))
        self.caps[hypothesis_id] = (min(old, confidence), [*caveats, caveat])


def _hypothesis_index(location: str) -> int | None:
    if location.startswith("hypotheses["):
        return int(location[len("hypotheses["):].split("]", 1)[0])
    return None


def _apply_violations(g: Grounding, violations: Sequence[Violation], ids: list[str], source: str) -> None:
    """Each violation lowers the hypothesis it sits in (a conclusion's: the first hypothesis)."""
    for v in violations:
        index = _hypothesis_index(v.location)
        if index is None and v.location.startswith("conclusion") and ids:
            index = 0
        if index is None or index >= len(ids):
            continue
        g.cap(ids[index], BAND_CEILING["low"], f"{source}: {v.kind} {v.span!r} at {v.location} ({v.detail})")


def draft_report(coverage: CoverageReport, thresholds: AbstainThresholds, result: SolveResult) -> EpistemicReport | None:
    """The run's report before enforcement and review (what the LLM verifier is shown); None when
    it cannot be built (:func:`ground_in_ken` then fails closed and says so)."""
    try:
        return epistemic_report(list(coverage.observations), coverage, result.hypotheses, result.verdicts,
                                thresholds=thresholds)
    except ValidationError:
        return None


def ground_in_ken(
    coverage: CoverageReport,
    thresholds: AbstainThresholds,
    ken: KenGraph | None,
    result: SolveResult,
    recorder: Recorder,
    *,
    provider_abstained: Sequence[str] = (),
) -> Grounding:
    """Seed 001 §1-§3 on one run's result; receipts for every Ken query and the review."""
    g = Grounding()
    observations = list(coverage.observations)
    ids = [h.id for h in result.hypotheses]
    try:
        report = epistemic_report(observations, coverage, result.hypotheses, result.verdicts, thresholds=thresholds)
    except ValidationError as exc:  # fail closed: a report that breaks the rules grounds nothing
        problem = validation_problems(exc)
        recorder.record("verifier", "verifier.epistemic_report", {"hypotheses": ids}, {"error": problem},
                        status="failed")
        g.caveats.append(f"abstain-gate report could not be built ({problem}): explanations are unverified")
        for hid in ids:
            g.cap(hid, BAND_CEILING["low"], "abstain-gate report could not be built")
        return g
    if ken is not None:
        log: list = []  # type: ignore[type-arg]
        violations = enforce(report, observations, ken, log=log)
        for q in log:
            recorder.record("ken", f"ken.{q.name}", q.args, {"results": q.result_size}, caps={"limit": 50})
        recorder.record("verifier", "verifier.enforcement", {"hypotheses": ids},
                        {"violations": [v.model_dump() for v in violations]},
                        status="failed" if violations else "ok")
        if violations:
            report = apply_enforcement(report, violations)
            g.violations += violations
            _apply_violations(g, violations, ids, "enforcement")
    g.low = low_coverage_reasons(coverage, thresholds)
    review = low_coverage_review(report, coverage, thresholds)
    g.review = review.model_copy(update={"abstain": None})  # the abstain output is CDAOutputs.abstain
    g.report = review.rewritten if review.status == "NEEDS_REWRITE" and review.rewritten is not None else report
    if review.triggered:
        recorder.record("verifier", "verifier.low_coverage", {"reasons": review.reasons},
                        {"status": review.status, "problems": [v.model_dump() for v in review.violations]},
                        status="ok" if review.status == "OK" else "failed")
    if review.status == "NEEDS_REWRITE":
        g.caveats.append("low-coverage verifier: NEEDS_REWRITE (" + "; ".join(
            f"{v.kind} {v.span!r}" for v in review.violations[:5]) + ")")
        _apply_violations(g, review.violations, ids, "low-coverage verifier")
    abstain = review.abstain if review.status == "ABSTAIN" else None
    if abstain is None and thresholds.abstain_gate_enabled:
        abstain = should_abstain(coverage, thresholds)
    if abstain is None and provider_abstained and g.low:
        base = should_abstain(coverage, thresholds.model_copy(update={"abstain_gate_enabled": True})) or AbstainOutput(
            reasons=[], coverage=coverage.figures(), observations=observations, missing_knowledge=[])
        abstain = base.model_copy(update={"reasons": [*base.reasons, *(
            f"the LLM verifier answered ABSTAIN on {claim!r}" for claim in provider_abstained)]})
    if ken is None and abstain is not None:
        abstain = abstain.model_copy(update={"missing_knowledge": ["no Ken graph (CKG) was given",
                                                                   *abstain.missing_knowledge]})
    g.abstain = abstain
    return g
