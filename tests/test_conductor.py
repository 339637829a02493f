"""The conductor (seed 002): selection order, every escalation path, the verify loop, the IR
database (resume after kill -9, foreign files), determinism, and CDA's own tools."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from cda.cli.main import main
from cda.conductor.arithmetic import evaluate, recompute
from cda.conductor.conduct import Conductor, render_tree
from cda.conductor.irdb import IRDatabase
from cda.conductor.registry import load_registry, registry_from_data
from cda.conductor.tooling import ConductorError, Tool, Toolbox, ToolContext, ToolError
from cda.conductor.tools import builtin_toolbox
from cda.conductor.translate import LLMTranslatorIn, RuleTranslatorIn
from cda.conductor.verify import contradictions
from cda.contracts.conductor import Assertion, ObligationsDoc, ObligationStatus, ToolRunStatus
from cda.errors import CDAError
from cda.operations.conductor_tools import cda_toolbox
from tests.timing import HANG, wait_until

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"


def _tool(name: str, satisfies: list[str], **kw: Any) -> dict[str, Any]:
    spec = {"name": name, "satisfies": satisfies, "reliability": "high", "cost": "low", "latency_ms": 1}
    spec.update(kw)
    return spec


def _conductor(tools: list[dict[str, Any]], toolbox: Toolbox, db: IRDatabase | None = None, **kw: Any) -> Conductor:
    registry = registry_from_data({"tool": tools}, toolbox)
    return Conductor(db or IRDatabase(":memory:"), registry, context=ToolContext(ROOT), **kw)


def _answers(value: str) -> Tool:
    return Tool(lambda inputs, ctx: {"value": value})


def _fails(message: str) -> Tool:
    def run(inputs: Mapping[str, Any], ctx: ToolContext) -> dict[str, Any]:
        raise ToolError(message)

    return Tool(run)


def _translator(*obligations: dict[str, Any], facts: tuple[str, ...] = ()) -> Any:
    return lambda utterance: ObligationsDoc.model_validate({"obligations": list(obligations), "facts": list(facts)})


# ---------------------------------------------------------------- selection order
_RELIABILITY = {"high": 0, "medium": 1, "low": 2}
_COST = {"tiny": 0, "low": 1, "medium": 2, "high": 3}


@st.composite
def _registries(draw: Any) -> tuple[list[dict[str, Any]], set[str]]:
    names = draw(st.lists(st.from_regex(r"[a-z]{1,3}", fullmatch=True), min_size=1, max_size=8, unique=True))
    tools = []
    for name in names:
        tools.append(_tool(
            name, draw(st.sampled_from([["t"], ["t", "u"], ["u"]])),
            impl="echo",
            reliability=draw(st.sampled_from(list(_RELIABILITY))),
            cost=draw(st.sampled_from(list(_COST))),
            latency_ms=draw(st.integers(0, 3)),
            inputs=draw(st.sampled_from([[], ["x"], ["y"], ["x", "y"]])),
            preconditions=draw(st.sampled_from([[], ["open"]])),
        ))
    given_inputs = draw(st.sets(st.sampled_from(["x", "y"])))
    return tools, given_inputs


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_registries(), st.booleans())
def test_the_chosen_tool_is_the_first_in_the_fixed_order_among_the_eligible(
    drawn: tuple[list[dict[str, Any]], set[str]], is_open: bool
) -> None:
    tools, given_inputs = drawn
    toolbox = Toolbox(
        tools={"echo": Tool(lambda inputs, ctx: {"ok": True})},
        preconditions={"open": lambda i, o, c, a: None if is_open else "closed"},
    )
    c = _conductor(tools, toolbox, translator_in=_translator({"type": "t", "inputs": {k: 1 for k in given_inputs}}))
    trace = c.handle("go")
    # the oracle: filter and sort by plain tables, not by the contracts' ordered enums
    eligible = [
        t for t in tools
        if "t" in t["satisfies"] and set(t["inputs"]) <= given_inputs and (is_open or not t["preconditions"])
    ]
    eligible.sort(key=lambda t: (_RELIABILITY[t["reliability"]], _COST[t["cost"]], t["latency_ms"], t["name"]))
    runs = [r.tool for r in trace.tool_runs]
    if eligible:
        assert runs == [eligible[0]["name"]]
        assert trace.obligations[0].status is ObligationStatus.RESOLVED
    else:
        assert runs == []
        kinds = {o.type for o in trace.obligations[1:]}
        assert kinds == ({"clarify"} if any("t" in t["satisfies"] for t in tools) else {"discover_op"})


# ---------------------------------------------------------------- escalation paths
def test_a_failing_candidate_escalates_to_the_next_and_its_answer_is_never_used() -> None:
    toolbox = builtin_toolbox().merged(Toolbox(tools={"bad": _answers("not a number"), "boom": _fails("down"),
                                                      "good": _answers("42")}))
    tools = [
        _tool("a_bad", ["n"], impl="bad", postconditions=["exact(value)"]),
        _tool("b_boom", ["n"], impl="boom"),
        _tool("c_good", ["n"], impl="good", postconditions=["exact(value)"], reliability="low"),
    ]
    trace = _conductor(tools, toolbox, translator_in=_translator({"type": "n"})).handle("n please")
    assert [(r.tool, r.status) for r in trace.tool_runs] == [
        ("a_bad", ToolRunStatus.POSTCONDITION_FAILED), ("b_boom", ToolRunStatus.ERROR), ("c_good", ToolRunStatus.OK)]
    assert [a.value for a in trace.assertions if a.key == "value"] == ["42"]  # the failed one wrote nothing
    assert trace.status == "answered" and "42" in trace.answer and "not a number" not in trace.answer


def test_every_candidate_failing_is_justify_failure() -> None:
    toolbox = Toolbox(tools={"boom": _fails("disk on fire"), "bad": _answers("x")},
                      postconditions=builtin_toolbox().postconditions)
    tools = [_tool("one", ["n"], impl="boom"), _tool("two", ["n"], impl="bad", postconditions=["exact(value)"])]
    trace = _conductor(tools, toolbox, translator_in=_translator({"type": "n"})).handle("n")
    root, child = trace.obligations
    assert root.status is ObligationStatus.FAILED
    assert child.type == "justify" and child.parent_id == root.id
    assert "disk on fire" in child.inputs["reason"] and "exact(value)" in child.inputs["reason"]
    assert trace.status == "unanswered" and trace.answer.startswith("JUSTIFY(failure)")


def test_no_tool_for_a_type_is_discover_op() -> None:
    trace = _conductor([_tool("t", ["other"], impl="x")], Toolbox(tools={"x": _answers("1")}),
                       translator_in=_translator({"type": "weather"})).handle("weather?")
    assert [o.type for o in trace.obligations] == ["weather", "discover_op"]
    assert trace.obligations[0].status is ObligationStatus.ESCALATED
    assert trace.obligations[1].inputs["obligation_type"] == "weather"
    assert "DISCOVER_OP" in trace.answer and trace.tool_runs == []


def test_missing_inputs_and_failed_preconditions_are_clarify() -> None:
    toolbox = builtin_toolbox()
    c = Conductor(IRDatabase(":memory:"), load_registry(None, toolbox), context=ToolContext(ROOT))
    trace = c.handle("query data.sqlite: DELETE FROM t")
    clarify = trace.obligations[1]
    assert clarify.type == "clarify" and "select_only(sql)" in clarify.inputs["reason"]
    assert "file(database)" in clarify.inputs["reason"]
    c2 = _conductor([_tool("t", ["n"], impl="x", inputs=["depth"])], Toolbox(tools={"x": _answers("1")}),
                    translator_in=_translator({"type": "n"}))
    trace = c2.handle("n")
    assert trace.obligations[1].type == "clarify" and trace.obligations[1].inputs["missing"] == ["depth"]


def test_an_input_missing_from_the_obligation_is_taken_from_the_ir() -> None:
    toolbox = Toolbox(tools={"make": Tool(lambda i, c: {"depth": 7}),
                             "use": Tool(lambda i, c: {"value": str(i["depth"] * 2)})})
    tools = [_tool("maker", ["make"], impl="make"), _tool("user", ["use"], impl="use", inputs=["depth"])]
    trace = _conductor(tools, toolbox, translator_in=_translator({"type": "make"}, {"type": "use"})).handle("x")
    assert [r.inputs for r in trace.tool_runs] == [{}, {"depth": 7}]
    assert trace.status == "answered" and "14" in trace.answer


def test_unreadable_requests_are_clarify_and_a_malformed_llm_reply_falls_back_to_the_rules() -> None:
    doc = RuleTranslatorIn()("frobnicate the flux capacitor")
    assert [o.type for o in doc.obligations] == ["clarify"]
    replies = {
        "not json": "sure! here you go",
        "wrong shape": json.dumps({"obligations": [{"type": "Compute!", "inputs": {}}]}),
        "a float": json.dumps({"obligations": [{"type": "compute", "inputs": {"x": 0.1}}]}),
        "extra": json.dumps({"obligations": [{"type": "compute"}], "confidence": 0.9}),
    }
    for label, reply in replies.items():
        translator = LLMTranslatorIn(lambda system, user, r=reply: r)
        doc = translator("anything")
        # the rules read nothing either: the failure alone, never a guess
        assert [o.type for o in doc.obligations] == ["translation_failed"], label
        assert "replies were refused twice" in doc.obligations[0].inputs["reason"], label
        assert translator.last_receipt is not None and len(translator.last_receipt["attempts"]) == 2, label
        assert translator.last_receipt["translator"].startswith("rules"), label
    good = LLMTranslatorIn(lambda s, u: "```json\n" + json.dumps(
        {"obligations": [{"type": "compute", "inputs": {"expression": "1/3 + 1/6"}}]}) + "\n```")
    trace = Conductor(IRDatabase(":memory:"), translator_in=good).handle("half, please")
    assert trace.status == "answered" and "= 1/2" in trace.answer

    def down(system: str, user: str) -> str:
        raise OSError("connection refused")

    trace = Conductor(IRDatabase(":memory:"), translator_in=LLMTranslatorIn(down)).handle("compute 2 * 3")
    assert trace.status == "translation_failed" and "= 6" in trace.answer  # the rules answered instead, said so
    assert trace.answer.startswith("TRANSLATION_FAILED: the model translator failed: connection refused")
    receipt = next(e for e in trace.events if e.kind == "translated").body["receipt"]
    assert "connection refused" in receipt["attempts"][0]["problem"]


def test_the_rule_grammar_reads_each_shipped_type() -> None:
    doc = RuleTranslatorIn()(
        "given not up(db), related_to(db, auth); compute 2*3; solve p.cda, then prove c.fol; diagnose c.bench with o.txt; "
        "run in.json; query d.sqlite: SELECT CASE WHEN a THEN 1 END FROM t; look up db"
    )
    assert [o.type for o in doc.obligations] == ["compute", "solve", "prove", "diagnose", "run_action", "query", "lookup"]
    assert doc.facts == ["not up(db)", "related_to(db, auth)"]
    assert doc.obligations[5].inputs["sql"] == "SELECT CASE WHEN a THEN 1 END FROM t"


# ---------------------------------------------------------------- the verify loop
def test_verify_math_catches_a_calculator_that_lies() -> None:
    lying = Tool(lambda i, c: {"value": "3"}, lambda i, o, c: None)  # its own recheck agrees with itself
    toolbox = builtin_toolbox().merged(Toolbox(tools={"calculator": Tool(lying.run)}))
    trace = Conductor(IRDatabase(":memory:"), load_registry(None, toolbox)).handle("compute 1 + 1")
    assert trace.verifications[0].kind == "math" and not trace.verifications[0].ok
    assert trace.status == "uncertain" and "UNCERTAIN" in trace.answer and "= 3" not in trace.answer
    assert trace.obligations[-1].type == "justify"


def test_verify_rules_reruns_a_tool_without_its_own_recheck() -> None:
    calls = iter(range(100))
    toolbox = Toolbox(tools={"flaky": Tool(lambda i, c: {"value": str(next(calls))})})
    trace = _conductor([_tool("flaky", ["n"], impl="flaky")], toolbox, translator_in=_translator({"type": "n"})).handle("n")
    assert trace.verifications[0].kind == "rules" and not trace.verifications[0].ok
    assert trace.status == "uncertain"
    steady = Toolbox(tools={"steady": _answers("5")})
    trace = _conductor([_tool("steady", ["n"], impl="steady")], steady, translator_in=_translator({"type": "n"})).handle("n")
    assert trace.verifications[0].ok and trace.status == "answered"


def test_verify_facts_finds_a_contradiction_with_what_the_user_said(tmp_path: Path) -> None:
    from cda.ken.graph import KenGraph

    ken = KenGraph()
    ken.add_node("db")
    ken.add_node("auth")
    ken.add_edge("db", "related_to", "auth")
    c = Conductor(IRDatabase(":memory:"), context=ToolContext(ROOT, ken))
    ok = c.handle("look up db")
    assert ok.status == "answered" and ok.verifications[0].kind == "facts" and ok.verifications[0].ok
    bad = c.handle("given not related_to(db, auth); look up auth")
    v = bad.verifications[0]
    assert not v.ok and "not related_to(db, auth)" in v.detail and "related_to(db, auth) (assertion" in v.detail
    assert bad.status == "uncertain" and bad.obligations[-1].type == "clarify"


def test_verify_facts_checks_provenance() -> None:
    from cda.conductor.verify import verify_request
    from cda.ken.graph import KenGraph

    ken = KenGraph()
    ken.add_edge("a", "r", "b")
    db = IRDatabase(":memory:")
    c = Conductor(db, context=ToolContext(ROOT, ken))
    rid = db.open_request("look up a")
    with db.transaction() as conn:  # stop before verifying, then damage the run the facts cite
        db.set_stage(conn, rid, "new")
    c.translator_in = RuleTranslatorIn()
    doc = c.translator_in("look up a")
    with db.transaction() as conn:
        oid = db.add_obligation(conn, rid, doc.obligations[0].type, doc.obligations[0].inputs)
    from cda.conductor.plan import plan_obligation

    plan_obligation(db.obligations(rid)[0], c.registry, db, c.context)
    assert db.obligations(rid)[0].id == oid and db.obligations(rid)[0].status is ObligationStatus.RESOLVED
    db._conn.execute("UPDATE tool_runs SET status = 'error'")
    verify_request(rid, c.registry, db, c.context)
    (v,) = db.verifications(rid)
    assert not v.ok and "no finished tool run" in v.detail


def test_contradictions_are_decided_by_the_solver_against_brute_force() -> None:
    import itertools

    facts = ["p(a)", "not p(a)", "q", "not q", "p(b)"]
    for n in range(1, 4):
        for combo in itertools.combinations(range(len(facts)), n):
            chosen = [Assertion(id=i + 1, request_id=1, obligation_id=None, key="fact", value=facts[i], source_id=1)
                      for i in combo]
            texts = [facts[i] for i in combo]
            clash = any(t == "not " + u for t in texts for u in texts)
            cores = contradictions(chosen)
            assert bool(cores) == clash
            for core in cores:  # each core is a pair of opposite facts
                values = sorted((facts[i - 1] for i in core), key=len)
                assert len(values) == 2 and values[1] == "not " + values[0]


# ---------------------------------------------------------------- CDA as a tool
def test_cda_tools_answer_and_are_reverified_on_the_other_backend() -> None:
    c = Conductor(IRDatabase(":memory:"), load_registry(None, cda_toolbox()), context=ToolContext(ROOT))
    trace = c.handle("solve examples/service_outage.cda; prove examples/syllogism.fol")
    assert trace.status == "answered", render_tree(trace)
    assert [v.kind for v in trace.verifications] == ["rules", "rules"] and all(v.ok for v in trace.verifications)
    solved = next(r for r in trace.tool_runs if r.tool == "cda.solve").outputs
    assert solved is not None and solved["status"] == "sat"
    assert all(v["justification"] for v in solved["verdicts"] if v["status"] in ("supported", "refuted"))
    proved = next(r for r in trace.tool_runs if r.tool == "cda.prove").outputs
    assert proved is not None and [v["status"] for v in proved["verdicts"]] == ["supported", "refuted", "inconclusive"]
    # issue 27: down(api) and down(auth) tie exactly (cost 1, posterior 0.4223 each): the reply says so
    answer = render_tree(trace)
    assert "best explanations, tied at cost 1: {down(api)}; {down(auth)};" in answer, answer
    assert "best explanation: down(api)" not in answer


_HALF_ADDER = "INPUT(a)\nINPUT(b)\nOUTPUT(s)\nOUTPUT(c)\ns = XOR(a, b)\nc = AND(a, b)\n"


def test_a_diagnosis_is_resimulated_and_a_wrong_one_never_answers(tmp_path: Path) -> None:
    (tmp_path / "ha.bench").write_text(_HALF_ADDER)
    (tmp_path / "obs.txt").write_text("a=1 b=1 s=1 c=1\n")  # s should be 0: the XOR gate is at fault
    toolbox = cda_toolbox()
    c = Conductor(IRDatabase(":memory:"), load_registry(None, toolbox), context=ToolContext(tmp_path))
    trace = c.handle("diagnose ha.bench with obs.txt")
    assert trace.status == "answered", render_tree(trace)
    diag = trace.tool_runs[0].outputs
    assert diag is not None and diag["diagnoses"] == [["s"]]
    liar = toolbox.merged(Toolbox(tools={"cda.diagnose": Tool(lambda i, ctx: {"diagnoses": [["c", "s"]],
                                                                               "partial": False})}))
    trace = Conductor(IRDatabase(":memory:"), load_registry(None, liar), context=ToolContext(tmp_path)).handle(
        "diagnose ha.bench with obs.txt")
    assert trace.tool_runs[0].status is ToolRunStatus.POSTCONDITION_FAILED
    assert "not minimal" in (trace.tool_runs[0].detail or "") and trace.status == "unanswered"


def test_run_action_is_a_tool() -> None:
    c = Conductor(IRDatabase(":memory:"), load_registry(None, cda_toolbox()), context=ToolContext(ROOT))
    trace = c.handle("run examples/action/service_outage.json")
    assert trace.status == "answered", render_tree(trace)
    out = trace.tool_runs[0].outputs
    assert out is not None and out["status"] == "completed" and out["verdicts"]


# ---------------------------------------------------------------- the calculator and the SQLite tool
def test_the_calculator_is_exact_and_refuses_code() -> None:
    assert evaluate("0.1 + 0.2") == recompute("0.1 + 0.2") == evaluate("3/10")
    assert evaluate("(2 ** 100 + 1) / 3") == recompute("(2 ** 100 + 1) / 3")
    for bad in ["__import__('os').system('true')", "x + 1", "2 ** 0.5", "(10 ** 500) ** 500", "1 < 2", "'a' * 3"]:
        with pytest.raises(ToolError):
            evaluate(bad)


@pytest.mark.parametrize("text", ["1e9999999999 * 2", "1e999999 * 1e999999", "1e3999 * 1e3999", "1e-9999999999",
                                  "1" * 4001, "0." + "0" * 4000 + "1"])
def test_the_calculator_refuses_a_huge_number_before_building_it(text: str) -> None:
    """``1e9999999999`` once built a ten-billion-digit integer (CPU pinned, SIGTERM ignored) and
    ``1e999999 * 1e999999`` answered with Python's int-printing ValueError; both are refused by
    name, from the literal's text and bit lengths, on the calculator and on the verify loop."""
    for compute in (evaluate, recompute):
        with pytest.raises(ToolError, match="more than 4000 digits"):
            compute(text)
    assert evaluate("1e3999 / 1e3998") == recompute("1e3999 / 1e3998") == 10


def test_the_query_tool_reads_without_a_trace_and_cannot_write(tmp_path: Path) -> None:
    data = tmp_path / "data.sqlite"
    conn = sqlite3.connect(data)
    conn.execute("CREATE TABLE t (a INTEGER, b TEXT)")
    conn.executemany("INSERT INTO t VALUES (?, ?)", [(1, "x"), (2, "y")])
    conn.commit()
    conn.close()
    before = data.read_bytes()
    c = Conductor(IRDatabase(":memory:"), context=ToolContext(tmp_path))
    trace = c.handle("query data.sqlite: SELECT a, b FROM t ORDER BY a")
    assert trace.status == "answered" and trace.tool_runs[0].outputs == {
        "columns": ["a", "b"], "rows": [[1, "x"], [2, "y"]], "truncated": False}
    tool = builtin_toolbox().tools["sqlite.query"]
    with pytest.raises(ToolError, match="not authorized|readonly|read-only"):
        tool.run({"database": "data.sqlite", "sql": "WITH x AS (SELECT 1) DELETE FROM t"}, ToolContext(tmp_path))
    with pytest.raises(ToolError):
        tool.run({"database": "data.sqlite", "sql": "ATTACH 'other.sqlite' AS o"}, ToolContext(tmp_path))
    assert data.read_bytes() == before and sorted(p.name for p in tmp_path.iterdir()) == ["data.sqlite"]


# ---------------------------------------------------------------- the registry and contracts
@pytest.mark.parametrize(("text", "message"), [
    ("[[tool]]\nname = 'x'\nsatisfies = ['t']\nreliability = 'high'\ncost = 'low'\nlatency_ms = 1\nimpl = 'nope'",
     "no implementation 'nope'"),
    ("[[tool]]\nname = 'calculator'\nsatisfies = ['t']\nreliability = 'high'\ncost = 'low'\nlatency_ms = 1\n"
     "postconditions = ['shiny']", "unknown condition 'shiny'"),
    ("[[tool]]\nname = 'calculator'\nsatisfies = ['t']\nreliability = 'high'\ncost = 'low'\nlatency_ms = 1\n"
     "preconditions = ['file(path)']", "must name one of the tool's inputs"),
    ("[[tool]]\nname = 'calculator'\nsatisfies = ['t']\nreliability = 'great'\ncost = 'low'\nlatency_ms = 1",
     "reliability"),
    ("[[tool]]\nname = 'calculator'\nsatisfies = ['t']\nreliability = 'high'\ncost = 'low'\nlatency_ms = 1.5",
     "latency_ms"),
    ("[[tool]]\nname = 'calculator'\nsatisfies = ['t']\nreliability = 'high'\ncost = 'low'\nlatency_ms = -1",
     "latency_ms"),
    ("[[tool]]\nname = 'calculator'\nsatisfies = ['t']\nreliability = 'high'\ncost = 'low'\nlatency_ms = nan",
     "latency_ms"),
    ("[[tool]]\nname = 'calculator'\nsatisfies = ['t']\nreliability = 'high'\ncost = 'low'\nlatency_ms = 1\n"
     "[[tool]]\nname = 'calculator'\nsatisfies = ['t']\nreliability = 'high'\ncost = 'low'\nlatency_ms = 1",
     "a second tool named"),
    ("[[tool]\nname = 'x'", "not TOML: .*line 1"),
    ("[tools]\nname = 'x'", "unknown table"),
])
def test_registry_mistakes_are_named_at_load_time(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "tools.toml"
    path.write_text(text)
    with pytest.raises(ConductorError, match=message):
        load_registry(path, builtin_toolbox())
    out, err = _io(), _io()
    assert main(["conduct", "compute 1", "--db", str(tmp_path / "ir.sqlite"), "--registry", str(path)], out, err) == 2
    assert "Traceback" not in err.getvalue() and err.getvalue().startswith("cda: error:")


def test_obligations_are_validated_before_anything_is_stored() -> None:
    bad = [
        {"obligations": []},
        {"obligations": [{"type": "Compute"}]},
        {"obligations": [{"type": "compute", "inputs": {"x": float("nan")}}]},
        {"obligations": [{"type": "compute", "inputs": {"x": 10**40}}]},
        {"obligations": [{"type": "compute", "inputs": {"not an id": 1}}]},
        {"obligations": [{"type": "compute", "inputs": {"x": "a" * 100_001}}]},
        {"obligations": [{"type": "compute"}] * 101},
        {"obligations": [{"type": "compute"}], "facts": ["drop table"]},
        {"obligations": [{"type": "compute", "priority": 1}]},
    ]
    for doc in bad:
        with pytest.raises(ValidationError):
            ObligationsDoc.model_validate(doc)
    db = IRDatabase(":memory:")

    def sneaky(utterance: str) -> ObligationsDoc:
        return ObligationsDoc.model_validate({"obligations": [{"type": "compute", "inputs": {"x": 0.5}}]})

    with pytest.raises(ValidationError):
        Conductor(db, translator_in=sneaky).handle("x")
    assert db.obligations(1) == []  # nothing was stored


def test_the_ir_database_refuses_foreign_files_and_other_cda_stores(tmp_path: Path) -> None:
    foreign = tmp_path / "app.sqlite"
    conn = sqlite3.connect(foreign)
    conn.execute("CREATE TABLE users (id INTEGER)")
    conn.commit()
    conn.close()
    before = foreign.read_bytes()
    with pytest.raises(CDAError, match="not a CDA file"):
        IRDatabase(foreign)
    assert foreign.read_bytes() == before
    from cda.actions.receipts import ReceiptLog

    log = ReceiptLog(tmp_path / "receipts.sqlite")
    log.close()
    before = (tmp_path / "receipts.sqlite").read_bytes()
    with pytest.raises(CDAError, match="a CDA receipt log, not a CDA conductor IR database"):
        IRDatabase(tmp_path / "receipts.sqlite")
    assert (tmp_path / "receipts.sqlite").read_bytes() == before


# ---------------------------------------------------------------- determinism and the CLI
def _io() -> Any:
    import io

    return io.StringIO()


def test_the_same_request_and_database_give_the_same_trace_bytes(tmp_path: Path) -> None:
    utterance = "given up(db); compute 2 ** 10 / 3; solve examples/service_outage.cda; frobnicate; prove examples/syllogism.fol"
    outputs = []
    for n in range(2):
        out, err = _io(), _io()
        code = main(["conduct", utterance, "--db", str(tmp_path / f"ir{n}.sqlite"), "--json"], out, err)
        assert code == 1 and err.getvalue() == ""
        outputs.append(out.getvalue())
    assert outputs[0] == outputs[1]
    trace = json.loads(outputs[0])
    assert [o["type"] for o in trace["obligations"]] == ["compute", "solve", "clarify", "prove"]
    assert all(r["duration_ms"] is None for r in trace["tool_runs"])


def test_the_cli_prints_the_tree_and_answers_from_a_second_request_on_the_same_db(tmp_path: Path,
                                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    db = tmp_path / "ir.sqlite"
    out = _io()
    assert main(["conduct", "compute (1 + 2) * 0.1", "--db", str(db)], out, _io()) == 0
    assert "├─ #1 compute(expression='(1 + 2) * 0.1') [resolved]" in out.getvalue()
    assert "verify (math): ok" in out.getvalue() and "= 3/10" in out.getvalue()
    out = _io()
    assert main(["conduct", "compute 1 / 0", "--db", str(db)], out, _io()) == 1
    assert "request 2" in out.getvalue() and "JUSTIFY(failure)" in out.getvalue()


# ---------------------------------------------------------------- kill -9 and resume
_SLOW_CONDUCTOR = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from cda.conductor.conduct import Conductor
    from cda.conductor.irdb import IRDatabase
    from cda.conductor.registry import registry_from_data
    from cda.conductor.tooling import Tool, Toolbox
    from cda.contracts.conductor import ObligationsDoc

    db_path, marks = sys.argv[1], Path(sys.argv[2])
    killed_at = int(sys.argv[3]) if len(sys.argv) > 3 else 0  # the tool run during which the test kills us

    def slow(inputs, ctx):
        with marks.open("a") as f:
            f.write(f"start {inputs['k']}\\n")
        if marks.read_text().count("start") == killed_at:
            time.sleep(600)  # inside the tool run until the test's SIGKILL lands (a wait to be killed)
        return {"value": str(inputs["k"] * 10)}

    toolbox = Toolbox(tools={"slow": Tool(slow)})
    spec = {"name": "slow", "satisfies": ["n"], "inputs": ["k"], "reliability": "high", "cost": "low", "latency_ms": 1}
    registry = registry_from_data({"tool": [spec]}, toolbox)
    doc = ObligationsDoc.model_validate({"obligations": [{"type": "n", "inputs": {"k": k}} for k in range(1, 5)]})
    trace = Conductor(IRDatabase(db_path), registry, lambda u: doc).handle("four slow things")
    print(trace.answer)
""")


@pytest.mark.slow  # a kill-and-restart loop: .ci/run's slow step (README: the test command leaves it out)
def test_a_conductor_killed_mid_request_resumes_from_the_database(tmp_path: Path) -> None:
    script = tmp_path / "conduct.py"
    script.write_text(_SLOW_CONDUCTOR)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    for kill_after_starts in (1, 2, 3):  # during the 1st, 2nd and 3rd tool runs
        db, marks = tmp_path / f"ir{kill_after_starts}.sqlite", tmp_path / f"marks{kill_after_starts}"
        proc = subprocess.Popen([sys.executable, str(script), str(db), str(marks), str(kill_after_starts)], env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        wait_until(lambda m=marks, k=kill_after_starts: m.exists() and m.read_text().count("start") >= k,
                   f"tool run {kill_after_starts} to start")
        proc.send_signal(signal.SIGKILL)
        proc.communicate()
        done = subprocess.run([sys.executable, str(script), str(db), str(marks)], env=env, capture_output=True,
                              text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        assert done.stdout.splitlines() == [f'n [slow]: {{"value": "{k}0"}}' for k in range(1, 5)]
        ir = IRDatabase(db)
        trace = Conductor(ir, registry_from_data({"tool": [_tool("slow", ["n"], inputs=["k"])]},
                                                 Toolbox(tools={"slow": _answers("x")}))).trace(1)
        ir.close()
        assert trace.status == "answered"
        assert [o.status for o in trace.obligations] == [ObligationStatus.RESOLVED] * 4
        ok = [r for r in trace.tool_runs if r.status is ToolRunStatus.OK]
        assert sorted(r.inputs["k"] for r in ok) == [1, 2, 3, 4]  # each obligation answered exactly once
        interrupted = [r for r in trace.tool_runs if r.status is ToolRunStatus.INTERRUPTED]
        assert len(interrupted) == 1 and interrupted[0].inputs["k"] == kill_after_starts
        assert [a.value for a in trace.assertions if a.key == "value"] == ["10", "20", "30", "40"]


def test_verify_db_requeries_and_notices_data_that_changed_under_the_answer(tmp_path: Path) -> None:
    data = tmp_path / "data.sqlite"
    conn = sqlite3.connect(data)
    conn.execute("CREATE TABLE t (a INTEGER)")
    conn.execute("INSERT INTO t VALUES (1)")
    conn.commit()
    conn.close()
    query = builtin_toolbox().tools["sqlite.query"]

    def answer_then_someone_writes(inputs: Mapping[str, Any], ctx: ToolContext) -> dict[str, Any]:
        outputs = query.run(inputs, ctx)
        writer = sqlite3.connect(data)  # another program changes the data before the reply
        writer.execute("INSERT INTO t VALUES (2)")
        writer.commit()
        writer.close()
        return outputs

    toolbox = builtin_toolbox().merged(Toolbox(tools={"sqlite.query": Tool(answer_then_someone_writes, query.recheck)}))
    trace = Conductor(IRDatabase(":memory:"), load_registry(None, toolbox), context=ToolContext(tmp_path)).handle(
        "query data.sqlite: SELECT a FROM t ORDER BY a")
    assert trace.verifications[0].kind == "db" and not trace.verifications[0].ok
    assert "different rows" in trace.verifications[0].detail and trace.status == "uncertain"


def test_the_openai_translator_over_http(tmp_path: Path) -> None:
    import http.server
    import threading

    bodies: list[dict[str, Any]] = []

    class Fake(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 (the http.server name)
            bodies.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
            content = json.dumps({"obligations": [{"type": "compute", "inputs": {"expression": "6 * 7"}}]})
            reply = json.dumps({"choices": [{"message": {"content": content}}]}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(reply)))
            self.end_headers()
            self.wfile.write(reply)

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Fake)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True)
    thread.start()
    try:
        out, err = _io(), _io()
        code = main(["conduct", "what is six times seven", "--db", str(tmp_path / "ir.sqlite"), "--translator",
                     "openai", "--llm-base-url", f"http://127.0.0.1:{server.server_address[1]}/v1",
                     "--llm-model", "m", "--llm-timeout", "10"], out, err)
    finally:
        server.shutdown()
        server.server_close()
    assert code == 0, err.getvalue()
    assert "6 * 7 = 42" in out.getvalue()
    assert bodies[0]["messages"][1]["content"] == "what is six times seven"
    assert bodies[0]["response_format"]["type"] == "json_schema"  # structured output: the obligations schema
    assert "obligations" in bodies[0]["response_format"]["json_schema"]["schema"]["properties"]
    out, err = _io(), _io()
    assert main(["conduct", "x", "--db", str(tmp_path / "ir.sqlite"), "--translator", "openai"], out, err) == 2
    assert "translator openai needs llm_base_url and llm_model" in err.getvalue()  # the operation's own words, at every door


def test_a_second_conductor_on_the_same_unfinished_request_is_refused(tmp_path: Path) -> None:
    """Two conductors answering one request would each run its tools and write two answers (a
    review reproduced it): the second is refused while the first is alive; a dead holder's request
    is taken over (the kill -9 test)."""
    import threading

    calls: list[str] = []
    running, release = threading.Event(), threading.Event()

    def slow(inputs: Mapping[str, Any], ctx: ToolContext) -> dict[str, Any]:
        calls.append("run")
        running.set()  # the first conductor holds the request and is inside its tool
        assert release.wait(HANG), "the test never let the tool finish"
        return {"value": "42"}

    def conductor() -> Conductor:
        return _conductor([_tool("slow", ["n"], impl="slow")], Toolbox(tools={"slow": Tool(slow)}),
                          db=IRDatabase(tmp_path / "ir.sqlite"), translator_in=_translator({"type": "n"}))

    first = threading.Thread(target=lambda: conductor().handle("forty-two"))
    first.start()
    assert running.wait(HANG)
    try:
        with pytest.raises(ConductorError, match="being answered by another conductor"):
            conductor().handle("forty-two")
    finally:
        release.set()
    first.join()
    trace = conductor().trace(1)
    assert calls == ["run", "run"] and trace.status == "answered"  # the run and the verify loop's re-run
    assert [r.status for r in trace.tool_runs] == [ToolRunStatus.OK]
    assert [e.kind for e in trace.events].count("final_response") == 1


def test_an_ir_database_from_before_request_holders_is_brought_up_to_date(tmp_path: Path) -> None:
    """A file an earlier CDA made (requests without ``holder``) gets the column and then works; a
    table of another shape is refused by name, the file left as it was."""
    from cda.conductor.irdb import IRDatabase
    from cda.store import StoreFileError

    def open_store(path: Path) -> sqlite3.Connection:  # as an earlier CDA made the file: marked as its log
        conn = sqlite3.connect(path)
        conn.execute(f"PRAGMA application_id = {0x43444131}")
        conn.execute("PRAGMA user_version = 2")
        return conn

    old = tmp_path / "old.sqlite"
    conn = open_store(old)
    conn.execute("CREATE TABLE requests (id INTEGER PRIMARY KEY, utterance TEXT NOT NULL, stage TEXT NOT NULL, "
                 "status TEXT, answer TEXT)")
    conn.execute("INSERT INTO requests (utterance, stage) VALUES ('2 + 2', 'translate')")
    conn.commit()
    conn.close()
    with IRDatabase(old) as db:
        db.claim(1, "me")
        assert db.request(1)[0] == "2 + 2"

    odd = tmp_path / "odd.sqlite"
    conn = open_store(odd)
    conn.execute("CREATE TABLE requests (id INTEGER PRIMARY KEY, utterance TEXT NOT NULL)")
    conn.commit()
    conn.close()
    before = odd.read_bytes()
    with pytest.raises(StoreFileError, match="table requests has columns id, utterance"):
        IRDatabase(odd)
    assert odd.read_bytes() == before
