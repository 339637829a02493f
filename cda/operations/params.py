"""The parameter types operations declare, with what each door needs to know about them.

A parameter's *limits* live once, in its type: the checker of :mod:`cda.contracts.limits` runs as
the model's validator (so a ToolBus frame, an MCP call and a manifest entry are refused alike),
the CLI runs the same checker as its argparse type under its own flag name, and the JSON Schema
carries the bounds for clients. Markers say what the gate must look at before a call runs:

* :class:`PathParam` — the value names a file the operation reads (or a store it writes): only a
  principal that reads files may give one, and only under its roots;
* :class:`DslText` — DSL text: a ``ken "…"`` line in it names a file too (the gate finds them
  without loading anything; the loader checks again when it reads).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field, ValidationInfo

from cda.contracts import limits

__all__ = [
    "Backend",
    "Checked",
    "DslText",
    "FilePath",
    "MAX_TEXT",
    "PathParam",
    "Seed",
    "Timeout",
    "Top",
    "checked",
    "checker_of",
    "dsl_text",
    "marker",
]

MAX_TEXT = 1_000_000  # characters of DSL (or .fol, .bench) text in one call


@dataclass(frozen=True)
class Checked:
    """The one checker of a numeric parameter, ``(name, value) -> value`` raising
    :class:`~cda.errors.OptionError`; ``whole``: the CLI reads the text as an integer;
    ``exact``: as a ``Decimal`` (the checker compares the number as written, not its float)."""

    check: Callable[[str, Any], Any]
    whole: bool
    exact: bool = False


@dataclass(frozen=True)
class PathParam:
    """The value names a file the operation reads; ``store``: a store it writes."""

    store: bool = False


@dataclass(frozen=True)
class DslText:
    """The value is DSL text (a whole problem, or one statement an operation splices into one)."""


def checked(check: Callable[[str, Any], Any], *, whole: bool) -> tuple[Any, ...]:
    """The metadata of a checked parameter: the validator (``None`` passes: no value given) and
    the marker the CLI reads; the bounds the JSON Schema shows are on the type it wraps."""

    def validate(value: Any, info: ValidationInfo) -> Any:
        return value if value is None else check(info.field_name or "value", value)

    return BeforeValidator(validate), Checked(check, whole)


def _seconds(name: str, value: Any) -> float:
    """A solver budget in seconds (``inf``: no limit)."""
    return limits.seconds(name, value)


Backend = Literal["auto", "z3", "clingo"]
Seed = Annotated[Annotated[int, Field(ge=0, le=limits.MAX_SEED)], *checked(limits.seed, whole=True),
                 Field(description="solver seed: same input and seed, same bytes")]
Top = Annotated[Annotated[int, Field(ge=1, le=limits.MAX_COUNT)] | None, *checked(limits.count, whole=True),
                Field(description="how many hypotheses to list")]
Timeout = Annotated[Annotated[float, Field(ge=0)] | None, *checked(_seconds, whole=False),
                    Field(description="wall-clock budget in seconds (none or inf: no limit)")]


def _named_in_text(value: Any) -> Any:
    """A file name is text: one that is not UTF-8 (an argument decoded with ``surrogateescape``,
    a JSON string with a lone surrogate) is refused naming it, its bytes shown escaped, before
    pydantic's "Input should be a valid string, unable to parse raw data as a unicode string"."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as exc:
            from cda.terminal_text import name_text

            code = ord(value[exc.start])
            what = f"the byte {code - 0xDC00:#04x}" if 0xDC80 <= code <= 0xDCFF else f"the lone surrogate {code:#06x}"
            raise ValueError(f"the file name '{name_text(value)}' is not UTF-8 ({what} at character {exc.start + 1}); "
                             "CDA takes file names as UTF-8 text: rename the file, or link to it under a UTF-8 name") from None
    return value


_TextName = Annotated[str, BeforeValidator(_named_in_text), Field(min_length=1, max_length=4096)]
FilePath = Annotated[_TextName, PathParam(), Field(description="a file on this machine")]


def _not_empty(value: Any) -> Any:
    """An empty text refused in words at every door (``dsl: the input is empty``), before
    pydantic's "String should have at least 1 character"."""
    if value == "":
        raise ValueError("the input is empty (no text at all)")
    return value


def dsl_text(description: str, *, max_length: int = MAX_TEXT) -> Any:
    """A DSL text parameter's type (scanned for ``ken`` lines by the gate)."""
    return Annotated[str, DslText(), BeforeValidator(_not_empty),
                     Field(min_length=1, max_length=max_length, description=description)]


def marker(metadata: list[Any], kind: type[Any]) -> Any:
    """The first ``kind`` marker in a field's metadata, or ``None``."""
    return next((m for m in metadata if isinstance(m, kind)), None)


def checker_of(metadata: list[Any]) -> Checked | None:
    return marker(metadata, Checked)


def optional_text(description: str, *, dsl: bool = False, max_length: int = MAX_TEXT, min_length: int = 1) -> Any:
    """An optional text parameter (``None``: not given); ``dsl``: DSL text the gate scans."""
    inner = Annotated[str, Field(min_length=min_length, max_length=max_length)]
    empty = (BeforeValidator(_not_empty),) if min_length else ()
    return Annotated[inner | None, *((DslText(),) if dsl else ()), *empty, Field(description=description)]


def optional_path(description: str, *, store: bool = False) -> Any:
    """An optional path parameter: a file the operation reads (``store``: a store it writes)."""
    return Annotated[_TextName | None, PathParam(store=store), Field(description=description)]


def path_list(description: str) -> Any:
    """Zero or more files the operation reads."""
    return Annotated[list[_TextName], PathParam(), Field(max_length=64, description=description)]


def whole_in(low: int, high: int) -> Any:
    """A whole number from ``low`` to ``high``, checked as :func:`cda.contracts.limits.whole` checks
    it at every door."""

    def check(name: str, value: Any) -> int:
        return limits.whole(name, value, low=low, high=high)

    return Annotated[Annotated[int, Field(ge=low, le=high)], *checked(check, whole=True)]
