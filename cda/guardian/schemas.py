"""The committed JSON Schemas of the guardian's data: tasks (with the seed's ``$id``s), ledger
entries and tool registrations, as ``schemas/guardian/*.schema.json``.

The task schemas follow the seed (technical.md §2): ``task.signed`` is ``allOf`` a ``$ref`` to
``task.draft`` plus a signature, ``task.executed`` ``allOf`` a ``$ref`` to ``task.signed`` plus the
result and its ledger reference. They are written here as data, from the models' constants (id
patterns, enums, bounds), and the models are at least as strict: a document these schemas refuse
is refused by the models (tests/test_guardian_tasks.py checks both ways with ``jsonschema`` and
``referencing``). The schemas stay open to unknown properties, as the seed's are (a closed
``task.draft`` could not be extended by ``allOf``); the models refuse them.

:func:`check_guardian_schemas` lists the committed files that no longer match
:func:`render_guardian_schemas`, like :func:`cda.contracts.schema.check_schemas` for the others.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from cda.guardian.ledger import TX_ID_PATTERN
from cda.guardian.money import MAX_AMOUNT
from cda.guardian.tasks import DIGEST_PATTERN, ID_PATTERN

__all__ = ["SCHEMA_IDS", "check_guardian_schemas", "guardian_schemas", "render_guardian_schemas",
           "schema_registry", "write_guardian_schemas"]

_DIALECT = "https://json-schema.org/draft/2020-12/schema"
_BASE = "https://chimera.ai/schemas/"
_CURRENCY = r"^[A-Z][A-Z0-9]{2,9}$"
_TIME = {"type": "string", "format": "date-time"}

SCHEMA_IDS = {
    "task.draft": _BASE + "task.draft.json",
    "task.signed": _BASE + "task.signed.json",
    "task.executed": _BASE + "task.executed.json",
    "ledger.entry": _BASE + "ledger.entry.json",
    "tool.registration": _BASE + "tool.registration.json",
}
"""File stem -> ``$id``; the task ids are the seed's."""


def _amount(description: str) -> dict[str, Any]:
    return {"type": "number", "minimum": 0, "maximum": int(MAX_AMOUNT), "description": description}


def guardian_schemas() -> dict[str, dict[str, Any]]:
    """File stem -> schema, each with its ``$id`` and dialect."""
    draft = {
        "title": "TaskDraft",
        "type": "object",
        "required": ["task_id", "agent_id", "description", "state", "created_at"],
        "properties": {
            "task_id": {"type": "string", "pattern": ID_PATTERN},
            "agent_id": {"type": "string", "pattern": ID_PATTERN},
            "description": {"type": "string", "maxLength": 4096},
            "resources": {"type": "array", "items": {"type": "string"}, "maxItems": 64},
            "cost_estimate": _amount("the expected cost in units of `currency`, an exact decimal number"),
            "currency": {"type": "string", "pattern": _CURRENCY},
            "priority": {"type": "string", "enum": ["low", "medium", "high"]},
            "state": {"type": "string", "enum": ["draft", "signed", "executed"]},
            "created_at": _TIME,
            "action_digest": {"type": "string", "pattern": DIGEST_PATTERN,
                              "description": "SHA-256 of the proposed action's canonical JSON the guardian decides on"},
        },
    }
    signed = {
        "title": "TaskSigned",
        "allOf": [{"$ref": SCHEMA_IDS["task.draft"]}],
        "required": ["signature"],
        "properties": {
            "state": {"enum": ["signed", "executed"]},
            "signature": {
                "type": "object",
                "required": ["signer_id", "sig_type", "signature", "signed_at"],
                "properties": {
                    "signer_id": {"type": "string", "pattern": ID_PATTERN},
                    "sig_type": {"type": "string", "const": "HITL"},
                    "signature": {"type": "string", "pattern": "^[0-9a-f]{128}$",
                                  "description": "Ed25519 over the draft's canonical signing bytes, hex"},
                    "signed_at": _TIME,
                },
            },
        },
    }
    executed = {
        "title": "TaskExecuted",
        "allOf": [{"$ref": SCHEMA_IDS["task.signed"]}],
        "required": ["executed_at", "result", "audit_ref"],
        "properties": {
            "state": {"const": "executed"},
            "executed_at": _TIME,
            "result": {"type": "object"},
            "audit_ref": {"type": "string", "pattern": r"^ledger://[A-Za-z0-9][A-Za-z0-9_.:@/-]{0,127}$"},
            "receipts": {"type": "array", "items": {"type": "string"}},
        },
    }
    entry = {
        "title": "LedgerEntry",
        "type": "object",
        "required": ["tx_id", "agent_id", "tx_type", "amount", "currency", "status", "created_at", "updated_at",
                     "evidence"],
        "properties": {
            "tx_id": {"type": "string", "pattern": TX_ID_PATTERN},
            "agent_id": {"type": "string", "minLength": 1, "maxLength": 256},
            "tx_type": {"const": "reservation"},
            "amount": _amount("the amount reserved, exact"),
            "currency": {"type": "string", "pattern": _CURRENCY},
            "status": {"enum": ["reserved", "settled", "released"]},
            "created_at": _TIME,
            "updated_at": _TIME,
            "settled_amount": {"anyOf": [_amount("the actual cost, once settled"), {"type": "null"}]},
            "evidence": {"type": "array", "items": {"type": "string", "minLength": 1, "maxLength": 2048}},
            "tool_id": {"type": ["string", "null"]},
        },
        "additionalProperties": False,
    }
    tool = {
        "title": "ToolRegistration",
        "type": "object",
        "required": ["tool_id", "name", "version", "schema", "registered_at"],
        "properties": {
            "tool_id": {"type": "string", "pattern": r"^[A-Za-z0-9][A-Za-z0-9_.:@/-]{0,127}$"},
            "name": {"type": "string", "minLength": 1, "maxLength": 128},
            "version": {"type": "string", "minLength": 1, "maxLength": 64},
            "schema": {"type": "object", "description": "the tool's capability descriptor (its input JSON Schema)"},
            "registered_at": _TIME,
        },
        "additionalProperties": False,
    }
    found: dict[str, dict[str, Any]] = {"task.draft": draft, "task.signed": signed, "task.executed": executed, "ledger.entry": entry,
             "tool.registration": tool}
    return {stem: {"$schema": _DIALECT, "$id": SCHEMA_IDS[stem], **schema} for stem, schema in found.items()}


def render_guardian_schemas() -> dict[str, str]:
    """File name -> text (sorted keys, two-space indent, trailing newline); the same bytes every call."""
    return {f"{stem}.schema.json": json.dumps(schema, sort_keys=True, indent=2, ensure_ascii=False) + "\n"
            for stem, schema in sorted(guardian_schemas().items())}


def write_guardian_schemas(folder: Path) -> list[Path]:
    """Write the guardian's schema files into ``folder`` (other files there are left alone)."""
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for name, content in render_guardian_schemas().items():
        path = folder / name
        if not path.exists() or path.read_text(encoding="utf-8") != content:
            path.write_text(content, encoding="utf-8")
        written.append(path)
    return written


def check_guardian_schemas(folder: Path) -> list[str]:
    """The guardian schema files in ``folder`` that are missing or differ from the code's."""
    stale = []
    for name, content in render_guardian_schemas().items():
        path = folder / name
        if not path.is_file() or path.read_text(encoding="utf-8") != content:
            stale.append(name)
    return stale


def schema_registry() -> Any:
    """A ``referencing.Registry`` holding every guardian schema by its ``$id`` (for the ``$ref``s);
    ``referencing`` comes with ``jsonschema``, a test dependency, and is imported only here."""
    from referencing import Registry, Resource

    return Registry().with_resources(
        (schema["$id"], Resource.from_contents(schema)) for schema in guardian_schemas().values())
