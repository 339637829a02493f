"""The CDA Action (``ability: "cda"``): the loop of docs/actions.md around the engine.

1. **initialise** — seed (hmac-v1), parameters, the problem text, Ken; the frontier starts from
   the observations: Ken's candidate causes of the observed symptoms plus the declared abducibles;
2. **propagate** — hard clauses prune, soft clauses rank: the engine enumerates hypotheses up to
   the beam width;
3. **verify** — the solver's verdicts, then the independent verifiers (``verifier_update``);
4. **refine** — a capped enumeration widens the beam, a conflict softens the conflicting
   observations into hypotheses about which to distrust (``plan_delta``; ``context_delta`` when
   evidence is adopted);
5. **converge** — when the frontier is stable, the depth cap is reached or the budget is spent:
   scores, bands, the boundary summary, bundles, receipts, and the terminal event.

Everything the run chooses comes from the seed and the inputs; wall time enters only through
the budget, and then the result says so (``partial``, with caveats).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any

from cda.actions.artifacts import ArtifactWriter, boundary_summary
from cda.actions.bands import one_band_per_statement, verdict_statements
from cda.actions.bindings import Binding, BoundOutput, lock_of, update_available, with_bindings
from cda.actions.budget import LADDER_TEXT, Budget
from cda.actions.checks import VerificationState, run_verifiers
from cda.actions.context import RunContext, RunSettings
from cda.actions.event_chain import events_head
from cda.actions.ken_inputs import ken_from_inputs
from cda.actions.metrics import ActionProbe, action_counts
from cda.actions.problem import ActionProblem, build, problem_digest
from cda.actions.receipts import ReceiptLog
from cda.actions.receipts_sink import Recorder
from cda.actions.scoring import band_for
from cda.actions.seeds import Seed, derive
from cda.actions.stream import EventStream
from cda.actions.trace import action_trace, check_focus
from cda.contracts.abstain import AbstainThresholds
from cda.contracts.action import ActionStatus, CDAInputs, CDAOutputs, NextTestSuggestion
from cda.contracts.deadline import OutOfTime
from cda.contracts.events import ActionEvent
from cda.contracts.hypothesis_record import HypothesisRecord
from cda.contracts.receipt import canonical_json, sha256_hex
from cda.contracts.result import SolveResult
from cda.contracts.status import SolverStatus
from cda.encodings import ast as A
from cda.encodings.ir import Clause, GroundProblem, SoftClause
from cda.errors import CDAError, DSLError
from cda.solver.engine import EngineOptions, run
from cda.solver.route import choose_backend
from cda.verifiers.llm_gate import TokenMeter

__all__ = ["ActionRun", "RunContext", "RunSettings", "accept_bump", "action_id_of", "run_action"]

#: weight of an observation turned soft after a conflict: distrusting one observation costs
#: more than any ordinary preference, so hypotheses that keep every observation rank first.
DISTRUST_WEIGHT = Fraction(5)


@dataclass
class ActionRun:
    """A finished run: the outputs a client sees, the events it was sent, and where things went."""

    outputs: CDAOutputs
    events: list[ActionEvent]
    receipts_head: str
    artifact_dir: Path | None
    trace: dict[str, Any] = field(default_factory=dict)  # the raw trace, for the reflection store
    bound: list[BoundOutput] = field(default_factory=list)
    bindings: list[Binding] = field(default_factory=list)
    attempt: int = 1  # which run of this action id (re-runs count up)
    appended: list[str] = field(default_factory=list)  # entry hashes of the receipts this attempt wrote


@dataclass
class _Params:
    seed: Seed
    action_id: str
    solver_seed: int
    beam: int
    top: int
    depth_cap: int


def _params(inputs: CDAInputs, settings: RunSettings) -> _Params:
    seed = derive(inputs.seed.purpose, inputs.model_dump(mode="json"))
    beam = settings.base_beam
    if inputs.budgets.wall is not None and inputs.budgets.wall < 5:
        beam = max(8, beam // 4)  # a small budget starts narrow; the refine loop widens it
    return _Params(
        seed=seed,
        action_id="cda-" + seed.child("action_id").hex()[:16],
        solver_seed=seed.integer("solver", 0, 2**31 - 1),
        beam=beam,
        top=inputs.goals.top or 3,
        depth_cap=settings.depth_cap,
    )


def action_id_of(inputs: CDAInputs, settings: RunSettings | None = None,
                 bound: Sequence[BoundOutput] = ()) -> str:
    """The id :func:`run_action` gives these inputs (from their seed): a server names the
    action's stream before the run starts."""
    return _params(with_bindings(inputs, bound), settings or RunSettings()).action_id


def _soften(gp: GroundProblem, names: set[str]) -> GroundProblem:
    """The observations named in ``names`` turned into soft clauses of weight DISTRUST_WEIGHT."""
    keep: list[Clause] = []
    soft: list[SoftClause] = list(gp.soft)
    for clause in gp.clauses:
        if clause.kind == "observation" and clause.name in names:
            soft.append(SoftClause(f"trust {clause.name}", clause.node, DISTRUST_WEIGHT, clause.line))
        else:
            keep.append(clause)
    return dataclasses.replace(gp, clauses=keep, soft=soft)


def _frontier(result: SolveResult) -> list[tuple[str, ...]]:
    return [tuple(h.assumed) for h in result.hypotheses]


def run_action(inputs: CDAInputs, context: RunContext | None = None, /, **changes: Any) -> ActionRun:
    """Run one CDA Action; never raises for a mistake in the inputs (that is ``action_failed``).

    ``context`` says where the outputs go and what the run is connected to
    (:class:`~cda.actions.context.RunContext`: Ken, the artifact folder, the receipt log,
    subscribers, the LLM client, bindings, clocks, a server's prelude); keyword arguments named as
    its fields change it for this call (``run_action(inputs, out_dir=path)``).

    Every receipt carries the attempt number the receipt log gave the run (``action.start``), and
    the last one, ``action.end``, names the number of events and the head of their chain
    (:mod:`cda.actions.event_chain`). Before the terminal event the run re-reads the receipts
    it appended; ``context.audit`` (the server's check of the stored events) may add problems. Any
    problem fails the run (``action_failed``, ``error_type`` ``AuditLogTampered``).

    The run measures its own spec §10 metrics (:mod:`cda.actions.metrics`) on ``context.clock``:
    ``outputs.metrics`` has the deterministic counts, the terminal event's ``metrics`` adds the
    wall-clock measurements.
    """
    ctx = RunContext.of(context, changes)
    clock, bound, prelude = ctx.clock, ctx.bound, ctx.prelude
    probe = ActionProbe(clock, ctx.approval_waits, ctx.queued_since)  # first thing: TTFS and the total count from here
    inputs = with_bindings(inputs, bound)
    params = _params(inputs, ctx.settings)
    if ctx.action_id is not None:  # a server that named the action when it was submitted (before approvals)
        params.action_id = ctx.action_id
    # the artifact folder is checked (CDA's own, or new) before anything is recorded or written
    writer = ArtifactWriter(ctx.out_dir / params.action_id if ctx.out_dir is not None else None)
    sink = ctx.receipts if ctx.receipts is not None else ReceiptLog(":memory:")
    recorder = Recorder(sink, params.action_id, params.seed.label())
    inputs_json = inputs.model_dump(mode="json")
    inputs_hash = sha256_hex(canonical_json(inputs_json))
    attempt = recorder.start(inputs_hash)
    stream = EventStream(params.action_id, [probe.see, *ctx.subscribers], clock=ctx.wall_clock, attempt=attempt,
                         before_emit=recorder.flush)
    if [(e.action_id, e.attempt, e.seq) for e in prelude] != [(params.action_id, attempt, i) for i in range(len(prelude))]:
        raise ValueError(f"prelude events of {params.action_id} must be numbered 0.. in attempt {attempt}")
    stream.events.extend(prelude)  # already streamed: counted and chained, not sent again
    if not any(e.type == "action_started" for e in prelude):  # a server that streamed a wait or a link began with it
        stream.started(inputs_hash)
    locks = [lock_of(b) for b in bound]
    for b, lock in zip(bound, locks):
        stream.linked(b.action_id, b.ability, "bind")
        recorder.record("action", "bind", {"action_id": b.action_id, "artifact_id": lock.artifact_id},
                        {"revision": lock.revision, "sha256": lock.sha256})
    budget = Budget(inputs.budgets.wall, clock=clock)
    trace: dict[str, Any] = {"action_id": params.action_id, "seed": params.seed.label(), "rounds": []}
    failure: tuple[str, str] | None = None
    try:
        outputs = _Run(inputs, ctx, params, stream, recorder, budget, writer, trace, probe).outputs()
        outputs = outputs.model_copy(update={"revision": ctx.revision, "supersedes": ctx.supersedes})
    except CDAError as err:
        message = err.render() if isinstance(err, DSLError) else str(err)
        recorder.record("action", "action.failed", {"error": message}, {}, status="failed")
        summary_id = writer.write_summary(f"# CDA action {params.action_id}: failed\n\n{message}\n")
        outputs = CDAOutputs(action_id=params.action_id, status="failed", summary_artifact_id=summary_id,
                             caveats=[message])
        failure = (message, type(err).__name__)
    except BaseException:  # stopped by a subscriber (cancel, shutdown): what was recorded is kept
        recorder.flush()
        raise
    counts = outputs.metrics or action_counts(params.action_id, outputs.status, ken_queries=len(probe.ken_us))
    # Before the terminal event: is every receipt (and event) this attempt wrote still as written?
    problems = recorder.confirm() + (list(ctx.audit(stream.events)) if ctx.audit is not None else [])
    if problems:
        message = (f"the audit log of {params.action_id} was changed during the run ({len(problems)} "
                   f"problem(s)): {'; '.join(problems[:3])}")
        recorder.record("action", "action.tampered", {"attempt": attempt}, {"problems": problems[:20]},
                        status="failed")
        outputs = CDAOutputs(action_id=params.action_id, status="failed", summary_artifact_id=outputs.summary_artifact_id,
                             caveats=[message, *outputs.caveats])
        failure = (message, "AuditLogTampered")
    counts = counts.model_copy(update={"status": outputs.status, "partial": outputs.status == "partial"})
    outputs = outputs.model_copy(update={"metrics": counts})
    measured = counts.model_copy(update={"measurements": probe.measurements()})
    if failure is not None:
        stream.failed(*failure, metrics=measured)
    elif outputs.status in ("completed", "abstained"):
        stream.completed(outputs, metrics=measured)
    else:
        stream.partial(outputs, metrics=measured, stopped=budget.stopped())
    recorder.record("action", "action.end", {"attempt": attempt},
                    {"status": outputs.status, "events": len(stream.events), "events_head": events_head(stream.events)})
    recorder.flush()
    return ActionRun(outputs, stream.events, sink.head(), writer.folder, trace, list(bound), locks,
                     attempt=attempt, appended=list(recorder.appended))


def _store_files(sink: Any) -> tuple[Path, ...]:
    """The SQLite file a run's receipts go to: with what CDA keeps beside it
    (:func:`cda.store.family`, listed when a check starts), what a function check must not read
    (other actions' data, the approval secret in reflection_meta, the server's state)."""
    path = getattr(getattr(sink, "log", sink), "path", None)
    if path is None or str(path) == ":memory:":
        return ()
    return (Path(path),)


def accept_bump(inputs: CDAInputs, previous: ActionRun, offered: BoundOutput, context: RunContext | None = None,
                **changes: Any) -> ActionRun:
    """Accept a newer revision of a bound sub-Action output: a new structure revision.

    Raises :class:`CDAError` when ``offered`` is not an update of something ``previous`` bound.
    """
    if not update_available(previous.bindings, offered):
        raise CDAError(f"no update available: {offered.action_id}/{offered.artifact.artifact_id} "
                       f"revision {offered.revision} is not newer content than what the run locked")
    bound = [offered if (b.action_id, b.artifact.artifact_id) == (offered.action_id, offered.artifact.artifact_id)
             else b for b in previous.bound]
    return run_action(inputs, RunContext.of(context, changes), bound=bound, revision=previous.outputs.revision + 1,
                      supersedes=previous.outputs.plan_bundle_id)


@dataclass
class _Round:
    """What the propagate–verify–refine loop carries from one round to the next."""

    gp: GroundProblem
    beam: int
    caveats: list[str] = field(default_factory=list)
    softened: set[str] = field(default_factory=set)
    dropped_soft: bool = False
    result: SolveResult | None = None
    rounds: list[SolveResult] = field(default_factory=list)  # each round's answer, for the frontier metrics
    sources: dict[str, str] = field(default_factory=dict)  # an observation's clause -> the source the client named


@dataclass
class _Run:
    """One run's steps (spec §4), in the order :meth:`outputs` takes them: initialise, then
    propagate–verify–refine rounds (:meth:`search`), then the independent verifiers and the
    report (:meth:`converge`)."""

    inputs: CDAInputs
    ctx: RunContext
    params: _Params
    stream: EventStream
    recorder: Recorder
    budget: Budget
    writer: ArtifactWriter
    trace: dict[str, Any]
    probe: ActionProbe

    def outputs(self) -> CDAOutputs:
        inputs, params, stream, recorder, writer, budget = (
            self.inputs, self.params, self.stream, self.recorder, self.writer, self.budget)
        if inputs.risk_class == "hard":
            return _escalate(inputs, params, stream, recorder, writer)
        # 1. initialise
        stream.progress("initialise", 0.0, "reading the problem")
        ken = self.probe.timed(ken_from_inputs(inputs, self.ctx.ken))
        try:
            problem = build(inputs, ken, budget.deadline(), self.ctx.base_dir)
        except OutOfTime as exc:
            return _out_of_time(inputs, params, stream, recorder, writer, budget, str(exc))
        ken = problem.ken  # with the graphs the dsl's own ken lines name
        check_focus(inputs.focus, problem.assembled.gp, ken)
        if problem.adopted:
            stream.checkpoint("context_delta", {"adopted_observations": problem.adopted})
        gp = problem.assembled.gp
        backend = choose_backend(gp, inputs.backend)
        state = VerificationState(inputs=inputs, problem=problem, ken=ken, recorder=recorder, stream=stream,
                                  budget=budget, llm_factory=self.ctx.llm_factory,
                                  thresholds=self.ctx.thresholds or AbstainThresholds(),
                                  meter=TokenMeter(inputs.budgets.tokens), stores=_store_files(recorder.sink))
        frontier0 = state.initial_frontier(gp, self.ctx.settings.ken_depth)
        stream.checkpoint("plan_delta", {"round": 0, "frontier_seeds": frontier0, "beam": params.beam,
                                         "backend": backend, "depth_cap": params.depth_cap})
        digest = problem_digest(inputs, problem)
        # 2–4. propagate, verify, refine
        loop = self.search(_Round(gp, params.beam, sources=_observation_sources(problem, inputs)), backend, digest)
        # 3. the independent verifiers; 5. converge
        return self.converge(loop, state, backend, digest, len(frontier0))

    def degrade(self, loop: _Round, stage: str) -> None:
        """Walk the ladder as far as the budget's pressure says, recording each rung."""
        for rung in self.budget.step_ladder():
            loop.caveats.append(LADDER_TEXT[rung])
            self.recorder.record("action", f"ladder.{rung}", {"stage": stage}, {"rung": rung})
            self.stream.checkpoint("plan_delta", {"stage": stage, "degradation": rung})
            if rung == "shrink_beam":
                loop.beam = max(self.params.top, loop.beam // 2)
            if rung == "drop_soft_clauses" and loop.gp.soft:
                loop.gp = dataclasses.replace(loop.gp, soft=[])
                loop.dropped_soft = True

    def search(self, loop: _Round, backend: str, digest: str) -> _Round:
        """Rounds of the engine, widening the beam while the enumeration is capped and turning
        conflicting observations soft, until the frontier is stable, the depth cap or the budget."""
        params, stream, recorder, budget = self.params, self.stream, self.recorder, self.budget
        previous: list[tuple[str, ...]] | None = None
        draft_sent = False
        for round_no in range(1, params.depth_cap + 1):
            self.degrade(loop, f"round {round_no}")
            if budget.frozen():
                loop.caveats.append(f"stopped before round {round_no} ({budget.why()}): search frozen"
                                    if budget.cancelled() else f"budget spent before round {round_no}: search frozen")
                break

            def solver_call(name: str, inputs: dict[str, Any], outcome: dict[str, Any], status: str,
                            round_no: int = round_no) -> None:
                """One receipt per solver call the engine makes this round."""
                recorder.record("solver", name, {"round": round_no, **inputs}, outcome,
                                status="timeout" if status == "timeout" else "ok")

            options = EngineOptions(top=params.top, seed=params.solver_seed, timeout=budget.search_remaining(),
                                    max_hypotheses=loop.beam, call_log=solver_call)
            stream.progress("propagate", round_no / (params.depth_cap + 1), f"round {round_no}: beam {loop.beam}")
            result = loop.result = run(loop.gp, backend, options, budget.deadline())
            loop.rounds.append(result)
            recorder.record(
                "solver", f"{backend}.solve",
                {"problem": digest, "softened": sorted(loop.softened), "dropped_soft": loop.dropped_soft,
                 "round": round_no},
                {"status": result.status, "hypotheses": len(result.hypotheses), "enumerated": result.hypotheses_enumerated,
                 "complete": result.enumeration_complete, "partial": result.partial},
                caps={"beam": loop.beam, "wall_s": -1 if budget.wall is None else budget.wall},
                status="timeout" if result.partial else "ok",
            )
            stream.checkpoint("verifier_update", {
                "round": round_no, "verifier": "constraint_satisfiability", "status": result.status,
                "verdicts": {v.name: v.status for v in result.verdicts},
            })
            self.trace["rounds"].append({"round": round_no, "beam": loop.beam, "result": result.model_dump(mode="json")})
            if result.status == "unsat" and result.conflict is not None:
                names = {n for core in result.conflict.cores for n in core if n.startswith("observe@")} - loop.softened
                if names:
                    loop.softened |= names
                    loop.gp = _soften(loop.gp, names)
                    stream.checkpoint("plan_delta", {
                        "round": round_no, "refine": "conflicting observations become hypotheses",
                        "distrusted_candidates": sorted(names), "cores": result.conflict.cores,
                    })
                    loop.caveats.append("the observations conflict (" + "; ".join(", ".join(
                        f"{loop.sources[n]} [{n}]" if n in loop.sources else n for n in core)
                        for core in result.conflict.cores) + "): each may be wrong")
                    continue
                break
            if result.partial:
                loop.caveats.append(f"round {round_no} was stopped ({budget.why()}): hypotheses are those found so far"
                                    if budget.cancelled() else
                                    f"round {round_no} ran out of time: hypotheses are those found so far")
                break
            current = _frontier(result)
            stream.checkpoint("plan_delta", {
                "round": round_no, "frontier": [list(h) for h in current],
                "added": [list(h) for h in current if previous is None or h not in previous],
                "pruned": [list(h) for h in (previous or []) if h not in current],
                "enumerated": result.hypotheses_enumerated, "complete": result.enumeration_complete,
            })
            if not draft_sent:
                stream.checkpoint("boundary_summary", {"draft": True, "text": boundary_summary(
                    params.action_id, self.inputs, result, [], [], loop.caveats + ["draft: verification still running"])})
                draft_sent = True
            if result.enumeration_complete or current == previous or loop.beam >= self.ctx.settings.max_beam:
                break
            previous = current
            loop.beam = min(self.ctx.settings.max_beam, loop.beam * 4)
            stream.checkpoint("plan_delta", {"round": round_no, "expand": "enumeration capped; beam widened",
                                             "beam": loop.beam})
        return loop

    def converge(self, loop: _Round, state: VerificationState, backend: str, digest: str, seeds: int) -> CDAOutputs:
        """The verifiers on the last round's answer, then the report: verdicts, next tests, the
        boundary summary, the bundles and the status."""
        inputs, params, stream, recorder, writer, budget = (
            self.inputs, self.params, self.stream, self.recorder, self.writer, self.budget)
        caveats, gp = loop.caveats, loop.gp
        result = loop.result
        if result is None:
            caveats.append("no solver round ran within the budget")
            result = SolveResult(status=SolverStatus.UNKNOWN, backend=backend, seed=params.solver_seed, hypotheses=[],
                                 hypotheses_enumerated=0, enumeration_complete=False, verdicts=[], next_tests=[],
                                 conflict=None, partial=True, notes=[])
        stream.progress("verify", 0.8, "independent checks")
        self.degrade(loop, "verify")
        gp = loop.gp
        verified = run_verifiers(state, gp, result, backend, skip_external=budget.has("reduce_external_calls"),
                                 before_each=lambda: self.degrade(loop, "verify"))
        caveats.extend(verified.caveats)
        caveats.extend(gp.notes)  # what the grounder folded (a bound beyond the numeric range) is said here too

        stream.progress("report", 0.9, "writing the summary")
        # the last check may have spent the budget after the ladder last looked: the summary is
        # written under the pressure it is written at (a spent budget is a conservative summary)
        self.degrade(loop, "report")
        verdicts = verified.verdicts
        if budget.has("conservative_summary"):
            verdicts = [v if v.confidence is None else v.model_copy(update={  # unknown: no confidence to cap
                "confidence": min(v.confidence, 0.84), "band": band_for(min(v.confidence, 0.84), v.status)})
                for v in verdicts]
            # the report says what the verdicts say: one band per statement (docs/actions.md)
            verdicts, verified.report = one_band_per_statement(verdicts, verified.report, verdict_statements(result))
            if verified.review is not None and verified.review.status == "NEEDS_REWRITE":
                verified.review = verified.review.model_copy(update={"rewritten": verified.report})
        next_tests = [
            NextTestSuggestion(
                question=f"Is {t.observable} true?", observable=t.observable, suggested_ability="sandbox",
                expected_discriminative_power=t.expected_information_gain,
            )
            for t in result.next_tests
        ]
        next_tests += verified.research
        partial = result.partial or budget.frozen() or budget.has("conservative_summary")
        status: ActionStatus = "partial" if partial else "completed"
        shown = result
        if verified.abstain is not None:
            # the abstain rule is a hard stop: no explanation is offered as a conclusion (docs/actions.md)
            verdicts = [v for v in verdicts if not v.claim.startswith("explanation:")]
            shown = result.model_copy(update={"hypotheses": []})
            next_tests += [NextTestSuggestion(question=f"Collect: {what}", suggested_ability="research")
                           for what in verified.abstain.action.collect_next[:3]]
            if status == "completed":
                status = "abstained"
        if status == "partial":
            caveats, next_tests = _partial_says_why(caveats, next_tests, budget)
        counts = action_counts(params.action_id, status, seeds=seeds, rounds=loop.rounds, result=result, gp=gp,
                               outcomes=verified.outcomes, verdicts=verdicts, receipts=recorder.receipts,
                               ken_queries=len(self.probe.ken_us))
        summary = boundary_summary(params.action_id, inputs, shown, verdicts, next_tests, caveats,
                                   abstain=verified.abstain, citations=verified.citations, support=counts.citations,
                                   report=verified.report)
        summary_id = writer.write_summary(summary)
        plan_id = writer.write_plan_bundle(
            hypotheses=verified.records,
            constraints={"problem_sha256": digest, "hard": [c.name for c in gp.clauses],
                         "soft": [{"name": s.name, "weight": str(s.weight)} for s in gp.soft],
                         "softened_observations": sorted(loop.softened), "dropped_soft": loop.dropped_soft},
            plan_graph=_plan_graph(stream),
            verifiers=[o.model_dump(mode="json") for o in verified.outcomes],
            receipts=recorder.receipts_json(),
            context=_context_pack(state, digest),
        )
        evidence_id = writer.write_evidence_bundle(verified.citations, recorder.stubs(), verified.unverified)
        stream.checkpoint("boundary_summary", {"draft": False, "summary_artifact_id": summary_id, "text": summary})
        recorder.record("action", "action.converged", {"status": status},
                        {"summary": summary_id, "plan": plan_id, "evidence": evidence_id})
        self.trace["verifiers"] = [o.model_dump(mode="json") for o in verified.outcomes]
        records = [] if verified.abstain is not None else _records(verified.records)
        selected = next(((r["id"], str(r.get("selected_reason", ""))) for r in verified.records if r.get("selected")),
                        None)
        fallbacks = (["abstained"] if verified.abstain is not None else []) + (
            ["a required LLM check failed closed"] if verified.unverified else []) + list(budget.applied)
        written_hard = [p.written for p in state.problem.placed()
                        if isinstance(p.statement, A.Hard)]
        return CDAOutputs(
            action_id=params.action_id, status=status, summary_artifact_id=summary_id, plan_bundle_id=plan_id,
            evidence_bundle_id=evidence_id, verdicts=verdicts, next_tests=next_tests, caveats=caveats,
            abstain=verified.abstain, review=verified.review,
            coverage=state.coverage.figures() if state.coverage is not None else None,
            hypotheses=records,
            trace=action_trace(state.inputs, gp, state.coverage, records, selected, verdicts, written_hard, fallbacks),
            epistemic_report=verified.report,
            metrics=counts,
        )


def _records(records: list[dict[str, Any]]) -> list[HypothesisRecord]:
    """The plan bundle's hypothesis records as the outputs contract holds them (the bundle's own
    ranking fields, score and selection, stay in the bundle)."""
    fields = set(HypothesisRecord.model_fields)
    return [HypothesisRecord.model_validate({k: v for k, v in r.items() if k in fields}) for r in records]


def _partial_says_why(caveats: list[str], next_tests: list[NextTestSuggestion],
                      budget: Budget) -> tuple[list[str], list[NextTestSuggestion]]:
    """A partial run never ends without caveats and next tests (spec §9, QA scenario 4); a
    cancelled one says first who stopped it."""
    if budget.cancelled():
        caveats = [f"{budget.why()}: the run stopped before it finished; what is listed is what was found "
                   "until then", *caveats]  # no time in it: the same stop gives the same bytes
    if not caveats and budget.frozen():  # the budget ran out after the last rung was looked at
        caveats = [f"search budget spent ({budget.elapsed():.3g} s of budgets.wall {budget.wall:g} s, "
                   f"{budget.margin:.3g} s of it kept for the summary): the run stopped before it "
                   "finished and results are incomplete"]
    if not caveats:
        caveats = [f"the run stopped before it finished ({budget.elapsed():.3g} s of "
                   f"{'no limit' if budget.wall is None else f'{budget.wall:g} s'}): results are incomplete"]
    if budget.wall is not None and budget.stopped() is None and not any("budget" in c for c in caveats):
        # say which budget, always; a client's or the server's stop is named above instead (with no
        # time in it: the same stop gives the same bytes in-process and in a runner process)
        caveats = [*caveats, f"budgets.wall {budget.wall:g} s: the run ended partial after {budget.elapsed():.3g} s "
                   f"({budget.margin:.3g} s of it kept for the summary)"]
    if not next_tests:
        more = "a larger budgets.wall" if budget.wall is not None else "the same inputs"
        next_tests = [NextTestSuggestion(question=f"Re-run with {more}: which verdicts change when the search "
                                         "and the verifiers finish?", suggested_ability="default")]
    return caveats, next_tests


def _out_of_time(inputs: CDAInputs, params: _Params, stream: EventStream, recorder: Recorder,
                 writer: ArtifactWriter, budget: Budget, where: str) -> CDAOutputs:
    """The budget ran out before the problem was even grounded: a partial with nothing settled."""
    caveats, next_tests = _partial_says_why(
        [f"{where} within the search budget of {budget.search_seconds or 0:.3g} s: no hypothesis was "
         "searched and no claim was checked"], [], budget)
    recorder.record("action", "action.out_of_time", {"stage": "ground"}, {"reason": where}, status="timeout")
    result = SolveResult(status=SolverStatus.UNKNOWN, backend="none", seed=params.solver_seed, hypotheses=[],
                         hypotheses_enumerated=0, enumeration_complete=False, verdicts=[], next_tests=[],
                         conflict=None, partial=True, notes=[where])
    summary = boundary_summary(params.action_id, inputs, result, [], next_tests, caveats)
    summary_id = writer.write_summary(summary)
    evidence_id = writer.write_evidence_bundle([], recorder.stubs())
    # on the stream as every run's summary is: a client and the TTFS metric see the partial's answer
    stream.checkpoint("boundary_summary", {"draft": False, "summary_artifact_id": summary_id, "text": summary})
    return CDAOutputs(action_id=params.action_id, status="partial", summary_artifact_id=summary_id,
                      evidence_bundle_id=evidence_id, next_tests=next_tests, caveats=caveats)


def _observation_sources(problem: ActionProblem, inputs: CDAInputs) -> dict[str, str]:
    """Each ``observe@LINE`` clause taken from an input observation -> the source the client gave
    it (a span's ``source``, an artifact's id), so a caveat names what the client sent."""
    out: dict[str, str] = {}
    for clause in problem.assembled.gp.clauses:
        kind, _, line = clause.name.partition("@")
        index = problem.observation_of_line.get(int(line)) if kind == "observe" and line.isdigit() else None
        if index is not None and index < len(inputs.observations):
            ref = inputs.observations[index]
            out[clause.name] = ref.source if ref.kind == "span" else ref.artifact_id
    return out


def _context_pack(state: VerificationState, digest: str) -> dict[str, Any]:
    """The context the action adopted (spec §4 step 5), as the plan bundle's ``context_pack.json``:
    the observations by source with the lines taken from them, the knowledge it read, the seed,
    budgets and policies it ran under. Boundary-safe: sources and counts, not Ken's contents."""
    inputs, ken = state.inputs, state.ken
    return {
        "problem_sha256": digest,
        "observations": [o.source if o.kind == "span" else o.artifact_id for o in inputs.observations],
        "adopted_observations": list(state.problem.adopted),
        "ken": None if ken is None else {"nodes": len(ken)},
        "seed": inputs.seed.model_dump(mode="json"),
        "budgets": inputs.budgets.model_dump(mode="json"),
        "policies": inputs.policies.model_dump(mode="json"),
    }


def _plan_graph(stream: EventStream) -> dict[str, Any]:
    """The refine steps as a graph: one node per plan_delta, edges in the order they happened."""
    nodes = [
        {"id": f"step{e.seq}", "payload": e.payload}  # type: ignore[union-attr]
        for e in stream.events
        if e.type == "action_checkpoint" and e.kind == "plan_delta"  # type: ignore[union-attr]
    ]
    edges = [{"from": a["id"], "to": b["id"]} for a, b in zip(nodes, nodes[1:])]
    return {"nodes": nodes, "edges": edges}


def _escalate(inputs: CDAInputs, params: _Params, stream: EventStream, recorder: Recorder,
              writer: ArtifactWriter) -> CDAOutputs:
    """risk_class "hard": no search at all; the run hands the decision to a person."""
    reason = "risk_class 'hard': escalated to a human reviewer before any search (spec §9)"
    stream.notice(reason, level="warning")
    recorder.record("action", "action.escalated", {"risk_class": inputs.risk_class}, {"reason": reason})
    # next tests are never empty (spec §9): what the reviewer is asked to decide, claim by claim
    next_tests = [NextTestSuggestion(question=f"For the reviewer: does {claim} hold? (no search ran)",
                                     suggested_ability="default") for claim in inputs.goals.claims]
    next_tests.append(NextTestSuggestion(
        question="Once a reviewer allows a search: re-run with a risk_class below 'hard' and compare the verdicts "
                 "with the review", suggested_ability="default"))
    summary_id = writer.write_summary(f"# CDA action {params.action_id}: escalated\n\n{reason}\n\n## Next tests\n\n"
                                      + "".join(f"- {t.question}\n" for t in next_tests))
    return CDAOutputs(action_id=params.action_id, status="escalated", summary_artifact_id=summary_id,
                      caveats=[reason], next_tests=next_tests)

