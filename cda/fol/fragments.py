"""Which fragment of first-order logic a problem sits in, so the prover knows whether its
questions are decidable as written: ground, effectively propositional (Bernays–Schönfinkel: no
function symbols and an ∃*∀* prenex form once the claim is negated), finite (a declared
domain), or full FOL.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

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
    Quant,
    Statement,
    Term,
    Xor,
    free_names,
    subformulas,
)

__all__ = ["Fragment", "fragment"]


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
    return any(isinstance(n, Quant) for n in subformulas(f))


def fragment(problem: FOLProblem, claim: Statement | None = None) -> Fragment:
    """Classify the two questions "premises ∧ ¬claim?" and "premises ∧ claim?".

    >>> from cda.fol.parse import build_problem
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
