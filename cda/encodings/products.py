"""Products of two unknowns as pairs of values: IR :class:`~cda.encodings.ir.Product` nodes
rewritten for a backend without nonlinear arithmetic (clingo decides difference constraints).

``z = x * y`` holds exactly when, for the one pair of values ``(a, b)`` that ``x`` and ``y``
take, ``z = a·b``: the node becomes ``OR over (a, b) of (x = a ∧ y = b ∧ z = a·b)``, each a
conjunction of bounds (``x <= a``, ``-x <= -a``: difference constraints), the pairs whose
product lies outside ``z``'s range left out. That is exact, and as large as the number of
pairs: above :data:`MAX_PAIRS` the rewrite refuses by name, and z3 (nonlinear integer
arithmetic over bounded ranges) decides the problem instead (docs/architecture.md, "The IR").
A model of the rewritten problem is one of the original (the same variables), and the engine
re-checks it against the original nodes.
"""

from __future__ import annotations

from cda.encodings.finite import rewrite_nodes, rewritten_problem
from cda.encodings.ir import NUM_MAX, NUM_MIN, GroundProblem, Node, NodeFactory, Product
from cda.errors import BackendUnsupported

__all__ = ["MAX_PAIRS", "expand_products", "pairs"]

#: the most pairs of values one product is rewritten into (a 64 × 64 square)
MAX_PAIRS = 4096


def expand_products(problem: GroundProblem, backend: str) -> GroundProblem:
    """``problem`` with every :class:`Product` node read as its pairs of values (module
    docstring); ``problem`` itself when it has none.

    >>> from cda.encodings.ir import Clause, NodeFactory
    >>> f = NodeFactory(); p = GroundProblem(f)
    >>> for v in ("x", "y", "z"): _ = p.declare_int(v, 0, 2)
    >>> p.clauses.append(Clause("c", "hard", f.product("z", "x", "y"), 1))
    >>> expand_products(p, "clingo").clauses[0].node  # doctest: +ELLIPSIS
    ((1*x <= 0 and ...) or ...)
    """
    if not problem.factory.products:
        return problem
    f = problem.factory
    memo: dict[int, Node] = {}

    def leaf(sub: Node) -> Node | None:
        return pairs(f, sub, problem, backend) if isinstance(sub, Product) else None

    return rewritten_problem(problem, lambda node: rewrite_nodes(f, node, memo, leaf))


def pairs(f: NodeFactory, node: Product, problem: GroundProblem, backend: str) -> Node:
    """``node`` as the disjunction of the pairs of values of its factors (module docstring)."""

    def bounds(name: str) -> tuple[int, int]:
        var = problem.numvars.get(name)
        return (var.low, var.high) if var is not None else (NUM_MIN, NUM_MAX)

    (xl, xh), (yl, yh), (zl, zh) = bounds(node.left), bounds(node.right), bounds(node.product)
    count = (xh - xl + 1) * (yh - yl + 1)
    if count > MAX_PAIRS:
        raise BackendUnsupported(
            f"the {backend} backend reads IR node Product ({node!r}) as the pairs of values of its factors, at most "
            f"{MAX_PAIRS:,}; {node.left} in [{xl}, {xh}] and {node.right} in [{yl}, {yh}] make {count:,}: "
            "use backend 'z3' (nonlinear integer arithmetic)"
        )

    def equals(name: str, value: int) -> Node:
        return f.linear({name: 1}, "=", value)

    cases = []
    for a in range(xl, xh + 1):
        for b in range(yl, yh + 1):
            if node.left == node.right and a != b:
                continue  # a square: one variable, one value
            if zl <= a * b <= zh:
                cases.append(f.and_([equals(node.left, a), equals(node.right, b), equals(node.product, a * b)]))
    return f.or_(cases)
