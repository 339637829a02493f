"""A hand-written reader for the well-formed formulas of ``fol.lark``, so that ``cda prove``
does not build the lark parser (about 0.1 s, a quarter of a one-file run) for files that are
written correctly.

It builds exactly the tree :mod:`cda.fol.lark_reader` builds, positions included (each node at
the first token of its rule's span, an opening parenthesis counted), and vouches for nothing
else: on anything it does not expect — a syntax error, an unknown character, nesting past
:data:`MAX_LEVELS` — it raises :class:`Fallback` and the lark reader reads the formula again,
reporting the error as it always has. ``tests/test_fol_fastparse.py`` checks the two readers
against each other on every FOLIO formula and on random ones.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from cda.contracts.deadline import OutOfTime, current_deadline
from cda.fol.syntax import (
    And,
    Atom,
    BoolConst,
    Eq,
    Formula,
    Iff,
    Implies,
    Not,
    Or,
    Pos,
    Quant,
    Term,
    Xor,
    is_variable_shaped,
)

__all__ = ["Fallback", "read_formula", "MAX_LEVELS"]

MAX_LEVELS = 40
"""Nesting (parentheses, negations, quantifiers, argument lists) past which the lark reader
takes over: it checks the nesting bound and reports a formula too deep; this one recurses a few
Python frames per level."""


class Fallback(Exception):
    """The fast reader does not vouch for this text: read it with lark."""


#: the terminals of fol.lark, longest spelling first where one is a prefix of another
_TOKEN = re.compile(
    r"""[ \t\f\r\n]*(?:
    (?P<FORALL>∀|forall\b)|(?P<EXISTS>∃|exists\b)|(?P<TRUE>⊤|true\b)|(?P<FALSE>⊥|false\b)
    |(?P<NAME>\w(?:[\w'’]|\.(?=\d))*)
    |(?P<IFF>↔|⟷|<->|⇔|<=>)|(?P<IMPLIES>→|->|⇒|=>)|(?P<NEQ>≠|!=)|(?P<NOT>¬|~|!)
    |(?P<AND>∧|&&|&)|(?P<OR>∨|\|\||\|)|(?P<XOR>⊕|⊻|\^)|(?P<EQ>=)|(?P<SEP>[.:])
    |(?P<LPAR>\()|(?P<RPAR>\))|(?P<COMMA>,)
    )""",
    re.VERBOSE,
)
_END = "$END"


class _Reader:
    """Recursive descent over the token list; each ``_rule`` returns (formula, start) where
    ``start`` is the position of the rule's first token (an opening parenthesis included)."""

    def __init__(self, text: str) -> None:
        self.kinds: list[str] = []
        self.values: list[str] = []
        self.poss: list[Pos] = []
        line, line_start, at, n = 1, 0, 0, len(text)
        self.deadline = deadline = current_deadline()  # a budget covers reading (200,000 terms take seconds)
        while True:
            if deadline.tick():
                raise OutOfTime(f"while reading the formulas (at line {line:,})")
            m = _TOKEN.match(text, at)
            if m is None or m.lastgroup is None:
                if text[at:].strip(" \t\f\r\n"):
                    raise Fallback
                break
            start = m.start(m.lastgroup)
            gap = text.count("\n", at, start)
            if gap:
                line += gap
                line_start = text.rindex("\n", at, start) + 1
            self.kinds.append(m.lastgroup)
            self.values.append(m.group(m.lastgroup))
            self.poss.append((line, start - line_start + 1))
            at = m.end()
            if at >= n:
                break
        self.kinds.append(_END)
        self.values.append("")
        self.poss.append((line, 0))
        self.i = 0
        self.levels = 0

    def _peek(self) -> str:
        return self.kinds[self.i]

    def _take(self, kind: str) -> int:
        if self.kinds[self.i] != kind:
            raise Fallback
        self.i += 1
        return self.i - 1

    def _deeper(self) -> None:
        self.levels += 1
        if self.levels > MAX_LEVELS:
            raise Fallback

    def formula(self) -> tuple[Formula, Pos]:
        return self._left("IFF", self._impl, Iff)

    def _left(self, op: str, part: Callable[[], tuple[Formula, Pos]], node: type[Iff] | type[Xor]) -> tuple[Formula, Pos]:
        """``part (op part)*``, grouped to the left, every node at the first part's start."""
        out, start = part()
        while self._peek() == op:
            self.i += 1
            out = node(out, part()[0], start)
        return out, start

    def _impl(self) -> tuple[Formula, Pos]:
        lhs, start = self._xor()
        if self._peek() != "IMPLIES":
            return lhs, start
        self.i += 1
        rhs, _ = self._impl()
        return Implies(lhs, rhs, start), start

    def _xor(self) -> tuple[Formula, Pos]:
        return self._left("XOR", self._or, Xor)

    def _or(self) -> tuple[Formula, Pos]:
        return self._chain("OR", self._and, Or)

    def _and(self) -> tuple[Formula, Pos]:
        return self._chain("AND", self._unary, And)

    def _chain(self, op: str, part: Callable[[], tuple[Formula, Pos]], node: type[And] | type[Or]) -> tuple[Formula, Pos]:
        first, start = part()
        if self._peek() != op:
            return first, start
        items = [first]
        while self._peek() == op:
            if self.deadline.tick():
                raise OutOfTime(f"while reading the formulas (at line {self.poss[self.i][0]:,})")
            self.i += 1
            items.append(part()[0])
        return node(tuple(items), start), start

    def _unary(self) -> tuple[Formula, Pos]:
        kind = self._peek()
        if kind == "NOT":
            pos = self.poss[self.i]
            self.i += 1
            self._deeper()
            arg, _ = self._unary()
            self.levels -= 1
            return Not(arg, pos), pos
        if kind == "FORALL" or kind == "EXISTS":
            return self._quant("forall" if kind == "FORALL" else "exists")
        return self._primary()

    def _quant(self, kind: str) -> tuple[Formula, Pos]:
        pos = self.poss[self.i]
        self.i += 1
        variables = [self._take("NAME")]
        while True:  # ∀x, y φ and ∀x y φ (a variable-shaped name goes on the list)
            if self._peek() == "COMMA":
                self.i += 1
                variables.append(self._take("NAME"))
            elif self._peek() == "NAME" and is_variable_shaped(self.values[self.i]):
                variables.append(self._take("NAME"))
            else:
                break
        if self._peek() == "SEP":
            self.i += 1
        self._deeper()
        out, _ = self.formula()
        self.levels -= 1
        for v in reversed(variables):
            out = Quant(kind, self.values[v], out, pos, self.poss[v])  # type: ignore[arg-type]
        return out, pos

    def _primary(self) -> tuple[Formula, Pos]:
        kind = self._peek()
        pos = self.poss[self.i]
        if kind == "LPAR":
            self.i += 1
            self._deeper()
            inner, _ = self.formula()
            self.levels -= 1
            self._take("RPAR")
            return inner, pos
        if kind == "TRUE" or kind == "FALSE":
            self.i += 1
            return BoolConst(kind == "TRUE", pos), pos
        name, args = self._app()
        nxt = self._peek()
        if nxt == "EQ" or nxt == "NEQ":
            self.i += 1
            rname, rargs = self._app()
            eq = Eq(Term(self.values[name], args, pos), Term(self.values[rname], rargs, self.poss[rname]), pos)
            return (eq if nxt == "EQ" else Not(eq, pos)), pos
        return Atom(self.values[name], args, pos), pos

    def _app(self) -> tuple[int, tuple[Term, ...]]:
        name = self._take("NAME")
        if self._peek() != "LPAR":
            return name, ()
        self.i += 1
        self._deeper()
        args = [self._term()]
        while self._peek() == "COMMA":
            self.i += 1
            args.append(self._term())
        self._take("RPAR")
        self.levels -= 1
        return name, tuple(args)

    def _term(self) -> Term:
        name, args = self._app()
        return Term(self.values[name], args, self.poss[name])


def read_formula(padded: str) -> Formula:
    """The formula ``padded`` holds (columns counted from its start, as lark counts them);
    raises :class:`Fallback` for anything but a well-formed formula."""
    reader = _Reader(padded)
    out, _ = reader.formula()
    if reader._peek() != _END:
        raise Fallback
    return out
