"""``conduct.request``: the conductor (docs/conductor.md) — a request, its obligations, the tools
that resolve them, a verified reply. The IR database is the door's (``call.env.conductor_db``:
the CLI's ``--db``, a server's ``<store>.conductor.sqlite``); CDA's own tools run through the gate
for the caller (:mod:`cda.operations.conductor_tools`), so they read only what it may read.

An OpenAI-compatible Translator-In (``translator: openai``) is network egress of class
``external``: above a door's cap it is refused before anything is sent.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field, model_validator

from cda.contracts import limits
from cda.contracts.conductor import Trace
from cda.errors import CDAError
from cda.operations.base import OperationError, Params, at, ken_graph
from cda.operations.params import Checked, Seed, optional_path, path_list
from cda.operations.registry import Door, Needs, operation

__all__ = ["AnswerParams", "ConductParams", "TraceParams"]


def _llm_seconds(name: str, value: Any) -> float:
    return limits.seconds(name, value, unlimited=False, positive=True, high=3600)


LLMTimeout = Annotated[Annotated[float, Field(gt=0, le=3600)], BeforeValidator(lambda v, info: _llm_seconds(
    info.field_name, v)), Checked(_llm_seconds, False)]


class _ConductorSetup(Params):
    """What every conductor call needs besides the request: the registry, Ken, the translator."""

    registry: optional_path("tools.toml on this machine (default: the shipped registry); its own tools "  # type: ignore[valid-type]
                            "(Python, commands, MCP servers) run only for a caller allowed to run code") = None
    ken: path_list("Ken graph files for ken.lookup, on this machine") = Field(default_factory=list)  # type: ignore[valid-type]
    translator: Literal["rules", "openai"] = Field(default="rules", description=(
        "Translator-In: the rule grammar (default) or an OpenAI-compatible model (network egress: external)"))
    llm_base_url: str | None = Field(default=None, max_length=2048,
                                     description="with translator openai: the provider's base URL")
    llm_model: str | None = Field(default=None, max_length=200, description="with translator openai: the model name")
    llm_timeout: LLMTimeout = Field(default=30.0, description="with translator openai: seconds to wait for the model")
    seed: Seed = 0

    @model_validator(mode="after")
    def _llm(self) -> _ConductorSetup:
        if self.translator == "openai" and (not self.llm_base_url or not self.llm_model):
            raise ValueError("translator openai needs llm_base_url and llm_model")
        return self

    def egress_class(self) -> str | None:
        """The network egress this request makes (the gate compares it with the door's cap)."""
        return "external" if self.translator == "openai" else None

    def endpoint_fields(self) -> list[str]:
        """The URL the translator posts to (with ``CDA_LLM_API_KEY``): the gate lets only the
        operator's endpoints through for a caller that may not choose its own."""
        return ["llm_base_url"] if self.translator == "openai" else []

    def code_fields(self) -> list[str]:
        """A registry may name the user's own tools (Python, programs, MCP servers): naming one
        is running code, decided by the gate (the built-ins need no registry)."""
        return ["registry"] if self.registry is not None else []


class ConductParams(_ConductorSetup):
    utterance: str | None = Field(default=None, min_length=1, max_length=10_000,
                                  description="the request, e.g. 'compute (1 + 2) * 0.1; solve problem.cda'")
    obligations: optional_path("an obligations document (JSON, schemas/ObligationsDoc.schema.json): "  # type: ignore[valid-type]
                               "the request already structured, instead of words") = None

    @model_validator(mode="after")
    def _one_request(self) -> ConductParams:
        if self.utterance is None and self.obligations is None:
            raise ValueError("give the request: its words (utterance) or an obligations document (obligations)")
        return self


class AnswerParams(_ConductorSetup):
    obligation: int = Field(ge=1, le=2**62, description="the CLARIFY (or DISCOVER_OP) obligation answered")
    text: str = Field(default="", max_length=10_000,
                      description="the answer: name=value for missing inputs, a request, outputs as JSON, given facts")
    retract: list[Annotated[int, Field(ge=1, le=2**62)]] = Field(
        default_factory=list, max_length=100, description="fact assertions of the request taken back")


class TraceParams(Params):
    request: int = Field(ge=1, le=2**62, description="the request's id (in the door's IR database)")


def _openai_complete(base_url: str, model: str, timeout_s: float) -> Any:
    """``complete(system, user) -> text`` over the HTTP provider's transport (egress: external,
    chosen by the caller naming the translator, allowed by the gate)."""
    import os

    from cda.adapters.llm_http import OpenAICompatibleProvider
    from cda.contracts.conductor import ObligationsDoc

    provider = OpenAICompatibleProvider(base_url, model, os.environ.get("CDA_LLM_API_KEY"), timeout_s,
                                        egress="external", pii_posture="off", name=f"translator:{model}")
    schema = ObligationsDoc.model_json_schema()
    return lambda system, user: provider.complete_json(system, user, schema)  # structured output


def _owner(call: Any) -> str | None:
    """Who a request belongs to: the local user's database is theirs alone (None: any request);
    on a server's shared one, each principal sees only their own."""
    principal = call.principal
    return None if principal.role == "local" else f"{principal.role}:{principal.name}"


def _db_path(call: Any) -> Any:
    db_path = getattr(call.env, "conductor_db", None)
    if db_path is None:
        raise OperationError("forbidden", "this door keeps no conductor database", ["method"])
    return db_path


@contextmanager
def _conductor(call: Any, p: _ConductorSetup) -> Iterator[Any]:
    """A conductor over the door's IR database, the registry (its MCP sessions closed after)
    and the translator, for this call."""
    from cda.conductor.conduct import Conductor
    from cda.conductor.irdb import IRDatabase
    from cda.conductor.registry import load_registry
    from cda.conductor.tooling import ToolContext
    from cda.conductor.translate import LLMTranslatorIn, RuleTranslatorIn, TranslatorIn
    from cda.operations.conductor_tools import cda_toolbox

    db_path = _db_path(call)
    toolbox = cda_toolbox(call)
    ken = ken_graph(call, p.ken)
    with load_registry(at(call, p.registry) if p.registry is not None else None, toolbox) as registry:
        types = registry.obligation_types()
        translate: TranslatorIn
        if p.translator == "openai":
            assert p.llm_base_url is not None and p.llm_model is not None
            translate = LLMTranslatorIn(_openai_complete(p.llm_base_url, p.llm_model, p.llm_timeout), types)
        else:
            translate = RuleTranslatorIn(types)
        with IRDatabase(db_path) as db:
            yield Conductor(db, registry, translate, ToolContext(call.base_dir, ken, p.seed), owner=_owner(call))


@operation("conduct.request", ConductParams, Trace,
           summary="the conductor: a request -> obligations -> tools -> a verified reply",
           doors={Door.CLI, Door.TOOLBUS, Door.MCP}, needs=Needs(files=True, code=True, egress=True, store=True, long=True),
           cli=("conduct",), cli_positional=("utterance",))
def request(call: Any, p: ConductParams) -> Trace:
    doc = None
    if p.obligations is not None:
        from pydantic import ValidationError

        from cda.contracts.conductor import ObligationsDoc
        from cda.contracts.locations import validation_problems
        from cda.files import read_text

        path = at(call, p.obligations)
        try:
            doc = ObligationsDoc.model_validate_json(read_text(path))
        except ValidationError as exc:
            raise OperationError("invalid_params", f"{path}: not an obligations document: {validation_problems(exc)}",
                                 ["obligations"]) from None
    with _conductor(call, p) as conductor:
        return conductor.handle(p.utterance or f"the obligations in {p.obligations}", doc)  # type: ignore[no-any-return]


@operation("conduct.answer", AnswerParams, Trace,
           summary="answer a CLARIFY of the conductor (inputs, a request, facts retracted) and carry the request on",
           doors={Door.TOOLBUS, Door.MCP}, needs=Needs(files=True, code=True, egress=True, store=True, long=True))
def answer(call: Any, p: AnswerParams) -> Trace:
    with _conductor(call, p) as conductor:
        try:
            return conductor.answer(p.obligation, p.text, tuple(p.retract))  # type: ignore[no-any-return]
        except CDAError as exc:  # another partner's obligation is not found, as at conduct.trace (no server path)
            reason = str(exc).rsplit(": ", 1)[-1]
            if reason == f"no obligation {p.obligation}":
                raise OperationError("not_found", reason, ["obligation"]) from None
            raise


@operation("conduct.trace", TraceParams, Trace, summary="a conductor request as its IR database holds it",
           doors={Door.TOOLBUS, Door.MCP}, needs=Needs(store=True))
def trace(call: Any, p: TraceParams) -> Trace:
    from cda.conductor.conduct import Conductor
    from cda.conductor.irdb import IRDatabase
    from cda.conductor.registry import Registry
    from cda.conductor.tooling import Toolbox

    with IRDatabase(_db_path(call)) as db:
        try:
            return Conductor(db, Registry((), Toolbox()), owner=_owner(call)).trace(p.request)
        except CDAError as exc:
            raise OperationError("not_found", str(exc).rsplit(": ", 1)[-1], ["request"]) from None
