"""The abstain gate's contracts: coverage, thresholds, the ABSTAIN output, the epistemic report.

CDA must not dress a guess up as a diagnosis. When the knowledge graph (Ken) does not cover an
anomaly, the honest answers are "I cannot ground this" (:class:`AbstainOutput`) or a report
whose every line says how it is known (:class:`EpistemicReport`): *observations* quoted from the
input, *Ken facts* that cite node ids, *hypotheses* marked unverified unless a solver verdict
proves them, and a *conclusion* whose confidence band cannot be ``high`` without coverage. These
models hold those rules as validators, so a report that breaks them cannot even be built.

The rules and their defaults follow the abstain gate of docs/actions.md ("Abstention"); the functions that compute
them live in :mod:`cda.verifiers.coverage` and :mod:`cda.verifiers.abstain`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from decimal import Decimal, InvalidOperation
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, model_validator

from cda.contracts import limits
from cda.errors import CDAError, OptionError

__all__ = [
    "AbstainAction",
    "AbstainConfigError",
    "AbstainOutput",
    "AbstainThresholds",
    "AugmentInput",
    "BAND_CEILING",
    "Band",
    "CALIBRATION",
    "CausalChain",
    "ChainEdge",
    "Conclusion",
    "CoverageFigures",
    "CoverageReport",
    "EpistemicReport",
    "HypothesisClaim",
    "KenFact",
    "KenQuery",
    "LowCoverageReview",
    "LowCoverageStatus",
    "MatchedEntity",
    "Observation",
    "RelevantFix",
    "RootCause",
    "SUGGESTED_CKG_AUGMENT_INPUTS",
    "UNKNOWN_ROOT_CAUSE",
    "ungrounded_quantities",
    "Violation",
    "ViolationFix",
    "ViolationKind",
    "band_of",
    "band_rank",
    "quantities_in",
]

Band = Literal["low", "medium", "high"]
LowCoverageStatus = Literal["OK", "NEEDS_REWRITE", "ABSTAIN"]
ViolationKind = Literal[
    "UNSUPPORTED_METRIC",  # a number that no observation (and no Ken node text) contains: invented
    "UNKNOWN_NODE",  # a node id that Ken lacks
    "UNGROUNDED_NODE",  # a Ken node the coverage traversal never reached
    "UNGROUNDED_ROOT_CAUSE",  # a specific root cause asserted while Ken found none
    "UNGROUNDED_OBSERVATION",  # an "observation" that is not verbatim in the input
]
ViolationFix = Literal["remove", "downgrade_to_hypothesis", "abstain"]

#: The word a conclusion uses when nothing grounds a root cause (the abstain gate: ``"UNKNOWN"``; docs/actions.md).
UNKNOWN_ROOT_CAUSE = "UNKNOWN"

#: (lower bound of confidence, band), highest first: the same table as ``cda.actions.scoring``,
#: so a confidence reads as the same band everywhere.
CALIBRATION: tuple[tuple[float, Band], ...] = ((0.85, "high"), (0.5, "medium"), (0.0, "low"))

#: The highest confidence that still reads as each band: capping at it lowers the band to it.
BAND_CEILING: dict[Band, float] = {"high": 1.0, "medium": 0.84, "low": 0.49}

_RANK: dict[Band, int] = {"low": 0, "medium": 1, "high": 2}


def band_of(confidence: float) -> Band:
    """The band a confidence reads as (first row of :data:`CALIBRATION` it reaches).

    >>> band_of(0.9), band_of(0.84), band_of(0.5), band_of(0.49)
    ('high', 'medium', 'medium', 'low')
    """
    for lower, band in CALIBRATION:
        if confidence >= lower:
            return band
    return "low"


# A number: an optional minus, digits (grouped by commas in threes, "2,300"), an optional decimal
# part and exponent, not continuing an identifier ("p99", "SW_REQ2", "db-2", "v1.2", "soft@25"
# hold none). Sign, grouping and exponent are part of it: "-40 C" is not grounded by "40 C", nor
# "2,300 ms" by "300 ms". Its unit: letters (or %, µ, Ω, °) right after it, or one word after a
# space unless that word is prose.
_NUMBER = re.compile(
    r"(?<![A-Za-z0-9_.@])(?<![A-Za-z0-9_]-)-?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:[eE][+-]?\d+(?![A-Za-z]))?")
_UNIT = re.compile(r"(?:(%|[A-Za-zµΩ°]+)|[ \u00a0]([A-Za-zµΩ°%][A-Za-zµΩ°/]*))(?![A-Za-z0-9_])")
_ATOM_ARGS = re.compile(r"(?<=[A-Za-z0-9_])\([^()]*\)")
_PROSE = frozenset(
    """a an the and or but nor not no if then else in on at of for to from by with into onto over under about as
    than via per since until after before while when is are was were be been has have had do does did will would
    can could may might must so because each every all any some more less most least times""".split()
)


def quantities_in(text: str) -> list[tuple[str, str, str]]:
    """The numbers of a text with their units, as (as written, canonical value, unit or "").

    A number inside a call's arguments (``level(3)``) is an atom of the problem, not a metric,
    and is skipped. A word after a space is a unit unless it is prose ("in", "and", "times").

    >>> quantities_in("VCORE 725mV usage is 29.32% after 3 restarts in 20 ms; level(3)")
    [('725', '725', 'mV'), ('29.32', '29.32', '%'), ('3', '3', 'restarts'), ('20', '20', 'ms')]
    >>> quantities_in("board rev 2024 and 20 in total")
    [('2024', '2024', ''), ('20', '20', '')]
    >>> quantities_in("temp -40 C, p99 2,300 ms, 1.5e3 ms; db-2")
    [('-40', '-40', 'C'), ('2,300', '2300', 'ms'), ('1.5e3', '1500', 'ms')]
    """
    masked = _ATOM_ARGS.sub(lambda m: "(" + " " * (len(m.group()) - 2) + ")", text)
    out = []
    for match in _NUMBER.finditer(masked):
        raw = match.group()
        try:
            value = format(Decimal(raw.replace(",", "")).normalize(), "f")
        except InvalidOperation:  # pragma: no cover - the pattern admits only decimals
            value = raw
        unit = ""
        follow = _UNIT.match(masked, match.end())
        if follow is not None:
            word = follow.group(1) or follow.group(2) or ""
            if follow.group(1) or word.casefold() not in _PROSE:
                unit = word
        out.append((raw, value, unit))
    return out


def ungrounded_quantities(fields: Iterable[tuple[str, str]], observations: Iterable[str]) -> list[tuple[str, str, str]]:
    """(location, number as written, unit) of each number no observation grounds: an observation
    must hold the same value and, when the number has a unit, the same unit."""
    pairs = {(value, unit) for text in observations for _, value, unit in quantities_in(text)}
    values = {value for value, _ in pairs}
    return [
        (loc, raw, unit)
        for loc, text in fields
        for raw, value, unit in quantities_in(text)
        if not ((value, unit) in pairs if unit else value in values)
    ]


def band_rank(band: Band) -> int:
    """0 for low, 1 for medium, 2 for high: bands compare by this."""
    return _RANK[band]


class AbstainConfigError(CDAError, ValueError):
    """A bad abstain threshold, feature flag or coverage parameter; the message names it."""


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


def _fill_band(data: Any) -> Any:
    """Derive ``band`` from ``confidence`` when it is not given (used by the models below)."""
    if isinstance(data, dict) and "band" not in data and isinstance(data.get("confidence"), int | float):
        return {**data, "band": band_of(float(data["confidence"]))}
    return data


# ---------------------------------------------------------------- coverage


class KenQuery(_Model):
    """One query of the safe set that a computation made, for its receipt."""

    name: Literal["search", "neighborhood", "path", "related_by"]
    args: dict[str, str | int | None]
    result_size: int = Field(ge=0)


class MatchedEntity(_Model):
    """A Ken node that the observation text names."""

    node: str
    terms: list[str] = Field(description="the words of the observations that matched it, sorted")
    observations: list[int] = Field(description="indices of the observations that mention it, sorted")


class RootCause(_Model):
    """A node that reaches a symptom along causal edges within the depth bound."""

    node: str
    symptoms: list[str] = Field(description="the symptoms it reaches within the depth bound, sorted")
    hops: int = Field(ge=1, description="the fewest causal steps to any of them")


class ChainEdge(_Model):
    """A Ken edge as stored (``source -relation-> target``), whatever its causal direction."""

    source: str
    relation: str
    target: str


class CausalChain(_Model):
    """A shortest causal path from a root cause to a symptom (the lexicographically least one)."""

    root_cause: str
    symptom: str
    nodes: list[str] = Field(description="from the root cause to the symptom, in causal order")
    edges: list[ChainEdge] = Field(description="the Ken edge behind each step, in the same order")


class RelevantFix(_Model):
    """A node that Ken links by a fix relation to a node of the causal picture."""

    node: str
    targets: list[str] = Field(description="the nodes it fixes or mitigates, sorted")
    relations: list[str] = Field(description="the relations that link it to them, sorted")


class CoverageFigures(_Model):
    """The numbers the abstain rule reads (the abstain gate's ``coverage`` object (docs/actions.md, Abstention))."""

    matched_entities_count: int = Field(ge=0)
    root_causes_count: int = Field(ge=0)
    causal_chains_count: int = Field(ge=0)
    required_nodes_count: int = Field(ge=0)
    relevant_fixes_count: int = Field(ge=0)


_COUNTED: tuple[tuple[str, str], ...] = (
    ("matched_entities_count", "matched_entities"),
    ("root_causes_count", "root_causes"),
    ("causal_chains_count", "causal_chains"),
    ("required_nodes_count", "required_nodes"),
    ("relevant_fixes_count", "relevant_fixes"),
)


class CoverageReport(_Model):
    """How much of an anomaly Ken covers: what matched, what causes it, how, and what fixes it.

    The ``*_count`` fields are the lengths of the lists; they are filled in when omitted and
    rejected when they disagree, so the figures the rule reads are always the lists' sizes.
    ``required_nodes`` are the distinct nodes of all causal chains (docs/actions.md, Abstention).
    """

    observations: list[str] = Field(default_factory=list, description="the input observations, verbatim")
    symptoms: list[str] = Field(default_factory=list, description="the symptom node ids that Ken has, sorted")
    unmatched_symptoms: list[str] = Field(default_factory=list, description="symptom ids Ken lacks, sorted")
    depth: int = Field(default=3, ge=0)
    causal_relations: list[str] = Field(default_factory=list, description="cause -relation-> effect")
    dependency_relations: list[str] = Field(default_factory=list, description="dependent -relation-> dependency")
    fix_relations: list[str] = Field(default_factory=list, description="fix -relation-> target")
    fixed_by_relations: list[str] = Field(default_factory=list, description="target -relation-> fix")
    matched_entities: list[MatchedEntity] = Field(default_factory=list)
    root_causes: list[RootCause] = Field(default_factory=list)
    causal_chains: list[CausalChain] = Field(default_factory=list)
    required_nodes: list[str] = Field(default_factory=list)
    relevant_fixes: list[RelevantFix] = Field(default_factory=list)
    matched_entities_count: int = Field(default=0, ge=0)
    root_causes_count: int = Field(default=0, ge=0)
    causal_chains_count: int = Field(default=0, ge=0)
    required_nodes_count: int = Field(default=0, ge=0)
    relevant_fixes_count: int = Field(default=0, ge=0)
    queries: list[KenQuery] = Field(default_factory=list, description="every Ken query made, in order")

    @model_validator(mode="before")
    @classmethod
    def _counts_are_lengths(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        data = dict(data)
        for count, items in _COUNTED:
            size = len(data.get(items) or [])
            if data.get(count) is None:
                data[count] = size
            elif data[count] != size:
                raise ValueError(f"{count} is {data[count]} but {items} has {size} items")
        return data

    def figures(self) -> CoverageFigures:
        """The counts alone, as the ABSTAIN output and the epistemic report carry them."""
        return CoverageFigures(
            matched_entities_count=self.matched_entities_count,
            root_causes_count=self.root_causes_count,
            causal_chains_count=self.causal_chains_count,
            required_nodes_count=self.required_nodes_count,
            relevant_fixes_count=self.relevant_fixes_count,
        )

    def traversal_nodes(self) -> list[str]:
        """Every node the coverage reached (entities, symptoms, causes, chains, fixes), sorted."""
        nodes = {m.node for m in self.matched_entities} | set(self.symptoms) | set(self.required_nodes)
        nodes |= {r.node for r in self.root_causes}
        for fix in self.relevant_fixes:
            nodes.add(fix.node)
            nodes.update(fix.targets)
        return sorted(nodes)


# ---------------------------------------------------------------- thresholds


_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"0", "false", "no", "off"})


class AbstainThresholds(_Model):
    """The abstain rule's thresholds and the two feature flags (the abstain gate's Implementation notes: docs/actions.md, Abstention).

    A count *below* its minimum fires the rule, so the defaults say what the seed says:
    abstain when ``root_causes_count == 0`` or ``causal_chains_count == 0``; ``min_entities``
    is the seed's optional entity clause (0 = off). ``min_required_nodes`` and
    ``review_min_entities`` only trigger the low-coverage review.
    """

    min_root_causes: int = Field(default=1, ge=0)
    min_chains: int = Field(default=1, ge=0)
    min_entities: int = Field(default=0, ge=0)
    min_required_nodes: int = Field(default=3, ge=0)
    review_min_entities: int = Field(default=1, ge=0)
    abstain_gate_enabled: bool = True
    low_coverage_verifier_enabled: bool = True

    #: field -> the seed's environment variable that sets it (the abstain gate's Implementation notes: docs/actions.md, Abstention).
    SEED_ENV_VARS: ClassVar[dict[str, str]] = {
        "min_root_causes": "ABSTAIN_MIN_ROOT_CAUSES",
        "min_chains": "ABSTAIN_MIN_CHAINS",
        "min_entities": "ABSTAIN_MIN_ENTITIES",
        "min_required_nodes": "MIN_REQUIRED_NODES",
        "review_min_entities": "REVIEW_MIN_ENTITIES",
        "abstain_gate_enabled": "ENABLE_ABSTAIN_GATE",
        "low_coverage_verifier_enabled": "ENABLE_LOW_COVERAGE_VERIFIER",
    }

    #: field -> CDA's alias of the same variable (``CDA_`` + the seed's name).
    ENV_VARS: ClassVar[dict[str, str]] = {
        "min_root_causes": "CDA_ABSTAIN_MIN_ROOT_CAUSES",
        "min_chains": "CDA_ABSTAIN_MIN_CHAINS",
        "min_entities": "CDA_ABSTAIN_MIN_ENTITIES",
        "min_required_nodes": "CDA_MIN_REQUIRED_NODES",
        "review_min_entities": "CDA_REVIEW_MIN_ENTITIES",
        "abstain_gate_enabled": "CDA_ENABLE_ABSTAIN_GATE",
        "low_coverage_verifier_enabled": "CDA_ENABLE_LOW_COVERAGE_VERIFIER",
    }

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> AbstainThresholds:
        """Thresholds from environment variables (pass ``os.environ``); unset or empty -> default.

        Each is read under the seed's name (``MIN_REQUIRED_NODES``) and CDA's alias
        (``CDA_MIN_REQUIRED_NODES``); set under both with different values is an error.

        >>> AbstainThresholds.from_env({"CDA_MIN_REQUIRED_NODES": "5"}).min_required_nodes
        5
        >>> AbstainThresholds.from_env({"CDA_ABSTAIN_MIN_CHAINS": "two"})
        Traceback (most recent call last):
        cda.contracts.abstain.AbstainConfigError: CDA_ABSTAIN_MIN_CHAINS: expected a whole number >= 0, got 'two'
        """
        values: dict[str, int | bool] = {}
        for name, alias in cls.ENV_VARS.items():
            seed_var = cls.SEED_ENV_VARS[name]
            given = [(v, environ[v]) for v in (seed_var, alias) if environ.get(v) is not None and environ[v].strip()]
            if not given:
                continue
            if len(given) == 2 and given[0][1].strip() != given[1][1].strip():
                raise AbstainConfigError(
                    f"{seed_var}={given[0][1]!r} and {alias}={given[1][1]!r} disagree; set one of them"
                )
            var, raw = given[0]
            text = raw.strip()
            if cls.model_fields[name].annotation is bool:
                if text.lower() in _TRUE:
                    values[name] = True
                elif text.lower() in _FALSE:
                    values[name] = False
                else:
                    raise AbstainConfigError(f"{var}: expected true or false (1/0, yes/no, on/off), got {raw!r}")
            else:
                if not (text.isascii() and text.isdigit()):
                    raise AbstainConfigError(f"{var}: expected a whole number >= 0, got {raw!r}")
                if len(text) > 10:  # past any count (and Python refuses to read an int of over 4,300 digits)
                    raise AbstainConfigError(
                        f"{var} must be a whole number from 0 to {limits.MAX_COUNT}, not a number of {len(text)} digits"
                    )
                try:
                    values[name] = limits.count(var, int(text), low=0)
                except OptionError as exc:
                    raise AbstainConfigError(str(exc)) from None
        try:
            return cls.model_validate(values)
        except ValidationError as exc:  # pragma: no cover - the parsing above admits only valid values
            raise AbstainConfigError(f"abstain thresholds: {exc}") from exc

    def high_band_minimums(self) -> tuple[int, int]:
        """(root causes, chains) a ``high`` conclusion needs: the thresholds, and never below 1."""
        return max(1, self.min_root_causes), max(1, self.min_chains)


# ---------------------------------------------------------------- the ABSTAIN output


AugmentInput = Literal["raw_report", "raw_debug_query", "agent_output", "judge_feedback"]
"""The inputs the abstain gate names (docs/actions.md, Abstention) for augmenting the knowledge graph (CKG = Ken here)."""

SUGGESTED_CKG_AUGMENT_INPUTS: tuple[AugmentInput, ...] = ("raw_report", "raw_debug_query", "agent_output", "judge_feedback")


class AbstainAction(_Model):
    """What to do instead of answering (the abstain gate's ``action`` object, plus CDA's concrete list)."""

    next_step: Literal["REQUEST_MORE_DATA_OR_AUGMENT_CKG"] = "REQUEST_MORE_DATA_OR_AUGMENT_CKG"
    suggested_ckg_augment_inputs: list[AugmentInput] = Field(
        default_factory=lambda: list(SUGGESTED_CKG_AUGMENT_INPUTS),
        description="which inputs would let Ken (the CKG) be augmented, in the seed's vocabulary",
    )
    collect_next: list[str] = Field(default_factory=list, description="what to collect or add, most useful first")


class AbstainOutput(_Model):
    """The structured ABSTAIN answer (docs/actions.md, Abstention): why no grounded diagnosis is possible and what would help.

    The seed's fields, by the seed's names: ``mode``, ``reason``, ``coverage``, verbatim
    ``observations``, ``missing_knowledge``, ``action.next_step`` and
    ``action.suggested_ckg_augment_inputs``; ``reasons`` and ``action.collect_next`` are CDA's
    additions (the rules that fired, and concretely what to collect).
    """

    mode: Literal["ABSTAIN"] = "ABSTAIN"
    reason: str = "Insufficient CKG coverage to support grounded diagnosis"
    reasons: list[str] = Field(description="each rule that fired, with its figure and threshold")
    coverage: CoverageFigures
    observations: list[str] = Field(description="the input observations, verbatim")
    missing_knowledge: list[str]
    action: AbstainAction = Field(default_factory=AbstainAction)

    @property
    def summary(self) -> str:
        """One line for a boundary summary."""
        return f"ABSTAIN: {self.reason} ({'; '.join(self.reasons)})"


# ---------------------------------------------------------------- the epistemic report


class Observation(_Model):
    """An observation, quoted verbatim from the input."""

    text: str
    source: Literal["input"] = "input"
    index: int = Field(ge=0, description="which input observation it is")


class KenFact(_Model):
    """A fact read from Ken; ``nodes`` cite the node ids it rests on (never empty)."""

    text: str
    source: Literal["ken"] = "ken"
    nodes: list[str] = Field(min_length=1)
    relation: str | None = None


class HypothesisClaim(_Model):
    """A possible explanation. ``verified`` only when a solver verdict supports every atom of it."""

    id: str
    text: str
    assumed: list[str] = Field(default_factory=list, description="the abducibles it assumes true")
    confidence: float = Field(ge=0.0, le=1.0)
    band: Band = Field(default="low", description="filled from confidence when omitted")
    verified: bool = False
    supported_by: list[str] = Field(default_factory=list, description="names of the supporting verdicts")
    nodes: list[str] = Field(default_factory=list, description="Ken nodes it mentions that coverage reached")
    why: list[str] = Field(default_factory=list)
    what_would_confirm: list[str] = Field(default_factory=list)

    @model_validator(mode="before")
    @classmethod
    def _derive_band(cls, data: Any) -> Any:
        return _fill_band(data)

    @model_validator(mode="after")
    def _band_matches(self) -> HypothesisClaim:
        if self.band != band_of(self.confidence):
            raise ValueError(f"band {self.band!r} does not match confidence {self.confidence} ({band_of(self.confidence)!r})")
        if self.verified and not self.supported_by:
            raise ValueError("a hypothesis is verified only with a supporting verdict (supported_by is empty)")
        if self.band == "high" and not self.verified:
            raise ValueError("an unverified hypothesis is at most medium confidence")
        return self


class Conclusion(_Model):
    """The report's answer: a root cause (or ``UNKNOWN``) with a confidence limited by coverage."""

    root_cause: str = UNKNOWN_ROOT_CAUSE
    confidence: float = Field(default=0.0, ge=0.0, le=1.0)
    band: Band = Field(default="low", description="filled from confidence when omitted")
    verified: bool = Field(default=False, description="a solver verdict supports the root cause")
    nodes: list[str] = Field(default_factory=list, description="Ken nodes the root cause names")
    justification: list[str] = Field(default_factory=list)

    @model_validator(mode="before")
    @classmethod
    def _derive_band(cls, data: Any) -> Any:
        return _fill_band(data)

    @model_validator(mode="after")
    def _band_matches(self) -> Conclusion:
        if self.band != band_of(self.confidence):
            raise ValueError(f"band {self.band!r} does not match confidence {self.confidence} ({band_of(self.confidence)!r})")
        return self


class Violation(_Model):
    """A broken grounding rule, where it is, and the seed's fix for it."""

    kind: ViolationKind
    location: str = Field(description="where: 'text', 'conclusion.root_cause', 'hypotheses[2].why[0]', …")
    span: str = Field(description="the offending text: the number, the node id, the claim")
    fix: ViolationFix
    detail: str


class EpistemicReport(_Model):
    """Observations vs Ken facts vs hypotheses vs conclusion, each with how it is known.

    The validator holds the seed's rule "the conclusion cannot be high-confidence unless
    root_causes_count > 0 and causal_chains_count > 0" (with the configured minimums, never
    below 1), and CDA's own: ``high`` also needs a solver verdict behind the conclusion.
    """

    observations: list[Observation] = Field(default_factory=list)
    ken_facts: list[KenFact] = Field(default_factory=list)
    hypotheses: list[HypothesisClaim] = Field(default_factory=list)
    conclusion: Conclusion = Field(default_factory=Conclusion)
    next_steps: list[str] = Field(default_factory=list)
    relevant_fixes: list[RelevantFix] = Field(default_factory=list)
    coverage: CoverageFigures
    min_root_causes: int = Field(default=1, ge=1, description="root causes a high conclusion needs")
    min_chains: int = Field(default=1, ge=1, description="causal chains a high conclusion needs")
    caveats: list[str] = Field(default_factory=list)
    violations: list[Violation] = Field(default_factory=list, description="violations applied as downgrades")

    def claim_fields(self) -> list[tuple[str, str]]:
        """The texts a number must not be invented in, as (location, text): the conclusion and the hypotheses."""
        c = self.conclusion
        out = [("conclusion.root_cause", c.root_cause)]
        out += [(f"conclusion.justification[{j}]", t) for j, t in enumerate(c.justification)]
        for i, h in enumerate(self.hypotheses):
            out.append((f"hypotheses[{i}].text", h.text))
            out += [(f"hypotheses[{i}].why[{j}]", t) for j, t in enumerate(h.why)]
            out += [(f"hypotheses[{i}].what_would_confirm[{j}]", t) for j, t in enumerate(h.what_would_confirm)]
        return out

    @model_validator(mode="after")
    def _no_invented_numbers(self, info: ValidationInfo) -> EpistemicReport:
        """Seed 001: a number in the conclusion or a hypothesis occurs in an observation with its
        unit, unless the report records it as an ``UNSUPPORTED_METRIC`` violation (downgraded).
        A *draft* (``model_validate(data, context={"draft": True})``: a model's output before the
        verifier pass) may break the rule; a report CDA hands on may not."""
        if isinstance(info.context, dict) and info.context.get("draft"):
            return self
        known = {(v.location, v.span) for v in self.violations if v.kind == "UNSUPPORTED_METRIC"}
        for loc, raw, unit in ungrounded_quantities(self.claim_fields(), [o.text for o in self.observations]):
            if (loc, raw) not in known:
                shown = f"{raw} {unit}" if unit else raw
                raise ValueError(
                    f"{loc}: the number {shown} occurs in no observation; a report cannot invent it "
                    "(record it as an UNSUPPORTED_METRIC violation, or validate the text as a draft)"
                )
        return self

    @model_validator(mode="after")
    def _high_needs_coverage(self) -> EpistemicReport:
        if self.conclusion.band == "high":
            cov = self.coverage
            if cov.root_causes_count < self.min_root_causes or cov.causal_chains_count < self.min_chains:
                raise ValueError(
                    "a high-confidence conclusion needs Ken coverage: "
                    f"root_causes_count {cov.root_causes_count} (needs {self.min_root_causes}), "
                    f"causal_chains_count {cov.causal_chains_count} (needs {self.min_chains})"
                )
            if not self.conclusion.verified:
                raise ValueError("a high-confidence conclusion needs a supporting solver verdict")
        return self

    def coverage_sufficient(self) -> bool:
        """Whether coverage would allow a ``high`` conclusion."""
        return (
            self.coverage.root_causes_count >= self.min_root_causes
            and self.coverage.causal_chains_count >= self.min_chains
        )


# ---------------------------------------------------------------- the low-coverage review


class LowCoverageReview(_Model):
    """The low-coverage verifier pass: OK, NEEDS_REWRITE (with the rewrite) or ABSTAIN."""

    status: LowCoverageStatus
    violations: list[Violation] = Field(default_factory=list)
    triggered: bool = Field(default=False, description="coverage was low and the pass ran")
    reasons: list[str] = Field(default_factory=list, description="why the pass ran, or why it was skipped")
    rewritten: EpistemicReport | None = Field(default=None, description="the report with the fixes, on NEEDS_REWRITE")
    abstain: AbstainOutput | None = Field(default=None, description="the ABSTAIN output, on ABSTAIN")
    llm_called: bool | None = Field(
        default=None, description="whether the run's HTTP LLM verifier was called (None: none is configured); "
        "it is called only when coverage is low, unless llm.when is 'always'")
    llm_reasons: list[str] = Field(default_factory=list, description="why the LLM verifier was called or not")
    llm_answers: dict[str, LowCoverageStatus] = Field(
        default_factory=dict, description="each claim's answer from an LLM verifier that answered in this contract")
    llm_rewrites: dict[str, str] = Field(
        default_factory=dict, description="the LLM verifier's rewritten_report per claim, where it gave one (text "
        "for the reader: the run's report is the enforced one, and an LLM only lowers)")
