"""Units through pint, with currencies added as dimensions of their own.

Metrics are whole numbers of their declared unit; event times are whole seconds. Every
constant is converted exactly (as a :class:`~fractions.Fraction`) into the unit of the
quantity it is compared with; two quantities of different dimensions raise ``UnitError``
naming both units.
"""

from __future__ import annotations

from fractions import Fraction
from functools import lru_cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pint loads (~0.2 s with its registry) on the first unit, not at start-up
    import pint

__all__ = ["registry", "check_unit", "factor", "affine", "dimension_name", "mismatch"]

#: currencies are not convertible into each other, so each gets its own dimension
CURRENCIES = ("USD", "EUR", "GBP", "JPY", "CHF", "CNY")


def _refused() -> tuple[type[Exception], ...]:
    """The conversions pint refuses between units of one dimension (``degC`` and ``delta_degC``)."""
    import pint

    return (pint.errors.DimensionalityError, pint.errors.OffsetUnitCalculusError)


@lru_cache(maxsize=1)
def registry() -> pint.UnitRegistry:
    """The one pint registry of the process (built once: ~0.1 s), with a dimension per currency."""
    import pint

    ureg: pint.UnitRegistry = pint.UnitRegistry()
    for code in CURRENCIES:
        ureg.define(f"{code} = [currency_{code}]")
    return ureg


def check_unit(unit: str) -> str | None:
    """None when ``unit`` is a unit pint knows, else a short reason."""
    import pint

    try:
        registry().parse_units(unit)
    except (pint.errors.UndefinedUnitError, pint.errors.DefinitionSyntaxError, AttributeError, ValueError):
        return f"unknown unit '{unit}'"
    except Exception as exc:  # pint raises a zoo of parse errors for odd strings
        return f"cannot read unit '{unit}' ({type(exc).__name__})"
    return None


@lru_cache(maxsize=4096)
def factor(from_unit: str, to_unit: str) -> Fraction | None:
    """How many ``to_unit`` make one ``from_unit``; None when the dimensions differ.

    >>> factor("s", "ms"), factor("h", "s"), factor("USD", "s")
    (Fraction(1000, 1), Fraction(3600, 1), None)
    """
    ureg = registry()
    src, dst = ureg.parse_units(from_unit), ureg.parse_units(to_unit)
    if ureg.Quantity(1, src).dimensionality != ureg.Quantity(1, dst).dimensionality:
        return None
    try:
        magnitude = ureg.Quantity(1, src).to(dst).magnitude
    except _refused():
        return None
    return Fraction(magnitude).limit_denominator(10**12)


@lru_cache(maxsize=4096)
def affine(from_unit: str, to_unit: str) -> tuple[Fraction, Fraction] | None:
    """(a, b) with value_in_to = a * value_in_from + b; b is non-zero only for offset units.

    >>> affine("degC", "degF")
    (Fraction(9, 5), Fraction(32, 1))
    >>> affine("USD", "s") is None, affine("delta_degC", "degC") is None
    (True, True)
    """
    ureg = registry()
    src, dst = ureg.parse_units(from_unit), ureg.parse_units(to_unit)
    if ureg.Quantity(1, src).dimensionality != ureg.Quantity(1, dst).dimensionality:
        return None
    try:
        zero = ureg.Quantity(0, src).to(dst).magnitude
        one = ureg.Quantity(1, src).to(dst).magnitude
    except _refused():  # same dimension, yet pint will not convert (a temperature and a difference of them)
        return None
    b = Fraction(zero).limit_denominator(10**12)
    a = Fraction(one).limit_denominator(10**12) - b
    return a, b


def dimension_name(unit: str) -> str:
    """A readable dimension for messages: ``[time]``, ``[currency_USD]``."""
    return str(registry().Quantity(1, registry().parse_units(unit)).dimensionality)


def mismatch(unit: str, other: str) -> str:
    """Why ``unit`` does not convert into ``other``, for a message that names both.

    >>> mismatch("USD", "s")
    'USD is [currency_USD] and s is [time]'
    >>> mismatch("delta_degC", "degC")
    'delta_degC and degC are both [temperature], but pint does not convert between a temperature and a difference of temperatures'
    """
    a, b = dimension_name(unit), dimension_name(other)
    if a != b:
        return f"{unit} is {a} and {other} is {b}"
    return (
        f"{unit} and {other} are both {a}, but pint does not convert between a temperature and a difference of "
        "temperatures"
    )
