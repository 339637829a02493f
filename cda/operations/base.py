"""What the operation modules share: the strict params base model, one-of-two sources (text or a
file), reading a source relative to the call's folder, and Ken graphs loaded once per door."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict

from cda.errors import CDAError

if TYPE_CHECKING:
    from cda.ken.graph import KenGraph
    from cda.operations.gate import Call

__all__ = ["OperationError", "Params", "Result", "at", "ken_graph", "one_source"]


class OperationError(CDAError, ValueError):
    """A call an operation refuses on its own terms: ``code`` (``invalid_params``, ``forbidden``,
    ``not_found``, ``conflict``, ``internal``) and the ``path`` at fault, as a ToolBus error frame
    carries them (the CLI prints the message, MCP makes it a tool error)."""

    def __init__(self, code: str, message: str, path: list[str | int] | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.path = path or []


class Params(BaseModel):
    """Parameters of an operation: an unknown key is refused, every field checked.

    Each model builds its validator when first used (``defer_build``): a command declares every
    operation of its module and runs one (docs/architecture.md, "Start-up")."""

    model_config = ConfigDict(extra="forbid", defer_build=True)


class Result(BaseModel):
    """A result an operation declares itself (the engine's own models serve where they exist);
    built on first use, as :class:`Params`."""

    model_config = ConfigDict(extra="forbid", defer_build=True)


def one_source(text: str | None, path: str | None, text_name: str, path_name: str = "path") -> None:
    """Refuse both or neither of a text parameter and its file parameter (``ValueError``)."""
    if (text is None) == (path is None):
        raise ValueError(f"give either '{text_name}' (the text) or '{path_name}' (a file), not both and not neither")


def at(call: Call, path: str) -> Path:
    """``path`` as the operation opens it: relative to the call's folder (the CLI's working
    directory, a manifest's folder)."""
    p = Path(path).expanduser()
    return p if p.is_absolute() else call.base_dir / p


def ken_graph(call: Call, paths: list[str]) -> KenGraph | None:
    """The Ken graphs ``paths`` name, merged (``None`` for none); a door that answers many calls
    (the CLI over many files) keeps them in ``env.ken_cache`` so they are read once."""
    if not paths:
        return None
    cache: dict[Any, Any] | None = getattr(call.env, "ken_cache", None)
    key = tuple(str(at(call, p)) for p in paths)
    if cache is not None and key in cache:
        return cache[key]  # type: ignore[no-any-return]
    from cda.ken.graph import KenGraph
    from cda.ken.loaders import load_ken

    graph = KenGraph()
    for p in paths:
        graph = graph.merged(load_ken(at(call, p)))
    if cache is not None:
        cache[key] = graph
    return graph
