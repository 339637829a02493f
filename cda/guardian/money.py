"""Exact money for the guardian: amounts are :class:`~decimal.Decimal`, never ``float``.

A cost estimate or a budget travels from a JSON file to the ledger's comparison without ever
being a binary float: JSON text is read with :func:`load_exact` (every number with a fraction or
an exponent becomes a ``Decimal`` of exactly the digits written), an amount is checked by
:func:`amount` (whole numbers and ``Decimal`` only; a ``float``, ``bool``, string, NaN, infinity,
a negative, more than :data:`MAX_AMOUNT` or more than :data:`MAX_PLACES` decimal places is an
:class:`~cda.errors.OptionError` naming the field), and written back by :func:`dump_exact`, which
prints a ``Decimal`` as the JSON number it is.

Amounts are normalised (``1.50`` and ``1.5`` are one amount, ``1E+2`` is ``100``), so a signature
over an amount does not depend on how it was written.

>>> amount("cost_estimate", load_exact('{"c": 0.1}', "x.json")["c"]) + Decimal("0.2") == Decimal("0.3")
True
>>> amount("cost_estimate", 0.1)
Traceback (most recent call last):
...
cda.errors.OptionError: cost_estimate must be an exact amount (a JSON number, an int or a Decimal), not a float (0.1)
>>> dump_exact({"amount": Decimal("12.50"), "n": 3})
'{"amount":12.50,"n":3}'
"""

from __future__ import annotations

import json
import string
from datetime import datetime
from decimal import Decimal, InvalidOperation
from enum import Enum
from typing import Annotated, Any

from pydantic import BeforeValidator, ValidationInfo

from cda.errors import CDAError, OptionError

__all__ = [
    "MAX_AMOUNT",
    "MAX_PLACES",
    "CURRENCY_PATTERN",
    "Amount",
    "amount",
    "canonical",
    "currency",
    "dump_exact",
    "load_exact",
    "plain",
    "text",
]

MAX_AMOUNT = Decimal(10) ** 15
"""The largest amount or budget (a quadrillion units of any currency): far past any real spend,
and with :data:`MAX_PLACES` still only 25 digits, which ``Decimal``'s default 28-digit context adds
and subtracts exactly."""

MAX_PLACES = 9
"""Decimal places an amount may have (fiat currencies use 0 to 3, a satoshi is 1e-8 BTC; also the
limit of the gate's cost estimates, :data:`cda.guardian.proposal.MAX_COST_PLACES`)."""

_LIMIT_IN_WORDS = "a quadrillion, 10 to the power 15"  # MAX_AMOUNT as a refusal says it

CURRENCY_PATTERN = r"^[A-Z][A-Z0-9]{2,9}$"
"""What :func:`currency` accepts, as the models' and schemas' pattern (actions, tasks, ledger entries)."""

_CURRENCY_CHARS = frozenset(string.ascii_uppercase + string.digits)


def canonical(value: Decimal) -> Decimal:
    """``value`` without trailing zeros or an exponent: ``1.50`` -> ``1.5``, ``1E+2`` -> ``100``."""
    if value == 0:
        return Decimal(0)
    return Decimal(format(value.normalize(), "f"))


def amount(name: str, value: object) -> Decimal:
    """``value`` as an exact, checked amount (see the module's docstring); ``name`` names the
    field in the refusal."""
    if isinstance(value, float):
        raise OptionError(f"{name} must be an exact amount (a JSON number, an int or a Decimal), not a float ({value!r})")
    if isinstance(value, bool) or not isinstance(value, int | Decimal):
        raise OptionError(f"{name} must be an exact amount (a JSON number, an int or a Decimal), not {_shown(value)}")
    if isinstance(value, int) and value.bit_length() > 64:
        raise OptionError(f"{name} must be at most {MAX_AMOUNT:,} ({_LIMIT_IN_WORDS}), "
                          f"not a whole number of {value.bit_length()} bits")
    number = Decimal(value)
    if not number.is_finite():
        raise OptionError(f"{name} must be a finite amount, not {value}")
    if number < 0:
        raise OptionError(f"{name} must be 0 or more, not {value}")
    if number > MAX_AMOUNT:
        raise OptionError(f"{name} must be at most {MAX_AMOUNT:,} ({_LIMIT_IN_WORDS}), not {_shown(value)}")
    number = canonical(number)
    exponent = number.as_tuple().exponent
    if isinstance(exponent, int) and -exponent > MAX_PLACES:
        raise OptionError(f"{name} may have at most {MAX_PLACES} decimal places, not {-exponent} ({_shown(value)})")
    return number


def currency(name: str, value: object) -> str:
    """A currency code: an upper-case letter then 2 to 9 upper-case letters or digits (``USD``, ``USDC``)."""
    if not (isinstance(value, str) and 3 <= len(value) <= 10 and value[0] in string.ascii_uppercase
            and set(value) <= _CURRENCY_CHARS):
        raise OptionError(f"{name} must be a currency code such as USD or USDC (A-Z, 0-9, 3 to 10 long), "
                          f"not {_shown(value)}")
    return value


def text(value: Decimal) -> str:
    """How an amount is stored and signed: its canonical digits, never an exponent."""
    return format(canonical(value), "f")


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number JSON allows")


def load_exact(source: str, where: str, error: type[CDAError] = CDAError) -> Any:
    """``source`` decoded as JSON, every non-integer number a ``Decimal`` of the digits written
    (``NaN``/``Infinity`` refused); a failure is an ``error`` naming ``where`` (and line:column)."""
    try:
        return json.loads(source, parse_float=Decimal, parse_constant=_refuse_constant)
    except json.JSONDecodeError as exc:
        raise error(f"{where}:{exc.lineno}:{exc.colno}: not valid JSON: {exc.msg}") from None
    except RecursionError:
        raise error(f"{where}: not valid JSON: nested too deeply to read") from None
    except (ValueError, InvalidOperation) as exc:  # NaN, Infinity, an integer past Python's digit limit
        raise error(f"{where}: not valid JSON: {exc}") from None


def dump_exact(value: Any) -> str:
    """Canonical JSON (sorted keys, no spaces, as :func:`cda.contracts.receipt.canonical_json`)
    in which a ``Decimal`` is written as the number it is; a ``float`` is refused (it would not be
    exact)."""
    if isinstance(value, dict):
        items = sorted(value.items())
        return "{" + ",".join(json.dumps(str(k), ensure_ascii=False) + ":" + dump_exact(v) for k, v in items) + "}"
    if isinstance(value, list | tuple):
        return "[" + ",".join(dump_exact(v) for v in value) + "]"
    if isinstance(value, Decimal):
        if not value.is_finite():
            raise ValueError(f"{value} is not a JSON number")
        return format(value, "f")
    if isinstance(value, float):
        raise TypeError(f"{value!r}: a float has no exact place in the guardian's JSON; use Decimal")
    return json.dumps(value, ensure_ascii=False)


def _shown(value: object) -> str:
    """How a refused value is quoted: a number as its digits (``1E+400``, never ``Decimal('1E+400')``),
    with its size in words when it is past the limit by far; anything else by repr; long ones cut."""
    if isinstance(value, Decimal | int) and not isinstance(value, bool):
        shown = str(value)
        if isinstance(value, Decimal) and value.is_finite() and value != 0 and abs(value) > MAX_AMOUNT:
            shown += f" (about 10 to the power {value.adjusted()})"
    else:
        shown = repr(value)
    return shown if len(shown) <= 60 else shown[:20] + "…" + shown[-10:]


def _amount_field(value: object, info: ValidationInfo) -> Decimal:
    return amount(info.field_name or "amount", value)


Amount = Annotated[Decimal, BeforeValidator(_amount_field)]
"""A pydantic field type for an exact amount, checked by :func:`amount` (the field's name in the refusal)."""


def plain(value: Any) -> Any:
    """A model dump (``model_dump()``, Python mode) made JSON-ready for :func:`dump_exact`:
    datetimes as ISO 8601 text, enums as their values, ``Decimal`` kept exact."""
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, Enum):
        return value.value
    return value
