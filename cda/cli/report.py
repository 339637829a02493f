"""``cda check-report DRAFT.json --ken FILE --observation TEXT… [--symptom NODE…] [--json]``: an
agent's draft epistemic report held to the abstain gate's rules (docs/actions.md, "Abstention").

Exit status: 0 the draft passes as written (``OK``), 1 it does not (``DOWNGRADED``,
``NEEDS_REWRITE`` or ``ABSTAIN``: what to change is printed), 2 the command could not check it (a
missing file, a draft that is not a report), with one clear line on stderr and never a traceback.
"""

from __future__ import annotations

import argparse
from typing import Any, TextIO

from cda.errors import CDAError
from cda.terminal_text import for_terminal

__all__ = ["present_check_report", "report_options"]

EXIT_OK, EXIT_FINDINGS, EXIT_BAD_INPUT = 0, 1, 2


def report_options(p: argparse.ArgumentParser, op: Any) -> dict[str, Any]:
    p.add_argument("--json", action="store_true", help="print the whole verdict as one JSON object")
    return {"metavars": {"draft_path": "DRAFT", "ken": "FILE", "observations": "TEXT", "symptoms": "NODE"}}


def present_check_report(op: Any, args: argparse.Namespace, out: TextIO, err: TextIO, inp: TextIO | None = None) -> int:
    from cda.cli.call import LocalEnv, call_local
    from cda.cli.generate import params_of

    try:
        result = call_local(op, params_of(op, args), LocalEnv())
    except CDAError as exc:
        err.write(exc.render() + "\n")
        return EXIT_BAD_INPUT
    if args.json:
        out.write(result.model_dump_json() + "\n")
    else:
        out.write(for_terminal(render(result)))
    return EXIT_OK if result.verdict == "OK" else EXIT_FINDINGS


def render(result: Any) -> str:
    c = result.coverage
    lines = [f"{result.verdict}: coverage from Ken: {c.matched_entities_count} matched entities, "
             f"{c.root_causes_count} root causes, {c.causal_chains_count} causal chains"]
    lines += [f"  {v.kind} {v.span!r} at {v.location}: {v.detail}" for v in result.violations]
    lines += [f"  caveat: {c}" for c in result.enforced.caveats]
    conclusion = result.enforced.conclusion
    lines.append(f"conclusion as enforced: {conclusion.root_cause} ({conclusion.band}, {conclusion.confidence:g})")
    review = result.review
    lines.append(f"low-coverage review: {review.status}" + ("" if review.triggered else " (not run)") + " — "
                 + "; ".join(review.reasons))
    lines += [f"  {v.kind} {v.span!r} at {v.location}: {v.detail}" for v in review.violations]
    if review.rewritten is not None:
        r = review.rewritten.conclusion
        lines.append(f"rewritten conclusion: {r.root_cause} ({r.band}, {r.confidence:g})")
    if result.abstain is not None:
        lines.append("ABSTAIN: " + "; ".join(result.abstain.reasons))
    return "\n".join(lines) + "\n"
