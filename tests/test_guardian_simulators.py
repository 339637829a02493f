"""The gate holds a causal simulator as the docs say (docs/causal.md: ``CausalSimulator``;
docs/guardian.md: ``CausalModelSimulator``), from an object or a model file, and a bad model file
is one clear error, never a traceback."""

from __future__ import annotations

import io
from decimal import Decimal
from pathlib import Path

import pytest

from cda.cli.main import main
from cda.errors import CDAError
from cda.guardian.causal import CausalSimulator, simulate
from cda.guardian.decide import evaluate
from cda.guardian.decision import Decision
from cda.guardian.ledger import Ledger
from cda.guardian.policies import PolicyStore
from cda.guardian.simulation import CausalModelSimulator
from tests.conftest import EXAMPLES

MODEL = EXAMPLES / "guardian" / "marketing_launch.toml"


def _action(ads: int) -> dict[str, object]:
    return {"action_id": f"launch-{ads}", "agent_id": "agent-7", "tool": {"name": "ads", "version": "1"},
            "action_type": "ads.launch", "cost_estimate": "10",
            "parameters": {"budget_usd": 20000, "ads_per_day": ads}}


@pytest.mark.parametrize("make", [lambda: CausalSimulator(str(MODEL), samples=400),
                                  lambda: CausalModelSimulator(str(MODEL), samples=400),
                                  lambda: CausalModelSimulator(MODEL, samples=400)])
def test_either_simulator_object_decides_as_the_model_predicts(tmp_path: Path, make: object) -> None:
    ledger = Ledger.open(tmp_path / "g.db")
    ledger.set_budget("agent-7", "USD", Decimal(100))
    sim = make()  # type: ignore[operator]
    from cda.guardian.causal_model import load_causal_model

    model = load_causal_model(MODEL)
    for ads, expected in ((3, Decision.APPROVE), (9, Decision.ESCALATE)):
        record = evaluate(_action(ads), PolicyStore(), sim, ledger, seed=5)
        oracle = simulate(model, {"budget_usd": 20000, "ads_per_day": ads}, samples=400, seed=5)
        assert record.decision is expected, record
        assert record.reason == ("policy_clear" if expected is Decision.APPROVE else "causal_risk")
        assert record.details["risk"] == oracle.risk_score and record.sim_id == oracle.id  # the model's own answer
        assert record.samples == 400
    ledger.close()


def test_a_bad_model_file_is_one_clear_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text("[nodes.x]\nmechanism = \"linear\"\nparents = { y = 1 }\n")
    for make in (CausalModelSimulator, CausalSimulator):
        with pytest.raises(CDAError, match="bad.toml"):
            make(str(bad))
    with pytest.raises(CDAError, match="ends in .toml or .json"):
        CausalModelSimulator(str(tmp_path / "model.txt"))
    (tmp_path / "a.json").write_text(_action_json())
    (tmp_path / "p.toml").write_text("")
    Ledger.open(tmp_path / "g.db").close()
    out, err = io.StringIO(), io.StringIO()
    code = main(["guard", str(tmp_path / "a.json"), "--policies", str(tmp_path / "p.toml"), "--ledger",
                 str(tmp_path / "g.db"), "--sim", str(bad)], stdout=out, stderr=err)
    assert code == 2 and "bad.toml" in err.getvalue() and "Traceback" not in err.getvalue()


def _action_json() -> str:
    import json

    return json.dumps(_action(3))
