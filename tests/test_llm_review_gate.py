"""The Action's HTTP LLM verifier is seed 001's second pass: called only when Ken's coverage is low,
and shown what the seed lists (the draft report, the observations verbatim, Ken's traversal, the
coverage report), through ``cda run`` against the fake provider on loopback (tests/fake_llm.py).

It used to be called on every claim whatever the coverage (the review said "coverage is
sufficient: review skipped" while four calls went out) and to see one claim and evidence strings.
Oracles: the same inputs with the coverage made low (or ``llm.when = "always"``) do call it; a run
that skips it gives the verdicts of the offline checker, byte for byte.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest

from cda.adapters.llm_http import REVIEW_PROMPT, SYSTEM_PROMPT
from cda.cli.main import main
from cda.contracts.action import CDAOutputs
from tests import test_seed001_action as seed001
from tests.fake_llm import Answer, FakeProvider, chat_reply
from tests.test_seed001_action import CAUSAL_KEN, DSL

_clean_env = seed001._clean_env  # the same fixtures: the seed's variables unset, the fake provider on loopback
fake = seed001.fake

SPAN = "jane.doe@example.com paged at 09:14: the api is slow"


def _llm(fake: FakeProvider, **extra: Any) -> dict[str, Any]:
    return {"provider": "openai", "base_url": fake.url, "model": "fake", "egress_class": "partner", "timeout_s": 5,
            **extra}


def cda_run(tmp_path: Path, name: str, **inputs: Any) -> tuple[CDAOutputs, list[dict[str, Any]], Path]:
    """``cda run``: the outputs, every event printed, and the action's folder."""
    data = {"problem": "why is the api slow?", "dsl": DSL, "ken": CAUSAL_KEN, "policies": {"egress": "partner"},
            **inputs}
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(data))
    out, err = io.StringIO(), io.StringIO()
    code = main(["run", str(path), "--json", "--out", str(tmp_path / name)], out, err)
    assert code == 0, err.getvalue()
    events = [json.loads(line) for line in out.getvalue().splitlines()]
    outputs = CDAOutputs.model_validate(events[-1]["outputs"])
    return outputs, events, tmp_path / name / outputs.action_id


def _receipts(folder: Path, name: str) -> list[dict[str, Any]]:
    found = [json.loads(p.read_text()) for p in sorted((folder / "cda_plan" / "receipts").glob("*.json"))]
    return [r for r in found if r["name"] == name]


def _review_deltas(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e["payload"] for e in events
            if e.get("type") == "action_checkpoint" and e.get("kind") == "plan_delta" and "llm_review" in e["payload"]]


def _verdicts(out: CDAOutputs) -> list[tuple[str, str, float, str]]:
    return [(v.claim, str(v.status), v.confidence, v.band) for v in out.verdicts]


def test_sufficient_coverage_calls_no_llm_and_says_so(tmp_path: Path, fake: FakeProvider,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MIN_REQUIRED_NODES", "2")  # CAUSAL_KEN's 2 required nodes are then enough
    out, events, folder = cda_run(tmp_path, "sufficient", llm=_llm(fake))
    assert fake.bodies == []  # nothing left the machine
    assert out.review is not None and not out.review.triggered
    assert out.review.llm_called is False and out.review.llm_reasons == ["coverage is sufficient"]
    assert [r["result"] for r in _receipts(folder, "llm.review")] == [{"called": False, "reasons": ["coverage is sufficient"]}]
    assert _review_deltas(events) == [{"stage": "verify", "llm_review": "skipped", "reasons": ["coverage is sufficient"]}]
    assert _receipts(folder, "llm.offline")  # the offline checker read the claims instead
    assert not any("LLM" in c for c in out.caveats)  # not a failure: nothing was required
    # the oracle: the same run with no HTTP verifier configured gives the same verdicts
    offline, _, _ = cda_run(tmp_path, "offline")
    assert _verdicts(out) == _verdicts(offline)
    # and "always" calls it whatever the coverage
    always, events, _ = cda_run(tmp_path, "always", llm=_llm(fake, when="always"))
    assert len(fake.bodies) == len(always.verdicts)
    assert always.review is not None and always.review.llm_called is True
    assert _review_deltas(events)[0]["llm_review"] == "called"


def test_low_coverage_calls_the_verifier_with_the_draft_the_observations_ken_and_the_coverage(
        tmp_path: Path, fake: FakeProvider) -> None:
    out, events, folder = cda_run(tmp_path, "low", llm=_llm(fake))  # 2 required nodes < 3: low
    assert out.review is not None and out.review.triggered and out.review.llm_called is True
    assert out.review.llm_reasons == ["coverage: required_nodes_count 2 < 3"]
    assert len(fake.bodies) == len(out.verdicts) >= 3  # one call per claim, each with the whole context
    claims = set()
    for body in fake.bodies:
        messages = json.loads(body)["messages"]
        assert messages[0] == {"role": "system", "content": REVIEW_PROMPT} and REVIEW_PROMPT != SYSTEM_PROMPT
        sent = json.loads(messages[1]["content"])
        assert set(sent) == {"claim", "evidence", "draft_report", "observations", "ckg", "coverage", "low_coverage"}
        claims.add(sent["claim"])
        assert sent["observations"] == ["slow(api)"]
        assert sent["low_coverage"] == ["required_nodes_count 2 < 3"]
        assert sent["coverage"] == out.epistemic_report.coverage.model_dump(mode="json")  # type: ignore[union-attr]
        assert [r["node"] for r in sent["ckg"]["root_causes"]] == ["db"]
        assert [c["nodes"] for c in sent["ckg"]["causal_chains"]] == [["db", "api"]]
        assert {"api", "db"} <= set(sent["ckg"]["traversal_nodes"]) and "wiki" not in sent["ckg"]["traversal_nodes"]
        draft = sent["draft_report"]
        assert [o["text"] for o in draft["observations"]] == ["slow(api)"]
        assert {h["id"] for h in draft["hypotheses"]} == {h.id for h in out.hypotheses}
        assert draft["conclusion"]["root_cause"]
    assert claims == {v.claim for v in out.verdicts}
    assert [r["result"]["called"] for r in _receipts(folder, "llm.review")] == [True]
    assert _review_deltas(events)[0]["llm_review"] == "called"


def test_a_disabled_low_coverage_verifier_is_not_called_and_nothing_fails_closed(
        tmp_path: Path, fake: FakeProvider, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ENABLE_LOW_COVERAGE_VERIFIER", "false")
    out, _, _ = cda_run(tmp_path, "disabled", llm=_llm(fake))
    assert fake.bodies == []
    assert out.review is not None and out.review.llm_called is False
    assert any("disabled" in r for r in out.review.llm_reasons)
    assert not any("failed closed" in c for v in out.verdicts for c in v.caveats)


def _review_reply(status: str, span: str, rewritten: str = "") -> Any:
    problems = [] if status == "OK" else [{"type": "UNGROUNDED_NODE", "span": span, "fix": "downgrade_to_hypothesis"}]
    content = json.dumps({"status": status, "problems": problems, "rewritten_report": rewritten})
    return lambda body: Answer(body=chat_reply(content))


def test_the_verifiers_answers_are_in_the_review_and_only_lower(tmp_path: Path, fake: FakeProvider) -> None:
    fake.mode = _review_reply("OK", "")
    calm, _, _ = cda_run(tmp_path, "ok", llm=_llm(fake))
    assert calm.review is not None and set(calm.review.llm_answers.values()) == {"OK"}
    fake.mode = _review_reply("NEEDS_REWRITE", "db", "Conclusion: UNKNOWN. Hypothesis: db is down (unverified).")
    rewrite, _, _ = cda_run(tmp_path, "rewrite", llm=_llm(fake))
    assert rewrite.review is not None
    assert rewrite.review.llm_answers == {v.claim: "NEEDS_REWRITE" for v in rewrite.verdicts}
    assert set(rewrite.review.llm_rewrites.values()) == {"Conclusion: UNKNOWN. Hypothesis: db is down (unverified)."}
    assert calm.review.llm_rewrites == {}
    before = {v.claim: v for v in calm.verdicts}
    for v in rewrite.verdicts:  # the verifier may only lower
        assert v.confidence <= before[v.claim].confidence and v.confidence <= 0.5
        assert not (v.status == "supported" and before[v.claim].status != "supported")


def test_the_context_is_redacted_with_the_claim(tmp_path: Path, fake: FakeProvider) -> None:
    span = {"kind": "span", "source": "pager:1", "excerpt": SPAN}
    out, _, _ = cda_run(tmp_path, "pii", llm=_llm(fake), observations=[span],
                        policies={"egress": "partner", "pii_posture": "on"})
    assert fake.bodies and out.review is not None and out.review.llm_called
    for body in fake.bodies:
        text = body.decode("utf-8")
        assert "jane.doe@example.com" not in text and "[EMAIL_1]" in text
    # a rewrite that quotes the placeholder reads with the value put back
    fake.mode = _review_reply("NEEDS_REWRITE", "db", "[EMAIL_1] reported a slow api")
    again, _, _ = cda_run(tmp_path, "pii-rewrite", llm=_llm(fake), observations=[span],
                          policies={"egress": "partner", "pii_posture": "on"})
    assert again.review is not None
    assert set(again.review.llm_rewrites.values()) == {"jane.doe@example.com reported a slow api"}
