"""A hand-written reader for the DSL that builds exactly the syntax tree lark builds, faster.

Why: lark (LALR, positions, then a Transformer) costs about 200 µs per clause, which was most of
``cda.solve``'s own time on problems of thousands of clauses. This module reads the same
language with one regular expression for the tokens and a recursive-descent parser, in about a
tenth of the time, and returns the same :mod:`~cda.encodings.ast` nodes with the same positions
(unnamed clauses take their stable name from their line, so positions are part of the result).

It is a *conservative* reader: lark stays the definition of the language. Whenever this reader
meets anything it cannot vouch for — a syntax error, a number lark's transformer would refuse,
nesting deeper than :data:`MAX_DEPTH`, a token lark's contextual lexer would split differently —
it raises :class:`Fallback` and :mod:`cda.encodings.parse` reads the whole text again with lark,
so error messages (line, column, caret, what was expected) are lark's, unchanged.

What "split differently" means: lark lexes by parser state. Where a name is not acceptable it
matches the keywords of that state as prefixes (``hard: a andb`` is read as ``a and b``), and
where a name is acceptable its priority-2 terminals still win over the name (``at_mostly(…)``
is read as ``at_most`` + ``ly``). This reader takes whole identifiers, and falls back wherever
such a split could happen, so it never accepts a text with a different tree. The rules below
were read off lark's parse table; tests/test_fastparse.py checks them against lark on every
example, on the benchmark's problems, on the parser tests' inputs and on fuzzed texts.

>>> [type(s).__name__ for s in read_problem("hyp a, b\\nhard: a or not b")]
['PredDecl', 'PredDecl', 'Hard']
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Callable
from fractions import Fraction
from itertools import accumulate, chain, islice, repeat
from operator import itemgetter
from typing import Any, NoReturn

from cda.contracts.deadline import Deadline, OutOfTime, current_deadline
from cda.encodings import ast as A
from cda.encodings.construct import fast_constructor
from cda.encodings.numbers import refusal, separated, whole_refusal

__all__ = ["Fallback", "MAX_DEPTH", "read_problem", "read_clause"]

#: deeper formulas go to lark. Lark refuses trees deeper than about 490 levels (its transformer
#: recurses); one level here is at most three of lark's (``a iff b or c and (…)``), so this bound
#: keeps the reader from accepting what lark refuses, with room for the caller's own stack.
MAX_DEPTH = 50


class Fallback(Exception):
    """This reader cannot vouch for the text: read it with lark."""


# the nodes a problem is mostly made of (the others are built with their own constructors)
_FAtom = fast_constructor(A.FAtom)
_FNot = fast_constructor(A.FNot)
_FNary = fast_constructor(A.FNary)
_FImplies = fast_constructor(A.FImplies)
_Term = fast_constructor(A.Term)
_Hard = fast_constructor(A.Hard)
_Soft = fast_constructor(A.Soft)
_Observe = fast_constructor(A.Observe)


# One token per match: optional inline whitespace, then a newline, a comment, a fol block, a
# name, an unsigned number (a sign is a token of its own: lark reads "-3" as one number or as
# minus and 3 depending on the state), an operator, a quoted path, or any other single character
# (which no token starts with: the text goes to lark). Only trailing whitespace is left unmatched.
_TOKEN = re.compile(
    r"([ \t\f\r]*)"
    r"(\n|#[^\n]*|fol[ \t\r\n]*\{[^{}]*\}|[A-Za-z_][A-Za-z0-9_]*"
    r"|(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?"
    r"|<=|>=|!=|->|[-+*/<>=(),:{}\[\]]|\"[^\"\n]*\"|[^ \t\f\r])"
)
#: the one-character tokens that are tokens ("." alone, "!" alone, '"' alone, "é" … are not)
_SINGLE = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_0123456789-+*/<>=(),:{}[]")
_FOL = "\x00fol"  # a fol block's token text; the block itself is kept aside
_END = "\x00end"  # end of input (twice, so one token of lookahead never runs off the list)

_DIGITS = frozenset("0123456789")
_NUMBER_START = frozenset("0123456789.")

# ---- what lark's lexer does with an identifier, by parser state (see the module docstring)
_SIG_KINDS = ("hyp", "observable", "pred", "var")  # SIG_KIND, priority 2
_CARDS = ("at_most", "at_least", "exactly")  # CARD, priority 2
_RISKS = frozenset(("low", "medium", "high", "hard"))
_HOPS = frozenset(("hop", "hops"))
_CMPS = frozenset(("<=", ">=", "!=", "<", ">", "="))
_ATOM_KINDS = frozenset(("hyp", "obs", "pred"))  # "hyp:" … (ATOM_KIND), only with the colon attached
_TERM_KINDS = frozenset(("entity", "provider"))  # "entity:" … (TERM_KIND)
#: keywords of the formula-start state: there any other identifier is a name
_FORMULA_WORDS = frozenset(
    ("not", "forall", "exists", "true", "false", "holds", "prefer", "xor", "before", "within", "value", "time",
     "use", "risk")
)
#: keywords of the state after a number, where a unit name may follow
_AFTER_NUMBER = frozenset(
    ("and", "or", "iff", "implies", "of", "weight", "domain", "event", "fact", "goal", "hard", "ken", "metric",
     "observe", "soft", "expect")
)
#: keywords of the state after ``expect`` (where a name may also stand: ``expect e1: …``)
_EXPECT_WORDS = frozenset(("status", "best", "cost", "in_every_core", "minimal_explanations"))
_STATUSES = frozenset(("sat", "unsat", "unknown"))
#: identifiers that are not a plain atom at the start of a formula (keywords, prefixes)
_NOT_PLAIN = _FORMULA_WORDS | _ATOM_KINDS


def _is_name(token: str) -> bool:
    return token.isidentifier()  # tokens are ASCII; fol blocks and the end marker start with NUL


#: the tokens of one line when no fol block can span lines: ``_TOKEN`` less the newline and the
#: fol block (without a fol block, no token of ``_TOKEN`` crosses a newline, so reading the text
#: line by line gives the same tokens at the same places)
_LINE_TOKEN = re.compile(
    r"([ \t\f\r]*)"
    r"([A-Za-z_][A-Za-z0-9_]*|[():,]|#[^\n]*"  # the commonest first (no two alternatives start alike)
    r"|(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?"
    r"|<=|>=|!=|->|[-+*/<>=(),:{}\[\]]|\"[^\"\n]*\"|[^ \t\f\r])"
)
#: where a fol block might start (also inside a longer name: then the slower whole-text path runs)
_SECOND = itemgetter(1)
_FOL_START = re.compile(r"fol[ \t\r\n]*\{")


def _tokenize(
    text: str, deadline: Deadline, lines: bool = False
) -> tuple[list[str], list[A.Pos], dict[int, str], dict[int, int], dict[int, A.Hard]]:
    """Token texts, their (line, column) as lark counts them, the fol blocks by index, where
    each line's tokens end, by the index of its first token (for :meth:`_Reader.hard_line`), and
    the statements already built, by the index of the :data:`_MADE` token standing for each.

    Why line by line: a problem is mostly short lines of a few tokens, and Python work per token
    (a loop turn, a tuple, a clock tick) was most of reading it. Here the per-token work is done
    in C (``findall``, ``accumulate`` over the pieces' lengths for the columns, ``zip`` for the
    positions); Python turns once per line. ``lines`` (a whole problem): a ``hard`` line whose
    skeleton is compiled (:func:`_compile_skeleton`) is not tokenized at all; its statement is
    built and one :data:`_MADE` token stands for it. A text with a fol block (which spans lines)
    takes :func:`_tokenize_whole`.
    """
    if _FOL_START.search(text) is not None:
        return _tokenize_whole(text, deadline)
    texts: list[str] = []
    poss: list[A.Pos] = []
    spans: dict[int, int] = {}
    made: dict[int, A.Hard] = {}
    findall = _LINE_TOKEN.findall
    skeletons = _SKELETONS if lines else None
    for number, line in enumerate(text.split("\n"), 1):
        if deadline.tick():
            raise OutOfTime(f"while reading the problem (at line {number:,})")
        if skeletons is not None and len(line) <= _SKELETON_CHARS and line.startswith("hard"):
            parts = _PLAIN_SPLIT(line)
            key = tuple(parts[::2])
            make = skeletons.get(key, _UNSEEN)
            if make is _UNSEEN:
                make = None
                if len(skeletons) < _MAX_SKELETONS:
                    make = skeletons[key] = _compile_skeleton(line, number, parts, deadline)
            if make is not None:
                node = make(parts, number)  # type: ignore[operator]
                made[len(texts)] = node
                texts.append(_MADE)
                poss.append(node.pos)
                continue
        pairs = findall(line)  # (whitespace before, token)
        if not pairs:
            continue
        if pairs[-1][1][0] == "#":  # a comment runs to the end of its line
            del pairs[-1]
        first = len(texts)
        texts += map(_SECOND, pairs)
        spans[first] = len(texts)
        # a token's column: 1 + the lengths of every piece before it, its own whitespace included
        poss += zip(repeat(number), islice(accumulate(map(len, chain.from_iterable(pairs)), initial=1), 1, None, 2))
    return _finish(texts, poss, {}, spans, made)


def _tokenize_whole(
    text: str, deadline: Deadline
) -> tuple[list[str], list[A.Pos], dict[int, str], dict[int, int], dict[int, A.Hard]]:
    """:func:`_tokenize` over the whole text at once, token by token: fol blocks span lines (no
    line ends are given: statements are read by the general path)."""
    texts: list[str] = []
    poss: list[A.Pos] = []
    blocks: dict[int, str] = {}
    line = 1
    base = -1  # offset of the last "\n": column = offset - base
    off = 0
    for ws, tok in _TOKEN.findall(text):
        if deadline.tick():
            raise OutOfTime(f"while reading the problem (at line {line:,})")
        off += len(ws)
        first = tok[0]
        if first == "\n":
            line += 1
            base = off
            off += 1
        elif first == "#":
            off += len(tok)
        elif first == "f" and tok[-1] == "}":  # a fol block (no identifier ends with a brace)
            blocks[len(texts)] = tok
            texts.append(_FOL)
            poss.append((line, off - base))
            newlines = tok.count("\n")
            if newlines:
                line += newlines
                base = off + tok.rindex("\n")
            off += len(tok)
        else:
            texts.append(tok)
            poss.append((line, off - base))
            off += len(tok)
    return _finish(texts, poss, blocks, {}, {})


def _finish(
    texts: list[str], poss: list[A.Pos], blocks: dict[int, str], spans: dict[int, int], made: dict[int, A.Hard]
) -> tuple[list[str], list[A.Pos], dict[int, str], dict[int, int], dict[int, A.Hard]]:
    """The token list checked (a character no token starts with goes to lark) and ended."""
    for tok in set(texts):  # checked once per distinct token, not once per token
        if len(tok) == 1 and tok not in _SINGLE:
            raise Fallback(f"no token starts with {tok!r}")
    texts += (_END, _END)
    poss += ((0, 0), (0, 0))
    return texts, poss, blocks, spans, made




def _number(text: str) -> Fraction:
    if refusal(text):
        raise Fallback("lark's transformer refuses this number")
    return Fraction(text)


# ---- compiled shapes: a statement read once, then built without reading (see _Reader.hard_line)
#: the tokens a compiled shape may hold besides plain names: where the reader's decisions depend
#: on the tokens' kinds alone (no glued colon, sign or number, no lookahead past the line)
_SHAPE_WORDS = {w: w for w in ("hard", ":", "not", "and", "or", "implies", "iff", "(", ")")}
_NAME = "\x00name"  # a plain name's place in a shape
_UNSEEN = object()
#: the tokens a statement may be followed by for its line to be the whole statement: each starts
#: a statement, and none continues a formula
_STATEMENT_WORDS = frozenset(
    ("hard", "soft", *_SIG_KINDS, "observe", "fact", "domain", "event", "metric", "goal", "expect", "ken", _FOL, _END,
     "\x00made")  # _MADE (defined with the skeletons below)
)
_SHAPE_TOKENS = 64  # longer statements are read (the reading's own cost dwarfs the calls saved)
_MAX_SHAPES = 1024  # per process; further shapes are read
#: shape -> the function that builds a statement of that shape from its tokens and positions,
#: or None where the shape cannot be compiled. Process-wide, as ``re`` keeps its patterns.
_SHAPES: dict[tuple[str, ...], Callable[[list[str], list[A.Pos]], A.Hard] | None] = {}


_OTHER = "\x00other"  # a token a shape may not hold: its statement is read


def _shape_of(token: str) -> str:
    """A token's place in a shape: itself for the words of :data:`_SHAPE_WORDS`, :data:`_NAME`
    for a name the reader reads as a plain atom whatever its text (the fast path of
    :meth:`_Reader.unary`: an identifier, no keyword, no cardinality prefix), else :data:`_OTHER`."""
    word = _SHAPE_WORDS.get(token)
    if word is not None:
        return word
    if token.isidentifier() and token not in _NOT_PLAIN and not token.startswith(_CARDS):
        return _NAME
    return _OTHER


def _compile_shape(
    node: A.Hard, tokens: list[str], poss: list[A.Pos], shape: tuple[str, ...]
) -> Callable[[list[str], list[A.Pos]], A.Hard] | None:
    """A function building ``node`` from its line's tokens and positions, so that a statement
    of the same shape (the same tokens but for plain names) is built without being read.

    Why: the recursive descent makes several calls per atom; the statements of a large problem
    come in a few shapes (bench_core's family: about twenty). Exact by construction: each name
    and position of ``node`` is taken from the token it was read from (found by its position,
    unique on a line), the reader's decisions on these tokens do not depend on a plain name's
    text (see :data:`_SHAPE_WORDS`), and the function is checked to rebuild ``node`` itself.
    ``None`` when ``node`` holds anything else (then its shape is always read).

    Each formula it builds carries ``shape`` under :data:`~cda.encodings.ast.SHAPE_KEY` (in its
    ``__dict__``, not a field: equality, hashing, ``repr`` and ``replace`` ignore it), which lets
    the grounder ground every formula of one shape with one compiled function.
    """
    try:
        body, hard = _maker_source(node, tokens, poss, "t[{}]".format, "p[{}]".format)
        make: Callable[[list[str], list[A.Pos]], A.Hard] = _define("t, p", [], body, hard, shape)
        return make if make(tokens, poss) == node else None
    except (LookupError, SyntaxError, RecursionError, MemoryError):
        return None


def _maker_source(
    node: A.Hard, tokens: list[str], poss: list[A.Pos], text_of: Callable[[int], str], pos_of: Callable[[int], str]
) -> tuple[str, str]:
    """The source of a maker of ``node`` (read from ``tokens`` at ``poss``, one line): the
    expression of its formula and that of the statement around ``formula``, with token ``k``'s
    text and position spelled ``text_of(k)`` and ``pos_of(k)``. ``LookupError`` when ``node``
    holds anything but hard, plain atoms, not, and/or/iff and implies, or a name that is not
    its token's text."""
    where = {pos: k for k, pos in enumerate(poss)}

    def at(pos: A.Pos) -> int:
        k = where.get(pos)
        if k is None:
            raise LookupError(pos)
        return k

    def source(n: object) -> str:
        kind = type(n)
        if kind is A.FAtom and n.kind is None and n.args == ():  # type: ignore[attr-defined]
            k = at(n.pos)  # type: ignore[attr-defined]
            if tokens[k] != n.pred:  # type: ignore[attr-defined]
                raise LookupError(n)
            return f"atom(None, {text_of(k)}, (), {pos_of(k)})"
        if kind is A.FNot:
            return f"not_({source(n.arg)}, {pos_of(at(n.pos))})"  # type: ignore[attr-defined]
        if kind is A.FNary and n.op in ("and", "or", "iff"):  # type: ignore[attr-defined]
            args = "".join(f"{source(a)}, " for a in n.args)  # type: ignore[attr-defined]
            return f"nary({n.op!r}, ({args}), {pos_of(at(n.pos))})"  # type: ignore[attr-defined]
        if kind is A.FImplies:
            return f"implies({source(n.lhs)}, {source(n.rhs)}, {pos_of(at(n.pos))})"  # type: ignore[attr-defined]
        raise LookupError(n)

    if type(node) is not A.Hard:
        raise LookupError(node)
    name = "None"
    if node.name is not None:
        k = at(node.name_pos)
        if tokens[k] != node.name:
            raise LookupError(node.name)
        name = text_of(k)
    body = source(node.formula)
    return body, f"hard({name}, formula, {pos_of(at(node.pos))}, {pos_of(at(node.name_pos))})"


def _define(params: str, prelude: list[str], body: str, hard: str, shape: tuple[str, ...]) -> Any:
    """``make(params)``: the prelude's lines, then the formula ``body`` marked with its reader's
    ``shape`` (for the grounder), then the statement ``hard`` around it."""
    code = "".join(
        [f"def make({params}):\n", *(f"    {line}\n" for line in prelude), f"    formula = {body}\n",
         f"    formula.__dict__[{A.SHAPE_KEY!r}] = shape\n", f"    return {hard}\n"]
    )
    namespace: dict[str, Any] = {
        "atom": _FAtom, "not_": _FNot, "nary": _FNary, "implies": _FImplies, "hard": _Hard, "shape": shape,
    }
    exec(code, namespace)  # as fast_constructor makes its constructors
    return namespace["make"]


# ---- skeletons: a whole ``hard`` line built from its names, without tokens (see _tokenize)
#: a plain name on a line: an identifier that is no keyword of a statement's formula, no
#: cardinality word's prefix, no part of a longer word; ``split`` gives the line's literal parts
#: (its skeleton) and its names in turn
_SKELETON_KEYWORDS = sorted(_NOT_PLAIN | {"hard", "not", "and", "or", "implies", "iff"}, key=len, reverse=True)
_PLAIN_SPLIT = re.compile(
    r"\b(?=[A-Za-z_])(?!(?:" + "|".join(_SKELETON_KEYWORDS) + r")\b)(?!" + "|".join(_CARDS) + r")([A-Za-z_][A-Za-z0-9_]*)",
    re.ASCII,  # \b: between [A-Za-z0-9_] and anything else (a word's start: 13% cheaper than a look-behind)
).split
_SKELETON_CHARS = 400  # longer lines are tokenized (a skeleton is kept as a key: bounded memory)
_MAX_SKELETONS = 1024  # per process; further skeletons are tokenized
#: skeleton -> the function that builds a ``hard`` line of that skeleton from the line's split
#: parts and its number, or None where the skeleton cannot be compiled. Process-wide, as _SHAPES.
_SKELETONS: dict[tuple[str, ...], Callable[[list[str], int], A.Hard] | None] = {}
_MADE = "\x00made"  # a token standing for a line built by its skeleton's maker


def _compile_skeleton(line: str, number: int, parts: list[str], deadline: Deadline) -> Callable[[list[str], int], A.Hard] | None:
    """A function building the ``hard`` statement that fills ``line`` from the line's parts
    (``_PLAIN_SPLIT(line)``: literal text and names in turn) and its number, so that a line of
    the same skeleton (the same literal text, any names) is neither tokenized nor read.

    Why: tokenizing a line (a token and a position per piece) and finding its shape was half of
    reading a large problem; a line's skeleton is found by one ``split``. Exact by construction:
    a name of the skeleton is a whole token whatever its text (the characters around it are no
    part of an identifier, and no token but a quoted string or a comment could take it in: a
    line where one does is refused below), so every line of one skeleton has the same tokens
    but for the names, in the same places but for the names' lengths; the tokens are those of a
    compiled shape (:func:`_compile_shape`: the reader's decisions do not depend on the names);
    each position is the column the tokenizer gives (1 + the characters before the token); and
    the maker is checked to rebuild the statement the reader reads from this line. ``None`` when
    the line holds anything else; it is then tokenized and read, as every line once was.
    Whether the statement ends with its line is the reader's to check (the next token).
    """
    try:
        if not line.isascii():
            return None
        pairs = _LINE_TOKEN.findall(line)
        tokens = [tok for _, tok in pairs]
        if not tokens or tokens[0] != "hard" or len(tokens) > _SHAPE_TOKENS or tokens[-1][0] == "#":
            return None  # (not a statement "hard"; too long; a comment: its words are no names)
        shape = tuple(map(_shape_of, tokens))
        if _OTHER in shape:  # ASCII, so also no character that no token starts with
            return None
        columns = list(islice(accumulate(map(len, chain.from_iterable(pairs)), initial=1), 1, None, 2))
        poss = [(number, column) for column in columns]
        reader = _Reader.__new__(_Reader)
        reader.t, reader.p = [*tokens, _END, _END], [*poss, (0, 0), (0, 0)]
        reader.blocks, reader.spans, reader.made, reader.places = {}, {}, {}, {}
        reader.i, reader.depth, reader.deadline = 0, 0, deadline
        node = reader.hard()
        if reader.i != len(tokens):
            return None
        starts = list(accumulate(map(len, parts), initial=0))  # each part's offset in the line
        name_at = {starts[j]: j // 2 for j in range(1, len(parts), 2)}
        text: list[str] = []
        pos: list[str] = []
        claimed: set[int] = set()
        for tok, column in zip(tokens, columns):
            offset = column - 1
            m = name_at.get(offset)
            if m is not None:  # a name: the token is the whole part
                if parts[2 * m + 1] != tok:
                    return None
                claimed.add(m)
                text.append(f"n{m}")
                pos.append(f"(line, c{m})")
                continue
            j = bisect_right(starts, offset) - 1  # the part holding the token's first character
            if j % 2 or offset + len(tok) > starts[j + 1]:  # inside a name, or reaching into one
                return None
            text.append(repr(tok))
            d = offset - starts[j]
            pos.append(f"(line, {d + 1})" if j == 0 else f"(line, e{j // 2 - 1} + {d})")
        names = len(parts) // 2
        if len(claimed) != names:
            return None
        # c{m}: name m's column; e{m}: the column just past it (the literal parts' lengths are the skeleton's)
        prelude = [", ".join("_" if j % 2 == 0 else f"n{j // 2}" for j in range(len(parts))) + ", = parts"]
        for m in range(names):
            before = f"e{m - 1} + " if m else ""
            prelude += [f"c{m} = {before}{len(parts[2 * m]) + (0 if m else 1)}", f"e{m} = c{m} + len(n{m})"]
        body, hard = _maker_source(node, tokens, poss, text.__getitem__, pos.__getitem__)
        make: Callable[[list[str], int], A.Hard] = _define("parts, line", prelude, body, hard, shape)
        return make if make(parts, number) == node else None
    except (Fallback, LookupError, SyntaxError, RecursionError, MemoryError, ValueError):
        return None


class _Reader:
    """Recursive descent over the token list; every method leaves ``i`` past what it read.

    Formula methods return ``(node, start)``: ``start`` is the formula's first token, an
    opening parenthesis or ``holds``/``prefer`` included. Lark gives that position to an
    enclosing ``and``/``or``/``iff``/``implies`` (its "container" position), while the inner
    node keeps its own: in ``(a and b) or c`` the ``or`` is at ``(``, the ``and`` at ``a``.
    """

    __slots__ = ("t", "p", "blocks", "spans", "made", "places", "i", "depth", "deadline")

    def __init__(self, text: str, lines: bool = False) -> None:
        # the run's budget covers reading too (a file of millions of terms takes seconds)
        self.deadline = current_deadline()
        self.t, self.p, self.blocks, self.spans, self.made = _tokenize(text, self.deadline, lines)
        self.places: dict[str, str] = {}  # see hard_line
        self.i = 0
        self.depth = 0

    # ---- helpers
    @staticmethod
    def fail(why: str = "") -> NoReturn:
        raise Fallback(why)

    def expect(self, token: str) -> None:
        if self.t[self.i] != token:
            self.fail(f"expected {token!r}")
        self.i += 1

    def name(self) -> tuple[str, A.Pos]:
        """A NAME where lark's state accepts only names: any identifier, keywords included."""
        i = self.i
        tok = self.t[i]
        if not _is_name(tok):
            self.fail("expected a name")
        self.i = i + 1
        return tok, self.p[i]

    def glued(self, i: int) -> bool:
        """Whether token ``i + 1`` follows token ``i`` with nothing between."""
        (line, column), (next_line, next_column) = self.p[i], self.p[i + 1]
        return next_line == line and next_column == column + len(self.t[i])

    def glued_colon(self, i: int) -> bool:
        """Whether token ``i`` is followed by ':' with nothing between (``hyp:``, ``entity:``)."""
        return self.t[i + 1] == ":" and self.glued(i)

    def prefixed(self, word: str) -> None:
        """``metric:`` or ``event:``: one terminal, the colon attached."""
        i = self.i
        if self.t[i] != word or not self.glued_colon(i):
            self.fail(f"expected {word}:")
        self.i = i + 2

    def int_(self) -> tuple[int, A.Pos]:
        i = self.i
        tok = self.t[i]
        if not tok or not set(tok) <= _DIGITS:
            self.fail("expected a whole number")
        if whole_refusal(tok):
            self.fail("lark's transformer refuses this number")
        self.i = i + 1
        return int(tok), self.p[i]

    def number(self) -> tuple[Fraction, A.Pos]:
        """SIGNED_NUMBER: a minus sign glued to the digits belongs to the number."""
        i = self.i
        t = self.t
        tok = t[i]
        if tok == "-" and t[i + 1][:1] in _NUMBER_START and self.glued(i):
            self.i = i + 2
            return _number("-" + t[i + 1]), self.p[i]
        if tok[:1] in _NUMBER_START:
            self.i = i + 1
            return _number(tok), self.p[i]
        self.fail("expected a number")

    def at_number(self) -> bool:
        i = self.i
        tok = self.t[i]
        if tok[:1] in _NUMBER_START:
            return True
        return tok == "-" and self.t[i + 1][:1] in _NUMBER_START and self.glued(i)

    # ---- statements
    def problem(self) -> list[A.Statement]:
        out: list[A.Statement] = []
        t = self.t
        spans = self.spans
        while True:
            if self.deadline.tick():
                raise OutOfTime(f"while reading the problem (at line {self.p[self.i][0]:,})")
            tok = t[self.i]
            if tok is _MADE:  # a line built from its skeleton: the whole statement, if the next token starts one
                i = self.i
                if t[i + 1] not in _STATEMENT_WORDS:
                    raise _Continued()
                out.append(self.made[i])
                self.i = i + 1
            elif tok == "hard":
                end = spans.get(self.i)
                out.append(self.hard() if end is None else self.hard_line(end))
            elif tok == "soft":
                out.append(self.soft())
            elif tok in _SIG_KINDS:
                out.extend(self.sig_decl())
            elif tok == "observe":
                out.append(self.observe())
            elif tok == "fact":
                pos = self.p[self.i]
                self.i += 1
                out.append(A.Fact(self.atom(formula_start=False)[0], pos))
            elif tok == "domain":
                out.append(self.domain_decl())
            elif tok == "event":
                self.i += 1
                name, pos = self.name()
                out.append(A.EventDecl(name, pos))
                while t[self.i] == ",":
                    self.i += 1
                    name, pos = self.name()
                    out.append(A.EventDecl(name, pos))
            elif tok == "metric":
                self.i += 1
                name, pos = self.name()
                self.expect(":")
                unit, unit_pos = self.unit()
                out.append(A.MetricDecl(name, unit, pos, unit_pos=unit_pos))
            elif tok == "goal":
                out.append(self.goal())
            elif tok == "expect":
                out.append(self.expectation())
            elif tok == "ken":
                self.i += 1
                path = t[self.i]
                if path[:1] != '"':
                    self.fail("expected a quoted path")
                out.append(A.KenLoad(path[1:-1], self.p[self.i]))
                self.i += 1
            elif tok == _FOL:
                out.append(A.FolBlock(self.blocks[self.i], self.p[self.i]))
                self.i += 1
            elif tok == _END:
                return out
            else:  # not a statement keyword (lark might split it: "hypa" is "hyp a")
                self.fail("expected a statement")

    def hard(self) -> A.Hard:
        pos = self.p[self.i]
        self.i += 1
        name: str | None = None
        name_pos = pos
        if _is_name(self.t[self.i]):  # lark's state here: a name or ':'
            name, name_pos = self.name()
        self.expect(":")
        formula, _ = self.formula()
        return _Hard(name, formula, pos, name_pos)

    def hard_line(self, end: int) -> A.Hard:
        """A ``hard`` statement that fills its line (tokens ``i`` to ``end``), built by the
        compiled reader of its shape when one is known (see :func:`_compile_shape`), else read by
        :meth:`hard` (and its shape compiled, when it qualifies)."""
        i = self.i
        t = self.t
        tokens = t[i:end]
        places = self.places  # each token's place in a shape, classified once per reading
        shape = tuple(map(places.get, tokens))
        if None in shape:
            for tok in tokens:
                if tok not in places:
                    places[tok] = _shape_of(tok)
            shape = tuple(map(places.__getitem__, tokens))
        make = _SHAPES.get(shape, _UNSEEN)  # type: ignore[arg-type]
        if make is None or _OTHER in shape or len(tokens) > _SHAPE_TOKENS or t[end] not in _STATEMENT_WORDS:
            return self.hard()
        if callable(make):
            self.i = end
            return make(tokens, self.p[i:end])
        node = self.hard()
        if self.i == end and len(_SHAPES) < _MAX_SHAPES:
            _SHAPES[shape] = _compile_shape(node, tokens, self.p[i:end], shape)  # type: ignore[index,arg-type]
        return node

    def soft(self) -> A.Soft:
        pos = self.p[self.i]
        self.i += 1
        t = self.t
        name: str | None = None
        name_pos = pos
        weight: tuple[Fraction, A.Pos] | None = None
        if t[self.i] != "weight" and _is_name(t[self.i]):  # here "weight" is the keyword
            name, name_pos = self.name()
        if t[self.i] == "weight":
            weight = self.weight()
        self.expect(":")
        formula, _ = self.formula()
        if t[self.i] == "weight":
            if weight is not None:
                self.fail("two weights: lark's transformer says so")
            weight = self.weight()
        return _Soft(
            name,
            weight[0] if weight is not None else None,
            formula,
            pos,
            name_pos,
            weight[1] if weight is not None else pos,
        )

    def weight(self) -> tuple[Fraction, A.Pos]:
        pos = self.p[self.i]
        self.i += 1
        value, _ = self.number()
        return value, pos

    def observe(self) -> A.Observe:
        pos = self.p[self.i]
        self.i += 1
        i = self.i
        t = self.t
        tok = t[i]
        name: str | None = None
        name_pos = pos
        # the formula-start state: `observe o: …` names the observation unless the identifier is
        # a keyword there, a cardinality word, or a prefix with its colon (`observe obs: x`)
        if (
            t[i + 1] == ":"
            and _is_name(tok)
            and tok not in _FORMULA_WORDS
            and not tok.startswith(_CARDS)
            and not (tok in _ATOM_KINDS and self.glued_colon(i))
        ):
            name, name_pos = tok, self.p[i]
            self.i = i + 2
        formula, _ = self.formula()
        return _Observe(name, formula, pos, name_pos)

    def sig_decl(self) -> list[A.PredDecl]:
        kind = self.t[self.i]
        self.i += 1
        out = [self.signature(kind)]
        while self.t[self.i] == ",":
            self.i += 1
            out.append(self.signature(kind))
        return out

    def signature(self, kind: str) -> A.PredDecl:
        name, pos = self.name()
        domains: list[str] = []
        domain_pos: list[A.Pos] = []
        if self.t[self.i] == "(":
            self.i += 1
            while True:
                dom, dpos = self.name()
                domains.append(dom)
                domain_pos.append(dpos)
                if self.t[self.i] != ",":
                    break
                self.i += 1
            self.expect(")")
        return A.PredDecl(kind, name, tuple(domains), pos, tuple(domain_pos))

    def domain_decl(self) -> A.DomainDecl:
        self.i += 1
        name, pos = self.name()
        self.expect("=")
        self.expect("{")
        values: list[str] = []
        if self.t[self.i] != "}":
            values.append(self.name()[0])
            while self.t[self.i] == ",":
                self.i += 1
                values.append(self.name()[0])
        self.expect("}")
        return A.DomainDecl(name, tuple(values), pos)

    def unit(self) -> tuple[str, A.Pos]:
        """NAME (UNIT_OP NAME)*, joined without spaces as lark's transformer does."""
        first, pos = self.name()
        parts = [first]
        while self.t[self.i] in ("/", "*"):
            parts.append(self.t[self.i])
            self.i += 1
            parts.append(self.name()[0])
        return "".join(parts), pos

    def goal(self) -> A.Statement:
        pos = self.p[self.i]
        self.i += 1
        t = self.t
        kind = t[self.i]
        self.i += 1
        if kind == "best_explanation":
            if t[self.i] == "top":
                self.i += 1
                top, top_pos = self.int_()
                return A.GoalBest(top, top_pos)
            return A.GoalBest(None, pos)
        if kind == "minimal_explanations":
            mode = t[self.i]
            if mode == "all":
                self.i += 1
                return A.GoalMinimal("all", None, self.p[self.i - 1])
            if mode == "top":
                self.i += 1
                k, k_pos = self.int_()
                return A.GoalMinimal("top", k, k_pos)
            if mode == "min_cardinality":
                self.i += 1
                return A.GoalMinimal("min_cardinality", None, self.p[self.i - 1])
            return A.GoalMinimal("all", None, pos)
        if kind == "prove" or kind == "disprove":
            formula, _ = self.formula()
            return A.GoalClaim("prove" if kind == "prove" else "disprove", formula, pos)
        self.fail("expected a goal")

    def expectation(self) -> A.Expect:
        """``expect [name:] status S | best [{atoms}, …] | cost CMP n | in_every_core NAME |
        minimal_explanations CMP k``; any other spelling goes to lark."""
        pos = self.p[self.i]
        self.i += 1
        t = self.t
        name: str | None = None
        name_pos = pos
        if t[self.i + 1] == ":" and _is_name(t[self.i]) and t[self.i] not in _EXPECT_WORDS:
            name, name_pos = t[self.i], self.p[self.i]
            self.i += 2
        kind = t[self.i]
        kind_pos = self.p[self.i]
        self.i += 1
        if kind == "status":
            value = t[self.i]
            if value not in _STATUSES:
                self.fail("expected sat, unsat or unknown")
            self.i += 1
            return A.Expect(name, "status", None, value, (), pos, name_pos, self.p[self.i - 1])
        if kind == "best":
            self.expect("[")
            sets: list[tuple[A.FAtom, ...]] = []
            if t[self.i] != "]":
                sets.append(self.hyp_set())
                while t[self.i] == ",":
                    self.i += 1
                    sets.append(self.hyp_set())
            self.expect("]")
            return A.Expect(name, "best", None, None, tuple(sets), pos, name_pos, kind_pos)
        if kind == "cost" or kind == "minimal_explanations":
            op = t[self.i]
            if op not in _CMPS:
                self.fail("expected a comparison")
            self.i += 1
            if kind == "cost":
                number, _ = self.number()
                return A.Expect(name, "cost", op, number, (), pos, name_pos, kind_pos)
            k, k_pos = self.int_()
            return A.Expect(name, "minimal", op, k, (), pos, name_pos, k_pos)
        if kind == "in_every_core":
            clause, clause_pos = self.name()
            return A.Expect(name, "core", None, clause, (), pos, name_pos, clause_pos)
        self.fail("expected an expectation")

    def hyp_set(self) -> tuple[A.FAtom, ...]:
        self.expect("{")
        atoms: list[A.FAtom] = []
        if self.t[self.i] != "}":
            atoms.append(self.atom(formula_start=False)[0])
            while self.t[self.i] == ",":
                self.i += 1
                atoms.append(self.atom(formula_start=False)[0])
        self.expect("}")
        return tuple(atoms)

    # ---- formulas, loosest binding first: iff, implies (to the right), or, and, not
    def formula(self) -> tuple[A.Formula, A.Pos]:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            self.fail("nested deeper than the fast reader goes")
        node, start = self.implies()
        if self.t[self.i] == "iff":
            args = [node]
            while self.t[self.i] == "iff":
                self.i += 1
                args.append(self.implies()[0])
            node = _FNary("iff", tuple(args), start)
        self.depth -= 1
        return node, start

    def implies(self) -> tuple[A.Formula, A.Pos]:
        node, start = self.or_and()
        if self.t[self.i] != "implies":
            return node, start
        chain = [(node, start)]  # right-associative: a implies (b implies c)
        while self.t[self.i] == "implies":
            self.i += 1
            self.depth += 1  # each link is one more level of lark's tree
            if self.depth > MAX_DEPTH:
                self.fail("nested deeper than the fast reader goes")
            chain.append(self.or_and())
        self.depth -= len(chain) - 1
        out = chain[-1][0]
        for lhs, lhs_start in reversed(chain[:-1]):
            out = _FImplies(lhs, out, lhs_start)
        return out, start

    def or_and(self) -> tuple[A.Formula, A.Pos]:
        """Both the ``or`` and the ``and`` level in one loop (one call per operand, not two)."""
        t = self.t
        node, start = self.unary()
        op = t[self.i]
        if op != "and" and op != "or":
            return node, start
        disjuncts: list[A.Formula] = []
        group = [node]  # the conjunction being read
        group_start = start
        deadline = self.deadline
        while True:
            if deadline.tick():
                raise OutOfTime(f"while reading the problem (at line {self.p[self.i][0]:,})")
            if op == "and":
                self.i += 1
                group.append(self.unary()[0])
            elif op == "or":
                disjuncts.append(group[0] if len(group) == 1 else _FNary("and", tuple(group), group_start))
                self.i += 1
                node, group_start = self.unary()
                group = [node]
            else:
                break
            op = t[self.i]
        last = group[0] if len(group) == 1 else _FNary("and", tuple(group), group_start)
        if not disjuncts:
            return last, start
        disjuncts.append(last)
        return _FNary("or", tuple(disjuncts), start), start

    def unary(self) -> tuple[A.Formula, A.Pos]:
        i = self.i
        t = self.t
        tok = t[i]
        if tok not in _NOT_PLAIN and t[i + 1] != "(" and tok.isidentifier() and not tok.startswith(_CARDS):
            pos = self.p[i]  # the commonest formula: an atom without arguments or prefix
            self.i = i + 1
            return _FAtom(None, tok, (), pos), pos
        if tok == "not":
            pos = self.p[i]
            self.i = i + 1
            self.depth += 1
            if self.depth > MAX_DEPTH:
                self.fail("nested deeper than the fast reader goes")
            arg, _ = self.unary()
            self.depth -= 1
            return _FNot(arg, pos), pos
        if tok == "forall" or (tok == "exists" and self.t[i + 1] != "path"):
            pos = self.p[i]
            self.i = i + 1
            var, _ = self.name()
            self.expect("in")
            domain, domain_pos = self.name()
            self.expect(":")
            body, _ = self.formula()
            return A.FQuant(tok, var, domain, body, pos, domain_pos), pos
        return self.primary()

    def primary(self) -> tuple[A.Formula, A.Pos]:
        i = self.i
        t = self.t
        tok = t[i]
        if tok == "(":
            self.i = i + 1
            node, _ = self.formula()
            self.expect(")")
            return node, self.p[i]
        if tok in _FORMULA_WORDS:
            pos = self.p[i]
            if tok == "true" or tok == "false":
                self.i = i + 1
                return A.FConst(tok == "true", pos), pos
            if tok == "holds" or tok == "prefer":
                self.i = i + 1
                self.expect("(")
                node, _ = self.formula()
                self.expect(")")
                return node, pos
            if tok == "xor":
                self.i = i + 1
                self.expect("(")
                args = [self.formula()[0]]
                while t[self.i] == ",":
                    self.i += 1
                    args.append(self.formula()[0])
                self.expect(")")
                if len(args) < 2:
                    self.fail("xor takes two formulas or more")
                return _FNary("xor", tuple(args), pos), pos
            if tok == "before":
                self.i = i + 1
                self.expect("(")
                first = self.event_ref()
                self.expect(",")
                second = self.event_ref()
                self.expect(")")
                return A.FBefore(first, second, pos), pos
            if tok == "within":
                self.i = i + 1
                self.expect("(")
                first = self.event_ref()
                self.expect(",")
                value, number_pos = self.number()
                span = A.AQuantity(value, self.unit_after_number(), number_pos)
                self.expect("of")
                second = self.event_ref()
                self.expect(")")
                return A.FWithin(first, span, second, pos), pos
            if tok == "exists":  # followed by "path" (quantifiers are read by unary)
                return self.path(pos)
            if tok == "use":
                return self.use(pos)
            if tok == "risk":
                self.i = i + 1
                op, level = self.risk_test()
                return A.FRisk(op, level, None, pos), pos
            return self.compare()  # value, time
        if tok in _CARDS:
            return self.card()
        if tok[:1] in _NUMBER_START or tok == "-":
            return self.compare()
        if _is_name(tok):
            return self.atom(formula_start=True)
        self.fail("expected a formula")

    def atom(self, formula_start: bool) -> tuple[A.FAtom, A.Pos]:
        i = self.i
        t = self.t
        tok = t[i]
        start = self.p[i]
        kind: str | None = None
        if tok in _ATOM_KINDS and self.glued_colon(i):
            kind = tok
            i += 2
            self.i = i
            tok = t[i]
            if not _is_name(tok):
                self.fail("expected a name")
        elif not _is_name(tok):
            self.fail("expected a name")
        elif formula_start and tok.startswith(_CARDS):  # lark: CARD first, then the rest
            self.fail("a name beginning with a cardinality word")
        name_pos = self.p[i]
        self.i = i + 1
        args: tuple[A.Term, ...] = ()
        if t[self.i] == "(":
            self.i += 1
            terms = [self.term()]
            while t[self.i] == ",":
                self.i += 1
                terms.append(self.term())
            self.expect(")")
            args = tuple(terms)
        return _FAtom(kind, tok, args, name_pos), start

    def term(self) -> A.Term:
        i = self.i
        t = self.t
        tok = t[i]
        kind: str | None = None
        if tok in _TERM_KINDS and self.glued_colon(i):
            kind = tok
            i += 2
            tok = t[i]
        if not _is_name(tok):
            self.fail("expected a name")
        self.i = i + 1
        return _Term(kind, tok, self.p[i])

    def card(self) -> tuple[A.FCard, A.Pos]:
        i = self.i
        op, pos = self.t[i], self.p[i]
        self.i = i + 1
        self.expect("(")
        k, _ = self.int_()
        self.expect(",")
        self.expect("[")
        args: list[A.Formula] = []
        if self.t[self.i] != "]":
            args.append(self.formula()[0])
            while self.t[self.i] == ",":
                self.i += 1
                args.append(self.formula()[0])
        self.expect("]")
        self.expect(")")
        return A.FCard(op, k, tuple(args), pos), pos

    def path(self, pos: A.Pos) -> tuple[A.FPath, A.Pos]:
        self.i += 2  # exists path
        self.expect("(")
        source = self.term()
        self.expect("->")
        relation, relation_pos = self.name()
        self.expect("->")
        target = self.term()
        self.expect("within")
        hops, _ = self.int_()
        if self.t[self.i] not in _HOPS:
            self.fail("expected hops")
        self.i += 1
        self.expect(")")
        return A.FPath(source, relation, target, hops, pos, relation_pos), pos

    def use(self, pos: A.Pos) -> tuple[A.FRisk | A.FAtom, A.Pos]:
        self.i += 1
        self.expect("(")
        provider = self.term()
        self.expect(")")
        if self.t[self.i] != "only_if":
            return _FAtom(None, "use", (provider,), pos), pos
        self.i += 1
        self.expect("risk")
        op, level = self.risk_test()
        return A.FRisk(op, level, provider, pos), pos

    def risk_test(self) -> tuple[str, str]:
        i = self.i
        op, level = self.t[i], self.t[i + 1]
        if op not in _CMPS or level not in _RISKS:
            self.fail("expected a comparison with a risk level")
        self.i = i + 2
        return op, level

    def event_ref(self) -> A.ARef:
        self.prefixed("event")
        name, pos = self.name()
        return A.ARef("event", name, pos)

    # ---- arithmetic: arith CMP arith, sums flat
    def compare(self) -> tuple[A.FCompare, A.Pos]:
        lhs, start = self.arith()
        i = self.i
        op = self.t[i]
        if op not in _CMPS:
            self.fail("expected a comparison")
        self.i = i + 1
        rhs, _ = self.arith()
        return A.FCompare(lhs, op, rhs, self.p[i]), start

    def arith(self) -> tuple[A.Arith, A.Pos]:
        first, start = self.arith_term()
        t = self.t
        if t[self.i] != "+" and t[self.i] != "-":
            return A.Arith((_signed(first, 1),), first.pos), start
        terms = [_signed(first, 1)]
        while t[self.i] == "+" or t[self.i] == "-":  # ADD_OP: lark reads "-3" here as minus, 3
            sign = -1 if t[self.i] == "-" else 1
            self.i += 1
            terms.append(_signed(self.arith_term()[0], sign))
        return A.Arith(tuple(terms), start), start

    def arith_term(self) -> tuple[A.ATerm | A.ARef | A.AQuantity, A.Pos]:
        i = self.i
        tok = self.t[i]
        if tok == "value" or tok == "time":
            return self.num_ref(), self.p[i]
        if self.at_number():
            value, pos = self.number()
            if self.t[self.i] == "*":
                self.i += 1
                return A.ATerm(value, self.num_ref(), None, pos), pos
            return A.AQuantity(value, self.unit_after_number(), pos), pos
        if tok == "-":
            pos = self.p[i]
            self.i = i + 1
            return A.ATerm(Fraction(-1), self.num_ref(), None, pos), pos
        self.fail("expected a number, value(…) or time(…)")

    def num_ref(self) -> A.ARef:
        tok = self.t[self.i]
        if tok == "value":
            self.i += 1
            self.expect("(")
            self.prefixed("metric")
            name, pos = self.name()
            self.expect(")")
            return A.ARef("metric", name, pos)
        if tok == "time":
            self.i += 1
            self.expect("(")
            ref = self.event_ref()
            self.expect(")")
            return ref
        self.fail("expected value(…) or time(…)")

    def unit_after_number(self) -> str | None:
        """The unit of a quantity, if one follows; lark's state after a number decides."""
        tok = self.t[self.i]
        if not _is_name(tok) or tok in _AFTER_NUMBER:
            return None
        if separated(tok):
            self.fail("digit separators: lark's reader says where")
        if tok.startswith(_SIG_KINDS):
            if tok in _SIG_KINDS:  # a declaration starts here
                return None
            self.fail("a unit beginning with a declaration word")
        return self.unit()[0]

    # ---- a clause string: formula [weight]
    def clause(self) -> tuple[A.Formula, Fraction | None]:
        formula, _ = self.formula()
        weight: Fraction | None = None
        if self.t[self.i] == "weight":
            weight = self.weight()[0]
        if self.t[self.i] != _END:
            self.fail("expected the end of the clause")
        return formula, weight


def _signed(node: Any, sign: int) -> A.ATerm:
    """lark's transformer's _aterm: a sum's term with its sign applied."""
    if isinstance(node, A.ATerm):
        return A.ATerm(node.coef * sign, node.ref, node.quantity, node.pos)
    if isinstance(node, A.ARef):
        return A.ATerm(Fraction(sign), node, None, node.pos)
    return A.ATerm(Fraction(sign), None, node, node.pos)


class _Continued(Exception):
    """A line built from its skeleton is not a whole statement (the formula goes on)."""


def read_problem(text: str) -> list[A.Statement]:
    """The statements of a whole problem, or :class:`Fallback`.

    Its ``hard`` lines are built from their skeletons; where one of them turns out not to be a
    whole statement (its formula goes on on the next line), the text is tokenized and read again
    without them."""
    try:
        try:
            return _Reader(text, lines=True).problem()
        except _Continued:
            return _Reader(text).problem()
    except (RecursionError, IndexError):  # too deep for Python's stack; read past the end
        raise Fallback("the fast reader gave up") from None


def read_clause(text: str) -> tuple[A.Formula, Fraction | None]:
    """One clause string with its optional weight, or :class:`Fallback`."""
    try:
        return _Reader(text).clause()
    except (RecursionError, IndexError):
        raise Fallback("the fast reader gave up") from None
