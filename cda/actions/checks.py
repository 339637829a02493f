"""Step 3 of the loop: the independent verifiers around the solver's verdicts.

The solver's answer is the verdict; every other check can only lower it:

* **cross-backend agreement** — z3 and clingo must give the same answer; any difference makes
  every verdict inconclusive (and says so loudly);
* **units / arithmetic / temporal** — re-evaluated without the solver (pint, sympy, integers;
  before/within clauses are re-checked when the problem pins every event's time);
* **function evaluators** — the user's deterministic checks in a sandboxed subprocess; a failure,
  crash or timeout of a check on a claim demotes that claim;
* **Ken evidencing** — citations (SpanRefs) for the atoms of each claim, found with the safe
  query set only; a claim with no support gets a receipt stub;
* **the LLM gate** — the offline provider by default, an HTTP provider when policy allows; only
  ever downwards (``cda.verifiers.llm_gate.apply_llm_gate``);
* **abstention** — coverage of the observations by Ken; too little, and the run abstains.

Each check is a :class:`~cda.verifiers.protocol.Verifier` (:data:`VERIFIERS`, in the order they
run): given the claims and a :class:`CheckContext`, it returns outcomes, each with its evidence
and the :class:`~cda.verifiers.protocol.Ceiling` it puts on the claims. :func:`run_verifiers`
records every outcome (a receipt and an ``action_checkpoint(kind="verifier_update")``) and applies
every ceiling once, with one ``min``: no check changes a verdict by itself, and none can raise one.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from fractions import Fraction
from itertools import takewhile
from pathlib import Path
from typing import Any

from cda.actions.approvals import egress_decision, pii_decision, record_decision
from cda.actions.bands import one_band_per_statement, verdict_statements
from cda.actions.budget import Budget
from cda.actions.ken_grounding import draft_report, ground_in_ken
from cda.actions.metrics import PROBLEM_LINE_SOURCE
from cda.actions.problem import ActionProblem, observe_literal
from cda.actions.receipts_sink import Recorder
from cda.actions.scoring import band_for, normalised_entropy, score
from cda.actions.stream import EventStream
from cda.contracts.abstain import (
    BAND_CEILING,
    AbstainOutput,
    AbstainThresholds,
    CoverageReport,
    EpistemicReport,
    LowCoverageReview,
)
from cda.contracts.action import ActionVerdict, CDAInputs, NextTestSuggestion
from cda.contracts.deadline import OutOfTime
from cda.contracts.hypothesis_record import Evidence, HypothesisRecord
from cda.contracts.refs import SpanRef
from cda.contracts.result import SolveResult
from cda.contracts.status import VerdictStatus
from cda.contracts.verification import VerifierOutcome
from cda.encodings import ast as A
from cda.encodings.ir import GroundProblem
from cda.errors import CDAError
from cda.ken.graph import KenGraph
from cda.solver.engine import EngineOptions
from cda.solver.records import ComputedRecord, hypothesis_record, solve_records
from cda.store import family
from cda.verifiers.abstain import low_coverage_reasons, norm_atom
from cda.verifiers.agreement_outcome import agreement_outcome
from cda.verifiers.arithmetic import looks_arithmetic, verify_arithmetic
from cda.verifiers.coverage import coverage_report
from cda.verifiers.function_eval import run_function_check
from cda.verifiers.ken_evidence import ClaimAtom, ken_evidence
from cda.verifiers.llm_gate import (
    LLMJudgement,
    LLMProvider,
    ReviewContext,
    TokenMeter,
    consult,
    fail_closed_ceiling,
    llm_ceiling,
    llm_outcome,
)
from cda.verifiers.llm_offline import OfflineProvider, claim_fragments
from cda.verifiers.protocol import Ceiling, Outcome, Verifier, under_ceilings
from cda.verifiers.temporal import verify_temporal_formulas
from cda.verifiers.units_check import metric_units, to_seconds, verify_units_formulas

__all__ = ["VERIFIERS", "CheckContext", "ClaimUnderCheck", "VerificationState", "Verified", "run_verifiers"]


LLMFactory = Callable[[Any], LLMProvider]


def atom_args(gp: GroundProblem, atom: str) -> tuple[str, ...]:
    """The arguments of a ground atom of the problem (``down(api)`` -> ``("api",)``), read from
    the atom table rather than from its name."""
    info = gp.atoms.get(atom)
    return info.args if info is not None else ()


def _asserted_atoms(formula: A.Formula) -> Iterator[A.FAtom]:
    """The atoms an observation asserts true: itself when an atom, each conjunct of an ``and``."""
    if isinstance(formula, A.FAtom):
        yield formula
    elif isinstance(formula, A.FNary) and formula.op == "and":
        for arg in formula.args:
            yield from _asserted_atoms(arg)


@dataclass
class VerificationState:
    """What the verifiers share: the inputs, the problem, Ken, and where receipts and events go."""

    inputs: CDAInputs
    problem: ActionProblem
    ken: KenGraph | None
    recorder: Recorder
    stream: EventStream
    budget: Budget
    llm_factory: LLMFactory | None = None
    thresholds: AbstainThresholds = field(default_factory=AbstainThresholds)
    coverage: CoverageReport | None = None
    meter: TokenMeter = field(default_factory=lambda: TokenMeter(None))
    stores: tuple[Path, ...] = ()  # the run's SQLite file: a function check reads it and its family as empty

    def symptoms(self) -> list[str]:
        """Ken nodes named by the atoms the observations assert (``slow(api)`` -> ``api``)."""
        out: list[str] = []
        for placed in self.problem.placed():
            if not isinstance(placed.statement, A.Observe):
                continue
            for atom in _asserted_atoms(placed.statement.formula):
                for term in atom.args:
                    arg = term.name
                    if self.ken is not None and self.ken.has_node(arg) and arg not in out:
                        out.append(arg)
        return out

    def initial_frontier(self, gp: GroundProblem, depth: int) -> list[str]:
        """Abducibles about Ken's candidate causes of the symptoms first, then the other abducibles."""
        hyps = gp.hyp_atoms
        # without a Ken graph coverage is measured on an empty one: every figure is 0, and the
        # abstain rule reads that as it reads a graph that knows nothing of the anomaly
        report = coverage_report(self.ken if self.ken is not None else KenGraph(),
                                 self.problem.evidence + self.problem.observed_literals,
                                 self.symptoms(), depth=depth)
        self.coverage = report
        for q in report.queries:
            self.recorder.record("ken", f"ken.{q.name}", q.args, {"results": q.result_size},
                                 caps={"depth": depth, "limit": 50})
        causes = {rc.node for rc in report.root_causes}
        first = [h for h in hyps if set(atom_args(gp, h)) & causes]
        return (first + [h for h in hyps if h not in first])[:50]


@dataclass
class Verified:
    verdicts: list[ActionVerdict]
    outcomes: list[VerifierOutcome] = field(default_factory=list)
    citations: list[SpanRef] = field(default_factory=list)
    caveats: list[str] = field(default_factory=list)
    research: list[NextTestSuggestion] = field(default_factory=list)
    records: list[dict[str, Any]] = field(default_factory=list)
    abstain: AbstainOutput | None = None
    unverified: list[dict[str, Any]] = field(default_factory=list)  # claims a required check failed closed on
    review_abstained: list[str] = field(default_factory=list)  # claims the provider's verifier abstained on
    review: LowCoverageReview | None = None
    report: EpistemicReport | None = None
    llm_review: dict[str, Any] | None = None  # whether the HTTP verifier was called, and why


@dataclass(frozen=True)
class ClaimUnderCheck:
    """One verdict the solver gave (a goal's claim, or an explanation), as the verifiers see it:
    its id, its text, the atoms it is about, and the solver's status and confidence (0.0 for an
    *unknown* claim, which has none: its action verdict shows none, :func:`run_verifiers`). Verifiers
    read it; only :func:`run_verifiers` turns it into the final verdict, under their ceilings."""

    hypothesis_id: str
    claim: str
    atoms: list[ClaimAtom]
    status: VerdictStatus
    confidence: float
    justification: list[str] = field(default_factory=list)


def _observation_citations(state: VerificationState, justification: list[str]) -> list[SpanRef]:
    """The input observations behind the observation clauses of a justification, as SpanRefs."""
    lines = {c.name: c.line for c in state.problem.assembled.gp.clauses if c.kind == "observation"}
    source = state.problem.assembled.ast.source.split("\n")
    adopted = {p.line: p for p in state.problem.pieces if p.kind == "observe"}
    cites: list[SpanRef] = []
    for name in justification:
        line = lines.get(name)
        if line is None:
            continue
        index = state.problem.observation_of_line.get(line)
        if index is None:
            cites.append(SpanRef(source=f"{PROBLEM_LINE_SOURCE}{line}", excerpt=source[line - 1].strip()))
            continue
        ref = state.inputs.observations[index]
        if isinstance(ref, SpanRef):
            cites.append(ref)
        else:
            cites.append(SpanRef(source=ref.artifact_id, excerpt=f"observe {observe_literal(adopted[line].text)}"))
    return cites


def _claims(result: SolveResult, problem: ActionProblem, gp: GroundProblem) -> list[ClaimUnderCheck]:
    goals = [p.statement for p in problem.placed() if isinstance(p.statement, A.GoalClaim)]
    formulas = {c.name: goal.formula for c, goal in zip(problem.assembled.gp.claims, goals)}
    claims: list[ClaimUnderCheck] = []
    for v in result.verdicts:
        atom: ClaimAtom = (v.claim, formulas[v.name]) if v.name in formulas else v.claim
        claims.append(ClaimUnderCheck(v.name, f"{v.goal} {v.claim}", [atom], VerdictStatus(v.status), v.confidence or 0.0,
                                      justification=list(v.justification)))
    only = result.enumeration_complete and len(result.hypotheses) == 1 and result.status == "sat"
    # an explanation all of whose atoms the solver proves is as settled as those proofs
    # (docs/actions.md, "One band per statement"): it starts where they are, not at its posterior
    proved = {norm_atom(v.claim): v.confidence for v in result.verdicts
              if v.goal == "prove" and v.status == "supported" and v.confidence is not None}
    for h in result.hypotheses:
        text = "explanation: " + (", ".join(h.assumed) or "nothing assumed")
        atoms: list[ClaimAtom] = [gp.atoms.get(a) or a for a in h.assumed]
        status = VerdictStatus.SUPPORTED if only else VerdictStatus.INCONCLUSIVE
        confidence = h.posterior
        if h.assumed and all(norm_atom(a) in proved for a in h.assumed):
            status, confidence = VerdictStatus.SUPPORTED, min(proved[norm_atom(a)] for a in h.assumed)
        claims.append(ClaimUnderCheck(h.id, text, atoms, status, confidence))
    return claims


def _recorded(state: VerificationState, outcome: VerifierOutcome) -> VerifierOutcome:
    """A verifier's evidence, written where every check's goes: a receipt and a ``verifier_update``."""
    state.recorder.record(
        "verifier", f"verifier.{outcome.verifier}", {"claim": outcome.claim},
        {"status": outcome.status, "detail": outcome.detail}, citations=list(outcome.citations),
    )
    state.stream.checkpoint("verifier_update", {"verifier": outcome.verifier, "claim": outcome.claim,
                                                "status": outcome.status, "detail": outcome.detail})
    return outcome


@dataclass
class CheckContext:
    """What every verifier of a run may read (the run's state, its ground problem, the solver's
    result) and ``found``: what the run reports beside the verdicts, which a verifier adds to
    (citations, claims a required check failed closed on, the coverage review, an abstention)."""

    state: VerificationState
    gp: GroundProblem
    result: SolveResult
    skip_external: bool
    found: Verified


class Citations:
    """The input observations the solver's justification of each claim rests on."""

    name = "citation"

    def verify(self, claims: Sequence[ClaimUnderCheck], ctx: CheckContext) -> list[Outcome]:
        out = []
        for c in claims:
            cites = _observation_citations(ctx.state, c.justification)
            if cites:
                ctx.found.citations.extend(cites)
                out.append(Outcome(VerifierOutcome(
                    verifier="citation", claim=c.claim, status="passed", citations=cites,
                    detail=f"the solver's justification rests on {len(cites)} observation(s)")))
        return out


class Agreement:
    """z3 and clingo must give the same answer; a difference opens every claim."""

    name = "agreement"

    def verify(self, claims: Sequence[ClaimUnderCheck], ctx: CheckContext) -> list[Outcome]:
        result, budget = ctx.result, ctx.state.budget
        if budget.has("shrink_beam") or result.status == "unknown" or result.partial:
            return []
        remaining = budget.search_remaining()
        if remaining is not None and remaining <= 0:
            return [Outcome(VerifierOutcome(verifier="agreement", claim="z3 and clingo agree", status="skipped",
                                            detail="the search budget was spent before the cross-check",
                                            data={"agree": None}))]
        # the two backends share what is left (each had all of it, so the check could take twice it)
        options = EngineOptions(top=len(result.hypotheses) or 1, seed=result.seed,
                                timeout=None if remaining is None else remaining / 2)
        o = agreement_outcome(ctx.gp, options)
        if o.status != "failed":
            return [Outcome(o)]
        return [Outcome(o, Ceiling.open(0.5, f"z3 and clingo disagree: {o.detail}"),
                        notice=f"backends disagree: {o.detail}")]


class Units:
    """Every comparison of quantities re-checked for units, without the solver (pint)."""

    name = "units"

    def verify(self, claims: Sequence[ClaimUnderCheck], ctx: CheckContext) -> list[Outcome]:
        problem = ctx.state.problem
        constraints = [(piece.text, placed.statement.formula)
                       for piece, placed in zip(problem.pieces, problem.assembled.pieces)
                       if isinstance(placed.statement, (A.Hard, A.Soft))]
        return [Outcome(o, Ceiling.open(0.5, f"units: {o.detail}") if o.status == "failed" else None)
                for o in verify_units_formulas(metric_units(problem.assembled.ast), constraints)]


class Temporal:
    """before/within clauses re-evaluated on the events' pinned times, in plain integers."""

    name = "temporal"

    def verify(self, claims: Sequence[ClaimUnderCheck], ctx: CheckContext) -> list[Outcome]:
        out = []
        for o in _temporal(ctx.state.problem):
            if o.status == "failed" and ctx.result.status == "sat":
                out.append(Outcome(o, Ceiling.open(0.5, f"temporal: {o.detail}"),
                                   notice=f"temporal re-evaluation disagrees with the solver: {o.detail}"))
            else:
                out.append(Outcome(o))
        return out


class Arithmetic:
    """The success criteria and evidence that state arithmetic, re-computed (sympy); a failure is
    said in the run's caveats (it is about the inputs, not about one claim)."""

    name = "arithmetic"

    def verify(self, claims: Sequence[ClaimUnderCheck], ctx: CheckContext) -> list[Outcome]:
        inputs, problem = ctx.state.inputs, ctx.state.problem
        numeric = [t for t in inputs.goals.success_criteria + problem.evidence if t and looks_arithmetic(t)]
        return [Outcome(o, caveat=f"arithmetic: {o.claim!r} does not hold ({o.detail})" if o.status == "failed" else "")
                for o in verify_arithmetic(numeric)]


class FunctionChecks:
    """The user's deterministic checks in a sandboxed subprocess; a check that does not pass on a
    claim's text opens that claim."""

    name = "function"

    def verify(self, claims: Sequence[ClaimUnderCheck], ctx: CheckContext) -> list[Outcome]:
        state = ctx.state
        out = []
        for fn in state.inputs.functions:
            for text in fn.claims:
                if ctx.skip_external:
                    state.recorder.record("function", f"function.{fn.name}", {"claim": text},
                                          {"reason": "skipped by the degradation ladder"}, status="stub")
                    continue
                # the check's time counts against the action's wall budget: it stops when the search budget ends
                o = run_function_check(fn.name, fn.source, text, fn.timeout_s, fn.memory_mb, isolation=fn.isolation,
                                       budget_s=state.budget.search_remaining(),
                                       cover=[p for db in state.stores for p in family(db)])
                isolated = o.data.get("isolation")
                if o.status != "passed":
                    matched = tuple(i for i, c in enumerate(claims) if text in c.claim)
                    # a failed check whose text names no claim still says so: never silent
                    missed = "" if matched else (
                        f"function {fn.name} did not pass on {text!r} ({o.detail}), and no claim of the run carries "
                        "that text: write the claim as the verdicts print it")
                    out.append(Outcome(o, Ceiling.open(0.5, f"function {fn.name}: {o.detail}"), matched, caveat=missed))
                elif isolated != "namespaces":
                    out.append(Outcome(o, caveat=f"function {fn.name} passed on {text!r} with {isolated} isolation only "
                                                 "(the kernel refused namespaces; the caller accepted a plain process)"))
                else:
                    out.append(Outcome(o))
        return out


class KenEvidence:
    """Citations for each claim's atoms, found in Ken with the safe query set only; a claim with
    none gets a receipt stub."""

    name = "ken"

    def verify(self, claims: Sequence[ClaimUnderCheck], ctx: CheckContext) -> list[Outcome]:
        state = ctx.state
        if state.ken is None:
            return []
        out = []
        for c in claims:
            outcomes, queries = ken_evidence(state.ken, c.atoms)
            for q in queries:
                state.recorder.record("ken", q.name, q.args, {"results": len(q.result)}, caps={"limit": 50})
            for o in outcomes:
                out.append(Outcome(o))
                ctx.found.citations.extend(o.citations)
                if not o.citations:
                    state.recorder.record("stub", "evidence.missing", {"claim": c.claim}, {"reason": o.detail}, status="stub")
        return out


class LLMCheck:
    """The LLM gate: the offline checker, or an HTTP provider when policy allows; a required
    check that gives no judgement fails closed (:mod:`cda.verifiers.llm_gate`)."""

    name = "llm"

    def verify(self, claims: Sequence[ClaimUnderCheck], ctx: CheckContext) -> list[Outcome]:
        return _llm(ctx.state, ctx.gp, ctx.result, list(claims), ctx.found, ctx.skip_external)


class Coverage:
    """How well Ken covers the observations (the low-coverage review and the abstain rule of
    docs/actions.md): caps the claims it does not ground; too little, and the run abstains."""

    name = "coverage"

    def verify(self, claims: Sequence[ClaimUnderCheck], ctx: CheckContext) -> list[Outcome]:
        state, found = ctx.state, ctx.found
        if state.coverage is None:  # pragma: no cover - initial_frontier always measures it
            return []
        g = ground_in_ken(state.coverage, state.thresholds, state.ken, ctx.result, state.recorder,
                          provider_abstained=found.review_abstained)
        found.review = g.review
        found.report = g.report
        out = []
        if g.review is not None and g.review.triggered:
            out.append(Outcome(VerifierOutcome(
                verifier="low_coverage", claim="the run's report", status="passed" if g.review.status == "OK" else "failed",
                detail=f"{g.review.status}: " + "; ".join(g.review.reasons + [
                    f"{v.kind} {v.span!r} ({v.fix})" for v in g.review.violations[:5]])), listed=False))
        out.extend(Outcome(caveat=caveat) for caveat in g.caveats)
        for i, c in enumerate(claims):
            if c.hypothesis_id in g.caps:
                cap, why = g.caps[c.hypothesis_id]
                status = VerdictStatus.INCONCLUSIVE if cap < 0.5 else VerdictStatus.SUPPORTED
                out.append(Outcome(ceiling=Ceiling(status, cap, tuple(why)), claims=(i,)))
        settled = any(v.status in ("supported", "refuted") for v in ctx.result.verdicts)
        has_subject = state.ken is not None or bool(state.coverage.observations)
        if g.abstain is not None and not settled and has_subject:
            found.abstain = g.abstain
            out.append(Outcome(caveat=f"abstained: {g.abstain.reason} ({'; '.join(g.abstain.reasons)})"))
        elif g.abstain is not None:
            out.append(Outcome(caveat=f"low Ken coverage ({'; '.join(g.abstain.reasons)}): explanations are unverified "
                                      "hypotheses"))
            # an explanation the solver proves is no unverified hypothesis: like its proof, it is
            # at most medium (seed 001: no high diagnosis without Ken root causes and chains)
            unproved = tuple(i for i, c in enumerate(claims)
                             if c.claim.startswith("explanation:") and c.status != VerdictStatus.SUPPORTED)
            proved = tuple(i for i, c in enumerate(claims)
                           if c.claim.startswith("explanation:") and c.status == VerdictStatus.SUPPORTED)
            out.append(Outcome(ceiling=Ceiling(confidence=BAND_CEILING["low"], caveats=("low Ken coverage",)),
                               claims=unproved))
            if proved:
                out.append(Outcome(ceiling=Ceiling(confidence=BAND_CEILING["medium"], caveats=(
                    "low Ken coverage: proved from the model, but Ken grounds no root cause and chain, so at most "
                    "medium",)), claims=proved))
        return out


#: every independent check of an Action, in the order they run (docs/actions.md)
VERIFIERS: tuple[Verifier[ClaimUnderCheck, CheckContext], ...] = (
    Citations(), Agreement(), Units(), Temporal(), Arithmetic(), FunctionChecks(), KenEvidence(), LLMCheck(), Coverage(),
)


def run_verifiers(state: VerificationState, gp: GroundProblem, result: SolveResult, backend: str,
                  *, skip_external: bool, verifiers: Sequence[Verifier[ClaimUnderCheck, CheckContext]] = VERIFIERS,
                  before_each: Callable[[], None] | None = None) -> Verified:
    """Every independent check on the solver's result; returns the final verdicts and artifacts.

    Each verifier returns its outcomes; their evidence is recorded here, in order, and their
    ceilings are applied here, all at once (:func:`~cda.verifiers.protocol.under_ceilings`), so
    no check can raise a verdict and none lowers one by itself.

    Verification spends the same search budget as the search: ``before_each`` (the runner's
    degradation ladder, recorded as ``plan_delta`` ``degradation``) runs before every verifier, and
    once the ladder skips external calls every later verifier sees it.
    """
    claims = _claims(result, state.problem, gp)
    out = Verified(verdicts=[])
    ctx = CheckContext(state, gp, result, skip_external, out)
    outcomes: list[Outcome] = []
    for verifier in verifiers:
        if before_each is not None:
            before_each()
            ctx.skip_external = ctx.skip_external or state.budget.has("reduce_external_calls")
        for o in verifier.verify(claims, ctx):
            if o.evidence is not None:
                _recorded(state, o.evidence)
                if o.listed:
                    out.outcomes.append(o.evidence)
            if o.notice:
                state.stream.notice(o.notice, level="warning")
            if o.caveat:
                out.caveats.append(o.caveat)
            outcomes.append(o)
    probs = [h.posterior for h in result.hypotheses]
    uncertainty = normalised_entropy(probs) + (0.0 if result.enumeration_complete else 0.25)
    total_soft = sum(float(s.weight) for s in gp.soft) or 1.0
    for i, c in enumerate(claims):
        ceilings = [o.ceiling for o in outcomes if o.ceiling is not None and o.caps(i)]
        status, confidence = under_ceilings(c.status, c.confidence, ceilings)
        conf = round(confidence, 9) + 0.0
        caveats = [caveat for ceiling in ceilings for caveat in ceiling.caveats]
        if status is VerdictStatus.UNKNOWN:  # never decided: no confidence, and the band says so (docs/actions.md)
            why = next((v.reason for v in result.verdicts if v.name == c.hypothesis_id and v.reason), None)
            out.verdicts.append(ActionVerdict(hypothesis_id=c.hypothesis_id, status=status, confidence=None, band="low",
                                              claim=c.claim, caveats=[*caveats, why or "the claim was not decided"]))
            continue
        out.verdicts.append(ActionVerdict(hypothesis_id=c.hypothesis_id, status=status, confidence=conf,
                                          band=band_for(conf, status), claim=c.claim, caveats=caveats))
    symptoms = set(state.symptoms())
    causes = {rc.node for rc in state.coverage.root_causes} if state.coverage is not None else set()
    computed, why_not = _solver_records(state, gp, result, backend)
    for h in result.hypotheses:
        salience = (len(symptoms & _reached(state, h.assumed)) / len(symptoms)) if symptoms else 0.0
        comp = computed.get(h.id)
        if comp is not None and comp[0].assumed == tuple(h.assumed):
            rec = comp[1]
        else:  # the records could not be computed: say so rather than invent them
            rec = HypothesisRecord(
                id=h.id, statement="assume " + (", ".join(h.assumed) or "nothing"), assumptions=list(h.assumed),
                evidence_against=[f"violates {v}" for v in h.violated], confidence=h.posterior,
                falsifiers_note=f"not computed: {why_not or 'the records did not match the hypotheses'}",
            )
        data = rec.model_dump(mode="json")
        data["score"] = score(salience, h.posterior, float(h.cost) / total_soft, min(1.0, uncertainty))
        data["ken_candidate"] = bool({a for x in h.assumed for a in atom_args(gp, x)} & causes)
        data["selected"] = comp is not None and comp[2] is not None
        if comp is not None and comp[2] is not None:
            data["selected_reason"] = comp[2]
        out.records.append(data)
    out.verdicts, out.report = one_band_per_statement(out.verdicts, out.report, verdict_statements(result))
    if out.review is not None:
        out.review = _review_in_outputs(out.review, out.report, out.llm_review, outcomes)
    for v in out.verdicts:
        if v.claim.startswith("explanation:"):
            continue
        if v.status == "inconclusive" and not any(o.citations for o in out.outcomes if o.claim == v.claim):
            out.research.append(NextTestSuggestion(question=f"Find evidence for or against: {v.claim}",
                                                   suggested_ability="research"))
    return out


def _review_in_outputs(review: LowCoverageReview, report: EpistemicReport | None, llm: dict[str, Any] | None,
                       outcomes: Sequence[Outcome]) -> LowCoverageReview:
    """The review as the outputs carry it: its rewrite is the run's final report (one band per
    statement holds there too), and what the LLM verifier did (called or not, why, its answers)."""
    update: dict[str, Any] = {}
    if review.status == "NEEDS_REWRITE" and report is not None:
        update["rewritten"] = report
    if llm is not None:
        update["llm_called"] = llm["called"]
        update["llm_reasons"] = list(llm["reasons"])
        answers: dict[str, str] = {}
        rewrites: dict[str, str] = {}
        for o in outcomes:
            ev = o.evidence
            if ev is not None and ev.verifier == "llm" and ev.data.get("review_status"):
                answers[ev.claim] = ev.data["review_status"]
                if ev.data.get("rewritten_report"):
                    rewrites[ev.claim] = ev.data["rewritten_report"]
        update["llm_answers"] = answers
        update["llm_rewrites"] = rewrites
    return review.model_copy(update=update) if update else review


def _solver_records(state: VerificationState, gp: GroundProblem, result: SolveResult, backend: str
                    ) -> tuple[dict[str, tuple[ComputedRecord, HypothesisRecord, str | None]], str | None]:
    """Each listed hypothesis's record computed by the solver (:mod:`cda.solver.records`), its
    evidence cited by the Action's own observation references; the step rule's reason on the
    selected one. Empty, with why, when the result has no complete list or time ran out."""
    if result.status != "sat" or not result.hypotheses or gp.minimal is not None:
        return {}, "no ranked hypotheses"
    try:
        found = solve_records(gp, backend, len(result.hypotheses), seed=result.seed,
                              timeout=state.budget.search_remaining())
    except OutOfTime:
        return {}, "the time budget ran out"
    if found is None:
        return {}, "the hard clauses and observations conflict"
    clauses = {c.name: c for c in gp.clauses}
    soft_lines = {s.name: s.line for s in gp.soft}
    lines = state.problem.assembled.ast.source.split("\n")
    source = gp.filename or "dsl"
    out: dict[str, tuple[ComputedRecord, HypothesisRecord, str | None]] = {}
    for comp in found.records:
        rec = hypothesis_record(comp, clauses, soft_lines, source, lines)
        cited: list[Evidence] = []
        for name in comp.evidence_for:  # the Action's own reference for each observation, when it has one
            refs = _observation_citations(state, [name])
            cited.append(refs[0] if refs else rec.evidence_for[len(cited)])
        rec.evidence_for = cited
        out[comp.id] = (comp, rec, found.reason if comp.id == found.selected else None)
    return out, None


def _pin(formula: A.Formula) -> tuple[str, A.AQuantity] | None:
    """``time(event:X) = q`` (either way round), the event and the quantity; else None."""
    if not isinstance(formula, A.FCompare) or formula.op != "=":
        return None
    for one, other in ((formula.lhs, formula.rhs), (formula.rhs, formula.lhs)):
        if len(one.terms) == 1 and len(other.terms) == 1:
            ref, value = one.terms[0], other.terms[0]
            if ref.ref is not None and ref.ref.kind == "event" and ref.coef == 1 and value.quantity is not None \
                    and value.coef == 1:
                return ref.ref.name, value.quantity
    return None


def _nodes(formula: A.Formula) -> Iterator[object]:
    """Every node of a formula, its arithmetic included."""
    stack: list[object] = [formula]
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, A.FNot):
            stack.append(node.arg)
        elif isinstance(node, (A.FNary, A.FCard)):
            stack.extend(node.args)
        elif isinstance(node, A.FImplies):
            stack.extend((node.lhs, node.rhs))
        elif isinstance(node, A.FQuant):
            stack.append(node.body)
        elif isinstance(node, A.FCompare):
            stack.extend(t.ref for t in node.lhs.terms + node.rhs.terms if t.ref is not None)
        elif isinstance(node, (A.FBefore, A.FWithin)):
            stack.extend((node.first, node.second))


def _temporal(problem: ActionProblem) -> list[VerifierOutcome]:
    """Re-evaluate the hard and observed before/within clauses whose events all have pinned times.

    A time is pinned by a clause that is ``time(event:X) = N [unit]``; the check is plain integer
    arithmetic on those values (``cda.verifiers.temporal``), independent of the solver.
    """
    pinned: dict[str, int] = {}
    temporal: list[tuple[str, A.Formula]] = []
    for placed in problem.placed():
        if not isinstance(placed.statement, (A.Hard, A.Observe)):
            continue
        formula = placed.statement.formula
        pin = _pin(formula)
        if pin is not None:
            seconds = to_seconds(pin[1].value, pin[1].unit)
            if seconds is not None and seconds.denominator == 1:
                pinned[pin[0]] = int(seconds)
        elif any(isinstance(n, (A.FBefore, A.FWithin)) for n in _nodes(formula)):
            temporal.append((placed.written, formula))
    wanted = [(text, f) for text, f in temporal
              if {n.name for n in _nodes(f) if isinstance(n, A.ARef) and n.kind == "event"} <= set(pinned)]
    return verify_temporal_formulas(pinned, wanted) if wanted else []


def _reached(state: VerificationState, assumed: list[str]) -> set[str]:
    if state.coverage is None:
        return set()
    nodes = {a for x in assumed for a in atom_args(state.problem.assembled.gp, x)}
    reached: set[str] = set()
    for chain in state.coverage.causal_chains:
        if chain.root_cause in nodes:
            reached.add(chain.symptom)
    return reached


def _ken_ids_named_in(ken: KenGraph, claims: list[str]) -> set[str]:
    """The Ken node ids a claim could be naming: every id that contains one of its words.

    Found through Ken's search index rather than by listing every node, which costs seconds on
    a graph of a million nodes; the offline provider then does the exact comparison itself.
    """
    out: set[str] = set()
    for claim in claims:
        for fragment in claim_fragments(claim):
            word = fragment.text
            if not word.isascii():  # casefold and lower differ outside ASCII: compare every id
                return set(ken.node_ids())
            needle = word.rsplit(":", 1)[-1]
            out.update(ken.search(needle, limit=max(len(ken), 1)))
    return out


def _declared_names(gp: GroundProblem) -> set[str]:
    """Every atom of the problem and each of its arguments, every declared metric and event and
    the metrics' units: names the user declared, not invented."""
    names: set[str] = set()
    for info in gp.atoms.values():
        names.add(info.name)
        names.add(info.pred)
        names.update(info.args)
    for var in gp.numvars.values():
        names.update((var.name, f"{var.kind}:{var.name}", var.unit))
    return names


def _stated_quantities(claim: ClaimUnderCheck) -> set[str]:
    """The words of ``claim`` that are its own numbers and units (``100`` and ``lb`` of
    ``value(metric:w) >= 100 lb``): the bound the solver decided, part of the problem, not a
    fact that evidence must mention. Read from the claim's parsed formula, never from its text."""
    values: set[Fraction] = set()
    units: set[str] = set()
    for atom in claim.atoms:
        if not isinstance(atom, tuple):
            continue
        for node in _nodes(atom[1]):
            quantities: list[A.AQuantity] = []
            if isinstance(node, A.FCompare):
                for term in node.lhs.terms + node.rhs.terms:
                    values.add(abs(term.coef))
                    if term.quantity is not None:
                        quantities.append(term.quantity)
            elif isinstance(node, A.FWithin):
                quantities.append(node.span)
            for q in quantities:
                values.add(abs(q.value))
                if q.unit is not None:
                    units.add(q.unit)
    words: set[str] = set()
    for fragment in claim_fragments(claim.claim):
        if fragment.kind == "entity" and fragment.text in units:
            words.add(fragment.text)
        elif fragment.kind == "number":  # digits, an optional decimal part, an optional unit suffix
            digits = "".join(takewhile(lambda ch: ch.isdigit() or ch == ".", fragment.text))
            suffix = fragment.text[len(digits):]
            if Fraction(digits) in values and (not suffix or suffix in units):
                words.add(fragment.text)
    return words


def _offline_judge(state: VerificationState, gp: GroundProblem, claims: list[ClaimUnderCheck]) -> Callable[[ClaimUnderCheck], OfflineProvider]:
    """The offline checker for a claim: the Ken ids it names, the declared names, its own bound."""
    known = _ken_ids_named_in(state.ken, [c.claim for c in claims]) if state.ken is not None else set()
    declared = known | _declared_names(gp)
    plain = OfflineProvider(known_ids=sorted(declared))

    def judge_for(c: ClaimUnderCheck) -> OfflineProvider:
        stated = _stated_quantities(c)
        return OfflineProvider(known_ids=sorted(declared | stated)) if stated else plain

    return judge_for


def llm_review_gate(state: VerificationState) -> tuple[bool, list[str]]:
    """Whether the HTTP verifier of ``inputs.llm`` is called in this run, and why (or why not).

    The verifier is the abstain gate's second pass (docs/actions.md, "The LLM verifier"): with
    ``llm.when = "low_coverage"`` (the default) it is called only when coverage is low and
    ``ENABLE_LOW_COVERAGE_VERIFIER`` is on; ``"always"`` calls it whatever the coverage.
    """
    low = low_coverage_reasons(state.coverage, state.thresholds) if state.coverage is not None else []
    if state.inputs.llm.when == "always":
        return True, ["llm.when is 'always'", *(["coverage: " + ", ".join(low)] if low else [])]
    if not low:
        return False, ["coverage is sufficient"]
    if not state.thresholds.low_coverage_verifier_enabled:
        return False, ["coverage: " + ", ".join(low), "the low-coverage verifier is disabled (ENABLE_LOW_COVERAGE_VERIFIER)"]
    return True, ["coverage: " + ", ".join(low)]


def llm_required_by(state: VerificationState) -> list[str]:
    """Why the configured LLM check is required (empty: the offline checker is enough).

    An HTTP verifier named in ``inputs.llm`` is required by policy when it is called at all
    (:func:`llm_review_gate`): the inputs ask for that reading, so its absence is never silence.
    Low Ken coverage (docs/actions.md, Abstention, step 2) and a risk class of ``medium`` or
    ``high`` add their own reasons, which the caveats repeat.
    """
    if state.inputs.llm.provider != "openai":
        return []
    runs, why = llm_review_gate(state)
    if not runs:
        return []
    reasons = [f"policy: inputs.llm names the {state.inputs.llm.egress_class} verifier"]
    reasons += [w for w in why if w.startswith("coverage: ")]
    if state.inputs.risk_class in ("medium", "high"):
        reasons.append(f"risk_class {state.inputs.risk_class}")
    return reasons


def _consult_all(state: VerificationState, provider: LLMProvider, claims: list[ClaimUnderCheck],
                 evidence: list[str], context: ReviewContext | None
                 ) -> dict[int, tuple[LLMJudgement | None, str | None]]:
    """Ask about every claim at once, all under the action's remaining budget.

    One thread per claim (at most 8): the calls wait on the network, not on the CPU. A call
    still running at the deadline is left to end by its own socket timeout (which the deadline
    also bounds) and counts as no judgement.
    """
    remaining = state.budget.search_remaining()
    deadline = None if remaining is None else time.monotonic() + remaining
    pool = ThreadPoolExecutor(max_workers=max(1, min(8, len(claims))), thread_name_prefix="cda-llm")
    try:
        futures = {pool.submit(consult, provider, c.claim, evidence, deadline=deadline, meter=state.meter,
                               context=context): i
                   for i, c in enumerate(claims)}
        done, _ = wait(futures, timeout=None if deadline is None else max(0.0, deadline - time.monotonic()) + 0.05)
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
    results = {futures[f]: f.result() for f in done}
    for i in range(len(claims)):
        results.setdefault(i, (None, "no judgement within the action's budget"))
    return results


def _review_context(state: VerificationState, result: SolveResult) -> ReviewContext | None:
    """What the HTTP verifier is shown beside each claim: the draft report (before any review),
    the observations verbatim, Ken's traversal and the coverage (docs/actions.md, "The LLM verifier")."""
    if state.coverage is None:  # pragma: no cover - initial_frontier always measures it
        return None
    draft = draft_report(state.coverage, state.thresholds, result)
    return ReviewContext.of(draft, state.coverage, low_coverage_reasons(state.coverage, state.thresholds))


def _llm(state: VerificationState, gp: GroundProblem, result: SolveResult, claims: list[ClaimUnderCheck],
         found: Verified, skip_external: bool) -> list[Outcome]:
    """The LLM gate on every claim: each judgement's ceiling (:func:`~cda.verifiers.llm_gate.llm_ceiling`),
    or, where a required check gave none, the fail-closed ceiling and the offline checker's.

    The HTTP verifier is called only when :func:`llm_review_gate` says so (by default: coverage is
    low); whether it was called, and why, is a ``llm.review`` receipt and a ``plan_delta``."""
    settings = state.inputs.llm
    evidence = state.problem.evidence + state.problem.observed_literals
    offline_for = _offline_judge(state, gp, claims)
    out: list[Outcome] = []
    context: ReviewContext | None = None
    if settings.provider == "openai":
        runs, gate_reasons = llm_review_gate(state)
        state.recorder.record("llm", "llm.review", {"when": settings.when, "model": settings.model},
                              {"called": runs, "reasons": gate_reasons})
        state.stream.checkpoint("plan_delta", {"stage": "verify", "llm_review": "called" if runs else "skipped",
                                               "reasons": gate_reasons})
        found.llm_review = {"called": runs, "reasons": gate_reasons}
        if runs:
            context = _review_context(state, result)
    if settings.provider != "openai" or context is None:
        for i, c in enumerate(claims):
            judge = offline_for(c)
            judgement, error = consult(judge, c.claim, evidence)
            state.recorder.record("llm", f"llm.{judge.name}", {"claim": c.claim, "evidence": len(evidence)},
                                  {"agrees": judgement.agrees if judgement else None, "error": error},
                                  status="ok" if judgement is not None else "failed")
            out.append(Outcome(llm_outcome(c.claim, judgement), llm_ceiling(c.status, c.confidence, judgement), (i,)))
        return out

    required = llm_required_by(state)
    egress = egress_decision(state.inputs, settings.egress_class)
    record_decision(state.recorder, egress, "llm.judge")
    pii = pii_decision(state.inputs)
    if state.inputs.policies.pii_posture == "consent":
        record_decision(state.recorder, pii, "llm.judge")
    reason: str | None = None
    if not egress.allowed:
        reason = egress.reason
    elif skip_external:
        reason = "external calls reduced by the degradation ladder (budget)"
    elif state.budget.frozen():
        reason = "the action's budget was spent before the LLM check"
    elif state.meter.exhausted():
        reason = f"token budget spent ({state.meter.spent} of {state.meter.limit})"
    elif state.llm_factory is None:
        reason = "no HTTP client available in this process"
    results: dict[int, tuple[LLMJudgement | None, str | None]] = {}
    name = f"http:{settings.model}"
    if reason is None:
        assert state.llm_factory is not None
        try:
            provider = state.llm_factory(state.inputs)
        except CDAError as exc:
            reason = str(exc)
        else:
            name = provider.name
            results = _consult_all(state, provider, claims, evidence, context)
    if reason is not None:
        out.append(Outcome(caveat=f"LLM verification missing: {reason}; receipt stubs recorded",
                           notice=f"LLM check not run: {reason}"))
    failed: list[str] = []
    for i, c in enumerate(claims):
        judgement, error = results.get(i, (None, reason))
        if judgement is not None:
            state.recorder.record("llm", f"llm.{name}", {"claim": c.claim, "evidence": len(evidence)},
                                  {"agrees": judgement.agrees, "review_status": judgement.review_status,
                                   "tokens": judgement.tokens, "error": None})
            out.append(Outcome(llm_outcome(c.claim, judgement), llm_ceiling(c.status, c.confidence, judgement), (i,)))
            if judgement.review_status == "ABSTAIN":
                found.review_abstained.append(c.claim)
            continue
        why = error or "no judgement"
        stub_status = "denied" if not egress.allowed else "timeout" if "budget" in why or "within" in why else "stub"
        state.recorder.record("stub", "llm.judge", {"claim": c.claim},
                              {"reason": why, "required_by": required, "fail_closed": True}, status=stub_status)
        out.append(Outcome(VerifierOutcome(
            verifier="llm", claim=c.claim, status="failed", confidence_cap=0.5,
            detail=f"required LLM check ({'; '.join(required)}) gave no judgement: {_one_line(why, 200)}; "
                   "failed closed"), fail_closed_ceiling(c.status, c.confidence, _one_line(why, 160)), (i,)))
        found.unverified.append({"claim": c.claim, "reason": why, "required_by": required})
        failed.append(c.claim)
        fallback = offline_for(c)
        judgement, _ = consult(fallback, c.claim, evidence)
        state.recorder.record("llm", "llm.offline", {"claim": c.claim, "fallback_for": name},
                              {"agrees": judgement.agrees if judgement else None})
        # its caveats say what it changes beyond the failed-closed ceiling just put on the claim
        closed_status, closed_confidence = under_ceilings(c.status, c.confidence, [out[-1].ceiling or Ceiling()])
        out.append(Outcome(llm_outcome(c.claim, judgement), llm_ceiling(closed_status, closed_confidence, judgement), (i,)))
    if failed and reason is None:
        out.append(Outcome(
            caveat=f"LLM verification failed for {len(failed)} of {len(claims)} claim(s) "
                   f"(required by {'; '.join(required)}): those claims failed closed to inconclusive; "
                   "the offline checker ran as fallback",
            notice=f"LLM check failed for {len(failed)} claim(s); they are inconclusive (failed closed)"))
    if state.meter.spent or state.meter.limit is not None:
        limit = "no limit" if state.meter.limit is None else str(state.meter.limit)
        state.recorder.record("llm", "llm.tokens", {"limit": limit}, {"spent": state.meter.spent})
    return out


def _one_line(text: str, limit: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"
