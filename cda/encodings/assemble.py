"""Every input of a problem, as pieces with origins, into one checked :class:`GroundProblem`.

A problem reaches CDA from several places at once: a ``.cda`` text, clause strings passed to
``cda.solve(hard=..., soft=...)``, and the fields of an Action's ``CDAInputs`` (constraints,
claims, observations). Each string outside the DSL text is a :class:`Piece`: what kind of
statement it is, its text, and its :class:`Origin` (the field it came from and the line its text
starts at there). Every piece is parsed on its own, so an error in it names its origin with its
own line and column (``constraints.hard[0]:1:15: syntax error: ...``) and can never run on into
the next piece (statements are not line-terminated: a clause ending in ``and`` would swallow the
next line of a concatenated text). Then the DSL's statements and the pieces' are checked and
grounded together, by one grounder, in that order.

The result keeps every statement with its origin (:class:`Placed`), so that whoever needs to
know what a clause says (the Action's verifiers) reads its syntax tree, never text.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Literal

from cda.contracts.deadline import NO_DEADLINE, Deadline
from cda.encodings import ast as A
from cda.encodings.ground import Located, ground_problem
from cda.encodings.ir import GroundProblem
from cda.encodings.parse import parse_clause, parse_problem
from cda.errors import DSLError, DSLSyntaxError
from cda.ken.graph import KenGraph

__all__ = ["Origin", "Piece", "PieceKind", "Placed", "Assembled", "assemble", "written_body"]

PieceKind = Literal["observe", "hard", "soft", "prove", "disprove", "best"]


@dataclass(frozen=True)
class Origin:
    """Where a statement was written: a field (``dsl``, ``constraints.hard[0]``, ``hard#1``) and
    the line its text starts at in that field."""

    field: str
    line: int = 1


@dataclass(frozen=True)
class Piece:
    """One statement written outside the DSL text.

    ``text`` is a clause (``slow(web) and down(db)``) for ``hard``/``soft``/``prove``/``disprove``,
    and a whole ``observe …`` statement for ``observe``; ``best`` (``goal best_explanation``)
    has no text, only ``top``. ``source`` is the whole text of the origin field (for the caret
    line of an error; the piece's own text when None). ``line`` is the line the statement takes in
    the problem: it names an unnamed clause (``observe@12``, ``prove@14``).
    """

    kind: PieceKind
    text: str
    origin: Origin
    line: int = 0
    name: str | None = None
    weight: Fraction | None = None
    top: int | None = None
    source: str | None = None


@dataclass(frozen=True)
class Placed:
    """A statement of the assembled problem, where it came from, and its clause as written.

    ``written`` is the body of a ``hard``/``observe``/``soft``/``goal`` clause on one line,
    comments removed (``before(event:a, event:b)``); "" for other statements. It is what a
    verifier shows as the claim it checked; it is never read back.
    """

    statement: A.Statement
    origin: Origin
    line: int
    written: str


@dataclass
class Assembled:
    """The checked, grounded problem, and the statements it was made of."""

    ast: A.ProblemAST
    pieces: list[Placed]
    gp: GroundProblem

    def placed(self) -> list[Placed]:
        """Every statement in order, the DSL's first (worked out on demand: a plain solve never
        asks, and a problem of 10,000 clauses need not pay for it)."""
        return _dsl_placed(self.ast) + self.pieces


def _located_error(err: DSLError, origin: Origin, source: str) -> DSLError:
    """A parse error of a piece, named after its origin, with the origin's own line for the caret."""
    if err.line is not None:
        lines = source.split("\n")
        err.source_line = lines[err.line - 1] if 0 < err.line <= len(lines) else None
    return err.with_filename(origin.field)


def _one_line(text: str) -> str:
    """A clause on one line: comments removed, lines joined by one space."""
    parts = (part.split("#", 1)[0].strip() for part in text.split("\n"))
    return " ".join(part for part in parts if part)


def written_body(st: A.Statement, segment: str) -> str:
    """The clause of ``st`` as written, given the text from its first keyword to the next
    statement: what follows ``hard [name]:``, ``observe [name:]``, ``soft …:`` or ``goal prove``.

    Reading the separators (the first ``:``, the keyword) is safe here: names cannot hold a
    colon, and the parser has already said the text is this statement.
    """
    text = _one_line(segment)
    if isinstance(st, A.Observe) and st.name is None:
        return text[len("observe"):].strip()
    if isinstance(st, (A.Hard, A.Observe, A.Soft)):
        return text.split(":", 1)[1].strip() if ":" in text else ""
    if isinstance(st, A.GoalClaim):
        return text[len("goal"):].strip()[len(st.mode):].strip()
    return ""


def _dsl_placed(ast: A.ProblemAST) -> list[Placed]:
    """The DSL's statements, each with the clause as written: the text from its keyword to the
    line before the next statement (statements begin with a keyword; comments hold no clause)."""
    lines = ast.source.split("\n")
    field = ast.filename or "dsl"
    starts = [st.pos for st in ast.statements[1:]] + [(len(lines) + 1, 1)]
    out: list[Placed] = []
    for st, (end_line, end_col) in zip(ast.statements, starts):
        written = ""
        if isinstance(st, (A.Hard, A.Observe, A.Soft, A.GoalClaim)):
            line, col = st.pos
            if end_line == line:
                segment = [lines[line - 1][col - 1 : end_col - 1]]
            else:
                segment = [lines[line - 1][col - 1 :]] + lines[line : end_line - 1]
            written = written_body(st, "\n".join(segment))
        out.append(Placed(st, Origin(field, st.pos[0]), st.pos[0], written))
    return out


def _parse_piece(piece: Piece) -> tuple[A.Statement, str]:
    """The statement a piece says, with its positions in the origin's coordinates."""
    pad = "\n" * (piece.origin.line - 1)
    pos = (piece.origin.line, 1)
    source = piece.source if piece.source is not None else piece.text
    try:
        if piece.kind == "best":
            return A.GoalBest(piece.top, pos), ""
        if piece.kind == "observe":
            statements = parse_problem(pad + piece.text, piece.origin.field).statements
            if len(statements) != 1 or not isinstance(statements[0], A.Observe):
                raise DSLSyntaxError("a line that starts with 'observe' must be one observe statement",
                                     line=piece.origin.line, column=1)
            return statements[0], written_body(statements[0], piece.text)
        formula, weight = parse_clause(pad + piece.text)
    except DSLError as err:
        raise _located_error(err, piece.origin, source) from None
    written = _one_line(piece.text)
    if piece.kind == "soft":
        if weight is not None and piece.weight is not None:
            raise DSLSyntaxError(
                "a soft clause takes one weight, given twice (in the clause text and as its weight)", line=pos[0]
            ).with_filename(piece.origin.field)
        return A.Soft(piece.name, weight if piece.weight is None else piece.weight, formula, pos,
                      name_pos=pos, weight_pos=pos), written
    if weight is not None:
        raise DSLSyntaxError(f"a {piece.kind} clause takes no weight; only soft clauses do",
                             line=pos[0]).with_filename(piece.origin.field)
    if piece.kind == "hard":
        return A.Hard(piece.name, formula, pos, name_pos=pos), written
    return A.GoalClaim(piece.kind, formula, pos), written  # type: ignore[arg-type]


def assemble(
    ast: A.ProblemAST, pieces: Sequence[Piece] = (), ken: KenGraph | None = None, deadline: Deadline = NO_DEADLINE
) -> Assembled:
    """The DSL's statements, then the pieces', checked and grounded as one problem (within
    ``deadline``: :func:`~cda.encodings.ground.ground_problem` says what happens when it passes).

    >>> from cda.encodings.parse import parse_problem
    >>> try:
    ...     assemble(parse_problem("hyp leak"), [Piece("hard", "leak and", Origin("constraints.hard[0]"))])
    ... except DSLSyntaxError as err:
    ...     print(err.filename, err.line, err.column)
    constraints.hard[0] 1 9
    >>> [p.written for p in assemble(parse_problem("hyp leak\\nhard h: leak # why"), []).placed()]
    ['', 'leak']
    """
    placed: list[Placed] = []
    extra: list[Located] = []
    for piece in pieces:
        statement, written = _parse_piece(piece)
        placed.append(Placed(statement, piece.origin, piece.line, written))
        if piece.source is not None:
            source = piece.source
        else:  # the piece's positions count from its origin's line
            source = "\n" * (piece.origin.line - 1) + piece.text
        text = " ".join(written.split()) if piece.kind in ("prove", "disprove") else None
        extra.append(Located(statement, piece.origin.field, source, piece.line, text))
    return Assembled(ast, placed, ground_problem(ast, ken, extra, deadline))
