"""The engine, as products use it: backends behind one protocol, their registry, and ``run``.

A product (diagnosis, first-order proving, investigations, the guardian, the conductor) builds a
problem with :mod:`cda.ir` or grounds one with :func:`cda.api.ground`, and then either asks the
whole question at once::

    result = run(problem, Options(backend="clingo", top=5, seed=7, timeout=10))

or, when it keeps a solver alive between questions (an investigation adds observations one at a
time; a prover asks "are these premises, with the claim false, satisfiable?"), builds a backend
and asks it under assumptions::

    backend = make_backend("z3", problem, seed=0, deadline=Deadline(5), weights=integer_weights(problem))
    solver = CheckedBackend(problem, backend)          # every model re-checked by the evaluator
    solver.status(all_clauses_on(problem.clauses) + [(claim_key("c1"), False)], "is c1 entailed?")

Literals are ``(key, value)`` pairs whose key is an atom name, a clause's :func:`selector`, a
claim's :func:`claim_key` or :data:`ALL_CLAUSES`: one scheme on every backend
(docs/architecture.md, "One request, end to end"). Everything the engine says is canonical (the
same bytes on every backend and every run) and every model passes the independent evaluator
before it is read (:class:`CheckedBackend`). A budget that runs out is :class:`OutOfTime`
inside, a labelled partial result outside, never a traceback.

The names are loaded on first use (``cda.lazy``), so importing this module costs nothing until
a product asks for a solver. Writing a new backend: ``cda/solver/TEMPLATE.py``; proving it
follows the protocol: ``tests/test_backend_conformance.py``, which runs on every registered
backend.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from cda.lazy import lazy_exports

if TYPE_CHECKING:
    from cda.contracts.deadline import NO_DEADLINE, Deadline, OutOfTime
    from cda.contracts.result import SolveResult
    from cda.encodings.ir import GroundProblem
    from cda.solver.backend import (
        ALL_CLAUSES,
        BACKENDS,
        REGISTRY,
        Backend,
        BackendSpec,
        Enumeration,
        Lit,
        Model,
        Outcome,
        SetStream,
        all_clauses_on,
        available_backends,
        claim_key,
        integer_weights,
        make_backend,
        selector,
        soft_key,
    )
    from cda.solver.conflicts import conflict
    from cda.solver.cores import marco, quickxplain
    from cda.solver.engine import Options
    from cda.solver.hypotheses import RankedHypothesis, Ranking, rank_hypotheses
    from cda.solver.information import expected_gains, posterior
    from cda.solver.observations import GroupedProblem
    from cda.solver.query import Query, QueryAnswer
    from cda.solver.recheck import CheckedBackend
    from cda.solver.records import ComputedRecord, Records, cite, compute_records, hypothesis_cap, hypothesis_record
    from cda.solver.route import choose_backend

__all__ = [
    # the whole question at once
    "Options",
    "run",
    # backends: the protocol, the registry, the literal scheme
    "Backend",
    "Lit",
    "Model",
    "Outcome",
    "Enumeration",
    "SetStream",
    "BACKENDS",
    "REGISTRY",
    "BackendSpec",
    "available_backends",
    "choose_backend",
    "make_backend",
    "integer_weights",
    "selector",
    "claim_key",
    "soft_key",
    "ALL_CLAUSES",
    "all_clauses_on",
    # questions asked of a live backend, every model re-checked
    "CheckedBackend",
    "Ranking",
    "RankedHypothesis",
    "rank_hypotheses",
    "conflict",
    "quickxplain",
    "marco",
    "posterior",
    "expected_gains",
    # one satisfiability question: a re-checked model, a least-cost one, a core
    "Query",
    "QueryAnswer",
    # hypothesis records (docs/investigate.md)
    "ComputedRecord",
    "Records",
    "compute_records",
    "hypothesis_record",
    "hypothesis_cap",
    "cite",
    # the one wall-clock budget
    "Deadline",
    "NO_DEADLINE",
    "OutOfTime",
]

_HOME: dict[str, str] = {
    **dict.fromkeys(
        ("Backend", "Lit", "Model", "Outcome", "Enumeration", "SetStream", "BACKENDS", "REGISTRY", "BackendSpec",
         "available_backends",
         "make_backend", "integer_weights", "selector", "claim_key", "soft_key", "ALL_CLAUSES", "all_clauses_on"),
        "cda.solver.backend",
    ),
    "Options": "cda.solver.engine",
    "choose_backend": "cda.solver.route",
    "CheckedBackend": "cda.solver.recheck",
    **dict.fromkeys(("Query", "QueryAnswer"), "cda.solver.query"),
    **dict.fromkeys(("Ranking", "RankedHypothesis", "rank_hypotheses"), "cda.solver.hypotheses"),
    "conflict": "cda.solver.conflicts",
    **dict.fromkeys(("quickxplain", "marco"), "cda.solver.cores"),
    **dict.fromkeys(("posterior", "expected_gains"), "cda.solver.information"),
    **dict.fromkeys(
        ("ComputedRecord", "Records", "compute_records", "hypothesis_record", "hypothesis_cap", "cite"),
        "cda.solver.records",
    ),
    **dict.fromkeys(("Deadline", "NO_DEADLINE", "OutOfTime"), "cda.contracts.deadline"),
}

__getattr__, __dir__ = lazy_exports(__name__, _HOME)


def run(problem: GroundProblem | GroupedProblem, options: Options | None = None,
        deadline: Deadline | None = None) -> SolveResult:
    """Solve ``problem`` with ``options`` (default: ``auto`` backend, seed 0, no time limit):
    ranked hypotheses, verdicts and next tests, or the conflict; the minimal explanations when
    the problem asks for them. A budget that runs out gives a partial result, never an exception.

    ``deadline``: the run's budget when it started earlier (a caller that grounded first);
    else one of ``options.timeout`` starts here. The backend is ``options.backend``, or for
    ``auto`` the one the problem needs (:func:`choose_backend`).

    >>> from cda.ir import AtomInfo, Clause, GroundProblem, NodeFactory
    >>> f = NodeFactory()
    >>> p = GroundProblem(f, atoms={"a": AtomInfo("a", "hyp", "a", ())}, clauses=[Clause("h", "hard", f.atom("a"), 0)])
    >>> r = run(p, Options(backend="z3"))
    >>> r.backend, [h.assumed for h in r.hypotheses]
    ('z3', [['a']])
    """
    from cda.solver import engine
    from cda.solver.observations import GroupedProblem
    from cda.solver.route import choose_backend

    options = options if options is not None else engine.EngineOptions()
    base = problem.base if isinstance(problem, GroupedProblem) else problem
    return engine.run(problem, choose_backend(base, options.backend), options, deadline)
