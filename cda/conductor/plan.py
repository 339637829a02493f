"""The plan loop (docs/conductor.md, loop 2), one obligation at a time, every step read from and written
to the IR database.

1. Candidates: tools whose ``satisfies`` includes the obligation's type, in the fixed order
   (reliability > cost > latency > name). None: a DISCOVER_OP child, the obligation escalated.
2. Each candidate's inputs come from the obligation, else from the request's assertions (an
   earlier obligation's output of that name); then its preconditions. No candidate has both:
   a CLARIFY child naming what is missing, the obligation escalated.
3. The first eligible candidate not yet tried runs; its outputs go to the IR (an assertion per
   output, a source, an event) only when every postcondition holds. Otherwise the next one.
4. Every eligible candidate failed: a JUSTIFY(failure) child listing why, the obligation failed.

Which candidates were tried is read from ``tool_runs``, so a conductor killed between two
candidates resumes with the next; a run cut short (``interrupted``) is tried again — unless the
tool declares ``side_effects = "once"``: its run was recorded (``started``) before the call, so
whether it acted is unknown, and it is never called a second time for the obligation. The
obligation is then handed to a person (a CLARIFY saying so) instead of risking the act twice.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from cda.conductor.irdb import IRDatabase, canonical
from cda.conductor.registry import RegisteredTool, Registry
from cda.conductor.tooling import ConditionCall, ToolContext, ToolError, kind_of, said
from cda.contracts.conductor import Fact, Obligation, ObligationStatus, SideEffects, ToolRunStatus

__all__ = ["Eligibility", "check_conditions", "eligibility", "plan_obligation"]

_TRIED = {ToolRunStatus.OK, ToolRunStatus.ERROR, ToolRunStatus.POSTCONDITION_FAILED}


@dataclass(frozen=True)
class Eligibility:
    """A candidate's inputs when they are all at hand and its preconditions hold; else why not."""

    tool: RegisteredTool
    inputs: dict[str, Any] | None
    missing: tuple[str, ...] = ()
    failed: tuple[str, ...] = ()


def _from_ir(db: IRDatabase, obligation: Obligation, names: list[str]) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for a in db.assertions(obligation.request_id):
        if a.key in names:
            found[a.key] = a.value  # the latest of a name wins
    return found


def check_conditions(calls: tuple[ConditionCall, ...], table: Mapping[str, Any], inputs: Mapping[str, Any],
           outputs: dict[str, Any] | None, ctx: ToolContext) -> list[str]:
    failed = []
    for call in calls:
        try:
            why = table[call.name](inputs, outputs, ctx, call.args)
        except Exception as exc:  # a condition that breaks on odd input does not hold
            why = said(exc)
        if why is not None:
            failed.append(f"{call.text}: {why}")
    return failed


def eligibility(tool: RegisteredTool, obligation: Obligation, db: IRDatabase, ctx: ToolContext,
                registry: Registry) -> Eligibility:
    """Inputs from the obligation (else the IR), then preconditions, for one candidate."""
    names = tool.spec.inputs
    given = {k: obligation.inputs[k] for k in names if k in obligation.inputs}
    absent = [k for k in names if k not in given]
    if absent:
        given.update(_from_ir(db, obligation, absent))
    missing = tuple(k for k in names if k not in given)
    if missing:
        return Eligibility(tool, None, missing=missing)
    inputs = {**{k: v for k, v in obligation.inputs.items() if k not in given}, **given}
    failed = check_conditions(tool.preconditions, registry.toolbox.preconditions, inputs, None, ctx)
    return Eligibility(tool, None if failed else inputs, failed=tuple(failed))


def _run(tool: RegisteredTool, inputs: dict[str, Any], registry: Registry, ctx: ToolContext,
         ) -> tuple[ToolRunStatus, dict[str, Any] | None, str | None, float]:
    start = time.perf_counter()
    try:
        outputs = tool.impl.run(inputs, ctx)
        if not isinstance(outputs, dict):
            raise ToolError(f"the tool returned {kind_of(outputs)}, not a JSON object")
        canonical(outputs)  # JSON or refused here, not half-written later
        for fact in outputs.get("facts") or []:  # facts become assertions: each must read as one
            Fact.parse(str(fact))
    except Exception as exc:  # any failure of a tool is its run's outcome, never the conductor's
        return ToolRunStatus.ERROR, None, said(exc)[:2000], _ms(start)
    duration = _ms(start)
    failed = check_conditions(tool.postconditions, registry.toolbox.postconditions, inputs, outputs, ctx)
    if failed:
        return ToolRunStatus.POSTCONDITION_FAILED, outputs, "; ".join(failed)[:2000], duration
    return ToolRunStatus.OK, outputs, None, duration


def _ms(start: float) -> float:
    return round((time.perf_counter() - start) * 1000, 3)


def plan_obligation(obligation: Obligation, registry: Registry, db: IRDatabase, ctx: ToolContext) -> None:
    """Settle one active obligation (resolved, escalated or failed), step by step in the IR."""
    candidates = registry.candidates(obligation.type)
    if not candidates:
        with db.transaction() as conn:
            reason = f"no tool satisfies {obligation.type!r}"
            db.add_obligation(conn, obligation.request_id, "discover_op",
                              {"obligation_type": obligation.type, "reason": reason}, obligation.id)
            db.settle(conn, obligation, ObligationStatus.ESCALATED, reason)
        return
    checked = [eligibility(t, obligation, db, ctx, registry) for t in candidates]
    eligible = [e for e in checked if e.inputs is not None]
    if not eligible:
        first = checked[0]
        needs = [f"input {k}" for k in first.missing] + list(first.failed)
        reason = f"{first.tool.spec.name} needs: {'; '.join(needs)}"
        with db.transaction() as conn:
            db.add_obligation(conn, obligation.request_id, "clarify",
                              {"reason": reason, "missing": list(first.missing), "inputs": list(first.tool.spec.inputs)},
                              obligation.id)
            db.settle(conn, obligation, ObligationStatus.ESCALATED, reason)
        return
    runs = db.runs(obligation.id)
    tried = {r.tool for r in runs if r.status in _TRIED}
    for e in eligible:
        if e.tool.spec.name in tried:
            continue
        cut = [r for r in runs if r.tool == e.tool.spec.name and r.status is ToolRunStatus.INTERRUPTED]
        if cut and e.tool.spec.side_effects is SideEffects.ONCE:
            reason = (f"{e.tool.spec.name} (side_effects once) was stopped during run {cut[-1].id}, after its call "
                      "was recorded: it may have acted, so it is not called again; say what happened "
                      f"(cda conduct --answer {obligation.id} \"…\")")
            with db.transaction() as conn:
                db.add_obligation(conn, obligation.request_id, "clarify",
                                  {"reason": reason, "missing": [], "unsure_run": cut[-1].id}, obligation.id)
                db.settle(conn, obligation, ObligationStatus.ESCALATED, reason)
            return
        assert e.inputs is not None
        run_id = db.start_run(obligation, e.tool.spec.name, e.inputs)
        status, outputs, detail, duration = _run(e.tool, e.inputs, registry, ctx)
        with db.transaction() as conn:
            db.end_run(conn, obligation, run_id, status, outputs, detail, duration)
            if status is ToolRunStatus.OK:
                assert outputs is not None
                _record(db, conn, obligation, run_id, e.tool.spec.name, outputs)
                db.settle(conn, obligation, ObligationStatus.RESOLVED, f"answered by {e.tool.spec.name}")
                return
    failures = [f"{r.tool}: {r.detail}" for r in db.runs(obligation.id) if r.status in _TRIED]
    reason = "every candidate failed: " + "; ".join(failures)
    with db.transaction() as conn:
        db.add_obligation(conn, obligation.request_id, "justify", {"reason": reason[:4000]}, obligation.id)
        db.settle(conn, obligation, ObligationStatus.FAILED, reason[:4000])


def _record(db: IRDatabase, conn: Any, obligation: Obligation, run_id: int, tool: str,
            outputs: dict[str, Any]) -> None:
    """A resolved run's outputs as assertions (facts one by one), with their source and an event."""
    source = db.add_source(conn, "tool", run_id, f"{tool} run {run_id}")
    for key in sorted(outputs):
        if key == "facts" and isinstance(outputs[key], list):
            for fact in outputs[key]:
                db.add_assertion(conn, obligation.request_id, obligation.id, "fact", Fact.parse(str(fact)).text,
                                 source)
        else:
            db.add_assertion(conn, obligation.request_id, obligation.id, key, outputs[key], source)
    db.event(conn, obligation.request_id, "assertion_written", {"obligation": obligation.id, "run": run_id})
