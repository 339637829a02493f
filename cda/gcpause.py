"""Pausing Python's cyclic garbage collector while CDA builds large acyclic structures.

Parsing, grounding and encoding allocate hundreds of thousands of small objects and free
almost none; the cyclic collector only re-walks them, which made these stages grow faster
than the clause count. Reference counting still frees everything as usual.

Pausing alone only postpones the walk: the collector counts every allocation made meanwhile,
so the first allocation after the pause started a collection of everything built in it (0.6 s
of a 10,000-clause solve in a profile, 0.3 s without one). So the pause ends by moving what
it built straight to the oldest generation (``gc.freeze()`` then ``gc.unfreeze()``: two list
splices, no walk, the allocation count reset), where it is walked only by the full collections
that come anyway, as the long-lived objects it mostly is.

That move takes every young object along, cyclic garbage included, and the oldest generation
is collected rarely: garbage in a cycle lives much longer than before. So nothing that holds a
solver may be in a cycle (docs/architecture.md, "Freeing solvers"): once, QuickXplain's
recursive closure kept every ``cda prove`` decision's z3 context alive, and z3's memory cap,
which counts every context in the process, made a later two-premise check answer "out of
memory" (``tests/test_solver_lifetime.py``).
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["gc_paused", "before_exit"]


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
            if not gc.get_freeze_count():  # else someone froze objects on purpose: leave them be
                gc.freeze()
                gc.unfreeze()
            gc.enable()


def before_exit() -> None:
    """Called by the ``cda`` command once it is done, just before the process exits: every object
    goes to the permanent generation, which the interpreter's final collections do not walk.
    Those walks over everything the command imported and built were about 40 ms of CPU at every
    exit, a sixth of ``cda prove``'s start-up (docs/benchmarks.md, "cda prove").

    Nothing is lost: an object is still freed, with its finalizer, when its last reference goes
    (module teardown still runs, streams are flushed, ``atexit`` handlers run); only garbage in
    reference cycles is left to the operating system, and Python never promised to finalize
    that at exit. No CDA resource waits for the cyclic collector (docs/architecture.md,
    "Freeing solvers"). Never called by ``main`` run in a process that goes on (tests, a host
    program): it would take that process's objects away from its collector.
    """
    gc.freeze()
