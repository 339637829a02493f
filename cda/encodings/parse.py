"""Text → :class:`~cda.encodings.ast.ProblemAST`, with syntax errors that point at the spot.

The grammar lives in ``grammar.lark`` (package data) and defines the language. Texts are first
read by the hand-written reader of :mod:`cda.encodings.fastparse`, which builds the same tree
about ten times faster; whatever it cannot vouch for (any error included) is read by lark
(:mod:`cda.encodings.lark_reader`, imported only then), whose errors become
:class:`~cda.errors.DSLSyntaxError` carrying line, column, the source line with a caret, and the
expected tokens in words.
"""

from __future__ import annotations

from fractions import Fraction

from cda.encodings import ast as A
from cda.encodings.fastparse import Fallback, read_clause, read_problem
from cda.gcpause import gc_paused

__all__ = ["parse_problem", "parse_clause"]


def parse_problem(text: str, filename: str | None = None, *, fast: bool = True) -> A.ProblemAST:
    """Parse a whole ``.cda`` problem.

    ``fast=False`` reads with lark alone: the reference the fast reader is tested against.

    >>> ast = parse_problem("hyp leak\\nhard: leak")
    >>> [type(s).__name__ for s in ast.statements]
    ['PredDecl', 'Hard']
    """
    statements: list[A.Statement] | None = None
    if fast:
        try:
            with gc_paused():
                statements = read_problem(text)
        except Fallback:
            statements = None
    if statements is None:
        from cda.encodings.lark_reader import read  # lark loads only for what the fast reader leaves

        statements = read(text, "start", filename)
    return A.ProblemAST(statements=statements, source=text, filename=filename)


def parse_clause(text: str, *, fast: bool = True) -> tuple[A.Formula, Fraction | None]:
    """Parse one clause string (as in ``constraints.hard``), with an optional trailing weight.

    >>> parse_clause("prefer(leak) weight 0.5")[1]
    Fraction(1, 2)
    """
    if fast:
        try:
            return read_clause(text)
        except Fallback:
            pass
    from cda.encodings.lark_reader import read

    formula, weight = read(text, "clause_text", None)
    return formula, weight
