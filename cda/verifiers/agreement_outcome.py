"""Cross-backend agreement as a :class:`~cda.contracts.verification.VerifierOutcome`.

:func:`cda.verifiers.agreement.cross_check` solves one ground problem on z3 and on clingo and
diffs the canonical answers; this module only turns its report into the outcome the action
collects: *passed* when the two agree, *failed* (confidence cap 0.5, the value the downgrade in
``agreement`` uses) naming the first differences when they do not, *skipped* when a backend
refuses the problem (a construct clingo cannot encode, a library not installed) or ran out of
time, since then nothing was compared.
"""

from __future__ import annotations

from cda.contracts.verification import VerifierOutcome
from cda.encodings.ir import GroundProblem
from cda.errors import BackendUnavailable, BackendUnsupported
from cda.solver.engine import EngineOptions
from cda.verifiers.agreement import REFUSED_NOTE, AgreementReport, cross_check

__all__ = ["agreement_outcome", "outcome_from_report", "SHOWN_DIFFERENCES"]

#: how many differences the detail line names (``data["differences"]`` keeps up to 20)
SHOWN_DIFFERENCES = 3

# cross_check reports "agree" when a backend ran out of time and says so only in this note
_SKIPPED_NOTE = "cross-check skipped"


def outcome_from_report(report: AgreementReport, claim: str = "z3 and clingo agree") -> VerifierOutcome:
    """The outcome of a finished cross-check."""
    notes = report.result.notes if report.result is not None else []
    refused = [note[len(REFUSED_NOTE) :] for note in notes if note.startswith(REFUSED_NOTE)]
    if refused:  # cross_check answered on z3 alone: nothing was compared
        return VerifierOutcome(
            verifier="agreement", claim=claim, status="skipped",
            detail=f"a backend refuses the problem: {refused[0]}", data={"agree": None},
        )
    if any(note.startswith(_SKIPPED_NOTE) for note in notes):
        return VerifierOutcome(
            verifier="agreement", claim=claim, status="skipped",
            detail="a backend ran out of time; nothing was compared", data={"agree": None},
        )
    if report.agree:
        return VerifierOutcome(
            verifier="agreement", claim=claim, status="passed", detail="z3 and clingo give the same answer",
            data={"agree": True, "differences": []},
        )
    shown = "; ".join(report.differences[:SHOWN_DIFFERENCES])
    more = len(report.differences) - SHOWN_DIFFERENCES
    if more > 0:
        shown += f"; and {more} more"
    return VerifierOutcome(
        verifier="agreement", claim=claim, status="failed", detail=f"z3 and clingo disagree: {shown}",
        confidence_cap=0.5, data={"agree": False, "differences": report.differences[:20],
                                  "difference_count": len(report.differences)},
    )


def agreement_outcome(
    problem: GroundProblem, options: EngineOptions | None = None, claim: str = "z3 and clingo agree"
) -> VerifierOutcome:
    """Cross-check ``problem`` on both backends and report it as one outcome.

    >>> import cda
    >>> agreement_outcome(cda.ground("hyp a, b\\nhard: a or b\\ngoal prove a or b")).status
    'passed'
    """
    try:
        report = cross_check(problem, options if options is not None else EngineOptions())
    except (BackendUnsupported, BackendUnavailable) as exc:
        return VerifierOutcome(
            verifier="agreement", claim=claim, status="skipped",
            detail=f"a backend refuses the problem: {exc}", data={"agree": None},
        )
    return outcome_from_report(report, claim)
