"""CDA's other products as conductor tools: ``cda.prove`` (first-order claims), ``cda.diagnose``
(circuits) and ``cda.run_action`` (a whole Action), with the postcondition ``resimulates``.

They live here, not in :mod:`cda.conductor`, because the conductor is a product beside
:mod:`cda.fol` and :mod:`cda.diagnosis` and products do not import each other; the adapter that
wires ``cda conduct`` adds them to the conductor's toolbox (:func:`cda_toolbox`).

Each has an independent re-check for the verify loop: a proof is re-decided with the other
backend's cross-check, a diagnosis is re-simulated gate by gate (consistent with every
observation, and minimal), an Action is run again from the same inputs and seed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cda.conductor.tooling import Outputs, Tool, Toolbox, ToolContext, ToolError
from cda.conductor.tools import builtin_toolbox
from cda.errors import CDAError

__all__ = ["cda_toolbox"]


# ---- cda.prove
def _prove(inputs: Mapping[str, Any], ctx: ToolContext, cross_check: bool = False) -> Outputs:
    from cda.cli.fol import read_fol_file
    from cda.fol.prove import prove_all

    try:
        problem = read_fol_file(ctx.path(inputs["problem"]))
        if not problem.claims:
            raise ToolError(f"{inputs['problem']}: no claim to prove")
        results = prove_all(problem, cross_check=cross_check)
    except CDAError as exc:
        raise ToolError(str(exc)) from None
    return {
        "verdicts": [
            {"goal": "claim", "claim": r.claim_name, "status": r.status, "justification": list(r.premises_used),
             "fragment": r.fragment, "backend": r.backend, "cross_check": r.cross_check}
            for r in results
        ]
    }


def _reprove(inputs: Mapping[str, Any], outputs: Outputs, ctx: ToolContext) -> str | None:
    again = _prove(inputs, ctx, cross_check=True)
    mine = [(v["claim"], v["status"]) for v in outputs.get("verdicts", [])]
    theirs = [(v["claim"], v["status"]) for v in again["verdicts"]]
    if mine != theirs:
        return "the cross-checked proof gives other statuses"
    split = [v["claim"] for v in again["verdicts"] if v["cross_check"] == "disagree"]
    return f"the backends disagree on {', '.join(split)}" if split else None


# ---- cda.diagnose
def _instance(inputs: Mapping[str, Any], ctx: ToolContext) -> Any:
    from cda.diagnosis.diagnose import load_instance
    from cda.encodings.ir import MinimalGoal

    return load_instance(ctx.path(inputs["circuit"]), ctx.path(inputs["observations"]), MinimalGoal("all", None))


def _diagnose(inputs: Mapping[str, Any], ctx: ToolContext) -> Outputs:
    from cda.diagnosis.diagnose import diagnose

    try:
        report = diagnose(ctx.path(inputs["circuit"]), ctx.path(inputs["observations"]), seed=ctx.seed)
    except CDAError as exc:
        raise ToolError(str(exc)) from None
    return {"diagnoses": report.diagnoses, "complete": report.complete, "partial": report.timed_out,
            "backend": report.backend}


def _resimulates(inputs: Mapping[str, Any], outputs: Outputs | None, ctx: ToolContext,
                 args: tuple[str, ...]) -> str | None:
    """Each diagnosis re-simulated against every observation (consistent), and each with one
    gate removed refuted by some observation (minimal) — the circuit's own simulator, not a solver."""
    from cda.diagnosis.circuit import Simulator

    inst = _instance(inputs, ctx)
    if inst.circuit is None:
        return "the circuit cannot be simulated"
    sim = Simulator(inst.circuit, inst.observed)
    order = list(range(len(inst.observed)))
    for d in (outputs or {}).get("diagnoses", []):
        if sim.refuting(d, order) is not None:
            return f"diagnosis {{{', '.join(d)}}} does not reproduce every observation"
        for gate in d:
            if sim.refuting([g for g in d if g != gate], order) is None:
                return f"diagnosis {{{', '.join(d)}}} is not minimal (without {gate} it still fits)"
    return None


def _rediagnose(inputs: Mapping[str, Any], outputs: Outputs, ctx: ToolContext) -> str | None:
    from cda.diagnosis.diagnose import diagnose

    other = "clingo" if outputs.get("backend") == "z3" else "z3"
    again = diagnose(ctx.path(inputs["circuit"]), ctx.path(inputs["observations"]), backend=other, seed=ctx.seed)
    return None if again.diagnoses == outputs.get("diagnoses") else f"{other} finds other diagnoses"


# ---- cda.run_action
def _run_action(inputs: Mapping[str, Any], ctx: ToolContext) -> Outputs:
    from cda.adapters.action_entry import load_inputs, run_inputs

    path = ctx.path(inputs["inputs"])
    try:
        run = run_inputs(load_inputs(path), base_dir=path.parent)
    except CDAError as exc:
        raise ToolError(str(exc)) from None
    out = run.outputs
    return {
        "action_id": out.action_id,
        "status": out.status,
        "verdicts": [{"claim": v.claim, "status": v.status, "band": v.band, "caveats": list(v.caveats)}
                     for v in out.verdicts],
        "receipts_head": run.receipts_head,
    }


def _rerun_action(inputs: Mapping[str, Any], outputs: Outputs, ctx: ToolContext) -> str | None:
    again = _run_action(inputs, ctx)
    for key in ("action_id", "status", "verdicts"):
        if again[key] != outputs.get(key):
            return f"the same inputs and seed give another {key}"
    return None


def cda_toolbox() -> Toolbox:
    """The conductor's built-ins plus CDA's other products."""
    return builtin_toolbox().merged(Toolbox(
        tools={
            "cda.prove": Tool(_prove, _reprove),
            "cda.diagnose": Tool(_diagnose, _rediagnose),
            "cda.run_action": Tool(_run_action, _rerun_action),
        },
        postconditions={"resimulates": _resimulates},
    ))
