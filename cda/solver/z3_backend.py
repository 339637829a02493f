"""The z3 backend: an incremental ``Solver`` for checks and enumeration, an ``Optimize`` for costs.

Two instances of them, over one encoding of the problem (:class:`_Instance`): in the *plain*
one the problem's clauses are asserted as they are; in the *guarded* one each clause sits
behind its selector, so that a call can switch clauses one by one (cores, corrections,
justifications). Most calls keep every clause on (:data:`ALL_CLAUSES`) and go to the plain
instance; the guarded one is built on the first call that needs it. z3 pays for every Boolean
constant of a solver when it hands over a model, selectors included: with a selector per
clause, fetching each model of an enumeration cost eight times what it costs without them
(bench_core, 10,000 clauses: 1.6 s of 2.0 s).

The encoding is the scheme of :mod:`cda.encodings.scheme`, mapped onto z3 by the one z3 encoder
(:mod:`cda.encodings.to_z3`). Clauses added later (:meth:`Z3Backend.add_clauses`) are asserted
behind their own selectors into both instances.

A cancel (:class:`~cda.contracts.deadline.CancelToken`) reaches a check in flight through
``Context.interrupt``, registered with the deadline; z3's own Ctrl-C handler is switched off
(``ctrl_c``), so a SIGINT goes to the command's handler, which cancels the token, instead of
being swallowed by the check it happened to arrive in (and a process-wide handler installed
and restored by every check of every thread of a server).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import z3
from z3 import z3core

from cda.contracts.limits import z3_timeout_ms
from cda.encodings.ir import Clause, GroundProblem, Sort, TermConst, TermVar, fresh_labels
from cda.encodings.scheme import SortUse, build_scheme, guarded_clauses, rank_order
from cda.encodings.to_z3 import Z3Encoder, string_value
from cda.solver.backend import (
    ALL_CLAUSES,
    Deadline,
    Enumeration,
    Lit,
    Model,
    Outcome,
    SetStream,
    _OutOfTime,
)

__all__ = ["Z3Backend"]

z3.set_param("ctrl_c", False)


@dataclass
class _Instance:
    """One solver over the problem, and its optimiser once costs are asked for."""

    solver: z3.Solver
    structure: list[z3.BoolRef]  # everything asserted, for the optimiser
    opt: z3.Optimize | None = field(default=None)


#: the largest coefficient or bound z3's PbLe takes (a C int)
_PB_MAX = 2**31 - 1


class Z3Backend:
    name = "z3"

    def __init__(self, problem: GroundProblem, *, seed: int, deadline: Deadline, weights: dict[str, int]) -> None:
        self.problem = problem
        self.deadline = deadline
        self.ctx = z3.Context()
        self._checking = False  # a check runs: an interrupt now stops it (at any other time it would
        deadline.on_cancel(self._interrupt)  # fail the next model handed over, see _interrupt)
        self.enc = Z3Encoder(self.ctx, deadline, len(problem.factory))
        self.seed = seed
        self._negative: dict[str, z3.BoolRef] = {}  # Not(atom), made once (see _lits)
        self._term_vars: list[tuple[str, Sort]] = []  # every term variable, for models
        scheme = self.scheme = build_scheme(problem, weights)
        for atom in scheme.atoms:  # every atom exists, even if no clause mentions it
            if deadline.tick():
                raise _OutOfTime(f"while encoding for z3 (declaring {len(scheme.atoms):,} atoms)")
            self.enc.bool_var(atom)
        #: everything but the clauses (bounds, background, claim and soft keys): in both instances
        self._common: list[z3.BoolRef] = []
        for var, (low, high) in zip(scheme.numvars, scheme.ranges):
            x = self.enc.int_var(var)
            self._common += [x >= low, x <= high]
        self._common += self._sort_axioms(scheme.sorts)
        for node in scheme.background:
            self._common.append(self.enc.encode(node))
        for key, node in scheme.defined:
            self._common.append(self.enc.bool_var(key) == self.enc.encode(node))
        self._selectors = frozenset(key for key, _ in scheme.guarded)
        self._added: list[z3.BoolRef] = []  # clauses added later, behind their own selectors
        self._plain = self._instance([*self._common, *(self.enc.encode(node) for _, node in scheme.guarded)])
        self._guarded: _Instance | None = None  # built on the first call that needs it (see _for)
        self._atom_names = list(scheme.atoms)
        self._atom_decl_list = [self.enc.bools[name].decl() for name in scheme.atoms]
        self._true_ast = z3.BoolVal(True, self.ctx).as_ast()

    def _sort_axioms(self, uses: Sequence[SortUse]) -> list[z3.BoolRef]:
        """The constants of each population differ; a closed sort's variables take one of its
        domain's values. (Strings need neither: z3's string literals are distinct values.)"""
        out: list[z3.BoolRef] = []
        for use in uses:
            sort = use.sort
            for name in use.variables:
                self._term_vars.append((name, sort))
            if sort.kind == "string":
                continue
            consts = [self.enc.term(TermConst(sort, v)) for v in use.constants]
            if len(consts) > 1:
                out.append(z3.Distinct(*consts))
            if sort.domain is not None:
                allowed = [self.enc.term(TermConst(sort, v)) for v in sort.domain]
                for name in use.variables:
                    var = self.enc.term(TermVar(name, sort))
                    out.append(z3.Or([var == c for c in allowed]) if allowed else z3.BoolVal(False, self.ctx))
        return out

    # ---- the two instances
    def _instance(self, structure: list[z3.BoolRef]) -> _Instance:
        if self.scheme.sorts:
            solver = z3.Solver(ctx=self.ctx)  # strings, uninterpreted sorts: z3's combined theories
        elif self.problem.numvars:
            # a product of two unknowns (IR Product) is nonlinear: bounded, so still decidable
            solver = z3.SolverFor("QF_NIA" if self.problem.factory.products else "QF_LIA", ctx=self.ctx)
        else:
            # Boolean problems: z3's incremental SAT core (Booleans and native cardinality
            # constraints) instead of the SMT core. It proves the size levels of minimal_sets far
            # faster (c1908mut1426p: 6.5 s against a 60 s timeout), and enumerated bench_core's
            # hypotheses at 10,000 clauses a third faster (5.9 s against 9.2 s, then with selectors)
            solver = z3.SolverFor("QF_FD", ctx=self.ctx)
        solver.set("random_seed", self.seed)
        self._assert(solver, structure)
        return _Instance(solver, structure)

    def _guarded_instance(self) -> _Instance:
        """Each clause behind its selector, and one atom that implies every selector, so that
        "all clauses on" is one assumption (see ALL_CLAUSES)."""
        if self._guarded is None:
            scheme = self.scheme
            structure = list(self._common)
            for key, node in scheme.guarded:
                structure.append(self.enc.guarded(key, node))
            if scheme.every is not None:
                every, ref = self.enc.bool_var(scheme.every).as_ast(), self.ctx.ref()
                for key, _ in scheme.guarded:
                    sel = self.enc.bool_var(key).as_ast()
                    structure.append(z3.BoolRef(z3core.Z3_mk_implies(ref, every, sel), self.ctx))
            self._guarded = self._instance(structure + self._added)
        return self._guarded

    def _for(self, assumptions: Sequence[Lit]) -> _Instance:
        """The plain instance when ``assumptions`` keep every clause of the problem on (all of
        them switched on at once, none switched off), else the guarded one."""
        if not self._selectors:
            return self._plain
        every = False
        selectors = self._selectors
        for key, value in assumptions:
            if key == ALL_CLAUSES:
                if not value:
                    return self._guarded_instance()
                every = True
            elif not value and key in selectors:
                return self._guarded_instance()
        return self._plain if every else self._guarded_instance()

    # ---- helpers
    def _assert(self, solver: z3.Solver, terms: Sequence[z3.BoolRef]) -> None:
        """Assert through the C API: ``Solver.add`` coerces and sort-checks every term again."""
        solver_ast, ctx_ref = solver.solver, self.ctx.ref()
        for term in terms:
            z3core.Z3_solver_assert(ctx_ref, solver_ast, term.as_ast())

    def _lits(self, assumptions: Sequence[Lit]) -> list[z3.BoolRef]:
        """Each literal made once per atom and sign: the engine passes the same thousands of
        selector literals to every call, and ``z3.Not`` checks and coerces its argument."""
        negative = self._negative
        out = []
        for key, value in assumptions:
            if value:
                out.append(self.enc.bool_var(key))
                continue
            lit = negative.get(key)
            if lit is None:
                lit = negative[key] = z3.Not(self.enc.bool_var(key))
            out.append(lit)
        return out

    def _check(self, solver: z3.Solver, lits: Sequence[z3.BoolRef]) -> z3.CheckSatResult:
        """``solver.check(*lits)`` in one C call: z3's Python ``check`` coerces every
        assumption to Bool again (most of a check's time under 2,000 assumptions)."""
        array = (z3.Ast * len(lits))(*(lit.as_ast() for lit in lits))
        self._checking = True
        try:
            return z3.CheckSatResult(z3core.Z3_solver_check_assumptions(self.ctx.ref(), solver.solver, len(lits), array))
        finally:
            self._checking = False

    def _opt_check(self, opt: z3.Optimize, *lits: z3.BoolRef) -> z3.CheckSatResult:
        self._checking = True
        try:
            return opt.check(*lits)
        finally:
            self._checking = False

    def follow(self, deadline: Deadline) -> None:
        """Run the next calls under ``deadline`` (and its token's cancel): a backend kept between
        calls (an investigation's live one) was built under an earlier call's."""
        self.deadline = self.enc.deadline = deadline
        deadline.on_cancel(self._interrupt)

    def _interrupt(self) -> None:
        """The cancel token's hook: interrupt the check in flight. Only while one runs: an
        interrupt z3 receives between checks is dropped, but one that lands while it hands a
        model over fails that call ("model is not available"; seen under Ctrl-C)."""
        if self._checking:
            self.ctx.interrupt()

    def _got(self, target: z3.Solver | z3.Optimize) -> z3.ModelRef:
        """``target.model()``; an interrupt that still lands as z3 hands it over: out of time."""
        try:
            return target.model()
        except z3.Z3Exception:
            if self.deadline.cancelled():
                raise _OutOfTime() from None
            raise

    def _or(self, terms: Sequence[z3.BoolRef]) -> z3.BoolRef:
        """``z3.Or(terms)`` in one C call (``z3.Or`` coerces each term in Python)."""
        if not terms:
            return z3.BoolVal(False, self.ctx)
        array = (z3.Ast * len(terms))(*(t.as_ast() for t in terms))
        return z3.BoolRef(z3core.Z3_mk_or(self.ctx.ref(), len(terms), array), self.ctx)

    def _timeout(self, target: z3.Solver | z3.Optimize) -> None:
        left = self.deadline.remaining()
        if left is not None:
            if left <= 0:
                raise _OutOfTime()
            target.set("timeout", z3_timeout_ms(left))

    def _model(self, m: z3.ModelRef) -> Model:
        # only the problem's atoms (not the thousands of selectors): an atom the model leaves
        # open is false, what model completion would choose
        out: Model = dict(zip(self._atom_names, self._truth(m, self._atom_decl_list)))
        for name in self.problem.numvars:
            out[name] = m.eval(self.enc.ints[name], model_completion=True).as_long()
        elements: dict[str, dict[int, str]] = {}  # per population: element's id → its value
        for name, sort in self._term_vars:
            value = m.eval(self.enc.term(TermVar(name, sort)), model_completion=True)
            if sort.kind == "string":
                out[name] = string_value(value)
                continue
            if sort.name not in elements:
                elements[sort.name] = self._elements(m, sort)
            found = elements[sort.name].get(value.get_id())
            if found is None:  # an element outside the model's universe: a fresh one of its own
                found = elements[sort.name][value.get_id()] = fresh_labels(set(elements[sort.name].values()), 1)[0]
            out[name] = found
        return out

    def _elements(self, m: z3.ModelRef, sort: Sort) -> dict[int, str]:
        """The value of each element of a population in ``m``: the constant that names it, else
        a fresh label (:func:`~cda.encodings.ir.fresh_labels`) by its place in the universe."""
        consts = self.enc.constants.get(sort.name, [])
        named = {m.eval(c, model_completion=True).get_id(): self._const_value(c, sort) for c in consts}
        universe = m.get_universe(self.enc.sort(sort)) or []
        labels = fresh_labels(set(named.values()), len(universe))
        out = {u.get_id(): named.get(u.get_id(), labels[i]) for i, u in enumerate(universe)}
        out.update(named)
        return out

    def _const_value(self, const: z3.ExprRef, sort: Sort) -> str:
        return self.enc.constant_values[const.get_id()]

    def _status(self, r: z3.CheckSatResult) -> str:
        return "sat" if r == z3.sat else "unsat" if r == z3.unsat else "unknown"

    # ---- protocol
    def check(self, assumptions: Sequence[Lit]) -> Outcome:
        solver = self._for(assumptions).solver
        self._timeout(solver)
        status = self._status(self._check(solver, self._lits(assumptions)))
        return Outcome(status, self._model(self._got(solver)) if status == "sat" else None)

    def enumerate(self, project: Sequence[str], assumptions: Sequence[Lit], limit: int) -> Enumeration:
        out = Enumeration()
        proj = [self.enc.bool_var(a) for a in project]
        solver = self._for(assumptions).solver
        solver.push()
        # inside this scope the assumptions are plain facts: thousands of assumption literals
        # per check cost more than unit clauses propagated once
        self._assert(solver, self._lits(assumptions))
        try:
            while True:
                if len(out.models) >= limit:
                    out.complete = False
                    break
                try:
                    self._timeout(solver)
                except _OutOfTime:
                    out.complete, out.timed_out = False, True
                    break
                r = self._check(solver, ())
                if r == z3.unsat:
                    break
                if r != z3.sat:
                    out.complete, out.timed_out = False, True
                    break
                model = self._model(self._got(solver))
                out.models.append(model)
                if not proj:
                    break
                self._assert(solver, [self._or(self._lits([(a, not model[a]) for a in project]))])
        finally:
            solver.pop()
        return out

    def enumerate_minimal(
        self, project: Sequence[str], assumptions: Sequence[Lit], limit: int, max_size: int | None = None
    ) -> Enumeration:
        """Every subset-minimal set (see :meth:`minimal_sets`), each with a full model."""
        out = Enumeration()
        solver = self._for(assumptions).solver  # the one minimal_sets works in

        def keep(chosen: frozenset[str]) -> bool:
            r = self._check_in_time(solver, self._lits([*assumptions, *((a, a in chosen) for a in project)]))
            if r is None:
                raise _OutOfTime()
            assert r, "a minimal set found by the solver has a model"
            out.models.append(self._model(self._got(solver)))
            return len(out.models) < limit

        try:
            stream = self.minimal_sets(project, assumptions, keep, max_size)
        except _OutOfTime:
            out.complete, out.timed_out = False, True
            return out
        out.complete = stream.complete
        out.timed_out = stream.timed_out
        return out

    def minimal_sets(
        self,
        project: Sequence[str],
        assumptions: Sequence[Lit],
        on_set: Callable[[frozenset[str]], bool],
        max_size: int | None = None,
    ) -> SetStream:
        """Subset-minimal sets by increasing size: at level ``b`` every model with at most ``b``
        projected atoms true is a new minimal set, blocked (its supersets excluded) once found.

        Why no shrinking is needed: when level ``b`` starts, every minimal set of fewer than
        ``b`` atoms has been found and blocked. A model at level ``b`` blocks none of them, so no
        proper subset of its set has a model (that subset would contain a minimal set smaller
        than ``b``, and so would the set). One solver call per minimal set, plus one closing
        each level; levels stop when nothing is left even without a bound. (Shrinking an
        arbitrary model one atom at a time took twenty calls per set on the c880 circuits.)
        """
        out = SetStream()
        proj = [self.enc.bool_var(a) for a in project]
        neg = self._lits([(a, False) for a in project])
        decls = [v.decl() for v in proj]
        top = len(proj) if max_size is None else min(max_size, len(proj))
        solver = self._for(assumptions).solver
        solver.push()
        self._assert(solver, self._lits(assumptions))
        try:
            for level in range(top + 1):
                bound = self._at_most(proj, level)
                solver.push()
                solver.add(bound)
                try:
                    while True:
                        r = self._check_in_time(solver, [])
                        if r is None:
                            out.complete, out.timed_out = False, True
                            return out
                        if r is False:
                            break
                        chosen = [i for i, value in enumerate(self._truth(self._got(solver), decls)) if value]
                        out.delivered += 1
                        if not on_set(frozenset(project[i] for i in chosen)):
                            out.complete, out.stopped = False, True
                            return out
                        # supersets excluded for the rest of this call (outside the level's scope)
                        solver.pop()
                        self._assert(solver, [self._or([neg[i] for i in chosen])])
                        solver.push()
                        solver.add(bound)
                finally:
                    solver.pop()
                if level < top:
                    r = self._check_in_time(solver, [])  # anything left at all, whatever its size?
                    if r is None:
                        out.complete, out.timed_out = False, True
                        return out
                    if r is False:
                        break
        finally:
            solver.pop()
        return out

    def _at_most(self, atoms: Sequence[z3.BoolRef], k: int) -> z3.BoolRef:
        """``at most k of atoms`` built in one C call (``z3.PbLe`` coerces every argument in
        Python: 80 ms for 1,669 atoms, paid once per level and restart)."""
        if not atoms:
            return z3.BoolVal(True, self.ctx)
        array = (z3.Ast * len(atoms))(*(v.as_ast() for v in atoms))
        return z3.BoolRef(z3.Z3_mk_atmost(self.ctx.ref(), len(atoms), array, k), self.ctx)

    def _truth(self, m: z3.ModelRef, decls: Sequence[z3.FuncDeclRef]) -> list[bool]:
        """Truth of Boolean constants in ``m`` through z3's C API: ~2 µs a constant where
        ``m.eval`` costs ~15 µs (an atom the model leaves open is false, as model completion says)."""
        ref, model, true = self.ctx.ref(), m.model, self._true_ast
        out = []
        for d in decls:
            value = z3.Z3_model_get_const_interp(ref, model, d.ast)
            out.append(bool(value) and z3.Z3_is_eq_ast(ref, value, true))
        return out

    # ---- clauses added later
    def add_clauses(self, clauses: Sequence[Clause], atoms: Sequence[str]) -> None:
        """New atoms and clauses behind their selectors, asserted into the running solvers."""
        if self.deadline.remaining() == 0:
            raise _OutOfTime()
        fresh = [a for a in atoms if a not in self.enc.bools]
        known = {name: len(consts) for name, consts in self.enc.constants.items()}
        seen = {name for name, _ in self._term_vars}
        formulas = [self.enc.guarded(key, node) for key, node in guarded_clauses(clauses)]
        for sort_name, consts in self.enc.constants.items():  # new constants differ from the others
            for i in range(known.get(sort_name, 0), len(consts)):
                formulas += [z3.Not(consts[i] == c) for c in consts[:i]]
        new_vars = [v for v in self.problem.terms.values() if v.name not in seen]
        if new_vars:
            formulas += self._sort_axioms([SortUse(v.sort, (), (v.name,)) for v in new_vars])
        for name in fresh:
            self.enc.bool_var(name)
            self._atom_names.append(name)
            self._atom_decl_list.append(self.enc.bools[name].decl())
        self._added.extend(formulas)
        for inst in (self._plain, self._guarded):
            if inst is not None:
                self._assert(inst.solver, formulas)
                inst.structure.extend(formulas)
                if inst.opt is not None:
                    inst.opt.add(formulas)

    def _check_in_time(self, solver: z3.Solver, lits: list[z3.BoolRef]) -> bool | None:
        try:
            self._timeout(solver)
        except _OutOfTime:
            return None
        r = self._check(solver, lits)
        if r == z3.sat:
            return True
        if r == z3.unsat:
            return False
        return None

    def enumerate_ranked(self, project: Sequence[str], assumptions: Sequence[Lit], limit: int) -> Enumeration:
        """The first ``limit`` projections in canonical order, level by level (see
        :func:`cda.encodings.scheme.rank_order`): the least (cost, size) of the projections not
        yet listed, then that level whole from the solver, sorted by name. The next size at the
        same cost is found by plain checks; the optimiser is asked only when the cost goes up
        (asked at every level, it was a third of the time on the audit's path problem)."""
        out = Enumeration()
        inst = self._for(assumptions)
        cost = rank_order(self.scheme)
        terms = [(self.enc.encode(node), weight) for node, weight in cost.terms]
        proj = [self.enc.bool_var(a) for a in project]
        decls = [v.decl() for v in proj]
        opt: z3.Optimize | None = None
        pending: list[z3.BoolRef] = []  # blocks the optimiser has not been given yet
        solver = inst.solver
        solver.push()
        self._assert(solver, self._lits(assumptions))
        try:
            at: tuple[int, int] | None = None
            while len(out.models) < limit:
                nxt = None if at is None else self._same_cost(solver, terms, proj, decls, *at)
                if nxt is None:
                    if opt is None:
                        opt = self._ranking_optimizer(inst, assumptions, terms, project)
                    opt.add(pending)
                    pending = []
                    self._timeout(opt)
                    r = self._opt_check(opt)
                    if r == z3.unsat:
                        return out
                    if r != z3.sat:
                        raise _OutOfTime()
                    best = self._got(opt)
                    nxt = (self._cost(best, terms), sum(self._truth(best, decls)))
                at = nxt
                solver.push()
                self._bound(solver, terms, proj, *at)
                level = self._level(solver, project)
                solver.pop()
                level.sort(key=lambda m: sorted(a for a in project if m[a]))
                blocks = [self._or(self._lits([(a, not m[a]) for a in project])) for m in level]
                self._assert(solver, blocks)
                pending += blocks
                out.models.extend(level[: limit - len(out.models)])
                if not project:
                    return out
            out.complete = False
            return out
        except _OutOfTime:
            out.complete, out.timed_out = False, True
            return out
        finally:
            solver.pop()

    def _ranking_optimizer(
        self, inst: _Instance, assumptions: Sequence[Lit], terms: Sequence[tuple[z3.BoolRef, int]], project: Sequence[str]
    ) -> z3.Optimize:
        """An optimiser of the cost, then the number of true ``project`` atoms."""
        opt = z3.Optimize(ctx=self.ctx)
        opt.set("maxsat_engine", "maxres")
        opt.add(inst.structure)
        opt.add(self._lits(assumptions))
        for term, weight in terms:
            opt.add_soft(term, weight, "cost")
        for lit in self._lits([(a, False) for a in project]):
            opt.add_soft(lit, 1, "size")
        return opt

    @staticmethod
    def _cost(m: z3.ModelRef, terms: Sequence[tuple[z3.BoolRef, int]]) -> int:
        return sum(w for t, w in terms if not z3.is_true(m.eval(t, model_completion=True)))

    def _bound(self, solver: z3.Solver, terms: Sequence[tuple[z3.BoolRef, int]], proj: list[z3.BoolRef], c: int, size: int | None) -> None:
        """Cost at most ``c`` and (unless ``None``) at most ``size`` true projected atoms."""
        if terms and c <= _PB_MAX and sum(w for _, w in terms) <= _PB_MAX:
            solver.add(z3.PbLe([(z3.Not(t), w) for t, w in terms], c))
        elif terms:  # z3's pseudo-Boolean bounds take 32-bit ints: past them, integer arithmetic
            solver.add(z3.Sum([z3.If(t, 0, w) for t, w in terms]) <= c)
        if size is not None:
            solver.add(self._at_most(proj, size))

    def _same_cost(
        self, solver: z3.Solver, terms: Sequence[tuple[z3.BoolRef, int]], proj: list[z3.BoolRef],
        decls: list[z3.FuncDeclRef], c: int, size: int,
    ) -> tuple[int, int] | None:
        """The next level at cost ``c`` (its least size over the projections not yet listed),
        ``None`` when none is left at that cost."""
        solver.push()
        try:
            self._bound(solver, terms, proj, c, None)
            if not self._must(solver):
                return None
            upper = sum(self._truth(self._got(solver), decls))
            for bigger in range(size + 1, upper):
                solver.push()
                self._bound(solver, [], proj, c, bigger)
                found = self._must(solver)
                solver.pop()
                if found:
                    return c, bigger
            return c, upper
        finally:
            solver.pop()

    def _must(self, solver: z3.Solver) -> bool:
        """:meth:`_check_in_time` that raises ``_OutOfTime`` when time ran out."""
        r = self._check_in_time(solver, [])
        if r is None:
            raise _OutOfTime()
        return r

    def _level(self, solver: z3.Solver, project: Sequence[str]) -> list[Model]:
        """Every projection ``solver`` allows, each with one model (``_OutOfTime`` when time runs out)."""
        level: list[Model] = []
        solver.push()
        try:
            while True:
                if not self._must(solver):
                    return level
                model = self._model(self._got(solver))
                level.append(model)
                if not project:
                    return level
                self._assert(solver, [self._or(self._lits([(a, not model[a]) for a in project]))])
        finally:
            solver.pop()

    def minimize(self, assumptions: Sequence[Lit]) -> Outcome:
        """A least-cost model whose violated soft clauses are canonical: the cost is z3's
        first objective, then one objective per soft clause in source order."""
        if not self.scheme.objectives:
            return self.check(assumptions)
        inst = self._for(assumptions)
        opt = inst.opt
        if opt is None:
            opt = inst.opt = z3.Optimize(ctx=self.ctx)
            opt.set("maxsat_engine", "maxres")
            opt.add(inst.structure)
            # z3 ranks objectives lexicographically in the order they are declared
            for i, objective in enumerate(self.scheme.objectives):
                for node, weight in objective.terms:
                    opt.add_soft(self.enc.encode(node), weight, f"level{i}")
        self._timeout(opt)
        status = self._status(self._opt_check(opt, *self._lits(assumptions)))
        if status != "sat":
            return Outcome(status)
        model = self._model(self._got(opt))
        return Outcome("sat", model)
