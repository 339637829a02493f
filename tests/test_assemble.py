"""One structural path from every input to one GroundProblem (cda/encodings/assemble.py).

Errors name the field a mistake was written in, with a line and column inside it; clause forms
that regexes over an assembled text used to miss now reach their verifier; and no module under
cda/ reads the DSL with a regular expression.

Oracles: the location of each error is worked out by hand from the input strings; temporal
verdicts are checked against integer arithmetic on the pinned times; Ken support against the
edges of the example's Ken file.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest
from pydantic import ValidationError

import cda
from cda.actions.runner import run_action
from cda.adapters.action_entry import load_inputs, run_inputs
from cda.contracts.action import CDAInputs
from cda.encodings.assemble import Origin, Piece, assemble
from cda.encodings.parse import parse_problem
from tests.conftest import ROOT

EXAMPLE = ROOT / "examples" / "action" / "service_outage.json"


def _outage(**update: object) -> CDAInputs:
    inputs = load_inputs(EXAMPLE)
    return CDAInputs.model_validate({**inputs.model_dump(mode="json"), **update})


def _error(inputs: CDAInputs) -> str:
    run = run_inputs(inputs, None, base_dir=EXAMPLE.parent)
    assert run.outputs.status == "failed" and run.events[-1].type == "action_failed"
    return run.events[-1].error  # type: ignore[union-attr,no-any-return]


# ---- errors name their origin ---------------------------------------------------------------
def test_an_unfinished_hard_clause_is_reported_at_its_own_field_not_the_next_one() -> None:
    # a concatenated text let "slow(web) and" run on into the soft clause's line, which was blamed
    error = _error(_outage(constraints={"hard": ["slow(web) and"],
                                        "soft": [{"clause": "not down(cache)", "weight": 1.5}]}))
    assert error.startswith("constraints.hard[0]:1:14: syntax error: unexpected end of input"), error
    assert "    slow(web) and\n" in error and "constraints.soft" not in error


def test_a_type_error_in_a_claim_names_the_claim_and_its_column() -> None:
    error = _error(_outage(goals={"kind": "prove", "claims": ["slow(api)", "slow(api) or down(nowhere)"]}))
    # "down(nowhere)": the argument starts at column 19 of the claim
    assert error.startswith("goals.claims[1]:1:19: type error: 'nowhere' is not in domain Service"), error


def test_an_error_in_an_adopted_observation_names_its_line_and_column_there() -> None:
    obs = [{"kind": "span", "source": "pager:1", "excerpt": "api looks slow\nobserve slow(api) and slow(zz)"}]
    error = _error(_outage(observations=obs))
    # line 2 of the excerpt; "zz" at column 28 of that line
    assert error.startswith("observations[0]:2:28: type error: 'zz' is not in domain Service"), error
    assert "    observe slow(api) and slow(zz)\n" in error


def test_an_error_in_the_dsl_keeps_its_own_line() -> None:
    inputs = _outage()
    error = _error(inputs.model_copy(update={"dsl": inputs.dsl + "hard: down(web) and\n"}))
    assert error.startswith(f"dsl:{inputs.dsl.count(chr(10)) + 1}:"), error


def test_python_clause_strings_are_pieces_with_their_own_names() -> None:
    with pytest.raises(cda.DSLSyntaxError) as info:
        cda.check("hyp a\nhard: a", hard=["a or", "a"], soft=["not a"])
    assert str(info.value).startswith("hard#1:1:5: syntax error"), str(info.value)
    with pytest.raises(cda.DSLSyntaxError, match="takes no weight"):
        cda.check("hyp a", hard=["a weight 2"])


def test_every_piece_keeps_its_origin_and_unnamed_pieces_are_named_by_their_line() -> None:
    out = assemble(parse_problem("hyp a\nobservable w\n", "dsl"), [
        Piece("observe", "observe w", Origin("observations[0]", 3), line=3, source="x\ny\nobserve w"),
        Piece("prove", "a or w", Origin("goals.claims[0]"), line=4),
    ])
    assert [c.name for c in out.gp.clauses] == ["observe@3"] and [c.name for c in out.gp.claims] == ["prove@4"]
    assert out.gp.claims[0].text == "a or w"
    assert [(p.origin.field, p.origin.line, p.written) for p in out.placed()][2:] == [
        ("observations[0]", 3, "w"), ("goals.claims[0]", 1, "a or w")]


# ---- clause forms the regexes missed reach their verifier ------------------------------------
def test_a_parenthesised_pin_and_an_observed_before_reach_the_temporal_verifier(tmp_path: Path) -> None:
    # the old pin regex wanted "time(" first and nothing after the unit; the old clause regex cut
    # an unnamed observe at its first colon ("observe before(event" ...): both were never checked
    dsl = ("event deploy, alert\nhyp bad\nobservable paged\n"
           "hard t1: (time(event:deploy) = 100)\nhard t2: 1 h = time(event:alert)\n"
           "observe before(event:deploy, event:alert)\nhard: paged iff bad\nobserve paged\n")
    run = run_action(CDAInputs(problem="deploy before alert?", dsl=dsl, goals={"kind": "prove", "claims": ["bad"]}),
                     out_dir=tmp_path)
    verifiers = json.loads((tmp_path / run.outputs.action_id / "cda_plan" / "verifiers.json").read_text())
    temporal = [v for v in verifiers if v["verifier"] == "temporal"]
    deploy, alert = 100, 3600  # the pins, by hand
    assert [(v["claim"], v["status"]) for v in temporal] == [
        ("before(event:deploy, event:alert)", "passed" if deploy < alert else "failed")]
    assert temporal[0]["data"]["events"] == {"alert": alert, "deploy": deploy}


def test_a_parenthesised_claim_atom_reaches_the_ken_verifier() -> None:
    # "(depends(api, auth))" is the atom depends(api, auth); the old atom regex refused it
    run = run_inputs(_outage(goals={"kind": "prove", "claims": ["(depends(api, auth))"]}), None, base_dir=EXAMPLE.parent)
    ken = [v for v in run.trace["verifiers"] if v["verifier"] == "ken" and "depends" in v["claim"]]
    assert [(v["status"], v["data"]["edges"]) for v in ken] == [("passed", [["api", "depends", "auth"]])]


@pytest.mark.parametrize("backend", ["z3", "clingo"])
def test_an_action_reads_the_ken_lines_of_its_dsl_as_cda_solve_does(tmp_path: Path, backend: str) -> None:
    """An Action's dsl once had its ``ken "…"`` lines ignored: REFUTED where ``cda solve`` on the
    same text said SUPPORTED, with no caveat. The oracle is cda.api.solve on that text."""
    from cda import api

    graph = tmp_path / "graph"
    graph.mkdir()
    (graph / "k.json").write_bytes((EXAMPLE.parent / "ken_services.json").read_bytes())
    dsl = ('domain Service = {api, auth, db}\npred depends(Service, Service)\nhyp x\n'
           'ken "graph/k.json"\nhard: x iff depends(api, auth)\n')
    (tmp_path / "p.cda").write_text(dsl + "goal prove x\n", encoding="utf-8")
    solved = api.solve(tmp_path / "p.cda", backend=backend)
    inputs = CDAInputs(problem="is x so?", dsl=dsl, goals={"kind": "prove", "claims": ["x"]}, backend=backend)
    run = run_inputs(inputs, None, base_dir=tmp_path)
    assert [v.status for v in run.outputs.verdicts if v.claim == "prove x"] == ["supported"], run.outputs.verdicts
    assert [v.status.lower() for v in solved.verdicts] == ["supported"], solved.verdicts
    missing = CDAInputs(problem="is x so?", dsl=dsl.replace("graph/k.json", "graph/none.json"),
                        goals={"kind": "prove", "claims": ["x"]}, backend=backend)
    assert "dsl:4:5" in _error(missing)  # a file that is not there: named where its line is


def test_an_observed_conjunction_names_its_symptoms_for_ken_coverage() -> None:
    # the old literal regex read only a lone atom: "slow(api) and slow(web)" named no symptom,
    # and with no symptom the coverage check had nothing to cover
    dsl = ("domain Service = {api, web, db}\nhyp down(Service)\nobservable slow(Service)\n"
           "hard: forall s in Service: slow(s) implies down(s) or down(db)\nobserve slow(api) and slow(web)\n")
    ken = {"nodes": [{"id": "api"}, {"id": "web"}, {"id": "db"}],
           "edges": [{"source": "api", "relation": "depends", "target": "db"},
                     {"source": "web", "relation": "depends", "target": "db"}]}
    run = run_action(CDAInputs(problem="why slow?", dsl=dsl, ken=ken))
    plan = next(e.payload for e in run.events if e.type == "action_checkpoint" and e.kind == "plan_delta")  # type: ignore[union-attr]
    # db is Ken's candidate cause of both symptoms, so its abducible is tried first
    assert plan["frontier_seeds"][0] == "down(db)", plan


# ---- no regex reads the DSL ------------------------------------------------------------------
#: modules under cda/ that use ``re``, each with what its patterns read (none of it DSL)
REGEX_ALLOWED = {
    "cda/encodings/fastparse.py": "the DSL reader itself: its tokenizer is where DSL text becomes structure",
    "cda/encodings/format.py": "the printer checks that a name taken from a syntax tree is spellable",
    "cda/diagnosis/bench_import.py": "ISCAS .bench netlists",
    "cda/verifiers/coverage.py": "words of free-text observations, matched against Ken labels",
    "cda/verifiers/arithmetic.py": "numeric equations in success criteria and free-text observations",
    "cda/verifiers/llm_offline.py": "the offline stand-in for an LLM judge reads a claim as words, as a model does",
    "cda/adapters/llm_http.py": "secrets (a bearer token, sk-..., api_key=) in a provider's error page, redacted before it is kept",
    "cda/verifiers/abstain.py": "numbers and Ken ids in free-text abstention inputs, and input locations",
    "cda/contracts/abstain.py": "numbers and their units in free-text observations and report texts (seed 001 grounding)",
    "cda/verifiers/redact.py": "personal data (emails, phone numbers, IBANs) in free text",
    "cda/cli/receipts.py": "receipt hashes given on the command line",
    "cda/cli/main.py": "a command's own compiler-style error line (file:line:col: kind: message), for --json",
    "cda/diagnosis/names.py": "runs of digits in gate names, compared as numbers",
    "cda/service/streams.py": "action ids in stream paths and the Last-Event-ID header",
    "cda/conductor/arithmetic.py": "a number literal's exponent read off its own text, to refuse a huge number "
                                   "before it is built (Python's parser gives only the float, inf)",
    "cda/operations/demands.py": "the gate's scan for ken \"…\" lines, which must refuse a path before anything parses "
                                 "the text (a parse could load the file); what it finds is a path, never structure",
    "cda/operations/artifacts.py": "action ids in the receipt audit's problem texts",
    "cda/service/providers.py": "sub-action source names (file names of a provider's folder)",
    "cda/fol/syntax.py": "first-order logic text, a language of its own",
    "cda/contracts/conductor.py": "the conductor's fact literals (pred(arg, ...)) and obligation type names, not DSL",
    "cda/conductor/tooling.py": "condition calls of a tool registry (name(arg, ...))",
    "cda/conductor/tools.py": "Ken ids that can be fact arguments, and an exact number's text",
    "cda/conductor/translate.py": "the conductor's rule grammar for requests in words, and a fenced LLM reply",
    "cda/conductor/conduct.py": "name=value pairs in an answer to a CLARIFY",
    "cda/conductor/usertools.py": "an interpreter's version suffix (python3.12) and an MCP tool's name as an obligation type",
    "cda/conductor/mcp_transport.py": "the id at the head of an MCP reply refused as too large, not DSL",
    "cda/fol/parse.py": "the .fol file format (premise/claim/domain lines): first-order logic, a language of its own",
    "cda/fol/fastparse.py": "the first-order reader itself: its tokenizer (fol.lark's terminals) is where formula text becomes structure",
    "cda/policy/lexer.py": "the tokenizer of Cedar policy and schema text, a language of its own",
    "cda/policy/entities.py": "Cedar's decimal, datetime and duration literals (their grammar is a regular language)",
    "cda/policy/evaluate.py": "Cedar's `like` patterns, run as regular expressions",
    "cda/policy/cedar_tests.py": "the construct a refusal message names, for the per-construct share",
    "cda/guardian/decision.py": "the guardian's reason names (policy:<id>), not DSL",
    "cda/guardian/proposal.py": "parameter names and decimal strings of a proposed action's JSON, not DSL",
    "cda/guardian/schema_check.py": "reads an upstream tool schema's own regexes (re's parser), not DSL",
    "cda/terminal_text.py": "one character class of control characters to escape in printed text, scanned in C "
                            "(never structure: no text is parsed)",
    "cda/guardian/policies.py": "the policy store's TOML text (where a policy's dsl string starts, tomllib's error position) "
                                "and its names; the DSL itself goes to cda.api",
    "cda/ken/graphml_scan.py": "GraphML's everyday body recognised (not parsed) by one pattern, anything else left to "
                               "the XML parser; not DSL",
}


def _uses_re(path: Path) -> bool:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import) and any(a.name == "re" for a in node.names):
            return True
        if isinstance(node, ast.ImportFrom) and node.module == "re":
            return True
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "__import__":
            return True
    return False


def test_no_module_under_cda_reads_the_dsl_with_a_regex() -> None:
    using = {p.relative_to(ROOT).as_posix() for p in sorted((ROOT / "cda").rglob("*.py")) if _uses_re(p)}
    unexplained = using - set(REGEX_ALLOWED)
    assert not unexplained, f"regexes in {sorted(unexplained)}: read the syntax tree, or add a reason here"
    stale = set(REGEX_ALLOWED) - using
    assert not stale, f"{sorted(stale)} no longer use re: drop them from the allow-list"
    for module in ("cda/actions/checks.py", "cda/actions/problem.py", "cda/verifiers/ken_evidence.py",
                   "cda/verifiers/units_check.py", "cda/verifiers/temporal.py", "cda/encodings/assemble.py"):
        assert module not in REGEX_ALLOWED


def test_the_regex_scan_sees_every_way_of_importing_re(tmp_path: Path) -> None:
    for text in ("import re\n", "import os, re as r\n", "from re import compile\n", "m = __import__('re')\n"):
        (tmp_path / "m.py").write_text(text)
        assert _uses_re(tmp_path / "m.py"), text
    (tmp_path / "m.py").write_text("import json\nregex = 're'\n")
    assert not _uses_re(tmp_path / "m.py")


def test_a_soft_weight_from_json_is_exact_and_within_the_dsl_range() -> None:
    from fractions import Fraction

    from cda.actions.problem import build

    inputs = _outage(constraints={"soft": [{"clause": "not down(cache)", "weight": 0.1}]})
    soft = {s.name: s.weight for s in build(inputs, None).assembled.gp.soft}
    assert soft["input_soft_0"] == Fraction(1, 10)  # the decimal written, not the float's binary value
    with pytest.raises(ValidationError, match="out of range"):  # refused where every door passes: the contract
        _outage(constraints={"soft": [{"clause": "not down(cache)", "weight": 1e300}]})
    with pytest.raises(ValidationError, match="got True"):  # JSON's true is no weight
        CDAInputs.model_validate({"dsl": "hyp a", "constraints": {"soft": [{"clause": "a", "weight": True}]}})


def test_a_bound_beyond_the_numeric_range_is_a_caveat_of_the_action() -> None:
    """The grounder's notes (a bound the ±10^9 range decides alone) reach an Action's outputs,
    as they reach ``cda.solve``'s result."""
    dsl = "metric m : s\nhyp a\nhard: a or value(metric:m) >= 5e9\n"
    run = run_action(CDAInputs(problem="range", dsl=dsl))
    assert any("numeric range" in c and "5000000000 s" in c for c in run.outputs.caveats), run.outputs.caveats
