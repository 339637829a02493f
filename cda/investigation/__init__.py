"""Investigations: hypotheses that change as observations arrive, and a session that survives a restart.

Seed 004's runtime memory block (phase 2): :class:`~cda.investigation.session.Investigation`
keeps a live solver (:mod:`.live`), computes the hypothesis records after every observation
(:func:`cda.engine.compute_records`), picks a focus part (:mod:`.focus`) and stores each step in SQLite
(:mod:`.store`). ``cda investigate ...`` is its command line.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from cda.lazy import lazy_exports

if TYPE_CHECKING:
    from cda.investigation.session import Investigation, MemoryBlock

__all__ = ["Investigation", "MemoryBlock"]

__getattr__, __dir__ = lazy_exports(__name__, dict.fromkeys(__all__, "cda.investigation.session"))
