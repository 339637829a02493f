"""The hash chain over the events of one attempt: what a client streams, made tamper-evident.

Each attempt's events form their own chain, exactly like the receipt log's
(``entry_hash = sha256(prev_hash + body)``, from :data:`~cda.actions.receipts.GENESIS_HASH`),
over the event's canonical JSON (``body``, the text the event store keeps and SSE serves). The
run knows its events in memory, so it records the count and the last hash in the attempt's
``action.end`` receipt; the receipt chain (and the signed head) then vouches for every event:
editing, dropping, adding or reordering one changes the head the receipt names.

Receipts are deterministic (same inputs and seed, same bytes), and an event's ``ts`` (wall time)
is not, so the receipt names the head of the chain over the events **without** ``ts``
(:func:`events_head`); the event store chains the full bodies, and the signed head written at
the end of a run names that full chain's head for the run's attempt
(:mod:`cda.keys.signing`), which covers the times too.

>>> from cda.contracts.events import ActionStarted
>>> e = ActionStarted(action_id="a1", seq=0, attempt=1)
>>> event_chain([event_body(e)]) == [entry_hash(GENESIS_HASH, event_body(e))]
True
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from pydantic import BaseModel

from cda.actions.receipts import GENESIS_HASH, entry_hash
from cda.actions.store_file import EVENT_SCHEMA
from cda.contracts.events import without_time
from cda.contracts.receipt import canonical_json

__all__ = ["EVENT_SCHEMA", "event_body", "event_chain", "events_head", "timeless_body"]


def event_body(event: BaseModel) -> str:
    """The stored (and streamed) text of an event: its canonical JSON."""
    return canonical_json(event.model_dump(mode="json"))


def event_chain(bodies: Iterable[str], prev: str = GENESIS_HASH) -> list[str]:
    """The entry hash of each body in order, chained from ``prev``."""
    out: list[str] = []
    for body in bodies:
        prev = entry_hash(prev, body)
        out.append(prev)
    return out


def timeless_body(data: dict[str, Any]) -> str:
    """The canonical JSON of an event's fields without its wall time (``ts``, and the
    ``measurements`` of a terminal event's metrics: :func:`cda.contracts.events.without_time`)."""
    return canonical_json(without_time(data))


def events_head(events: Sequence[BaseModel], *, timeless: bool = True) -> str:
    """The last hash of the chain over ``events`` (:data:`GENESIS_HASH` for none), over their
    bodies without ``ts`` (what ``action.end`` names) or, with ``timeless=False``, the full ones."""
    bodies = (timeless_body(e.model_dump(mode="json")) if timeless else event_body(e) for e in events)
    chain = event_chain(bodies)
    return chain[-1] if chain else GENESIS_HASH
