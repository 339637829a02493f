"""Writing receipts during a run: one :class:`Recorder` per action over any receipt sink.

The sink is the append-only log (:class:`cda.actions.receipts.ReceiptLog`, SQLite, hash-chained;
``ReceiptLog(":memory:")`` for a quick in-process run).
"""

from __future__ import annotations

from typing import Any, Protocol

from cda.contracts.receipt import Receipt, ReceiptKind, canonical_json, sha256_hex
from cda.contracts.refs import SpanRef

__all__ = ["ReceiptSink", "Recorder"]


class ReceiptSink(Protocol):
    def append(self, receipt: Receipt) -> str: ...

    def head(self) -> str: ...


class Recorder:
    """Numbers an action's receipts and keeps a copy for its plan bundle."""

    def __init__(self, sink: ReceiptSink, action_id: str, seed: str) -> None:
        self.sink = sink
        self.action_id = action_id
        self.seed = seed
        self.receipts: list[Receipt] = []

    def record(
        self,
        kind: ReceiptKind,
        name: str,
        inputs: Any,
        result: dict[str, Any],
        *,
        caps: dict[str, float | int | str] | None = None,
        citations: list[SpanRef] | None = None,
        status: str = "ok",
    ) -> Receipt:
        receipt = Receipt(
            action_id=self.action_id, seq=len(self.receipts), kind=kind, name=name,
            inputs_hash=sha256_hex(canonical_json(inputs)), seed=self.seed, caps=caps or {},
            result=result, citations=citations or [], status=status,  # type: ignore[arg-type]
        )
        self.sink.append(receipt)
        self.receipts.append(receipt)
        return receipt

    def receipts_json(self) -> list[dict[str, Any]]:
        return [r.model_dump(mode="json") for r in self.receipts]

    def stubs(self) -> list[dict[str, Any]]:
        """Receipts for evidence that was needed and not obtained (denied, timed out, missing)."""
        return [r.model_dump(mode="json") for r in self.receipts if r.status in ("stub", "denied", "timeout")]
