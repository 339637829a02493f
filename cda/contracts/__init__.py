"""Pydantic models that cross a boundary: solver results, Action inputs/outputs, events, receipts."""

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
from cda.contracts.receipt import Receipt
from cda.contracts.refs import ArtifactRef, SpanRef
from cda.contracts.result import CheckReport, Conflict, Hypothesis, NextTest, SolveResult, Verdict, Witness
from cda.contracts.verification import VerifierOutcome

__all__ = [
    "ActionEvent", "ActionVerdict", "ArtifactRef", "Budgets", "CDAInputs", "CDAOutputs", "CheckReport",
    "Conflict", "Constraints", "DisplayPlan", "FunctionCheck", "Goals", "Hypothesis", "HypothesisRecord",
    "KenSource", "LLMSettings", "NextTest", "NextTestSuggestion", "Policies", "Receipt", "SeedSpec",
    "SoftConstraint", "SolveResult", "SpanRef", "TraceRecord", "Verdict", "VerifierOutcome", "Witness",
    "event_without_time", "parse_event",
]
