"""First-order logic: text → checked FOL syntax tree, fragments, finite evaluation, grounding.

The pipeline, in the order of this file:

* **parse** — :func:`parse_formula` reads one formula in the FOLIO notation (``∀ ∃ ¬ ∧ ∨ → ↔
  ⊕``) or in ASCII (``forall``, ``exists``, ``~``, ``&``, ``|``, ``->``, ``<->``, ``^``); the
  grammar is ``fol.lark``. Unbalanced parentheses and every other syntax mistake raise
  :class:`~cda.errors.DSLSyntaxError` pointing at the spot.
* **check** — :func:`build_problem` / :func:`parse_fol` gather premises and claims, check that
  each predicate and function keeps one arity, that no variable is free, and (with a declared
  domain) that every constant is a domain element; mistakes raise
  :class:`~cda.errors.DSLTypeError`.
* **fragment** — :func:`fragment` says whether the entailment questions are decidable as
  written: ground, effectively propositional (Bernays–Schönfinkel: no function symbols and an
  ∃*∀* prenex form once the claim is negated), finite (a declared domain), or full FOL.
* **evaluate** — :func:`evaluate` computes the truth of a formula in a finite
  :class:`Structure`; it shares no code with any solver, so a model a solver returns is
  re-checked here before it is shown.
* **ground** — :func:`ground_claim` turns a problem with a declared domain, or an open-domain
  problem in the EPR fragment (after Skolemisation, over its Herbrand universe), into a
  :class:`~cda.encodings.ir.GroundProblem`, so the ordinary backends (clingo, z3) decide it.

Semantics: classical first-order logic over a non-empty domain. Without a declared domain,
constants need not denote distinct elements. With ``domain a, b, c`` the domain is exactly
those elements, pairwise distinct, and every constant must be one of them.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from typing import Any, Literal

import lark
from lark import Token, Transformer, v_args

from cda.encodings.ir import AtomInfo, Claim, Clause, GroundProblem, Node, NodeFactory
from cda.errors import BackendUnsupported, DSLError, DSLSyntaxError, DSLTypeError

__all__ = [
    "Term",
    "Atom",
    "Eq",
    "Not",
    "And",
    "Or",
    "Implies",
    "Iff",
    "Xor",
    "Quant",
    "BoolConst",
    "Formula",
    "Statement",
    "Signature",
    "FOLProblem",
    "Fragment",
    "Structure",
    "parse_formula",
    "parse_fol",
    "build_problem",
    "free_names",
    "fragment",
    "evaluate",
    "minimise",
    "ground_claim",
    "GroundedClaim",
    "herbrand_structure",
    "atom_name",
    "is_variable_shaped",
    "format_formula",
]

Pos = tuple[int, int]


# ---- syntax tree ----------------------------------------------------------------------------
@dataclass(frozen=True)
class Term:
    """A constant, a variable, or a function application ``f(t1, …)`` (``args`` non-empty)."""

    name: str
    args: tuple[Term, ...]
    pos: Pos


@dataclass(frozen=True)
class Atom:
    """``P(t1, …, tn)``; a 0-ary predicate (a proposition) has no arguments."""

    pred: str
    args: tuple[Term, ...]
    pos: Pos


@dataclass(frozen=True)
class Eq:
    lhs: Term
    rhs: Term
    pos: Pos


@dataclass(frozen=True)
class Not:
    arg: Formula
    pos: Pos


@dataclass(frozen=True)
class And:
    args: tuple[Formula, ...]
    pos: Pos


@dataclass(frozen=True)
class Or:
    args: tuple[Formula, ...]
    pos: Pos


@dataclass(frozen=True)
class Implies:
    lhs: Formula
    rhs: Formula
    pos: Pos


@dataclass(frozen=True)
class Iff:
    lhs: Formula
    rhs: Formula
    pos: Pos


@dataclass(frozen=True)
class Xor:
    """Exclusive or of two formulas (``A ⊕ B ⊕ C`` is ``(A ⊕ B) ⊕ C``)."""

    lhs: Formula
    rhs: Formula
    pos: Pos


@dataclass(frozen=True)
class Quant:
    """One quantified variable; ``∀x ∀y φ`` and ``∀x, y φ`` both nest two of these."""

    kind: Literal["forall", "exists"]
    var: str
    body: Formula
    pos: Pos
    var_pos: Pos


@dataclass(frozen=True)
class BoolConst:
    value: bool
    pos: Pos


Formula = Atom | Eq | Not | And | Or | Implies | Iff | Xor | Quant | BoolConst

_VAR_SHAPE = re.compile(r"^[u-z][0-9]?['’]*$")


def is_variable_shaped(name: str) -> bool:
    """Names that read as variables (``x``, ``y``, ``z1``, ``x'``): when such a name is not
    bound by a quantifier it is reported as a free variable, not taken for a constant.

    >>> [is_variable_shaped(n) for n in ("x", "y2", "y1984", "mary", "a")]
    [True, True, False, False, False]
    """
    return bool(_VAR_SHAPE.match(name))


# ---- parse ----------------------------------------------------------------------------------
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
        result = _ToAST().transform(tree)
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


# ---- problems and checks --------------------------------------------------------------------
@dataclass(frozen=True)
class Statement:
    """A named premise or claim, with the text as written and where it came from."""

    kind: Literal["premise", "claim"]
    name: str
    formula: Formula
    text: str
    line: int
    source_line: str
    filename: str | None


@dataclass
class Signature:
    """Predicates and functions with their arities, in order of first use (constants: arity 0)."""

    predicates: dict[str, int] = field(default_factory=dict)
    functions: dict[str, int] = field(default_factory=dict)

    @property
    def constants(self) -> list[str]:
        return [f for f, n in self.functions.items() if n == 0]

    @property
    def function_symbols(self) -> list[str]:
        return [f for f, n in self.functions.items() if n > 0]


@dataclass
class FOLProblem:
    """Premises and claims, checked together; ``domain`` is a declared finite domain or None."""

    premises: list[Statement]
    claims: list[Statement]
    domain: tuple[str, ...] | None = None
    signature: Signature = field(default_factory=Signature)
    filename: str | None = None

    @property
    def has_equality(self) -> bool:
        return any(isinstance(n, Eq) for st in self.premises + self.claims for n in _subformulas(st.formula))


def _subformulas(f: Formula) -> Iterator[Formula]:
    stack: list[Formula] = [f]
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, Not):
            stack.append(node.arg)
        elif isinstance(node, And | Or):
            stack.extend(node.args)
        elif isinstance(node, Implies | Iff | Xor):
            stack.extend((node.lhs, node.rhs))
        elif isinstance(node, Quant):
            stack.append(node.body)


class _Checker:
    def __init__(self, domain: tuple[str, ...] | None) -> None:
        self.sig = Signature()
        self.domain = domain
        self.first: dict[tuple[str, str], tuple[Statement, Pos]] = {}

    def err(self, st: Statement, pos: Pos, message: str) -> DSLTypeError:
        return DSLTypeError(
            message, line=st.line, column=pos[1] or None, source_line=st.source_line, filename=st.filename
        )

    def where(self, st: Statement, pos: Pos) -> str:
        if st.filename == f"{st.kind} {st.name}":  # given through the API: name the statement
            return f"{st.kind} {st.name}, column {pos[1]}"
        return f"line {st.line}, column {pos[1]}"

    def arity(self, st: Statement, kind: str, table: dict[str, int], name: str, n: int, pos: Pos) -> None:
        known = table.get(name)
        if known is None:
            table[name] = n
            self.first[(kind, name)] = (st, pos)
            return
        if known != n:
            first_st, first_pos = self.first[(kind, name)]

            def used(k: int) -> str:
                if kind == "function":
                    return "as a constant" if k == 0 else f"as a function of {k} argument{'s' if k != 1 else ''}"
                return f"with {k} argument{'s' if k != 1 else ''}"

            raise self.err(
                st, pos,
                f"{kind} '{name}' is used {used(n)} here but {used(known)} at {self.where(first_st, first_pos)}",
            )

    def term(self, st: Statement, t: Term, bound: frozenset[str]) -> None:
        if t.name in bound:
            if t.args:
                raise self.err(st, t.pos, f"variable '{t.name}' is applied to arguments as if it were a function")
            return
        if not t.args and is_variable_shaped(t.name):
            raise self.err(st, t.pos, f"free variable '{t.name}': no quantifier binds it")
        if not t.args and self.domain is not None and t.name not in self.domain:
            raise self.err(
                st, t.pos, f"constant '{t.name}' is not in the declared domain {{{', '.join(self.domain)}}}"
            )
        self.arity(st, "function", self.sig.functions, t.name, len(t.args), t.pos)
        for a in t.args:
            self.term(st, a, bound)

    def formula(self, st: Statement, f: Formula, bound: frozenset[str]) -> None:
        if isinstance(f, Atom):
            self.arity(st, "predicate", self.sig.predicates, f.pred, len(f.args), f.pos)
            for t in f.args:
                self.term(st, t, bound)
        elif isinstance(f, Eq):
            self.term(st, f.lhs, bound)
            self.term(st, f.rhs, bound)
        elif isinstance(f, Not):
            self.formula(st, f.arg, bound)
        elif isinstance(f, And | Or):
            for a in f.args:
                self.formula(st, a, bound)
        elif isinstance(f, Implies | Iff | Xor):
            self.formula(st, f.lhs, bound)
            self.formula(st, f.rhs, bound)
        elif isinstance(f, Quant):
            self.formula(st, f.body, bound | {f.var})


def _check(problem: FOLProblem) -> FOLProblem:
    names: dict[str, Statement] = {}
    for st in problem.premises + problem.claims:
        if st.name in names:
            raise DSLTypeError(
                f"the name '{st.name}' is given to two statements", line=st.line, column=1,
                source_line=st.source_line, filename=st.filename,
            )
        names[st.name] = st
    checker = _Checker(problem.domain)
    for st in problem.premises + problem.claims:
        checker.formula(st, st.formula, frozenset())
    problem.signature = checker.sig
    return problem


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
    return _check(FOLProblem(stmts_p, stmts_c, dom))


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
    return _check(FOLProblem(premises, stmts_c, domain, filename=filename))


def free_names(f: Formula, bound: frozenset[str] = frozenset()) -> set[str]:
    """Names occurring free in ``f`` (constants and free variables alike)."""
    out: set[str] = set()

    def term(t: Term, b: frozenset[str]) -> None:
        if t.args or t.name not in b:
            out.add(t.name)
        for a in t.args:
            term(a, b)

    def walk(g: Formula, b: frozenset[str]) -> None:
        if isinstance(g, Atom):
            for t in g.args:
                term(t, b)
        elif isinstance(g, Eq):
            term(g.lhs, b)
            term(g.rhs, b)
        elif isinstance(g, Not):
            walk(g.arg, b)
        elif isinstance(g, And | Or):
            for a in g.args:
                walk(a, b)
        elif isinstance(g, Implies | Iff | Xor):
            walk(g.lhs, b)
            walk(g.rhs, b)
        elif isinstance(g, Quant):
            walk(g.body, b | {g.var})

    walk(f, bound)
    return out


# ---- printing -------------------------------------------------------------------------------
def _fmt_term(t: Term) -> str:
    return f"{t.name}({', '.join(_fmt_term(a) for a in t.args)})" if t.args else t.name


_PREC = {"iff": 1, "implies": 2, "xor": 3, "or": 4, "and": 5}


def format_formula(f: Formula, outer: int = 0) -> str:
    """Print a formula in the Unicode notation, with the parentheses its precedence needs.

    >>> format_formula(parse_formula("forall x y (P(x) & ~Q(y) -> R(x, y) ^ S)"))
    '∀x ∀y (P(x) ∧ ¬Q(y) → R(x, y) ⊕ S)'
    """

    def wrap(text: str, prec: int) -> str:
        return f"({text})" if prec < outer or (outer and prec == 0) else text

    if isinstance(f, Atom):
        return f"{f.pred}({', '.join(_fmt_term(a) for a in f.args)})" if f.args else f.pred
    if isinstance(f, Eq):
        return f"{_fmt_term(f.lhs)} = {_fmt_term(f.rhs)}"
    if isinstance(f, BoolConst):
        return "⊤" if f.value else "⊥"
    if isinstance(f, Not):
        if isinstance(f.arg, Eq):
            return f"{_fmt_term(f.arg.lhs)} ≠ {_fmt_term(f.arg.rhs)}"
        return "¬" + format_formula(f.arg, 6)
    if isinstance(f, And | Or):
        op, prec = (" ∧ ", 5) if isinstance(f, And) else (" ∨ ", 4)
        return wrap(op.join(format_formula(a, prec + 1) for a in f.args), prec)
    if isinstance(f, Implies):
        return wrap(f"{format_formula(f.lhs, 3)} → {format_formula(f.rhs, 2)}", 2)
    if isinstance(f, Xor):
        return wrap(f"{format_formula(f.lhs, 3)} ⊕ {format_formula(f.rhs, 4)}", 3)
    if isinstance(f, Iff):
        return wrap(f"{format_formula(f.lhs, 1)} ↔ {format_formula(f.rhs, 2)}", 1)
    sym = "∀" if f.kind == "forall" else "∃"
    body = f.body
    head = f"{sym}{f.var}"
    while isinstance(body, Quant):
        head += f" {'∀' if body.kind == 'forall' else '∃'}{body.var}"
        body = body.body
    inner = format_formula(body, 0)
    if not isinstance(body, Atom | BoolConst | Not | Eq):
        inner = f"({inner})"
    return wrap(f"{head} {inner}", 0)


# ---- fragments ------------------------------------------------------------------------------
@dataclass(frozen=True)
class Fragment:
    """Where a problem sits: ``ground``, ``epr``, ``finite`` (declared domain) or ``fol``."""

    name: Literal["ground", "epr", "finite", "fol"]
    decidable: bool
    detail: str


def _epr_violation(st: Statement, positive: bool) -> str | None:
    """Why ``st`` (negated when not ``positive``) is not ∃*∀* after Skolemisation, or None.

    An existential (after pushing negations inward) whose body mentions a universally
    quantified variable of an enclosing scope would need a Skolem *function*; any other
    existential becomes a Skolem constant.
    """
    label = f"{st.kind} {st.name}" + ("" if positive else " (negated)")

    def term_fn(t: Term) -> str:
        return f"function symbol '{t.name}' in {label}: outside EPR"

    def walk(f: Formula, pol: bool, universals: tuple[str, ...]) -> str | None:
        if isinstance(f, Atom | Eq):
            for t in f.args if isinstance(f, Atom) else (f.lhs, f.rhs):
                if t.args:
                    return term_fn(t)
            return None
        if isinstance(f, BoolConst):
            return None
        if isinstance(f, Not):
            return walk(f.arg, not pol, universals)
        if isinstance(f, And | Or):
            for a in f.args:
                r = walk(a, pol, universals)
                if r:
                    return r
            return None
        if isinstance(f, Implies):
            return walk(f.lhs, not pol, universals) or walk(f.rhs, pol, universals)
        if isinstance(f, Iff | Xor):
            for p in (pol, not pol):
                r = walk(f.lhs, p, universals) or walk(f.rhs, p, universals)
                if r:
                    return r
            return None
        universal = (f.kind == "forall") == pol
        if universal:
            return walk(f.body, pol, universals + (f.var,))
        depends = sorted(free_names(f) & set(universals))
        if depends:
            sym = "∃" if pol else "¬∀"
            outer = "∀" + ", ∀".join(depends)
            return f"{sym}{f.var} under {outer} in {label}: needs a Skolem function, outside EPR"
        return walk(f.body, pol, tuple(u for u in universals if u != f.var))

    return walk(st.formula, positive, ())


def _has_quantifier(f: Formula) -> bool:
    return any(isinstance(n, Quant) for n in _subformulas(f))


def fragment(problem: FOLProblem, claim: Statement | None = None) -> Fragment:
    """Classify the two questions "premises ∧ ¬claim?" and "premises ∧ claim?".

    >>> p = build_problem(["∀x (Cat(x) → ∃y Owns(y, x))"], "∃x Cat(x)")
    >>> fragment(p).name, fragment(p).detail
    ('fol', '∃y under ∀x in premise p1: needs a Skolem function, outside EPR')
    >>> fragment(build_problem(["∃x ∀y Likes(x, y)"], "Likes(bob, bob)")).name
    'epr'
    """
    claims = [claim] if claim is not None else problem.claims
    stmts = problem.premises + claims
    if problem.domain is not None:
        return Fragment(
            "finite", True, f"a declared domain of {len(problem.domain)} elements: decidable by grounding"
        )
    if not any(_has_quantifier(st.formula) for st in stmts) and not problem.signature.function_symbols:
        return Fragment("ground", True, "no quantifiers and no function symbols: a propositional problem")
    for st in problem.premises:
        why = _epr_violation(st, True)
        if why:
            return Fragment("fol", False, why)
    for st in claims:
        for pol in (False, True):
            why = _epr_violation(st, pol)
            if why:
                return Fragment("fol", False, why)
    return Fragment(
        "epr", True,
        "effectively propositional (Bernays–Schönfinkel): no function symbols, ∃*∀* once the claim is negated",
    )


# ---- finite structures and the independent evaluator ----------------------------------------
@dataclass(frozen=True)
class Structure:
    """A finite interpretation: elements, what each constant and function denotes, and the
    true tuples of each predicate (a true 0-ary predicate holds the empty tuple)."""

    domain: tuple[str, ...]
    constants: Mapping[str, str]
    functions: Mapping[str, Mapping[tuple[str, ...], str]]
    relations: Mapping[str, frozenset[tuple[str, ...]]]


def _eval_term(t: Term, s: Structure, env: Mapping[str, str]) -> str:
    if not t.args:
        if t.name in env:
            return env[t.name]
        return s.constants[t.name]
    args = tuple(_eval_term(a, s, env) for a in t.args)
    return s.functions[t.name][args]


def evaluate(f: Formula, s: Structure, env: Mapping[str, str] | None = None) -> bool:
    """The truth of ``f`` in the finite structure ``s`` (``env`` binds free variables).

    >>> s = Structure(("tom", "e1"), {"tom": "tom"}, {}, {"Cat": frozenset({("tom",)})})
    >>> evaluate(parse_formula("∀x (Cat(x) → x = tom)"), s), evaluate(parse_formula("∀x Cat(x)"), s)
    (True, False)
    """
    env = {} if env is None else env
    if isinstance(f, Atom):
        return tuple(_eval_term(a, s, env) for a in f.args) in s.relations.get(f.pred, frozenset())
    if isinstance(f, Eq):
        return _eval_term(f.lhs, s, env) == _eval_term(f.rhs, s, env)
    if isinstance(f, BoolConst):
        return f.value
    if isinstance(f, Not):
        return not evaluate(f.arg, s, env)
    if isinstance(f, And):
        return all(evaluate(a, s, env) for a in f.args)
    if isinstance(f, Or):
        return any(evaluate(a, s, env) for a in f.args)
    if isinstance(f, Implies):
        return (not evaluate(f.lhs, s, env)) or evaluate(f.rhs, s, env)
    if isinstance(f, Iff):
        return evaluate(f.lhs, s, env) == evaluate(f.rhs, s, env)
    if isinstance(f, Xor):
        return evaluate(f.lhs, s, env) != evaluate(f.rhs, s, env)
    test = all if f.kind == "forall" else any
    return test(evaluate(f.body, s, {**env, f.var: e}) for e in s.domain)


def minimise(s: Structure, hold: Sequence[Formula], fail: Sequence[Formula] = (), budget: int = 20_000) -> Structure:
    """A smaller structure in which every formula of ``hold`` is still true and every one of
    ``fail`` still false: first drop elements no constant names, then make true atoms false,
    one at a time in order, keeping each change that the evaluator accepts. The result is
    checked by the evaluator, so it is a model whenever ``s`` was; ``budget`` caps the work.

    >>> s = Structure(("a", "e1"), {"a": "a"}, {}, {"P": frozenset({("a",), ("e1",)}), "Q": frozenset({("a",)})})
    >>> minimise(s, [parse_formula("P(a)")]).relations
    {'P': frozenset({('a',)}), 'Q': frozenset()}
    """
    cost = [0]
    uses = [{n.pred for n in _subformulas(f) if isinstance(n, Atom)} for f in (*hold, *fail)]

    def ok(t: Structure, pred: str | None = None) -> bool:
        """Only formulas that mention ``pred`` can change when one of its atoms flips."""
        checks = [
            (f, want) for f, want, used in zip((*hold, *fail), [True] * len(hold) + [False] * len(fail), uses)
            if pred is None or pred in used
        ]
        cost[0] += len(checks)
        return all(evaluate(f, t) == want for f, want in checks)

    named = set(s.constants.values())
    if not s.functions:
        for e in [x for x in s.domain if x not in named]:
            if cost[0] > budget or len(s.domain) == 1:
                break
            smaller = Structure(
                tuple(x for x in s.domain if x != e), s.constants, s.functions,
                {p: frozenset(r for r in rows if e not in r) for p, rows in s.relations.items()},
            )
            if ok(smaller):
                s = smaller
    order = {x: i for i, x in enumerate(s.domain)}
    for p in list(s.relations):
        for row in sorted(s.relations[p], key=lambda r: [order[x] for x in r]):
            if cost[0] > budget:
                return s
            fewer = dict(s.relations)
            fewer[p] = s.relations[p] - {row}
            candidate = Structure(s.domain, s.constants, s.functions, fewer)
            if ok(candidate, p):
                s = candidate
    return s


# ---- grounding to the IR --------------------------------------------------------------------
@dataclass
class GroundedClaim:
    """A problem grounded for one claim: clauses are the premises (by name, in order); the
    claims are ``claim`` (the claim) and ``negated`` (its negation), each grounded on its own
    (they differ after Skolemisation); ``universe`` is the finite domain grounded over."""

    problem: GroundProblem
    universe: tuple[str, ...]
    skolem: tuple[str, ...]


def atom_name(pred: str, args: Sequence[str]) -> str:
    return f"{pred}({', '.join(args)})" if args else pred


class _Grounder:
    """Declared domain: ∀ → ∧ and ∃ → ∨ over the domain. Open domain (EPR, no equality, no
    functions): negation normal form with existentials replaced by Skolem constants, then
    ∀ → ∧ over the Herbrand universe (the constants and the Skolem constants)."""

    def __init__(self, problem: FOLProblem, factory: NodeFactory, gp: GroundProblem) -> None:
        self.p = problem
        self.f = factory
        self.gp = gp
        self.closed = problem.domain is not None
        self.universe: tuple[str, ...] = problem.domain or ()
        self.skolem: list[str] = []
        self._taken = set(problem.signature.functions)

    def refuse(self, what: str) -> BackendUnsupported:
        return BackendUnsupported(
            f"clingo cannot ground {what}: only a declared finite domain, or an open domain in the EPR "
            "fragment without equality and function symbols, can be grounded; use z3"
        )

    def fresh(self) -> str:
        i = len(self.skolem) + 1
        name = f"sk{i}"
        while name in self._taken:
            i += 1
            name = f"sk{i}"
        self._taken.add(name)
        self.skolem.append(name)
        return name

    # -- open domain: negation normal form + Skolem constants (still a Formula)
    def nnf(self, f: Formula, pol: bool, env: dict[str, Term], universals: frozenset[str]) -> Formula:
        if isinstance(f, Atom):
            atom = Atom(f.pred, tuple(self.subst(t, env) for t in f.args), f.pos)
            return atom if pol else Not(atom, f.pos)
        if isinstance(f, Eq):
            raise self.refuse("equality over an open domain")
        if isinstance(f, BoolConst):
            return BoolConst(f.value == pol, f.pos)
        if isinstance(f, Not):
            return self.nnf(f.arg, not pol, env, universals)
        if isinstance(f, And | Or):
            conj = isinstance(f, And) == pol
            parts = tuple(self.nnf(g, pol, env, universals) for g in f.args)
            return And(parts, f.pos) if conj else Or(parts, f.pos)
        if isinstance(f, Implies):
            left, right = self.nnf(f.lhs, not pol, env, universals), self.nnf(f.rhs, pol, env, universals)
            return Or((left, right), f.pos) if pol else And((left, right), f.pos)
        if isinstance(f, Iff | Xor):
            same = isinstance(f, Iff) == pol  # the formula says: lhs and rhs have the same value
            a1, b1 = self.nnf(f.lhs, True, env, universals), self.nnf(f.rhs, True, env, universals)
            a0, b0 = self.nnf(f.lhs, False, env, universals), self.nnf(f.rhs, False, env, universals)
            if same:
                return And((Or((a0, b1), f.pos), Or((a1, b0), f.pos)), f.pos)
            return And((Or((a1, b1), f.pos), Or((a0, b0), f.pos)), f.pos)
        universal = (f.kind == "forall") == pol
        if universal:
            inner = {**env, f.var: Term(f.var, (), f.var_pos)}
            return Quant("forall", f.var, self.nnf(f.body, pol, inner, universals | {f.var}), f.pos, f.var_pos)
        if free_names(f) & universals - {f.var}:
            raise self.refuse("an existential that depends on a universal (it needs a Skolem function)")
        sk = Term(self.fresh(), (), f.var_pos)
        return self.nnf(f.body, pol, {**env, f.var: sk}, universals - {f.var})

    def subst(self, t: Term, env: dict[str, Term]) -> Term:
        if t.args:
            raise self.refuse(f"the function symbol '{t.name}'")
        return env.get(t.name, t)

    # -- ground a formula (closed domain: any formula; open: the output of nnf)
    def term(self, t: Term, env: Mapping[str, str]) -> str:
        if t.args:
            raise self.refuse(f"the function symbol '{t.name}'")
        return env.get(t.name, t.name)

    def ground(self, f: Formula, env: dict[str, str]) -> Node:
        fac = self.f
        if isinstance(f, Atom):
            args = tuple(self.term(t, env) for t in f.args)
            name = atom_name(f.pred, args)
            if name not in self.gp.atoms:
                self.gp.atoms[name] = AtomInfo(name, "var", f.pred, args)
            return fac.atom(name)
        if isinstance(f, Eq):
            if not self.closed:
                raise self.refuse("equality over an open domain")
            return fac.const(self.term(f.lhs, env) == self.term(f.rhs, env))
        if isinstance(f, BoolConst):
            return fac.const(f.value)
        if isinstance(f, Not):
            return fac.not_(self.ground(f.arg, env))
        if isinstance(f, And):
            return fac.and_(self.ground(a, env) for a in f.args)
        if isinstance(f, Or):
            return fac.or_(self.ground(a, env) for a in f.args)
        if isinstance(f, Implies):
            return fac.implies(self.ground(f.lhs, env), self.ground(f.rhs, env))
        if isinstance(f, Iff):
            return fac.iff(self.ground(f.lhs, env), self.ground(f.rhs, env))
        if isinstance(f, Xor):
            return fac.xor([self.ground(f.lhs, env), self.ground(f.rhs, env)])
        parts = [self.ground(f.body, {**env, f.var: e}) for e in self.universe]
        return fac.and_(parts) if f.kind == "forall" else fac.or_(parts)


def ground_claim(problem: FOLProblem, claim: Statement) -> GroundedClaim:
    """Ground ``problem`` for ``claim`` into the IR both ordinary backends decide.

    >>> p = build_problem(["∀x (Cat(x) → Pet(x))", "∃x Cat(x)"], "∃x Pet(x)")
    >>> g = ground_claim(p, p.claims[0])
    >>> g.universe, [c.name for c in g.problem.clauses], [c.name for c in g.problem.claims]
    (('sk1', 'sk2'), ['p1', 'p2'], ['claim', 'negated'])
    """
    factory = NodeFactory()
    gp = GroundProblem(factory=factory, filename=problem.filename)
    g = _Grounder(problem, factory, gp)
    stmts = problem.premises + [claim]
    if problem.domain is None:
        if problem.signature.function_symbols:
            raise g.refuse(f"the function symbol '{problem.signature.function_symbols[0]}'")
        normal = [g.nnf(st.formula, True, {}, frozenset()) for st in stmts]
        negated = g.nnf(claim.formula, False, {}, frozenset())
        consts = [c for c in problem.signature.constants if any(c in free_names(st.formula) for st in stmts)]
        g.universe = tuple(consts + g.skolem) or ("e1",)
        premise_nodes = [g.ground(f, {}) for f in normal[:-1]]
        claim_node, negated_node = g.ground(normal[-1], {}), g.ground(negated, {})
    else:
        premise_nodes = [g.ground(st.formula, {}) for st in problem.premises]
        claim_node = g.ground(claim.formula, {})
        negated_node = factory.not_(claim_node)
    for st, node in zip(problem.premises, premise_nodes):
        gp.clauses.append(Clause(st.name, "hard", node, st.line))
    gp.claims.append(Claim("claim", "prove", claim_node, claim.text, claim.line))
    gp.claims.append(Claim("negated", "prove", negated_node, f"¬({claim.text})", claim.line))
    return GroundedClaim(gp, g.universe, tuple(g.skolem))


def herbrand_structure(grounded: GroundedClaim, true_atoms: Mapping[str, bool | int]) -> Structure:
    """The structure a ground model describes: every name denotes itself."""
    relations: dict[str, set[tuple[str, ...]]] = {}
    for name, info in grounded.problem.atoms.items():
        relations.setdefault(info.pred, set())
        if true_atoms.get(name):
            relations[info.pred].add(info.args)
    return Structure(
        grounded.universe,
        {c: c for c in grounded.universe},
        {},
        {k: frozenset(v) for k, v in relations.items()},
    )

