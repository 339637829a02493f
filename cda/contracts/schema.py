"""JSON Schema export of every boundary contract, so clients in any language can validate.

JSON schemas are the public contract (docs/architecture.md). They are generated
from the pydantic models, written one file per model (``<Name>.schema.json``, sorted keys,
two-space indent, trailing newline) and committed under ``schemas/``; :func:`check_schemas`
says which committed files no longer match the models, so a model cannot change silently.
The text depends on the pydantic version that renders it; regenerate after an upgrade.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, TypeAdapter

from cda.contracts.abstain import (
    AbstainOutput,
    AbstainThresholds,
    CoverageReport,
    EpistemicReport,
    LowCoverageReview,
    Violation,
)
from cda.contracts.action import (
    ActionVerdict,
    CDAInputs,
    CDAOutputs,
    DisplayPlan,
    FunctionCheck,
    KenSource,
    NextTestSuggestion,
)
from cda.contracts.conductor import ObligationsDoc, ToolSpec, Trace
from cda.contracts.events import EVENT_TYPES, ActionEvent
from cda.contracts.hypothesis_record import HypothesisRecord, TraceRecord
from cda.contracts.metrics import ActionMetrics
from cda.contracts.receipt import Receipt
from cda.contracts.refs import ArtifactRef, SpanRef
from cda.contracts.result import SolveResult
from cda.contracts.verification import VerifierOutcome
from cda.errors import CDAError
from cda.files import read_bytes, replace_file

__all__ = [
    "CONTRACTS",
    "SCHEMA_SUFFIX",
    "UNIONS",
    "check_schemas",
    "render_schemas",
    "schema_diff",
    "write_schemas",
]

SCHEMA_SUFFIX = ".schema.json"
_DIALECT = "https://json-schema.org/draft/2020-12/schema"

CONTRACTS: dict[str, type[BaseModel]] = {
    # the Action
    "CDAInputs": CDAInputs,
    "CDAOutputs": CDAOutputs,
    "DisplayPlan": DisplayPlan,
    "ActionVerdict": ActionVerdict,
    "NextTestSuggestion": NextTestSuggestion,
    "KenSource": KenSource,
    "FunctionCheck": FunctionCheck,
    "ActionMetrics": ActionMetrics,
    # hypotheses and traces
    "HypothesisRecord": HypothesisRecord,
    "TraceRecord": TraceRecord,
    # evidence, audit, verification, solving
    "SpanRef": SpanRef,
    "ArtifactRef": ArtifactRef,
    "Receipt": Receipt,
    "VerifierOutcome": VerifierOutcome,
    "SolveResult": SolveResult,
    # events, one model per SSE event name
    **{model.__name__: model for model in EVENT_TYPES.values()},
    # the abstain gate (docs/actions.md, Abstention)
    "CoverageReport": CoverageReport,
    "AbstainThresholds": AbstainThresholds,
    "AbstainOutput": AbstainOutput,
    "EpistemicReport": EpistemicReport,
    "LowCoverageReview": LowCoverageReview,
    "Violation": Violation,
    # the conductor (docs/conductor.md): Translator-In's output, the registry's entries, a request's trace
    "ObligationsDoc": ObligationsDoc,
    "ToolSpec": ToolSpec,
    "ConductorTrace": Trace,
}
"""Every model that crosses a boundary, by the name its schema file carries."""

UNIONS: dict[str, Any] = {"ActionEvent": ActionEvent}
"""Discriminated unions exported next to the models (not classes, so rendered by a TypeAdapter)."""


def _schema_of(name: str) -> dict[str, Any]:
    if name in CONTRACTS:
        schema = CONTRACTS[name].model_json_schema()
    else:
        schema = TypeAdapter(UNIONS[name]).json_schema()
        schema.setdefault("title", name)
    return {"$schema": _DIALECT, "$id": name + SCHEMA_SUFFIX, **schema}


def render_schemas() -> dict[str, str]:
    """File name -> file text for every contract, in name order; the same bytes on every call."""
    names = sorted([*CONTRACTS, *UNIONS])
    return {
        name + SCHEMA_SUFFIX: json.dumps(_schema_of(name), sort_keys=True, indent=2, ensure_ascii=False) + "\n"
        for name in names
    }


def _written_by_cda(path: Path) -> bool:
    """Whether the schema file at ``path`` is one a CDA wrote: a regular file (not a link) holding a
    JSON object with this dialect's ``$schema`` and its own file name as ``$id``, as every schema
    :func:`render_schemas` makes has (older CDAs' schemas too)."""
    if path.is_symlink() or not path.is_file():
        return False
    try:
        doc = json.loads(read_bytes(path, limit=_MAX_SCHEMA_BYTES))
    except (CDAError, ValueError, RecursionError):
        return False
    return isinstance(doc, dict) and doc.get("$schema") == _DIALECT and doc.get("$id") == path.name


_MAX_SCHEMA_BYTES = 16 * 1024 * 1024
"""The largest schema file :func:`_written_by_cda` reads to recognise it (CDA's are under 100 KB)."""


def write_schemas(folder: Path) -> list[Path]:
    """Write every schema into ``folder`` (created if missing) and return the paths, in name order.

    Files whose text is already current are left untouched; ``*.schema.json`` files that no
    longer belong to a contract are removed, so the folder ends up exactly as
    :func:`check_schemas` expects. Other files (a README) are kept. CDA never modifies a file it
    did not create: a ``*.schema.json`` file that is not one a CDA wrote (:func:`_written_by_cda`)
    is a ``CDAError`` naming it, raised before anything is written or removed. Each file is
    written whole (a temporary file renamed over the name: a link there is replaced, not followed).
    """
    folder.mkdir(parents=True, exist_ok=True)
    expected = render_schemas()
    present = sorted(p for p in folder.iterdir() if p.name.endswith(SCHEMA_SUFFIX)) if folder.is_dir() else []
    foreign = [p.name for p in present if not _written_by_cda(p)]
    if foreign:
        raise CDAError(f"{folder / foreign[0]}: not a schema file CDA wrote" +
                       (f" (and {len(foreign) - 1} more)" if len(foreign) > 1 else "") +
                       "; CDA never modifies files it did not create (remove it, or give another folder)")
    for stale in present:
        if stale.name not in expected:
            stale.unlink()
    paths = []
    for file_name, text in expected.items():
        path = folder / file_name
        if not path.is_file() or path.read_bytes() != text.encode("utf-8"):
            replace_file(path, text.encode("utf-8"))
        paths.append(path)
    return paths


def schema_diff(folder: Path) -> dict[str, Literal["missing", "stale", "extra"]]:
    """File name -> what is wrong with it: ``missing``, ``stale`` (differs) or ``extra`` (no model)."""
    expected = render_schemas()
    present = {p.name for p in folder.glob("*" + SCHEMA_SUFFIX)} if folder.is_dir() else set()
    problems: dict[str, Literal["missing", "stale", "extra"]] = {}
    for file_name in sorted(set(expected) | present):
        if file_name not in present:
            problems[file_name] = "missing"
        elif file_name not in expected:
            problems[file_name] = "extra"
        elif (folder / file_name).read_bytes() != expected[file_name].encode("utf-8"):
            problems[file_name] = "stale"
    return problems


def check_schemas(folder: Path) -> list[str]:
    """The names of the files in ``folder`` that are stale, missing or extra (empty: current)."""
    return list(schema_diff(folder))
