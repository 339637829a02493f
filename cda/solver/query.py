"""One satisfiability question about a ground problem, for a product that wants a model back.

:func:`cda.solver.engine.run` answers a problem's goals (hypotheses, verdicts, next tests); a
product that decides one property (a Cedar analysis: "is there a request that violates it?")
needs the model itself, a least-cost one when it should be small, and which named clauses an
unsatisfiable answer stands on. :class:`Query` asks exactly that through the same parts as the
engine: the backend registry, every model re-checked by the independent evaluator before it is
returned (:class:`~cda.solver.recheck.CheckedBackend`), one :class:`Deadline`, and answers as
the ordered :class:`~cda.contracts.status.SolverStatus`: when time runs out, in encoding or in
solving, the status is ``unknown`` with a note saying where, never an exception and never a
guess. Cores are QuickXplain's over the named clauses in source order
(:func:`cda.solver.cores.quickxplain`), so both backends give the same one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from cda.contracts.deadline import Deadline, OutOfTime
from cda.contracts.status import SolverStatus
from cda.encodings.evaluate import evaluate_many
from cda.encodings.ir import GroundProblem, Node
from cda.errors import EvaluatorDisagreement
from cda.solver.backend import Lit, Model, integer_weights, make_backend, selector
from cda.solver.cores import quickxplain
from cda.solver.recheck import CheckedBackend
from cda.solver.route import choose_backend

__all__ = ["Query", "QueryAnswer"]


@dataclass
class QueryAnswer:
    """``status``; a re-checked ``model`` when sat; ``note`` says why an answer is unknown."""

    status: SolverStatus
    model: Model | None = None
    note: str = ""


class Query:
    """``problem`` on ``backend`` (``auto``, ``z3`` or ``clingo``), built on first use.

    >>> from cda.encodings.ir import AtomInfo, Clause, NodeFactory
    >>> f = NodeFactory(); p = GroundProblem(f, atoms={"x": AtomInfo("x", "var", "x", ())})
    >>> p.clauses += [Clause("a", "hard", f.atom("x"), 1), Clause("b", "hard", f.not_(f.atom("x")), 2)]
    >>> q = Query(p, "clingo", Deadline(None))
    >>> q.check().status, q.check(["a"]).model, q.core()
    ('unsat', {'x': True}, ['a', 'b'])
    """

    def __init__(self, problem: GroundProblem, backend: str, deadline: Deadline, seed: int = 0) -> None:
        self.problem = problem
        self.backend_name = choose_backend(problem, backend)
        self.deadline = deadline
        self.seed = seed
        self._solver: CheckedBackend | None = None
        self._names = [c.name for c in problem.clauses]
        self._added: dict[str, Node] = {}  # selector of a clause added later → its node

    def _checked(self) -> CheckedBackend:
        if self._solver is None:
            backend = make_backend(self.backend_name, self.problem, seed=self.seed, deadline=self.deadline,
                                   weights=integer_weights(self.problem))  # fmt: skip
            self._solver = CheckedBackend(self.problem, backend)
        return self._solver

    def _assumptions(self, on: Sequence[str] | None, also: Sequence[str] = ()) -> list[Lit]:
        extra = [(sel, True) for sel in also]
        if on is None:  # every clause on, in one literal: the backend's plain instance answers
            return [*self._checked().base, *extra]
        chosen = set(on)
        return [*((selector(n), n in chosen) for n in self._names), *extra]

    def add(self, node: Node) -> str:
        """A hard clause added to the built problem, off unless a question names it in
        ``also``; its selector."""
        sel = self._checked().add_clause(node)
        self._added[sel] = node
        return sel

    def check(self, on: Sequence[str] | None = None, also: Sequence[str] = ()) -> QueryAnswer:
        """Is there a model with the clauses ``on`` (all of them when ``None``) switched on, and
        the added clauses ``also``? Its model re-checked against all of them."""
        try:
            solver = self._checked()
            assumptions = self._assumptions(on, also)
            out = solver.backend.check(assumptions)
            status = SolverStatus(out.status)
            if status is SolverStatus.SAT:
                model = solver.verified(out.model, assumptions, "query")
                if not all(evaluate_many([self._added[sel] for sel in also], model)):
                    raise EvaluatorDisagreement(f"{self.backend_name} returned a model violating an added clause")
                return QueryAnswer(status, model)
            return QueryAnswer(status, note="" if status is SolverStatus.UNSAT else "time ran out while solving")
        except OutOfTime as exc:
            return QueryAnswer(SolverStatus.UNKNOWN, note=str(exc))

    def cheapest(self, on: Sequence[str] | None = None) -> QueryAnswer:
        """A model of least soft cost (the problem's soft clauses) with the clauses ``on``."""
        try:
            solver = self._checked()
            model = solver.cheapest(self._assumptions(on), "least-cost query")
        except OutOfTime as exc:
            return QueryAnswer(SolverStatus.UNKNOWN, note=str(exc) or "time ran out while optimising")
        return QueryAnswer(SolverStatus.SAT, model) if model is not None else QueryAnswer(SolverStatus.UNSAT)

    def core(self, names: Sequence[str] | None = None, keep: Sequence[str] = ()) -> list[str] | None:
        """A minimal set of the clauses ``names`` (every clause when ``None``) that has no model
        with the clauses ``keep`` on and the others off; ``None`` when they have one together.
        Raises :class:`~cda.contracts.deadline.OutOfTime` when time runs out."""
        solver = self._checked()
        pool = list(self._names if names is None else names)

        def is_sat(subset: Sequence[str]) -> bool:
            return solver.holds(self._assumptions([*keep, *subset]), "core")

        return quickxplain(pool, is_sat)
