"""Finite worlds and the independent evaluator: the truth of a formula in a finite
:class:`Structure`. It shares no code with any solver, so every world a solver returns is
re-checked here before it is shown; :func:`minimise` shrinks a world while the evaluator still
accepts it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from cda.contracts.deadline import Deadline
from cda.fol.budget import spend
from cda.fol.syntax import And, Atom, BoolConst, Eq, Formula, Iff, Implies, Not, Or, Term, Xor, subformulas

__all__ = ["Structure", "evaluate", "minimise"]


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


def evaluate(
    f: Formula, s: Structure, env: Mapping[str, str] | None = None, *, deadline: Deadline | None = None
) -> bool:
    """The truth of ``f`` in the finite structure ``s`` (``env`` binds free variables); with a
    ``deadline``, raises ``OutOfTime`` once it passes (a 9-place ∀ over 6 elements is 10⁷ cases).

    >>> from cda.fol.parse import parse_formula
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
        return not evaluate(f.arg, s, env, deadline=deadline)
    if isinstance(f, And):
        return all(evaluate(a, s, env, deadline=deadline) for a in f.args)
    if isinstance(f, Or):
        return any(evaluate(a, s, env, deadline=deadline) for a in f.args)
    if isinstance(f, Implies):
        return (not evaluate(f.lhs, s, env, deadline=deadline)) or evaluate(f.rhs, s, env, deadline=deadline)
    if isinstance(f, Iff):
        return evaluate(f.lhs, s, env, deadline=deadline) == evaluate(f.rhs, s, env, deadline=deadline)
    if isinstance(f, Xor):
        return evaluate(f.lhs, s, env, deadline=deadline) != evaluate(f.rhs, s, env, deadline=deadline)
    test = all if f.kind == "forall" else any

    def instance(e: str) -> bool:
        spend(deadline, "re-checking a world")
        return evaluate(f.body, s, {**env, f.var: e}, deadline=deadline)

    return test(instance(e) for e in s.domain)


def minimise(
    s: Structure,
    hold: Sequence[Formula],
    fail: Sequence[Formula] = (),
    budget: int = 20_000,
    *,
    deadline: Deadline | None = None,
    keep_elements: bool = False,
) -> Structure:
    """A smaller structure in which every formula of ``hold`` is still true and every one of
    ``fail`` still false: first drop elements no constant names, then make true atoms false,
    one at a time in order, keeping each change that the evaluator accepts. The result is
    checked by the evaluator, so it is a model whenever ``s`` was; ``budget`` caps the work
    (formula evaluations) and ``deadline`` the time (``OutOfTime``); ``keep_elements`` keeps
    the domain whole (a declared domain is exactly its elements).

    >>> from cda.fol.parse import parse_formula
    >>> s = Structure(("a", "e1"), {"a": "a"}, {}, {"P": frozenset({("a",), ("e1",)}), "Q": frozenset({("a",)})})
    >>> minimise(s, [parse_formula("P(a)")]).relations
    {'P': frozenset({('a',)}), 'Q': frozenset()}
    """
    cost = [0]
    uses = [{n.pred for n in subformulas(f) if isinstance(n, Atom)} for f in (*hold, *fail)]

    def ok(t: Structure, pred: str | None = None) -> bool:
        """Only formulas that mention ``pred`` can change when one of its atoms flips."""
        checks = [
            (f, want) for f, want, used in zip((*hold, *fail), [True] * len(hold) + [False] * len(fail), uses)
            if pred is None or pred in used
        ]
        cost[0] += len(checks)
        return all(evaluate(f, t, deadline=deadline) == want for f, want in checks)

    named = set(s.constants.values())
    if not s.functions and not keep_elements:  # a declared domain keeps every element
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
