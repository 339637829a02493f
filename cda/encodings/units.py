"""Units through pint, with currencies added as dimensions of their own.

Metrics are whole numbers of their declared unit; event times are whole seconds. Every
constant is converted exactly (as a :class:`~fractions.Fraction`) into the unit of the
quantity it is compared with; two quantities of different dimensions raise ``UnitError``
naming both units.

Exact means exact: the registry runs in pint's ``non_int_type=Fraction`` mode, so pint reads
each definition (``pound = 0.45359237 kg``, ``mile = 1760 yard``) as a rational and multiplies
rationals; no factor ever passes through a float (1 lb is 45,359,237/100 mg, not a float
rounded back to a fraction).
"""

from __future__ import annotations

from fractions import Fraction
from functools import lru_cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pint loads (~0.2 s with its registry) on the first unit, not at start-up
    import pint

from cda.errors import UnitError

__all__ = ["registry", "check_unit", "factor", "affine", "dimension_name", "mismatch"]

#: currencies are not convertible into each other, so each gets its own dimension
CURRENCIES = ("USD", "EUR", "GBP", "JPY", "CHF", "CNY")


def _refused() -> tuple[type[Exception], ...]:
    """The conversions pint refuses between units of one dimension (``degC`` and ``delta_degC``)."""
    import pint

    return (pint.errors.DimensionalityError, pint.errors.OffsetUnitCalculusError)


@lru_cache(maxsize=1)
def registry() -> pint.UnitRegistry:
    """pint's registry in exact mode (every magnitude a Fraction), built once per process
    (~0.1 s, on the first unit: pint is not imported at start-up)."""
    import pint

    ureg: pint.UnitRegistry = pint.UnitRegistry(non_int_type=Fraction)
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


def _exact(magnitude: object, from_unit: str, to_unit: str) -> Fraction:
    """pint's magnitude as a Fraction; anything else (a float) would be a rounded factor."""
    if isinstance(magnitude, (int, Fraction)):
        return Fraction(magnitude)
    raise UnitError(f"pint gives no exact factor from {from_unit} to {to_unit} ({type(magnitude).__name__})")


def _magnitude(value: int, src: pint.Unit, dst: pint.Unit) -> object:
    try:
        return registry().Quantity(Fraction(value), src).to(dst).magnitude
    except _refused():  # an offset unit against a difference of them: the callers answer None
        raise
    except TypeError:  # a logarithmic unit (dB, Np, decade) converts through log(): no exact factor
        raise UnitError(
            f"no exact conversion from {src} to {dst}: a logarithmic unit converts through a logarithm, "
            "which is not a rational factor (compare it with quantities in the same unit)"
        ) from None


@lru_cache(maxsize=4096)
def factor(from_unit: str, to_unit: str) -> Fraction | None:
    """How many ``to_unit`` make one ``from_unit``; None when the dimensions differ.

    >>> factor("s", "ms"), factor("h", "s"), factor("USD", "s")
    (Fraction(1000, 1), Fraction(3600, 1), None)
    >>> factor("lb", "mg"), factor("nautical_mile", "ft")
    (Fraction(45359237, 100), Fraction(2315000, 381))
    """
    ureg = registry()
    src, dst = ureg.parse_units(from_unit), ureg.parse_units(to_unit)
    if ureg.Quantity(1, src).dimensionality != ureg.Quantity(1, dst).dimensionality:
        return None
    try:
        magnitude = _magnitude(1, src, dst)
    except _refused():
        return None
    return _exact(magnitude, from_unit, to_unit)


@lru_cache(maxsize=4096)
def affine(from_unit: str, to_unit: str) -> tuple[Fraction, Fraction] | None:
    """(a, b) with value_in_to = a * value_in_from + b; b is non-zero only for offset units.

    >>> affine("degC", "degF"), affine("degC", "K")
    ((Fraction(9, 5), Fraction(32, 1)), (Fraction(1, 1), Fraction(5463, 20)))
    >>> affine("USD", "s") is None, affine("delta_degC", "degC") is None
    (True, True)
    """
    ureg = registry()
    src, dst = ureg.parse_units(from_unit), ureg.parse_units(to_unit)
    if ureg.Quantity(1, src).dimensionality != ureg.Quantity(1, dst).dimensionality:
        return None
    try:
        zero = _magnitude(0, src, dst)
        one = _magnitude(1, src, dst)
    except _refused():  # same dimension, yet pint will not convert (a temperature and a difference of them)
        return None
    b = _exact(zero, from_unit, to_unit)
    a = _exact(one, from_unit, to_unit) - b
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
