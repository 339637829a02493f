"""Terms as finite domains: a problem with term variables rewritten as a Boolean one.

For a backend without a theory of equality over sorts (clingo), each term variable becomes a
choice of one value among its sort's *domain*, one atom per value: ``x = v`` is that atom,
``x = y`` a disjunction over the values they share. The domain of a closed sort is its
declared one. The domain of an open sort is the constants the problem names plus one fresh
value per variable of the sort (:func:`~cda.encodings.ir.fresh_labels`): equality is the only
thing a node can ask of such a term, and a model of the original problem needs no more distinct
values than it has variables, so the rewritten problem is satisfiable exactly when the original
is (the *small model* of the theory of equality). ``like`` on a variable asks more than equality
(which strings exist), so it is refused by name: z3 decides it with regular languages.

The rewrite is built once, before the backend encodes anything (as the scheme is); a model of
the rewritten problem is read back as the term variables' values (:meth:`FiniteDomains.decode`),
and the engine re-checks it against the *original* nodes (:mod:`cda.solver.recheck`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from cda.encodings.ir import (
    And,
    AtomInfo,
    Card,
    Claim,
    Clause,
    Eq,
    GroundProblem,
    Iff,
    Like,
    Node,
    Not,
    Or,
    SoftClause,
    TermConst,
    TermVar,
    Xor,
    fresh_labels,
    walk,
)
from cda.encodings.scheme import sort_uses
from cda.errors import BackendUnsupported

__all__ = ["FiniteDomains", "rewrite_nodes", "rewritten_problem"]


class FiniteDomains:
    """``problem``'s term variables as one-hot choices over finite domains (module docstring).

    >>> from cda.encodings.ir import NodeFactory, Sort
    >>> f = NodeFactory(); p = GroundProblem(f); s = Sort("S", "population")
    >>> x, y = p.declare_term("x", s), p.declare_term("y", s)
    >>> p.clauses.append(Clause("c", "hard", f.and_([f.eq(x, TermConst(s, "a")), f.not_(f.eq(x, y))]), 1))
    >>> fd = FiniteDomains(p, "clingo"); fd.domains["S"]
    ['a', '#0', '#1']
    >>> fd.decode({"dom!x!0": True, "dom!y!2": True, "dom!x!1": False})
    {'x': 'a', 'y': '#1'}
    """

    def __init__(self, problem: GroundProblem, backend: str) -> None:
        self.backend = backend
        self.original = problem
        self.domains: dict[str, list[str]] = {}
        for use in sort_uses(problem):
            if use.sort.domain is not None:
                self.domains[use.sort.name] = list(use.sort.domain)
            else:
                self.domains[use.sort.name] = [*use.constants, *fresh_labels(set(use.constants), len(use.variables))]
        self._atoms: dict[str, list[str]] = {}  # term variable → its value atoms, in domain order
        f = problem.factory
        atoms = dict(problem.atoms)
        one_hot: list[Node] = []
        for var in problem.terms.values():
            names = self._atoms[var.name] = [f"dom!{var.name}!{i}" for i in range(len(self.domains[var.sort.name]))]
            for name in names:
                atoms[name] = AtomInfo(name, "var", "dom", (var.name,))
            one_hot.append(f.card("=", 1, [f.atom(n) for n in names]))
        self._memo: dict[int, Node] = {}
        self.problem = rewritten_problem(problem, self.rewrite, one_hot, atoms=atoms, terms={})

    def _value_atom(self, var: TermVar, value: str) -> Node | None:
        domain = self.domains[var.sort.name]
        if value not in domain:
            return None
        return self.original.factory.atom(self._atoms[var.name][domain.index(value)])

    def rewrite(self, node: Node) -> Node:
        """``node`` with every ``Eq`` over term variables replaced by value atoms."""
        return rewrite_nodes(self.original.factory, node, self._memo, self._leaf)

    def _leaf(self, sub: Node) -> Node | None:
        if isinstance(sub, Eq):
            return self._eq(sub)
        if isinstance(sub, Like):
            raise BackendUnsupported(
                f"the {self.backend} backend cannot encode IR node Like on a term variable ({sub!r}): "
                "which strings match a pattern is a question of regular languages; use backend 'z3'"
            )
        return None

    def _eq(self, node: Eq) -> Node:
        f = self.original.factory
        a, b = node.lhs, node.rhs
        if isinstance(a, TermConst):
            a, b = b, a
        if self._atoms.get(a.name if isinstance(a, TermVar) else "") is None:
            raise BackendUnsupported(f"the term variable {a!r} is not declared in the problem")
        assert isinstance(a, TermVar)
        if isinstance(b, TermConst):
            atom = self._value_atom(a, b.value)
            return f.false if atom is None else atom
        domain = self.domains[a.sort.name]
        return f.or_(f.and_([f.atom(self._atoms[a.name][i]), f.atom(self._atoms[b.name][i])]) for i in range(len(domain)))

    def decode(self, model: dict[str, Any]) -> dict[str, Any]:
        """``model`` of the rewritten problem as one of the original: its value atoms replaced by
        the value of each term variable."""
        out = {k: v for k, v in model.items() if not k.startswith("dom!")}
        for var in self.original.terms.values():
            domain = self.domains[var.sort.name]
            names = self._atoms[var.name]
            out[var.name] = next((domain[i] for i, n in enumerate(names) if model.get(n)), domain[0] if domain else "")
        return out


def rewrite_nodes(f: Any, node: Node, memo: dict[int, Node], leaf: Callable[[Node], Node | None]) -> Node:
    """``node`` with each sub-node that ``leaf`` maps to a node replaced by it (``None``: kept),
    and the nodes above rebuilt through the factory ``f``; ``memo`` (uid → new node) is shared
    by the calls of one rewrite, so a shared sub-formula is rewritten once."""
    for sub in walk([node], skip=memo):
        new = leaf(sub)
        if new is None:
            kids = [memo.get(c.uid, c) for c in sub.children]
            new = sub if not kids or all(k is c for k, c in zip(kids, sub.children)) else _rebuilt(f, sub, kids)
        memo[sub.uid] = new
    return memo[node.uid]


def rewritten_problem(
    problem: GroundProblem, rewrite: Callable[[Node], Node], extra: Sequence[Node] = (), **changes: Any
) -> GroundProblem:
    """``problem`` with every clause, background node, soft clause and claim rewritten by
    ``rewrite``, the ``extra`` background nodes added, and the fields in ``changes`` replaced."""
    return replace(
        problem,
        clauses=[Clause(c.name, c.kind, rewrite(c.node), c.line) for c in problem.clauses],
        background=[*(rewrite(n) for n in problem.background), *extra],
        soft=[SoftClause(s.name, rewrite(s.node), s.weight, s.line) for s in problem.soft],
        claims=[Claim(c.name, c.mode, rewrite(c.node), c.text, c.line) for c in problem.claims],
        **changes,
    )


def _rebuilt(f: Any, node: Node, kids: list[Node]) -> Node:
    """``node`` of the same kind over new children, through the factory (which folds)."""
    if isinstance(node, Not):
        return f.not_(kids[0])  # type: ignore[no-any-return]
    if isinstance(node, And):
        return f.and_(kids)  # type: ignore[no-any-return]
    if isinstance(node, Or):
        return f.or_(kids)  # type: ignore[no-any-return]
    if isinstance(node, Iff):
        return f.iff(kids[0], kids[1])  # type: ignore[no-any-return]
    if isinstance(node, Xor):
        return f.xor(kids)  # type: ignore[no-any-return]
    if isinstance(node, Card):
        return f.card(node.op, node.k, kids)  # type: ignore[no-any-return]
    raise BackendUnsupported(f"the finite-domain rewrite cannot rebuild IR node {type(node).__name__}")
