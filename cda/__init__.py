"""CDA — Constraint-Driven Abduction: a symbolic-solver-first verification engine.

>>> import cda
>>> cda.solve("hyp a\\nhard: a").hypotheses[0].assumed
['a']
"""

from cda.actions.runner import ActionRun, run_action
from cda.api import check, ground, parse, solve
from cda.contracts.action import CDAInputs, CDAOutputs
from cda.contracts.result import CheckReport, Conflict, Hypothesis, NextTest, SolveResult, Verdict, Witness
from cda.errors import (
    BackendUnavailable,
    BackendUnsupported,
    BudgetExceeded,
    CDAError,
    DSLError,
    DSLSyntaxError,
    DSLTypeError,
    EvaluatorDisagreement,
    KenError,
    OptionError,
    UnitError,
)

__all__ = [
    "run_action",
    "ActionRun",
    "CDAInputs",
    "CDAOutputs",
    "solve",
    "check",
    "parse",
    "ground",
    "SolveResult",
    "CheckReport",
    "Hypothesis",
    "Verdict",
    "Witness",
    "NextTest",
    "Conflict",
    "CDAError",
    "DSLError",
    "DSLSyntaxError",
    "DSLTypeError",
    "UnitError",
    "BackendUnsupported",
    "OptionError",
    "BackendUnavailable",
    "BudgetExceeded",
    "EvaluatorDisagreement",
    "KenError",
]
__version__ = "0.1.0"
