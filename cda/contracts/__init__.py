"""Pydantic models that cross a boundary (results, and later inputs/outputs of Actions)."""

from cda.contracts.result import CheckReport, Conflict, Hypothesis, NextTest, SolveResult, Verdict, Witness

__all__ = ["CheckReport", "Conflict", "Hypothesis", "NextTest", "SolveResult", "Verdict", "Witness"]
