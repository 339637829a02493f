"""The clingo backend: one grounded program, many solve calls under assumptions.

Plain clingo for Boolean problems; clingo-dl for metrics and event times (difference
constraints; other linear sums are refused in favour of z3). Projection and optimisation are switched per call
through clingo's runtime configuration, so the program is grounded once. The abducibles are
the program's shown atoms, so enumerating hypotheses is clasp's native projective
enumeration; any other projection adds blocking constraints in a fresh program part guarded
by an external atom (multi-shot), which is released afterwards.

The program is the scheme of :mod:`cda.encodings.scheme`, written once (:meth:`ClingoBackend._write`)
by the one ASP encoder (:mod:`cda.encodings.to_asp`) to one of two sinks: clingo's backend API
for Boolean problems (no text to print, parse and ground), program text for problems with
metrics or event times (clingo-dl's ``&diff`` atoms need the grounder). Clauses added later
(:meth:`ClingoBackend.add_clauses`) go to the same sink; either way the solver keeps what it
learnt.

A cancel (:class:`~cda.contracts.deadline.CancelToken`) reaches a solve in flight through
``Control.interrupt``, registered with the deadline (thread-safe, and kept for the next solve
when none runs); a solve it interrupted answers ``unknown``, as one the deadline cut short.
"""

from __future__ import annotations

import contextvars
import operator
from collections.abc import Callable, Sequence
from typing import Any

import clingo

from cda.encodings.finite import FiniteDomains
from cda.encodings.ir import Clause, GroundProblem, Node
from cda.encodings.products import expand_products
from cda.encodings.scheme import (
    ALL_CLAUSES,
    Scheme,
    build_scheme,
    guarded_clauses,
    rank_order,
    selector,
    soft_key,
)
from cda.encodings.to_asp import AspEncoder, AspSink, ProgramText
from cda.errors import BackendUnavailable, BackendUnsupported
from cda.solver.backend import (
    CLINGO_MAX_WEIGHT,
    Deadline,
    Enumeration,
    Lit,
    Model,
    Outcome,
    SetStream,
    _OutOfTime,
)
from cda.solver.observations import GroupTemplate

__all__ = ["ClingoBackend"]

#: the longest single wait on a solve handle: clingo turns the seconds into a signed 64-bit count
#: of nanoseconds, so a wait of ~9.2e9 s or more overflows and returns at once, as if timed out
_WAIT_SLICE = 86_400.0


#: a number of a symbol that distinct shown numbers do not share: the symbol's own 64-bit value
#: as clingo's Python API keeps it (``Symbol._rep``, every 5.x release: an attribute read, where
#: ``hash(sym)`` is a C call through cffi, 0.4 µs, most of decoding a model of hundreds of
#: atoms), or its hash where the API keeps no such value. Either way the keys of the shown numbers
#: are checked distinct when registered, and decoding falls back to ``sym.number`` otherwise.
_RAW_KEYS = isinstance(getattr(clingo.Number(1), "_rep", None), int)
_symbol_key: Callable[[clingo.Symbol], int] = operator.attrgetter("_rep") if _RAW_KEYS else hash


try:  # clingo's C API as its own Python wrapper calls it (every 5.x release): see _DirectSink
    from clingo._internal import _ffi, _handle_error, _lib
except ImportError:  # pragma: no cover - a clingo without them: its Backend is used as it is
    _lib = None


class _DirectSink:
    """clingo's ``Backend`` with ``add_rule`` and ``add_atom`` calling the C API straight.

    Why: writing a problem of 10,000 clauses makes about 90,000 of these two calls, and the
    Python wrapper's own work around each (a frame, an out-parameter allocated per atom, an
    error handler) was about a fifth of building it. The same C calls, with the same arguments,
    and any failure raised as the wrapper raises it (``_handle_error``); everything else is the
    backend's own.
    """

    def __init__(self, backend: clingo.Backend) -> None:
        self._backend = backend
        rep = backend._rep  # type: ignore[attr-defined]
        rule, atom = _lib.clingo_backend_rule, _lib.clingo_backend_add_atom
        out, sym, null = _ffi.new("clingo_atom_t*"), _ffi.new("clingo_symbol_t*"), _ffi.NULL

        def add_rule(head: Sequence[int], body: Sequence[int] = (), choice: bool = False) -> None:
            if not rule(rep, choice, head, len(head), body, len(body)):
                _handle_error(False)

        def add_atom(symbol: clingo.Symbol | None = None) -> int:
            if symbol is None:
                ok = atom(rep, null, out)
            else:
                sym[0] = symbol._rep  # type: ignore[attr-defined]
                ok = atom(rep, sym, out)
            if not ok:
                _handle_error(False)
            return out[0]  # type: ignore[no-any-return]

        self.add_rule = add_rule
        self.add_atom = add_atom

    def __getattr__(self, name: str) -> Any:
        return getattr(self._backend, name)


def _direct_sink(backend: clingo.Backend) -> AspSink:
    """:class:`_DirectSink` over ``backend`` where clingo has the internals it uses, else ``backend``."""
    if _lib is None or not _RAW_KEYS or not isinstance(getattr(backend, "_rep", None), _ffi.CData):
        return backend
    return _DirectSink(backend)  # type: ignore[return-value]


def _wait(handle: clingo.SolveHandle, deadline: Deadline) -> bool:
    """Wait until the solve finishes (``True``) or the deadline passes (``False``), in slices of at
    most :data:`_WAIT_SLICE` seconds, so that a huge budget (``--timeout 1e10``) means a long wait.

    A ``False`` from ``handle.wait(t)`` means "no result yet", not "``t`` seconds passed": clasp's
    timed wait waits on its condition variable once and answers whether a result is ready, so a
    wake-up without a result (a spurious one, which POSIX and C++ allow, or the solving thread's
    start-up notice arriving after the wait began) returns ``False`` at once. Only the deadline
    itself says the time is up (docs/architecture.md, "Waiting on clingo"); reading the early ``False``
    as a timeout turned whole searches into labelled partials with most of their budget left.
    """
    while True:
        left = deadline.remaining()
        if left is None:
            return bool(handle.wait(-1.0))
        if left <= 0.0:
            return bool(handle.wait(0.0))  # a result that came with the deadline still counts
        if handle.wait(min(left, _WAIT_SLICE)):
            return True


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
        if sum(weights.values()) > CLINGO_MAX_WEIGHT:  # a cost bound sums them (ranked enumeration)
            raise BackendUnsupported(
                f"the soft weights sum to {sum(weights.values())} in their common whole-number scale, past "
                "clingo's 32-bit weights; the z3 backend takes it"
            )
        #: term variables as one-hot value atoms (cda.encodings.finite); models are read back
        self._finite: FiniteDomains | None = None
        problem = expand_products(problem, "clingo")  # x * y as pairs of values, or refused by name
        if problem.terms:
            self._finite = FiniteDomains(problem, "clingo")
            problem = self._finite.problem
        self.problem = problem
        self.deadline = deadline
        self._hyps = tuple(problem.hyp_atoms)
        self._has_soft = bool(problem.soft)
        self.theory: Any = None
        self.ctl = clingo.Control([f"--seed={seed}", "--opt-mode=ignore"])
        deadline.on_cancel(self._interrupt)  # a cancel stops the solve in flight (see _interrupt)
        self._ids: dict[str, int] = {}  # problem atom → its number I, shown as x(I)
        self._sym: dict[str, clingo.Symbol] = {}  # atom or key → its symbol (problem atoms; every key in text)
        self._local: dict[str, int] = {}  # atom or key → its literal in the encoder's numbering
        self._literal: dict[str, int] = {}  # atom or key → its program literal
        self._signed: dict[Lit, int] = {}  # (atom, value) -> its program literal, signed
        #: the program text (metrics and event times), else None: the program went straight
        #: into the solver through clingo's backend API
        self._text: ProgramText | None = None
        #: clauses written behind ALL_CLAUSES alone, their selectors not made yet (see _write)
        self._unselected: tuple[tuple[str, Node], ...] = ()
        scheme = self._scheme = build_scheme(problem, weights)
        if problem.numvars:
            self._build_text(scheme)
        else:
            self._build_direct(scheme)
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
        self._all_false: Model = {}  # every atom false: each decoded model starts as a copy
        self._extra: list[tuple[str, int]] = []  # atoms added through the backend API: (name, literal)
        #: copies of a group template (``add_copy``): (template, group index, its slots' literals),
        #: named only when a whole model is decoded
        self._copies: list[tuple[GroupTemplate, int, list[tuple[str, int]]]] = []
        self._true_atom: int | None = None

    # ---- building: the scheme written to a sink
    def _declare(self, sink: AspSink, name: str, shown: bool, choice: bool = True) -> int:
        """A free atom for problem atom or key ``name``: ``{x(I)}`` when ``shown`` (a problem
        atom: shown, projected, blocked by name), else an atom reached by its literal alone
        (a third of the direct build's time at 10,000 clauses went to symbols for keys).
        ``choice=False``: the caller writes the choice rule, one for many atoms."""
        if shown:
            idx = self._ids[name] = len(self._ids)
            sym = self._sym[name] = clingo.Function("x", [clingo.Number(idx)])
            lit = sink.add_atom(sym)
        else:
            lit = sink.add_atom()
            if self._text is not None:  # printed as a(I): found again by that symbol once grounded
                self._sym[name] = clingo.Function("a", [clingo.Number(lit)])
        if choice:
            sink.add_rule([lit], [], True)
        self._local[name] = lit
        return lit

    def _write(self, sink: AspSink, scheme: Scheme, *, selectors: bool = True) -> None:
        """The scheme (:mod:`cda.encodings.scheme`) as ASP, on either sink.

        ``selectors=False``: each clause is written behind :data:`ALL_CLAUSES` alone
        (``:- every, <clause false>``) and its own selector is made only when a call first asks
        for one (:meth:`_select_clauses`). Most runs never do (every clause on is the question
        of hypotheses, claims and next tests; only conflicts and the investigations' queries
        switch clauses one by one), and a selector per clause was a second atom and rule per
        clause for clasp: half of building a large program and a third of enumerating it.
        """
        local = self._local
        for name in scheme.atoms:
            if self.deadline.tick():
                raise _OutOfTime(f"while encoding for clingo (declaring {len(scheme.atoms):,} atoms)")
            self._declare(sink, name, True, choice=False)
        guarded = scheme.guarded if selectors or scheme.every is None else ()
        self._unselected = () if guarded else scheme.guarded
        keys = [key for key, _ in guarded] + [key for key, _ in scheme.defined]
        if scheme.every is not None:
            keys.append(scheme.every)
        for key in keys:
            self._declare(sink, key, False, choice=False)
        free = [local[name] for name in scheme.atoms] + [local[key] for key in keys]
        if free:  # one choice rule for every free atom: a call per atom was a fifth of the build
            sink.add_rule(free, [], True)
        enc = self.encoder = AspEncoder(sink, local.__getitem__, self.deadline, len(self.problem.factory))
        if scheme.every is not None:
            every = local[scheme.every]
            for key, _ in guarded:
                sink.add_rule([local[key]], [every])
        for node in scheme.background:
            sink.add_rule([], [-enc.lit(node)])
        for key, node in guarded:  # one rule, no auxiliary atom for the clause's top
            sink.add_rule([], [local[key], *enc.false_body(node)])
        if self._unselected:
            every = local[scheme.every]  # type: ignore[index]
            for _, node in self._unselected:
                sink.add_rule([], [every, *enc.false_body(node)])
        for key, node in scheme.defined:
            k, lit = local[key], enc.lit(node)
            sink.add_rule([], [k, -lit])
            sink.add_rule([], [-k, lit])
        # the first at the highest priority; the cost stands one above the others, leaving
        # room for the size level of enumerate_ranked (switched on only there)
        for i, objective in enumerate(scheme.objectives):
            priority = len(scheme.objectives) - 1 - i + (1 if i == 0 else 0)
            sink.add_minimize(priority, [(-enc.lit(node), weight) for node, weight in objective.terms])
        if scheme.project:
            sink.add_project([local[a] for a in scheme.project])

    def _build_text(self, scheme: Scheme) -> None:
        """Metrics and event times: the program as text (clingo-dl's ``&diff`` atoms need the
        grounder), parsed, grounded and handed to clingo-dl."""
        sink = self._text = ProgramText()
        for var, (low, high) in zip(scheme.numvars, scheme.ranges):
            if not -CLINGO_MAX_WEIGHT <= low <= high <= CLINGO_MAX_WEIGHT:
                raise BackendUnsupported(
                    f"the clingo backend's integers are 32-bit (clingo-dl); {var} ranges over [{low}, {high}]: "
                    "use backend 'z3'"
                )
            sink.int_var(var, low, high)
        self._write(sink, scheme)
        # shown: the problem's atoms, what a model is decoded from
        sink.add_text("#show.")
        if scheme.atoms:
            sink.add_text(f"#show I : x(I), I < {len(scheme.atoms)}.")
        self._ground_text(sink.take(), "base")

    def _ground_text(self, text: str, part: str) -> None:
        if self._text is not None and self._text.uses_theory:
            if self.theory is None:
                try:
                    from clingodl import ClingoDLTheory
                except ImportError as exc:  # pragma: no cover - clingo-dl is a dependency
                    raise BackendUnavailable("the clingo backend needs clingo-dl for metrics and event times") from exc
                self.theory = ClingoDLTheory()
                self.theory.register(self.ctl)
            from clingo import ast as clingo_ast  # 10 ms to import: only for theory programs

            with clingo_ast.ProgramBuilder(self.ctl) as builder:
                clingo_ast.parse_string(
                    f"#program {part}.\n" + text, lambda stm: self.theory.rewrite_ast(stm, builder.add)
                )
        else:
            self.ctl.add(part, [], text)
        self.ctl.ground([(part, [])])
        if self.theory is not None:
            self.theory.prepare(self.ctl)

    def _build_direct(self, scheme: Scheme) -> None:
        """Boolean problems: the program written straight into the solver through clingo's
        backend API, with no program text to print, parse and ground: a fifth of the time at
        10,000 clauses, and linear. Only the ``#show`` directives go through the grounder."""
        self._literal = self._local  # the encoder's literals are the program's
        with self.ctl.backend() as b:
            self._write(_direct_sink(b), scheme, selectors=False)
        # shown: the problem's atoms (numbered first), what a model is decoded from
        text = "#show.\n"
        if scheme.atoms:  # with none, clingo would say that x/1 occurs in no rule head (an info message)
            text += f"#show I : x(I), I < {len(scheme.atoms)}.\n"
        self.ctl.add("base", [], text)
        self.ctl.ground([("base", [])])

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
        """Register a shown problem atom under its number and its number symbol's key."""
        number = self._ids[name]
        self._name_of_number[number] = name
        key = _symbol_key(clingo.Number(number))
        if self._name_of_hash.setdefault(key, name) != name:
            self._by_hash = False

    def _shown(self, m: clingo.Model) -> list[str]:
        """The problem atoms true in ``m``, each shown as its number: decoded by the symbol's key
        (:func:`_symbol_key`), checked distinct when registered, else by ``sym.number`` (a C call
        with an out-parameter for every symbol; this was most of the enumeration's time on large
        problems)."""
        if self._by_hash:
            shown = m.symbols(shown=True)
            # the symbols' keys read straight off clingo's array (ints, in C) when it holds them:
            # iterating the sequence made a Symbol object per true atom, most of decoding a model
            raw = getattr(shown, "_p_symbols", None) if _RAW_KEYS else None
            return list(map(self._name_of_hash.__getitem__, map(_symbol_key, shown) if raw is None else raw))
        by_number = self._name_of_number
        return [by_number[sym.number] for sym in m.symbols(shown=True)]

    def _model(self, m: clingo.Model) -> Model:
        all_false = self._all_false
        if len(all_false) != len(self._atoms):  # atoms were added since: made again
            all_false = self._all_false = dict.fromkeys(self._atoms, False)
        out: Model = all_false.copy()  # a copy of a dict is one block copy; fromkeys hashed every key
        out.update(dict.fromkeys(self._shown(m), True))
        for name, lit in self._extra:
            out[name] = m.is_true(lit)
        for template, index, slots in self._copies:
            for slot, lit in slots:
                out[template.atom_name(slot, index)] = m.is_true(lit)
        if self._text is not None and self._text.numvar_ids:
            values = {}
            for sym in m.symbols(theory=True):
                if sym.match("dl", 2):
                    values[str(sym.arguments[0])] = sym.arguments[1].number
            for name, idx in self._text.numvar_ids.items():
                out[name] = values.get(f"v({idx})", 0)  # clingo-dl omits nodes pinned to 0
        return out if self._finite is None else self._finite.decode(out)

    def _configure(self, models: int, project: bool, optimize: bool) -> None:
        conf: Any = self.ctl.configuration.solve
        conf.models = models
        conf.project = "project" if project else "no"
        conf.opt_mode = "opt" if optimize else "ignore"

    def follow(self, deadline: Deadline) -> None:
        """Run the next calls under ``deadline`` (and its token's cancel): a backend kept between
        calls (an investigation's live one) was built under an earlier call's."""
        self.deadline = deadline
        deadline.on_cancel(self._interrupt)

    def _interrupt(self) -> None:
        """The cancel token's hook: stop the solve in flight (``Control.interrupt``, safe from any
        thread while the Control lives). Registered as the backend's method, never the Control's
        own ``interrupt``: CPython runs an object's ``__del__`` before it clears the weak references
        to it, so a weak hook to the Control's own method still resolved while clingo's ``__del__``
        freed it, and a Ctrl-C landing then called into freed memory (SIGSEGV; seen in ``cda bench
        folio``). The backend has no ``__del__``: its weak references are gone before the Control it
        holds is freed. Never ``handle.cancel``: a handle already closed is freed memory too."""
        self.ctl.interrupt()

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
        Whatever ``on_model`` raises is raised here, unchanged (clingo would wrap it). It runs in
        this call's context (:mod:`contextvars`): a consumer that reads the run's deadline or cancel
        token (a circuit oracle's simulation) sees the caller's, not none.
        """
        self._configure(models, project, optimize)
        seen = False
        stopped = False
        failure: BaseException | None = None
        cancelled = False
        theory = self.theory
        context = contextvars.copy_context()  # the caller's run deadline and cancel token, in clingo's thread
        # clingo's Control keeps its last solve's handler (``consume``) until the next solve; a
        # handler reaching this backend (``on_model`` usually does) would be a cycle that keeps the
        # Control and its ground program alive until the cyclic collector runs. The callback is
        # reached through this list, emptied when the solve ends (docs/architecture.md, "Freeing
        # solvers").
        sink = [on_model]

        def consume(m: clingo.Model) -> bool:
            nonlocal seen, stopped, failure
            if cancelled:  # the deadline passed: no model after that is handed over
                return False
            seen = True
            try:
                if theory is not None:
                    theory.on_model(m)
                if context.run(sink[0], m):
                    return True
            except BaseException as exc:  # re-raised below, in the caller's thread
                failure = exc
            stopped = True
            return False

        try:
            with self.ctl.solve(
                assumptions=self._assumptions(assumptions) + list(extra), on_model=consume, async_=True
            ) as handle:  # type: ignore[union-attr]
                if not _wait(handle, self.deadline):
                    cancelled = True
                    handle.cancel()
                    if failure is not None:
                        raise failure
                    return "sat" if stopped else "unknown"
                result = handle.get()
        finally:
            sink.clear()
        if failure is not None:
            raise failure
        if result.interrupted and not stopped:  # a cancel (Control.interrupt): cut short, as by the deadline
            return "unknown"
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

    def enumerate_ranked(self, project: Sequence[str], assumptions: Sequence[Lit], limit: int) -> Enumeration:
        """The first ``limit`` projections in canonical order, level by level (see
        :func:`cda.encodings.scheme.rank_order`): clasp finds the least (cost, size) of the
        projections not yet listed (the size a ``#minimize`` level behind an external, between
        the cost and the soft clauses' own levels, see :meth:`_write`), then lists that level
        whole by projective enumeration under a cost and a size bound, sorted by name."""
        out = Enumeration()
        if tuple(project) != self._hyps:
            raise BackendUnsupported("the clingo backend ranks projections on the abducibles only")
        if self._deadline_passed(out):
            return out
        self._prepare_minimal()  # the abd/1 facts the size bounds count
        cost = rank_order(self._scheme)
        keys = [(self._literal_of(soft_key(s.name)), weight) for s, (_, weight) in zip(self.problem.soft, cost.terms)]
        self._parts += 1
        guard = clingo.Function("rank", [clingo.Number(self._parts)])
        size_priority = len(self._scheme.objectives) - 1
        text = f"#external {guard}.\n" + "".join(
            f"#minimize{{ 1@{size_priority},{self._ids[a]} : x({self._ids[a]}), {guard} }}.\n" for a in project
        )
        part = f"rank{self._parts}"
        self.ctl.add(part, [], text)
        self.ctl.ground([(part, [])])
        self.ctl.assign_external(guard, True)
        guard_literal = self._symbolic_literal(guard)
        try:
            best: list[tuple[Model, list[int]]] = []

            def keep(m: clingo.Model) -> bool:
                best[:] = [(self._model(m), list(m.cost))]
                return True

            while len(out.models) < limit:
                best.clear()
                status = self._stream(assumptions, keep, models=0, project=False, optimize=True)
                if status == "unknown":
                    out.complete, out.timed_out = False, True
                    return out
                if not best:
                    return out
                model, costs = best[0]
                size = sum(1 for a in project if model[a])
                c = costs[0] if keys else 0
                self._parts += 1  # at most cost c and size atoms: this level only
                bound = clingo.Function("rankc", [clingo.Number(self._parts)])
                self.ctl.add(f"rankc{self._parts}", [], f"#external {bound}.")
                self.ctl.ground([(f"rankc{self._parts}", [])])
                bound_literal = self._symbolic_literal(bound)
                if keys:
                    with self.ctl.backend() as b:
                        over = b.add_atom()
                        b.add_weight_rule([over], c + 1, [(-k, w) for k, w in keys])
                        b.add_rule([], [over, bound_literal])
                self.ctl.assign_external(bound, True)
                size_guard = self._size_guard(size)
                self.ctl.assign_external(size_guard, True)
                try:
                    models, status, _ = self._solve(assumptions, limit=2**62, project=True, optimize=False)
                finally:
                    self.ctl.assign_external(size_guard, False)
                    self.ctl.release_external(bound)
                if status == "unknown":
                    out.complete, out.timed_out = False, True
                    return out
                level = sorted(models, key=lambda m: sorted(a for a in project if m[a]))
                if not level:  # pragma: no cover - the optimum itself is in its level
                    raise BackendUnsupported("the clingo backend lost a hypothesis level")
                with self.ctl.backend() as b:
                    for m in level:
                        b.add_rule([], [guard_literal] + [self._literal_of(a) if m[a] else -self._literal_of(a) for a in project])
                out.models.extend(level[: limit - len(out.models)])
                if not project:
                    return out
            out.complete = False
            return out
        finally:
            self.ctl.release_external(guard)

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
                    (f"x({self._ids[a]})" if model[a] else f"not x({self._ids[a]})")
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
        if not self._hyps:  # one projected model or none: no domain heuristic (clasp would warn of no domain atoms)
            return self._stream(assumptions, on_model, models=0, project=True, optimize=False)
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
        """New atoms (free choices) and clauses behind their selectors, in the running solver:
        through the backend API when the program was built so, else as a new grounded part."""
        self._expired()
        fresh = [a for a in atoms if a not in self._local]
        if self._finite is not None:  # the same value atoms (a new term variable is refused there)
            clauses = [Clause(c.name, c.kind, self._finite.rewrite(c.node), c.line) for c in clauses]
        guarded = guarded_clauses(clauses)
        text = self._text
        if text is None:
            with self.ctl.backend() as b:
                self._add(b, fresh, guarded)
            for name in fresh:
                self._extra.append((name, self._literal[name]))
        else:
            self._add(text, fresh, guarded)
            for name in fresh:
                text.add_text(f"#show {self._ids[name]} : x({self._ids[name]}).")
            self._parts += 1
            self._ground_text(text.take(), f"more{self._parts}")
            for name in fresh:
                self._number_atom(name)
        self._atoms.extend(fresh)

    def _add(self, sink: AspSink, fresh: Sequence[str], guarded: Sequence[tuple[str, Node]]) -> None:
        for name in fresh:
            self._declare(sink, name, True)
        for key, _ in guarded:
            if key not in self._local:
                self._declare(sink, key, False)
        enc = self.encoder
        enc.sink = sink
        for key, node in guarded:
            sink.add_rule([], [self._local[key], *enc.false_body(node)])

    def add_copy(self, template: GroupTemplate, index: int) -> None:
        """Group ``index`` as a copy of ``template`` (:class:`~cda.solver.observations.GroupTemplate`),
        switched off until its selector is assumed; the solver keeps what it learnt.

        Straight into the solver through clingo's backend API: fresh atoms for the slots (one
        choice rule), and per clause one rule ``:- selector, <every literal false>``, folded as
        the IR folds a group: a clause that a fixed slot satisfies is left out, a literal that a
        fixed slot falsifies is dropped. Left in (as an always-true atom), the constants made
        clasp's domain-heuristic enumeration list a tenth as many diagnoses in the same time on
        c432 with a hundred failing vectors.
        """
        self._expired()
        if self._text is not None:  # metrics and event times: the program goes through the grounder
            raise BackendUnsupported("the clingo backend copies a group template only through its backend API")
        shared = [self._literal_of(name) for name in template.shared]
        fixed = template.fixed(index)
        key = selector(template.clause_name(index))
        deadline = self.deadline
        with self.ctl.backend() as b:
            if self._true_atom is None:
                self._true_atom = b.add_atom()
                b.add_rule([self._true_atom])
            true = self._true_atom
            add_atom, add_rule = b.add_atom, b.add_rule
            table = [0]  # literal number -> program literal (table[0] unused)
            slots: list[tuple[str, int]] = []
            for j, name in enumerate(template.slots):
                value = fixed.get(j)
                if value is None:
                    lit = add_atom()
                    slots.append((name, lit))
                    table.append(lit)
                else:
                    table.append(true if value else -true)
            table.extend(shared)
            if slots:
                add_rule([lit for _, lit in slots], [], True)
            sel = add_atom()
            add_rule([sel], [], True)
            empty: list[int] = []
            for count, clause in enumerate(template.clauses):
                if count & 1023 == 0 and deadline.expired():
                    raise _OutOfTime(f"while copying observation group {index + 1} for clingo")
                body = [-table[x] if x > 0 else table[-x] for x in clause]
                if -true in body:  # a literal the observation makes true: the clause holds
                    continue
                add_rule(empty, [sel, *[b for b in body if b != true]])
        self._local[key] = sel
        self._literal[key] = sel
        self._copies.append((template, index, slots))

    def _select_clauses(self) -> None:
        """Give each clause written behind :data:`ALL_CLAUSES` alone its own selector, as the
        scheme has it (``every ⇒ selector``, ``selector ⇒ clause``; see :meth:`_write`): the
        program then has the answer sets it would have had with them from the start (the rules
        ``every ⇒ clause`` already there follow from the new ones), and the solver keeps what
        it learnt."""
        pending, self._unselected = self._unselected, ()
        deadline = self.deadline
        with self.ctl.backend() as b:
            sink = _direct_sink(b)
            keys = []
            for count, (key, _) in enumerate(pending):
                if count & 1023 == 0 and deadline.expired():
                    self._unselected = pending  # nothing is half made: the next call starts again
                    raise _OutOfTime(f"while giving {len(pending):,} clauses their selectors for clingo")
                keys.append(self._declare(sink, key, False, choice=False))
            sink.add_rule(keys, [], True)
            every = self._local[ALL_CLAUSES]
            for lit in keys:
                sink.add_rule([lit], [every])
            enc = self.encoder
            enc.sink = sink
            for lit, (_, node) in zip(keys, pending):
                sink.add_rule([], [lit, *enc.false_body(node)])

    def _literal_of(self, name: str) -> int:
        lit = self._literal.get(name)
        if lit is None and self._unselected:  # a clause's selector, asked for the first time
            self._select_clauses()
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

    def _prepare_minimal(self) -> None:
        if self._minimal_ready:
            return
        ids = [self._ids[a] for a in self._hyps]
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
