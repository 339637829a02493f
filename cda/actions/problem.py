"""From ``CDAInputs`` to one grounded problem, every statement tagged with the field it came from.

The user's ``dsl`` text is parsed as it is (errors in it keep their own lines, under ``dsl``).
Every other input is a :class:`~cda.encodings.assemble.Piece` with its origin: the ``observe``
lines adopted from observations (``observations[1]`` line 2), the hard and soft clauses of
``constraints`` (``constraints.hard[0]``), the claims (``goals.claims[0]``) and the goal. Each
is parsed on its own, so an error names the field the user wrote it in, with a line and column
inside that field; nothing is concatenated and nothing is relocated afterwards.

An observation is adopted into the problem when a line of its text is itself an ``observe``
statement (``observe slow(api)``); every other text is evidence only (for coverage, Ken
matching and the LLM gate), never silently turned into a fact.

Unnamed clauses are named by the line they take in the problem (``observe@12``, ``prove@14``):
the pieces are numbered after the DSL's last line, in the order above, so the names are those
a reader of the problem as one text would give them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal
from fractions import Fraction
from pathlib import Path

from cda.contracts.action import CDAInputs
from cda.contracts.deadline import NO_DEADLINE, Deadline, deadline_scope
from cda.contracts.receipt import canonical_json, sha256_hex
from cda.contracts.refs import ArtifactRef, SpanRef
from cda.encodings import ast as A
from cda.encodings.assemble import Assembled, Origin, Piece, PieceKind, Placed, assemble
from cda.encodings.ken_loads import with_ken_loads
from cda.encodings.numbers import exact_number
from cda.encodings.parse import parse_problem
from cda.errors import DSLSyntaxError
from cda.ken.graph import KenGraph

__all__ = ["ActionProblem", "action_pieces", "build", "observation_text", "observe_literal", "problem_digest"]


@dataclass
class ActionProblem:
    """The grounded problem of an Action, its statements with their origins, and its evidence."""

    assembled: Assembled
    pieces: list[Piece]
    adopted: list[str] = field(default_factory=list)  # the observe literals taken from observations
    evidence: list[str] = field(default_factory=list)  # observation texts, verbatim
    observed_literals: list[str] = field(default_factory=list)  # every observe literal, as written
    #: which input observation each adopted line came from, by the line it takes in the problem
    observation_of_line: dict[int, int] = field(default_factory=dict)
    #: the Ken graph the run reads: the caller's, merged with those the dsl's ``ken`` lines name
    ken: KenGraph | None = None

    def placed(self) -> list[Placed]:
        return self.assembled.placed()


def observation_text(ref: SpanRef | ArtifactRef) -> str:
    """The text an observation carries (a span's excerpt or an artifact's inline text), or ''."""
    if isinstance(ref, SpanRef):
        return ref.excerpt or ""
    return ref.text or ""


def observe_literal(line: str) -> str | None:
    """What follows ``observe`` on a line that is an observe statement, else None.

    >>> observe_literal("  observe not slow(cache)  # probe"), observe_literal("cache p99 3 ms")
    ('not slow(cache)', None)
    """
    words = line.split("#", 1)[0].split(None, 1)
    if len(words) == 2 and words[0] == "observe":
        return words[1].strip()
    return None


def _weight(value: Decimal, where: str) -> Fraction:
    """A soft weight from JSON exactly as the user wrote it (the contract kept its digits:
    :mod:`cda.contracts.json_numbers`), within the DSL's number range (one rule,
    :func:`cda.encodings.numbers.exact_number`)."""
    try:
        return exact_number(Fraction(value))
    except ValueError as exc:
        raise DSLSyntaxError(f"the soft weight {format(value, 'f')} is out of range: {exc}").with_filename(where) from None


def action_pieces(inputs: CDAInputs, first_line: int) -> tuple[list[Piece], dict[int, int]]:
    """The inputs other than ``dsl`` as pieces, numbered from ``first_line``; and the observation
    index of each adopted observe line, by its line in the problem."""
    pieces: list[Piece] = []
    observation_of_line: dict[int, int] = {}

    def add(piece: Piece) -> None:
        pieces.append(piece)

    line = first_line
    for i, ref in enumerate(inputs.observations):
        text = observation_text(ref)
        for j, raw in enumerate(text.split("\n")):
            if observe_literal(raw) is not None:
                add(Piece("observe", raw, Origin(f"observations[{i}]", j + 1), line, source=text))
                observation_of_line[line] = i
                line += 1
    for i, clause in enumerate(inputs.constraints.hard):
        add(Piece("hard", clause, Origin(f"constraints.hard[{i}]"), line, name=f"input_hard_{i}"))
        line += 1
    for i, soft in enumerate(inputs.constraints.soft):
        add(Piece("soft", soft.clause, Origin(f"constraints.soft[{i}]"), line, name=soft.name or f"input_soft_{i}",
                  weight=_weight(soft.weight, f"constraints.soft[{i}].weight")))
        line += 1
    for i, invariant in enumerate(inputs.invariants):  # a global invariant is a hard clause the trace names
        add(Piece("hard", invariant, Origin(f"invariants[{i}]"), line, name=f"invariant_{i}"))
        line += 1
    goals = inputs.goals
    mode: PieceKind = "disprove" if goals.kind == "disprove" else "prove"
    for i, claim in enumerate(goals.claims):
        add(Piece(mode, claim, Origin(f"goals.claims[{i}]"), line))
        line += 1
    return pieces, observation_of_line


def build(inputs: CDAInputs, ken: KenGraph | None, deadline: Deadline = NO_DEADLINE,
          base_dir: Path | None = None) -> ActionProblem:
    """Parse, check and ground the whole problem of ``inputs``; errors name the field at fault.

    The ``dsl``'s own ``ken "…"`` lines are read as ``cda solve`` reads them (relative to
    ``base_dir``, else the working directory) and merged into ``ken``: ignored, they once gave an
    Action another answer than ``cda solve`` on the same text. Grounding stops at ``deadline``
    with :class:`~cda.contracts.deadline.OutOfTime`, and so does reading the text (a 200,000-deep
    dsl once read for 13 s past a 2 s wall)."""
    with deadline_scope(deadline):
        ast = parse_problem(inputs.dsl, "dsl")
    ken = with_ken_loads(ast.statements, ken, base_dir if base_dir is not None else Path.cwd(), "dsl")
    lines = inputs.dsl.split("\n") if inputs.dsl else []
    if lines and lines[-1] == "":
        lines.pop()
    pieces, observation_of_line = action_pieces(inputs, len(lines) + 1)
    goals = inputs.goals
    if goals.kind in ("best_explanation", "plan") and not any(isinstance(st, A.GoalBest) for st in ast.statements):
        pieces.append(Piece("best", "", Origin("goals"), len(lines) + len(pieces) + 1, top=goals.top or 3))
    assembled = assemble(ast, pieces, ken, deadline)
    out = ActionProblem(assembled, pieces, observation_of_line=observation_of_line, ken=ken)
    out.observed_literals = [p.written for p in assembled.placed() if isinstance(p.statement, A.Observe)
                             and p.origin.field == "dsl"]
    for ref in inputs.observations:
        text = observation_text(ref)
        out.evidence.append(text)
        for raw in text.split("\n"):
            literal = observe_literal(raw)
            if literal is not None:
                out.adopted.append(literal)
                out.observed_literals.append(literal)
    return out


def problem_digest(inputs: CDAInputs, problem: ActionProblem) -> str:
    """A SHA-256 naming the problem the solver was given: the DSL text and every piece, with its
    kind, origin, name and weight (what a receipt needs to say which problem it answered)."""
    pieces = [{"kind": p.kind, "field": p.origin.field, "line": p.origin.line, "text": p.text, "name": p.name,
               "weight": None if p.weight is None else str(p.weight), "top": p.top} for p in problem.pieces]
    return sha256_hex(canonical_json({"dsl": inputs.dsl, "pieces": pieces}))
