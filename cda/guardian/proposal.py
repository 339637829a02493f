"""The proposed action an agent submits to the gate, and its validation into a model or a path.

A proposed action names who acts (``agent_id``), with which tool (``tool.name``/``tool.version``),
what kind of act it is (``action_type``), on what (``resources``), at what expected cost
(``cost_estimate`` in ``currency``) and with which arguments (``parameters``, the tool's call
arguments). The gate decides on exactly this; a :class:`~cda.guardian.tasks` task maps onto it.

Validation never raises: :func:`read_action` turns anything malformed (bad JSON, a wrong type,
NaN, infinity, a negative or huge number, an unknown field, an oversize document) into a
:class:`Malformed` naming the JSON path of the first problem (``$.resources[2]``), which the gate
answers with REJECT ``malformed_action``. Numbers are read exactly: JSON numbers become
:class:`~decimal.Decimal` (or ``int``) from their text, never a float, and a decimal string
(``"150.25"``) is accepted where a number is, so a client whose JSON library only has floats can
still say an amount exactly.

The committed JSON Schema (``schemas/guardian/action.schema.json``) is :func:`action_schema`,
generated from the model; a test checks that the file is current and that both accept and refuse
the same documents.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from decimal import Decimal, InvalidOperation
from typing import Annotated, Any, Literal, NamedTuple

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, WithJsonSchema, field_validator
from pydantic_core import PydanticCustomError

from cda.contracts.locations import problem_message
from cda.contracts.receipt import canonical_json, sha256_hex
from cda.guardian.money import CURRENCY_PATTERN, MAX_PLACES
from cda.ir import exact_number

__all__ = [
    "MAX_ACTION_BYTES",
    "COST_PREFIXES",
    "MAX_COST",
    "MAX_COST_UNITS",
    "MAX_PARAMETER_NUMBER",
    "Malformed",
    "ProposedAction",
    "ToolRef",
    "action_schema",
    "cost_units",
    "read_action",
]

#: the largest action document, in bytes of its JSON text (an action is a request, not a payload)
MAX_ACTION_BYTES = 64 * 1024
#: the most decimal places a cost estimate may have: the ledger's (a billionth of a unit)
MAX_COST_PLACES = MAX_PLACES
#: the unit prefixes a cost may be counted in, by decimal places (the DSL's: USD, dUSD, cUSD, ...)
COST_PREFIXES = ((0, ""), (1, "d"), (2, "c"), (3, "m"), (6, "u"), (9, "n"))
#: every numeric variable of the DSL lies in ±10^9 of its unit (docs/dsl.md), the cost included
MAX_COST_UNITS = 10**9
#: the largest cost estimate, in units of its currency: the DSL's range (the ledger's
#: cda.guardian.money.MAX_AMOUNT, 10^15, bounds budgets, which add up many costs)
MAX_COST = MAX_COST_UNITS
#: the largest magnitude of a number among the parameters
MAX_PARAMETER_NUMBER = 10**15
_MAX_DEPTH = 8  # nesting of the parameters
_MAX_ITEMS = 256  # entries of one parameter list or object
_MAX_STRING = 4096  # characters of one parameter string

_ID = r"^[A-Za-z0-9][A-Za-z0-9_.:@-]{0,127}$"  # the tasks' and the ledger's ids (cda.guardian.tasks.ID_PATTERN)
_PARAM_KEY = re.compile(r"[a-z][a-z0-9_]{0,63}")
_DECIMAL_TEXT = re.compile(r"-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?")


def _exact(value: object) -> Decimal | int:
    """A number given in JSON or from Python, exactly: ``int`` as is, ``Decimal`` (what the JSON
    reader makes of a number's text), a decimal string, or a float as the decimal it prints as,
    within the DSL literals' bounds (:func:`cda.encodings.numbers.exact_number`: 40 digits,
    exponents up to ±30). Raises ``PydanticCustomError`` saying what is wrong."""
    if isinstance(value, bool):
        raise PydanticCustomError("exact_number", "a number is expected, not a Boolean")
    if isinstance(value, str):
        if len(value) > 64 or not _DECIMAL_TEXT.fullmatch(value):
            raise PydanticCustomError("exact_number", "a decimal number is expected, not the text {text}", {"text": repr(value[:64])})
    elif isinstance(value, float | Decimal):
        if not (math.isfinite(value) if isinstance(value, float) else value.is_finite()):
            raise PydanticCustomError("exact_number", "the number must be finite, not {value}", {"value": str(value)})
    elif not isinstance(value, int):
        raise PydanticCustomError("exact_number", "a number is expected, not {kind}", {"kind": type(value).__name__})
    try:
        exact = exact_number(value)
    except ValueError as exc:
        raise PydanticCustomError("exact_number", "{problem}", {"problem": str(exc)}) from None
    if exact.denominator == 1:  # a whole number: an int, so 2 and 2.0 and 2e0 read the same
        return int(exact)
    return Decimal(repr(value) if isinstance(value, float) else value).normalize()  # type: ignore[arg-type]


def cost_units(cost: Decimal, currency: str) -> tuple[str, int] | None:
    """The cost as the policies state it: a whole number of the coarsest unit that makes it whole
    (``12.5 USD`` is ``125 dUSD``), or None when that number passes :data:`MAX_COST_UNITS` (the
    policies could not state the cost exactly)."""
    exponent = cost.normalize().as_tuple().exponent
    assert isinstance(exponent, int)
    places = max(0, -exponent)
    for k, prefix in COST_PREFIXES:
        if k >= places:
            scaled = int(cost * 10**k)
            return (prefix + currency, scaled) if scaled <= MAX_COST_UNITS else None
    return None


def _cost(value: object) -> Decimal:
    number = _exact(value)
    if number < 0:
        raise PydanticCustomError("cost", "the cost estimate must be 0 or more, not {value}", {"value": str(number)})
    if number > MAX_COST:
        raise PydanticCustomError("cost", "the cost estimate must be at most {high}, not {value}", {"high": MAX_COST, "value": str(number)})
    exact = Decimal(number)
    exponent = exact.as_tuple().exponent
    assert isinstance(exponent, int)
    if -exponent > MAX_COST_PLACES:
        raise PydanticCustomError("cost", "the cost estimate may have at most {places} decimal places, not {value}",
                                  {"places": MAX_COST_PLACES, "value": str(number)})  # fmt: skip
    if cost_units(exact, "") is None:  # 999.999999999 would be 999,999,999,999 nano-units
        raise PydanticCustomError("cost", "the cost estimate {value} has more digits than the policies can state: at most "
                                  "{units} of its smallest unit (999.999999, 999999.999, 1000000000)",
                                  {"value": str(number), "units": MAX_COST_UNITS})  # fmt: skip
    return exact


Cost = Annotated[
    Decimal,
    BeforeValidator(_cost),
    WithJsonSchema(
        {
            "anyOf": [
                {"type": "number", "minimum": 0, "maximum": MAX_COST},
                {"type": "string", "pattern": r"^(0|[1-9][0-9]{0,9})(\.[0-9]{1,9})?$"},
            ],
            "description": "the expected cost in units of `currency`, read exactly (a JSON number or a decimal string); "
            "at most 10^9 of its smallest unit, so the policies can state it (999.999999, 999999.999)",
        }
    ),
]


def _json_value(value: object, path: str, depth: int) -> object:
    """``value`` checked as a bounded JSON value (numbers exact), or a ``PydanticCustomError``
    whose context names the ``subpath`` below ``parameters`` where it went wrong."""
    if depth > _MAX_DEPTH:
        raise PydanticCustomError("json_value", "nested deeper than {depth} levels", {"subpath": path, "depth": _MAX_DEPTH})
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, str):
        if len(value) > _MAX_STRING:
            raise PydanticCustomError("json_value", "a string longer than {n} characters", {"subpath": path, "n": _MAX_STRING})
        return value
    if isinstance(value, int | float | Decimal):
        try:
            number = _exact(value)
        except PydanticCustomError as exc:
            raise PydanticCustomError("json_value", exc.message(), {"subpath": path}) from None
        if not -MAX_PARAMETER_NUMBER <= number <= MAX_PARAMETER_NUMBER:
            raise PydanticCustomError("json_value", "a number beyond ±10^15: {value}", {"subpath": path, "value": str(number)[:40]})
        return number
    if isinstance(value, list | tuple):
        if len(value) > _MAX_ITEMS:
            raise PydanticCustomError("json_value", "a list of more than {n} items", {"subpath": path, "n": _MAX_ITEMS})
        return [_json_value(item, f"{path}[{i}]", depth + 1) for i, item in enumerate(value)]
    if isinstance(value, Mapping):
        if len(value) > _MAX_ITEMS:
            raise PydanticCustomError("json_value", "an object of more than {n} entries", {"subpath": path, "n": _MAX_ITEMS})
        out: dict[str, object] = {}
        for key, item in value.items():
            if not isinstance(key, str) or len(key) > 256:
                raise PydanticCustomError("json_value", "a key that is not a string of at most 256 characters", {"subpath": path})
            out[key] = _json_value(item, f"{path}.{key}", depth + 1)
        return out
    raise PydanticCustomError("json_value", "{kind} is not a JSON value", {"subpath": path, "kind": type(value).__name__})


class ToolRef(BaseModel):
    """The tool the action would call, as registered in the tool registry (seed: MCP_TOOL_REGISTRY)."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    name: str = Field(pattern=r"^[A-Za-z][A-Za-z0-9_.-]{0,63}$")
    version: str = Field(pattern=r"^[0-9A-Za-z][0-9A-Za-z.+-]{0,31}$")


class ProposedAction(BaseModel):
    """One side-effecting act an agent proposes; the gate answers it with a decision.

    ``parameters`` are the tool's call arguments (checked against the tool's registered schema
    when the gate calls it); their numbers are exact (``int`` or ``Decimal``). Numeric parameters
    whose keys a policy store declares become facts the policies can compare.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    action_id: str = Field(pattern=_ID, description="the agent's id for this proposal")
    agent_id: str = Field(pattern=_ID)
    tool: ToolRef
    action_type: str = Field(pattern=r"^[a-z][a-z0-9_.-]{0,63}$", description="what kind of act: 'db.delete', 'ads.launch'")
    resources: list[Annotated[str, Field(pattern=r"^[^\x00-\x1f\x7f]{1,256}$")]] = Field(default_factory=list, max_length=64)
    cost_estimate: Cost = Decimal(0)
    currency: str = Field(default="USD", pattern=CURRENCY_PATTERN)
    parameters: Annotated[
        dict[str, Any],
        WithJsonSchema({"type": "object", "maxProperties": 64, "propertyNames": {"pattern": "^[a-z][a-z0-9_]{0,63}$"},
                        "description": "the tool's call arguments: JSON values, nested at most 8 deep"}),
    ] = Field(default_factory=dict, max_length=64)
    task_id: str | None = Field(default=None, pattern=_ID)
    description: str = Field(default="", max_length=1024)
    priority: Literal["low", "medium", "high"] = "medium"

    @field_validator("parameters", mode="before")
    @classmethod
    def _bounded_parameters(cls, value: object) -> object:
        if not isinstance(value, Mapping):
            return value  # the type check says what is wrong
        for key in value:
            if not isinstance(key, str) or not _PARAM_KEY.fullmatch(key):
                shown = str(key)[:64]
                raise PydanticCustomError("parameter_key", "a parameter name is lowercase letters, digits and _ (at most 64), not {key}",
                                          {"subpath": f".{shown}", "key": repr(shown)})  # fmt: skip
        return _json_value(dict(value), "", 1)

    def canonical(self) -> str:
        """The action's canonical JSON (sorted keys, exact numbers as decimal text): what its
        digest, and so the decision's ``action_digest``, is computed over."""
        return canonical_json(self.model_dump(mode="json"))

    def digest(self) -> str:
        """SHA-256 of :meth:`canonical`."""
        return sha256_hex(self.canonical())


class Malformed(NamedTuple):
    """Why a document is not a proposed action: the JSON path of the first problem and what it is;
    ``digest`` is the SHA-256 of the text (or canonical form) that was given."""

    path: str
    message: str
    digest: str


def _path(loc: tuple[int | str, ...], ctx: Mapping[str, Any] | None) -> str:
    out = "$"
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else f".{part}"
    sub = (ctx or {}).get("subpath")
    return out + sub if isinstance(sub, str) else out


def _reject_constant(name: str) -> Decimal:
    """JSON has no NaN or Infinity; Python's reader accepts them, so they are read as the
    non-finite Decimal and refused by the model with their path."""
    return Decimal(name)


def _decode(text: str) -> object:
    return json.loads(text, parse_float=Decimal, parse_constant=_reject_constant)


def read_action(raw: str | bytes | Mapping[str, Any]) -> ProposedAction | Malformed:
    """``raw`` (JSON text or bytes, or an already decoded object) as a :class:`ProposedAction`,
    or a :class:`Malformed` naming the JSON path of the first problem. Never raises for bad input.

    >>> read_action('{"agent_id": "a"}').path
    '$.action_id'
    >>> read_action('{"action_id": "x", "agent_id": "a", "tool": {"name": "t", "version": "1"},'
    ...             ' "action_type": "db.read", "cost_estimate": NaN}').path
    '$.cost_estimate'
    """
    if isinstance(raw, bytes | bytearray | str):
        size = len(raw) if not isinstance(raw, str) else len(raw.encode("utf-8", "surrogatepass"))
        digest = sha256_hex(raw.decode("utf-8", "replace") if not isinstance(raw, str) else raw)
        if size > MAX_ACTION_BYTES:
            return Malformed("$", f"the action is {size} bytes; at most {MAX_ACTION_BYTES}", digest)
        try:
            text = raw if isinstance(raw, str) else bytes(raw).decode("utf-8")
            data = _decode(text)
        except UnicodeDecodeError as exc:
            return Malformed("$", f"not UTF-8 text (byte {exc.start})", digest)
        except json.JSONDecodeError as exc:
            return Malformed("$", f"not valid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}", digest)
        except (RecursionError, ValueError, InvalidOperation) as exc:
            return Malformed("$", f"not valid JSON: {exc if not isinstance(exc, RecursionError) else 'nested too deeply'}", digest)
    else:
        data = raw
        try:
            digest = sha256_hex(canonical_json(_plain(raw)))
        except (TypeError, ValueError, RecursionError):
            digest = sha256_hex(repr(type(raw)))
    if not isinstance(data, Mapping):
        return Malformed("$", f"an action is a JSON object, not {_kind(data)}", digest)
    try:
        return ProposedAction.model_validate(dict(data))
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        return Malformed(_path(first["loc"], first.get("ctx")), problem_message(first), digest)
    except RecursionError:
        return Malformed("$", "nested too deeply", digest)


def _plain(value: object) -> object:
    """A decoded document with its Decimals as text, so it has a canonical JSON for its digest."""
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def _kind(value: object) -> str:
    return {list: "a list", str: "a string", int: "a number", Decimal: "a number", bool: "a Boolean",
            type(None): "null"}.get(type(value), type(value).__name__)  # fmt: skip


def action_schema() -> dict[str, Any]:
    """The JSON Schema of a proposed action, as committed in ``schemas/guardian/action.schema.json``."""
    schema = ProposedAction.model_json_schema()
    schema["$id"] = "https://cda.dev/schemas/guardian/action.json"
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    return schema
