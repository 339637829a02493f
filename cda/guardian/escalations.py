"""Escalations a person resolves: the exit an ESCALATE had not (docs/guardian.md, "Escalations").

When the gateway (``cda guard proxy``) holds a tool call back with ESCALATE, it records the call
here (:func:`escalate`): the action, its ``call_key`` (the agent, the tool and the arguments: what
makes the agent's next call *the same call*), the decision's reason and receipt, the policy store
it was decided under, and its cost. Nothing is reserved for an open escalation.

A person resolves it (:func:`resolve`, ``cda guard resolve ID --approve|--reject --by SIGNER
--reason …``): the resolution is a document signed with the key of a signer who speaks for the
guardian file (:class:`~cda.guardian.signers.SignerRegistry`: the chain of endorsements back to the
first signer of the signed header), over the file's id, the escalation, the action's digest, the
call key, the policy store's digest, the cost, the decision, the reason and when it expires. An
approval **reserves the cost** in the CFO ledger (entry ``esc:<id>``) at once — past the budget
when the escalation was ``budget_exceeded``: the signed approval is the person's consent to that
spend, and the overspend shows in the ledger.

The next identical call (:func:`claim`) uses an approval **once**: before it is used it is checked
again — the signature under the signer's key as the file now has it (a forged document, an
altered reason, a signer endorsed by no one are refused), the policy store the caller decides
with (and the file's pin, when it has one) must be the one the resolution names, the reservation
must still be held, and it must not have expired. An approval that fails any of these is void:
its reservation is released and the call is decided anew. A rejection refuses the identical call
for good (a changed call is decided anew).

The same holds for an action escalated by ``cda guard`` (the ``guard.evaluate`` operation, at
every door): its key is :func:`action_key` (the action's digest, so the approval is bound to those
exact bytes: a changed amount is another action), the principal whose call proposed it is kept
(``proposed_by``: the gate refuses that principal's resolution of it), and an approval is used by
a signed task (:func:`cda.guardian.execution.execute` with ``escalation=``), once, whatever door
or process tries. ``used_by`` names what used it (``task:<id>`` or the gateway's ``call:<id>``).

States: ``open`` → ``approved`` → ``used`` | ``void``; ``open`` → ``rejected``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any, Literal

from cda.contracts.receipt import canonical_json, sha256_hex
from cda.errors import CDAError
from cda.guardian.guardian_db import GuardianStore
from cda.guardian.ledger import Ledger, LedgerError
from cda.guardian.money import text
from cda.guardian.signers import SignerError, SignerRegistry, pinned_policy_digest, verifies

__all__ = ["Claim", "Escalation", "EscalationError", "RESOLUTION_FORMAT", "action_key", "call_key", "claim",
           "escalate", "escalations", "get", "release_claim", "sweep_expired", "resolve", "resolution_problems",
           "settle_claim", "void"]

RESOLUTION_FORMAT = "cda.guardian.resolution/1"
MAX_TTL_HOURS = 24 * 30


class EscalationError(CDAError, PermissionError):
    """An escalation that cannot be resolved as asked: unknown, resolved already, a signer who
    speaks for no one, a key that is not theirs, a bad reason or expiry."""


def call_key(agent_id: str, tool_id: str, arguments: Any) -> str:
    """What makes two calls the same call: the SHA-256 of the agent, the tool and the arguments."""
    return sha256_hex(canonical_json({"agent": agent_id, "tool": tool_id, "arguments": arguments}))


def action_key(action_digest: str) -> str:
    """What makes two proposed actions given to ``cda guard`` the same action: their digest (every
    field, the ``action_id`` and the amount included), so an approval runs only those bytes."""
    return sha256_hex(canonical_json({"action": action_digest}))


@dataclass(frozen=True)
class Escalation:
    """One row of the ``escalations`` table, its resolution parsed (None while open)."""

    escalation_id: str
    call_key: str
    action_digest: str
    agent_id: str
    tool_id: str
    action: dict[str, Any]
    reason: str
    decision_receipt: str
    policy_digest: str
    cost: Decimal
    currency: str
    state: str
    resolution: dict[str, Any] | None
    signature: str | None
    tx_id: str | None
    created_at: str
    updated_at: str
    proposed_by: str | None = None
    used_by: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The escalation as JSON (money as exact decimal text)."""
        return {"escalation_id": self.escalation_id, "state": self.state, "agent_id": self.agent_id,
                "tool_id": self.tool_id, "reason": self.reason, "cost": text(self.cost), "currency": self.currency,
                "action_digest": self.action_digest, "call_key": self.call_key,
                "decision_receipt": self.decision_receipt, "policy_digest": self.policy_digest,
                "arguments": self.action.get("parameters", {}), "resolution": self.resolution,
                "signature": self.signature, "tx_id": self.tx_id, "created_at": self.created_at,
                "updated_at": self.updated_at, "proposed_by": self.proposed_by, "used_by": self.used_by}


_COLUMNS = ("escalation_id, call_key, action_digest, agent_id, tool_id, action, reason, decision_receipt, "
            "policy_digest, cost, currency, state, resolution, signature, tx_id, created_at, updated_at, proposed_by, used_by")


def _row(row: Any) -> Escalation:
    return Escalation(str(row[0]), str(row[1]), str(row[2]), str(row[3]), str(row[4]), json.loads(row[5]),
                      str(row[6]), str(row[7]), str(row[8]), Decimal(row[9]), str(row[10]), str(row[11]),
                      None if row[12] is None else json.loads(row[12]), row[13], row[14], str(row[15]), str(row[16]),
                      row[17], row[18])


def get(store: GuardianStore, escalation_id: str) -> Escalation | None:
    """The escalation ``escalation_id`` (None: no such one)."""
    row = store.conn.execute(f"SELECT {_COLUMNS} FROM escalations WHERE escalation_id = ?", (escalation_id,)).fetchone()
    return None if row is None else _row(row)


def escalations(store: GuardianStore, state: str | None = None) -> list[Escalation]:
    """Every escalation (or those in ``state``), oldest first."""
    where, args = ("WHERE state = ?", (state,)) if state else ("", ())
    return [_row(r) for r in store.conn.execute(f"SELECT {_COLUMNS} FROM escalations {where} ORDER BY rowid", args)]


_OPEN = ("open",)
#: what ``cda guard`` keeps for an action it escalates again: anything but a lapsed approval, so a
#: rejection is not reopened by asking again, and an approval is not asked twice
KEEP_RESOLVED = ("open", "approved", "rejected", "used")


def escalate(store: GuardianStore, *, key: str, action: Any, tool_id: str, record: Any,
             proposed_by: str | None = None, keep: tuple[str, ...] = _OPEN) -> tuple[Escalation, bool]:
    """Record an ESCALATE ``record`` about ``action`` (a :class:`~cda.guardian.proposal.ProposedAction`)
    as an open escalation, and whether it is new. The same key escalated for the same reason under
    the same policy store while one is in a state of ``keep`` (default: open) gives that one back,
    not new (an agent retrying does not pile up escalations); with ``rejected`` in ``keep``, a
    rejection of the key is given back whatever the reason now (asking again does not reopen it)."""
    marks = ", ".join("?" for _ in keep)
    with store.transaction() as conn:
        refused = conn.execute(f"SELECT {_COLUMNS} FROM escalations WHERE call_key = ? AND state = 'rejected' "
                               "ORDER BY rowid DESC LIMIT 1", (key,)).fetchone() if "rejected" in keep else None
        if refused is not None:  # a person refused these very bytes: asked again for another reason, still refused
            return _row(refused), False
        found = conn.execute(f"SELECT {_COLUMNS} FROM escalations WHERE call_key = ? AND state IN ({marks}) "
                             "AND reason = ? AND policy_digest = ? ORDER BY rowid DESC LIMIT 1",
                             (key, *keep, record.reason, record.policy_digest)).fetchone()
        if found is not None:
            return _row(found), False
        n = int(conn.execute("SELECT COUNT(*) FROM escalations").fetchone()[0]) + 1
        ident = f"esc-{n}"
        now = store.now()
        conn.execute(f"INSERT INTO escalations ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'open', NULL, NULL, "
                     "NULL, ?, ?, ?, NULL)",
                     (ident, key, record.action_digest, action.agent_id, tool_id,
                      canonical_json(action.model_dump(mode="json")), record.reason, record.receipt,
                      record.policy_digest, text(action.cost_estimate), action.currency, now, now, proposed_by))
    found_now = get(store, ident)
    assert found_now is not None
    return found_now, True


def _document(store_id: str, e: Escalation, decision: str, by: str, reason: str, resolved_at: str,
              expires_at: str) -> dict[str, Any]:
    return {"format": RESOLUTION_FORMAT, "store": store_id, "escalation_id": e.escalation_id,
            "action_digest": e.action_digest, "call_key": e.call_key, "policy_digest": e.policy_digest,
            "cost": text(e.cost), "currency": e.currency, "decision": decision, "by": by, "reason": reason,
            "resolved_at": resolved_at, "expires_at": expires_at}


def resolve(ledger: Ledger, escalation_id: str, *, decision: Literal["approve", "reject"], by: str, key: str,
            reason: str, ttl_hours: int = 24) -> Escalation:
    """Record a person's signed decision on an open escalation (see the module's docstring);
    :class:`EscalationError` when it cannot be."""
    store = ledger.store
    reason = reason.strip()
    if not reason or len(reason) > 2000 or any(ord(c) < 32 and c not in "\t" for c in reason):
        raise EscalationError("--reason is one line of 1 to 2,000 characters saying why")
    if decision not in ("approve", "reject"):
        raise EscalationError(f"a resolution approves or rejects, not {decision!r}")
    if isinstance(ttl_hours, bool) or not isinstance(ttl_hours, int) or not 1 <= ttl_hours <= MAX_TTL_HOURS:
        raise EscalationError(f"an approval lasts 1 to {MAX_TTL_HOURS} hours, not {ttl_hours!r}")
    e = get(store, escalation_id)
    if e is None:
        raise EscalationError(f"{store.where} has no escalation {escalation_id!r} (cda guard escalations lists them)")
    if e.state != "open":
        raise EscalationError(f"escalation {escalation_id} is {e.state} already: a resolution is made once")
    registry = SignerRegistry(store)
    try:
        header = registry.header()
        resolved = datetime.fromisoformat(store.now())
        doc = _document(header.store_id, e, decision, by, reason, resolved.isoformat(),
                        (resolved + timedelta(hours=ttl_hours)).isoformat())
        signature = registry.sign_as(by, key, canonical_json(doc).encode("utf-8"), "resolve an escalation")
    except SignerError as exc:
        raise EscalationError(str(exc)) from None
    state = "approved" if decision == "approve" else "rejected"
    try:
        with store.transaction() as conn:
            tx_id = None
            if decision == "approve":
                tx_id = f"esc:{escalation_id}"
                ledger._reserve_in(conn, e.agent_id, e.cost, e.currency, tx_id=tx_id,
                                   evidence=[f"escalation:{escalation_id}", f"resolution:{by}",
                                             f"decision:{e.decision_receipt}"],
                                   over_budget=e.reason == "budget_exceeded",
                                   tool_id=e.tool_id if store.tool(e.tool_id) is not None else None)
            moved = conn.execute("UPDATE escalations SET state = ?, resolution = ?, signature = ?, tx_id = ?, "
                                 "updated_at = ? WHERE escalation_id = ? AND state = 'open'",
                                 (state, canonical_json(doc), signature, tx_id, store.now(), escalation_id)).rowcount
            if moved != 1:
                raise EscalationError(f"escalation {escalation_id} was resolved meanwhile: a resolution is made once")
    except LedgerError as exc:
        raise EscalationError(f"escalation {escalation_id} is not approved: {exc}") from None
    done = get(store, escalation_id)
    assert done is not None
    return done


def resolution_problems(store: GuardianStore, e: Escalation, policy_digest: str | None = None) -> list[str]:
    """Why ``e``'s resolution is not to be believed or used now (empty: it is): the signature under
    the key of a signer who speaks for the file, the document against the row, and for an
    approval the policy store (``policy_digest``: the caller's; and the file's pin), the
    reservation and the expiry."""
    if e.resolution is None or e.signature is None:
        return [f"escalation {e.escalation_id} has no resolution"]
    doc = e.resolution
    registry = SignerRegistry(store)
    try:
        header = registry.header()
        signer_key = registry.public_key(str(doc.get("by", "")))
    except SignerError as exc:
        return [str(exc)]
    if signer_key is None:
        return [f"the resolution's signer {doc.get('by')!r} does not speak for {store.where}"]
    expected = _document(header.store_id, e, str(doc.get("decision")), str(doc.get("by")), str(doc.get("reason")),
                         str(doc.get("resolved_at")), str(doc.get("expires_at")))
    if doc != expected or not verifies(signer_key, canonical_json(doc).encode("utf-8"), e.signature):
        return [f"the resolution of {e.escalation_id} does not verify under the key of {doc.get('by')!r} "
                "(a field was changed after signing, or another key signed it)"]
    if doc["decision"] != "approve":
        return []
    problems = []
    if policy_digest is not None and policy_digest != e.policy_digest:
        problems.append(f"it was approved under the policy store {e.policy_digest[:16]}…, not the one in force "
                        f"({policy_digest[:16]}…)")
    pinned, _ = pinned_policy_digest(registry)
    if pinned is not None and pinned != e.policy_digest:
        problems.append(f"{store.where} now pins the policy store {pinned[:16]}…, not {e.policy_digest[:16]}…")
    entry = store.conn.execute("SELECT status FROM financial_ledger WHERE tx_id = ?", (e.tx_id or "",)).fetchone()
    if entry is None or entry[0] != "reserved":
        problems.append(f"its reservation {e.tx_id} is {entry[0] if entry else 'missing'}, not held")
    if datetime.fromisoformat(store.now()) >= datetime.fromisoformat(str(doc["expires_at"])):
        problems.append(f"it expired at {doc['expires_at']}")
    return problems


@dataclass(frozen=True)
class Claim:
    """What :func:`claim` found for a call: an approval now used by it (``tx_id`` the reservation
    to settle), a rejection, or approvals that were void (and released)."""

    escalation: Escalation | None
    approved: bool
    void: tuple[str, ...] = ()


def claim(ledger: Ledger, key: str, policy_digest: str, used_by: str | None = None) -> Claim:
    """The resolution that decides the call ``key`` now: the latest resolved escalation of that
    call. An approval that verifies is marked ``used`` (once: two racing calls cannot both take
    it); one that does not is made ``void`` and its reservation released, and the call is decided
    anew. A rejection that verifies refuses the call."""
    store = ledger.store
    voided: list[str] = [f"{ident}: expired" for ident in sweep_expired(ledger)]
    while True:
        row = store.conn.execute(f"SELECT {_COLUMNS} FROM escalations WHERE call_key = ? AND state IN "
                                 "('approved', 'rejected') ORDER BY rowid DESC LIMIT 1", (key,)).fetchone()
        if row is None:
            return Claim(None, False, tuple(voided))
        e = _row(row)
        if e.state == "rejected":  # even one that does not verify holds the call back: a refusal is never a pass
            return Claim(e, False, tuple(voided))
        problems = resolution_problems(store, e, policy_digest)
        if problems:
            void(ledger, e, "; ".join(problems))
            voided.append(f"{e.escalation_id}: {'; '.join(problems)}")
            continue
        with store.transaction() as conn:
            taken = conn.execute("UPDATE escalations SET state = 'used', used_by = ?, updated_at = ? "
                                 "WHERE escalation_id = ? AND state = 'approved'",
                                 (used_by, store.now(), e.escalation_id)).rowcount
        if taken == 1:
            return Claim(e, True, tuple(voided))


def sweep_expired(ledger: Ledger) -> list[str]:
    """Void every approval past its expiry and release its reservation (an approval nobody used
    must not hold the budget for ever); returns their ids. The gateway sweeps before each call,
    ``cda guard escalations`` before it lists."""
    store = ledger.store
    now = datetime.fromisoformat(store.now())
    swept = []
    for e in escalations(store, "approved"):
        expires = (e.resolution or {}).get("expires_at")
        if isinstance(expires, str) and now >= datetime.fromisoformat(expires):
            void(ledger, e, "expired")
            swept.append(e.escalation_id)
    return swept


def void(ledger: Ledger, e: Escalation, why: str) -> bool:
    """Make an approval that cannot be used ``void`` and release its reservation (``why`` goes in
    the release's evidence); False when it was no longer approved (used or void meanwhile)."""
    store = ledger.store
    with store.transaction() as conn:
        moved = conn.execute("UPDATE escalations SET state = 'void', updated_at = ? WHERE escalation_id = ? "
                             "AND state = 'approved'", (store.now(), e.escalation_id)).rowcount
    if moved == 1 and e.tx_id is not None:
        entry = ledger.entry(e.tx_id)
        if entry is not None and entry.status == "reserved":
            ledger.release(e.tx_id, evidence=[f"void:{e.escalation_id}", f"why:{why[:200]}"])
    return moved == 1


def settle_claim(ledger: Ledger, e: Escalation) -> None:
    """The approved call ran: its reservation is settled at the cost."""
    assert e.tx_id is not None
    ledger.settle(e.tx_id, e.cost, evidence=[f"called:{e.escalation_id}"])


def release_claim(ledger: Ledger, e: Escalation) -> None:
    """The approved call failed before its side effect could be known to have happened: the
    reservation is released (the approval stays used)."""
    assert e.tx_id is not None
    ledger.release(e.tx_id, evidence=[f"failed:{e.escalation_id}"])
