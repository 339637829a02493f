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
"""

from __future__ import annotations

import math
from datetime import datetime
from decimal import Decimal
from typing import TYPE_CHECKING, Any, ClassVar, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from cda.errors import CDAError
from cda.guardian.guardian_db import Clock, Moment, utc_now
from cda.guardian.money import CURRENCY_PATTERN, Amount, dump_exact, load_exact, plain, text

if TYPE_CHECKING:
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
        try:
            return cls.model_validate(dict(document))
        except ValidationError as exc:
            raise TaskError(f"{where}: " + _first_problem(exc, f"a {cls.__name__}")) from None


class TaskSigned(TaskDraft):
    """A draft with a human's signature: the only kind of task that may be executed."""

    STATE: ClassVar[TaskState] = "signed"

    state: TaskState = "signed"
    signature: Signature


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


def _first_problem(exc: ValidationError, what: str) -> str:
    first = exc.errors(include_url=False)[0]
    where = ".".join(str(part) for part in first["loc"]) or "the document"
    return f"not {what}: {where}: {first['msg']}"
