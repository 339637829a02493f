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
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from cda.conductor.tooling import ConditionCall, ConductorError, Toolbox, parse_condition
from cda.contracts.conductor import ToolSpec
from cda.contracts.locations import validation_problems
from cda.files import read_text

__all__ = ["DEFAULT_REGISTRY", "Registry", "RegisteredTool", "load_registry", "registry_from_data"]

DEFAULT_REGISTRY = "tools.toml"
"""The registry shipped beside this module (``cda conduct`` without ``--registry``)."""

_INPUT_ARGUMENT = {"file", "suffix", "arithmetic", "select_only"}
"""Conditions whose first argument names one of the tool's inputs."""


@dataclass(frozen=True)
class RegisteredTool:
    """A spec with its conditions parsed."""

    spec: ToolSpec
    preconditions: tuple[ConditionCall, ...]
    postconditions: tuple[ConditionCall, ...]


@dataclass(frozen=True)
class Registry:
    """The tools, sorted once by the seed's fixed order (reliability > cost > latency > name)."""

    tools: tuple[RegisteredTool, ...]
    toolbox: Toolbox

    def candidates(self, obligation_type: str) -> list[RegisteredTool]:
        """Tools whose ``satisfies`` includes the obligation's type, best first."""
        return [t for t in self.tools if obligation_type in t.spec.satisfies]


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


def registry_from_data(data: dict[str, Any], toolbox: Toolbox, where: str = "<registry>") -> Registry:
    """A registry from parsed TOML (``{"tool": [{…}, …]}``)."""
    if set(data) - {"tool"}:
        raise ConductorError(f"{where}: unknown table(s) {', '.join(sorted(set(data) - {'tool'}))}; write [[tool]]")
    raw = data.get("tool")
    if not isinstance(raw, list) or not raw:
        raise ConductorError(f"{where}: no tools (write one [[tool]] table per tool)")
    if len(raw) > 10_000:
        raise ConductorError(f"{where}: {len(raw)} tools (at most 10000)")
    tools: list[RegisteredTool] = []
    seen: set[str] = set()
    for i, entry in enumerate(raw):
        at = f"{where}: tool {i + 1}" + (f" ({entry.get('name')!r})" if isinstance(entry, dict) else "")
        try:
            spec = ToolSpec.model_validate(entry)
        except ValidationError as exc:
            raise ConductorError(f"{at}: {validation_problems(exc)}") from None
        if spec.name in seen:
            raise ConductorError(f"{at}: a second tool named {spec.name!r}")
        seen.add(spec.name)
        if spec.implementation not in toolbox.tools:
            raise ConductorError(
                f"{at}: no implementation {spec.implementation!r} (known: {', '.join(sorted(toolbox.tools))})"
            )
        pre = _conditions(spec.preconditions, toolbox.preconditions, spec, at)
        post = _conditions(spec.postconditions, toolbox.postconditions, spec, at)
        tools.append(RegisteredTool(spec, pre, post))
    tools.sort(key=lambda t: t.spec.order_key())
    return Registry(tuple(tools), toolbox)


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
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConductorError(f"{where}: not TOML: {exc}") from None
    return registry_from_data(data, toolbox, where)
