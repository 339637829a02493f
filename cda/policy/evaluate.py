"""Cedar's concrete semantics: one expression, one request, one entity store.

An evaluation error (a type error, a missing attribute or entity, a long overflow, a bad
extension literal) is raised as :class:`EvalError`; authorization catches it per policy, as Cedar
does: the policy does not apply and its id is reported in ``errors``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
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
    cedar_eq,
    type_name,
)

__all__ = ["EvalError", "evaluate", "like_regex", "apply_method"]


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
    """The regular expression of a ``like`` pattern (``None`` is the wildcard)."""
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
    """The value of ``e`` for ``req`` over ``store``; raises :class:`EvalError`."""
    t = type(e)
    if t is Lit:
        return e.value  # type: ignore[union-attr]
    if t is Var:
        name = e.name  # type: ignore[union-attr]
        if name == "principal":
            return req.principal
        if name == "action":
            return req.action
        if name == "resource":
            return req.resource
        return req.context
    if t is And:
        assert isinstance(e, And)
        if not _bool(evaluate(e.left, req, store), e.pos):
            return False
        return _bool(evaluate(e.right, req, store), e.pos)
    if t is Or:
        assert isinstance(e, Or)
        if _bool(evaluate(e.left, req, store), e.pos):
            return True
        return _bool(evaluate(e.right, req, store), e.pos)
    if t is If:
        assert isinstance(e, If)
        c = _bool(evaluate(e.cond, req, store), e.pos)
        return evaluate(e.then if c else e.orelse, req, store)
    if t is Unary:
        assert isinstance(e, Unary)
        v = evaluate(e.arg, req, store)
        if e.op == "!":
            return not _bool(v, e.pos)
        return _checked(-_long(v, e.pos), "negation", e.pos)
    if t is Binary:
        assert isinstance(e, Binary)
        return _binary(e, evaluate(e.left, req, store), evaluate(e.right, req, store), store)
    if t is GetAttr:
        assert isinstance(e, GetAttr)
        v = evaluate(e.arg, req, store)
        if isinstance(v, EntityUID):
            rec = store.attrs.get(v)
            if rec is None:
                raise EvalError(f"entity {v} does not exist", e.pos)
            if e.attr not in rec.attrs:
                raise EvalError(f"entity {v} has no attribute {e.attr!r}", e.pos)
            return rec.attrs[e.attr]
        if isinstance(v, CRecord):
            if e.attr not in v.attrs:
                raise EvalError(f"record has no attribute {e.attr!r}", e.pos)
            return v.attrs[e.attr]
        raise EvalError(f"type error: expected an entity or a record, got {type_name(v)}", e.pos)
    if t is Has:
        assert isinstance(e, Has)
        v = evaluate(e.arg, req, store)
        if isinstance(v, EntityUID):
            rec = store.attrs.get(v)
            return rec is not None and e.attr in rec.attrs
        if isinstance(v, CRecord):
            return e.attr in v.attrs
        raise EvalError(f"type error: expected an entity or a record, got {type_name(v)}", e.pos)
    if t is Like:
        assert isinstance(e, Like)
        v = evaluate(e.arg, req, store)
        _want(v, str, "String", e.pos)
        return like_regex(e.pattern).fullmatch(v) is not None  # type: ignore[arg-type]
    if t is Is:
        assert isinstance(e, Is)
        v = evaluate(e.arg, req, store)
        if not isinstance(v, EntityUID):
            raise EvalError(f"type error: 'is' expects an entity, got {type_name(v)}", e.pos)
        if v.type != e.type:
            return False
        if e.within is None:
            return True
        return _in(v, evaluate(e.within, req, store), store, e.pos)
    if t is SetLit:
        assert isinstance(e, SetLit)
        return CSet([evaluate(x, req, store) for x in e.items])
    if t is RecLit:
        assert isinstance(e, RecLit)
        return CRecord({k: evaluate(x, req, store) for k, x in e.items})
    if t is Call:
        assert isinstance(e, Call)
        args = [evaluate(x, req, store) for x in e.args]
        if len(args) != 1:
            raise EvalError(f"wrong number of arguments to {e.name}: {len(args)}", e.pos)
        if not isinstance(args[0], str):
            raise EvalError(f"type error: {e.name} expects a String, got {type_name(args[0])}", e.pos)
        try:
            return _CONSTRUCTORS[e.name](args[0])
        except ExtensionError as err:
            raise EvalError(str(err), e.pos) from None
    assert isinstance(e, Method)
    return _method(e, evaluate(e.arg, req, store), [evaluate(x, req, store) for x in e.args], store)


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
