"""The clingo backend: one grounded program, many solve calls under assumptions.

Plain clingo for Boolean problems; clingo-dl for metrics and event times (difference
constraints; other linear sums are refused in favour of z3). Projection and optimisation are switched per call
through clingo's runtime configuration, so the program is grounded once. The abducibles are
the program's shown atoms, so enumerating hypotheses is clasp's native projective
enumeration; any other projection adds blocking constraints in a fresh program part guarded
by an external atom (multi-shot), which is released afterwards. Clauses added later
(:meth:`ClingoBackend.add_clauses`) go straight into the solver through clingo's backend API
(:mod:`cda.solver.asp_direct`) when they are Boolean, as a new grounded part otherwise; either
way the solver keeps what it learnt.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import clingo
from clingo import ast as clingo_ast

from cda.encodings.ir import Clause, GroundProblem
from cda.encodings.to_asp import AspEncoder
from cda.errors import BackendUnavailable, BackendUnsupported
from cda.solver.asp_direct import DirectEncoder
from cda.solver.backend import (
    ALL_CLAUSES,
    CLINGO_MAX_WEIGHT,
    Deadline,
    Enumeration,
    Lit,
    Model,
    Outcome,
    SetStream,
    _OutOfTime,
    claim_key,
    selector,
    soft_key,
)

__all__ = ["ClingoBackend"]


class ClingoBackend:
    name = "clingo"

    def __init__(self, problem: GroundProblem, *, seed: int, deadline: Deadline, weights: dict[str, int]) -> None:
        wide = [name for name, w in weights.items() if w > CLINGO_MAX_WEIGHT]
        if wide:
            raise BackendUnsupported(
                f"soft clause {wide[0]}: its weight, as a whole number in the common scale of every weight "
                f"({weights[wide[0]]}), does not fit clingo's 32-bit weights; the z3 backend takes it (or use "
                "fewer decimals)"
            )
        self.problem = problem
        self.deadline = deadline
        self._hyps = tuple(problem.hyp_atoms)
        self._has_soft = bool(problem.soft)
        self.encoder = AspEncoder()
        self.theory: Any = None
        self.ctl = clingo.Control([f"--seed={seed}", "--opt-mode=ignore"])
        self._literal: dict[str, int] = {}
        self._signed: dict[Lit, int] = {}  # (atom, value) -> its program literal, signed
        self._sym: dict[str, clingo.Symbol] = {}
        self._direct: DirectEncoder | None = None
        if problem.numvars:
            self.text = self._build_text(problem, weights)
        else:
            self.text = self._build_direct(problem, weights)
        if not self._sym:  # the direct build made them already
            self._sym = {name: clingo.Function("x", [clingo.Number(i)]) for name, i in self.encoder.atom_ids.items()}
        # a model shows each true problem atom as its number (``#show I : x(I)``), decoded by
        # the symbol's hash (see :meth:`_shown`)
        self._name_of_number: dict[int, str] = {}
        self._name_of_hash: dict[int, str] = {}
        self._by_hash = True  # False once two shown numbers share a hash (never seen)
        for name in problem.atoms:
            self._number_atom(name)
        self._parts = 0
        self._minimal_ready = False
        self._size_guards: dict[int, clingo.Symbol] = {}
        self._atoms = list(problem.atoms)  # every problem atom, those added later included
        self._extra: list[tuple[str, int]] = []  # atoms added through the backend API: (name, literal)

    def _build_text(self, problem: GroundProblem, weights: dict[str, int]) -> str:
        """Metrics and event times: the program as text (clingo-dl's ``&diff`` atoms need the
        grounder), parsed, grounded and handed to clingo-dl. Returns the program text."""
        enc = self.encoder
        for atom in problem.atoms:
            enc.atom_term(atom)
        for var in problem.numvars:
            enc.num_term(var)
        for node in problem.background:
            enc.rules.append(f":- {enc.negate(enc.lit(node))}.")
        every = enc.atom_term(ALL_CLAUSES) if problem.clauses else ""
        for clause in problem.clauses:
            sel = enc.atom_term(selector(clause.name))
            enc.rules.append(f":- {sel}, {', '.join(enc.false_body(clause.node))}.")  # one rule, no aux atom
            enc.rules.append(f"{sel} :- {every}.")
        for claim in problem.claims:
            key = enc.atom_term(claim_key(claim.name))
            lit = enc.lit(claim.node)
            enc.rules.append(f":- {key}, {enc.negate(lit)}.")
            enc.rules.append(f":- {enc.negate(key)}, {lit}.")
        for i, soft in enumerate(problem.soft):
            lit = enc.lit(soft.node)
            key = enc.atom_term(soft_key(soft.name))
            enc.rules.append(f":- {key}, {enc.negate(lit)}.")
            enc.rules.append(f":- {enc.negate(key)}, {lit}.")
            # the cost first, then each soft clause in source order (see :meth:`minimize`)
            top = len(problem.soft)
            enc.rules.append(f":~ {enc.negate(lit)}. [{weights[soft.name]}@{top}, {i}]")
            enc.rules.append(f":~ {enc.negate(lit)}. [1@{top - 1 - i}, {i}]")
        # shown: the problem's atoms (what a model is decoded from); projected: the abducibles
        enc.rules.append("#show.")
        enc.rules.extend(f"#show {enc.atom_ids[a]} : x({enc.atom_ids[a]})." for a in problem.atoms)
        enc.rules.extend(f"#project x({enc.atom_ids[a]})." for a in self._hyps)
        text = enc.program()
        if enc.uses_theory:
            try:
                from clingodl import ClingoDLTheory
            except ImportError as exc:  # pragma: no cover - clingo-dl is a dependency
                raise BackendUnavailable("the clingo backend needs clingo-dl for metrics and event times") from exc
            self.theory = ClingoDLTheory()
            self.theory.register(self.ctl)
            with clingo_ast.ProgramBuilder(self.ctl) as builder:
                clingo_ast.parse_string(text, lambda stm: self.theory.rewrite_ast(stm, builder.add))
        else:
            self.ctl.add("base", [], text)
        self.ctl.ground([("base", [])])
        if self.theory is not None:
            self.theory.prepare(self.ctl)
        return text

    def _build_direct(self, problem: GroundProblem, weights: dict[str, int]) -> str:
        """Boolean problems: the same program as :meth:`_build_text`, written straight into the
        solver through clingo's backend API (:mod:`cda.solver.asp_direct`), with no program
        text to print, parse and ground: a fifth of the time at 10,000 clauses, and linear.
        Only the ``#show`` directives go through the grounder. Returns that text."""
        ids = self.encoder.atom_ids
        literal = self._literal
        keys = [
            *(selector(c.name) for c in problem.clauses),
            *(claim_key(c.name) for c in problem.claims),
            *(soft_key(s.name) for s in problem.soft),
        ]
        direct = self._direct = DirectEncoder(literal.__getitem__)
        with self.ctl.backend() as b:
            # every atom, selector and key is a free choice (``{x(I)}.``); only the problem's
            # atoms need a symbol (they are shown, projected, blocked by name), the selectors
            # and keys are reached by literal alone (a third of this build's time at 10,000 clauses)
            for name in problem.atoms:
                ids[name] = len(ids)
                sym = self._sym[name] = clingo.Function("x", [clingo.Number(ids[name])])
                lit = literal[name] = b.add_atom(sym)
                b.add_rule([lit], [], True)
            for name in keys:
                if name not in literal:
                    lit = literal[name] = b.add_atom()
                    b.add_rule([lit], [], True)
            if problem.clauses:  # one atom that implies every selector (see ALL_CLAUSES)
                every = literal[ALL_CLAUSES] = b.add_atom()
                b.add_rule([every], [], True)
                for clause in problem.clauses:
                    b.add_rule([literal[selector(clause.name)]], [every])
            for node in problem.background:
                b.add_rule([], [-direct.lit(b, node)])
            for clause in problem.clauses:
                b.add_rule([], [literal[selector(clause.name)], *direct.false_body(b, clause.node)])
            for claim in problem.claims:
                key, lit = literal[claim_key(claim.name)], direct.lit(b, claim.node)
                b.add_rule([], [key, -lit])
                b.add_rule([], [-key, lit])
            top = len(problem.soft)
            for i, soft in enumerate(problem.soft):
                key, lit = literal[soft_key(soft.name)], direct.lit(b, soft.node)
                b.add_rule([], [key, -lit])
                b.add_rule([], [-key, lit])
                # the cost first, then each soft clause in source order (see :meth:`minimize`)
                b.add_minimize(top, [(-lit, weights[soft.name])])
                b.add_minimize(top - 1 - i, [(-lit, 1)])
            if self._hyps:
                b.add_project([literal[a] for a in self._hyps])
        # shown: the problem's atoms (numbered first), what a model is decoded from
        text = "#show.\n"
        if problem.atoms:  # with none, clingo would say that x/1 occurs in no rule head (an info message)
            text += f"#show I : x(I), I < {len(problem.atoms)}.\n"
        self.ctl.add("base", [], text)
        self.ctl.ground([("base", [])])
        return text

    # ---- helpers
    def _assumptions(self, assumptions: Sequence[Lit]) -> list[int]:
        """Program literals, not symbols: clingo would look each symbol up again on every call
        (10,000 selectors: 60 ms a call)."""
        signed = self._signed
        try:
            return [signed[lit] for lit in assumptions]
        except KeyError:
            for key, value in assumptions:
                if (key, value) not in signed:
                    signed[(key, value)] = self._literal_of(key) if value else -self._literal_of(key)
            return [signed[lit] for lit in assumptions]

    def _number_atom(self, name: str) -> None:
        """Register a shown problem atom under its number and its number symbol's hash."""
        number = self.encoder.atom_ids[name]
        self._name_of_number[number] = name
        key = hash(clingo.Number(number))
        if self._name_of_hash.setdefault(key, name) != name:
            self._by_hash = False

    def _shown(self, m: clingo.Model) -> list[str]:
        """The problem atoms true in ``m``. A shown symbol is a number whose hash is one C call
        (``sym.number`` is a C call with an out-parameter, 2.5x slower; this was most of the
        enumeration time on large problems); the hashes of the shown numbers are checked
        distinct when registered, else decoding falls back to ``sym.number``."""
        if self._by_hash:
            by_hash = self._name_of_hash
            return [by_hash[key] for key in map(hash, m.symbols(shown=True))]
        by_number = self._name_of_number
        return [by_number[sym.number] for sym in m.symbols(shown=True)]

    def _model(self, m: clingo.Model) -> Model:
        out: Model = dict.fromkeys(self._atoms, False)
        out.update(dict.fromkeys(self._shown(m), True))
        for name, lit in self._extra:
            out[name] = m.is_true(lit)
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

    def _stream(
        self,
        assumptions: Sequence[Lit],
        on_model: Callable[[clingo.Model], bool],
        *,
        models: int,
        project: bool,
        optimize: bool,
        extra: Sequence[tuple[clingo.Symbol, bool]] = (),
    ) -> str:
        """One solve call handing each model to ``on_model`` until it returns ``False``.

        Returns ``sat`` (a model was seen, or the consumer stopped), ``unsat``, or ``unknown``
        (the deadline passed; the search is cancelled). ``on_model`` runs in clingo's solving
        thread while this one waits on the deadline: handing each model over through a
        yielding handle cost about 15 µs a model, most of an enumeration of a small problem.
        Whatever ``on_model`` raises is raised here, unchanged (clingo would wrap it).
        """
        self._configure(models, project, optimize)
        seen = False
        stopped = False
        failure: BaseException | None = None
        cancelled = False
        theory = self.theory

        def consume(m: clingo.Model) -> bool:
            nonlocal seen, stopped, failure
            if cancelled:  # the deadline passed: no model after that is handed over
                return False
            seen = True
            try:
                if theory is not None:
                    theory.on_model(m)
                if on_model(m):
                    return True
            except BaseException as exc:  # re-raised below, in the caller's thread
                failure = exc
            stopped = True
            return False

        with self.ctl.solve(
            assumptions=self._assumptions(assumptions) + list(extra), on_model=consume, async_=True
        ) as handle:  # type: ignore[union-attr]
            left = self.deadline.remaining()
            if not handle.wait(left if left is not None else -1.0):
                cancelled = True
                handle.cancel()
                if failure is not None:
                    raise failure
                return "sat" if stopped else "unknown"
            result = handle.get()
        if failure is not None:
            raise failure
        if seen:
            return "sat"
        return "unsat" if result.unsatisfiable else "unknown"

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
        models: list[Model] = []
        capped = False

        def keep(m: clingo.Model) -> bool:
            nonlocal capped
            model = self._model(m)
            if optimize:
                models[:] = [model]
                return True
            models.append(model)
            if len(models) >= limit:
                capped = True
                return False
            return True

        status = self._stream(
            assumptions, keep, models=0 if (limit > 1 or optimize) else 1, project=project, optimize=optimize,
            extra=extra,
        )
        if status == "unknown":
            return models, "unknown", capped
        return models, status, capped

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
        """clasp's domain-heuristic enumeration of subset-minimal models, projected (see
        :meth:`minimal_sets`), each decoded in full."""
        out = Enumeration()
        models: list[Model] = []

        def keep(m: clingo.Model) -> bool:
            models.append(self._model(m))
            return len(models) < limit

        status = self._minimal_stream(project, assumptions, keep, max_size)
        out.models = models
        if len(models) >= limit:
            out.complete = False
        if status == "unknown":
            out.complete, out.timed_out = False, True
        return out

    def minimal_sets(
        self,
        project: Sequence[str],
        assumptions: Sequence[Lit],
        on_set: Callable[[frozenset[str]], bool],
        max_size: int | None = None,
    ) -> SetStream:
        """Subset-minimal projections on the abducibles, streamed; only the abducibles are decoded.

        Unbounded: clasp's domain-heuristic enumeration (:meth:`_minimal_stream`). With
        ``max_size``: by levels of size instead, as the z3 backend does (see its
        ``minimal_sets``): at level ``b`` plain projective enumeration under ``at most b``,
        the supersets of every set found at lower levels blocked, so each model is a new
        minimal set. domRec under a cardinality bound spent 140 ms a set on c1908 with one
        observation (177 sets of at most 2 gates: 25 s); by levels the same took under a second.
        """
        out = SetStream()
        hyps = set(self._hyps)
        found: list[frozenset[str]] = []

        def deliver(m: clingo.Model) -> bool:
            chosen = frozenset(n for n in self._shown(m) if n in hyps)
            out.delivered += 1
            found.append(chosen)
            if on_set(chosen):
                return True
            out.stopped = True
            return False

        if max_size is None:
            status = self._minimal_stream(project, assumptions, deliver, None)
        else:
            status = self._minimal_levels(project, assumptions, deliver, max_size, found)
        if out.stopped:
            out.complete = False
        if status == "unknown":
            out.complete, out.timed_out = False, True
        return out

    def _minimal_levels(
        self,
        project: Sequence[str],
        assumptions: Sequence[Lit],
        on_model: Callable[[clingo.Model], bool],
        max_size: int,
        found: list[frozenset[str]],
    ) -> str:
        if tuple(project) != self._hyps:
            raise BackendUnsupported("the clingo backend enumerates minimal models on the abducibles only")
        self._prepare_minimal()  # the abd/1 facts the size bounds count
        self._parts += 1
        guard = clingo.Function("blk", [clingo.Number(self._parts)])
        self.ctl.add(f"levels{self._parts}", [], f"#external {guard}.")
        self.ctl.ground([(f"levels{self._parts}", [])])
        self.ctl.assign_external(guard, True)
        guard_literal = self._symbolic_literal(guard)
        stopped = False

        def watch(m: clingo.Model) -> bool:
            nonlocal stopped
            if on_model(m):
                return True
            stopped = True
            return False

        try:
            blocked = 0
            for level in range(min(max_size, len(self._hyps)) + 1):
                if self.deadline.remaining() == 0:
                    return "unknown"
                with self.ctl.backend() as b:  # supersets of the sets found so far
                    for chosen in found[blocked:]:
                        b.add_rule([], [guard_literal] + [self._literal_of(a) for a in sorted(chosen)])
                blocked = len(found)
                size = self._size_guard(level)
                self.ctl.assign_external(size, True)
                try:
                    status = self._stream(assumptions, watch, models=0, project=True, optimize=False)
                finally:
                    self.ctl.assign_external(size, False)
                if status == "unknown" or stopped:
                    return status
                if level < max_size and len(found) == blocked:
                    # nothing at this level: is anything left at all, whatever its size?
                    left = self._stream(assumptions, lambda m: False, models=1, project=False, optimize=False)
                    if left != "sat":
                        return left
            return "sat" if found else "unsat"
        finally:
            self.ctl.release_external(guard)

    def _symbolic_literal(self, sym: clingo.Symbol) -> int:
        atom = self.ctl.symbolic_atoms[sym]
        if atom is None:  # pragma: no cover - a grounded external is always there
            raise BackendUnsupported(f"the clingo backend lost atom {sym}")
        return atom.literal

    def _minimal_stream(
        self,
        project: Sequence[str],
        assumptions: Sequence[Lit],
        on_model: Callable[[clingo.Model], bool],
        max_size: int | None,
    ) -> str:
        if tuple(project) != self._hyps:
            raise BackendUnsupported("the clingo backend enumerates minimal models on the abducibles only")
        if self.deadline.remaining() == 0:
            return "unknown"
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
            return self._stream(assumptions, on_model, models=0, project=True, optimize=False)
        finally:
            if guard is not None:
                self.ctl.assign_external(guard, False)
            conf.solver.heuristic = heuristic
            conf.solve.enum_mode = enum_mode

    # ---- clauses added later
    def add_clauses(self, clauses: Sequence[Clause], atoms: Sequence[str]) -> None:
        """New atoms (free choices) and clauses behind their selectors, in the running solver."""
        self._expired()
        if self._direct is not None:  # built through the backend API: so are the additions
            self._add_direct(self._direct, clauses, atoms)
        else:
            self._add_text(clauses, atoms)

    def _symbol_for(self, name: str) -> clingo.Symbol:
        idx = self.encoder.atom_ids.get(name)
        if idx is None:
            idx = self.encoder.atom_ids[name] = len(self.encoder.atom_ids)
        sym = clingo.Function("x", [clingo.Number(idx)])
        self._sym[name] = sym
        return sym

    def _literal_of(self, name: str) -> int:
        lit = self._literal.get(name)
        if lit is None:
            atom = self.ctl.symbolic_atoms[self._sym[name]]
            # every atom of a program written as text has a choice rule (``{x(I)}.``), so the
            # grounder drops one only when no answer set can make it true: a claim ``false``
            # gives ``:- x(I), #true.``. Such an atom is false; a fresh atom with no rule is too.
            lit = self._literal[name] = atom.literal if atom is not None else self._false_literal()
        return lit

    def _false_literal(self) -> int:
        """A program atom false in every answer set (no rule derives it), to stand for an atom
        the grounder simplified away."""
        with self.ctl.backend() as b:
            return b.add_atom()

    def _add_direct(self, direct: DirectEncoder, clauses: Sequence[Clause], atoms: Sequence[str]) -> None:
        fresh = [a for a in atoms if a not in self._sym]
        guards = [selector(c.name) for c in clauses]
        with self.ctl.backend() as b:
            for name in fresh:
                lit = self._literal[name] = b.add_atom(self._symbol_for(name))
                b.add_rule([lit], [], True)
            for name in guards:  # reached by literal alone, as in the first build
                if name not in self._literal:
                    lit = self._literal[name] = b.add_atom()
                    b.add_rule([lit], [], True)
            for name in fresh:
                self._extra.append((name, self._literal[name]))
                self._atoms.append(name)
            for clause, guard in zip(clauses, guards):
                b.add_rule([], [self._literal[guard], *direct.false_body(b, clause.node)])

    def _add_text(self, clauses: Sequence[Clause], atoms: Sequence[str]) -> None:
        enc = self.encoder
        start = len(enc.rules)
        fresh = [a for a in atoms if a not in self._sym]
        for name in fresh:
            enc.atom_term(name)
        for clause in clauses:
            sel = enc.atom_term(selector(clause.name))
            enc.rules.append(f":- {sel}, {', '.join(enc.false_body(clause.node))}.")
        for name in fresh:
            enc.rules.append(f"#show {enc.atom_ids[name]} : x({enc.atom_ids[name]}).")
        self._parts += 1
        part = f"more{self._parts}"
        text = "\n".join(enc.rules[start:]) + "\n"
        if self.theory is not None:
            with clingo_ast.ProgramBuilder(self.ctl) as builder:
                clingo_ast.parse_string(
                    f"#program {part}.\n" + text, lambda stm: self.theory.rewrite_ast(stm, builder.add)
                )
        else:
            self.ctl.add(part, [], text)
        self.ctl.ground([(part, [])])
        if self.theory is not None:
            self.theory.prepare(self.ctl)
        for name in fresh + [selector(c.name) for c in clauses]:
            self._symbol_for(name)
            if name in fresh:
                self._number_atom(name)
        self._atoms.extend(fresh)

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
        """A least-cost model; among those, the one satisfying the earliest soft clauses
        (lexicographically: the first soft clause if any cheapest model can, then the second...),
        so its violated soft clauses are canonical: one priority level for the cost, below it
        one per soft clause in source order."""
        self._expired()
        models, status, _ = self._solve(assumptions, limit=1, project=False, optimize=self._has_soft)
        if status != "sat" or not models:
            return Outcome(status)
        return Outcome("sat", models[-1])
