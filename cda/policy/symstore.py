"""Symbolic entity stores: what a lowered policy reads of the entities.

Two stores answer the same questions (an entity's attribute record and whether it exists, ``in``,
tags) for :class:`~cda.policy.lower.Lowering`:

* :class:`SchemaStore`, **every store the schema allows** (the default meaning of an analysis):
  each entity type is a population (an uninterpreted sort: the entities a policy names, and any
  others), an entity's attributes and tags are uninterpreted functions of it, read through one
  variable per application and made functions by *congruence* (equal entities, equal
  attributes: Ackermann's reduction), and the ``in`` hierarchy is one atom per pair of entity
  terms whose types the schema's ``memberOf`` allows, transitive and acyclic over every term of
  the problem (SymCC's enforcer). A store is *well formed* as SymCC's are: every entity a
  request, an attribute, a tag or a policy names is in it, with the schema's attributes.
* :class:`FixedStore`, **one given store** (``--entities``): a term is one of the store's
  entities of its type (a closed sort), and what it reads is a case split over them.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Protocol

from cda.policy.entities import Entities
from cda.policy.lower import Lowering
from cda.policy.schema import Schema, SType
from cda.policy.solving import Node, Sort, Term, TermConst, TermVar
from cda.policy.symvalues import BoolV, EntV, Leaf, Out, RecV, SetV, StrV, Val, alternatives, join, term_key
from cda.policy.values import EntityUID

__all__ = ["SymStore", "SchemaStore", "FixedStore", "ancestor_types"]


class SymStore(Protocol):
    """What a lowering asks of the entity store."""

    def sort(self, etype: str) -> Sort: ...

    def record(self, x: EntV) -> tuple[Val, Node]:
        """``x``'s attributes (a record, or cases of records) and the node that says it exists."""
        ...

    def in_(self, a: EntV, b: EntV) -> Node: ...

    def has_tag(self, x: EntV, key: StrV) -> Node: ...

    def get_tag(self, x: EntV, key: StrV) -> Out: ...

    def close(self) -> None: ...


def _closure(parents: dict[Any, list[Any]]) -> dict[Any, set[Any]]:
    """Each node's ancestors: the transitive closure of ``parents``."""
    out: dict[Any, set[Any]] = {}
    for node in parents:
        seen: set[Any] = set()
        todo = list(parents[node])
        while todo:
            p = todo.pop()
            if p not in seen:
                seen.add(p)
                todo.extend(parents.get(p, []))
        out[node] = seen
    return out


def ancestor_types(schema: Schema) -> dict[str, set[str]]:
    """Each entity type's possible ancestor types: the transitive closure of ``memberOf``."""
    return _closure({name: decl.parents for name, decl in schema.entities.items()})


def _action_ancestors(schema: Schema) -> dict[EntityUID, set[EntityUID]]:
    """Each action's groups, transitively (the schema's action hierarchy is fixed)."""
    return _closure({uid: decl.parents for uid, decl in schema.actions.items()})


class SchemaStore:
    """Every entity store the schema allows (see the module docstring)."""

    def __init__(self, low: Lowering, schema: Schema) -> None:
        self.low = low
        self.schema = schema
        low.store = self
        self.anc_types = ancestor_types(schema)
        self.action_anc = _action_ancestors(schema)
        self.action_types = {uid.type for uid in schema.actions}
        self._sorts: dict[str, Sort] = {}
        #: applications of each attribute function: (entity type, path) → [(arguments, leaf)]
        self.apps: dict[tuple[str, tuple[str, ...]], list[tuple[tuple[Term, ...], Leaf]]] = {}
        self._records: dict[tuple[str, Any], RecV] = {}
        self._tag_keys: dict[tuple[str, Any], SetV] = {}
        self._tag_vals: dict[tuple[str, Any, Any], Val] = {}
        self.anc: dict[tuple[Any, Any], Node] = {}  # (descendant key, ancestor key) → atom
        self._anc_leaves: dict[tuple[Any, Any], tuple[EntV, EntV]] = {}
        self._by_descendant: dict[str, list[tuple[Any, Any]]] = {}  # the pairs, by their descendant's type
        self._by_ancestor: dict[str, list[tuple[Any, Any]]] = {}  # and by their ancestor's type
        #: the entity terms whose attributes or tags a policy reads (a scenario keeps them)
        self.read: list[EntV] = []

    def sort(self, etype: str) -> Sort:
        found = self._sorts.get(etype)
        if found is None:
            decl = self.schema.entities.get(etype)
            if decl is not None and decl.enum is not None:
                found = Sort(etype, "population", tuple(decl.enum))
            elif etype in self.action_types:
                found = Sort(etype, "population", tuple(sorted(u.id for u in self.schema.actions if u.type == etype)))
            else:
                found = Sort(etype, "population")
            self._sorts[etype] = found
        return found

    def _exists(self, x: EntV) -> bool:
        """Whether a store the schema allows can hold ``x`` (a declared type; a listed id of an
        enumerated type or of the actions)."""
        sort = self.sort(x.etype)
        if x.etype not in self.schema.entities and x.etype not in self.action_types:
            return False
        return not (sort.domain is not None and x.const_id is not None and x.const_id not in sort.domain)

    def record(self, x: EntV) -> tuple[Val, Node]:
        f = self.low.f
        if not self._exists(x):
            return RecV({}), f.false
        decl = self.schema.entities.get(x.etype)
        if decl is None or decl.enum is not None:  # actions and enumerated entities: no attributes
            return RecV({}), f.true
        k = (x.etype, term_key(x.term))
        rec = self._records.get(k)
        if rec is None:
            args = (x.term,)

            def on_leaf(path: tuple[str, ...], leaf: Leaf) -> None:
                self.apps.setdefault((x.etype, path), []).append((args, leaf))

            made = self.low.fresh_value(decl.attrs, f"{x.etype}[{_show(x.term)}]", on_leaf)
            assert isinstance(made, RecV)
            rec = self._records[k] = made
            self.read.append(x)
        return rec, f.true

    def in_(self, a: EntV, b: EntV) -> Node:
        f = self.low.f
        if a.etype in self.action_types or b.etype in self.action_types:
            return self._action_in(a, b)
        same = f.eq(a.term, b.term) if a.etype == b.etype else f.false
        if not (self._exists(a) and self._exists(b)) or b.etype not in self.anc_types.get(a.etype, set()):
            return same
        return f.or_([same, self._anc_atom(a, b)])

    def _action_in(self, a: EntV, b: EntV) -> Node:
        f = self.low.f
        pairs = []
        for x in _values(a):
            for y in _values(b):
                ux, uy = EntityUID(a.etype, x), EntityUID(b.etype, y)
                if ux == uy or uy in self.action_anc.get(ux, set()):
                    pairs.append(f.and_([_is(f, a, x), _is(f, b, y)]))
        return f.or_(pairs)

    def _anc_atom(self, a: EntV, b: EntV) -> Node:
        k = (a.key(), b.key())
        atom = self.anc.get(k)
        if atom is None:
            atom = self.anc[k] = self.low.fresh_atom(f"in[{_show(a.term)}→{_show(b.term)}]")
            self._anc_leaves[k] = (a, b)
            self._by_descendant.setdefault(a.etype, []).append(k)
            self._by_ancestor.setdefault(b.etype, []).append(k)
            self.low.avoid.append((f"ancestor:{_show(a.term)}", atom, 1))
        return atom

    def _tag_type(self, x: EntV) -> SType | None:
        decl = self.schema.entities.get(x.etype)
        return None if decl is None or decl.enum is not None else decl.tags

    def _keys(self, x: EntV) -> SetV:
        k = (x.etype, term_key(x.term))
        keys = self._tag_keys.get(k)
        if keys is None:
            args = (x.term,)

            def on_leaf(path: tuple[str, ...], leaf: Leaf) -> None:
                self.apps.setdefault((x.etype, ("#tags", *path)), []).append((args, leaf))

            made = self.low.fresh_value(SType("Set", elem=SType("String")), f"{x.etype}[{_show(x.term)}].tags", on_leaf)
            assert isinstance(made, SetV)
            keys = self._tag_keys[k] = made
            self.read.append(x)
        return keys

    def has_tag(self, x: EntV, key: StrV) -> Node:
        f = self.low.f
        if self._tag_type(x) is None or not self._exists(x):
            return f.false
        return self.low.member(self._keys(x), key)

    def get_tag(self, x: EntV, key: StrV) -> Out:
        f = self.low.f
        t = self._tag_type(x)
        if t is None or not self._exists(x):
            return BoolV(f.false), f.true
        k = (x.etype, term_key(x.term), term_key(key.term))
        value = self._tag_vals.get(k)
        if value is None:
            args = (x.term, key.term)

            def on_leaf(path: tuple[str, ...], leaf: Leaf) -> None:
                self.apps.setdefault((x.etype, ("#tag", *path)), []).append((args, leaf))

            value = self._tag_vals[k] = self.low.fresh_value(t, f"{x.etype}[{_show(x.term)}].tag[{_show(key.term)}]", on_leaf)
        return value, f.not_(self.has_tag(x, key))

    # ---- axioms over the final universe
    def close(self) -> None:
        low, f = self.low, self.low.f
        for (_etype, _path), apps in self.apps.items():  # equal arguments, equal values
            for i, (args_i, leaf_i) in enumerate(apps):
                for args_j, leaf_j in apps[i + 1 :]:
                    same_args = f.and_(f.eq(a, b) for a, b in zip(args_i, args_j))
                    if same_args is f.false:
                        continue
                    if isinstance(leaf_i, SetV) and leaf_i.var is not None and isinstance(leaf_j, SetV) and leaf_j.var is not None:
                        same = low.set_members_equal(leaf_i.var, leaf_j.var)
                    else:
                        same = low.leaf_eq(leaf_i, leaf_j)
                    low.background(f.implies(same_args, same))
        self._close_hierarchy()

    def _close_hierarchy(self) -> None:
        """The hierarchy axioms over the pairs a policy asks about, closed under composition.

        A scenario's parents are the true atoms' pairs, so Cedar's transitive closure of them
        must agree with every atom: whenever two asked pairs chain (``a in c``, ``c' in b``, with
        ``c`` and ``c'`` possibly the same entity) the pair ``a in b`` is asked too, and forced
        true when both links hold; equal entities have the same ancestors; no entity is its own
        ancestor. Pairs nobody asks about need no atom (they are not in the scenario), which
        keeps a store of hundreds of named groups and tenants to the pairs that matter."""
        low, f = self.low, self.low.f
        pairs = self._anc_leaves
        chains: dict[tuple[Any, Any], tuple[EntV, EntV]] = {}  # (a→c, c'→b) → (c, c'): with c = c', a→b
        todo = list(pairs)
        while todo:
            k = todo.pop()
            a, c = pairs[k]
            # k then a pair from an entity c may be; a pair to an entity a may be, then k
            joins = [(k, k2) for k2 in list(self._by_descendant.get(c.etype, []))]
            joins += [(k2, k) for k2 in list(self._by_ancestor.get(a.etype, []))]
            for first, second in joins:
                (x, mid), (mid2, y) = pairs[first], pairs[second]
                if (first, second) in chains or not _may_equal(f, mid, mid2):
                    continue
                if y.etype not in self.anc_types.get(x.etype, set()):
                    continue
                goal = (x.key(), y.key())
                if goal not in pairs:
                    self._anc_atom(x, y)
                    todo.append(goal)
                chains[(first, second)] = (mid, mid2)
        anc = self.anc
        for (first, second), (mid, mid2) in chains.items():
            a, _ = pairs[first]
            _, b = pairs[second]
            link = f.and_([anc[first], f.eq(mid.term, mid2.term), anc[second]])
            low.background(f.implies(link, anc[(a.key(), b.key())]))
        items = list(pairs.items())
        for k, (a, b) in items:  # acyclic: an entity is never its own ancestor
            if _may_equal(f, a, b):
                low.background(f.implies(f.eq(a.term, b.term), f.not_(anc[k])))
        groups: dict[tuple[str, str], list[tuple[Any, tuple[EntV, EntV]]]] = {}
        for k, (a, b) in items:
            groups.setdefault((a.etype, b.etype), []).append((k, (a, b)))
        for group in groups.values():  # congruence: equal pairs, equal answers
            for i, (k, (a, b)) in enumerate(group):
                for k2, (a2, b2) in group[i + 1 :]:
                    if _may_equal(f, a, a2) and _may_equal(f, b, b2):
                        same = f.and_([f.eq(a.term, a2.term), f.eq(b.term, b2.term)])
                        low.background(f.implies(same, f.iff(anc[k], anc[k2])))


def _may_equal(f: Any, x: EntV, y: EntV) -> bool:
    """Whether two entity terms can denote one entity (same type, not two different names)."""
    return x.etype == y.etype and f.eq(x.term, y.term) is not f.false


class FixedStore:
    """One given entity store: a term is one of its entities of the term's type."""

    def __init__(self, low: Lowering, store: Entities) -> None:
        self.low = low
        self.store = store
        low.store = self
        self._sorts: dict[str, Sort] = {}
        self._records: dict[EntityUID, RecV] = {}
        self._by_type: dict[str, list[EntityUID]] = {}
        self._cases: dict[Any, tuple[Val, Node]] = {}  # an entity term's record, as cases over the store
        self._ins: dict[tuple[Any, Any], Node] = {}
        for uid in sorted(store.attrs):
            self._by_type.setdefault(uid.type, []).append(uid)

    def sort(self, etype: str) -> Sort:
        found = self._sorts.get(etype)
        if found is None:
            found = self._sorts[etype] = Sort(etype, "population", tuple(u.id for u in self._by_type.get(etype, [])))
        return found

    def candidates(self, x: EntV) -> list[EntityUID]:
        if isinstance(x.term, TermConst):
            return [EntityUID(x.etype, x.term.value)]
        return list(self._by_type.get(x.etype, []))

    def _record_of(self, uid: EntityUID) -> RecV:
        rec = self._records.get(uid)
        if rec is None:
            value = self.low.const(self.store.attrs[uid])
            assert isinstance(value, RecV)
            rec = self._records[uid] = value
        return rec

    def record(self, x: EntV) -> tuple[Val, Node]:
        k = x.key()
        found = self._cases.get(k)
        if found is None:
            f = self.low.f
            cases = [(_is(f, x, u.id), self._record_of(u)) for u in self.candidates(x) if u in self.store.attrs]
            found = self._cases[k] = (join(f, cases), f.or_(g for g, _ in cases))
        return found

    def in_(self, a: EntV, b: EntV) -> Node:
        k = (a.key(), b.key())
        found = self._ins.get(k)
        if found is None:
            found = self._ins[k] = self._in(a, b)
        return found

    def _in(self, a: EntV, b: EntV) -> Node:
        f = self.low.f
        ancestors = self.store.ancestors
        wanted = {u.id for u in self.candidates(b)}
        out = []
        for u in self.candidates(a):
            reach = [w for w in [u, *ancestors.get(u, ())] if w.type == b.etype and w.id in wanted]
            if reach:
                out.append(f.and_([_is(f, a, u.id), f.or_(_is(f, b, w.id) for w in reach)]))
        return f.or_(out)

    def _tags(self, x: EntV, key: StrV) -> list[tuple[Node, Val]]:
        """Each tag ``x`` may have under ``key``: (``x`` is that entity and ``key`` that tag, its value)."""
        f = self.low.f
        cases: list[tuple[Node, Val]] = []
        for u in self.candidates(x):
            tags = self.store.tags.get(u)
            if tags is None or u not in self.store.attrs:
                continue
            for k, v in tags.attrs.items():
                cases.append((f.and_([_is(f, x, u.id), f.eq(key.term, self.low.string(k).term)]), self.low.const(v)))
        return cases

    def has_tag(self, x: EntV, key: StrV) -> Node:
        return self.low.f.or_(g for g, _ in self._tags(x, key))

    def get_tag(self, x: EntV, key: StrV) -> Out:
        f = self.low.f
        cases = self._tags(x, key)
        return join(f, cases), f.not_(f.or_(g for g, _ in cases))

    def close(self) -> None:
        """Nothing to add: the store is fixed."""


def _values(x: EntV) -> Iterable[str]:
    sort = x.term.sort
    if isinstance(x.term, TermConst):
        return [x.term.value]
    return sort.domain or ()


def _is(f: Any, x: EntV, ident: str) -> Node:
    """``x`` is the entity ``ident`` of its type."""
    if isinstance(x.term, TermConst):
        return f.const(x.term.value == ident)  # type: ignore[no-any-return]
    return f.eq(x.term, TermConst(x.term.sort, ident))  # type: ignore[no-any-return]


def _show(t: Term) -> str:
    return t.name if isinstance(t, TermVar) else f'"{t.value}"'


def leaves_of(v: Val, f: Any) -> list[Leaf]:
    return [leaf for _, leaf in alternatives(v, f)]
