"""Analyses of Cedar policy sets, decided through CDA's engine over every entity store.

An environment is a principal type, an action and a resource type. A property is asked as "is
there a request (and an entity store) that violates it?":

* ``always-allows S`` / ``always-denies S``: S allows / denies every request;
* ``implies A B``: every request A allows, B allows; ``equivalent A B``; ``disjoint A B`` (no
  request allowed by both);
* ``never-errors S``: no policy of S raises an evaluation error on any request;
* ``no-new-access OLD NEW``: NEW allows nothing OLD does not (``implies NEW OLD``).

**What it is proved for.** By default, for every entity store the schema allows
(:class:`~cda.policy.symstore.SchemaStore`: principals, resources and every entity they reach are
symbolic populations with symbolic attributes, tags and hierarchy) and every request of the
environment; with ``entities=`` (``--entities FILE``), for that store as given
(:class:`~cda.policy.symstore.FixedStore`). Each result says which (``proved_for``).

**How.** The policies are lowered to CDA's IR (:mod:`cda.policy.lower`): each policy's
*satisfied* and *errors* atoms defined by a named clause, the property's violation over them,
the store's axioms in the background. The engine decides it (:class:`~cda.policy.solving.Query`:
z3 or clingo, every model re-checked by the independent evaluator, ``unknown`` an ordered
status). A violation comes back as a least-cost model (soft clauses keep the scenario small:
fewer entities, attributes, ancestors, set members), read as a request and an entity store in
Cedar's JSON (:mod:`cda.policy.scenario`), read back by Cedar's readers against the schema and
evaluated again by CDA's concrete evaluator before it is shown: a disagreement is
:class:`~cda.errors.EvaluatorDisagreement`, a bug, never an answer. Asked for
(:mod:`cda.policy.repair`), a failing property gets a repair (the policies whose removal restores
it, re-checked) and a holding one the policies it stands on (a minimal core).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any, Literal

from cda.contracts.limits import seconds
from cda.contracts.status import PropertyStatus
from cda.errors import CDAError, EvaluatorDisagreement, OptionError
from cda.policy.authorization import Answer, PolicySet, decide
from cda.policy.entities import Entities, read_entities, read_request
from cda.policy.lower import Lowering, Request
from cda.policy.schema import EMPTY_RECORD, Schema
from cda.policy.solving import Clause, Deadline, GroundProblem, Node, Query, SoftClause, SolverStatus
from cda.policy.symstore import FixedStore, SchemaStore
from cda.policy.symvalues import EntV
from cda.policy.syntax import Policy
from cda.policy.templates import Link
from cda.policy.values import EntityUID

__all__ = [
    "Environment",
    "AnalysisResult",
    "PROPERTIES",
    "EVERY_STORE",
    "analyze",
    "files_error",
    "always_allows",
    "always_denies",
    "implies",
    "equivalent",
    "disjoint",
    "never_errors",
    "no_new_access",
    "environments",
    "select_environments",
    "analyze_files",
    "violated",
    "Lowered",
    "lower_analysis",
]

Property = Literal["always-allows", "always-denies", "implies", "equivalent", "disjoint", "never-errors", "no-new-access"]
PROPERTIES: dict[str, int] = {
    "always-allows": 1,
    "always-denies": 1,
    "never-errors": 1,
    "implies": 2,
    "equivalent": 2,
    "disjoint": 2,
    "no-new-access": 2,
}
Backend = Literal["z3", "clingo"]
#: what a result over every store says it was proved for
EVERY_STORE = "every entity store the schema allows"


@dataclass(frozen=True)
class Environment:
    """The requests an analysis ranges over."""

    principal_type: str
    action: EntityUID
    resource_type: str


@dataclass
class AnalysisResult:
    """A property's answer: ``status`` (``holds``, ``fails`` or ``unknown``), what it was
    ``proved_for`` (every store the schema allows, or the given store), and: when it fails, a
    ``counterexample`` (a request, and for every-store analyses the entity store, in Cedar's
    JSON) with each policy set's ``answers`` and a ``repair``; when it holds, with ``explain``,
    the policies it ``stands_on``; when unknown, the ``note`` saying why."""

    property: str
    status: PropertyStatus
    environment: dict[str, str]
    backend: str
    proved_for: str
    assumptions: list[str]
    counterexample: dict[str, Any] | None = None
    answers: dict[str, dict[str, Any]] = field(default_factory=dict)
    repair: dict[str, Any] | None = None
    stands_on: list[str] | None = None
    note: str = ""
    seconds: float = 0.0
    policies: list[int] = field(default_factory=list)
    #: unknown because the time budget ran out (or a cancel stopped it), not the solver's own unknown
    partial: bool = False

    def to_json(self, *, timing: bool = False) -> dict[str, Any]:
        """The result as JSON; without ``timing`` (the default) the same inputs give the same
        bytes, so a batch run on a pool or on Dask can be compared byte for byte."""
        out: dict[str, Any] = {
            "property": self.property, "status": str(self.status), "environment": self.environment,
            "backend": self.backend, "proved_for": self.proved_for, "assumptions": self.assumptions,
            "counterexample": self.counterexample, "answers": self.answers, "repair": self.repair,
            "stands_on": self.stands_on, "note": self.note, "policies": self.policies,
        }  # fmt: skip
        if self.partial:  # only when set: a decided answer keeps the bytes it always had
            out["partial"] = True
        if timing:
            out["seconds"] = self.seconds
        return out


def environments(schema: Schema) -> list[Environment]:
    """Every (principal type, action, resource type) the schema's actions apply to, sorted."""
    out = [Environment(p, a.uid, r) for a in schema.actions.values() for p in a.principals for r in a.resources]
    return sorted(out, key=lambda e: (e.principal_type, str(e.action), e.resource_type))


def select_environments(
    schema: Schema, action: str | None = None, principal_type: str | None = None, resource_type: str | None = None
) -> list[Environment]:
    """The schema's environments narrowed to an action (``Action::"view"`` or ``view``) and/or a
    principal and resource type; an action the schema does not list is taken with the two types
    given. Raises :class:`~cda.errors.CDAError` when none is left."""
    from cda.policy.parse import parse_entity_ref

    envs = environments(schema)
    if action is not None:
        uid = parse_entity_ref(action, default_type="Action")
        envs = [e for e in envs if e.action == uid] or (
            [Environment(principal_type, uid, resource_type)] if principal_type and resource_type else []
        )
    if principal_type is not None:
        envs = [e for e in envs if e.principal_type == principal_type]
    if resource_type is not None:
        envs = [e for e in envs if e.resource_type == resource_type]
    if not envs:
        raise CDAError("no environment (principal type, action, resource type) matches; see the schema's appliesTo")
    return envs


def files_error(prop: str, policies: int, links: int) -> str | None:
    """What is wrong with asking ``prop`` of ``policies`` policy files and ``links`` links files
    (one per policy file at most, in order), or None."""
    if prop not in PROPERTIES:
        return f"unknown property {prop!r}; one of {', '.join(PROPERTIES)}"
    if policies != PROPERTIES[prop]:
        return f"{prop} takes {PROPERTIES[prop]} policy file(s), not {policies}"
    if links > policies:
        return (f"{links} links files for {policies} policy file(s): the i-th links file links the i-th policy "
                "file's templates")
    return None


def analyze_files(
    prop: str,
    policies: Sequence[str | Path],
    *,
    schema: str | Path,
    entities: str | Path | None = None,
    action: str | None = None,
    principal_type: str | None = None,
    resource_type: str | None = None,
    backend: Backend = "z3",
    timeout: float = 60.0,
    explain: bool = False,
    repair: bool = False,
    links: Sequence[str | Path | None] = (),
    every_link: bool = False,
) -> list[AnalysisResult]:
    """``cda policy analyze`` as a function of file paths (what a batch job calls): ``prop`` on
    the policy files (one, or two for the binary properties) over every environment selected,
    for every store the schema allows, or for the store ``entities`` when given. ``links``:
    the links files (or None) of the first policy files, in order; ``every_link``: each template
    also stands for every link of it (docs/policy.md)."""
    from cda.policy.authorization import load_policy_set

    wrong = files_error(prop, len(policies), len(links))
    if wrong is not None:
        raise OptionError(wrong)
    per_file = [*links, *[None] * (len(policies) - len(links))]
    sets = [load_policy_set(p, schema, entities, x) for p, x in zip(policies, per_file)]
    assert sets[0].schema is not None
    envs = select_environments(sets[0].schema, action, principal_type, resource_type)
    given = None if entities is None else (sets[0].entities, Path(entities).name)  # the same on every door
    return [analyze(prop, sets, e, backend=backend, timeout=timeout, store=given, explain=explain, repair=repair,
                    every_link=every_link) for e in envs]  # fmt: skip


def violated(prop: str, answers: list[Answer]) -> bool:
    """Whether concrete answers (one per policy set) violate ``prop``."""
    a = answers[0]
    if prop == "always-allows":
        return a.decision != "allow"
    if prop == "always-denies":
        return a.decision == "allow"
    if prop == "never-errors":
        return bool(a.errors)
    b = answers[1]
    if prop == "implies":
        return a.decision == "allow" and b.decision != "allow"
    if prop == "equivalent":
        return a.decision != b.decision
    if prop == "disjoint":
        return a.decision == "allow" and b.decision == "allow"
    return b.decision == "allow" and a.decision != "allow"


# ---------------------------------------------------------------------------- the lowered problem


@dataclass
class Lowered:
    """One analysis as an IR problem: each policy's clause (its satisfied and errors atoms
    defined), the violation clause, and what reads a model back."""

    low: Lowering
    request: Request
    problem: GroundProblem
    #: per policy set: [(clause name, policy, satisfied atom, errors atom)]
    policies: list[list[tuple[str, Policy, Node, Node]]]
    violation: str  # the violation clause's name
    env: Environment
    #: per policy set, with every link: [(template, its clause name, slot → [(chosen, entity)])]
    slots: list[list[tuple[Policy, str, dict[str, list[tuple[Node, EntV | None]]]]]] = field(default_factory=list)


def _set_nodes(low: Lowering, tag: str, policies: list[Policy], req: Request,
               defs: list[Clause]) -> tuple[Node, Node, list[tuple[str, Policy, Node, Node]]]:  # fmt: skip
    """(allows, some policy errors) of one policy set, each policy's meaning a named clause."""
    f = low.f
    permits: list[Node] = []
    forbids: list[Node] = []
    errs: list[Node] = []
    out: list[tuple[str, Policy, Node, Node]] = []
    for i, p in enumerate(policies):
        sat, err = low.policy_nodes(p, req)
        name = f"{tag}:{p.id}" if tag else p.id
        s_atom, e_atom = low.atom(f"sat[{name}]#{i}"), low.atom(f"err[{name}]#{i}")
        defs.append(Clause(name, "hard", f.and_([f.iff(s_atom, sat), f.iff(e_atom, err)]), p.pos[0]))
        (permits if p.effect == "permit" else forbids).append(s_atom)
        errs.append(e_atom)
        out.append((name, p, s_atom, e_atom))
    return f.and_([f.or_(permits), f.not_(f.or_(forbids))]), f.or_(errs), out


def _violation(f: Any, prop: str, sets: list[tuple[Node, Node]]) -> Node:
    a_allow, a_err = sets[0]
    if prop == "always-allows":
        return f.not_(a_allow)  # type: ignore[no-any-return]
    if prop == "always-denies":
        return a_allow
    if prop == "never-errors":
        return a_err
    b_allow = sets[1][0]
    if prop == "implies":
        return f.and_([a_allow, f.not_(b_allow)])  # type: ignore[no-any-return]
    if prop == "equivalent":
        return f.not_(f.iff(a_allow, b_allow))  # type: ignore[no-any-return]
    if prop == "disjoint":
        return f.and_([a_allow, b_allow])  # type: ignore[no-any-return]
    return f.and_([b_allow, f.not_(a_allow)])  # type: ignore[no-any-return]  # no-new-access OLD NEW


def _slot_choices(low: Lowering, template: Policy, name: str, env: Environment,
                  schema: Schema) -> dict[str, list[tuple[Node, EntV | None]]]:  # fmt: skip
    """Each slot of ``template`` as a symbolic entity: one term per allowed type that can match
    the environment's principal (resource), and ``None`` for a link that never applies here;
    exactly one is chosen."""
    from cda.policy.symstore import ancestor_types
    from cda.policy.templates import allowed_types

    f = low.f
    anc = ancestor_types(schema)
    out: dict[str, list[tuple[Node, EntV | None]]] = {}
    for slot in template.slots:
        scope = template.principal if slot == "?principal" else template.resource
        who = env.principal_type if slot == "?principal" else env.resource_type
        allowed = sorted(allowed_types(template, slot, schema))
        reach = {who} if scope.kind == "eq" else {who} | anc.get(who, set()) if scope.type in (None, who) else set()
        alts: list[tuple[Node, EntV | None]] = []
        for t in allowed:
            if t in reach:
                sort = low.store.sort(t)
                if sort.domain is not None and not sort.domain:
                    continue  # a given store without entities of the type: no link of it applies
                x = EntV(low.term_var(f"slot[{name}]{slot}", sort), t)
                low.register(x)
                alts.append((low.atom(f"link[{name}]{slot}={t}"), x))
        # a link that never applies here: of a type that cannot match, or to an entity no request of
        # this environment is (nor is in), as a link to an entity outside a given store
        alts.append((low.atom(f"link[{name}]{slot}=elsewhere"), None))
        low.background(f.or_([g for g, _ in alts]))
        for i, (g, _) in enumerate(alts):
            for h, _ in alts[i + 1 :]:
                low.background(f.not_(f.and_([g, h])))
        out[slot] = alts
    return out


def lower_analysis(prop: str, policy_sets: list[PolicySet], env: Environment, schema: Schema,
                   store: Entities | None, every_link: bool = False) -> Lowered:  # fmt: skip
    """``prop`` over ``env`` as an IR problem, over every store (``store`` None) or ``store``;
    with ``every_link``, each template of a set is there too, linked once to any entities its
    slots allow (:func:`_slot_choices`)."""
    low = Lowering()
    sym = SchemaStore(low, schema) if store is None else FixedStore(low, store)
    f = low.f
    principal = EntV(low.term_var("principal", sym.sort(env.principal_type)), env.principal_type)
    resource = EntV(low.term_var("resource", sym.sort(env.resource_type)), env.resource_type)
    for x in (principal, resource):
        low.register(x)
    action = low.entity(env.action)
    ctx_type = schema.actions[env.action].context if env.action in schema.actions else EMPTY_RECORD
    context = low.fresh_value(ctx_type, "context")
    req = Request(principal, action, resource, context)
    defs: list[Clause] = []
    tags = ["OLD", "NEW"] if prop == "no-new-access" else ["A", "B"] if len(policy_sets) == 2 else [""]
    sets, per_set, slots = [], [], []
    try:
        for tag, ps in zip(tags, policy_sets):
            templates = ps.templates if every_link else []
            chosen = []
            for t in templates:
                name = f"{tag}:{t.id}" if tag else t.id
                low.slots[id(t)] = _slot_choices(low, t, name, env, schema)
                chosen.append((t, name, low.slots[id(t)]))
            allow, errs, pols = _set_nodes(low, tag, [*ps.policies, *templates], req, defs)
            sets.append((allow, errs))
            per_set.append(pols)
            slots.append(chosen)
    except RecursionError:
        raise CDAError("a policy condition is nested too deeply to encode") from None
    low.close()
    gp = low.gp
    gp.clauses.extend(defs)
    gp.clauses.append(Clause("violation", "hard", _violation(f, prop, sets), 0))
    _small_scenario(low, gp)
    return Lowered(low, req, gp, per_set, "violation", env, slots)


def _small_scenario(low: Lowering, gp: GroundProblem) -> None:
    """Soft clauses that make a counterexample small: the entity terms of a type equal where they
    may be (fewer entities; not over a given store, whose entities are there anyway), optional
    attributes absent, fewer ancestors and set members."""
    f = low.f
    soft = [(name, f.not_(node), w) for name, node, w in low.avoid]
    for key, xs in low.universe.items():
        if not key.startswith("Entity:") or isinstance(low.store, FixedStore):
            continue
        terms = [x for x in xs.values() if isinstance(x, EntV) and x.const_id is None]
        for i, x in enumerate(terms):
            for y in terms[i + 1 :]:
                soft.append((f"merge:{key}", f.eq(x.term, y.term), 1))
    for i, (name, node, w) in enumerate(soft):
        if node is not f.true:
            gp.soft.append(SoftClause(f"small#{i}:{name}", node, Fraction(w), 0))
    gp.canonical_soft = False  # the least total is small enough; a canonical violated set costs a level per clause


# ---------------------------------------------------------------------------- the analysis


def _proved_for(store: tuple[Entities, str] | None, schema: Schema, policy_sets: list[PolicySet],
                every_link: bool) -> str:  # fmt: skip
    if store is None:
        out = EVERY_STORE
    else:
        entities, where = store
        n = sum(1 for u in entities.attrs if u not in schema.actions)
        out = f"the entity store {where} as given ({n} entities besides the schema's actions)"
    templates = sum(len(ps.templates) for ps in policy_sets)
    links = sum(len(ps.links) for ps in policy_sets)
    if every_link and templates:
        out += (f"; and every link of the {templates} template(s): each template linked once more, its slots any "
                f"entities of the types they allow, besides the {links} given link(s)")
    elif templates or links:
        out += f"; the policy set as linked ({links} link(s); a template without a link authorizes nothing)"
    return out


def _assumptions(store: tuple[Entities, str] | None, slots: bool = False) -> list[str]:
    out = ["requests conform to the schema (the principal and resource types of the environment, the context "
           "of the action's context type)"]
    if store is None:
        out.append("entity stores conform to the schema and are well formed: every entity a request, an attribute, "
                   "a tag or a policy names is in the store, and the hierarchy is acyclic")
    else:
        out.append("principals, resources and entity-valued context attributes are entities of the given store "
                   "(its attributes and hierarchy are fixed)")
    out.append("longs, decimals and durations range over Cedar's 64-bit values; datetimes over those Cedar reads "
               "(years 1 to 9999)")
    if slots:
        out.append("a slot's entity is of a type the slot allows (docs/policy.md)" + (
            "" if store is None else " and, where it can apply, an entity of the given store"))
    return out


def analyze(
    prop: str,
    policy_sets: list[PolicySet],
    env: Environment,
    *,
    backend: Backend = "z3",
    timeout: float = 60.0,
    store: tuple[Entities, str] | None = None,
    explain: bool = False,
    repair: bool = False,
    every_link: bool = False,
) -> AnalysisResult:
    """Decide ``prop`` for the policy sets (one or two, as the property takes) over ``env``:
    for every entity store the first set's schema allows, or, with ``store`` (an entity store
    and where it came from), for that store. A set's templates count as linked (its links);
    with ``every_link``, each template is also linked once to any entities its slots allow, and
    a counterexample names that link. ``repair`` (a failing property) and ``explain`` (a
    holding one) ask for more solving, within the same ``timeout``."""
    if prop not in PROPERTIES:
        raise OptionError(f"unknown property {prop!r}; one of {', '.join(PROPERTIES)}")
    if len(policy_sets) != PROPERTIES[prop]:
        raise OptionError(f"{prop} takes {PROPERTIES[prop]} policy set(s), not {len(policy_sets)}")
    if backend not in ("z3", "clingo"):
        raise OptionError(f"unknown backend {backend!r}; z3 or clingo")
    timeout = seconds("timeout", timeout)  # 0: no time at all, every property unknown (a partial), as elsewhere
    started = time.perf_counter()
    schema = policy_sets[0].schema
    if schema is None:
        raise CDAError("an analysis needs the schema: it says which requests and entity stores there are")
    if env.action not in schema.actions:
        raise CDAError(f"the action {env.action} is not in the schema")
    if store is not None:
        _has_requests(store[0], env, schema)
    lowered = lower_analysis(prop, policy_sets, env, schema, None if store is None else store[0], every_link)
    deadline = Deadline(timeout)
    query = Query(lowered.problem, backend, deadline)
    result = AnalysisResult(
        property=prop, status=PropertyStatus.UNKNOWN,
        environment={"principal_type": env.principal_type, "action": str(env.action), "resource_type": env.resource_type},
        backend=backend, proved_for=_proved_for(store, schema, policy_sets, every_link),
        assumptions=_assumptions(store, every_link and any(ps.templates for ps in policy_sets)),
        policies=[len(ps.policies) for ps in policy_sets],
    )  # fmt: skip
    decided = query.check()
    if decided.status is SolverStatus.UNKNOWN:
        result.note = f"{backend} gave no verdict: {decided.note or 'unknown'}; nothing is claimed"
        result.partial = deadline.expired()
    elif decided.status is SolverStatus.UNSAT:
        result.status = PropertyStatus.HOLDS
        if explain:
            from cda.policy.repair import stands_on

            result.stands_on, note = stands_on(lowered, query)
            if note:
                result.note = note
    else:
        small = query.cheapest()
        model = small.model if small.status is SolverStatus.SAT else decided.model
        if small.status is not SolverStatus.SAT:
            result.note = "the counterexample is not minimised (time ran out while making it small)"
        assert model is not None
        cex, answers = _scenario(prop, lowered, model, policy_sets, schema, store)
        result.status = PropertyStatus.FAILS
        result.counterexample = cex
        names = ["OLD", "NEW"] if prop == "no-new-access" else ["A", "B"] if len(answers) == 2 else ["S"]
        result.answers = {n: a.to_json() for n, a in zip(names, answers)}
        if repair:
            from cda.policy.repair import suggest

            def recheck(name: str, policy: Policy) -> bool:
                """The property, analysed afresh with the policy of clause ``name`` replaced."""
                sets = []
                for pols, ps in zip(lowered.policies, policy_sets):
                    kept = [policy if n == name else q for n, q, _, _ in pols]
                    sets.append(PolicySet([q for q in kept if not q.slots], ps.schema, ps.entities,
                                          [q for q in kept if q.slots], ps.links))  # fmt: skip
                again = analyze(prop, sets, env, backend=backend, timeout=timeout, store=store, every_link=every_link)
                return again.status is PropertyStatus.HOLDS

            result.repair = suggest(prop, lowered, query, recheck)
    result.seconds = round(time.perf_counter() - started, 6)
    return result


def _has_requests(store: Entities, env: Environment, schema: Schema) -> None:
    """Refuse a given store in which the environment has no request (every property would hold
    vacuously): no principal or resource of its types, or no entity for a required context
    attribute of entity type."""
    have = {u.type for u in store.attrs}

    def required_entities(t: Any, path: str) -> list[tuple[str, str]]:
        if t.kind == "Entity":
            return [(path, t.name)]
        if t.kind == "Record":
            return [x for name, at, required in t.attrs if required for x in required_entities(at, f"{path}.{name}")]
        return []

    for path, t in required_entities(schema.actions[env.action].context, "context"):
        if t not in have:
            raise CDAError(f"no {t} entities in the store: nothing to decide (every request's {path} is an entity of "
                           f"type {t} of the given store)")  # fmt: skip
    for t in (env.principal_type, env.resource_type):
        if t not in have:
            raise CDAError(
                f"no {t} entities in the store: nothing to decide (the requests of ({env.principal_type}, {env.action}, "
                f"{env.resource_type}) range over the given store's {env.principal_type} and {env.resource_type} "
                "entities; give a store that has both, narrow the environment, or analyse every store the schema "
                "allows by leaving --entities out)"
            )


def _scenario(prop: str, lowered: Lowered, model: dict[str, Any], policy_sets: list[PolicySet], schema: Schema,
              store: tuple[Entities, str] | None) -> tuple[dict[str, Any], list[Answer]]:  # fmt: skip
    """The model as a Cedar scenario, read back by Cedar's readers and re-evaluated concretely."""
    from cda.policy.scenario import Decoder, StoreBuilder, named_in_request, request_json

    low = lowered.low
    dec = Decoder(low, low.realize_readings(model))
    ctx_type = schema.actions[lowered.env.action].context
    links = [_chosen_links(dec, chosen, ps, schema) for chosen, ps in zip(lowered.slots, policy_sets)]
    if any(links):  # the sets as the counterexample links them: what is evaluated again
        policy_sets = [_linked(ps, got) for ps, got in zip(policy_sets, links)]
    if store is None:
        assert isinstance(low.store, SchemaStore)
        builder = StoreBuilder(dec, low.store, schema)
        builder.build()
        request = request_json(dec, lowered.request, ctx_type, builder.entity_of)
        full = builder.to_json()
        small = builder.to_json(keep=named_in_request(request))
        for entities_json in ([small, full] if len(small) < len(full) else [full]):
            try:
                concrete = read_entities(entities_json, schema, "counterexample.entities")
            except CDAError as exc:
                raise EvaluatorDisagreement(f"the counterexample's entity store does not conform to the schema: {exc}") from None
            answers = _answers(request, schema, concrete, policy_sets)
            if violated(prop, answers) or entities_json is full:
                break
    else:
        concrete = store[0]
        entities_json = None

        def existing(etype: str) -> EntityUID:
            return min(u for u in concrete.attrs if u.type == etype)

        request = request_json(dec, lowered.request, ctx_type, existing)
        answers = _answers(request, schema, concrete, policy_sets)
    if not violated(prop, answers):
        raise EvaluatorDisagreement(
            f"the solver's counterexample to {prop} is not one for CDA's concrete evaluator: {request} "
            f"(answers {[a.to_json() for a in answers]})"
        )
    cex: dict[str, Any] = {"request": request}
    if entities_json is not None:
        cex["entities"] = entities_json
    if any(links):
        from cda.policy.templates import links_json

        names = ["OLD", "NEW"] if prop == "no-new-access" else ["A", "B"] if len(links) == 2 else ["S"]
        cex["links"] = {n: links_json(got, ps.templates) for n, got, ps in zip(names, links, policy_sets) if got}
    return cex, answers


def _chosen_links(dec: Any, chosen: list[tuple[Policy, str, dict[str, list[tuple[Node, EntV | None]]]]],
                  ps: PolicySet, schema: Schema) -> list[Link]:  # fmt: skip
    """The link of each template a model chose (every link): a slot's entity, or, where the
    model chose a link that never applies here, an entity ``elsewhere`` of the first type the
    slot allows that cannot match, else of the first it allows (a template whose slot allows
    no type has no link)."""
    from cda.policy.templates import allowed_types, template_name

    taken = {p.id for p in ps.policies} | {t.id for t in ps.templates}
    out: list[Link] = []
    for template, _, slots in chosen:
        values: list[tuple[str, EntityUID]] = []
        for slot, alts in slots.items():
            x = next(x for g, x in alts if dec.truth(g))
            if x is None:
                here = {y.etype for _, y in alts if y is not None}
                other = sorted(allowed_types(template, slot, schema) - here) or sorted(here)
                if not other:
                    break
                values.append((slot, EntityUID(other[0], "elsewhere")))
            else:
                values.append((slot, dec.uid(x)))
        else:
            base = template_name(ps.templates, template.id)
            n, link_id = 0, f"{base}-link"
            while link_id in taken:
                n += 1
                link_id = f"{base}-link{n}"
            taken.add(link_id)
            out.append(Link(template.id, link_id, tuple(values)))
    return out


def _linked(ps: PolicySet, links: list[Link]) -> PolicySet:
    from cda.policy.templates import link

    by_id = {t.id: t for t in ps.templates}
    made = [link(by_id[x.template_id], x.link_id, dict(x.values)) for x in links]
    return PolicySet([*ps.policies, *made], ps.schema, ps.entities, ps.templates, [*ps.links, *links])


def _answers(request: dict[str, Any], schema: Schema, store: Entities, policy_sets: list[PolicySet]) -> list[Answer]:
    """Each policy set's concrete answer to a request read back against the schema."""
    try:
        req = read_request(request, schema, "counterexample.request")
    except CDAError as exc:
        raise EvaluatorDisagreement(f"the counterexample's request does not conform to the schema: {exc}") from None
    return [decide(ps.policies, req, store) for ps in policy_sets]


def _one(prop: str) -> Any:
    def run(ps: PolicySet, env: Environment, *, backend: Backend = "z3", timeout: float = 60.0,
            store: tuple[Entities, str] | None = None, explain: bool = False, repair: bool = False,
            every_link: bool = False) -> AnalysisResult:  # fmt: skip
        return analyze(prop, [ps], env, backend=backend, timeout=timeout, store=store, explain=explain, repair=repair,
                       every_link=every_link)  # fmt: skip

    run.__name__ = prop.replace("-", "_")
    run.__doc__ = f"``{prop}``: see :func:`analyze`."
    return run


def _two(prop: str) -> Any:
    def run(a: PolicySet, b: PolicySet, env: Environment, *, backend: Backend = "z3", timeout: float = 60.0,
            store: tuple[Entities, str] | None = None, explain: bool = False, repair: bool = False,
            every_link: bool = False) -> AnalysisResult:  # fmt: skip
        return analyze(prop, [a, b], env, backend=backend, timeout=timeout, store=store, explain=explain, repair=repair,
                       every_link=every_link)  # fmt: skip

    run.__name__ = prop.replace("-", "_")
    run.__doc__ = f"``{prop}``: see :func:`analyze`."
    return run


always_allows = _one("always-allows")
always_denies = _one("always-denies")
never_errors = _one("never-errors")
implies = _two("implies")
equivalent = _two("equivalent")
disjoint = _two("disjoint")
no_new_access = _two("no-new-access")
