"""Seed 004's trace record of one Action (docs/actions.md, "The trace record").

Investigations write a :class:`~cda.contracts.hypothesis_record.TraceRecord` at every step; an
Action writes one for its run, from what the run already knows:

* ``focus_subsystem``: ``inputs.focus`` (checked before the search: a Ken node or an argument of
  the problem's atoms), else the arguments of the selected hypothesis's atoms;
* ``global_invariants``: ``inputs.invariants`` as written (each is a hard clause of the run, so
  every candidate satisfies it), else the model's own hard clauses;
* ``candidate_hypotheses``, ``selected_hypothesis_id`` and its reason: the run's records;
* ``integration_risks``: couplings across the focus boundary - Ken's causal edges with exactly one
  end in the focus, and hard clauses that tie an atom of the focus to atoms outside it;
* ``confidence``: the selected explanation's final verdict confidence (the same number, and so
  the same band, the verdict shows);
* ``policy_fallback_applied``: the run abstained, a required check failed closed, or the
  degradation ladder stepped in.
"""

from __future__ import annotations

from collections.abc import Sequence

from cda.contracts.abstain import CoverageReport
from cda.contracts.action import ActionVerdict, CDAInputs
from cda.contracts.hypothesis_record import HypothesisRecord, TraceRecord
from cda.encodings.ir import Atom, GroundProblem, walk
from cda.errors import OptionError
from cda.ken.graph import KenGraph

__all__ = ["MAX_LISTED", "action_trace", "check_focus"]

MAX_LISTED = 20
"""The most invariants and integration risks a trace lists (the rest are counted in a last line)."""


def _args(gp: GroundProblem, atom: str) -> tuple[str, ...]:
    info = gp.atoms.get(atom)
    return info.args if info is not None else ()


def check_focus(focus: str | None, gp: GroundProblem, ken: KenGraph | None) -> None:
    """Refuse a focus that names nothing of the run (before any search is spent on it)."""
    if focus is None:
        return
    if ken is not None and ken.has_node(focus):
        return
    if any(focus in info.args for info in gp.atoms.values()):
        return
    known = sorted({a for info in gp.atoms.values() for a in info.args})
    shown = ", ".join(known[:10]) + (" …" if len(known) > 10 else "")
    raise OptionError(f"focus: {focus!r} is neither a Ken node nor an argument of the problem's atoms "
                       f"(arguments: {shown or 'none'})")


def _capped(lines: list[str]) -> list[str]:
    if len(lines) <= MAX_LISTED:
        return lines
    return [*lines[:MAX_LISTED], f"… and {len(lines) - MAX_LISTED} more"]


def _risks(focus: set[str], gp: GroundProblem, coverage: CoverageReport | None) -> list[str]:
    risks: list[str] = []
    if coverage is not None:
        for chain in coverage.causal_chains:
            for e in chain.edges:
                if (e.source in focus) != (e.target in focus):
                    line = f"Ken: {e.source} {e.relation} {e.target} crosses the focus boundary"
                    if line not in risks:
                        risks.append(line)
    for clause in gp.clauses:
        if clause.kind == "observation":
            continue
        args = {a for n in walk([clause.node]) if isinstance(n, Atom) for a in _args(gp, n.name)}
        outside = sorted(args - focus)
        if args & focus and outside:
            risks.append(f"clause {clause.name} couples the focus with {', '.join(outside[:5])}"
                         + (" …" if len(outside) > 5 else ""))
    return risks


def action_trace(
    inputs: CDAInputs,
    gp: GroundProblem,
    coverage: CoverageReport | None,
    records: Sequence[HypothesisRecord],
    selected: tuple[str, str] | None,
    verdicts: Sequence[ActionVerdict],
    written_hard: Sequence[str],
    fallbacks: Sequence[str],
) -> TraceRecord:
    """The run's trace; ``selected`` is (id, reason) of the selected record, ``written_hard`` the
    model's hard clauses as written, ``fallbacks`` what fell back (empty: nothing did)."""
    chosen = next((r for r in records if selected is not None and r.id == selected[0]), None)
    if inputs.focus is not None:
        focus_name, focus = inputs.focus, {inputs.focus}
    elif chosen is not None and chosen.assumptions:
        focus = {a for atom in chosen.assumptions for a in _args(gp, atom)}
        focus_name = ", ".join(sorted(focus)) or f"none (the selected hypothesis {chosen.id} names no entity)"
    else:
        focus_name, focus = "none (no hypothesis was selected)", set()
    invariants = list(inputs.invariants) or list(written_hard)
    confidence = None
    if chosen is not None:
        verdict = next((v for v in verdicts if v.hypothesis_id == chosen.id), None)
        confidence = verdict.confidence if verdict is not None else min(1.0, max(0.0, chosen.confidence))
    return TraceRecord(
        focus_subsystem=focus_name,
        global_invariants=_capped(invariants),
        candidate_hypotheses=list(records),
        selected_hypothesis_id=chosen.id if chosen is not None else None,
        selected_hypothesis_reason=selected[1] if chosen is not None and selected is not None else None,
        integration_risks=_capped(_risks(focus, gp, coverage)) if focus else [],
        confidence=confidence,
        policy_fallback_applied=bool(fallbacks),
    )
