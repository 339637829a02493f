"""Finite worlds and the independent evaluator: the truth of a formula in a finite
:class:`Structure`. It shares no code with any solver, so every world a solver returns is
re-checked here before it is shown; :func:`minimise` shrinks a world while the evaluator still
accepts it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from cda.contracts.deadline import Deadline
from cda.fol.budget import spend
from cda.fol.syntax import And, Atom, BoolConst, Eq, Formula, Iff, Implies, Not, Or, Term, Xor, subformulas

__all__ = ["Structure", "evaluate", "compile_formula", "minimise"]


@dataclass(frozen=True)
class Structure:
    """A finite interpretation: elements, what each constant and function denotes, and the
    true tuples of each predicate (a true 0-ary predicate holds the empty tuple)."""

    domain: tuple[str, ...]
    constants: Mapping[str, str]
    functions: Mapping[str, Mapping[tuple[str, ...], str]]
    relations: Mapping[str, frozenset[tuple[str, ...]]]


#: a formula made into a function of a structure, the free variables' values and a deadline
Check = Callable[[Structure, Mapping[str, str], "Deadline | None"], bool]
_TermValue = Callable[[Structure, Mapping[str, str]], str]


def _term(t: Term) -> _TermValue:
    """``t`` as a function of the structure and the variables' values."""
    name = t.name
    if not t.args:
        def named(s: Structure, env: Mapping[str, str]) -> str:
            return env[name] if name in env else s.constants[name]

        return named
    args = [_term(a) for a in t.args]

    def applied(s: Structure, env: Mapping[str, str]) -> str:
        return s.functions[name][tuple(a(s, env) for a in args)]

    return applied


def compile_formula(f: Formula) -> Check:
    """``f`` as a function ``(structure, env, deadline) -> truth`` that :func:`evaluate` runs:
    the formula's shape is read once, not at every element of every quantifier (the world
    minimiser evaluates the same premises thousands of times, docs/benchmarks.md, "cda prove").
    Operands are visited in the same order, and stop at the same one, as the formula reads."""
    if isinstance(f, Atom):
        pred, args = f.pred, [_term(a) for a in f.args]
        if len(args) == 1:
            (only,) = args
            return lambda s, env, dl: (only(s, env),) in s.relations.get(pred, _NONE)
        return lambda s, env, dl: tuple(a(s, env) for a in args) in s.relations.get(pred, _NONE)
    if isinstance(f, Eq):
        lhs, rhs = _term(f.lhs), _term(f.rhs)
        return lambda s, env, dl: lhs(s, env) == rhs(s, env)
    if isinstance(f, BoolConst):
        value = f.value
        return lambda s, env, dl: value
    if isinstance(f, Not):
        arg = compile_formula(f.arg)
        return lambda s, env, dl: not arg(s, env, dl)
    if isinstance(f, And):
        parts = [compile_formula(a) for a in f.args]
        return lambda s, env, dl: all(p(s, env, dl) for p in parts)
    if isinstance(f, Or):
        parts = [compile_formula(a) for a in f.args]
        return lambda s, env, dl: any(p(s, env, dl) for p in parts)
    if isinstance(f, Implies | Iff | Xor):
        lhs_f, rhs_f = compile_formula(f.lhs), compile_formula(f.rhs)
        if isinstance(f, Implies):
            return lambda s, env, dl: (not lhs_f(s, env, dl)) or rhs_f(s, env, dl)
        if isinstance(f, Iff):
            return lambda s, env, dl: lhs_f(s, env, dl) == rhs_f(s, env, dl)
        return lambda s, env, dl: lhs_f(s, env, dl) != rhs_f(s, env, dl)
    body, var, forall = compile_formula(f.body), f.var, f.kind == "forall"

    def quantified(s: Structure, env: Mapping[str, str], dl: Deadline | None) -> bool:
        for e in s.domain:
            spend(dl, "re-checking a world")
            if body(s, {**env, var: e}, dl) != forall:
                return not forall
        return forall

    return quantified


_NONE: frozenset[tuple[str, ...]] = frozenset()


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
    return compile_formula(f)(s, {} if env is None else env, deadline)


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
    compiled = [compile_formula(f) for f in (*hold, *fail)]
    wanted = [True] * len(hold) + [False] * len(fail)
    empty: dict[str, str] = {}

    def ok(t: Structure, pred: str | None = None) -> bool:
        """Only formulas that mention ``pred`` can change when one of its atoms flips."""
        checks = [(f, want) for f, want, used in zip(compiled, wanted, uses) if pred is None or pred in used]
        cost[0] += len(checks)
        return all(f(t, empty, deadline) == want for f, want in checks)

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
