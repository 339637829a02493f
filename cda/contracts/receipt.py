"""A receipt: the audit record of one solver call, verifier call or Ken query.

Receipts are written to an append-only log in which each entry carries the hash of the one
before it (``prev_hash``) and its own hash over its canonical JSON (``entry_hash``), so an
edit, a deletion or a reordering of any entry is detected by re-walking the chain.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field

from cda.contracts.refs import SpanRef

__all__ = ["Receipt", "ReceiptKind", "ReceiptSink", "canonical_json", "sha256_hex"]

ReceiptKind = Literal["solver", "verifier", "ken", "llm", "function", "stub", "action"]


def canonical_json(value: Any) -> str:
    """JSON with sorted keys and no spaces: the one text every hash in CDA is computed over."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def sha256_hex(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class Receipt(BaseModel):
    """What was asked, with which seed and caps, and what came back.

    ``inputs_hash`` is the SHA-256 of the canonical JSON of the call's inputs (the inputs
    themselves may be large or private, so only their hash is kept). ``stub`` receipts record
    evidence that was needed but could not be obtained (denied egress, a timeout); ``cancelled``
    ones a call its client cancelled (``cda mcp``'s ``mcp.cancelled``), which gets no answer.
    """

    model_config = ConfigDict(extra="forbid")

    action_id: str
    seq: int = Field(ge=0, description="position within the action, from 0")
    kind: ReceiptKind
    name: str = Field(description="which call: 'z3.check', 'verifier.units', 'ken.path', …")
    inputs_hash: str
    seed: str | None = None
    caps: dict[str, float | int | str] = Field(default_factory=dict)
    result: dict[str, Any] = Field(default_factory=dict)
    citations: list[SpanRef] = Field(default_factory=list)
    status: Literal["ok", "failed", "timeout", "denied", "stub", "cancelled"] = "ok"
    attempt: int | None = Field(
        default=None, ge=1,
        description="which run of the action wrote it (1, 2, … for re-runs of one action id); "
        "None for receipts outside a run, such as a reviewer reading a trace",
    )


class ReceiptSink(Protocol):
    """Where a product's receipts go: the Action's hash-chained log
    (:class:`cda.actions.receipts.ReceiptLog`) or anything else that keeps them in order. A
    product appends; it never needs the log's own type (docs/architecture.md, "Products are
    clients")."""

    def append(self, receipt: Receipt) -> str:
        """Keep ``receipt`` after every one before it; its id (the log's hash of it)."""
        ...
