"""CDA's operations as conductor tools (``cda.solve``, ``cda.prove``, ``cda.diagnose``,
``cda.run_action``, ``cda.guard``), generated from the registry: each operation that names a
:class:`~cda.operations.registry.ConductorTool` becomes a tool whose inputs (the obligation's
words) fill the operation's parameters, run through the gate for the conductor's own caller
(:meth:`~cda.operations.gate.Call.nested`), so a partner's ``conduct.request`` reads no file a
partner could not name itself.

Each tool keeps its independent re-check for the verify loop: a solve is re-solved on the other
backend, a proof re-decided with the cross-check, a diagnosis re-simulated gate by gate (consistent
with every observation, and minimal) and re-diagnosed on the other backend, an Action run again
from the same inputs and seed; the guardian's decision is recorded in its file, so it is checked
where it is kept, never asked twice (``side_effects = "idempotent"`` in ``tools.toml``). The outputs are the conductor's words (exact costs as text,
verdicts with their justification), shaped here per tool.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import SimpleNamespace
from typing import Any

from cda.conductor.tooling import Outputs, Tool, Toolbox, ToolContext, ToolError
from cda.conductor.tools import builtin_toolbox, solve_outputs
from cda.errors import BackendUnsupported, CDAError
from cda.operations.registry import Door, Operation, for_door

__all__ = ["cda_toolbox"]


def _params(op: Operation, inputs: Mapping[str, Any], ctx: ToolContext, **extra: Any) -> dict[str, Any]:
    assert op.conductor is not None
    params = {param: str(inputs[word]) if param.endswith("path") else inputs[word]
              for word, param in op.conductor.inputs.items() if word in inputs}
    if "seed" in op.params.model_fields:
        params["seed"] = ctx.seed
    return {**params, **extra}


def _runner(call: Any, op: Operation, shape: Callable[[Any], Outputs]) -> Callable[..., Outputs]:
    def run(inputs: Mapping[str, Any], ctx: ToolContext, **extra: Any) -> Outputs:
        env = SimpleNamespace(**{**vars(call.env or SimpleNamespace()), "ken": ctx.ken, "runs": []})
        try:
            result = call.nested(op.name, _params(op, inputs, ctx, **extra), door=Door.CONDUCTOR, env=env,
                                 base_dir=ctx.base_dir)
        except BackendUnsupported:
            raise  # the re-check of a solve falls back to the same backend on it
        except CDAError as exc:
            raise ToolError(str(exc)) from None
        except ValueError as exc:  # the parameters did not validate: the tool's inputs were wrong
            raise ToolError(f"{op.conductor.name if op.conductor else op.name}: {exc}") from None
        return shape(result) if not env.runs else shape(env.runs[-1])

    return run


# ---- the outputs, in the conductor's words


def _solve_out(result: Any) -> Outputs:
    return solve_outputs(result)


def _prove_out(result: Any) -> Outputs:
    return {"verdicts": [
        {"goal": "claim", "claim": r.claim_name, "status": r.status, "justification": list(r.premises_used),
         "fragment": r.fragment, "backend": r.backend, "cross_check": r.cross_check}
        for r in result.results]}


def _diagnose_out(report: Any) -> Outputs:
    return {"diagnoses": report.diagnoses, "complete": report.complete, "partial": report.timed_out,
            "backend": report.backend}


def _run_out(run: Any) -> Outputs:
    out = run.outputs
    return {"action_id": out.action_id, "status": out.status,
            "verdicts": [{"claim": v.claim, "status": v.status, "band": v.band, "caveats": list(v.caveats)}
                         for v in out.verdicts],
            "receipts_head": run.receipts_head}


def _guard_out(record: Any) -> Outputs:
    held = record.escalation
    return {"decision": str(record.decision), "reason": record.reason, "action_digest": record.action_digest,
            "policy_digest": record.policy_digest, "receipt": record.receipt,
            "escalation": None if held is None else {"id": held.escalation_id, "state": held.state}}


_SHAPES: dict[str, Callable[[Any], Outputs]] = {"solve": _solve_out, "prove": _prove_out, "diagnose": _diagnose_out,
                                                 "actions.run": _run_out, "guard.evaluate": _guard_out}


# ---- the re-checks


def _rechecks(runs: dict[str, Callable[..., Outputs]]) -> dict[str, Callable[..., str | None]]:
    def resolve(inputs: Mapping[str, Any], outputs: Outputs, ctx: ToolContext) -> str | None:
        other = "clingo" if outputs.get("backend") == "z3" else "z3"
        try:
            again = runs["solve"](inputs, ctx, backend=other)
        except BackendUnsupported:
            other = str(outputs.get("backend"))  # only one backend takes it: re-evaluated on the same one
            again = runs["solve"](inputs, ctx, backend=other)
        for key in ("status", "hypotheses", "verdicts", "conflict"):
            if again[key] != outputs.get(key):
                return f"{other} disagrees on {key}"
        return None

    def reprove(inputs: Mapping[str, Any], outputs: Outputs, ctx: ToolContext) -> str | None:
        again = runs["prove"](inputs, ctx, cross_check=True)
        mine = [(v["claim"], v["status"]) for v in outputs.get("verdicts", [])]
        theirs = [(v["claim"], v["status"]) for v in again["verdicts"]]
        if mine != theirs:
            return "the cross-checked proof gives other statuses"
        split = [v["claim"] for v in again["verdicts"] if v["cross_check"] == "disagree"]
        return f"the backends disagree on {', '.join(split)}" if split else None

    def rediagnose(inputs: Mapping[str, Any], outputs: Outputs, ctx: ToolContext) -> str | None:
        other = "clingo" if outputs.get("backend") == "z3" else "z3"
        again = runs["diagnose"](inputs, ctx, backend=other)
        return None if again["diagnoses"] == outputs.get("diagnoses") else f"{other} finds other diagnoses"

    def rerun(inputs: Mapping[str, Any], outputs: Outputs, ctx: ToolContext) -> str | None:
        again = runs["actions.run"](inputs, ctx)
        for key in ("action_id", "status", "verdicts"):
            if again[key] != outputs.get(key):
                return f"the same inputs and seed give another {key}"
        return None

    return {"solve": resolve, "prove": reprove, "diagnose": rediagnose, "actions.run": rerun}


def _resimulates(inputs: Mapping[str, Any], outputs: Outputs | None, ctx: ToolContext,
                 args: tuple[str, ...]) -> str | None:
    """Each diagnosis re-simulated against every observation (consistent), and each with one
    gate removed refuted by some observation (minimal) — the circuit's own simulator, not a solver."""
    from cda.diagnosis.circuit import Simulator
    from cda.diagnosis.diagnose import load_instance
    from cda.ir import MinimalGoal

    inst = load_instance(ctx.path(inputs["circuit"]), ctx.path(inputs["observations"]), MinimalGoal("all", None))
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


def cda_toolbox(call: Any = None) -> Toolbox:
    """The conductor's built-ins plus every operation the registry offers the conductor, run for
    ``call``'s principal (the local user when there is no call: a conductor used from Python)."""
    if call is None:
        from cda.operations.gate import Call
        from cda.operations.principals import LOCAL_USER
        from cda.operations.registry import get

        call = Call(get("solve"), LOCAL_USER, Door.CONDUCTOR, egress_cap="external")
    ops = {op.name: op for op in for_door(Door.CONDUCTOR)}
    runs = {name: _runner(call, op, _SHAPES[name]) for name, op in ops.items()}
    checks = _rechecks(runs)
    tools = {op.conductor.name: Tool(runs[name], checks.get(name)) for name, op in ops.items() if op.conductor}
    return builtin_toolbox().merged(Toolbox(tools=tools, postconditions={"resimulates": _resimulates}))
