"""Every numeric option of CDA checked in one place: timeouts, budgets, seeds, ports, sizes, counts.

The CLI (``cda.cli.main`` turns each checker into an argparse type), the Action's JSON
fields (``cda.contracts.action``'s validators) and the engine's options
(``cda.solver.engine.EngineOptions``) all call these checkers, so one value is accepted or
refused the same way whichever door it comes in by, and the refusal is one
:class:`~cda.errors.OptionError` that names the option or field, what was given and what is
allowed.

Rules, the same everywhere:

* whole numbers are Python ``int`` (never ``bool``, never a float such as ``3.0``), within a
  closed range whose ends the message gives;
* seconds are real numbers, never NaN and never negative; ``+inf`` means *no limit* only where
  an option says so (:func:`seconds` with ``unlimited=True``); a huge finite value is accepted
  there as well (clingo is waited on in slices of a day and z3's timeout is clamped to its
  32-bit range, see ``cda.solver.clingo_backend._wait``), while options that must stay finite
  have an upper bound;
* counts have an upper bound that the solvers can still represent (signed 32-bit).

>>> seconds("--timeout", float("inf"))
inf
>>> whole("--port", 70000, low=0, high=MAX_PORT)
Traceback (most recent call last):
...
cda.errors.OptionError: --port must be a whole number from 0 to 65535, not 70000
"""

from __future__ import annotations

import math
from decimal import Decimal
from fractions import Fraction

from cda.errors import OptionError

__all__ = [
    "MAX_COUNT",
    "MAX_FINITE_SECONDS",
    "MAX_PORT",
    "MAX_SAMPLES",
    "MAX_SEED",
    "MIN_SAMPLES",
    "MAX_VECTORS",
    "Z3_MAX_TIMEOUT_MS",
    "z3_timeout_ms",
    "count",
    "port",
    "probability",
    "samples",
    "seconds",
    "seed",
    "vectors",
    "whole",
]

MAX_SEED = 2**32 - 1  # clingo's --seed and z3's random_seed are unsigned 32-bit numbers
MAX_COUNT = 2**31 - 1  # clingo's model counts and z3's limits are signed 32-bit numbers
MAX_PORT = 65535  # a TCP port; 0 asks the system for a free one
MAX_FINITE_SECONDS = 10**6  # about 11.6 days: the longest limit that must stay finite (a sandbox, a socket)
#: ``cda probe --inject --vectors``: each vector is one more copy of the circuit (c17 with
#: 100,000 of them: 9.6 s and 470 MB)
MAX_VECTORS = 100_000
#: z3's timeout is an unsigned 32-bit count of milliseconds (a larger one wraps round: 2**32 + 50
#: ms times out after 50 ms); its largest value, about 49.7 days, is also z3's "no timeout"
Z3_MAX_TIMEOUT_MS = 2**32 - 1


def z3_timeout_ms(left: float) -> int:
    """z3's ``timeout`` for ``left`` seconds still to go (positive): whole milliseconds from 1 to
    :data:`Z3_MAX_TIMEOUT_MS`, clamped *before* the seconds become milliseconds, so a huge finite
    budget (``--timeout 1e306``, which an unlimited option accepts) is z3's longest wait rather
    than an infinity that ``int`` cannot take.

    >>> z3_timeout_ms(1e306) == Z3_MAX_TIMEOUT_MS, z3_timeout_ms(0.0001), z3_timeout_ms(2.5)
    (True, 1, 2500)
    """
    return max(1, int(min(left, Z3_MAX_TIMEOUT_MS / 1000) * 1000))
#: Monte Carlo draws of the causal simulator (docs/causal.md): a sample variance needs two
MIN_SAMPLES, MAX_SAMPLES = 2, 1_000_000


def whole(name: str, value: object, *, low: int, high: int | None = None, why: str = "") -> int:
    """``value`` as a whole number in ``[low, high]`` (``high=None``: no upper end); ``why`` is
    added to the message in parentheses.

    >>> whole("--top", 0, low=1)
    Traceback (most recent call last):
    ...
    cda.errors.OptionError: --top must be a whole number, 1 or more, not 0
    """
    if isinstance(value, bool) or not isinstance(value, int) or value < low or (high is not None and value > high):
        allowed = f" from {low} to {high}" if high is not None else f", {low} or more"
        because = f" ({why})" if why else ""
        raise OptionError(f"{name} must be a whole number{allowed}{because}, not {_shown(value)}")
    return value


def count(name: str, value: object, *, low: int = 1) -> int:
    """A count or size: a whole number from ``low`` (default 1) to :data:`MAX_COUNT`."""
    return whole(name, value, low=low, high=MAX_COUNT)


MIN_REPLY_BYTES, MAX_REPLY_BYTES = 1024, 1_000_000_000
"""The range of ``max_reply_bytes``/``--max-reply-bytes``: what one MCP server's reply may hold."""


def reply_bytes(name: str, value: object) -> int:
    """The cap of one MCP reply, in bytes (:data:`MIN_REPLY_BYTES` to :data:`MAX_REPLY_BYTES`).

    >>> reply_bytes("--max-reply-bytes", 10)
    Traceback (most recent call last):
    ...
    cda.errors.OptionError: --max-reply-bytes must be a whole number from 1024 to 1000000000, not 10
    """
    return whole(name, value, low=MIN_REPLY_BYTES, high=MAX_REPLY_BYTES)


def samples(name: str, value: object) -> int:
    """Monte Carlo draws of the causal simulator: :data:`MIN_SAMPLES` to :data:`MAX_SAMPLES`.

    >>> samples("--samples", 100_000_000)
    Traceback (most recent call last):
    ...
    cda.errors.OptionError: --samples must be a whole number from 2 to 1000000 (a variance needs two draws), not 100000000
    """
    return whole(name, value, low=MIN_SAMPLES, high=MAX_SAMPLES, why="a variance needs two draws")


def seed(name: str, value: object) -> int:
    """A solver seed: a whole number from 0 to :data:`MAX_SEED`.

    >>> seed("seed", -5)
    Traceback (most recent call last):
    ...
    cda.errors.OptionError: seed must be a whole number from 0 to 4294967295 (both solvers take an unsigned 32-bit seed), not -5
    """
    return whole(name, value, low=0, high=MAX_SEED, why="both solvers take an unsigned 32-bit seed")


def port(name: str, value: object) -> int:
    """A TCP port, 0 to 65535 (0: any free port)."""
    return whole(name, value, low=0, high=MAX_PORT)


def seconds(
    name: str, value: object, *, unlimited: bool = True, positive: bool = False, high: float = MAX_FINITE_SECONDS
) -> float:
    """A duration in seconds: a real number, 0 or more (more than 0 with ``positive``), returned
    as a float (a whole number past the float range is ``inf``).

    With ``unlimited`` (the default), ``+inf`` means no limit and any finite value is accepted;
    without it the value must be finite and at most ``high`` (default :data:`MAX_FINITE_SECONDS`).

    >>> seconds("budgets.wall", float("nan"), positive=True)
    Traceback (most recent call last):
    ...
    cda.errors.OptionError: budgets.wall must be a number of seconds, more than 0 (inf for no limit), not nan
    """
    number = isinstance(value, int | float) and not isinstance(value, bool)
    x = _real(value) if isinstance(value, int | float) and number else math.nan
    ok = number and not math.isnan(x) and (x > 0 if positive else x >= 0)
    if ok and not unlimited:
        ok = x <= min(high, MAX_FINITE_SECONDS)
    if not ok:
        least = "more than 0" if positive else "0 or more"
        allowed = "(inf for no limit)" if unlimited else f"and at most {min(high, MAX_FINITE_SECONDS)}"
        raise OptionError(f"{name} must be a number of seconds, {least} {allowed}, not {_shown(value)}")
    return x


def _real(value: int | float) -> float:
    """``value`` as a float; a whole number past the float range is infinite (no clock reaches it)."""
    try:
        return float(value)
    except OverflowError:
        return math.inf if value > 0 else -math.inf


def vectors(name: str, value: object) -> int:
    """How many test vectors a simulated probing loop draws: 1 to :data:`MAX_VECTORS`."""
    return whole(name, value, low=1, high=MAX_VECTORS, why="each vector is one more copy of the circuit")


def probability(name: str, value: object) -> float:
    """A probability strictly between 0 and 1 (a per-gate failure rate: 0 or 1 would be certainty),
    checked exactly: a ``Decimal`` or ``Fraction`` (the CLI passes the text read as a ``Decimal``)
    is compared as written, not after rounding to a float, and one that a float cannot hold
    strictly inside (0, 1) is refused in words rather than computed with as 0 or 1.

    >>> probability("--prior", 1.0)
    Traceback (most recent call last):
    ...
    cda.errors.OptionError: --prior must be a probability strictly between 0 and 1, not 1.0
    >>> probability("--prior", Decimal("1e-400"))
    Traceback (most recent call last):
    ...
    cda.errors.OptionError: --prior 1E-400 is too close to 0 to compute with (the least a float holds is about 4.9e-324)
    """
    exact = None
    if isinstance(value, int | float | Decimal | Fraction) and not isinstance(value, bool) and _finite(value):
        exact = Fraction(value)
    if exact is None or not 0 < exact < 1:
        raise OptionError(f"{name} must be a probability strictly between 0 and 1, not {_shown(value)}")
    near = float(exact)
    if near == 0.0:
        raise OptionError(f"{name} {_shown(value)} is too close to 0 to compute with "
                          "(the least a float holds is about 4.9e-324)")
    if near == 1.0:
        raise OptionError(f"{name} {_shown(value)} is too close to 1 to compute with "
                          "(the largest float below 1 is 1 - 1.1e-16)")
    return near


def _finite(value: int | float | Decimal | Fraction) -> bool:
    if isinstance(value, Decimal):
        return value.is_finite()
    return not isinstance(value, float) or math.isfinite(value)


def _shown(value: object) -> str:
    """How a refused value is quoted: numbers as written, anything else by repr, long ones cut."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 100:
        return f"a whole number of about {int(value.bit_length() * math.log10(2)) + 1} digits"
    number = isinstance(value, int | float | Decimal | Fraction) and not isinstance(value, bool)
    text = str(value) if number else repr(value)
    return text if len(text) <= 40 else text[:20] + "…" + text[-10:]
