"""JSON numbers read exactly: a number with a fraction or an exponent keeps the digits written.

``json.loads`` turns ``1.0000000000000001`` into the float ``1.0``; an Action's soft weight read
that way tied with a weight of 1 and the run abstained where the same problem in the DSL ranks
exactly (docs/actions.md, "Inputs"). A door that reads a client's JSON passes
:func:`exact_float` as ``parse_float``: every consumer still sees a float, and a field that must be
exact (:class:`~cda.contracts.action.SoftConstraint`'s ``weight``) reads the digits from
:func:`decimal_of`.
"""

from __future__ import annotations

import math
from decimal import Decimal, InvalidOperation
from typing import Any

__all__ = ["DECIMAL_PATTERN", "JsonFloat", "decimal_of", "exact_float", "weight_json"]

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
