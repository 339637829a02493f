"""The event stream of one Action: numbered events handed to every subscriber, in order.

The stream numbers events itself (``seq`` from 0), so a subscriber that lost its cursor can ask
any store that kept them for "everything after seq N" and see the same timeline. Wall times are
stamped by an injectable clock and are the only thing that differs between two runs.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from cda.contracts.events import (
    ActionCheckpoint,
    ActionCompleted,
    ActionEvent,
    ActionFailed,
    ActionLinked,
    ActionNotice,
    ActionPartial,
    ActionProgress,
    ActionStarted,
    CheckpointKind,
)

__all__ = ["EventStream", "Subscriber"]

Subscriber = Callable[[ActionEvent], None]


class EventStream:
    """Emits the events of one action to its subscribers and keeps them (``events``)."""

    def __init__(self, action_id: str, subscribers: list[Subscriber] | None = None,
                 clock: Callable[[], float] = time.time, attempt: int | None = None,
                 before_emit: Callable[[], None] | None = None) -> None:
        """``before_emit`` runs before each event is made (the runner writes its pending receipts
        there, so every receipt is in the log before the event that follows it)."""
        self.action_id = action_id
        self._before_emit = before_emit
        self.attempt = attempt
        self.events: list[ActionEvent] = []
        self._subscribers = list(subscribers or [])
        self._clock = clock

    def _emit(self, cls: Any, **fields: Any) -> ActionEvent:
        if self._before_emit is not None:
            self._before_emit()
        event: ActionEvent = cls(action_id=self.action_id, seq=len(self.events), ts=self._clock(),
                                 attempt=self.attempt, **fields)
        self.events.append(event)
        for subscriber in self._subscribers:
            subscriber(event)
        return event

    def started(self, inputs_hash: str) -> None:
        self._emit(ActionStarted, inputs_hash=inputs_hash)

    def progress(self, phase: str, fraction: float, message: str = "") -> None:
        self._emit(ActionProgress, phase=phase, fraction=max(0.0, min(1.0, fraction)), message=message)

    def notice(self, message: str, level: str = "info") -> None:
        self._emit(ActionNotice, message=message, level=level)

    def linked(self, action_id: str, ability: str, edge: str) -> None:
        self._emit(ActionLinked, linked_action_id=action_id, ability=ability, edge=edge)

    def checkpoint(self, kind: CheckpointKind, payload: dict[str, Any]) -> None:
        self._emit(ActionCheckpoint, kind=kind, payload=payload)

    def completed(self, outputs: Any, metrics: Any = None) -> None:
        self._emit(ActionCompleted, outputs=outputs, metrics=metrics)

    def partial(self, outputs: Any, metrics: Any = None, stopped: str | None = None) -> None:
        self._emit(ActionPartial, caveats=list(outputs.caveats), next_tests=list(outputs.next_tests), outputs=outputs,
                   metrics=metrics, **({"stopped": stopped} if stopped is not None else {}))

    def failed(self, error: str, error_type: str | None, metrics: Any = None) -> None:
        self._emit(ActionFailed, error=error, error_type=error_type, metrics=metrics)

    @property
    def terminal(self) -> ActionEvent | None:
        """The last event when it ends the stream (completed, partial or failed)."""
        if self.events and self.events[-1].type in ("action_completed", "action_partial", "action_failed"):
            return self.events[-1]
        return None
