"""The ground intermediate representation: a hash-consed DAG of Boolean and linear nodes.

Everything the DSL can say is grounded (quantifiers unrolled over their finite domains,
closed predicates and Ken paths evaluated, units normalised) into these few node types.
Both compilers and the independent evaluator read only this module's nodes.

Besides Boolean atoms and bounded integers (each integer variable has its own range, so a
product can model 64-bit values and read an overflow as a range check), a problem may have
*terms* of a :class:`Sort`: strings, and populations (an uninterpreted sort: named constants
that differ from each other, and any number of other elements; or, when the sort is *closed*,
exactly the values of its domain). Terms appear only in :class:`Eq` (two terms are equal) and
:class:`Like` (a string matches a wildcard pattern). z3 decides them in its theories of
uninterpreted sorts, strings and regular languages; a backend without those reads each sort as
a finite domain (:mod:`cda.encodings.finite`: the constants the problem names and one fresh
value per variable are all a model ever needs), or refuses by name (``Like`` on a variable);
docs/architecture.md, "The IR".

Nodes are interned by :class:`NodeFactory`: building the same formula twice returns the same
object, so a sub-formula shared by many clauses is encoded once, and identity is equality.
The factory folds constants and flattens nested ``and``/``or`` as it builds.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Container, Iterable, Iterator
from dataclasses import dataclass, field
from fractions import Fraction
from operator import attrgetter
from typing import Literal

__all__ = [
    "Node",
    "Const",
    "Atom",
    "Not",
    "And",
    "Or",
    "Iff",
    "Xor",
    "Card",
    "Linear",
    "Product",
    "Eq",
    "Like",
    "Sort",
    "TermVar",
    "TermConst",
    "Term",
    "like_matches",
    "fresh_labels",
    "NodeFactory",
    "walk",
    "in_order",
    "is_difference",
    "AtomInfo",
    "NumVar",
    "Clause",
    "SoftClause",
    "Claim",
    "GroundProblem",
    "MinimalGoal",
    "NUM_MIN",
    "NUM_MAX",
]

#: every numeric variable (metric, event time) lies in [NUM_MIN, NUM_MAX] on both backends
NUM_MIN = -1_000_000_000
NUM_MAX = 1_000_000_000


class Node:
    """Base of IR nodes. ``uid`` is the node's interning number (stable within a factory)."""

    __slots__ = ("uid",)
    uid: int

    @property
    def children(self) -> tuple[Node, ...]:
        return ()


class Const(Node):
    __slots__ = ("value",)

    def __init__(self, value: bool) -> None:
        self.value = value

    def __repr__(self) -> str:
        return "true" if self.value else "false"


class Atom(Node):
    """A ground Boolean atom such as ``down(db)``; its truth is chosen by the solver."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name


class Not(Node):
    __slots__ = ("arg",)

    def __init__(self, arg: Node) -> None:
        self.arg = arg

    @property
    def children(self) -> tuple[Node, ...]:
        return (self.arg,)

    def __repr__(self) -> str:
        return f"not {self.arg!r}"


class And(Node):
    __slots__ = ("args",)

    def __init__(self, args: tuple[Node, ...]) -> None:
        self.args = args

    @property
    def children(self) -> tuple[Node, ...]:
        return self.args

    def __repr__(self) -> str:
        return "(" + " and ".join(map(repr, self.args)) + ")"


class Or(Node):
    __slots__ = ("args",)

    def __init__(self, args: tuple[Node, ...]) -> None:
        self.args = args

    @property
    def children(self) -> tuple[Node, ...]:
        return self.args

    def __repr__(self) -> str:
        return "(" + " or ".join(map(repr, self.args)) + ")"


class Iff(Node):
    __slots__ = ("lhs", "rhs")

    def __init__(self, lhs: Node, rhs: Node) -> None:
        self.lhs = lhs
        self.rhs = rhs

    @property
    def children(self) -> tuple[Node, ...]:
        return (self.lhs, self.rhs)

    def __repr__(self) -> str:
        return f"({self.lhs!r} iff {self.rhs!r})"


class Xor(Node):
    """Parity: true when an odd number of ``args`` are true (``xor(a, b)`` is "exactly one")."""

    __slots__ = ("args",)

    def __init__(self, args: tuple[Node, ...]) -> None:
        self.args = args

    @property
    def children(self) -> tuple[Node, ...]:
        return self.args

    def __repr__(self) -> str:
        return "xor(" + ", ".join(map(repr, self.args)) + ")"


class Card(Node):
    """``count(args true) <op> k`` with op one of ``<=``, ``>=``, ``=``."""

    __slots__ = ("op", "k", "args")

    def __init__(self, op: str, k: int, args: tuple[Node, ...]) -> None:
        self.op = op
        self.k = k
        self.args = args

    @property
    def children(self) -> tuple[Node, ...]:
        return self.args

    def __repr__(self) -> str:
        return f"count({', '.join(map(repr, self.args))}) {self.op} {self.k}"


class Linear(Node):
    """``sum(coef * var) <= bound`` over integer variables (``op`` is always ``<=``)."""

    __slots__ = ("terms", "op", "bound")

    def __init__(self, terms: tuple[tuple[int, str], ...], op: str, bound: int) -> None:
        self.terms = terms
        self.op = op
        self.bound = bound

    def __repr__(self) -> str:
        lhs = " + ".join(f"{c}*{v}" for c, v in self.terms)
        return f"{lhs} {self.op} {self.bound}"


class Product(Node):
    """``product = left * right`` over three integer variables (by name): a product of two
    unknowns, which no :class:`Linear` node can say (Cedar's ``x * y`` of two context values).

    Every variable has its declared range, so the question stays decidable: z3 decides it in
    nonlinear integer arithmetic, a backend without that reads it as the pairs of values of
    ``left`` and ``right`` (:mod:`cda.encodings.products`) where the ranges are small, and refuses
    it by name where not. An overflow is the product's range check, made by whoever needs one.
    """

    __slots__ = ("product", "left", "right")

    def __init__(self, product: str, left: str, right: str) -> None:
        self.product = product
        self.left = left
        self.right = right

    @property
    def variables(self) -> tuple[str, str, str]:
        return (self.product, self.left, self.right)

    def __repr__(self) -> str:
        return f"{self.product} = {self.left} * {self.right}"


class Sort:
    """A sort of terms: ``string`` (text) or ``population`` (an uninterpreted sort whose named
    constants differ from each other). ``domain``, when given, closes it: its terms take exactly
    those values. Two sorts of one problem are the same sort when their names are.

    >>> Sort("User", "population") == Sort("User", "population", ("alice",))
    True
    """

    __slots__ = ("name", "kind", "domain")

    def __init__(self, name: str, kind: Literal["string", "population"], domain: tuple[str, ...] | None = None) -> None:
        self.name = name
        self.kind = kind
        self.domain = domain

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Sort) and other.name == self.name

    def __hash__(self) -> int:
        return hash(("sort", self.name))

    def __repr__(self) -> str:
        return self.name


class TermVar:
    """A term variable of ``sort``; a model gives it a string (a constant's value, or a fresh
    value, :func:`fresh_labels`)."""

    __slots__ = ("name", "sort")

    def __init__(self, name: str, sort: Sort) -> None:
        self.name = name
        self.sort = sort

    def __eq__(self, other: object) -> bool:
        return isinstance(other, TermVar) and other.name == self.name

    def __hash__(self) -> int:
        return hash(("var", self.name))

    def __repr__(self) -> str:
        return self.name


class TermConst:
    """A named constant of ``sort`` (a string literal, or an entity's id)."""

    __slots__ = ("sort", "value")

    def __init__(self, sort: Sort, value: str) -> None:
        self.sort = sort
        self.value = value

    def __eq__(self, other: object) -> bool:
        return isinstance(other, TermConst) and other.sort == self.sort and other.value == self.value

    def __hash__(self) -> int:
        return hash(("const", self.sort.name, self.value))

    def __repr__(self) -> str:
        return f"{self.sort.name}:{self.value!r}"


Term = TermVar | TermConst


def _term_key(t: Term) -> tuple[int, str, str]:
    return (0, t.sort.name, t.name) if isinstance(t, TermVar) else (1, t.sort.name, t.value)


class Eq(Node):
    """``lhs = rhs`` for two terms of one sort."""

    __slots__ = ("lhs", "rhs")

    def __init__(self, lhs: Term, rhs: Term) -> None:
        self.lhs = lhs
        self.rhs = rhs

    def __repr__(self) -> str:
        return f"{self.lhs!r} = {self.rhs!r}"


class Like(Node):
    """A string term matches ``pattern``: literal pieces and ``None``, the wildcard that matches
    any text, the empty one included (Cedar's ``like``)."""

    __slots__ = ("term", "pattern")

    def __init__(self, term: Term, pattern: tuple[str | None, ...]) -> None:
        self.term = term
        self.pattern = pattern

    def __repr__(self) -> str:
        text = "".join("*" if p is None else p.replace("*", "\\*") for p in self.pattern)
        return f"{self.term!r} like {text!r}"


def like_matches(text: str, pattern: tuple[str | None, ...]) -> bool:
    """Whether ``text`` matches a wildcard ``pattern`` (greedy, by the pieces between stars).

    >>> like_matches("report.pdf", (None, ".pdf")), like_matches("a", ("a", None, "a"))
    (True, False)
    """
    if None not in pattern:
        return text == "".join(p for p in pattern if p is not None)
    pieces: list[str] = []
    current = ""
    for p in pattern:
        if p is None:
            pieces.append(current)
            current = ""
        else:
            current += p
    pieces.append(current)
    first, *middle, last = pieces
    if len(text) < len(first) + len(last) or not text.startswith(first) or not text.endswith(last):
        return False
    at, end = len(first), len(text) - len(last)
    for piece in middle:
        found = text.find(piece, at, end)
        if found < 0:
            return False
        at = found + len(piece)
    return True


def fresh_labels(constants: Container[str], n: int) -> list[str]:
    """``n`` values that differ from every one of ``constants``: what a model calls the elements
    of a sort that no constant names (``#0``, ``#1``, …; more ``#`` while one is taken).

    >>> fresh_labels({"#1"}, 2)
    ['#0', '##1']
    """
    out = []
    for i in range(n):
        label = f"#{i}"
        while label in constants:
            label = "#" + label
        out.append(label)
    return out


_UID = attrgetter("uid")


class NodeFactory:
    """Builds interned, simplified nodes. Use one factory per problem."""

    def __init__(self) -> None:
        self._table: dict[tuple[object, ...], Node] = {}
        # the two commonest kinds get tables of their own, keyed without building a tuple
        self._atoms: dict[str, Node] = {}
        self._nots: dict[int, Node] = {}
        #: the negation of the node numbered ``uid`` if it was made (else None): compiled
        #: grounders look it up before they call :meth:`not_`
        self.negation: Callable[[int], Node | None] = self._nots.get
        self._size = 0  # nodes made so far: the next uid
        #: the range of each integer variable declared with :meth:`declare_int` (others lie in
        #: [NUM_MIN, NUM_MAX]): what :meth:`linear` folds with
        self.int_ranges: dict[str, tuple[int, int]] = {}
        #: how many :class:`Product` nodes were made: a backend picks nonlinear arithmetic (z3)
        #: or the pairs' rewrite (clingo) without walking the problem to find one
        self.products = 0
        self.true = self._intern(("const", True), lambda: Const(True))
        self.false = self._intern(("const", False), lambda: Const(False))

    def __len__(self) -> int:
        return self._size

    def _numbered(self, node: Node) -> Node:
        node.uid = self._size
        self._size += 1
        return node

    def _intern(self, key: tuple[object, ...], make: Callable[[], Node]) -> Node:
        node = self._table.get(key)
        if node is None:
            node = self._table[key] = self._numbered(make())
        return node

    def const(self, value: bool) -> Node:
        return self.true if value else self.false

    def atom(self, name: str) -> Node:
        node = self._atoms.get(name)
        if node is None:
            node = self._atoms[name] = self._numbered(Atom(name))
        return node

    def not_(self, arg: Node) -> Node:
        kind = type(arg)  # no class derives from Const or Not
        if kind is Const:
            return self.const(not arg.value)  # type: ignore[attr-defined]
        if kind is Not:
            return arg.arg  # type: ignore[attr-defined]
        node = self._nots.get(arg.uid)
        if node is None:
            node = self._nots[arg.uid] = self._numbered(Not(arg))
        return node

    def _flat(self, kind: type, args: Iterable[Node], unit: bool) -> tuple[Node, ...] | Node:
        args = tuple(args)
        if len(args) == 2:  # the commonest (``implies`` makes one): checked without building sets
            a, b = args
            ka, kb = type(a), type(b)
            if ka is not kind and kb is not kind and ka is not Const and kb is not Const and a is not b:
                return args  # (nodes are interned: two distinct nodes are two distinct objects)
        else:
            kinds = set(map(type, args))
            if kind not in kinds and Const not in kinds and len(set(map(_UID, args))) == len(args):
                # the common case, checked in C: nothing to flatten, fold or drop (no class derives
                # from Const, And or Or, so the types say what ``isinstance`` would)
                return args
        out: list[Node] = []
        seen: set[int] = set()
        for a in args:
            parts = a.args if isinstance(a, kind) else (a,)  # type: ignore[attr-defined]
            for p in parts:
                if isinstance(p, Const):
                    if p.value == unit:
                        continue
                    return self.const(not unit)
                uid = p.uid
                if uid in seen:
                    continue
                seen.add(uid)
                out.append(p)
        return tuple(out)

    def and_(self, args: Iterable[Node]) -> Node:
        flat = self._flat(And, args, True)
        if isinstance(flat, Node):
            return flat
        if not flat:
            return self.true
        if len(flat) == 1:
            return flat[0]
        key = ("and", tuple(map(_UID, flat)))
        node = self._table.get(key)
        if node is None:
            node = self._table[key] = self._numbered(And(flat))
        return node

    def or_(self, args: Iterable[Node]) -> Node:
        flat = self._flat(Or, args, False)
        if isinstance(flat, Node):
            return flat
        if not flat:
            return self.false
        if len(flat) == 1:
            return flat[0]
        key = ("or", tuple(map(_UID, flat)))
        node = self._table.get(key)
        if node is None:
            node = self._table[key] = self._numbered(Or(flat))
        return node

    def implies(self, lhs: Node, rhs: Node) -> Node:
        return self.or_((self.not_(lhs), rhs))

    def and2(self, a: Node, b: Node) -> Node:
        """``and_((a, b))``, the commonest case (two distinct operands, neither a constant nor an
        ``and``) without building the operands' tuple twice or calling :meth:`_flat`."""
        ka, kb = type(a), type(b)
        if ka is And or kb is And or ka is Const or kb is Const or a is b:
            return self.and_((a, b))
        key = ("and", (a.uid, b.uid))
        node = self._table.get(key)
        if node is None:
            node = self._table[key] = self._numbered(And((a, b)))
        return node

    def or2(self, a: Node, b: Node) -> Node:
        """``or_((a, b))``, as :meth:`and2` for ``and``."""
        ka, kb = type(a), type(b)
        if ka is Or or kb is Or or ka is Const or kb is Const or a is b:
            return self.or_((a, b))
        key = ("or", (a.uid, b.uid))
        node = self._table.get(key)
        if node is None:
            node = self._table[key] = self._numbered(Or((a, b)))
        return node

    def iff(self, lhs: Node, rhs: Node) -> Node:
        if isinstance(lhs, Const):
            return rhs if lhs.value else self.not_(rhs)
        if isinstance(rhs, Const):
            return lhs if rhs.value else self.not_(lhs)
        if lhs is rhs:
            return self.true
        return self._intern(("iff", lhs.uid, rhs.uid), lambda: Iff(lhs, rhs))

    def xor(self, args: Iterable[Node]) -> Node:
        parity = False
        rest: list[Node] = []
        for a in args:
            if isinstance(a, Const):
                parity ^= a.value
            else:
                rest.append(a)
        if not rest:
            return self.const(parity)
        if len(rest) == 1:
            node = rest[0]
        else:
            key = tuple(a.uid for a in rest)
            frozen = tuple(rest)
            node = self._intern(("xor", key), lambda: Xor(frozen))
        return self.not_(node) if parity else node

    def card(self, op: str, k: int, args: Iterable[Node]) -> Node:
        """``at_most`` is op ``<=``, ``at_least`` is ``>=``, ``exactly`` is ``=``."""
        rest: list[Node] = []
        for a in args:
            if isinstance(a, Const):
                k -= int(a.value)
            else:
                rest.append(a)
        n = len(rest)
        if op == "<=":
            if k < 0:
                return self.false
            if k >= n:
                return self.true
            if k == 0:
                return self.and_(self.not_(a) for a in rest)
        elif op == ">=":
            if k <= 0:
                return self.true
            if k > n:
                return self.false
            if k == n:
                return self.and_(rest)
            if k == 1:
                return self.or_(rest)
        else:
            if k < 0 or k > n:
                return self.false
            if k == 0:
                return self.and_(self.not_(a) for a in rest)
            if k == n:
                return self.and_(rest)
        frozen = tuple(rest)
        return self._intern(("card", op, k, tuple(a.uid for a in frozen)), lambda: Card(op, k, frozen))

    def linear(self, terms: dict[str, int], op: str, bound: int) -> Node:
        """``sum(terms) op bound`` over integers; op is ``<=`` or ``=``.

        Normalised so equal constraints intern to one node: coefficients divided by their
        gcd (rounding the bound down), and ``=`` built as two ``<=``. After this, ``x - y <= k``
        and ``x <= k`` have unit coefficients: difference constraints, which
        :func:`is_difference` recognises.
        """
        items = tuple(sorted(((c, v) for v, c in terms.items() if c != 0), key=lambda cv: cv[1]))
        if not items:
            return self.const(0 <= bound if op == "<=" else bound == 0)
        g = math.gcd(*(abs(c) for c, _ in items))
        if op == "=":
            if bound % g:
                return self.false
            neg = {v: -c for c, v in items}
            return self.and_([self.linear(dict((v, c) for c, v in items), "<=", bound), self.linear(neg, "<=", -bound)])
        items = tuple((c // g, v) for c, v in items)
        bound = bound // g  # floor division: sum <= b/g over integers means sum <= floor(b/g)
        # every variable lies in its range: fold what that box already decides
        ranges = self.int_ranges
        box = [ranges.get(v, (NUM_MIN, NUM_MAX)) for _, v in items]
        low = sum(c * (lo if c > 0 else hi) for (c, _), (lo, hi) in zip(items, box))
        high = sum(c * (hi if c > 0 else lo) for (c, _), (lo, hi) in zip(items, box))
        if high <= bound:
            return self.true
        if low > bound:
            return self.false
        return self._intern(("lin", items, bound), lambda: Linear(items, "<=", bound))


    def product(self, product: str, left: str, right: str) -> Node:
        """``product = left * right`` over declared integer variables (``left`` and ``right``
        may be one variable: a square). Interned with its factors in sorted order (the product
        commutes); folded to ``product = 0`` or ``product = other`` (:meth:`linear` nodes that
        every backend decides) when a factor's range is the single value 0 or 1.

        >>> f = NodeFactory()
        >>> for v, lo, hi in (("x", -3, 3), ("y", -3, 3), ("z", -9, 9), ("one", 1, 1)):
        ...     f.declare_int(v, lo, hi)
        >>> f.product("z", "y", "x") is f.product("z", "x", "y"), f.product("z", "x", "y")
        (True, z = x * y)
        >>> f.product("z", "one", "y")
        (-1*y + 1*z <= 0 and 1*y + -1*z <= 0)
        """
        ranges = self.int_ranges
        for name in (product, left, right):
            if name not in ranges:
                raise ValueError(f"declare the integer variable {name} (declare_int) before a product names it")
        left, right = sorted((left, right))
        for fixed, other in ((left, right), (right, left)):
            low, high = ranges[fixed]
            if low == high and low in (0, 1):  # z = 0, z = other: difference constraints still
                return self.linear({product: 1, other: -low} if product != other else {product: 1 - low}, "=", 0)

        def make() -> Node:
            self.products += 1
            return Product(product, left, right)

        return self._intern(("mul", product, left, right), make)

    def declare_int(self, name: str, low: int, high: int) -> None:
        """Integer variable ``name`` ranges over [``low``, ``high``] (declare it before a linear
        node names it: folding reads the range). :meth:`GroundProblem.declare_int` does this and
        records the variable."""
        if low > high:
            raise ValueError(f"the range of {name} is empty: [{low}, {high}]")
        self.int_ranges[name] = (low, high)

    def eq(self, lhs: Term, rhs: Term) -> Node:
        """``lhs = rhs``: false for terms of two sorts, two different constants, or a constant
        outside a closed variable's domain; true for a term and itself.

        >>> f = NodeFactory(); s = Sort("S", "string"); x = TermVar("x", s)
        >>> f.eq(TermConst(s, "a"), TermConst(s, "b")), f.eq(x, x), f.eq(x, TermConst(s, "a"))
        (false, true, x = S:'a')
        """
        if lhs.sort != rhs.sort:
            return self.false
        if lhs == rhs:
            return self.true
        if isinstance(lhs, TermConst) and isinstance(rhs, TermConst):
            return self.false
        for var, other in ((lhs, rhs), (rhs, lhs)):
            domain = var.sort.domain
            if isinstance(var, TermVar) and isinstance(other, TermConst) and domain is not None and other.value not in domain:
                return self.false
        a, b = sorted((lhs, rhs), key=_term_key)
        return self._intern(("eq", _term_key(a), _term_key(b)), lambda: Eq(a, b))

    def like(self, term: Term, pattern: tuple[str | None, ...]) -> Node:
        """``term`` matches ``pattern`` (folded for a constant); ``term`` is a string."""
        if term.sort.kind != "string":
            raise ValueError(f"like needs a string term, not one of sort {term.sort.name}")
        if isinstance(term, TermConst):
            return self.const(like_matches(term.value, pattern))
        if pattern == (None,):
            return self.true
        return self._intern(("like", _term_key(term), pattern), lambda: Like(term, pattern))


def is_difference(node: Linear) -> bool:
    """True for ``x <= k``, ``-x <= k`` and ``x - y <= k``: what difference logic decides."""
    coefs = sorted(c for c, _ in node.terms)
    return coefs in ([1], [-1], [-1, 1])


def walk(roots: Iterable[Node], skip: Container[int] = ()) -> Iterator[Node]:
    """Every node reachable from ``roots`` once, children before parents (post-order).

    Nodes whose uid is in ``skip`` are left out with everything below them: an encoder passes
    its memo, so a clause sharing sub-formulas with earlier ones visits only what is new.
    """
    seen: set[int] = set()
    for root in roots:
        if root.uid in seen or root.uid in skip:
            continue
        stack: list[tuple[Node, bool]] = [(root, False)]
        while stack:
            node, expanded = stack.pop()
            if expanded:
                yield node
                continue
            if node.uid in seen:
                continue
            seen.add(node.uid)
            stack.append((node, True))
            for child in reversed(node.children):
                uid = child.uid
                if uid not in seen and uid not in skip:
                    stack.append((child, False))


def in_order(roots: Iterable[Node], skip: Container[int] = ()) -> list[Node]:
    """Every node reachable from ``roots`` once, children before parents, in the order the
    factory made them (by uid: a factory makes a node's children before the node).

    The same nodes as :func:`walk` (``skip`` alike), in another order that also puts children
    first; two to three times faster on large formulas (no generator, no (node, flag) pairs),
    for callers that only need some such order: the evaluator and the encoders.
    """
    found: dict[int, Node] = {}
    stack = list(roots)
    pop, push, push_one = stack.pop, stack.extend, stack.append
    while stack:  # a node met again (or skipped) is passed over when popped, not filtered when pushed
        node = pop()
        uid = node.uid
        if uid in found or uid in skip:
            continue
        found[uid] = node
        kind = type(node)
        if kind is Atom or kind is Const:
            continue
        # the commonest kinds read their fields, not the ``children`` property (a call a node)
        if kind is Not:
            push_one(node.arg)  # type: ignore[attr-defined]
        else:
            push(node.args if kind is Or or kind is And else node.children)  # type: ignore[attr-defined]
    return list(map(found.__getitem__, sorted(found)))


@dataclass(frozen=True)
class AtomInfo:
    """A ground atom and what it is: ``hyp`` (abducible), ``observable`` or ``var``."""

    name: str
    kind: str
    pred: str
    args: tuple[str, ...]


@dataclass(frozen=True)
class NumVar:
    """An integer variable: a metric (whole units of ``unit``), an event time (seconds), or a
    plain bounded integer (``int``); it lies in [``low``, ``high``]."""

    name: str
    kind: str  # "metric" | "event" | "int"
    unit: str
    low: int = NUM_MIN
    high: int = NUM_MAX


@dataclass(frozen=True)
class Clause:
    """A hard clause, an observation, or a fact on an open predicate; ``name`` is unique."""

    name: str
    kind: str  # "hard" | "observation" | "fact"
    node: Node
    line: int


@dataclass(frozen=True)
class SoftClause:
    name: str
    node: Node
    weight: Fraction
    line: int


@dataclass(frozen=True)
class Claim:
    """A ``prove``/``disprove`` goal; ``text`` is the claim as the user wrote it."""

    name: str
    mode: Literal["prove", "disprove"]
    node: Node
    text: str
    line: int


@dataclass(frozen=True)
class MinimalGoal:
    """``goal minimal_explanations``: subset-minimal projections on the abducibles.

    ``mode`` is ``all``, ``top`` (the ``k`` first in canonical order: size, then sorted names)
    or ``min_cardinality`` (those of least size).
    """

    mode: Literal["all", "top", "min_cardinality"] = "all"
    k: int | None = None


@dataclass(frozen=True)
class Expectation:
    """``expect``: an assertion about the whole answer, checked after solving
    (:mod:`cda.verifiers.expectations`). ``sets``: for ``best``, the ground names of the atoms
    of each expected least-cost hypothesis."""

    name: str
    kind: Literal["status", "best", "cost", "core", "minimal"]
    op: str | None
    value: str | Fraction | int | None
    sets: tuple[frozenset[str], ...]
    text: str
    line: int


@dataclass
class GroundProblem:
    """Everything a backend needs, in source order, and nothing it must not see."""

    factory: NodeFactory
    atoms: dict[str, AtomInfo] = field(default_factory=dict)
    numvars: dict[str, NumVar] = field(default_factory=dict)
    clauses: list[Clause] = field(default_factory=list)
    background: list[Node] = field(default_factory=list)  # always-on structure (risk one-hot)
    soft: list[SoftClause] = field(default_factory=list)
    claims: list[Claim] = field(default_factory=list)
    observed: set[str] = field(default_factory=set)
    top: int | None = None
    minimal: MinimalGoal | None = None  # goal minimal_explanations, when asked
    expectations: list[Expectation] = field(default_factory=list)  # expect statements, in order
    filename: str | None = None
    fol_blocks: int = 0  # first-order blocks, answered by `cda prove`, not by the engine
    #: what grounding decided that the user should hear (a bound outside the numeric range)
    notes: list[str] = field(default_factory=list)
    #: term variables (strings, members of populations), by name: a model gives each a string
    terms: dict[str, TermVar] = field(default_factory=dict)
    #: least-cost models also minimise each soft clause in turn, so that the violated set is the
    #: same on every backend (hypotheses need that); a product that only wants a cheap model
    #: (a small counterexample over hundreds of soft clauses) turns it off: one objective
    canonical_soft: bool = True

    def declare_int(self, name: str, low: int, high: int) -> NumVar:
        """A plain integer variable in [``low``, ``high``], known to the factory and the backends."""
        self.factory.declare_int(name, low, high)
        var = self.numvars[name] = NumVar(name, "int", "", low, high)
        return var

    def declare_term(self, name: str, sort: Sort) -> TermVar:
        """A term variable of ``sort``."""
        var = self.terms[name] = TermVar(name, sort)
        return var

    @property
    def hyp_atoms(self) -> list[str]:
        return [a.name for a in self.atoms.values() if a.kind == "hyp"]

    @property
    def observable_atoms(self) -> list[str]:
        return [a.name for a in self.atoms.values() if a.kind == "observable"]

    @property
    def has_arithmetic(self) -> bool:
        return bool(self.numvars)

    def roots(self) -> list[Node]:
        return (
            [c.node for c in self.clauses]
            + list(self.background)
            + [s.node for s in self.soft]
            + [c.node for c in self.claims]
        )
