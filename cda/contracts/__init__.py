"""Pydantic models that cross a boundary: solver results, Action inputs/outputs, events, receipts.

Each name loads its own module on first use: a command that needs only ``SolveResult`` does
not build the Action models.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from cda.lazy import lazy_exports

if TYPE_CHECKING:
    from cda.contracts.action import (
        ActionVerdict,
        Budgets,
        CDAInputs,
        CDAOutputs,
        Constraints,
        DisplayPlan,
        FunctionCheck,
        Goals,
        KenSource,
        LLMSettings,
        NextTestSuggestion,
        Policies,
        SeedSpec,
        SoftConstraint,
    )
    from cda.contracts.events import ActionEvent, event_without_time, parse_event
    from cda.contracts.hypothesis_record import HypothesisRecord, TraceRecord
    from cda.contracts.metrics import ActionMetrics
    from cda.contracts.receipt import Receipt
    from cda.contracts.refs import ArtifactRef, SpanRef
    from cda.contracts.result import CheckReport, Conflict, Hypothesis, NextTest, SolveResult, Verdict, Witness
    from cda.contracts.verification import VerifierOutcome

__all__ = [
    "ActionEvent",
    "ActionMetrics",
    "ActionVerdict",
    "ArtifactRef",
    "Budgets",
    "CDAInputs",
    "CDAOutputs",
    "CheckReport",
    "Conflict",
    "Constraints",
    "DisplayPlan",
    "FunctionCheck",
    "Goals",
    "Hypothesis",
    "HypothesisRecord",
    "KenSource",
    "LLMSettings",
    "NextTest",
    "NextTestSuggestion",
    "Policies",
    "Receipt",
    "SeedSpec",
    "SoftConstraint",
    "SolveResult",
    "SpanRef",
    "TraceRecord",
    "Verdict",
    "VerifierOutcome",
    "Witness",
    "event_without_time",
    "parse_event",
]

#: the module each public name lives in, imported on first access
_HOME: dict[str, str] = {
    **dict.fromkeys(
        (
            "ActionVerdict",
            "Budgets",
            "CDAInputs",
            "CDAOutputs",
            "Constraints",
            "DisplayPlan",
            "FunctionCheck",
            "Goals",
            "KenSource",
            "LLMSettings",
            "NextTestSuggestion",
            "Policies",
            "SeedSpec",
            "SoftConstraint",
        ),
        "cda.contracts.action",
    ),
    **dict.fromkeys(("ActionEvent", "event_without_time", "parse_event"), "cda.contracts.events"),
    **dict.fromkeys(("HypothesisRecord", "TraceRecord"), "cda.contracts.hypothesis_record"),
    **dict.fromkeys(("ActionMetrics",), "cda.contracts.metrics"),
    **dict.fromkeys(("Receipt",), "cda.contracts.receipt"),
    **dict.fromkeys(("ArtifactRef", "SpanRef"), "cda.contracts.refs"),
    **dict.fromkeys(
        ("CheckReport", "Conflict", "Hypothesis", "NextTest", "SolveResult", "Verdict", "Witness"),
        "cda.contracts.result",
    ),
    **dict.fromkeys(("VerifierOutcome",), "cda.contracts.verification"),
}


__getattr__, __dir__ = lazy_exports(__name__, _HOME)
