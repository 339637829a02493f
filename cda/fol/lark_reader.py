"""Reading a formula with lark and ``fol.lark``: what :mod:`cda.fol.fastparse` falls back to,
and what reports every syntax error (line, column, what was expected). Imported only when the
fast reader does not vouch for a formula, so that a well-formed file never builds the parser.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any, Literal

import lark
from lark import Token, Transformer, v_args

from cda.contracts.deadline import current_deadline, parse_within
from cda.errors import DSLSyntaxError
from cda.fol.parse import _TOO_DEEP, MAX_NESTING, _error
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

__all__ = ["read_with_lark"]


class _VarLists:
    """Post-lexer: ``∀x y φ`` → ``∀x, y φ`` when ``y`` is variable-shaped (see the grammar)."""

    always_accept: tuple[str, ...] = ()

    def process(self, stream: Iterator[Token]) -> Iterator[Token]:
        state = 0  # 1: after a quantifier; 2: after a variable; 3: after a comma in a var list
        for tok in stream:
            if state == 2 and tok.type == "NAME" and is_variable_shaped(str(tok)):
                yield Token.new_borrow_pos("COMMA", ",", tok)
                yield tok
                continue
            if tok.type in ("FORALL", "EXISTS"):
                state = 1
            elif state in (1, 3) and tok.type == "NAME":
                state = 2
            elif state == 2 and tok.type == "COMMA":
                state = 3
            else:
                state = 0
            yield tok


@lru_cache(maxsize=1)
def _parser() -> lark.Lark:
    grammar = resources.files("cda.fol").joinpath("fol.lark").read_text(encoding="utf-8")
    return lark.Lark(grammar, parser="lalr", lexer="basic", postlex=_VarLists(), propagate_positions=True)


def _pos(meta: Any) -> Pos:
    return (getattr(meta, "line", 0) or 0, getattr(meta, "column", 0) or 0)


@dataclass(frozen=True)
class _App:
    """``name`` or ``name(args)`` before we know whether it is an atom or a term."""

    name: str
    args: tuple[_App, ...]
    pos: Pos

    def term(self) -> Term:
        return Term(self.name, tuple(a.term() for a in self.args), self.pos)

    def atom(self) -> Atom:
        return Atom(self.name, tuple(a.term() for a in self.args), self.pos)


def _f(node: Any) -> Formula:
    return node.atom() if isinstance(node, _App) else node  # type: ignore[no-any-return]


@v_args(meta=True)
class _ToAST(Transformer[Token, Any]):
    def app(self, meta: Any, items: list[Any]) -> _App:
        name, *args = items
        return _App(str(name), tuple(args), (name.line, name.column))

    def atom_f(self, meta: Any, items: list[Any]) -> Atom:
        return items[0].atom()  # type: ignore[no-any-return]

    def eq_f(self, meta: Any, items: list[Any]) -> Eq:
        return Eq(items[0].term(), items[1].term(), _pos(meta))

    def neq_f(self, meta: Any, items: list[Any]) -> Not:
        return Not(Eq(items[0].term(), items[1].term(), _pos(meta)), _pos(meta))

    def true_f(self, meta: Any, items: list[Any]) -> BoolConst:
        return BoolConst(True, _pos(meta))

    def false_f(self, meta: Any, items: list[Any]) -> BoolConst:
        return BoolConst(False, _pos(meta))

    def not_f(self, meta: Any, items: list[Any]) -> Not:
        return Not(_f(items[0]), _pos(meta))

    def and_f(self, meta: Any, items: list[Any]) -> And:
        return And(tuple(_f(i) for i in items), _pos(meta))

    def or_f(self, meta: Any, items: list[Any]) -> Or:
        return Or(tuple(_f(i) for i in items), _pos(meta))

    def xor_f(self, meta: Any, items: list[Any]) -> Formula:
        out = _f(items[0])
        for item in items[1:]:
            out = Xor(out, _f(item), _pos(meta))
        return out

    def impl_f(self, meta: Any, items: list[Any]) -> Implies:
        return Implies(_f(items[0]), _f(items[1]), _pos(meta))

    def iff_f(self, meta: Any, items: list[Any]) -> Formula:
        out = _f(items[0])
        for item in items[1:]:
            out = Iff(out, _f(item), _pos(meta))
        return out

    def var_list(self, meta: Any, items: list[Token]) -> list[tuple[str, Pos]]:
        return [(str(t), (t.line or 0, t.column or 0)) for t in items]

    def _quant(self, kind: Literal["forall", "exists"], meta: Any, items: list[Any]) -> Formula:
        _kw, variables, body = items
        out = _f(body)
        for var, vpos in reversed(variables):
            out = Quant(kind, var, out, _pos(meta), vpos)
        return out

    def forall_f(self, meta: Any, items: list[Any]) -> Formula:
        return self._quant("forall", meta, items)

    def exists_f(self, meta: Any, items: list[Any]) -> Formula:
        return self._quant("exists", meta, items)


_FRIENDLY = {
    "NAME": "a name",
    "FORALL": "'∀'",
    "EXISTS": "'∃'",
    "TRUE": "'⊤'",
    "FALSE": "'⊥'",
    "_NOT": "'¬'",
    "_AND": "'∧'",
    "_OR": "'∨'",
    "_IMPLIES": "'→'",
    "_IFF": "'↔'",
    "_XOR": "'⊕'",
    "_EQ": "'='",
    "_NEQ": "'≠'",
    "_SEP": "'.'",
    "LPAR": "'('",
    "RPAR": "')'",
    "COMMA": "','",
    "$END": "end of input",
}


def _describe(names: set[str]) -> str:
    words = sorted({_FRIENDLY.get(n, n.lower()) for n in names}, key=lambda w: (w.startswith("'"), w))
    return ", ".join(words)


def _check_nesting(tree: lark.Tree[Any], source_line: str, filename: str | None, line: int) -> None:
    """Refuse a parse tree deeper than :data:`MAX_NESTING`, pointing at the first level too deep
    (walked with an explicit stack: the tree may be deeper than Python's recursion limit)."""
    stack: list[tuple[lark.Tree[Any], int]] = [(tree, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_NESTING:
            column = getattr(node.meta, "column", None) if not node.meta.empty else None
            raise _error(DSLSyntaxError, _TOO_DEEP, (1, column or 0), source_line, filename, line)
        stack.extend((child, depth + 1) for child in node.children if isinstance(child, lark.Tree))



def read_with_lark(padded: str, source_line: str, filename: str | None, line: int, column: int) -> Formula:
    """The formula ``padded`` holds, read by lark; a syntax error is a ``DSLSyntaxError`` at its place."""
    try:
        tree = parse_within(_parser(), padded, current_deadline(), "while reading the formulas")
        _check_nesting(tree, source_line, filename, line)
        result = _ToAST().transform(tree)
    except (RecursionError, lark.exceptions.VisitError) as err:
        if isinstance(err, lark.exceptions.VisitError) and not isinstance(err.orig_exc, RecursionError):
            raise
        raise _error(DSLSyntaxError, _TOO_DEEP, (1, column), source_line, filename, line) from None
    except lark.exceptions.UnexpectedInput as err:
        col = getattr(err, "column", None)
        at_end = isinstance(err, lark.exceptions.UnexpectedEOF) or (
            isinstance(err, lark.exceptions.UnexpectedToken) and err.token.type == "$END"
        )
        if at_end or not isinstance(col, int) or col < 1:
            col = len(padded.rstrip()) + 1
        if isinstance(err, lark.exceptions.UnexpectedToken):
            found = "end of input" if err.token.type == "$END" else f"'{err.token}'"
            message = f"unexpected {found}; expected {_describe(set(err.expected))}"
        elif isinstance(err, lark.exceptions.UnexpectedCharacters):
            at = err.pos_in_stream
            char = padded[at] if at is not None and at < len(padded) else "?"
            message = f"unexpected character {char!r}"
        else:
            message = f"unexpected end of input; expected {_describe(set(getattr(err, 'expected', ())))}"
        raise _error(DSLSyntaxError, message, (1, col), source_line, filename, line) from None
    return _f(result)
