"""The engine as the policy package uses it: the IR it lowers Cedar to, and the query it asks.

This is the one module of :mod:`cda.policy` that names the engine's modules, so that moving to
the published engine API (``cda.ir`` for the node factory and ``GroundProblem``, ``cda.engine``
for the query) changes these imports and nothing else. Everything the analyses decide goes
through :class:`Query`: the backend registry, every model re-checked by the independent
evaluator, and ``unknown`` as an ordered status (docs/policy.md, "How it is decided").
"""

from __future__ import annotations

from cda.contracts.deadline import Deadline, OutOfTime
from cda.contracts.status import SolverStatus
from cda.encodings.evaluate import evaluate
from cda.encodings.ir import (
    AtomInfo,
    Clause,
    GroundProblem,
    Node,
    NodeFactory,
    SoftClause,
    Sort,
    Term,
    TermConst,
    TermVar,
)
from cda.solver.query import Query, QueryAnswer

__all__ = [
    "AtomInfo",
    "Clause",
    "Deadline",
    "GroundProblem",
    "Node",
    "NodeFactory",
    "OutOfTime",
    "Query",
    "QueryAnswer",
    "SoftClause",
    "SolverStatus",
    "Sort",
    "Term",
    "TermConst",
    "TermVar",
    "evaluate",
]
