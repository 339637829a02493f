"""`cda solve --json` on bench_core's family, byte for byte as before issue 34's clingo-path work.

Why: the clingo path was made faster (docs/benchmarks.md, "The clingo path") by reading,
grounding, re-checking and ranking differently; none of that may change a byte of what a user
reads. The digests in ``tests/golden/bench_core_solve_json.json`` were taken from the commit
before that work (its ``made_by`` says how); every hypothesis is listed (``--top 300``: the family
has 254), on both backends, so a change in reading, positions, ranking or pricing shows here.
"""

from __future__ import annotations

import hashlib
import io
import json
from decimal import Decimal
from fractions import Fraction
from pathlib import Path

import pytest

from cda.cli.main import main
from cda.contracts.result import SolveResult
from tests.conftest import benchmark_module

GOLDEN = json.loads((Path(__file__).parent / "golden" / "bench_core_solve_json.json").read_text(encoding="utf-8"))


@pytest.mark.parametrize("key", sorted(GOLDEN["sha256"], key=lambda k: (int(k.split("/")[0]), k)))
def test_solve_json_bytes_unchanged(key: str, tmp_path: Path) -> None:
    n, backend = key.split("/")
    core = benchmark_module("bench_core")
    problem = tmp_path / f"core{n}.cda"
    problem.write_text(core.to_dsl(core.generate(int(n), 0)), encoding="utf-8")
    out, err = io.StringIO(), io.StringIO()
    code = main(["solve", str(problem), "--json", "--backend", backend, "--top", "300"], out, err)
    assert code == 0, err.getvalue()
    text = out.getvalue()
    doc = json.loads(text)
    assert doc["hypotheses_enumerated"] == 254
    # the digests predate exact costs in JSON (docs/dsl.md, "Hypotheses"): each cost is checked
    # exact here, then the result is written in the form it had (cost a float to nine decimals)
    exact = json.loads(text, parse_float=Decimal)["hypotheses"]
    assert all(Fraction(h["cost"]) == Fraction(h["cost_exact"]) and not h["cost_approximate"] for h in exact)
    result = SolveResult.model_validate_json(text)
    for h in result.hypotheses:
        h.cost = round(h.cost, 9) + 0.0
    before = result.model_dump_json(indent=2, exclude={"hypotheses": {"__all__": {"cost_exact", "cost_approximate"}}}) + "\n"
    assert hashlib.sha256(before.encode()).hexdigest() == GOLDEN["sha256"][key]
