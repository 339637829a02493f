"""Cross-backend agreement: solve on z3 and on clingo and compare the canonical answers.

The two backends share nothing but the IR, so agreement is strong evidence that neither
encoding is wrong. When they disagree, every verdict becomes *inconclusive* (a verifier may
only lower a verdict), confidence drops to 0.5, and the difference is recorded loudly.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from cda.contracts.result import SolveResult, Verdict
from cda.contracts.status import VerdictStatus
from cda.encodings.ir import GroundProblem
from cda.solver.engine import EngineOptions, run

__all__ = ["AgreementReport", "cross_check", "canonical"]


def canonical(result: SolveResult) -> dict[str, object]:
    """The part of a result both backends must agree on: everything except the backend name."""
    data = json.loads(result.json_text())
    data.pop("backend")
    return data  # type: ignore[no-any-return]


@dataclass
class AgreementReport:
    agree: bool
    differences: list[str] = field(default_factory=list)
    result: SolveResult | None = None  # the merged (possibly downgraded) result


def _diff(a: Any, b: Any, path: str, out: list[str]) -> None:
    if type(a) is not type(b):
        out.append(f"{path}: {a!r} != {b!r}")
    elif isinstance(a, dict):
        for key in sorted(set(a) | set(b)):
            _diff(a.get(key), b.get(key), f"{path}.{key}", out)
    elif isinstance(a, list):
        if len(a) != len(b):
            out.append(f"{path}: {len(a)} items != {len(b)} items")
        for i, (x, y) in enumerate(zip(a, b)):
            _diff(x, y, f"{path}[{i}]", out)
    elif a != b:
        out.append(f"{path}: {a!r} != {b!r}")


def downgrade(verdict: Verdict, reason: str) -> Verdict:
    """Lower a verdict to inconclusive; never raises one."""
    if verdict.status == "inconclusive":
        return verdict.model_copy(update={"confidence": min(verdict.confidence, 0.5)})
    return verdict.model_copy(update={"status": VerdictStatus.INCONCLUSIVE, "confidence": 0.5, "reason": reason})


def cross_check(problem: GroundProblem, options: EngineOptions) -> AgreementReport:
    """Solve on both backends; return the z3 result, downgraded if clingo disagrees."""
    first = run(problem, "z3", options)
    second = run(problem, "clingo", options)
    differences: list[str] = []
    if first.partial or second.partial:
        first.notes.append("cross-check skipped: a backend ran out of time")
        return AgreementReport(agree=True, differences=[], result=first)
    _diff(canonical(first), canonical(second), "result", differences)
    if not differences:
        first.notes.append("cross-checked: z3 and clingo agree")
        return AgreementReport(agree=True, result=first)
    reason = "z3 and clingo disagree; see notes"
    merged = first.model_copy(
        update={
            "verdicts": [downgrade(v, reason) for v in first.verdicts],
            "notes": first.notes + [f"BACKENDS DISAGREE: {d}" for d in differences[:20]],
        }
    )
    return AgreementReport(agree=False, differences=differences, result=merged)
