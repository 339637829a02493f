"""Repairs that name one ``when``/``unless`` condition (dropped or negated) rather than a whole
policy: every suggestion restores the property (a fresh analysis of the edited text, and cedarpy
on the old counterexample), and none is missed (every single edit analysed afresh)."""

from __future__ import annotations

import json
from pathlib import Path

import cedarpy
import pytest

from cda.cli.main import main
from cda.contracts.status import PropertyStatus
from cda.policy.analyze import analyze, environments
from cda.policy.authorization import PolicySet
from cda.policy.entities import read_entities
from cda.policy.parse import parse_policies
from cda.policy.repair import MAX_CONDITION_REPAIRS, edited
from cda.policy.schema import parse_schema

SCHEMA_TEXT = """entity User = { level: Long };
entity Doc = { public: Bool, owner: User };
action read appliesTo { principal: [User], resource: [Doc], context: { flag: Bool, n: Long } };"""
SCHEMA = parse_schema(SCHEMA_TEXT)
ENV = environments(SCHEMA)[0]
A = """permit(principal, action, resource)
when { resource.public }
when { context.flag };
permit(principal, action, resource)
when { principal.level > 3 };"""
B = """permit(principal, action, resource)
when { resource.public };
permit(principal, action, resource)
when { principal.level > 3 } unless { context.flag };"""
# B's second policy with its `unless` dropped, as a user would write the suggested edit
B_FIXED = """permit(principal, action, resource)
when { resource.public };
permit(principal, action, resource)
when { principal.level > 3 };"""


def _set(text: str, name: str) -> PolicySet:
    return PolicySet(parse_policies(text, f"{name}.cedar"), SCHEMA, read_entities([], SCHEMA))


def test_a_repair_names_the_conditions_whose_change_restores_the_property() -> None:
    res = analyze("implies", [_set(A, "a"), _set(B, "b")], ENV, repair=True)
    assert res.status is PropertyStatus.FAILS and res.repair is not None
    got = {(c["policy"], c["condition"], c["kind"], c["change"], c["line"]) for c in res.repair["conditions"]}
    assert got == {("B:policy0", 1, "when", "drop", 2), ("B:policy1", 2, "unless", "drop", 4)}
    # cedarpy: the counterexample A allows and B denied is allowed by B once the condition is dropped
    cex = res.counterexample
    assert cex is not None
    before = cedarpy.is_authorized(cex["request"], B, cex["entities"], SCHEMA_TEXT)
    after = cedarpy.is_authorized(cex["request"], B_FIXED, cex["entities"], SCHEMA_TEXT)
    assert (before.decision.value, after.decision.value) == ("Deny", "Allow")
    assert analyze("implies", [_set(A, "a"), _set(B_FIXED, "b")], ENV).status is PropertyStatus.HOLDS


@pytest.mark.parametrize("prop, texts", [
    ("always-denies", ["permit(principal, action, resource) when { context.flag } when { resource.public };"]),  # none
    ("never-errors", ["permit(principal, action, resource) when { context.flag } when { context.n + 1 > 0 } "
                      "when { principal.level > 0 };"]),
    ("implies", ["permit(principal, action, resource) when { context.n > 2 } when { resource.public };",
                 "permit(principal, action, resource) when { context.n > 0 } when { resource.public } "
                 "unless { context.flag };"]),
    ("always-denies", ["permit(principal, action, resource) when { context.n * context.n == 4 } when { context.flag };"]),
    ("disjoint", ["permit(principal, action, resource) when { context.flag } unless { resource.public };",
                  "permit(principal, action, resource) when { resource.owner == principal } when { context.flag };"]),
])  # fmt: skip
def test_every_single_edit_that_restores_the_property_is_found(prop: str, texts: list[str]) -> None:
    """The oracle: each single edit of each condition, analysed afresh from the edited policy.
    The repair lists exactly those that restore the property (fewer than the cap here)."""
    sets = [_set(t, n) for t, n in zip(texts, "ab")]
    res = analyze(prop, sets, ENV, repair=True)
    assert res.status is PropertyStatus.FAILS and res.repair is not None
    want = set()
    for k, ps in enumerate(sets):
        for j, p in enumerate(ps.policies):
            for i in range(len(p.conditions)):
                for change in ("drop", "negate"):
                    others = [edited(p, i, change) if q is p else q for q in ps.policies]
                    changed = [PolicySet(others, SCHEMA, ps.entities) if m == k else s for m, s in enumerate(sets)]
                    if analyze(prop, changed, ENV).status is PropertyStatus.HOLDS:
                        want.add((j, i + 1, change, k))
    tags = ["A:", "B:"] if len(sets) == 2 else [""]
    got = {(int(c["policy"].rsplit("policy", 1)[1]), c["condition"], c["change"], tags.index(c["policy"][:2] if tags[0] else ""))
           for c in res.repair["conditions"]}  # fmt: skip
    assert len(want) < MAX_CONDITION_REPAIRS or len(got) == MAX_CONDITION_REPAIRS
    assert got == want if len(want) <= MAX_CONDITION_REPAIRS else got < want


def test_the_cli_prints_a_condition_repair_and_json_carries_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "s.cedarschema").write_text(SCHEMA_TEXT)
    (tmp_path / "a.cedar").write_text(A)
    (tmp_path / "b.cedar").write_text(B)
    args = ["policy", "analyze", "implies", str(tmp_path / "a.cedar"), str(tmp_path / "b.cedar"),
            "--schema", str(tmp_path / "s.cedarschema"), "--repair"]  # fmt: skip
    assert main(args) == 1
    out = capsys.readouterr().out
    assert "repair: or drop unless condition 2 of B:policy1 (b.cedar:4:47); re-checked" in out
    assert main([*args, "--json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    [result] = doc["results"] if isinstance(doc, dict) and "results" in doc else doc
    assert {c["change"] for c in result["repair"]["conditions"]} == {"drop"}
