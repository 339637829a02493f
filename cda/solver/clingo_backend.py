"""The clingo backend: one grounded program, many solve calls under assumptions.

Plain clingo for Boolean problems; clingo-dl for metrics and event times (difference
constraints; other linear sums are refused in favour of z3). Projection and optimisation are switched per call
through clingo's runtime configuration, so the program is grounded once. The abducibles are
the program's shown atoms, so enumerating hypotheses is clasp's native projective
enumeration; any other projection adds blocking constraints in a fresh program part guarded
by an external atom (multi-shot), which is released afterwards.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import clingo
from clingo import ast as clingo_ast

from cda.encodings.ir import GroundProblem
from cda.encodings.to_asp import AspEncoder
from cda.errors import BackendUnavailable, BackendUnsupported
from cda.solver.backend import Deadline, Enumeration, Lit, Model, Outcome, _OutOfTime, claim_key, selector, soft_key

__all__ = ["ClingoBackend"]


class ClingoBackend:
    name = "clingo"

    def __init__(self, problem: GroundProblem, *, seed: int, deadline: Deadline, weights: dict[str, int]) -> None:
        self.problem = problem
        self.deadline = deadline
        enc = AspEncoder()
        for atom in problem.atoms:
            enc.atom_term(atom)
        for var in problem.numvars:
            enc.num_term(var)
        for node in problem.background:
            enc.rules.append(f":- {enc.negate(enc.lit(node))}.")
        for clause in problem.clauses:
            sel = enc.atom_term(selector(clause.name))
            enc.rules.append(f":- {sel}, {enc.negate(enc.lit(clause.node))}.")
        for claim in problem.claims:
            key = enc.atom_term(claim_key(claim.name))
            lit = enc.lit(claim.node)
            enc.rules.append(f":- {key}, {enc.negate(lit)}.")
            enc.rules.append(f":- {enc.negate(key)}, {lit}.")
        self._has_soft = bool(problem.soft)
        for i, soft in enumerate(problem.soft):
            lit = enc.lit(soft.node)
            key = enc.atom_term(soft_key(soft.name))
            enc.rules.append(f":- {key}, {enc.negate(lit)}.")
            enc.rules.append(f":- {enc.negate(key)}, {lit}.")
            enc.rules.append(f":~ {enc.negate(lit)}. [{weights[soft.name]}@0, {i}]")
        self._hyps = tuple(problem.hyp_atoms)
        # shown: the problem's atoms (what a model is decoded from); projected: the abducibles
        enc.rules.append("#show.")
        enc.rules.extend(f"#show x({enc.atom_ids[a]}) : x({enc.atom_ids[a]})." for a in problem.atoms)
        enc.rules.extend(f"#project x({enc.atom_ids[a]})." for a in self._hyps)
        self.encoder = enc
        self.text = enc.program()
        self.theory: Any = None
        if enc.uses_theory:
            try:
                from clingodl import ClingoDLTheory
            except ImportError as exc:  # pragma: no cover - clingo-dl is a dependency
                raise BackendUnavailable("the clingo backend needs clingo-dl for metrics and event times") from exc
            self.theory = ClingoDLTheory()
        self.ctl = clingo.Control([f"--seed={seed}", "--opt-mode=ignore"])
        if self.theory is not None:
            self.theory.register(self.ctl)
            with clingo_ast.ProgramBuilder(self.ctl) as builder:
                clingo_ast.parse_string(self.text, lambda stm: self.theory.rewrite_ast(stm, builder.add))
        else:
            self.ctl.add("base", [], self.text)
        self.ctl.ground([("base", [])])
        if self.theory is not None:
            self.theory.prepare(self.ctl)
        self._sym = {name: clingo.Function("x", [clingo.Number(i)]) for name, i in enc.atom_ids.items()}
        self._name_of_symbol = {self._sym[name]: name for name in problem.atoms}
        self._parts = 0
        self._minimal_ready = False
        self._size_guards: dict[int, clingo.Symbol] = {}

    # ---- helpers
    def _assumptions(self, assumptions: Sequence[Lit]) -> list[tuple[clingo.Symbol, bool]]:
        return [(self._sym[key], value) for key, value in assumptions]

    def _model(self, m: clingo.Model) -> Model:
        out: Model = {name: False for name in self.problem.atoms}
        by_symbol = self._name_of_symbol
        for sym in m.symbols(shown=True):
            name = by_symbol.get(sym)
            if name is not None:
                out[name] = True
        if self.encoder.numvar_ids:
            values = {}
            for sym in m.symbols(theory=True):
                if sym.match("dl", 2):
                    values[str(sym.arguments[0])] = sym.arguments[1].number
            for name, idx in self.encoder.numvar_ids.items():
                out[name] = values.get(f"v({idx})", 0)  # clingo-dl omits nodes pinned to 0
        return out

    def _configure(self, models: int, project: bool, optimize: bool) -> None:
        conf: Any = self.ctl.configuration.solve
        conf.models = models
        conf.project = "project" if project else "no"
        conf.opt_mode = "opt" if optimize else "ignore"

    def _deadline_passed(self, out: Enumeration) -> bool:
        """Mark ``out`` as cut short when the deadline has passed (an enumeration never raises)."""
        try:
            self._expired()
        except _OutOfTime:
            out.complete, out.timed_out = False, True
            return True
        return False

    def _expired(self) -> None:
        if self.deadline.remaining() == 0:
            raise _OutOfTime()

    def _solve(
        self,
        assumptions: Sequence[Lit],
        *,
        limit: int,
        project: bool,
        optimize: bool,
        extra: Sequence[tuple[clingo.Symbol, bool]] = (),
    ) -> tuple[list[Model], str, bool]:
        """One solve call: (models, status, capped). Status ``unknown`` means out of time."""
        self._configure(0 if (limit > 1 or optimize) else 1, project, optimize)
        models: list[Model] = []
        capped = False
        timed_out = False
        with self.ctl.solve(
            assumptions=self._assumptions(assumptions) + list(extra), yield_=True, async_=True
        ) as handle:  # type: ignore[union-attr]
            while True:
                handle.resume()
                left = self.deadline.remaining()
                if not handle.wait(left if left is not None else -1.0):
                    handle.cancel()
                    timed_out = True
                    break
                m = handle.model()
                if m is None:
                    break
                if self.theory is not None:
                    self.theory.on_model(m)
                model = self._model(m)
                if optimize:
                    models[:] = [model]
                    continue
                models.append(model)
                if len(models) >= limit:
                    capped = True
                    break
            result = handle.get()
        if timed_out:
            return models, "unknown", capped
        if capped or models:
            return models, "sat", capped
        if result.unsatisfiable:
            return models, "unsat", False
        return models, "unknown", False

    # ---- protocol
    def check(self, assumptions: Sequence[Lit]) -> Outcome:
        self._expired()
        models, status, _ = self._solve(assumptions, limit=1, project=False, optimize=False)
        return Outcome(status, models[0] if models else None)

    def enumerate(self, project: Sequence[str], assumptions: Sequence[Lit], limit: int) -> Enumeration:
        out = Enumeration()
        if self._deadline_passed(out):
            return out
        if tuple(project) == self._hyps:
            models, status, capped = self._solve(assumptions, limit=limit, project=True, optimize=False)
        else:
            models, status, capped = self._enumerate_blocking(project, assumptions, limit)
        if capped:
            # the limit was reached: it is complete only if no further projection exists
            out.complete = False
        out.models = models
        if status == "unknown":
            out.complete, out.timed_out = False, True
        return out

    def _enumerate_blocking(
        self, project: Sequence[str], assumptions: Sequence[Lit], limit: int
    ) -> tuple[list[Model], str, bool]:
        """Distinct projections onto arbitrary atoms: blocking constraints behind a fresh guard."""
        self._parts += 1
        guard = clingo.Function("guard", [clingo.Number(self._parts)])
        part = f"block{self._parts}"
        self.ctl.add(part, [], f"#external {guard}.")
        self.ctl.ground([(part, [])])
        self.ctl.assign_external(guard, True)  # an external is false until assigned
        models: list[Model] = []
        status = "unsat"
        try:
            while True:
                if len(models) >= limit:
                    return models, "sat", True
                found, status, _ = self._solve(assumptions, limit=1, project=False, optimize=False)
                if status != "sat":
                    break
                model = found[0]
                models.append(model)
                if not project:
                    break
                self._parts += 1
                body = ", ".join(
                    (f"x({self.encoder.atom_ids[a]})" if model[a] else f"not x({self.encoder.atom_ids[a]})")
                    for a in project
                )
                block = f"block{self._parts}"
                self.ctl.add(block, [], f":- {guard}, {body}.")
                self.ctl.ground([(block, [])])
        finally:
            self.ctl.release_external(guard)
        return models, ("unknown" if status == "unknown" else "sat" if models else status), False

    def enumerate_minimal(
        self, project: Sequence[str], assumptions: Sequence[Lit], limit: int, max_size: int | None = None
    ) -> Enumeration:
        """clasp's domain-heuristic enumeration of subset-minimal models, projected.

        The abducibles get the sign heuristic ``false`` (``#heuristic … [1, false]``), and the
        solve call runs with ``--heuristic=Domain --enum-mode=domRec`` and projection on the
        abducibles: every model is then subset-minimal on them, each projection once. The
        heuristic part is grounded once, on first use; the configuration is switched for the
        call and restored after. ``max_size`` adds a cardinality bound behind its own external.
        """
        if tuple(project) != self._hyps:
            raise BackendUnsupported("the clingo backend enumerates minimal models on the abducibles only")
        out = Enumeration()
        if self._deadline_passed(out):
            return out
        self._prepare_minimal()
        # an external is false unless assigned: assuming it true would make every call unsat
        guard = self._size_guard(max_size) if max_size is not None else None
        if guard is not None:
            self.ctl.assign_external(guard, True)
        conf: Any = self.ctl.configuration
        heuristic, enum_mode = conf.solver.heuristic, conf.solve.enum_mode
        conf.solver.heuristic = "Domain"
        conf.solve.enum_mode = "domRec"
        try:
            models, status, capped = self._solve(assumptions, limit=limit, project=True, optimize=False)
        finally:
            if guard is not None:
                self.ctl.assign_external(guard, False)
            conf.solver.heuristic = heuristic
            conf.solve.enum_mode = enum_mode
        out.models = models
        if capped:
            out.complete = False
        if status == "unknown":
            out.complete, out.timed_out = False, True
        return out

    def _prepare_minimal(self) -> None:
        if self._minimal_ready:
            return
        ids = [self.encoder.atom_ids[a] for a in self._hyps]
        text = "".join(f"abd({i}).\n" for i in ids) + "#heuristic x(I) : abd(I). [1, false]\n"
        self.ctl.add("minimal", [], text)
        self.ctl.ground([("minimal", [])])
        self._minimal_ready = True

    def _size_guard(self, k: int) -> clingo.Symbol:
        guard = self._size_guards.get(k)
        if guard is None:
            guard = clingo.Function("size_at_most", [clingo.Number(k)])
            part = f"size{k}"
            self.ctl.add(part, [], f"#external {guard}.\n:- {guard}, {k + 1} <= #count{{ I : x(I), abd(I) }}.\n")
            self.ctl.ground([(part, [])])
            self._size_guards[k] = guard
        return guard

    def minimize(self, assumptions: Sequence[Lit]) -> Outcome:
        self._expired()
        models, status, _ = self._solve(assumptions, limit=1, project=False, optimize=self._has_soft)
        if status != "sat" or not models:
            return Outcome(status)
        return Outcome("sat", models[-1])
