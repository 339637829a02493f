"""Executing a signed task: once, only with a verified signature and the guardian's APPROVE.

:func:`execute` is the last step of the lifecycle (``signed -> executed``). It refuses, with an
:class:`ExecutionRefused` that says why, and before anything runs:

1. a task whose HITL signature does not verify against the signer registry
   (:func:`cda.guardian.signers.verify_problems`);
2. a decision that is not APPROVE, or that is not about this task: the decision's
   ``action_digest`` must be the task's signed ``action_digest`` (and, when the proposed action
   itself is given, that action must digest to it);
3. a decision that is not the **latest** the guardian's store recorded for that action
   (:meth:`GuardianStore.record_decision <cda.guardian.guardian_db.GuardianStore.record_decision>`): a
   document written by hand proves nothing, and an earlier REJECT is not undone by presenting an
   older APPROVE;
4. a decision made under another policy store than the one the guardian file pins
   (:func:`cda.guardian.signers.pin_policy_store`, set by a registered signer), or a file that
   pins none: an APPROVE obtained with an empty or laxer store does not count; when the pin
   names a causal model, a decision not simulated with that model and sample count does not
   count either (leaving ``--sim`` out skips the causal step);
5. a task whose agent, task id, cost or currency is not that of the action the recorded decision
   is about (the store keeps them with the decision), so a cheap task cannot ride an expensive
   action's approval, or the reverse;
6. a task id that has executed (or started to) before: the ``tasks`` table's primary key makes
   this hold across processes, and the claim, the ledger reservation of ``cost_estimate`` and the
   task's record commit in one transaction, so two racing executions cannot both pass;
7. an action the guardian once escalated for its simulated risk (``causal_risk``): the simulation
   is random, so guarding it again under another seed until the risk draws low proves nothing;
   and an action a person rejected (an escalation of it in state ``rejected``): a later APPROVE
   (a budget raised since) does not undo a person's refusal;
8. an action that another task has executed (or started to): an APPROVE is used up by the run
   it allowed, so new task ids cannot run one approval again (a failed run does not use it up).

**An approved escalation** (``escalation="esc-N"`` instead of a decision: an ESCALATE a person
approved with ``cda guard resolve``, docs/guardian.md) runs the same way after its own checks: the
task's signature (1); the escalation exists and is ``approved`` (open, rejected, void: refused;
``used``: refused, naming the task or call that used it); the task is bound to the escalated
action's exact bytes — its ``action_digest`` is the escalation's (a changed amount is another
action) and its agent, cost and currency are the escalated action's; the file pins a policy store
(as for an APPROVE) and the signed resolution still holds
(:func:`cda.guardian.escalations.resolution_problems`: its signer speaks for the file, it is not
expired, its reservation is held, it was made under the pinned store); no REJECT was recorded
for the action since; given the policy store, none of its hard policies is violated by the action
now; and the budget — without the approval's reservation the agent is within budget, and with it
too unless the escalation was ``budget_exceeded`` (the person's signed consent to that overspend,
and to no other). An approval that fails the resolution, policy or budget check is made void
(its reservation released). Then, in one transaction, the escalation is marked ``used`` by the task
(two executors racing: one runs, the other is told which task ran it), the task id is claimed
(6, 8), and the approval's reservation becomes the task's ledger entry.

Then ``run(task)`` (the side effect; none by default) runs. When it raises, the reservation is
released and the task stays ``failed``: it is not run again under the same id. Once it has
returned, the side effect has happened, so the reservation is settled at ``cost_estimate`` whatever
follows; a result that is not a JSON object of finite numbers is then a :class:`TaskError` (the
task stays ``executed``, with its signed body). The :class:`TaskExecuted` returned (also stored)
names its ledger entry as ``audit_ref = "ledger://<tx_id>"``.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterable
from typing import Any, Protocol

from pydantic import ValidationError

from cda.contracts.locations import problem_message
from cda.errors import CDAError
from cda.guardian.decision import Decision, DecisionRecord
from cda.guardian.guardian_db import Clock, GuardianStore, utc_now
from cda.guardian.ledger import Ledger, LedgerError
from cda.guardian.signers import SignerRegistry, pinned_policy_digest, pinned_setting, verify_problems
from cda.guardian.tasks import TaskError, TaskExecuted, TaskSigned

__all__ = ["ActionLike", "ExecutionRefused", "execute", "task_state"]


class ExecutionRefused(CDAError, PermissionError):
    """A signed task that may not run: bad signature, no APPROVE for it, or already executed."""


class ActionLike(Protocol):
    """What :func:`execute` reads of a proposed action (:class:`cda.guardian.proposal.ProposedAction`)."""

    agent_id: str
    task_id: str | None
    cost_estimate: Any
    currency: str

    def digest(self) -> str: ...


def _decision_problems(task: TaskSigned, decision: DecisionRecord, action: ActionLike | None) -> list[str]:
    if not decision.approved:
        return [f"the guardian's decision is {decision.decision} ({decision.reason}), not APPROVE"]
    if task.action_digest is None:
        return ["the signed task names no action_digest, so no decision of the guardian belongs to it"]
    if decision.action_digest != task.action_digest:
        return [f"the decision is about another action ({decision.action_digest[:16]}…), "
                f"not this task's ({task.action_digest[:16]}…)"]
    if action is not None and action.digest() != task.action_digest:
        return ["the action given is not the one the task names (its digest differs)"]
    return []


def _recorded_problems(task: TaskSigned, decision: DecisionRecord, store: GuardianStore,
                       action: ActionLike | None) -> list[str]:
    """Why the store's record does not back ``decision`` for ``task`` (see the module's 3-5)."""
    from cda.contracts.receipt import canonical_json

    latest = store.latest_decision(decision.action_digest)
    body = canonical_json(decision.model_dump(mode="json"))
    if latest is None or not store.conn.execute("SELECT 1 FROM decisions WHERE body = ? AND action_digest = ?",
                                                (body, decision.action_digest)).fetchone():
        return ["the decision is not one the guardian recorded in this store"]
    if latest.body != body:
        shown = DecisionRecord.model_validate_json(latest.body)
        return [f"the decision is not the latest the guardian recorded for this action, which is "
                f"{shown.decision} ({shown.reason}, receipt {shown.receipt[:16]}…): only the latest counts"]
    risky = store.conn.execute("SELECT 1 FROM decisions WHERE action_digest = ? AND reason = 'causal_risk' LIMIT 1",
                               (decision.action_digest,)).fetchone()
    if risky is not None:  # the simulation is random: another seed draws other noise, not a safer action
        return ["the guardian escalated this action for its simulated risk before (causal_risk); simulating it "
                "again (another --seed) does not undo that: a human decides, or a changed action is guarded anew"]
    rejected = store.conn.execute("SELECT escalation_id FROM escalations WHERE action_digest = ? AND state = 'rejected' "
                                  "LIMIT 1", (decision.action_digest,)).fetchone()
    if rejected is not None:  # a person's refusal of these bytes is not undone by asking the gate again later
        return [f"a person rejected this action (escalation {rejected[0]}); an APPROVE the guardian gave it since does "
                "not undo that: a changed action is guarded anew"]
    problems = []
    signers = SignerRegistry(store)
    pinned, why = pinned_policy_digest(signers)
    if pinned is None:
        problems.append(why)
    elif decision.policy_digest != pinned:
        problems.append(f"the decision was made under the policy store {decision.policy_digest[:16] or '(none)'}…, "
                        f"not the one this file pins ({pinned[:16]}…)")
    else:
        simulation, why = pinned_setting(signers, "simulation")
        made = f"{decision.model_digest}:{decision.samples}" if decision.sim_id else ""
        if simulation is None:
            problems.append(why)
        elif simulation and made != simulation:
            problems.append(f"the decision was {'simulated with ' + made[:16] + '… at ' + str(decision.samples) + ' samples' if made else 'not simulated'}, "
                            f"but this file pins the causal model {simulation[:16]}… at {simulation.rsplit(':', 1)[1]} samples")
    if latest.cost is not None:
        agent, task_id, cost, currency = latest.agent_id, latest.task_id, latest.cost, latest.currency
    elif action is not None:  # recorded without its action, which is given (and digests to the task's)
        agent, task_id, cost, currency = action.agent_id, action.task_id, action.cost_estimate, action.currency
    else:
        problems.append("the decision was recorded without its action, so what the action costs is unknown "
                        "(cda guard records the action with the decision; or give the action)")
        return problems
    if agent != task.agent_id:
        problems.append(f"the action's agent {agent!r} is not the task's {task.agent_id!r}")
    if task_id not in (None, task.task_id):
        problems.append(f"the action is for task {task_id!r}, not {task.task_id!r}")
    if cost != task.cost_estimate or currency != task.currency:
        problems.append(f"the action's cost {cost} {currency} is not the task's {task.cost_estimate} {task.currency}")
    return problems


def task_state(ledger: Ledger, task_id: str) -> str | None:
    """The stored state of a task (``executing``, ``executed``, ``failed``; None: never run)."""
    row = ledger.store.conn.execute("SELECT state FROM tasks WHERE task_id = ?", (task_id,)).fetchone()
    return None if row is None else str(row[0])


def execute(task: TaskSigned, decision: DecisionRecord | None, ledger: Ledger, *, action: ActionLike | None = None,
            run: Callable[[TaskSigned], dict[str, Any]] | None = None, receipts: Iterable[str] = (),
            clock: Clock = utc_now, tx_id: str | None = None, escalation: str | None = None,
            policy_store: Any = None) -> TaskExecuted:
    """Execute ``task`` once (see the module's docstring for what is refused and what is recorded);
    ``tx_id`` names its ledger entry (default ``tx-<n>``). ``decision`` is the guardian's APPROVE,
    or None with ``escalation`` the id of an approved escalation (``policy_store``, when given: the
    hard policies are judged again on the escalated action)."""
    if not isinstance(task, TaskSigned) or isinstance(task, TaskExecuted):
        raise ExecutionRefused(f"task {task.task_id!r} is {task.state}: only a signed task can be executed")
    if (decision is None) == (escalation is None):
        raise ExecutionRefused(f"task {task.task_id!r} is not executed: give the guardian's APPROVE or an approved "
                               "escalation, one of the two")
    store = ledger.store
    refs = [*receipts]
    if escalation is not None:
        return _execute_escalated(task, escalation, ledger, action, run, refs, clock, policy_store)
    assert decision is not None
    problems = verify_problems(task, SignerRegistry(store)) + _decision_problems(task, decision, action)
    if not problems:
        problems = _recorded_problems(task, decision, store, action)
    if problems:
        raise ExecutionRefused(f"task {task.task_id!r} is not executed: " + "; ".join(problems))
    evidence = [f"task:{task.task_id}", f"decision:{decision.action_digest}", *refs]
    try:
        with store.transaction() as conn:
            _claim_task(conn, store, task)
            entry = ledger._reserve_in(conn, task.agent_id, task.cost_estimate, task.currency, evidence=evidence,
                                       tx_id=tx_id)
            conn.execute("UPDATE tasks SET tx_id = ? WHERE task_id = ?", (entry.tx_id, task.task_id))
    except LedgerError as exc:
        raise ExecutionRefused(f"task {task.task_id!r} is not executed: {exc}") from None
    return _run(task, ledger, entry.tx_id, run, refs, clock)


def _claim_task(conn: sqlite3.Connection, store: GuardianStore, task: TaskSigned) -> None:
    """Inside the caller's transaction: the task id once, and the action once (the module's 6, 8)."""
    ran = conn.execute("SELECT task_id FROM tasks WHERE state IN ('executing', 'executed') "
                       "AND json_extract(body, '$.action_digest') = ? AND task_id != ?",
                       (task.action_digest, task.task_id)).fetchone()
    if ran is not None:  # the approval is used up: another signed task ran the same action
        raise ExecutionRefused(f"task {task.task_id!r} is not executed: its action {(task.action_digest or '')[:16]}… "
                               f"was executed already by task {ran[0]!r}; an approval runs its action once "
                               "(run cda guard again for a new decision on a new action)")
    try:
        conn.execute("INSERT INTO tasks (task_id, agent_id, state, body, tx_id, updated_at) "
                     "VALUES (?, ?, 'executing', ?, NULL, ?)",
                     (task.task_id, task.agent_id, task.to_json(), store.now()))
    except sqlite3.IntegrityError:
        state = conn.execute("SELECT state FROM tasks WHERE task_id = ?", (task.task_id,)).fetchone()
        raise ExecutionRefused(f"task {task.task_id!r} is {state[0] if state else 'taken'} already: "
                               f"a task id executes once") from None


_STATES = {"open": "open: no person has approved it (cda guard resolve)", "rejected": "rejected by a person",
           "void": "void (its approval lapsed or failed a check)"}


def _escalation_problems(task: TaskSigned, e: Any, ledger: Ledger, action: ActionLike | None,
                         policy_store: Any) -> tuple[list[str], bool]:
    """Why the approved escalation ``e`` does not let ``task`` run now, and whether the approval
    is to be voided for it (a resolution, policy or budget that no longer holds; not a task that
    is not bound to it, which must not spend someone else's approval)."""
    from cda.guardian.escalations import resolution_problems

    store = ledger.store
    if e.state != "approved":
        used = f"used already by {e.used_by or 'a call'}: an approval runs its action once"
        return [f"escalation {e.escalation_id} is {used if e.state == 'used' else _STATES.get(e.state, e.state)}"], False
    bound = []
    if task.action_digest != e.action_digest:
        bound.append(f"the task's action {(task.action_digest or '(none)')[:16]}… is not the escalated action "
                     f"{e.action_digest[:16]}… (an approval runs only the exact action a person saw: a changed field "
                     "or amount is another action)")
    if action is not None and action.digest() != e.action_digest:
        bound.append("the action given is not the escalated one (its digest differs)")
    if task.agent_id != e.agent_id or task.cost_estimate != e.cost or task.currency != e.currency:
        bound.append(f"the task's agent, cost and currency ({task.agent_id}, {task.cost_estimate} {task.currency}) "
                     f"are not the escalated action's ({e.agent_id}, {e.cost} {e.currency})")
    if e.action.get("task_id") not in (None, task.task_id):
        bound.append(f"the escalated action is for task {e.action.get('task_id')!r}, not {task.task_id!r}")
    if bound:
        return bound, False
    if policy_store is not None and policy_store.digest != e.policy_digest:  # the executor's mistake: kept for another
        return [f"the policy store given ({policy_store.digest[:16]}…) is not the one in force when it was approved "
                f"({e.policy_digest[:16]}…)"], False
    pinned, why = pinned_policy_digest(SignerRegistry(store))
    if pinned is None:
        return [why], False
    problems = resolution_problems(store, e, pinned)
    latest = store.latest_decision(e.action_digest)
    if latest is not None and DecisionRecord.model_validate_json(latest.body).decision is Decision.REJECT:
        problems.append("the guardian rejected this action after it was escalated: an approval does not outlive a "
                        "later REJECT")
    if policy_store is not None and not problems:
        from cda.guardian.policies import judge
        from cda.guardian.proposal import ProposedAction

        verdict = judge(policy_store, ProposedAction.model_validate(e.action))
        if verdict.violation is not None:
            problems.append(f"the action violates the hard policy {verdict.violation.policy} now: an approval does "
                            "not bypass a hard policy")
    balance = ledger.balance(e.agent_id, e.currency)
    others = balance.committed - e.cost  # the approval's reservation is part of committed
    if others > balance.budget:
        problems.append(f"without this approval, {e.agent_id} has committed {others} {e.currency} of a budget of "
                        f"{balance.budget}: the budget was spent or lowered meanwhile")
    elif balance.committed > balance.budget and e.reason != "budget_exceeded":
        problems.append(f"this approval's {e.cost} {e.currency} no longer fits {e.agent_id}'s budget of "
                        f"{balance.budget} (the person approved {e.reason}, not an overspend)")
    return problems, bool(problems)


def _execute_escalated(task: TaskSigned, escalation: str, ledger: Ledger, action: ActionLike | None,
                       run: Callable[[TaskSigned], dict[str, Any]] | None, refs: list[str], clock: Clock,
                       policy_store: Any) -> TaskExecuted:
    """The module's "approved escalation": its checks, then claimed and run as an APPROVE is."""
    from cda.guardian.escalations import get, void

    store = ledger.store
    refused = f"task {task.task_id!r} is not executed: "
    problems = verify_problems(task, SignerRegistry(store))
    e = get(store, escalation)
    if e is None:
        problems.append(f"{store.where} has no escalation {escalation!r} (cda guard escalations lists them)")
    if problems or e is None:
        raise ExecutionRefused(refused + "; ".join(problems))
    problems, lapsed = _escalation_problems(task, e, ledger, action, policy_store)
    if problems:
        if lapsed and not void(ledger, e, "; ".join(problems)):  # another executor used it while we checked:
            now = get(store, escalation)  # say that (its reservation settled by that run is not a lapse)
            problems, lapsed = _escalation_problems(task, now or e, ledger, action, policy_store)
        raise ExecutionRefused(refused + "; ".join(problems) + (" (the approval is void)" if lapsed else ""))
    with store.transaction() as conn:
        taken = conn.execute("UPDATE escalations SET state = 'used', used_by = ?, updated_at = ? "
                             "WHERE escalation_id = ? AND state = 'approved'",
                             (f"task:{task.task_id}", store.now(), e.escalation_id)).rowcount
        if taken != 1:  # another executor took it between the checks and now
            row = conn.execute("SELECT state, used_by FROM escalations WHERE escalation_id = ?",
                               (e.escalation_id,)).fetchone()
            raise ExecutionRefused(refused + f"escalation {e.escalation_id} is {row[0]} already"
                                   + (f" by {row[1]}" if row[1] else "") + ": an approval runs its action once")
        held = conn.execute("SELECT status FROM financial_ledger WHERE tx_id = ?", (e.tx_id or "",)).fetchone()
        if held is None or held[0] != "reserved":
            raise ExecutionRefused(refused + f"the approval's reservation {e.tx_id} is not held")
        _claim_task(conn, store, task)
        conn.execute("UPDATE tasks SET tx_id = ? WHERE task_id = ?", (e.tx_id, task.task_id))
    assert e.tx_id is not None
    return _run(task, ledger, e.tx_id, run, [*refs, f"escalation:{e.escalation_id}"], clock)


def _run(task: TaskSigned, ledger: Ledger, tx_id: str, run: Callable[[TaskSigned], dict[str, Any]] | None,
         refs: list[str], clock: Clock) -> TaskExecuted:
    """Run the claimed task's side effect and record it against its reservation ``tx_id``."""
    store = ledger.store
    try:
        result = run(task) if run is not None else {}
    except BaseException:
        ledger.release(tx_id, evidence=[f"failed:{task.task_id}"])
        _set_state(store, task.task_id, "failed")
        raise
    # the side effect has happened: the spend is settled whatever the result looks like
    ledger.settle(tx_id, task.cost_estimate, evidence=[f"executed:{task.task_id}"])
    try:
        executed = TaskExecuted(**task.carried(TaskSigned), state="executed", executed_at=clock(), result=result,
                                audit_ref=f"ledger://{tx_id}", receipts=refs)
    except ValidationError as exc:
        _set_state(store, task.task_id, "executed")
        first = exc.errors(include_url=False)[0]
        where = ".".join(str(part) for part in first["loc"]) or "the task"
        raise TaskError(f"task {task.task_id!r} ran and its cost was settled ({tx_id}), but its result cannot "
                        f"be recorded: {where}: {problem_message(first)}") from None
    _set_state(store, task.task_id, "executed", executed.to_json())
    return executed


def _set_state(store: GuardianStore, task_id: str, state: str, body: str | None = None) -> None:
    with store.transaction() as conn:
        conn.execute("UPDATE tasks SET state = ?, body = COALESCE(?, body), updated_at = ? WHERE task_id = ?",
                     (state, body, store.now(), task_id))
