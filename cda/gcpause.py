"""Pausing Python's cyclic garbage collector while CDA builds large acyclic structures.

Parsing, grounding and encoding allocate hundreds of thousands of small objects and free
almost none; the cyclic collector only re-walks them, which made these stages grow faster
than the clause count. Reference counting still frees everything as usual.

Pausing alone only postpones the walk (the first allocation after it walks what it built). Moving
what it built to the oldest generation at the end (``gc.freeze()`` then ``gc.unfreeze()``) saved
0.3 s of a 10,000-clause solve, but it made the FOL tests fail in file order (z3 found no conflict
where clingo did, for premises p and not p, after earlier tests; each passes alone): something
relies on cyclic garbage being collected promptly. It is left out until that is found.
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
