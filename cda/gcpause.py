"""Pausing Python's cyclic garbage collector while CDA builds large acyclic structures.

Parsing, grounding and encoding allocate hundreds of thousands of small objects and free
almost none; the cyclic collector only re-walks them, which made these stages grow faster
than the clause count. Reference counting still frees everything as usual.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["gc_paused"]


@contextmanager
def gc_paused() -> Iterator[None]:
    """Disable the cyclic GC inside the block (restored after, even on error; nests).

    >>> with gc_paused():
    ...     gc.isenabled()
    False
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
