"""The verify loop (docs/conductor.md, loop 3): every reported answer is checked again before the reply.

* **math** (``compute``): the expression recomputed by sympy's rationals, which must give the
  same exact value, whichever tool answered.
* **db** (``query``) and **rules** (``solve``, ``prove``, ``diagnose``, ``run_action`` and any
  other type): the tool's own independent re-check when it has one (CDA's tools re-solve on the
  other backend), otherwise the same tool run again, which must give the same outputs.
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
from cda.conductor.registry import Registry
from cda.conductor.tooling import ToolContext
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

Kind = Literal["math", "db", "rules", "facts"]
_KIND: dict[str, Kind] = {"compute": "math", "query": "db", "lookup": "facts"}


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
    tool = next((t for t in registry.tools if t.spec.name == run.tool), None)
    if tool is None:
        return f"{run.tool} is no longer in the registry; its answer cannot be re-evaluated"
    impl = registry.toolbox.tools[tool.spec.implementation]
    outputs = run.outputs or {}
    if impl.recheck is not None:
        return impl.recheck(run.inputs, outputs, ctx)
    again = impl.run(run.inputs, ctx)
    return None if canonical(again) == canonical(outputs) else f"{run.tool} run again gives a different answer"


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
    ids = {a.id for a in mine}
    every = db.assertions(key="fact")
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
        if run is None:
            why: str | None = "no finished tool run answers it"
        else:
            try:
                why = (_facts(db, o, run) if kind == "facts" else _math(run) if kind == "math"
                       else _rules(db, registry, ctx, run))
            except Exception as exc:  # a re-check that cannot run does not confirm the answer
                why = f"the re-check failed: {type(exc).__name__}: {exc}"[:2000]
        same = "in the IR, from a run that finished ok, not contradicted" if kind == "facts" else "re-evaluated: the same"
        finding = Verification(obligation_id=o.id, kind=kind, ok=why is None, detail=why or same)
        with db.transaction() as conn:
            db.add_verification(conn, request_id, finding)
            if why is not None:
                meta = "clarify" if why.startswith("contradicted") else "justify"
                db.add_obligation(conn, request_id, meta, {"reason": f"verification of {o.type} failed: {why}"}, o.id)
