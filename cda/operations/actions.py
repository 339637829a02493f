"""The CDA Action's operations: ``actions.run`` (an Action run here and now, on this machine's
files: ``cda run``, MCP ``run_action``, the conductor's ``cda.run_action``) and the server's
``actions.start|cancel|approve|deny|get|refresh|accept_update`` (a run the service manages:
streamed, approved, cancelled; ToolBus only).

The server's operations act through ``call.env.actions`` (:class:`ActionDesk`, the service's
action manager); what a caller may do is decided by the gate before they run: ``actions.start``
with ``functions`` only for a principal that may run code, a Ken ``path`` only for one that reads
files, approvals given in ``policies.approvals`` only from an approver (removed otherwise, with a
receipt), egress above the server's cap waits (``action_waiting_user``) for ``actions.approve``,
which only an approver may call.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal, Protocol

from pydantic import Field, field_validator, model_validator

from cda.contracts.action import CDAInputs, CDAOutputs, FocusName
from cda.contracts.limits import MAX_FINITE_SECONDS
from cda.operations.base import OperationError, Params, Result, at
from cda.operations.params import optional_path
from cda.operations.principals import Principal
from cda.operations.registry import ConductorTool, Door, Needs, operation

__all__ = [
    "AcceptParams",
    "ActionDesk",
    "ActionGetResult",
    "ActionRef",
    "ApprovalParams",
    "Escalation",
    "RefreshResult",
    "RunParams",
    "StartParams",
    "StartResult",
    "SubActionSpec",
]

ActionId = Annotated[str, Field(min_length=1, max_length=200, pattern=r"^[A-Za-z0-9_.:\-]+$")]

Signal = Literal["contradictions", "high_doubt", "low_confidence", "policy_risk", "critical_decision"]


class Escalation(Params):
    """A CUP escalation (spec §9): the signals that fired and the caller's wall time left."""

    signals: list[Signal] = Field(default_factory=list, max_length=5)
    wall_remaining: float | None = Field(default=None, gt=0, le=MAX_FINITE_SECONDS,
                                         description="seconds the escalating caller has left")

    @field_validator("signals")
    @classmethod
    def _once(cls, value: list[str]) -> list[str]:
        if len(set(value)) != len(value):
            raise ValueError("each signal at most once")
        return value


class SubActionSpec(Params):
    """A sub-Action CDA spawns through this server's local providers, and how it is linked."""

    ability: Literal["research", "sandbox", "default"]
    source: str = Field(pattern=r"^[A-Za-z0-9_\-]{1,64}$", description="what the provider is asked for")
    edge: Literal["dependsOn", "waitFor", "bind", "notify"] = "bind"


class StartParams(Params):
    ability: Literal["cda"] = Field(description="the only ability a client starts")
    inputs: CDAInputs
    subactions: list[SubActionSpec] = Field(default_factory=list, max_length=16)
    escalation: Escalation | None = None
    work_unit_id: ActionId | None = Field(default=None, description=(
        "spec §13: a legacy work unit's id, sent as inputs.work_unit_id; it maps to the action's id and "
        "is kept under legacy.aliases[] in a receipt. Accepted only by a server started with "
        "--legacy-aliases (refused otherwise)"))

    @model_validator(mode="before")
    @classmethod
    def _legacy_id(cls, data: Any) -> Any:
        """``inputs.work_unit_id`` (where a legacy client puts it) is lifted out of the inputs, which
        never hold it: whether it is accepted is the server's to say (:func:`start`)."""
        inputs = data.get("inputs") if isinstance(data, dict) else None
        if not isinstance(inputs, dict) or "work_unit_id" not in inputs:
            return data
        if "work_unit_id" in data:
            raise ValueError("work_unit_id given twice (in inputs and beside them)")
        return {**data, "inputs": {k: v for k, v in inputs.items() if k != "work_unit_id"},
                "work_unit_id": inputs["work_unit_id"]}


class RefreshResult(Result):
    action_id: str = Field(description="the new revision's action (its own stream)")
    revision: int
    sha256: str
    updates_for: list[str] = Field(description="consumers that bound an older revision: update_available")


class AcceptParams(Params):
    action_id: ActionId
    update: ActionId = Field(description="the sub-action revision to accept (from actions.refresh)")


class StartResult(Result):
    action_id: str
    topic: str = Field(description="the stream to follow: GET /streams/<topic>")
    status: str = Field(description="'running', 'waiting_user', or the state of an action already started")
    existing: bool = Field(default=False, description="true when these inputs (same seed) were already started")
    revision: int = Field(default=1, description="structure revision (> 1 after an accepted update)")
    linked: list[str] = Field(default_factory=list, description="the sub-actions spawned for it")
    approvals_ignored: list[str] = Field(default_factory=list, description=(
        "approvals given as input that were removed (only an approver's count); the action waits for them instead"))


class ActionRef(Params):
    action_id: ActionId


class ApprovalParams(Params):
    action_id: ActionId
    approval: str = Field(min_length=1, max_length=64, description="what is approved, e.g. 'egress:external'")
    reason: str = Field(default="", max_length=1000)


class ActionGetResult(Result):
    action_id: str
    status: str = Field(description="running | waiting_user | completed | partial | failed | escalated | "
                                    "abstained | interrupted | cancelled")
    revision: int | None = None
    summary_artifact_id: str | None = None
    plan_bundle_id: str | None = None
    evidence_bundle_id: str | None = None
    boundary_summary: str | None = Field(default=None, description="the latest boundary summary text")
    approvals_needed: list[str] = Field(default_factory=list)
    updates_available: list[str] = Field(default_factory=list, description="newer revisions of bound outputs")
    last_event_id: int | str | None = Field(default=None, description=(
        "the SSE id of the latest attempt's last event, what a client resumes with as Last-Event-ID: "
        "its seq (a number) for a first attempt, 'attempt:seq' for a re-run"))


class ActionDesk(Protocol):
    """What a server offers for its actions (the service's action manager)."""

    def start(self, who: Principal, inputs: CDAInputs, subactions: list[SubActionSpec] | None = None,
              escalation: Escalation | None = None, waits_for: tuple[str, ...] = (),
              work_unit_id: str | None = None) -> StartResult: ...

    def cancel(self, who: Principal, action_id: str) -> ActionGetResult: ...

    def decide(self, who: Principal, action_id: str, approval: str, grant: bool, reason: str) -> ActionGetResult: ...

    def get(self, action_id: str, who: Principal | None = None) -> ActionGetResult: ...

    def refresh(self, who: Principal, action_id: str) -> RefreshResult: ...

    def accept_update(self, who: Principal, action_id: str, update: str) -> StartResult: ...


_SERVER = {Door.TOOLBUS}


@operation("actions.start", StartParams, StartResult, summary="start a CDA Action on this server (streamed)",
           doors=_SERVER, needs=Needs(files=True, code=True, egress=True, store=True, long=True), waits=True)
def start(call: Any, p: StartParams) -> StartResult:
    if p.work_unit_id is not None and not getattr(call.env.actions, "legacy_aliases", False):
        raise OperationError("invalid_params", "work_unit_id is the legacy (spec §13) name of an action's id; this "
                             "server accepts it only when started with cda serve --legacy-aliases: send the inputs "
                             "without it (the answer's action_id names the action)",
                             ["params", "inputs", "work_unit_id"])
    result: StartResult = call.env.actions.start(call.principal, p.inputs, p.subactions, p.escalation,
                                                 waits_for=call.waits_for, work_unit_id=p.work_unit_id)
    return result.model_copy(update={"approvals_ignored": list(call.approvals_ignored)})


@operation("actions.cancel", ActionRef, ActionGetResult, summary="cancel one of your actions", doors=_SERVER,
           needs=Needs(store=True))
def cancel(call: Any, p: ActionRef) -> ActionGetResult:
    return call.env.actions.cancel(call.principal, p.action_id)  # type: ignore[no-any-return]


@operation("actions.approve", ApprovalParams, ActionGetResult, summary="grant what an action waits for (approvers)",
           doors=_SERVER, needs=Needs(store=True), approves=True)
def approve(call: Any, p: ApprovalParams) -> ActionGetResult:
    return call.env.actions.decide(call.principal, p.action_id, p.approval, True, p.reason)  # type: ignore[no-any-return]


@operation("actions.deny", ApprovalParams, ActionGetResult,
           summary="deny what an action waits for (it runs within the caps)", doors=_SERVER, needs=Needs(store=True))
def deny(call: Any, p: ApprovalParams) -> ActionGetResult:
    return call.env.actions.decide(call.principal, p.action_id, p.approval, False, p.reason)  # type: ignore[no-any-return]


@operation("actions.get", ActionRef, ActionGetResult, summary="an action's state, ids and latest summary",
           doors=_SERVER)
def get(call: Any, p: ActionRef) -> ActionGetResult:
    return call.env.actions.get(p.action_id, call.principal)  # type: ignore[no-any-return]


@operation("actions.refresh", ActionRef, RefreshResult, summary="ask a sub-action's provider again (a new revision)",
           doors=_SERVER, needs=Needs(store=True))
def refresh(call: Any, p: ActionRef) -> RefreshResult:
    return call.env.actions.refresh(call.principal, p.action_id)  # type: ignore[no-any-return]


@operation("actions.accept_update", AcceptParams, StartResult,
           summary="accept a newer revision of a bound output (a structure revision)", doors=_SERVER,
           needs=Needs(store=True, long=True))
def accept_update(call: Any, p: AcceptParams) -> StartResult:
    return call.env.actions.accept_update(call.principal, p.action_id, p.update)  # type: ignore[no-any-return]


# ---- actions.run: here and now


class RunParams(Params):
    inputs: CDAInputs | None = Field(default=None, description="the Action's inputs (CDAInputs)")
    path: optional_path("an inputs.json file on this machine (CDAInputs)") = None  # type: ignore[valid-type]
    focus: FocusName | None = Field(default=None, description="the subsystem to focus on (the trace's focus_subsystem): "
                              "a Ken node or an atom's argument; replaces inputs.focus")
    invariants: list[str] = Field(default_factory=list, max_length=200, description=(
        "global invariants (DSL formulas), added to inputs.invariants: hard clauses every hypothesis satisfies, "
        "listed in the trace"))

    @model_validator(mode="after")
    def _one(self) -> RunParams:
        if (self.inputs is None) == (self.path is None):
            raise ValueError("give either 'inputs' (the CDAInputs object) or 'path' (an inputs.json file)")
        return self


@operation("actions.run", RunParams, CDAOutputs, summary="run a CDA Action: verdicts, next tests, artifacts, receipts",
           doors={Door.CLI, Door.MCP, Door.CONDUCTOR}, needs=Needs(files=True, code=True, egress=True, store=True,
                                                                  long=True),
           cli=("run",), cli_positional=("path",), mcp="run_action",
           conductor=ConductorTool("cda.run_action", {"inputs": "path"}),
           door_only={Door.CLI: ("inputs",), Door.CONDUCTOR: ("inputs",)})
def run(call: Any, p: RunParams) -> CDAOutputs:
    from cda.adapters.action_entry import load_inputs, run_inputs

    base: Path = call.base_dir
    if p.path is not None:
        path = at(call, p.path)
        inputs = load_inputs(path)
        base = path.parent
    else:
        assert p.inputs is not None
        inputs = p.inputs
    if p.focus is not None or p.invariants:  # checked as the inputs' own fields are (CDAInputs)
        inputs = CDAInputs.model_validate({**inputs.model_dump(mode="json", exclude_unset=True),
                                           **({"focus": p.focus} if p.focus is not None else {}),
                                           "invariants": [*inputs.invariants, *p.invariants]})
    subscribers = list(getattr(call.env, "subscribers", ()))
    if call.progress is not None:
        progress = call.progress

        def forward(event: Any) -> None:
            if event.type == "action_progress":
                progress(float(event.fraction), f"{event.phase}: {event.message}")

        subscribers.append(forward)
    run_ = run_inputs(inputs, getattr(call.env, "out_dir", None), subscribers=subscribers, base_dir=base)
    env_runs = getattr(call.env, "runs", None)
    if env_runs is not None:  # the door keeps what it ran (the CLI prints it, the conductor re-checks it)
        env_runs.append(run_)
    return run_.outputs
