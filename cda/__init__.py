"""CDA — Constraint-Driven Abduction: a symbolic-solver-first verification engine.

The public names below are loaded on first use (a module ``__getattr__``, PEP 562), so that
``import cda`` and every ``cda`` command pay only for what they touch: the Action runner,
sympy, numpy, networkx and pint load when a caller reaches them, not at start-up.

>>> import cda
>>> cda.solve("hyp a\\nhard: a").hypotheses[0].assumed
['a']
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from cda.lazy import lazy_exports

if TYPE_CHECKING:
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
    from cda.investigation.session import Investigation

__all__ = [
    "run_action",
    "ActionRun",
    "Investigation",
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

#: Where each public name lives; ``__getattr__`` imports that module on first access.
_HOME: dict[str, str] = {
    "run_action": "cda.actions.runner",
    "Investigation": "cda.investigation.session",
    "ActionRun": "cda.actions.runner",
    "CDAInputs": "cda.contracts.action",
    "CDAOutputs": "cda.contracts.action",
    "solve": "cda.api",
    "check": "cda.api",
    "parse": "cda.api",
    "ground": "cda.api",
    **dict.fromkeys(
        ("SolveResult", "CheckReport", "Hypothesis", "Verdict", "Witness", "NextTest", "Conflict"),
        "cda.contracts.result",
    ),
    **dict.fromkeys(
        (
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
        ),
        "cda.errors",
    ),
}


__getattr__, __dir__ = lazy_exports(__name__, _HOME)
