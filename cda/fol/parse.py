"""Reading first-order text: one formula (:func:`parse_formula`), premises and claims given as
strings (:func:`build_problem`), or the ``.fol`` format (:func:`parse_fol`).

Formulas are written in the FOLIO notation (``∀ ∃ ¬ ∧ ∨ → ↔ ⊕``, also ``⟷`` for ``↔``) or in
ASCII (``forall``, ``exists``, ``~``, ``&``, ``|``, ``->``, ``<->``, ``^``); the grammar is
``fol.lark``. Unbalanced parentheses and every other syntax mistake raise
:class:`~cda.errors.DSLSyntaxError` pointing at the spot; the problems read are checked by
:func:`cda.fol.check.check_problem`.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any, Literal

import lark
from lark import Token, Transformer, v_args

from cda.errors import DSLError, DSLSyntaxError, DSLTypeError
from cda.fol.check import check_problem
from cda.fol.syntax import (
    And,
    Atom,
    BoolConst,
    Eq,
    FOLProblem,
    Formula,
    Iff,
    Implies,
    Not,
    Or,
    Pos,
    Quant,
    Statement,
    Term,
    Xor,
    is_variable_shaped,
)

__all__ = ["parse_formula", "build_problem", "parse_fol"]


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


def _error(
    cls: type[DSLError], message: str, pos: Pos, source_line: str | None, filename: str | None, line: int
) -> DSLError:
    return cls(message, line=line, column=pos[1] or None, source_line=source_line, filename=filename)


def _check_parentheses(text: str, source_line: str, filename: str | None, line: int) -> None:
    stack: list[int] = []
    for i, ch in enumerate(text):
        if ch == "(":
            stack.append(i)
        elif ch == ")":
            if not stack:
                raise _error(
                    DSLSyntaxError, "unbalanced parentheses: this ')' closes nothing", (1, i + 1), source_line, filename, line
                )
            stack.pop()
    if stack:
        more = f" ({len(stack)} left open)" if len(stack) > 1 else ""
        raise _error(
            DSLSyntaxError, f"unbalanced parentheses: this '(' is never closed{more}", (1, stack[-1] + 1),
            source_line, filename, line,
        )


MAX_NESTING = 420
"""How deeply operators, quantifiers and terms may nest in one formula: every later stage (type
check, grounding, the z3 compiler) recurses once per level, and Python's stack holds ~450."""

_TOO_DEEP = f"the formula is nested too deeply to read (more than {MAX_NESTING} levels); split it into several statements"


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


def parse_formula(
    text: str, *, filename: str | None = None, line: int = 1, column: int = 1, source_line: str | None = None
) -> Formula:
    """Parse one formula; ``line``/``column`` say where ``text`` starts in its file (for errors).

    >>> parse_formula("∀x (Cat(x) → Pet(x))")  # doctest: +ELLIPSIS
    Quant(kind='forall', var='x', body=Implies(lhs=Atom(pred='Cat', ...
    >>> parse_formula("forall x (Cat(x) -> Pet(x)") # doctest: +ELLIPSIS
    Traceback (most recent call last):
    cda.errors.DSLSyntaxError: <input>:1:10: syntax error: unbalanced parentheses: this '(' is never closed
    ...
    """
    padded = " " * (column - 1) + text
    if source_line is None:
        source_line = padded
    _check_parentheses(padded, source_line, filename, line)
    try:
        tree = _parser().parse(padded)
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


def _statement(
    kind: Literal["premise", "claim"], name: str, text: str, filename: str | None, line: int = 1, column: int = 1,
    source_line: str | None = None,
) -> Statement:
    src = source_line if source_line is not None else " " * (column - 1) + text
    formula = parse_formula(text, filename=filename, line=line, column=column, source_line=src)
    return Statement(kind, name, formula, text.strip(), line, src, filename)


def build_problem(
    premises: Sequence[str | tuple[str, str]],
    claims: Sequence[str | tuple[str, str]] | str = (),
    domain: Sequence[str] | None = None,
) -> FOLProblem:
    """Parse and check premises and claims given as strings or ``(name, text)`` pairs.

    Unnamed premises are ``p1, p2, …``; an unnamed claim is ``claim`` (``c1, c2, …`` when
    there are several). Errors name the statement in place of a file name.

    >>> p = build_problem(["∀x (Cat(x) → Pet(x))", "Cat(tom)"], "Pet(tom)")
    >>> [s.name for s in p.premises], p.claims[0].name, p.signature.predicates
    (['p1', 'p2'], 'claim', {'Cat': 1, 'Pet': 1})
    >>> build_problem(["Love(x, mary)"], "Love(tom)")
    Traceback (most recent call last):
    cda.errors.DSLTypeError: premise p1:1:6: type error: free variable 'x': no quantifier binds it
        Love(x, mary)
             ^
    """
    if isinstance(claims, str):
        claims = [claims]
    stmts_p: list[Statement] = []
    for i, item in enumerate(premises, 1):
        name, text = (f"p{i}", item) if isinstance(item, str) else item
        stmts_p.append(_statement("premise", name, text, f"premise {name}"))
    stmts_c: list[Statement] = []
    for i, item in enumerate(claims, 1):
        default = "claim" if len(claims) == 1 else f"c{i}"
        name, text = (default, item) if isinstance(item, str) else item
        stmts_c.append(_statement("claim", name, text, f"claim {name}"))
    dom = tuple(domain) if domain is not None else None
    if dom is not None and (not dom or len(set(dom)) != len(dom)):
        raise DSLTypeError("a declared domain must list at least one element, each once")
    return check_problem(FOLProblem(stmts_p, stmts_c, dom))


_LINE = re.compile(r"^(\s*)(premise|claim)\b\s*(?:([\w'’]+)\s*:(?![:=]))?\s*")
_DOMAIN = re.compile(r"^\s*domain\b\s*:?\s*\{?([^}]*)\}?\s*$")


def parse_fol(text: str, filename: str | None = None) -> FOLProblem:
    """Read the ``.fol`` format: one statement per line, ``#`` comments.

    ``premise [name:] φ`` and ``claim [name:] φ``; optionally one ``domain a, b, c`` line,
    which makes the domain exactly those (distinct) elements.

    >>> p = parse_fol("# cats\\npremise all: ∀x (Cat(x) → Pet(x))\\npremise Cat(tom)\\nclaim Pet(tom)")
    >>> [(s.name, s.line) for s in p.premises + p.claims]
    [('all', 2), ('p2', 3), ('claim', 4)]
    """
    premises: list[Statement] = []
    claims: list[tuple[int, str | None, str, int, str]] = []
    domain: tuple[str, ...] | None = None
    lines = text.splitlines()
    for number, raw in enumerate(lines, 1):
        line = raw.split("#", 1)[0]
        if not line.strip():
            continue
        dm = _DOMAIN.match(line)
        if dm:
            if domain is not None:
                raise DSLTypeError("the domain is declared twice", line=number, column=1, source_line=raw, filename=filename)
            values = [v.strip() for v in dm.group(1).split(",") if v.strip()]
            bad = [v for v in values if not re.fullmatch(r"[\w'’]+", v)]
            if bad or not values or len(set(values)) != len(values):
                reason = f"'{bad[0]}' is not a name" if bad else "list at least one element, each once"
                raise DSLTypeError(
                    f"bad domain declaration: {reason}", line=number, column=1, source_line=raw, filename=filename
                )
            domain = tuple(values)
            continue
        m = _LINE.match(line)
        if not m:
            col = len(line) - len(line.lstrip()) + 1
            raise DSLSyntaxError(
                "expected a statement: 'premise [name:] formula', 'claim [name:] formula' or 'domain a, b, …'",
                line=number, column=col, source_line=raw, filename=filename,
            )
        kind, name = m.group(2), m.group(3)
        body = line[m.end():]
        if not body.strip():
            raise DSLSyntaxError(
                f"this {kind} has no formula", line=number, column=len(line.rstrip()) + 1, source_line=raw,
                filename=filename,
            )
        if kind == "premise":
            pname = name or f"p{len(premises) + 1}"
            premises.append(_statement("premise", pname, body, filename, number, m.end() + 1, raw))
        else:
            claims.append((number, name, body, m.end() + 1, raw))
    stmts_c: list[Statement] = []
    for i, (number, name, body, col, raw) in enumerate(claims, 1):
        cname = name or ("claim" if len(claims) == 1 else f"c{i}")
        stmts_c.append(_statement("claim", cname, body, filename, number, col, raw))
    return check_problem(FOLProblem(premises, stmts_c, domain, filename=filename))
