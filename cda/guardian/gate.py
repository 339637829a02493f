"""The one call path for side-effecting tools: a tool registry (docs/guardian.md, "The one call path": name,
version, JSON Schema of its arguments) and a :class:`Gate`, which consults the guardian first
and runs the tool only on APPROVE, paying for it in the CFO ledger.

A tool runs by one of two doors of the same gate, and both check the tool's schema and move money
through the ledger the same way:

* :meth:`Gate.call`: an agent's action, decided now. On APPROVE the action's ``cost_estimate`` is
  **reserved** in the ledger before the tool runs (tx ``call:<action_id>``, so an action id runs
  once), settled when it returns, released when it raises. A reservation the ledger refuses (the
  budget was spent since the check) is ESCALATE ``budget_exceeded``, and nothing runs: repeated
  calls can never overspend. Without a ledger an action that costs anything does not run.
* :meth:`Gate.execute`: a human-signed task (:mod:`cda.guardian.execution`: the signature, the
  recorded and pinned APPROVE, the task id once, the reservation), whose side effect is this
  registry's tool called with the action's arguments.

A registered tool's implementation is held privately by the registry and reached only through
:meth:`Gate.call`: there is no other way to run it from here. Before the policies are asked, the
action's tool must be registered and its ``parameters`` (the tool's arguments) must match the
tool's registered schema; either failure is part of the gate's syntactic validation, so it is
REJECT ``malformed_action`` with the path (``$.tool``, ``$.parameters.limit``).

When a :class:`~cda.guardian.guardian_db.GuardianStore` is given, registrations are written to its
``mcp_tool_registry`` table (a tool id registered twice must say the same thing).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from cda.contracts.locations import problem_message
from cda.contracts.receipt import sha256_hex
from cda.errors import CDAError
from cda.guardian.decide import budget_refusal, evaluate
from cda.guardian.decision import DecisionRecord
from cda.guardian.execution import ExecutionRefused, execute
from cda.guardian.ledger import InsufficientBudget, Ledger, LedgerError
from cda.guardian.policies import PolicyStore
from cda.guardian.proposal import Malformed, ProposedAction, read_action
from cda.guardian.simulation import Simulator

if TYPE_CHECKING:
    from cda.contracts.receipt import ReceiptSink
    from cda.guardian.guardian_db import GuardianStore
    from cda.guardian.tasks import TaskExecuted, TaskSigned

__all__ = ["Gate", "GatedCall", "RegisteredTool", "ToolCallRefused", "ToolRegistry", "ToolRegistryError", "tool_id"]

ToolFunction = Callable[[Mapping[str, Any]], Any]


class ToolRegistryError(CDAError, ValueError):
    """A tool that cannot be registered: a bad name or version, a schema that is not a JSON
    Schema, or a second registration that says something else."""


class ToolCallRefused(ExecutionRefused):
    """A call the gate will not make although the guardian approved the action: its action id
    ran (or started to) before."""


def tool_id(name: str, version: str) -> str:
    """The registry's id of a tool version: ``name@version``."""
    return f"{name}@{version}"


@dataclass(frozen=True)
class RegisteredTool:
    """A tool as registered: its id, name, version and the JSON Schema of its arguments."""

    tool_id: str
    name: str
    version: str
    schema: Mapping[str, Any]


class ToolRegistry:
    """Registered tools by ``name@version``; their implementations are only reachable by a
    :class:`Gate`."""

    def __init__(self, store: GuardianStore | None = None) -> None:
        self._store = store
        #: tool id -> (the tool, its implementation, its schema's validator, the schema's regexes that
        #: may take exponential time to match: see cda/guardian/schema_check.py)
        self._tools: dict[str, tuple[RegisteredTool, ToolFunction, Any, list[str]]] = {}
        self.stored: set[str] = set()  # tool ids written to a guardian file's mcp_tool_registry

    def register(self, name: str, version: str, schema: Mapping[str, Any], implementation: ToolFunction) -> RegisteredTool:
        """Register a side-effecting tool with the JSON Schema its arguments must match (checked by
        ``jsonschema``: needs the ``guardian`` extra, ``pip install 'cda[guardian]'``)."""
        from cda.lazy import require_extra

        require_extra("guardian", "ToolRegistry.register (a tool's JSON Schema)", "jsonschema")
        from jsonschema.exceptions import SchemaError
        from jsonschema.validators import validator_for

        from cda.guardian.proposal import ToolRef

        try:
            ToolRef(name=name, version=version)
        except ValidationError as exc:
            raise ToolRegistryError(f"tool {name!r} version {version!r}: not a tool name and version ({problem_message(exc.errors()[0])})") from None
        if not isinstance(schema, Mapping):
            raise ToolRegistryError(f"tool {name}@{version}: the schema is a JSON object")
        try:
            cls = validator_for(dict(schema))
            cls.check_schema(dict(schema))
        except SchemaError as exc:
            raise ToolRegistryError(f"tool {name}@{version}: not a JSON Schema: {exc.message}") from None
        tool = RegisteredTool(tool_id(name, version), name, version, dict(schema))
        known = self._tools.get(tool.tool_id)
        if known is not None and known[0] != tool:
            raise ToolRegistryError(f"tool {tool.tool_id} is registered already with another schema")
        if self._store is not None:
            try:
                self._store.register_tool(tool.tool_id, name, version, dict(schema))
            except CDAError as exc:
                raise ToolRegistryError(str(exc)) from None
            self.stored.add(tool.tool_id)
        from cda.guardian.schema_check import backtracking_patterns

        self._tools[tool.tool_id] = (tool, implementation, cls(dict(schema)), backtracking_patterns(dict(schema)))
        return tool

    def get(self, name: str, version: str) -> RegisteredTool | None:
        """The registered tool, or None."""
        found = self._tools.get(tool_id(name, version))
        return None if found is None else found[0]

    def __contains__(self, ident: object) -> bool:
        return ident in self._tools

    def _problem(self, action: ProposedAction) -> Malformed | None:
        """Why the action cannot call its tool (unregistered, arguments off its schema), or None."""
        found = self._tools.get(tool_id(action.tool.name, action.tool.version))
        digest = action.digest()
        if found is None:
            return Malformed("$.tool", f"no tool {tool_id(action.tool.name, action.tool.version)} is registered", digest)
        tool, _, validator, backtracking = found
        first: tuple[list[str | int], str] | None = None
        if backtracking:  # a regex that may take exponential time: checked in a child with a deadline
            from cda.guardian.schema_check import CHILD_SECONDS, errors_in_child

            errors = errors_in_child(tool.schema, dict(action.parameters))
            if errors is None:
                return Malformed("$.tool", f"the arguments of {tool.tool_id} could not be checked against its schema "
                                 f"in {CHILD_SECONDS:g} s (its pattern {backtracking[0]!r} can take exponential time "
                                 "to match), so the call is not made", digest)
            first = errors[0] if errors else None
        else:
            try:
                found_errors = sorted(validator.iter_errors(dict(action.parameters)),
                                      key=lambda e: [str(p) for p in e.absolute_path])
            except RecursionError:  # a schema that refers to itself without end ({"$ref": "#"}): a server's lie
                return Malformed("$.tool", f"the schema of {tool.tool_id} cannot be checked: it refers to itself "
                                 "without end (a $ref that loops), so no call of it is checked or made", digest)
            if found_errors:
                first = (list(found_errors[0].absolute_path), found_errors[0].message)
        if first is not None:
            at, message = first
            path = "$.parameters" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in at)
            return Malformed(path, f"the arguments do not match the schema of {tool.tool_id}: {message}", digest)
        return None

    def _run(self, action: ProposedAction) -> Any:
        return self._tools[tool_id(action.tool.name, action.tool.version)][1](dict(action.parameters))


@dataclass(frozen=True)
class GatedCall:
    """What :meth:`Gate.call` did: the decision, whether the tool ran, and what it returned."""

    record: DecisionRecord
    called: bool
    result: Any = None


class Gate:
    """The guardian in front of the registry's tools: :meth:`call` evaluates the action and runs
    its tool only when the decision is APPROVE."""

    def __init__(
        self,
        registry: ToolRegistry,
        policy_store: PolicyStore,
        simulator: Simulator | None,
        ledger: Ledger | None,
        *,
        seed: int = 0,
        receipts: ReceiptSink | None = None,
    ) -> None:
        self.registry = registry
        self.policy_store = policy_store
        self.simulator = simulator
        self.ledger = ledger
        self.seed = seed
        self.receipts = receipts

    def call(self, action: ProposedAction | Malformed | str | bytes | Mapping[str, Any]) -> GatedCall:
        """Validate the action (and its arguments against the tool's schema), ask the guardian,
        and on APPROVE reserve its cost and run the tool once (see the module's docstring);
        :class:`ToolCallRefused` when the action id has run before."""
        # a Malformed already read (the MCP gateway's unfillable resource) is decided as it is, reason kept
        checked = action if isinstance(action, ProposedAction | Malformed) else read_action(action)
        if isinstance(checked, ProposedAction):
            checked = self.registry._problem(checked) or checked
        record = evaluate(checked, self.policy_store, self.simulator, self.ledger, seed=self.seed, receipts=self.receipts)
        if not record.approved or not isinstance(checked, ProposedAction):
            return GatedCall(record, called=False)
        if self.ledger is None:
            if checked.cost_estimate > 0:
                refused = budget_refusal(checked, self.policy_store, "the gate has no CFO ledger to reserve the cost in",
                                         seed=self.seed, receipts=self.receipts)  # fmt: skip
                return GatedCall(refused, called=False)
            return GatedCall(record, called=True, result=self.registry._run(checked))
        tx = _call_tx(checked.action_id)
        try:
            ident = tool_id(checked.tool.name, checked.tool.version)
            entry = self.ledger.reserve(checked.agent_id, checked.cost_estimate, checked.currency, tx_id=tx,
                                        evidence=[f"decision:{record.receipt}", f"action:{checked.action_id}"],
                                        tool_id=ident if ident in self.registry.stored else None)  # fmt: skip
        except InsufficientBudget as exc:
            refused = budget_refusal(checked, self.policy_store, str(exc), seed=self.seed, receipts=self.receipts)
            return GatedCall(refused, called=False)
        except LedgerError:
            if self.ledger.entry(tx) is not None:
                raise ToolCallRefused(f"action {checked.action_id!r} was called already ({tx}): an action id runs once") from None
            raise
        try:
            result = self.registry._run(checked)
        except BaseException:
            self.ledger.release(entry.tx_id, evidence=[f"failed:{checked.action_id}"])
            raise
        self.ledger.settle(entry.tx_id, checked.cost_estimate, evidence=[f"called:{checked.action_id}"])
        return GatedCall(record, called=True, result=result)

    def execute(self, task: TaskSigned, decision: DecisionRecord, action: ProposedAction | str | bytes | Mapping[str, Any],
                *, receipts: list[str] | None = None) -> TaskExecuted:  # fmt: skip
        """Execute a human-signed task whose side effect is the action's tool: the action must be
        well formed and its arguments match the tool's schema, then
        :func:`cda.guardian.execution.execute` checks the signature, the recorded and pinned
        APPROVE, the task id once and the reservation before the tool runs; a result that is
        not a JSON object is recorded as ``{"result": value}``."""
        # a Malformed already read (the MCP gateway's unfillable resource) is decided as it is, reason kept
        checked = action if isinstance(action, ProposedAction | Malformed) else read_action(action)
        problem = checked if isinstance(checked, Malformed) else self.registry._problem(checked)
        if problem is not None or not isinstance(checked, ProposedAction):
            assert problem is not None
            raise ExecutionRefused(f"task {task.task_id!r} is not executed: its action is malformed at {problem.path}: "
                                   f"{problem.message}")
        if self.ledger is None:
            raise ExecutionRefused(f"task {task.task_id!r} is not executed: the gate has no CFO ledger")
        tool_action = checked

        def run(_task: TaskSigned) -> dict[str, Any]:
            result = self.registry._run(tool_action)
            return result if isinstance(result, dict) else {"result": result}

        return execute(task, decision, self.ledger, action=checked, run=run, receipts=receipts or [])


def _call_tx(action_id: str) -> str:
    """The ledger entry of a gated call: ``call:<action_id>`` (hashed when that would be too long)."""
    tx = f"call:{action_id}"
    return tx if len(tx) <= 128 else f"call:sha256:{sha256_hex(action_id)}"
