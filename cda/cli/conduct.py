"""``cda conduct "utterance" --db ir.sqlite [--registry tools.toml] [--ken K] [--json]``: the
``conduct.request`` operation (:mod:`cda.operations.conduct`) for the local user: the IR database,
the registry, a Ken graph, CDA's other operations as tools, and — only when asked with
``--translator openai`` — an OpenAI-compatible model as Translator-In.

Exit codes: 0 answered (every obligation resolved and verified), 1 uncertain or unanswered
(a CLARIFY, DISCOVER_OP, JUSTIFY or ERROR is owed, or a verification failed), 2 bad input.
Running the same command again after the conductor was killed resumes the unfinished request.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, TextIO

from cda.errors import CDAError

__all__ = ["conduct_options", "present_conduct"]

EXIT_ANSWERED, EXIT_OWED, EXIT_BAD_INPUT = 0, 1, 2


def conduct_options(p: Any, op: Any) -> dict[str, Any]:
    p.add_argument("--db", type=Path, required=True, help="the IR database (SQLite, created if missing)")
    p.add_argument("--json", action="store_true", help="print the trace as one JSON object")
    return {"metavars": {"registry": "FILE", "ken": "FILE", "llm_base_url": "URL", "llm_model": "MODEL"}}


def present_conduct(op: Any, args: Any, out: TextIO, err: TextIO, inp: TextIO | None = None) -> int:
    from cda.cli.call import LocalEnv, call_local
    from cda.cli.generate import params_of
    from cda.conductor.conduct import render_tree

    try:
        trace = call_local(op, params_of(op, args), LocalEnv(conductor_db=args.db))
    except CDAError as exc:
        print(exc.render(), file=err)
        return EXIT_BAD_INPUT
    out.write(trace.model_dump_json(indent=2) + "\n" if args.json else render_tree(trace))
    return EXIT_ANSWERED if trace.status == "answered" else EXIT_OWED
