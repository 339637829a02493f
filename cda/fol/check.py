"""Checking a first-order problem: one name per statement, one arity per predicate and
function, no free variable, and (with a declared domain) every constant a domain element.
Mistakes raise :class:`~cda.errors.DSLTypeError` naming the statement, line and column.
"""

from __future__ import annotations

from cda.errors import DSLTypeError
from cda.fol.syntax import (
    And,
    Atom,
    Eq,
    FOLProblem,
    Formula,
    Iff,
    Implies,
    Not,
    Or,
    Pos,
    Quant,
    Signature,
    Statement,
    Term,
    Xor,
    is_variable_shaped,
)

__all__ = ["check_problem"]


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


def check_problem(problem: FOLProblem) -> FOLProblem:
    """Check ``problem`` and fill in its signature; raises ``DSLTypeError`` on the first mistake."""
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
