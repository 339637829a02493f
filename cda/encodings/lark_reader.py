"""The reference reader: lark over ``grammar.lark``, and its errors in words.

:mod:`cda.encodings.parse` calls :func:`read` when the hand-written reader of
:mod:`cda.encodings.fastparse` cannot vouch for a text (any error included), or when asked for
the reference (``fast=False``). lark's errors are translated here into
:class:`~cda.errors.DSLSyntaxError` carrying line, column, the source line with a caret, and the
expected tokens in words. A module of its own so that lark (about 11 ms to import) loads only
when a text needs it, not for every file the fast reader reads.
"""

from __future__ import annotations

from fractions import Fraction
from functools import lru_cache
from importlib import resources
from typing import Any

import lark
from lark import Token, Transformer, v_args

from cda.contracts.deadline import current_deadline, parse_within
from cda.encodings import ast as A
from cda.encodings.numbers import DIGIT_SEPARATORS, refusal, separated, separator_in, whole_refusal
from cda.errors import DSLSyntaxError
from cda.gcpause import gc_paused

__all__ = ["read"]


@lru_cache(maxsize=1)
def _parser() -> lark.Lark:
    grammar = resources.files("cda.encodings").joinpath("grammar.lark").read_text(encoding="utf-8")
    return lark.Lark(
        grammar,
        parser="lalr",
        propagate_positions=True,
        start=["start", "clause_text"],
        maybe_placeholders=True,
    )


def _pos(meta_or_token: Any) -> A.Pos:
    return (getattr(meta_or_token, "line", 0) or 0, getattr(meta_or_token, "column", 0) or 0)


def _number(token: Token) -> Fraction:
    text = str(token)
    reason = refusal(text)
    if reason:
        raise DSLSyntaxError(reason, line=token.line, column=token.column)
    return Fraction(text)


def _int(token: Token) -> int:
    """An INT token (``top``, ``hops``, a cardinality), refused beyond 40 digits like any number."""
    reason = whole_refusal(str(token))
    if reason:
        raise DSLSyntaxError(reason, line=token.line, column=token.column)
    return int(token)


@v_args(meta=True)
class _ToAST(Transformer[Token, Any]):
    """One method per grammar rule; builds AST nodes carrying positions."""

    # ---- statements
    def start(self, meta: Any, items: list[Any]) -> list[Any]:
        out: list[Any] = []
        for item in items:
            out.extend(item if isinstance(item, list) else [item])
        return out

    def clause_text(self, meta: Any, items: list[Any]) -> tuple[Any, Fraction | None]:
        formula = items[0]
        weight = items[1][0] if len(items) > 1 and items[1] is not None else None
        return formula, weight

    def weight(self, meta: Any, items: list[Any]) -> tuple[Fraction, A.Pos]:
        return items[0], _pos(meta)

    def domain_decl(self, meta: Any, items: list[Any]) -> A.DomainDecl:
        name, *values = items
        return A.DomainDecl(str(name), tuple(str(v) for v in values if v is not None), _pos(name))

    def sig_decl(self, meta: Any, items: list[Any]) -> list[A.PredDecl]:
        kind, *sigs = items
        return [A.PredDecl(str(kind), name, doms, pos, dpos) for (name, doms, pos, dpos) in sigs]

    def signature(self, meta: Any, items: list[Any]) -> tuple[str, tuple[str, ...], A.Pos, tuple[A.Pos, ...]]:
        name, *doms = items
        doms = [d for d in doms if d is not None]
        return str(name), tuple(str(d) for d in doms), _pos(name), tuple(_pos(d) for d in doms)

    def event_decl(self, meta: Any, items: list[Token]) -> list[A.EventDecl]:
        return [A.EventDecl(str(t), _pos(t)) for t in items]

    def metric_decl(self, meta: Any, items: list[Any]) -> A.MetricDecl:
        name, (unit, unit_pos) = items
        return A.MetricDecl(str(name), unit, _pos(name), unit_pos=unit_pos)

    def unit(self, meta: Any, items: list[Token]) -> tuple[str, A.Pos]:
        return "".join(str(t) for t in items), _pos(items[0])

    def fact_stmt(self, meta: Any, items: list[Any]) -> A.Fact:
        return A.Fact(items[0], _pos(meta))

    def observe_stmt(self, meta: Any, items: list[Any]) -> A.Observe:
        name, formula = items
        name_pos = _pos(name) if name is not None else _pos(meta)
        return A.Observe(str(name) if name is not None else None, formula, _pos(meta), name_pos=name_pos)

    def hard_stmt(self, meta: Any, items: list[Any]) -> A.Hard:
        name, formula = items
        name_pos = _pos(name) if name is not None else _pos(meta)
        return A.Hard(str(name) if name is not None else None, formula, _pos(meta), name_pos=name_pos)

    def soft_stmt(self, meta: Any, items: list[Any]) -> A.Soft:
        name, w1, formula, w2 = items
        if w1 is not None and w2 is not None:
            raise DSLSyntaxError("a soft clause takes one weight, given twice", line=w2[1][0], column=w2[1][1])
        weight = w1 if w1 is not None else w2
        return A.Soft(
            str(name) if name is not None else None,
            weight[0] if weight is not None else None,
            formula,
            _pos(meta),
            name_pos=_pos(name) if name is not None else _pos(meta),
            weight_pos=weight[1] if weight is not None else _pos(meta),
        )

    def goal_best(self, meta: Any, items: list[Any]) -> A.GoalBest:
        top = items[0]
        return A.GoalBest(_int(top) if top is not None else None, _pos(top) if top is not None else _pos(meta))

    def goal_minimal(self, meta: Any, items: list[Any]) -> A.GoalMinimal:
        mode = items[0]
        if mode is None:
            return A.GoalMinimal("all", None, _pos(meta))
        kind, k, pos = mode
        return A.GoalMinimal(kind, k, pos)

    def minimal_all(self, meta: Any, items: list[Any]) -> tuple[str, int | None, A.Pos]:
        return "all", None, _pos(meta)

    def minimal_top(self, meta: Any, items: list[Token]) -> tuple[str, int | None, A.Pos]:
        return "top", _int(items[0]), _pos(items[0])

    def minimal_card(self, meta: Any, items: list[Any]) -> tuple[str, int | None, A.Pos]:
        return "min_cardinality", None, _pos(meta)

    def goal_prove(self, meta: Any, items: list[Any]) -> A.GoalClaim:
        return A.GoalClaim("prove", items[0], _pos(meta))

    def goal_disprove(self, meta: Any, items: list[Any]) -> A.GoalClaim:
        return A.GoalClaim("disprove", items[0], _pos(meta))

    def fol_block(self, meta: Any, items: list[Token]) -> A.FolBlock:
        return A.FolBlock(str(items[0]), _pos(items[0]))

    def expect_stmt(self, meta: Any, items: list[Any]) -> A.Expect:
        name, (kind, op, value, sets, value_pos) = items
        return A.Expect(
            str(name) if name is not None else None, kind, op, value, sets, _pos(meta),
            _pos(name) if name is not None else _pos(meta), value_pos,
        )

    def expect_status(self, meta: Any, items: list[Token]) -> tuple[Any, ...]:
        return "status", None, str(items[0]), (), _pos(items[0])

    def expect_best(self, meta: Any, items: list[Any]) -> tuple[Any, ...]:
        return "best", None, None, tuple(s for s in items if s is not None), _pos(meta)

    def expect_cost(self, meta: Any, items: list[Any]) -> tuple[Any, ...]:
        return "cost", str(items[0]), items[1], (), _pos(meta)

    def expect_core(self, meta: Any, items: list[Token]) -> tuple[Any, ...]:
        return "core", None, str(items[0]), (), _pos(items[0])

    def expect_minimal(self, meta: Any, items: list[Token]) -> tuple[Any, ...]:
        return "minimal", str(items[0]), _int(items[1]), (), _pos(items[1])

    def hyp_set(self, meta: Any, items: list[Any]) -> tuple[A.FAtom, ...]:
        return tuple(a for a in items if a is not None)

    def ken_stmt(self, meta: Any, items: list[Token]) -> A.KenLoad:
        return A.KenLoad(str(items[0])[1:-1], _pos(items[0]))

    # ---- formulas
    def _nary(self, op: str, meta: Any, items: list[Any]) -> A.FNary:
        return A.FNary(op, tuple(items), _pos(meta))

    def iff_f(self, meta: Any, items: list[Any]) -> A.FNary:
        return self._nary("iff", meta, items)

    def or_f(self, meta: Any, items: list[Any]) -> A.FNary:
        return self._nary("or", meta, items)

    def and_f(self, meta: Any, items: list[Any]) -> A.FNary:
        return self._nary("and", meta, items)

    def xor_f(self, meta: Any, items: list[Any]) -> A.FNary:
        return self._nary("xor", meta, items)

    def impl_f(self, meta: Any, items: list[Any]) -> A.FImplies:
        return A.FImplies(items[0], items[1], _pos(meta))

    def not_f(self, meta: Any, items: list[Any]) -> A.FNot:
        return A.FNot(items[0], _pos(meta))

    def forall_f(self, meta: Any, items: list[Any]) -> A.FQuant:
        var, dom, body = items
        return A.FQuant("forall", str(var), str(dom), body, _pos(meta), _pos(dom))

    def exists_f(self, meta: Any, items: list[Any]) -> A.FQuant:
        var, dom, body = items
        return A.FQuant("exists", str(var), str(dom), body, _pos(meta), _pos(dom))

    def true_f(self, meta: Any, items: list[Any]) -> A.FConst:
        return A.FConst(True, _pos(meta))

    def false_f(self, meta: Any, items: list[Any]) -> A.FConst:
        return A.FConst(False, _pos(meta))

    def card(self, meta: Any, items: list[Any]) -> A.FCard:
        op, k, *args = items
        return A.FCard(str(op), _int(k), tuple(a for a in args if a is not None), _pos(meta))

    def before(self, meta: Any, items: list[Any]) -> A.FBefore:
        return A.FBefore(items[0], items[1], _pos(meta))

    def within(self, meta: Any, items: list[Any]) -> A.FWithin:
        return A.FWithin(items[0], items[1], items[2], _pos(meta))

    def path(self, meta: Any, items: list[Any]) -> A.FPath:
        src, rel, dst, hops, _word = items
        return A.FPath(src, str(rel), dst, _int(hops), _pos(meta), _pos(rel))

    def compare(self, meta: Any, items: list[Any]) -> A.FCompare:
        lhs, op, rhs = items
        return A.FCompare(self._arith(lhs), str(op), self._arith(rhs), _pos(op))

    def use_policy(self, meta: Any, items: list[Any]) -> A.FRisk | A.FAtom:
        provider, op, level = items
        if op is None:  # a plain `use(provider:X)` atom
            return A.FAtom(None, "use", (provider,), _pos(meta))
        return A.FRisk(str(op), str(level), provider, _pos(meta))

    def risk_cmp(self, meta: Any, items: list[Any]) -> A.FRisk:
        op, level = items
        return A.FRisk(str(op), str(level), None, _pos(meta))

    def atom(self, meta: Any, items: list[Any]) -> A.FAtom:
        kind, name, *args = items
        args = [a for a in args if a is not None]
        return A.FAtom(str(kind)[:-1] if kind is not None else None, str(name), tuple(args), _pos(name))

    def term(self, meta: Any, items: list[Any]) -> A.Term:
        kind, name = items
        return A.Term(str(kind)[:-1] if kind is not None else None, str(name), _pos(name))

    # ---- arithmetic
    def _arith(self, node: Any) -> A.Arith:
        if isinstance(node, A.Arith):
            return node
        return A.Arith((self._aterm(node),), node.pos)

    def _aterm(self, node: Any, sign: int = 1) -> A.ATerm:
        if isinstance(node, A.ATerm):
            return A.ATerm(node.coef * sign, node.ref, node.quantity, node.pos)
        if isinstance(node, A.ARef):
            return A.ATerm(Fraction(sign), node, None, node.pos)
        if isinstance(node, A.AQuantity):
            return A.ATerm(Fraction(sign), None, node, node.pos)
        raise TypeError(node)

    def arith(self, meta: Any, items: list[Any]) -> A.Arith:
        terms = [self._aterm(items[0])]
        for op, item in zip(items[1::2], items[2::2]):
            terms.append(self._aterm(item, -1 if str(op) == "-" else 1))
        return A.Arith(tuple(terms), _pos(meta))

    def scaled(self, meta: Any, items: list[Any]) -> A.ATerm:
        coef, ref = items
        return A.ATerm(coef, ref, None, _pos(meta))

    def neg(self, meta: Any, items: list[Any]) -> A.ATerm:
        return A.ATerm(Fraction(-1), items[0], None, _pos(meta))

    def quantity(self, meta: Any, items: list[Any]) -> A.AQuantity:
        value, unit = items
        if unit is not None and separated(unit[0]):  # 1_000: not the unit '_000'
            raise DSLSyntaxError(DIGIT_SEPARATORS, line=unit[1][0], column=unit[1][1])
        return A.AQuantity(value, unit[0] if unit is not None else None, _pos(meta))

    def number(self, meta: Any, items: list[Token]) -> Fraction:
        return _number(items[0])

    def metric_ref(self, meta: Any, items: list[Token]) -> A.ARef:
        return A.ARef("metric", str(items[0]), _pos(items[0]))

    def time_ref(self, meta: Any, items: list[Any]) -> A.ARef:
        return items[0]

    def event_ref(self, meta: Any, items: list[Token]) -> A.ARef:
        return A.ARef("event", str(items[0]), _pos(items[0]))


_FRIENDLY = {
    "NAME": "a name",
    "INT": "a whole number",
    "SIGNED_NUMBER": "a number",
    "STRING": 'a quoted path ("…")',
    "CMP": "a comparison (<=, <, >=, >, =, !=)",
    "RISK": "a risk level (low, medium, high, hard)",
    "CARD": "at_most/at_least/exactly",
    "SIG_KIND": "a declaration (hyp, observable, pred, var)",
    "ATOM_KIND": "hyp:/obs:/pred:",
    "TERM_KIND": "entity:/provider:",
    "ADD_OP": "'+' or '-'",
    "UNIT_OP": "'/' or '*'",
    "HOPS": "'hops'",
    "STATUS": "sat, unsat or unknown",
    "$END": "end of input",
}


def _expected_words(names: set[str]) -> list[str]:
    """The terminals ``names`` in words, words first ("a name"), then keywords in quotes; at
    most 14 and "…" (the list a syntax error shows and ``--json`` reports as ``expected``)."""
    parser = _parser()
    words = []
    for name in sorted(names):
        if name in _FRIENDLY:
            words.append(_FRIENDLY[name])
            continue
        try:
            pattern = parser.get_terminal(name).pattern
        except KeyError:
            words.append(name)
            continue
        if isinstance(pattern, lark.lexer.PatternStr):
            words.append(f"'{pattern.value}'")
        else:
            words.append(name.lower())
    # words first ("a name", "a number"), then keywords in quotes
    unique = sorted(set(words), key=lambda w: (w.startswith("'"), w))
    if len(unique) > 14:
        unique = unique[:14] + ["…"]
    return unique


def _source_line(text: str, line: int) -> str | None:
    lines = text.split("\n")  # lark counts lines by "\n" only
    return lines[line - 1] if 0 < line <= len(lines) else None


def _syntax_error(text: str, err: lark.exceptions.UnexpectedInput, filename: str | None) -> DSLSyntaxError:
    line = getattr(err, "line", None)
    column = getattr(err, "column", None)
    at_end = isinstance(err, lark.exceptions.UnexpectedEOF) or (
        isinstance(err, lark.exceptions.UnexpectedToken) and err.token.type == "$END"
    )
    expected: list[str] = []
    if at_end or line is None or line < 1:  # unexpected end of input: point past the last character
        lines = text.rstrip("\n").split("\n")
        line, column = len(lines), len(lines[-1]) + 1
    if isinstance(err, lark.exceptions.UnexpectedToken):
        token = err.token
        found = "end of input" if token.type == "$END" else f"'{token}'"
        expected = _expected_words(set(err.expected))
        message = f"unexpected {found}; expected {', '.join(expected)}"
        # weight 1_000, 1_000 ms: the error lies past a number with digit separators; say that, there
        before = (_source_line(text, line) or "")[: max(column - 1, 0)] if line is not None and column else ""
        separator = separator_in(before + str(token)[:2])
        if separator is not None:
            message, column, expected = DIGIT_SEPARATORS, separator + 1, []
    elif isinstance(err, lark.exceptions.UnexpectedCharacters):
        at = err.pos_in_stream
        char = text[at] if at is not None and at < len(text) else "?"
        allowed = set(err.allowed or ())
        message = f"unexpected character {char!r}"
        if allowed:
            expected = _expected_words(allowed)
            message += f"; expected {', '.join(expected)}"
    elif isinstance(err, lark.exceptions.UnexpectedEOF):
        expected = _expected_words(set(err.expected))
        message = f"unexpected end of input; expected {', '.join(expected)}"
    else:  # pragma: no cover - lark has no other UnexpectedInput subclasses
        message = str(err)
    return DSLSyntaxError(
        message, line=line, column=column, source_line=_source_line(text, line), filename=filename,
        expected=tuple(expected),
    )


def _too_deep(text: str, filename: str | None, tree: lark.Tree | None = None) -> DSLSyntaxError:
    """The error for a text nested deeper than the reader's stack.

    With the parse tree (lark's parser is iterative, only building the AST recurses) it points
    at the construct that is too deep: the innermost part of the deepest statement's formula
    (``hard h: not not … a`` on line 2 points at its ``a``, not at the file's first line), and
    says where that formula starts and how deep it is. Without it, at the deepest parenthesis.
    """
    found = _deepest_construct(tree) if tree is not None else None
    if found is None:
        line, column = _deepest(text)
        message = "the text is nested too deeply to read"
    else:
        (start_line, start_column), levels, (line, column) = found
        message = (f"this formula (line {start_line:,}, column {start_column:,}) is nested too deeply to read "
                   f"({levels:,} levels; the caret marks its innermost part)")
    return DSLSyntaxError(f"{message}; split it into several named clauses", line=line, column=column,
                          source_line=_source_line(text, line), filename=filename,
                          expected=("a formula nested less deeply",))


def _deepest_construct(tree: lark.Tree) -> tuple[A.Pos, int, A.Pos] | None:
    """For the statement of ``tree`` nested deepest: the position of its deepest child (the
    formula that is too deep), that child's depth in levels of the tree, and the position of its
    innermost node. Walks with an explicit stack: the tree is too deep to recurse over.

    ``None`` when no node carries a position.
    """
    best: tuple[int, A.Pos, A.Pos] | None = None  # (depth, start of the deep child, innermost place)
    for statement in tree.children:
        if not isinstance(statement, lark.Tree):
            continue
        for child in statement.children:
            if not isinstance(child, lark.Tree):
                continue
            depth, inner = _depth_and_innermost(child)
            start = _pos(child.meta)
            if start[0] and (best is None or depth > best[0]):
                best = (depth, start, inner)
    if best is None:
        return None
    return best[1], best[0], best[2]


def _depth_and_innermost(root: lark.Tree) -> tuple[int, A.Pos]:
    """The depth of ``root`` (1 for a tree of leaves) and the position of its deepest subtree."""
    deepest, where = 0, _pos(root.meta)
    stack: list[tuple[lark.Tree, int]] = [(root, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > deepest:
            place = _pos(node.meta)
            deepest, where = depth, place if place[0] else where
        stack.extend((c, depth + 1) for c in reversed(node.children) if isinstance(c, lark.Tree))
    return deepest, where


def _deepest(text: str) -> tuple[int, int]:
    """The (line, column) of the first parenthesis opened at the greatest depth of ``text``
    (comments and strings are not told apart: this only points at the place).

    >>> _deepest("hard: a\\nhard: (b or (c))")
    (2, 13)
    """
    depth = best = 0
    at = 0
    for offset, char in enumerate(text):
        if char == "(":
            depth += 1
            if depth > best:
                best, at = depth, offset
        elif char == ")":
            depth -= 1
    line = text.count("\n", 0, at) + 1
    return line, at - (text.rfind("\n", 0, at) + 1) + 1


def read(text: str, start: str, filename: str | None) -> Any:
    """``text`` read by lark from the rule ``start`` (``"start"``: a problem's statements;
    ``"clause_text"``: a clause and its weight), as the AST; a ``DSLSyntaxError`` otherwise."""
    # the parse allocates many small objects and frees none: the cyclic GC only walks them
    # (it made parsing super-linear, 174 -> 238 µs/clause from 1,000 to 10,000 clauses)
    deadline = current_deadline()
    try:
        with gc_paused():
            tree = parse_within(_parser(), text, deadline, "while reading the problem", start=start)
            deadline.check("while reading the problem")
            try:
                return _ToAST().transform(tree)
            except RecursionError:
                raise _too_deep(text, filename, tree) from None
            except lark.exceptions.VisitError as err:
                if isinstance(err.orig_exc, RecursionError):
                    raise _too_deep(text, filename, tree) from None
                raise
    except RecursionError:
        raise _too_deep(text, filename) from None
    except lark.exceptions.UnexpectedInput as err:
        raise _syntax_error(text, err, filename) from None
    except lark.exceptions.VisitError as err:
        inner = err.orig_exc
        if isinstance(inner, RecursionError):
            raise _too_deep(text, filename) from None
        if isinstance(inner, DSLSyntaxError):
            if inner.line is not None:
                inner.source_line = _source_line(text, inner.line)
            inner.filename = filename
            inner.args = (inner.render(),)
            raise inner from None
        raise
