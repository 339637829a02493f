"""The guardian's policy store: minimal violating facts checked by brute force, matching, policy
file errors at their line and column, Cedar sets (checked against cedarpy), the committed
action schema."""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cda.guardian.policies import PolicyFileError, judge, load_policy_store
from cda.guardian.proposal import ProposedAction, action_schema, read_action

ROOT = Path(__file__).resolve().parent.parent
NAMES = ("a", "b", "c", "d")
Formula = tuple[str, Callable[[dict[str, bool]], bool]]


def _atom(name: str) -> Formula:
    return name, lambda v: v[name]


def _combine(inner: st.SearchStrategy[Formula]) -> st.SearchStrategy[Formula]:
    def neg(f: Formula) -> Formula:
        return f"not ({f[0]})", lambda v: not f[1](v)

    def both(op: str, f: Formula, g: Formula) -> Formula:
        fn = {"and": lambda x, y: x and y, "or": lambda x, y: x or y, "implies": lambda x, y: (not x) or y}[op]
        return f"({f[0]}) {op} ({g[0]})", lambda v: fn(f[1](v), g[1](v))

    return st.one_of(inner.map(neg), st.builds(both, st.sampled_from(["and", "or", "implies"]), inner, inner))


FORMULAS = st.recursive(st.sampled_from(NAMES).map(_atom), _combine, max_leaves=6)


def _store(*formulas: str) -> Any:
    return load_policy_store({
        "facts": {n: {"parameter": n} for n in NAMES},
        "policy": [{"id": f"p{i}", "dsl": text} for i, text in enumerate(formulas)],
    })  # fmt: skip


def _action(values: dict[str, bool], **changes: Any) -> ProposedAction:
    doc: dict[str, Any] = {"action_id": "x", "agent_id": "ag", "tool": {"name": "t", "version": "1"}, "action_type": "op",
                           "parameters": dict(values)}  # fmt: skip
    doc.update(changes)
    found = read_action(doc)
    assert isinstance(found, ProposedAction)
    return found


def _violated_under(formula: Callable[[dict[str, bool]], bool], fixed: dict[str, bool]) -> bool:
    """Brute force: whether the formula fails under every completion of ``fixed``."""
    free = [n for n in NAMES if n not in fixed]
    return all(not formula({**fixed, **dict(zip(free, bits))}) for bits in itertools.product([False, True], repeat=len(free)))


@settings(max_examples=40, deadline=None, derandomize=True)
@given(FORMULAS, st.fixed_dictionaries({n: st.booleans() for n in NAMES}))
def test_the_violating_facts_are_a_smallest_set_that_violates_the_policy(formula: Formula, values: dict[str, bool]) -> None:
    text, holds = formula
    verdict = judge(_store(text), _action(values))
    assert (verdict.violation is None) == holds(values)
    if verdict.violation is None:
        return
    facts = {f.name: f.value for f in verdict.violation.facts}
    assert set(facts) <= set(NAMES) and all(facts[n] == values[n] for n in facts)
    assert _violated_under(holds, facts), "the reported facts alone violate the policy"
    for n in facts:
        assert not _violated_under(holds, {k: v for k, v in facts.items() if k != n}), f"{n} is needed"
    smaller = [c for k in range(len(facts)) for c in itertools.combinations(NAMES, k)
               if _violated_under(holds, {n: values[n] for n in c})]  # fmt: skip
    assert smaller == [], "no smaller set of facts violates it"


@settings(max_examples=15, deadline=None, derandomize=True)
@given(st.lists(FORMULAS, min_size=2, max_size=4), st.fixed_dictionaries({n: st.booleans() for n in NAMES}))
def test_the_first_violated_policy_in_store_order_is_reported(formulas: list[Formula], values: dict[str, bool]) -> None:
    verdict = judge(_store(*(f[0] for f in formulas)), _action(values))
    first = next((f"p{i}" for i, f in enumerate(formulas) if not f[1](values)), None)
    assert (verdict.violation.policy if verdict.violation else None) == first


def test_policies_match_by_action_type_and_resource_globs() -> None:
    store = load_policy_store({"policy": [
        {"id": "any", "dsl": "true"},
        {"id": "db", "action_types": ["db.*"], "dsl": "true"},
        {"id": "prod", "resources": ["prod/*", "live/*"], "dsl": "true"},
        {"id": "db_prod", "action_types": ["db.delete"], "resources": ["prod/*"], "dsl": "true"},
    ]})  # fmt: skip
    def ids(**changes: Any) -> list[str]:
        return [p.id for p in store.match(_action({}, **changes))]

    assert ids(action_type="db.read", resources=["dev/x"]) == ["any", "db"]
    assert ids(action_type="db.delete", resources=["dev/x", "prod/y"]) == ["any", "db", "prod", "db_prod"]
    assert ids(action_type="web.get", resources=["live/z"]) == ["any", "prod"]
    assert ids(action_type="web.get") == ["any"]


def test_a_required_parameter_the_action_lacks_violates_the_policy() -> None:
    store = load_policy_store({"parameters": {"replicas": "count"},
                               "policy": [{"id": "cap", "requires": ["replicas"], "dsl": "value(metric:param_replicas) <= 3"}]})  # fmt: skip
    assert judge(store, _action({}, parameters={"replicas": 3})).violation is None
    over = judge(store, _action({}, parameters={"replicas": 4})).violation
    assert over is not None and [f.to_json() for f in over.facts] == [{"fact": "param_replicas", "value": "4", "paths": ["$.parameters.replicas"]}]
    for params in ({}, {"replicas": "3"}, {"replicas": Decimal("2.5")}):
        missing = judge(store, _action({}, parameters=params)).violation
        assert missing is not None and missing.policy == "cap" and "no usable value" in missing.problem


def test_soft_policies_score_by_weight() -> None:
    store = load_policy_store({"facts": {n: {"parameter": n} for n in NAMES}, "policy": [
        {"id": "s1", "kind": "soft", "weight": 3, "dsl": "a"},
        {"id": "s2", "kind": "soft", "weight": 1, "dsl": "b"},
        {"id": "h", "dsl": "not c"},
    ]})  # fmt: skip
    verdict = judge(store, _action({"a": False, "b": False}))
    assert (verdict.violation, verdict.soft_score, verdict.soft_violated) == (None, 0, ("s1", "s2"))
    verdict = judge(store, _action({"a": True, "b": False}))
    assert (verdict.soft_score, verdict.soft_violated) == (Decimal(3) / 4, ("s2",))


@pytest.mark.parametrize(("text", "where", "message"), [
    ('[[policy]]\nid = "p"\ndsl = "a and"\n', ":3:13:", 'policy p: unexpected end of input; expected a name'),
    ('[facts]\na = { parameter = "a" }\n[[policy]]\nid = "p"\ndsl = \'\'\'\na and\n  not zz\'\'\'\n', ":7:7:", "unknown predicate 'zz'"),
    ('[[policy]]\nid = "p"\ndsl = "true"\n[[policy]]\nid = "p"\ndsl = "true"\n', ": error: ", "two policies have the id 'p'"),
    ('[[policy]]\nid = "p"\nrequires = ["n"]\ndsl = "true"\n', ": error: ", "does not declare"),
    ('[config]\nmax_auto_launch_risk = 2\n', ": error: ", "config.max_auto_launch_risk"),
    ('[[policy]]\nid = "p"\ndsl = "true"\nsurprise = 1\n', ": error: ", "policy[0].surprise"),
    ('[facts]\ncost = { parameter = "x" }\n', ": error: ", "facts.cost"),
    ("[[policy]\n", ":1:9:", "not valid TOML"),
])  # fmt: skip
def test_a_bad_policy_file_is_an_error_at_its_place(tmp_path: Path, text: str, where: str, message: str) -> None:
    path = tmp_path / "p.toml"
    path.write_text(text)
    with pytest.raises(PolicyFileError) as caught:
        load_policy_store(path)
    shown = str(caught.value)
    assert shown.startswith(str(path)) and where in shown and message in shown, shown


CEDAR = """\
permit(principal, action, resource);
forbid(principal, action == Action::"db.delete", resource == Resource::"prod/users");
forbid(principal == Agent::"intern", action, resource) when { context.tool == "shell" };
"""


def test_cedar_sets_agree_with_cedarpy(tmp_path: Path) -> None:
    import cedarpy

    (tmp_path / "access.cedar").write_text(CEDAR)
    store = load_policy_store({"cedar": [{"id": "access", "policies": "access.cedar"}]}, base=tmp_path)
    cases = [
        ("agent-7", "db.delete", ["dev/x", "prod/users"], "sql"),
        ("agent-7", "db.read", ["prod/users"], "sql"),
        ("intern", "db.read", ["dev/x"], "shell"),
        ("intern", "db.read", ["dev/x"], "sql"),
    ]
    for agent, kind, resources, tool in cases:
        verdict = judge(store, _action({}, agent_id=agent, action_type=kind, resources=resources, tool={"name": tool, "version": "1"}))
        denied = []
        for r in resources:
            request = {"principal": f'Agent::"{agent}"', "action": f'Action::"{kind}"', "resource": f'Resource::"{r}"',
                       "context": {"tool": tool, "tool_version": "1", "currency": "USD"}}  # fmt: skip
            if cedarpy.is_authorized(request, CEDAR, []).decision != cedarpy.Decision.Allow:
                denied.append(r)
        assert (verdict.violation is not None) == bool(denied), (agent, kind, resources)
        if verdict.violation is not None:
            assert verdict.violation.policy == "access"
            assert {f.name: f.value for f in verdict.violation.facts}["resource"] == denied[0]


def test_the_committed_action_schema_is_current_and_agrees_with_the_model() -> None:
    import jsonschema

    committed = json.loads((ROOT / "schemas" / "guardian" / "action.schema.json").read_text())
    assert committed == action_schema()
    good = {"action_id": "a1", "agent_id": "ag", "tool": {"name": "sql", "version": "1.0"}, "action_type": "db.read",
            "resources": ["prod/x"], "cost_estimate": 12.5, "parameters": {"limit": 5}}  # fmt: skip
    docs = [good, {**good, "cost_estimate": "12.50"}, {**good, "cost_estimate": -1}, {**good, "extra": 1},
            {**good, "agent_id": 5}, {**good, "resources": [""]}, {**good, "currency": "usd"}, {**good, "parameters": {"Bad": 1}},
            {k: v for k, v in good.items() if k != "tool"}, {**good, "priority": "urgent"}]  # fmt: skip
    validator = jsonschema.Draft202012Validator(committed)
    for doc in docs:
        assert validator.is_valid(doc) == isinstance(read_action(doc), ProposedAction), doc
    checked = read_action(good)
    assert isinstance(checked, ProposedAction)
    assert validator.is_valid(checked.model_dump(mode="json"))


def test_a_sum_of_parameters_is_decided_by_z3_when_clingo_cannot() -> None:
    """Policies are solved on clingo(-dl) first; a linear sum of two metrics is beyond difference
    logic, so the same policy is decided on z3 — with the same answer an exact sum gives."""
    store = load_policy_store({"parameters": {"cpu": "count", "gpu": "count"},
                               "policy": [{"id": "total", "requires": ["cpu", "gpu"], "dsl": "value(metric:param_cpu) + 2 * value(metric:param_gpu) <= 10"}]})  # fmt: skip
    for cpu, gpu in itertools.product(range(0, 12, 3), range(0, 6, 2)):
        verdict = judge(store, _action({}, parameters={"cpu": cpu, "gpu": gpu}))
        assert (verdict.violation is None) == (cpu + 2 * gpu <= 10), (cpu, gpu)
        if verdict.violation is not None:
            assert {f.name for f in verdict.violation.facts} == {"param_cpu", "param_gpu"}


def test_a_bad_cedar_file_is_an_error_at_its_place(tmp_path: Path) -> None:
    (tmp_path / "access.cedar").write_text('permit(principal, action, resource);\nforbid(principal, action ==, resource);\n')
    (tmp_path / "p.toml").write_text('[[cedar]]\nid = "access"\npolicies = "access.cedar"\n')
    with pytest.raises(PolicyFileError) as caught:
        load_policy_store(tmp_path / "p.toml")
    shown = str(caught.value)
    assert shown.startswith(f"{tmp_path / 'access.cedar'}:2:") and "cedar access: " in shown, shown
    (tmp_path / "p.toml").write_text('[[cedar]]\nid = "access"\npolicies = "missing.cedar"\n')
    with pytest.raises(PolicyFileError, match="cannot read .*missing.cedar"):
        load_policy_store(tmp_path / "p.toml")


def test_a_policy_added_in_python_is_checked_as_the_file_s_are() -> None:
    from fractions import Fraction

    from cda.guardian.policies import DslPolicy

    store = _store("a")
    with pytest.raises(PolicyFileError, match="two policies have the id 'p0'"):
        store.with_policy(DslPolicy("p0", True, Fraction(1), (), (), (), "b"))
    with pytest.raises(PolicyFileError, match="does not declare"):
        store.with_policy(DslPolicy("q", True, Fraction(1), (), (), ("n",), "b"))
    with pytest.raises(PolicyFileError, match="unknown predicate 'zz'"):
        store.with_policy(DslPolicy("q", True, Fraction(1), (), (), (), "zz"))
    bigger = store.with_policy(DslPolicy("q", True, Fraction(1), (), (), (), "b"))
    assert [p.id for p in bigger.policies] == ["p0", "q"] and bigger.digest != store.digest
