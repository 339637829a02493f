"""One band per statement: no run says one thing is ``high`` in one place and ``low`` in another.

A run speaks about the same statement in up to four places: a ``prove`` goal's verdict on an atom,
the explanation that assumes it, the epistemic report's hypothesis and its conclusion. Each is
lowered by its own checks (the LLM reads each claim's text, coverage caps explanations, seed 001
caps the conclusion), so they could end in different bands: ``prove culprit(cm)`` *high* beside
``explanation: culprit(cm)`` *low*. The rule (docs/actions.md, "One band per statement"):

* a *statement* is a set of ground atoms: a prove goal's atom, the atoms an explanation assumes,
  a report hypothesis' assumed atoms, the conclusion's root cause;
* its band in the run is the **lowest** any place gives it, and every place is capped at that
  band's ceiling (:data:`~cda.contracts.abstain.BAND_CEILING`), with a caveat naming the rule.

The rule only lowers (a confidence ``min``, a *supported* verdict capped below 0.5 becomes
*inconclusive*, as every check's ceiling does), so the downgrade-only invariant holds; a
*refuted* verdict stays refuted.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from cda.actions.scoring import band_for
from cda.contracts.abstain import BAND_CEILING, UNKNOWN_ROOT_CAUSE, Band, EpistemicReport, band_rank
from cda.contracts.action import ActionVerdict
from cda.contracts.result import SolveResult
from cda.contracts.status import VerdictStatus
from cda.verifiers.abstain import norm_atom
from cda.verifiers.protocol import Ceiling, under_ceilings

__all__ = ["Statement", "one_band_per_statement", "statement_bands", "verdict_statements"]

Statement = frozenset[str]


def _statement(atoms: Iterable[str]) -> Statement | None:
    found = frozenset(norm_atom(a) for a in atoms if a.strip())
    return found or None


def verdict_statements(result: SolveResult) -> dict[str, Statement]:
    """The statement of each verdict id: a prove goal's atom, an explanation's assumed atoms."""
    out: dict[str, Statement] = {}
    for v in result.verdicts:
        key = _statement([v.claim]) if v.goal == "prove" else None
        if key is not None:
            out[v.name] = key
    for h in result.hypotheses:
        key = _statement(h.assumed)
        if key is not None:
            out.setdefault(h.id, key)
    return out


def _report_places(report: EpistemicReport) -> list[tuple[str, Statement, Band]]:
    """(where, statement, band) of each hypothesis and of the conclusion of the report."""
    places: list[tuple[str, Statement, Band]] = []
    for i, h in enumerate(report.hypotheses):
        key = _statement(h.assumed or h.text.split(" & "))
        if key is not None:
            places.append((f"hypotheses[{i}]", key, h.band))
    root = report.conclusion.root_cause
    if root != UNKNOWN_ROOT_CAUSE:
        key = _statement(root.split(" & "))
        if key is not None:
            places.append(("conclusion", key, report.conclusion.band))
    return places


def statement_bands(
    verdicts: Sequence[ActionVerdict], report: EpistemicReport | None, keys: dict[str, Statement]
) -> dict[Statement, list[tuple[str, Band]]]:
    """Every place each statement is reported, with its band there (what the property test reads)."""
    out: dict[Statement, list[tuple[str, Band]]] = {}
    for v in verdicts:
        key = keys.get(v.hypothesis_id)
        if key is not None:
            out.setdefault(key, []).append((f"verdict {v.claim}", v.band))
    if report is not None:
        for where, key, band in _report_places(report):
            out.setdefault(key, []).append((f"epistemic_report.{where}", band))
    return out


def _lowest(places: list[tuple[str, Band]]) -> tuple[Band, str]:
    where, band = min(places, key=lambda p: band_rank(p[1]))
    return band, where


def _shown(key: Statement) -> str:
    return " & ".join(sorted(key))


def one_band_per_statement(
    verdicts: Sequence[ActionVerdict], report: EpistemicReport | None, keys: dict[str, Statement]
) -> tuple[list[ActionVerdict], EpistemicReport | None]:
    """The verdicts and the report with each statement capped at the lowest band it has anywhere.

    ``keys`` maps a verdict's ``hypothesis_id`` to its statement (:func:`verdict_statements`).
    Places already at that band are left as they are; the others get a caveat saying where the
    statement is lower.
    """
    places = statement_bands(verdicts, report, keys)
    lowest = {key: _lowest(found) for key, found in places.items()}
    out: list[ActionVerdict] = []
    for v in verdicts:
        key = keys.get(v.hypothesis_id)
        if key is None or v.confidence is None or band_rank(lowest[key][0]) >= band_rank(v.band):  # unknown: low
            out.append(v)
            continue
        band, where = lowest[key]
        cap = BAND_CEILING[band]
        caveat = f"one band per statement: {_shown(key)} is {band} at {where} of this run"
        ceiling = Ceiling(VerdictStatus.INCONCLUSIVE if cap < 0.5 else VerdictStatus.SUPPORTED, cap, (caveat,))
        status, confidence = under_ceilings(v.status, v.confidence, [ceiling])
        confidence = round(confidence, 9) + 0.0
        out.append(v.model_copy(update={"status": status, "confidence": confidence,
                                        "band": band_for(confidence, status), "caveats": [*v.caveats, caveat]}))
    if report is None:
        return out, None
    data = report.model_dump()
    caveats = list(report.caveats)
    changed = False
    for where, key, band in _report_places(report):
        low, low_where = lowest[key]
        if band_rank(low) >= band_rank(band):
            continue
        entry = data["conclusion"] if where == "conclusion" else data["hypotheses"][int(where[len("hypotheses["):-1])]
        entry["confidence"] = min(entry["confidence"], BAND_CEILING[low])
        entry.pop("band", None)
        line = f"one band per statement: {where} ({_shown(key)}) lowered to {low}, as at {low_where}"
        if line not in caveats:
            caveats.append(line)
        changed = True
    if not changed:
        return out, report
    for h in data["hypotheses"]:
        h.pop("band", None)
    data["conclusion"].pop("band", None)
    data["caveats"] = caveats
    return out, EpistemicReport.model_validate(data)
