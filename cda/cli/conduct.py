"""``cda conduct "utterance" --db ir.sqlite [--registry tools.toml] [--ken K] [--json]``.

Wires the conductor (:mod:`cda.conductor`) to files: the IR database, the registry, a Ken
graph, CDA's other products as tools (:mod:`cda.adapters.conductor_tools`), and — only when
asked with ``--translator openai`` — an OpenAI-compatible model as Translator-In.

Exit codes: 0 answered (every obligation resolved and verified), 1 uncertain or unanswered
(a CLARIFY, DISCOVER_OP, JUSTIFY or ERROR is owed, or a verification failed), 2 bad input.
Running the same command again after the conductor was killed resumes the unfinished request.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TextIO

from cda.errors import CDAError

__all__ = ["main_conduct"]

EXIT_ANSWERED, EXIT_OWED, EXIT_BAD_INPUT = 0, 1, 2


def _openai_complete(base_url: str, model: str, timeout_s: float):  # type: ignore[no-untyped-def]
    """``complete(system, user) -> text`` over the HTTP provider's transport (egress: external,
    chosen by the user naming the translator)."""
    import os

    from cda.adapters.llm_http import OpenAICompatibleProvider, _content

    provider = OpenAICompatibleProvider(base_url, model, os.environ.get("CDA_LLM_API_KEY"), timeout_s,
                                        egress="external", pii_posture="off", name=f"translator:{model}")

    def complete(system: str, user: str) -> str:
        body = {"model": model, "temperature": 0, "seed": 0, "response_format": {"type": "json_object"},
                "messages": [{"role": "system", "content": system}, {"role": "user", "content": user}]}
        reply = provider._post(json.dumps(body, sort_keys=True, separators=(",", ":")).encode("utf-8"))
        return _content(reply, provider.endpoint)

    return complete


def main_conduct(
    utterance: str,
    db_path: Path,
    registry_path: Path | None,
    ken_paths: list[Path],
    as_json: bool,
    out: TextIO,
    err: TextIO,
    *,
    translator: str = "rules",
    llm_base_url: str | None = None,
    llm_model: str | None = None,
    llm_timeout: float = 30.0,
    seed: int = 0,
) -> int:
    from cda.adapters.conductor_tools import cda_toolbox
    from cda.conductor.conduct import Conductor, render_tree
    from cda.conductor.irdb import IRDatabase
    from cda.conductor.registry import load_registry
    from cda.conductor.tooling import ToolContext
    from cda.conductor.translate import LLMTranslatorIn, RuleTranslatorIn, TranslatorIn

    try:
        toolbox = cda_toolbox()
        registry = load_registry(registry_path, toolbox)
        ken = None
        if ken_paths:
            from cda.ken.graph import KenGraph
            from cda.ken.loaders import load_ken

            ken = KenGraph()
            for path in ken_paths:
                ken = ken.merged(load_ken(path))
        translate: TranslatorIn
        if translator == "openai":
            if not llm_base_url or not llm_model:
                raise CDAError("--translator openai needs --llm-base-url and --llm-model")
            translate = LLMTranslatorIn(_openai_complete(llm_base_url, llm_model, llm_timeout))
        else:
            translate = RuleTranslatorIn()
        db = IRDatabase(db_path)
    except CDAError as exc:
        print(exc.render(), file=err)
        return EXIT_BAD_INPUT
    try:
        conductor = Conductor(db, registry, translate, ToolContext(Path.cwd(), ken, seed))
        trace = conductor.handle(utterance)
    except CDAError as exc:
        print(exc.render(), file=err)
        return EXIT_BAD_INPUT
    finally:
        db.close()
    if as_json:
        out.write(trace.model_dump_json(indent=2) + "\n")
    else:
        out.write(render_tree(trace))
    return EXIT_ANSWERED if trace.status == "answered" else EXIT_OWED
