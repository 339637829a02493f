"""The independent evaluator: the truth of an IR node under a full assignment.

It shares no code with either compiler, so a model a solver returns can be re-checked here
before it is reported; a disagreement is a bug (``EvaluatorDisagreement``), never output.
"""

from __future__ import annotations

from collections.abc import Mapping

from cda.encodings.ir import And, Atom, Card, Const, Iff, Linear, Node, Not, Or, Xor, walk

__all__ = ["evaluate", "evaluate_many"]

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
