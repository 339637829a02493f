"""Authorization as Cedar does it: forbid overrides permit, default deny, erroring policies skipped.

:func:`authorize` is the public door (the batch runner and ``cda policy authorize`` call it);
:func:`load_policy_set` reads the three files once so many requests can be answered against them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from operator import is_
from pathlib import Path
from typing import Any, Literal

from cda.errors import CDAError, DSLError
from cda.files import TEXT_MAX_BYTES, parse_json, read_text
from cda.policy.entities import Entities, Request, RequestInvalid, read_entities, read_request
from cda.policy.evaluate import Compiled, Compiler, EvalError, Frame, evaluate
from cda.policy.parse import parse_policies
from cda.policy.schema import Schema, read_schema_text
from cda.policy.syntax import Policy, Pos, Scope
from cda.policy.templates import Link
from cda.policy.values import EntityUID

__all__ = ["Answer", "Authorizer", "PolicySet", "authorize", "authorizer", "decide", "load_policy_set", "policy_applies", "scope_holds", "scope_matches"]


@dataclass(frozen=True)
class Answer:
    """Cedar's answer: the decision, the determining policies (``reason``) and the policies that
    raised an evaluation error (``errors``, with the messages in ``messages``)."""

    decision: Literal["allow", "deny"]
    reason: list[str]
    errors: list[str]
    messages: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"decision": self.decision, "reason": self.reason, "errors": self.errors, "messages": self.messages}


@dataclass
class PolicySet:
    """Policies with the schema and entity store they are evaluated against. ``policies`` are
    the static ones and those the ``links`` made of ``templates`` (:mod:`cda.policy.templates`);
    a template itself authorizes nothing."""

    policies: list[Policy]
    schema: Schema | None
    entities: Entities
    templates: list[Policy] = field(default_factory=list)
    links: list[Link] = field(default_factory=list)
    _compiled: tuple[Sequence[Policy], tuple[Policy, ...], Authorizer] | None = field(
        default=None, init=False, repr=False, compare=False
    )

    def decide(self, req: Request, store: Entities | None = None) -> Answer:
        """Cedar's answer to ``req`` over ``store`` (this set's entities when None), the policies
        compiled on the first call and again only when :attr:`policies` has changed."""
        kept = self._compiled
        if kept is None or not _still(kept, self.policies):
            auth = Authorizer(self.policies)
            kept = self._compiled = (self.policies, auth.policies, auth)
        return kept[2].decide(req, self.entities if store is None else store)


def scope_holds(s: Scope, v: Any, store: Entities) -> bool:
    if s.kind == "any":
        return True
    if s.kind == "eq":
        return bool(v == s.entity)
    if s.kind == "in":
        return store.is_in(v, s.entity)  # type: ignore[arg-type]
    if v.type != s.type:
        return False
    return s.kind == "is" or store.is_in(v, s.entity)  # type: ignore[arg-type]


def scope_matches(p: Policy, req: Request, store: Entities) -> bool:
    """Whether ``req``'s principal, action and resource are in ``p``'s scope (no conditions yet):
    the same for the concrete evaluator and the symbolic encoder, whose requests are concrete."""
    a = p.action
    if a.kind == "eq" and req.action != a.entities[0]:
        return False
    if a.kind == "in" and not any(store.is_in(req.action, x) for x in a.entities):
        return False
    return scope_holds(p.principal, req.principal, store) and scope_holds(p.resource, req.resource, store)


def policy_applies(p: Policy, req: Request, store: Entities) -> bool:
    """Whether ``p`` is satisfied by ``req``; raises :class:`EvalError` as Cedar would."""
    if not scope_matches(p, req, store):
        return False
    for kind, cond in p.conditions:
        v = evaluate(cond, req, store)
        if not isinstance(v, bool):
            raise EvalError(f"type error: a {kind} condition must be a Bool", cond.pos)
        if v != (kind == "when"):
            return False
    return True


def decide(policies: Sequence[Policy], req: Request, store: Entities) -> Answer:
    """The answer for one request. Raises :class:`~cda.errors.CDAError` naming the policy when a
    condition is nested too deeply to evaluate (skipping it, as an evaluation error, could turn a
    forbid's deny into an allow). The policies are compiled once (:class:`Authorizer`) and kept
    while the same list, holding the same policies, is passed again."""
    return authorizer(policies).decide(req, store)


#: the authorizers of the policy lists decided last: id -> (the list, its policies then, authorizer)
_AUTHORIZERS: dict[int, tuple[Sequence[Policy], tuple[Policy, ...], Authorizer]] = {}
_AUTHORIZERS_KEPT = 16


def authorizer(policies: Sequence[Policy]) -> Authorizer:
    """The :class:`Authorizer` of ``policies``, compiled on first use and reused while the list
    object is the same and holds the same policy objects (a list changed in place is compiled
    again; the list is held, so its id cannot be reused meanwhile)."""
    kept = _AUTHORIZERS.get(id(policies))
    if kept is not None and _still(kept, policies):
        return kept[2]
    auth = Authorizer(policies)
    if len(_AUTHORIZERS) >= _AUTHORIZERS_KEPT:
        del _AUTHORIZERS[next(iter(_AUTHORIZERS))]
    _AUTHORIZERS[id(policies)] = (policies, auth.policies, auth)
    return auth


def _still(kept: tuple[Sequence[Policy], tuple[Policy, ...], Authorizer], policies: Sequence[Policy]) -> bool:
    """Whether ``kept`` was compiled from this very list, holding the same policy objects now."""
    return kept[0] is policies and len(kept[1]) == len(policies) and all(map(is_, kept[1], policies))


#: up to this many policies, each one's scope is checked directly: cheaper than the index's lookups
_UNINDEXED = 4


def _too_deep(frame: Frame) -> bool:
    raise RecursionError


class _ScopeIndex:
    """Which policies a request's principal (or resource, or action) may match, by the scope
    constraint alone: each policy is filed under its ``==`` entity, its ``in`` entity, its ``is``
    type or its ``is … in`` pair, and a request's entity collects the policies filed under itself,
    its ancestors and its type as one bitmask (bit i: policy i)."""

    __slots__ = ("any", "eq", "in_", "is_", "is_in")

    def __init__(self) -> None:
        self.any = 0
        self.eq: dict[EntityUID, int] = {}
        self.in_: dict[EntityUID, int] = {}
        self.is_: dict[str, int] = {}
        self.is_in: dict[tuple[str, EntityUID], int] = {}

    def file(self, bit: int, s: Scope) -> None:
        if s.kind == "any":
            self.any |= bit
        elif s.kind == "eq":
            assert s.entity is not None
            self.eq[s.entity] = self.eq.get(s.entity, 0) | bit
        elif s.kind == "in":
            assert s.entity is not None
            self.in_[s.entity] = self.in_.get(s.entity, 0) | bit
        elif s.kind == "is":
            assert s.type is not None
            self.is_[s.type] = self.is_.get(s.type, 0) | bit
        else:
            assert s.type is not None and s.entity is not None
            key = (s.type, s.entity)
            self.is_in[key] = self.is_in.get(key, 0) | bit

    def mask(self, v: EntityUID, store: Entities) -> int:
        m = self.any | self.eq.get(v, 0) | self.is_.get(v.type, 0)
        in_, is_in, ty = self.in_, self.is_in, v.type
        for x in (v, *store.ancestors.get(v, ())):
            m |= in_.get(x, 0) | is_in.get((ty, x), 0)
        return m


class Authorizer:
    """A policy list compiled once for many requests (docs/policy.md, "Authorization at scale").

    The policies' scopes are indexed (:class:`_ScopeIndex`), so a request evaluates the
    conditions of the policies whose scope it is in and no others; the conditions are compiled
    once, into closures sharing a memo for what several policies compute alike
    (:class:`~cda.policy.evaluate.Compiler`); an entity's mask is computed once per entity store.
    Answers are Cedar's, in policy order, exactly as evaluating every policy in turn gives them.
    """

    _CACHE_LIMIT = 100_000

    def __init__(self, policies: Sequence[Policy]) -> None:
        self.policies = tuple(policies)
        compiler = Compiler()
        deep: set[int] = set()
        for i, p in enumerate(self.policies):
            try:
                for _, cond in p.conditions:
                    compiler.count(cond)
            except RecursionError:
                deep.add(i)
        self.conditions = [self._compiled(compiler, p, i in deep) for i, p in enumerate(self.policies)]
        self.slots = len(compiler.slots)
        self.principal, self.resource, self.action = _ScopeIndex(), _ScopeIndex(), _ScopeIndex()
        for i, p in enumerate(self.policies):
            bit = 1 << i
            self.principal.file(bit, p.principal)
            self.resource.file(bit, p.resource)
            if p.action.kind == "any":
                self.action.any |= bit
            elif p.action.kind == "eq":
                self.action.file(bit, Scope("eq", p.action.entities[0]))
            else:
                for a in p.action.entities:
                    self.action.file(bit, Scope("in", a))
        self._ancestors: object = None
        self._masks: dict[tuple[int, EntityUID], int] = {}
        self._members: dict[int, tuple[int, ...]] = {}

    @staticmethod
    def _compiled(compiler: Compiler, p: Policy, deep: bool) -> tuple[tuple[bool, Compiled, str, Pos], ...]:
        """``p``'s conditions compiled; one nested too deeply to compile raises ``RecursionError``
        when the policy is evaluated, as evaluating it would (and :meth:`decide` refuses)."""
        if not deep:
            try:
                return tuple((kind == "when", compiler(cond), kind, cond.pos) for kind, cond in p.conditions)
            except RecursionError:
                pass
        return ((True, _too_deep, "when", p.pos),)

    def candidates(self, req: Request, store: Entities) -> tuple[int, ...]:
        """The policies (indices, in order) whose scope ``req`` is in."""
        if store.ancestors is not self._ancestors or len(self._masks) > self._CACHE_LIMIT:
            self._ancestors, self._masks = store.ancestors, {}
        if len(self.policies) <= _UNINDEXED:
            return tuple(i for i, p in enumerate(self.policies) if scope_matches(p, req, store))
        masks = self._masks
        m = -1
        for which, index, v in ((0, self.action, req.action), (1, self.principal, req.principal),
                                (2, self.resource, req.resource)):  # fmt: skip
            k = masks.get((which, v))
            if k is None:
                k = masks[(which, v)] = index.mask(v, store)
            m &= k
        members = self._members.get(m)
        if members is None:
            if len(self._members) > self._CACHE_LIMIT:
                self._members = {}
            bits = bin(m)[:1:-1]
            members = self._members[m] = tuple(i for i, c in enumerate(bits) if c == "1")
        return members

    def decide(self, req: Request, store: Entities) -> Answer:
        """Cedar's answer to ``req`` over ``store`` (see :func:`decide`)."""
        permits: list[str] = []
        forbids: list[str] = []
        errors: list[str] = []
        messages: list[str] = []
        frame = Frame(req, store, self.slots)
        for i in self.candidates(req, store):
            p = self.policies[i]
            try:
                for want, cond, kind, pos in self.conditions[i]:
                    v = cond(frame)
                    if v is not True and v is not False:
                        raise EvalError(f"type error: a {kind} condition must be a Bool", pos)
                    if v is not want:
                        break
                else:
                    (permits if p.effect == "permit" else forbids).append(p.id)
            except EvalError as e:
                errors.append(p.id)
                messages.append(f"{p.id} ({p.filename}:{e.pos[0]}:{e.pos[1]}): {e}")
            except RecursionError:  # not an evaluation error: dropping the policy (a forbid) would change the answer
                raise CDAError(
                    f"{p.filename}:{p.pos[0]}:{p.pos[1]}: policy {p.id}: a condition is nested too deeply to evaluate; "
                    "no decision"
                ) from None
        if forbids:
            return Answer("deny", forbids, errors, messages)
        if permits:
            return Answer("allow", permits, errors, messages)
        return Answer("deny", [], errors, messages)


def load_policy_set(policies: str | Path, schema: str | Path | None, entities: str | Path | None,
                    links: str | Path | None = None) -> PolicySet:  # fmt: skip
    """Read a policy file, an optional schema (either form), an optional entities file and an
    optional links file (template links in the Cedar CLI's JSON)."""
    texts = {name: (read_text(Path(path), limit=TEXT_MAX_BYTES if name == "policies" else None), str(path))
             for name, path in (("policies", policies), ("schema", schema), ("entities", entities), ("links", links))
             if path is not None}  # policy text is parsed whole: the text cap; the others are data
    return policy_set_of(texts["policies"], texts.get("schema"), texts.get("entities"), texts.get("links"))


Named = tuple[str, str]
"""A file's text and its name (for errors)."""


def policy_set_of(policies: Named, schema: Named | None = None, entities: Named | None = None,
                  links: Named | None = None) -> PolicySet:  # fmt: skip
    """The policy set of texts already read (each with its file's name): a caller that keeps a
    digest of the files parses the very text it hashed. Templates are kept apart; each link
    of ``links`` adds the policy it makes."""
    from cda.policy.templates import link, read_links

    parsed = parse_policies(*policies, templates=True)
    pols = [p for p in parsed if not p.slots]
    templates = [p for p in parsed if p.slots]
    sch = read_schema_text(*schema) if schema is not None else None
    if entities is not None:
        try:
            store = read_entities(parse_json(entities[0], entities[1], DSLError), sch, entities[1])
        except DSLError as exc:  # named by the file the user gave (docs/policy.md), never <input>
            raise exc.in_file(entities[1]) from None
    else:
        store = read_entities([], sch)
    got: list[Link] = []
    if links is not None:
        got = read_links(parse_json(links[0], links[1], DSLError), pols, templates, sch, links[1])
        by_id = {t.id: t for t in templates}
        pols += [link(by_id[x.template_id], x.link_id, dict(x.values)) for x in got]
    return PolicySet(pols, sch, store, templates, got)


def authorize(
    policies: str | Path | PolicySet,
    request: dict[str, Any] | str | Path,
    *,
    schema: str | Path | None = None,
    entities: str | Path | None = None,
    links: str | Path | None = None,
) -> Answer:
    """Allow or deny one request (a dict in Cedar's request JSON form, or a JSON file) against a
    policy file (with ``schema``, ``entities`` and template ``links`` files) or a loaded
    :class:`PolicySet`.

    Raises a :class:`~cda.errors.CDAError` (``DSLSyntaxError`` with file/line/column,
    ``UnsupportedConstruct`` naming the construct) when the input cannot be read."""
    ps = policies if isinstance(policies, PolicySet) else load_policy_set(policies, schema, entities, links)
    if isinstance(request, dict):
        return ps.decide(read_request(request, ps.schema))
    data = parse_json(read_text(Path(request)), str(request), DSLError)
    if not isinstance(data, dict):
        raise CDAError(f"{request}: a request is a JSON object")
    try:
        req = read_request(data, ps.schema)
    except DSLError as exc:  # a mistake in the request file names the file, then the field
        raise exc.with_filename(str(request)) if exc.filename is None else exc from None
    except RequestInvalid as exc:
        raise RequestInvalid(f"{request}: {exc}") from None
    return ps.decide(req)
