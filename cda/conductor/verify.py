"""The verify loop (docs/conductor.md, loop 3): every reported answer is checked again before the reply.

* **math** (``compute``): the expression recomputed by sympy's rationals, which must give the
  same exact value, whichever tool answered.
* **db** (``query``) and **rules** (``solve``, ``prove``, ``diagnose``, ``run_action`` and any
  other type), for a tool that is deterministic and without side effects: the tool's own
  independent re-check when it has one (CDA's tools re-solve on the other backend), otherwise the
  same tool run again, which must give the same outputs.
* **verifier**: a tool with side effects, or whose answer may change (a live metric), is never
  run again. When the registry names a ``verify`` tool for it, that tool (side-effect free by
  the registry's rule) is given the run's inputs and outputs and must answer ``{"ok": true}``.
* **recorded**: otherwise its answer is checked where it is kept: the run finished ``ok``, the
  IR holds exactly its outputs with the run as their source, its postconditions still hold on
  them, and the facts it reported are not contradicted.
* **facts** (``lookup``): each fact cross-checked against the IR — it *exists* there as an
  assertion of this obligation, its *provenance* is a tool run that finished ``ok``, and it is
  *not contradicted*: CDA's solver decides whether all facts in the IR can hold together, and
  an unsatisfiable set whose core holds one of this answer's facts fails it, naming the core.

A failed check replaces that answer with an uncertainty message (Translator-Out) and adds a
JUSTIFY (the answer did not re-evaluate) or CLARIFY (the facts contradict: someone must say
which holds) obligation. Checks already written are not redone when a killed conductor resumes.
"""

from __future__ import annotations

from typing import Literal

from cda.conductor.arithmetic import exact_text, recompute
from cda.conductor.irdb import IRDatabase, canonical
from cda.conductor.plan import check_conditions
from cda.conductor.registry import RegisteredTool, Registry
from cda.conductor.tooling import ToolContext, said
from cda.contracts.conductor import (
    META_TYPES,
    Assertion,
    Fact,
    Obligation,
    ObligationStatus,
    ToolRun,
    ToolRunStatus,
    Verification,
)

__all__ = ["contradictions", "verify_request"]

Kind = Literal["math", "db", "rules", "facts", "recorded", "verifier"]
_KIND: dict[str, Kind] = {"compute": "math", "query": "db", "lookup": "facts"}


_SAME = {
    "facts": "in the IR, from a run that finished ok, not contradicted",
    "recorded": "not run again (side effects or a live answer): the IR holds the run's outputs, its "
                "postconditions hold, nothing contradicts it",
    "verifier": "not run again: its verify tool confirms the answer",
}


def resolving_run(db: IRDatabase, obligation: Obligation) -> ToolRun | None:
    """The run whose outputs answered ``obligation``."""
    ok = [r for r in db.runs(obligation.id) if r.status is ToolRunStatus.OK]
    return ok[-1] if ok else None


def contradictions(facts: list[Assertion]) -> list[list[int]]:
    """Minimal sets of fact assertions (by id) that cannot hold together, decided by CDA's
    solver: one Boolean per atom, one hard clause per fact; an unsatisfiable problem's cores."""
    from cda.api import solve

    if not facts:
        return []
    atoms: dict[str, str] = {}
    clauses = []
    for a in facts:
        fact = Fact.parse(str(a.value))
        name = atoms.setdefault(fact.atom, f"a{len(atoms) + 1}")
        clauses.append(f"hard fact_{a.id}: {'' if fact.positive else 'not '}{name}")
    text = f"var {', '.join(atoms.values())}\n" + "\n".join(clauses)
    result = solve(text, top=1)
    if result.conflict is None:
        return []
    return [sorted(int(c.removeprefix("fact_")) for c in core) for core in result.conflict.cores]


def _rules(db: IRDatabase, registry: Registry, ctx: ToolContext, run: ToolRun) -> str | None:
    tool = registry.named(run.tool)
    if tool is None:
        return f"{run.tool} is no longer in the registry; its answer cannot be re-evaluated"
    outputs = run.outputs or {}
    if tool.impl.recheck is not None:
        return tool.impl.recheck(run.inputs, outputs, ctx)
    again = tool.impl.run(run.inputs, ctx)
    return None if canonical(again) == canonical(outputs) else f"{run.tool} run again gives a different answer"


def _verifier(registry: Registry, ctx: ToolContext, tool: RegisteredTool, run: ToolRun) -> str | None:
    """The declared ``verify`` tool on the run's inputs and outputs: ``{"ok": bool, "detail": …}``."""
    assert tool.spec.verify is not None
    checker = registry.named(tool.spec.verify)
    if checker is None:
        return f"its verify tool {tool.spec.verify!r} is not in the registry"
    given = {**run.inputs, **(run.outputs or {})}
    verdict = checker.impl.run({k: given[k] for k in checker.spec.inputs if k in given} if checker.spec.inputs
                               else {"inputs": run.inputs, "outputs": run.outputs or {}}, ctx)
    if verdict.get("ok") is True:
        return None
    return f"{checker.spec.name} says: {verdict.get('detail') or 'not ok'}"


def _recorded(db: IRDatabase, registry: Registry, ctx: ToolContext, obligation: Obligation, tool: RegisteredTool,
              run: ToolRun) -> str | None:
    """Without running anything: provenance, the IR against the run, postconditions, facts."""
    outputs = run.outputs or {}
    if db.run_status(run.id) is not ToolRunStatus.OK:
        return f"run {run.id} did not finish ok"
    mine = [a for a in db.assertions(obligation.request_id) if a.obligation_id == obligation.id]
    for a in mine:
        source = db.source(a.source_id)
        if source is None or source.kind != "tool" or source.tool_run_id != run.id:
            return f"assertion {a.id} ({a.key}) does not come from run {run.id}"
    held = {a.key: a.value for a in mine if a.key != "fact"}
    if canonical(held) != canonical({k: v for k, v in outputs.items() if k != "facts"}):
        return "the IR does not hold exactly the run's outputs"
    failed = check_conditions(tool.postconditions, registry.toolbox.postconditions, run.inputs, outputs, ctx)
    if failed:
        return "a postcondition no longer holds: " + "; ".join(failed)
    return _contradicted(db, obligation, mine) if any(a.key == "fact" for a in mine) else None


def _math(run: ToolRun) -> str | None:
    """The expression recomputed by sympy, whatever tool answered it."""
    expression = run.inputs.get("expression")
    if not isinstance(expression, str):
        return "the answer names no expression to recompute"
    again = exact_text(recompute(expression))
    value = (run.outputs or {}).get("value")
    return None if again == value else f"sympy gives {again}, {run.tool} said {value}"


def _facts(db: IRDatabase, obligation: Obligation, run: ToolRun) -> str | None:
    stated = sorted(Fact.parse(str(f)).text for f in (run.outputs or {}).get("facts", []))
    mine = [a for a in db.assertions(obligation.request_id, "fact") if a.obligation_id == obligation.id]
    if sorted(str(a.value) for a in mine) != stated:
        return "the reported facts are not the ones in the IR"
    for a in mine:
        source = db.source(a.source_id)
        if source is None or source.kind != "tool" or source.tool_run_id is None:
            return f"fact {a.value!r} has no tool as its source"
        if db.run_status(source.tool_run_id) is not ToolRunStatus.OK:
            return f"fact {a.value!r} comes from a run that did not finish ok"
    return _contradicted(db, obligation, mine)


def _contradicted(db: IRDatabase, obligation: Obligation, mine: list[Assertion]) -> str | None:
    """The facts of ``mine`` against every fact of the same request that is not retracted: a
    fact carries its request, so one request's fact never contradicts another's answer."""
    ids = {a.id for a in mine if a.key == "fact"}
    every = db.assertions(obligation.request_id, key="fact")
    by_id = {a.id: a for a in every}
    for core in contradictions(every):
        if ids & set(core):
            return "contradicted in the IR: " + ", ".join(f"{by_id[i].value} (assertion {i})" for i in core)
    return None


def verify_request(request_id: int, registry: Registry, db: IRDatabase, ctx: ToolContext) -> None:
    """Check every resolved answer of the request not checked yet; write each finding."""
    done = {v.obligation_id for v in db.verifications(request_id)}
    for o in db.obligations(request_id):
        if o.type in META_TYPES or o.status is not ObligationStatus.RESOLVED or o.id in done:
            continue
        run = resolving_run(db, o)
        kind: Kind = _KIND.get(o.type, "rules")
        tool = registry.named(run.tool) if run is not None else None
        if tool is not None and kind in ("rules", "db") and not tool.spec.rerunnable:
            kind = "verifier" if tool.spec.verify is not None else "recorded"
        if run is None:
            why: str | None = "no finished tool run answers it"
        elif run.tool == "user":
            kind, why = "recorded", None  # the user's own word (a CLARIFY answered with outputs)
        else:
            try:
                if kind == "facts":
                    why = _facts(db, o, run)
                elif kind == "math":
                    why = _math(run)
                elif kind in ("verifier", "recorded"):
                    assert tool is not None
                    why = (_verifier(registry, ctx, tool, run) if kind == "verifier"
                           else _recorded(db, registry, ctx, o, tool, run))
                else:
                    why = _rules(db, registry, ctx, run)
            except Exception as exc:  # a re-check that cannot run does not confirm the answer
                why = f"the re-check failed: {said(exc)}"[:2000]
        same = _SAME.get(kind, "re-evaluated: the same")
        finding = Verification(obligation_id=o.id, kind=kind, ok=why is None, detail=why or same)
        with db.transaction() as conn:
            db.add_verification(conn, request_id, finding)
            if why is not None:
                meta = "clarify" if why.startswith("contradicted") else "justify"
                db.add_obligation(conn, request_id, meta, {"reason": f"verification of {o.type} failed: {why}"}, o.id)
