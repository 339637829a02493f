"""``report.check`` (``cda check-report DRAFT.json``, a ToolBus method, the MCP tool ``report_check``):
an agent's own draft of an epistemic report, held to the abstain gate's rules (docs/actions.md,
"Abstention": checking your own draft).

The draft is an :class:`~cda.contracts.abstain.EpistemicReport` (observations, Ken facts,
hypotheses, a conclusion, next steps, fixes). Its ``coverage`` figures are not taken from the
draft: they are computed from the Ken graph given with it (what the observations match, the root
causes and causal chains from the ``symptoms``), so a draft cannot claim the coverage that would
let its conclusion be high. Then the enforcement rules (no number that is not in an observation,
no node Ken lacks, observations quoted verbatim) lower what they find; the low-coverage review
runs when, and only when, coverage is low, and answers ``OK``, ``NEEDS_REWRITE`` with the
rewritten report, or ``ABSTAIN``. A draft that is not a report is ``invalid_params`` with the
location of each fault, never a traceback.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, ValidationError, model_validator

from cda.contracts.abstain import (
    AbstainOutput,
    AbstainThresholds,
    CoverageFigures,
    EpistemicReport,
    LowCoverageReview,
    Violation,
)
from cda.contracts.action import KenSource
from cda.contracts.locations import problem_message
from cda.errors import CDAError
from cda.operations.base import OperationError, Params, Result, at
from cda.operations.params import optional_path
from cda.operations.registry import Door, Needs, operation

__all__ = ["CheckReportParams", "CheckReportResult"]

_Text = Annotated[str, Field(min_length=1, max_length=10_000)]
_Node = Annotated[str, Field(min_length=1, max_length=256)]
MAX_DRAFT_BYTES = 1_000_000


class CheckReportParams(Params):
    draft: Any = Field(default=None, description="the draft epistemic report (a JSON object); its coverage figures "
                       "are computed here, not read from it")
    draft_path: optional_path("a file holding the draft (JSON), on this machine") = None  # type: ignore[valid-type]
    observations: list[_Text] = Field(default_factory=list, max_length=200,
                                      description="the input observations the draft must quote verbatim")
    ken: KenSource | None = Field(default=None, description="the Ken graph (CKG): inline nodes/edges; a path only "
                                  "for the local user")
    symptoms: list[_Node] = Field(default_factory=list, max_length=100,
                                  description="the Ken nodes that show the anomaly (root causes and chains start there)")
    thresholds: AbstainThresholds | None = Field(default=None, description="the abstain gate's settings "
                                                 "(default: the gate's defaults)")

    @model_validator(mode="after")
    def _one(self) -> CheckReportParams:
        if self.draft is None and self.draft_path is None:
            raise ValueError("give 'draft' (the report) or 'draft_path' (a file): neither was given")
        if self.draft is not None and self.draft_path is not None:
            raise ValueError("give either 'draft' (the report) or 'draft_path' (a file), not both")
        return self


class CheckReportResult(Result):
    verdict: Literal["OK", "DOWNGRADED", "NEEDS_REWRITE", "ABSTAIN"] = Field(
        description="OK: nothing found; DOWNGRADED: enforcement lowered the draft; NEEDS_REWRITE: the low-coverage "
        "review rewrote it (see review.rewritten); ABSTAIN: the gate abstains")
    coverage: CoverageFigures = Field(description="the coverage computed from Ken (the draft's own is ignored)")
    violations: list[Violation] = Field(default_factory=list, description="the enforcement rules the draft breaks")
    enforced: EpistemicReport = Field(description="the draft with the enforcement's downgrades applied")
    review: LowCoverageReview = Field(description="the low-coverage review (triggered only when coverage is low)")
    abstain: AbstainOutput | None = None


def _ken(call: Any, source: KenSource | None) -> Any:
    from cda.ken.graph import KenGraph

    if source is None:
        return KenGraph()
    if source.path is not None:
        from cda.api import load_ken

        return load_ken(at(call, source.path))
    from cda.actions.ken_inputs import ken_from_inputs
    from cda.contracts.action import CDAInputs

    return ken_from_inputs(CDAInputs.model_construct(ken=source), None)


def _draft(call: Any, p: CheckReportParams) -> Any:
    if p.draft_path is None:
        return p.draft
    from cda.access import readable
    from cda.files import is_stdin, read_text

    if is_stdin(p.draft_path):  # `cda check-report -`: the draft on standard input, as every text file may be
        raw = read_text(Path(p.draft_path)).encode("utf-8")[: MAX_DRAFT_BYTES + 1]
    else:
        path = at(call, p.draft_path)
        try:
            raw = readable(path).read_bytes()[: MAX_DRAFT_BYTES + 1]
        except OSError as exc:
            raise CDAError(f"cannot read {p.draft_path}: {exc.strerror}") from None
    if len(raw) > MAX_DRAFT_BYTES:
        raise OperationError("invalid_params", f"{p.draft_path}: more than {MAX_DRAFT_BYTES:,} bytes", ["params", "draft"])
    try:
        return json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        where = f" (line {exc.lineno}, column {exc.colno})" if isinstance(exc, json.JSONDecodeError) else ""
        raise OperationError("invalid_params", f"{p.draft_path}: not JSON{where}: {exc}", ["params", "draft"]) from None


def _unverified(draft: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """The draft with nothing marked ``verified`` (no solver verdict stands behind an agent's draft)
    and nothing above ``medium`` (``high`` needs that verdict), and a caveat for each change."""
    from cda.contracts.abstain import BAND_CEILING

    caveats: list[str] = []

    def lowered(item: Any, where: str) -> Any:
        if not isinstance(item, dict):
            return item
        item = dict(item)
        if item.get("verified"):
            caveats.append(f"{where}: marked verified, but no solver verdict stands behind a draft")
        item["verified"] = False
        confidence = item.get("confidence")
        high = item.get("band") == "high" or (isinstance(confidence, int | float) and not isinstance(confidence, bool)
                                              and confidence > BAND_CEILING["medium"])
        if high:
            caveats.append(f"{where}: high lowered to medium (a high band needs a solver verdict)")
            item["band"] = "medium"
            if isinstance(confidence, int | float):
                item["confidence"] = min(float(confidence), BAND_CEILING["medium"])
        return item

    out = dict(draft)
    out["conclusion"] = lowered(out.get("conclusion", {}), "conclusion")
    if isinstance(out.get("hypotheses"), list):
        out["hypotheses"] = [lowered(h, f"hypotheses[{i}]") for i, h in enumerate(out["hypotheses"])]
    out.pop("violations", None)  # the draft's own findings are not taken: they are found here
    return out, caveats


@operation("report.check", CheckReportParams, CheckReportResult,
           summary="hold a draft epistemic report to the abstain gate's rules: coverage from Ken, enforcement, "
           "the low-coverage review", doors={Door.CLI, Door.TOOLBUS, Door.MCP}, needs=Needs(files=True),
           cli=("check-report",), cli_positional=("draft_path",), door_only={Door.CLI: ("draft",)},
           renames={Door.CLI: {"draft_path": "draft"}})
def check(call: Any, p: CheckReportParams) -> CheckReportResult:
    from cda.verifiers.abstain import apply_enforcement, enforce, low_coverage_review, should_abstain
    from cda.verifiers.coverage import coverage_report

    draft = _draft(call, p)
    if not isinstance(draft, dict):
        raise OperationError("invalid_params", f"the draft must be a JSON object (an epistemic report), not "
                             f"{type(draft).__name__}", ["params", "draft"])
    thresholds = p.thresholds or AbstainThresholds()
    ken = _ken(call, p.ken)
    coverage = coverage_report(ken, p.observations, p.symptoms)
    figures = coverage.figures()
    draft, caveats = _unverified(draft)
    try:
        report = EpistemicReport.model_validate({**draft, "coverage": figures.model_dump(),
                                                 "min_root_causes": max(1, thresholds.min_root_causes),
                                                 "min_chains": max(1, thresholds.min_chains)},
                                                context={"draft": True})
    except ValidationError as exc:
        first = exc.errors()[0]
        where: list[str | int] = ["params", "draft", *(x for x in first["loc"] if isinstance(x, str | int))]
        raise OperationError("invalid_params", f"the draft is not an epistemic report: {len(exc.errors())} problem(s); "
                             f"{'.'.join(map(str, first['loc'])) or 'the report'}: {problem_message(first)}", where) from None
    if caveats:
        report = report.model_copy(update={"caveats": [*report.caveats, *caveats]})
    violations = enforce(report, p.observations, ken)
    enforced = apply_enforcement(report, violations) if violations else report
    review = low_coverage_review(enforced, coverage, thresholds)
    abstain = review.abstain if review.status == "ABSTAIN" else (
        should_abstain(coverage, thresholds) if thresholds.abstain_gate_enabled else None)
    verdict: Literal["OK", "DOWNGRADED", "NEEDS_REWRITE", "ABSTAIN"] = (
        "ABSTAIN" if abstain is not None else "NEEDS_REWRITE" if review.status == "NEEDS_REWRITE"
        else "DOWNGRADED" if violations else "OK")
    return CheckReportResult(verdict=verdict, coverage=figures, violations=violations, enforced=enforced,
                             review=review, abstain=abstain)
