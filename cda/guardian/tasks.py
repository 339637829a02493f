"""The seed's task lifecycle: ``TaskDraft`` -> ``TaskSigned`` -> ``TaskExecuted``, and nothing else.

The three models carry the seed's fields (technical.md §2-3) and its state machine: a draft is
signed by a human (HITL, :mod:`cda.guardian.signers`), a signed task is executed once
(:mod:`cda.guardian.execution`), and each step yields the next model; no other transition
exists (a signed task cannot be signed again, an executed one not executed again, a model's
``state`` is always its own). Where the seed is loose the models are strict:

* ``cost_estimate`` is exact money (:data:`cda.guardian.money.Amount`), read from JSON by
  :meth:`TaskDraft.from_json` with every number a ``Decimal`` and written back by
  :meth:`TaskDraft.to_json` as the same number; a ``float`` is refused;
* times are timezone-aware (a naive ``created_at`` is refused) and come from an injectable clock,
  so the same inputs give the same bytes;
* ``currency`` (default ``USD``) says what ``cost_estimate`` counts, for the ledger;
* ``action_digest`` binds the task to the proposed action the guardian decides on (the SHA-256
  of :meth:`cda.guardian.proposal.ProposedAction.canonical`): it is signed with the rest, and a task
  executes only with an APPROVE decision on exactly that digest;
* ``TaskExecuted`` carries ``receipts`` (ids of the receipts of the run) beside ``audit_ref``
  (``ledger://<tx_id>``, its ledger entry).

The committed JSON Schemas (``schemas/guardian/task.*.json``, with the seed's ``$id``s) are made by
:mod:`cda.guardian.schemas`; every document a model writes validates against them, and every
document they refuse is refused by the model too.

**The seed's example, as written** (docs/guardian.md, "The seed's models as written"): the
constructor takes the seed's defaults (``state``, ``priority``, ``created_at``) and reads a float
cost by its decimal text; ``sign`` and ``execute`` go through the checks of ``cda task``, so they
need the guardian file (its signers, its ledger, the guardian's recorded decisions). A file with
agent-42's budget and its first signer, in a temporary key folder:

>>> import os, tempfile, pathlib
>>> from cda.guardian.guardian_db import GuardianStore
>>> from cda.guardian.ledger import Ledger
>>> from cda.guardian.signers import SignerRegistry, create_signer_key, load_signer_key, pin_policy_store, signer_key_path
>>> folder, saved = pathlib.Path(tempfile.mkdtemp()), os.environ.get("CDA_KEY_DIR")
>>> os.environ["CDA_KEY_DIR"] = str(folder / "keys")
>>> guardian = GuardianStore.open(folder / "guardian.db")
>>> Ledger(guardian).set_budget("agent-42", "USD", 500).remaining
Decimal('500')
>>> registry = SignerRegistry(guardian)
>>> len(registry.register_root("orchestrator:alice", create_signer_key("orchestrator:alice")))
64
>>> pin_policy_store(registry, "0" * 64, "orchestrator:alice", load_signer_key(signer_key_path("orchestrator:alice")))

The seed's lines:

>>> draft = TaskDraft(task_id="t-1", agent_id="agent-42", description="Render hero video", cost_estimate=150.0)
>>> draft.state, draft.priority, draft.cost_estimate
('draft', 'medium', Decimal('150'))
>>> signed = draft.sign(signer_id="orchestrator:alice", store=guardian)
>>> signed.state, signed.signature.signer_id, signed.signature.sig_type
('signed', 'orchestrator:alice', 'HITL')
>>> signed.execute(result={"artifact_url": "https://..."}, audit_ref="ledger://tx-123", store=guardian)
Traceback (most recent call last):
cda.guardian.execution.ExecutionRefused: task 't-1' is not executed: it names no action_digest, so no decision of the guardian is about it (TaskDraft.for_action binds one)

A "sig-bytes" payload is not a signature, and no decision of the guardian is about a task that names
no action: a task runs on the guardian's APPROVE of its action. The same lines with the action
(``action_digest``) and the APPROVE the guardian recorded for it:

>>> draft.sign(signer_id="orchestrator:alice", signature_payload="sig-bytes", signed_at=draft.created_at,
...            store=guardian)  # doctest: +ELLIPSIS
Traceback (most recent call last):
cda.guardian.tasks.TaskError: not a signature (128 hex digits of Ed25519): signature: ...
>>> from cda.guardian.decision import DecisionRecord
>>> from cda.guardian.proposal import read_action
>>> action = read_action({"action_id": "render-1", "agent_id": "agent-42", "tool": {"name": "render", "version": "1"},
...                       "action_type": "video.render", "cost_estimate": "150", "task_id": "t-1"})
>>> approve = DecisionRecord(decision="APPROVE", reason="policy_clear", action_digest=action.digest(),
...                          policy_digest="0" * 64)
>>> guardian.record_decision(approve, action)
1
>>> draft = TaskDraft(task_id="t-1", agent_id="agent-42", description="Render hero video", cost_estimate=150.0,
...                   action_digest=action.digest())
>>> signed = draft.sign(signer_id="orchestrator:alice", store=guardian)
>>> executed = signed.execute(result={"artifact_url": "https://..."}, audit_ref="ledger://tx-123", store=guardian)
>>> executed.state, executed.audit_ref, Ledger(guardian).entry("tx-123").status, Ledger(guardian).remaining("agent-42")
('executed', 'ledger://tx-123', 'settled', Decimal('350'))
>>> signed.execute(result={}, store=guardian)  # doctest: +ELLIPSIS
Traceback (most recent call last):
cda.guardian.execution.ExecutionRefused: task 't-1' is executed already: a task id executes once
>>> guardian.close(); os.environ.pop("CDA_KEY_DIR") and None
>>> if saved is not None: os.environ["CDA_KEY_DIR"] = saved
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from cda.contracts.locations import problem_message
from cda.errors import CDAError
from cda.guardian.guardian_db import Clock, Moment, utc_now
from cda.guardian.money import CURRENCY_PATTERN, Amount, dump_exact, load_exact, plain, text

if TYPE_CHECKING:
    from cda.guardian.decision import DecisionRecord
    from cda.guardian.guardian_db import GuardianStore
    from cda.guardian.proposal import ProposedAction

__all__ = [
    "ID_PATTERN",
    "ID_PUNCTUATION",
    "Priority",
    "Signature",
    "TaskDraft",
    "TaskError",
    "TaskExecuted",
    "TaskSigned",
    "TaskState",
    "read_task",
]

TaskState = Literal["draft", "signed", "executed"]
Priority = Literal["low", "medium", "high"]
ID_PUNCTUATION = "_.:@-"
ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.:@-]{0,127}$"
DIGEST_PATTERN = r"^[0-9a-f]{64}$"
SIGNATURE_FORMAT = "cda-task-signature-v1"


class TaskError(CDAError, ValueError):
    """A task document that is not one, or a transition the lifecycle does not have."""


class Signature(BaseModel):
    """A human's Ed25519 signature over a draft (:meth:`TaskDraft.signing_bytes`), in hex."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    signer_id: str = Field(pattern=ID_PATTERN)
    sig_type: Literal["HITL"] = "HITL"
    signature: str = Field(pattern=r"^[0-9a-f]{128}$")
    signed_at: Moment


class TaskDraft(BaseModel):
    """A task an agent proposes, before any human has signed it."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    STATE: ClassVar[TaskState] = "draft"

    task_id: str = Field(pattern=ID_PATTERN)
    agent_id: str = Field(pattern=ID_PATTERN)
    description: str = Field(max_length=4096)
    resources: list[str] = Field(default_factory=list, max_length=64)
    cost_estimate: Amount = Decimal(0)
    currency: str = Field(default="USD", pattern=CURRENCY_PATTERN)
    priority: Priority = "medium"
    state: TaskState = "draft"
    created_at: Moment
    action_digest: str | None = Field(default=None, pattern=DIGEST_PATTERN)

    def __init__(self, **data: Any) -> None:
        """The seed's constructor (docs/guardian.md, "The seed's models as written"): ``state``
        defaults to the model's own, ``created_at`` to now (UTC), and a Python ``float`` cost is
        read by the decimal text it prints as (``150.0`` is ``Decimal("150.0")``, ``0.1`` is
        ``0.1``, never 0.1000000000000000055…). A document (:meth:`from_document`,
        :meth:`from_json`) gets none of this: there every field the schema requires is required,
        and a number is read exactly from its JSON text."""
        data.setdefault("state", type(self).STATE)
        if "created_at" not in data:
            data["created_at"] = utc_now()
        cost = data.get("cost_estimate")
        if isinstance(cost, float):
            data["cost_estimate"] = Decimal(repr(cost)) if math.isfinite(cost) else Decimal(str(cost))
        super().__init__(**data)

    @field_validator("action_digest", mode="before")
    @classmethod
    def _no_null_digest(cls, value: object) -> object:
        if value is None:  # absent is allowed (the default); an explicit null is not a digest
            raise ValueError("action_digest is a SHA-256 in hex; leave it out rather than null")
        return value

    @model_validator(mode="before")
    @classmethod
    def _own_state(cls, data: Any) -> Any:
        if isinstance(data, dict):
            if "state" not in data:
                raise ValueError(f"a {cls.__name__} has state {cls.STATE!r}; the field is required")
            if data["state"] != cls.STATE:
                raise ValueError(f"a {cls.__name__} has state {cls.STATE!r}, not {data['state']!r}")
        return data

    @classmethod
    def new(cls, task_id: str, agent_id: str, description: str, *, clock: Clock = utc_now,
            **fields: Any) -> TaskDraft:
        """A fresh draft stamped by ``clock`` (inject a fixed one for reproducible bytes)."""
        try:
            return TaskDraft(task_id=task_id, agent_id=agent_id, description=description, created_at=clock(),
                             state="draft", **{k: v for k, v in fields.items() if v is not None})
        except ValidationError as exc:
            raise TaskError(_first_problem(exc, "the draft")) from None

    @classmethod
    def for_action(cls, action: ProposedAction, *, task_id: str | None = None, clock: Clock = utc_now) -> TaskDraft:
        """The draft that stands for a proposed action: its agent, description, resources, cost,
        currency and priority, and its digest as ``action_digest`` (``task_id``: the action's own
        ``task_id`` unless given)."""
        ident = task_id or action.task_id
        if ident is None:
            raise TaskError(f"action {action.action_id!r} names no task_id; give one")
        return cls.new(ident, action.agent_id, action.description, clock=clock, resources=list(action.resources),
                       cost_estimate=action.cost_estimate, currency=action.currency, priority=action.priority,
                       action_digest=action.digest())

    def sign(self, signer_id: str, signature_payload: str | None = None, *, store: GuardianStore | Path | str,
             key: str | Path | None = None, signed_at: datetime | None = None, clock: Clock = utc_now) -> TaskSigned:
        """The seed's ``draft.sign(signer_id, signature_payload)``, through the checks of
        ``cda task sign``: ``signer_id`` must speak for the guardian file ``store`` (registered,
        endorsed back to its first signer). ``signature_payload``, when given, is an Ed25519
        signature (hex) the signer made elsewhere — an HSM, as the seed asks — over
        :meth:`signing_bytes` for ``signed_at``; it is verified before the signed task is
        returned. Otherwise the signer's private ``key`` (hex, or its file; default its key file
        in CDA's key folder) signs. :class:`TaskError` or
        :class:`~cda.guardian.signers.SignerError` say why not."""
        from cda.guardian import signers as s

        with _opened(store) as guardian:
            registry = s.SignerRegistry(guardian)
            if signature_payload is None:
                private = s.load_signer_key(s.signer_key_path(signer_id)) if key is None else (
                    s.load_signer_key(Path(key)) if isinstance(key, Path) else key)
                return s.sign(self, signer_id, private, registry, clock)
            if type(self) is not TaskDraft:
                raise TaskError(f"task {self.task_id!r} is {self.state}: only a draft can be signed")
            if signed_at is None:
                raise TaskError("a signature made elsewhere is over the signing time too: give signed_at")
            try:
                mark = Signature(signer_id=signer_id, signature=signature_payload, signed_at=signed_at)
            except ValidationError as exc:
                raise TaskError(_first_problem(exc, "a signature (128 hex digits of Ed25519)")) from None
            signed = TaskSigned(**self.carried(TaskDraft), state="signed", signature=mark)
            problems = s.verify_problems(signed, registry)
            if problems:
                raise TaskError(f"task {self.task_id!r} is not signed: " + "; ".join(problems))
            return signed

    def carried(self, model: type[TaskDraft]) -> dict[str, Any]:
        """The fields ``model`` shares with this task, ``state`` and absent values left out: what
        a transition copies into the next model."""
        return {name: getattr(self, name) for name in model.model_fields
                if name != "state" and getattr(self, name) is not None}

    def draft_fields(self) -> dict[str, Any]:
        """The draft's own fields (``state`` aside) as canonical JSON values: what is signed."""
        fields = {name: getattr(self, name) for name in TaskDraft.model_fields if name != "state"}
        fields["cost_estimate"] = text(self.cost_estimate)
        fields["created_at"] = self.created_at.isoformat()
        return fields

    def signing_bytes(self, signer_id: str, signed_at: datetime) -> bytes:
        """The canonical bytes a HITL signature covers: the draft's fields, who signs, and when."""
        from cda.contracts.receipt import canonical_json

        payload = {"format": SIGNATURE_FORMAT, "task": self.draft_fields(), "signer_id": signer_id,
                   "sig_type": "HITL", "signed_at": signed_at.isoformat()}
        return canonical_json(payload).encode("utf-8")

    def as_draft(self) -> TaskDraft:
        """The draft this task began as (what its signature covers)."""
        return TaskDraft.model_validate(self.carried(TaskDraft) | {"state": "draft"})

    def to_document(self) -> dict[str, Any]:
        """The task as a JSON-ready dict, ``cost_estimate`` a ``Decimal`` (see :func:`dump_exact`)."""
        return plain(self.model_dump(exclude_none=True))

    def to_json(self) -> str:
        """The task as canonical JSON with ``cost_estimate`` the exact number it is."""
        return dump_exact(self.to_document())

    @classmethod
    def from_json(cls, source: str, where: str = "<task>") -> Self:
        """A task of exactly this class from JSON text, numbers read exactly; :class:`TaskError`
        naming ``where`` and the first bad field otherwise."""
        return cls.from_document(load_exact(source, where, TaskError), where)

    @classmethod
    def from_document(cls, document: object, where: str = "<task>") -> Self:
        if not isinstance(document, dict):
            raise TaskError(f"{where}: a task is a JSON object, not {type(document).__name__}")
        for name in ("state", "created_at"):  # a document states them (the constructor's defaults are the seed's)
            if name not in document:
                raise TaskError(f"{where}: not a {cls.__name__}: {name}: the field is required")
        cost = document.get("cost_estimate")
        if isinstance(cost, float):  # a document's numbers are read exactly (load_exact), never as floats
            raise TaskError(f"{where}: not a {cls.__name__}: cost_estimate: an exact amount (a JSON number, an int or "
                            f"a Decimal), not a float ({cost!r})")
        try:
            return cls.model_validate(dict(document))
        except ValidationError as exc:
            raise TaskError(f"{where}: " + _first_problem(exc, f"a {cls.__name__}")) from None


class TaskSigned(TaskDraft):
    """A draft with a human's signature: the only kind of task that may be executed."""

    STATE: ClassVar[TaskState] = "signed"

    state: TaskState = "signed"
    signature: Signature


    def execute(self, result: dict[str, Any] | None = None, audit_ref: str | None = None, *,
                store: GuardianStore | Path | str, decision: DecisionRecord | None = None,
                action: ProposedAction | None = None,
                run: Callable[[TaskSigned], dict[str, Any]] | None = None, receipts: list[str] | None = None
                ) -> TaskExecuted:  # fmt: skip
        """The seed's ``signed.execute(result, audit_ref)``, through the checks of ``cda task
        execute`` (:func:`cda.guardian.execution.execute`: the signature, the guardian's recorded,
        latest and pinned APPROVE on this task's action — ``decision``, by default the latest the
        guardian recorded in ``store`` for the task's ``action_digest`` — the task id once, the
        reservation in the CFO ledger of ``store``). ``run`` is the side effect (its dict is the result); without it,
        ``result`` is what the side effect returned. ``audit_ref`` names the ledger entry the
        execution writes (``ledger://tx-123`` is entry ``tx-123``; an id in use is refused before
        anything runs); without it the ledger numbers the entry."""
        from cda.guardian.execution import execute
        from cda.guardian.ledger import Ledger

        tx_id = None
        if audit_ref is not None:
            if not audit_ref.startswith("ledger://") or len(audit_ref) <= len("ledger://"):
                raise TaskError(f"audit_ref names a ledger entry (ledger://tx-123), not {audit_ref!r}")
            tx_id = audit_ref.removeprefix("ledger://")
        if run is not None and result is not None:
            raise TaskError("give the side effect (run) or the result it returned, not both")
        done = result if result is not None else {}
        from cda.guardian.decision import DecisionRecord
        from cda.guardian.execution import ExecutionRefused

        with _opened(store) as guardian:
            if decision is None:
                if self.action_digest is None:
                    raise ExecutionRefused(f"task {self.task_id!r} is not executed: it names no action_digest, so "
                                           "no decision of the guardian is about it (TaskDraft.for_action binds one)")
                latest = guardian.latest_decision(self.action_digest)
                if latest is None:
                    raise ExecutionRefused(f"task {self.task_id!r} is not executed: the guardian recorded no "
                                           "decision on its action in this file (cda guard --ledger)")
                decision = DecisionRecord.model_validate_json(latest.body)
            return execute(self, decision, Ledger(guardian), action=action, run=run or (lambda _task: done),
                           receipts=receipts or [], tx_id=tx_id)


class TaskExecuted(TaskSigned):
    """A signed task that ran: its result, its ledger entry (``audit_ref``) and receipts."""

    STATE: ClassVar[TaskState] = "executed"

    state: TaskState = "executed"
    executed_at: Moment
    result: dict[str, Any]
    audit_ref: str = Field(pattern=r"^ledger://[A-Za-z0-9][A-Za-z0-9_.:@/-]{0,127}$")
    receipts: list[str] = Field(default_factory=list)

    @field_validator("result", mode="before")
    @classmethod
    def _exact_result(cls, value: object) -> object:
        return _exact_json(value, "result")


def _exact_json(value: object, path: str) -> object:
    """A JSON value with every float turned into the decimal it prints as (NaN and infinity refused),
    so a result written back is exact and the same bytes every time."""
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"{path} holds {value!r}, which JSON has no number for")
        return Decimal(repr(value))
    if isinstance(value, Decimal) and not value.is_finite():
        raise ValueError(f"{path} holds {value}, which JSON has no number for")
    if isinstance(value, dict):
        return {k: _exact_json(v, f"{path}.{k}") for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_exact_json(v, f"{path}[{i}]") for i, v in enumerate(value)]
    return value


_BY_STATE: dict[str, type[TaskDraft]] = {"draft": TaskDraft, "signed": TaskSigned, "executed": TaskExecuted}


def read_task(source: str, where: str = "<task>") -> TaskDraft:
    """Whichever task a JSON document is, by its ``state`` (a draft, signed or executed task)."""
    document = load_exact(source, where, TaskError)
    state = document.get("state", "draft") if isinstance(document, dict) else None
    model = _BY_STATE.get(state) if isinstance(state, str) else None
    if model is None:
        raise TaskError(f"{where}: a task's state is draft, signed or executed, not {state!r}")
    return model.from_document(document, where)


@contextmanager
def _opened(store: GuardianStore | Path | str) -> Iterator[GuardianStore]:
    """``store`` itself, or the guardian file at that path opened for the call (an existing one:
    a task is never the first to make a guardian file)."""
    from cda.guardian.guardian_db import GuardianStore

    if isinstance(store, GuardianStore):
        yield store
        return
    if not Path(store).is_file():
        raise TaskError(f"{store}: no such guardian file (cda task add-signer creates one)")
    with GuardianStore.open(store) as opened:
        yield opened


def _first_problem(exc: ValidationError, what: str) -> str:
    first = exc.errors(include_url=False)[0]
    where = ".".join(str(part) for part in first["loc"]) or "the document"
    return f"not {what}: {where}: {problem_message(first)}"
