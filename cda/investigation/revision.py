"""A model revised during an investigation: statements added and retracted as steps (docs/investigate.md,
"Revising the model").

The model in force is the problem as started with every revision in force applied in step order:
each retraction removes the first line of the model that reads the same (whitespace aside), each
addition appends its statement. Undoing a revision applies the others again; a later revision
that retracts what the undone one added cannot be applied, and the undo is refused naming it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from cda.errors import CDAError

__all__ = ["Change", "Revision", "StepRefused", "change", "ignored_statement", "revised_text", "same_statement"]

#: the statements an investigation would carry but never read, by the parser's name for them,
#: and why (docs/investigate.md, "Revising the model"): a revision that adds one is refused
#: rather than recorded as a step that changed nothing
IGNORED: dict[str, str] = {
    "GoalClaim": "an investigation ranks hypotheses and decides no claims (cda solve does)",
    "GoalMinimal": "an investigation ranks every consistent set, not only the minimal ones",
    "GoalBest": "how many hypotheses a session lists is set when it starts (--top)",
    "Expect": "an investigation checks no expectations (cda test does)",
    "FolBlock": "first-order claims are for cda prove",
}

#: the most hypothesis statements a step keeps in its trace to say which appeared or vanished
KEPT_STATEMENTS = 2_000


class StepRefused(CDAError):
    """A step that cannot be taken on the session as it is (what stands in its way is named)."""


@dataclass(frozen=True)
class Revision:
    """One revise step's statements: added (DSL, one statement or more) and retracted (one line each)."""

    step: int
    add: tuple[str, ...] = ()
    retract: tuple[str, ...] = ()

    def as_json(self) -> dict[str, list[str]]:
        return {"add": list(self.add), "retract": list(self.retract)}

    @classmethod
    def of(cls, step: int, stored: dict[str, Any] | None) -> Revision:
        stored = stored or {}
        return cls(step, tuple(stored.get("add", ())), tuple(stored.get("retract", ())))


def same_statement(a: str, b: str) -> bool:
    """Whether two lines are one statement as written (whitespace aside)."""
    return " ".join(a.split()) == " ".join(b.split())


def ignored_statement(add: str) -> str | None:
    """Why the added text ``add`` holds a statement an investigation ignores (a goal, an
    ``expect`` line, a ``fol`` block), naming its line; ``None`` when it holds none, or does not
    read (the revision's own reading says where it fails).

    >>> ignored_statement("goal prove down(api)")
    "line 1 ('goal prove down(api)') is a goal, which an investigation ignores: an investigation ranks hypotheses and decides no claims (cda solve does)"
    >>> ignored_statement("fact depends(web, queue)") is None
    True
    """
    from cda.api import parse
    from cda.errors import DSLError

    try:
        statements = parse(add if add.endswith("\n") else add + "\n").statements
    except DSLError:
        return None
    lines = add.split("\n")
    for statement in statements:
        kind = type(statement).__name__
        if kind in IGNORED:
            line = statement.pos[0]
            what = {"Expect": "an expect line", "FolBlock": "a fol block"}.get(kind, "a goal")
            shown = " ".join(lines[line - 1].split())[:80] if 0 < line <= len(lines) else kind
            return f"line {line} ({shown!r}) is {what}, which an investigation ignores: {IGNORED[kind]}"
    return None


def revised_text(base: str, revisions: Sequence[Revision]) -> str:
    """The model in force: ``base`` with ``revisions`` applied in order (see the module docstring).
    A retraction that matches no line raises :class:`StepRefused` naming its step."""
    lines = base.rstrip("\n").split("\n")
    added_by: list[int | None] = [None] * len(lines)
    for rev in revisions:
        for r in rev.retract:
            at = next((i for i, line in enumerate(lines) if same_statement(line, r)), None)
            if at is None:
                raise StepRefused(f"step {rev.step} retracts {' '.join(r.split())!r}, which is not a line of the model "
                                  "in force (retract names one line as the model writes it)")
            del lines[at], added_by[at]
        for a in rev.add:
            for line in a.rstrip("\n").split("\n"):
                lines.append(line)
                added_by.append(rev.step)
    return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class Change:
    """What a step changed in the hypotheses: their counts and which appeared or vanished."""

    before: int
    after: int
    appeared: list[str] = field(default_factory=list)
    vanished: list[str] = field(default_factory=list)
    complete: bool = True

    def as_json(self) -> dict[str, Any]:
        return {"before": self.before, "after": self.after, "appeared": self.appeared, "vanished": self.vanished,
                "complete": self.complete}


def change(before: dict[str, Any] | None, after: dict[str, Any]) -> Change:
    """The change between two steps' traces (``hypotheses``: the statements, at most
    :data:`KEPT_STATEMENTS`; ``complete`` False when either list was cut there)."""
    before = before or {}
    old = list(before.get("hypotheses", []))
    new = list(after.get("hypotheses", []))
    old_total = int(before.get("hypotheses_total", len(old)))
    new_total = int(after.get("hypotheses_total", len(new)))
    complete = "hypotheses" in before and len(old) == old_total and len(new) == new_total
    old_set, new_set = set(old), set(new)
    return Change(old_total, new_total, [h for h in new if h not in old_set], [h for h in old if h not in new_set],
                  complete)
