"""The one gate: may this principal make this call? Decided before the operation runs.

:func:`invoke` is how every door runs an operation: the parameters are validated (the params
model; nothing is loaded), :func:`decide` compares what the call would use
(:mod:`cda.operations.demands`) with the principal, and only then does the operation's function
run, under the principal's :class:`~cda.access.Access` (so a file a door did not see — a ``ken``
line inside a problem file, a path the conductor's tools are handed — is refused where it is
read). The rules (docs/service.md, "Who may do what"):

* the operation is open to the principal's role (``reflect.approve``: local and internal only);
* an operation that grants (``approves=True``) needs an approver;
* files — a path parameter, ``ken "…"`` anywhere in DSL text, an Action's ``ken.path`` — only
  for a principal that reads files, and only under its roots (``..`` and symbolic links resolved
  first);
* code (``functions``) only for a principal allowed to run code;
* approvals given as input (``policies.approvals``) count only from an approver; anyone else's
  are removed before the call runs, with a receipt;
* network egress above the door's cap: the call waits for an approval where it can wait
  (``actions.start``), else it is refused;
* an approval of a proposal (an operation that declares its ``proposer``: ``guard.resolve``) never
  from the one who proposed it: not from the principal whose call proposed it (a token's
  principal; the local user at the machine is the one person there, so its approvals stand), and
  not signed as the agent the proposal is for, nor as the proposing principal's name;
* an LLM endpoint (an Action's ``llm.base_url``, the conductor's ``llm_base_url``) only from a
  principal that chooses its own (the CLI's user) or one the operator lists in
  ``CDA_LLM_ENDPOINTS``: otherwise a client could make the server post its evidence, and the
  conductor its ``CDA_LLM_API_KEY``, to a host of the client's choosing.

Every refusal is a receipt (``gate.refused``, status ``denied``) in the door's receipt log, also
the refusals the access check makes while the operation runs (``access.refused``).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from pydantic import BaseModel

from cda.access import EGRESS_RANK, EgressClass, granted, resolved_root, under
from cda.errors import AccessDenied
from cda.operations.demands import Demands, Where, demands_of
from cda.operations.principals import Principal
from cda.operations.registry import Door, Operation, get

__all__ = ["Call", "Decision", "LogSink", "MemorySink", "Proposal", "Refused", "Sink", "decide", "invoke",
           "self_approval"]


class Refused(AccessDenied):
    """The gate refused a call: ``need`` (role, approve, files, code, egress) and ``path`` (where
    in the parameters). Its receipt is written before it is raised."""


class Sink(Protocol):
    """Where a door's gate receipts go."""

    def record(self, name: str, op: str, principal: Principal, detail: dict[str, Any]) -> None: ...


@dataclass
class MemorySink:
    """Receipts kept in a list (a door with no log of its own; tests)."""

    records: list[tuple[str, str, str, dict[str, Any]]] = field(default_factory=list)

    def record(self, name: str, op: str, principal: Principal, detail: dict[str, Any]) -> None:
        self.records.append((name, op, principal.name, detail))


class LogSink:
    """Receipts in a receipt log (:class:`~cda.actions.receipts.ReceiptLog` or anything with
    ``append`` and ``count``), under the action id ``gate`` unless the call names an action."""

    def __init__(self, log: Any) -> None:
        self.log = log

    def record(self, name: str, op: str, principal: Principal, detail: dict[str, Any]) -> None:
        from cda.contracts.receipt import Receipt, canonical_json, sha256_hex  # a door that keeps a log only

        action_id = str(detail.get("action_id") or "gate")
        inputs = {"operation": op, "principal": principal.name, "role": principal.role,
                  "need": detail.get("need"), "where": detail.get("where")}
        self.log.append(Receipt(action_id=action_id, seq=self.log.count(action_id), kind="action", name=name,
                                inputs_hash=sha256_hex(canonical_json(inputs)),
                                result={"operation": op, "principal": principal.name, "role": principal.role,
                                        **{k: v for k, v in detail.items() if k != "action_id"}},
                                status="denied"))


@dataclass(frozen=True)
class Proposal:
    """Who proposed what a call would approve (an operation's ``proposer`` hook reads it from the
    door's store): ``principal`` is ``role:name`` of the caller whose call proposed it (None: not
    proposed through a door), ``agent`` the agent the proposal is for, ``signer`` the identity the
    call approves as (its ``by``), ``subject`` what is approved (for the message), ``param`` the parameter naming it."""

    subject: str
    agent: str
    principal: str | None
    signer: str | None
    param: str = "id"  # the parameter that names the proposal (where a refusal points)


def self_approval(principal: Principal, proposal: Proposal) -> str | None:
    """Why ``principal`` may not approve ``proposal`` (None: it may): see the module's docstring."""
    me = f"{principal.role}:{principal.name}"
    proposer_name = proposal.principal.split(":", 1)[1] if proposal.principal else None
    if proposal.principal == me and principal.role != "local":
        return (f"{proposal.subject} was proposed by {principal.role} {principal.name!r}: the one who proposes "
                "does not approve it")
    if proposal.signer is not None and proposal.signer in (proposal.agent, proposer_name):
        return (f"{proposal.subject} was proposed for agent {proposal.agent!r}: it is not approved as "
                f"{proposal.signer!r}, its own proposer")
    return None


@dataclass(frozen=True)
class Decision:
    """What the gate decided: a refusal ``(need, reason, where)``, or the approvals the call waits
    for, and whether approvals given as input are to be removed."""

    refusal: tuple[str, str, Where] | None = None
    waits_for: tuple[str, ...] = ()
    strip_approvals: tuple[Where, ...] = ()
    egress: str | None = None  # the egress class the call uses (None: none)


@dataclass
class Call:
    """One call as its operation's function sees it: who, by which door, the door's facilities
    (``env``), the folder relative paths are read from, the door's egress cap, progress."""

    op: Operation
    principal: Principal
    door: Door
    env: Any = None
    base_dir: Path = field(default_factory=Path.cwd)
    egress_cap: EgressClass = "local"
    sink: Sink = field(default_factory=MemorySink)
    progress: Callable[[float, str], None] | None = None
    waits_for: tuple[str, ...] = ()
    approvals_ignored: list[str] = field(default_factory=list)

    def nested(self, name: str, params: Mapping[str, Any] | BaseModel, **changes: Any) -> BaseModel:
        """Run another operation for the same principal through the gate (the conductor's tools)."""
        return invoke(name, params, principal=self.principal, door=changes.pop("door", self.door),
                      env=changes.pop("env", self.env), base_dir=changes.pop("base_dir", self.base_dir),
                      egress_cap=self.egress_cap, sink=self.sink, **changes)


def _resolve(path: str, base_dir: Path) -> Path:
    p = Path(os.path.expanduser(path)) if path.startswith("~") else Path(path)
    return resolved_root(p if p.is_absolute() else base_dir / p)


ENDPOINTS_VARIABLE = "CDA_LLM_ENDPOINTS"


def _endpoint_key(url: str) -> tuple[str, str, int | None, str] | None:
    """A base URL compared as scheme, host, port (the scheme's default filled in) and path
    without a trailing slash; ``None`` for anything that is not an http(s) URL with a host."""
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError:
        return None
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname or parts.username or parts.password:
        return None
    scheme = parts.scheme.lower()
    return scheme, parts.hostname.lower(), port or (443 if scheme == "https" else 80), parts.path.rstrip("/")


def allowed_endpoints() -> set[tuple[str, str, int | None, str]]:
    """The LLM endpoints the operator allows every caller (``CDA_LLM_ENDPOINTS``: base URLs
    separated by commas or spaces)."""
    listed = os.environ.get(ENDPOINTS_VARIABLE, "").replace(",", " ").split()
    return {key for key in map(_endpoint_key, listed) if key is not None}


def decide(op: Operation, principal: Principal, params: BaseModel, *, base_dir: Path,
           egress_cap: EgressClass, demands: Demands | None = None) -> Decision:
    """The gate's decision for ``principal`` calling ``op`` with validated ``params``."""
    if principal.role not in op.roles:
        return Decision(("role", f"{op.name} is not open to the {principal.role} role", []))
    if op.approves and not principal.approves:
        return Decision(("approve", f"{op.name} needs an approver; {principal.role} {principal.name!r} is not one", []))
    d = demands if demands is not None else demands_of(params)
    for where, path in d.paths:
        if not op.needs.files:  # pragma: no cover - a declaration mistake, caught by tests/test_operations.py
            return Decision(("files", f"{op.name} does not read files", where))
        if principal.roots is None:
            continue
        if not principal.roots:
            return Decision(("files", f"{principal.role} {principal.name!r} names no file on this machine "
                             "(send the content inline)", where))
        try:
            inside = under(_resolve(path, base_dir), principal.roots)
        except (OSError, ValueError):
            inside = False
        if not inside:
            return Decision(("files", "a file outside the allowed roots (--allow-root, or the client's roots)", where))
    if d.code and not principal.code:
        return Decision(("code", f"running user code (functions) is not allowed for {principal.role} "
                         f"{principal.name!r} (a server runs it only with --allow-code, for the internal role)",
                         d.code[0]))
    if d.endpoints and not principal.endpoints:
        allowed = allowed_endpoints()
        for where, url in d.endpoints:
            key = _endpoint_key(url)
            if key is None or key not in allowed:
                return Decision(("egress", f"{principal.role} {principal.name!r} may send only to the LLM endpoints "
                                 f"the operator lists in {ENDPOINTS_VARIABLE}; {url[:200]!r} is not one", where))
    strip = tuple(where for where, _ in d.approvals) if not principal.approves else ()
    granted_by_input = {a for _, values in d.approvals for a in values} if principal.approves else set()
    waits: tuple[str, ...] = ()
    egress = d.egress[1] if d.egress is not None else None
    if d.egress is not None and EGRESS_RANK[d.egress[1]] > EGRESS_RANK[egress_cap]:
        wanted = f"egress:{d.egress[1]}"
        if wanted in granted_by_input or (d.egress[1] == "partner" and "egress:external" in granted_by_input):
            pass  # an approver's own approval, given as input
        elif op.waits:
            waits = (wanted,)
        else:
            return Decision(("egress", f"network egress '{d.egress[1]}' is above this door's cap '{egress_cap}' and "
                             "this call cannot wait for an approval", d.egress[0]))
    return Decision(None, waits, strip, egress)


def _without_approvals(params: BaseModel, places: tuple[Where, ...]) -> BaseModel:
    data = params.model_dump(mode="python", round_trip=True)
    for where in places:
        node: Any = data
        for key in where[:-1]:
            node = node[key]
        node[where[-1]] = []
    return type(params).model_validate(data)


def invoke(op: Operation | str, params: Mapping[str, Any] | BaseModel, *, principal: Principal, door: Door,
           env: Any = None, base_dir: Path | None = None, egress_cap: EgressClass = "local", sink: Sink | None = None,
           progress: Callable[[float, str], None] | None = None, action_id: str | None = None) -> BaseModel:
    """Validate, decide, run: the one way a door runs an operation.

    Raises the params model's ``ValidationError`` for malformed parameters, :class:`Refused` (its
    receipt written) for a call the gate refuses, and whatever the operation raises (a
    :class:`~cda.errors.CDAError` for bad input) otherwise."""
    op = get(op) if isinstance(op, str) else op
    sink = sink if sink is not None else MemorySink()
    base = base_dir if base_dir is not None else Path.cwd()
    if principal.role not in op.roles:  # before its parameters are even read: to this role it does not exist
        reason = f"{op.name} is not open to the {principal.role} role"
        sink.record("gate.refused", op.name, principal, {"need": "role", "reason": reason, "where": [],
                                                        "door": door.value, "action_id": action_id})
        raise Refused(reason, need="role")
    checked = params if isinstance(params, op.params) else op.params.model_validate(
        params.model_dump() if isinstance(params, BaseModel) else params)
    decision = decide(op, principal, checked, base_dir=base, egress_cap=egress_cap)
    if decision.refusal is not None:
        need, reason, where = decision.refusal
        sink.record("gate.refused", op.name, principal, {"need": need, "reason": reason, "where": where,
                                                        "door": door.value, "action_id": action_id})
        raise Refused(reason, need=need, path=list(where))
    if op.proposer is not None:
        proposal = op.proposer(env, checked)
        why = self_approval(principal, proposal) if proposal is not None else None
        if why is not None:
            named: list[str | int] = [proposal.param]
            sink.record("gate.refused", op.name, principal, {"need": "approve", "reason": why, "where": named,
                                                            "door": door.value, "action_id": action_id})
            raise Refused(why, need="approve", path=named)
    call = Call(op, principal, door, env, base, egress_cap, sink, progress, decision.waits_for)
    if decision.strip_approvals:
        for where in decision.strip_approvals:
            call.approvals_ignored.append(".".join(str(w) for w in where))
        sink.record("gate.approvals_ignored", op.name, principal, {
            "need": "approve", "where": list(decision.strip_approvals[0]), "door": door.value, "action_id": action_id,
            "reason": "approvals given as input count only from an approver; removed before the call ran"})
        checked = _without_approvals(checked, decision.strip_approvals)
    egress: EgressClass = egress_cap
    if decision.egress is not None and not decision.waits_for and EGRESS_RANK[decision.egress] > EGRESS_RANK[egress_cap]:
        egress = decision.egress  # type: ignore[assignment]  # an approver's own approval
    access = principal.access(egress)
    try:
        with granted(access):
            return op.run(call, checked)
    finally:
        for need, reason in access.refused:
            sink.record("access.refused", op.name, principal, {"need": need, "reason": reason, "door": door.value,
                                                             "action_id": action_id})
