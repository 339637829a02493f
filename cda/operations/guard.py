"""``guard.evaluate``: the guardian's gate on one proposed action (docs/guardian.md): APPROVE,
REJECT or ESCALATE, recorded in the guardian's file. The policy store and the ledger are the
door's (``call.env.guardian``, a :class:`GuardDesk`: the CLI's ``--policies``/``--ledger``, a
server's ``--guard-policies``/``--guard-ledger``); a batch job and a conductor obligation (the tool
``cda.guard``) name them, as files the gate lets their caller name; the caller sends the action.

An ESCALATE is also an **escalation** a person resolves (:mod:`cda.guardian.escalations`), recorded
here, so at every door that runs this operation (CLI, ToolBus, MCP): one row per action (its key
is the action's digest; asking again gives the same escalation, and a rejected one stays
rejected), the proposing principal kept so the gate refuses its own resolution
(:func:`proposer_of`, ``guard.resolve``)."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field, model_validator

from cda.contracts import limits
from cda.errors import CDAError
from cda.guardian.decision import Decision, DecisionRecord
from cda.operations.base import OperationError, Params, Result, at
from cda.operations.params import Checked, Seed, optional_path
from cda.operations.registry import ConductorTool, Door, Needs, operation

__all__ = ["EscalationList", "EscalationRef", "EscalationsParams", "GuardDesk", "GuardParams", "GuardVerdict",
           "ResolveParams", "proposer_of"]

#: the simulator's own range (limits.samples: 2 to 1,000,000), checked at every door before any decision
Samples = Annotated[Annotated[int, Field(ge=limits.MIN_SAMPLES, le=limits.MAX_SAMPLES)],
                    BeforeValidator(lambda v, info: limits.samples(info.field_name, v)), Checked(limits.samples, True)]


class GuardParams(Params):
    action: Any = Field(default=None, description="the proposed action (a JSON object); a malformed one is "
                        "a decision (REJECT malformed_action)")
    action_path: optional_path("a file holding the proposed action (JSON), on this machine") = None  # type: ignore[valid-type]
    sim: optional_path("a causal model (TOML or JSON, docs/causal.md) on this machine to simulate the "  # type: ignore[valid-type]
                       "action with") = None
    samples: Samples = Field(default=1000, description="Monte Carlo samples of the simulation")
    seed: Seed = 0
    policies: optional_path("the policy store (TOML); a job names it, other doors use their own") = None  # type: ignore[valid-type]
    ledger: optional_path("the guardian's SQLite file; a job names it, other doors use their own",  # type: ignore[valid-type]
                          store=True) = None

    @model_validator(mode="after")
    def _one(self) -> GuardParams:
        if (self.action is None) == (self.action_path is None):
            raise ValueError("give either 'action' (the proposed action) or 'action_path' (a file), not both")
        return self


class EscalationRef(Result):
    """The escalation an ESCALATE is held in: its id, its state (``open`` until a person resolves
    it) and whether this call opened it (False: the same action was escalated before)."""

    escalation_id: str
    state: str
    new: bool


class GuardVerdict(DecisionRecord):
    """The decision record, and for an ESCALATE the escalation a person resolves (None otherwise;
    not part of the record the receipt hashes)."""

    escalation: EscalationRef | None = None


@dataclass
class GuardDesk:
    """A door's guardian: the policy store (TOML) and the guardian's SQLite file (the CFO ledger),
    and a receipt log the decisions are also appended to."""

    policies: Path
    ledger: Path
    receipts: Path | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)  # one decision at a time: the ledger's order

    @classmethod
    def beside(cls, policies: Path, ledger: Path) -> GuardDesk:
        """A server's guardian (``cda serve``, ``cda mcp``): its decisions and escalations receipted in
        ``<ledger>.receipts.sqlite``, the log the gateway keeps by default, so what a remote caller
        was answered is on record at every door."""
        return cls(policies, ledger, ledger.with_name(ledger.name + ".receipts.sqlite"))


class _Recording:
    """A simulator that keeps its last prediction, so the simulation the gate ran can be stored
    as a CAUSAL_HYPOTHESIS without running it twice."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.last: Any = None

    def simulate(self, action: Any, *, seed: int) -> Any:
        self.last = self.inner.simulate(action, seed=seed)
        return self.last


@operation("guard.evaluate", GuardParams, GuardVerdict, summary="the guardian: APPROVE / REJECT / ESCALATE one "
           "proposed action", doors={Door.CLI, Door.TOOLBUS, Door.MCP, Door.JOBS, Door.CONDUCTOR},
           needs=Needs(files=True, store=True), cli=("guard",), cli_positional=("action_path",), job="guard",
           conductor=ConductorTool("cda.guard", {"action": "action_path", "policies": "policies", "ledger": "ledger"}),
           door_only={Door.CLI: ("action", "policies", "ledger"), Door.TOOLBUS: ("policies", "ledger"),
                      Door.MCP: ("policies", "ledger"), Door.JOBS: ("action",)},
           renames={Door.CLI: {"action_path": "action"}})
def evaluate(call: Any, p: GuardParams) -> GuardVerdict:
    from cda.guardian.decide import evaluate as decide
    from cda.guardian.ledger import Ledger
    from cda.guardian.policies import load_policy_store
    from cda.guardian.proposal import ProposedAction, read_action

    desk: GuardDesk | None = getattr(call.env, "guardian", None)
    if desk is None and call.door in (Door.JOBS, Door.CONDUCTOR) and p.policies is not None and p.ledger is not None:
        # a job's own, or the ones a conductor's obligation names (the gate let its caller name them)
        desk = GuardDesk.beside(at(call, p.policies), at(call, p.ledger))
    if desk is None:
        raise OperationError("forbidden", "this door has no guardian (cda serve / cda mcp --guard-policies P "
                             "--guard-ledger L; a job's params policies and ledger; a conductor obligation's "
                             "policies and ledger)", ["method"])
    if p.action_path is not None:
        path = at(call, p.action_path)
        from cda.access import readable

        try:
            raw: Any = readable(path).read_bytes()
        except OSError as exc:
            raise CDAError(f"cannot read {p.action_path}: {exc.strerror}") from None
    else:
        raw = p.action
    from cda.access import current, granted, with_root

    with granted(with_root(with_root(current(), desk.policies.parent), desk.ledger.parent)):  # the door's own files
        store = load_policy_store(desk.policies)
    shown = str(desk.ledger) if call.principal.role == "local" else desk.ledger.name  # no server path to a remote caller
    if desk.ledger.is_dir():
        raise CDAError(f"cannot use {shown}: it is a directory, not the guardian's SQLite file")
    if not desk.ledger.is_file():
        raise CDAError(f"cannot read {shown}: No such file (the ledger is the guardian's SQLite file; "
                       f"`cda task budget AGENT AMOUNT --store {shown}` creates it with a budget)")
    simulator = None
    if p.sim is not None:
        from cda.files import is_stdin
        from cda.guardian.simulation import load_simulator

        sim = at(call, p.sim)
        if not is_stdin(sim) and not sim.is_file():  # `-`: the model on standard input (the CLI)
            raise CDAError(f"cannot read {p.sim}: {'it is a directory' if sim.is_dir() else 'No such file'}")
        simulator = _Recording(load_simulator(sim, samples=p.samples))
    action = read_action(raw if raw is not None else b"null")
    with desk.lock:
        ledger = Ledger.open(desk.ledger)
        receipts = None
        try:
            if desk.receipts is not None:
                from cda.actions.log_guard import SignedLog

                receipts = SignedLog(desk.receipts, "guardian")
            record = decide(action, store, simulator, ledger, seed=p.seed, receipts=receipts)
            proposed = action if isinstance(action, ProposedAction) else None
            ledger.store.record_decision(record, proposed)  # what `cda task execute` checks a decision against
            if simulator is not None and simulator.last is not None and proposed is not None and record.sim_id:
                _record_hypothesis(ledger.store, proposed, simulator.last)
            held = None
            if record.decision is Decision.ESCALATE and proposed is not None:
                held = _escalate(ledger.store, proposed, record, call.principal, receipts)
        finally:
            ledger.close()
            if receipts is not None:
                receipts.close()
    return GuardVerdict(**record.model_dump(), escalation=held)


def _escalate(store: Any, action: Any, record: DecisionRecord, principal: Any, receipts: Any) -> EscalationRef:
    """Hold an ESCALATE for a person (see the module's docstring), with a receipt that says
    whether the escalation is new or the one the same action was held in before."""
    from cda.contracts.receipt import Receipt
    from cda.guardian import escalations as esc
    from cda.guardian.gate import tool_id

    key = esc.action_key(record.action_digest)
    e, new = esc.escalate(store, key=key, action=action, tool_id=tool_id(action.tool.name, action.tool.version),
                          record=record, proposed_by=f"{principal.role}:{principal.name}", keep=esc.KEEP_RESOLVED)
    if receipts is not None:
        receipts.append(Receipt(action_id=action.action_id, seq=receipts.count(action.action_id), kind="action",
                                name="guardian.escalation", inputs_hash=key,
                                result={"escalation_id": e.escalation_id, "state": e.state, "new": new,
                                        "decision_receipt": record.receipt, "held_in": e.decision_receipt}))
    return EscalationRef(escalation_id=e.escalation_id, state=e.state, new=new)


def _record_hypothesis(store: Any, action: Any, prediction: Any) -> None:
    """Store the simulation as the seed's CAUSAL_HYPOTHESIS (once per simulation id)."""
    from cda.guardian.causal import CausalHypothesis

    hypothesis = CausalHypothesis.from_prediction(prediction, agent_id=action.agent_id, created_at=store.clock(),
                                                  description=(action.description or action.action_type)[:1024])
    if store.hypothesis(hypothesis.hypothesis_id) is None:
        store.record_hypothesis(hypothesis.hypothesis_id, hypothesis.agent_id, hypothesis.description,
                                hypothesis.inputs, hypothesis.prediction, hypothesis.risk_score, hypothesis.state)


def _desk(call: Any) -> GuardDesk:
    desk: GuardDesk | None = getattr(call.env, "guardian", None)
    if desk is None:
        raise OperationError("forbidden", "this door has no guardian (cda serve / cda mcp --guard-policies P "
                             "--guard-ledger L)", ["method"])
    if not desk.ledger.is_file():
        shown = str(desk.ledger) if call.principal.role == "local" else desk.ledger.name
        raise CDAError(f"cannot read {shown}: No such file (the guardian's SQLite file)")
    return desk


EscalationState = Literal["open", "approved", "rejected", "used", "void"]


class EscalationsParams(Params):
    state: EscalationState | None = Field(default=None, description="only the escalations in this state "
                                          "(open: waiting for a person)")


class EscalationList(Result):
    """The guardian file's escalations, oldest first (docs/guardian.md, "Escalations")."""

    escalations: list[dict[str, Any]]


@operation("guard.escalations", EscalationsParams, EscalationList, summary="the calls the guardian escalated, "
           "waiting for (or given) a person's decision", doors={Door.CLI, Door.TOOLBUS, Door.MCP},
           needs=Needs(store=True), roles={"local", "internal", "approver"}, cli=("guard", "escalations"))
def list_escalations(call: Any, p: EscalationsParams) -> EscalationList:
    from cda.guardian.escalations import escalations, sweep_expired
    from cda.guardian.ledger import Ledger

    desk = _desk(call)
    with desk.lock:
        ledger = Ledger.open(desk.ledger)
        try:
            sweep_expired(ledger)  # an approval past its expiry is void: its reservation goes back to the budget
            return EscalationList(escalations=[e.to_json() for e in escalations(ledger.store, p.state)])
        finally:
            ledger.close()


def proposer_of(env: Any, p: Any) -> Any:
    """Who proposed the escalation ``p.escalation_id`` (a :class:`~cda.operations.gate.Proposal`
    for the gate; None when the door has no guardian file or no such escalation: the operation
    says so itself)."""
    from cda.guardian.escalations import get
    from cda.guardian.guardian_db import GuardianStore
    from cda.operations.gate import Proposal

    desk: GuardDesk | None = getattr(env, "guardian", None)
    if desk is None or not desk.ledger.is_file():
        return None
    with GuardianStore.open(desk.ledger) as store:
        e = get(store, p.escalation_id)
    if e is None:
        return None
    return Proposal(subject=f"escalation {e.escalation_id}", agent=e.agent_id, principal=e.proposed_by,
                    signer=p.by, param="escalation_id")


class ResolveParams(Params):
    escalation_id: str = Field(pattern=r"^esc-[1-9][0-9]{0,17}$", description="the escalation (esc-N)")
    decision: Literal["approve", "reject"] = Field(description="approve: the same call goes through once; "
                                                   "reject: it is refused")
    by: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.:@-]{0,127}$",
                    description="the signer who decides (registered in the guardian file, endorsed back to its "
                    "first signer); signs with its key in CDA's key folder")
    reason: str = Field(min_length=1, max_length=2000, description="why, in a line (signed with the decision)")
    ttl_hours: Annotated[int, Field(ge=1, le=24 * 30)] = Field(default=24, description="an approval not used "
                                                               "within this many hours lapses (1 to 720)")
    by_key: optional_path("the signer's private key file (default: its key in CDA's key folder)") = None  # type: ignore[valid-type]


@operation("guard.resolve", ResolveParams, EscalationList, summary="a person's signed decision on an escalated "
           "call (HITL): approve it once, or reject it", doors={Door.CLI, Door.TOOLBUS, Door.MCP},
           needs=Needs(files=True, store=True), approves=True, roles={"local", "internal", "approver"},
           cli=("guard", "resolve"), proposer=lambda env, p: proposer_of(env, p),
           cli_positional=("escalation_id",), door_only={Door.CLI: ("decision",)})
def resolve(call: Any, p: ResolveParams) -> EscalationList:
    from cda.guardian.escalations import EscalationError
    from cda.guardian.escalations import resolve as record
    from cda.guardian.ledger import Ledger
    from cda.guardian.signers import SignerError, load_signer_key, signer_key_path

    desk = _desk(call)
    try:
        key = load_signer_key(at(call, p.by_key) if p.by_key is not None else signer_key_path(p.by))
    except SignerError as exc:
        raise OperationError("forbidden", str(exc), ["by"]) from None
    with desk.lock:
        ledger = Ledger.open(desk.ledger)
        try:
            done = record(ledger, p.escalation_id, decision=p.decision, by=p.by, key=key, reason=p.reason,
                          ttl_hours=p.ttl_hours)
        except EscalationError as exc:
            raise OperationError("forbidden", str(exc), ["escalation_id"]) from None
        finally:
            ledger.close()
    return EscalationList(escalations=[done.to_json()])


class ExportParams(Params):
    format: Literal["jsonl", "csv"] = Field(default="jsonl", description="jsonl: one JSON object a line; csv: a "
                                            "header and a row a record")


class ExportText(Result):
    """The guardian file's audit export (docs/guardian.md, "Audit export")."""

    format: Literal["jsonl", "csv"]
    records: int
    text: str


@operation("guard.export", ExportParams, ExportText, summary="the guardian file's ledger, decisions and "
           "escalations with their evidence and receipt ids, as JSON Lines or CSV", doors={Door.CLI, Door.TOOLBUS},
           needs=Needs(store=True), roles={"local", "internal", "approver"}, cli=("guard", "export"))
def export(call: Any, p: ExportParams) -> ExportText:
    from cda.guardian.export import export as render_export
    from cda.guardian.export import records
    from cda.guardian.guardian_db import GuardianStore

    desk = _desk(call)
    with GuardianStore.open(desk.ledger) as store:
        return ExportText(format=p.format, records=sum(1 for _ in records(store)), text=render_export(store, p.format))
