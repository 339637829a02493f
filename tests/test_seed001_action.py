"""Seed 001 inside the Action, end to end through ``cda run``: each trigger, each verifier status.

The abstain rule, the low-coverage verifier pass and the enforcement rules used to be library
functions nothing called; the seed's flag names changed nothing in a run, an abstained summary
still listed three explanations, and a provider answering in the seed's verifier contract was
called malformed. Oracle for each status: the same inputs with the opposite coverage or reply.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cda.cli.main import main
from cda.contracts.action import CDAOutputs
from cda.contracts.schema import CONTRACTS
from tests.fake_llm import Answer, FakeProvider, chat_reply, fake_provider

DSL = ("domain Service = {api, db}\nhyp down(Service)\nobservable slow(Service)\n"
       "hard: forall s in Service: slow(s) implies down(s) or down(db)\nobserve slow(api)\n")
THIN_KEN = {"nodes": [{"id": "api", "label": "api gateway"}, {"id": "db", "label": "database"},
                      {"id": "wiki", "label": "team wiki"}],
            "edges": [{"source": "wiki", "relation": "mentions", "target": "api"}]}
CAUSAL_KEN = {"nodes": THIN_KEN["nodes"],
              "edges": [*THIN_KEN["edges"], {"source": "api", "relation": "depends", "target": "db"}]}
ENV = ("ENABLE_ABSTAIN_GATE", "ENABLE_LOW_COVERAGE_VERIFIER", "ABSTAIN_MIN_ROOT_CAUSES", "ABSTAIN_MIN_CHAINS",
       "MIN_REQUIRED_NODES", "CDA_ENABLE_ABSTAIN_GATE", "CDA_ENABLE_LOW_COVERAGE_VERIFIER", "CDA_MIN_REQUIRED_NODES")


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in (*ENV, "http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.delenv(var, raising=False)


@pytest.fixture
def fake() -> Iterator[FakeProvider]:
    with fake_provider() as server:
        yield server


def cda_run(tmp_path: Path, **inputs: Any) -> tuple[CDAOutputs, str]:
    """``cda run inputs.json --out OUT``; the outputs (from the terminal event) and summary.md."""
    data = {"problem": "why is the api slow?", "dsl": DSL, **inputs}
    path = tmp_path / "inputs.json"
    path.write_text(json.dumps(data))
    out, err = io.StringIO(), io.StringIO()
    code = main(["run", str(path), "--json", "--out", str(tmp_path / "out")], out, err)
    assert code == 0, err.getvalue()
    last = json.loads(out.getvalue().splitlines()[-1])
    outputs = CDAOutputs.model_validate(last["outputs"])
    summary = (tmp_path / "out" / outputs.action_id / "summary.md").read_text()
    return outputs, summary


def test_low_coverage_abstains_with_the_seeds_fields_and_offers_no_explanation(tmp_path: Path) -> None:
    out, summary = cda_run(tmp_path, ken=THIN_KEN)
    assert out.status == "abstained" and out.abstain is not None
    data = out.abstain.model_dump(mode="json")
    assert data["mode"] == "ABSTAIN" and data["reason"] == "Insufficient CKG coverage to support grounded diagnosis"
    assert data["coverage"]["root_causes_count"] == 0 and data["coverage"]["causal_chains_count"] == 0
    assert "top_similarity" not in data["coverage"]
    assert data["observations"] == ["slow(api)"]
    assert data["missing_knowledge"] and data["action"]["next_step"] == "REQUEST_MORE_DATA_OR_AUGMENT_CKG"
    assert data["action"]["suggested_ckg_augment_inputs"] == ["raw_report", "raw_debug_query", "agent_output",
                                                              "judge_feedback"]
    assert not any(v.claim.startswith("explanation:") for v in out.verdicts)
    assert "## Best explanations" not in summary and "## Abstained" in summary
    assert "REQUEST_MORE_DATA_OR_AUGMENT_CKG" in summary
    assert any(t.question.startswith("Collect: ") for t in out.next_tests)
    assert out.review is not None and out.review.triggered
    # the oracle: a causal edge into the symptom, and the same run answers with explanations
    answered, summary = cda_run(tmp_path, ken=CAUSAL_KEN)
    assert answered.status == "completed" and answered.abstain is None
    assert "## Best explanations" in summary


def test_the_abstain_output_is_in_the_committed_outputs_schema() -> None:
    schema = CONTRACTS["CDAOutputs"].model_json_schema()
    assert {"abstain", "review", "coverage"} <= set(schema["properties"])
    committed = json.loads((Path(__file__).parent.parent / "schemas" / "CDAOutputs.schema.json").read_text())
    assert "abstain" in committed["properties"]
    abstain = committed["$defs"]["AbstainOutput"]["properties"]
    assert {"mode", "reason", "coverage", "observations", "missing_knowledge", "action"} <= set(abstain)


def test_without_a_ken_graph_observations_still_meet_the_abstain_rule(tmp_path: Path) -> None:
    out, _ = cda_run(tmp_path)
    assert out.status == "abstained" and out.abstain is not None
    assert out.abstain.missing_knowledge[0] == "no Ken graph (CKG) was given"
    assert any(c.startswith("abstained:") for c in out.caveats)


@pytest.mark.parametrize(("var", "value"), [("ENABLE_ABSTAIN_GATE", "false"), ("ABSTAIN_MIN_ROOT_CAUSES", "0")])
def test_the_seeds_flag_names_change_a_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, var: str,
                                           value: str) -> None:
    monkeypatch.setenv(var, value)
    if var == "ABSTAIN_MIN_ROOT_CAUSES":
        monkeypatch.setenv("ABSTAIN_MIN_CHAINS", "0")
    out, summary = cda_run(tmp_path, ken=THIN_KEN)
    assert out.status == "completed" and out.abstain is None and "## Best explanations" in summary


def test_the_low_coverage_pass_runs_only_when_coverage_is_low(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out, _ = cda_run(tmp_path, ken=CAUSAL_KEN)  # 1 root cause, 1 chain, 2 required nodes < 3
    assert out.review is not None and out.review.triggered and out.review.status == "OK"
    assert any("required_nodes_count 2 < 3" in r for r in out.review.reasons)
    monkeypatch.setenv("MIN_REQUIRED_NODES", "2")
    out, _ = cda_run(tmp_path, ken=CAUSAL_KEN)  # coverage sufficient: skipped
    assert out.review is not None and not out.review.triggered
    monkeypatch.setenv("MIN_REQUIRED_NODES", "3")
    monkeypatch.setenv("ENABLE_LOW_COVERAGE_VERIFIER", "false")
    out, _ = cda_run(tmp_path, ken=CAUSAL_KEN)  # low, but disabled
    assert out.review is not None and not out.review.triggered
    assert any("disabled" in r for r in out.review.reasons)


def _review(status: str, problems: list[dict[str, str]]) -> Any:
    content = json.dumps({"status": status, "problems": problems, "rewritten_report": ""})
    return lambda body: Answer(body=chat_reply(content))


@pytest.mark.parametrize("status", ["OK", "NEEDS_REWRITE", "ABSTAIN"])
def test_a_provider_answering_the_seeds_verifier_contract_is_understood(tmp_path: Path, fake: FakeProvider,
                                                                        status: str) -> None:
    problems = [] if status == "OK" else [{"type": "UNGROUNDED_ROOT_CAUSE", "span": "down(db)",
                                           "fix": "downgrade_to_hypothesis" if status != "ABSTAIN" else "abstain"}]
    fake.mode = _review(status, problems)
    llm = {"provider": "openai", "base_url": fake.url, "model": "fake", "egress_class": "partner", "timeout_s": 2}
    out, summary = cda_run(tmp_path, ken=CAUSAL_KEN, llm=llm, policies={"egress": "partner"},
                           goals={"kind": "prove", "claims": ["slow(api)"]})
    claim = next(v for v in out.verdicts if v.claim == "prove slow(api)")
    assert not any("gave no judgement" in c for c in claim.caveats)  # understood, not malformed
    if status == "OK":
        assert claim.status == "supported"
    else:
        assert claim.status == "inconclusive" and claim.confidence <= 0.5
        assert any(f"verifier {status} (UNGROUNDED_ROOT_CAUSE)" in c for c in claim.caveats)
        assert f"verifier {status}" in summary


def test_a_provider_abstaining_on_low_coverage_with_nothing_settled_makes_the_run_abstain(
        tmp_path: Path, fake: FakeProvider) -> None:
    llm = {"provider": "openai", "base_url": fake.url, "model": "fake", "egress_class": "partner", "timeout_s": 2}
    fake.mode = _review("OK", [])
    calm, _ = cda_run(tmp_path, ken=CAUSAL_KEN, llm=llm, policies={"egress": "partner"})
    assert calm.status == "completed" and calm.abstain is None  # coverage low (2 required nodes), verifier OK
    fake.mode = _review("ABSTAIN", [{"type": "UNGROUNDED_ROOT_CAUSE", "span": "down(db)", "fix": "abstain"}])
    out, summary = cda_run(tmp_path, ken=CAUSAL_KEN, llm=llm, policies={"egress": "partner"})
    assert out.status == "abstained" and out.abstain is not None
    assert any("the LLM verifier answered ABSTAIN" in r for r in out.abstain.reasons)
    assert "## Best explanations" not in summary


def test_the_outputs_carry_the_hypothesis_records_and_the_epistemic_report(tmp_path: Path) -> None:
    out, _ = cda_run(tmp_path, ken=CAUSAL_KEN)
    assert out.status == "completed" and out.hypotheses
    bundled = json.loads((tmp_path / "out" / out.action_id / "cda_plan" / "hypotheses.json").read_text())
    assert [h.model_dump(mode="json") for h in out.hypotheses] == [
        {k: v for k, v in r.items() if k in type(out.hypotheses[0]).model_fields} for r in bundled]
    assert all(h.assumptions and h.statement.startswith("assume ") for h in out.hypotheses)
    report = out.epistemic_report
    assert report is not None and [o.text for o in report.observations] == ["slow(api)"]
    assert all(f.nodes for f in report.ken_facts) and report.conclusion.band != "high"
    assert {h.id for h in report.hypotheses} <= {h.id for h in out.hypotheses}
    abstained, _ = cda_run(tmp_path, ken=THIN_KEN)
    assert abstained.status == "abstained" and abstained.hypotheses == []  # no explanation offered
    assert abstained.epistemic_report is not None and abstained.epistemic_report.conclusion.band == "low"
