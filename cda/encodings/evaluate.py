"""The independent evaluator: the truth of an IR node under a full assignment.

It shares no code with either compiler, so a model a solver returns can be re-checked here
before it is reported; a disagreement is a bug (``EvaluatorDisagreement``), never output.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from cda.encodings.ir import And, Atom, Card, Const, Iff, Linear, Node, Not, Or, Xor, walk

__all__ = ["BatchEvaluator", "evaluate", "evaluate_many"]

Assignment = Mapping[str, "bool | int"]


def _value(node: Node, assignment: Assignment, memo: dict[int, bool]) -> bool:
    if isinstance(node, Const):
        return node.value
    if isinstance(node, Atom):
        return bool(assignment[node.name])
    if isinstance(node, Not):
        return not memo[node.arg.uid]
    if isinstance(node, And):
        return all(memo[a.uid] for a in node.args)
    if isinstance(node, Or):
        return any(memo[a.uid] for a in node.args)
    if isinstance(node, Iff):
        return memo[node.lhs.uid] == memo[node.rhs.uid]
    if isinstance(node, Xor):
        return sum(memo[a.uid] for a in node.args) % 2 == 1
    if isinstance(node, Card):
        count = sum(memo[a.uid] for a in node.args)
        return count <= node.k if node.op == "<=" else count >= node.k if node.op == ">=" else count == node.k
    if isinstance(node, Linear):
        total = sum(c * int(assignment[v]) for c, v in node.terms)
        return total <= node.bound
    raise TypeError(f"unknown IR node {type(node).__name__}")


def evaluate_many(nodes: list[Node], assignment: Assignment) -> list[bool]:
    """Truth values of ``nodes`` under ``assignment`` (atoms → bool, numeric vars → int).

    >>> from cda.encodings.ir import NodeFactory
    >>> f = NodeFactory(); a, b = f.atom("a"), f.atom("b")
    >>> evaluate_many([f.xor([a, b]), f.card("<=", 1, [a, b])], {"a": True, "b": True})
    [False, False]
    """
    memo: dict[int, bool] = {}
    for node in walk(nodes):
        memo[node.uid] = _value(node, assignment, memo)
    return [memo[n.uid] for n in nodes]


def evaluate(node: Node, assignment: Assignment) -> bool:
    """Truth value of one node."""
    return evaluate_many([node], assignment)[0]


class BatchEvaluator:
    """Truth values of a fixed list of nodes over many assignments at once.

    The same semantics as :func:`evaluate_many`, computed column-wise with numpy: one pass
    over the DAG for all models, which is what makes re-checking thousands of enumerated
    models cheap.

    >>> from cda.encodings.ir import NodeFactory
    >>> f = NodeFactory(); a, b = f.atom("a"), f.atom("b")
    >>> BatchEvaluator([f.or_([a, b])]).evaluate([{"a": False, "b": False}, {"a": True, "b": False}]).tolist()
    [[False, True]]
    """

    def __init__(self, nodes: list[Node]) -> None:
        self.nodes = nodes
        self.order = list(walk(nodes))

    def evaluate(self, assignments: Sequence[Assignment]) -> np.ndarray:
        """A (len(nodes) × len(assignments)) Boolean array."""
        n = len(assignments)
        col: dict[int, np.ndarray] = {}
        for node in self.order:
            if isinstance(node, Const):
                v = np.full(n, node.value, dtype=bool)
            elif isinstance(node, Atom):
                v = np.fromiter((bool(a[node.name]) for a in assignments), dtype=bool, count=n)
            elif isinstance(node, Not):
                v = ~col[node.arg.uid]
            elif isinstance(node, And):
                v = np.logical_and.reduce([col[c.uid] for c in node.args])
            elif isinstance(node, Or):
                v = np.logical_or.reduce([col[c.uid] for c in node.args])
            elif isinstance(node, Iff):
                v = col[node.lhs.uid] == col[node.rhs.uid]
            elif isinstance(node, Xor):
                v = (np.sum([col[c.uid] for c in node.args], axis=0) % 2) == 1
            elif isinstance(node, Card):
                count = np.sum([col[c.uid] for c in node.args], axis=0)
                v = count <= node.k if node.op == "<=" else count >= node.k if node.op == ">=" else count == node.k
            elif isinstance(node, Linear):
                total = np.zeros(n, dtype=object)  # Python ints: no overflow
                for c, var in node.terms:
                    total = total + c * np.array([int(a[var]) for a in assignments], dtype=object)
                v = np.array([t <= node.bound for t in total], dtype=bool) if n else np.zeros(0, dtype=bool)
            else:
                raise TypeError(f"unknown IR node {type(node).__name__}")
            col[node.uid] = v
        if not self.nodes:
            return np.zeros((0, n), dtype=bool)
        return np.stack([col[x.uid] for x in self.nodes])
