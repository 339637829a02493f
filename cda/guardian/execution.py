"""Executing a signed task: once, only with a verified signature and the guardian's APPROVE.

:func:`execute` is the last step of the lifecycle (``signed -> executed``). It refuses, with an
:class:`ExecutionRefused` that says why, and before anything runs:

1. a task whose HITL signature does not verify against the signer registry
   (:func:`cda.guardian.signers.verify_problems`);
2. a decision that is not APPROVE, or that is not about this task: the decision's
   ``action_digest`` must be the task's signed ``action_digest`` (and, when the proposed action
   itself is given, that action must digest to it and agree with the task on agent, task id,
   cost and currency);
3. with ``recorded_only`` (the default), a decision the guardian's store did not record
   (:meth:`GuardianStore.record_decision <cda.guardian.store.GuardianStore.record_decision>`), so a
   decision document written by hand proves nothing;
4. a task id that has executed (or started to) before: the ``tasks`` table's primary key makes
   this hold across processes, and the claim, the ledger reservation of ``cost_estimate`` and the
   task's record commit in one transaction, so two racing executions cannot both pass.

Then ``run(task)`` (the side effect; none by default) gives the result, the reservation is
settled at ``cost_estimate`` with the receipts as evidence, and the :class:`TaskExecuted` returned
(also stored) names its ledger entry as ``audit_ref = "ledger://<tx_id>"``. When ``run`` raises, the
reservation is released and the task stays ``failed``: it is not run again under the same id.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterable
from typing import Any, Protocol

from cda.errors import CDAError
from cda.guardian.decision import DecisionRecord
from cda.guardian.ledger import Ledger, LedgerError
from cda.guardian.signers import SignerRegistry, verify_problems
from cda.guardian.store import Clock, utc_now
from cda.guardian.tasks import TaskExecuted, TaskSigned

__all__ = ["ActionLike", "ExecutionRefused", "execute", "task_state"]


class ExecutionRefused(CDAError, PermissionError):
    """A signed task that may not run: bad signature, no APPROVE for it, or already executed."""


class ActionLike(Protocol):
    """What :func:`execute` reads of a proposed action (:class:`cda.guardian.action.ProposedAction`)."""

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
    if action is None:
        return []
    problems = []
    if action.digest() != task.action_digest:
        problems.append("the action given is not the one the task names (its digest differs)")
    if action.agent_id != task.agent_id:
        problems.append(f"the action's agent {action.agent_id!r} is not the task's {task.agent_id!r}")
    if action.task_id not in (None, task.task_id):
        problems.append(f"the action is for task {action.task_id!r}, not {task.task_id!r}")
    if action.cost_estimate != task.cost_estimate or action.currency != task.currency:
        problems.append(f"the action's cost {action.cost_estimate} {action.currency} is not the task's "
                        f"{task.cost_estimate} {task.currency}")
    return problems


def task_state(ledger: Ledger, task_id: str) -> str | None:
    """The stored state of a task (``executing``, ``executed``, ``failed``; None: never run)."""
    row = ledger.store.conn.execute("SELECT state FROM tasks WHERE task_id = ?", (task_id,)).fetchone()
    return None if row is None else str(row[0])


def execute(task: TaskSigned, decision: DecisionRecord, ledger: Ledger, *, action: ActionLike | None = None,
            run: Callable[[TaskSigned], dict[str, Any]] | None = None, receipts: Iterable[str] = (),
            recorded_only: bool = True, clock: Clock = utc_now) -> TaskExecuted:
    """Execute ``task`` once (see the module's docstring for what is refused and what is recorded)."""
    from cda.contracts.receipt import canonical_json

    if not isinstance(task, TaskSigned) or isinstance(task, TaskExecuted):
        raise ExecutionRefused(f"task {task.task_id!r} is {task.state}: only a signed task can be executed")
    store = ledger.store
    problems = verify_problems(task, SignerRegistry(store)) + _decision_problems(task, decision, action)
    if not problems and recorded_only:
        body = canonical_json(decision.model_dump(mode="json"))
        if store.conn.execute("SELECT 1 FROM decisions WHERE body = ? AND action_digest = ?",
                              (body, decision.action_digest)).fetchone() is None:
            problems.append("the decision is not one the guardian recorded in this store")
    if problems:
        raise ExecutionRefused(f"task {task.task_id!r} is not executed: " + "; ".join(problems))
    refs = [*receipts]
    evidence = [f"task:{task.task_id}", f"decision:{decision.action_digest}", *refs]
    try:
        with store.transaction() as conn:
            try:
                conn.execute("INSERT INTO tasks (task_id, agent_id, state, body, tx_id, updated_at) "
                             "VALUES (?, ?, 'executing', ?, NULL, ?)",
                             (task.task_id, task.agent_id, task.to_json(), store.now()))
            except sqlite3.IntegrityError:
                state = conn.execute("SELECT state FROM tasks WHERE task_id = ?", (task.task_id,)).fetchone()
                raise ExecutionRefused(f"task {task.task_id!r} is {state[0] if state else 'taken'} already: "
                                       f"a task id executes once") from None
            entry = ledger.reserve_in(conn, task.agent_id, task.cost_estimate, task.currency, evidence=evidence)
            conn.execute("UPDATE tasks SET tx_id = ? WHERE task_id = ?", (entry.tx_id, task.task_id))
    except LedgerError as exc:
        raise ExecutionRefused(f"task {task.task_id!r} is not executed: {exc}") from None
    try:
        result = run(task) if run is not None else {}
        executed = TaskExecuted(**task.carried(TaskSigned),
                                state="executed", executed_at=clock(), result=result, audit_ref=f"ledger://{entry.tx_id}",
                                receipts=refs)
    except BaseException:
        ledger.release(entry.tx_id, evidence=[f"failed:{task.task_id}"])
        with store.transaction() as conn:
            conn.execute("UPDATE tasks SET state = 'failed', updated_at = ? WHERE task_id = ?",
                         (store.now(), task.task_id))
        raise
    ledger.settle(entry.tx_id, task.cost_estimate, evidence=[f"executed:{task.task_id}"])
    with store.transaction() as conn:
        conn.execute("UPDATE tasks SET state = 'executed', body = ?, updated_at = ? WHERE task_id = ?",
                     (executed.to_json(), store.now(), task.task_id))
    return executed
