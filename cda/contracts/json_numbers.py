"""JSON numbers read exactly: a number with a fraction or an exponent keeps the digits written.

``json.loads`` turns ``1.0000000000000001`` into the float ``1.0``; an Action's soft weight read
that way tied with a weight of 1 and the run abstained where the same problem in the DSL ranks
exactly (docs/actions.md, "Inputs"). A door that reads a client's JSON passes
:func:`exact_float` as ``parse_float``: every consumer still sees a float, and a field that must be
exact (:class:`~cda.contracts.action.SoftConstraint`'s ``weight``) reads the digits from
:func:`decimal_of`.
"""

from __future__ import annotations

import json
import math
import secrets
from decimal import Decimal, InvalidOperation
from fractions import Fraction
from typing import Any

__all__ = ["DECIMAL_PATTERN", "EXACT_PATTERN", "JsonFloat", "decimal_of", "exact_dumps", "exact_float", "exact_text",
           "fraction_of_text", "weight_json"]

MAX_SIGNIFICANT = 40
"""Digits a weight may carry (the DSL's literals allow as many: docs/dsl.md, "Numbers")."""
MAX_EXPONENT = 30
DECIMAL_PATTERN = r"^\s*[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?\s*$"
"""A number's digits as a JSON string (the schema's ``pattern``; applies to strings only)."""


class JsonFloat(float):
    """A float that remembers the JSON text it was read from (``text``)."""

    __slots__ = ("text",)
    text: str

    def __new__(cls, text: str) -> JsonFloat:
        number = super().__new__(cls, text)
        number.text = text
        return number

    def __reduce__(self) -> tuple[Any, tuple[str]]:  # a pickled copy (a job's inputs) keeps the digits
        return (JsonFloat, (self.text,))


def exact_float(text: str) -> JsonFloat:
    """``parse_float`` for ``json.loads``: the float, with its digits kept."""
    return JsonFloat(text)


def decimal_of(value: object, what: str) -> Decimal:
    """``value`` (a JSON number or the text of one) as the exact decimal written; ``ValueError``
    for what is no finite number within the DSL's literal range (``what`` names it).

    >>> decimal_of(exact_float("1.0000000000000001"), "a weight"), decimal_of(0.1, "a weight")
    (Decimal('1.0000000000000001'), Decimal('0.1'))
    """
    if isinstance(value, bool):  # JSON's true is no number (Python would read it as 1)
        raise ValueError(f"{what} must be a number, got {value!r}")
    if isinstance(value, JsonFloat):
        text = value.text
    elif isinstance(value, float):  # from Python or a door that read a float: the shortest decimal it prints as
        if math.isnan(value):
            raise ValueError(f"{what} must be a number, got NaN (not a number)")
        text = repr(value)
    elif isinstance(value, int):
        if value.bit_length() > MAX_SIGNIFICANT * 4:  # 10**40 < 2**133
            raise ValueError(f"{what} is out of range (more than {MAX_SIGNIFICANT} digits)")
        return Decimal(value)
    elif isinstance(value, Decimal):
        text = str(value)
    elif isinstance(value, str):
        text = value.strip()
        if len(text) > 4 * MAX_SIGNIFICANT:
            raise ValueError(f"{what} is out of range (more than {MAX_SIGNIFICANT} digits)")
    else:
        raise ValueError(f"{what} must be a number, got {type(value).__name__}")
    try:
        number = Decimal(text)
    except InvalidOperation:
        raise ValueError(f"{what} must be a number, got {text[:40]!r}") from None
    if number.is_nan():
        raise ValueError(f"{what} must be a number, got NaN (not a number)")
    if number.is_infinite():
        raise ValueError(f"{what} must be a finite number, got {text[:40]}")
    digits = number.normalize().as_tuple().digits if number else ()
    if len(digits) > MAX_SIGNIFICANT or (number and abs(number.adjusted()) > MAX_EXPONENT):
        raise ValueError(f"{what} is out of range: at most {MAX_SIGNIFICANT} significant digits and "
                         f"magnitudes from 1e-{MAX_EXPONENT} to 1e{MAX_EXPONENT}, got {text[:40]}")
    return number


def weight_json(value: Decimal) -> float | str:
    """A weight as JSON: the number when a float holds it exactly as written (every weight a
    float could carry dumps as before), else its exact digits as text (read back by
    :func:`decimal_of`)."""
    number = float(value)
    return number if Decimal(repr(number)) == value else format(value, "f")


EXACT_PATTERN = r"^-?\d+(\.\d+)?$|^-?\d+/\d+$"
"""An exact number as :func:`exact_text` writes it: plain decimal digits, or ``p/q``."""


def exact_text(value: Fraction) -> str:
    """A rational as the user would write it, exactly: ``1.5``, ``200``, ``1/3`` (a terminating
    decimal in plain digits, no exponent: JSON number text; else ``p/q``).

    >>> exact_text(Fraction(3, 2)), exact_text(Fraction(200)), exact_text(Fraction(-1, 3)), exact_text(Fraction(45359237, 100))
    ('1.5', '200', '-1/3', '453592.37')
    """
    if value.denominator == 1:
        return str(value.numerator)
    den, twos, fives = value.denominator, 0, 0
    while den % 2 == 0:
        den, twos = den // 2, twos + 1
    while den % 5 == 0:
        den, fives = den // 5, fives + 1
    if den != 1:
        return f"{value.numerator}/{value.denominator}"
    digits = max(twos, fives)
    whole, frac = divmod(abs(value.numerator) * 10**digits // value.denominator, 10**digits)
    return f"{'-' if value < 0 else ''}{whole}.{str(frac).rjust(digits, '0')}"


def fraction_of_text(text: str) -> Fraction:
    """:func:`exact_text` read back; ``ValueError`` for anything else.

    >>> fraction_of_text("1.0000000000000001") - 1, fraction_of_text("-1/3")
    (Fraction(1, 10000000000000000), Fraction(-1, 3))
    """
    if len(text) > 200 or not _is_exact_text(text):
        raise ValueError(f"not an exact number (digits, or p/q): {text[:40]!r}")
    try:
        return Fraction(text)
    except ZeroDivisionError:
        raise ValueError(f"not an exact number: {text[:40]!r} divides by zero") from None


def _is_exact_text(text: str) -> bool:
    """Whether ``text`` matches :data:`EXACT_PATTERN` (digits with an optional point, or p/q)."""
    body = text[1:] if text.startswith("-") else text
    if "/" in body:
        num, _, den = body.partition("/")
        return num.isascii() and num.isdigit() and den.isascii() and den.isdigit()
    whole, point, frac = body.partition(".")
    return whole.isascii() and whole.isdigit() and (not point or (frac.isascii() and frac.isdigit()))


def exact_dumps(data: Any, **dumps: Any) -> str:
    """``json.dumps(data, **dumps)``, with every ``cost`` that has an exact sibling ``cost_exact``
    in plain digits written as that JSON number text, not through a float
    (``1.0000000000000001`` stays that, where ``json.dumps`` of the float prints ``1.0``).

    Why a second pass: neither ``json`` nor pydantic writes a number from given text, so each
    exact cost becomes a placeholder string (a random token of this call, so no data can
    collide with it) and the placeholder with its quotes is then replaced by the digits. A
    ``cost_exact`` of the form ``p/q`` (no finite decimal) leaves ``cost`` the nearest float,
    marked by ``cost_approximate`` (docs/dsl.md, "Hypotheses").

    >>> exact_dumps({"cost": 1.0, "cost_exact": "1.0000000000000001", "cost_approximate": False})
    '{"cost": 1.0000000000000001, "cost_exact": "1.0000000000000001", "cost_approximate": false}'
    """
    token = secrets.token_hex(8)
    found: list[str] = []

    def walk(value: Any) -> Any:
        if isinstance(value, dict):
            exact = value.get("cost_exact")
            out = {k: walk(v) for k, v in value.items()}
            if (isinstance(exact, str) and "/" not in exact and isinstance(value.get("cost"), (int, float))
                    and not isinstance(value.get("cost"), bool) and len(exact) <= 200 and _is_exact_text(exact)):
                out["cost"] = f"\u0000{token}:{len(found)}"
                found.append(exact)
            return out
        if isinstance(value, (list, tuple)):
            return [walk(v) for v in value]
        return value

    text = json.dumps(walk(data), **dumps)
    if not found:
        return text
    marker = f'"\\u0000{token}:'  # json.dumps escapes the NUL: the placeholder's text, quotes included
    head, *rest = text.split(marker)
    out = [head]
    for part in rest:  # each part starts with "N\"" then what follows the placeholder
        index, _, after = part.partition('"')
        out += [found[int(index)], after]
    return "".join(out)
