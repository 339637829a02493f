"""Deterministic seeds for an Action ("hmac-v1": docs/actions.md, "The loop").

Everything an Action may choose — its id, the solver seed, beam width and depth caps, tie-break
salts — is derived from one HMAC-SHA256 over the canonical JSON of its inputs, keyed by the
purpose string, so the same inputs and purpose give the same run and a different purpose gives
an independent one.

>>> a = derive("cda", {"problem": "x"}); b = derive("cda", {"problem": "x"})
>>> a == b, a.hex()[:8] == derive("other", {"problem": "x"}).hex()[:8]
(True, False)
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass
from typing import Any

from cda.contracts.receipt import canonical_json

__all__ = ["SCHEME", "Seed", "derive"]

SCHEME = "hmac-v1"


@dataclass(frozen=True)
class Seed:
    """An HMAC-SHA256 digest with helpers to draw named, independent values from it."""

    digest: bytes

    def hex(self) -> str:
        return self.digest.hex()

    def label(self) -> str:
        """How receipts name the seed: ``hmac-v1:<first 16 hex digits>``."""
        return f"{SCHEME}:{self.digest.hex()[:16]}"

    def child(self, name: str) -> Seed:
        """An independent seed for one use (``solver``, ``beam``, ``tiebreak`` …)."""
        return Seed(hmac.new(self.digest, name.encode("utf-8"), hashlib.sha256).digest())

    def integer(self, name: str, low: int, high: int) -> int:
        """A value in ``[low, high]`` drawn for ``name``; the same name always draws the same value."""
        if high < low:
            raise ValueError(f"empty range [{low}, {high}]")
        value = int.from_bytes(self.child(name).digest[:8], "big")
        return low + value % (high - low + 1)


def derive(purpose: str, inputs: Any) -> Seed:
    """The run's seed: HMAC-SHA256(key = ``hmac-v1:<purpose>``, message = canonical JSON of the inputs)."""
    key = f"{SCHEME}:{purpose}".encode()
    return Seed(hmac.new(key, canonical_json(inputs).encode("utf-8"), hashlib.sha256).digest())
