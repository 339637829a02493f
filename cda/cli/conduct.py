"""``cda conduct "utterance" --db ir.sqlite [--registry tools.toml] [--ken K] [--json]``
(``--obligations FILE`` for a request already structured; ``--answer OBLIGATION "…"
[--retract ASSERTION]`` to answer a CLARIFY, the ``conduct.answer`` operation): the
``conduct.request`` operation (:mod:`cda.operations.conduct`) for the local user: the IR database,
the registry, a Ken graph, CDA's other operations as tools, and — only when asked with
``--translator openai`` — an OpenAI-compatible model as Translator-In.

Exit codes: 0 answered (every obligation resolved and verified), 1 uncertain or unanswered
(a CLARIFY, DISCOVER_OP, JUSTIFY or ERROR is owed, or a verification failed), 2 bad input,
4 translation_failed (the model translator failed: its provider's HTTP error or timeout, or two
replies that were not an obligations document; what the rule translator read instead is answered).
Running the same command again after the conductor was killed resumes the unfinished request.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, TextIO

from cda.errors import CDAError
from cda.terminal_text import for_terminal

__all__ = ["conduct_options", "present_conduct"]

EXIT_ANSWERED, EXIT_OWED, EXIT_BAD_INPUT, EXIT_TRANSLATION_FAILED = 0, 1, 2, 4
#: 3 is left out: elsewhere in cda it means a labelled partial (a budget ran out)


def conduct_options(p: Any, op: Any) -> dict[str, Any]:
    from cda.cli.main import _count  # an id: a whole number from 1, checked as every numeric option is

    p.add_argument("--db", type=Path, required=True, help="the IR database (SQLite, created if missing)")
    p.add_argument("--json", action="store_true", help="print the trace as one JSON object")
    p.add_argument("--answer", type=_count("--answer"), metavar="OBLIGATION", help=(
        "answer that CLARIFY (or DISCOVER_OP) with UTTERANCE and carry its request on (conduct.answer)"))
    p.add_argument("--retract", type=_count("--retract"), action="append", default=[], metavar="ASSERTION",
                   help="with --answer: take back a fact of the request (repeatable)")
    return {"metavars": {"registry": "FILE", "ken": "FILE", "llm_base_url": "URL", "llm_model": "MODEL",
                         "utterance": "UTTERANCE", "obligations": "FILE"}}


def present_conduct(op: Any, args: Any, out: TextIO, err: TextIO, inp: TextIO | None = None) -> int:
    from cda.cli.call import LocalEnv, call_local
    from cda.cli.generate import params_of
    from cda.conductor.conduct import render_tree

    try:
        if args.answer is not None:
            from cda.operations import get

            answer = get("conduct.answer")
            given = {k: v for k, v in params_of(op, args).items() if k in answer.params.model_fields}
            trace = call_local(answer, {**given, "obligation": args.answer, "text": args.utterance or "",
                                        "retract": args.retract}, LocalEnv(conductor_db=args.db))
        elif args.retract:
            print("--retract goes with --answer OBLIGATION (the CLARIFY it answers)", file=err)
            return EXIT_BAD_INPUT
        else:
            trace = call_local(op, params_of(op, args), LocalEnv(conductor_db=args.db))
    except CDAError as exc:
        print(exc.render(), file=err)
        return EXIT_BAD_INPUT
    out.write(trace.model_dump_json(indent=2) + "\n" if args.json else for_terminal(render_tree(trace)))
    if trace.status == "translation_failed":
        return EXIT_TRANSLATION_FAILED
    return EXIT_ANSWERED if trace.status == "answered" else EXIT_OWED
