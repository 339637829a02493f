"""The abstain gate's contracts: coverage, thresholds, the ABSTAIN output, the epistemic report.

CDA must not dress a guess up as a diagnosis. When the knowledge graph (Ken) does not cover an
anomaly, the honest answers are "I cannot ground this" (:class:`AbstainOutput`) or a report
whose every line says how it is known (:class:`EpistemicReport`): *observations* quoted from the
input, *Ken facts* that cite node ids, *hypotheses* marked unverified unless a solver verdict
proves them, and a *conclusion* whose confidence band cannot be ``high`` without coverage. These
models hold those rules as validators, so a report that breaks them cannot even be built.

The rules and their defaults follow the abstain-gate plan (seed 001); the functions that compute
them live in :mod:`cda.verifiers.coverage` and :mod:`cda.verifiers.abstain`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from cda.contracts import limits
from cda.errors import CDAError, OptionError

__all__ = [
    "AbstainAction",
    "AbstainConfigError",
    "AbstainOutput",
    "AbstainThresholds",
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
    "UNKNOWN_ROOT_CAUSE",
    "Violation",
    "ViolationFix",
    "ViolationKind",
    "band_of",
    "band_rank",
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

#: The word a conclusion uses when nothing grounds a root cause (seed 001: ``"UNKNOWN"``).
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
    """The numbers the abstain rule reads (seed 001's ``coverage`` object)."""

    matched_entities_count: int = Field(ge=0)
    root_causes_count: int = Field(ge=0)
    causal_chains_count: int = Field(ge=0)
    required_nodes_count: int = Field(ge=0)
    relevant_fixes_count: int = Field(ge=0)
    top_similarity: float | None = None


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
    ``required_nodes`` are the distinct nodes of all causal chains (seed 001).
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
    top_similarity: float | None = Field(default=None, description="best vector similarity, when a store gives one")
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
            top_similarity=self.top_similarity,
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
    """The abstain rule's thresholds and the two feature flags (seed 001, "Implementation notes").

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

    #: field -> environment variable that sets it.
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

        >>> AbstainThresholds.from_env({"CDA_MIN_REQUIRED_NODES": "5"}).min_required_nodes
        5
        >>> AbstainThresholds.from_env({"CDA_ABSTAIN_MIN_CHAINS": "two"})
        Traceback (most recent call last):
        cda.contracts.abstain.AbstainConfigError: CDA_ABSTAIN_MIN_CHAINS: expected a whole number >= 0, got 'two'
        """
        values: dict[str, int | bool] = {}
        for name, var in cls.ENV_VARS.items():
            raw = environ.get(var)
            if raw is None or not raw.strip():
                continue
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


class AbstainAction(_Model):
    """What to do instead of answering."""

    next_step: Literal["REQUEST_MORE_DATA_OR_AUGMENT_KEN"] = "REQUEST_MORE_DATA_OR_AUGMENT_KEN"
    collect_next: list[str] = Field(default_factory=list, description="what to collect or add, most useful first")


class AbstainOutput(_Model):
    """The structured ABSTAIN answer: why no grounded diagnosis is possible and what would help."""

    decision: Literal["ABSTAIN"] = "ABSTAIN"
    reason: str = "Insufficient Ken coverage to support a grounded diagnosis"
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
