"""The tool registry: ``tools.toml`` read into :class:`~cda.contracts.conductor.ToolSpec` s and
checked against a :class:`~cda.conductor.tooling.Toolbox` before any request runs.

Every mistake is found here, at load time, and named by file and tool: a TOML syntax error
(with tomllib's line and column), a field that does not match the contract, an implementation
or condition name the toolbox does not have, a condition whose argument is not one of the
tool's inputs, two tools with one name. A registry that loads can only fail at run time by what
its tools answer.
"""

from __future__ import annotations

import tomllib
from contextlib import ExitStack
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from cda.conductor.tooling import ConditionCall, ConductorError, Tool, Toolbox, parse_condition
from cda.contracts.conductor import SideEffects, ToolSpec
from cda.contracts.locations import validation_problems
from cda.files import parse_toml, read_text

__all__ = ["DEFAULT_REGISTRY", "Registry", "RegisteredTool", "load_registry", "registry_from_data"]

DEFAULT_REGISTRY = "tools.toml"
"""The registry shipped beside this module (``cda conduct`` without ``--registry``)."""

_INPUT_ARGUMENT = {"file", "suffix", "arithmetic", "select_only"}
"""Conditions whose first argument names one of the tool's inputs."""


@dataclass(frozen=True)
class RegisteredTool:
    """A spec with its conditions parsed and its implementation found."""

    spec: ToolSpec
    preconditions: tuple[ConditionCall, ...]
    postconditions: tuple[ConditionCall, ...]
    impl: Tool


@dataclass(frozen=True)
class Registry:
    """The tools, sorted once by the seed's fixed order (reliability > cost > latency > name).

    A registry holding MCP servers keeps their sessions open until :meth:`close`."""

    tools: tuple[RegisteredTool, ...]
    toolbox: Toolbox
    resources: ExitStack = field(default_factory=ExitStack, compare=False)

    def candidates(self, obligation_type: str) -> list[RegisteredTool]:
        """Tools whose ``satisfies`` includes the obligation's type, best first."""
        return [t for t in self.tools if obligation_type in t.spec.satisfies]

    def named(self, name: str) -> RegisteredTool | None:
        return next((t for t in self.tools if t.spec.name == name), None)

    def obligation_types(self) -> dict[str, list[str]]:
        """Each obligation type some tool satisfies, with the inputs its tools take (in order,
        the best tool's first): what a translator may ask for."""
        types: dict[str, list[str]] = {}
        for t in self.tools:
            for kind in t.spec.satisfies:
                names = types.setdefault(kind, [])
                names.extend(n for n in t.spec.inputs if n not in names)
        return dict(sorted(types.items()))

    def close(self) -> None:
        self.resources.close()

    def __enter__(self) -> Registry:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _conditions(texts: list[str], known: dict[str, Any], spec: ToolSpec, where: str) -> tuple[ConditionCall, ...]:
    calls = []
    for text in texts:
        call = parse_condition(text)
        if call.name not in known:
            raise ConductorError(f"{where}: unknown condition {call.name!r} (known: {', '.join(sorted(known))})")
        if call.name in _INPUT_ARGUMENT:
            if not call.args or call.args[0] not in spec.inputs:
                raise ConductorError(f"{where}: condition {text!r} must name one of the tool's inputs first")
        calls.append(call)
    return tuple(calls)


def _implementations(spec: ToolSpec, toolbox: Toolbox, base_dir: Path, stack: ExitStack,
                     at: str) -> list[tuple[ToolSpec, Tool]]:
    """The tool(s) one registry entry stands for: a known implementation, a user's function or
    program, or every tool of an MCP server (:mod:`cda.conductor.usertools`)."""
    from cda.conductor import usertools

    if spec.mcp is not None:
        return usertools.mcp_tools(spec, base_dir, stack, at)
    if spec.command is not None:
        return [(spec, usertools.command_tool(spec, base_dir, at))]
    if spec.impl is not None and ":" in spec.impl:
        return [(spec, usertools.python_tool(spec.impl, base_dir, at, spec.timeout_s))]
    if spec.implementation not in toolbox.tools:
        raise ConductorError(
            f"{at}: no implementation {spec.implementation!r} (known: {', '.join(sorted(toolbox.tools))}; "
            "or write impl = \"package.module:function\", command = [...] or mcp = {...})"
        )
    return [(spec, toolbox.tools[spec.implementation])]


def registry_from_data(data: dict[str, Any], toolbox: Toolbox, where: str = "<registry>",
                       base_dir: Path | None = None) -> Registry:
    """A registry from parsed TOML (``{"tool": [{…}, …]}``); a user's module, program or MCP
    server is found relative to ``base_dir`` (the registry's folder)."""
    if set(data) - {"tool"}:
        raise ConductorError(f"{where}: unknown table(s) {', '.join(sorted(set(data) - {'tool'}))}; write [[tool]]")
    raw = data.get("tool")
    if not isinstance(raw, list) or not raw:
        raise ConductorError(f"{where}: no tools (write one [[tool]] table per tool)")
    if len(raw) > 10_000:
        raise ConductorError(f"{where}: {len(raw)} tools (at most 10000)")
    folder = base_dir or Path.cwd()
    stack = ExitStack()
    try:
        tools: list[RegisteredTool] = []
        seen: set[str] = set()
        for i, entry in enumerate(raw):
            at = f"{where}: tool {i + 1}" + (f" ({entry.get('name')!r})" if isinstance(entry, dict) else "")
            try:
                given = ToolSpec.model_validate(entry)
            except ValidationError as exc:
                raise ConductorError(f"{at}: {validation_problems(exc)}") from None
            for spec, impl in _implementations(given, toolbox, folder, stack, at):
                here = at if spec is given else f"{at}: {spec.name}"
                if spec.name in seen:
                    raise ConductorError(f"{here}: a second tool named {spec.name!r}")
                seen.add(spec.name)
                pre = _conditions(spec.preconditions, toolbox.preconditions, spec, here)
                post = _conditions(spec.postconditions, toolbox.postconditions, spec, here)
                tools.append(RegisteredTool(spec, pre, post, impl))
        by_name = {t.spec.name: t for t in tools}
        for t in tools:
            if t.spec.verify is None:
                continue
            checker = by_name.get(t.spec.verify)
            if checker is None:
                raise ConductorError(f"{where}: {t.spec.name}: verify names no tool of the registry "
                                     f"({t.spec.verify!r})")
            if checker.spec.side_effects is not SideEffects.NONE:
                raise ConductorError(f"{where}: {t.spec.name}: its verify tool {checker.spec.name!r} has side effects "
                                     f"({checker.spec.side_effects.value}); a check must only read")
        tools.sort(key=lambda t: t.spec.order_key())
        return Registry(tuple(tools), toolbox, stack)
    except BaseException:
        stack.close()
        raise


def load_registry(path: Path | None, toolbox: Toolbox) -> Registry:
    """``path`` read and checked against ``toolbox``; with None, the shipped registry's tools
    that ``toolbox`` implements."""
    if path is None:  # the shipped tools this toolbox implements (cda.prove/diagnose/run_action: adapters)
        text = resources.files("cda.conductor").joinpath(DEFAULT_REGISTRY).read_text(encoding="utf-8")
        data = tomllib.loads(text)
        data["tool"] = [t for t in data["tool"] if t.get("impl", t["name"]) in toolbox.tools]
        return registry_from_data(data, toolbox, f"(shipped) {DEFAULT_REGISTRY}")
    else:
        text, where = read_text(path), str(path)
    try:
        data = parse_toml(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConductorError(f"{where}: not TOML: {exc}") from None
    return registry_from_data(data, toolbox, where, Path(path).resolve().parent)
