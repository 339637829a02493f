"""Cedar templates and template-linked policies (docs/policy.md, "Templates and links").

A policy set is read with its templates and a links file in the Cedar CLI's JSON; an analysis
is proved for the set as linked, or, with ``every_link``, for every possible link of each
template. cedarpy (Cedar's own evaluator) links the templates as each counterexample names and
confirms it; bad links are errors naming the file and the link.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import cedarpy
import pytest

from cda.cli.main import main
from cda.contracts.status import PropertyStatus
from cda.errors import DSLError
from cda.policy.analyze import Environment, analyze, analyze_files
from cda.policy.authorization import authorize, load_policy_set, policy_set_of
from cda.policy.parse import parse_policies
from cda.policy.syntax import UnsupportedConstruct
from cda.policy.templates import LinkError
from cda.policy.values import EntityUID
from tests.policy_random import Stats, _cedarpy, _linked_cedarpy, check_template_seed, set_a_links

SCHEMA = """
entity Team;
entity User in [Team] = { clearance: Long };
entity Folder;
entity Doc in [Folder] = { owner: User, secret: Bool };
action view appliesTo { principal: User, resource: Doc };
action edit appliesTo { principal: User, resource: Doc };
"""
# the template "share" grants view of a folder to a user or a team; "ban" forbids a team
POLICIES = """
@id("share")
permit(principal in ?principal, action == Action::"view", resource in ?resource);
@id("ban")
forbid(principal in ?principal, action, resource) when { resource.secret };
permit(principal, action, resource) when { principal == resource.owner };
"""
LINKS = [
    {"template_id": "share", "link_id": "eng-reads-specs", "args": {"?principal": 'Team::"eng"', "?resource": 'Folder::"specs"'}},
    {"template_id": "policy1", "link_id": "no-interns", "args": {"?principal": 'Team::"interns"'}},
]
VIEW = Environment("User", EntityUID("Action", "view"), "Doc")


def _files(tmp: Path, policies: str = POLICIES, links: Any = LINKS) -> tuple[Path, Path, Path]:
    (tmp / "p.cedar").write_text(policies)
    (tmp / "s.cedarschema").write_text(SCHEMA)
    (tmp / "links.json").write_text(json.dumps(links))
    return tmp / "p.cedar", tmp / "s.cedarschema", tmp / "links.json"


def _cedarpy_set(links: list[dict[str, Any]], text: str = POLICIES) -> Any:
    return _linked_cedarpy(text, links)


def test_links_in_the_cli_cedarpy_and_json_policy_set_forms_make_the_same_policies(tmp_path: Path) -> None:
    """The Cedar CLI's form, cedarpy's (``new_id``/``values``) and the JSON policy set's
    (``templateLinks``: ``templateId``/``newId``) give the same linked policies; a template is
    named by its position id or its ``@id``."""
    p, s, _ = _files(tmp_path)
    cli = load_policy_set(p, s, None, _files(tmp_path)[2])
    forms = [
        [{"template_id": x["template_id"], "new_id": x["link_id"], "values": x["args"]} for x in LINKS],
        {"templateLinks": [{"templateId": x["template_id"], "newId": x["link_id"],
                            "values": {k: {"__entity": {"type": v.split("::")[0], "id": json.loads(v.split("::")[1])}}
                                       for k, v in x["args"].items()}} for x in LINKS]},
    ]  # fmt: skip
    for form in forms:
        (tmp_path / "other.json").write_text(json.dumps(form))
        other = load_policy_set(p, s, None, tmp_path / "other.json")
        assert other.policies == cli.policies and other.links == cli.links
    linked = {q.id: q for q in cli.policies}
    assert set(linked) == {"policy2", "eng-reads-specs", "no-interns"} and [t.id for t in cli.templates] == ["policy0", "policy1"]
    assert linked["eng-reads-specs"].principal.entity == EntityUID("Team", "eng")
    assert linked["eng-reads-specs"].resource.entity == EntityUID("Folder", "specs")
    assert linked["no-interns"].annotations == {"id": "ban"}  # the template's annotations, as Cedar keeps them


STORE = [
    {"uid": {"type": "User", "id": "ann"}, "attrs": {"clearance": 1}, "parents": [{"type": "Team", "id": "eng"}]},
    {"uid": {"type": "User", "id": "bob"}, "attrs": {"clearance": 0},
     "parents": [{"type": "Team", "id": "eng"}, {"type": "Team", "id": "interns"}]},
    {"uid": {"type": "Team", "id": "eng"}, "attrs": {}, "parents": []},
    {"uid": {"type": "Team", "id": "interns"}, "attrs": {}, "parents": []},
    {"uid": {"type": "Folder", "id": "specs"}, "attrs": {}, "parents": []},
    {"uid": {"type": "Doc", "id": "d1"}, "attrs": {"owner": {"__entity": {"type": "User", "id": "ann"}}, "secret": False},
     "parents": [{"type": "Folder", "id": "specs"}]},
    {"uid": {"type": "Doc", "id": "d2"}, "attrs": {"owner": {"__entity": {"type": "User", "id": "ann"}}, "secret": True},
     "parents": [{"type": "Folder", "id": "specs"}]},
]  # fmt: skip


def test_a_linked_set_answers_as_cedarpy_does_and_an_unlinked_template_grants_nothing(tmp_path: Path) -> None:
    p, s, links = _files(tmp_path)
    (tmp_path / "e.json").write_text(json.dumps(STORE))
    requests = [{"principal": {"type": "User", "id": u}, "action": {"type": "Action", "id": a},
                 "resource": {"type": "Doc", "id": d}, "context": {}}
                for u in ("ann", "bob") for a in ("view", "edit") for d in ("d1", "d2")]  # fmt: skip
    for given, theirs in ((links, _cedarpy_set(LINKS)), (None, POLICIES)):
        ps = load_policy_set(p, s, tmp_path / "e.json", given)
        answers = cedarpy.is_authorized_batch(requests, theirs, json.dumps(STORE), SCHEMA)
        for req, a in zip(requests, answers, strict=True):
            ours = authorize(ps, req)
            assert ours.decision == a.decision.value.lower(), req
            assert sorted(ours.reason) == sorted(a.diagnostics.reasons), req
    # bob is in eng (share) and in interns (ban on secret docs): the link "no-interns" denies d2
    bob_d2 = {"principal": {"type": "User", "id": "bob"}, "action": {"type": "Action", "id": "view"},
              "resource": {"type": "Doc", "id": "d2"}, "context": {}}  # fmt: skip
    denied = authorize(load_policy_set(p, s, tmp_path / "e.json", links), bob_d2)
    assert (denied.decision, denied.reason) == ("deny", ["no-interns"])
    bob_d1 = dict(bob_d2, resource={"type": "Doc", "id": "d1"})
    assert authorize(load_policy_set(p, s, tmp_path / "e.json", links), bob_d1).reason == ["eng-reads-specs"]
    assert authorize(load_policy_set(p, s, tmp_path / "e.json"), bob_d1).decision == "deny"


BAD = [
    ([{"template_id": "nope", "link_id": "x", "args": {}}], "link 'x': no template 'nope' in the policies"),
    ([{"template_id": "share", "link_id": "x", "args": {"?principal": 'Doc::"d"', "?resource": 'Folder::"f"'}}],
     "link 'x': ?principal is Doc::\"d\", of a type the slot does not allow in template policy0 (allowed: Team, User)"),
    ([{"template_id": "ban", "link_id": "x", "args": {"?principal": 'Team::"a"'}},
      {"template_id": "ban", "link_id": "x", "args": {"?principal": 'Team::"b"'}}], "link 'x': the link id 'x' is given twice"),
    ([{"template_id": "ban", "link_id": "policy2", "args": {"?principal": 'Team::"a"'}}], "link 'policy2': the link id 'policy2' is given twice"),
    ([{"template_id": "ban", "link_id": "x", "args": {}}], "link 'x': the slot ?principal of template policy1 is not filled"),
    ([{"template_id": "ban", "link_id": "x", "args": {"?principal": 'Team::"a"', "?resource": 'Doc::"d"'}}],
     "link 'x': the template policy1 has no slot '?resource'"),
    ([{"template_id": "ban", "link_id": "x", "args": {"?principal": 7}}], "link 'x': ?principal: an entity is"),
    ([{"template_id": "ban", "link_id": "x", "args": {"?principal": "Team::eng"}}], "link 'x': ?principal: not an entity"),
    ([{"template_id": "ban", "args": {}}], "link 0: no link id"),
    ({"links": []}, "a links file is a JSON list of links"),
]  # fmt: skip


@pytest.mark.parametrize("links, message", BAD, ids=[m.split(":")[-1].strip()[:30] for _, m in BAD])
def test_a_bad_link_is_an_error_naming_the_file_and_the_link(tmp_path: Path, links: Any, message: str) -> None:
    p, s, f = _files(tmp_path, links=links)
    with pytest.raises(LinkError) as exc:
        load_policy_set(p, s, None, f)
    assert exc.value.filename == str(f) and message in exc.value.message
    out, err = io.StringIO(), io.StringIO()
    code = main(["policy", "analyze", "always-denies", str(p), "--schema", str(s), "--links", str(f)], stdout=out, stderr=err)
    assert code == 2 and f"{f}: error: {message}" in err.getvalue() and "Traceback" not in err.getvalue()
    assert out.getvalue() == ""


def test_cedarpy_refuses_the_links_cda_refuses_without_a_schema() -> None:
    """The oracle agrees on what is no link: an unknown template, a link id given twice."""
    for links in (BAD[0][0], BAD[2][0], BAD[3][0], BAD[4][0]):
        with pytest.raises(ValueError):
            _cedarpy_set(links)


def test_a_slot_outside_the_scope_is_refused_by_name() -> None:
    with pytest.raises(UnsupportedConstruct, match="template slot in a condition"):
        policy_set_of(("permit(principal, action, resource) when { principal == ?principal };", "t.cedar"))
    with pytest.raises(DSLError, match=r"expected the slot \?resource"):
        policy_set_of(("permit(principal, action, resource in ?principal);", "t.cedar"))
    with pytest.raises(UnsupportedConstruct, match="template slot"):  # a reader that takes no templates
        parse_policies("permit(principal == ?principal, action, resource);")


def _confirm(res: Any, prop: str, texts: list[str], given: list[dict[str, Any]]) -> None:
    """cedarpy links set A's templates as given plus as the counterexample names, and its
    answers to the counterexample's request over its store violate ``prop``."""
    cex = res.counterexample
    extra = set_a_links(cex, prop)
    pols = [_cedarpy_set(given + extra, texts[0]), *texts[1:]]
    assert _cedarpy(prop, pols, [cex["request"]], cex["entities"], SCHEMA) == [True], cex


SECRET = "permit(principal, action, resource) when { resource.secret };"


@pytest.mark.parametrize("backend", ["z3", "clingo"])
def test_can_any_link_grant_a_secret_doc_is_decided_and_the_link_named(tmp_path: Path, backend: str) -> None:
    """Can any link of 'share' ever grant view of a secret doc?" As linked (no link of share)
    the set is disjoint from SECRET; over every link it is not: the counterexample names the
    link (a user or team, a folder or doc) and cedarpy, linking it, allows the secret doc. A
    guarded template holds over every link."""
    text = POLICIES.replace("when { principal == resource.owner }", "when { principal == resource.owner && !resource.secret }")
    p, s, f = _files(tmp_path, policies=text, links=[])
    (tmp_path / "secret.cedar").write_text(SECRET)
    as_linked = analyze_files("disjoint", [p, tmp_path / "secret.cedar"], schema=s, action="view", backend=backend,
                              links=[f, None])  # fmt: skip
    assert [r.status for r in as_linked] == [PropertyStatus.HOLDS]
    assert "the policy set as linked (0 link(s)" in as_linked[0].proved_for
    [every] = analyze_files("disjoint", [p, tmp_path / "secret.cedar"], schema=s, action="view", backend=backend,
                            every_link=True)  # fmt: skip
    assert every.status is PropertyStatus.FAILS and "every link of the 2 template(s)" in every.proved_for
    links = every.counterexample["links"]["A"]  # type: ignore[index]
    share = next(x for x in links if x["template_id"] == "share")  # named by its @id, as the Cedar CLI names it
    assert set(share["args"]) == {"?principal", "?resource"} and every.answers["A"]["reason"] == [share["link_id"]]
    _confirm(every, "disjoint", [text, SECRET], [])
    guarded = text.replace("resource in ?resource);", "resource in ?resource) unless { resource.secret };")
    (tmp_path / "g.cedar").write_text(guarded)
    [holds] = analyze_files("disjoint", [tmp_path / "g.cedar", tmp_path / "secret.cedar"], schema=s, action="view",
                            backend=backend, every_link=True)  # fmt: skip
    assert holds.status is PropertyStatus.HOLDS, holds.counterexample


@pytest.mark.parametrize("backend", ["z3", "clingo"])
def test_every_link_over_a_given_store_names_entities_of_that_store(tmp_path: Path, backend: str) -> None:
    """Over a given store, the template "share" alone, unlinked, denies everything; some link of
    it allows a request, and the link the counterexample names is of the store's entities."""
    share = POLICIES.split("@id(\"ban\")")[0]
    p, s, _ = _files(tmp_path, policies=share)
    (tmp_path / "e.json").write_text(json.dumps(STORE))
    ps = load_policy_set(p, s, tmp_path / "e.json")
    given = (ps.entities, "e.json")
    assert analyze("always-denies", [ps], VIEW, backend=backend, store=given).status is PropertyStatus.HOLDS  # type: ignore[arg-type]
    every = analyze("always-denies", [ps], VIEW, backend=backend, store=given, every_link=True)  # type: ignore[arg-type]
    assert every.status is PropertyStatus.FAILS and "entity store e.json as given" in every.proved_for
    [link] = every.counterexample["links"]["S"]  # type: ignore[index]
    ids = {f'{e["uid"]["type"]}::"{e["uid"]["id"]}"' for e in STORE}
    assert set(link["args"].values()) <= ids and "entities" not in every.counterexample  # type: ignore[operator]
    assert _cedarpy("always-denies", [_cedarpy_set([link], share)], [every.counterexample["request"]],  # type: ignore[index]
                    json.dumps(STORE), SCHEMA) == [True]


def test_the_cli_and_the_job_take_the_links_the_same_way(tmp_path: Path) -> None:
    """``cda policy analyze --links … --every-link`` prints the link; a ``policy-analysis`` job
    with ``params.links`` and ``every_link`` gives the same environments as the Python API."""
    p, s, f = _files(tmp_path)
    (tmp_path / "secret.cedar").write_text(SECRET)
    out, err = io.StringIO(), io.StringIO()
    args = ["policy", "analyze", "disjoint", str(p), str(tmp_path / "secret.cedar"), "--schema", str(s),
            "--action", "view", "--links", str(f), "--links", str(f), "--every-link"]  # fmt: skip
    assert main(args, stdout=out, stderr=err) == 2  # the second file has no template 'share'
    assert "no template 'share'" in err.getvalue()
    assert main([*args[:-3], *args[-1:]], stdout=out, stderr=err) == 1, err.getvalue()  # the first file's links
    assert "links (A): [" in out.getvalue() and "every link of the 2 template(s)" in out.getvalue()
    manifest = tmp_path / "m.toml"
    manifest.write_text('[[job]]\nkind = "policy-analysis"\nfile = "p.cedar"\n'
                        'params = { analysis = "disjoint", other = "secret.cedar", schema = "s.cedarschema", '
                        'action = "view", links = "links.json", every_link = true }\n', encoding="utf-8")  # fmt: skip
    code = main(["jobs", "run", str(manifest)], stdout=io.StringIO(), stderr=io.StringIO())
    (line,) = [json.loads(x) for x in (tmp_path / "m.results" / "results.jsonl").read_text().splitlines()]
    assert code == 1 and line["result"]["status"] == "fails"
    api = analyze_files("disjoint", [p, tmp_path / "secret.cedar"], schema=s, action="view", links=[f, None],
                        every_link=True)  # fmt: skip
    assert line["result"]["environments"] == [r.to_json() for r in api]
    _confirm(api[0], "disjoint", [POLICIES, SECRET], LINKS)


@pytest.mark.parametrize("backend", ["z3", "clingo"])
def test_random_templates_and_links_against_cedarpy_and_sampling(backend: str) -> None:
    """tests/policy_random.py's templates: every FAILS (as linked and every link) confirmed by
    cedarpy linking as the counterexample names; no HOLDS contradicted by sampled stores,
    requests and links; clingo's verdicts equal z3's."""
    total = Stats()
    for seed in range(4):
        stats = check_template_seed(seed, stores=1, samples=4, backend=backend, against=None if backend == "z3" else "z3")
        assert not stats.problems, stats.problems[0]
        total.add(stats)
    assert total.fails == total.fails_confirmed and total.holds_contradicted == 0 and total.unknown == 0
    # clingo refuses by name what it cannot ground (64-bit longs, patterns): z3 decides those
    assert total.analyses + total.refused == 4 * 2 * 7 and total.analyses >= (20 if backend == "z3" else 8)


def test_authorize_and_a_request_batch_take_the_links(tmp_path: Path) -> None:
    """``cda policy authorize --links`` and a ``request-batch`` job with ``params.links`` answer
    with the linked policies, as cedarpy does."""
    p, s, f = _files(tmp_path)
    (tmp_path / "e.json").write_text(json.dumps(STORE))
    req = {"principal": {"type": "User", "id": "bob"}, "action": {"type": "Action", "id": "view"},
           "resource": {"type": "Doc", "id": "d1"}, "context": {}}  # fmt: skip
    (tmp_path / "r.json").write_text(json.dumps(req))
    (tmp_path / "rs.json").write_text(json.dumps([req]))
    theirs = cedarpy.is_authorized(req, _cedarpy_set(LINKS), json.dumps(STORE), SCHEMA)
    assert (theirs.decision.value, theirs.diagnostics.reasons) == ("Allow", ["eng-reads-specs"])
    out = io.StringIO()
    args = ["policy", "authorize", str(p), "--schema", str(s), "--entities", str(tmp_path / "e.json"),
            "--request", str(tmp_path / "r.json"), "--json"]  # fmt: skip
    assert main([*args, "--links", str(f)], stdout=out, stderr=io.StringIO()) == 0
    assert json.loads(out.getvalue())["reason"] == ["eng-reads-specs"]
    out = io.StringIO()
    assert main(args, stdout=out, stderr=io.StringIO()) == 0 and json.loads(out.getvalue())["decision"] == "deny"
    manifest = tmp_path / "m.toml"
    manifest.write_text('[[job]]\nkind = "request-batch"\nfile = "p.cedar"\nparams = { requests = "rs.json", '
                        'schema = "s.cedarschema", entities = "e.json", links = "links.json" }\n', encoding="utf-8")  # fmt: skip
    assert main(["jobs", "run", str(manifest)], stdout=io.StringIO(), stderr=io.StringIO()) == 0
    (line,) = [json.loads(x) for x in (tmp_path / "m.results" / "results.jsonl").read_text().splitlines()]
    assert [a["reason"] for a in line["result"]["answers"]] == [["eng-reads-specs"]]
