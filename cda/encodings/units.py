"""Units through pint, with currencies added as dimensions of their own.

Metrics are whole numbers of their declared unit; event times are whole seconds. Every
constant is converted exactly (as a :class:`~fractions.Fraction`) into the unit of the
quantity it is compared with; two quantities of different dimensions raise ``UnitError``
naming both units.
"""

from __future__ import annotations

from fractions import Fraction
from functools import lru_cache

import pint

__all__ = ["registry", "check_unit", "factor", "affine", "dimension_name"]

#: currencies are not convertible into each other, so each gets its own dimension
CURRENCIES = ("USD", "EUR", "GBP", "JPY", "CHF", "CNY")


@lru_cache(maxsize=1)
def registry() -> pint.UnitRegistry:
    ureg: pint.UnitRegistry = pint.UnitRegistry()
    for code in CURRENCIES:
        ureg.define(f"{code} = [currency_{code}]")
    return ureg


def check_unit(unit: str) -> str | None:
    """None when ``unit`` is a unit pint knows, else a short reason."""
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
    magnitude = ureg.Quantity(1, src).to(dst).magnitude
    return Fraction(magnitude).limit_denominator(10**12)


@lru_cache(maxsize=4096)
def affine(from_unit: str, to_unit: str) -> tuple[Fraction, Fraction] | None:
    """(a, b) with value_in_to = a * value_in_from + b; b is non-zero only for offset units.

    >>> affine("degC", "degF")
    (Fraction(9, 5), Fraction(32, 1))
    >>> affine("USD", "s") is None
    True
    """
    ureg = registry()
    src, dst = ureg.parse_units(from_unit), ureg.parse_units(to_unit)
    if ureg.Quantity(1, src).dimensionality != ureg.Quantity(1, dst).dimensionality:
        return None
    zero = ureg.Quantity(0, src).to(dst).magnitude
    one = ureg.Quantity(1, src).to(dst).magnitude
    b = Fraction(zero).limit_denominator(10**12)
    a = Fraction(one).limit_denominator(10**12) - b
    return a, b


def dimension_name(unit: str) -> str:
    """A readable dimension for messages: ``[time]``, ``[currency_USD]``."""
    return str(registry().Quantity(1, registry().parse_units(unit)).dimensionality)
