"""Approvals: what an action waits for before it runs, the decisions, and what the run then reads.

An egress class above the server's cap (``--egress-cap``) or a PII posture of ``consent`` needs
an approval: the action waits (``action_waiting_user``) until ``actions.approve`` or
``actions.deny``, each decision a receipt and a measured wait (spec §10's approvals latency).
The decisions are approvals-as-input (spec §6): the run reads the granted ones in
``policies.approvals``; a denial runs the action within the cap, so its external checks become
receipt stubs and its summary is the conservative one (QA scenario 3); a granted egress class
widens what the run may touch (its :class:`~cda.access.Access`). Who may grant is not decided here
but by :mod:`cda.operations`' gate, as are the approvals it adds (``waits_for``).
"""

from __future__ import annotations

import time

from cda.access import EGRESS_RANK, Access
from cda.adapters.auth import Principal
from cda.contracts.action import CDAInputs
from cda.contracts.events import ActionWaitingUser
from cda.contracts.metrics import ApprovalWait
from cda.service.attempts import Attempts
from cda.service.live import EdgeError, LiveAction

__all__ = ["Approvals"]


class Approvals:
    """The approvals of the server's actions, under its egress cap."""

    def __init__(self, attempts: Attempts, egress_cap: str) -> None:
        self.attempts = attempts
        self.egress_cap = egress_cap

    def needed(self, inputs: CDAInputs, waits_for: tuple[str, ...] = ()) -> list[str]:
        """The approvals ``inputs`` need on this server: ``egress:<class>`` above the cap, those
        the gate decided it waits for (``waits_for``), ``pii:consent``."""
        out = []
        if EGRESS_RANK[inputs.policies.egress] > EGRESS_RANK[self.egress_cap]:
            out.append(f"egress:{inputs.policies.egress}")
        out += [w for w in waits_for if w not in out]
        if inputs.policies.pii_posture == "consent":
            out.append("pii:consent")
        return out

    def wait(self, run: LiveAction) -> None:
        """``run`` waits for :attr:`LiveAction.needed`: its ``action_waiting_user`` event, the clock started."""
        run.status = "waiting_user"
        run.waiting_since = time.monotonic()
        self.attempts.record(run, ActionWaitingUser(
            action_id=run.action_id, seq=0, approvals_needed=list(run.needed),
            reason=f"the server's egress cap is '{self.egress_cap}'; approve or deny: {', '.join(run.needed)}"))

    def decide(self, run: LiveAction, who: Principal, approval: str, grant: bool, reason: str) -> bool:
        """Record ``who``'s decision on ``approval`` (under ``run.gate``); whether nothing is left
        to wait for, so the run may start."""
        if run.status != "waiting_user" or approval not in run.needed:
            raise EdgeError("conflict", f"action {run.action_id} is not waiting for {approval!r} "
                            f"(waiting for: {', '.join(run.needed) or 'nothing'})", ["params", "approval"])
        (run.granted if grant else run.denied).add(approval)
        run.needed.remove(approval)
        wider = approval.removeprefix("egress:")
        if grant and wider != approval and EGRESS_RANK.get(wider, 0) > EGRESS_RANK[run.access.egress]:
            run.access = _raised(run.access, wider)
        waited = time.monotonic() - (run.waiting_since if run.waiting_since is not None else time.monotonic())
        run.waits.append(ApprovalWait(approval=approval, granted=grant, waited_us=max(0, round(waited * 1_000_000))))
        self.attempts.receipt(run.action_id, "approval.granted" if grant else "approval.denied",
                              {"approval": approval, "principal": who.name}, {"reason": reason},
                              status="ok" if grant else "denied", attempt=run.attempt)
        if run.needed:
            return False
        run.status = "running"
        return True

    def applied(self, run: LiveAction, inputs: CDAInputs) -> tuple[CDAInputs, str | None]:
        """The inputs the run reads, with the decisions in them, and the notice a denial gives."""
        if run.granted or run.denied:  # approvals-as-input: the decisions are part of what the run reads
            inputs = inputs.model_copy(update={"policies": inputs.policies.model_copy(update={
                "approvals": sorted({*inputs.policies.approvals, *run.granted})})})
        if not run.denied:
            return inputs, None
        inputs = inputs.model_copy(update={"policies": inputs.policies.model_copy(update={
            "egress": self.egress_cap if any(a.startswith("egress:") for a in run.denied) else inputs.policies.egress,
            "pii_posture": "on" if "pii:consent" in run.denied else inputs.policies.pii_posture})})
        return inputs, (f"denied: {', '.join(sorted(run.denied))}; the action runs within the server's caps "
                        "and marks the evidence it could not get with receipt stubs")


def _raised(access: Access, egress: str) -> Access:
    """``access`` with its egress cap raised to an approved class (the same refusal log)."""
    wider = Access(roots=access.roots, code=access.code, egress=egress, who=access.who)  # type: ignore[arg-type]
    object.__setattr__(wider, "refused", access.refused)
    return wider
