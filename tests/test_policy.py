"""Cedar in CDA: the reader, the evaluator and authorization, against Cedar's own answers.

Oracles: the expected decisions, determining policies and errors of Cedar's integration tests
(the 74 handwritten requests and the 1,000-test fuzz corpus in ../shared/data/cedar), and
cedarpy (Cedar's Rust evaluator) on expressions written here.
"""

from __future__ import annotations

import json
import tarfile
from pathlib import Path

import cedarpy
import pytest

from cda.cli.main import main
from cda.errors import CDAError, DSLError, DSLSyntaxError
from cda.policy.authorization import authorize, decide, load_policy_set
from cda.policy.cedar_tests import run_test_dir, run_test_file, summarize
from cda.policy.entities import read_entities, read_request
from cda.policy.parse import parse_policies
from cda.policy.schema import parse_schema, parse_schema_json
from cda.policy.syntax import UnsupportedConstruct
from tests.conftest import DATA, ROOT

CEDAR = DATA / "cedar"
NO_DATA = f"Cedar data not found at {CEDAR} (README.md, Test data)"
needs_data = pytest.mark.skipif(not (CEDAR / "tests").exists(), reason=NO_DATA)


# ---------------------------------------------------------------- the reader


def test_syntax_error_names_file_line_column_and_what_was_expected() -> None:
    text = 'permit(principal, action, resource)\nwhen { principal.level > };'
    with pytest.raises(DSLSyntaxError) as exc:
        parse_policies(text, "p.cedar")
    e = exc.value
    assert (e.filename, e.line, e.column) == ("p.cedar", 2, 26)
    assert "expected an expression" in str(e) and "'}'" in str(e)


def test_a_template_slot_is_refused_by_name_at_its_place() -> None:
    with pytest.raises(UnsupportedConstruct) as exc:
        parse_policies('permit(principal,\n  action, resource == ?resource);', "t.cedar")
    assert (exc.value.line, exc.value.column) == (2, 23)
    assert "template slot" in str(exc.value) and "t.cedar:2:23" in str(exc.value)


def test_an_unknown_function_is_a_syntax_error_not_a_guess() -> None:
    with pytest.raises(DSLSyntaxError, match="known extension function"):
        parse_policies('permit(principal, action, resource) when { foo("x") };')


def test_policy_ids_follow_cedar_and_annotations_are_kept() -> None:
    ps = parse_policies('@id("first") permit(principal, action, resource);\nforbid(principal, action, resource);')
    assert [p.id for p in ps] == ["policy0", "policy1"]
    assert ps[0].annotations == {"id": "first"}


def test_a_long_literal_out_of_64_bits_is_refused_but_the_least_long_is_read() -> None:
    parse_policies("permit(principal, action, resource) when { -9223372036854775808 < 0 };")
    with pytest.raises(DSLSyntaxError, match="64 bits"):
        parse_policies("permit(principal, action, resource) when { 9223372036854775808 > 0 };")


SCHEMA = """
namespace App {
  type Ctx = { flag: Bool, ip?: ipaddr };
  entity Group;
  entity User in [Group] = { level: Long, "nick name"?: String };
  entity Doc = { owner: User, score: decimal };
  action read appliesTo { principal: [User], resource: [Doc], context: Ctx };
  action write in [read] appliesTo { principal: User, resource: Doc, context: {} };
}
"""
SCHEMA_JSON = {
    "App": {
        "commonTypes": {
            "Ctx": {"type": "Record", "attributes": {
                "flag": {"type": "Boolean"}, "ip": {"type": "Extension", "name": "ipaddr", "required": False}}},
        },
        "entityTypes": {
            "Group": {},
            "User": {"memberOfTypes": ["Group"], "shape": {"type": "Record", "attributes": {
                "level": {"type": "Long"}, "nick name": {"type": "String", "required": False}}}},
            "Doc": {"shape": {"type": "Record", "attributes": {
                "owner": {"type": "Entity", "name": "User"}, "score": {"type": "Extension", "name": "decimal"}}}},
        },
        "actions": {
            "read": {"appliesTo": {"principalTypes": ["User"], "resourceTypes": ["Doc"], "context": {"type": "Ctx"}}},
            "write": {"memberOf": [{"id": "read"}], "appliesTo": {"principalTypes": ["User"], "resourceTypes": ["Doc"]}},
        },
    }
}  # fmt: skip


def test_the_human_and_json_schema_forms_read_the_same() -> None:
    a, b = parse_schema(SCHEMA, "s.cedarschema"), parse_schema_json(SCHEMA_JSON)
    assert a.entities.keys() == b.entities.keys() == {"App::Group", "App::User", "App::Doc"}
    for name in a.entities:
        assert a.entities[name].attrs.attr_map() == b.entities[name].attrs.attr_map()
        assert a.entities[name].parents == b.entities[name].parents
    assert a.actions == b.actions


def test_typed_json_reads_entities_and_extension_strings_through_the_schema() -> None:
    schema = parse_schema(SCHEMA)
    store = read_entities(
        [{"uid": {"type": "App::Doc", "id": "d"}, "attrs": {"owner": {"type": "App::User", "id": "u"}, "score": "0.5"},
          "parents": []}], schema)  # fmt: skip
    req = read_request({"principal": {"type": "App::User", "id": "u"}, "action": {"type": "App::Action", "id": "write"},
                        "resource": {"type": "App::Doc", "id": "d"}, "context": {}}, schema)  # fmt: skip
    pols = parse_policies(
        'permit(principal, action in App::Action::"read", resource) when { resource.owner == principal && '
        'resource.score.greaterThan(decimal("0.25")) };'
    )
    ans = decide(pols, req, store)  # write is in the group read (from the schema), the owner matches
    assert (ans.decision, ans.reason, ans.errors) == ("allow", ["policy0"], [])


def test_a_bad_extension_string_in_typed_json_names_its_place() -> None:
    schema = parse_schema(SCHEMA)
    with pytest.raises(DSLError, match=r"entities\[0\].attrs.score"):
        read_entities([{"uid": {"type": "App::Doc", "id": "d"}, "attrs": {"owner": {"type": "App::User", "id": "u"},
                       "score": "1.23456"}, "parents": []}], schema)  # fmt: skip


# ---------------------------------------------------------------- evaluation against cedarpy

CONDITIONS = [
    "9223372036854775807 + 1 == 0",  # overflow: an error
    "-9223372036854775807 - 2 < 0",
    "3 * -4 == -12",
    "true && 1",  # type error
    "false && 1",  # short-circuit: no error
    "true || (1 + true)",
    '"a" < "b"',
    'if 1 > 0 then "x" like "x*" else 1',
    '"abc*d" like "abc\\**" && !("abcd" like "abc\\**")',
    '"" like "*"',
    "[1, 2, 2] == [2, 1]",
    "[1, true].contains(1) && ![true].contains(1)",
    "[1, 2].containsAll([2]) && [1].containsAny([3, 1]) && [].isEmpty()",
    "{a: 1, b: {c: true}}.b.c",
    "{a: 1} has b",
    "{a: 1}.b == 1",
    'User::"nobody".level == 1',  # an entity not in the store: an error
    'User::"nobody" has level',
    'User::"nobody" in User::"nobody"',
    'User::"a" in [User::"b", 1]',
    'User::"a" is User in [User::"a"]',
    'ip("10.1.2.3/8").isInRange(ip("10.0.0.0/8")) && ip("10.1.2.3/8") != ip("10.0.0.0/8")',
    'ip("127.0.0.1").isLoopback() && !ip("127.0.0.1/4").isLoopback() && ip("ff00::1").isMulticast()',
    'ip("::ffff:1.2.3.4").isIpv6()',
    'ip("1.2.3.4/08").isIpv4()',
    'decimal("1.2345").lessThan(decimal("1.2346")) && decimal("-0.0") == decimal("0.0")',
    'decimal("1.23456") == decimal("1.2346")',
    'decimal("922337203685477.5807").greaterThan(decimal("0.0"))',
    'decimal("922337203685477.5808").greaterThan(decimal("0.0"))',
    'datetime("2024-10-15T11:35:00+0100") == datetime("2024-10-15T10:35:00Z")',
    'datetime("2024-02-30") < datetime("2024-03-01")',
    'datetime("1969-12-31T23:00:00Z").toTime() == duration("23h")',
    'duration("-1d1ms").toDays() == -1 && duration("1h30m").toMinutes() == 90',
    'datetime("2024-01-01").offset(duration("1d")).durationSince(datetime("2024-01-01")) == duration("24h")',
    'ip("1.2.3.4").isMulticast(ip("1.2.3.4"))',  # a wrong arity is an evaluation error
    "(if true then 1 else 2) + 1 == 2",
]


@pytest.mark.parametrize("cond", CONDITIONS)
def test_each_condition_is_evaluated_as_cedar_evaluates_it(cond: str) -> None:
    text = f"permit(principal, action, resource) when {{ {cond} }};"
    entities = [{"uid": {"type": "User", "id": "a"}, "attrs": {"level": 3}, "parents": []}]
    request = {"principal": {"type": "User", "id": "a"}, "action": {"type": "Action", "id": "v"},
               "resource": {"type": "User", "id": "a"}, "context": {}}  # fmt: skip
    ours = decide(parse_policies(text), read_request(request, None), read_entities(entities, None))
    theirs = cedarpy.is_authorized(request, text, entities)
    assert ours.decision == theirs.decision.value.lower(), (cond, ours)
    assert bool(ours.errors) == bool(theirs.diagnostics.errors), (cond, ours.messages, theirs.diagnostics.errors)


# ---------------------------------------------------------------- Cedar's integration tests


@needs_data
def test_all_74_handwritten_requests_agree_with_cedar() -> None:
    summary = summarize(run_test_dir(CEDAR / "tests"))
    assert (summary["total"], summary["imported"], summary["agreed"]) == (74, 74, 74)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tarball = CEDAR / "corpus-dev.tar.gz"
    if not tarball.exists():
        pytest.skip(NO_DATA)
    out = tmp_path_factory.mktemp("cedar-corpus")
    with tarfile.open(tarball) as tar:
        tar.extractall(out, filter="data")
    return out / "corpus-tests"


@pytest.mark.slow
@needs_data
def test_every_corpus_request_cda_imports_agrees_with_cedar(corpus: Path) -> None:
    """All 1,000 fuzz tests (8,000 requests, about 1.5 s): 100% agreement on what is imported,
    and at least 90% imported."""
    results = run_test_dir(corpus)
    summary = summarize(results)
    assert summary["total"] == 8000
    assert summary["imported"] >= 0.9 * summary["total"]
    bad = [(r.file, r.index, r.expected, r.decision) for r in results if r.imported and not r.agree]
    assert not bad, bad[:5]


@needs_data
def test_a_wrong_expected_answer_is_reported_as_a_disagreement(tmp_path: Path) -> None:
    """The agreement check can fail: the same test with one expected decision flipped."""
    data = json.loads((CEDAR / "tests" / "multi" / "3.json").read_text())
    data["requests"][0]["decision"] = "deny"
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "x.json").write_text(json.dumps(data))
    for sub in ("tests/multi", "sample-data/sandbox_b"):
        src = CEDAR / sub
        dst = tmp_path / sub
        dst.mkdir(parents=True, exist_ok=True)
        for f in src.iterdir():
            (dst / f.name).write_bytes(f.read_bytes())
    results = run_test_file(tmp_path / "tests" / "x.json")
    assert [r.agree for r in results][:2] == [False, True]


# ---------------------------------------------------------------- the command line


@needs_data
def test_cli_test_json_has_the_fields_of_the_issue(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["policy", "test", str(CEDAR / "tests" / "ip"), "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0
    assert {"total", "imported", "agreed", "results"} <= out.keys()
    assert out["total"] == out["agreed"] == len(out["results"]) > 0
    assert {"file", "index", "expected", "decision", "imported", "agree", "refusal"} <= out["results"][0].keys()


def _cedar_test_folder(tmp_path: Path, policies: str = "p.cedar") -> Path:
    """A test folder in Cedar's layout over examples/cedar: tests/t.json names the three files."""
    (tmp_path / "tests").mkdir()
    for name in ("old.cedar", "schema.cedarschema", "entities.json"):
        (tmp_path / name).write_bytes((EXAMPLE / name).read_bytes())
    (tmp_path / "p.cedar").write_bytes((EXAMPLE / "old.cedar").read_bytes())
    test = {"policies": policies, "schema": "schema.cedarschema", "entities": "entities.json",
            "requests": [{**_READ, "decision": "allow", "reason": ["policy0"], "errors": []}]}
    (tmp_path / "tests" / "t.json").write_text(json.dumps(test))
    return tmp_path / "tests"


@pytest.mark.parametrize(
    ("file", "text", "why"),
    [
        ("p.cedar", None, "cannot read"),  # the policy file is missing
        ("p.cedar", "permit(principal, action, resource) when { 1 + };", "p.cedar:1:48: syntax error"),
        ("schema.cedarschema", "entity User = {", "schema.cedarschema:1"),
        ("entities.json", "[{", "entities.json"),
    ],
)
def test_cli_test_exits_2_naming_the_file_when_the_test_data_is_broken(
    file: str, text: str | None, why: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Broken test data is no refusal of a construct: exit 2, the test file named."""
    tests = _cedar_test_folder(tmp_path)
    assert main(["policy", "test", str(tests)]) == 0
    assert "1 requests, 1 imported, 1 agree" in capsys.readouterr().out
    if text is None:
        (tmp_path / file).unlink()
    else:
        (tmp_path / file).write_text(text)
    for json_flag in ([], ["--json"]):
        assert main(["policy", "test", str(tests), *json_flag]) == 2
        captured = capsys.readouterr()
        assert f"{tests / 't.json'}: cannot load the test's policies, schema or entities" in captured.err
        assert why in captured.err and "Traceback" not in captured.err
        # with --json the mistake is one JSON object on stdout too; without it, stdout stays empty
        assert (json.loads(captured.out)["message"].startswith(f"{tests / 't.json'}: cannot load") if json_flag
                else captured.out == "")


def test_a_refused_construct_is_still_a_refusal_not_an_error(tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    tests = _cedar_test_folder(tmp_path)
    # a template is read (it authorizes nothing until linked); a slot outside the scope is refused
    (tmp_path / "p.cedar").write_text("permit(principal, action, resource) when { resource == ?resource };")
    assert main(["policy", "test", str(tests)]) == 0
    assert "refused 1 request(s): template slot" in capsys.readouterr().out


def test_a_request_that_cannot_be_read_is_an_error_naming_it(tmp_path: Path) -> None:
    tests = _cedar_test_folder(tmp_path)
    data = json.loads((tests / "t.json").read_text())
    data["requests"][0]["context"] = {"mfa": True}  # the schema requires hour
    (tests / "t.json").write_text(json.dumps(data))
    with pytest.raises(CDAError, match=r"t.json: requests\[0\] cannot be read: .*hour"):
        run_test_file(tests / "t.json")


def test_cli_test_reports_unparseable_json_and_refuses_an_empty_folder(tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    tests = _cedar_test_folder(tmp_path)
    (tests / "u.json").write_text('{"requests": [')
    assert main(["policy", "test", str(tests)]) == 2
    err = capsys.readouterr().err
    assert f"{tests / 'u.json'}: not readable JSON, so not run" in err
    (tmp_path / "empty").mkdir()
    assert main(["policy", "test", str(tmp_path / "empty")]) == 2
    captured = capsys.readouterr()
    assert "no Cedar test request found" in captured.err and "0 requests" not in captured.out
    (tests / "u.json").write_text('{"policies": "p.cedar", "requests": []}')
    (tests / "t.json").unlink()
    assert main(["policy", "test", str(tests), "--json"]) == 2
    assert "nothing checked" in capsys.readouterr().err


@needs_data
def test_cli_authorize_prints_the_decision_reason_and_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    test = json.loads((CEDAR / "tests" / "multi" / "3.json").read_text())
    req = tmp_path / "r.json"
    req.write_text(json.dumps(test["requests"][0]))
    code = main(["policy", "authorize", str(CEDAR / test["policies"]), "--schema", str(CEDAR / test["schema"]),
                 "--entities", str(CEDAR / test["entities"]), "--request", str(req), "--json"])  # fmt: skip
    assert code == 0
    out = json.loads(capsys.readouterr().out)
    assert (out["decision"], out["reason"], out["errors"]) == ("allow", ["policy0"], [])
    ans = authorize(CEDAR / test["policies"], test["requests"][2], schema=CEDAR / test["schema"],
                    entities=CEDAR / test["entities"])  # fmt: skip
    assert ans.decision == test["requests"][2]["decision"]


def test_cli_bad_policy_is_a_compiler_style_message_and_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pol = tmp_path / "p.cedar"
    pol.write_text("permit(principal, action, resource) when { 1 + };\n")
    req = tmp_path / "r.json"
    req.write_text('{"principal": {"type": "U", "id": "a"}, "action": {"type": "Action", "id": "v"}, '
                   '"resource": {"type": "U", "id": "a"}, "context": {}}')  # fmt: skip
    code = main(["policy", "authorize", str(pol), "--request", str(req)])
    err = capsys.readouterr().err
    assert code == 2
    assert f"{pol}:1:48: syntax error: expected an expression" in err and "Traceback" not in err


def test_a_forbid_nested_too_deeply_to_evaluate_is_refused_not_dropped(tmp_path: Path,
                                                                          capsys: pytest.CaptureFixture[str]) -> None:
    """Skipping the forbid as an evaluation error would answer ALLOW where Cedar denies."""
    pol = tmp_path / "deep.cedar"
    pol.write_text("permit(principal, action, resource);\nforbid(principal, action, resource) when { "
                   + " && ".join(["true"] * 1000) + " };\n")
    ex = ROOT / "examples" / "cedar"
    code = main(["policy", "authorize", str(pol), "--schema", str(ex / "schema.cedarschema"),
                 "--entities", str(ex / "entities.json"), "--request", str(ex / "request.json")])  # fmt: skip
    captured = capsys.readouterr()
    assert code == 2 and "ALLOW" not in captured.out and "Traceback" not in captured.err
    assert f"{pol}:2:1: policy policy1: a condition is nested too deeply to evaluate" in captured.err
    with pytest.raises(CDAError, match="policy1: a condition is nested too deeply"):
        authorize(pol, json.loads((ex / "request.json").read_text()))


def test_an_invalid_escape_is_a_syntax_error_as_in_cedar() -> None:
    with pytest.raises(DSLSyntaxError, match=r"bad escape \\\*"):
        parse_policies('permit(principal, action, resource) when { "abc\\*d" == "x" };')


def test_load_policy_set_without_schema_or_entities(tmp_path: Path) -> None:
    pol = tmp_path / "p.cedar"
    pol.write_text('forbid(principal == U::"a", action, resource);\npermit(principal, action, resource);')
    ps = load_policy_set(pol, None, None)
    req = {"principal": {"type": "U", "id": "a"}, "action": {"type": "A", "id": "v"},
           "resource": {"type": "U", "id": "b"}}  # fmt: skip
    assert authorize(ps, req).reason == ["policy0"]
    assert authorize(ps, {**req, "principal": {"type": "U", "id": "b"}}).decision == "allow"


EXAMPLE = ROOT / "examples" / "cedar"
_READ = {"principal": {"type": "User", "id": "ana"}, "action": {"type": "Action", "id": "read"},
         "resource": {"type": "Doc", "id": "plan"}, "context": {"mfa": True, "hour": 10}}  # fmt: skip


@pytest.mark.parametrize(
    ("change", "why"),
    [
        ({"principal": {"type": "Doc", "id": "plan"}}, "principal type Doc is not valid"),
        ({"context": {"mfa": True}}, "lacks the required attribute 'hour'"),
        ({"context": {"mfa": True, "hour": "x"}}, "context.hour is not a Long"),
        ({"context": {"mfa": True, "hour": 10, "extra": 1}}, "'extra', which the schema does not declare"),
        ({"action": {"type": "Action", "id": "write"}}, 'Action::"write" is not in the schema'),
    ],
)
def test_a_request_the_schema_rejects_gets_no_decision_as_in_cedar(change: dict[str, object], why: str) -> None:
    from cda.policy.entities import RequestInvalid

    request = {**_READ, **change}
    files = [(EXAMPLE / n).read_text() for n in ("old.cedar", "entities.json", "schema.cedarschema")]
    assert cedarpy.is_authorized(request, *files).decision.value == "NoDecision"
    with pytest.raises(RequestInvalid, match=why):
        authorize(EXAMPLE / "old.cedar", request, schema=EXAMPLE / "schema.cedarschema", entities=EXAMPLE / "entities.json")
    assert authorize(EXAMPLE / "old.cedar", _READ, schema=EXAMPLE / "schema.cedarschema",
                     entities=EXAMPLE / "entities.json").decision == "allow"  # fmt: skip


@pytest.mark.parametrize(
    ("mutate", "why"),
    [
        (lambda e: e[1]["attrs"].update(level="x"), "level is not a Long"),
        (lambda e: e[1]["attrs"].clear(), "lacks the required attribute 'level'"),
        (lambda e: e[1]["attrs"].update(foo=1), "'foo', which the schema does not declare"),
        (lambda e: e.append({"uid": {"type": "Zzz", "id": "q"}, "attrs": {}, "parents": []}), "Zzz is not declared"),
        (lambda e: e[1]["parents"].append({"type": "Doc", "id": "memo"}), "may not have a parent of type Doc"),
    ],
)
def test_entities_the_schema_rejects_are_refused_as_in_cedar(mutate: object, why: str, tmp_path: Path) -> None:
    entities = json.loads((EXAMPLE / "entities.json").read_text())
    mutate(entities)  # type: ignore[operator]
    (tmp_path / "e.json").write_text(json.dumps(entities))
    texts = [(EXAMPLE / "old.cedar").read_text(), json.dumps(entities), (EXAMPLE / "schema.cedarschema").read_text()]
    assert cedarpy.is_authorized(_READ, *texts).decision.value == "NoDecision"
    with pytest.raises(DSLError, match=why):
        authorize(EXAMPLE / "old.cedar", _READ, schema=EXAMPLE / "schema.cedarschema", entities=tmp_path / "e.json")
