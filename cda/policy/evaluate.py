"""Cedar's concrete semantics: one expression, one request, one entity store.

An evaluation error (a type error, a missing attribute or entity, a long overflow, a bad
extension literal) is raised as :class:`EvalError`; authorization catches it per policy, as Cedar
does: the policy does not apply and its id is reported in ``errors``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Hashable
from functools import lru_cache

from cda.policy.entities import (
    Entities,
    ExtensionError,
    Request,
    parse_datetime,
    parse_decimal,
    parse_duration,
    parse_ip,
)
from cda.policy.parse import METHODS
from cda.policy.syntax import (
    And,
    Binary,
    Call,
    Expr,
    GetAttr,
    Has,
    If,
    Is,
    Like,
    Lit,
    Method,
    Or,
    Pos,
    RecLit,
    SetLit,
    Unary,
    Var,
)
from cda.policy.values import (
    LONG_MAX,
    LONG_MIN,
    CRecord,
    CSet,
    Datetime,
    Decimal,
    Duration,
    EntityUID,
    IPAddr,
    Value,
    canon,
    cedar_eq,
    type_name,
)

__all__ = ["EvalError", "Compiled", "Compiler", "Frame", "evaluate", "like_regex", "apply_method", "structure"]


class EvalError(Exception):
    """An evaluation error at ``pos`` (Cedar's runtime errors, never shown as a traceback)."""

    def __init__(self, message: str, pos: Pos) -> None:
        super().__init__(message)
        self.pos = pos


def _want(v: Value, kind: type | tuple[type, ...], what: str, pos: Pos) -> None:
    if not isinstance(v, kind) or (kind is int and isinstance(v, bool)):
        raise EvalError(f"type error: expected {what}, got {type_name(v)}", pos)


def _long(v: Value, pos: Pos) -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        raise EvalError(f"type error: expected Long, got {type_name(v)}", pos)
    return v


def _bool(v: Value, pos: Pos) -> bool:
    if not isinstance(v, bool):
        raise EvalError(f"type error: expected Bool, got {type_name(v)}", pos)
    return v


def _checked(v: int, op: str, pos: Pos) -> int:
    if not LONG_MIN <= v <= LONG_MAX:
        raise EvalError(f"integer overflow in {op}", pos)
    return v


@lru_cache(maxsize=4096)
def like_regex(pattern: tuple[str | None, ...]) -> re.Pattern[str]:
    """The regular expression of a ``like`` pattern (``None`` is the wildcard). Not what a
    condition is evaluated with: Python's backtracking makes ``.*a.*a.*b`` take minutes on
    8,000 characters (audit3); :func:`~cda.encodings.ir.like_matches` is linear."""
    return re.compile("".join(".*" if p is None else re.escape(p) for p in pattern), re.DOTALL)


def _in(a: Value, b: Value, store: Entities, pos: Pos) -> bool:
    if not isinstance(a, EntityUID):
        raise EvalError(f"type error: 'in' expects an entity on its left, got {type_name(a)}", pos)
    if isinstance(b, EntityUID):
        return store.is_in(a, b)
    if isinstance(b, CSet):
        found = False
        for x in b:
            if not isinstance(x, EntityUID):
                raise EvalError(f"type error: 'in' expects a set of entities, found {type_name(x)}", pos)
            found = found or store.is_in(a, x)
        return found
    raise EvalError(f"type error: 'in' expects an entity or a set of entities, got {type_name(b)}", pos)


def evaluate(e: Expr, req: Request, store: Entities) -> Value:
    """The value of ``e`` for ``req`` over ``store``; raises :class:`EvalError`. (``e`` is compiled
    for this one call: what evaluates many requests compiles once, with :class:`Compiler`.)"""
    return Compiler()(e)(Frame(req, store, 0))


class Frame:
    """One request being evaluated: its four variables, the store, and the values of the shared
    subexpressions computed so far (``memo``, one slot each, :data:`_MISSING` until computed)."""

    __slots__ = ("principal", "action", "resource", "context", "store", "memo")

    def __init__(self, req: Request, store: Entities, slots: int) -> None:
        self.principal, self.action, self.resource, self.context = req.principal, req.action, req.resource, req.context
        self.store = store
        self.memo: list[Value | object] = [_MISSING] * slots


Compiled = Callable[[Frame], Value]
_MISSING = object()
#: types whose Python ``==`` is Cedar's ``==`` between two values of the same type
_PLAIN_EQ = frozenset({str, int, bool, EntityUID, Decimal, Datetime, Duration, IPAddr})


def structure(e: Expr) -> Hashable:
    """``e``'s shape without positions: equal for two writings of the same expression (a literal by
    its Cedar-typed :func:`~cda.policy.values.canon`, so ``1`` and ``true`` differ)."""
    t = type(e)
    if t is Lit:
        return ("lit", canon(e.value))  # type: ignore[union-attr]
    if t is Var:
        return ("var", e.name)  # type: ignore[union-attr]
    parts: list[Hashable] = [t.__name__]
    for name in e.__slots__:  # type: ignore[union-attr]
        if name == "pos":
            continue
        v = getattr(e, name)
        if isinstance(v, tuple) and v and isinstance(v[0], tuple):  # RecLit items
            parts.append(tuple((k, structure(x)) for k, x in v))
        elif isinstance(v, tuple) and t is not Like:
            parts.append(tuple(structure(x) for x in v))
        elif v is None or isinstance(v, str | tuple):
            parts.append(v)
        else:
            parts.append(structure(v))
    return tuple(parts)


class Compiler:
    """Compiles expressions into closures over a :class:`Frame` once, so that a policy set's
    conditions are not walked again for every request (docs/policy.md, "Authorization at scale").

    A subexpression that occurs more than once across everything compiled with one compiler
    (``shared``: the shapes counted by :meth:`count`) gets a memo slot: the first policy that
    needs it computes it and the rest read it. Only values are kept: a subexpression whose
    evaluation raises is evaluated again where it occurs next, so each policy's error names its
    own position. Evaluation is deterministic, so reading a kept value never changes an answer.
    """

    def __init__(self) -> None:
        self.seen: dict[Hashable, int] = {}
        self.slots: dict[Hashable, int] = {}

    def count(self, e: Expr) -> None:
        """Count the shapes of ``e``'s subexpressions (before compiling, to find what is shared)."""
        stack = [e]
        while stack:
            x = stack.pop()
            if type(x) in (Lit, Var):
                continue
            k = structure(x)
            n = self.seen.get(k, 0)
            self.seen[k] = n + 1
            if n == 0:
                stack.extend(_children(x))

    def __call__(self, e: Expr) -> Compiled:
        f = self._compile(e)
        if type(e) in (Lit, Var) or self.seen.get(structure(e), 0) < 2:
            return f
        k = structure(e)
        slot = self.slots.setdefault(k, len(self.slots))

        def memoized(fr: Frame) -> Value:
            v = fr.memo[slot]
            if v is _MISSING:
                v = fr.memo[slot] = f(fr)
            return v  # type: ignore[return-value]

        return memoized

    def _compile(self, e: Expr) -> Compiled:  # noqa: C901 - one case per node type
        t = type(e)
        if t is Lit:
            value = e.value  # type: ignore[union-attr]
            return lambda fr: value
        if t is Var:
            return _VARS[e.name]  # type: ignore[union-attr]
        if t is And or t is Or:
            return self._connective(e)  # type: ignore[arg-type]
        if t is If:
            assert isinstance(e, If)
            cond, then, orelse, pos = self(e.cond), self(e.then), self(e.orelse), e.pos

            def if_(fr: Frame) -> Value:
                return then(fr) if _bool(cond(fr), pos) else orelse(fr)

            return if_
        if t is Unary:
            assert isinstance(e, Unary)
            arg, pos = self(e.arg), e.pos
            if e.op == "!":
                return lambda fr: not _bool(arg(fr), pos)
            return lambda fr: _checked(-_long(arg(fr), pos), "negation", pos)
        if t is Binary:
            return self._binary(e)  # type: ignore[arg-type]
        if t is GetAttr:
            assert isinstance(e, GetAttr)
            arg, attr, pos = self(e.arg), e.attr, e.pos
            return lambda fr: _get_attr(arg(fr), attr, fr.store, pos)
        if t is Has:
            assert isinstance(e, Has)
            arg, attr, pos = self(e.arg), e.attr, e.pos
            return lambda fr: _has(arg(fr), attr, fr.store, pos)
        if t is Like:
            assert isinstance(e, Like)
            from cda.ir import like_matches  # here: a policy set without `like` does not load the IR

            arg, pattern, pos = self(e.arg), e.pattern, e.pos

            def like(fr: Frame) -> Value:
                v = arg(fr)
                _want(v, str, "String", pos)
                # the pieces between stars found left to right: linear, where a regex's
                # backtracking took minutes on `like "*a*a*b"` and 8,000 characters (audit3)
                return like_matches(v, pattern)  # type: ignore[arg-type]

            return like
        if t is Is:
            assert isinstance(e, Is)
            return self._is(e)
        if t is SetLit:
            assert isinstance(e, SetLit)
            items = [self(x) for x in e.items]
            return lambda fr: CSet([f(fr) for f in items])
        if t is RecLit:
            assert isinstance(e, RecLit)
            fields = [(k, self(x)) for k, x in e.items]
            return lambda fr: CRecord({k: f(fr) for k, f in fields})
        if t is Call:
            assert isinstance(e, Call)
            return self._call(e)
        assert isinstance(e, Method)
        recv, margs, node = self(e.arg), [self(x) for x in e.args], e
        return lambda fr: _method(node, recv(fr), [f(fr) for f in margs], fr.store)

    def _connective(self, e: And | Or) -> Compiled:
        left, right, pos = self(e.left), self(e.right), e.pos
        stop = type(e) is Or  # the value of the left side that decides without the right

        def connective(fr: Frame) -> Value:
            a = left(fr)
            if a is stop:
                return stop
            if a is not (not stop):
                _bool(a, pos)
            b = right(fr)
            if b is True or b is False:
                return b
            return _bool(b, pos)

        return connective

    def _binary(self, e: Binary) -> Compiled:
        left, right, op, pos = self(e.left), self(e.right), e.op, e.pos
        if op in ("==", "!="):
            negate = op == "!="

            def eq(fr: Frame) -> Value:
                a, b = left(fr), right(fr)
                ta = type(a)
                same = a == b if ta is type(b) and ta in _PLAIN_EQ else cedar_eq(a, b)
                return same is not negate

            return eq
        if op == "in":
            return lambda fr: _in(left(fr), right(fr), fr.store, pos)
        fast = _FAST_LONG[op]

        def arith(fr: Frame) -> Value:
            a, b = left(fr), right(fr)
            if type(a) is int and type(b) is int:
                v = fast(a, b)
                if type(v) is bool or LONG_MIN <= v <= LONG_MAX:
                    return v
            return _binary(e, a, b, fr.store)  # datetimes, errors and overflow

        return arith

    def _is(self, e: Is) -> Compiled:
        arg, ty, pos = self(e.arg), e.type, e.pos
        within = self(e.within) if e.within is not None else None

        def is_(fr: Frame) -> Value:
            v = arg(fr)
            if not isinstance(v, EntityUID):
                raise EvalError(f"type error: 'is' expects an entity, got {type_name(v)}", pos)
            if v.type != ty:
                return False
            return True if within is None else _in(v, within(fr), fr.store, pos)

        return is_

    def _call(self, e: Call) -> Compiled:
        """An extension constructor; on a literal string it is built once, here (an invalid
        literal still raises its error when, and only when, it is evaluated)."""
        args, name, pos = [self(x) for x in e.args], e.name, e.pos
        if len(e.args) == 1 and type(e.args[0]) is Lit and isinstance(e.args[0].value, str):
            try:
                value = _construct(name, [e.args[0].value], pos)
            except EvalError:
                pass
            else:
                return lambda fr: value
        return lambda fr: _construct(name, [f(fr) for f in args], pos)


_VARS: dict[str, Compiled] = {
    "principal": lambda fr: fr.principal,
    "action": lambda fr: fr.action,
    "resource": lambda fr: fr.resource,
    "context": lambda fr: fr.context,
}
_FAST_LONG: dict[str, Callable[[int, int], int | bool]] = {
    "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b,
    ">": lambda a, b: a > b,
    ">=": lambda a, b: a >= b,
    "+": lambda a, b: a + b,
    "-": lambda a, b: a - b,
    "*": lambda a, b: a * b,
}


def _children(e: Expr) -> list[Expr]:
    out: list[Expr] = []
    for name in e.__slots__:  # type: ignore[union-attr]
        v = getattr(e, name)
        if isinstance(v, tuple) and type(e) is not Like and name != "pos":
            out.extend(x[1] if isinstance(x, tuple) else x for x in v)
        elif v is not None and not isinstance(v, str | tuple | int):
            out.append(v)
    return out


def _get_attr(v: Value, attr: str, store: Entities, pos: Pos) -> Value:
    if isinstance(v, EntityUID):
        rec = store.attrs.get(v)
        if rec is None:
            raise EvalError(f"entity {v} does not exist", pos)
        if attr not in rec.attrs:
            raise EvalError(f"entity {v} has no attribute {attr!r}", pos)
        return rec.attrs[attr]
    if isinstance(v, CRecord):
        if attr not in v.attrs:
            raise EvalError(f"record has no attribute {attr!r}", pos)
        return v.attrs[attr]
    raise EvalError(f"type error: expected an entity or a record, got {type_name(v)}", pos)


def _has(v: Value, attr: str, store: Entities, pos: Pos) -> bool:
    if isinstance(v, EntityUID):
        rec = store.attrs.get(v)
        return rec is not None and attr in rec.attrs
    if isinstance(v, CRecord):
        return attr in v.attrs
    raise EvalError(f"type error: expected an entity or a record, got {type_name(v)}", pos)


def _construct(name: str, args: list[Value], pos: Pos) -> Value:
    if len(args) != 1:
        raise EvalError(f"wrong number of arguments to {name}: {len(args)}", pos)
    if not isinstance(args[0], str):
        raise EvalError(f"type error: {name} expects a String, got {type_name(args[0])}", pos)
    try:
        return _CONSTRUCTORS[name](args[0])
    except ExtensionError as err:
        raise EvalError(str(err), pos) from None


_CONSTRUCTORS: dict[str, Callable[[str], Value]] = {"ip": parse_ip, "decimal": parse_decimal, "datetime": parse_datetime, "duration": parse_duration}


def _binary(e: Binary, a: Value, b: Value, store: Entities) -> Value:
    op, pos = e.op, e.pos
    if op == "==":
        return cedar_eq(a, b)
    if op == "!=":
        return not cedar_eq(a, b)
    if op == "in":
        return _in(a, b, store, pos)
    if op in ("<", "<=", ">", ">=") and isinstance(a, Datetime | Duration):
        if type(b) is not type(a):
            raise EvalError(f"type error: cannot compare {type_name(a)} with {type_name(b)}", pos)
        a, b = a.ms, b.ms  # type: ignore[union-attr]
    x, y = _long(a, pos), _long(b, pos)
    if op == "<":
        return x < y
    if op == "<=":
        return x <= y
    if op == ">":
        return x > y
    if op == ">=":
        return x >= y
    if op == "+":
        return _checked(x + y, "addition", pos)
    if op == "-":
        return _checked(x - y, "subtraction", pos)
    return _checked(x * y, "multiplication", pos)


_LOOPBACK = {4: (0x7F000000, 0x7FFFFFFF), 6: (1, 1)}
_MULTICAST = {4: (0xE0000000, 0xEFFFFFFF), 6: (0xFF << 120, (1 << 128) - 1)}


def apply_method(name: str, recv: Value, args: list[Value]) -> Value:
    """An extension method applied to values (for JSON's ``{"__extn": {"fn", "args"}}``);
    ``KeyError`` for an unknown name."""
    if name not in METHODS or name in ("getTag", "hasTag"):
        raise KeyError(name)
    return _method(Method(Lit(False, (0, 0)), name, (), (0, 0)), recv, args, Entities())


def _method(e: Method, recv: Value, args: list[Value], store: Entities) -> Value:
    name, pos = e.name, e.pos
    if len(args) != METHODS[name]:
        raise EvalError(f"wrong number of arguments to {name}: {len(args)}", pos)
    if name in ("contains", "containsAll", "containsAny", "isEmpty"):
        if not isinstance(recv, CSet):
            raise EvalError(f"type error: {name} expects a Set, got {type_name(recv)}", pos)
        if name == "isEmpty":
            return len(recv) == 0
        if name == "contains":
            return args[0] in recv
        other = args[0]
        if not isinstance(other, CSet):
            raise EvalError(f"type error: {name} expects a Set argument, got {type_name(other)}", pos)
        if name == "containsAll":
            return all(x in recv for x in other)
        return any(x in recv for x in other)
    if name in ("getTag", "hasTag"):
        if not isinstance(recv, EntityUID):
            raise EvalError(f"type error: {name} expects an entity, got {type_name(recv)}", pos)
        key = args[0]
        if not isinstance(key, str):
            raise EvalError(f"type error: {name} expects a String key, got {type_name(key)}", pos)
        tags = store.tags.get(recv)
        if name == "hasTag":
            return tags is not None and key in tags.attrs
        if recv not in store.attrs:
            raise EvalError(f"entity {recv} does not exist", pos)
        if tags is None or key not in tags.attrs:
            raise EvalError(f"entity {recv} has no tag {key!r}", pos)
        return tags.attrs[key]
    if name in ("lessThan", "lessThanOrEqual", "greaterThan", "greaterThanOrEqual"):
        if not isinstance(recv, Decimal) or not isinstance(args[0], Decimal):
            raise EvalError(f"type error: {name} expects decimals", pos)
        x, y = recv.scaled, args[0].scaled
        return {"lessThan": x < y, "lessThanOrEqual": x <= y, "greaterThan": x > y, "greaterThanOrEqual": x >= y}[name]
    if name in _TIME_METHODS:
        return _time_method(name, recv, args, pos)
    if not isinstance(recv, IPAddr):
        raise EvalError(f"type error: {name} expects an ipaddr, got {type_name(recv)}", pos)
    if name == "isIpv4":
        return recv.version == 4
    if name == "isIpv6":
        return recv.version == 6
    low, high = recv.bounds()
    if name in ("isLoopback", "isMulticast"):
        lo, hi = (_LOOPBACK if name == "isLoopback" else _MULTICAST)[recv.version]
        return lo <= low and high <= hi
    other = args[0]
    if not isinstance(other, IPAddr):
        raise EvalError(f"type error: isInRange expects an ipaddr, got {type_name(other)}", pos)
    if other.version != recv.version:
        return False
    olow, ohigh = other.bounds()
    return olow <= low and high <= ohigh


_TIME_METHODS = {"offset", "durationSince", "toDate", "toTime", "toDays", "toHours", "toMinutes", "toSeconds",
                 "toMilliseconds"}  # fmt: skip
_DAY_MS = 86_400_000
_PER = {"toDays": _DAY_MS, "toHours": 3_600_000, "toMinutes": 60_000, "toSeconds": 1000, "toMilliseconds": 1}


def _time_method(name: str, recv: Value, args: list[Value], pos: Pos) -> Value:
    if name in _PER:
        if not isinstance(recv, Duration):
            raise EvalError(f"type error: {name} expects a duration, got {type_name(recv)}", pos)
        q = abs(recv.ms) // _PER[name]  # Rust's division truncates towards zero
        return q if recv.ms >= 0 else -q
    if not isinstance(recv, Datetime):
        raise EvalError(f"type error: {name} expects a datetime, got {type_name(recv)}", pos)
    if name == "toDate":  # Cedar: epoch.checked_sub(epoch.rem_euclid(day)), an overflow is an error
        return Datetime(_checked(recv.ms - recv.ms % _DAY_MS, "toDate", pos))
    if name == "toTime":
        return Duration(recv.ms % _DAY_MS)
    other = args[0]
    if name == "offset":
        if not isinstance(other, Duration):
            raise EvalError(f"type error: offset expects a duration, got {type_name(other)}", pos)
        return Datetime(_checked(recv.ms + other.ms, "offset", pos))
    if not isinstance(other, Datetime):
        raise EvalError(f"type error: durationSince expects a datetime, got {type_name(other)}", pos)
    return Duration(_checked(recv.ms - other.ms, "durationSince", pos))
