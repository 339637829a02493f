"""IR → an ASP program (clingo text; clingo-dl difference constraints for arithmetic).

Classical semantics in ASP: every atom is a free choice (``{x(I)}.``) and every IR node gets
an auxiliary atom ``n(I)`` defined by rules that make it true exactly when the node is true —
except a disjunction, whose ``n(I)`` is defined true exactly when the disjunction is false, by
one rule (``n(I) :- not a, not b.``) instead of one per disjunct, its literal being
``not n(I)`` (the definitions are acyclic, so each choice of atoms has exactly one stable
model). Hard clauses become integrity constraints behind selector atoms; soft clauses weak
constraints. Atoms are numbered, so user names never need quoting in ASP.

Arithmetic: difference constraints (``x - y <= k``, ``x <= k``: all of ``before``,
``within`` and bounds on one metric) become clingo-dl ``&diff`` atoms, decided by
negative-cycle detection whatever the domain size. A linear node's truth is reified exactly:
``n`` is a choice, ``C`` is imposed when ``n`` holds and its integer negation otherwise.
Other linear sums are refused (``BackendUnsupported``, naming z3): clingcon could encode them,
but its bound propagation over the ±10⁹ domain took tens of seconds and gigabytes on small
problems with negated sums.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from cda.encodings.ir import (
    NUM_MAX,
    NUM_MIN,
    And,
    Atom,
    Card,
    Const,
    Iff,
    Linear,
    Node,
    Not,
    Or,
    Xor,
    is_difference,
    walk,
)
from cda.errors import BackendUnsupported

__all__ = ["AspEncoder"]


class AspEncoder:
    """Accumulates rules; ``lit(node)`` is the body literal that is true iff ``node`` is."""

    def __init__(self) -> None:
        self.rules: list[str] = []
        self._lit: dict[int, str] = {}
        self.atom_ids: dict[str, int] = {}
        self.numvar_ids: dict[str, int] = {}
        self.uses_theory = False

    def atom_term(self, name: str) -> str:
        """The ASP atom for a free Boolean (an IR atom, a selector, a claim key)."""
        idx = self.atom_ids.get(name)
        if idx is None:
            idx = self.atom_ids[name] = len(self.atom_ids)
            self.rules.append(f"{{x({idx})}}.")
        return f"x({idx})"

    def num_term(self, name: str) -> str:
        idx = self.numvar_ids.get(name)
        if idx is None:
            idx = self.numvar_ids[name] = len(self.numvar_ids)
            self.uses_theory = True
            self.rules.append(f"&diff{{ v({idx}) - 0 }} <= {NUM_MAX}. &diff{{ 0 - v({idx}) }} <= {-NUM_MIN}.")
        return f"v({idx})"

    def lit(self, node: Node) -> str:
        memo = self._lit
        found = memo.get(node.uid)
        if found is not None:
            return found
        for sub in walk([node], skip=memo):
            method = _VISIT.get(type(sub))
            if method is None:
                raise BackendUnsupported(f"the clingo backend cannot encode {type(sub).__name__}")
            memo[sub.uid] = method(self, sub)
        return memo[node.uid]

    def false_body(self, node: Node) -> list[str]:
        """Body literals whose conjunction holds exactly when ``node`` is false.

        ``:- guard, <false_body>.`` forbids ``node`` to be false under ``guard`` with one rule
        and no auxiliary atom for the clause's top: ``a or not (b and c)`` is false exactly
        when ``not a, b, c``. Only the connectives at the top are flattened (a disjunction,
        negations, a conjunction under a negation); what lies below gets its literal as usual.
        For the benchmark's clauses this makes one rule where ``:- guard, <negate(lit(node))>.``
        makes two or three (the constraint, the disjunction's and a conjunction's definitions).

        >>> from cda.encodings.ir import NodeFactory
        >>> f = NodeFactory(); enc = AspEncoder()
        >>> a, b, c = (f.atom(x) for x in "abc")
        >>> enc.false_body(f.or_([a, f.not_(f.and_([b, c]))]))
        ['not x(0)', 'x(1)', 'x(2)']
        """
        out: list[str] = []
        self._body(node, False, out, 0)
        return out

    def _body(self, node: Node, value: bool, out: list[str], depth: int) -> None:
        """Append literals whose conjunction holds exactly when ``node`` has truth ``value``."""
        kind = type(node)
        if depth < 32:  # below that, a deep formula keeps the literal of what is left
            if kind is Not:
                self._body(node.arg, not value, out, depth + 1)  # type: ignore[attr-defined]
                return
            if (kind is Or and not value) or (kind is And and value):
                for arg in node.args:  # type: ignore[attr-defined]
                    self._body(arg, value, out, depth + 1)
                return
        lit = self.lit(node)
        out.append(lit if value else self.negate(lit))

    @staticmethod
    def negate(lit: str) -> str:
        if lit == "#true":
            return "#false"
        if lit == "#false":
            return "#true"
        return lit[4:] if lit.startswith("not ") else f"not {lit}"

    def _aux(self, node: Node) -> str:
        return f"n({node.uid})"

    def visit_Const(self, node: Const) -> str:
        return "#true" if node.value else "#false"

    def visit_Atom(self, node: Atom) -> str:
        return self.atom_term(node.name)

    def visit_Not(self, node: Not) -> str:
        return self.negate(self._lit[node.arg.uid])

    def visit_And(self, node: And) -> str:
        head = self._aux(node)
        self.rules.append(f"{head} :- {', '.join(self._lit[a.uid] for a in node.args)}.")
        return head

    def visit_Or(self, node: Or) -> str:
        # one rule, not one per disjunct: the auxiliary atom is the disjunction's negation
        # (true exactly when every disjunct is false), and the disjunction its default negation
        head = self._aux(node)
        self.rules.append(f"{head} :- {', '.join(self.negate(self._lit[a.uid]) for a in node.args)}.")
        return f"not {head}"

    def visit_Iff(self, node: Iff) -> str:
        head = self._aux(node)
        a, b = self._lit[node.lhs.uid], self._lit[node.rhs.uid]
        self.rules.append(f"{head} :- {a}, {b}.")
        self.rules.append(f"{head} :- {self.negate(a)}, {self.negate(b)}.")
        return head

    def _elements(self, args: tuple[Node, ...]) -> str:
        return "; ".join(f"{i}: {self._lit[a.uid]}" for i, a in enumerate(args))

    def visit_Xor(self, node: Xor) -> str:
        head = self._aux(node)
        if len(node.args) == 2:
            a, b = (self._lit[x.uid] for x in node.args)
            self.rules.append(f"{head} :- {a}, {self.negate(b)}.")
            self.rules.append(f"{head} :- {self.negate(a)}, {b}.")
        else:
            self.rules.append(f"{head} :- C = #count{{ {self._elements(node.args)} }}, C \\ 2 = 1.")
        return head

    def visit_Card(self, node: Card) -> str:
        head = self._aux(node)
        agg = f"#count{{ {self._elements(node.args)} }}"
        if node.op == "<=":
            self.rules.append(f"{head} :- {agg} <= {node.k}.")
        elif node.op == ">=":
            self.rules.append(f"{head} :- {node.k} <= {agg}.")
        else:
            self.rules.append(f"{head} :- {agg} = {node.k}.")
        return head

    def visit_Linear(self, node: Linear) -> str:
        head = self._aux(node)
        if not is_difference(node):
            raise BackendUnsupported(
                f"the clingo backend decides difference constraints (x - y <= k, x <= k) with clingo-dl; "
                f"the linear constraint {node!r} is not one: use backend 'z3'"
            )
        if abs(node.bound) >= 2**31 - 1:
            raise BackendUnsupported(
                f"the clingo backend's integers are 32-bit; the bound in {node!r} is too large: use backend 'z3'"
            )
        pos = [self.num_term(v) for c, v in node.terms if c > 0]
        neg = [self.num_term(v) for c, v in node.terms if c < 0]
        u, w = (pos[0] if pos else "0"), (neg[0] if neg else "0")
        self.rules.append(f"{{{head}}}.")
        self.rules.append(f"&diff{{ {u} - {w} }} <= {node.bound} :- {head}.")
        self.rules.append(f"&diff{{ {w} - {u} }} <= {-node.bound - 1} :- not {head}.")
        return head

    def program(self) -> str:
        return "\n".join(self.rules) + "\n"


#: one visitor per IR node type, looked up by the node's exact type
_VISIT: dict[type, Callable[[AspEncoder, Any], str]] = {
    kind: getattr(AspEncoder, f"visit_{kind.__name__}") for kind in (Const, Atom, Not, And, Or, Iff, Xor, Card, Linear)
}
