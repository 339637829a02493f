"""The z3 backend: one incremental ``Solver`` for checks and enumeration, one ``Optimize`` for costs."""

from __future__ import annotations

from collections.abc import Sequence

import z3

from cda.encodings.ir import NUM_MAX, NUM_MIN, GroundProblem
from cda.encodings.to_z3 import Z3Encoder
from cda.solver.backend import Deadline, Enumeration, Lit, Model, Outcome, _OutOfTime, claim_key, selector, soft_key

__all__ = ["Z3Backend"]


class Z3Backend:
    name = "z3"

    def __init__(self, problem: GroundProblem, *, seed: int, deadline: Deadline, weights: dict[str, int]) -> None:
        self.problem = problem
        self.deadline = deadline
        self.weights = weights
        self.ctx = z3.Context()
        self.enc = Z3Encoder(self.ctx)
        self.seed = seed
        self.solver = z3.SolverFor("QF_LIA", ctx=self.ctx) if problem.numvars else z3.Solver(ctx=self.ctx)
        self.solver.set("random_seed", seed)
        self._structure: list[z3.BoolRef] = []
        for atom in problem.atoms:  # every atom exists, even if no clause mentions it
            self.enc.bool_var(atom)
        for var in problem.numvars:
            x = self.enc.int_var(var)
            self._structure += [x >= NUM_MIN, x <= NUM_MAX]
        for node in problem.background:
            self._structure.append(self.enc.encode(node))
        for clause in problem.clauses:
            self._structure.append(z3.Implies(self.enc.bool_var(selector(clause.name)), self.enc.encode(clause.node)))
        for claim in problem.claims:
            self._structure.append(self.enc.bool_var(claim_key(claim.name)) == self.enc.encode(claim.node))
        for soft in problem.soft:
            self._structure.append(self.enc.bool_var(soft_key(soft.name)) == self.enc.encode(soft.node))
        self._soft = [(self.enc.encode(s.node), weights[s.name]) for s in problem.soft]
        self.solver.add(self._structure)
        self._opt: z3.Optimize | None = None
        self._atom_decls = [(name, self.enc.bools[name].decl()) for name in problem.atoms]

    # ---- helpers
    def _lits(self, assumptions: Sequence[Lit]) -> list[z3.BoolRef]:
        out = []
        for key, value in assumptions:
            var = self.enc.bool_var(key)
            out.append(var if value else z3.Not(var))
        return out

    def _timeout(self, target: z3.Solver | z3.Optimize) -> None:
        left = self.deadline.remaining()
        if left is not None:
            if left <= 0:
                raise _OutOfTime()
            target.set("timeout", max(1, int(left * 1000)))

    def _model(self, m: z3.ModelRef) -> Model:
        # only the problem's atoms (not the thousands of selectors): an atom the model leaves
        # open is false, what model completion would choose
        out: Model = {}
        for name, decl in self._atom_decls:
            value = m.get_interp(decl)
            out[name] = value is not None and z3.is_true(value)
        for name in self.problem.numvars:
            out[name] = m.eval(self.enc.ints[name], model_completion=True).as_long()
        return out

    def _status(self, r: z3.CheckSatResult) -> str:
        return "sat" if r == z3.sat else "unsat" if r == z3.unsat else "unknown"

    # ---- protocol
    def check(self, assumptions: Sequence[Lit]) -> Outcome:
        self._timeout(self.solver)
        status = self._status(self.solver.check(*self._lits(assumptions)))
        return Outcome(status, self._model(self.solver.model()) if status == "sat" else None)

    def enumerate(self, project: Sequence[str], assumptions: Sequence[Lit], limit: int) -> Enumeration:
        out = Enumeration()
        proj = [self.enc.bool_var(a) for a in project]
        self.solver.push()
        # inside this scope the assumptions are plain facts: thousands of assumption literals
        # per check cost more than unit clauses propagated once
        self.solver.add(self._lits(assumptions))
        lits: list[z3.BoolRef] = []
        try:
            while True:
                if len(out.models) >= limit:
                    out.complete = False
                    break
                try:
                    self._timeout(self.solver)
                except _OutOfTime:
                    out.complete, out.timed_out = False, True
                    break
                r = self.solver.check(*lits)
                if r == z3.unsat:
                    break
                if r != z3.sat:
                    out.complete, out.timed_out = False, True
                    break
                m = self.solver.model()
                model = self._model(m)
                out.models.append(model)
                if not proj:
                    break
                self.solver.add(z3.Or([z3.Not(v) if model[a] else v for a, v in zip(project, proj)]))
        finally:
            self.solver.pop()
        return out

    def enumerate_minimal(
        self, project: Sequence[str], assumptions: Sequence[Lit], limit: int, max_size: int | None = None
    ) -> Enumeration:
        """Find a model, shrink it to a subset-minimal set, block that set's supersets, repeat.

        Shrinking is deletion-based: for each atom ``a`` of the set ``S``, ask for a model with
        every projected atom outside ``S - {a}`` false; if there is one, move to its (smaller)
        set. At the end no proper subset of ``S`` has a model. A blocking clause ``not all of S``
        excludes exactly the supersets, so the next model leads to a new minimal set.
        """
        out = Enumeration()
        proj = [self.enc.bool_var(a) for a in project]
        self.solver.push()
        self.solver.add(self._lits(assumptions))
        if max_size is not None:
            self.solver.add(z3.PbLe([(v, 1) for v in proj], max_size) if proj else z3.BoolVal(True, self.ctx))
        try:
            while True:
                if len(out.models) >= limit:
                    out.complete = False
                    break
                r = self._check_in_time([])
                if r is None:
                    out.complete, out.timed_out = False, True
                    break
                if r is False:
                    break
                shrunk = self._shrink(project, proj, self._projection(project, proj))
                if shrunk is None:
                    out.complete, out.timed_out = False, True
                    break
                out.models.append(shrunk)
                chosen = [v for a, v in zip(project, proj) if shrunk[a]]
                if not chosen:  # the empty set is the one minimal set
                    break
                self.solver.add(z3.Or([z3.Not(v) for v in chosen]))
        finally:
            self.solver.pop()
        return out

    def _check_in_time(self, lits: list[z3.BoolRef]) -> bool | None:
        try:
            self._timeout(self.solver)
        except _OutOfTime:
            return None
        r = self.solver.check(*lits)
        if r == z3.sat:
            return True
        if r == z3.unsat:
            return False
        return None

    def _shrink(self, project: Sequence[str], proj: list[z3.BoolRef], model: dict[str, bool]) -> Model | None:
        current = [i for i, a in enumerate(project) if model[a]]
        position = 0
        while position < len(current):
            keep = set(current) - {current[position]}
            off = [z3.Not(v) for i, v in enumerate(proj) if i not in keep]
            r = self._check_in_time(off)
            if r is None:
                return None
            if r:
                values = self._projection(project, proj)
                current = [i for i in current if values[project[i]]]  # a subset of keep
                continue  # the atom at this position is gone: look at the next one there
            position += 1
        # the full model of the minimal set (the last model found may be of a larger one)
        chosen = set(current)
        r = self._check_in_time([v if i in chosen else z3.Not(v) for i, v in enumerate(proj)])
        if r is None:
            return None
        assert r, "a set found by the solver has a model"
        return self._model(self.solver.model())

    def _projection(self, project: Sequence[str], proj: list[z3.BoolRef]) -> dict[str, bool]:
        m = self.solver.model()
        return {a: z3.is_true(m.eval(v, model_completion=True)) for a, v in zip(project, proj)}

    def minimize(self, assumptions: Sequence[Lit]) -> Outcome:
        if not self._soft:
            return self.check(assumptions)
        if self._opt is None:
            self._opt = z3.Optimize(ctx=self.ctx)
            self._opt.set("maxsat_engine", "maxres")
            self._opt.add(self._structure)
            for formula, weight in self._soft:
                self._opt.add_soft(formula, weight, "cost")
        self._timeout(self._opt)
        status = self._status(self._opt.check(*self._lits(assumptions)))
        if status != "sat":
            return Outcome(status)
        model = self._model(self._opt.model())
        return Outcome("sat", model)
