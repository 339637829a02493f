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

__all__ = ["FiniteDomains"]


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
        self.problem = replace(
            problem,
            atoms=atoms,
            terms={},
            clauses=[Clause(c.name, c.kind, self.rewrite(c.node), c.line) for c in problem.clauses],
            background=[*(self.rewrite(n) for n in problem.background), *one_hot],
            soft=[SoftClause(s.name, self.rewrite(s.node), s.weight, s.line) for s in problem.soft],
            claims=[Claim(c.name, c.mode, self.rewrite(c.node), c.text, c.line) for c in problem.claims],
        )

    def _value_atom(self, var: TermVar, value: str) -> Node | None:
        domain = self.domains[var.sort.name]
        if value not in domain:
            return None
        return self.original.factory.atom(self._atoms[var.name][domain.index(value)])

    def rewrite(self, node: Node) -> Node:
        """``node`` with every ``Eq`` over term variables replaced by value atoms."""
        memo, f = self._memo, self.original.factory
        for sub in walk([node], skip=memo):
            kids = [memo.get(c.uid, c) for c in sub.children]
            new: Node
            if isinstance(sub, Eq):
                new = self._eq(sub)
            elif isinstance(sub, Like):
                raise BackendUnsupported(
                    f"the {self.backend} backend cannot encode IR node Like on a term variable ({sub!r}): "
                    "which strings match a pattern is a question of regular languages; use backend 'z3'"
                )
            elif not kids or all(k is c for k, c in zip(kids, sub.children)):
                new = sub
            else:
                new = _rebuilt(f, sub, kids)
            memo[sub.uid] = new
        return memo[node.uid]

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
