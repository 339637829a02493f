"""From ``CDAInputs`` to one ``.cda`` text, keeping track of where every line came from.

The user's ``dsl`` text comes first, unchanged, so errors in it keep their own line numbers.
After it come, one per line: the ``observe`` lines adopted from observations, the hard and soft
clauses of ``constraints``, and the goals. An error on an appended line is re-located to its
origin (``constraints.hard[2]`` column 7), so a user is never pointed at text they did not write.

An observation is adopted into the problem when a line of its text is itself an ``observe``
statement (``observe slow(api)``); every other text is evidence only (for coverage, Ken
matching and the LLM gate), never silently turned into a fact.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from cda.contracts.action import CDAInputs
from cda.contracts.refs import ArtifactRef, SpanRef
from cda.errors import DSLError

__all__ = ["AssembledProblem", "assemble", "observation_text", "relocate"]

_OBSERVE = re.compile(r"^\s*observe\s+(?P<lit>\S.*?)\s*$")
_GOAL_BEST = re.compile(r"^\s*goal\s+best_explanation\b", re.MULTILINE)


@dataclass(frozen=True)
class Origin:
    """Where an appended line came from: a field path and the column its user text starts at."""

    where: str
    offset: int


@dataclass
class AssembledProblem:
    text: str
    origins: dict[int, Origin] = field(default_factory=dict)  # 1-based line -> origin
    adopted: list[str] = field(default_factory=list)  # the observe lines taken from observations
    evidence: list[str] = field(default_factory=list)  # observation texts, verbatim
    observed_literals: list[str] = field(default_factory=list)


def observation_text(ref: SpanRef | ArtifactRef) -> str:
    """The text an observation carries (a span's excerpt or an artifact's inline text), or ''."""
    if isinstance(ref, SpanRef):
        return ref.excerpt or ""
    return ref.text or ""


def assemble(inputs: CDAInputs) -> AssembledProblem:
    """The whole problem as ``.cda`` text, with the origin of every appended line."""
    out = AssembledProblem(text="")
    lines: list[str] = inputs.dsl.split("\n") if inputs.dsl else []
    if lines and lines[-1] == "":
        lines.pop()

    def add(line: str, where: str | None = None, offset: int = 0) -> int:
        lines.append(line)
        if where is not None:
            out.origins[len(lines)] = Origin(where, offset)
        return len(lines)

    for line in lines:
        m = _OBSERVE.match(line.split("#", 1)[0])
        if m:
            out.observed_literals.append(m.group("lit"))
    for i, ref in enumerate(inputs.observations):
        text = observation_text(ref)
        out.evidence.append(text)
        for j, raw in enumerate(text.split("\n")):
            m = _OBSERVE.match(raw.split("#", 1)[0])
            if m:
                prefix = "observe "
                add(prefix + m.group("lit"), f"observations[{i}] line {j + 1}", len(prefix))
                out.adopted.append(m.group("lit"))
                out.observed_literals.append(m.group("lit"))
    for i, clause in enumerate(inputs.constraints.hard):
        prefix = f"hard input_hard_{i}: "
        add(prefix + " ".join(clause.split("\n")), f"constraints.hard[{i}]", len(prefix))
    for i, soft in enumerate(inputs.constraints.soft):
        name = soft.name or f"input_soft_{i}"
        prefix = f"soft {name} weight {soft.weight!r}: "
        add(prefix + " ".join(soft.clause.split("\n")), f"constraints.soft[{i}]", len(prefix))
    goals = inputs.goals
    kind = "prove" if goals.kind == "plan" else goals.kind
    for i, claim in enumerate(goals.claims):
        goal_kind = "disprove" if kind == "disprove" else "prove"
        prefix = f"goal {goal_kind} "
        add(prefix + " ".join(claim.split("\n")), f"goals.claims[{i}]", len(prefix))
    if goals.kind in ("best_explanation", "plan") and not _GOAL_BEST.search(inputs.dsl):
        add(f"goal best_explanation top {goals.top or 3}", "goals")
    out.text = "\n".join(lines) + "\n"
    return out


def relocate(err: DSLError, problem: AssembledProblem) -> DSLError:
    """The error pointed at the field the offending line came from (unchanged for ``dsl`` lines)."""
    if err.line is None:
        return err.with_filename("dsl")
    origin = problem.origins.get(err.line)
    if origin is None:
        return err.with_filename("dsl")
    text_line = problem.text.split("\n")[err.line - 1]
    err.line = 1
    if err.column is not None:
        err.column = max(1, err.column - origin.offset)
    err.source_line = text_line[origin.offset:]
    return err.with_filename(origin.where)
