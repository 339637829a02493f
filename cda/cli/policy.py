"""``cda policy authorize | test | analyze``: Cedar policies from the command line.

Only argparse is imported here; :mod:`cda.policy` (and z3, for ``analyze``) is loaded when the
command runs.

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
from pathlib import Path
from typing import Any, TextIO

__all__ = ["add_policy_parser", "main_policy"]

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT, EXIT_UNKNOWN = 0, 1, 2, 3
_PROPERTIES = ["always-allows", "always-denies", "never-errors", "implies", "equivalent", "disjoint", "no-new-access"]


def add_policy_parser(sub: Any, seconds: Any) -> None:
    """Register ``cda policy …`` on the main parser's subparsers (``seconds``: the CLI's checked
    seconds type)."""
    pol = sub.add_parser("policy", help="Cedar policies: authorize a request, run Cedar tests, analyze (docs/policy.md)")
    psub = pol.add_subparsers(dest="policy_command", required=True)
    au = psub.add_parser("authorize", help="Allow or Deny one request, with the determining policies and errors")
    au.add_argument("policies", type=Path, help="the Cedar policy file (.cedar)")
    au.add_argument("--schema", type=Path, default=None, help="the schema (.cedarschema or JSON)")
    au.add_argument("--entities", type=Path, default=None, help="the entity store (Cedar entities JSON)")
    au.add_argument("--links", type=Path, default=None, help="template links (the Cedar CLI's JSON)")
    au.add_argument("--request", type=Path, required=True, help="a request JSON (principal, action, resource, context)")
    au.add_argument("--json", action="store_true", help="print one JSON object")
    te = psub.add_parser("test", help="run Cedar integration-test JSON files and print agreement")
    te.add_argument("folder", type=Path, help="a folder of Cedar integration-test JSON files")
    te.add_argument("--json", action="store_true", help="print one JSON object")
    an = psub.add_parser("analyze", help="decide a property over every request of an environment")
    an.add_argument("property", choices=_PROPERTIES, help="the property to decide")
    an.add_argument("policies", type=Path, nargs="+", help="one policy file, or two (A B, or OLD NEW)")
    an.add_argument("--schema", type=Path, required=True, help="the schema (.cedarschema or JSON)")
    an.add_argument("--entities", type=Path, default=None,
                    help="decide it for this entity store only (default: for every store the schema allows)")
    an.add_argument("--links", type=Path, action="append", default=None,
                    help="template links (the Cedar CLI's JSON) of the first policy file; again for the second")
    an.add_argument("--every-link", action="store_true",
                    help="each template also stands for every link of it (any entities its slots allow)")
    an.add_argument("--principal-type", default=None, help="only this principal type (default: every one)")
    an.add_argument("--action", default=None, help='Action::"view" or view (default: every action of the schema)')
    an.add_argument("--resource-type", default=None, help="only this resource type (default: every one)")
    an.add_argument("--backend", choices=["z3", "clingo"], default="z3", help="the solver that decides it")
    an.add_argument("--timeout", type=seconds, default=60.0, help="per environment, seconds")
    an.add_argument("--explain", action="store_true", help="for a property that holds: the policies it stands on")
    an.add_argument("--repair", action="store_true",
                    help="for a property that fails: the policies whose removal restores it (re-checked)")
    an.add_argument("--json", action="store_true", help="print one JSON object")


def main_policy(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from cda.errors import BackendUnsupported, CDAError

    try:
        if args.policy_command == "authorize":
            return _authorize(args, out)
        if args.policy_command == "test":
            return _test(args, out)
        return _analyze(args, out)
    except BackendUnsupported as e:
        err.write(f"cda: error: {e}\n")
        return EXIT_BAD_INPUT
    except CDAError as e:
        err.write(e.render() + "\n")
        return EXIT_UNKNOWN if "no verdict" in str(e) else EXIT_BAD_INPUT


def _authorize(args: argparse.Namespace, out: TextIO) -> int:
    from cda.policy.authorization import authorize

    ans = authorize(args.policies, args.request, schema=args.schema, entities=args.entities, links=args.links)
    if args.json:
        out.write(json.dumps(ans.to_json(), sort_keys=True) + "\n")
        return EXIT_OK
    out.write(f"{ans.decision.upper()}\n")
    out.write(f"determining policies: {', '.join(ans.reason) or '(none)'}\n")
    out.write(f"errors: {', '.join(ans.errors) or '(none)'}\n")
    for m in ans.messages:
        out.write(f"  {m}\n")
    return EXIT_OK


def _test(args: argparse.Namespace, out: TextIO) -> int:
    from cda.errors import CDAError
    from cda.policy.cedar_tests import run_test_dir, summarize

    if not args.folder.exists():
        raise CDAError(f"{args.folder}: no such file or folder")
    results = run_test_dir(args.folder)
    summary = summarize(results)
    if summary["total"] == 0:
        raise CDAError(f"{args.folder}: no Cedar test request found (no JSON file with 'requests', or only "
                       "empty ones): nothing checked")
    bad = summary["imported"] - summary["agreed"]
    if args.json:
        out.write(json.dumps(summary, sort_keys=True) + "\n")
    else:
        for r in results:
            if r.imported and not r.agree:
                out.write(f"DISAGREE {r.file} request {r.index}: expected {r.expected}, CDA {r.decision}\n")
        for construct, n in summary["refused_by_construct"].items():
            out.write(f"refused {n} request(s): {construct}\n")
        out.write(
            f"{summary['total']} requests, {summary['imported']} imported, {summary['agreed']} agree "
            f"({bad} disagree)\n"
        )
    return EXIT_FAILED if bad else EXIT_OK


def _analyze(args: argparse.Namespace, out: TextIO) -> int:
    from cda.contracts.status import PropertyStatus
    from cda.policy.analyze import analyze_files

    results = analyze_files(
        args.property, args.policies, schema=args.schema, entities=args.entities, action=args.action,
        principal_type=args.principal_type, resource_type=args.resource_type, backend=args.backend,
        timeout=args.timeout, explain=args.explain, repair=args.repair, links=args.links or (),
        every_link=args.every_link,
    )  # fmt: skip
    if args.json:
        out.write(json.dumps([r.to_json() for r in results], sort_keys=True) + "\n")
    else:
        for r in results:
            _print_result(r, out)
    status = min(r.status for r in results)
    return {PropertyStatus.HOLDS: EXIT_OK, PropertyStatus.FAILS: EXIT_FAILED}.get(status, EXIT_UNKNOWN)


_OTHER = {"when": "unless", "unless": "when"}


def _print_result(r: Any, out: TextIO) -> None:
    """One environment's answer as text: the verdict, what it was proved for, and the
    counterexample and repair, or the policies it stands on."""
    env = r.environment
    head = f"{r.property} for ({env['principal_type']}, {env['action']}, {env['resource_type']}) on {r.backend}"
    out.write(f"{str(r.status).upper():<7}{head}\n  proved for: {r.proved_for}\n")
    if r.counterexample is not None:
        cex = r.counterexample
        out.write(f"  request: {json.dumps(cex['request'], sort_keys=True)}\n")
        if "entities" in cex:
            out.write(f"  entities: {json.dumps(cex['entities'], sort_keys=True)}\n")
        for name, links in cex.get("links", {}).items():
            out.write(f"  links ({name}): {json.dumps(links, sort_keys=True)}\n")
        for name, ans in r.answers.items():
            out.write(f"  {name}: {ans['decision']} (reason {ans['reason']}, errors {ans['errors']})\n")
        if r.repair is not None:
            for p in r.repair["remove"]:
                out.write(f"  repair: remove {p['policy']} ({p['file']}:{p['line']}, {p['effect']})\n")
            for c in r.repair.get("conditions", []):
                change = "drop" if c["change"] == "drop" else f"negate ({c['kind']} -> {_OTHER[c['kind']]})"
                out.write(f"  repair: or {change} {c['kind']} condition {c['condition']} of {c['policy']} "
                          f"({c['file']}:{c['line']}:{c['column']}); re-checked\n")  # fmt: skip
            out.write(f"  repair: {r.repair['note']}\n")
    if r.stands_on is not None:
        out.write(f"  stands on: {', '.join(r.stands_on) or '(no policy: it holds whatever they say)'}\n")
    if r.status == "holds":
        for a in r.assumptions:
            out.write(f"  assuming: {a}\n")
    if r.note:
        out.write(f"  note: {r.note}\n")
