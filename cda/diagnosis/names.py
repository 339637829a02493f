"""How the diagnosis reports name and order things: gates in natural order and counts in words.

Gate names are often numbers (``.bench`` nets ``10``, ``22``; WCNF gates named by their health
variable ``7``, ``15``), so they sort by the numbers in them, not as text: ``7`` before ``15``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

__all__ = ["counted", "diagnosis_order", "gate_order", "sorted_gates"]

_PARTS = re.compile(r"(\d+)")


def gate_order(name: str) -> tuple[tuple[int, int | str], ...]:
    """A sort key: runs of digits compare as numbers, the rest as text.

    >>> sorted(["15", "7", "118gat", "11gat", "b2", "b10"], key=gate_order)
    ['7', '11gat', '15', '118gat', 'b2', 'b10']
    """
    return tuple((0, int(part)) if part.isdigit() else (1, part) for part in _PARTS.split(name) if part)


def sorted_gates(gates: Iterable[str]) -> list[str]:
    """``gates`` in :func:`gate_order`."""
    return sorted(gates, key=gate_order)


def diagnosis_order(diagnosis: list[str]) -> tuple[int, list[tuple[tuple[int, int | str], ...]]]:
    """A sort key for diagnoses (each already in gate order): smaller first, then gate by gate."""
    return len(diagnosis), [gate_order(g) for g in diagnosis]


def counted(n: int, one: str, many: str) -> str:
    """``1 diagnosis``, ``2 diagnoses``.

    >>> counted(1, "diagnosis", "diagnoses"), counted(0, "diagnosis", "diagnoses")
    ('1 diagnosis', '0 diagnoses')
    """
    return f"{n} {one if n == 1 else many}"
