"""The Cedar policy operations (docs/policy.md): ``policy.authorize`` (one request),
``policy.test`` (Cedar's integration tests) and ``policy.analyze`` (a property of a policy set) are
``cda policy authorize | test | analyze`` on the command line (:mod:`cda.cli.policy` shows their
results), and with ``policy.authorize_batch`` the batch job kinds (docs/jobs.md: ``cedar-test``,
``policy-analysis``, ``request-batch``), through :mod:`cda.policy.jobs`. A call's files are named
relative to its folder (the CLI's working directory, a manifest's folder)."""

from __future__ import annotations

import importlib
from types import ModuleType, SimpleNamespace
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from cda.errors import CDAError
from cda.operations.base import Params, Result, at
from cda.operations.params import FilePath, Timeout, optional_path, optional_text
from cda.operations.registry import Door, Needs, operation

__all__ = ["AnalysisParams", "AuthorizeParams", "AuthorizeResult", "BatchParams", "CedarTestParams", "PolicyJobResult",
           "PolicyUnavailable", "policy_package"]

_BINARY = frozenset({"implies", "equivalent", "disjoint", "no-new-access"})


class PolicyUnavailable(CDAError, RuntimeError):
    """A Cedar job ran where the ``cda.policy`` package is not installed."""


def policy_package(kind: str) -> ModuleType:
    """``cda.policy.jobs``, the policy package's entry points for its operations, or a
    :class:`PolicyUnavailable` naming the kind (an import error inside the package is not hidden)."""
    try:
        return importlib.import_module("cda.policy.jobs")
    except ModuleNotFoundError as exc:
        if exc.name not in ("cda.policy", "cda.policy.jobs"):
            raise
        raise PolicyUnavailable(
            f"cda.policy not available: {kind!r} needs the Cedar policy package (cda/policy/), "
            "which this installation lacks"
        ) from None


class PolicyJobResult(BaseModel):
    """What :mod:`cda.policy.jobs` returns: plain JSON, no timings."""

    model_config = ConfigDict(extra="allow")


class _PolicySetParams(Params):
    """A policy set as its files: the policies, and the schema, entities and template links read with them."""

    path: FilePath = Field(description="the Cedar policy file (.cedar)")
    schema_: optional_path("the schema (.cedarschema or JSON)") = Field(default=None, alias="schema")  # type: ignore[valid-type]
    entities: optional_path("the entity store (Cedar entities JSON)") = None  # type: ignore[valid-type]
    links: optional_path("template links (the Cedar CLI's JSON)") = None  # type: ignore[valid-type]

    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class AuthorizeParams(_PolicySetParams):
    request: FilePath = Field(description="a request JSON (principal, action, resource, context)")


class AuthorizeResult(Result):
    """Cedar's answer: the decision, the determining policies, the policies whose evaluation
    raised an error, and the messages of those errors."""

    decision: Literal["allow", "deny"]
    reason: list[str]
    errors: list[str]
    messages: list[str]


class CedarTestParams(Params):
    path: FilePath = Field(description="a Cedar integration-test JSON file, or a folder of them")


class AnalysisParams(Params):
    path: FilePath = Field(description="the policy set under review (.cedar)")
    analysis: Literal["always-allows", "always-denies", "never-errors", "implies", "equivalent", "disjoint",
                      "no-new-access"] = Field(description="the property to decide")
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
    backend: Literal["z3", "clingo"] = Field(default="z3", description="the solver that decides it")
    timeout: Timeout = Field(default=60.0, description="per environment, seconds (inf: no limit)")
    explain: bool = Field(default=False, description="for a property that holds: the policies it stands on")
    repair: bool = Field(default=False, description="for a property that fails: the policies whose removal "
                         "restores it (re-checked)")

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


class BatchParams(_PolicySetParams):
    requests: FilePath = Field(description="a JSON list of requests")


def _job(call: Any, p: BaseModel) -> Any:
    data = p.model_dump(by_alias=True, exclude_none=True)
    file = at(call, data.pop("path"))
    paths = {"other", "schema", "entities", "requests", "links", "other_links", "request"}
    return SimpleNamespace(file=file, params={k: str(at(call, v)) if k in paths else v for k, v in data.items()})


_NEEDS = Needs(files=True, long=True)
_SCHEMA = {Door.JOBS: {"schema_": "schema"}}


@operation("policy.authorize", AuthorizeParams, AuthorizeResult, summary="allow or deny one request, with the "
           "determining policies and errors", doors={Door.CLI}, needs=Needs(files=True), cli_positional=("path",),
           renames={Door.CLI: {"schema_": "schema", "path": "policies"}})
def authorize(call: Any, p: AuthorizeParams) -> AuthorizeResult:
    return AuthorizeResult.model_validate(policy_package("policy.authorize").authorize_request(_job(call, p)))


@operation("policy.test", CedarTestParams, PolicyJobResult, summary="Cedar integration-test JSON files: agreement "
           "per request", doors={Door.CLI, Door.JOBS}, needs=_NEEDS, job="cedar-test", cli_positional=("path",),
           renames={Door.CLI: {"path": "folder"}})
def cedar_test(call: Any, p: CedarTestParams) -> PolicyJobResult:
    return PolicyJobResult.model_validate(policy_package("cedar-test").cedar_test(_job(call, p)))


@operation("policy.analyze", AnalysisParams, PolicyJobResult, summary="decide a property over every request of "
           "an environment", doors={Door.CLI, Door.JOBS}, needs=_NEEDS, job="policy-analysis",
           cli_positional=("analysis",), renames={**_SCHEMA, Door.CLI: {"schema_": "schema", "analysis": "property"}})
def analyze(call: Any, p: AnalysisParams) -> PolicyJobResult:
    return PolicyJobResult.model_validate(policy_package("policy-analysis").policy_analysis(_job(call, p)))


@operation("policy.authorize_batch", BatchParams, PolicyJobResult,
           summary="authorize every request of a JSON list against a Cedar policy set (file)", doors={Door.JOBS},
           needs=_NEEDS, job="request-batch", renames=_SCHEMA)
def authorize_batch(call: Any, p: BatchParams) -> PolicyJobResult:
    return PolicyJobResult.model_validate(policy_package("request-batch").request_batch(_job(call, p)))
