"""Seed 004's trace record for ``cda run`` (docs/actions.md, "The trace record"): a focus and
global invariants as inputs, through ``CDAInputs`` and the ``actions.run`` operation, so every
door takes them (the CLI's ``--focus``/``--invariants``, MCP's ``run_action``).

Investigations wrote a ``TraceRecord``; Actions took no focus or invariants and wrote none.
Oracles: an invariant is a hard clause (the hypothesis it excludes is gone, and back without it);
the trace's confidence is the selected explanation's verdict; the focus's integration risks are
the Ken edges that cross it, read from the example's graph.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest

from cda.cli.main import main
from cda.contracts.action import CDAOutputs
from tests.conftest import EXAMPLES
from tests.test_seed001_action import THIN_KEN
from tests.test_seed001_action import cda_run as seed001_run

EXAMPLE = EXAMPLES / "action" / "service_outage.json"


def _inputs(tmp_path: Path, **extra: Any) -> Path:
    data = json.loads(EXAMPLE.read_text())
    data["ken"]["path"] = str(EXAMPLE.parent / data["ken"]["path"])
    path = tmp_path / "inputs.json"
    path.write_text(json.dumps({**data, **extra}))
    return path


def cda_run(tmp_path: Path, *flags: str, **extra: Any) -> tuple[int, CDAOutputs | None, str]:
    """``cda run --json``: the exit code, the outputs (None when the run never started), and what
    it said of an error (stderr, and the failed event's ``error``)."""
    out, err = io.StringIO(), io.StringIO()
    code = main(["run", str(_inputs(tmp_path, **extra)), "--json", "--out", str(tmp_path / "out"), *flags], out, err)
    lines = out.getvalue().splitlines()
    last = json.loads(lines[-1]) if lines else {}
    outputs = CDAOutputs.model_validate(last["outputs"]) if "outputs" in last else None
    return code, outputs, err.getvalue() + str(last.get("error", ""))


def test_the_run_writes_the_trace_with_a_derived_focus_and_the_models_invariants(tmp_path: Path) -> None:
    code, out, _ = cda_run(tmp_path)
    assert code == 0 and out is not None and out.trace is not None
    trace = out.trace
    assert [h.id for h in trace.candidate_hypotheses] == [h.id for h in out.hypotheses]
    selected = next(h for h in out.hypotheses if h.id == trace.selected_hypothesis_id)
    assert trace.focus_subsystem == "api" and selected.assumptions == ["down(api)"]  # the selected one's entity
    assert trace.selected_hypothesis_reason and "information gain" in trace.selected_hypothesis_reason
    verdict = next(v for v in out.verdicts if v.hypothesis_id == trace.selected_hypothesis_id)
    assert trace.confidence == verdict.confidence  # one number, one band
    dsl = json.loads(EXAMPLE.read_text())["dsl"]
    assert len(trace.global_invariants) == dsl.count("\nhard") and trace.global_invariants[0] in dsl
    assert "Ken: web depends api crosses the focus boundary" in trace.integration_risks
    assert trace.policy_fallback_applied is False


def test_focus_and_invariants_from_the_command_line_change_the_run(tmp_path: Path) -> None:
    code, out, _ = cda_run(tmp_path, "--focus", "db", "--invariants", "not down(api)")
    assert code == 0 and out is not None and out.trace is not None
    assert out.trace.focus_subsystem == "db" and out.trace.global_invariants == ["not down(api)"]
    assert "Ken: auth depends db crosses the focus boundary" in out.trace.integration_risks
    assert not any("web depends api" in r for r in out.trace.integration_risks)  # no end of it in the focus
    assumed = [h.assumptions for h in out.hypotheses]
    assert ["down(api)"] not in assumed and assumed  # the invariant is a hard clause: h1 of the plain run is gone
    # the same through the inputs file, and both: the flag's focus wins, the invariants add up
    code, both, _ = cda_run(tmp_path, "--focus", "auth", "--invariants", "not down(db)",
                            focus="db", invariants=["not down(api)"])
    assert code == 0 and both is not None and both.trace is not None
    assert both.trace.focus_subsystem == "auth"
    assert both.trace.global_invariants == ["not down(api)", "not down(db)"]


@pytest.mark.parametrize(("flags", "extra", "says"), [
    (("--focus", "nowhere"), {}, "focus: 'nowhere' is neither a Ken node nor an argument"),
    (("--focus", "a b"), {}, "focus"),
    ((), {"focus": "../x"}, "focus"),
    (("--invariants", "not down("), {}, "invariants[0]:1:10: syntax error"),
])
def test_a_bad_focus_or_invariant_is_bad_input_named_by_its_field(tmp_path: Path, flags: tuple[str, ...],
                                                                  extra: dict[str, Any], says: str) -> None:
    code, out, err = cda_run(tmp_path, *flags, **extra)
    assert code == 2, (code, err)
    assert says in err and "Traceback" not in err


def test_an_abstained_run_says_its_fallback_and_offers_no_candidate(tmp_path: Path) -> None:
    out, _ = seed001_run(tmp_path, ken=THIN_KEN)
    assert out.status == "abstained" and out.trace is not None
    assert out.trace.policy_fallback_applied and out.trace.candidate_hypotheses == []
    assert out.trace.selected_hypothesis_id is None and out.trace.focus_subsystem.startswith("none")


def test_the_mcp_door_takes_focus_and_invariants() -> None:
    pytest.importorskip("mcp", reason="the MCP SDK is in the test extra (cda[mcp])")
    from tests.test_mcp import _run, _structured

    inputs = json.loads(EXAMPLE.read_text())
    inputs["ken"]["path"] = str(EXAMPLE.parent / inputs["ken"]["path"])

    async def body(client: Any) -> Any:
        return await client.call_tool("run_action", {"inputs": inputs, "focus": "db", "invariants": ["not down(api)"]})

    outputs = _structured(_run(body))
    assert outputs["trace"]["focus_subsystem"] == "db"
    assert outputs["trace"]["global_invariants"] == ["not down(api)"]
