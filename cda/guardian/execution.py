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
8. an action that another task has executed (or started to): an APPROVE is used up by the run
   it allowed, so new task ids cannot run one approval again (a failed run does not use it up).

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

from cda.errors import CDAError
from cda.guardian.decision import DecisionRecord
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


def execute(task: TaskSigned, decision: DecisionRecord, ledger: Ledger, *, action: ActionLike | None = None,
            run: Callable[[TaskSigned], dict[str, Any]] | None = None, receipts: Iterable[str] = (),
            clock: Clock = utc_now, tx_id: str | None = None) -> TaskExecuted:
    """Execute ``task`` once (see the module's docstring for what is refused and what is recorded);
    ``tx_id`` names its ledger entry (default ``tx-<n>``)."""
    if not isinstance(task, TaskSigned) or isinstance(task, TaskExecuted):
        raise ExecutionRefused(f"task {task.task_id!r} is {task.state}: only a signed task can be executed")
    store = ledger.store
    problems = verify_problems(task, SignerRegistry(store)) + _decision_problems(task, decision, action)
    if not problems:
        problems = _recorded_problems(task, decision, store, action)
    if problems:
        raise ExecutionRefused(f"task {task.task_id!r} is not executed: " + "; ".join(problems))
    refs = [*receipts]
    evidence = [f"task:{task.task_id}", f"decision:{decision.action_digest}", *refs]
    try:
        with store.transaction() as conn:
            ran = conn.execute("SELECT task_id FROM tasks WHERE state IN ('executing', 'executed') "
                               "AND json_extract(body, '$.action_digest') = ? AND task_id != ?",
                               (task.action_digest, task.task_id)).fetchone()
            if ran is not None:  # the APPROVE is used up: another signed task ran the same action
                raise ExecutionRefused(f"task {task.task_id!r} is not executed: its action {(task.action_digest or '')[:16]}… "
                                       f"was executed already by task {ran[0]!r}; an APPROVE runs its action once "
                                       "(run cda guard again for a new decision on a new action)")
            try:
                conn.execute("INSERT INTO tasks (task_id, agent_id, state, body, tx_id, updated_at) "
                             "VALUES (?, ?, 'executing', ?, NULL, ?)",
                             (task.task_id, task.agent_id, task.to_json(), store.now()))
            except sqlite3.IntegrityError:
                state = conn.execute("SELECT state FROM tasks WHERE task_id = ?", (task.task_id,)).fetchone()
                raise ExecutionRefused(f"task {task.task_id!r} is {state[0] if state else 'taken'} already: "
                                       f"a task id executes once") from None
            entry = ledger._reserve_in(conn, task.agent_id, task.cost_estimate, task.currency, evidence=evidence,
                                       tx_id=tx_id)
            conn.execute("UPDATE tasks SET tx_id = ? WHERE task_id = ?", (entry.tx_id, task.task_id))
    except LedgerError as exc:
        raise ExecutionRefused(f"task {task.task_id!r} is not executed: {exc}") from None
    try:
        result = run(task) if run is not None else {}
    except BaseException:
        ledger.release(entry.tx_id, evidence=[f"failed:{task.task_id}"])
        _set_state(store, task.task_id, "failed")
        raise
    # the side effect has happened: the spend is settled whatever the result looks like
    ledger.settle(entry.tx_id, task.cost_estimate, evidence=[f"executed:{task.task_id}"])
    try:
        executed = TaskExecuted(**task.carried(TaskSigned), state="executed", executed_at=clock(), result=result,
                                audit_ref=f"ledger://{entry.tx_id}", receipts=refs)
    except ValidationError as exc:
        _set_state(store, task.task_id, "executed")
        first = exc.errors(include_url=False)[0]
        where = ".".join(str(part) for part in first["loc"]) or "the task"
        raise TaskError(f"task {task.task_id!r} ran and its cost was settled ({entry.tx_id}), but its result cannot "
                        f"be recorded: {where}: {first['msg']}") from None
    _set_state(store, task.task_id, "executed", executed.to_json())
    return executed


def _set_state(store: GuardianStore, task_id: str, state: str, body: str | None = None) -> None:
    with store.transaction() as conn:
        conn.execute("UPDATE tasks SET state = ?, body = COALESCE(?, body), updated_at = ? WHERE task_id = ?",
                     (state, body, store.now(), task_id))
