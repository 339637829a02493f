"""The abstain gate: abstain when Ken cannot ground an answer, and keep every report honest.

Four deterministic pieces, the abstain gate of docs/actions.md ("Abstention"):

* :func:`should_abstain` — the hard stop: abstain when Ken found too few root causes or causal
  chains (defaults: none), or, optionally, too few matched entities;
* :func:`epistemic_report` — the answer split by how each part is known: observations (verbatim),
  Ken facts (with node ids), hypotheses (unverified unless a solver verdict supports them) and a
  conclusion whose band cannot be ``high`` without coverage and a supporting verdict;
* :func:`enforce` and :func:`apply_enforcement` — the grounding rules (no invented numbers, no
  unknown nodes, verbatim observations) found as :class:`Violation` s and turned into downgrades;
* :func:`low_coverage_review` — the second pass that runs only when coverage is low and answers
  ``OK``, ``NEEDS_REWRITE`` (with a rewritten report) or ``ABSTAIN``.

Like every verifier, these may lower a confidence and never raise one.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from pydantic import ValidationError

from cda.contracts.abstain import (
    BAND_CEILING,
    UNKNOWN_ROOT_CAUSE,
    AbstainAction,
    AbstainConfigError,
    AbstainOutput,
    AbstainThresholds,
    Band,
    Conclusion,
    CoverageReport,
    EpistemicReport,
    HypothesisClaim,
    KenFact,
    KenQuery,
    LowCoverageReview,
    Observation,
    Violation,
    ViolationFix,
    ViolationKind,
    band_rank,
    quantities_in,
)
from cda.contracts.locations import validation_problems
from cda.contracts.result import Hypothesis, Verdict
from cda.ken.graph import KenGraph
from cda.verifiers.coverage import SafeKen

__all__ = [
    "apply_enforcement",
    "enforce",
    "epistemic_report",
    "low_coverage_reasons",
    "low_coverage_review",
    "norm_atom",
    "quantities_in",
    "should_abstain",
]

# An explicit reference to a Ken node in prose: "ken:node:<id>" (SpanRef sources) or "entity:<id>" (the DSL).
_NODE_REF = re.compile(r"(?:\bken:node:|\bentity:)([A-Za-z0-9_][A-Za-z0-9_.\-/]*)")
_IDENT = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.\-]*")
_BY_RANK: tuple[Band, ...] = ("low", "medium", "high")


def _node_refs(text: str) -> list[str]:
    return [m.rstrip(".-/") for m in _NODE_REF.findall(text)]


def norm_atom(text: str) -> str:
    """An atom as one spelling: no blanks, no ``holds(...)`` around it (how a verdict, a hypothesis
    and a report name the same atom).

    >>> norm_atom("holds(down( db ))")
    'down(db)'
    """
    atom = "".join(text.split())
    while atom.startswith("holds(") and atom.endswith(")"):
        atom = atom[len("holds(") : -1]
    return atom


def _cap(confidence: float, band: Band) -> float:
    return min(confidence, BAND_CEILING[band])


# ---------------------------------------------------------------- the abstain rule


def _rules(report: CoverageReport, thresholds: AbstainThresholds) -> list[tuple[str, int, int]]:
    """The abstain rules that fire, as (figure, value, minimum), in the seed's order."""
    checks = [
        ("root_causes_count", report.root_causes_count, thresholds.min_root_causes),
        ("causal_chains_count", report.causal_chains_count, thresholds.min_chains),
        ("matched_entities_count", report.matched_entities_count, thresholds.min_entities),
    ]
    return [(name, value, least) for name, value, least in checks if value < least]


def _missing_knowledge(report: CoverageReport, fired: Sequence[str]) -> tuple[list[str], list[str]]:
    """(what Ken or the input lacks, what to collect next), derived from the coverage."""
    missing: list[str] = []
    collect: list[str] = []
    if not report.observations:
        missing.append("no observations were given")
    if report.matched_entities_count == 0:
        missing.append("the observations name no Ken node")
        collect.append("observations that name the affected components by their Ken node ids")
    missing += [f"symptom {s!r} is not a Ken node" for s in report.unmatched_symptoms]
    if not report.symptoms and not report.unmatched_symptoms:
        missing.append("no symptom was named")
        collect.append("the Ken node ids of the symptoms")
    reached = {s for r in report.root_causes for s in r.symptoms}
    bare = [s for s in report.symptoms if s not in reached]
    relations = ", ".join(report.causal_relations + report.dependency_relations) or "(none configured)"
    missing += [f"no Ken node causes {s!r} within {report.depth} hops along {relations}" for s in bare]
    if bare or report.unmatched_symptoms:
        targets = ", ".join(bare + report.unmatched_symptoms)
        collect.append(f"causal edges into {targets}, added to Ken")
    explained = {"root_causes_count", "causal_chains_count"} if bare or not report.symptoms else set()
    if report.matched_entities_count == 0:
        explained.add("matched_entities_count")
    missing += [f"{name} is below its minimum" for name in fired if name not in explained]
    if report.relevant_fixes_count == 0:
        collect.append("fix records (fixes, mitigates) for the candidate causes")
    collect.append("the raw incident report and debug logs")
    return missing, collect


def should_abstain(report: CoverageReport, thresholds: AbstainThresholds) -> AbstainOutput | None:
    """The ABSTAIN output when coverage is below the thresholds, else ``None``.

    The rule (the abstain gate's Default abstain rule: docs/actions.md, Abstention): abstain when ``root_causes_count <
    min_root_causes`` or ``causal_chains_count < min_chains`` (defaults 1: "== 0"), or
    ``matched_entities_count < min_entities`` (default 0: off). ``None`` when the gate is disabled.

    >>> should_abstain(CoverageReport(), AbstainThresholds()).reasons
    ['root_causes_count 0 < 1', 'causal_chains_count 0 < 1']
    """
    if not thresholds.abstain_gate_enabled:
        return None
    fired = _rules(report, thresholds)
    if not fired:
        return None
    missing, collect = _missing_knowledge(report, [name for name, _, _ in fired])
    return AbstainOutput(
        reasons=[f"{name} {value} < {least}" for name, value, least in fired],
        coverage=report.figures(),
        observations=list(report.observations),
        missing_knowledge=missing,
        action=AbstainAction(collect_next=collect),
    )


# ---------------------------------------------------------------- the epistemic report


def _supporting(atoms: Sequence[str], verdicts: Sequence[Verdict]) -> list[str] | None:
    """Names of the verdicts that prove every atom, or None when one atom lacks a proof."""
    names: list[str] = []
    for atom in atoms:
        found = [
            v.name for v in verdicts
            if v.status == "supported" and v.goal == "prove" and norm_atom(v.claim) == norm_atom(atom)
        ]
        if not found:
            return None
        names += [n for n in found if n not in names]
    return names if atoms else None


def _grounded_nodes(text: str, known: set[str]) -> list[str]:
    return sorted({t for t in _IDENT.findall(text) if t in known})


def _ken_facts(coverage: CoverageReport) -> list[KenFact]:
    edges = sorted({(e.source, e.relation, e.target) for c in coverage.causal_chains for e in c.edges})
    facts = [
        KenFact(text=f"{s} {r} {t}", nodes=list(dict.fromkeys([s, t])), relation=r) for s, r, t in edges
    ]
    for fix in coverage.relevant_fixes:
        facts.append(
            KenFact(
                text=f"{fix.node} {'/'.join(fix.relations)} {', '.join(fix.targets)}",
                nodes=list(dict.fromkeys([fix.node, *fix.targets])),
                relation=fix.relations[0] if len(fix.relations) == 1 else None,
            )
        )
    return facts


def epistemic_report(
    observations: Sequence[str],
    coverage: CoverageReport,
    hypotheses: Sequence[Hypothesis],
    verdicts: Sequence[Verdict],
    *,
    thresholds: AbstainThresholds | None = None,
    root_cause: str | None = None,
    confidence: float | None = None,
    justification: Sequence[str] | None = None,
    next_steps: Sequence[str] = (),
) -> EpistemicReport:
    """The report of what is observed, what Ken says, what is hypothesised and what is concluded.

    * observations: the non-blank inputs, verbatim, with their index;
    * Ken facts: each edge of the causal chains and each relevant fix, citing its node ids;
    * hypotheses: the solver's, in its order; ``verified`` only when, for every atom assumed, a
      ``prove`` verdict on that atom is *supported*; an unverified one is at most ``medium``;
    * conclusion: ``root_cause`` (default: the first hypothesis, else ``UNKNOWN``) with
      ``confidence`` (default: that hypothesis' posterior, 1.0 when proved, 0.0 for UNKNOWN),
      then capped at ``medium`` when coverage is below the thresholds (never below 1 root cause
      and 1 chain) or when no verdict supports it, with a caveat saying which cap applied.

    >>> rep = epistemic_report(["api is slow"], CoverageReport(), [], [], root_cause="db", confidence=0.99)
    >>> rep.conclusion.band, rep.conclusion.confidence
    ('medium', 0.84)
    """
    thresholds = thresholds or AbstainThresholds()
    min_rc, min_ch = thresholds.high_band_minimums()
    known = set(coverage.traversal_nodes())
    caveats: list[str] = []

    claims: list[HypothesisClaim] = []
    for h in hypotheses:
        support = _supporting(h.assumed, verdicts)
        conf = 1.0 if support else min(1.0, max(0.0, h.posterior))
        text = " & ".join(h.assumed) or "(nothing assumed)"
        claims.append(
            HypothesisClaim(
                id=h.id,
                text=text,
                assumed=list(h.assumed),
                confidence=conf if support else _cap(conf, "medium"),
                verified=support is not None,
                supported_by=support or [],
                nodes=_grounded_nodes(text, known),
                why=["a least-cost model of the constraints and observations assumes it"]
                + [f"violates soft clause {name}" for name in h.violated],
                what_would_confirm=[] if support else [f"a prove goal on {a} that comes back supported" for a in h.assumed],
            )
        )

    backing = None
    if root_cause is None:
        backing = claims[0] if claims else None
        root_cause = backing.text if backing else UNKNOWN_ROOT_CAUSE
    else:
        backing = next((c for c in claims if c.text == root_cause), None)
    atoms = backing.assumed if backing else ([] if root_cause == UNKNOWN_ROOT_CAUSE else [root_cause])
    support = _supporting(atoms, verdicts)
    if confidence is None:
        confidence = 1.0 if support else (backing.confidence if backing else 0.0)
    if isinstance(confidence, bool) or not math.isfinite(confidence) or not 0.0 <= confidence <= 1.0:
        raise AbstainConfigError(f"conclusion confidence: expected a number in [0, 1], got {confidence!r}")

    sufficient = coverage.root_causes_count >= min_rc and coverage.causal_chains_count >= min_ch
    if not sufficient:
        caveats.append(
            "Ken coverage is too low for a high-confidence conclusion: "
            f"root_causes_count {coverage.root_causes_count} (needs {min_rc}), "
            f"causal_chains_count {coverage.causal_chains_count} (needs {min_ch})"
        )
        confidence = _cap(confidence, "medium")
    if support is None and confidence > BAND_CEILING["medium"]:
        caveats.append("no solver verdict supports the conclusion: it is at most medium confidence")
        confidence = _cap(confidence, "medium")

    nodes = [] if root_cause == UNKNOWN_ROOT_CAUSE else _grounded_nodes(root_cause, known)
    facts = _ken_facts(coverage)
    if justification is None:
        justification = [f"verdict {name} supports {root_cause}" for name in support or []]
        justification += [f"Ken: {f.text}" for f in facts if set(f.nodes) & set(nodes)]
        if root_cause == UNKNOWN_ROOT_CAUSE:
            justification.append("no hypothesis names a root cause")
    steps = list(next_steps)
    if not sufficient:
        steps.append("collect more observations or add causal edges into the symptoms to Ken")

    return EpistemicReport(
        observations=[Observation(text=t, index=i) for i, t in enumerate(observations) if t.strip()],
        ken_facts=facts,
        hypotheses=claims,
        conclusion=Conclusion(
            root_cause=root_cause,
            confidence=confidence,
            verified=support is not None,
            nodes=nodes,
            justification=list(justification),
        ),
        next_steps=steps,
        relevant_fixes=list(coverage.relevant_fixes),
        coverage=coverage.figures(),
        min_root_causes=min_rc,
        min_chains=min_ch,
        caveats=caveats,
    )


# ---------------------------------------------------------------- enforcement


def _text_fields(report: EpistemicReport) -> list[tuple[str, str]]:
    """The fields a number or a node reference must not be invented in, as (location, text)."""
    return report.claim_fields()


def _node_fields(report: EpistemicReport) -> list[tuple[str, list[str]]]:
    """Every list of node ids the report cites, and the references written into its texts."""
    out = [(f"ken_facts[{i}].nodes", f.nodes) for i, f in enumerate(report.ken_facts)]
    out += [(f"ken_facts[{i}].text", _node_refs(f.text)) for i, f in enumerate(report.ken_facts)]
    out += [(f"hypotheses[{i}].nodes", h.nodes) for i, h in enumerate(report.hypotheses)]
    out.append(("conclusion.nodes", report.conclusion.nodes))
    out += [(loc, _node_refs(text)) for loc, text in _text_fields(report)]
    return out


def _observation_violations(report: EpistemicReport, inputs: Sequence[str]) -> list[Violation]:
    return [
        Violation(
            kind="UNGROUNDED_OBSERVATION", location=f"observations[{i}]", span=o.text, fix="remove",
            detail="not verbatim in any input observation",
        )
        for i, o in enumerate(report.observations)
        if not o.text or not any(o.text in text for text in inputs)
    ]


class _Observed:
    """The quantities of the observations: a number is grounded when one of them has its value
    and, if the number has a unit, the same unit (a bare number matches any unit)."""

    def __init__(self, texts: Iterable[str]) -> None:
        self.pairs = {(value, unit) for text in texts for _, value, unit in quantities_in(text)}
        self.values = {value for value, _ in self.pairs}

    def __call__(self, value: str, unit: str) -> bool:
        return (value, unit) in self.pairs if unit else value in self.values


def _metric_violations(fields: Iterable[tuple[str, str]], known: Callable[[str, str], bool], where: str) -> list[Violation]:
    out: list[Violation] = []
    for loc, text in fields:
        for raw, value, unit in quantities_in(text):
            if not known(value, unit):
                shown = f"{raw} {unit}" if unit else raw
                out.append(
                    Violation(
                        kind="UNSUPPORTED_METRIC", location=loc, span=raw, fix="remove",
                        detail=f"the number {shown} appears in no {where}" + (" with that unit" if unit else ""),
                    )
                )
    return out


def _node_violations(
    fields: Iterable[tuple[str, list[str]]], known: Callable[[str], bool], kind: ViolationKind, detail: str
) -> list[Violation]:
    out: list[Violation] = []
    for loc, nodes in fields:
        for node in dict.fromkeys(nodes):
            if not known(node):
                fix: ViolationFix = "remove" if loc.startswith("hypotheses[") and loc.endswith(".nodes") else "downgrade_to_hypothesis"
                out.append(Violation(kind=kind, location=loc, span=node, fix=fix, detail=detail))
    return out


def _dedupe(violations: Iterable[Violation]) -> list[Violation]:
    seen: dict[tuple[str, str, str], Violation] = {}
    for v in violations:
        seen.setdefault((v.kind, v.location, v.span), v)
    return list(seen.values())


def enforce(
    subject: str | EpistemicReport,
    observations: Sequence[str],
    ken: KenGraph,
    *,
    log: list[KenQuery] | None = None,
    limit: int = 50,
) -> list[Violation]:
    """The grounding rules a draft text or a report breaks (the abstain gate's Enforcement rules: docs/actions.md, Abstention).

    * no invented numbers: a number in the conclusion or the hypotheses (or anywhere in a text
      draft) that no observation contains and no Ken node's id or label contains
      (``UNSUPPORTED_METRIC``); numbers compare by value, so ``2300`` and ``2300.0`` are one;
    * no unknown nodes: a node id the report cites (``nodes`` lists, ``ken:node:<id>`` or
      ``entity:<id>`` in prose) that Ken lacks (``UNKNOWN_NODE``);
    * observations verbatim: each report observation is a substring of an input one
      (``UNGROUNDED_OBSERVATION``).

    Ken is asked only through the safe set (``search`` for numbers, ``path(n, n)`` for nodes);
    pass ``log`` to collect the queries for receipts.

    >>> ken = KenGraph(); ken.add_edge("db", "causes", "api")
    >>> [(v.kind, v.span) for v in enforce("entity:cache adds 40 ms to entity:api", ["api p99 at 900 ms"], ken)]
    [('UNSUPPORTED_METRIC', '40'), ('UNKNOWN_NODE', 'cache')]
    """
    safe = SafeKen(ken, log)
    known_number = _Observed(observations)  # observations only: a Ken label is no measurement

    if isinstance(subject, str):
        found = _metric_violations([("text", subject)], known_number, "observation")
        found += _node_violations([("text", _node_refs(subject))], safe.has_node, "UNKNOWN_NODE", "Ken has no such node")
        return _dedupe(found)
    found = _observation_violations(subject, observations)
    found += _metric_violations(_text_fields(subject), known_number, "observation")
    found += _node_violations(_node_fields(subject), safe.has_node, "UNKNOWN_NODE", "Ken has no such node")
    return _dedupe(found)


def _lowered(confidence: float, band: Band, steps: int) -> float:
    """``confidence`` capped at the ceiling of the band ``steps`` below ``band`` (never raised)."""
    return _cap(confidence, _BY_RANK[max(0, band_rank(band) - steps)])


def apply_enforcement(report: EpistemicReport, violations: Sequence[Violation]) -> EpistemicReport:
    """The report with each violation turned into a downgrade; nothing is ever raised.

    Every violation lowers the conclusion one band (confidence capped at that band's ceiling,
    :data:`~cda.contracts.abstain.BAND_CEILING`) and adds a caveat; one located in a hypothesis
    also lowers that hypothesis and clears its ``verified``; one located in the conclusion
    clears the conclusion's ``verified``. The violations are appended to ``report.violations``.
    Applying the same violations twice downgrades twice.
    """
    if not violations:
        return report
    data = report.model_dump()
    conclusion = data["conclusion"]
    conclusion["confidence"] = _lowered(report.conclusion.confidence, report.conclusion.band, len(violations))
    conclusion.pop("band")
    if any(v.location.startswith("conclusion") for v in violations):
        conclusion["verified"] = False
    for i, h in enumerate(report.hypotheses):
        hits = [v for v in violations if v.location.startswith(f"hypotheses[{i}]")]
        if hits:
            claim = data["hypotheses"][i]
            claim["confidence"] = _lowered(h.confidence, h.band, len(hits))
            claim.pop("band")
            claim["verified"] = False
    caveats = list(report.caveats)
    for v in violations:
        line = f"{v.kind} at {v.location}: {v.span!r} ({v.detail}); downgraded"
        if line not in caveats:
            caveats.append(line)
    data["caveats"] = caveats
    data["violations"] = [*data["violations"], *(v.model_dump() for v in violations)]
    return EpistemicReport.model_validate(data)


# ---------------------------------------------------------------- the low-coverage review


def low_coverage_reasons(coverage: CoverageReport, thresholds: AbstainThresholds) -> list[str]:
    """Why coverage is low, one line per trigger (the abstain gate's Trigger condition: docs/actions.md, Abstention); empty when it is not."""
    checks = [
        ("root_causes_count", coverage.root_causes_count, thresholds.min_root_causes),
        ("causal_chains_count", coverage.causal_chains_count, thresholds.min_chains),
        ("required_nodes_count", coverage.required_nodes_count, thresholds.min_required_nodes),
        ("matched_entities_count", coverage.matched_entities_count, thresholds.review_min_entities),
    ]
    return [f"{name} {value} < {least}" for name, value, least in checks if value < least]


def _review_violations(report: EpistemicReport, coverage: CoverageReport, gate: bool) -> list[Violation]:
    found: list[Violation] = []
    if report.conclusion.root_cause != UNKNOWN_ROOT_CAUSE and coverage.root_causes_count == 0:
        found.append(
            Violation(
                kind="UNGROUNDED_ROOT_CAUSE", location="conclusion.root_cause", span=report.conclusion.root_cause,
                fix="abstain" if gate else "downgrade_to_hypothesis",
                detail="a specific root cause is asserted but Ken coverage found no root cause",
            )
        )
    bad_observations = _observation_violations(report, coverage.observations)
    found += bad_observations
    # a number is grounded by the input observations (and the draft's quotes of them), never by an
    # observation the draft invented: that one is removed, and what it "grounded" goes with it
    invented = {v.location for v in bad_observations}
    quoted = [o.text for i, o in enumerate(report.observations) if f"observations[{i}]" not in invented]
    observed = _Observed(quoted + list(coverage.observations))
    found += _metric_violations(_text_fields(report), observed, "observation")
    grounded = set(coverage.traversal_nodes())
    found += _node_violations(
        _node_fields(report), grounded.__contains__, "UNGROUNDED_NODE", "not among the nodes the Ken traversal reached"
    )
    return _dedupe(found)


def _index(location: str, prefix: str) -> int | None:
    match = re.match(re.escape(prefix) + r"\[(\d+)\]", location)
    return int(match.group(1)) if match else None


def _rewrite(report: EpistemicReport, violations: Sequence[Violation], grounded: set[str]) -> EpistemicReport:
    """The report with the seed's fixes applied: remove invented metrics, demote ungrounded claims."""
    lowered = apply_enforcement(report, violations)
    data: dict[str, Any] = lowered.model_dump()
    drop_items: set[str] = set()  # locations of list items or whole hypotheses to drop
    demote_conclusion = False
    strip_from_root_cause: list[str] = []
    demote_facts: set[int] = set()
    for v in violations:
        loc = v.location
        if v.kind == "UNGROUNDED_OBSERVATION":
            drop_items.add(loc)
        elif v.kind == "UNGROUNDED_ROOT_CAUSE" or loc == "conclusion.nodes":
            demote_conclusion = True
        elif loc == "conclusion.root_cause":  # an invented number in it: remove it, keep the rest as a hypothesis
            demote_conclusion = True
            strip_from_root_cause.append(v.span)
        elif loc.startswith("ken_facts["):
            demote_facts.add(_index(loc, "ken_facts") or 0)
        elif loc.endswith(".nodes"):  # a hypothesis citing a node coverage never reached: drop the citation
            i = _index(loc, "hypotheses") or 0
            data["hypotheses"][i]["nodes"] = [n for n in data["hypotheses"][i]["nodes"] if n in grounded]
        else:  # a justification, a hypothesis' text, why or what_would_confirm
            drop_items.add(loc)

    def kept(items: list[Any], prefix: str) -> list[Any]:
        return [item for j, item in enumerate(items) if f"{prefix}[{j}]" not in drop_items]

    data["observations"] = kept(data["observations"], "observations")
    conclusion = data["conclusion"]
    conclusion["justification"] = kept(conclusion["justification"], "conclusion.justification")
    hypotheses = []
    for i, h in enumerate(data["hypotheses"]):
        if f"hypotheses[{i}].text" in drop_items:
            continue
        h["why"] = kept(h["why"], f"hypotheses[{i}].why")
        h["what_would_confirm"] = kept(h["what_would_confirm"], f"hypotheses[{i}].what_would_confirm")
        hypotheses.append(h)
    low = BAND_CEILING["low"]
    for i in sorted(demote_facts):
        fact = data["ken_facts"][i]
        hypotheses.append(
            {"id": f"ken_fact_{i}", "text": fact["text"], "confidence": low, "verified": False,
             "nodes": [n for n in fact["nodes"] if n in grounded], "why": ["stated as a Ken fact, but not grounded"]}
        )
    data["ken_facts"] = [f for i, f in enumerate(data["ken_facts"]) if i not in demote_facts]
    if demote_conclusion and conclusion["root_cause"] != UNKNOWN_ROOT_CAUSE:
        text = conclusion["root_cause"]
        for span in strip_from_root_cause:  # the number and its unit
            units = {unit for raw, _, unit in quantities_in(text) if raw == span and unit}
            tail = "(?:\\s?(?:" + "|".join(re.escape(u) for u in sorted(units)) + "))?" if units else ""
            text = " ".join(re.sub(r"(?<![\w.@])" + re.escape(span) + tail + r"(?![\w.])", "", text).split())
        if text:  # the abstain gate: an ungrounded root cause is downgraded to a hypothesis, never dropped
            hypotheses.append(
                {"id": "conclusion", "text": text,
                 "confidence": min(conclusion["confidence"], low), "verified": False,
                 "nodes": [n for n in conclusion["nodes"] if n in grounded], "why": conclusion["justification"]}
            )
        data["conclusion"] = {
            "root_cause": UNKNOWN_ROOT_CAUSE, "confidence": 0.0, "verified": False, "nodes": [],
            "justification": ["the root cause is not grounded in Ken coverage; see the hypotheses"],
        }
    for h in hypotheses:
        h.pop("band", None)
    data["hypotheses"] = hypotheses
    data["conclusion"].pop("band", None)
    return EpistemicReport.model_validate(data)


def _bare_rewrite(
    report: EpistemicReport, coverage: CoverageReport, violations: Sequence[Violation], problem: str
) -> EpistemicReport:
    """The rewrite when the fixes alone leave a report that breaks a rule: the input observations
    the draft quoted, Ken's facts of the coverage, no hypothesis and an UNKNOWN conclusion."""
    quoted = [o for o in report.observations if o.text and any(o.text in t for t in coverage.observations)]
    return EpistemicReport(
        observations=quoted,
        ken_facts=_ken_facts(coverage),
        hypotheses=[],
        conclusion=Conclusion(root_cause=UNKNOWN_ROOT_CAUSE, confidence=0.0, verified=False, nodes=[],
                              justification=["the draft could not be rewritten into a grounded report"]),
        next_steps=["collect more observations or add causal edges into the symptoms to Ken"],
        relevant_fixes=list(coverage.relevant_fixes),
        coverage=coverage.figures(),
        min_root_causes=report.min_root_causes,
        min_chains=report.min_chains,
        caveats=[*report.caveats, f"the rewrite kept only what is grounded ({problem})"],
        violations=list(violations),
    )


def low_coverage_review(
    report: EpistemicReport, coverage: CoverageReport, thresholds: AbstainThresholds
) -> LowCoverageReview:
    """The second pass over a draft report, run only when coverage is low (docs/actions.md, Abstention, step 2).

    Skipped (``OK``, ``triggered=False``) unless one trigger holds: root causes, chains,
    required nodes or matched entities below their minimums; also skipped when
    ``low_coverage_verifier_enabled`` is off. When it runs, it finds

    * ``UNGROUNDED_ROOT_CAUSE``: a specific root cause while ``root_causes_count == 0``;
    * ``UNSUPPORTED_METRIC``: a number in the conclusion or hypotheses found in no observation
      and no Ken fact of the report;
    * ``UNGROUNDED_NODE``: a cited node the coverage traversal never reached;
    * ``UNGROUNDED_OBSERVATION``: an observation not verbatim in the input;

    and answers ``ABSTAIN`` for an ungrounded root cause when the abstain gate fires (the seed
    lets the verifier abstain or rewrite; CDA abstains when the gate is on, rewrites when off),
    ``NEEDS_REWRITE`` with ``rewritten`` (invented metrics removed, ungrounded conclusion and
    facts demoted to hypotheses, all confidence capped, never raised) for other violations,
    and ``OK`` when there are none.
    """
    reasons = low_coverage_reasons(coverage, thresholds)
    if not reasons:
        return LowCoverageReview(status="OK", triggered=False, reasons=["coverage is sufficient: review skipped"])
    if not thresholds.low_coverage_verifier_enabled:
        skipped = [*reasons, "review disabled (CDA_ENABLE_LOW_COVERAGE_VERIFIER)"]
        return LowCoverageReview(status="OK", triggered=False, reasons=skipped)
    abstain = should_abstain(coverage, thresholds)
    violations = _review_violations(report, coverage, gate=abstain is not None)
    if abstain is not None and any(v.kind == "UNGROUNDED_ROOT_CAUSE" for v in violations):
        return LowCoverageReview(status="ABSTAIN", violations=violations, triggered=True, reasons=reasons, abstain=abstain)
    if violations:
        try:
            rewritten = _rewrite(report, violations, set(coverage.traversal_nodes()))
        except ValidationError as exc:  # no traceback on any draft: the rewrite keeps only what is grounded
            rewritten = _bare_rewrite(report, coverage, violations, validation_problems(exc))
        return LowCoverageReview(
            status="NEEDS_REWRITE", violations=violations, triggered=True, reasons=reasons, rewritten=rewritten
        )
    return LowCoverageReview(status="OK", triggered=True, reasons=reasons)
