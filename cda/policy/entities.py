"""Entities JSON and request JSON read into Cedar values, typed by the schema where it has one.

Cedar's JSON forms: an entity reference is ``{"__entity": {"type", "id"}}`` (or ``{"type",
"id"}`` where the schema says the value is an entity), an extension value ``{"__extn": {"fn",
"arg"}}`` (or a plain string where the schema says ``ipaddr``/``decimal``).
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from cda.errors import CDAError, DSLError
from cda.policy.schema import Schema, SType
from cda.policy.syntax import UnsupportedConstruct
from cda.policy.values import LONG_MAX, LONG_MIN, CRecord, CSet, Datetime, Decimal, Duration, EntityUID, IPAddr, Value

__all__ = ["Entities", "Request", "RequestInvalid", "validate_request", "read_entities", "read_request", "read_value", "parse_decimal", "parse_ip", "parse_datetime", "parse_duration",
           "ExtensionError"]  # fmt: skip


MAX_CLOSURE = 10_000_000
"""At most this many (entity, ancestor) pairs in a store's ``in`` hierarchy: a chain of about 4,500
entities, each the parent of the next (a 2,000-deep chain holds 2 million; docs/policy.md)."""


MAX_VALUE_DEPTH = 100
"""The deepest a value in an entities or request file may nest (records and sets in one another):
Cedar's own JSON reader stops at 128 levels of the whole document; past this, evaluating a value
(comparing it, printing it) would meet Python's recursion limit (a traceback before)."""


def _shallow(obj: Any, where: str) -> Any:
    """``obj`` when it nests at most :data:`MAX_VALUE_DEPTH` levels (checked without recursion)."""
    level: list[tuple[Any, int]] = [(obj, 0)]
    while level:
        value, depth = level.pop()
        if depth > MAX_VALUE_DEPTH:
            raise DSLError(f"{where}: a value nested more than {MAX_VALUE_DEPTH} levels deep (records and sets in "
                           "one another; Cedar's reader stops at 128)")
        if isinstance(value, dict):
            level.extend((v, depth + 1) for v in value.values())
        elif isinstance(value, list):
            level.extend((v, depth + 1) for v in value)
    return obj


class ExtensionError(ValueError):
    """A string that is not an ``ip``/``decimal`` literal (an evaluation error in a policy)."""


@dataclass
class Entities:
    """The entity store: attributes, tags and the transitive ``in`` hierarchy."""

    attrs: dict[EntityUID, CRecord] = field(default_factory=dict)
    tags: dict[EntityUID, CRecord] = field(default_factory=dict)
    parents: dict[EntityUID, list[EntityUID]] = field(default_factory=dict)
    ancestors: dict[EntityUID, frozenset[EntityUID]] = field(default_factory=dict)

    def close(self, where: str = "entities") -> None:
        """Compute every entity's ancestors (the transitive closure of ``parents``), as Cedar does
        when it reads a store: a cycle (an entity its own ancestor, ``a in a`` included) is refused,
        as Cedar refuses it, and so is a closure past :data:`MAX_CLOSURE` pairs. Iterative, so a
        hierarchy of any depth is read without Python's recursion limit (docs/policy.md)."""
        memo: dict[EntityUID, frozenset[EntityUID]] = {}
        pairs = 0
        for root in list(self.parents):
            if root in memo:
                continue
            path: list[tuple[EntityUID, Iterator[EntityUID]]] = [(root, iter(self.parents.get(root, ())))]
            on_path = {root}
            while path:
                u, todo = path[-1]
                for p in todo:
                    if p in on_path:
                        raise DSLError(f"{where}: the hierarchy has a cycle: {p} is among its own ancestors "
                                       "(Cedar refuses such a store)")
                    if p not in memo:
                        on_path.add(p)
                        path.append((p, iter(self.parents.get(p, ()))))
                        break
                else:
                    path.pop()
                    on_path.discard(u)
                    out: set[EntityUID] = set()
                    for p in self.parents.get(u, ()):
                        out.add(p)
                        out |= memo[p]
                    memo[u] = frozenset(out)
                    pairs += len(out)
                    if pairs > MAX_CLOSURE:
                        raise DSLError(f"{where}: the hierarchy's transitive closure has more than {MAX_CLOSURE:,} "
                                       "(entity, ancestor) pairs: too large to read")
        self.ancestors = memo

    def is_in(self, a: EntityUID, b: EntityUID) -> bool:
        return a == b or b in self.ancestors.get(a, frozenset())


@dataclass(frozen=True)
class Request:
    principal: EntityUID
    action: EntityUID
    resource: EntityUID
    context: CRecord


def parse_decimal(s: str) -> Decimal:
    m = re.fullmatch(r"(-?)([0-9]+)\.([0-9]+)", s)
    if m is None:
        raise ExtensionError(f"not a decimal: {s!r}")
    if len(m.group(3)) > 4:
        raise ExtensionError(f"too many digits after the point in {s!r}")
    v = int(m.group(2)) * 10_000 + int(m.group(3).ljust(4, "0"))
    v = -v if m.group(1) else v
    if not LONG_MIN <= v <= LONG_MAX:
        raise ExtensionError(f"decimal out of range: {s!r}")
    return Decimal(v)


_DATETIME = re.compile(
    r"([0-9]{4})-([0-9]{2})-([0-9]{2})(?:T([0-9]{2}):([0-9]{2}):([0-9]{2})(?:\.([0-9]{3}))?(Z|[+-][0-9]{4}))?"
)
_DURATION = re.compile(r"(-?)(?:([0-9]+)d)?(?:([0-9]+)h)?(?:([0-9]+)m(?!s))?(?:([0-9]+)s)?(?:([0-9]+)ms)?")


def parse_datetime(s: str) -> Datetime:
    """Cedar's ``datetime("…")``: a date, or a date and time in UTC (``Z``) or with an offset."""
    import calendar

    m = _DATETIME.fullmatch(s)
    if m is None or (m.group(4) is not None and m.group(8) is None):
        raise ExtensionError(f"not a datetime: {s!r}")
    y, mo, d = int(m.group(1)), int(m.group(2)), int(m.group(3))
    if not (1 <= mo <= 12 and 1 <= d <= calendar.monthrange(y, mo)[1] if y > 0 else 1 <= mo <= 12 and 1 <= d <= 31):
        raise ExtensionError(f"not a valid date: {s!r}")
    hh = int(m.group(4) or 0)
    mi = int(m.group(5) or 0)
    ss = int(m.group(6) or 0)
    ms = int(m.group(7) or 0)
    if hh > 23 or mi > 59 or ss > 59:
        raise ExtensionError(f"not a valid time: {s!r}")
    offset = 0
    tz = m.group(8)
    if tz and tz != "Z":
        oh, om = int(tz[1:3]), int(tz[3:5])
        if oh > 23 or om > 59:
            raise ExtensionError(f"not a valid offset: {s!r}")
        offset = (oh * 60 + om) * 60_000 * (1 if tz[0] == "+" else -1)
    days = _days_from_civil(y, mo, d)
    v = ((days * 24 + hh) * 60 + mi) * 60_000 + ss * 1000 + ms - offset
    if not LONG_MIN <= v <= LONG_MAX:
        raise ExtensionError(f"datetime out of range: {s!r}")
    return Datetime(v)


def _days_from_civil(y: int, m: int, d: int) -> int:
    y -= m <= 2
    era = (y if y >= 0 else y - 399) // 400
    yoe = y - era * 400
    doy = (153 * (m + (-3 if m > 2 else 9)) + 2) // 5 + d - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    return era * 146097 + doe - 719468


def parse_duration(s: str) -> Duration:
    """Cedar's ``duration("…")``: ``[-]{N}d{N}h{N}m{N}s{N}ms``, at least one unit, in order."""
    m = _DURATION.fullmatch(s)
    if m is None or not any(m.groups()[1:]):
        raise ExtensionError(f"not a duration: {s!r}")
    units = (86_400_000, 3_600_000, 60_000, 1000, 1)
    v = sum(int(g) * u for g, u in zip(m.groups()[1:], units, strict=True) if g)
    v = -v if m.group(1) else v
    if not LONG_MIN <= v <= LONG_MAX:
        raise ExtensionError(f"duration out of range: {s!r}")
    return Duration(v)


def parse_ip(s: str) -> IPAddr:
    addr_s, slash, prefix_s = s.partition("/")
    if "." in addr_s and ":" in addr_s:
        raise ExtensionError(f"IPv4 embedded in IPv6 is not accepted: {s!r}")
    try:
        addr = ipaddress.ip_address(addr_s)
    except ValueError:
        raise ExtensionError(f"invalid IP address: {s!r}") from None
    if "%" in addr_s:
        raise ExtensionError(f"invalid IP address: {s!r}")
    bits = 32 if addr.version == 4 else 128
    if slash:
        if not prefix_s.isdigit() or not prefix_s.isascii() or (len(prefix_s) > 1 and prefix_s[0] == "0"):
            raise ExtensionError(f"bad prefix in {s!r}")
        prefix = int(prefix_s)
        if prefix > bits:
            raise ExtensionError(f"prefix too long in {s!r}")
    else:
        prefix = bits
    return IPAddr(addr.version, int(addr), prefix, s)


def _extn(fn: str, arg: Any, where: str) -> Value:
    if not isinstance(arg, str):
        raise DSLError(f"{where}: the argument of {fn} must be a string")
    try:
        if fn in ("ip", "ipaddr"):
            return parse_ip(arg)
        if fn == "decimal":
            return parse_decimal(arg)
        if fn == "datetime":
            return parse_datetime(arg)
        if fn == "duration":
            return parse_duration(arg)
    except ExtensionError as e:
        raise DSLError(f"{where}: {e}") from None
    raise UnsupportedConstruct(f"{where}: the extension function {fn!r} is not supported by CDA's Cedar reader")


def _extn_call(fn: str, args: Any, where: str) -> Value:
    from cda.policy.evaluate import EvalError, apply_method

    if not isinstance(args, list) or not args:
        raise DSLError(f"{where}: __extn args must be a non-empty list")
    vals = [read_value(a, None, f"{where}.args[{i}]") for i, a in enumerate(args)]
    try:
        return apply_method(fn, vals[0], vals[1:])
    except EvalError as e:
        raise DSLError(f"{where}: {e}") from None
    except KeyError:
        raise UnsupportedConstruct(f"{where}: the extension function {fn!r} is not supported by CDA's Cedar reader") from None


def _uid(obj: Any, where: str) -> EntityUID:
    if isinstance(obj, dict) and "__entity" in obj:
        obj = obj["__entity"]
    if not (isinstance(obj, dict) and isinstance(obj.get("type"), str) and isinstance(obj.get("id"), str)):
        raise DSLError(f"{where}: an entity is {{\"type\": …, \"id\": …}}, not {obj!r}")
    return EntityUID(obj["type"], obj["id"])


def read_value(obj: Any, ty: SType | None, where: str) -> Value:
    """One JSON value as a Cedar value, read with its schema type when known."""
    if isinstance(obj, dict) and "__extn" in obj:
        e = obj["__extn"]
        if not isinstance(e, dict):
            raise DSLError(f"{where}: __extn must be an object")
        if "args" in e:  # a method call written as a value: {"fn": "offset", "args": [receiver, argument]}
            return _extn_call(str(e.get("fn")), e["args"], where)
        return _extn(str(e.get("fn")), e.get("arg"), where)
    if isinstance(obj, dict) and "__entity" in obj:
        return _uid(obj, where)
    if ty is not None:
        if ty.kind == "Ext":
            return _extn("ip" if ty.name == "ipaddr" else ty.name, obj, where)
        if ty.kind == "Entity":
            return _uid(obj, where)
        if ty.kind == "Set" and isinstance(obj, list):
            return CSet(read_value(x, ty.elem, f"{where}[{i}]") for i, x in enumerate(obj))
        if ty.kind == "Record" and isinstance(obj, dict):
            types = ty.attr_map()
            return CRecord({k: read_value(v, types[k][0] if k in types else None, f"{where}.{k}") for k, v in obj.items()})
    if isinstance(obj, bool | str):
        return obj
    if isinstance(obj, int):
        if not LONG_MIN <= obj <= LONG_MAX:
            raise DSLError(f"{where}: {obj} is outside Cedar's 64-bit longs")
        return obj
    if isinstance(obj, list):
        return CSet(read_value(x, None, f"{where}[{i}]") for i, x in enumerate(obj))
    if isinstance(obj, dict):
        return CRecord({k: read_value(v, None, f"{where}.{k}") for k, v in obj.items()})
    raise DSLError(f"{where}: {obj!r} is not a Cedar value (floats and null are not)")


def read_entities(data: Any, schema: Schema | None, where: str = "entities") -> Entities:
    """An entities JSON list; the schema's actions (with their groups) are added as Cedar does."""
    if not isinstance(data, list):
        raise DSLError(f"{where}: the entities file is a JSON list")
    store = Entities()
    seen: dict[EntityUID, int] = {}
    for i, e in enumerate(data):
        w = f"{where}[{i}]"
        if not isinstance(e, dict) or "uid" not in e:
            raise DSLError(f"{w}: an entity is an object with uid, attrs and parents")
        uid = _uid(e["uid"], f"{w}.uid")
        if uid in seen:
            raise DSLError(f"{w}.uid: {uid} is in the store twice (also {where}[{seen[uid]}]); Cedar refuses a "
                           "store that lists an entity more than once")
        seen[uid] = i
        decl = schema.entities.get(uid.type) if schema else None
        attrs = e.get("attrs") or {}
        if not isinstance(attrs, dict):
            raise DSLError(f"{w}.attrs must be an object")
        types = decl.attrs.attr_map() if decl else {}
        _shallow(e, w)
        store.attrs[uid] = CRecord({k: read_value(v, types[k][0] if k in types else None, f"{w}.attrs.{k}")
                                    for k, v in attrs.items()})  # fmt: skip
        tags = e.get("tags") or {}
        if not isinstance(tags, dict):
            raise DSLError(f"{w}.tags must be an object")
        if tags:
            ttype = decl.tags if decl else None
            store.tags[uid] = CRecord({k: read_value(v, ttype, f"{w}.tags.{k}") for k, v in tags.items()})
        parents = e.get("parents") or []
        if not isinstance(parents, list):
            raise DSLError(f"{w}.parents must be a list")
        store.parents[uid] = [_uid(p, f"{w}.parents[{j}]") for j, p in enumerate(parents)]
        if schema is not None:
            _conforms(uid, store, schema, w)
    if schema is not None:
        for a in schema.actions.values():
            if a.uid not in store.attrs:
                store.attrs[a.uid] = CRecord({})
                store.parents[a.uid] = list(a.parents)
    store.close(where)
    return store


def _conforms(uid: EntityUID, store: Entities, schema: Schema, where: str) -> None:
    """Refuse, as Cedar does when it reads entities with a schema, an entity whose type is not
    declared, whose attributes or tags do not have their declared types, an enum entity with
    an id the enum lacks, or a parent of a type the schema does not allow."""
    if uid in schema.actions:
        return
    decl = schema.entities.get(uid.type)
    if decl is None:
        raise DSLError(f"{where}: the entity type {uid.type} is not declared in the schema")
    if decl.enum is not None and uid.id not in decl.enum:
        raise DSLError(f"{where}: {uid} is not one of the enumerated entities of {uid.type}")
    problem = _mismatch(store.attrs[uid], decl.attrs, f"the attributes of {uid}")
    tags = store.tags.get(uid)
    if problem is None and tags is not None:
        if decl.tags is None:
            problem = f"{uid} has tags but its type declares none"
        else:
            for k, v in tags.attrs.items():
                problem = problem or _mismatch(v, decl.tags, f"the tag {k!r} of {uid}")
    if problem is None:
        for p in store.parents[uid]:
            if p.type not in decl.parents:
                problem = f"{uid} may not have a parent of type {p.type}"
                break
    if problem:
        raise DSLError(f"{where}: {problem}; the entity does not conform to the schema")


def read_request(data: Mapping[str, Any], schema: Schema | None, where: str = "request") -> Request:
    """A request object (``principal``, ``action``, ``resource``, ``context``); the context is
    read with the action's context type from the schema."""
    principal = _uid(data.get("principal"), f"{where}.principal")
    action = _uid(data.get("action"), f"{where}.action")
    resource = _uid(data.get("resource"), f"{where}.resource")
    ctx_type = None
    if schema is not None and action in schema.actions:
        ctx_type = schema.actions[action].context
    ctx = read_value(_shallow(data.get("context") or {}, f"{where}.context"), ctx_type, f"{where}.context")
    if not isinstance(ctx, CRecord):
        raise DSLError(f"{where}.context must be an object")
    if schema is not None:
        validate_request(principal, action, resource, ctx, schema, where)
    return Request(principal, action, resource, ctx)


class RequestInvalid(CDAError, ValueError):
    """A request that does not conform to the schema: Cedar refuses to build it (no decision)."""


def validate_request(
    principal: EntityUID, action: EntityUID, resource: EntityUID, ctx: CRecord, schema: Schema, where: str
) -> None:
    """Refuse, as Cedar does, a request whose action the schema lacks, whose principal or
    resource type the action does not apply to, or whose context does not have its type."""
    decl = schema.actions.get(action)
    if decl is None:
        raise RequestInvalid(f"{where}: the action {action} is not in the schema")
    if principal.type not in decl.principals:
        raise RequestInvalid(f"{where}: the principal type {principal.type} is not valid for {action}")
    if resource.type not in decl.resources:
        raise RequestInvalid(f"{where}: the resource type {resource.type} is not valid for {action}")
    problem = _mismatch(ctx, decl.context, "context")
    if problem:
        raise RequestInvalid(f"{where}: {problem}, so the context is not valid for {action}")


def _mismatch(v: Value, t: SType, path: str) -> str | None:
    """Why ``v`` does not have type ``t`` (None when it does)."""
    ok = {
        "Bool": lambda: isinstance(v, bool),
        "Long": lambda: isinstance(v, int) and not isinstance(v, bool),
        "String": lambda: isinstance(v, str),
        "Entity": lambda: isinstance(v, EntityUID) and v.type == t.name,
        "Ext": lambda: isinstance(v, _EXT_CLASSES.get(t.name, ())),
    }
    if t.kind in ok:
        return None if ok[t.kind]() else f"{path} is not a {t.name or t.kind}"
    if t.kind == "Set":
        if not isinstance(v, CSet):
            return f"{path} is not a set"
        assert t.elem is not None
        for x in v:
            problem = _mismatch(x, t.elem, f"an element of {path}")
            if problem:
                return problem
        return None
    if not isinstance(v, CRecord):
        return f"{path} is not a record"
    declared = t.attr_map()
    for name in v.attrs:
        if name not in declared:
            return f"{path} has the attribute {name!r}, which the schema does not declare"
    for name, (at, required) in declared.items():
        if name not in v.attrs:
            if required:
                return f"{path} lacks the required attribute {name!r}"
            continue
        problem = _mismatch(v.attrs[name], at, f"{path}.{name}")
        if problem:
            return problem
    return None


_EXT_CLASSES: dict[str, type] = {"ipaddr": IPAddr, "decimal": Decimal, "datetime": Datetime, "duration": Duration}
