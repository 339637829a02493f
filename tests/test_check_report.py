"""``report.check``: an agent's draft epistemic report held to the abstain gate's rules at every door
(``cda check-report``, the ToolBus, MCP), with coverage computed from Ken and never a traceback on
any draft (docs/actions.md, "Checking your own draft")."""

from __future__ import annotations

import io
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cda.cli.main import main
from cda.operations import LOCAL_USER
from cda.operations.base import OperationError
from cda.operations.report import CheckReportParams, check
from tests.service_harness import call, serving, toolbus

KEN = {"nodes": [{"id": "db"}, {"id": "api"}, {"id": "restart_db"}],
       "edges": [{"source": "db", "target": "api", "relation": "causes"},
                 {"source": "restart_db", "target": "db", "relation": "fixes"}]}
OBSERVED = ["api p99 latency at 900 ms"]
DRAFT = {
    "observations": [{"text": "api p99 latency at 900 ms", "index": 0}],
    "ken_facts": [{"text": "db causes api", "nodes": ["db", "api"]}],
    "hypotheses": [{"id": "H1", "text": "the db adds 40 ms to entity:api", "confidence": 0.7},
                   {"id": "H2", "text": "entity:cache is cold", "confidence": 0.2}],
    "conclusion": {"root_cause": "db", "confidence": 0.95, "verified": True, "nodes": ["db"]},
    "coverage": {"matched_entities_count": 9, "root_causes_count": 9, "causal_chains_count": 9,
                 "required_nodes_count": 9, "relevant_fixes_count": 9},
}


def _check(**params: Any) -> Any:
    env = SimpleNamespace(principal=LOCAL_USER, base_dir=Path("."))
    return check(env, CheckReportParams.model_validate(params))


def test_a_draft_is_enforced_on_coverage_computed_from_ken() -> None:
    out = _check(draft=DRAFT, observations=OBSERVED, ken=KEN, symptoms=["api"])
    # the draft's own coverage (9s) is ignored: Ken's is 1 root cause, 1 chain, 2 required nodes
    assert (out.coverage.root_causes_count, out.coverage.causal_chains_count, out.coverage.required_nodes_count) == (
        1, 1, 2)
    assert {(v.kind, v.span) for v in out.violations} == {("UNSUPPORTED_METRIC", "40"), ("UNKNOWN_NODE", "cache")}
    assert out.enforced.conclusion.verified is False and out.enforced.conclusion.band != "high"
    assert any("no solver verdict" in c for c in out.enforced.caveats)
    assert out.review.triggered and out.review.status == "NEEDS_REWRITE" and out.verdict == "NEEDS_REWRITE"
    rewritten = out.review.rewritten
    assert rewritten is not None and all("40" not in h.text for h in rewritten.hypotheses)


def test_no_ken_means_the_gate_abstains_and_a_clean_draft_passes() -> None:
    out = _check(draft=DRAFT, observations=OBSERVED)
    assert out.verdict == "ABSTAIN" and out.abstain is not None
    assert any(v.kind == "UNGROUNDED_ROOT_CAUSE" for v in out.review.violations)
    clean = {"observations": [{"text": "api p99 latency at 900 ms", "index": 0}],
             "ken_facts": [{"text": "db causes api", "nodes": ["db", "api"]}],
             "hypotheses": [{"id": "H1", "text": "entity:db is slow", "confidence": 0.6}],
             "conclusion": {"root_cause": "db", "confidence": 0.6, "nodes": ["db"]}}
    ken = {**KEN, "nodes": [*KEN["nodes"], {"id": "cache"}],
           "edges": [*KEN["edges"], {"source": "cache", "target": "db", "relation": "causes"}]}
    passed = _check(draft=clean, observations=OBSERVED, ken=ken, symptoms=["api"])
    assert passed.verdict == "OK" and not passed.violations and not passed.review.triggered


_json = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
                     lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4),
                     max_leaves=20)
_fields = st.fixed_dictionaries({}, optional={
    "observations": st.lists(st.fixed_dictionaries({"text": st.sampled_from([*OBSERVED, "db at 12 ms", ""]),
                                                    "index": st.integers(-1, 3)}), max_size=3),
    "hypotheses": st.lists(st.fixed_dictionaries({"id": st.text(max_size=4), "text": st.text(max_size=30),
                                                  "confidence": st.floats()}), max_size=3),
    "conclusion": st.fixed_dictionaries({}, optional={"root_cause": st.text(max_size=10), "confidence": _json,
                                                      "band": st.sampled_from(["low", "medium", "high", "x"]),
                                                      "verified": st.booleans(), "nodes": _json}),
    "ken_facts": _json, "next_steps": _json, "violations": _json, "extra": _json})


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(draft=_json.filter(lambda d: d is not None) | _fields)  # None is "not given": the params refuse it
def test_any_draft_is_a_verdict_or_a_clear_invalid_params(draft: Any) -> None:
    try:
        out = _check(draft=draft, observations=OBSERVED, ken=KEN, symptoms=["api"])
    except OperationError as exc:
        assert exc.code == "invalid_params" and exc.path[:2] == ["params", "draft"] and "Traceback" not in str(exc)
        return
    assert out.verdict in ("OK", "DOWNGRADED", "NEEDS_REWRITE", "ABSTAIN")
    assert out.enforced.conclusion.band != "high"  # nothing stands behind a draft's high
    assert out.enforced.conclusion.confidence <= 0.84


def _cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out, err)
    return code, out.getvalue(), err.getvalue()


def test_the_command_line(tmp_path: Path) -> None:
    draft = tmp_path / "draft.json"
    draft.write_text(json.dumps(DRAFT), encoding="utf-8")
    ken = tmp_path / "ken.json"
    ken.write_text(json.dumps({"directed": True, "multigraph": True, "nodes": KEN["nodes"], "links": KEN["edges"]}),
                   encoding="utf-8")
    code, out, err = _cli("check-report", str(draft), "--ken", str(ken), "--observations", OBSERVED[0],
                          "--symptoms", "api")
    assert code == 1 and out.startswith("NEEDS_REWRITE: coverage from Ken: 1 matched entities, 1 root causes"), err
    assert "UNSUPPORTED_METRIC '40' at hypotheses[0].text" in out
    code, out, _ = _cli("check-report", str(draft), "--ken", str(ken), "--observations", OBSERVED[0], "--json")
    assert code == 1 and json.loads(out)["verdict"] in ("NEEDS_REWRITE", "ABSTAIN")
    draft.write_text("{not json", encoding="utf-8")
    code, out, err = _cli("check-report", str(draft))
    assert code == 2 and out == "" and "not JSON (line 1, column 2)" in err
    code, _, err = _cli("check-report", str(tmp_path / "missing.json"))
    assert code == 2 and "missing.json" in err and "Traceback" not in err


def test_over_the_toolbus_a_partner_checks_inline_and_names_no_file(tmp_path: Path) -> None:
    with serving(tmp_path / "receipts.sqlite") as server, toolbus(server) as ws:
        out = call(ws, "report.check", {"draft": DRAFT, "observations": OBSERVED, "ken": KEN, "symptoms": ["api"]})
        assert out["result"]["verdict"] == "NEEDS_REWRITE" and out["result"]["review"]["rewritten"] is not None
        bad = call(ws, "report.check", {"draft": {"hypotheses": "x"}})["error"]
        assert bad["code"] == "invalid_params" and bad["path"][:3] == ["params", "draft", "hypotheses"]
        named = call(ws, "report.check", {"draft_path": str(tmp_path / "d.json")})["error"]
        assert named["code"] == "forbidden"

