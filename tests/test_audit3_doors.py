"""The third audit's findings (audit3/REPORT.md), each through the door it was found at: the
guardian's policy store, the conductor's `command` tools, the gateway's upstream schemas."""

from __future__ import annotations

import io
import json
from decimal import Decimal
from pathlib import Path

import pytest

from cda.cli.main import main
from cda.guardian.ledger import Ledger

ACTION = {"action_id": "x1", "agent_id": "a", "tool": {"name": "t", "version": "1"}, "action_type": "read",
          "resources": ["r/1"], "cost_estimate": "1", "currency": "USD", "parameters": {}}


def _guard(tmp_path: Path, cost: str) -> tuple[int, str, str]:
    ledger = Ledger.open(tmp_path / "g.db")
    ledger.set_budget("a", "USD", Decimal(300))
    ledger.close()
    (tmp_path / "p.toml").write_text('[[policy]]\nid = "cap"\ndsl = "value(metric:cost) <= 5000 USD"\n'
                                     f'[[tool]]\nname = "t*"\ncost = {cost}\n')
    (tmp_path / "a.json").write_text(json.dumps(ACTION))
    out, err = io.StringIO(), io.StringIO()
    code = main(["guard", str(tmp_path / "a.json"), "--policies", str(tmp_path / "p.toml"), "--ledger",
                 str(tmp_path / "g.db")], stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


@pytest.mark.parametrize(("cost", "said"), [("nan", "a cost is a finite number, not NaN"),
                                            ("inf", "a cost is a finite number, not Infinity"),
                                            ("-inf", "a cost is a finite number, not -Infinity"),
                                            ('"NaN"', "a cost is a finite number, not NaN"),
                                            ('"0.1e-50"', "at most 9 decimal places"),
                                            ('"0.0000000001"', "at most 9 decimal places"),
                                            ("0.0000000001", "at most 9 decimal places"),
                                            ('"lots"', "'lots' is not a decimal number")])
def test_a_tool_rule_cost_that_is_not_a_finite_exact_amount_is_refused_in_one_line(
        tmp_path: Path, cost: str, said: str) -> None:
    # a TOML nan or inf was a TypeError traceback; a string cost skipped the decimal-places check
    code, out, err = _guard(tmp_path, cost)
    assert (code, out) == (2, ""), err
    assert "tool[0].cost" in err and said in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


def test_a_tool_rule_cost_as_text_or_number_is_read_exactly(tmp_path: Path) -> None:
    for cost in ('"0.25"', "0.25", '"1e2"'):
        code, out, err = _guard(tmp_path, cost)
        assert (code, err) == (0, ""), cost
        assert out.startswith("APPROVE")
