"""A claim the time budget cut off is *unknown*, with no confidence and its reason, at every door
(the second audit's finding 8): never *inconclusive* (the word for "the premises allow both")
with a confidence of 0.5 nobody computed. The same claim, given the time, is decided, and both
backends agree on it (the oracle: the unlimited answer of the other backend)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

import cda
from cda.contracts.result import Verdict
from cda.contracts.status import VerdictStatus
from tests.conftest import ROOT
from tests.test_audit2_messages import _cda

ENTAILED = "hyp a, b\nobservable o\nobserve o\nhard: o iff (a or b)\ngoal prove a or b\n"


def test_the_claim_is_decided_when_given_the_time(backend: str) -> None:
    """The oracle: without a budget both backends prove it (so *unknown* below is the budget's doing)."""
    other = "clingo" if backend == "z3" else "z3"
    mine, theirs = cda.solve(ENTAILED, backend=backend), cda.solve(ENTAILED, backend=other)
    assert [v.status for v in mine.verdicts] == [v.status for v in theirs.verdicts] == ["supported"]
    assert mine.verdicts[0].confidence == 1.0


def test_cut_off_claim_is_unknown_with_no_confidence_at_the_cli(backend: str, tmp_path: Path) -> None:
    (tmp_path / "t.cda").write_text(ENTAILED)
    done = _cda("solve", "t.cda", "--json", "--timeout", "0", "--backend", backend, cwd=tmp_path)
    assert done.returncode == 3, done.stderr  # a labelled partial
    out = json.loads(done.stdout)
    assert out["status"] == "unknown" and out["partial"] is True
    [verdict] = out["verdicts"]
    assert verdict["status"] == "unknown" and verdict["confidence"] is None
    assert "time budget ran out" in verdict["reason"]
    human = _cda("solve", "t.cda", "--timeout", "0", "--backend", backend, cwd=tmp_path)
    assert human.returncode == 3
    assert "prove a or b: UNKNOWN (not decided: no confidence)" in human.stdout, human.stdout
    assert "INCONCLUSIVE" not in human.stdout and "confidence 0.5" not in human.stdout


def test_cut_off_claim_is_unknown_over_mcp() -> None:
    """The MCP door: the SDK's client checks the structured answer against the tool's output
    schema, which must now allow ``confidence: null`` and ``status: unknown``."""
    pytest.importorskip("mcp", reason="the MCP SDK is in the test extra (cda[mcp])")
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    server = StdioServerParameters(command=sys.executable, args=["-m", "cda", "mcp"],
                                   env={**os.environ, "PYTHONPATH": str(ROOT)}, cwd=str(ROOT))

    async def main() -> Any:
        async with Client(server, read_timeout_seconds=60) as client:
            return await client.call_tool("solve", {"dsl": ENTAILED, "backend": "z3", "timeout": 0})

    result = anyio.run(main)
    assert not result.is_error, result.content
    data = result.structured_content
    assert isinstance(data, dict) and data["partial"] is True
    assert [(v["status"], v["confidence"]) for v in data["verdicts"]] == [("unknown", None)]


def test_the_verdict_contract_ties_unknown_to_no_confidence() -> None:
    base = {"name": "g", "goal": "prove", "claim": "a", "justification": [], "witnesses": []}
    with pytest.raises(ValueError, match="unknown verdict has no confidence"):
        Verdict.model_validate({**base, "status": "unknown", "confidence": 0.5, "reason": "time ran out"})
    with pytest.raises(ValueError, match="unknown verdict has no confidence and says why"):
        Verdict.model_validate({**base, "status": "unknown", "confidence": None})
    with pytest.raises(ValueError, match="inconclusive verdict has a confidence"):
        Verdict.model_validate({**base, "status": "inconclusive", "confidence": None})
    ok = Verdict.model_validate({**base, "status": "unknown", "confidence": None, "reason": "time ran out"})
    assert ok.status is VerdictStatus.UNKNOWN and not ok.status.decided
    assert json.loads(ok.model_dump_json())["confidence"] is None


def test_a_ceiling_never_lifts_an_unknown_claim() -> None:
    """A check only lowers (min): an undecided claim stays unknown, with nothing to cap."""
    from cda.verifiers.agreement import downgrade
    from cda.verifiers.protocol import Ceiling, under_ceilings

    assert under_ceilings("unknown", 0.0, [Ceiling.open(0.5, "llm")])[0] is VerdictStatus.UNKNOWN
    undecided = Verdict(name="g", goal="prove", claim="a", status=VerdictStatus.UNKNOWN, confidence=None,
                        justification=[], witnesses=[], reason="the time budget ran out")
    assert downgrade(undecided, "backends disagree") == undecided


def test_the_abstain_gate_and_the_conductor_do_not_count_unknown_as_support() -> None:
    from cda.conductor.tools import POSTCONDITIONS, solve_outputs
    from cda.verifiers.abstain import _supporting

    cut = cda.solve(ENTAILED, backend="z3", timeout=0)
    [undecided] = cut.verdicts
    assert _supporting(["a or b"], [undecided]) is None  # no verdict supports the atom
    proved = cda.solve(ENTAILED, backend="z3").verdicts
    assert _supporting(["a or b"], proved) == [proved[0].name]
    outputs = solve_outputs(cut)
    assert [v["status"] for v in outputs["verdicts"]] == ["unknown"]
    # the conductor's postconditions: a claim must be supported, and the answer complete
    assert POSTCONDITIONS["status_in"]({}, {"status": "unknown"}, None, ("status", "sat")) is not None  # type: ignore[arg-type]
    assert POSTCONDITIONS["complete"]({}, outputs, None, ()) == "the answer is partial (a budget ran out)"  # type: ignore[arg-type]


def test_the_action_summary_lists_an_unknown_claim_as_not_decided() -> None:
    """The action contract carries no confidence for an unknown claim (band low), the
    one-band and conservative rules leave it so, and the boundary summary says "not decided"."""
    from cda.actions.artifacts import boundary_summary
    from cda.actions.bands import one_band_per_statement
    from cda.contracts.action import ActionVerdict, CDAInputs

    cut = cda.solve(ENTAILED, backend="z3", timeout=0)
    verdict = ActionVerdict(hypothesis_id="prove@5", status=VerdictStatus.UNKNOWN, confidence=None, band="low",
                            claim="prove a or b", caveats=[cut.verdicts[0].reason or ""])
    assert json.loads(verdict.model_dump_json())["confidence"] is None
    kept, _ = one_band_per_statement([verdict], None, {})
    assert kept == [verdict]
    inputs = CDAInputs.model_validate({"problem": "is a or b?", "dsl": ENTAILED})
    text = boundary_summary("cda-test", inputs, cut, [verdict], [], [])
    assert "- UNKNOWN prove a or b (not decided: no confidence)" in text, text
    assert "prove a or b was not decided (the budget cut it off)" in text
    assert "0.50" not in text and "INCONCLUSIVE" not in text


def test_the_action_verdict_contract_ties_unknown_to_no_confidence() -> None:
    from cda.contracts.action import ActionVerdict

    base = {"hypothesis_id": "h", "claim": "prove a"}
    with pytest.raises(ValueError, match="an unknown verdict has no confidence"):
        ActionVerdict.model_validate({**base, "status": "unknown", "confidence": 0.5, "band": "low"})
    with pytest.raises(ValueError, match="a supported verdict has a confidence"):
        ActionVerdict.model_validate({**base, "status": "supported", "confidence": None, "band": "low"})
    with pytest.raises(ValueError, match="band low"):
        ActionVerdict.model_validate({**base, "status": "unknown", "confidence": None, "band": "high"})
