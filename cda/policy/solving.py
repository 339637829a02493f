"""The engine as the policy package uses it: the IR it lowers Cedar to, and the query it asks.

This is the one module of :mod:`cda.policy` that imports the engine, and only its public API
(:mod:`cda.ir` for the node factory, ``GroundProblem`` and the evaluator, :mod:`cda.engine` for
the query; docs/architecture.md, the ``forbidden`` contract). Everything the analyses decide goes
through :class:`Query`: the backend registry, every model re-checked by the independent
evaluator, and ``unknown`` as an ordered status (docs/policy.md, "How it is decided").
"""

from __future__ import annotations

from cda.contracts.status import SolverStatus
from cda.engine import Deadline, OutOfTime, Query, QueryAnswer
from cda.ir import (
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
    evaluate,
)

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
