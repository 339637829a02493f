"""The independent evaluator: the truth of an IR node under a full assignment.

It shares no code with either compiler, so a model a solver returns can be re-checked here
before it is reported; a disagreement is a bug (``EvaluatorDisagreement``), never output. A node
type it does not know is refused by name (``BackendUnsupported``), as the encoders refuse one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from operator import itemgetter
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # numpy loads with the first batch evaluation, not at start-up
    import numpy as np

from cda.encodings.ir import And, Atom, Card, Const, Iff, Linear, Node, Not, Or, Xor, walk
from cda.errors import BackendUnsupported

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
    raise BackendUnsupported(f"the evaluator cannot evaluate IR node {type(node).__name__}")


def evaluate_many(nodes: list[Node], assignment: Assignment) -> list[bool]:
    """Truth values of ``nodes`` under ``assignment`` (atoms → bool, numeric vars → int).

    >>> from cda.encodings.ir import NodeFactory
    >>> f = NodeFactory(); a, b = f.atom("a"), f.atom("b")
    >>> evaluate_many([f.xor([a, b]), f.card("<=", 1, [a, b])], {"a": True, "b": True})
    [False, False]
    """
    memo: dict[int, bool] = {}
    for node in walk(nodes):
        kind = type(node)  # the commonest kinds inline: a call per node was half the time
        if kind is Atom:
            memo[node.uid] = bool(assignment[node.name])  # type: ignore[attr-defined]
        elif kind is Not:
            memo[node.uid] = not memo[node.arg.uid]  # type: ignore[attr-defined]
        elif kind is Or:
            memo[node.uid] = any([memo[a.uid] for a in node.args])  # type: ignore[attr-defined]
        elif kind is And:
            memo[node.uid] = all([memo[a.uid] for a in node.args])  # type: ignore[attr-defined]
        else:
            memo[node.uid] = _value(node, assignment, memo)
    return [memo[n.uid] for n in nodes]


def evaluate(node: Node, assignment: Assignment) -> bool:
    """Truth value of one node."""
    return evaluate_many([node], assignment)[0]


class BatchEvaluator:
    """Truth values of a fixed list of nodes over many assignments at once.

    The same semantics as :func:`evaluate_many`, computed column-wise: one pass over the DAG
    for all models, which is what makes re-checking thousands of enumerated models cheap. A
    column is a Python integer used as a bitset (bit ``i`` is the node's value in assignment
    ``i``), so ``and``/``or``/``not`` cost one integer operation per node whatever the number of
    models (numpy's per-call overhead, about 2 µs, was most of the time on large problems);
    cardinality and linear nodes are counted with numpy.

    >>> from cda.encodings.ir import NodeFactory
    >>> f = NodeFactory(); a, b = f.atom("a"), f.atom("b")
    >>> BatchEvaluator([f.or_([a, b])]).evaluate([{"a": False, "b": False}, {"a": True, "b": False}]).tolist()
    [[False, True]]
    """

    def __init__(self, nodes: list[Node]) -> None:
        self.nodes = nodes
        self.order = list(walk(nodes))
        self._atoms = [node for node in self.order if type(node) is Atom]

    def evaluate(self, assignments: Sequence[Assignment]) -> np.ndarray:
        """A (len(nodes) × len(assignments)) Boolean array."""
        import numpy as np

        n = len(assignments)
        full = (1 << n) - 1
        col = self._atom_columns(assignments)
        for node in self.order:
            kind = type(node)
            if kind is Atom:
                continue
            if kind is Not:
                v = full ^ col[node.arg.uid]  # type: ignore[attr-defined]
            elif kind is Or:
                v = 0
                for c in node.args:  # type: ignore[attr-defined]
                    v |= col[c.uid]
            elif kind is And:
                v = full
                for c in node.args:  # type: ignore[attr-defined]
                    v &= col[c.uid]
            elif kind is Const:
                v = full if node.value else 0  # type: ignore[attr-defined]
            elif kind is Iff:
                v = full ^ col[node.lhs.uid] ^ col[node.rhs.uid]  # type: ignore[attr-defined]
            elif kind is Xor:
                v = 0
                for c in node.args:  # type: ignore[attr-defined]
                    v ^= col[c.uid]
            elif kind is Card:
                assert isinstance(node, Card)
                count = np.sum([_bits(col[c.uid], n) for c in node.args], axis=0, dtype=np.int64)
                k = node.k
                v = _pack(np.asarray(count <= k if node.op == "<=" else count >= k if node.op == ">=" else count == k))
            elif kind is Linear:
                assert isinstance(node, Linear)
                total = np.zeros(n, dtype=object)  # Python ints: no overflow
                for c, var in node.terms:
                    total = total + c * np.array([int(a[var]) for a in assignments], dtype=object)
                v = _pack(np.array([t <= node.bound for t in total], dtype=bool))
            else:
                raise BackendUnsupported(f"the evaluator cannot evaluate IR node {type(node).__name__}")
            col[node.uid] = v
        width = (n + 7) // 8
        data = b"".join(col[x.uid].to_bytes(width, "little") for x in self.nodes)
        packed = np.frombuffer(data, dtype=np.uint8).reshape(len(self.nodes), width)
        return np.unpackbits(packed, axis=1, count=n, bitorder="little").astype(bool)

    def _atom_columns(self, assignments: Sequence[Assignment]) -> dict[int, int]:
        """One bitset per atom, read from the assignments row by row (``itemgetter`` in C)."""
        import numpy as np

        atoms = self._atoms
        if not atoms:
            return {}
        names = [a.name for a in atoms]
        get = itemgetter(*names)
        rows = [get(a) for a in assignments] if len(names) > 1 else [(get(a),) for a in assignments]
        table = np.array(rows, dtype=bool).reshape(len(assignments), len(names))
        packed = np.packbits(table, axis=0, bitorder="little").T.tobytes()
        width = (len(assignments) + 7) // 8
        return {
            atom.uid: int.from_bytes(packed[i * width : (i + 1) * width], "little") for i, atom in enumerate(atoms)
        }


def _bits(column: int, n: int) -> np.ndarray:
    """A bitset column as ``n`` Booleans."""
    import numpy as np

    raw = np.frombuffer(column.to_bytes((n + 7) // 8, "little"), dtype=np.uint8)
    return np.unpackbits(raw, count=n, bitorder="little").astype(bool)


def _pack(values: np.ndarray) -> int:
    """``n`` Booleans as a bitset column."""
    import numpy as np

    return int.from_bytes(np.packbits(values, bitorder="little").tobytes(), "little")
