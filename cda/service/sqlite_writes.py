"""How the server writes its one SQLite file: commits without fsync, one lock for every store.

Used by the server (:mod:`cda.service.actions`) and by its runner processes
(:mod:`cda.service.workers`), which is why it imports nothing of the web stack. Both
act on the stores' open files (their public ``file``, a :class:`cda.store.Store`).
"""

from __future__ import annotations

import threading
from typing import Protocol

from cda.store import Durability, Store, share_lock

__all__ = ["relax_fsync", "share_write_lock"]


class _OnFile(Protocol):
    file: Store


def relax_fsync(store: _OnFile) -> None:
    """A store's commits in WAL without an fsync (:attr:`cda.store.Durability.NORMAL`: a commit
    survives the death of the process, kill -9 included, and the file never corrupts; a power loss
    may lose the last commits, the chain staying valid up to them). ``cda serve --fsync`` keeps
    the full fsync. Measured in :mod:`cda.store.policy`."""
    store.file.durability = Durability.NORMAL


def share_write_lock(*stores: _OnFile) -> threading.RLock:
    """One lock around every write of the server's stores (events, receipts, traces: one file);
    re-entrant, so a store that calls another (the reflection store logs a receipt) cannot
    deadlock on it. Measured in :func:`cda.store.share_lock`."""
    return share_lock(*(store.file for store in stores))
