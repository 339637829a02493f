"""Cross-backend agreement: solve on z3 and on clingo and compare the canonical answers.

The two backends share nothing but the IR, so agreement is strong evidence that neither
encoding is wrong. When they disagree, the verdicts the difference may touch become
*inconclusive* (a verifier may only lower a verdict), confidence drops to 0.5, and the
difference is recorded loudly. A verdict settled by the hard clauses (supported or refuted with
a justification) on which both backends agree, verdict for verdict, stands when only other parts
of the answer differ (the hypotheses listed, next tests): its proof does not read them. Any
other verdict is downgraded on any difference, since its confidence is computed over the
hypotheses.

An answer that could not be checked keeps its verdicts as they are, with a note saying why:
when a backend ran out of time (as before), and when clingo refuses the problem
(``BackendUnsupported``: a general sum of metrics, a weight beyond its 32 bits) while z3 answers
it. Capping them would say the answer is doubtful when nothing found it so; the note says that
it is unchecked, as a plain ``cda solve`` answer is.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from cda.contracts.result import SolveResult, Verdict
from cda.contracts.status import VerdictStatus
from cda.encodings.ir import GroundProblem
from cda.errors import BackendUnsupported
from cda.solver.engine import EngineOptions, run

__all__ = ["AgreementReport", "REFUSED_NOTE", "cross_check", "canonical"]


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
    """Lower a verdict to inconclusive; never raises one (an *unknown* one, undecided, stays so:
    there is no confidence to lower)."""
    if verdict.status is VerdictStatus.UNKNOWN:
        return verdict
    if verdict.status == "inconclusive":
        return verdict.model_copy(update={"confidence": 0.5 if verdict.confidence is None else min(verdict.confidence, 0.5)})
    return verdict.model_copy(update={"status": VerdictStatus.INCONCLUSIVE, "confidence": 0.5, "reason": reason})


#: the start of the note saying clingo refused the problem (``agreement_outcome`` reads it)
REFUSED_NOTE = "cross-check could not run on clingo: "


def _verdict_index(difference: str) -> int | None:
    """The verdict a difference lies inside (:func:`_diff`'s paths: ``result.verdicts[2].status: ...``)."""
    head = "result.verdicts["
    if not difference.startswith(head):
        return None
    return int(difference[len(head) : difference.index("]")])


def _settled(verdict: Verdict) -> bool:
    """Proved or refuted by the hard clauses: the proof (its justification) reads no hypothesis."""
    return verdict.status in (VerdictStatus.SUPPORTED, VerdictStatus.REFUTED) and bool(verdict.justification)


def cross_check(problem: GroundProblem, options: EngineOptions) -> AgreementReport:
    """Solve on both backends; return the z3 result, downgraded where clingo disagrees."""
    first = run(problem, "z3", options)
    try:
        second = run(problem, "clingo", options)
    except BackendUnsupported as exc:
        first.notes.append(f"{REFUSED_NOTE}{exc}; the answer is z3's alone, unchecked")
        return AgreementReport(agree=True, differences=[], result=first)
    differences: list[str] = []
    if first.partial or second.partial:
        first.notes.append("cross-check skipped: a backend ran out of time")
        return AgreementReport(agree=True, differences=[], result=first)
    _diff(canonical(first), canonical(second), "result", differences)
    if not differences:
        first.notes.append("cross-checked: z3 and clingo agree")
        return AgreementReport(agree=True, result=first)
    reason = "z3 and clingo disagree; see notes"
    touched = {_verdict_index(d) for d in differences}
    listed_alike = not any(d.startswith("result.verdicts:") for d in differences)  # as many verdicts
    kept = [
        v if listed_alike and i not in touched and _settled(v) else downgrade(v, reason)
        for i, v in enumerate(first.verdicts)
    ]
    merged = first.model_copy(
        update={
            "verdicts": kept,
            "notes": first.notes + [f"BACKENDS DISAGREE: {d}" for d in differences[:20]],
        }
    )
    return AgreementReport(agree=False, differences=differences, result=merged)
