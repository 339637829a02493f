"""The compiled authorizer (scope index, conditions compiled once per policy set, shared
subexpressions computed once per request) against Cedar's own evaluator on random policy sets.

Each set mixes every scope form (``==``, ``in``, ``is``, ``is … in``, action lists), permits and
forbids, conditions that share subexpressions across policies (what the memo serves) and
conditions that raise evaluation errors (a missing attribute, a type error, an overflow), over an
entity store with a group hierarchy. Every request's decision, determining policies and errors
must be cedarpy's; and the same answers must come from evaluating each policy on its own (no
index, no memo), so a wrong index or a stale memo cannot hide behind a lucky decision.
"""

from __future__ import annotations

import json
import random
from typing import Any

import cedarpy
import pytest

from cda.policy.authorization import Answer, Authorizer, authorizer, decide, policy_applies
from cda.policy.entities import Entities, read_entities, read_request
from cda.policy.parse import parse_policies

USERS = ["alice", "bob", "carol", "dave", "eve"]
GROUPS = ["admins", "staff", "eng", "sales"]
PHOTOS = ["p1", "p2", "p3", "p4"]
ALBUMS = ["trip", "work"]
ACTIONS = ["view", "edit", "delete", "share"]


def _uid(t: str, i: str) -> dict[str, str]:
    return {"type": t, "id": i}


def _entities(rng: random.Random) -> list[dict[str, Any]]:
    """Users in groups, groups in groups (a chain), photos in albums, actions in action groups;
    some attributes left out (so reading them is an error)."""
    out: list[dict[str, Any]] = []
    for u in USERS:
        attrs: dict[str, Any] = {"level": rng.randint(0, 9), "dept": rng.choice(["eng", "sales", "ops"])}
        if rng.random() < 0.7:
            attrs["manager"] = {"__entity": _uid("User", rng.choice(USERS))}
        out.append({"uid": _uid("User", u), "attrs": attrs,
                    "parents": [_uid("Group", g) for g in rng.sample(GROUPS, rng.randint(0, 2))]})  # fmt: skip
    for i, g in enumerate(GROUPS):
        out.append({"uid": _uid("Group", g), "attrs": {}, "parents": [_uid("Group", GROUPS[i + 1])] if i < 2 else []})
    for p in PHOTOS:
        attrs = {"private": rng.random() < 0.5, "owner": {"__entity": _uid("User", rng.choice(USERS))}}
        if rng.random() < 0.6:
            attrs["size"] = rng.randint(0, 100)
        out.append({"uid": _uid("Photo", p), "attrs": attrs, "parents": [_uid("Album", rng.choice(ALBUMS))]})
    out += [{"uid": _uid("Album", a), "attrs": {}, "parents": []} for a in ALBUMS]
    for a in ACTIONS:
        out.append({"uid": _uid("Action", a), "attrs": {},
                    "parents": [_uid("Action", "write")] if a in ("edit", "delete") else []})  # fmt: skip
    out.append({"uid": _uid("Action", "write"), "attrs": {}, "parents": []})
    return out


def _scope(rng: random.Random, var: str, typ: str, ids: list[str], group: tuple[str, list[str]] | None) -> str:
    kind = rng.choice(["any", "any", "eq", "in", "is", "is_in"] if group else ["any", "any", "eq", "is"])
    if kind == "any":
        return var
    if kind == "eq":
        return f'{var} == {typ}::"{rng.choice(ids)}"'
    if kind == "is":
        return f"{var} is {rng.choice([typ, typ, 'Group'])}"
    assert group is not None
    gtyp, gids = group
    target = f'{gtyp}::"{rng.choice(gids)}"' if rng.random() < 0.8 else f'{typ}::"{rng.choice(ids)}"'
    return f"{var} in {target}" if kind == "in" else f"{var} is {typ} in {target}"


#: condition atoms; several policies draw the same ones, so the memo is exercised. Some raise:
#: ``manager`` and ``size`` are missing on some entities, ``context.n + …`` may overflow,
#: ``principal.dept > 1`` is a type error.
ATOMS = [
    "context.flag",
    "resource.private",
    "!resource.private",
    "principal.level > {n}",
    "principal.level + context.n < {n}",
    'principal.dept == "{dept}"',
    'principal.dept like "*{dept}*"',
    'principal in Group::"{group}"',
    "resource.owner == principal",
    "principal.manager == resource.owner",
    "principal has manager && principal.manager.level >= {n}",
    "resource.size < {n}0",
    "context.n * 4611686018427387904 > 0",
    "principal.dept > 1",
    'resource in Album::"{album}"',
    "[1, 2, {n}].contains(principal.level)",
    "if context.flag then principal.level == {n} else resource.private",
    'action in Action::"write"',
    'context.tags.contains("{dept}")',
]


def _condition(rng: random.Random) -> str:
    atoms = []
    for _ in range(rng.randint(1, 3)):
        a = rng.choice(ATOMS).format(n=rng.randint(0, 5), dept=rng.choice(["eng", "sales"]), group=rng.choice(GROUPS),
                                     album=rng.choice(ALBUMS))  # fmt: skip
        atoms.append(f"!({a})" if rng.random() < 0.2 else f"({a})")
    return (" || " if rng.random() < 0.25 else " && ").join(atoms)


def _policy(rng: random.Random) -> str:
    eff = "forbid" if rng.random() < 0.2 else "permit"
    principal = _scope(rng, "principal", "User", USERS, ("Group", GROUPS))
    resource = _scope(rng, "resource", "Photo", PHOTOS, ("Album", ALBUMS))
    r = rng.random()
    if r < 0.25:
        action = "action"
    elif r < 0.6:
        action = f'action == Action::"{rng.choice(ACTIONS)}"'
    else:
        names = rng.sample(ACTIONS + ["write"], rng.randint(1, 3))
        action = "action in [" + ", ".join(f'Action::"{a}"' for a in names) + "]"
    conds = "".join(f" {rng.choice(['when', 'when', 'unless'])} {{ {_condition(rng)} }}"
                    for _ in range(rng.choice([0, 1, 1, 2])))  # fmt: skip
    return f"{eff}({principal}, {action}, {resource}){conds};"


def _request(rng: random.Random) -> dict[str, Any]:
    principal = _uid("User", rng.choice(USERS + ["mallory"]))  # mallory is in no store: errors, no ancestors
    resource = _uid("Photo", rng.choice(PHOTOS)) if rng.random() < 0.9 else _uid("Album", rng.choice(ALBUMS))
    n = rng.choice([0, 1, 3, 2**62])
    ctx = {"flag": rng.random() < 0.5, "n": n, "tags": rng.sample(["eng", "sales", "ops"], rng.randint(0, 2))}
    return {"principal": principal, "action": _uid("Action", rng.choice(ACTIONS)), "resource": resource, "context": ctx}


def _theirs(a: Any) -> tuple[str, list[str], bool]:
    return a.decision.value.lower(), sorted(a.diagnostics.reasons), bool(a.diagnostics.errors)


def _ours(a: Answer) -> tuple[str, list[str], bool]:
    return a.decision, sorted(a.reason), bool(a.errors)


def _one_by_one(policies: list[Any], req: Any, store: Entities) -> Answer:
    """Every policy evaluated on its own, in order: no index, no memo shared between policies."""
    permits, forbids, errors = [], [], []
    from cda.policy.evaluate import EvalError

    for p in policies:
        try:
            if policy_applies(p, req, store):
                (permits if p.effect == "permit" else forbids).append(p.id)
        except EvalError:
            errors.append(p.id)
    if forbids:
        return Answer("deny", forbids, errors)
    return Answer("allow" if permits else "deny", permits, errors)


@pytest.mark.parametrize("seed", range(12))
def test_random_policy_sets_are_decided_as_cedar_decides_them(seed: int) -> None:
    rng = random.Random(seed)
    ents = _entities(rng)
    size = rng.choice([5, 20, 60, 150])
    text = "\n".join(_policy(rng) for _ in range(size))
    policies = parse_policies(text, f"random-{seed}.cedar")
    store = read_entities(ents, None)
    requests = [_request(rng) for _ in range(40)]
    theirs = cedarpy.is_authorized_batch(requests, cedarpy.PolicySet.from_str(text),
                                         cedarpy.Entities.from_json_str(json.dumps(ents)))  # fmt: skip
    auth = Authorizer(policies)
    outcomes = set()
    for raw, their in zip(requests, theirs, strict=True):
        req = read_request(raw, None)
        ours = auth.decide(req, store)
        assert _ours(ours) == _theirs(their), (seed, raw, ours)
        plain = _one_by_one(policies, req, store)
        assert (ours.decision, ours.reason, ours.errors) == (plain.decision, plain.reason, plain.errors)
        outcomes.add((ours.decision, bool(ours.errors)))
    assert len(outcomes) >= 2  # the sets are not all-deny: the comparison says something


def test_the_scope_index_skips_policies_out_of_scope_and_keeps_order() -> None:
    text = "\n".join([
        'permit(principal == User::"alice", action, resource);',
        'permit(principal in Group::"staff", action == Action::"view", resource);',
        'permit(principal is User in Group::"admins", action in [Action::"write"], resource is Photo);',
        'forbid(principal, action, resource in Album::"trip") when { principal.level > 100 };',
        'permit(principal is Group, action, resource);',
    ])  # fmt: skip
    store = read_entities([
        {"uid": _uid("User", "alice"), "attrs": {"level": 1}, "parents": [_uid("Group", "admins")]},
        {"uid": _uid("Group", "admins"), "attrs": {}, "parents": [_uid("Group", "staff")]},
        {"uid": _uid("Action", "edit"), "attrs": {}, "parents": [_uid("Action", "write")]},
        {"uid": _uid("Photo", "p"), "attrs": {}, "parents": [_uid("Album", "trip")]},
    ], None)  # fmt: skip
    auth = Authorizer(parse_policies(text, "scoped.cedar"))

    def req(action: str) -> Any:
        return read_request({"principal": _uid("User", "alice"), "action": _uid("Action", action),
                             "resource": _uid("Photo", "p"), "context": {}}, None)  # fmt: skip

    assert auth.candidates(req("view"), store) == (0, 1, 3)
    assert auth.candidates(req("edit"), store) == (0, 2, 3)
    assert auth.decide(req("edit"), store).reason == ["policy0", "policy2"]


def test_a_shared_subexpression_that_errs_names_each_policys_own_position() -> None:
    text = ('permit(principal, action, resource) when { principal.missing == 1 };\n'
            'permit(principal, action, resource) when {\n  principal.missing == 1 };\n')  # fmt: skip
    store = read_entities([{"uid": _uid("User", "a"), "attrs": {}, "parents": []}], None)
    r = read_request({"principal": _uid("User", "a"), "action": _uid("Action", "v"), "resource": _uid("User", "a"),
                      "context": {}}, None)  # fmt: skip
    ans = decide(parse_policies(text, "shared.cedar"), r, store)
    assert ans.errors == ["policy0", "policy1"]
    assert ans.messages[0].startswith("policy0 (shared.cedar:1:") and ans.messages[1].startswith("policy1 (shared.cedar:3:")


def test_a_list_changed_in_place_is_compiled_again() -> None:
    policies = parse_policies("permit(principal, action, resource);", "a.cedar")
    store = read_entities([], None)
    r = read_request({"principal": _uid("User", "a"), "action": _uid("Action", "v"), "resource": _uid("User", "a"),
                      "context": {}}, None)  # fmt: skip
    first = authorizer(policies)
    assert authorizer(policies) is first and decide(policies, r, store).decision == "allow"
    policies.append(parse_policies("forbid(principal, action, resource);", "b.cedar")[0])
    assert authorizer(policies) is not first
    assert decide(policies, r, store).decision == "deny"
    policies[1] = parse_policies("permit(principal, action, resource);", "c.cedar")[0]
    assert decide(policies, r, store).decision == "allow"
