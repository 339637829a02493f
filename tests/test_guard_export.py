"""``cda guard export``: the ledger, decisions and escalations of a guardian file with their
evidence and receipt ids, as JSON Lines and CSV, the same records both ways and the same bytes
twice; a hostile argument never becomes a spreadsheet formula."""

from __future__ import annotations

import csv
import io
import json
from decimal import Decimal
from pathlib import Path
from typing import Any

from cda.cli.main import main
from cda.guardian import escalations as esc
from cda.guardian.decision import Decision
from cda.guardian.gate import Gate, ToolRegistry
from cda.guardian.ledger import Ledger
from cda.guardian.policies import PolicyStore
from cda.guardian.proposal import read_action


def _action(action_id: str, cost: str, name: str) -> dict[str, Any]:
    return {"action_id": action_id, "agent_id": "agent-7", "tool": {"name": "launch", "version": "1"},
            "action_type": "ads.launch", "resources": ["campaign"], "cost_estimate": cost,
            "parameters": {"name": name}}


def _cda(*argv: str) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    return main(list(argv), stdout=out, stderr=err), out.getvalue() + err.getvalue()


def test_the_export_lists_every_entry_decision_and_escalation_with_their_receipts(tmp_path: Path) -> None:
    db = tmp_path / "guardian.db"
    ledger = Ledger.open(db)
    ledger.set_budget("agent-7", "USD", Decimal("100"))
    registry = ToolRegistry()
    registry.register("launch", "1", {"type": "object"}, lambda args: "ok")
    gate = Gate(registry, PolicyStore(), None, ledger)
    approved = gate.call(_action("a1", "60.5", "spring"))
    held = gate.call(_action("a2", "70", "=HYPERLINK(\"http://evil\")"))
    assert approved.called and held.record.decision is Decision.ESCALATE
    for outcome, doc in ((approved, _action("a1", "60.5", "spring")), (held, _action("a2", "70", "=HYPERLINK"))):
        ledger.store.record_decision(outcome.record, read_action(doc) if outcome is approved else None)
    proposed = read_action(_action("a2", "70", "=HYPERLINK(\"http://evil\")"))
    escalation = esc.escalate(ledger.store, key="k" * 64, action=proposed, tool_id="launch@1", record=held.record)[0]
    ledger.close()

    code, jsonl = _cda("guard", "export", "--ledger", str(db))
    assert code == 0
    records = [json.loads(line) for line in jsonl.splitlines()]
    assert [(r["kind"], r["id"]) for r in records] == [("ledger", "call:a1"), ("decision", "decision-1"),
                                                      ("decision", "decision-2"), ("escalation", escalation.escalation_id)]
    entry, first, second, escalated = records
    assert entry["amount"] == "60.5" and entry["status"] == "settled"
    assert entry["receipts"] == [approved.record.receipt] == first["receipts"]  # the entry cites the decision that paid it
    assert second["what"] == "ESCALATE" and second["receipts"] == [held.record.receipt]
    assert escalated["receipts"] == [held.record.receipt] and escalated["what"] == "open"
    code, text = _cda("guard", "export", "--ledger", str(db), "--format", "csv")
    assert code == 0
    rows = list(csv.DictReader(io.StringIO(text)))
    assert [(r["kind"], r["id"], r["amount"], r["receipts"]) for r in rows] == [
        (r["kind"], r["id"], r["amount"] or "", ";".join(r["receipts"])) for r in records]
    assert not any(cell.startswith(("=", "+", "@")) for row in csv.reader(io.StringIO(text)) for cell in row)
    from cda.guardian.export import _cell

    assert [_cell(v) for v in ("=HYPERLINK(1)", "+1", "@x", "-2", "a=b", ["=x", "y"])] == [
        "'=HYPERLINK(1)", "'+1", "'@x", "'-2", "a=b", "'=x;y"]  # what a spreadsheet would run, it shows
    assert _cda("guard", "export", "--ledger", str(db))[1] == jsonl  # the same file, the same bytes
    code, message = _cda("guard", "export", "--ledger", str(tmp_path / "none.db"))
    assert code == 2 and "none.db" in message and "Traceback" not in message
