"""IR → clingo program literals through clingo's backend API: no program text, no grounder.

The clingo backend writes Boolean problems straight into the solver through
``Control.backend()`` (and the parts it adds later, such as an observation group a search
turned out to need): printing, parsing and grounding the same rules costs about ten times as
much (one c3540 copy, 12k nodes: 0.12 s against 0.95 s). The semantics are those of
:mod:`cda.encodings.to_asp`: each node gets an auxiliary atom defined by rules that make it true
exactly when the node is (a disjunction's atom is its negation, as there); negation is default
negation of an acyclically defined atom, hence classical.

Only Boolean nodes: a ``Linear`` node raises :class:`~cda.errors.BackendUnsupported`. Problems
with metrics or event times go through the text program and clingo-dl instead.
"""

from __future__ import annotations

from collections.abc import Callable

import clingo

from cda.encodings.ir import And, Atom, Card, Const, Iff, Node, Not, Or, Xor, walk
from cda.errors import BackendUnsupported

__all__ = ["DirectEncoder"]


class DirectEncoder:
    """Node → program literal, memoised by node uid for the life of one ``Control``.

    ``atom_literal(name)`` gives the literal of a problem atom (already declared by the caller).
    Call :meth:`lit` only inside a ``with control.backend() as backend`` block, passing it.
    """

    def __init__(self, atom_literal: Callable[[str], int]) -> None:
        self._atom_literal = atom_literal
        self._lit: dict[int, int] = {}
        self._true: int | None = None

    def lit(self, backend: clingo.Backend, node: Node) -> int:
        memo = self._lit
        found = memo.get(node.uid)
        if found is not None:
            return found
        for sub in walk([node], skip=memo):
            memo[sub.uid] = self._encode(backend, sub)
        return memo[node.uid]

    def false_body(self, backend: clingo.Backend, node: Node) -> list[int]:
        """Body literals whose conjunction holds exactly when ``node`` is false, as
        :meth:`AspEncoder.false_body <cda.encodings.to_asp.AspEncoder.false_body>` does for text:
        a clause ``a or not (b and c)`` is one constraint ``:- guard, not a, b, c`` and needs no
        auxiliary atom for its top."""
        out: list[int] = []
        stack: list[tuple[Node, bool, int]] = [(node, False, 0)]
        while stack:
            sub, value, depth = stack.pop()
            kind = type(sub)
            if depth < 32:
                if kind is Not:
                    stack.append((sub.arg, not value, depth + 1))  # type: ignore[attr-defined]
                    continue
                if (kind is Or and not value) or (kind is And and value):
                    stack.extend((a, value, depth + 1) for a in reversed(sub.args))  # type: ignore[attr-defined]
                    continue
            lit = self._atom_literal(sub.name) if kind is Atom else self.lit(backend, sub)  # type: ignore[attr-defined]
            out.append(lit if value else -lit)
        return out

    def _truth(self, backend: clingo.Backend) -> int:
        if self._true is None:
            self._true = backend.add_atom()
            backend.add_rule([self._true])
        return self._true

    def _encode(self, b: clingo.Backend, node: Node) -> int:
        memo = self._lit
        kind = type(node)
        if kind is Atom:
            return self._atom_literal(node.name)  # type: ignore[attr-defined]
        if kind is Not:
            return -memo[node.arg.uid]  # type: ignore[attr-defined]
        if kind is Const:
            t = self._truth(b)
            return t if node.value else -t  # type: ignore[attr-defined]
        if kind is And:
            head = b.add_atom()
            b.add_rule([head], [memo[a.uid] for a in node.args])  # type: ignore[attr-defined]
            return head
        if kind is Or:
            # one rule, as in to_asp: the auxiliary atom is the disjunction's negation
            head = b.add_atom()
            b.add_rule([head], [-memo[a.uid] for a in node.args])  # type: ignore[attr-defined]
            return -head
        if kind is Iff:
            x, y = memo[node.lhs.uid], memo[node.rhs.uid]  # type: ignore[attr-defined]
            return self._iff(b, x, y)
        if kind is Xor:
            lits = [memo[a.uid] for a in node.args]  # type: ignore[attr-defined]
            acc = lits[0]
            for y in lits[1:]:
                acc = -self._iff(b, acc, y)  # x xor y is not (x iff y)
            return acc
        if kind is Card:
            assert isinstance(node, Card)
            elems = [(memo[a.uid], 1) for a in node.args]
            if node.op == ">=":
                return self._at_least(b, node.k, elems)
            if node.op == "<=":
                return -self._at_least(b, node.k + 1, elems)
            head = b.add_atom()
            b.add_rule([head], [self._at_least(b, node.k, elems), -self._at_least(b, node.k + 1, elems)])
            return head
        raise BackendUnsupported(f"the clingo backend's direct encoder cannot encode {kind.__name__}")

    @staticmethod
    def _iff(b: clingo.Backend, x: int, y: int) -> int:
        head = b.add_atom()
        b.add_rule([head], [x, y])
        b.add_rule([head], [-x, -y])
        return head

    @staticmethod
    def _at_least(b: clingo.Backend, k: int, elems: list[tuple[int, int]]) -> int:
        head = b.add_atom()
        b.add_weight_rule([head], k, elems)
        return head
