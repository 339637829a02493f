"""The one registry of operations: each declared once, every door generated from it.

An :class:`Operation` is a name, a pydantic params model, a result model, the function, and what
it *needs* (:class:`Needs`: files named by path, user code, network egress, a store it writes, a
long solve). Each door reads the registry and keeps its own conventions:

========== ============================================== =====================================
door       name of an operation there                     parameters
========== ============================================== =====================================
cli        ``cda WORD [WORD]`` (``cli=("investigate",     flags ``--name-with-dashes``; the path
           "start")``; default: the name's parts)         parameter positional; exit codes
toolbus    the name (``investigate.start``)               ``params`` of a frame; JSON-RPC-style
                                                          ``error: {code, message, path}``
mcp        ``mcp=`` (default: dots as ``_``)              the tool's input schema; structured
                                                          output (the result model)
jobs       ``job=`` (a manifest's ``kind``)               ``file`` (the path parameter) and
                                                          ``params``
conductor  ``conductor=ConductorTool("cda.solve", …)``    the tool's inputs (its obligation
                                                          words), mapped to parameter names
========== ============================================== =====================================

Adding an operation is one declaration (:func:`operation`) in the module of its namespace
(:data:`MODULES`); ``tests/test_operations.py`` checks that the doors expose exactly what
the registry declares for them, with the same parameter names and limits.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import BaseModel

from cda.operations.principals import ROLES, Role

if TYPE_CHECKING:
    from cda.operations.gate import Call

__all__ = ["ConductorTool", "Door", "MODULES", "Needs", "Operation", "all_operations", "for_door", "get", "module_of", "operation"]


class Door(StrEnum):
    CLI = "cli"
    TOOLBUS = "toolbus"
    MCP = "mcp"
    JOBS = "jobs"
    CONDUCTOR = "conductor"


@dataclass(frozen=True)
class Needs:
    """What an operation may need; the gate decides from these and the principal.

    ``files``: it reads files its parameters name (a path parameter, ``ken "…"`` in DSL text, a
    Ken path in inputs); ``code``: it may run a user's code (``functions``); ``egress``: it may
    call a network endpoint (an LLM provider, a translator); ``store``: it writes a store (its
    door's, or one a path names); ``long``: a solve that may run long (doors run it off their
    event loop). The concrete call says which of them it uses (:mod:`cda.operations.demands`).
    """

    files: bool = False
    code: bool = False
    egress: bool = False
    store: bool = False
    long: bool = False

    def names(self) -> list[str]:
        return [n for n in ("files", "code", "egress", "store", "long") if getattr(self, n)]


@dataclass(frozen=True)
class ConductorTool:
    """An operation as a conductor tool: its name in ``tools.toml`` and, for each of the tool's
    inputs (the obligation's words), the parameter it fills."""

    name: str
    inputs: dict[str, str]


P = TypeVar("P", bound=BaseModel)
R = TypeVar("R", bound=BaseModel)


@dataclass(frozen=True)
class Operation:
    """One operation (see the module docstring)."""

    name: str
    summary: str
    params: type[BaseModel]
    result: type[BaseModel]
    run: Callable[[Call, Any], BaseModel]
    needs: Needs = Needs()
    doors: frozenset[Door] = frozenset()
    roles: frozenset[Role] = frozenset(ROLES)
    approves: bool = False  # the caller must be an approver (reflection approvals, granting what an action waits for)
    waits: bool = False  # egress above the cap makes the call wait for an approval, instead of a refusal
    cli: tuple[str, ...] = ()
    cli_positional: tuple[str, ...] = ()  # parameters the CLI takes as positional arguments, in order
    mcp: str = ""
    job: str = ""
    conductor: ConductorTool | None = None
    door_only: dict[Door, tuple[str, ...]] = field(default_factory=dict)  # parameters a door does not take
    renames: dict[Door, dict[str, str]] = field(default_factory=dict)  # a door's own name for a parameter
    # who proposed what this call would approve ((env, params) -> cda.operations.gate.Proposal or
    # None): the gate refuses its proposer, so nobody approves their own proposal
    proposer: Callable[[Any, Any], Any] | None = None

    def params_at(self, door: Door) -> list[str]:
        """The parameter names this operation takes at ``door``."""
        skip = set(self.door_only.get(door, ()))
        if door == Door.CONDUCTOR and self.conductor is not None:
            return [p for p in self.conductor.inputs.values()]
        return [n for n in self.params.model_fields if n not in skip]

    def name_at(self, door: Door, param: str) -> str:
        """What ``door`` calls ``param`` (its own convention where declared, else the name)."""
        if door == Door.CONDUCTOR and self.conductor is not None:
            return next((word for word, p in self.conductor.inputs.items() if p == param), param)
        return self.renames.get(door, {}).get(param, param)


_REGISTRY: dict[str, Operation] = {}

MODULES = tuple(f"cda.operations.{m}" for m in (
    "engine", "fol", "diagnosis", "actions", "investigate", "guard", "conduct", "reflect", "artifacts", "policy",
    "sessions", "report"))
"""The modules that declare operations. A namespaced operation (``investigate.revise``) lives in the
module of its namespace (``cda.operations.investigate``); the others are in :data:`DECLARED_IN`."""

DECLARED_IN: dict[str, str] = {
    "check": "engine", "solve": "engine", "explain_conflict": "engine", "prove": "fol",
    "diagnose": "diagnosis", "probe": "diagnosis",
    "session_put": "sessions", "session_remove": "sessions", "session_show": "sessions", "session_solve": "sessions",
}
"""Where each operation without a namespace is declared, so that a door needing one operation
imports only its module (``cda check`` loads neither the Action's models nor a solver).
``tests/test_operations.py`` checks every operation is found where :func:`module_of` says."""


def module_of(name: str) -> str | None:
    """The module that declares operation ``name`` (None: not known without loading them all)."""
    if name in DECLARED_IN:
        return f"cda.operations.{DECLARED_IN[name]}"
    namespace = f"cda.operations.{name.split('.', 1)[0]}"
    return namespace if "." in name and namespace in MODULES else None


_loaded = False


def operation(
    name: str,
    params: type[P],
    result: type[R],
    *,
    summary: str,
    doors: set[Door] | frozenset[Door],
    needs: Needs = Needs(),
    roles: set[Role] | frozenset[Role] = frozenset(ROLES),
    approves: bool = False,
    waits: bool = False,
    cli: tuple[str, ...] | None = None,
    cli_positional: tuple[str, ...] = (),
    mcp: str | None = None,
    job: str | None = None,
    conductor: ConductorTool | None = None,
    door_only: dict[Door, tuple[str, ...]] | None = None,
    renames: dict[Door, dict[str, str]] | None = None,
    proposer: Callable[[Any, Any], Any] | None = None,
) -> Callable[[Callable[[Call, P], R]], Callable[[Call, P], R]]:
    """Declare an operation: decorate its function ``(call, params) -> result``.

    >>> from pydantic import BaseModel
    >>> class Echo(BaseModel):
    ...     text: str
    >>> @operation("demo.echo", Echo, Echo, summary="say it back", doors={Door.TOOLBUS})
    ... def echo(call, p):
    ...     return p
    >>> get("demo.echo").params_at(Door.TOOLBUS)
    ['text']
    >>> _REGISTRY.pop("demo.echo").mcp
    'demo_echo'
    """

    def declare(fn: Callable[[Call, P], R]) -> Callable[[Call, P], R]:
        if name in _REGISTRY:
            raise ValueError(f"operation {name!r} is declared twice")
        _REGISTRY[name] = Operation(
            name=name, summary=summary, params=params, result=result, run=fn, needs=needs, doors=frozenset(doors),
            roles=frozenset(roles), approves=approves, waits=waits,
            cli=cli if cli is not None else tuple(name.split(".")), cli_positional=cli_positional,
            mcp=mcp if mcp is not None else name.replace(".", "_"), job=job if job is not None else name,
            conductor=conductor, door_only=dict(door_only or {}), renames=dict(renames or {}),
            proposer=proposer)
        return fn

    return declare


def _load() -> None:
    global _loaded
    if not _loaded:
        _loaded = True
        for module in MODULES:
            importlib.import_module(module)


def all_operations() -> dict[str, Operation]:
    """Every declared operation by name."""
    _load()
    return dict(_REGISTRY)


def get(name: str) -> Operation:
    """One operation (only its module is imported); ``KeyError`` for a name that is none."""
    if name not in _REGISTRY:
        module = module_of(name)
        if module is not None:
            importlib.import_module(module)
        if name not in _REGISTRY:
            _load()
    return _REGISTRY[name]


def for_door(door: Door) -> list[Operation]:
    """The operations ``door`` exposes, by name."""
    return [op for _, op in sorted(all_operations().items()) if door in op.doors]
