"""Which runs a report covers (``cda metrics --since``), and the exact statistics it prints.

*The window.* ``--since`` takes either an ISO-8601 instant (``2026-11-24``,
``2026-11-24T20:00``, ``2026-11-24T20:00:00+01:00``, ``...Z``; one without an offset is UTC) or
an age counted back from now: a whole number and a unit, ``s`` (seconds), ``m`` (minutes),
``h`` (hours), ``d`` (days) or ``w`` (weeks), such as ``90m`` or ``7d``. An age is at least one
second and at most ten years; an instant may not lie in the future. A run belongs to the window
when its terminal event was emitted at or after the instant.

*Percentages* are printed from a ratio's two integers, rounded down, so a coverage of 94.999%
never shows as 95.00%.

>>> since_instant("2026-11-24T20:00:00Z", now=2e9)
1795550400.0
>>> since_instant("90m", now=10_000.0)
4600.0
"""

from __future__ import annotations

import math
from datetime import UTC, datetime

from cda.errors import OptionError

__all__ = ["MAX_AGE_S", "UNITS", "percent", "since_instant"]

UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
"""The units of a relative ``--since``, in seconds."""

MAX_AGE_S = 3650 * 86400
"""The oldest a relative ``--since`` may reach back: ten years."""

_FUTURE_SLACK_S = 60.0  # clocks of two machines disagree a little; a minute ahead is still "now"


def _age(text: str) -> int | None:
    """``text`` as an age in seconds when it is one (1 to 12 ASCII digits, then a unit), else None.

    >>> _age("90m"), _age("7 d"), _age("1.5h"), _age("h")
    (5400, 604800, None, None)
    """
    number, unit = text[:-1].rstrip(), text[-1:]
    if unit not in UNITS or not 1 <= len(number) <= 12 or not (number.isascii() and number.isdigit()):
        return None
    return int(number) * UNITS[unit]


def since_instant(text: str, *, now: float) -> float:
    """The Unix time ``--since text`` names (see the module's docstring); an
    :class:`~cda.errors.OptionError` that names ``--since`` and the accepted forms otherwise."""
    raw = text.strip()
    forms = "give an ISO-8601 time (2026-11-24T20:00Z; no offset means UTC) or an age such as 90m, 24h, 7d"
    age = _age(raw.lower())
    if age is not None:
        seconds = age
        if not 1 <= seconds <= MAX_AGE_S:
            raise OptionError(f"--since {text!r}: an age must be from 1 second to 10 years")
        return now - seconds
    if not raw or len(raw) > 64 or raw[0] in "+-":
        raise OptionError(f"--since {text[:64]!r}: not a time; {forms}")
    try:
        moment = datetime.fromisoformat(raw[:-1] + "+00:00" if raw[-1:] in "zZ" else raw)
    except ValueError:
        raise OptionError(f"--since {text[:64]!r}: not a time; {forms}") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    instant = moment.timestamp()
    if not math.isfinite(instant) or instant > now + _FUTURE_SLACK_S:
        raise OptionError(f"--since {text!r}: lies in the future")
    return instant


def percent(numerator: int, denominator: int) -> str:
    """``numerator / denominator`` as a percentage with two decimals, rounded down (so 94.999...%
    is never shown as 95.00%), or ``n/a`` for no denominator.

    >>> percent(19, 20), percent(2, 3), percent(0, 0)
    ('95.00%', '66.66%', 'n/a')
    """
    if denominator == 0:
        return "n/a"
    hundredths = numerator * 10000 // denominator
    return f"{hundredths // 100}.{hundredths % 100:02d}%"
