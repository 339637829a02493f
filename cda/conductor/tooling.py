"""What a tool is to the conductor: an implementation that turns inputs into outputs, an
optional independent re-check for the verify loop, and named conditions checked before and after.

Implementations are plain functions registered by name in a :class:`Toolbox`; the registry file
(:mod:`cda.conductor.registry`) says which implementation each :class:`ToolSpec` runs. The
conductor ships the tools it can build on the engine's public API (:mod:`cda.conductor.tools`);
tools built on other products — ``cda.prove`` on :mod:`cda.fol`, ``cda.diagnose`` on
:mod:`cda.diagnosis` — are added by the adapter that wires the command (products do not import
each other), and so may any user's own.

Conditions are written in the registry as ``name`` or ``name(arg, …)``; each name maps to a
deterministic check that returns ``None`` when it holds and the reason when it does not. Unknown
names are refused when the registry is read, never at run time.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cda.errors import AccessDenied, BudgetExceeded, CDAError, innermost

if TYPE_CHECKING:
    from cda.api import KenGraph

__all__ = [
    "Condition",
    "ConditionCall",
    "ConductorError",
    "Tool",
    "ToolContext",
    "ToolError",
    "Toolbox",
    "parse_condition",
    "kind_of",
    "said",
]


class ConductorError(CDAError, ValueError):
    """A mistake in what the conductor was given: a registry, an option, a database."""


class ToolError(CDAError):
    """A tool could not produce an answer (its input was refused, its file missing, …): the run
    is recorded as ``error`` with this message and the next candidate is tried."""


#: a failure outside CDA's own errors, in words (the first class ``exc`` is an instance of wins)
_KINDS: tuple[tuple[type[BaseException], str], ...] = (
    (PermissionError, "refused"),
    (TimeoutError, "timed out"),
    (FileNotFoundError, "no such file"),
    (ConnectionError, "the connection failed"),
    (OSError, "could not read or write"),
    (RecursionError, "nested too deeply"),
    (MemoryError, "out of memory"),
    (KeyError, "a name is missing"),
    (UnicodeError, "text that is not valid UTF-8"),
    (ValueError, "a value was refused"),
    (TypeError, "a value of the wrong kind"),
    (ArithmeticError, "arithmetic failed"),
    (ImportError, "a module does not import"),
)


def kind_of(value: object) -> str:
    """What ``value`` is, in JSON's words rather than Python's class names.

    >>> kind_of(None), kind_of([1]), kind_of("x"), kind_of(2.5)
    ('null', 'a list', 'a string', 'a number')
    """
    if value is None:
        return "null"
    for cls, words in ((bool, "a boolean"), (int, "a number"), (float, "a number"), (str, "a string"),
                       (list, "a list"), (tuple, "a list"), (dict, "an object")):
        if isinstance(value, cls):
            return words
    return "an object that is not JSON"


def kind_named(class_names: list[str]) -> str:
    """The words :func:`said` gives a failure whose exception (raised in another process, known
    by its classes' names, most derived first) is one of Python's own; else its class's name."""
    return next((words for cls, words in _KINDS if cls.__name__ in class_names), class_names[0])


def said(exc: BaseException) -> str:
    """``exc`` as a person reading a trace is told it: what was refused or failed and why, never
    a Python class name (``AccessDenied: …``, ``ToolError: …``). CDA's own errors say it in their
    message (a refusal is marked ``refused:``, a budget ``out of time:``); any other failure (a
    user's tool, a condition breaking on odd input) is named by its kind in words.

    >>> said(ToolError("2 ** 0.5: an exponent must be a whole number"))
    '2 ** 0.5: an exponent must be a whole number'
    >>> said(AccessDenied("/etc/x: outside the folders this caller may read"))
    'refused: /etc/x: outside the folders this caller may read'
    >>> said(KeyError("service"))
    "a name is missing: 'service'"
    """
    exc = innermost(exc)
    message = str(exc).strip() or "no detail was given"
    if isinstance(exc, AccessDenied):
        return f"refused: {message}"
    if isinstance(exc, BudgetExceeded):
        return f"out of time: {message}"
    if isinstance(exc, CDAError):
        return message
    kind = next((words for cls, words in _KINDS if isinstance(exc, cls)), "an unexpected failure")
    return f"{kind}: {message}"


@dataclass(frozen=True)
class ToolContext:
    """What a tool may use besides its inputs: the folder relative paths are read from, the Ken
    graph when one was given, and the seed of deterministic tools."""

    base_dir: Path = field(default_factory=Path.cwd)
    ken: KenGraph | None = None
    seed: int = 0

    def path(self, value: object) -> Path:
        """An input naming a file, resolved against :attr:`base_dir`; a file the current call may
        not read (:mod:`cda.access`: a caller without file access, a path outside its roots) is
        :class:`~cda.errors.AccessDenied` here, before any tool or condition touches it."""
        from cda.access import readable

        p = Path(str(value))
        return readable(p if p.is_absolute() else self.base_dir / p)


Outputs = dict[str, Any]
RunFn = Callable[[Mapping[str, Any], ToolContext], Outputs]
RecheckFn = Callable[[Mapping[str, Any], Outputs, ToolContext], "str | None"]
Condition = Callable[[Mapping[str, Any], "Outputs | None", ToolContext, tuple[str, ...]], "str | None"]
"""``(inputs, outputs or None before the run, context, arguments) -> None | why it fails``."""


@dataclass(frozen=True)
class Tool:
    """An implementation: ``run`` answers; ``recheck`` (optional) re-evaluates an answer by an
    independent route for the verify loop (the other backend, another arithmetic) and returns
    ``None`` when it agrees."""

    run: RunFn
    recheck: RecheckFn | None = None


@dataclass(frozen=True)
class ConditionCall:
    """A condition as the registry writes it: ``suffix(problem, .cda)``."""

    name: str
    args: tuple[str, ...]
    text: str


_CALL = re.compile(r"^\s*([a-z_][a-z0-9_]*)\s*(?:\((.*)\))?\s*$")


def parse_condition(text: str) -> ConditionCall:
    """``name`` or ``name(a, b)`` (arguments are plain words, split on commas).

    >>> parse_condition("suffix(problem, .cda)")
    ConditionCall(name='suffix', args=('problem', '.cda'), text='suffix(problem, .cda)')
    """
    m = _CALL.match(text)
    if m is None:
        raise ConductorError(f"condition {text!r}: write name or name(arg, ...)")
    args = tuple(a.strip() for a in m[2].split(",")) if m[2] is not None and m[2].strip() else ()
    if any(not a for a in args):
        raise ConductorError(f"condition {text!r}: an empty argument")
    return ConditionCall(m[1], args, text.strip())


@dataclass
class Toolbox:
    """Implementations and conditions by name (the built-ins plus whatever an adapter adds)."""

    tools: dict[str, Tool] = field(default_factory=dict)
    preconditions: dict[str, Condition] = field(default_factory=dict)
    postconditions: dict[str, Condition] = field(default_factory=dict)

    def merged(self, other: Toolbox) -> Toolbox:
        return Toolbox(
            {**self.tools, **other.tools},
            {**self.preconditions, **other.preconditions},
            {**self.postconditions, **other.postconditions},
        )
