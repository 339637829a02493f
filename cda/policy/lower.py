"""Cedar lowered to CDA's IR: policies as nodes over a symbolic request and entity store.

:class:`Lowering` holds one problem being built (a :class:`GroundProblem` and its factory) and
lowers Cedar expressions to ``(value, error)`` pairs (:mod:`cda.policy.symvalues`) with Cedar's
evaluation order: ``&&``/``||``/``if`` short-circuit, a type error, a missing attribute, a
64-bit overflow or a bad extension literal is an error, never a value. What an expression
reads of the entity store goes through a *symbolic store* (:mod:`cda.policy.symstore`): every
store the schema allows, or one given store.

Sets are finite: a symbolic set is read through membership atoms, one per element term the
problem names (its *universe*, per element type). What quantifies over a set (``containsAll``
of a symbolic set, ``isEmpty``, ``==`` of sets, ``in`` a set) gets a placeholder atom and a
*witness*: a fresh element added to the universe, which stands for the element that makes the
answer what it is (the one a set lacks, or shares). Once every expression is lowered,
:meth:`Lowering.close` makes the atoms for every symbolic set and element, the congruence
axioms (equal elements are members alike), the store's axioms and each placeholder's
definition over the final universe. A model of the problem is then a finite scenario: the
universe's values are all the entities, strings and numbers a counterexample needs (SymCC's
*footprint*, docs/policy.md "How it is decided").
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from cda.policy.entities import ExtensionError, parse_datetime, parse_decimal, parse_duration, parse_ip
from cda.policy.parse import METHODS
from cda.policy.schema import SType
from cda.policy.solving import AtomInfo, GroundProblem, Node, NodeFactory, Sort, TermConst, TermVar, evaluate
from cda.policy.symvalues import (
    IPV,
    LONG,
    BoolV,
    Cases,
    EntV,
    Field,
    IntV,
    Leaf,
    Lin,
    Opaque,
    Out,
    RecV,
    SetV,
    StrV,
    Val,
    alternatives,
    in_range,
    join,
    le,
    lin_eq,
    term_key,
)
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
from cda.policy.values import CRecord, CSet, Datetime, Decimal, Duration, EntityUID, IPAddr, Value

if TYPE_CHECKING:
    from cda.policy.symstore import SymStore

__all__ = ["Lowering", "PolicyParts", "Request", "DATETIME_RANGE"]

#: the datetimes a request or an entity can hold: those Cedar's ``datetime("…")`` reads
#: (years 0001–9999), so that every counterexample can be written in Cedar's JSON
DATETIME_RANGE = (-62_135_596_800_000, 253_402_300_799_999)
_DAY = 86_400_000
_PER = {"toDays": _DAY, "toHours": 3_600_000, "toMinutes": 60_000, "toSeconds": 1000, "toMilliseconds": 1}
_LOOPBACK = {4: (0x7F000000, 8), 6: (1, 128)}
_MULTICAST = {4: (0xE0000000, 4), 6: (0xFF << 120, 8)}


@dataclass
class Request:
    """The request as lowered values: principal and resource (entities), the action (a
    constant), the context (a record)."""

    principal: EntV
    action: EntV
    resource: EntV
    context: Val


@dataclass(frozen=True)
class PolicyParts:
    """A lowered policy taken apart: its scope and each condition's (value, error) as written
    (``when``'s value; an ``unless`` negates it when combined), for a repair that changes one
    condition (:mod:`cda.policy.repair`). ``complete`` is false when lowering stopped early (a
    scope or a condition that never holds: the conditions after it were not lowered)."""

    scope: Node
    conditions: tuple[tuple[Node, Node], ...]
    complete: bool


@dataclass
class _Deferred:
    """A placeholder atom, defined at closing over the final universe (with its witness)."""

    atom: Node
    witness: Leaf | None
    build: Callable[[Leaf | None], Node]


class Lowering:
    """One problem being lowered (see the module docstring)."""

    def __init__(self) -> None:
        self.f = NodeFactory()
        self.gp = GroundProblem(self.f)
        self.string_sort = Sort("String", "string")
        self.store: SymStore  # set by the store, which needs the lowering to make its values
        self.universe: dict[str, dict[Any, Leaf]] = {}  # element type key → element leaves
        self.set_vars: dict[str, str] = {}  # symbolic set name → its element type key
        self.members: dict[str, dict[Any, Node]] = {}  # set name → element key → atom
        self._member_leaf: dict[str, dict[Any, Leaf]] = {}
        self.deferred: list[_Deferred] = []
        #: what a small scenario avoids: (name, node, weight) soft clauses, kept false if it can
        self.avoid: list[tuple[str, Node, int]] = []
        self._names: dict[str, int] = {}
        self.policy: Policy | None = None  # the policy being lowered (for the place of a refusal)
        self._attr_reads: dict[Any, Out] = {}  # (entity term, attribute) → what reading it gives
        self.parts: dict[int, PolicyParts] = {}  # id(policy) → its lowered parts
        self.string_constants: set[str] = set()  # every string the problem names
        #: (ip|decimal, string term) → (the string, what it reads as, its error atom)
        self.readings: dict[tuple[str, Any], tuple[StrV, Leaf, Node]] = {}
        self.like_on_variables = False  # a `like` reads a symbolic string (readings then refused)
        #: id(template) → slot → [(chosen, the slot's entity or None: a link that never applies here)]
        self.slots: dict[int, dict[str, list[tuple[Node, EntV | None]]]] = {}
        self.closed = False

    # ------------------------------------------------------------------ names and variables
    def fresh(self, prefix: str) -> str:
        n = self._names.get(prefix, 0)
        self._names[prefix] = n + 1
        return prefix if n == 0 else f"{prefix}#{n}"

    def atom(self, name: str) -> Node:
        """A free Boolean atom (declared in the problem)."""
        if name not in self.gp.atoms:
            self.gp.atoms[name] = AtomInfo(name, "var", "cedar", ())
        return self.f.atom(name)

    def fresh_atom(self, prefix: str) -> Node:
        return self.atom(self.fresh(prefix))

    def int_var(self, prefix: str, low: int, high: int) -> Lin:
        name = self.fresh(prefix)
        self.gp.declare_int(name, low, high)
        return Lin.var(name)

    def term_var(self, prefix: str, sort: Sort) -> TermVar:
        return self.gp.declare_term(self.fresh(prefix), sort)

    def background(self, node: Node) -> None:
        if node is not self.f.true:
            self.gp.background.append(node)

    # ------------------------------------------------------------------ leaves
    def string(self, s: str) -> StrV:
        self.string_constants.add(s)
        return StrV(TermConst(self.string_sort, s))

    def entity(self, uid: EntityUID) -> EntV:
        leaf = EntV(TermConst(self.store.sort(uid.type), uid.id), uid.type)
        self.register(leaf)
        return leaf

    def register(self, leaf: Leaf) -> None:
        """Add ``leaf`` to its type's universe (the elements sets are read over)."""
        if self.closed:
            return
        self.universe.setdefault(elem_key(leaf), {}).setdefault(leaf.key(), leaf)

    def const(self, v: Value) -> Val:
        """A concrete Cedar value as a leaf."""
        f = self.f
        if isinstance(v, bool):
            return BoolV(f.const(v))
        if isinstance(v, int):
            return IntV(Lin.of(v))
        if isinstance(v, str):
            return self.string(v)
        if isinstance(v, EntityUID):
            return self.entity(v)
        if isinstance(v, Decimal):
            return IntV(Lin.of(v.scaled), "decimal")
        if isinstance(v, Datetime):
            return IntV(Lin.of(v.ms), "datetime")
        if isinstance(v, Duration):
            return IntV(Lin.of(v.ms), "duration")
        if isinstance(v, IPAddr):
            return IPV(f.const(v.version == 6), Lin.of(v.addr), Lin.of(v.prefix))
        if isinstance(v, CSet):
            items = tuple(self.const(x) for x in v)
            return self.literal_set(items)
        assert isinstance(v, CRecord)
        return RecV({k: _const_field(f, self.const(x)) for k, x in v.attrs.items()})

    def literal_set(self, items: tuple[Val, ...]) -> SetV:
        keys = {elem_key(leaf) for item in items for _, leaf in alternatives(item, self.f)}
        for item in items:
            for _, leaf in alternatives(item, self.f):
                if not isinstance(leaf, SetV | RecV | Opaque):
                    self.register(leaf)
        return SetV(items=items, elem=keys.pop() if len(keys) == 1 else ("mixed" if keys else None))

    def fresh_value(self, t: SType, prefix: str, on_leaf: Callable[[tuple[str, ...], Leaf], None] | None = None,
                    path: tuple[str, ...] = ()) -> Val:  # fmt: skip
        """A symbolic value of schema type ``t`` (fresh variables named from ``prefix``); a
        record's attributes are made when first read. ``on_leaf(path, leaf)`` sees every leaf
        made (and every optional attribute's presence atom, as a :class:`BoolV` under the path
        ``(…, name, "?")``), for the congruence of a store's attribute functions."""
        f = self.f
        leaf: Leaf
        if t.kind == "Bool":
            leaf = BoolV(self.fresh_atom(prefix))
        elif t.kind == "Long":
            leaf = IntV(self.int_var(prefix, *LONG))
        elif t.kind == "String":
            leaf = StrV(self.term_var(prefix, self.string_sort))
        elif t.kind == "Entity":
            sort = self.store.sort(t.name)
            if sort.domain is not None and not sort.domain:  # a fixed store without such an entity
                return Opaque(f"{prefix}, of entity type {t.name}, of which the store has no entity")
            leaf = EntV(self.term_var(prefix, sort), t.name)
            self.register(leaf)
        elif t.kind == "Ext" and t.name in ("decimal", "duration"):
            leaf = IntV(self.int_var(prefix, *LONG), t.name)
        elif t.kind == "Ext" and t.name == "datetime":
            leaf = IntV(self.int_var(prefix, *DATETIME_RANGE), "datetime")
        elif t.kind == "Ext" and t.name == "ipaddr":
            leaf = self.fresh_ip(prefix)
        elif t.kind == "Set" and t.elem is not None and t.elem.kind not in ("Set", "Record"):
            name = self.fresh(prefix)
            key = stype_key(t.elem)
            self.set_vars[name] = key
            self.members[name] = {}
            self._member_leaf[name] = {}
            leaf = SetV(var=name, elem=key)
        elif t.kind == "Record":
            fields: dict[str, Field] = {}
            for name, at, required in t.attrs:
                make = _maker(self, at, f"{prefix}.{name}", on_leaf, (*path, name))
                if required:
                    fields[name] = Field(make, _present=f.true)
                else:
                    fields[name] = Field(make, _presence(self, at, f"{prefix}.{name}", on_leaf, (*path, name)))
            return RecV(fields)
        else:
            what = f"{t.kind}<{t.elem.kind}>" if t.kind == "Set" and t.elem is not None else t.kind
            return Opaque(f"{prefix}, of type {what}")
        if on_leaf is not None:
            on_leaf(path, leaf)
        return leaf

    def inhabited(self, t: SType) -> bool:
        """Whether type ``t`` has a value: an entity type has one unless the store is given and
        holds no entity of it; a record, unless a required attribute has none."""
        if t.kind == "Entity":
            domain = self.store.sort(t.name).domain
            return domain is None or bool(domain)
        if t.kind == "Record":
            return all(self.inhabited(at) for _, at, required in t.attrs if required)
        return True

    def fresh_ip(self, prefix: str) -> IPV:
        f = self.f
        v6 = self.fresh_atom(f"{prefix}#v6")
        addr = self.int_var(f"{prefix}#addr", 0, 2**128 - 1)
        prefix_len = self.int_var(f"{prefix}#prefix", 0, 128)
        v4_bounds = f.and_([le(f, addr, Lin.of(2**32 - 1)), le(f, prefix_len, Lin.of(32))])
        self.background(f.or_([v6, v4_bounds]))
        return IPV(v6, addr, prefix_len)

    def fresh_leaf(self, key: str, prefix: str) -> Leaf:
        """A fresh element of element type ``key`` (a witness)."""
        if key.startswith("Entity:"):
            return self.fresh_value(SType("Entity", name=key[7:]), prefix)  # type: ignore[return-value]
        t = {"Bool": SType("Bool"), "Long": SType("Long"), "String": SType("String"),
             "decimal": SType("Ext", "decimal"), "datetime": SType("Ext", "datetime"),
             "duration": SType("Ext", "duration"), "ipaddr": SType("Ext", "ipaddr")}[key]  # fmt: skip
        leaf = self.fresh_value(t, prefix)
        assert isinstance(leaf, Leaf)
        return leaf

    # ------------------------------------------------------------------ sets
    def member(self, s: SetV, x: Leaf) -> Node:
        """``x ∈ s``."""
        f = self.f
        if s.items is not None:
            return f.or_(self.eq(item, x) for item in s.items)
        assert s.var is not None
        if elem_key(x) != s.elem:
            return f.false
        return self._member_atom(s.var, x)

    def _member_atom(self, name: str, x: Leaf) -> Node:
        atoms = self.members[name]
        k = x.key()
        found = atoms.get(k)
        if found is None:
            found = atoms[k] = self.fresh_atom(f"{name}∋")
            self._member_leaf[name][k] = x
            self.avoid.append((f"member:{name}", found, 1))
            self.register(x)
        return found

    def defer(self, prefix: str, witness: str | None, build: Callable[[Leaf | None], Node]) -> Node:
        """A placeholder atom for ``build(witness)``, defined when the universe is final."""
        atom = self.fresh_atom(prefix)
        w = None
        closed = self.store.sort(witness[7:]).domain if witness is not None and witness.startswith("Entity:") else None
        if closed is not None:  # a closed population: its values are the universe, no witness needed
            assert witness is not None
            for ident in closed:
                self.entity(EntityUID(witness[7:], ident))
        elif witness is not None and witness != "mixed":
            w = self.fresh_leaf(witness, f"{prefix}.witness")
            self.register(w)
        self.deferred.append(_Deferred(atom, w, build))
        return atom

    def elements(self, key: str | None) -> list[Leaf]:
        return list(self.universe.get(key or "", {}).values()) if key else []

    def contains_all(self, a: SetV, b: SetV) -> Node:
        """``a.containsAll(b)``: every element of ``b`` is in ``a``."""
        f = self.f
        if b.items is not None:
            return f.and_(self.member_val(a, item) for item in b.items)
        assert b.var is not None
        bv = b.var
        return self.defer("containsAll", b.elem, lambda w: f.and_(
            f.implies(self.member(SetV(var=bv, elem=b.elem), x), self.member(a, x)) for x in self.elements(b.elem)))  # fmt: skip

    def contains_any(self, a: SetV, b: SetV) -> Node:
        f = self.f
        if b.items is not None:
            return f.or_(self.member_val(a, item) for item in b.items)
        if a.items is not None:
            return f.or_(self.member_val(b, item) for item in a.items)
        return self.defer("containsAny", b.elem, lambda w: f.or_(
            f.and_([self.member(a, x), self.member(b, x)]) for x in self.elements(b.elem)))  # fmt: skip

    def is_empty(self, s: SetV) -> Node:
        f = self.f
        if s.items is not None:
            return f.const(not s.items)
        return self.defer("isEmpty", s.elem, lambda w: f.not_(f.or_(self.member(s, x) for x in self.elements(s.elem))))

    def set_eq(self, a: SetV, b: SetV) -> Node:
        f = self.f
        if a.items is not None and b.items is not None:
            return f.and_([self.contains_all(a, b), self.contains_all(b, a)])
        keys = {k for k in (a.elem, b.elem) if k is not None}
        if len(keys) > 1:  # sets of two element types are equal only when both are empty
            return f.and_([self.is_empty(a), self.is_empty(b)])
        key = keys.pop() if keys else None
        if key == "mixed":
            raise self.refuse("== between a symbolic set and a set literal of several types", None)
        return self.defer("setEq", key, lambda w: f.and_(
            f.iff(self.member(a, x), self.member(b, x)) for x in self.elements(key)))  # fmt: skip

    def member_val(self, s: SetV, v: Val) -> Node:
        f = self.f
        return f.or_(f.and_([g, self.member(s, leaf)]) for g, leaf in alternatives(v, f))

    # ------------------------------------------------------------------ equality
    def eq(self, a: Val, b: Val) -> Node:
        """Cedar's ``==`` (values of different types are never equal)."""
        f = self.f
        return f.or_(f.and_([ga, gb, self.leaf_eq(x, y)]) for ga, x in alternatives(a, f) for gb, y in alternatives(b, f))

    def leaf_eq(self, x: Leaf, y: Leaf) -> Node:
        f = self.f
        for z in (x, y):
            if isinstance(z, Opaque):
                raise self.refuse(f"comparing {z.what}", None)
        if x.ty != y.ty:
            return f.false
        if isinstance(x, BoolV):
            return f.iff(x.node, y.node)  # type: ignore[attr-defined]
        if isinstance(x, IntV):
            return lin_eq(f, x.lin, y.lin)  # type: ignore[attr-defined]
        if isinstance(x, StrV):
            return f.eq(x.term, y.term)  # type: ignore[attr-defined]
        if isinstance(x, EntV):
            assert isinstance(y, EntV)
            return f.eq(x.term, y.term) if x.etype == y.etype else f.false
        if isinstance(x, IPV):
            assert isinstance(y, IPV)
            return f.and_([f.iff(x.v6, y.v6), lin_eq(f, x.addr, y.addr), lin_eq(f, x.prefix, y.prefix)])
        if isinstance(x, SetV):
            assert isinstance(y, SetV)
            return self.set_eq(x, y)
        assert isinstance(x, RecV) and isinstance(y, RecV)
        parts = []
        for k in sorted(set(x.fields) | set(y.fields)):
            fx, fy = x.fields.get(k), y.fields.get(k)
            if fx is None or fy is None:
                parts.append(f.not_((fx or fy).present))  # type: ignore[union-attr]
                continue
            both = f.and_([fx.present, fy.present])
            parts.append(f.iff(fx.present, fy.present))
            parts.append(f.implies(both, self.eq(fx.value(), fy.value())))
        return f.and_(parts)

    # ------------------------------------------------------------------ policies
    def refuse(self, what: str, pos: Pos | None) -> UnsupportedConstruct:
        p = self.policy
        line, column = pos if pos is not None else (p.pos if p is not None else (0, 0))
        return UnsupportedConstruct(f"{what} cannot be encoded for the analyses", line=line, column=column,
                                    filename=p.filename if p is not None else None)  # fmt: skip

    def policy_nodes(self, p: Policy, req: Request) -> tuple[Node, Node]:
        """(satisfied, errors) of policy ``p``: its scope, then its conditions in order. Its
        parts are kept in :attr:`parts` (what a repair of one condition recombines)."""
        f = self.f
        self.policy = p
        scope = f.and_([self._scope(p.principal, req.principal), self._action_scope(p, req.action),
                        self._scope(p.resource, req.resource)])  # fmt: skip
        lowered: list[tuple[str, Node, Node]] = []
        ok, err = scope, f.false
        for kind, cond in p.conditions:
            if ok is f.false:
                break
            v, e = self.expr(cond, req)
            b, te = self.to_bool(v)
            lowered.append((kind, b, f.or_([e, te])))
            ok, err = self.combine(ok, lowered[-1:], err)
        parts = tuple((b, bad) for _, b, bad in lowered)
        self.parts[id(p)] = PolicyParts(scope, parts, len(parts) == len(p.conditions))
        self.policy = None
        return ok, err

    def combine(self, scope: Node, conditions: Sequence[tuple[str, Node, Node]], err: Node | None = None) -> tuple[Node, Node]:
        """(satisfied, errors) of a scope and its conditions ``(when|unless, value, error)`` in
        order (``err``: errors already found before them): a condition is evaluated only where
        those before it hold (Cedar's ``&&``)."""
        f = self.f
        ok, err = scope, f.false if err is None else err
        for kind, b, bad in conditions:
            err = f.or_([err, f.and_([ok, bad])])
            ok = f.and_([ok, f.not_(bad), f.not_(b) if kind == "unless" else b])
        return ok, err

    def _scope(self, s: Any, who: EntV) -> Node:
        f = self.f
        if s.kind == "any":
            return f.true
        if s.kind == "is" or (s.kind == "is_in" and who.etype != s.type):
            return f.true if who.etype == s.type else f.false
        if s.slot is not None:  # a template's slot: one of its possible entities, as chosen (every link)
            assert self.policy is not None
            alts = self.slots[id(self.policy)][s.slot]
            return f.or_(f.and_([g, self.leaf_eq(who, x) if s.kind == "eq" else self.store.in_(who, x)])
                         for g, x in alts if x is not None)  # fmt: skip
        if s.kind == "eq":
            return self.leaf_eq(who, self.entity(s.entity))
        return self.store.in_(who, self.entity(s.entity))

    def _action_scope(self, p: Policy, action: EntV) -> Node:
        a = p.action
        f = self.f
        if a.kind == "any":
            return f.true
        if a.kind == "eq":
            return self.leaf_eq(action, self.entity(a.entities[0]))
        return f.or_(self.store.in_(action, self.entity(x)) for x in a.entities)

    # ------------------------------------------------------------------ expressions
    def to_bool(self, v: Val) -> tuple[Node, Node]:
        """(value, type error) of a condition: a non-Boolean leaf is a type error."""
        f = self.f
        if isinstance(v, BoolV):  # the common case, without the guards' bookkeeping
            return v.node, f.false
        vals, errs = [], []
        for g, leaf in alternatives(v, f):
            if isinstance(leaf, BoolV):
                vals.append(f.and_([g, leaf.node]))
            else:
                if isinstance(leaf, Opaque):
                    raise self.refuse(f"reading {leaf.what}", None)
                errs.append(g)
        return f.or_(vals), f.or_(errs)

    def map1(self, v: Val, fn: Callable[[Leaf], Out]) -> Out:
        """``fn`` over each leaf of ``v``: the results joined, the errors under their guards."""
        f = self.f
        if not isinstance(v, Cases):  # one leaf: no guards to carry
            if isinstance(v, Opaque):
                raise self.refuse(f"reading {v.what}", None)
            return fn(v)
        vals, errs = [], []
        for g, leaf in alternatives(v, f):
            if isinstance(leaf, Opaque):
                raise self.refuse(f"reading {leaf.what}", None)
            r, e = fn(leaf)
            vals.append((g, r))
            errs.append(f.and_([g, e]))
        return join(f, vals), f.or_(errs)

    def map2(self, a: Val, b: Val, fn: Callable[[Leaf, Leaf], Out]) -> Out:
        return self.map1(a, lambda x: self.map1(b, lambda y: fn(x, y)))

    def error(self) -> Out:
        return BoolV(self.f.false), self.f.true

    def expr(self, e: Expr, req: Request) -> Out:  # noqa: C901 - one case per Cedar construct
        f = self.f
        if isinstance(e, Lit):
            return self.const(e.value), f.false
        if isinstance(e, Var):
            got = {"principal": req.principal, "action": req.action, "resource": req.resource, "context": req.context}
            return got[e.name], f.false
        if isinstance(e, And | Or):
            lv, le_ = self.expr(e.left, req)
            lb, lte = self.to_bool(lv)
            left_err = f.or_([le_, lte])
            go_on = lb if isinstance(e, And) else f.not_(lb)
            if f.and_([f.not_(left_err), go_on]) is f.false:
                return BoolV(lb), left_err
            rv, re_ = self.expr(e.right, req)
            rb, rte = self.to_bool(rv)
            err = f.or_([left_err, f.and_([go_on, f.or_([re_, rte])])])
            val = f.and_([lb, rb]) if isinstance(e, And) else f.or_([lb, rb])
            return BoolV(val), err
        if isinstance(e, If):
            cv, ce = self.expr(e.cond, req)
            c, cte = self.to_bool(cv)
            cerr = f.or_([ce, cte])
            tv, te = self.expr(e.then, req) if c is not f.false else (BoolV(f.false), f.false)
            fv, fe = self.expr(e.orelse, req) if c is not f.true else (BoolV(f.false), f.false)
            err = f.or_([cerr, f.and_([c, te]), f.and_([f.not_(c), fe])])
            return join(f, [(c, tv), (f.not_(c), fv)]), err
        if isinstance(e, Unary):
            v, err = self.expr(e.arg, req)
            if e.op == "!":
                b, te = self.to_bool(v)
                return BoolV(f.not_(b)), f.or_([err, te])
            r, e2 = self.map1(v, lambda x: self._arith(x, IntV(Lin.of(0)), "neg"))
            return r, f.or_([err, e2])
        if isinstance(e, Binary):
            return self._binary(e, req)
        if isinstance(e, GetAttr):
            v, err = self.expr(e.arg, req)
            r, e2 = self.map1(v, lambda x: self._get_attr(x, e.attr, e.pos))
            return r, f.or_([err, e2])
        if isinstance(e, Has):
            v, err = self.expr(e.arg, req)
            r, e2 = self.map1(v, lambda x: self._has(x, e.attr))
            return r, f.or_([err, e2])
        if isinstance(e, Like):
            v, err = self.expr(e.arg, req)
            r, e2 = self.map1(v, lambda x: (BoolV(self._like(x, e.pattern)), f.false) if isinstance(x, StrV) else self.error())
            return r, f.or_([err, e2])
        if isinstance(e, Is):
            v, err = self.expr(e.arg, req)
            if e.within is None:
                r, e2 = self.map1(v, lambda x: (BoolV(f.const(x.etype == e.type)), f.false) if isinstance(x, EntV) else self.error())
                return r, f.or_([err, e2])
            # `e is T in S` is `e is T && e in S`: S is evaluated only for an entity of type T
            is_t, e1 = self.map1(v, lambda x: (BoolV(f.const(x.etype == e.type)), f.false) if isinstance(x, EntV) else self.error())
            reached = f.and_([f.not_(f.or_([err, e1])), self.to_bool(is_t)[0]])
            if reached is f.false:
                return BoolV(f.false), f.or_([err, e1])
            w, werr = self.expr(e.within, req)
            r, e2 = self.map2(v, w, lambda x, y: self._is_in(x, y, e.type))
            return r, f.or_([err, e1, f.and_([reached, f.or_([werr, e2])])])
        if isinstance(e, SetLit):
            outs = [self.expr(x, req) for x in e.items]
            return self.literal_set(tuple(v for v, _ in outs)), f.or_([err for _, err in outs])
        if isinstance(e, RecLit):
            outs2 = [(k, self.expr(x, req)) for k, x in e.items]
            rec = RecV({k: _const_field(f, v) for k, (v, _) in outs2})
            return rec, f.or_([err for _, (_, err) in outs2])
        if isinstance(e, Call):
            return self._call(e, req)
        assert isinstance(e, Method)
        return self._method(e, req)

    def _binary(self, e: Binary, req: Request) -> Out:
        f = self.f
        lv, le_ = self.expr(e.left, req)
        rv, re_ = self.expr(e.right, req)
        err = f.or_([le_, re_])
        op = e.op
        if op in ("==", "!="):
            for v in (lv, rv):
                for _, leaf in alternatives(v, f):
                    if isinstance(leaf, Opaque):
                        raise self.refuse(f"comparing {leaf.what}", e.pos)
            eq = self.eq(lv, rv)
            return BoolV(eq if op == "==" else f.not_(eq)), err
        if op == "in":
            r, e2 = self.map2(lv, rv, lambda x, y: self._in(x, y))
            return r, f.or_([err, e2])
        if op in ("<", "<=", ">", ">="):
            r, e2 = self.map2(lv, rv, lambda x, y: self._compare(op, x, y))
            return r, f.or_([err, e2])
        r, e2 = self.map2(lv, rv, lambda x, y: self._arith(x, y, op, e.pos))
        return r, f.or_([err, e2])

    def _compare(self, op: str, x: Leaf, y: Leaf) -> Out:
        f = self.f
        if not (isinstance(x, IntV) and isinstance(y, IntV) and x.kind == y.kind and x.kind in ("Long", "datetime", "duration")):
            return self.error()
        a, b = x.lin, y.lin
        node = {"<": le(f, a + Lin.of(1), b), "<=": le(f, a, b), ">": le(f, b + Lin.of(1), a), ">=": le(f, b, a)}[op]
        return BoolV(node), f.false

    def _arith(self, x: Leaf, y: Leaf, op: str, pos: Pos | None = None) -> Out:
        f = self.f
        if not (isinstance(x, IntV) and isinstance(y, IntV) and x.kind == "Long" and y.kind == "Long"):
            return self.error()
        if op == "neg":
            r = x.lin.scale(-1)
        elif op == "+":
            r = x.lin + y.lin
        elif op == "-":
            r = x.lin - y.lin
        elif x.lin.is_const:
            r = y.lin.scale(x.lin.const)
        elif y.lin.is_const:
            r = x.lin.scale(y.lin.const)
        else:
            r = self._product(x.lin, y.lin)
        return IntV(r), f.not_(in_range(f, r, *LONG))

    def _product(self, x: Lin, y: Lin) -> Lin:
        """``x * y`` of two unknowns, exact: a fresh variable over every product the factors'
        ranges allow (wider than 64 bits, so that the overflow stays a range check on it), tied
        to them by an IR product node (z3: nonlinear integer arithmetic over bounded ranges;
        clingo: pairs of values where the ranges are small, refused by name where not)."""
        f = self.f
        a, b = self._named(x), self._named(y)
        (al, ah), (bl, bh) = f.int_ranges[a], f.int_ranges[b]
        corners = (al * bl, al * bh, ah * bl, ah * bh)
        z = self.int_var("product", min(corners), max(corners))
        self.background(f.product(z.terms[0][0], a, b))
        return z

    def _named(self, x: Lin) -> str:
        """The integer variable ``x`` is, or a fresh one equal to it over ``x``'s range."""
        if x.const == 0 and len(x.terms) == 1 and x.terms[0][1] == 1:
            return x.terms[0][0]
        ranges = self.f.int_ranges
        low = x.const + sum(c * (ranges[v][0] if c > 0 else ranges[v][1]) for v, c in x.terms)
        high = x.const + sum(c * (ranges[v][1] if c > 0 else ranges[v][0]) for v, c in x.terms)
        v = self.int_var("factor", low, high)
        self.background(lin_eq(self.f, v, x))
        return v.terms[0][0]

    def _like(self, x: StrV, pattern: tuple[str | None, ...]) -> Node:
        if not isinstance(x.term, TermConst):
            self.like_on_variables = True
        return self.f.like(x.term, pattern)

    def _get_attr(self, x: Leaf, attr: str, pos: Pos) -> Out:
        f = self.f
        if isinstance(x, EntV):  # an entity that does not exist has no attribute: an error
            k = (x.key(), attr)
            found = self._attr_reads.get(k)
            if found is None:  # read once per entity term: a set of 1,000 policies reads principal.x often
                rec, exists = self.store.record(x)
                r, e2 = self.map1(rec, lambda y: self._get_attr(y, attr, pos))
                found = self._attr_reads[k] = (r, f.or_([f.not_(exists), e2]))
            return found
        if isinstance(x, RecV):
            fld = x.fields.get(attr)
            if fld is None:
                return self.error()
            v = fld.value()
            for _, leaf in alternatives(v, f):
                if isinstance(leaf, Opaque):
                    raise self.refuse(f"reading {leaf.what}", pos)
            return v, f.not_(fld.present)
        return self.error()

    def _has(self, x: Leaf, attr: str) -> Out:
        f = self.f
        if isinstance(x, EntV):  # an entity that does not exist has no attribute: false
            rec, exists = self.store.record(x)
            r, _ = self.map1(rec, lambda y: self._has(y, attr))
            b, _ = self.to_bool(r)
            return BoolV(f.and_([exists, b])), f.false
        if isinstance(x, RecV):
            fld = x.fields.get(attr)
            return BoolV(f.false if fld is None else fld.present), f.false
        return self.error()

    def _in(self, x: Leaf, y: Leaf) -> Out:
        f = self.f
        if not isinstance(x, EntV):
            return self.error()
        if isinstance(y, EntV):
            return BoolV(self.store.in_(x, y)), f.false
        if isinstance(y, SetV):
            if y.items is not None:
                vals, errs = [], []
                for item in y.items:
                    for g, leaf in alternatives(item, f):
                        if isinstance(leaf, EntV):
                            vals.append(f.and_([g, self.store.in_(x, leaf)]))
                        else:
                            errs.append(g)  # Cedar: a set with a non-entity element is a type error
                return BoolV(f.or_(vals)), f.or_(errs)
            if y.elem is None or not y.elem.startswith("Entity:"):
                return self.error()
            s = y
            return BoolV(self.defer("inSet", y.elem, lambda w: f.or_(
                f.and_([self.member(s, el), self.store.in_(x, el)]) for el in self.elements(s.elem)
                if isinstance(el, EntV)))), f.false  # fmt: skip
        return self.error()

    def _is_in(self, x: Leaf, y: Leaf, etype: str) -> Out:
        f = self.f
        if not isinstance(x, EntV):
            return self.error()
        if x.etype != etype:
            return BoolV(f.false), f.false
        return self._in(x, y)

    def _call(self, e: Call, req: Request) -> Out:
        f = self.f
        outs = [self.expr(a, req) for a in e.args]
        err = f.or_([er for _, er in outs])
        if len(outs) != 1:
            return BoolV(f.false), f.true

        def construct(x: Leaf) -> Out:
            if not isinstance(x, StrV):
                return self.error()
            if not isinstance(x.term, TermConst):
                if e.name in ("ip", "decimal"):
                    return self._reading(e.name, x)
                raise self.refuse(f"{e.name}() of a string that is not a literal", e.pos)
            readers: dict[str, Callable[[str], Value]] = {"ip": parse_ip, "decimal": parse_decimal,
                                                          "datetime": parse_datetime, "duration": parse_duration}  # fmt: skip
            try:
                v = readers[e.name](x.term.value)
            except ExtensionError:
                return self.error()
            return self.const(v), f.false

        r, e2 = self.map1(outs[0][0], construct)
        return r, f.or_([err, e2])

    def _reading(self, name: str, x: StrV) -> Out:
        """``ip(x)`` / ``decimal(x)`` of a symbolic string: what ``x`` reads as is a function of
        ``x`` (an error, or a value), free where ``x`` is no string the problem names and that
        string's reading where it is one (the axioms are made at :meth:`close`, over every
        string constant). Any reading of an unnamed string is some text's: the scenario writes
        one (:meth:`realize_readings`)."""
        found = self.readings.get((name, x.key()))
        if found is None:
            assert isinstance(x.term, TermVar)
            label = f"{name}({x.term.name})"
            value: Leaf = self.fresh_ip(label) if name == "ip" else IntV(self.int_var(label, *LONG), "decimal")
            err = self.fresh_atom(f"{label}!error")
            found = self.readings[(name, x.key())] = (x, value, err)
        _, value, err = found
        return value, err

    def _method(self, e: Method, req: Request) -> Out:
        f = self.f
        rv, re_ = self.expr(e.arg, req)
        outs = [self.expr(a, req) for a in e.args]
        err = f.or_([re_, *[er for _, er in outs]])
        if len(outs) != METHODS[e.name]:
            return BoolV(f.false), f.true
        name = e.name
        if not outs:
            r, e2 = self.map1(rv, lambda x: self._method0(name, x, e.pos))
        else:
            r, e2 = self.map2(rv, outs[0][0], lambda x, y: self._method1(name, x, y, e.pos))
        return r, f.or_([err, e2])

    def _method0(self, name: str, x: Leaf, pos: Pos) -> Out:
        f = self.f
        if name == "isEmpty":
            return (BoolV(self.is_empty(x)), f.false) if isinstance(x, SetV) else self.error()
        if name in ("isIpv4", "isIpv6", "isLoopback", "isMulticast"):
            if not isinstance(x, IPV):
                return self.error()
            if name == "isIpv4":
                return BoolV(f.not_(x.v6)), f.false
            if name == "isIpv6":
                return BoolV(x.v6), f.false
            table = _LOOPBACK if name == "isLoopback" else _MULTICAST
            v4 = self._within(x, 4, *table[4])
            v6 = self._within(x, 6, *table[6])
            return BoolV(f.or_([v4, v6])), f.false
        if name in ("toDate", "toTime"):
            if not (isinstance(x, IntV) and x.kind == "datetime"):
                return self.error()
            q, r = self._divmod_floor(x.lin, _DAY)
            if name == "toTime":
                return IntV(r, "duration"), f.false
            day = q.scale(_DAY)
            return IntV(day, "datetime"), f.not_(in_range(f, day, *LONG))
        if name in _PER:
            if not (isinstance(x, IntV) and x.kind == "duration"):
                return self.error()
            return IntV(self._div_trunc(x.lin, _PER[name])), f.false
        return self.error()

    def _method1(self, name: str, x: Leaf, y: Leaf, pos: Pos) -> Out:
        f = self.f
        if name == "contains":
            return (BoolV(self.member(x, y)), f.false) if isinstance(x, SetV) else self.error()
        if name in ("containsAll", "containsAny"):
            if not (isinstance(x, SetV) and isinstance(y, SetV)):
                return self.error()
            return BoolV(self.contains_all(x, y) if name == "containsAll" else self.contains_any(x, y)), f.false
        if name in ("hasTag", "getTag"):
            if not (isinstance(x, EntV) and isinstance(y, StrV)):
                return self.error()
            if name == "hasTag":
                return BoolV(self.store.has_tag(x, y)), f.false
            return self.store.get_tag(x, y)
        if name in ("lessThan", "lessThanOrEqual", "greaterThan", "greaterThanOrEqual"):
            if not (isinstance(x, IntV) and isinstance(y, IntV) and x.kind == y.kind == "decimal"):
                return self.error()
            a, b = x.lin, y.lin
            node = {"lessThan": le(f, a + Lin.of(1), b), "lessThanOrEqual": le(f, a, b),
                    "greaterThan": le(f, b + Lin.of(1), a), "greaterThanOrEqual": le(f, b, a)}[name]  # fmt: skip
            return BoolV(node), f.false
        if name == "isInRange":
            if not (isinstance(x, IPV) and isinstance(y, IPV)):
                return self.error()
            return BoolV(self._in_range_ip(x, y, pos)), f.false
        if name in ("offset", "durationSince"):
            want = "duration" if name == "offset" else "datetime"
            if not (isinstance(x, IntV) and x.kind == "datetime" and isinstance(y, IntV) and y.kind == want):
                return self.error()
            r = x.lin + y.lin if name == "offset" else x.lin - y.lin
            return IntV(r, "datetime" if name == "offset" else "duration"), f.not_(in_range(f, r, *LONG))
        return self.error()

    # ------------------------------------------------------------------ extension helpers
    def _within(self, x: IPV, version: int, low_addr: int, prefix: int) -> Node:
        """``x``'s range lies within the aligned block ``low_addr/prefix`` of ``version``."""
        f = self.f
        bits = 32 if version == 4 else 128
        high = low_addr | ((1 << (bits - prefix)) - 1)
        is_version = x.v6 if version == 6 else f.not_(x.v6)
        return f.and_([is_version, le(f, Lin.of(prefix), x.prefix), in_range(f, x.addr, low_addr, high)])

    def _in_range_ip(self, x: IPV, y: IPV, pos: Pos) -> Node:
        f = self.f
        if y.v6 in (f.true, f.false) and y.addr.is_const and y.prefix.is_const:
            version = 6 if y.v6 is f.true else 4
            bits = 32 if version == 4 else 128
            p = y.prefix.const
            low = (y.addr.const >> (bits - p)) << (bits - p)
            return self._within(x, version, low, p)
        if x.v6 in (f.true, f.false) and x.addr.is_const and x.prefix.is_const:
            # a fixed range inside a symbolic one: split on the symbolic prefix length
            version = 6 if x.v6 is f.true else 4
            bits = 32 if version == 4 else 128
            is_version = y.v6 if version == 6 else f.not_(y.v6)
            cases = []
            for p in range(0, min(x.prefix.const, bits) + 1):
                k = bits - p
                block = (x.addr.const >> k) << k
                cases.append(f.and_([lin_eq(f, y.prefix, Lin.of(p)), in_range(f, y.addr, block, block | ((1 << k) - 1))]))
            return f.and_([is_version, f.or_(cases)])
        # both symbolic: split on y's prefix length p; x's range is within y's when x's prefix
        # is at least p and both addresses have the same network part, floor(addr / 2^(w-p))
        cases = []
        for version, bits in ((4, 32), (6, 128)):
            is_version = f.and_([x.v6, y.v6]) if version == 6 else f.and_([f.not_(x.v6), f.not_(y.v6)])
            for p in range(bits + 1):
                k = bits - p
                same = f.true
                if k:
                    qx, _ = self._divmod_floor(x.addr, 1 << k, (0, (1 << 128) - 1))
                    qy, _ = self._divmod_floor(y.addr, 1 << k, (0, (1 << 128) - 1))
                    same = lin_eq(f, qx, qy)
                cases.append(f.and_([is_version, lin_eq(f, y.prefix, Lin.of(p)), le(f, Lin.of(p), x.prefix), same]))
        return f.or_(cases)

    def _divmod_floor(self, x: Lin, k: int, bounds: tuple[int, int] = LONG) -> tuple[Lin, Lin]:
        """``(x div k, x mod k)`` rounding down, for ``x`` within ``bounds``: fresh ``q``, ``r``
        with ``x = k·q + r``, ``0 <= r < k`` (as background: they are functions of ``x``)."""
        f = self.f
        q = self.int_var("div", bounds[0] // k - 1, bounds[1] // k + 1)
        r = self.int_var("mod", 0, k - 1)
        self.background(lin_eq(f, q.scale(k) + r, x))
        return q, r

    def _div_trunc(self, x: Lin, k: int) -> Lin:
        """``x / k`` rounding towards zero (Rust's, and Cedar's, integer division)."""
        if k == 1:
            return x
        f = self.f
        q = self.int_var("quot", LONG[0] // k - 1, LONG[1] // k + 1)
        r = self.int_var("rem", -(k - 1), k - 1)
        self.background(lin_eq(f, q.scale(k) + r, x))
        nonneg = le(f, Lin.of(0), x)
        self.background(f.and_([f.implies(nonneg, le(f, Lin.of(0), r)), f.implies(f.not_(nonneg), le(f, r, Lin.of(0)))]))
        return q

    # ------------------------------------------------------------------ closing
    def close(self) -> None:
        """Every symbolic set's atom for every element of its type, equal elements members
        alike, the store's axioms, and each placeholder's definition (module docstring)."""
        f = self.f
        for name, key in self.set_vars.items():
            for x in list(self.universe.get(key, {}).values()):
                self._member_atom(name, x)
        self.closed = True
        for name in self.set_vars:
            items = list(self._member_leaf[name].items())
            atoms = self.members[name]
            for i, (kx, x) in enumerate(items):
                named = isinstance(x, StrV | EntV) and isinstance(x.term, TermConst)
                for ky, y in items[i + 1 :]:
                    if named and isinstance(y, StrV | EntV) and isinstance(y.term, TermConst):
                        continue  # two names: never equal
                    same = self.leaf_eq(x, y)
                    if same is not f.false:
                        self.background(f.implies(same, f.iff(atoms[kx], atoms[ky])))
        for d in self.deferred:
            self.background(f.iff(d.atom, d.build(d.witness)))
        self.store.close()
        self._close_readings()  # last: over every string constant the store's axioms name too

    def _close_readings(self) -> None:
        """A string reads alike wherever it is read: equal strings give equal readings, a string
        the problem names gives its own, and no string reads as both an ip and a decimal."""
        f = self.f
        if not self.readings:
            return
        if self.like_on_variables:
            raise self.refuse("ip() or decimal() of a string that is not a literal, in a problem where `like` reads "
                              "a string that is not a literal", None)  # fmt: skip
        readers: dict[str, Callable[[str], Value]] = {"ip": parse_ip, "decimal": parse_decimal}
        items = list(self.readings.items())
        for i, ((name, _), (x, value, err)) in enumerate(items):
            for c in sorted(self.string_constants):
                try:
                    known: Out = (self.const(readers[name](c)), f.false)
                except ExtensionError:
                    known = self.error()
                same = f.eq(x.term, TermConst(self.string_sort, c))
                self.background(f.implies(same, f.and_([f.iff(err, known[1]), f.implies(f.not_(err), self.eq(value, known[0]))])))
            for (other, _), (y, v2, e2) in items[i + 1 :]:
                same = self.leaf_eq(x, y)
                if other == name:
                    self.background(f.implies(same, f.and_([f.iff(err, e2), f.implies(f.not_(err), self.eq(value, v2))])))
                    if isinstance(value, IPV):  # Cedar spells an IPv4 range "a.b.c.d/p" one way (two for /32)
                        alike = f.and_([f.not_(same), f.not_(err), f.not_(e2), self.eq(value, v2)])
                        self.background(f.implies(alike, f.or_([value.v6, lin_eq(f, value.prefix, Lin.of(32))])))
                else:
                    self.background(f.implies(same, f.or_([err, e2])))

    def realize_readings(self, model: dict[str, Any]) -> dict[str, Any]:
        """``model`` with each unnamed string that ``ip()``/``decimal()`` reads given a text that
        reads so (an error: a text that is neither; a value: one of its spellings), the same
        text for equal strings and different texts for different ones."""
        taken = set(self.string_constants) | {str(v) for k, v in model.items() if k in self.gp.terms}
        wanted: dict[str, tuple[str, Leaf | None]] = {}  # unnamed string → (reader, value; None: an error)
        for (name, _), (x, value, err) in self.readings.items():
            assert isinstance(x.term, TermVar)
            old = str(model[x.term.name])
            if old not in self.string_constants and (old not in wanted or wanted[old][1] is None):
                wanted[old] = (name, None if evaluate(err, model) else value)
        chosen: dict[str, str] = {}
        for old, (name, reading) in wanted.items():
            text = next((t for t in _spellings(name, reading, model) if t not in taken), None)
            if text is not None:  # else every spelling is taken: the re-evaluation says so, loudly
                chosen[old] = text
                taken.add(text)
        if not chosen:
            return model
        out = dict(model)
        for k, t in self.gp.terms.items():
            if t.sort == self.string_sort and str(model[k]) in chosen:
                out[k] = chosen[str(model[k])]
        return out

    def set_members_equal(self, a: str, b: str) -> Node:
        """Two symbolic sets of one element type have the same members (over the universe)."""
        f = self.f
        key = self.set_vars[a]
        return f.and_(f.iff(self._member_atom(a, x), self._member_atom(b, x)) for x in self.universe.get(key, {}).values())


def _spellings(name: str, value: Leaf | None, model: dict[str, Any]) -> Iterator[str]:
    """Texts that ``name``() reads as ``value`` (``None``: as an error), the plainest first."""
    def number(lin: Lin) -> int:
        return lin.const + sum(c * int(model[v]) for v, c in lin.terms)

    if value is None:
        n = 0
        while True:
            yield f"not {name} #{n}"
            n += 1
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


def _const_field(f: NodeFactory, v: Val) -> Field:
    return Field(lambda: v, _value=v, _present=f.true)


def _presence(low: Lowering, t: SType, prefix: str, on_leaf: Any, path: tuple[str, ...]) -> Callable[[], Node]:
    """The presence atom of an optional attribute, made when a policy asks about it; false when
    its type has no value at all (an entity type of which a given store has no entity)."""

    def make() -> Node:
        if not low.inhabited(t):
            return low.f.false
        atom = low.fresh_atom(f"{prefix}?")
        low.avoid.append((f"absent:{prefix}", atom, 1))
        if on_leaf is not None:
            on_leaf((*path, "?"), BoolV(atom))
        return atom

    return make


def _maker(low: Lowering, t: SType, prefix: str, on_leaf: Any, path: tuple[str, ...]) -> Callable[[], Val]:
    return lambda: low.fresh_value(t, prefix, on_leaf, path)


def elem_key(leaf: Leaf) -> str:
    """The universe a leaf belongs to: its type, an entity's with the entity type."""
    return f"Entity:{leaf.etype}" if isinstance(leaf, EntV) else leaf.ty


def stype_key(t: SType) -> str:
    if t.kind == "Entity":
        return f"Entity:{t.name}"
    if t.kind == "Ext":
        return t.name
    return t.kind


def term_of(leaf: Leaf) -> Any:
    return term_key(leaf.term) if isinstance(leaf, StrV | EntV) else leaf.key()
