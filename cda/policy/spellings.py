"""Texts that Cedar's extension constructors read as a given value.

A counterexample in which ``ip(s)``, ``decimal(s)``, ``datetime(s)`` or ``duration(s)`` reads an
unnamed string ``s`` gives ``s`` a text that reads as the value the model chose (docs/policy.md
"ip(s) and decimal(s) of a string that is not a literal"). Each generator yields the plainest
spelling first, then others (different strings of one value need different texts): a decimal's
and a duration's without end (leading zeros), a datetime's through its UTC offsets (at least
2,880 for every value), an address's through its forms.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterator
from typing import Any

from cda.policy.solving import evaluate
from cda.policy.symvalues import IPV, IntV, Leaf, Lin

__all__ = ["spellings", "civil_from_days"]

_DAY = 86_400_000
_YEAR0 = -62_167_219_200_000  # 0000-01-01T00:00:00Z, the earliest local time Cedar reads
_LAST = 253_402_300_799_999  # 9999-12-31T23:59:59.999Z, the latest


def spellings(name: str, value: Leaf | None, model: dict[str, Any]) -> Iterator[str]:
    """Texts that ``name``() reads as ``value`` (``None``: as an error), the plainest first."""
    def number(lin: Lin) -> int:
        return lin.const + sum(c * int(model[v]) for v, c in lin.terms)

    if value is None:
        n = 0
        while True:
            yield f"not {name} #{n}"
            n += 1
    if isinstance(value, IntV) and value.kind == "datetime":
        yield from _datetime_texts(number(value.lin))
        return
    if isinstance(value, IntV) and value.kind == "duration":
        yield from _duration_texts(number(value.lin))
        return
    if isinstance(value, IntV):  # decimal: its digits, with up to four decimals, then leading zeros
        scaled = number(value.lin)
        sign = "-" if scaled < 0 else ""
        whole, frac = divmod(abs(scaled), 10_000)
        digits = f"{frac:04d}".rstrip("0") or "0"
        spelled = [f"{digits}{'0' * k}" for k in range(5 - len(digits))]
        zeros = 0
        while True:
            for fr in spelled:
                yield f"{sign}{'0' * zeros}{whole}.{fr}"
            zeros += 1
    assert isinstance(value, IPV)
    v6, addr, prefix = bool(evaluate(value.v6, model)), number(value.addr), number(value.prefix)
    if v6:
        full = ipaddress.IPv6Address(addr)
        forms = [full.exploded, full.compressed, ":".join(f"{int(g, 16):x}" for g in full.exploded.split(":"))]
        forms += [f.upper() for f in forms]
    else:
        forms = [str(ipaddress.IPv4Address(addr))]
    for form in dict.fromkeys(forms):
        yield f"{form}/{prefix}"
        if prefix == (128 if v6 else 32):
            yield form




def civil_from_days(z: int) -> tuple[int, int, int]:
    """(year, month, day) of day ``z`` since 1970-01-01 (proleptic Gregorian; H. Hinnant's
    algorithm, the inverse of :func:`cda.policy.entities._days_from_civil`)."""
    z += 719468
    era = z // 146097  # floor division: the C version's adjustment for negative days is built in
    doe = z - era * 146097
    yoe = (doe - doe // 1460 + doe // 36524 - doe // 146096) // 365
    y = yoe + era * 400
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    d = doy - (153 * mp + 2) // 5 + 1
    m = mp + 3 if mp < 10 else mp - 9
    return y + (m <= 2), m, d


def _local_texts(local: int, zone: str) -> Iterator[str]:
    """The spellings of local time ``local`` (ms) with zone suffix ``zone`` (``Z``, ``+hhmm``)."""
    days, ms = divmod(local, _DAY)
    y, mo, d = civil_from_days(days)
    date = f"{y:04d}-{mo:02d}-{d:02d}"
    hh, rest = divmod(ms, 3_600_000)
    mi, rest = divmod(rest, 60_000)
    ss, milli = divmod(rest, 1000)
    if ms == 0 and zone == "Z":
        yield date
    if milli == 0:
        yield f"{date}T{hh:02d}:{mi:02d}:{ss:02d}{zone}"
    yield f"{date}T{hh:02d}:{mi:02d}:{ss:02d}.{milli:03d}{zone}"


def _datetime_texts(v: int) -> Iterator[str]:
    """Texts ``datetime()`` reads as ``v`` (ms since the epoch, UTC): in UTC when its local
    time is a year Cedar reads, then with each offset (``local = v + offset``) that keeps it so."""
    if _YEAR0 <= v <= _LAST:
        yield from _local_texts(v, "Z")
    for minutes in range(0, 24 * 60):
        for sign in (1, -1):
            local = v + sign * minutes * 60_000
            if _YEAR0 <= local <= _LAST:
                yield from _local_texts(local, f"{'+' if sign > 0 else '-'}{minutes // 60:02d}{minutes % 60:02d}")


def _duration_texts(v: int) -> Iterator[str]:
    """Texts ``duration()`` reads as ``v`` (ms): in units (``1d2h``), in milliseconds, then
    with leading zeros."""
    sign = "-" if v < 0 else ""
    a = abs(v)
    units = []
    rest = a
    for unit, size in (("d", _DAY), ("h", 3_600_000), ("m", 60_000), ("s", 1000), ("ms", 1)):
        q, rest = divmod(rest, size)
        if q:
            units.append(f"{q}{unit}")
    if units and units != [f"{a}ms"]:
        yield sign + "".join(units)
    zeros = 0
    while True:
        yield f"{sign}{'0' * zeros}{a}ms"
        zeros += 1
