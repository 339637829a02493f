"""Sub-Action outputs bound into an Action: bind ⇒ lock, and the update-available bump (docs/actions.md, "Sub-Actions").

A CDA Action may depend on what a sub-Action (``research``, ``sandbox``, ``default``) produced —
an evidence artifact. Binding it **locks** its content: the Action records the artifact's
SHA-256 in a receipt and adopts exactly that text as an observation. When the sub-Action later
publishes a new revision, :func:`update_available` says so; :func:`accept_bump` re-runs the
Action on the new revision, which yields a **structure revision** (``revision + 1``, naming the
plan bundle it supersedes) with its own receipts appended to the same log. Nothing changes until
the bump is accepted.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from cda.contracts.action import CDAInputs
from cda.contracts.receipt import sha256_hex
from cda.contracts.refs import ArtifactRef

__all__ = ["BoundOutput", "Binding", "lock_of", "update_available", "with_bindings"]


@dataclass(frozen=True)
class BoundOutput:
    """One output of a sub-Action: which action, which ability, which revision, the artifact."""

    action_id: str
    ability: Literal["research", "sandbox", "default"]
    revision: int
    artifact: ArtifactRef


@dataclass(frozen=True)
class Binding:
    """A locked dependency: the sub-Action's artifact id, revision and content hash."""

    action_id: str
    artifact_id: str
    revision: int
    sha256: str


def lock_of(output: BoundOutput) -> Binding:
    return Binding(output.action_id, output.artifact.artifact_id, output.revision,
                   sha256_hex(output.artifact.text or ""))


def update_available(locked: Sequence[Binding], offered: BoundOutput) -> bool:
    """True when ``offered`` is a newer revision, with new content, of an artifact the run locked."""
    for b in locked:
        if b.action_id == offered.action_id and b.artifact_id == offered.artifact.artifact_id:
            return offered.revision > b.revision and lock_of(offered).sha256 != b.sha256
    return False


def with_bindings(inputs: CDAInputs, bound: Sequence[BoundOutput]) -> CDAInputs:
    """The inputs with every bound artifact adopted as an observation (after the user's own)."""
    if not bound:
        return inputs
    extra = [b.artifact for b in bound]
    return inputs.model_copy(update={"observations": [*inputs.observations, *extra]})
