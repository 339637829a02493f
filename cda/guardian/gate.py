"""The one call path for side-effecting tools: a tool registry (the seed's MCP_TOOL_REGISTRY: name,
version, JSON Schema of its arguments) and :meth:`Gate.call`, which consults the guardian first
and runs the tool only on APPROVE.

A registered tool's implementation is held privately by the registry and reached only through
:meth:`Gate.call`: there is no other way to run it from here. Before the policies are asked, the
action's tool must be registered and its ``parameters`` (the tool's arguments) must match the
tool's registered schema; either failure is part of the seed's syntactic validation, so it is
REJECT ``malformed_action`` with the path (``$.tool``, ``$.parameters.limit``).

When a :class:`~cda.guardian.store.GuardianStore` is given, registrations are written to its
``mcp_tool_registry`` table (a tool id registered twice must say the same thing).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from cda.errors import CDAError
from cda.guardian.action import Malformed, ProposedAction, read_action
from cda.guardian.decision import DecisionRecord
from cda.guardian.evaluate import evaluate
from cda.guardian.policies import PolicyStore
from cda.guardian.simulation import BudgetLedger, Simulator

if TYPE_CHECKING:
    from cda.actions.receipts import ReceiptLog
    from cda.guardian.store import GuardianStore

__all__ = ["Gate", "GatedCall", "RegisteredTool", "ToolRegistry", "ToolRegistryError", "tool_id"]

ToolFunction = Callable[[Mapping[str, Any]], Any]


class ToolRegistryError(CDAError, ValueError):
    """A tool that cannot be registered: a bad name or version, a schema that is not a JSON
    Schema, or a second registration that says something else."""


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
        self._tools: dict[str, tuple[RegisteredTool, ToolFunction, Any]] = {}

    def register(self, name: str, version: str, schema: Mapping[str, Any], implementation: ToolFunction) -> RegisteredTool:
        """Register a side-effecting tool with the JSON Schema its arguments must match."""
        from jsonschema.exceptions import SchemaError
        from jsonschema.validators import validator_for

        from cda.guardian.action import ToolRef

        try:
            ToolRef(name=name, version=version)
        except ValidationError as exc:
            raise ToolRegistryError(f"tool {name!r} version {version!r}: not a tool name and version ({exc.errors()[0]['msg']})") from None
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
        self._tools[tool.tool_id] = (tool, implementation, cls(dict(schema)))
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
        validator = found[2]
        errors = sorted(validator.iter_errors(dict(action.parameters)), key=lambda e: [str(p) for p in e.absolute_path])
        if errors:
            first = errors[0]
            path = "$.parameters" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in first.absolute_path)
            return Malformed(path, f"the arguments do not match the schema of {found[0].tool_id}: {first.message}", digest)
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
        ledger: BudgetLedger | None,
        *,
        seed: int = 0,
        receipts: ReceiptLog | None = None,
    ) -> None:
        self.registry = registry
        self.policy_store = policy_store
        self.simulator = simulator
        self.ledger = ledger
        self.seed = seed
        self.receipts = receipts

    def call(self, action: ProposedAction | str | bytes | Mapping[str, Any]) -> GatedCall:
        """Validate the action (and its arguments against the tool's schema), ask the guardian,
        and run the tool once if and only if the decision is APPROVE."""
        checked = action if isinstance(action, ProposedAction) else read_action(action)
        if isinstance(checked, ProposedAction):
            checked = self.registry._problem(checked) or checked
        record = evaluate(checked, self.policy_store, self.simulator, self.ledger, seed=self.seed, receipts=self.receipts)
        if not record.approved or not isinstance(checked, ProposedAction):
            return GatedCall(record, called=False)
        return GatedCall(record, called=True, result=self.registry._run(checked))
