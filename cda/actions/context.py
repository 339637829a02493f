"""Everything a run of an Action is given besides its inputs, as one object.

:func:`cda.actions.runner.run_action` used to take sixteen keyword arguments, passed on from
call to call; they are the fields of :class:`RunContext` now (Hypothesis's ``settings`` is the
model: one checked object instead of a keyword list per function). Callers build one context
(the CLI, the service's workers, the conductor's tool) and the runner reads it; every field has
the default a plain ``cda run`` uses. See docs/actions.md for what each one changes.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from cda.actions.bindings import BoundOutput
    from cda.actions.checks import LLMFactory
    from cda.actions.receipts_sink import ReceiptSink
    from cda.actions.stream import Subscriber
    from cda.contracts.abstain import AbstainThresholds
    from cda.contracts.events import ActionEvent
    from cda.contracts.metrics import ApprovalWait
    from cda.ken.graph import KenGraph

__all__ = ["RunContext", "RunSettings"]


@dataclass(frozen=True)
class RunSettings:
    """Knobs a caller may set; everything else is derived from the seed and the budget."""

    depth_cap: int = 3  # refine rounds at most
    ken_depth: int = 3  # hops from a candidate cause to a symptom
    base_beam: int = 64  # hypotheses enumerated in the first round
    max_beam: int = 4096


@dataclass(frozen=True)
class RunContext:
    """Where a run's outputs go, what it is connected to, and what a server already did for it.

    * ``ken``: the loaded graph when ``inputs.ken`` names a file (loading files is an adapter's
      job); inline graphs are built by the run.
    * ``out_dir``: receives the artifacts (boundary summary, plan bundle, evidence bundle).
    * ``receipts``: the hash-chained log the run appends to (an in-memory log when None).
    * ``subscribers``: called with every event as it is emitted.
    * ``llm_factory``: builds the HTTP ``LLMProvider`` for ``inputs.llm.provider == "openai"``.
    * ``bound``: sub-Action outputs the inputs bind; ``revision``/``supersedes``: the structure
      revision this run makes (:func:`~cda.actions.runner.accept_bump`).
    * ``thresholds``: the abstain rule's thresholds (the defaults of docs/actions.md when None).
    * ``clock``/``wall_clock``: the budget's and the events' clocks.
    * ``audit``: a server's check of the stored events before the terminal event.
    * ``action_id``: replaces the id derived from the inputs (a server names an action when it
      is submitted, before approvals change the inputs).
    * ``approval_waits``: approvals a server waited for before the run, with how long each took.
    * ``prelude``: events a server already streamed for this attempt, numbered 0…
    * ``base_dir``: where relative paths of the dsl's ``ken "…"`` lines are read from (the inputs
      file's folder for ``cda run``, the server's folder for a service; the working directory when
      None).
    * ``queued_since``: when a server took the action in (on ``clock``): its queue is measured
      (``measurements.queued_us``, TTFS from ``actions.start``).
    """

    ken: KenGraph | None = None
    out_dir: Path | None = None
    receipts: ReceiptSink | None = None
    subscribers: Sequence[Subscriber] = ()
    settings: RunSettings = field(default_factory=RunSettings)
    llm_factory: LLMFactory | None = None
    bound: Sequence[BoundOutput] = ()
    thresholds: AbstainThresholds | None = None
    revision: int = 1
    supersedes: str | None = None
    clock: Callable[[], float] = time.monotonic
    wall_clock: Callable[[], float] = time.time
    audit: Callable[[Sequence[ActionEvent]], Sequence[str]] | None = None
    action_id: str | None = None
    approval_waits: Sequence[ApprovalWait] = ()
    prelude: Sequence[ActionEvent] = ()
    base_dir: Path | None = None
    queued_since: float | None = None

    @classmethod
    def of(cls, context: RunContext | None, changes: dict[str, Any]) -> RunContext:
        """``context`` (or the default one) with ``changes``: keyword arguments named as the
        fields, refused by name when one is not a field (``settings=None`` keeps the default)."""
        names = {f.name for f in fields(cls)}
        unknown = sorted(set(changes) - names)
        if unknown:
            raise TypeError(f"run_action() got unexpected keyword argument(s) {', '.join(unknown)} "
                            f"(RunContext fields: {', '.join(sorted(names))})")
        if changes.get("settings", 0) is None:
            changes = {**changes, "settings": RunSettings()}
        base = context if context is not None else cls()
        return replace(base, **changes) if changes else base
