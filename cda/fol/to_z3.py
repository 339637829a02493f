"""First-order problems compiled straight to z3 (no IR in between), asked, and read back.

``mode``: ``open`` (one uninterpreted sort, z3 quantifiers), ``closed`` (the declared domain as
an enumeration; constants are its elements) or ``finite`` (an enumeration of ``size`` anonymous
elements that constants may denote in any way). ``closed`` and ``finite`` expand quantifiers
over the elements; that expansion checks the deadline as it goes, so a budget holds even when
one formula has millions of instances.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from itertools import product
from typing import Any, Literal

import z3

from cda.contracts.deadline import Deadline, OutOfTime
from cda.contracts.limits import z3_timeout_ms
from cda.errors import EvaluatorDisagreement
from cda.fol.budget import spend
from cda.fol.structures import Structure
from cda.fol.syntax import (
    And,
    Atom,
    BoolConst,
    Eq,
    FOLProblem,
    Formula,
    Iff,
    Implies,
    Not,
    Or,
    Statement,
    Term,
    Xor,
)

__all__ = ["Z3Oracle", "Check", "AtomValue", "Z3_QUANTIFIER_MEMORY_MB"]

z3.set_param("ctrl_c", False)  # Ctrl-C reaches the command (cda.cli.interrupts), not swallowed by a check

Check = tuple[str, Any, str]  # (status, raw model when sat, reason when unknown)
AtomValue = tuple[str, tuple[str, ...], bool]  # (predicate, arguments (domain elements), value)

#: z3's memory while it instantiates quantifiers (MB). Its model-based instantiation can run
#: away on tiny EPR problems (two premises over P/1 and R/2 took 24 GB in 3 s and were killed);
#: at the cap z3 answers unknown, and an EPR problem is then decided over its Herbrand universe.
Z3_QUANTIFIER_MEMORY_MB = 1024


class Z3Oracle:
    """Direct FOL → z3. ``mode``: ``open`` (an uninterpreted sort, z3 quantifiers), ``closed``
    (the declared domain as an enumeration, constants are its elements) or ``finite`` (an
    enumeration of ``size`` anonymous elements that constants may denote in any way);
    ``closed`` and ``finite`` expand quantifiers over the elements."""

    def __init__(
        self,
        problem: FOLProblem,
        claim: Statement,
        deadline: Deadline,
        mode: Literal["open", "closed", "finite"] = "open",
        size: int = 0,
        cap: float | None = None,
    ) -> None:
        self.problem = problem
        self.claim = claim
        self.deadline = deadline
        self.mode = mode
        self.cap = cap
        ctx = self.ctx = z3.Context()
        self._checking = False
        self._core: tuple[list[str], bool | None] | None = None
        deadline.on_cancel(self._interrupt)  # a cancel (Ctrl-C, a client's) stops the check in flight
        sig = problem.signature
        self.values: list[z3.ExprRef] = []
        if mode == "open":
            self.sort: z3.SortRef = z3.DeclareSort("U", ctx)
        else:
            names = list(problem.domain or ()) if mode == "closed" else [f"e{i}" for i in range(1, size + 1)]
            self.sort, self.values = z3.EnumSort("D", names, ctx=ctx)
        self.consts: dict[str, z3.ExprRef] = {}
        #: ``closed`` mode: each declared element's z3 value, by name
        self.consts_by_element = dict(zip(problem.domain or (), self.values)) if mode == "closed" else {}
        for c in sig.constants:
            if mode == "closed":
                self.consts[c] = self.values[list(problem.domain or ()).index(c)]
            else:
                self.consts[c] = z3.Const(f"c!{c}", self.sort)
        self.funcs = {
            f: z3.Function(f"f!{f}/{n}", *([self.sort] * n), self.sort) for f, n in sig.functions.items() if n > 0
        }
        boolean = z3.BoolSort(ctx)
        self.preds: dict[str, Any] = {}
        for p, n in sig.predicates.items():  # 50,000 predicates take z3's Python API seconds to declare
            if deadline.tick():
                raise OutOfTime("while declaring the predicates for z3")
            self.preds[p] = z3.Bool(f"p!{p}", ctx) if n == 0 else z3.Function(f"p!{p}/{n}", *([self.sort] * n), boolean)
        self._fresh = 0
        self.solver = z3.Solver(ctx=ctx)
        if problem.unique_names and mode != "closed" and len(self.consts) > 1:  # closed: already distinct
            self.solver.add(z3.Distinct(*self.consts.values()))
        self.sel = {st.name: z3.Bool(f"sel!{st.name}", ctx) for st in problem.premises}
        #: each premise's formula as compiled, by name (:meth:`satisfied` evaluates them in a model)
        self.bodies: dict[str, z3.BoolRef] = {}
        for st in problem.premises:
            self.bodies[st.name] = self.compile(st.formula, {})
            self._assert(_binary(z3.Z3_mk_implies, ctx, self.sel[st.name], self.bodies[st.name]))
        body = self.claim_body = self.compile(claim.formula, {})
        self.claim_true = z3.Bool("claim!true", ctx)
        self.claim_false = z3.Bool("claim!false", ctx)
        #: the assumption literals by z3's id for them: a premise's name, or the claim's value
        self._assumed: dict[int, str | bool] = {z3.Z3_get_ast_id(ctx.ref(), v.as_ast()): k for k, v in self.sel.items()}
        self._assumed[z3.Z3_get_ast_id(ctx.ref(), self.claim_true.as_ast())] = True
        self._assumed[z3.Z3_get_ast_id(ctx.ref(), self.claim_false.as_ast())] = False
        self._assert(_binary(z3.Z3_mk_implies, ctx, self.claim_true, body))
        self._assert(_binary(z3.Z3_mk_implies, ctx, self.claim_false,
                             z3.BoolRef(z3.Z3_mk_not(ctx.ref(), body.as_ast()), ctx)))

    def _assert(self, formula: z3.BoolRef) -> None:
        """``solver.add(formula)`` through the C API (see :meth:`compile`)."""
        z3.Z3_solver_assert(self.ctx.ref(), self.solver.solver, formula.as_ast())

    def _interrupt(self) -> None:
        """The cancel token's hook: interrupt the check in flight, and only then (an interrupt
        that lands as z3 hands a model over fails that call)."""
        if self._checking:
            self.ctx.interrupt()

    # -- compile
    # The connectives and applications go straight to z3's C API (the z3 calls z3py's ``And``,
    # ``Implies``, ``==``… make, so the terms are the same): every operand is already a term of
    # this context and of the right sort, and z3py's coercions and sort checks were a fifth of
    # ``cda prove``'s time on the FOLIO suite (docs/benchmarks.md, "cda prove").
    def term(self, t: Term, env: dict[str, z3.ExprRef]) -> z3.ExprRef:
        if not t.args:
            return env[t.name] if t.name in env else self.consts[t.name]
        return z3.ExprRef(_app(self.ctx, self.funcs[t.name], [self.term(a, env) for a in t.args]), self.ctx)

    def compile(self, f: Formula, env: dict[str, z3.ExprRef]) -> z3.BoolRef:
        if self.deadline.tick():  # a formula of 200,000 terms takes z3's Python API seconds to build
            raise OutOfTime("while translating the formulas for z3")
        ctx = self.ctx
        if isinstance(f, Atom):
            p = self.preds[f.pred]
            return p if not f.args else z3.BoolRef(_app(ctx, p, [self.term(a, env) for a in f.args]), ctx)
        if isinstance(f, Eq):
            return _binary(z3.Z3_mk_eq, ctx, self.term(f.lhs, env), self.term(f.rhs, env))
        if isinstance(f, BoolConst):
            return z3.BoolVal(f.value, ctx)
        if isinstance(f, Not):
            return z3.BoolRef(z3.Z3_mk_not(ctx.ref(), self.compile(f.arg, env).as_ast()), ctx)
        if isinstance(f, And):
            return _nary(z3.Z3_mk_and, ctx, [self.compile(a, env) for a in f.args])
        if isinstance(f, Or):
            return _nary(z3.Z3_mk_or, ctx, [self.compile(a, env) for a in f.args])
        if isinstance(f, Implies):
            return _binary(z3.Z3_mk_implies, ctx, self.compile(f.lhs, env), self.compile(f.rhs, env))
        if isinstance(f, Iff):
            return _binary(z3.Z3_mk_eq, ctx, self.compile(f.lhs, env), self.compile(f.rhs, env))
        if isinstance(f, Xor):
            return _binary(z3.Z3_mk_xor, ctx, self.compile(f.lhs, env), self.compile(f.rhs, env))
        if self.mode != "open":
            parts = []
            for v in self.values:
                spend(self.deadline, "expanding quantifiers over a finite domain")
                parts.append(self.compile(f.body, {**env, f.var: v}))
            return _nary(z3.Z3_mk_and if f.kind == "forall" else z3.Z3_mk_or, ctx, parts)
        self._fresh += 1
        x = z3.Const(f"{f.var}!{self._fresh}", self.sort)
        body = self.compile(f.body, {**env, f.var: x})
        return z3.ForAll([x], body) if f.kind == "forall" else z3.Exists([x], body)

    # -- ask
    def check(self, premises: Sequence[str], claim: bool | None, atoms: Sequence[AtomValue] = ()) -> Check:
        """Satisfiability of the named premises with the claim true, false or absent (None) and
        the ground ``atoms`` fixed (``closed`` mode: their arguments are domain elements)."""
        left = self.deadline.remaining()
        if self.cap is not None:
            left = self.cap if left is None else min(left, self.cap)
        if left is not None:
            if left <= 0:
                return "unknown", None, "time ran out"
            self.solver.set("timeout", z3_timeout_ms(left))
        self._core = None
        lits = [self.sel[n] for n in premises]
        if claim is not None:
            lits.append(self.claim_true if claim else self.claim_false)
        for pred, args, value in atoms:
            decl = self.preds[pred]
            atom = decl(*[self.consts_by_element[a] for a in args]) if args else decl
            lits.append(atom if value else z3.Not(atom))
        try:
            with _Z3_MEMORY_CAP.held(Z3_QUANTIFIER_MEMORY_MB if self.mode == "open" else 0):
                self._checking = True
                try:
                    r = self._check(lits)
                finally:
                    self._checking = False
            model = self.solver.model() if r == z3.sat else None
        except z3.Z3Exception as exc:  # an allocation refused outside z3's own accounting
            if self.deadline.cancelled():  # an interrupt that landed as z3 handed the model over
                return "unknown", None, self.deadline.why()
            if "out of memory" not in str(exc):
                raise
            return "unknown", None, f"z3 ran out of memory (cap {Z3_QUANTIFIER_MEMORY_MB} MB)"
        if r == z3.sat:
            return "sat", model, ""
        if r == z3.unsat:
            self._core = self._read_core()
            return "unsat", None, ""
        reason = self.solver.reason_unknown()
        if self.deadline.cancelled():  # interrupted by a cancel (Ctrl-C, a client's): say so, not "time"
            reason = self.deadline.why()
        elif reason in ("timeout", "canceled") or (self.deadline.remaining() == 0):
            reason = "time ran out"
        elif "memory" in reason:
            reason = f"out of memory, cap {Z3_QUANTIFIER_MEMORY_MB} MB"
        return "unknown", None, f"z3 returned unknown ({reason})"

    def core(self) -> tuple[list[str], bool | None] | None:
        """After an ``unsat`` answer of :meth:`check`: the premises z3's unsat core names and the
        claim's value if the core assumes it (None: the premises named are inconsistent without
        the claim); None after any other answer, or when the core assumes a fixed atom."""
        return self._core

    def _read_core(self) -> tuple[list[str], bool | None] | None:
        """The last check's unsat core as :meth:`core` gives it."""
        ctx = self.ctx.ref()
        vector = z3.Z3_solver_get_unsat_core(ctx, self.solver.solver)
        z3.Z3_ast_vector_inc_ref(ctx, vector)
        try:
            assumed = [self._assumed.get(z3.Z3_get_ast_id(ctx, z3.Z3_ast_vector_get(ctx, vector, i)))
                       for i in range(z3.Z3_ast_vector_size(ctx, vector))]
        finally:
            z3.Z3_ast_vector_dec_ref(ctx, vector)
        if any(a is None for a in assumed):
            return None
        claims = [a for a in assumed if isinstance(a, bool)]
        return [a for a in assumed if isinstance(a, str)], (claims[0] if claims else None)

    def satisfied(self, m: z3.ModelRef) -> tuple[list[str], bool | None]:
        """The premises true in ``m`` (z3's own evaluation of each compiled premise, its model
        completed), and the claim's value there (None when z3's evaluation does not reduce it
        to true or false). A premise whose evaluation does not reduce to true is left out:
        the list may be short, never wrong. Completion changes ``m``: not for a model read
        back with :meth:`structure`."""
        if not isinstance(m, z3.ModelRef):
            return [], None
        ctx = self.ctx
        true = [name for name, body in self.bodies.items()
                if z3.Z3_get_bool_value(ctx.ref(), _value(ctx, m, body.as_ast())) == z3.Z3_L_TRUE]
        value = z3.Z3_get_bool_value(ctx.ref(), _value(ctx, m, self.claim_body.as_ast()))
        return true, (True if value == z3.Z3_L_TRUE else False if value == z3.Z3_L_FALSE else None)

    def _check(self, lits: Sequence[z3.BoolRef]) -> z3.CheckSatResult:
        """``solver.check(*lits)`` through the C API: the literals are this context's Booleans."""
        arr = (z3.Ast * len(lits))(*[lit.as_ast() for lit in lits])
        return z3.CheckSatResult(z3.Z3_solver_check_assumptions(self.ctx.ref(), self.solver.solver, len(lits), arr))

    # -- decode
    def structure(self, m: z3.ModelRef) -> Structure:
        sig = self.problem.signature
        if self.mode == "open":
            universe = list(m.get_universe(self.sort) or [])
            if not universe:  # the sort is unconstrained: any one element will do
                universe = [m.eval(z3.Const("any!", self.sort), model_completion=True)]
        else:
            universe = list(self.values)
        ctx = self.ctx
        key = {z3.Z3_get_ast_id(ctx.ref(), e.as_ast()): i for i, e in enumerate(universe)}

        def index(term: z3.ExprRef | z3.Ast) -> int:
            ast = term.as_ast() if isinstance(term, z3.ExprRef) else term
            ident = z3.Z3_get_ast_id(ctx.ref(), _value(ctx, m, ast))
            if ident not in key:
                raise EvaluatorDisagreement("z3 gave a term a value outside the domain of its model")
            return key[ident]

        names: dict[int, str] = {}
        constants: dict[str, str] = {}
        if self.mode == "closed":
            names = {i: str(e) for i, e in enumerate(universe)}
        for c in sig.constants:
            names.setdefault(index(self.consts[c]), c)
        taken = set(sig.functions) | set(names.values())
        counter = 0
        for i in range(len(universe)):
            if i not in names:
                counter += 1
                while f"e{counter}" in taken:
                    counter += 1
                names[i] = f"e{counter}"
        for c in sig.constants:
            constants[c] = names[index(self.consts[c])]
        rank = {c: k for k, c in enumerate(self.problem.domain or sig.constants)}
        named_first = sorted(range(len(universe)), key=lambda i: (rank.get(names[i], len(rank)), i))
        domain = tuple(names[i] for i in named_first)
        functions: dict[str, dict[tuple[str, ...], str]] = {}
        for f, n in sig.functions.items():
            if n == 0:
                continue
            table = functions[f] = {}
            decl = self.funcs[f]
            for idx in product(range(len(universe)), repeat=n):
                spend(self.deadline, "reading a world off a z3 model")
                value = index(_app(ctx, decl, [universe[i] for i in idx]))
                table[tuple(names[i] for i in idx)] = names[value]
        relations: dict[str, frozenset[tuple[str, ...]]] = {}
        for p, n in sig.predicates.items():
            if n == 0:
                relations[p] = frozenset({()}) if z3.is_true(m.eval(self.preds[p], model_completion=True)) else frozenset()
                continue
            rows = set()
            decl = self.preds[p]
            for idx in product(range(len(universe)), repeat=n):
                spend(self.deadline, "reading a world off a z3 model")
                value = _value(ctx, m, _app(ctx, decl, [universe[i] for i in idx]))
                if z3.Z3_get_bool_value(ctx.ref(), value) == z3.Z3_L_TRUE:
                    rows.add(tuple(names[i] for i in idx))
            relations[p] = frozenset(rows)
        return Structure(domain, constants, functions, relations)


class _MemoryCap:
    """z3's ``memory_max_size``, held while any check in the process needs it.

    The parameter is global to z3 (no solver or context takes it). Set and put back by each check
    on its own, two checks on two threads (a server runs claims side by side) put it back in the
    wrong order: the first to finish lifted the cap from the other's run, the last left it set on
    every later z3 call in the process. So the holders are counted: the first sets the cap, the
    last puts back what was there before it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._holders = 0
        self._before = ""

    @contextmanager
    def held(self, megabytes: int) -> Iterator[None]:
        """The cap of ``megabytes`` for the block (0: leave it as it is)."""
        if not megabytes:
            yield
            return
        with self._lock:
            if self._holders == 0:
                self._before = z3.get_param("memory_max_size")
                z3.set_param("memory_max_size", megabytes)
            self._holders += 1
        try:
            yield
        finally:
            with self._lock:
                self._holders -= 1
                if self._holders == 0:
                    z3.set_param("memory_max_size", self._before)


_Z3_MEMORY_CAP = _MemoryCap()


def _binary(make: Any, ctx: z3.Context, a: z3.ExprRef, b: z3.ExprRef) -> z3.BoolRef:
    """``make(a, b)`` (``Z3_mk_implies``, ``Z3_mk_eq``…) through the C API."""
    return z3.BoolRef(make(ctx.ref(), a.as_ast(), b.as_ast()), ctx)


def _nary(make: Any, ctx: z3.Context, args: Sequence[z3.ExprRef]) -> z3.BoolRef:
    """``make(args)`` (``Z3_mk_and``, ``Z3_mk_or``) through the C API (no argument: its unit)."""
    arr = (z3.Ast * len(args))(*[a.as_ast() for a in args])
    return z3.BoolRef(make(ctx.ref(), len(args), arr), ctx)


def _app(ctx: z3.Context, decl: z3.FuncDeclRef, args: Sequence[z3.ExprRef]) -> z3.Ast:
    """``decl(args)`` through the C API: the Python wrapper's argument coercion is the
    bottleneck when a world is read off a model atom by atom."""
    arr = (z3.Ast * len(args))(*[a.as_ast() for a in args])
    return z3.Z3_mk_app(ctx.ref(), decl.ast, len(args), arr)


def _value(ctx: z3.Context, m: z3.ModelRef, term: z3.Ast) -> z3.Ast:
    out = (z3.Ast * 1)()
    if not z3.Z3_model_eval(ctx.ref(), m.model, term, True, out):
        raise EvaluatorDisagreement("z3 could not evaluate a term in its own model")
    return out[0]
