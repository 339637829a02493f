"""Entity stores Cedar refuses, and hierarchies of any depth (audit3): through `cda policy
authorize`, with cedarpy (Cedar's own evaluator) as the oracle of what a store means."""

from __future__ import annotations

import json
from pathlib import Path

import cedarpy
import pytest

from cda.cli.main import main

REQUEST = {"action": {"type": "Action", "id": "read"}, "resource": {"type": "Doc", "id": "memo"}, "context": {}}


def _g(name: str, *parents: str) -> dict[str, object]:
    return {"uid": {"type": "G", "id": name}, "attrs": {}, "parents": [{"type": "G", "id": p} for p in parents]}


DOC = {"uid": {"type": "Doc", "id": "memo"}, "attrs": {}, "parents": []}


def _authorize(tmp_path: Path, policy: str, entities: list[dict[str, object]], principal: str,
               capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    (tmp_path / "p.cedar").write_text(policy)
    (tmp_path / "e.json").write_text(json.dumps(entities))
    (tmp_path / "r.json").write_text(json.dumps({**REQUEST, "principal": {"type": "G", "id": principal}}))
    code = main(["policy", "authorize", str(tmp_path / "p.cedar"), "--entities", str(tmp_path / "e.json"),
                 "--request", str(tmp_path / "r.json")])
    out, err = capsys.readouterr()
    return code, out, err


def _cedar(policy: str, entities: list[dict[str, object]], principal: str) -> tuple[str, list[str]]:
    answer = cedarpy.is_authorized({"principal": f'G::"{principal}"', "action": 'Action::"read"',
                                    "resource": 'Doc::"memo"', "context": {}}, policy, entities)
    return answer.decision.name, list(answer.diagnostics.errors)


@pytest.mark.parametrize("order", ["as written", "reversed"])
def test_an_entity_listed_twice_is_refused_as_cedar_refuses_it(tmp_path: Path, order: str,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    # ana in eng, then ana again in nothing: the answer once depended on which came last
    store = [_g("eng"), _g("ana", "eng"), DOC, _g("ana")]
    if order == "reversed":
        store.reverse()
    policy = 'permit (principal in G::"eng", action, resource);\n'
    decision, errors = _cedar(policy, store, "ana")
    assert decision == "NoDecision" and "duplicate entity entry" in errors[0]
    code, out, err = _authorize(tmp_path, policy, store, "ana", capsys)
    assert (code, out) == (2, "")
    assert 'G::"ana" is in the store twice' in err and "Traceback" not in err


@pytest.mark.parametrize("store", [[_g("a", "b"), _g("b", "a"), DOC], [_g("a", "a"), DOC],
                                   [_g("a", "b"), _g("b", "c"), _g("c", "a"), DOC]],
                         ids=["two", "self", "three"])
def test_a_cycle_in_the_hierarchy_is_refused_as_cedar_refuses_it(tmp_path: Path, store: list[dict[str, object]],
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    policy = 'permit (principal in G::"b", action, resource);\n'  # was ALLOW on the two-entity cycle
    decision, errors = _cedar(policy, store, "a")
    assert decision == "NoDecision" and "cycle" in errors[0]
    code, out, err = _authorize(tmp_path, policy, store, "a", capsys)
    assert (code, out) == (2, "")
    assert "the hierarchy has a cycle" in err and "is among its own ancestors" in err


def test_a_deep_hierarchy_is_read_and_decided_as_cedar_decides(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    # a chain of 1,500 groups (a RecursionError traceback from about 990 before) and a diamond
    n = 1500
    store = [_g(str(i), str(i + 1)) for i in range(n - 1)] + [_g(str(n - 1), "x", "y"), _g("x", "top"),
                                                             _g("y", "top"), _g("top"), DOC]
    for target, principal in ((str(n - 1), "0"), ("top", "0"), ("top", str(n - 1)), ("0", "top"), ("700", "701")):
        policy = f'permit (principal in G::"{target}", action, resource);\n'
        decision, _ = _cedar(policy, store, principal)
        code, out, err = _authorize(tmp_path, policy, store, principal, capsys)
        assert code == 0, err
        assert out.splitlines()[0] == decision.upper(), (target, principal)


def test_a_closure_past_the_cap_is_refused_with_a_message(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    import cda.policy.entities as entities

    monkeypatch.setattr(entities, "MAX_CLOSURE", 100)
    store = [_g(str(i), str(i + 1)) for i in range(20)] + [_g("20"), DOC]  # 210 pairs
    code, out, err = _authorize(tmp_path, 'permit (principal, action, resource);\n', store, "0", capsys)
    assert (code, out) == (2, "")
    assert "more than 100 (entity, ancestor) pairs" in err


@pytest.mark.parametrize("where", ["entity attribute", "request context"])
def test_a_value_nested_past_the_limit_is_refused_and_one_within_it_is_decided(
        tmp_path: Path, where: str, capsys: pytest.CaptureFixture[str]) -> None:
    # 400 levels in a request's context, 900 in an attribute: RecursionError tracebacks before;
    # Cedar's own reader refuses a document nested 128 deep
    def nested(depth: int) -> object:
        value: object = 1
        for _ in range(depth):
            value = {"x": value} if where == "entity attribute" else [value]
        return value

    policy = 'permit (principal, action, resource) when { context has c || principal has deep };\n'
    for depth, refused in ((60, False), (400, True), (900, True)):
        store = [{**_g("ana"), "attrs": {"deep": nested(depth)}} if where == "entity attribute" else _g("ana"), DOC]
        request = {**REQUEST, "principal": {"type": "G", "id": "ana"},
                   "context": {"c": nested(depth)} if where == "request context" else {}}
        (tmp_path / "p.cedar").write_text(policy)
        (tmp_path / "e.json").write_text(json.dumps(store))
        (tmp_path / "r.json").write_text(json.dumps(request))
        code = main(["policy", "authorize", str(tmp_path / "p.cedar"), "--entities", str(tmp_path / "e.json"),
                     "--request", str(tmp_path / "r.json")])
        out, err = capsys.readouterr()
        if refused:
            assert (code, out) == (2, ""), err
            assert "a value nested more than 100 levels deep" in err and "Traceback" not in err
        else:
            answer = cedarpy.is_authorized({"principal": 'G::"ana"', "action": 'Action::"read"',
                                            "resource": 'Doc::"memo"', "context": request["context"]}, policy, store)
            assert (code, out.splitlines()[0]) == (0, answer.decision.name.upper()), err


def test_like_is_decided_as_cedar_decides_and_a_long_string_cannot_stall_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import random

    rng = random.Random(7)
    patterns = ["*a*a*b", "a*", "*b", "a*b*a", "*", "**a**", "ab\\*c*", "*\\**", "a\\*", ""]
    texts = ["", "a", "ab", "ba", "aab", "a*b", "ab*c", "ab*cd", "*", "aaab" * 3,
             *("".join(rng.choice("ab*") for _ in range(rng.randrange(8))) for _ in range(12))]
    # the request's string is the caller's: 20,000 characters against three stars was a regex
    # backtracking for hours (8,000 took more than 3 minutes); Cedar answers at once
    cases = [(p, t) for p in patterns for t in texts] + [("*a*a*a*b", "a" * 20_000), ("*a*a*a*b", "a" * 20_000 + "b")]
    store = [_g("ana"), DOC]
    (tmp_path / "e.json").write_text(json.dumps(store))
    for pattern, text in cases:
        policy = f'permit (principal, action, resource) when {{ context.s like "{pattern}" }};\n'
        request = {**REQUEST, "principal": {"type": "G", "id": "ana"}, "context": {"s": text}}
        (tmp_path / "p.cedar").write_text(policy)
        (tmp_path / "r.json").write_text(json.dumps(request))
        code = main(["policy", "authorize", str(tmp_path / "p.cedar"), "--entities", str(tmp_path / "e.json"),
                     "--request", str(tmp_path / "r.json")])
        out, err = capsys.readouterr()
        theirs = cedarpy.is_authorized({"principal": 'G::"ana"', "action": 'Action::"read"',
                                        "resource": 'Doc::"memo"', "context": {"s": text}}, policy, store)
        assert (code, out.splitlines()[0]) == (0, theirs.decision.name.upper()), (pattern, text[:20], err)
