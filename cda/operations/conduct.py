"""``conduct.request``: the conductor (docs/conductor.md) — a request, its obligations, the tools
that resolve them, a verified reply. The IR database is the door's (``call.env.conductor_db``:
the CLI's ``--db``, a server's ``<store>.conductor.sqlite``); CDA's own tools run through the gate
for the caller (:mod:`cda.operations.conductor_tools`), so they read only what it may read.

An OpenAI-compatible Translator-In (``translator: openai``) is network egress of class
``external``: above a door's cap it is refused before anything is sent.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field, model_validator

from cda.contracts import limits
from cda.contracts.conductor import Trace
from cda.errors import CDAError
from cda.operations.base import OperationError, Params, at, ken_graph
from cda.operations.params import Checked, Seed, optional_path, path_list
from cda.operations.registry import Door, Needs, operation

__all__ = ["ConductParams"]


def _llm_seconds(name: str, value: Any) -> float:
    return limits.seconds(name, value, unlimited=False, positive=True, high=3600)


LLMTimeout = Annotated[Annotated[float, Field(gt=0, le=3600)], BeforeValidator(lambda v, info: _llm_seconds(
    info.field_name, v)), Checked(_llm_seconds, False)]


class ConductParams(Params):
    utterance: str = Field(min_length=1, max_length=10_000,
                           description="the request, e.g. 'compute (1 + 2) * 0.1; solve problem.cda'")
    registry: optional_path("tools.toml on this machine (default: the shipped registry)") = None  # type: ignore[valid-type]
    ken: path_list("Ken graph files for ken.lookup, on this machine") = Field(default_factory=list)  # type: ignore[valid-type]
    translator: Literal["rules", "openai"] = Field(default="rules", description=(
        "Translator-In: the rule grammar (default) or an OpenAI-compatible model (network egress: external)"))
    llm_base_url: str | None = Field(default=None, max_length=2048,
                                     description="with translator openai: the provider's base URL")
    llm_model: str | None = Field(default=None, max_length=200, description="with translator openai: the model name")
    llm_timeout: LLMTimeout = Field(default=30.0, description="with translator openai: seconds to wait for the model")
    seed: Seed = 0

    @model_validator(mode="after")
    def _llm(self) -> ConductParams:
        if self.translator == "openai" and (not self.llm_base_url or not self.llm_model):
            raise ValueError("translator openai needs llm_base_url and llm_model")
        return self

    def egress_class(self) -> str | None:
        """The network egress this request makes (the gate compares it with the door's cap)."""
        return "external" if self.translator == "openai" else None


def _openai_complete(base_url: str, model: str, timeout_s: float) -> Any:
    """``complete(system, user) -> text`` over the HTTP provider's transport (egress: external,
    chosen by the caller naming the translator, allowed by the gate)."""
    import os

    from cda.adapters.llm_http import OpenAICompatibleProvider

    provider = OpenAICompatibleProvider(base_url, model, os.environ.get("CDA_LLM_API_KEY"), timeout_s,
                                        egress="external", pii_posture="off", name=f"translator:{model}")
    return provider.complete_json


@operation("conduct.request", ConductParams, Trace,
           summary="the conductor: a request -> obligations -> tools -> a verified reply",
           doors={Door.CLI, Door.TOOLBUS, Door.MCP}, needs=Needs(files=True, egress=True, store=True, long=True),
           cli=("conduct",), cli_positional=("utterance",))
def request(call: Any, p: ConductParams) -> Trace:
    from cda.conductor.conduct import Conductor
    from cda.conductor.irdb import IRDatabase
    from cda.conductor.registry import load_registry
    from cda.conductor.tooling import ToolContext
    from cda.conductor.translate import LLMTranslatorIn, RuleTranslatorIn, TranslatorIn
    from cda.operations.conductor_tools import cda_toolbox

    db_path = getattr(call.env, "conductor_db", None)
    if db_path is None:
        raise OperationError("forbidden", "this door keeps no conductor database", ["method"])
    toolbox = cda_toolbox(call)
    registry = load_registry(at(call, p.registry) if p.registry is not None else None, toolbox)
    ken = ken_graph(call, p.ken)
    translate: TranslatorIn
    if p.translator == "openai":
        assert p.llm_base_url is not None and p.llm_model is not None
        translate = LLMTranslatorIn(_openai_complete(p.llm_base_url, p.llm_model, p.llm_timeout))
    else:
        translate = RuleTranslatorIn()
    try:
        db = IRDatabase(db_path)
    except CDAError:
        raise
    try:
        conductor = Conductor(db, registry, translate, ToolContext(call.base_dir, ken, p.seed))
        return conductor.handle(p.utterance)
    finally:
        db.close()
