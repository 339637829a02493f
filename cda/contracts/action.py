"""The contracts of the CDA Action: what ``actions.start{ability: "cda", inputs}`` takes and returns.

``CDAInputs`` follows the Action contract of docs/actions.md ("Inputs") and adds what the engine needs to run without a
guess: the problem's DSL text (``dsl``; the spec leaves the transport of declarations and
observations open), a Ken graph, the claims of a prove/disprove goal, a user's deterministic
check functions and a backend choice. ``CDAOutputs`` is §2.2 plus the run's status and caveats;
``DisplayPlan`` is §2.3 with the spec's defaults.

Every model forbids unknown fields, so a misspelt option is an error rather than silently
ignored. Clients receive only boundary data: verdicts, next tests and artifact ids.
"""

from __future__ import annotations

import ast
import math
from decimal import Decimal
from pathlib import PurePath
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, PlainSerializer, WithJsonSchema, field_validator, model_validator

from cda.contracts import limits
from cda.contracts.abstain import AbstainOutput, CoverageFigures, EpistemicReport, LowCoverageReview
from cda.contracts.hypothesis_record import HypothesisRecord, TraceRecord
from cda.contracts.json_numbers import DECIMAL_PATTERN, decimal_of, weight_json
from cda.contracts.metrics import ActionMetrics
from cda.contracts.refs import ArtifactRef, SpanRef
from cda.contracts.status_fields import VerdictStatusField

__all__ = [
    "ActionStatus",
    "ActionVerdict",
    "Budgets",
    "CDAInputs",
    "CDAOutputs",
    "Constraints",
    "DisplayPlan",
    "DisplayPrimary",
    "FunctionCheck",
    "GoalKind",
    "Goals",
    "KenEdge",
    "KenNode",
    "KenSource",
    "LLMSettings",
    "NextTestSuggestion",
    "Observation",
    "Policies",
    "RiskClass",
    "SeedSpec",
    "SoftConstraint",
]

GoalKind = Literal["best_explanation", "prove", "disprove", "plan"]
RiskClass = Literal["low", "medium", "high", "hard"]
ActionStatus = Literal["completed", "partial", "failed", "escalated", "abstained"]

Observation = Annotated[SpanRef | ArtifactRef, Field(discriminator="kind")]
"""An observation is a pointer to evidence: a span of a source or a whole artifact."""

KEN_SUFFIXES = (".json", ".csv", ".graphml")
MIN_FUNCTION_MB = 32  # a Python interpreter does not start in less address space
#: address space per process of a function check (the sandbox allows a few dozen processes)
MAX_FUNCTION_MB = 4096
MAX_FUNCTION_SECONDS = 600  # a function check is a quick deterministic test, not a job


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


# ---------------------------------------------------------------- inputs


class Goals(_Model):
    """What the run is for. ``claims`` are DSL atoms or formulas to prove or disprove."""

    kind: GoalKind = "best_explanation"
    success_criteria: list[str] = Field(default_factory=list)
    claims: list[str] = Field(default_factory=list, description="DSL formulas, e.g. 'slow(api)'")
    top: int | None = Field(default=None, ge=1, description="how many best explanations to return")

    @field_validator("top", mode="before")
    @classmethod
    def _top(cls, value: object) -> object:
        return None if value is None else limits.count("goals.top", value)


class SoftConstraint(_Model):
    """A clause that may fail at a cost: a model where it is false pays ``weight``, the exact decimal written."""

    # 1.0000000000000001 is not 1: every door reads a JSON number's digits (cda.contracts.json_numbers);
    # NaN, infinities, zero, negatives and numbers beyond the DSL's literal range are refused

    clause: str = Field(min_length=1)
    weight: Annotated[Decimal, PlainSerializer(weight_json, when_used="json"), WithJsonSchema(
        {"type": ["number", "string"], "exclusiveMinimum": 0, "default": 1, "pattern": DECIMAL_PATTERN, "title": "Weight",
         "description": "cost when violated; an exact decimal number > 0 (or its digits as a string)"})] = Field(
        default=Decimal(1), gt=0, description="cost when violated; an exact decimal number > 0 (or its digits as a string)")
    name: str | None = Field(default=None, description="a name for cores and receipts")

    @field_validator("weight", mode="before")
    @classmethod
    def _exact(cls, value: object) -> Decimal:
        return decimal_of(value, "a soft weight")  # then the ``gt=0`` check


class Constraints(_Model):
    hard: list[str] = Field(default_factory=list, description="DSL clauses that must hold in every model")
    soft: list[SoftConstraint] = Field(default_factory=list)


class KenNode(_Model):
    id: str = Field(min_length=1)
    label: str | None = None
    text: str | None = Field(default=None, description="what the node says, for citations")


class KenEdge(_Model):
    source: str = Field(min_length=1)
    relation: str = Field(min_length=1)
    target: str = Field(min_length=1)
    id: str | None = None
    text: str | None = None


class KenSource(_Model):
    """Background knowledge: a file (``path``) or an inline graph (``nodes``/``edges``), not both."""

    path: str | None = Field(default=None, description="a .json (node-link), .csv or .graphml file")
    nodes: list[KenNode] = Field(default_factory=list)
    edges: list[KenEdge] = Field(default_factory=list)

    @model_validator(mode="after")
    def _one_source(self) -> KenSource:
        inline = bool(self.nodes or self.edges)
        if self.path is not None and inline:
            raise ValueError("ken: give either 'path' or inline 'nodes'/'edges', not both")
        if self.path is None and not inline:
            raise ValueError("ken: give a 'path' to a .json/.csv/.graphml file or inline 'nodes'/'edges'")
        if self.path is not None and PurePath(self.path).suffix.lower() not in KEN_SUFFIXES:
            raise ValueError(f"ken: path {self.path!r} must end in one of {', '.join(KEN_SUFFIXES)}")
        seen: set[str] = set()
        for node in self.nodes:
            if node.id in seen:
                raise ValueError(f"ken: node id {node.id!r} appears twice")
            seen.add(node.id)
        return self


class Policies(_Model):
    """Privacy and egress posture; ``approvals`` are approvals given as input (audited)."""

    pii_posture: Literal["on", "off", "consent"] = "off"
    egress: Literal["local", "partner", "external"] = "local"
    approvals: list[str] = Field(default_factory=list)


class Budgets(_Model):
    """Limits of one run; every number is checked by :mod:`cda.contracts.limits`.

    ``wall`` is seconds, more than 0; ``null`` or ``Infinity`` means no limit (stored as
    ``null``, so that the run's seed does not depend on how "no limit" was written, and a
    huge finite value is a long wait rather than an overflow).
    """

    tokens: int | None = Field(default=None, gt=0)
    wall: float | None = Field(default=None, gt=0, description="seconds of wall time (null or Infinity: no limit)")

    @field_validator("tokens", mode="before")
    @classmethod
    def _tokens(cls, value: object) -> object:
        return None if value is None else limits.count("budgets.tokens", value)

    @field_validator("wall", mode="before")
    @classmethod
    def _wall(cls, value: object) -> object:
        if value is None:
            return None
        wall = limits.seconds("budgets.wall", value, positive=True)
        return None if wall == math.inf else wall


class SeedSpec(_Model):
    """The run's seed is HMAC-derived from the inputs and this purpose string."""

    purpose: str = "cda"


class FunctionCheck(_Model):
    """A user's deterministic check: ``source`` defines ``check(claim: str) -> bool``.

    The source is only parsed here (never run), so a syntax error or a missing ``check`` is
    reported when the inputs are built rather than in the middle of a run.
    """

    name: str = Field(min_length=1)
    source: str
    claims: list[str] = Field(default_factory=list)
    timeout_s: float = Field(default=5.0, gt=0)
    memory_mb: int = Field(default=256, gt=0)
    isolation: Literal["namespaces", "process"] = Field(
        default="namespaces",
        description="the weakest isolation accepted: 'namespaces' (the check is not run where the kernel "
        "refuses them) or 'process' (a plain child process there; best effort, see docs/actions.md)",
    )

    @field_validator("timeout_s", mode="before")
    @classmethod
    def _timeout(cls, value: object) -> object:
        return limits.seconds("functions[].timeout_s", value, unlimited=False, positive=True, high=MAX_FUNCTION_SECONDS)

    @field_validator("memory_mb", mode="before")
    @classmethod
    def _memory(cls, value: object) -> object:
        return limits.whole("functions[].memory_mb", value, low=MIN_FUNCTION_MB, high=MAX_FUNCTION_MB)

    @model_validator(mode="after")
    def _defines_check(self) -> FunctionCheck:
        try:
            tree = ast.parse(self.source)
        except SyntaxError as exc:
            raise ValueError(f"function {self.name!r}: source line {exc.lineno}: {exc.msg}") from None
        for node in tree.body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == "check":
                return self
            if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "check" for t in node.targets):
                return self
        raise ValueError(f"function {self.name!r}: source must define check(claim: str) -> bool at top level")


class LLMSettings(_Model):
    """Which LLM verifier reads the claims: the offline one, or an OpenAI-compatible HTTP endpoint.

    An HTTP provider is an external call: it runs only when ``policies.egress`` allows its
    ``egress_class`` (``local`` allows none, ``partner`` allows partner endpoints, ``external``
    allows both); otherwise the check is skipped, recorded as a receipt stub, and the claims it
    would have read are capped as if the LLM had been unsure.

    ``when``: the HTTP verifier is the abstain gate's second pass, so by default it is called only
    when Ken's coverage is low (``low_coverage``; docs/actions.md, "The LLM verifier"); with
    sufficient coverage the offline checker reads the claims and the skip is recorded.
    ``always`` calls it on every run (a policy that wants a second reader whatever the coverage).
    """

    provider: Literal["offline", "openai"] = "offline"
    when: Literal["low_coverage", "always"] = Field(
        default="low_coverage", description="call the HTTP verifier only when Ken coverage is low, or always")
    base_url: str | None = Field(default=None, description="e.g. http://127.0.0.1:8000/v1")
    model: str | None = None
    egress_class: Literal["partner", "external"] = "external"
    timeout_s: float = Field(default=30.0, gt=0)

    @field_validator("timeout_s", mode="before")
    @classmethod
    def _timeout(cls, value: object) -> object:
        return limits.seconds("llm.timeout_s", value, unlimited=False, positive=True)

    @model_validator(mode="after")
    def _endpoint(self) -> LLMSettings:
        if self.provider == "openai" and (not self.base_url or not self.model):
            raise ValueError("llm: provider 'openai' needs both 'base_url' and 'model'")
        return self


FocusName = Annotated[str, Field(min_length=1, max_length=200, pattern=r"^[A-Za-z0-9_][A-Za-z0-9_.:\-]*$")]
"""A focus: a Ken node id or an atom's argument, as the DSL writes names."""


class CDAInputs(_Model):
    """The inputs of one CDA Action (spec §2.1, extended).

    >>> CDAInputs(problem="Why is the API slow?").goals.kind
    'best_explanation'
    """

    problem: str = Field(default="", description="the abductive task in words")
    observations: list[Observation] = Field(default_factory=list)
    goals: Goals = Field(default_factory=Goals)
    constraints: Constraints = Field(default_factory=Constraints)
    dsl: str = Field(default="", description="the problem's .cda text: declarations, facts, observe lines, clauses")
    ken: KenSource | None = None
    policies: Policies = Field(default_factory=Policies)
    budgets: Budgets = Field(default_factory=Budgets)
    risk_class: RiskClass = Field(default="low", description="'hard' escalates immediately")
    seed: SeedSpec = Field(default_factory=SeedSpec)
    functions: list[FunctionCheck] = Field(default_factory=list)
    backend: Literal["auto", "z3", "clingo"] = "auto"
    llm: LLMSettings = Field(default_factory=LLMSettings)
    focus: FocusName | None = Field(
        default=None,
        description="the subsystem to focus on (the trace's focus_subsystem): a Ken node or an argument of the "
        "problem's atoms; derived from the selected hypothesis when omitted")
    invariants: list[str] = Field(
        default_factory=list, max_length=200,
        description="global invariants (DSL formulas): hard clauses every hypothesis must satisfy, listed in the trace")

    @model_validator(mode="after")
    def _has_a_problem(self) -> CDAInputs:
        if not self.problem.strip() and not self.dsl.strip():
            raise ValueError(
                "CDAInputs needs something to solve: 'problem' (the task in words) and 'dsl' "
                "(the .cda text) are both empty; give at least one"
            )
        names = [f.name for f in self.functions]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise ValueError(f"functions: name {dup[0]!r} appears twice")
        return self


# ---------------------------------------------------------------- outputs


class ActionVerdict(_Model):
    """The verdict on one hypothesis or claim, with a calibrated band and its caveats."""

    hypothesis_id: str
    status: VerdictStatusField  # the ordered enum in Python, its string in JSON
    confidence: float | None = Field(ge=0.0, le=1.0, description="null exactly when the status is unknown: the "
                                     "budget cut the claim off and no confidence was computed (band low)")
    band: Literal["low", "medium", "high"]
    claim: str
    caveats: list[str] = Field(default_factory=list)

    @model_validator(mode="after")
    def _confidence_when_decided(self) -> ActionVerdict:
        """No confidence exactly for an *unknown* claim (never decided), and then band ``low``."""
        if (self.confidence is None) != (self.status == "unknown"):
            raise ValueError("an unknown verdict has no confidence" if self.status == "unknown"
                             else f"a {self.status} verdict has a confidence")
        if self.confidence is None and self.band != "low":
            raise ValueError("an unknown verdict is in band low")
        return self


class NextTestSuggestion(_Model):
    """A question whose answer would best separate the hypotheses (spec §2.2 ``next_tests``)."""

    question: str
    suggested_ability: Literal["research", "sandbox", "default"] | None = None
    expected_discriminative_power: float | None = Field(default=None, ge=0.0, description="expected information gain, bits")
    observable: str | None = Field(default=None, description="the DSL observable the question measures")


class DisplayPrimary(_Model):
    kind: Literal["summary"] = "summary"
    id_ref: str = "summary_artifact_id"


class DisplayPlan(_Model):
    """Client hints (spec §2.3): the boundary summary first; receipts and context behind chips."""

    primary: DisplayPrimary = Field(default_factory=DisplayPrimary)
    chips: list[str] = Field(default_factory=lambda: ["receipts", "context_pack"])
    drawers: dict[str, bool] = Field(default_factory=lambda: {"integrity": True})


class CDAOutputs(_Model):
    """What a finished (or partial, failed, escalated, abstained) CDA Action hands back (spec §2.2)."""

    action_id: str
    status: ActionStatus
    summary_artifact_id: str
    plan_bundle_id: str | None = None
    evidence_bundle_id: str | None = None
    verdicts: list[ActionVerdict] = Field(default_factory=list)
    next_tests: list[NextTestSuggestion] = Field(default_factory=list)
    caveats: list[str] = Field(default_factory=list)
    display: DisplayPlan = Field(default_factory=DisplayPlan)
    revision: int = Field(default=1, ge=1, description="structure revision: +1 each time a bound update is accepted")
    supersedes: str | None = Field(default=None, description="the plan bundle id of the revision this one replaces")
    abstain: AbstainOutput | None = Field(
        default=None, description="the abstain gate's ABSTAIN output (mode, reason, coverage, observations, "
        "missing_knowledge, action) when the run abstained; an abstained run lists no explanation as a verdict")
    coverage: CoverageFigures | None = Field(default=None, description="how much of the anomaly Ken covers (docs/actions.md, Abstention)")
    review: LowCoverageReview | None = Field(
        default=None, description="the low-coverage verifier pass (docs/actions.md, Abstention, step 2): OK | NEEDS_REWRITE | ABSTAIN "
        "with typed problems; triggered only when coverage is low")
    trace: TraceRecord | None = Field(
        default=None, description="seed 004's trace of the run: focus, invariants, candidates, the selection and why, "
        "integration risks, confidence, whether a fallback applied (docs/actions.md, The trace record)")
    hypotheses: list[HypothesisRecord] = Field(
        default_factory=list, description="the ranked hypotheses as records (docs/investigate.md, 'The records'): "
        "stated assumptions, evidence for and against, falsifiers, confidence, next probe; none when the run abstained")
    epistemic_report: EpistemicReport | None = Field(
        default=None, description="the abstain gate's report of the run (docs/actions.md, Abstention): observations "
        "verbatim, Ken facts with their nodes, hypotheses (unverified unless a verdict supports them), the conclusion "
        "capped by coverage, next steps, fixes; enforced, and the rewritten one when the review said NEEDS_REWRITE")
    metrics: ActionMetrics | None = Field(
        default=None, description="spec §10, the deterministic part: frontier, constraints, verifier pass rate, "
        "citation coverage (measurements is None here; the terminal event's metrics has the timings)")
