"""``cda policy authorize | test | analyze``: the Cedar policy operations (:mod:`cda.operations.policy`)
at the command line, their arguments generated from the operations, each call through the gate as
the local user; this module adds each command's own options and shows its result (docs/policy.md).

Exit codes: ``authorize`` 0 when answered (the decision is printed); ``test`` 0 when every
imported request agrees with Cedar's expected answer, 1 when one disagrees, 2 when the test data
is broken (a test file that is not JSON, a policy/schema/entities file missing or unparseable, a
request that cannot be read: the message names the test file) or holds no request at all (only a
refused construct is counted, not failed); ``analyze`` 0 when the property holds in every
environment asked, 1 when it fails in one (a counterexample is printed: a request, and the entity
store unless ``--entities`` fixed it), 3 when a solver gave no verdict for one and none failed;
2 bad input (a compiler-style message, never a traceback), a refused construct, or, with
``--entities``, an environment with no request in that store.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from typing import Any, TextIO

__all__ = ["analyze_options", "authorize_options", "present_analyze", "present_authorize", "present_test",
           "test_options"]

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT, EXIT_UNKNOWN = 0, 1, 2, 3
_JSON_HELP = "print one JSON object"


def authorize_options(p: Any, op: Any) -> dict[str, Any]:
    """``cda policy authorize``'s own option: ``--json``."""
    p.add_argument("--json", action="store_true", help=_JSON_HELP)
    return {}


def test_options(p: Any, op: Any) -> dict[str, Any]:
    """``cda policy test``'s own option: ``--json``."""
    p.add_argument("--json", action="store_true", help=_JSON_HELP)
    return {}


def analyze_options(p: Any, op: Any) -> dict[str, Any]:
    """``cda policy analyze PROPERTY POLICIES… [--links L]…``: the policy files in the order the
    property names them (``A B``, ``OLD NEW``) and one ``--links`` per policy file, in order. The
    operation names its files as a job does (``path``, ``other``, ``links``, ``other_links``:
    ``path`` is the set under review, NEW for ``no-new-access``): :func:`present_analyze` maps them."""

    def files(p: Any) -> None:  # after PROPERTY
        p.add_argument("policies", nargs="+", help="one policy file, or two (A B, or OLD NEW)")
        p.add_argument("--links", action="append", default=None,
                       help="template links (the Cedar CLI's JSON) of the first policy file; again for the second")
        p.add_argument("--json", action="store_true", help="print one JSON list")

    return {"own": ("path", "other", "links", "other_links"), "after": files, "metavars": {"analysis": "property"}}


def _called(op: Any, params: dict[str, Any], err: TextIO, show: Callable[[Any], int]) -> int:
    """Run ``op`` as the local user and ``show`` its result; a failure before the answer is one
    message on stderr: exit 2, or 3 when a solver gave no verdict."""
    from cda.cli.call import call_local
    from cda.errors import BackendUnsupported, CDAError

    try:
        result = call_local(op, params)
    except BackendUnsupported as e:
        err.write(f"cda: error: {e}\n")
        return EXIT_BAD_INPUT
    except CDAError as e:
        err.write(e.render() + "\n")
        return EXIT_UNKNOWN if "no verdict" in str(e) else EXIT_BAD_INPUT
    return show(result)


def present_authorize(op: Any, args: argparse.Namespace, out: TextIO, err: TextIO, inp: TextIO | None = None) -> int:
    from cda.cli.generate import params_of

    def show(ans: Any) -> int:
        if args.json:
            out.write(json.dumps(ans.model_dump(), sort_keys=True) + "\n")
            return EXIT_OK
        out.write(f"{ans.decision.upper()}\n")
        out.write(f"determining policies: {', '.join(ans.reason) or '(none)'}\n")
        out.write(f"errors: {', '.join(ans.errors) or '(none)'}\n")
        for m in ans.messages:
            out.write(f"  {m}\n")
        return EXIT_OK

    return _called(op, params_of(op, args), err, show)


def present_test(op: Any, args: argparse.Namespace, out: TextIO, err: TextIO, inp: TextIO | None = None) -> int:
    from cda.cli.generate import params_of

    def show(result: Any) -> int:
        summary = result.model_dump()
        bad = summary["imported"] - summary["agreed"]
        if args.json:
            out.write(json.dumps(summary, sort_keys=True) + "\n")
        else:
            for r in summary["results"]:
                if r["imported"] and not r["agree"]:
                    out.write(f"DISAGREE {r['file']} request {r['index']}: expected {r['expected']}, "
                              f"CDA {r['decision']}\n")
            for construct, n in summary["refused_by_construct"].items():
                out.write(f"refused {n} request(s): {construct}\n")
            out.write(f"{summary['total']} requests, {summary['imported']} imported, {summary['agreed']} agree "
                      f"({bad} disagree)\n")
        return EXIT_FAILED if bad else EXIT_OK

    return _called(op, params_of(op, args), err, show)


def present_analyze(op: Any, args: argparse.Namespace, out: TextIO, err: TextIO, inp: TextIO | None = None) -> int:
    from cda.cli.generate import params_of
    from cda.policy.analyze import files_error

    files, links = list(args.policies), list(args.links or [])
    wrong = files_error(args.analysis, len(files), len(links))
    if wrong is not None:
        err.write(f"cda: error: {wrong}\n")
        return EXIT_BAD_INPUT
    links += [None] * (len(files) - len(links))
    if args.analysis == "no-new-access":  # the operation's file is the set under review: NEW; other is OLD
        files.reverse()
        links.reverse()
    given = {"path": files[0], "other": files[1] if len(files) > 1 else None, "links": links[0],
             "other_links": links[1] if len(links) > 1 else None}

    def show(result: Any) -> int:
        environments = result.model_dump()["environments"]
        if args.json:
            out.write(json.dumps(environments, sort_keys=True) + "\n")
        else:
            for r in environments:
                _print_result(r, out)
        return {"holds": EXIT_OK, "fails": EXIT_FAILED}.get(result.model_dump()["status"], EXIT_UNKNOWN)

    return _called(op, params_of(op, args, **given), err, show)


_OTHER = {"when": "unless", "unless": "when"}


def _print_result(r: dict[str, Any], out: TextIO) -> None:
    """One environment's answer (its JSON) as text: the verdict, what it was proved for, and the
    counterexample and repair, or the policies it stands on."""
    env = r["environment"]
    head = f"{r['property']} for ({env['principal_type']}, {env['action']}, {env['resource_type']}) on {r['backend']}"
    out.write(f"{str(r['status']).upper():<7}{head}\n  proved for: {r['proved_for']}\n")
    if r["counterexample"] is not None:
        cex = r["counterexample"]
        out.write(f"  request: {json.dumps(cex['request'], sort_keys=True)}\n")
        if "entities" in cex:
            out.write(f"  entities: {json.dumps(cex['entities'], sort_keys=True)}\n")
        for name, links in cex.get("links", {}).items():
            out.write(f"  links ({name}): {json.dumps(links, sort_keys=True)}\n")
        for name, ans in r["answers"].items():
            out.write(f"  {name}: {ans['decision']} (reason {ans['reason']}, errors {ans['errors']})\n")
        if r["repair"] is not None:
            for p in r["repair"]["remove"]:
                out.write(f"  repair: remove {p['policy']} ({p['file']}:{p['line']}, {p['effect']})\n")
            for c in r["repair"].get("conditions", []):
                change = "drop" if c["change"] == "drop" else f"negate ({c['kind']} -> {_OTHER[c['kind']]})"
                out.write(f"  repair: or {change} {c['kind']} condition {c['condition']} of {c['policy']} "
                          f"({c['file']}:{c['line']}:{c['column']}); re-checked\n")  # fmt: skip
            out.write(f"  repair: {r['repair']['note']}\n")
    if r["stands_on"] is not None:
        out.write(f"  stands on: {', '.join(r['stands_on']) or '(no policy: it holds whatever they say)'}\n")
    if r["status"] == "holds":
        for a in r["assumptions"]:
            out.write(f"  assuming: {a}\n")
    if r["note"]:
        out.write(f"  note: {r['note']}\n")
