"""A hypothesis's cost leaves CDA exactly (rule 3; docs/dsl.md, "Hypotheses"): weights of
1.0000000000000001 and 1 gave the same ``"cost": 1.0`` in ``cda solve --json`` while the solver
ranked them apart. Now every door's JSON — ``cda solve --json``, ``--format jsonl``, the ToolBus
(which returns no cost: checked on its schemas), the MCP server through the SDK's client — carries ``cost_exact`` (the digits),
and CDA's own JSON writers write ``cost`` itself from those digits. The oracle is the weights'
sum done here with ``Fraction`` (independent of the engine)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from decimal import Decimal
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import cda
from cda.contracts.json_numbers import exact_dumps, exact_text, fraction_of_text
from cda.contracts.result import Hypothesis, SolveResult
from tests.conftest import ROOT

FINE = "1.0000000000000001"
PROBLEM = (f"hyp a, b\nobservable o\nhard: o iff (a or b)\nobserve o\nsoft weight {FINE}: not a\n"
           "soft weight 1: not b\ngoal best_explanation top 3\n")
#: the oracle: assumed set -> the exact sum of the weights it violates
WANT = {("b",): Fraction(1), ("a",): Fraction(FINE), ("a", "b"): Fraction(FINE) + 1}


def _check(hypotheses: list[dict[str, Any]], raw: str | None) -> None:
    """Each hypothesis's exact cost is the oracle's, the two single ones differ, and where CDA
    wrote the JSON text itself (``raw``) the number ``cost`` is the exact digits."""
    got = {tuple(h["assumed"]): fraction_of_text(h["cost_exact"]) for h in hypotheses}
    assert got == WANT, got
    assert [tuple(h["assumed"]) for h in hypotheses] == [("b",), ("a",), ("a", "b")]  # ranked exactly
    assert not any(h["cost_approximate"] for h in hypotheses)
    if raw is not None:
        assert '"cost":1.0000000000000001,' in raw.replace(" ", "") and '"cost":1,' in raw.replace(" ", ""), raw


def _cda(*argv: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "CDA_KEY_DIR": str(cwd / "keys")}
    return subprocess.run([sys.executable, "-m", "cda", *argv], capture_output=True, text=True, env=env, cwd=cwd,
                          timeout=600, check=False)


def test_cda_solve_json_and_jsonl_print_each_cost_exactly(tmp_path: Path) -> None:
    backend = "z3"  # clingo refuses 16 decimals by name (its weights are 32-bit; tests/test_cli.py)
    path = tmp_path / "w.cda"
    path.write_text(PROBLEM, encoding="utf-8")
    done = _cda("solve", str(path), "--json", "--backend", backend, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    _check(json.loads(done.stdout)["hypotheses"], done.stdout)
    # the digits read back as Decimal are the exact costs (parse_float keeps the text)
    doc = json.loads(done.stdout, parse_float=Decimal)
    assert [Fraction(h["cost"]) for h in doc["hypotheses"]] == [WANT[tuple(h["assumed"])] for h in doc["hypotheses"]]
    lines = _cda("solve", str(path), "--format", "jsonl", "--backend", backend, cwd=tmp_path)
    assert lines.returncode == 0, lines.stderr
    _check(json.loads(lines.stdout)["result"]["hypotheses"], lines.stdout)


def test_no_toolbus_result_carries_a_float_cost() -> None:
    # the ToolBus has no solve method: no result of it holds a hypothesis's cost (its schemas say
    # so, and tests/test_service.py checks they are current); the conductor's trace writes costs as
    # exact text (cda/conductor/tools.py)
    folder = ROOT / "schemas" / "toolbus"
    assert sorted(folder.glob("*.result.schema.json"))
    for schema in folder.glob("*.result.schema.json"):
        assert '"cost"' not in schema.read_text(encoding="utf-8"), schema.name


def test_the_mcp_door_carries_each_exact_cost(tmp_path: Path) -> None:
    pytest.importorskip("mcp", reason="the MCP SDK is in the test extra (cda[mcp])")
    import anyio
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    env = {**os.environ, "PYTHONPATH": str(ROOT), "CDA_KEY_DIR": str(tmp_path / "keys")}
    server = StdioServerParameters(command=sys.executable, args=["-m", "cda", "mcp"], env=env, cwd=str(tmp_path))

    async def main() -> Any:
        async with Client(server, read_timeout_seconds=120) as client:
            return await client.call_tool("solve", {"dsl": PROBLEM, "backend": "z3"})

    result = anyio.run(main)
    assert not result.is_error, result.content
    _check(result.structured_content["hypotheses"], None)  # the SDK writes the JSON: the digits are in cost_exact


# ---- the property: what is printed reads back as the solver's exact value --------------------------

@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.decimals(min_value=Decimal("0.000001"), max_value=Decimal("1000000"), allow_nan=False,
                            allow_infinity=False, places=9), min_size=1, max_size=3))
def test_a_printed_cost_parses_back_to_the_exact_sum(weights: list[Decimal]) -> None:
    names = [f"a{i}" for i in range(len(weights))]
    text = (f"hyp {', '.join(names)}\nobservable o\nhard: o iff ({' or '.join(names)})\nobserve o\n"
            + "".join(f"soft weight {w}: not {n}\n" for w, n in zip(weights, names))
            + f"goal best_explanation top {2 ** len(weights)}\n")
    result = cda.solve(text, backend="z3")
    printed = json.loads(result.json_text(), parse_float=Decimal)
    for h, shown in zip(result.hypotheses, printed["hypotheses"]):
        want = sum((Fraction(w) for w, n in zip(weights, names) if n in h.assumed), Fraction(0))
        assert h.exact_cost() == want
        assert Fraction(shown["cost"]) == want  # the JSON number's own digits, through Decimal
        assert fraction_of_text(shown["cost_exact"]) == want
    # and the result read back from its JSON keeps the exact costs
    again = SolveResult.model_validate_json(result.json_text())
    assert [h.exact_cost() for h in again.hypotheses] == [h.exact_cost() for h in result.hypotheses]


@given(st.fractions(min_value=-10**6, max_value=10**6, max_denominator=10**6))
def test_a_cost_that_is_no_finite_decimal_is_p_over_q_and_labelled_approximate(value: Fraction) -> None:
    h = Hypothesis(id="h1", assumed=[], cost=0.0, posterior=1.0, violated=[]).with_exact_cost(value)
    data = json.loads(exact_dumps(h.model_dump(mode="json")), parse_float=Decimal)
    assert fraction_of_text(data["cost_exact"]) == value
    finite = "/" not in exact_text(value)
    assert data["cost_approximate"] is not finite
    if finite:
        assert Fraction(data["cost"]) == value  # written from the digits
    else:
        assert float(data["cost"]) == float(value)  # the nearest float, labelled approximate
