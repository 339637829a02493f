"""Cedar conditions as z3 formulas over a symbolic request context, for one concrete
(principal, action, resource) of a finite entity store.

The entity store is fixed, so everything that does not read ``context`` is evaluated
concretely (by :mod:`cda.policy.evaluate`); what reads it becomes a z3 term of a known Cedar
type: ``Bool``, ``Long`` (an integer kept within 64 bits, overflow being an error as in Cedar),
``String`` and ``decimal`` (an integer count of ten-thousandths). Every expression yields a
pair *(value, error)*: the value (a Cedar value or a :class:`Sym`) and the z3 condition under
which its evaluation raises an error. A construct outside this fragment (a set or an entity or
an ``ip`` in the context, an ``if`` whose branches differ in type under a symbolic condition …)
raises :class:`~cda.policy.syntax.UnsupportedConstruct` naming it, its file, line and column:
CDA refuses rather than answer wrong.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import z3

from cda.policy.authorization import scope_matches
from cda.policy.entities import Entities, Request
from cda.policy.evaluate import EvalError, _in, evaluate
from cda.policy.schema import SType
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
    Policy,
    Pos,
    RecLit,
    SetLit,
    Unary,
    UnsupportedConstruct,
    Var,
)
from cda.policy.values import LONG_MAX, LONG_MIN, CRecord, CSet, Decimal, EntityUID, IPAddr, canon

__all__ = ["Sym", "SymEntity", "SymIP", "SymRecord", "SymSet", "SymContext", "Encoder", "context_value", "and_", "or_", "not_", "as_z3"]

# Boolean formulas are Python ``True``/``False`` while they are constant and z3 terms once they
# are not: the helpers below fold constants, so a condition on the fixed entity store never
# reaches z3 (building z3 terms through its Python API is what an encoding spends its time on)
_TRUE, _FALSE = True, False


def _fold(xs: tuple[Any, ...], absorbing: bool, op: Any) -> Any:
    """``op`` over ``xs`` with Python Booleans folded away: ``absorbing`` (False for and, True
    for or) decides at once, the other constant drops out."""
    out = []
    for x in xs:
        if x is absorbing:
            return absorbing
        if x is not (not absorbing):
            out.append(x)
    if not out:
        return not absorbing
    return out[0] if len(out) == 1 else op(*out)


def and_(*xs: Any) -> Any:
    return _fold(xs, False, z3.And)


def or_(*xs: Any) -> Any:
    return _fold(xs, True, z3.Or)


def not_(x: Any) -> Any:
    if isinstance(x, bool):
        return not x
    return z3.Not(x)


def _ite(c: Any, a: Any, b: Any) -> Any:
    """``if c then a else b`` on Boolean formulas."""
    if isinstance(c, bool):
        return a if c else b
    if a is b and isinstance(a, bool):
        return a
    return or_(and_(c, a), and_(not_(c), b))


def as_z3(x: Any, zc: Any = None) -> Any:
    """A formula as a z3 term of context ``zc`` (constants become ``BoolVal``)."""
    return z3.BoolVal(x, zc) if isinstance(x, bool) else x
_ERR = object()  # the value of an expression that always errors (its error condition is true)


@dataclass(frozen=True)
class Sym:
    """A symbolic value: ``kind`` is Bool, Long, String or Decimal; ``term`` its z3 term."""

    kind: str
    term: Any


@dataclass(frozen=True)
class SymEntity:
    """A context attribute of entity type: one of ``candidates`` (the store's entities of its
    type), the one numbered by the z3 integer ``term``."""

    term: Any
    candidates: tuple[EntityUID, ...]

    def when(self, k: int) -> Any:
        return self.term == k


@dataclass(frozen=True)
class SymIP:
    """A context attribute of type ``ipaddr``: ``v6`` (a z3 Boolean), the address and the prefix
    length (z3 integers). Ranges are aligned blocks, so "within a concrete range of prefix q"
    is linear: the prefix is at least q and the address lies in the range."""

    v6: Any
    addr: Any
    prefix: Any


@dataclass(frozen=True)
class SymRecord:
    """A record some of whose attributes are symbolic; ``present`` is the z3 condition of an
    optional attribute being there (absent: always there)."""

    attrs: dict[str, Any]
    present: dict[str, Any]


@dataclass(frozen=True)
class SymSet:
    """A set literal with symbolic elements (only membership questions are encoded)."""

    items: tuple[Any, ...]


@dataclass(frozen=True)
class Opaque:
    """A context attribute of a type the analyses do not encode (a set, an entity, an ``ip``):
    fine while no policy reads it (a counterexample shows ``default``), refused when one does."""

    path: str
    type: str
    default: Any


def _default(t: SType) -> Any:
    from cda.policy.values import EntityUID, IPAddr

    if t.kind == "Set":
        return CSet([])
    if t.kind == "Entity":
        return EntityUID(t.name, "")
    if t.kind == "Ext" and t.name == "ipaddr":
        return IPAddr(4, 0, 32, "0.0.0.0")
    if t.kind == "Ext" and t.name == "datetime":
        from cda.policy.values import Datetime

        return Datetime(0)
    if t.kind == "Ext" and t.name == "duration":
        from cda.policy.values import Duration

        return Duration(0)
    return False


@dataclass
class SymContext:
    """The request context as z3 variables, built from the schema's context type."""

    value: SymRecord
    variables: list[tuple[str, Any, Any]]  # (path, Sym or SymEntity, presence condition or None)
    constraints: list[Any]
    #: the z3 context every term of one analysis lives in: a fresh one per analysis, so that the
    #: solver's answer (and the counterexample) does not depend on what ran before in the process
    zc: Any = None


def context_value(ty: SType, where: str = "context", store: Entities | None = None, zc: Any = None) -> SymContext:
    """Fresh z3 variables for a context of record type ``ty``; an attribute of entity type ranges
    over the entities of that type in ``store`` (none there: it is opaque)."""
    variables: list[tuple[str, Any, Any]] = []
    constraints: list[Any] = []

    def make(t: SType, path: str, present: Any) -> Any:
        if t.kind == "Bool":
            s = Sym("Bool", z3.Bool(path, zc))
        elif t.kind == "Long":
            s = Sym("Long", z3.Int(path, zc))
            constraints.append(_in_range(s.term))
        elif t.kind == "String":
            s = Sym("String", z3.String(path, zc))
        elif t.kind == "Ext" and t.name == "decimal":
            s = Sym("Decimal", z3.Int(path, zc))
            constraints.append(_in_range(s.term))
        elif t.kind == "Entity" and store is not None and any(u.type == t.name for u in store.attrs):
            cands = tuple(sorted(u for u in store.attrs if u.type == t.name))
            ent = SymEntity(z3.Int(path, zc), cands)
            constraints.append(z3.And(ent.term >= 0, ent.term < len(cands)))
            variables.append((path, ent, present))
            return ent
        elif t.kind == "Ext" and t.name == "ipaddr":
            ip = SymIP(z3.Bool(f"{path}#v6", zc), z3.Int(f"{path}#addr", zc), z3.Int(f"{path}#prefix", zc))
            constraints.append(z3.And(
                ip.addr >= 0, ip.prefix >= 0,
                z3.If(ip.v6, z3.And(ip.addr < 2**128, ip.prefix <= 128), z3.And(ip.addr < 2**32, ip.prefix <= 32)),
            ))  # fmt: skip
            variables.append((path, ip, present))
            return ip
        elif t.kind == "Record":
            attrs: dict[str, Any] = {}
            pres: dict[str, Any] = {}
            for name, at, required in t.attrs:
                p = None if required else z3.Bool(f"{path}.{name}?", zc)
                attrs[name] = make(at, f"{path}.{name}", p)
                if p is not None:
                    pres[name] = p
            return SymRecord(attrs, pres)
        else:
            what = f"{t.kind} ({t.name})" if t.name else t.kind
            return Opaque(path, what, _default(t))
        variables.append((path, s, present))
        return s

    value = make(ty, where, None)
    assert isinstance(value, SymRecord)
    return SymContext(value, variables, constraints, zc)


def _refuse(what: str, pos: Pos, policy: Policy) -> UnsupportedConstruct:
    return UnsupportedConstruct(f"{what} cannot be encoded for the analyses", line=pos[0], column=pos[1],
                                filename=policy.filename)  # fmt: skip


def _reads_context(e: Expr, memo: dict[int, bool]) -> bool:
    k = id(e)
    if k in memo:
        return memo[k]
    if isinstance(e, Var):
        r = e.name == "context"
    elif isinstance(e, Lit):
        r = False
    else:
        r = any(_reads_context(c, memo) for c in _children(e))
    memo[k] = r
    return r


def _children(e: Expr) -> list[Expr]:
    if isinstance(e, Unary | Has | Like | GetAttr):
        return [e.arg]
    if isinstance(e, Binary | And | Or):
        return [e.left, e.right]
    if isinstance(e, If):
        return [e.cond, e.then, e.orelse]
    if isinstance(e, Is):
        return [e.arg] + ([e.within] if e.within is not None else [])
    if isinstance(e, SetLit):
        return list(e.items)
    if isinstance(e, RecLit):
        return [x for _, x in e.items]
    if isinstance(e, Call):
        return list(e.args)
    if isinstance(e, Method):
        return [e.arg, *e.args]
    return []


def _lift(v: Any, zc: Any) -> Sym | None:
    """A concrete Bool/Long/String/decimal as a z3 term, or a Sym as it is."""
    if isinstance(v, Sym):
        return v
    if isinstance(v, bool):
        return Sym("Bool", z3.BoolVal(v, zc))
    if isinstance(v, int):
        return Sym("Long", z3.IntVal(v, zc))
    if isinstance(v, str):
        return Sym("String", z3.StringVal(v, zc))
    if isinstance(v, Decimal):
        return Sym("Decimal", z3.IntVal(v.scaled, zc))
    return None


def _kind(v: Any) -> str:
    if isinstance(v, Sym):
        return v.kind
    if isinstance(v, bool):
        return "Bool"
    if isinstance(v, int):
        return "Long"
    if isinstance(v, str):
        return "String"
    if isinstance(v, Decimal):
        return "Decimal"
    if isinstance(v, SymEntity | EntityUID):
        return "Entity"
    if isinstance(v, SymIP | IPAddr):
        return "IP"
    return type(v).__name__


def _symbolic(v: Any) -> bool:
    return isinstance(v, Sym | SymRecord | SymSet | SymEntity | SymIP)


def _ip_within(ip: SymIP, r: IPAddr) -> Any:
    """The symbolic address's range lies within the concrete range ``r`` (same version)."""
    low, high = r.bounds()
    return and_(ip.v6 if r.version == 6 else z3.Not(ip.v6), ip.prefix >= r.prefix, ip.addr >= low, ip.addr <= high)


def _in_range(t: Any) -> Any:
    return z3.And(t >= LONG_MIN, t <= LONG_MAX)


class Encoder:
    """Encodes the policies of a set for one request (concrete entities, symbolic context)."""

    def __init__(self, req: Request, store: Entities, ctx: SymContext) -> None:
        self.req = req
        self.store = store
        self.ctx = ctx
        self.zc = ctx.zc
        self.memo: dict[int, bool] = {}
        self.policy: Policy | None = None

    # -- a policy: (satisfied, error) as z3 Booleans
    def policy_formulas(self, p: Policy) -> tuple[Any, Any]:
        self.policy = p
        if not scope_matches(p, self.req, self.store):
            return _FALSE, _FALSE
        ok, err = _TRUE, _FALSE
        for kind, cond in p.conditions:
            v, e = self.expr(cond)
            b = self._bool(v)
            if b is None:
                e = _TRUE
                b = _FALSE
            elif kind == "unless":
                b = not_(b)
            err = or_(err, and_(ok, e))
            ok = and_(ok, not_(e), b)
            if ok is False:
                break
        return and_(ok, not_(err)), err

    # -- expressions
    def _bool(self, v: Any) -> Any:
        if isinstance(v, bool):
            return v
        if isinstance(v, Sym) and v.kind == "Bool":
            return v.term
        return None

    def _concrete(self, node: Expr, err: Any) -> tuple[Any, Any]:
        """``node`` (its children already replaced by their concrete values) evaluated concretely."""
        try:
            return evaluate(node, self.req, self.store), err
        except EvalError:
            return _ERR, _TRUE

    def expr(self, e: Expr) -> tuple[Any, Any]:
        if not _reads_context(e, self.memo):
            try:
                return evaluate(e, self.req, self.store), _FALSE
            except EvalError:
                return _ERR, _TRUE
        assert self.policy is not None
        pol = self.policy
        if isinstance(e, Var):
            return self.ctx.value, _FALSE
        if isinstance(e, And | Or):
            lv, le = self.expr(e.left)
            rv, re_ = self.expr(e.right)
            lb, rb = self._bool(lv), self._bool(rv)
            if lb is None:
                return _ERR, _TRUE
            go_on = lb if isinstance(e, And) else not_(lb)
            if rb is None:  # the right side is not a Bool: an error when reached, else the left decides
                return Sym("Bool", lb), or_(le, go_on)
            err = or_(le, and_(go_on, re_))
            val = and_(lb, rb) if isinstance(e, And) else or_(lb, rb)
            return Sym("Bool", val), err
        if isinstance(e, If):
            cv, ce = self.expr(e.cond)
            c = self._bool(cv)
            if c is None:
                return _ERR, _TRUE
            tv, te = self.expr(e.then)
            fv, fe = self.expr(e.orelse)
            err = or_(ce, _ite(c, te, fe))
            if tv is _ERR:
                return fv, or_(ce, c, fe)
            if fv is _ERR:
                return tv, or_(ce, not_(c), te)
            if not isinstance(tv, Sym | SymRecord | SymSet) and not isinstance(fv, Sym | SymRecord | SymSet):
                if canon(tv) == canon(fv):
                    return tv, err
            ts, fs = _lift(tv, self.zc), _lift(fv, self.zc)
            if ts is None or fs is None or ts.kind != fs.kind:
                raise _refuse("an if-then-else whose branches are not both Bool, Long, String or decimal", e.pos, pol)
            if isinstance(c, bool):
                return (tv if c else fv), err
            return Sym(ts.kind, z3.If(c, ts.term, fs.term)), err
        if isinstance(e, Unary):
            v, err = self.expr(e.arg)
            if v is _ERR:
                return _ERR, _TRUE
            if not _symbolic(v):
                return self._concrete(replace(e, arg=Lit(v, e.pos)), err)
            if e.op == "!":
                b = self._bool(v)
                return (_ERR, _TRUE) if b is None else (Sym("Bool", not_(b)), err)
            if _kind(v) != "Long":
                return _ERR, _TRUE
            t = -_lift(v, self.zc).term  # type: ignore[union-attr]
            return Sym("Long", t), or_(err, z3.Not(_in_range(t)))
        if isinstance(e, Binary):
            lv, le = self.expr(e.left)
            rv, re_ = self.expr(e.right)
            err = or_(le, re_)
            if lv is _ERR or rv is _ERR:
                return _ERR, _TRUE
            if not _symbolic(lv) and not _symbolic(rv):
                return self._concrete(replace(e, left=Lit(lv, e.pos), right=Lit(rv, e.pos)), err)
            if e.op in ("==", "!="):
                eq = self._eq(lv, rv, e.pos)
                return Sym("Bool", eq if e.op == "==" else not_(eq)), err
            if e.op == "in":
                if isinstance(lv, SymEntity) or isinstance(rv, SymEntity):
                    return self._in_sym(lv, rv, e.pos, err)
                return _ERR, _TRUE  # a symbolic Bool/Long/String/decimal/record is never an entity
            if _kind(lv) != "Long" or _kind(rv) != "Long":
                return _ERR, _TRUE
            x, y = _lift(lv, self.zc).term, _lift(rv, self.zc).term  # type: ignore[union-attr]
            if e.op in ("<", "<=", ">", ">="):
                cmp = {"<": x < y, "<=": x <= y, ">": x > y, ">=": x >= y}[e.op]
                return Sym("Bool", cmp), err
            if e.op == "*" and not (z3.is_int_value(x) or z3.is_int_value(y)):
                raise _refuse("a product of two context values (non-linear)", e.pos, pol)
            t = {"+": x + y, "-": x - y, "*": x * y}[e.op]
            return Sym("Long", t), or_(err, z3.Not(_in_range(t)))
        if isinstance(e, GetAttr):
            v, err = self.expr(e.arg)
            if v is _ERR:
                return _ERR, _TRUE
            if not _symbolic(v):
                return self._concrete(replace(e, arg=Lit(v, e.pos)), err)
            if isinstance(v, SymEntity):
                return self._entity_attr(v, e.attr, e.pos, err)
            if isinstance(v, SymRecord):
                if e.attr not in v.attrs:
                    return _ERR, _TRUE
                pres = v.present.get(e.attr)
                got = v.attrs[e.attr]
                if isinstance(got, Opaque):
                    raise _refuse(f"reading {got.path}, of type {got.type},", e.pos, pol)
                return got, err if pres is None else or_(err, z3.Not(pres))
            if isinstance(v, CRecord):
                return (v.attrs[e.attr], err) if e.attr in v.attrs else (_ERR, _TRUE)
            return _ERR, _TRUE  # a symbolic Bool/Long/String has no attributes
        if isinstance(e, Has):
            v, err = self.expr(e.arg)
            if v is _ERR:
                return _ERR, _TRUE
            if not _symbolic(v):
                return self._concrete(replace(e, arg=Lit(v, e.pos)), err)
            if isinstance(v, SymEntity):
                has = [v.when(k) for k, u in enumerate(v.candidates) if e.attr in self.store.attrs[u].attrs]
                return Sym("Bool", or_(*has)), err
            if isinstance(v, SymRecord):
                if e.attr not in v.attrs:
                    return False, err
                pres = v.present.get(e.attr)
                return (True, err) if pres is None else (Sym("Bool", pres), err)
            if isinstance(v, CRecord):
                return e.attr in v.attrs, err
            return _ERR, _TRUE
        if isinstance(e, Like):
            v, err = self.expr(e.arg)
            if v is _ERR:
                return _ERR, _TRUE
            if not _symbolic(v):
                return self._concrete(replace(e, arg=Lit(v, e.pos)), err)
            if _kind(v) != "String":
                return _ERR, _TRUE
            return Sym("Bool", z3.InRe(_lift(v, self.zc).term, _regex(e.pattern, self.zc))), err  # type: ignore[union-attr]
        if isinstance(e, Is):
            v, err = self.expr(e.arg)
            w, werr = self.expr(e.within) if e.within is not None else (None, _FALSE)
            if v is _ERR or w is _ERR:
                return _ERR, _TRUE
            if isinstance(v, SymEntity) and not isinstance(w, Sym | SymRecord | SymSet):
                if v.candidates[0].type != e.type:
                    return False, or_(err, werr)
                if e.within is None:
                    return True, err
                val, ierr = self._in_sym(v, w, e.pos, or_(err, werr))
                return val, ierr
            if _symbolic(v) or _symbolic(w):
                return _ERR, _TRUE  # a symbolic Bool/Long/String/decimal/record is never an entity
            within = Lit(w, e.pos) if e.within is not None and w is not None else None
            return self._concrete(replace(e, arg=Lit(v, e.pos), within=within), or_(err, werr))
        if isinstance(e, SetLit):
            items = [self.expr(x) for x in e.items]
            err = or_(*[x[1] for x in items])
            if any(x[0] is _ERR for x in items):
                return _ERR, _TRUE
            vals = [x[0] for x in items]
            if all(not isinstance(v, Sym | SymRecord | SymSet) for v in vals):
                return CSet(vals), err
            return SymSet(tuple(vals)), err
        if isinstance(e, RecLit):
            items2 = [(k, self.expr(x)) for k, x in e.items]
            if any(x[0] is _ERR for _, x in items2):
                return _ERR, _TRUE
            err = or_(*[x[1] for _, x in items2])
            return SymRecord({k: x[0] for k, x in items2}, {}), err
        if isinstance(e, Call):
            cargs = [self.expr(a) for a in e.args]
            if any(a[0] is _ERR for a in cargs):
                return _ERR, _TRUE
            if not any(_symbolic(a[0]) for a in cargs):
                cerr = or_(*[a[1] for a in cargs])
                return self._concrete(replace(e, args=tuple(Lit(a[0], e.pos) for a in cargs)), cerr)
            raise _refuse(f"{e.name}() of a context value", e.pos, pol)
        assert isinstance(e, Method)
        return self.method(e)

    def method(self, e: Method) -> tuple[Any, Any]:
        assert self.policy is not None
        rv, re_ = self.expr(e.arg)
        args = [self.expr(a) for a in e.args]
        err = or_(re_, *[a[1] for a in args])
        if rv is _ERR or any(a[0] is _ERR for a in args):
            return _ERR, _TRUE
        argv = [a[0] for a in args]
        name = e.name
        if not any(_symbolic(x) for x in [rv, *argv]):
            return self._concrete(replace(e, arg=Lit(rv, e.pos), args=tuple(Lit(a, e.pos) for a in argv)), err)
        from cda.policy.parse import METHODS

        if len(argv) != METHODS[name]:
            return _ERR, _TRUE
        if name in ("contains", "containsAll", "containsAny", "isEmpty"):
            if not isinstance(rv, CSet | SymSet):
                return _ERR, _TRUE
            elems = list(rv.items) if isinstance(rv, SymSet) else list(rv)
            if name == "isEmpty":
                return len(elems) == 0, err
            if name == "contains":
                return Sym("Bool", or_(*[self._eq(x, argv[0], e.pos) for x in elems])), err
            other = argv[0]
            if not isinstance(other, CSet | SymSet):
                return _ERR, _TRUE
            oel = list(other.items) if isinstance(other, SymSet) else list(other)
            has = [or_(*[self._eq(x, y, e.pos) for x in elems]) for y in oel]
            return Sym("Bool", and_(*has) if name == "containsAll" else or_(*has)), err
        if name in ("lessThan", "lessThanOrEqual", "greaterThan", "greaterThanOrEqual"):
            if _kind(rv) != "Decimal" or _kind(argv[0]) != "Decimal":
                return _ERR, _TRUE
            x, y = _lift(rv, self.zc).term, _lift(argv[0], self.zc).term  # type: ignore[union-attr]
            op = {"lessThan": x < y, "lessThanOrEqual": x <= y, "greaterThan": x > y, "greaterThanOrEqual": x >= y}
            return Sym("Bool", op[name]), err
        if name in ("getTag", "hasTag"):
            raise _refuse(f"{name}() with a key read from the context", e.pos, self.policy)
        if isinstance(rv, SymIP):
            return self._ip_method(e, rv, argv, err)
        if isinstance(rv, Sym | SymRecord | SymEntity):
            return _ERR, _TRUE  # ip/datetime methods on a Bool/Long/String/decimal/record/entity
        raise _refuse(f"{name}() with an argument read from the context", e.pos, self.policy)

    def _ip_method(self, e: Method, ip: SymIP, args: list[Any], err: Any) -> tuple[Any, Any]:
        assert self.policy is not None
        name = e.name
        if name == "isIpv4":
            return Sym("Bool", z3.Not(ip.v6)), err
        if name == "isIpv6":
            return Sym("Bool", ip.v6), err
        if name == "isLoopback":
            return Sym("Bool", or_(_ip_within(ip, IPAddr(4, 0x7F000000, 8, "127.0.0.0/8")),
                                   _ip_within(ip, IPAddr(6, 1, 128, "::1")))), err  # fmt: skip
        if name == "isMulticast":
            return Sym("Bool", or_(_ip_within(ip, IPAddr(4, 0xE0000000, 4, "224.0.0.0/4")),
                                   _ip_within(ip, IPAddr(6, 0xFF << 120, 8, "ff00::/8")))), err  # fmt: skip
        if name == "isInRange":
            other = args[0]
            if isinstance(other, IPAddr):
                return Sym("Bool", _ip_within(ip, other)), err
            if isinstance(other, SymIP):
                raise _refuse("isInRange() of two addresses read from the context", e.pos, self.policy)
            return _ERR, _TRUE
        return _ERR, _TRUE  # a decimal/datetime method on an ipaddr: a type error

    def _in_sym(self, a: Any, b: Any, pos: Pos, err: Any) -> tuple[Any, Any]:
        """``a in b`` where one side is a context entity: a case split over its candidates."""
        assert self.policy is not None
        if isinstance(b, SymSet):
            raise _refuse("'in' a set built from the context", pos, self.policy)
        la = list(enumerate(a.candidates)) if isinstance(a, SymEntity) else [(None, a)]
        lb = list(enumerate(b.candidates)) if isinstance(b, SymEntity) else [(None, b)]
        cases, errs = [], []
        for i, x in la:
            for j, y in lb:
                guard = and_(a.when(i) if i is not None else True, b.when(j) if j is not None else True)
                try:
                    if _in(x, y, self.store, pos):
                        cases.append(guard)
                except EvalError:
                    errs.append(guard)
        if len(errs) == len(la) * len(lb):
            return _ERR, _TRUE
        return Sym("Bool", or_(*cases)), or_(err, *errs)

    def _entity_attr(self, v: SymEntity, attr: str, pos: Pos, err: Any) -> tuple[Any, Any]:
        """``v.attr`` for a context entity: the candidates' values as one symbolic value."""
        assert self.policy is not None
        vals: list[tuple[int, Any]] = []
        errs = []
        for k, u in enumerate(v.candidates):
            rec = self.store.attrs[u].attrs
            if attr in rec:
                vals.append((k, rec[attr]))
            else:
                errs.append(v.when(k))
        if not vals:
            return _ERR, _TRUE
        err = or_(err, *errs)
        first = vals[0][1]
        if all(canon(x) == canon(first) for _, x in vals):
            return first, err
        lifted = [(k, _lift(x, self.zc)) for k, x in vals]
        kinds = {s.kind if s is not None else None for _, s in lifted}
        if None in kinds or len(kinds) != 1:
            raise _refuse(f"the attribute {attr!r} of a context entity (values of differing or non-scalar types)",
                          pos, self.policy)  # fmt: skip
        term = lifted[-1][1].term  # type: ignore[union-attr]
        for k, sym in reversed(lifted[:-1]):
            term = z3.If(v.when(k), sym.term, term)  # type: ignore[union-attr]
        return Sym(kinds.pop(), term), err  # type: ignore[arg-type]

    def _eq(self, a: Any, b: Any, pos: Pos) -> Any:
        assert self.policy is not None
        if isinstance(a, SymIP) or isinstance(b, SymIP):
            if not isinstance(a, SymIP):
                a, b = b, a
            if isinstance(b, IPAddr):
                return and_(a.v6 if b.version == 6 else z3.Not(a.v6), a.addr == b.addr, a.prefix == b.prefix)
            if isinstance(b, SymIP):
                return and_(a.v6 == b.v6, a.addr == b.addr, a.prefix == b.prefix)
            if isinstance(b, SymRecord | SymSet):
                raise _refuse("== on a record or set built from the context", pos, self.policy)
            return False
        if isinstance(a, SymEntity) or isinstance(b, SymEntity):
            if not isinstance(a, SymEntity):
                a, b = b, a
            if isinstance(b, SymEntity):
                return or_(*[and_(a.when(i), b.when(j)) for i, x in enumerate(a.candidates)
                             for j, y in enumerate(b.candidates) if x == y])  # fmt: skip
            if isinstance(b, EntityUID):
                return or_(*[a.when(i) for i, x in enumerate(a.candidates) if x == b])
            if isinstance(b, SymRecord | SymSet):
                raise _refuse("== on a record or set built from the context", pos, self.policy)
            return False
        if isinstance(a, SymRecord | SymSet) or isinstance(b, SymRecord | SymSet):
            raise _refuse("== on a record or set built from the context", pos, self.policy)
        if not isinstance(a, Sym) and not isinstance(b, Sym):
            return bool(canon(a) == canon(b))
        ka, kb = _kind(a), _kind(b)
        if ka != kb:
            return _FALSE
        return _lift(a, self.zc).term == _lift(b, self.zc).term  # type: ignore[union-attr]


def _regex(pattern: tuple[str | None, ...], zc: Any) -> Any:
    anything = z3.Star(z3.AllChar(z3.ReSort(z3.StringSort(zc))))
    parts = [anything if p is None else z3.Re(z3.StringVal(p, zc)) for p in pattern]
    if not parts:
        return z3.Re(z3.StringVal("", zc))
    return parts[0] if len(parts) == 1 else z3.Concat(*parts)

