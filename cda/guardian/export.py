"""The audit export of a guardian file: its ledger, decisions and escalations, each with its
evidence and receipt ids, as JSON Lines or CSV (docs/guardian.md, "Audit export").

One record a line (JSONL) or a row (CSV), in a fixed order — ledger entries by sequence, then
decisions and escalations by the order they were recorded — so the same file exports to the same
bytes. Every record names its ``kind``, ``id``, ``agent_id``, ``at``, what it was (``what``: the
entry's type, the decision, the escalation's state), its amount and currency as exact decimal text,
``status`` (the entry's status, the decision's reason, the escalation's reason), ``evidence`` (the
entry's references, the decision's action and policy digests, the escalation's decision receipt
and ledger entry) and ``receipts`` (the receipt ids it cites). A CSV cell that a spreadsheet would
read as a formula (``=``, ``+``, ``-``, ``@``, a tab or a carriage return first) is written with a
leading ``'``: an agent's argument never runs in an auditor's spreadsheet.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator
from typing import Any, Literal

from cda.guardian.guardian_db import GuardianStore

__all__ = ["COLUMNS", "export", "records"]

COLUMNS = ("kind", "id", "agent_id", "at", "what", "amount", "currency", "status", "evidence", "receipts")


def _cited(refs: list[str]) -> list[str]:
    return [r.split(":", 1)[1] for r in refs if r.startswith("decision:") and len(r) == 9 + 64]


def records(store: GuardianStore) -> Iterator[dict[str, Any]]:
    """Every record of the export, in its order (see the module's docstring)."""
    for row in store.conn.execute("SELECT tx_id, agent_id, created_at, tx_type, amount, settled_amount, currency, "
                                  "status, evidence, tool_id FROM financial_ledger ORDER BY seq"):
        evidence = json.loads(row[8])
        yield {"kind": "ledger", "id": row[0], "agent_id": row[1], "at": row[2], "what": row[3],
               "amount": row[5] if row[5] is not None else row[4], "currency": row[6], "status": row[7],
               "evidence": evidence + ([f"tool:{row[9]}"] if row[9] else []), "receipts": _cited(evidence)}
    for row in store.conn.execute("SELECT decision_id, agent_id, recorded_at, decision, cost, currency, reason, body, "
                                  "action_digest FROM decisions ORDER BY decision_id"):
        body = json.loads(row[7])
        yield {"kind": "decision", "id": f"decision-{row[0]}", "agent_id": row[1], "at": row[2], "what": row[3],
               "amount": row[4], "currency": row[5], "status": row[6],
               "evidence": [f"action:{row[8]}", f"policy:{body.get('policy_digest', '')}"]
               + ([f"simulation:{body['sim_id']}"] if body.get("sim_id") else []),
               "receipts": [body["receipt"]] if body.get("receipt") else []}
    for row in store.conn.execute("SELECT escalation_id, agent_id, created_at, state, cost, currency, reason, "
                                  "decision_receipt, tx_id, resolution FROM escalations ORDER BY rowid"):
        resolution = json.loads(row[9]) if row[9] else None
        evidence = [f"decision:{row[7]}"] + ([f"ledger:{row[8]}"] if row[8] else [])
        if resolution is not None:
            evidence.append(f"resolution:{resolution['decision']}:{resolution['by']}")
        yield {"kind": "escalation", "id": row[0], "agent_id": row[1], "at": row[2], "what": row[3],
               "amount": row[4], "currency": row[5], "status": row[6], "evidence": evidence, "receipts": [row[7]]}


def _cell(value: Any) -> str:
    shown = ";".join(value) if isinstance(value, list) else "" if value is None else str(value)
    return "'" + shown if shown[:1] in ("=", "+", "-", "@", "\t", "\r") else shown


def export(store: GuardianStore, fmt: Literal["jsonl", "csv"]) -> str:
    """The whole export as text (``jsonl``: one JSON object a line; ``csv``: a header and a row a
    record, lists joined with ``;``)."""
    if fmt == "jsonl":
        return "".join(json.dumps(r, sort_keys=True, ensure_ascii=False) + "\n" for r in records(store))
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(COLUMNS)
    for r in records(store):
        writer.writerow([_cell(r[c]) for c in COLUMNS])
    return out.getvalue()
