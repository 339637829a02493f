"""Cedar values over the IR: what a Cedar expression lowers to.

A Cedar expression of a known type lowers to a *leaf*: a Boolean node (:class:`BoolV`), a
64-bit integer as a linear sum over bounded integer variables (:class:`IntV`: a ``Long``, or a
``decimal``, ``datetime`` or ``duration`` by its count of ten-thousandths or milliseconds), a
string or entity term (:class:`StrV`, :class:`EntV`: a constant, or a variable of the string
sort or of the entity type's population), an address (:class:`IPV`), a set (:class:`SetV`:
literal items, or a symbolic set read through membership atoms) or a record (:class:`RecV`:
each attribute with the node that says it is present). A value whose type depends on the
request (``if c then 1 else "a"``, an attribute of one of several entities of a fixed store)
is :class:`Cases`: leaves under exclusive guards. Every lowered expression is a pair
``(value, error)``: the value means something only where ``error`` (a node) is false, as
Cedar's evaluation either errors or returns a value (SymCC's option terms).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Union

from cda.policy.solving import Node, NodeFactory, Term, TermConst, TermVar
from cda.policy.values import LONG_MAX, LONG_MIN

__all__ = [
    "Lin",
    "Leaf",
    "BoolV",
    "IntV",
    "StrV",
    "EntV",
    "IPV",
    "SetV",
    "RecV",
    "Field",
    "Opaque",
    "Cases",
    "Val",
    "Out",
    "alternatives",
    "join",
    "term_key",
    "LONG",
]

LONG = (LONG_MIN, LONG_MAX)


@dataclass(frozen=True)
class Lin:
    """``const + Σ coef·var`` over integer variables (``terms`` sorted by name, no zero)."""

    terms: tuple[tuple[str, int], ...]
    const: int

    @staticmethod
    def of(value: int) -> Lin:
        return Lin((), value)

    @staticmethod
    def var(name: str) -> Lin:
        return Lin(((name, 1),), 0)

    @property
    def is_const(self) -> bool:
        return not self.terms

    def _combine(self, other: Lin, sign: int) -> Lin:
        acc = dict(self.terms)
        for v, c in other.terms:
            acc[v] = acc.get(v, 0) + sign * c
        return Lin(tuple(sorted((v, c) for v, c in acc.items() if c)), self.const + sign * other.const)

    def __add__(self, other: Lin) -> Lin:
        return self._combine(other, 1)

    def __sub__(self, other: Lin) -> Lin:
        return self._combine(other, -1)

    def scale(self, k: int) -> Lin:
        if k == 0:
            return Lin.of(0)
        return Lin(tuple((v, c * k) for v, c in self.terms), self.const * k)


def le(f: NodeFactory, a: Lin, b: Lin) -> Node:
    """``a <= b``."""
    d = a - b
    return f.linear(dict(d.terms), "<=", -d.const)


def lin_eq(f: NodeFactory, a: Lin, b: Lin) -> Node:
    return f.and_([le(f, a, b), le(f, b, a)])


def in_range(f: NodeFactory, a: Lin, low: int, high: int) -> Node:
    return f.and_([le(f, Lin.of(low), a), le(f, a, Lin.of(high))])


def term_key(t: Term) -> tuple[str, str, str]:
    return ("v", t.sort.name, t.name) if isinstance(t, TermVar) else ("c", t.sort.name, t.value)


class Leaf:
    """A lowered value of one Cedar type (``ty``); ``key`` identifies equal lowerings."""

    ty: str = ""

    def key(self) -> Any:
        raise NotImplementedError


@dataclass(frozen=True)
class BoolV(Leaf):
    node: Node
    ty = "Bool"

    def key(self) -> Any:
        return ("Bool", self.node.uid)


@dataclass(frozen=True)
class IntV(Leaf):
    """A 64-bit integer: ``kind`` is ``Long``, ``decimal``, ``datetime`` or ``duration``."""

    lin: Lin
    kind: str = "Long"

    @property
    def ty(self) -> str:  # type: ignore[override]
        return self.kind

    def key(self) -> Any:
        return (self.kind, self.lin)


@dataclass(frozen=True)
class StrV(Leaf):
    term: Term
    ty = "String"

    def key(self) -> Any:
        return ("String", term_key(self.term))


@dataclass(frozen=True)
class EntV(Leaf):
    """An entity of type ``etype``: a constant (its id) or a member of the type's population."""

    term: Term
    etype: str
    ty = "Entity"

    def key(self) -> Any:
        return ("Entity", self.etype, term_key(self.term))

    @property
    def const_id(self) -> str | None:
        return self.term.value if isinstance(self.term, TermConst) else None


@dataclass(frozen=True)
class IPV(Leaf):
    """An ``ipaddr``: IPv6 or not, the address and the prefix length."""

    v6: Node
    addr: Lin
    prefix: Lin
    ty = "ipaddr"

    def key(self) -> Any:
        return ("ipaddr", self.v6.uid, self.addr, self.prefix)


@dataclass(eq=False)
class SetV(Leaf):
    """A set: literal ``items`` (values, each maybe :class:`Cases`), or a symbolic set named
    ``var`` whose membership atoms the lowering makes per element (``elem``: the element type's
    key, ``Long`` or ``Entity:User`` …, ``Set`` or ``Record`` for sets of sets or of records, whose
    element type ``etype`` then says what a member must be; ``None`` for an empty literal)."""

    items: tuple[Val, ...] | None = None
    var: str | None = None
    elem: str | None = None
    etype: Any = None  # a symbolic set of sets or records: its element's schema type (an SType)
    ty = "Set"

    def key(self) -> Any:
        return ("Set", self.var) if self.var is not None else ("SetLit", id(self))


@dataclass
class Field:
    """A record attribute: its value and, for an optional one, the node that says it is present,
    each made on first use (a scenario leaves out an optional attribute no policy asked about)."""

    make: Callable[[], Val]
    presence: Callable[[], Node] | None = None  # None: required, always present
    _value: Val | None = None
    _present: Node | None = None

    @property
    def required(self) -> bool:
        return self.presence is None

    @property
    def present(self) -> Node:
        if self._present is None:
            assert self.presence is not None, "a required attribute has its presence set"
            self._present = self.presence()
        return self._present

    @property
    def asked(self) -> bool:
        """Whether a policy asked about its presence (or it is required)."""
        return self.presence is None or self._present is not None

    def value(self) -> Val:
        if self._value is None:
            self._value = self.make()
        return self._value


@dataclass(eq=False)
class RecV(Leaf):
    fields: dict[str, Field] = field(default_factory=dict)
    ty = "Record"

    def key(self) -> Any:
        return ("Record", id(self))


@dataclass(eq=False)
class Opaque(Leaf):
    """A value of a type the analyses do not encode (a set of an unknown type, …): fine while no
    policy reads it, refused at the place of the policy that does."""

    what: str
    ty = "Opaque"

    def key(self) -> Any:
        return ("Opaque", id(self))


@dataclass(frozen=True)
class Cases:
    """Leaves under exclusive guards (their disjunction covers where the value has no error)."""

    branches: tuple[tuple[Node, Leaf], ...]


Val = Union[Leaf, Cases]  # noqa: UP007 (a runtime alias)
Out = tuple[Val, Node]  # a value and the node that says its evaluation errors


def alternatives(v: Val, f: NodeFactory) -> list[tuple[Node, Leaf]]:
    """``v``'s leaves with their guards (one, under ``true``, for a leaf)."""
    return list(v.branches) if isinstance(v, Cases) else [(f.true, v)]


def join(f: NodeFactory, pairs: Iterable[tuple[Node, Val]]) -> Val:
    """One value from guarded values: nested cases flattened, false guards dropped, Booleans
    merged into one node, equal leaves merged under the disjunction of their guards; a single
    leaf is returned bare (outside its guard the expression errors, so its value is moot)."""
    merged: dict[Any, tuple[list[Node], Leaf]] = {}
    bools: list[Node] = []
    bool_guards: list[Node] = []
    for guard, v in pairs:
        for g2, leaf in alternatives(v, f):
            g = f.and_([guard, g2])
            if g is f.false:
                continue
            if isinstance(leaf, BoolV):
                bools.append(f.and_([g, leaf.node]))
                bool_guards.append(g)
                continue
            k = leaf.key()
            if k in merged:
                merged[k][0].append(g)
            else:
                merged[k] = ([g], leaf)
    out: list[tuple[Node, Leaf]] = [(f.or_(gs), leaf) for gs, leaf in merged.values()]
    if bool_guards:
        out.append((f.or_(bool_guards), BoolV(f.or_(bools))))
    if not out:
        return BoolV(f.false)  # every branch errors: any value will do
    if len(out) == 1:
        return out[0][1]
    return Cases(tuple(out))


def clamp_range(lin: Lin, ranges: dict[str, tuple[int, int]]) -> tuple[int, int]:
    """The least and greatest values of ``lin`` over its variables' ranges."""
    low = high = lin.const
    for v, c in lin.terms:
        lo, hi = ranges[v]
        low += c * (lo if c > 0 else hi)
        high += c * (hi if c > 0 else lo)
    return low, high
