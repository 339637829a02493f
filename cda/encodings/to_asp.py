"""IR → ASP: one encoder, writing to a sink (clingo's backend API, or program text).

Classical semantics in ASP: every IR node gets an auxiliary atom defined by rules that make it
true exactly when the node is true — except a disjunction, whose atom is defined true exactly
when the disjunction is false, by one rule (``n :- not a, not b.``) instead of one per
disjunct, its literal being ``not n``. The definitions are acyclic, so each choice of the free
atoms has exactly one stable model, and default negation of a defined atom is classical.

Literals are clingo's program literals: positive integers for atoms, negated for their default
negation. A *sink* is what clingo's ``Backend`` offers (``add_atom``, ``add_rule``,
``add_weight_rule``, ``add_minimize``, ``add_project``), so the clingo backend writes Boolean
problems straight into the solver with ``Control.backend()`` as the sink: printing, parsing and
grounding the same rules costs about ten times as much (one c3540 copy, 12k nodes: 0.12 s
against 0.95 s). :class:`ProgramText` is the other sink: the same rules as program text, for
what needs clingo's grounder — clingo-dl's difference constraints.

Arithmetic: difference constraints (``x - y <= k``, ``x <= k``: all of ``before``, ``within``
and bounds on one metric) become clingo-dl ``&diff`` atoms, decided by negative-cycle detection
whatever the domain size. A linear node's truth is reified exactly: ``n`` is a choice, the
constraint is imposed when ``n`` holds and its integer negation otherwise. Other linear sums
are refused (``BackendUnsupported``, naming z3): clingcon could encode them, but its bound
propagation over the ±10⁹ domain took tens of seconds and gigabytes on small problems with
negated sums.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

from cda.contracts.deadline import NO_DEADLINE, Deadline, OutOfTime
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
    in_order,
    is_difference,
)
from cda.errors import BackendUnsupported

__all__ = ["AspEncoder", "AspSink", "ProgramText"]


class AspSink(Protocol):
    """Where the encoder writes: the part of ``clingo.Backend`` it uses."""

    def add_atom(self, symbol: Any = None) -> int: ...

    def add_rule(self, head: Sequence[int], body: Sequence[int] = ..., choice: bool = ...) -> None: ...

    def add_weight_rule(
        self, head: Sequence[int], lower: int, body: Sequence[tuple[int, int]], choice: bool = ...
    ) -> None: ...

    def add_minimize(self, priority: int, literals: Sequence[tuple[int, int]]) -> None: ...

    def add_project(self, atoms: Sequence[int]) -> None: ...


class ProgramText:
    """A sink that prints the rules as an ASP program (clingo text, clingo-dl's ``&diff``).

    An atom made with a symbol is printed as that symbol, any other as ``a(I)``, ``I`` being
    its literal here. :meth:`take` returns what was written since it was last called.

    >>> t = ProgramText(); a = t.add_atom(); t.add_rule([a], [], True); t.add_rule([], [-a])
    >>> print(t.take(), end="")
    {a(1)}.
    :- not a(1).
    """

    def __init__(self) -> None:
        self._names = [""]  # literal → name; 0 is no literal
        self.rules: list[str] = []
        self._taken = 0
        self._weak = 0  # weak constraints written: each gets a term of its own
        self.numvar_ids: dict[str, int] = {}
        self.uses_theory = False

    def name(self, lit: int) -> str:
        return self._names[lit] if lit > 0 else f"not {self._names[-lit]}"

    def _body(self, body: Sequence[int]) -> str:
        return ", ".join(map(self.name, body))

    def add_atom(self, symbol: Any = None) -> int:
        lit = len(self._names)
        self._names.append(f"a({lit})" if symbol is None else str(symbol))
        return lit

    def add_rule(self, head: Sequence[int], body: Sequence[int] = (), choice: bool = False) -> None:
        heads = "; ".join(self._names[h] for h in head)
        if choice:
            heads = "{" + heads + "}"
        if not body:
            self.rules.append(f"{heads}." if heads else ":- #true.")
        else:
            self.rules.append(f"{heads} :- {self._body(body)}." if heads else f":- {self._body(body)}.")

    def add_weight_rule(
        self, head: Sequence[int], lower: int, body: Sequence[tuple[int, int]], choice: bool = False
    ) -> None:
        heads = "; ".join(self._names[h] for h in head)
        if choice:
            heads = "{" + heads + "}"
        elements = "; ".join(f"{w},{i}: {self.name(lit)}" for i, (lit, w) in enumerate(body))
        self.rules.append(f"{heads} :- {lower} <= #sum{{ {elements} }}.")

    def add_minimize(self, priority: int, literals: Sequence[tuple[int, int]]) -> None:
        for lit, weight in literals:
            self.rules.append(f":~ {self.name(lit)}. [{weight}@{priority}, {self._weak}]")
            self._weak += 1

    def add_project(self, atoms: Sequence[int]) -> None:
        self.rules.extend(f"#project {self._names[a]}." for a in atoms)

    def add_text(self, text: str) -> None:
        """A statement the encoder does not make (``#show`` …), as written."""
        self.rules.append(text)

    def int_var(self, name: str, low: int = NUM_MIN, high: int = NUM_MAX) -> str:
        """The clingo-dl node of integer variable ``name``, bounded to [``low``, ``high``] when
        first made."""
        idx = self.numvar_ids.get(name)
        if idx is None:
            idx = self.numvar_ids[name] = len(self.numvar_ids)
            self.uses_theory = True
            self.rules.append(f"&diff{{ v({idx}) - 0 }} <= {high}. &diff{{ 0 - v({idx}) }} <= {-low}.")
        return f"v({idx})"

    def add_difference(self, head: int, plus: str | None, minus: str | None, bound: int) -> None:
        """``head`` is a free atom true exactly when ``plus - minus <= bound`` (``None`` is 0)."""
        u = self.int_var(plus) if plus is not None else "0"
        w = self.int_var(minus) if minus is not None else "0"
        h = self._names[head]
        self.rules.append(f"{{{h}}}.")
        self.rules.append(f"&diff{{ {u} - {w} }} <= {bound} :- {h}.")
        self.rules.append(f"&diff{{ {w} - {u} }} <= {-bound - 1} :- not {h}.")

    def take(self) -> str:
        """The program written since the last call."""
        text = "\n".join(self.rules[self._taken :]) + "\n"
        self._taken = len(self.rules)
        return text


class AspEncoder:
    """Node → program literal, memoised by node uid, written to ``sink``.

    ``atom_literal(name)`` gives the literal of a problem atom (declared by the caller).
    ``sink`` may be replaced between calls (clingo hands out a new backend object for each
    ``with control.backend()`` block); literals already made stay valid.

    >>> from cda.encodings.ir import NodeFactory
    >>> f = NodeFactory(); t = ProgramText(); x = t.add_atom("x")
    >>> enc = AspEncoder(t, {"x": x}.__getitem__)
    >>> enc.lit(f.or_([f.atom("x"), f.not_(f.atom("x"))]))
    -2
    >>> print(t.take(), end="")
    a(2) :- not x, x.
    """

    name = "clingo"

    def __init__(
        self, sink: AspSink, atom_literal: Callable[[str], int], deadline: Deadline = NO_DEADLINE, total: int = 0
    ) -> None:
        self.sink = sink
        self.deadline = deadline  # read every few hundred nodes (a clause may hold millions)
        self.total = total  # how many nodes the problem has, for the note when time runs out
        self._atom_literal = atom_literal
        self._lit: dict[int, int] = {}
        self._true: int | None = None

    def _out_of_time(self, done: int) -> OutOfTime:
        of = f" of {self.total:,}" if self.total >= done else ""
        return OutOfTime(f"while encoding for clingo ({done:,}{of} formula nodes)")

    def lit(self, node: Node) -> int:
        """The literal true exactly when ``node`` is, encoding what is not encoded yet."""
        memo = self._lit
        found = memo.get(node.uid)
        if found is not None:
            return found
        for sub in in_order([node], memo):
            if self.deadline.tick():
                raise self._out_of_time(len(memo))
            method = _VISIT.get(type(sub))
            if method is None:
                raise BackendUnsupported(f"the {self.name} backend cannot encode IR node {type(sub).__name__}")
            memo[sub.uid] = method(self, sub)
        return memo[node.uid]

    def false_body(self, node: Node) -> list[int]:
        """Body literals whose conjunction holds exactly when ``node`` is false.

        ``:- guard, <false_body>.`` forbids ``node`` to be false under ``guard`` with one rule
        and no auxiliary atom for the clause's top: ``a or not (b and c)`` is false exactly
        when ``not a, b, c``. Only the connectives at the top are flattened (a disjunction,
        negations, a conjunction under a negation); what lies below gets its literal as usual.

        >>> from cda.encodings.ir import NodeFactory
        >>> f = NodeFactory(); t = ProgramText()
        >>> lits = {n: t.add_atom(n) for n in "abc"}
        >>> a, b, c = (f.atom(x) for x in "abc")
        >>> AspEncoder(t, lits.__getitem__).false_body(f.or_([a, f.not_(f.and_([b, c]))]))
        [-1, 2, 3]
        """
        if type(node) is Or:  # the common clause: a disjunction of literals and negated conjunctions
            fast = self._false_disjunction(node)
            if fast is not None:
                return fast
        out: list[int] = []
        stack: list[tuple[Node, bool, int]] = [(node, False, 0)]
        while stack:
            sub, value, depth = stack.pop()
            kind = type(sub)
            if depth < 32:  # below that, a deep formula keeps the literal of what is left
                if kind is Not:
                    stack.append((sub.arg, not value, depth + 1))  # type: ignore[attr-defined]
                    continue
                if (kind is Or and not value) or (kind is And and value):
                    stack.extend((a, value, depth + 1) for a in reversed(sub.args))  # type: ignore[attr-defined]
                    continue
            lit = self._atom_literal(sub.name) if kind is Atom else self.lit(sub)  # type: ignore[attr-defined]
            out.append(lit if value else -lit)
        return out

    def _false_disjunction(self, node: Or) -> list[int] | None:
        """:meth:`false_body` of ``a or not b or not (c and not d) …`` (atoms, negated atoms and
        negated conjunctions of them), in one loop; ``None`` for anything else. The same body,
        literal for literal, as the general walk gives."""
        atom = self._atom_literal
        out: list[int] = []
        for a in node.args:
            kind = type(a)
            if kind is Atom:
                out.append(-atom(a.name))  # type: ignore[attr-defined]
                continue
            if kind is not Not:
                return None
            inner = a.arg  # type: ignore[attr-defined]
            kind = type(inner)
            if kind is Atom:
                out.append(atom(inner.name))
            elif kind is And:
                for b in inner.args:
                    kb = type(b)
                    if kb is Atom:
                        out.append(atom(b.name))  # type: ignore[attr-defined]
                    elif kb is Not and type(b.arg) is Atom:  # type: ignore[attr-defined]
                        out.append(-atom(b.arg.name))  # type: ignore[attr-defined]
                    else:
                        return None
            else:
                return None
        return out

    def _iff(self, x: int, y: int) -> int:
        sink = self.sink
        head = sink.add_atom()
        sink.add_rule([head], [x, y])
        sink.add_rule([head], [-x, -y])
        return head

    def _at_least(self, k: int, lits: list[int]) -> int:
        head = self.sink.add_atom()
        self.sink.add_weight_rule([head], k, [(lit, 1) for lit in lits])
        return head

    # ---- one method per IR node: each returns the node's literal
    def visit_Const(self, node: Const) -> int:
        if self._true is None:
            self._true = self.sink.add_atom()
            self.sink.add_rule([self._true])
        return self._true if node.value else -self._true

    def visit_Atom(self, node: Atom) -> int:
        return self._atom_literal(node.name)

    def visit_Not(self, node: Not) -> int:
        return -self._lit[node.arg.uid]

    def visit_And(self, node: And) -> int:
        memo = self._lit
        head = self.sink.add_atom()
        self.sink.add_rule([head], [memo[a.uid] for a in node.args])
        return head

    def visit_Or(self, node: Or) -> int:
        # one rule, not one per disjunct: the auxiliary atom is the disjunction's negation
        memo = self._lit
        head = self.sink.add_atom()
        self.sink.add_rule([head], [-memo[a.uid] for a in node.args])
        return -head

    def visit_Iff(self, node: Iff) -> int:
        return self._iff(self._lit[node.lhs.uid], self._lit[node.rhs.uid])

    def visit_Xor(self, node: Xor) -> int:
        lits = [self._lit[a.uid] for a in node.args]
        acc = lits[0]
        for y in lits[1:]:
            acc = -self._iff(acc, y)  # x xor y is not (x iff y)
        return acc

    def visit_Card(self, node: Card) -> int:
        lits = [self._lit[a.uid] for a in node.args]
        if node.op == ">=":
            return self._at_least(node.k, lits)
        if node.op == "<=":
            return -self._at_least(node.k + 1, lits)
        head = self.sink.add_atom()
        self.sink.add_rule([head], [self._at_least(node.k, lits), -self._at_least(node.k + 1, lits)])
        return head

    def visit_Linear(self, node: Linear) -> int:
        if not is_difference(node):
            raise BackendUnsupported(
                f"the clingo backend decides difference constraints (x - y <= k, x <= k) with clingo-dl; "
                f"the linear constraint {node!r} is not one: use backend 'z3'"
            )
        if abs(node.bound) >= 2**31 - 1:
            raise BackendUnsupported(
                f"the clingo backend's integers are 32-bit; the bound in {node!r} is too large: use backend 'z3'"
            )
        add_difference = getattr(self.sink, "add_difference", None)
        if add_difference is None:
            raise BackendUnsupported(
                "the clingo backend cannot encode IR node Linear through clingo's backend API "
                "(difference constraints go through program text and clingo-dl)"
            )
        plus = [v for c, v in node.terms if c > 0]
        minus = [v for c, v in node.terms if c < 0]
        head = self.sink.add_atom()
        add_difference(head, plus[0] if plus else None, minus[0] if minus else None, node.bound)
        return head


#: one visitor per IR node type, looked up by the node's exact type
_VISIT: dict[type, Callable[[AspEncoder, Any], int]] = {
    kind: getattr(AspEncoder, f"visit_{kind.__name__}") for kind in (Const, Atom, Not, And, Or, Iff, Xor, Card, Linear)
}
