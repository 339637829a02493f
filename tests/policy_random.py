"""Random Cedar schemas, policy sets and entity stores, and the oracles an analysis answers to.

A seed gives a schema (entity types with ``memberOf``, required and optional attributes of every
kind the analyses read, tags; one action with a context), two policy sets over it (scopes with
``==``, ``in``, ``is``; conditions with ``has``, ``in``, ``is``, ``like``, sets, records, longs,
decimals, datetimes, durations, addresses, tags, if-then-else) and random stores that conform to
the schema. :func:`check_seed` decides every property over every store the schema allows and:

* every FAILS: cedarpy (Cedar's own evaluator) reads the counterexample's request and entity
  store against the schema and its answers violate the property; the analysis bounded to the
  counterexample's own store fails too;
* every HOLDS: random stores and requests (bounded sampling, answered by cedarpy and by CDA's
  evaluator) never violate it, and the analysis bounded to each sampled store holds too.

Templates (:func:`check_template_seed`): a set with templates and a links file, decided as linked
and for every link of each template; cedarpy links the templates as each counterexample names
and confirms it; sampled stores, requests and links never contradict a HOLDS.

``python tests/policy_random.py N [FIRST [BACKEND [templates]]]`` runs seeds FIRST..FIRST+N-1 and prints the counts the
closing note of issue 29 asks for (analyses checked, FAILS confirmed, HOLDS contradicted).
"""

from __future__ import annotations

import json
import random
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from cda.contracts.status import PropertyStatus  # noqa: E402
from cda.policy.analyze import PROPERTIES, Environment, analyze, violated  # noqa: E402
from cda.policy.authorization import PolicySet, decide  # noqa: E402
from cda.policy.entities import read_entities, read_request  # noqa: E402
from cda.policy.parse import parse_policies  # noqa: E402
from cda.policy.schema import parse_schema  # noqa: E402
from cda.policy.values import EntityUID  # noqa: E402

SCALARS = ["Bool", "Long", "String"]
EXTS = ["decimal", "datetime", "duration", "ipaddr"]
STRINGS = ["", "a", "ab", "b", "x*y", "1.25", "10.1.2.3"]
DATES = ["2024-01-01", "2024-06-30T12:00:00Z", "1970-01-01", "2030-12-31T23:59:59.999Z"]
DURATIONS = ["1h", "-2d", "30m", "0ms", "1d2h"]
DECIMALS = ["0.0", "1.5", "-2.25", "100.0001"]
IPS = ["10.0.0.0/8", "10.1.2.3", "192.168.0.1/24", "::1", "127.0.0.1", "ff00::/8"]


@dataclass
class Attr:
    name: str
    kind: str  # Bool Long String Entity Set Ext Record
    ref: str = ""  # entity type, set element kind ("String" or an entity type), extension name
    required: bool = True
    fields: list[Attr] = field(default_factory=list)

    def cedar(self) -> str:
        if self.kind in SCALARS:
            t = self.kind
        elif self.kind in ("Entity", "Ext"):
            t = self.ref
        elif self.kind == "Set":
            t = f"Set<{self.ref}>"
        else:
            t = "{" + ", ".join(f.decl() for f in self.fields) + "}"
        return t

    def decl(self) -> str:
        return f"{self.name}{'' if self.required else '?'}: {self.cedar()}"


@dataclass
class EntityType:
    name: str
    parents: list[str]
    attrs: list[Attr]
    tags: str | None = None


@dataclass
class World:
    """A random schema and what the generators need to know of it."""

    types: list[EntityType]
    principal: str
    resource: str
    context: list[Attr]
    rng: random.Random
    #: strings are read by ip()/decimal() (odd seeds) or matched by `like` (even seeds): both in
    #: one problem are refused by name (docs/policy.md)
    readings: bool = False

    def text(self) -> str:
        lines = []
        for t in self.types:
            parents = f" in [{', '.join(t.parents)}]" if t.parents else ""
            attrs = " = {" + ", ".join(a.decl() for a in t.attrs) + "}" if t.attrs else ""
            tags = f" tags {t.tags}" if t.tags else ""
            lines.append(f"entity {t.name}{parents}{attrs}{tags};")
        ctx = "{" + ", ".join(a.decl() for a in self.context) + "}"
        lines.append(f"action act appliesTo {{ principal: [{self.principal}], resource: [{self.resource}], context: {ctx} }};")
        return "\n".join(lines) + "\n"

    def type(self, name: str) -> EntityType:
        return next(t for t in self.types if t.name == name)

    def ids(self, t: str) -> list[str]:
        return [f"{t.lower()}{i}" for i in range(2)]


def _attr(rng: random.Random, name: str, types: list[str], depth: int = 0) -> Attr:
    roll = rng.random()
    required = rng.random() < 0.65
    if roll < 0.2:
        return Attr(name, "Bool", required=required)
    if roll < 0.38:
        return Attr(name, "Long", required=required)
    if roll < 0.52:
        return Attr(name, "String", required=required)
    if roll < 0.7:
        return Attr(name, "Entity", rng.choice(types), required)
    if roll < 0.86:
        return Attr(name, "Set", rng.choice(["String", "Long", *types]), required)
    if roll < 0.93 or depth > 0:
        return Attr(name, "Ext", rng.choice(EXTS), required)
    return Attr(name, "Record", required=required, fields=[_attr(rng, f"{name}{i}", types, depth + 1) for i in range(2)])


def world(seed: int) -> World:
    rng = random.Random(seed)
    n = rng.randint(2, 3)
    names = ["User", "Group", "Doc"][:n]
    types = []
    for i, name in enumerate(names):
        parents = sorted({p for p in names[i:] if rng.random() < 0.4})  # a DAG of types (itself allowed)
        attrs = [_attr(rng, f"{name[0].lower()}{j}", names) for j in range(rng.randint(0, 3))]
        tags = rng.choice([None, None, "String", "Long"])
        types.append(EntityType(name, parents, attrs, tags))
    principal, resource = names[0], rng.choice(names)
    context = [_attr(rng, f"c{j}", names) for j in range(rng.randint(1, 3))]
    return World(types, principal, resource, context, rng, readings=seed % 2 == 1)


# ---------------------------------------------------------------------------- policies


def _paths(w: World, kind: str, ref: str | None = None) -> list[tuple[str, Attr | None]]:
    """Expressions of an attribute kind: request variables' attributes, one entity hop deep."""
    out: list[tuple[str, Attr | None]] = []

    def visit(prefix: str, attrs: list[Attr], depth: int) -> None:
        for a in attrs:
            path = f"{prefix}.{a.name}"
            if a.kind == kind and (ref is None or a.ref == ref):
                out.append((path, a))
            if a.kind == "Entity" and depth == 0:
                visit(path, w.type(a.ref).attrs, depth + 1)
            if a.kind == "Record":
                visit(path, a.fields, depth + 1)

    visit("principal", w.type(w.principal).attrs, 0)
    visit("resource", w.type(w.resource).attrs, 0)
    visit("context", w.context, 0)
    return out


def _lit(w: World, t: str) -> str:
    return f'{t}::"{w.rng.choice(w.ids(t))}"'


def _atom(w: World) -> str:
    rng = w.rng
    choices = []
    for path, _ in _paths(w, "Bool"):
        choices.append(path)
    for path, _ in _paths(w, "Long"):
        c = rng.randint(-2, 2)
        choices += [f"{path} < {c}", f"{path} == {c}", f"{path} + {c} >= {rng.randint(-2, 2)}",
                    f"{path} * 2 > {c}", f"{path} + 9223372036854775807 > 0"]  # fmt: skip
    for path, _ in _paths(w, "String"):
        s = rng.choice(STRINGS)
        choices.append(f'{path} == "{s}"')
        if w.readings:
            choices += [f'decimal({path}).lessThan(decimal("1.5"))', f'ip({path}).isInRange(ip("10.0.0.0/8"))']
        else:
            choices.append(f'{path} like "{rng.choice(["a*", "*b", "a*b", "*"])}"')
    for path, a in _paths(w, "Entity"):
        assert a is not None
        choices += [f"{path} == principal", f"{path} in {_lit(w, a.ref)}", f"principal in {path}", f"{path} is {a.ref}",
                    f"{path} == resource"]  # fmt: skip
    for path, a in _paths(w, "Set"):
        assert a is not None
        if a.ref == "String":
            choices += [f'{path}.contains("{rng.choice(STRINGS)}")', f'{path}.containsAll(["a", "b"])',
                        f'{path}.containsAny(["a"])', f"{path}.isEmpty()"]  # fmt: skip
        elif a.ref == "Long":
            choices += [f"{path}.contains({rng.randint(-1, 1)})", f"{path}.isEmpty()"]
        else:
            choices += [f"{path}.contains(principal)", f"principal in {path}", f"{path}.contains({_lit(w, a.ref)})",
                        f"{path}.isEmpty()", f"resource in {path}"]  # fmt: skip
        for other, _ in _paths(w, "Set", a.ref):
            if other != path:
                choices += [f"{path}.containsAll({other})", f"{path}.containsAny({other})", f"{path} == {other}"]
    for path, a in _paths(w, "Ext"):
        assert a is not None
        if a.ref == "decimal":
            choices.append(f'{path}.lessThan(decimal("{rng.choice(DECIMALS)}"))')
        elif a.ref == "datetime":
            choices += [f'{path} < datetime("{rng.choice(DATES)}")', f'{path}.offset(duration("{rng.choice(DURATIONS)}")) >= datetime("{rng.choice(DATES)}")',
                        f'{path}.toTime() < duration("12h")', f'{path}.durationSince(datetime("2024-01-01")).toDays() > 0']  # fmt: skip
        elif a.ref == "duration":
            choices += [f'{path} > duration("{rng.choice(DURATIONS)}")', f"{path}.toHours() == 1"]
        else:
            choices += [f'{path}.isInRange(ip("{rng.choice(IPS)}"))', f"{path}.isLoopback()", f"{path}.isIpv4()",
                        f'{path} == ip("{rng.choice(IPS)}")']  # fmt: skip
    for who, attrs in (("principal", w.type(w.principal).attrs), ("resource", w.type(w.resource).attrs),
                       ("context", w.context)):  # fmt: skip
        for a in attrs:
            if not a.required:
                choices.append(f"{who} has {a.name}")
    for who, t in (("principal", w.principal), ("resource", w.resource)):
        tags = w.type(t).tags
        if tags:
            choices += [f'{who}.hasTag("{rng.choice(["k", "l"])}")', f'{who}.hasTag("k") && {who}.getTag("k") == ' +
                        ('"a"' if tags == "String" else "1"), f'{who}.getTag("k") == ' + ('"a"' if tags == "String" else "1")]  # fmt: skip
    choices += [f"principal in {_lit(w, rng.choice([t.name for t in w.types]))}", f"resource is {rng.choice([t.name for t in w.types])}",
                f"principal == {_lit(w, w.principal)}", "true", "principal.nope == 1"]  # fmt: skip
    # values of other types inside conditions: if-then-else of longs and entities, set and record literals
    simple = [c for c in choices if " && " not in c and "getTag" not in c] or ["true"]
    longs = [p for p, _ in _paths(w, "Long")]
    if longs:
        x = rng.choice(longs)
        choices += [f"(if {rng.choice(simple)} then {x} else 0) < 2", f"-({x}) > 1", f"({x} - 1) * 3 < 10",
                    f'{{"k": {x}}} == {{"k": 1}}', f"{x} * {rng.choice(longs)} > {rng.randint(-2, 2)}"]  # fmt: skip
    ents = [p for p, a in _paths(w, "Entity")]
    choices += [f"(if {rng.choice(simple)} then principal else {_lit(w, w.principal)}) == principal",
                f"[{_lit(w, w.principal)}, principal].contains(principal)", f"principal in [{_lit(w, rng.choice([t.name for t in w.types]))}]",
                '{"a": principal} == {"a": resource}']  # fmt: skip
    if ents:
        e = rng.choice(ents)
        choices += [f"[{e}, principal].contains(resource)", f"resource in [{e}]", f"(if {rng.choice(simple)} then {e} else resource) == resource"]
    return rng.choice(choices)


def _expr(w: World, depth: int) -> str:
    rng = w.rng
    if depth == 0 or rng.random() < 0.35:
        return _atom(w)
    roll = rng.random()
    if roll < 0.25:
        return f"!({_expr(w, depth - 1)})"
    if roll < 0.55:
        return f"({_expr(w, depth - 1)}) && ({_expr(w, depth - 1)})"
    if roll < 0.85:
        return f"({_expr(w, depth - 1)}) || ({_expr(w, depth - 1)})"
    return f"if {_expr(w, depth - 1)} then {_expr(w, depth - 1)} else {_expr(w, depth - 1)}"


def _scope(w: World, var: str, t: str) -> str:
    rng = w.rng
    opts = [var, var, f"{var} == {_lit(w, t)}", f"{var} is {t}"]
    ancestors = [p for p in w.type(t).parents]
    if ancestors:
        opts.append(f"{var} in {_lit(w, rng.choice(ancestors))}")
        opts.append(f"{var} is {t} in {_lit(w, rng.choice(ancestors))}")
    return rng.choice(opts)


def policy_set(w: World) -> str:
    rng = w.rng
    out = []
    for _ in range(rng.randint(1, 3)):
        effect = rng.choice(["permit", "permit", "forbid"])
        conds = "".join(f" {rng.choice(['when', 'when', 'unless'])} {{ {_expr(w, 2)} }}" for _ in range(rng.randint(0, 2)))
        out.append(f"{effect}({_scope(w, 'principal', w.principal)}, action, {_scope(w, 'resource', w.resource)}){conds};")
    return "\n".join(out)


# ---------------------------------------------------------------------------- stores and requests


def _value(w: World, a: Attr, entities: dict[str, list[str]]) -> Any:
    rng = w.rng
    if a.kind == "Bool":
        return rng.random() < 0.5
    if a.kind == "Long":
        return rng.choice([-3, -1, 0, 1, 2, 5, 2**63 - 1, -(2**63)])
    if a.kind == "String":
        return rng.choice(STRINGS)
    if a.kind == "Entity":
        return {"__entity": {"type": a.ref, "id": rng.choice(entities[a.ref])}}
    if a.kind == "Set":
        pool: list[Any] = (STRINGS if a.ref == "String" else [-1, 0, 1] if a.ref == "Long" else
                           [{"__entity": {"type": a.ref, "id": i}} for i in entities[a.ref]])  # fmt: skip
        return rng.sample(pool, rng.randint(0, min(2, len(pool))))
    if a.kind == "Ext":
        arg = rng.choice({"decimal": DECIMALS, "datetime": DATES, "duration": DURATIONS, "ipaddr": IPS}[a.ref])
        return {"__extn": {"fn": "ip" if a.ref == "ipaddr" else a.ref, "arg": arg}}
    return _record(w, a.fields, entities)


def _record(w: World, attrs: list[Attr], entities: dict[str, list[str]]) -> dict[str, Any]:
    return {a.name: _value(w, a, entities) for a in attrs if a.required or w.rng.random() < 0.5}


def store(w: World) -> list[dict[str, Any]]:
    """A random store that conforms to the schema: the ids the policies name and one more per type."""
    rng = w.rng
    entities = {t.name: [*w.ids(t.name), f"{t.name.lower()}x"] for t in w.types}
    order = [(t, i) for t in w.types for i in entities[t.name]]
    rank = {(t.name, i): k for k, (t, i) in enumerate(order)}
    out = []
    for t, i in order:
        parents = []
        for p in t.parents:  # only to later entities: no cycle
            for j in entities[p]:
                if rank[(p, j)] > rank[(t.name, i)] and rng.random() < 0.35:
                    parents.append({"type": p, "id": j})
        ent: dict[str, Any] = {"uid": {"type": t.name, "id": i}, "attrs": _record(w, t.attrs, entities), "parents": parents}
        if t.tags:
            ent["tags"] = {k: (rng.choice(["a", "b"]) if t.tags == "String" else rng.choice([0, 1]))
                           for k in ("k", "l") if rng.random() < 0.5}  # fmt: skip
        out.append(ent)
    return out


def requests(w: World, entities: list[dict[str, Any]], n: int) -> list[dict[str, Any]]:
    rng = w.rng
    ids = {t.name: [e["uid"]["id"] for e in entities if e["uid"]["type"] == t.name] for t in w.types}
    return [{"principal": {"type": w.principal, "id": rng.choice(ids[w.principal])},
             "action": {"type": "Action", "id": "act"},
             "resource": {"type": w.resource, "id": rng.choice(ids[w.resource])},
             "context": _record(w, w.context, ids)} for _ in range(n)]  # fmt: skip


# ---------------------------------------------------------------------------- the oracles


@dataclass
class Stats:
    analyses: int = 0
    fails: int = 0
    fails_confirmed: int = 0
    holds: int = 0
    holds_contradicted: int = 0
    unknown: int = 0
    refused: int = 0
    bounded_refused: int = 0  # bounded analyses refused by name (a store without an entity a context needs)
    samples: int = 0
    problems: list[str] = field(default_factory=list)

    def add(self, other: Stats) -> None:
        for k in ("analyses", "fails", "fails_confirmed", "holds", "holds_contradicted", "unknown", "refused",
                  "bounded_refused", "samples"):  # fmt: skip
            setattr(self, k, getattr(self, k) + getattr(other, k))
        self.problems += other.problems


def _cedarpy(prop: str, texts: list[str], reqs: list[dict[str, Any]], entities: Any, schema: str) -> list[bool]:
    """Per request, whether cedarpy's answers violate ``prop`` (a request cedarpy cannot build
    is an error, never a confirmation)."""
    import cedarpy

    per_set = [cedarpy.is_authorized_batch(reqs, t, entities, schema) for t in texts]
    out = []
    for answers in zip(*per_set):
        decisions = []
        for a in answers:
            errors = [str(e) for e in a.diagnostics.errors]
            decision = a.decision.value.lower()
            if decision not in ("allow", "deny") or any("failed to build request" in e for e in errors):
                raise AssertionError(f"cedarpy could not answer: {decision} {errors}")
            decisions.append(_Answer(decision, errors))
        out.append(violated(prop, decisions))  # type: ignore[arg-type]
    return out


@dataclass
class _Answer:
    decision: str
    errors: list[str]


def _decide(stats: Stats, prop: str, chosen: list[PolicySet], env: Environment, backend: str, against: str | None,
            where: str, **kwargs: Any) -> Any:  # fmt: skip
    """The analysis on ``backend`` (compared with ``against``'s verdict, a difference a problem),
    counted; None when refused by name or unknown (nothing to check)."""
    from cda.errors import BackendUnsupported
    from cda.policy.syntax import UnsupportedConstruct

    try:
        res = analyze(prop, chosen, env, backend=backend, **kwargs)  # type: ignore[arg-type]
    except (UnsupportedConstruct, BackendUnsupported):
        stats.refused += 1
        return None
    stats.analyses += 1
    if against is not None:
        other = analyze(prop, chosen, env, backend=against, **kwargs)  # type: ignore[arg-type]
        if other.status != res.status:
            stats.problems.append(f"{backend} says {res.status}, {against} says {other.status}: {where}")
    if res.status is PropertyStatus.UNKNOWN:
        stats.unknown += 1
        return None
    return res


def _count_fails(stats: Stats, confirmed: bool, where: str, cex: dict[str, Any]) -> None:
    """A FAILS, confirmed by cedarpy or a problem."""
    stats.fails += 1
    if confirmed:
        stats.fails_confirmed += 1
    else:
        stats.problems.append(f"FAILS not confirmed by cedarpy: {where}\n{json.dumps(cex)}")


def check_seed(seed: int, *, stores: int = 3, samples: int = 12, backend: str = "z3", against: str | None = None) -> Stats:
    """Every property on seed ``seed``'s world, against the oracles (module docstring); with
    ``against``, also against that backend's verdict. A construct or a backend that refuses by
    name counts as ``refused``."""
    from cda.errors import BackendUnsupported, CDAError
    from cda.policy.syntax import UnsupportedConstruct

    w = world(seed)
    text = w.text()
    schema = parse_schema(text)
    a_text, b_text = policy_set(w), policy_set(w)
    sets = [PolicySet(parse_policies(a_text, "a.cedar"), schema, read_entities([], schema)),
            PolicySet(parse_policies(b_text, "b.cedar"), schema, read_entities([], schema))]  # fmt: skip
    env = Environment(w.principal, EntityUID("Action", "act"), w.resource)
    sampled = [store(w) for _ in range(stores)]
    stats = Stats()
    for prop, arity in PROPERTIES.items():
        texts, chosen = [a_text, b_text][:arity], sets[:arity]
        where = f"seed {seed} {prop}:\n{text}--- A\n{a_text}\n--- B\n{b_text}"
        res = _decide(stats, prop, chosen, env, backend, against, where)
        if res is None:
            continue
        if res.status is PropertyStatus.FAILS:
            cex = res.counterexample
            assert cex is not None
            _count_fails(stats, _cedarpy(prop, texts, [cex["request"]], cex["entities"], text) == [True], where, cex)
            own = read_entities(cex["entities"], schema)
            try:
                bounded = analyze(prop, chosen, env, backend=backend, store=(own, "the counterexample's"), repair=False)  # type: ignore[arg-type]
            except (UnsupportedConstruct, CDAError) as exc:  # a context entity of a type the (pruned) store has none of
                if not isinstance(exc, UnsupportedConstruct | BackendUnsupported) and "nothing to decide" not in str(exc):
                    raise
                stats.bounded_refused += 1
                continue
            if bounded.status is not PropertyStatus.FAILS:
                stats.problems.append(f"bounded to the counterexample's own store: {bounded.status}: {where}")
            continue
        stats.holds += 1
        contradicted = False
        for entities in sampled:
            reqs = requests(w, entities, samples)
            stats.samples += len(reqs)
            concrete = read_entities(entities, schema)
            ours = [violated(prop, [decide(s.policies, read_request(r, schema), concrete) for s in chosen]) for r in reqs]
            theirs = _cedarpy(prop, texts, reqs, entities, text)
            if any(ours) or any(theirs):
                contradicted = True
                stats.problems.append(f"HOLDS contradicted by a sampled request: {where}\n{json.dumps(entities)}")
            try:
                bounded = analyze(prop, chosen, env, backend=backend, store=(concrete, "sampled"), repair=False)  # type: ignore[arg-type]
            except (UnsupportedConstruct, CDAError) as exc:  # refused by name: a context entity the store has none of
                if not isinstance(exc, UnsupportedConstruct | BackendUnsupported) and "nothing to decide" not in str(exc):
                    raise
                stats.bounded_refused += 1
                continue
            if bounded.status is PropertyStatus.FAILS:
                contradicted = True
                stats.problems.append(f"HOLDS over every store, FAILS on a sampled store: {where}\n{json.dumps(entities)}")
        stats.holds_contradicted += contradicted
    return stats


# ---------------------------------------------------------------------------- templates and links


def _reach(w: World, t: str) -> list[str]:
    """``t`` and its possible ancestor types (the world's ``memberOf``, transitively)."""
    seen, todo = [t], [t]
    while todo:
        for p in w.type(todo.pop()).parents:
            if p not in seen:
                seen.append(p)
                todo.append(p)
    return seen


def templates(w: World) -> tuple[str, list[tuple[str, list[str]]]]:
    """One or two random templates (text, and per template its slots with their allowed types,
    worked out from the world, not by CDA)."""
    rng = w.rng
    out, slots = [], []
    for _ in range(rng.randint(1, 2)):
        parts, mine = [], []
        for var, t in (("principal", w.principal), ("resource", w.resource)):
            roll = rng.random()
            if roll < 0.3:
                parts.append(f"{var} == ?{var}")
                mine.append((f"?{var}", [t]))
            elif roll < 0.6:
                parts.append(f"{var} in ?{var}")
                mine.append((f"?{var}", _reach(w, t)))
            elif roll < 0.75:
                parts.append(f"{var} is {t} in ?{var}")
                mine.append((f"?{var}", _reach(w, t)))
            else:
                parts.append(_scope(w, var, t))
        if not mine:
            parts[0] = "principal == ?principal"
            mine.append(("?principal", [w.principal]))
        effect = rng.choice(["permit", "permit", "forbid"])
        conds = "".join(f" {rng.choice(['when', 'unless'])} {{ {_expr(w, 1)} }}" for _ in range(rng.randint(0, 1)))
        out.append(f"{effect}({parts[0]}, action, {parts[1]}){conds};")
        slots.append((f"@{len(slots)}", mine))
    return "\n".join(out), slots


def random_links(w: World, first: int, slots: list[tuple[str, list[str]]], ids: dict[str, list[str]], tag: str
                 ) -> list[dict[str, Any]]:  # fmt: skip
    """One random link of the template ``policy{first}`` (its slots' entities among ``ids``)."""
    rng = w.rng
    args = {}
    for slot, types in slots:
        t = rng.choice(types)
        args[slot] = f'{t}::"{rng.choice(ids[t])}"'
    return [{"template_id": f"policy{first}", "link_id": f"{tag}-policy{first}", "args": args}]


def set_a_links(cex: dict[str, Any], prop: str) -> list[dict[str, Any]]:
    """The links a counterexample names for the first policy set (named S, A or OLD)."""
    name = "S" if PROPERTIES[prop] == 1 else "OLD" if prop == "no-new-access" else "A"
    return list(cex.get("links", {}).get(name, []))


def _linked_cedarpy(text: str, links: list[dict[str, Any]]) -> Any:
    import cedarpy

    ps = cedarpy.PolicySet.from_str(text)
    if links:
        ps = ps.with_linked_batch([{"template_id": x["template_id"], "new_id": x["link_id"], "values": x["args"]}
                                   for x in links])  # fmt: skip
    return ps


def check_template_seed(seed: int, *, stores: int = 2, samples: int = 6, backend: str = "z3",
                        against: str | None = None) -> Stats:  # fmt: skip
    """Templates on seed ``seed``'s world: set A is random policies and templates (with one
    random link each in the links file), B random policies; every property is decided as linked
    and for every link (one more link per template, any entity its slots allow). Every FAILS:
    cedarpy links the templates as the counterexample names (``links``) and its answers violate
    the property; every HOLDS: random stores, requests and (for every link) random links never
    violate it in cedarpy."""
    from cda.policy.authorization import policy_set_of

    w = world(seed)
    text = w.text()
    static = policy_set(w)
    t_text, slots = templates(w)
    a_text, b_text = f"{static}\n{t_text}", policy_set(w)
    first = len(parse_policies(static))  # the templates' positional ids: policy{first}, …
    given_ids = {t.name: w.ids(t.name) for t in w.types}
    given = [x for i, (_, sl) in enumerate(slots) for x in random_links(w, first + i, sl, given_ids, "given")]
    env = Environment(w.principal, EntityUID("Action", "act"), w.resource)
    sampled = [store(w) for _ in range(stores)]
    stats = Stats()
    sets = [policy_set_of((text_, name), (text, "s.cedarschema"), None, links)
            for text_, name, links in ((a_text, "a.cedar", (json.dumps(given), "links.json")), (b_text, "b.cedar", None))]  # fmt: skip
    for every in (False, True):
        for prop, arity in PROPERTIES.items():
            chosen = sets[:arity]
            where = f"seed {seed} {prop} every_link={every}:\n{text}--- A\n{a_text}\n{json.dumps(given)}\n--- B\n{b_text}"
            res = _decide(stats, prop, chosen, env, backend, against, where, every_link=every)
            if res is None:
                continue
            if res.status is PropertyStatus.FAILS:
                cex = res.counterexample
                assert cex is not None
                extra = set_a_links(cex, prop) if every else []
                if every and len(extra) != len(slots):
                    stats.problems.append(f"every link: the counterexample names {len(extra)} links: {where}")
                pols = [_linked_cedarpy(a_text, given + extra), b_text][:arity]
                confirmed = _cedarpy(prop, pols, [cex["request"]], cex["entities"], text) == [True]  # type: ignore[arg-type]
                _count_fails(stats, confirmed, where, cex)
                continue
            stats.holds += 1
            contradicted = False
            for entities in sampled:
                ids = {t.name: [e["uid"]["id"] for e in entities if e["uid"]["type"] == t.name] for t in w.types}
                for k in range(2 if every else 1):
                    extra = ([x for i, (_, sl) in enumerate(slots) for x in random_links(w, first + i, sl, ids, f"any{k}")]
                             if every else [])  # fmt: skip
                    reqs = requests(w, entities, samples)
                    stats.samples += len(reqs)
                    pols = [_linked_cedarpy(a_text, given + extra), b_text][:arity]
                    if any(_cedarpy(prop, pols, reqs, entities, text)):  # type: ignore[arg-type]
                        contradicted = True
                        stats.problems.append(f"HOLDS contradicted by a sampled request: {where}\n{json.dumps(entities)}"
                                              f"\n{json.dumps(extra)}")  # fmt: skip
            stats.holds_contradicted += contradicted
    return stats


if __name__ == "__main__":
    # python tests/policy_random.py N [FIRST [BACKEND]]: seeds FIRST..FIRST+N-1 on BACKEND (z3 or
    # clingo; clingo's verdicts are also compared with z3's)
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 50
    first = int(sys.argv[2]) if len(sys.argv) > 2 else 0
    backend = sys.argv[3] if len(sys.argv) > 3 else "z3"
    check = check_template_seed if len(sys.argv) > 4 and sys.argv[4] == "templates" else check_seed
    total = Stats()
    for s in range(first, first + n):
        total.add(check(s, backend=backend, against=None if backend == "z3" else "z3"))
    print(json.dumps({k: v for k, v in total.__dict__.items() if k != "problems"} | {"problems": len(total.problems)},
                     indent=1))
    for p in total.problems[:5]:
        print(p)
    sys.exit(1 if total.problems else 0)
