"""IR → z3 terms, the one z3 encoder. One method per IR node; shared sub-formulas are
translated once; :func:`smtlib` prints what it made as an SMT-LIB 2 script.

The Boolean connectives are built with z3's C API (``Z3_mk_and`` …) on raw ASTs rather than
through ``z3.And``/``z3.Or``: those coerce and sort-check every argument and wrap every
intermediate term in a Python object, about 80 % of the time of encoding a clause. Each raw AST
the encoder keeps (one per IR node) holds one z3 reference, taken as soon as it is made and
released with the context; what :meth:`Z3Encoder.encode` returns is an ordinary ``z3.BoolRef``.
Built so, a c3540 circuit copy (12k nodes) takes as long as printing it as SMT-LIB text and
having z3 parse that (0.05–0.1 s, which the backend did before for clauses added later).
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from typing import Any

import z3
from z3 import z3core

from cda.contracts.deadline import NO_DEADLINE, Deadline, OutOfTime
from cda.encodings.ir import (
    And,
    Atom,
    Card,
    Const,
    Eq,
    Iff,
    Like,
    Linear,
    Node,
    Not,
    Or,
    Product,
    Sort,
    Term,
    TermConst,
    Xor,
    walk,
)
from cda.errors import BackendUnsupported

__all__ = ["Z3Encoder", "like_regex", "smtlib", "string_val", "string_value", "z3_name"]

_mk_not = z3core.Z3_mk_not
_mk_and = z3core.Z3_mk_and
_mk_or = z3core.Z3_mk_or
_mk_eq = z3core.Z3_mk_eq
_mk_xor = z3core.Z3_mk_xor
_mk_implies = z3core.Z3_mk_implies
_mk_const = z3core.Z3_mk_const
_mk_string_symbol = z3core.Z3_mk_string_symbol
_MK_PB = {"<=": z3core.Z3_mk_pble, ">=": z3core.Z3_mk_pbge, "=": z3core.Z3_mk_pbeq}
_inc_ref = z3core.Z3_inc_ref
_Ast = z3.Ast  # the ctypes type of a raw AST (an array of them is an argument list)


class Z3Encoder:
    """Translates nodes into terms of one z3 context; atoms become Bools, numeric vars Ints.

    >>> from cda.encodings.ir import NodeFactory
    >>> f = NodeFactory(); enc = Z3Encoder(z3.Context())
    >>> enc.encode(f.or_([f.atom("a"), f.not_(f.atom("b"))]))
    Or(a, Not(b))
    """

    name = "z3"

    def __init__(self, ctx: z3.Context, deadline: Deadline = NO_DEADLINE, total: int = 0) -> None:
        self.ctx = ctx
        self.deadline = deadline  # read every few hundred nodes (a clause may hold millions)
        self.total = total  # how many nodes the problem has, for the note when time runs out
        self._c = ctx.ref()
        self._bool_sort_ref = z3.BoolSort(ctx)  # keeps the sort referenced
        self._bool_sort = self._bool_sort_ref.ast
        self._ast: dict[int, Any] = {}  # node uid → raw AST, referenced once by the encoder
        self.bools: dict[str, z3.BoolRef] = {}
        self.ints: dict[str, z3.ArithRef] = {}
        self.sorts: dict[str, z3.SortRef] = {}  # a population is an uninterpreted sort, a string z3's
        self.terms: dict[tuple[str, str, str], z3.ExprRef] = {}  # (var|const, sort, name) → term
        #: the constants made, per population sort: they differ from each other (the backend
        #: asserts it, :meth:`population_constants`)
        self.constants: dict[str, list[z3.ExprRef]] = {}
        self.constant_values: dict[int, str] = {}  # a population constant's term id → its value

    def bool_var(self, name: str) -> z3.BoolRef:
        """``z3.Bool(name)``, the very same term, made with three C calls instead of a dozen."""
        var = self.bools.get(name)
        if var is None:
            symbol = _mk_string_symbol(self._c, z3_name(name))
            var = self.bools[name] = z3.BoolRef(_mk_const(self._c, symbol, self._bool_sort), self.ctx)
        return var

    def guarded(self, guard: str, node: Node) -> z3.BoolRef:
        """``guard ⇒ node`` for the Bool named ``guard``: ``z3.Implies(enc.bool_var(guard),
        enc.encode(node))``, the same term, for a tenth of the cost (no coercion, no sort check).

        >>> from cda.encodings.ir import NodeFactory
        >>> f = NodeFactory(); enc = Z3Encoder(z3.Context())
        >>> enc.guarded("sel", f.atom("a"))
        Implies(sel, a)
        """
        ast = _mk_implies(self._c, self.bool_var(guard).as_ast(), self._encoded(node))
        return z3.BoolRef(ast, self.ctx)

    def int_var(self, name: str) -> z3.ArithRef:
        var = self.ints.get(name)
        if var is None:
            var = self.ints[name] = z3.Int(z3_name(name), self.ctx)
        return var

    def sort(self, sort: Sort) -> z3.SortRef:
        """z3's sort for ``sort``: its strings, or an uninterpreted sort of the same name."""
        found = self.sorts.get(sort.name)
        if found is None:
            made = z3.StringSort(self.ctx) if sort.kind == "string" else z3.DeclareSort(sort.name, self.ctx)
            found = self.sorts[sort.name] = made
        return found

    def term(self, t: Term) -> z3.ExprRef:
        """The z3 term of a term variable (a constant of its sort) or a named constant (a
        string literal; for a population, a constant ``sort::value`` of the sort)."""
        key = ("const" if isinstance(t, TermConst) else "var", t.sort.name, t.value if isinstance(t, TermConst) else t.name)
        found = self.terms.get(key)
        if found is None:
            if isinstance(t, TermConst) and t.sort.kind == "string":
                found = string_val(t.value, self.ctx)
            elif isinstance(t, TermConst):  # named by its place, not its text (an id may hold any character)
                named = self.constants.setdefault(t.sort.name, [])
                found = z3.Const(z3_name(f"{t.sort.name}!{len(named)}"), self.sort(t.sort))
                named.append(found)
                self.constant_values[found.get_id()] = t.value
            else:
                found = z3.Const(z3_name(t.name), self.sort(t.sort))
            self.terms[key] = found
        return found

    def _out_of_time(self, done: int) -> OutOfTime:
        of = f" of {self.total:,}" if self.total >= done else ""
        return OutOfTime(f"while encoding for z3 ({done:,}{of} formula nodes)")

    def encode(self, node: Node) -> z3.BoolRef:
        return z3.BoolRef(self._encoded(node), self.ctx)

    def _encoded(self, node: Node) -> Any:
        """The raw AST of ``node``, encoding what is not encoded yet."""
        memo = self._ast
        ast = memo.get(node.uid)
        if ast is None:
            for sub in walk([node], skip=memo):
                if self.deadline.tick():
                    raise self._out_of_time(len(memo))
                method = _VISIT.get(type(sub))
                if method is None:
                    raise BackendUnsupported(f"the {self.name} backend cannot encode IR node {type(sub).__name__}")
                memo[sub.uid] = method(self, sub)
            ast = memo[node.uid]
        return ast

    def _args(self, args: tuple[Node, ...]) -> Any:
        memo = self._ast
        return (_Ast * len(args))(*[memo[a.uid] for a in args])

    def _wrapped(self, node: Node) -> z3.BoolRef:
        return z3.BoolRef(self._ast[node.uid], self.ctx)

    def _held(self, ast: Any) -> Any:
        """``ast``, with the reference the encoder keeps (taken before anything can free it)."""
        _inc_ref(self._c, ast)
        return ast

    def _held_term(self, term: z3.ExprRef) -> Any:
        return self._held(term.as_ast())  # ``term`` holds its own reference until this returns

    # ---- one method per IR node: each returns a raw AST the encoder (or ``bools``) holds
    def visit_Const(self, node: Const) -> Any:
        return self._held_term(z3.BoolVal(node.value, self.ctx))

    def visit_Atom(self, node: Atom) -> Any:
        return self.bool_var(node.name).as_ast()

    def visit_Not(self, node: Not) -> Any:
        return self._held(_mk_not(self._c, self._ast[node.arg.uid]))

    def visit_And(self, node: And) -> Any:
        return self._held(_mk_and(self._c, len(node.args), self._args(node.args)))

    def visit_Or(self, node: Or) -> Any:
        return self._held(_mk_or(self._c, len(node.args), self._args(node.args)))

    def visit_Iff(self, node: Iff) -> Any:
        return self._held(_mk_eq(self._c, self._ast[node.lhs.uid], self._ast[node.rhs.uid]))

    def visit_Xor(self, node: Xor) -> Any:
        acc = self._wrapped(node.args[0])
        for a in node.args[1:]:
            acc = z3.BoolRef(_mk_xor(self._c, acc.as_ast(), self._ast[a.uid]), self.ctx)
        return self._held_term(acc)

    def visit_Card(self, node: Card) -> Any:
        # what z3.PbLe / PbGe / PbEq make (unit coefficients), without coercing each argument
        n = len(node.args)
        ones = (ctypes.c_int * n)(*([1] * n))
        return self._held(_MK_PB[node.op](self._c, n, self._args(node.args), ones, node.k))

    def visit_Linear(self, node: Linear) -> Any:
        lhs = z3.Sum([c * self.int_var(v) for c, v in node.terms])
        return self._held_term(lhs <= node.bound)

    def visit_Product(self, node: Product) -> Any:
        return self._held_term(self.int_var(node.product) == self.int_var(node.left) * self.int_var(node.right))

    def visit_Eq(self, node: Eq) -> Any:
        return self._held_term(self.term(node.lhs) == self.term(node.rhs))

    def visit_Like(self, node: Like) -> Any:
        return self._held_term(z3.InRe(self.term(node.term), like_regex(node.pattern, self.ctx)))


def string_val(text: str, ctx: z3.Context) -> z3.SeqRef:
    """``text`` as a z3 string literal, character for character: z3 reads ``\\u{…}`` in a
    literal as an escape, so a backslash and every character outside printable ASCII is written
    as one (:func:`string_value` reads a model's strings back)."""
    if all(" " <= c <= "~" and c != "\\" for c in text):
        return z3.StringVal(text, ctx)
    return z3.StringVal("".join(c if " " <= c <= "~" and c != "\\" else f"\\u{{{ord(c):x}}}" for c in text), ctx)


def string_value(term: z3.ExprRef) -> str:
    """A model's string value as the text it stands for (z3 prints characters outside printable
    ASCII, and a backslash before ``u{``, as ``\\u{…}`` escapes)."""
    text: str = term.as_string()  # type: ignore[attr-defined]
    out: list[str] = []
    i = 0
    while i < len(text):
        end = text.find("}", i + 3) if text.startswith("\\u{", i) else -1
        digits = text[i + 3 : end] if end > 0 else ""
        if digits and all(c in "0123456789abcdefABCDEF" for c in digits):
            out.append(chr(int(digits, 16)))
            i = end + 1
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def z3_name(name: str) -> str:
    """``name`` as a z3 symbol: z3 reads symbols as C strings, so a NUL would cut a name short
    and make two names one constant; NUL and backslash are escaped (distinct names stay distinct).

    >>> z3_name("a\\x00b") == "a\\\\0b", z3_name("plain")
    (True, 'plain')
    """
    if "\x00" in name or "\\" in name:
        return name.replace("\\", "\\\\").replace("\x00", "\\0")
    return name


def like_regex(pattern: tuple[str | None, ...], ctx: z3.Context) -> z3.ReRef:
    """A wildcard pattern as a z3 regular expression (``None``: any text, the empty one too)."""
    anything = z3.Star(z3.AllChar(z3.ReSort(z3.StringSort(ctx))))
    parts = [anything if p is None else z3.Re(string_val(p, ctx)) for p in pattern]
    if not parts:
        return z3.Re(string_val("", ctx))
    return parts[0] if len(parts) == 1 else z3.Concat(*parts)


#: one visitor per IR node type, looked up by the node's exact type
_VISIT: dict[type, Callable[[Z3Encoder, Any], Any]] = {
    kind: getattr(Z3Encoder, f"visit_{kind.__name__}")
    for kind in (Const, Atom, Not, And, Or, Iff, Xor, Card, Linear, Product, Eq, Like)
}


def smtlib(formulas: list[z3.BoolRef]) -> str:
    """An SMT-LIB 2 script asserting ``formulas`` (what :class:`Z3Encoder` made), for reading or
    for another solver.

    >>> from cda.encodings.ir import NodeFactory
    >>> f = NodeFactory(); enc = Z3Encoder(z3.Context())
    >>> print(smtlib([enc.encode(f.card("<=", 1, [f.atom("a"), f.atom("b"), f.atom("c")]))]).strip())
    ; benchmark generated from python API
    (set-info :status unknown)
    (declare-fun c () Bool)
    (declare-fun b () Bool)
    (declare-fun a () Bool)
    (assert
     ((_ at-most 1) a b c))
    (check-sat)
    """
    if not formulas:
        return "(check-sat)\n"
    solver = z3.Solver(ctx=formulas[0].ctx)
    solver.add(formulas)
    return str(solver.to_smt2())
