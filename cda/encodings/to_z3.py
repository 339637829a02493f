"""IR → z3 terms. One method per IR node; shared sub-formulas are translated once."""

from __future__ import annotations

from collections.abc import Callable

import z3

from cda.encodings.ir import And, Atom, Card, Const, Iff, Linear, Node, Not, Or, Xor, walk
from cda.errors import BackendUnsupported

__all__ = ["Z3Encoder"]


class Z3Encoder:
    """Translates nodes into terms of one z3 context; atoms become Bools, numeric vars Ints."""

    def __init__(self, ctx: z3.Context) -> None:
        self.ctx = ctx
        self._memo: dict[int, z3.BoolRef] = {}
        self.bools: dict[str, z3.BoolRef] = {}
        self.ints: dict[str, z3.ArithRef] = {}

    def bool_var(self, name: str) -> z3.BoolRef:
        var = self.bools.get(name)
        if var is None:
            var = self.bools[name] = z3.Bool(name, self.ctx)
        return var

    def int_var(self, name: str) -> z3.ArithRef:
        var = self.ints.get(name)
        if var is None:
            var = self.ints[name] = z3.Int(name, self.ctx)
        return var

    def encode(self, node: Node) -> z3.BoolRef:
        for sub in walk([node]):
            if sub.uid not in self._memo:
                method: Callable[[Node], z3.BoolRef] | None = getattr(self, f"visit_{type(sub).__name__}", None)
                if method is None:
                    raise BackendUnsupported(f"the z3 backend cannot encode {type(sub).__name__}")
                self._memo[sub.uid] = method(sub)
        return self._memo[node.uid]

    def _m(self, node: Node) -> z3.BoolRef:
        return self._memo[node.uid]

    def visit_Const(self, node: Const) -> z3.BoolRef:
        return z3.BoolVal(node.value, self.ctx)

    def visit_Atom(self, node: Atom) -> z3.BoolRef:
        return self.bool_var(node.name)

    def visit_Not(self, node: Not) -> z3.BoolRef:
        return z3.Not(self._m(node.arg))

    def visit_And(self, node: And) -> z3.BoolRef:
        return z3.And([self._m(a) for a in node.args])

    def visit_Or(self, node: Or) -> z3.BoolRef:
        return z3.Or([self._m(a) for a in node.args])

    def visit_Iff(self, node: Iff) -> z3.BoolRef:
        return self._m(node.lhs) == self._m(node.rhs)

    def visit_Xor(self, node: Xor) -> z3.BoolRef:
        out = self._m(node.args[0])
        for a in node.args[1:]:
            out = z3.Xor(out, self._m(a))
        return out

    def visit_Card(self, node: Card) -> z3.BoolRef:
        pairs = [(self._m(a), 1) for a in node.args]
        if node.op == "<=":
            return z3.PbLe(pairs, node.k)
        if node.op == ">=":
            return z3.PbGe(pairs, node.k)
        return z3.PbEq(pairs, node.k)

    def visit_Linear(self, node: Linear) -> z3.BoolRef:
        lhs = z3.Sum([c * self.int_var(v) for c, v in node.terms])
        return lhs <= node.bound
