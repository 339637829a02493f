"""The literal names every backend reads (docs/architecture.md, "Backends"): a clause's selector,
a claim's and a soft clause's key, and the one atom that switches every clause on.

Plain names, on their own so that a caller that only asks questions (``cda prove``'s first-order
backends) does not load the encoding scheme and the IR with them (:mod:`cda.encodings.scheme`
re-exports them).
"""

from __future__ import annotations

__all__ = ["ALL_CLAUSES", "claim_key", "selector", "soft_key"]


def selector(clause_name: str) -> str:
    """The literal that switches clause ``clause_name`` on."""
    return f"sel!{clause_name}"


#: every backend's atom that implies the selector of each clause it was built with: assuming it
#: switches them all on in one literal. Thousands of selector assumptions cost every call
#: (clingo converts each, z3 tracks each: half of a check at 10,000 clauses).
ALL_CLAUSES = "sel!*"


def claim_key(claim_name: str) -> str:
    """The literal that is true exactly when claim ``claim_name`` holds."""
    return f"claim!{claim_name}"


def soft_key(soft_name: str) -> str:
    """The literal that is true exactly when soft clause ``soft_name`` is satisfied."""
    return f"soft!{soft_name}"
