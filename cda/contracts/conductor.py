"""The conductor's contracts (docs/conductor.md): obligations, tool specs, tool runs, assertions, events,
sources, and the trace a request leaves.

They cross two boundaries: Translator-In's output (an :class:`ObligationsDoc`, validated before
anything is stored, so a translator — rule-based or an LLM — can never put a malformed
obligation into the IR database) and the registry file (``tools.toml``, one :class:`ToolSpec`
per tool). The rest describe what the IR database holds and what ``cda conduct --json`` prints.

The selection order of the seed ("reliability > cost > latency > name") is carried by ordered
enums: :class:`Reliability` runs HIGH < MEDIUM < LOW and :class:`Cost` TINY < LOW < MEDIUM <
HIGH, so a tool's sort key is simply ``(reliability, cost, latency_ms, name)``, smallest first.

>>> sorted([Reliability.LOW, Reliability.HIGH, Reliability.MEDIUM])
['high', 'medium', 'low']
>>> Cost("tiny") < Cost.HIGH
True
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, SecretStr, field_validator, model_validator

from cda.contracts import limits
from cda.contracts.status import _Ordered

__all__ = [
    "META_TYPES",
    "Assertion",
    "ConductEvent",
    "Cost",
    "Fact",
    "McpServer",
    "Obligation",
    "ObligationSpec",
    "ObligationStatus",
    "ObligationsDoc",
    "Reliability",
    "Source",
    "ToolRun",
    "ToolRunStatus",
    "ToolSpec",
    "Trace",
    "SideEffects",
    "ToolOverride",
    "Verification",
]

NAME_PATTERN = r"^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)*$"
"""Obligation types and tool names: lower-case dotted words (``compute``, ``cda.solve``)."""

META_TYPES = ("clarify", "discover_op", "justify", "error", "translation_failed")
"""Obligations the conductor raises for someone outside it (a person, an operator): no tool is
run for them; the reply lists them as what is needed. ``translation_failed``: the model
translator asked for (``--translator openai``) failed — the provider's HTTP error or timeout, or
two replies that were not an obligations document — so what the request holds besides was read
by the rule translator, if anything (docs/conductor.md, "Exit codes and statuses")."""

MAX_INPUT_TEXT = 100_000
"""The longest text an obligation input may hold (an expression, a path, a query)."""


class Reliability(_Ordered):
    """How far a tool's answers can be trusted; declared best first (the selection order)."""

    HIGH = "high"
    MEDIUM = "medium"
    LOW = "low"


class Cost(_Ordered):
    """What running a tool costs; declared cheapest first (the selection order)."""

    TINY = "tiny"
    LOW = "low"
    MEDIUM = "medium"
    HIGH = "high"


class ObligationStatus(StrEnum):
    """``active`` until settled: ``resolved`` (a tool's answer passed its postconditions),
    ``failed`` (every candidate failed: a JUSTIFY child says why) or ``escalated`` (handed on
    to a CLARIFY or DISCOVER_OP child)."""

    ACTIVE = "active"
    RESOLVED = "resolved"
    FAILED = "failed"
    ESCALATED = "escalated"


class ToolRunStatus(StrEnum):
    """``started`` is written before a tool runs, so a run cut short by a kill is found as such
    (``interrupted``) when the conductor resumes; the others are written after it returns."""

    STARTED = "started"
    OK = "ok"
    ERROR = "error"
    POSTCONDITION_FAILED = "postcondition_failed"
    INTERRUPTED = "interrupted"


class SideEffects(StrEnum):
    """What running a tool does besides answering: ``none`` (it only reads), ``idempotent``
    (running it twice has the effect of running it once), ``once`` (each run acts: a page, a
    ticket, a payment). The verify loop never runs a tool with side effects again, and a
    ``once`` tool runs at most once per obligation, across kills and resumes."""

    NONE = "none"
    IDEMPOTENT = "idempotent"
    ONCE = "once"


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


def _checked_value(field: str, value: Any, depth: int = 0) -> Any:
    """An input value as JSON with bounds: strings up to :data:`MAX_INPUT_TEXT`, whole numbers in
    the solvers' range, no floats (a number meant exactly is written as text: ``"0.1"``), lists
    of such values, at most four levels deep."""
    if depth > 4:
        raise ValueError(f"{field}: nested more than 4 levels")
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int):
        return limits.whole(field, value, low=-limits.MAX_COUNT, high=limits.MAX_COUNT)
    if isinstance(value, str):
        if len(value) > MAX_INPUT_TEXT:
            raise ValueError(f"{field}: text of {len(value)} characters (at most {MAX_INPUT_TEXT})")
        return value
    if isinstance(value, list):
        if len(value) > 1000:
            raise ValueError(f"{field}: a list of {len(value)} items (at most 1000)")
        return [_checked_value(field, v, depth + 1) for v in value]
    if isinstance(value, float):
        raise ValueError(f"{field}: {value!r} is a float; write an exact number as text (\"0.1\") or a whole number")
    raise ValueError(f"{field}: {type(value).__name__} is not an input value (text, whole number, boolean, list)")


_FACT = re.compile(
    r"^\s*(?P<neg>not\s+)?(?P<pred>[A-Za-z_][A-Za-z0-9_]*)\s*"
    r"(?:\(\s*(?P<args>[A-Za-z0-9_.:-]+(?:\s*,\s*[A-Za-z0-9_.:-]+)*)\s*\))?\s*$"
)


@dataclass(frozen=True)
class Fact:
    """A fact literal: an atom (``up(db)``, ``related_to(db, auth)``, ``maintenance``) or its
    negation (``not up(db)``). Two facts contradict when they are the same atom with opposite
    signs; the verify loop asks CDA's solver to find such sets (with their cores).

    >>> Fact.parse("  not  up( db ,x )").text, Fact.parse("up(db, x)").atom
    ('not up(db, x)', 'up(db, x)')
    """

    positive: bool
    atom: str

    @property
    def text(self) -> str:
        return self.atom if self.positive else f"not {self.atom}"

    @classmethod
    def parse(cls, text: str) -> Fact:
        m = _FACT.match(text) if len(text) <= 1000 else None
        if m is None:
            shown = text if len(text) <= 60 else text[:60] + "…"
            raise ValueError(f"{shown!r} is not a fact: write pred(arg, …) or not pred(arg, …)")
        args = m["args"]
        atom = m["pred"] + (f"({', '.join(a.strip() for a in args.split(','))})" if args else "")
        return cls(m["neg"] is None, atom)


class ObligationSpec(_Model):
    """One obligation as Translator-In states it: what is owed (``type``) and what was given."""

    type: str = Field(pattern=NAME_PATTERN, max_length=100)
    inputs: dict[str, Any] = Field(default_factory=dict, description="input name -> value")

    @field_validator("inputs")
    @classmethod
    def _inputs(cls, value: dict[str, Any]) -> dict[str, Any]:
        if len(value) > 50:
            raise ValueError(f"{len(value)} inputs (at most 50)")
        for key in value:
            if not key.isidentifier() or len(key) > 100:
                raise ValueError(f"input name {key[:100]!r} is not an identifier")
        return {key: _checked_value(f"inputs.{key}", v) for key, v in value.items()}


class ObligationsDoc(_Model):
    """Translator-In's whole output: the obligations of one utterance, and the facts the user
    stated (``given down(db)``), which enter the IR as assertions whose source is the user."""

    obligations: list[ObligationSpec] = Field(min_length=1, max_length=100)
    facts: list[str] = Field(default_factory=list, max_length=1000)
    unread: list[str] = Field(default_factory=list, max_length=100,
                              description="words of the request the translator did not read (said in the reply)")

    @field_validator("facts")
    @classmethod
    def _facts(cls, value: list[str]) -> list[str]:
        return [Fact.parse(f).text for f in value]


class Obligation(_Model):
    """An obligation as the IR database holds it."""

    id: int
    request_id: int
    parent_id: int | None
    type: str
    inputs: dict[str, Any]
    status: ObligationStatus
    reason: str | None = None


TimeoutSeconds = Annotated[int, BeforeValidator(lambda value: limits.whole("timeout_s", value, low=1, high=3600))]
"""A user tool's time limit: whole seconds, 1 to 3600."""


class ToolOverride(_Model):
    """What a manifest says of one tool an MCP server offers (``[tool.each.NAME]``): anything
    left out is discovered from the server (its inputs, its annotations) or the entry's defaults."""

    satisfies: list[str] | None = Field(default=None, max_length=100)
    inputs: list[str] | None = Field(default=None, max_length=50)
    preconditions: list[str] | None = Field(default=None, max_length=50)
    postconditions: list[str] | None = Field(default=None, max_length=50)
    reliability: Reliability | None = None
    cost: Cost | None = None
    latency_ms: int | None = None
    side_effects: SideEffects | None = None
    deterministic: bool | None = None
    verify: str | None = Field(default=None, pattern=NAME_PATTERN, max_length=100)
    description: str | None = Field(default=None, max_length=2000)


ENV_NAME_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]*$"
"""An environment variable's name as a manifest may set it (a shell's own rule)."""

MAX_ENV_VALUE = 32_768
"""Characters of one environment variable's value (a key or a token is far shorter)."""


class McpServer(_Model):
    """An MCP server whose tools become conductor tools: a program spoken to over stdio
    (``command``) or a streamable-HTTP endpoint (``url``), one of the two.

    ``env`` (stdio only): variables set for the program, over the few the MCP SDK passes on by
    itself (``HOME``, ``PATH``, ``USER`` …; nothing else of CDA's environment reaches it). The
    values are secrets as far as CDA is concerned (an API key, a token): held as
    :class:`~pydantic.SecretStr`, so a dump, a repr or an error shows ``**********``; only the
    names are ever written (docs/conductor.md, "Your own tools").

    >>> server = McpServer(command=["pager"], env={"PAGER_TOKEN": "s3cret"})
    >>> server.env_names(), "s3cret" in repr(server) + server.model_dump_json()
    (['PAGER_TOKEN'], False)
    """

    command: list[str] | None = Field(default=None, min_length=1, max_length=100)
    url: str | None = Field(default=None, max_length=2048, pattern=r"^https?://")
    env: dict[Annotated[str, Field(pattern=ENV_NAME_PATTERN, max_length=128)], SecretStr] = Field(
        default_factory=dict, max_length=100, description="with command: environment variables for the program")
    timeout_s: TimeoutSeconds = Field(default=60, description="whole seconds to wait for the server's answer to one call")
    max_reply_bytes: Annotated[int, BeforeValidator(lambda value: limits.reply_bytes("max_reply_bytes", value))] = Field(
        default=10_000_000, description="bytes of one reply the server may send; a longer one is refused unread")

    @field_validator("env")
    @classmethod
    def _env_values(cls, value: dict[str, SecretStr]) -> dict[str, SecretStr]:
        for name, secret in value.items():  # the messages name the variable, never its value
            text = secret.get_secret_value()
            if "\0" in text:
                raise ValueError(f"{name}: the value contains a NUL character (no program can receive it)")
            if len(text) > MAX_ENV_VALUE:
                raise ValueError(f"{name}: the value is {len(text)} characters long (at most {MAX_ENV_VALUE})")
        return value

    @model_validator(mode="after")
    def _one(self) -> McpServer:
        if (self.command is None) == (self.url is None):
            raise ValueError("write either command = [...] or url = \"http://…/mcp\", not both and not neither")
        if self.env and self.command is None:
            raise ValueError("env is for a server CDA starts (command = [...]); a server at a url has its own")
        return self

    def env_names(self) -> list[str]:
        """The names ``env`` sets, sorted: what may be shown of it."""
        return sorted(self.env)

    def environment(self) -> dict[str, str] | None:
        """``env`` with its values, for the program's start only (None: nothing added)."""
        return {name: secret.get_secret_value() for name, secret in self.env.items()} or None


class ToolSpec(_Model):
    """One tool of the registry: what it satisfies, what it needs, what it promises, what it
    does besides answering, and the three attributes the selection order reads.

    The implementation is one of: a built-in or adapter-provided name (``impl = "cda.solve"``,
    default: the tool's name), a Python function (``impl = "package.module:function"``), a
    program (``command = ["prog", "{input}"]``), or every tool of an MCP server
    (``mcp = {command = [...]}`` / ``mcp = {url = "…"}``; ``name`` is then their prefix and
    ``[tool.each.NAME]`` overrides what is discovered)."""

    name: str = Field(pattern=NAME_PATTERN, max_length=100)
    impl: str | None = Field(default=None, max_length=300,
                             description="the implementation: a known name, or package.module:function")
    command: list[str] | None = Field(default=None, min_length=1, max_length=100,
                                      description="a program and its arguments; {input} is an input's value")
    mcp: McpServer | None = None
    each: dict[str, ToolOverride] = Field(default_factory=dict, description="with mcp: per-tool overrides")
    satisfies: list[str] = Field(default_factory=list, max_length=100)
    inputs: list[str] = Field(default_factory=list, max_length=50)
    preconditions: list[str] = Field(default_factory=list, max_length=50)
    postconditions: list[str] = Field(default_factory=list, max_length=50)
    reliability: Reliability
    cost: Cost
    latency_ms: int = Field(description="typical run time, whole milliseconds")
    side_effects: SideEffects = Field(default=SideEffects.NONE, description="none | idempotent | once")
    deterministic: bool = Field(default=True, description="the same inputs always give the same outputs")
    verify: str | None = Field(default=None, pattern=NAME_PATTERN, max_length=100,
                               description="a side-effect-free tool of the registry that checks this one's answers")
    timeout_s: TimeoutSeconds = Field(default=60, description="with command or impl = module:function: whole seconds before the call is stopped")
    description: str = ""

    @field_validator("satisfies")
    @classmethod
    def _types(cls, value: list[str]) -> list[str]:
        for t in value:
            if not re.match(NAME_PATTERN, t):
                raise ValueError(f"obligation type {t!r} must be lower-case dotted words")
        return value

    @field_validator("inputs")
    @classmethod
    def _input_names(cls, value: list[str]) -> list[str]:
        for name in value:
            if not name.isidentifier():
                raise ValueError(f"input name {name!r} is not an identifier")
        return value

    @field_validator("latency_ms", mode="before")
    @classmethod
    def _latency(cls, value: object) -> int:
        return limits.whole("latency_ms", value, low=0, high=limits.MAX_COUNT)

    @model_validator(mode="after")
    def _kind(self) -> ToolSpec:
        kinds = [k for k, v in (("impl", self.impl), ("command", self.command), ("mcp", self.mcp)) if v is not None]
        if len(kinds) > 1:
            raise ValueError(f"a tool is one of impl, command or mcp, not {' and '.join(kinds)}")
        if self.mcp is None:
            if not self.satisfies:
                raise ValueError("satisfies: name at least one obligation type")
            if self.each:
                raise ValueError("each: per-tool overrides are for an mcp server's tools")
        return self

    def order_key(self) -> tuple[int, int, int, str]:
        """The seed's fixed order: reliability, then cost, then latency, then name."""
        return (self.reliability._rank(), self.cost._rank(), self.latency_ms, self.name)

    @property
    def implementation(self) -> str:
        return self.impl or self.name

    @property
    def rerunnable(self) -> bool:
        """May the verify loop run this tool again to check it? Only when running it again acts
        on nothing and must give the same answer."""
        return self.deterministic and self.side_effects is SideEffects.NONE


class ToolRun(_Model):
    """One run of one tool for one obligation. ``duration_ms`` is measured, so it is kept out
    of the trace (which must be the same bytes for the same request and database)."""

    id: int
    obligation_id: int
    tool: str
    inputs: dict[str, Any]
    outputs: dict[str, Any] | None
    status: ToolRunStatus
    detail: str | None = None
    duration_ms: float | None = None


class Source(_Model):
    """Where an assertion came from: a tool run (``tool``) or the user's own words (``user``)."""

    id: int
    kind: Literal["tool", "user"]
    tool_run_id: int | None
    reference: str


class Assertion(_Model):
    """One thing the IR now holds: an output of a resolved obligation (``key`` = the output's
    name) or a fact (``key == "fact"``, value a fact literal such as ``not up(db)``)."""

    id: int
    request_id: int
    obligation_id: int | None
    key: str
    value: Any
    source_id: int


class ConductEvent(_Model):
    """A step of the loops, in order (``seq``): what the trace is made of."""

    seq: int
    request_id: int
    kind: str
    body: dict[str, Any]


class Verification(_Model):
    """The verify loop's finding on one reported obligation."""

    obligation_id: int
    kind: Literal["math", "db", "rules", "facts", "recorded", "verifier"]
    ok: bool
    detail: str


class Trace(_Model):
    """What ``cda conduct --json`` prints: the request, its obligations (a tree by
    ``parent_id``), every tool run, the verifications and the reply — no times, so the same
    request on the same database gives the same bytes."""

    request_id: int
    utterance: str
    status: Literal["answered", "uncertain", "unanswered", "translation_failed"]
    answer: str
    obligations: list[Obligation]
    tool_runs: list[ToolRun]
    assertions: list[Assertion]
    verifications: list[Verification]
    events: list[ConductEvent]
