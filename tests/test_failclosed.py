"""Verification fails closed: a required LLM check that gives no judgement leaves no claim settled.

A fake OpenAI-compatible provider on loopback (``tests/fake_llm.py``) answers each failure mode
(429, 5xx, a timeout, malformed or out-of-contract replies, a reset connection) and the run
must report every claim the solver supported as *inconclusive*, saying why in the outputs'
caveats, ``summary.md``, ``evidence.json`` and the event stream. Oracle: the same inputs with
the provider answering "yes" keep the solver's supported verdict, so the demotion is the
failure's doing.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cda.actions.approvals import approve, deny, needed_approvals
from cda.adapters.action_entry import load_inputs, run_inputs
from cda.contracts.action import CDAInputs
from tests.conftest import ROOT
from tests.fake_llm import MODES, FakeProvider, chat_reply, fake_provider, judgement
from tests.timing import Stopwatch

EXAMPLE = ROOT / "examples" / "action" / "service_outage.json"


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeProvider]:
    for var in ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.delenv(var, raising=False)
    with fake_provider() as server:
        yield server


def _inputs(url: str, **update: Any) -> CDAInputs:
    data = load_inputs(EXAMPLE).model_dump(mode="json")
    data["ken"]["path"] = str(EXAMPLE.parent / data["ken"]["path"])
    data["llm"] = {"provider": "openai", "base_url": url, "model": "fake", "egress_class": "partner", "when": "always",
                   "timeout_s": 0.4}
    data["policies"] = {"egress": "partner", "pii_posture": "off"}
    for key, value in update.items():
        data[key] = value
    return CDAInputs.model_validate(data)


def _supported(run: Any) -> list[str]:
    return [v.claim for v in run.outputs.verdicts if v.status == "supported"]


def test_the_oracle_a_provider_that_agrees_keeps_the_solvers_supported_verdict(fake: FakeProvider) -> None:
    run = run_inputs(_inputs(fake.url))
    assert _supported(run) == ["prove slow(api)"]
    assert not any("failed closed" in c for c in run.outputs.caveats)


@pytest.mark.parametrize("mode", sorted(set(MODES) - {"ok"}))
def test_every_failure_mode_fails_closed(fake: FakeProvider, mode: str, tmp_path: Path) -> None:
    fake.mode = mode
    with Stopwatch() as watch:
        run = run_inputs(_inputs(fake.url), tmp_path)
    out = run.outputs
    assert _supported(run) == [], (mode, [(v.claim, v.status) for v in out.verdicts])
    slow = next(v for v in out.verdicts if v.claim == "prove slow(api)")
    assert slow.status == "inconclusive" and slow.confidence <= 0.5
    assert any(c.startswith("required LLM check gave no judgement") for c in slow.caveats)
    assert any("failed closed to inconclusive" in c for c in out.caveats)
    folder = tmp_path / out.action_id
    summary = (folder / "summary.md").read_text()
    assert "INCONCLUSIVE prove slow(api)" in summary and "required LLM check gave no judgement" in summary
    evidence = json.loads((folder / "evidence.json").read_text())
    assert {u["claim"] for u in evidence["unverified_claims"]} == {v.claim for v in out.verdicts}
    assert all(u["required_by"] for u in evidence["unverified_claims"])
    assert any(s["name"] == "llm.judge" and s["result"]["fail_closed"] for s in evidence["missing_evidence"])
    updates = [e.payload for e in run.events if e.type == "action_checkpoint" and e.kind == "verifier_update"]
    assert any(u.get("verifier") == "llm" and "failed closed" in u.get("detail", "") for u in updates)
    assert any(e.type == "action_notice" and "failed closed" in e.message for e in run.events)
    # the calls for the five claims ran at once: a timeout costs one timeout, not five (time
    # uncontended for a CPU, tests/timing.py: load cannot make it fail)
    assert watch.uncontended < 3.0, watch


def test_429_and_5xx_are_retried_with_backoff_and_a_recovery_is_a_judgement(fake: FakeProvider) -> None:
    seen: dict[bytes, int] = {}

    def flaky(body: bytes) -> Any:
        seen[body] = seen.get(body, 0) + 1
        if seen[body] == 1:
            return MODES["429"]()
        if seen[body] == 2:
            return MODES["503"]()
        return judgement()

    fake.mode = flaky
    run = run_inputs(_inputs(fake.url))
    assert _supported(run) == ["prove slow(api)"]
    assert sorted(set(seen.values())) == [3]  # each claim: 429, 503, then a judgement


def test_calls_for_several_claims_run_concurrently(fake: FakeProvider) -> None:
    fake.mode = lambda body: MODES["ok"]().__class__(body=chat_reply(json.dumps({"agrees": "yes"})), delay_s=0.4)
    with Stopwatch() as watch:
        run = run_inputs(_inputs(fake.url, llm={"provider": "openai", "base_url": fake.url, "model": "fake", "when": "always",
                                               "egress_class": "partner", "timeout_s": 2}))
    assert len(run.outputs.verdicts) == 5 and fake.max_active >= 3
    assert watch.uncontended < 5 * 0.4, watch
    assert _supported(run) == ["prove slow(api)"]


def test_a_refused_egress_fails_closed_and_an_approval_lets_the_call_out(fake: FakeProvider, tmp_path: Path) -> None:
    refused = _inputs(fake.url, policies={"egress": "local", "pii_posture": "off"})
    assert needed_approvals(refused) == ["egress:partner"]
    run = run_inputs(refused, tmp_path)
    assert fake.bodies == [] and _supported(run) == []
    evidence = json.loads((tmp_path / run.outputs.action_id / "evidence.json").read_text())
    assert any(s["name"] == "approval.refused" and s["status"] == "denied" for s in evidence["missing_evidence"])
    granted = run_inputs(approve(refused, "egress:partner"), tmp_path)
    assert fake.bodies and _supported(granted) == ["prove slow(api)"]
    names = [r["name"] for r in _receipts(tmp_path, granted.outputs.action_id)]
    assert "approval.used" in names and "approval.refused" not in names
    # deny takes it back: refused again, nothing more sent
    sent = len(fake.bodies)
    again = run_inputs(deny(approve(refused, "egress:partner"), "egress:partner"))
    assert len(fake.bodies) == sent and _supported(again) == []


def _receipts(folder: Path, action_id: str) -> list[dict[str, Any]]:
    return [json.loads(p.read_text()) for p in sorted((folder / action_id / "cda_plan" / "receipts").glob("*.json"))]


def _one_call_and_a_half(fake: FakeProvider) -> int:
    """A token budget that lets one call out and not two: each call reserves its prompt (~4 bytes a
    token: the claim, the evidence and the verifier's context) and a 512-token reply."""
    one = max(len(body) for body in fake.bodies) // 4 + 512
    return one + one // 2


def test_token_budget_counts_usage_and_refuses_calls_past_it(fake: FakeProvider) -> None:
    fake.mode = lambda body: MODES["ok"]().__class__(body=chat_reply(json.dumps({"agrees": "yes"}), usage=900))
    roomy = run_inputs(_inputs(fake.url, budgets={"wall": 60, "tokens": 100_000}))
    assert _supported(roomy) == ["prove slow(api)"] and len(fake.bodies) == 5
    budget = _one_call_and_a_half(fake)
    fake.bodies.clear()
    tight = run_inputs(_inputs(fake.url, budgets={"wall": 60, "tokens": budget}))
    sent = len(fake.bodies)
    assert 1 <= sent < 5
    refused = [v for v in tight.outputs.verdicts if any("token budget" in c for c in v.caveats)]
    assert len(refused) == 5 - sent and all(v.status != "supported" for v in refused)
    assert 900 * sent <= budget


def test_a_provider_reporting_zero_tokens_cannot_switch_the_token_budget_off(fake: FakeProvider) -> None:
    fake.mode = lambda body: MODES["ok"]().__class__(body=chat_reply(json.dumps({"agrees": "yes"}), usage=0))
    run_inputs(_inputs(fake.url, budgets={"wall": 60, "tokens": 100_000}))
    budget = _one_call_and_a_half(fake)
    fake.bodies.clear()
    tight = run_inputs(_inputs(fake.url, budgets={"wall": 60, "tokens": budget}))
    assert 1 <= len(fake.bodies) < 5  # each call is counted at least at its prompt's size
    assert any(any("token budget" in c for c in v.caveats) for v in tight.outputs.verdicts)


def test_a_confidence_that_is_not_a_number_is_out_of_contract() -> None:
    from pydantic import ValidationError

    from cda.verifiers.llm_gate import LLMJudgement

    for bad in (True, "1"):
        with pytest.raises(ValidationError):
            LLMJudgement.model_validate({"provider": "p", "agrees": "yes", "confidence": bad})
    assert LLMJudgement.model_validate({"provider": "p", "agrees": "yes", "confidence": 0.5}).confidence == 0.5


def test_a_failed_function_check_that_names_no_claim_is_not_silent() -> None:
    data = json.loads((ROOT / "examples" / "action" / "service_outage.json").read_text())
    data["functions"] = [{"name": "never", "source": "def check(claim):\n    return False\n", "claims": ["Slow(api)"]}]
    data.pop("ken", None)
    from cda.actions.runner import run_action

    run = run_action(CDAInputs.model_validate(data))
    assert any("function never did not pass on 'Slow(api)'" in c for c in run.outputs.caveats), run.outputs.caveats
