"""Cedar's runtime values, as plain immutable Python objects.

Booleans are ``bool``, longs ``int`` (always within 64 bits), strings ``str``; entities are
:class:`EntityUID`; ``decimal`` and ``ip`` values are :class:`Decimal` and :class:`IPAddr`; sets
and records are :class:`CSet` and :class:`CRecord`. Python's ``True == 1`` would make a set hold
``true`` and ``1`` as one element, so sets and equality go through :func:`canon`, which tags
every value with its Cedar type.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "EntityUID",
    "Decimal",
    "IPAddr",
    "CSet",
    "CRecord",
    "Datetime",
    "Duration",
    "Value",
    "canon",
    "cedar_eq",
    "type_name",
    "LONG_MIN",
    "LONG_MAX",
    "to_json",
]

LONG_MIN, LONG_MAX = -(2**63), 2**63 - 1


@dataclass(frozen=True, order=True)
class EntityUID:
    """An entity's type (with its namespace, ``A::B``) and id."""

    type: str
    id: str

    def __str__(self) -> str:
        return f"{self.type}::{_quote(self.id)}"


@dataclass(frozen=True)
class Decimal:
    """A Cedar ``decimal``: a 64-bit integer count of ten-thousandths."""

    scaled: int

    def __str__(self) -> str:
        sign = "-" if self.scaled < 0 else ""
        whole, frac = divmod(abs(self.scaled), 10_000)
        return f'decimal("{sign}{whole}.{frac:04d}")'


@dataclass(frozen=True)
class IPAddr:
    """A Cedar ``ipaddr``: an IPv4 or IPv6 address with its prefix length (a range). Host bits
    are kept, as in Cedar: ``ip("10.1.2.3/8") != ip("10.0.0.0/8")``."""

    version: int
    addr: int
    prefix: int
    text: str = field(compare=False)

    def bounds(self) -> tuple[int, int]:
        """The first and last address of the range."""
        bits = 32 if self.version == 4 else 128
        host = bits - self.prefix
        low = (self.addr >> host) << host
        return low, low | ((1 << host) - 1)

    def __str__(self) -> str:
        return f'ip("{self.text}")'


@dataclass(frozen=True)
class Datetime:
    """A Cedar ``datetime``: milliseconds since the Unix epoch (64-bit)."""

    ms: int

    def iso(self) -> str:
        from datetime import UTC, datetime, timedelta

        try:
            t = datetime(1970, 1, 1, tzinfo=UTC) + timedelta(milliseconds=self.ms)
        except OverflowError:
            return f"{self.ms}ms since the epoch"
        # the year always in four digits, as Cedar reads it (strftime's %Y writes year 1 as "1")
        return f"{t.year:04d}-" + t.strftime("%m-%dT%H:%M:%S.") + f"{t.microsecond // 1000:03d}Z"

    def __str__(self) -> str:
        return f'datetime("{self.iso()}")'


@dataclass(frozen=True)
class Duration:
    """A Cedar ``duration``: a signed count of milliseconds (64-bit)."""

    ms: int

    def __str__(self) -> str:
        return f'duration("{self.ms}ms")'


class CSet:
    """A Cedar set: elements kept by their tagged canonical form (so ``true`` and ``1`` differ)."""

    __slots__ = ("items", "_keys")

    def __init__(self, values: Iterable[Value]) -> None:
        items: dict[Any, Value] = {}
        for v in values:
            items.setdefault(canon(v), v)
        self.items = items
        self._keys = frozenset(items)

    def __iter__(self) -> Iterator[Value]:
        return iter(self.items.values())

    def __len__(self) -> int:
        return len(self.items)

    def __contains__(self, v: object) -> bool:
        return canon(v) in self.items  # type: ignore[arg-type]

    def __eq__(self, other: object) -> bool:
        return isinstance(other, CSet) and self._keys == other._keys

    def __hash__(self) -> int:
        return hash(self._keys)

    def __repr__(self) -> str:
        return "[" + ", ".join(map(repr, self.items.values())) + "]"


class CRecord(Mapping[str, "Value"]):
    """A Cedar record: attribute names to values."""

    __slots__ = ("attrs", "_key")

    def __init__(self, attrs: Mapping[str, Value]) -> None:
        self.attrs = dict(attrs)
        self._key: Any = None

    def __getitem__(self, k: str) -> Value:
        return self.attrs[k]

    def __iter__(self) -> Iterator[str]:
        return iter(self.attrs)

    def __len__(self) -> int:
        return len(self.attrs)

    def key(self) -> Any:
        if self._key is None:
            self._key = frozenset((k, canon(v)) for k, v in self.attrs.items())
        return self._key

    def __eq__(self, other: object) -> bool:
        return isinstance(other, CRecord) and self.key() == other.key()

    def __hash__(self) -> int:
        return hash(self.key())

    def __repr__(self) -> str:
        return "{" + ", ".join(f"{k!r}: {v!r}" for k, v in self.attrs.items()) + "}"


Value = bool | int | str | EntityUID | Decimal | IPAddr | Datetime | Duration | CSet | CRecord


def canon(v: Value) -> Any:
    """A hashable key of ``v`` that differs between values of different Cedar types."""
    if isinstance(v, bool):
        return ("b", v)
    if isinstance(v, int):
        return ("l", v)
    if isinstance(v, str):
        return ("s", v)
    if isinstance(v, CSet):
        return ("S", v._keys)
    if isinstance(v, CRecord):
        return ("R", v.key())
    return (type(v).__name__, v)


def cedar_eq(a: Value, b: Value) -> bool:
    """Cedar's ``==``: values of different types are never equal (and never an error)."""
    return bool(canon(a) == canon(b))


def type_name(v: Value) -> str:
    """The Cedar type of ``v``, for error messages."""
    if isinstance(v, bool):
        return "Bool"
    if isinstance(v, int):
        return "Long"
    if isinstance(v, str):
        return "String"
    if isinstance(v, EntityUID):
        return f"entity of type {v.type}"
    if isinstance(v, Decimal):
        return "decimal"
    if isinstance(v, IPAddr):
        return "ipaddr"
    if isinstance(v, Datetime):
        return "datetime"
    if isinstance(v, Duration):
        return "duration"
    if isinstance(v, CSet):
        return "Set"
    return "Record"


def to_json(v: Value) -> Any:
    """``v`` in Cedar's JSON value form (``__entity`` and ``__extn`` escapes)."""
    if isinstance(v, bool | int | str):
        return v
    if isinstance(v, EntityUID):
        return {"__entity": {"type": v.type, "id": v.id}}
    if isinstance(v, Decimal):
        return {"__extn": {"fn": "decimal", "arg": str(v)[9:-2]}}
    if isinstance(v, IPAddr):
        return {"__extn": {"fn": "ip", "arg": v.text}}
    if isinstance(v, Datetime):
        return {"__extn": {"fn": "datetime", "arg": v.iso()}}
    if isinstance(v, Duration):
        return {"__extn": {"fn": "duration", "arg": f"{v.ms}ms"}}
    if isinstance(v, CSet):
        return [to_json(x) for x in v]
    return {k: to_json(x) for k, x in v.attrs.items()}


def _quote(s: str) -> str:
    out = []
    for c in s:
        if c in '"\\':
            out.append("\\" + c)
        elif c == "\n":
            out.append("\\n")
        elif c == "\t":
            out.append("\\t")
        elif c == "\r":
            out.append("\\r")
        elif c == "\0":
            out.append("\\0")
        elif ord(c) < 0x20 or ord(c) == 0x7F:
            out.append(f"\\u{{{ord(c):x}}}")
        else:
            out.append(c)
    return '"' + "".join(out) + '"'
