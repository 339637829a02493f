"""The answers of the first-order prover (:mod:`cda.fol.prove`): one :class:`ProofResult` per
claim, with the :class:`World` s that show an open claim open. They cross the CLI/JSON boundary.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from cda.contracts.status_fields import VerdictStatusField

__all__ = ["World", "ProofResult"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class World(_Model):
    """A finite world: its elements, what each constant names, and the true ground atoms
    (every atom not listed is false)."""

    claim_holds: bool
    domain: list[str] = Field(description="the elements; each is named after a constant denoting it when there is one")
    aliases: dict[str, str] = Field(description="constants that denote an element named otherwise")
    functions: list[str] = Field(description="function values, e.g. 'f(a) = b'")
    true_atoms: list[str]

    def text(self) -> str:
        """One line per part, e.g. ``domain {tom, e1}`` then ``true: Cat(tom)``."""
        side = "holds" if self.claim_holds else "fails"
        out = [f"a world where the claim {side}: domain {{{', '.join(self.domain)}}}"]
        if self.aliases:
            out.append("  " + ", ".join(f"{c} = {e}" for c, e in self.aliases.items()))
        if self.functions:
            out.append("  " + ", ".join(self.functions))
        out.append("  true: " + (", ".join(self.true_atoms) if self.true_atoms else "(nothing)"))
        return "\n".join(out)


class ProofResult(_Model):
    """The answer for one claim."""

    claim_name: str
    claim: str
    status: VerdictStatusField  # the ordered enum in Python, its string in JSON
    premises_used: list[str] = Field(
        description="supported/refuted: a minimal set of premises that forces the answer, in source order"
    )
    minimal: bool = Field(description="premises_used is the canonical minimal set (QuickXplain)")
    conflict: list[str] | None = Field(description="when the premises contradict each other: a minimal such subset")
    worlds: list[World] = Field(description="inconclusive: a world where the claim holds and one where it fails")
    fragment: str
    fragment_detail: str
    backend: str
    reason: str
    unknown: bool = Field(description="inconclusive because a solver said unknown or time ran out")
    partial: bool = Field(
        default=False,
        description="unknown because the time budget ran out or a cancel stopped it (a cut, not the solver's own unknown)",
    )
    cross_check: Literal["agree", "disagree", "skipped"] | None
    notes: list[str]
    unique_names: bool = Field(
        default=False, description="read under the unique-names reading: distinct constants denote distinct objects"
    )

    def text(self) -> str:
        """The human-readable report."""
        out = [f"{self.claim_name}: {self.claim}", f"  {self.status.upper()} — {self.reason}"]
        if self.status != "inconclusive":
            itself = "the claim decides itself" + (" under the unique-names reading" if self.unique_names else "")
            used = ", ".join(self.premises_used) or f"none ({itself})"
            out.append(f"  premises used: {used}" + ("" if self.minimal else " (not minimised)"))
        if self.conflict is not None:
            out.append(f"  conflicting premises: {', '.join(self.conflict)}")
        for w in self.worlds:
            out.extend("  " + line for line in w.text().splitlines())
        out.append(f"  fragment: {self.fragment} ({self.fragment_detail}); backend: {self.backend}")
        if self.unique_names:
            out.append("  reading: unique names (distinct constants denote distinct objects)")
        if self.cross_check is not None:
            out.append(f"  cross-check: {self.cross_check}")
        out.extend(f"  note: {n}" for n in self.notes)
        return "\n".join(out)
