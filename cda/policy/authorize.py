"""Authorization as Cedar does it: forbid overrides permit, default deny, erroring policies skipped.

:func:`authorize` is the public door (the batch runner and ``cda policy authorize`` call it);
:func:`load_policy_set` reads the three files once so many requests can be answered against them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from cda.errors import CDAError, DSLError
from cda.files import parse_json, read_text
from cda.policy.entities import Entities, Request, RequestInvalid, read_entities, read_request
from cda.policy.evaluate import EvalError, evaluate
from cda.policy.parse import parse_policies
from cda.policy.schema import Schema, read_schema_text
from cda.policy.syntax import Policy, Scope

__all__ = ["Answer", "PolicySet", "authorize", "decide", "load_policy_set", "policy_applies", "scope_holds", "scope_matches"]


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
    """Policies with the schema and entity store they are evaluated against."""

    policies: list[Policy]
    schema: Schema | None
    entities: Entities


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


def decide(policies: list[Policy], req: Request, store: Entities) -> Answer:
    """The answer for one request. Raises :class:`~cda.errors.CDAError` naming the policy when a
    condition is nested too deeply to evaluate (skipping it, as an evaluation error, could turn a
    forbid's deny into an allow)."""
    permits: list[str] = []
    forbids: list[str] = []
    errors: list[str] = []
    messages: list[str] = []
    for p in policies:
        try:
            ok = policy_applies(p, req, store)
        except EvalError as e:
            errors.append(p.id)
            messages.append(f"{p.id} ({p.filename}:{e.pos[0]}:{e.pos[1]}): {e}")
            continue
        except RecursionError:  # not an evaluation error: dropping the policy (a forbid) would change the answer
            raise CDAError(
                f"{p.filename}:{p.pos[0]}:{p.pos[1]}: policy {p.id}: a condition is nested too deeply to evaluate; "
                "no decision"
            ) from None
        if ok:
            (permits if p.effect == "permit" else forbids).append(p.id)
    if forbids:
        return Answer("deny", forbids, errors, messages)
    if permits:
        return Answer("allow", permits, errors, messages)
    return Answer("deny", [], errors, messages)


def load_policy_set(policies: str | Path, schema: str | Path | None, entities: str | Path | None) -> PolicySet:
    """Read a policy file, an optional schema (either form) and an optional entities file."""
    ptext = read_text(Path(policies))
    pols = parse_policies(ptext, str(policies))
    sch = read_schema_text(read_text(Path(schema)), str(schema)) if schema is not None else None
    if entities is not None:
        data = parse_json(read_text(Path(entities)), str(entities), DSLError)
        store = read_entities(data, sch, str(entities))
    else:
        store = read_entities([], sch)
    return PolicySet(pols, sch, store)


def authorize(
    policies: str | Path | PolicySet,
    request: dict[str, Any] | str | Path,
    *,
    schema: str | Path | None = None,
    entities: str | Path | None = None,
) -> Answer:
    """Allow or deny one request (a dict in Cedar's request JSON form, or a JSON file) against a
    policy file (with ``schema`` and ``entities`` files) or a loaded :class:`PolicySet`.

    Raises a :class:`~cda.errors.CDAError` (``DSLSyntaxError`` with file/line/column,
    ``UnsupportedConstruct`` naming the construct) when the input cannot be read."""
    ps = policies if isinstance(policies, PolicySet) else load_policy_set(policies, schema, entities)
    if isinstance(request, dict):
        return decide(ps.policies, read_request(request, ps.schema), ps.entities)
    data = parse_json(read_text(Path(request)), str(request), DSLError)
    if not isinstance(data, dict):
        raise CDAError(f"{request}: a request is a JSON object")
    try:
        req = read_request(data, ps.schema)
    except DSLError as exc:  # a mistake in the request file names the file, then the field
        raise exc.with_filename(str(request)) if exc.filename is None else exc from None
    except RequestInvalid as exc:
        raise RequestInvalid(f"{request}: {exc}") from None
    return decide(ps.policies, req, ps.entities)
