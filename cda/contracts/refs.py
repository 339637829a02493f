"""Pointers to evidence: a span inside a source (SpanRef) or a whole stored artifact (ArtifactRef).

Observations arrive as these references and citations leave as them, so every claim CDA makes
can be traced back to the exact place it rests on. ``SpanRef.excerpt`` carries the cited text
itself (verbatim) when it is known; a Ken citation names the node or edge in ``source``.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

__all__ = ["SpanRef", "ArtifactRef", "EvidenceRef"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class SpanRef(_Model):
    """A span of a source: characters ``[start, end)`` of ``source`` (an artifact id, a file, a Ken id)."""

    kind: Literal["span"] = "span"
    source: str = Field(description="what the span is in: an artifact id, a path, 'ken:node:<id>', 'ken:edge:<u>-><v>'")
    start: int | None = Field(default=None, ge=0, description="first character, 0-based; None for a whole item")
    end: int | None = Field(default=None, ge=0, description="one past the last character")
    excerpt: str | None = Field(default=None, description="the cited text, verbatim")

    @field_validator("end")
    @classmethod
    def _not_before_start(cls, end: int | None, info: ValidationInfo) -> int | None:
        # a field validator (not a model validator) so the error stays located at ``end`` and
        # the union's member name ``SpanRef`` in error locations does not change
        start = info.data.get("start")
        if end is not None and start is not None and end < start:
            raise ValueError(f"the span ends (end={end}) before it starts (start={start})")
        return end


class ArtifactRef(_Model):
    """A whole artifact by id (a document, a bundle, a data file), optionally with its text."""

    kind: Literal["artifact"] = "artifact"
    artifact_id: str
    media_type: str | None = None
    text: str | None = Field(default=None, description="the artifact's content, when passed inline")


EvidenceRef = SpanRef | ArtifactRef
