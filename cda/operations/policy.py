"""The Cedar policy operations a batch job runs (docs/jobs.md: kinds ``cedar-test``,
``policy-analysis``, ``request-batch``), through :mod:`cda.policy.jobs`. A job's files are named
relative to its manifest's folder (the call's folder). ``cda policy …`` on the command line is its
own command group (docs/policy.md)."""

from __future__ import annotations

import importlib
from types import ModuleType, SimpleNamespace
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from cda.errors import CDAError
from cda.operations.base import Params, at
from cda.operations.params import FilePath, optional_path, optional_text
from cda.operations.registry import Door, Needs, operation

__all__ = ["AnalysisParams", "BatchParams", "CedarTestParams", "PolicyJobResult", "PolicyUnavailable", "policy_package"]

_BINARY = frozenset({"implies", "equivalent", "disjoint", "no-new-access"})


class PolicyUnavailable(CDAError, RuntimeError):
    """A Cedar job ran where the ``cda.policy`` package is not installed."""


def policy_package(kind: str) -> ModuleType:
    """``cda.policy.jobs``, the policy package's entry points for batch jobs, or a
    :class:`PolicyUnavailable` naming the kind (an import error inside the package is not hidden)."""
    try:
        return importlib.import_module("cda.policy.jobs")
    except ModuleNotFoundError as exc:
        if exc.name not in ("cda.policy", "cda.policy.jobs"):
            raise
        raise PolicyUnavailable(
            f"cda.policy not available: a {kind!r} job needs the Cedar policy package (cda/policy/), "
            "which this installation lacks"
        ) from None


class PolicyJobResult(BaseModel):
    """What :mod:`cda.policy.jobs` returns: plain JSON, no timings."""

    model_config = ConfigDict(extra="allow")


class CedarTestParams(Params):
    path: FilePath = Field(description="a Cedar integration-test JSON file")


class AnalysisParams(Params):
    path: FilePath = Field(description="the policy set under review (.cedar)")
    analysis: Literal["always-allows", "always-denies", "implies", "equivalent", "disjoint", "never-errors",
                      "no-new-access"]
    other: optional_path("the policy set it is compared with (implies, equivalent, disjoint, no-new-access)") = None  # type: ignore[valid-type]
    schema_: FilePath = Field(alias="schema", description="the Cedar schema")
    entities: optional_path("an entity store (JSON) to bound the analysis to; without it, every store the schema "  # type: ignore[valid-type]
                            "allows") = None
    links: optional_path("template links of the policy set under review (the Cedar CLI's JSON)") = None  # type: ignore[valid-type]
    other_links: optional_path("template links of the other policy set") = None  # type: ignore[valid-type]
    every_link: bool = Field(default=False, description="each template also stands for every link of it")
    principal_type: optional_text("only this principal type") = None  # type: ignore[valid-type]
    action: optional_text("only this action") = None  # type: ignore[valid-type]
    resource_type: optional_text("only this resource type") = None  # type: ignore[valid-type]

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    @model_validator(mode="after")
    def _other(self) -> AnalysisParams:
        if self.analysis in _BINARY and self.other is None:
            raise ValueError(f"{self.analysis} compares two policy sets: it needs params.other (the second file)")
        if self.analysis not in _BINARY and self.other is not None:
            raise ValueError(f"{self.analysis} analyses one policy set: params.other would not be read")
        if self.other is None and self.other_links is not None:
            raise ValueError("params.other_links are the links of params.other, which is not given")
        return self


class BatchParams(Params):
    path: FilePath = Field(description="the policy set (.cedar)")
    requests: FilePath = Field(description="a JSON list of requests")
    schema_: optional_path("the Cedar schema") = Field(default=None, alias="schema")  # type: ignore[valid-type]
    entities: optional_path("the entities (JSON)") = None  # type: ignore[valid-type]
    links: optional_path("template links (the Cedar CLI's JSON)") = None  # type: ignore[valid-type]

    model_config = ConfigDict(extra="forbid", populate_by_name=True)


def _job(call: Any, p: BaseModel) -> Any:
    data = p.model_dump(by_alias=True, exclude_none=True)
    file = at(call, data.pop("path"))
    paths = {"other", "schema", "entities", "requests", "links", "other_links"}
    return SimpleNamespace(file=file, params={k: str(at(call, v)) if k in paths else v for k, v in data.items()})


_NEEDS = Needs(files=True, long=True)
_SCHEMA = {Door.JOBS: {"schema_": "schema"}}


@operation("policy.test", CedarTestParams, PolicyJobResult, summary="a Cedar integration-test file: agreement per "
           "request", doors={Door.JOBS}, needs=_NEEDS, job="cedar-test")
def cedar_test(call: Any, p: CedarTestParams) -> PolicyJobResult:
    return PolicyJobResult.model_validate(policy_package("cedar-test").cedar_test(_job(call, p)))


@operation("policy.analyze", AnalysisParams, PolicyJobResult, summary="an analysis of a Cedar policy set",
           doors={Door.JOBS}, needs=_NEEDS, job="policy-analysis", renames=_SCHEMA)
def analyze(call: Any, p: AnalysisParams) -> PolicyJobResult:
    return PolicyJobResult.model_validate(policy_package("policy-analysis").policy_analysis(_job(call, p)))


@operation("policy.authorize_batch", BatchParams, PolicyJobResult,
           summary="authorize every request of a JSON list against a Cedar policy set (file)", doors={Door.JOBS},
           needs=_NEEDS, job="request-batch", renames=_SCHEMA)
def authorize_batch(call: Any, p: BatchParams) -> PolicyJobResult:
    return PolicyJobResult.model_validate(policy_package("request-batch").request_batch(_job(call, p)))
