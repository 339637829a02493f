"""Analyses of Cedar policy sets over every request of an environment, decided by a solver.

An environment is a principal type, an action and a resource type; its requests are every
(principal, resource) of those types in the given entity store, with any context of the
action's schema type. Each property is asked as "is there a request that violates it?":

* ``always-allows S`` / ``always-denies S``: S allows / denies every request;
* ``implies A B``: every request A allows, B allows; ``equivalent A B``; ``disjoint A B`` (no
  request allowed by both);
* ``never-errors S``: no policy of S raises an evaluation error on any request;
* ``no-new-access OLD NEW``: NEW allows nothing OLD does not (``implies NEW OLD``).

z3 decides every property over the fragment :mod:`cda.policy.symbolic` encodes; clingo decides
it when the context is read only through Booleans (the formula is then propositional and goes
through CDA's IR to the clingo backend), and refuses by name otherwise. A violated property
comes with a counterexample request, evaluated again concretely by :mod:`cda.policy.authorization`
before it is shown (a disagreement is :class:`~cda.errors.EvaluatorDisagreement`, a bug).
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

import z3

from cda.contracts.deadline import current_token
from cda.contracts.limits import Z3_MAX_TIMEOUT_MS, seconds
from cda.errors import BackendUnsupported, CDAError, EvaluatorDisagreement, OptionError
from cda.policy.authorization import Answer, PolicySet, decide
from cda.policy.entities import Entities, Request
from cda.policy.schema import EMPTY_RECORD, Schema
from cda.policy.symbolic import Encoder, SymContext, and_, as_z3, context_value, not_, or_
from cda.policy.syntax import Policy
from cda.policy.values import CRecord, EntityUID, Value, to_json

__all__ = [
    "Environment",
    "AnalysisResult",
    "PROPERTIES",
    "analyze",
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
]

z3.set_param("ctrl_c", False)  # Ctrl-C reaches the command (cda.cli.interrupts), not swallowed by a check

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
#: (principal, resource) pairs one analysis encodes: each is a copy of the policy set's formulas
MAX_PAIRS = 100_000


@dataclass(frozen=True)
class Environment:
    """The requests an analysis ranges over."""

    principal_type: str
    action: EntityUID
    resource_type: str


@dataclass
class AnalysisResult:
    """A property's verdict: ``holds``; when not, ``counterexample`` (a request in Cedar's JSON
    form, with each policy set's answer); when it does, the ``bound`` and ``assumptions``."""

    property: str
    holds: bool
    environment: dict[str, str]
    backend: str
    requests_checked: str
    bound: str
    assumptions: list[str]
    counterexample: dict[str, Any] | None = None
    answers: dict[str, dict[str, Any]] = field(default_factory=dict)
    seconds: float = 0.0
    policies: list[int] = field(default_factory=list)

    def to_json(self, *, timing: bool = False) -> dict[str, Any]:
        """The result as JSON; without ``timing`` (the default) the same inputs give the same
        bytes, so a batch run on a pool or on Dask can be compared byte for byte."""
        out = asdict(self)
        if not timing:
            del out["seconds"]
        return out


def environments(schema: Schema) -> list[Environment]:
    """Every (principal type, action, resource type) the schema's actions apply to, sorted."""
    out = [
        Environment(p, a.uid, r)
        for a in schema.actions.values()
        for p in a.principals
        for r in a.resources
    ]
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
) -> list[AnalysisResult]:
    """``cda policy analyze`` as a function of file paths (what a batch job calls): ``prop`` on
    the policy files (one, or two for the binary properties) over every environment selected."""
    from cda.policy.authorization import load_policy_set

    if prop not in PROPERTIES:
        raise OptionError(f"unknown property {prop!r}; one of {', '.join(PROPERTIES)}")
    if len(policies) != PROPERTIES[prop]:
        raise OptionError(f"{prop} takes {PROPERTIES[prop]} policy file(s), not {len(policies)}")
    sets = [load_policy_set(p, schema, entities) for p in policies]
    assert sets[0].schema is not None
    envs = select_environments(sets[0].schema, action, principal_type, resource_type)
    return [analyze(prop, sets, e, backend=backend, timeout=timeout) for e in envs]


def _context_of(schema: Schema | None, env: Environment, store: Entities) -> SymContext:
    zc = z3.Context()
    if schema is None or env.action not in schema.actions:
        return context_value(EMPTY_RECORD, zc=zc)
    return context_value(schema.actions[env.action].context, store=store, zc=zc)


def _pairs(store: Entities, env: Environment) -> list[tuple[EntityUID, EntityUID]]:
    principals = sorted(u for u in store.attrs if u.type == env.principal_type)
    resources = sorted(u for u in store.attrs if u.type == env.resource_type)
    return [(p, r) for p in principals for r in resources]


def _set_formulas(policies: list[Policy], enc: Encoder) -> tuple[Any, Any]:
    """(allows, some policy errors) of one policy set for the encoder's request."""
    permits: list[Any] = []
    forbids: list[Any] = []
    errs: list[Any] = []
    for p in policies:
        sat, err = enc.policy_formulas(p)
        (permits if p.effect == "permit" else forbids).append(sat)
        errs.append(err)
    allow = and_(or_(*permits), not_(or_(*forbids)))
    return allow, or_(*errs)


def _violation(prop: str, sets: list[tuple[Any, Any]]) -> Any:
    a_allow, a_err = sets[0]
    if prop == "always-allows":
        return not_(a_allow)
    if prop == "always-denies":
        return a_allow
    if prop == "never-errors":
        return a_err
    b_allow = sets[1][0]
    if prop == "implies":
        return and_(a_allow, not_(b_allow))
    if prop == "equivalent":
        return or_(and_(a_allow, not_(b_allow)), and_(b_allow, not_(a_allow)))
    if prop == "disjoint":
        return and_(a_allow, b_allow)
    return and_(b_allow, not_(a_allow))  # no-new-access OLD NEW: NEW allows what OLD denies


def _violated_concretely(prop: str, answers: list[Answer]) -> bool:
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


def analyze(
    prop: str,
    policy_sets: list[PolicySet],
    env: Environment,
    *,
    backend: Backend = "z3",
    timeout: float = 60.0,
) -> AnalysisResult:
    """Decide ``prop`` for the policy sets (one or two, as the property takes) over ``env``,
    with the first set's schema and entity store."""
    if prop not in PROPERTIES:
        raise OptionError(f"unknown property {prop!r}; one of {', '.join(PROPERTIES)}")
    if len(policy_sets) != PROPERTIES[prop]:
        raise OptionError(f"{prop} takes {PROPERTIES[prop]} policy set(s), not {len(policy_sets)}")
    if backend not in ("z3", "clingo"):
        raise OptionError(f"unknown backend {backend!r}; z3 or clingo")
    timeout = seconds("timeout", timeout, positive=True)
    started = time.perf_counter()
    base = policy_sets[0]
    store, schema = base.entities, base.schema
    if env.action not in store.attrs and (schema is None or env.action not in schema.actions):
        raise CDAError(f"the action {env.action} is neither in the schema nor in the entity store")
    ctx = _context_of(schema, env, store)
    pairs = _pairs(store, env)
    if not pairs:  # no request to range over: any property would hold vacuously
        raise CDAError(
            f"no {env.principal_type}/{env.resource_type} entities in the store: nothing to decide (the requests of "
            f"({env.principal_type}, {env.action}, {env.resource_type}) range over the entity store's "
            f"{env.principal_type} and {env.resource_type} entities; give an entity store that has both, or narrow "
            "the environment)"
        )
    if len(pairs) > MAX_PAIRS:
        raise OptionError(
            f"the environment has {len(pairs):,} (principal, resource) pairs in the entity store; the analyses "
            f"encode at most {MAX_PAIRS:,} (narrow the environment or the store)"
        )
    empty_ctx = CRecord({})
    sel = z3.Int("request", ctx.zc)
    disjuncts = []
    try:
        for k, (p, r) in enumerate(pairs):
            enc = Encoder(Request(p, env.action, r, empty_ctx), store, ctx)
            sets = [_set_formulas(ps.policies, enc) for ps in policy_sets]
            v = _violation(prop, sets)
            if v is not False:
                disjuncts.append(and_(sel == k, v))
    except RecursionError:
        raise CDAError("a policy condition is nested too deeply to encode") from None
    violation = z3.simplify(as_z3(or_(*disjuncts), ctx.zc))
    if backend == "z3":
        status, model = _solve_z3(z3.And(*ctx.constraints, violation), timeout, ctx.zc)
    else:
        status, model = _solve_clingo(violation, ctx, timeout)
    env_json = {"principal_type": env.principal_type, "action": str(env.action), "resource_type": env.resource_type}
    result = AnalysisResult(
        property=prop,
        holds=status == "unsat",
        environment=env_json,
        backend=backend,
        requests_checked=f"{len(pairs)} (principal, resource) pairs from the entity store × every context",
        bound=(f"principals: the {len({p for p, _ in pairs})} entities of type {env.principal_type} in the store; "
               f"resources: the {len({r for _, r in pairs})} entities of type {env.resource_type}; the entity store as given"),
        assumptions=[
            "requests conform to the schema (the context has the action's context type)",
            "principals, resources and entity-valued context attributes are entities of the store (its "
            "attributes and hierarchy are fixed)",
            "longs and decimals range over Cedar's 64-bit values",
        ],
        policies=[len(ps.policies) for ps in policy_sets],
    )  # fmt: skip
    if status == "sat":
        assert model is not None
        k = model["request"]
        p, r = pairs[k]
        context = _context_from_model(ctx, model)
        req = Request(p, env.action, r, context)
        answers = [decide(ps.policies, req, store) for ps in policy_sets]
        if not _violated_concretely(prop, answers):
            raise EvaluatorDisagreement(
                f"{backend} found a counterexample to {prop} that the concrete evaluator does not confirm: {req}"
            )
        result.counterexample = {
            "principal": {"type": p.type, "id": p.id},
            "action": {"type": env.action.type, "id": env.action.id},
            "resource": {"type": r.type, "id": r.id},
            "context": to_json(context),
        }
        result.answers = {("A", "B")[i] if len(answers) == 2 else "S": a.to_json() for i, a in enumerate(answers)}
        if prop == "no-new-access":
            result.answers = {"OLD": answers[0].to_json(), "NEW": answers[1].to_json()}
    result.seconds = round(time.perf_counter() - started, 6)
    return result


class _Check:
    """A z3 check a cancel may interrupt: only while it runs (an interrupt that lands as z3 hands
    the model over fails that call). Held weakly by the token, so it goes with the check."""

    def __init__(self, zc: Any) -> None:
        self.zc = zc
        self.running = False

    def interrupt(self) -> None:
        if self.running:
            self.zc.interrupt()


def _solve_z3(formula: Any, timeout: float, zc: Any) -> tuple[str, dict[str, Any] | None]:
    token = current_token()
    check = _Check(zc)
    if token is not None:  # a cancel (Ctrl-C) stops the check in flight
        token.on_cancel(check.interrupt)
    s = z3.Solver(ctx=zc)
    s.set("timeout", Z3_MAX_TIMEOUT_MS if timeout * 1000 >= Z3_MAX_TIMEOUT_MS else max(1, int(timeout * 1000)))
    s.add(formula)
    check.running = True
    try:
        r = s.check()
    finally:
        check.running = False
    if r == z3.unknown:
        raise CDAError(f"z3 returned unknown ({s.reason_unknown()}); no verdict")
    if r == z3.unsat:
        return "unsat", None
    m = s.model()
    out: dict[str, Any] = {}
    for d in m.decls():
        v = m[d]
        if z3.is_int_value(v):
            out[d.name()] = v.as_long()
        elif z3.is_true(v) or z3.is_false(v):
            out[d.name()] = z3.is_true(v)
        elif z3.is_string_value(v):
            out[d.name()] = v.as_string()
    out.setdefault("request", 0)
    return "sat", out


def _solve_clingo(formula: Any, ctx: SymContext, timeout: float) -> tuple[str, dict[str, Any] | None]:
    """The propositional formula through CDA's IR to the clingo backend.

    It reaches the engine only through :mod:`cda.ir` and :mod:`cda.engine` (docs/architecture.md),
    but it converts z3 terms back into IR nodes: Cedar is compiled to z3 first
    (:mod:`cda.policy.symbolic`). Lowering Cedar to :mod:`cda.ir` directly, so that both backends
    and the independent re-check decide it, is issue 28's Cedar part, done separately.
    """
    from cda.contracts.deadline import Deadline
    from cda.engine import make_backend, selector
    from cda.ir import AtomInfo, Clause, GroundProblem, NodeFactory
    from cda.policy.symbolic import SymEntity

    f = NodeFactory()
    gp = GroundProblem(factory=f)
    memo: dict[int, Any] = {}
    # a context entity is an integer over its candidates: one atom per value, exactly one true
    domains = {path: len(sym.candidates) for path, sym, _ in ctx.variables if isinstance(sym, SymEntity)}

    def conv(t: Any) -> Any:
        key = t.get_id()
        if key in memo:
            return memo[key]
        if z3.is_true(t):
            n = f.const(True)
        elif z3.is_false(t):
            n = f.const(False)
        elif z3.is_not(t):
            n = f.not_(conv(t.arg(0)))
        elif z3.is_and(t):
            n = f.and_(conv(c) for c in t.children())
        elif z3.is_or(t):
            n = f.or_(conv(c) for c in t.children())
        elif z3.is_implies(t):
            n = f.implies(conv(t.arg(0)), conv(t.arg(1)))
        elif z3.is_eq(t) and z3.is_bool(t.arg(0)):
            n = f.iff(conv(t.arg(0)), conv(t.arg(1)))
        elif (eq := _int_eq(t)) is not None and eq[0] == "request":
            n = f.atom(_atom(f"request={eq[1]}"))
        elif eq is not None and eq[0] in domains:
            n = f.atom(_value_atom(*eq))
        elif z3.is_app_of(t, z3.Z3_OP_ITE) and z3.is_bool(t):
            c, a, b = (conv(x) for x in t.children())
            n = f.or_([f.and_([c, a]), f.and_([f.not_(c), b])])
        elif z3.is_app_of(t, z3.Z3_OP_XOR):
            n = f.xor(conv(c) for c in t.children())
        elif z3.is_distinct(t) and t.num_args() == 2 and z3.is_bool(t.arg(0)):
            n = f.not_(f.iff(conv(t.arg(0)), conv(t.arg(1))))
        elif z3.is_const(t) and z3.is_bool(t):
            n = f.atom(_atom(t.decl().name()))
        else:
            raise BackendUnsupported(
                f"clingo decides Cedar policies whose context is read only through Booleans; "
                f"this one compares {_sort_of(t)} values ({t.sexpr()[:60]}); use z3"
            )
        memo[key] = n
        return n

    # `request` is an index: the formula says request = k for one pair; as atoms, exactly one holds
    node = conv(formula)
    req_atoms = sorted(name for name in _atoms_of(node) if name.startswith("request_"))
    one = f.card("exactly", 1, [f.atom(a) for a in req_atoms]) if req_atoms else f.const(True)
    node = f.and_([node, one, *[f.card("exactly", 1, [f.atom(_value_atom(name, k)) for k in range(size)])
                                for name, size in domains.items()]])  # fmt: skip
    for name in sorted(_atoms_of(node)):
        gp.atoms[name] = AtomInfo(name, "var", name, ())
    gp.clauses.append(Clause("violation", "hard", node, 0))
    backend = make_backend("clingo", gp, seed=0, deadline=Deadline(None if math.isinf(timeout) else timeout), weights={})
    out = backend.check([(selector("violation"), True)])
    if out.status == "unknown":
        raise CDAError("clingo returned unknown (time ran out); no verdict")
    if out.status == "unsat":
        return "unsat", None
    assert out.model is not None
    model: dict[str, Any] = {"request": 0}
    for path, sym, pres in ctx.variables:
        if isinstance(sym, SymEntity):
            model[path] = next((k for k in range(domains[path]) if out.model.get(_value_atom(path, k))), 0)
        elif sym.kind == "Bool":
            model[path] = bool(out.model.get(_atom(path), False))
        if pres is not None:
            model[pres.decl().name()] = bool(out.model.get(_atom(pres.decl().name()), False))
    for a in req_atoms:
        if out.model.get(a):
            model["request"] = int(a.split("_", 1)[1])
    return "sat", model


def _int_eq(t: Any) -> tuple[str, int] | None:
    """``(name, k)`` when ``t`` is ``name == k`` (either way round) for an integer variable."""
    if not z3.is_eq(t):
        return None
    a, b = t.arg(0), t.arg(1)
    if z3.is_int_value(a):
        a, b = b, a
    if z3.is_const(a) and not z3.is_int_value(a) and z3.is_int(a) and z3.is_int_value(b):
        return a.decl().name(), b.as_long()
    return None


def _value_atom(name: str, k: int) -> str:
    return _atom(name) + f"_is_{k}"


def _sort_of(t: Any) -> str:
    sorts = {str(c.sort()) for c in t.children()} or {str(t.sort())}
    return "/".join(sorted(sorts))


def _atom(name: str) -> str:
    """A z3 variable name as an IR atom name (letters, digits and underscores)."""
    if name.startswith("request="):
        return "request_" + name.split("=", 1)[1]
    return "c_" + "".join(c if c.isalnum() else f"_{ord(c):x}_" for c in name)


def _atoms_of(node: Any) -> set[str]:
    from cda.ir import Atom, walk

    return {n.name for n in walk([node]) if isinstance(n, Atom)}


def _context_from_model(ctx: SymContext, model: dict[str, Any]) -> CRecord:
    """The context a model describes (an optional attribute is left out when absent)."""
    from cda.policy.symbolic import Opaque, Sym, SymEntity, SymIP, SymRecord

    def build(v: Any, path: str) -> Value:
        if isinstance(v, SymRecord):
            out: dict[str, Value] = {}
            for name, sub in v.attrs.items():
                pres = v.present.get(name)
                if pres is not None and not model.get(pres.decl().name(), False):
                    continue
                out[name] = build(sub, f"{path}.{name}")
            return CRecord(out)
        if isinstance(v, Opaque):
            return v.default  # type: ignore[no-any-return]
        if isinstance(v, SymEntity):
            return v.candidates[int(model.get(v.term.decl().name(), 0))]
        if isinstance(v, SymIP):
            return _ip_value(bool(model.get(v.v6.decl().name(), False)), int(model.get(v.addr.decl().name(), 0)),
                             int(model.get(v.prefix.decl().name(), 0)))  # fmt: skip
        assert isinstance(v, Sym)
        name = v.term.decl().name()
        if v.kind == "Bool":
            return bool(model.get(name, False))
        if v.kind == "Long":
            return int(model.get(name, 0))
        if v.kind == "String":
            return str(model.get(name, ""))
        from cda.policy.values import Decimal

        return Decimal(int(model.get(name, 0)))

    rec = build(ctx.value, "context")
    assert isinstance(rec, CRecord)
    return rec


def _ip_value(v6: bool, addr: int, prefix: int) -> Value:
    """The ``ipaddr`` a model describes, written so that Cedar reads it back (IPv6 in full hex
    form: Cedar refuses the dotted IPv4-in-IPv6 form Python would print for some addresses)."""
    import ipaddress

    from cda.policy.entities import parse_ip

    text = ipaddress.IPv6Address(addr).exploded if v6 else str(ipaddress.IPv4Address(addr))
    return parse_ip(f"{text}/{prefix}")


def _one(prop: str) -> Any:
    def run(ps: PolicySet, env: Environment, *, backend: Backend = "z3", timeout: float = 60.0) -> AnalysisResult:
        return analyze(prop, [ps], env, backend=backend, timeout=timeout)

    run.__name__ = prop.replace("-", "_")
    run.__doc__ = f"``{prop}``: see :func:`analyze`."
    return run


def _two(prop: str) -> Any:
    def run(a: PolicySet, b: PolicySet, env: Environment, *, backend: Backend = "z3", timeout: float = 60.0) -> AnalysisResult:
        return analyze(prop, [a, b], env, backend=backend, timeout=timeout)

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
