"""A backend whose every model is re-checked by the evaluator before the engine reads it.

The engine's other modules (hypotheses, verdicts, next tests, conflicts) ask their questions
through :class:`CheckedBackend`, never through the backend itself: a model that violates a
clause switched on, the background structure, an assumption or a claim's value is a bug in a
backend or an encoder and raises :class:`~cda.errors.EvaluatorDisagreement`; it is never output.
Answers come back as :class:`~cda.contracts.status.SolverStatus`; an ``unknown`` that the
caller cannot turn into an answer of its own raises ``_OutOfTime``, which the engine turns into
a partial result.
"""

from __future__ import annotations

from collections.abc import Sequence

from cda.contracts.status import SolverStatus
from cda.encodings.evaluate import BatchEvaluator, evaluate_many
from cda.encodings.ir import Clause, GroundProblem, Node
from cda.errors import EvaluatorDisagreement
from cda.solver.backend import (
    ALL_CLAUSES,
    Backend,
    Enumeration,
    Lit,
    Model,
    _OutOfTime,
    all_clauses_on,
    claim_key,
    selector,
)

__all__ = ["CheckedBackend"]


class CheckedBackend:
    """``backend`` for ``problem``, each model it returns re-checked (see the module docstring).

    ``base`` switches every clause on: hard clauses and observations, the assumptions of almost
    every question. ``after``: the checker this one replaces on the same live backend (a
    problem whose clauses changed), whose :meth:`add_clause` names this one must not reuse.
    """

    def __init__(self, problem: GroundProblem, backend: Backend, *, after: CheckedBackend | None = None) -> None:
        self.problem = problem
        self.backend = backend
        self.name = backend.name
        self.base: list[Lit] = all_clauses_on(problem.clauses)
        self.hyps: list[str] = problem.hyp_atoms
        self._claim_node = {claim_key(c.name): c.node for c in problem.claims}
        self._batch = BatchEvaluator([c.node for c in problem.clauses] + list(problem.background))
        #: clauses added under a fresh name (:meth:`add_clause`)
        self._fresh: int = after._fresh if after is not None else 0
        #: term variables of closed sorts: a model gives each a value of its domain
        self._closed = [(v.name, frozenset(v.sort.domain)) for v in problem.terms.values() if v.sort.domain is not None]

    def _in_domains(self, model: Model, why: str) -> None:
        for name, domain in self._closed:
            if model.get(name) not in domain:
                raise EvaluatorDisagreement(
                    f"{self.name} returned a model giving {name} the value {model.get(name)!r}, outside its sort ({why})"
                )

    # ---- re-checking
    def verified(self, model: Model | None, assumptions: Sequence[Lit], why: str) -> Model:
        """``model``, after checking it against every clause ``assumptions`` switch on, the
        background structure, the assumed atoms and the assumed claim values."""
        if model is None:
            raise EvaluatorDisagreement(f"{self.name} said sat but returned no model ({why})")
        self._in_domains(model, why)
        active = {k for k, v in assumptions if v}
        everything = ALL_CLAUSES in active
        clauses = self.problem.clauses
        values = [bool(c) for c in self._batch.columns([model])]  # its walk order is made once
        for clause, ok in zip(clauses, values):
            if not ok and (everything or selector(clause.name) in active):
                raise EvaluatorDisagreement(f"{self.name} returned a model violating clause {clause.name} ({why})")
        if not all(values[len(clauses) :]):
            raise EvaluatorDisagreement(f"{self.name} returned a model violating background structure ({why})")
        for key, value in assumptions:
            if key in model and bool(model[key]) != value:
                raise EvaluatorDisagreement(f"{self.name} returned a model ignoring assumption {key} ({why})")
        for key, value in assumptions:
            node = self._claim_node.get(key)
            if node is not None and evaluate_many([node], model)[0] != value:
                raise EvaluatorDisagreement(f"{self.name} returned a model ignoring claim {key} ({why})")
        return model

    def verify_all(self, models: Sequence[Model], why: str, node: Node | None = None, value: bool = True) -> None:
        """Re-check many models under :attr:`base` at once (every clause is on); with ``node``,
        also that it takes ``value`` in each (a claim assumed true or false)."""
        if not models:
            return
        for model in models:
            self._in_domains(model, why)
        columns = self._batch.columns(models)
        full = (1 << len(models)) - 1
        every = full
        for column in columns:
            every &= column
        if every != full:
            missing = full & ~every
            i = (missing & -missing).bit_length() - 1  # the first model that violates something
            row = next(r for r, column in enumerate(columns) if not column >> i & 1)
            clauses = self.problem.clauses
            what = clauses[row].name if row < len(clauses) else "background structure"
            raise EvaluatorDisagreement(f"{self.name} returned a model violating {what} ({why})")
        if node is not None:
            [got] = BatchEvaluator([node]).columns(models)
            if got != (full if value else 0):
                raise EvaluatorDisagreement(f"{self.name} returned a model where the claim is not {value} ({why})")

    # ---- questions
    def status(self, assumptions: Sequence[Lit], why: str) -> SolverStatus:
        """Is there a model under ``assumptions``? (its model re-checked when there is)"""
        out = self.backend.check(assumptions)
        status = SolverStatus(out.status)
        if status is SolverStatus.SAT:
            self.verified(out.model, assumptions, why)
        return status

    def holds(self, assumptions: Sequence[Lit], why: str) -> bool:
        """:meth:`status` for a caller that cannot go on without the answer: ``unknown`` (the
        deadline passed) raises ``_OutOfTime``."""
        has_model = self.status(assumptions, why).has_model
        if has_model is None:
            raise _OutOfTime()
        return has_model

    def cheapest(self, assumptions: Sequence[Lit], why: str) -> Model | None:
        """A re-checked model of least soft cost under ``assumptions`` (``None``: none at all)."""
        best = self.backend.minimize(assumptions)
        status = SolverStatus(best.status)
        if status is SolverStatus.UNKNOWN:
            raise _OutOfTime()
        return self.verified(best.model, assumptions, why) if status is SolverStatus.SAT else None

    def enumerate(self, project: Sequence[str], assumptions: Sequence[Lit], limit: int) -> Enumeration:
        """The backend's :meth:`~cda.solver.backend.Backend.enumerate`, unchecked: the caller
        re-checks the models with :meth:`verify_all` (all at once is what makes it cheap)."""
        return self.backend.enumerate(project, assumptions, limit)

    def enumerate_ranked(self, project: Sequence[str], assumptions: Sequence[Lit], limit: int) -> Enumeration:
        """The backend's :meth:`~cda.solver.backend.Backend.enumerate_ranked`, unchecked (as
        :meth:`enumerate`)."""
        return self.backend.enumerate_ranked(project, assumptions, limit)

    def add_clause(self, node: Node) -> str:
        """Add ``node`` as a hard clause behind a fresh selector, off until assumed; its selector."""
        self._fresh += 1
        name = f"flip!{self._fresh}"  # "!" cannot appear in a clause name of the DSL
        self.backend.add_clauses([Clause(name, "hard", node, 0)], [])
        return selector(name)
