"""A solver's model read back as a Cedar scenario: a request and an entity store, as JSON.

The model gives every term of the lowered problem a value (:mod:`cda.policy.lower`); the
scenario is what those values say, in Cedar's JSON formats (a request object, an entities
list), and nothing more: the entities are the values of the problem's entity terms (a fresh
element gets a readable id, ``user1``), each with the attributes the model gives it and, for a
required attribute no policy reads, a default of its type; its parents are the ancestors the
model gives it of a type the schema lets it have directly, with an intermediate entity when the
schema allows an ancestor only through another type (``User in Team in Org``: a team between a
user and its org). Cedar then reads the scenario back (:func:`read_entities`, :func:`read_request`,
both against the schema) and CDA's concrete evaluator answers it, before anything is shown
(docs/policy.md, "Counterexamples").
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from cda.policy.lower import Lowering, Request
from cda.policy.schema import Schema, SType
from cda.policy.solving import Node, TermConst, evaluate
from cda.policy.symstore import SchemaStore
from cda.policy.symvalues import IPV, BoolV, Cases, EntV, IntV, Leaf, Opaque, RecV, SetV, StrV, Val
from cda.policy.values import CRecord, CSet, Datetime, Decimal, Duration, EntityUID, IPAddr, Value, to_json

__all__ = ["Scenario", "Decoder", "StoreBuilder", "request_json", "default_value", "ip_value", "named_in_request"]


@dataclass
class Scenario:
    """A request and (for an analysis over every store) the entity store, in Cedar's JSON."""

    request: dict[str, Any]
    entities: list[dict[str, Any]] | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"request": self.request}
        if self.entities is not None:
            out["entities"] = self.entities
        return out


@dataclass
class _Entity:
    attrs: dict[str, Value] = field(default_factory=dict)
    tags: dict[str, Value] = field(default_factory=dict)
    parents: set[EntityUID] = field(default_factory=set)


class Decoder:
    """Values of lowered leaves under one model."""

    def __init__(self, low: Lowering, model: dict[str, Any]) -> None:
        self.low = low
        self.model = model
        self._ids: dict[tuple[str, str], str] = {}  # (entity type, model value) → id
        self._taken: dict[str, set[str]] = {}
        self._named_cache: dict[str, set[str]] = {}

    def truth(self, node: Node) -> bool:
        return bool(evaluate(node, self.model))

    def number(self, leaf: IntV) -> int:
        return leaf.lin.const + sum(c * int(self.model[v]) for v, c in leaf.lin.terms)

    def text(self, term: Any) -> str:
        return term.value if isinstance(term, TermConst) else str(self.model[term.name])

    def uid(self, leaf: EntV) -> EntityUID:
        raw = self.text(leaf.term)
        if isinstance(leaf.term, TermConst) or leaf.term.sort.domain is not None or raw in self._named(leaf.etype):
            return EntityUID(leaf.etype, raw)  # a named entity (fresh values differ from every name)
        key = (leaf.etype, raw)
        ident = self._ids.get(key)
        if ident is None:
            taken = self._taken.setdefault(leaf.etype, set(self._constants(leaf.etype)))
            base = leaf.etype.rsplit("::", 1)[-1].lower() or "entity"
            n = 1
            while f"{base}{n}" in taken:
                n += 1
            ident = self._ids[key] = f"{base}{n}"
            taken.add(ident)
        return EntityUID(leaf.etype, ident)

    def _named(self, etype: str) -> set[str]:
        found = self._named_cache.get(etype)
        if found is None:
            found = self._named_cache[etype] = set(self._constants(etype))
        return found

    def _constants(self, etype: str) -> list[str]:
        return [x.const_id for x in self.low.universe.get(f"Entity:{etype}", {}).values()
                if isinstance(x, EntV) and x.const_id is not None]  # fmt: skip

    def leaf(self, v: Val) -> Leaf:
        if isinstance(v, Cases):
            for g, leaf in v.branches:
                if self.truth(g):
                    return leaf
            return v.branches[0][1]
        return v

    def value(self, v: Val, fill: Callable[[SType], Value] | None = None) -> Value:
        """The concrete value of ``v`` (a record's unread attributes filled by ``fill``)."""
        leaf = self.leaf(v)
        if isinstance(leaf, BoolV):
            return self.truth(leaf.node)
        if isinstance(leaf, IntV):
            n = self.number(leaf)
            kinds: dict[str, Value] = {"Long": n, "decimal": Decimal(n), "datetime": Datetime(n), "duration": Duration(n)}
            return kinds[leaf.kind]
        if isinstance(leaf, StrV):
            return self.text(leaf.term)
        if isinstance(leaf, EntV):
            return self.uid(leaf)
        if isinstance(leaf, IPV):
            return ip_value(self.truth(leaf.v6), self.number(IntV(leaf.addr)), self.number(IntV(leaf.prefix)))
        if isinstance(leaf, SetV):
            if leaf.items is not None:
                return CSet(self.value(x) for x in leaf.items)
            assert leaf.var is not None
            chosen = [x for k, x in self.low._member_leaf[leaf.var].items() if self.model.get(self.low.members[leaf.var][k].name)]  # type: ignore[attr-defined]
            return CSet(self.value(x) for x in chosen)
        if isinstance(leaf, RecV):
            return CRecord({k: self.value(fld.value()) for k, fld in leaf.fields.items() if _present(self, fld)})
        assert isinstance(leaf, Opaque)
        raise ValueError(f"no value for {leaf.what}")


def _named(v: Value) -> list[EntityUID]:
    """Every entity a value names."""
    if isinstance(v, EntityUID):
        return [v]
    if isinstance(v, CSet):
        return [u for x in v for u in _named(x)]
    if isinstance(v, CRecord):
        return [u for x in v.attrs.values() for u in _named(x)]
    return []


def named_in_request(request: dict[str, Any]) -> set[EntityUID]:
    """The entities a request (in Cedar's JSON) names: principal, resource, the context's."""
    out = {EntityUID(request[k]["type"], request[k]["id"]) for k in ("principal", "resource")}

    def walk(x: Any) -> None:
        if isinstance(x, dict):
            if "__entity" in x:
                out.add(EntityUID(x["__entity"]["type"], x["__entity"]["id"]))
            else:
                for y in x.values():
                    walk(y)
        elif isinstance(x, list):
            for y in x:
                walk(y)

    walk(request.get("context"))
    return out


def _present(dec: Decoder, fld: Any) -> bool:
    """An attribute is in the scenario when required, or asked about and present in the model
    (an optional attribute no policy asked about is left out: smaller, and it changes nothing)."""
    return bool(fld.required or (fld.asked and dec.truth(fld.present)))


def ip_value(v6: bool, addr: int, prefix: int) -> IPAddr:
    """The ``ipaddr`` a model describes, written so that Cedar reads it back (IPv6 in full hex
    form: Cedar refuses the dotted IPv4-in-IPv6 form Python prints for some addresses)."""
    from cda.policy.entities import parse_ip

    text = ipaddress.IPv6Address(addr).exploded if v6 else str(ipaddress.IPv4Address(addr))
    return parse_ip(f"{text}/{prefix}")


def default_value(t: SType, entity_of: Callable[[str], EntityUID]) -> Value:
    """A value of schema type ``t`` for what no policy reads (an entity: ``entity_of(type)``)."""
    if t.kind == "Bool":
        return False
    if t.kind == "Long":
        return 0
    if t.kind == "String":
        return ""
    if t.kind == "Entity":
        return entity_of(t.name)
    if t.kind == "Set":
        return CSet([])
    if t.kind == "Record":
        return CRecord({n: default_value(at, entity_of) for n, at, required in t.attrs if required})
    defaults: dict[str, Value] = {"decimal": Decimal(0), "datetime": Datetime(0), "duration": Duration(0),
                                  "ipaddr": IPAddr(4, 0, 32, "0.0.0.0")}  # fmt: skip
    return defaults[t.name]


class StoreBuilder:
    """The entity store of a model of an analysis over every store (module docstring)."""

    def __init__(self, dec: Decoder, store: SchemaStore, schema: Schema) -> None:
        self.dec = dec
        self.store = store
        self.schema = schema
        self.entities: dict[EntityUID, _Entity] = {}
        self._todo: list[EntityUID] = []
        self._fillers: dict[str, EntityUID] = {}
        # every application of an attribute or tag function, by (type, path) and decoded entity
        self._apps: dict[tuple[str, tuple[str, ...]], list[tuple[tuple[Any, ...], Leaf]]] = {}
        for (etype, path), apps in store.apps.items():
            self._apps[(etype, path)] = apps

    def _find(self, etype: str, path: tuple[str, ...], uid: EntityUID, key: str | None = None) -> Leaf | None:
        for args, leaf in self._apps.get((etype, path), []):
            if EntityUID(etype, self._entity_id(etype, args[0])) != uid:
                continue
            if key is not None and self.dec.text(args[1]) != key:
                continue
            return leaf
        return None

    def _entity_id(self, etype: str, term: Any) -> str:
        return self.dec.uid(EntV(term, etype)).id

    def _entity_of(self, etype: str) -> EntityUID:
        """An entity of ``etype`` for an unread attribute: one the store has, else a filler."""
        have = sorted(u for u in self.entities if u.type == etype)
        if have:
            return have[0]
        if etype not in self._fillers:
            decl = self.schema.entities.get(etype)
            ident = decl.enum[0] if decl is not None and decl.enum else "filler"
            uid = self._fillers[etype] = EntityUID(etype, ident)
            self._add(uid)
        return self._fillers[etype]

    def _add(self, uid: EntityUID) -> None:
        if uid not in self.entities and uid.type in self.schema.entities:
            self.entities[uid] = _Entity()
            self._todo.append(uid)

    def build(self) -> None:
        """The store's entities: every entity term's value, with attributes, tags, parents."""
        low = self.dec.low
        for key, xs in low.universe.items():
            if key.startswith("Entity:"):
                for x in xs.values():
                    assert isinstance(x, EntV)
                    if self.store._exists(x) and x.etype not in self.store.action_types:
                        self._add(self.dec.uid(x))
        ancestors: dict[EntityUID, set[EntityUID]] = {}
        for (ka, kb), atom in self.store.anc.items():
            if self.dec.truth(atom):
                a, b = self.store._anc_leaves[(ka, kb)]
                ancestors.setdefault(self.dec.uid(a), set()).add(self.dec.uid(b))
        while self._todo:
            uid = self._todo.pop(0)
            self._fill(uid)
        for uid, anc in sorted(ancestors.items()):
            self._parents(uid, anc, ancestors)
        self.drain()

    def entity_of(self, etype: str) -> EntityUID:
        return self._entity_of(etype)

    def drain(self) -> None:
        """Fill the entities added since (intermediates, fillers for unread attributes)."""
        while self._todo:
            self._fill(self._todo.pop(0))

    def to_json(self, keep: set[EntityUID] | None = None) -> list[dict[str, Any]]:
        """The store as Cedar's entities JSON; with ``keep``, only the entities reachable from
        it (and from every entity whose attributes, tags or ancestors a policy reads) through
        attributes, tags and parents: an entity a policy only names (``principal in
        Team::"eng"``) changes no answer when it is absent."""
        self.drain()
        chosen = sorted(self.entities)
        if keep is not None:
            todo = list(keep) + [self.dec.uid(x) for x in self.store.read]
            todo += [u for u, e in self.entities.items() if e.parents]
            seen: set[EntityUID] = set()
            while todo:
                u = todo.pop()
                if u in seen or u not in self.entities:
                    continue
                seen.add(u)
                ent = self.entities[u]
                todo.extend(ent.parents)
                for v in [*ent.attrs.values(), *ent.tags.values()]:
                    todo.extend(_named(v))
            chosen = [u for u in chosen if u in seen]
        return [self._json(uid) for uid in chosen]

    def _fill(self, uid: EntityUID) -> None:
        decl = self.schema.entities[uid.type]
        ent = self.entities[uid]
        if decl.enum is not None:
            return
        rec = self._record(uid, decl.attrs, ())
        ent.attrs = dict(rec.attrs)
        if decl.tags is not None:
            keys_leaf = self._find(uid.type, ("#tags",), uid)
            if keys_leaf is not None:
                keys = self.dec.value(keys_leaf)
                assert isinstance(keys, CSet)
                for k in sorted(str(x) for x in keys):
                    ent.tags[k] = self._typed(uid, ("#tag",), decl.tags, k)
        for v in [*ent.attrs.values(), *ent.tags.values()]:
            self._refer(v)

    def _refer(self, v: Value) -> None:
        """Every entity a value names is in the store."""
        if isinstance(v, EntityUID):
            self._add(v)
        elif isinstance(v, CSet):
            for x in v:
                self._refer(x)
        elif isinstance(v, CRecord):
            for x in v.attrs.values():
                self._refer(x)

    def _record(self, uid: EntityUID, t: SType, path: tuple[str, ...]) -> CRecord:
        out: dict[str, Value] = {}
        for name, at, required in t.attrs:
            sub = (*path, name)
            if not required:
                present = self._find(uid.type, (*sub, "?"), uid)
                if present is None or not self.dec.value(present):
                    continue
            out[name] = self._typed(uid, sub, at, None)
        return CRecord(out)

    def _typed(self, uid: EntityUID, path: tuple[str, ...], t: SType, key: str | None) -> Value:
        if t.kind == "Record":
            if key is not None:  # a tag's record value: its attributes are applications too
                return CRecord({n: self._typed(uid, (*path, n), at, key) for n, at, required in t.attrs
                                if required or self._present(uid, (*path, n, "?"), key)})  # fmt: skip
            return self._record(uid, t, path)
        leaf = self._find(uid.type, path, uid, key)
        if leaf is None:
            return default_value(t, self._entity_of)
        return self.dec.value(leaf)

    def _present(self, uid: EntityUID, path: tuple[str, ...], key: str) -> bool:
        leaf = self._find(uid.type, path, uid, key)
        return leaf is not None and bool(self.dec.value(leaf))

    def _parents(self, uid: EntityUID, anc: set[EntityUID], all_anc: dict[EntityUID, set[EntityUID]]) -> None:
        decl = self.schema.entities[uid.type]
        direct = {a for a in anc if a.type in decl.parents}
        covered = set(direct)
        for d in direct:
            covered |= all_anc.get(d, set())
        ent = self.entities[uid]
        ent.parents |= direct
        for a in sorted(anc - covered):
            path = self._type_path(uid.type, a.type)
            prev = uid
            for i, t in enumerate(path[1:-1]):
                mid = EntityUID(t, f"{t.rsplit('::', 1)[-1].lower()}-between-{uid.id}-{a.id}-{i}")
                self._add(mid)
                self.entities[prev].parents.add(mid)
                prev = mid
            self.entities[prev].parents.add(a)

    def _type_path(self, start: str, goal: str) -> list[str]:
        """A shortest chain of entity types from ``start`` to ``goal`` along ``memberOf``."""
        frontier, seen = [[start]], {start}
        while frontier:
            path = frontier.pop(0)
            decl = self.schema.entities.get(path[-1])
            for p in decl.parents if decl is not None else []:
                if p == goal:
                    return [*path, p]
                if p not in seen:
                    seen.add(p)
                    frontier.append([*path, p])
        raise ValueError(f"no memberOf path from {start} to {goal}")

    def _json(self, uid: EntityUID) -> dict[str, Any]:
        ent = self.entities[uid]
        out: dict[str, Any] = {
            "uid": {"type": uid.type, "id": uid.id},
            "attrs": {k: to_json(v) for k, v in sorted(ent.attrs.items())},
            "parents": [{"type": p.type, "id": p.id} for p in sorted(ent.parents)],
        }
        if ent.tags:
            out["tags"] = {k: to_json(v) for k, v in sorted(ent.tags.items())}
        return out


def request_json(dec: Decoder, req: Request, context_type: SType, entity_of: Callable[[str], EntityUID]) -> dict[str, Any]:
    """The request of a model: the context's unread required attributes get defaults."""
    ctx = dec.leaf(req.context)
    assert isinstance(ctx, RecV)
    attrs: dict[str, Value] = {}
    types = context_type.attr_map()
    for name, fld in ctx.fields.items():
        if not _present(dec, fld):
            continue
        if fld._value is None:  # never read by a policy
            attrs[name] = default_value(types[name][0], entity_of)
        else:
            attrs[name] = _filled(dec, fld.value(), types[name][0], entity_of)
    p, r = dec.uid(req.principal), dec.uid(req.resource)
    a = dec.uid(req.action)
    return {"principal": {"type": p.type, "id": p.id}, "action": {"type": a.type, "id": a.id},
            "resource": {"type": r.type, "id": r.id}, "context": to_json(CRecord(attrs))}  # fmt: skip


def _filled(dec: Decoder, v: Val, t: SType, entity_of: Callable[[str], EntityUID]) -> Value:
    """``v``'s value, a nested record's unread attributes filled with defaults."""
    leaf = dec.leaf(v)
    if isinstance(leaf, RecV) and t.kind == "Record":
        types = t.attr_map()
        out: dict[str, Value] = {}
        for name, fld in leaf.fields.items():
            if not _present(dec, fld):
                continue
            sub = types[name][0]
            out[name] = default_value(sub, entity_of) if fld._value is None else _filled(dec, fld.value(), sub, entity_of)
        return CRecord(out)
    return dec.value(leaf)



