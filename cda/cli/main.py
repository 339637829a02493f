"""The ``cda`` command: ``cda solve FILE...``, ``cda check FILE...``, ``cda fmt FILE...``, ``cda prove FILE.fol``,
``cda diagnose FILE``, ``cda probe FILE``, ``cda run INPUTS.json``, ``cda serve DB``, ``cda receipts verify DB``, ``cda schema DIR``,
``cda bench folio FILE.jsonl``, ``cda jobs run MANIFEST.toml``, ``cda conduct "utterance" --db IR``.

Each subcommand imports its module only when it runs (tests/test_startup_imports.py holds this):
``cda --help`` loads neither a solver nor pydantic.

Exit codes: 0 answered, 1 a prove/disprove goal or an expect failed, 2 bad input, 3 timeout/unknown,
130 interrupted by Ctrl-C (143 by SIGTERM: :mod:`cda.cli.interrupts`, after the partial is printed);
over several files, the worst of theirs (2 over 3 over 1 over 0).
``-`` names standard input; ``--format text|json|jsonl|junit`` chooses the report
(:mod:`cda.cli.ci_report`); with ``--json`` a mistake is a JSON object on stdout.
Mistakes in the input print like a compiler (``file:line:col: error: …`` and a caret) and
never a traceback.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, TextIO

from cda.contracts import limits
from cda.errors import CDAError, OptionError

if TYPE_CHECKING:
    from cda.contracts.result import SolveResult

__all__ = ["main", "render_table"]

EXIT_OK, EXIT_GOAL_FAILED, EXIT_BAD_INPUT, EXIT_UNKNOWN, EXIT_INTERRUPTED = 0, 1, 2, 3, 130


_TIMEOUT_HELP = "wall-clock budget in seconds (inf: no limit)"


def _option(name: str, whole: bool, check: Callable[[str, Any], object]) -> Callable[[str], Any]:
    """An argparse ``type``: the text read as a whole or real number, then checked by
    :mod:`cda.contracts.limits`; a refusal is argparse's usage error (exit 2, one line, no traceback)."""

    def parse(text: str) -> Any:
        try:
            value: int | float = int(text) if whole else float(text)
        except ValueError:
            if text.strip().lstrip("+-").isdigit():  # past Python's 4,300 digits for int(): out of any range
                raise argparse.ArgumentTypeError(f"{name}: a number of {len(text.strip())} digits is out of range") from None
            kind = "a whole number" if whole else "a number"
            shown = text if len(text) <= 40 else text[:20] + "…"
            raise argparse.ArgumentTypeError(f"{name} must be {kind}, not {shown!r}") from None
        try:
            return check(name, value)
        except OptionError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    parse.__name__ = name  # argparse names the type in some messages
    return parse


def _count(name: str) -> Callable[[str], Any]:
    return _option(name, True, limits.count)


_seed = _option("--seed", True, limits.seed)
_port = _option("--port", True, limits.port)
_seconds = _option("--timeout", False, limits.seconds)
_probability = _option("--prior", False, limits.probability)
_vectors = _option("--vectors", True, limits.vectors)
_workers = _option("--workers", True, lambda name, v: limits.whole(name, v, low=1, high=64))
_processes = _option("--processes", True, lambda name, v: limits.whole(name, v, low=0, high=64))
_retention = _option("--retention-hours", True, lambda name, v: limits.whole(name, v, low=24, high=24 * 365,
                                                                               why="spec §7.2: at least 24 h"))
_partner_wall = _option("--partner-wall", False, lambda name, v: limits.seconds(name, v, unlimited=False, positive=True,
                                                                              high=86_400))  # a cap: never none
_partner_slots = _option("--partner-slots", True, lambda name, v: limits.whole(name, v, low=1, high=64))
_job_workers = _option("--workers", True, lambda name, value: limits.whole(name, value, low=1, high=1024))


class _UsageError(Exception):
    """Internal: argparse refused the command line; carries the usage and the message."""


class _Parser(argparse.ArgumentParser):
    """argparse that hands its refusal to :func:`main` (printed on main's ``stderr``, exit 2)
    instead of writing to ``sys.stderr`` and exiting itself."""

    def error(self, message: str) -> NoReturn:
        raise _UsageError(f"{self.format_usage()}{self.prog}: error: {message}\n")


_FILES_HELP = "DSL files (.cda); - reads standard input"
_BACKEND_HELP = "solver: auto (chosen per problem), z3 or clingo"
_JSON_HELP = "print one JSON object (a mistake in the input too, on stdout)"
_FORMAT_HELP = "report: text (default), json (one object), jsonl (one line per file), junit (JUnit XML)"
_OBSERVATIONS_HELP = "observation file for a .bench netlist"


def _version() -> str:
    """The installed distribution's version (``0+unknown`` when run from a bare checkout)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("cda")
    except PackageNotFoundError:
        return "0+unknown"


class _VersionAction(argparse.Action):
    """``--version``: the version is looked up only when asked (no import at start-up)."""

    def __init__(self, option_strings: Sequence[str], dest: str = argparse.SUPPRESS, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, *_: Any) -> None:
        raise _VersionShown(f"cda {_version()}\n")


class _VersionShown(Exception):
    """Internal: ``--version`` was given; carries the line to print."""


def _parser() -> argparse.ArgumentParser:
    p = _Parser(prog="cda", description="Constraint-Driven Abduction")
    p.add_argument("--version", action=_VersionAction, help="print the version and exit")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    s = sub.add_parser("solve", help="rank explanations, check claims, propose next tests")
    s.add_argument("files", nargs="+", metavar="FILE", help=_FILES_HELP)
    s.add_argument("--backend", choices=["auto", "z3", "clingo"], default="auto", help=_BACKEND_HELP)
    s.add_argument("--top", type=_count("--top"), default=None, help="how many hypotheses to list")
    s.add_argument("--seed", type=_seed, default=0, help="solver seed: same input and seed, same bytes")
    s.add_argument("--timeout", type=_seconds, default=None, help="wall-clock budget in seconds for each file (inf: no limit)")
    s.add_argument("--ken", type=Path, action="append", default=[], help="Ken graph file (.json/.csv/.graphml)")
    s.add_argument("--json", action="store_true", help=_JSON_HELP)
    s.add_argument("--format", choices=["text", "json", "jsonl", "junit"], default=None, help=_FORMAT_HELP)
    s.add_argument(
        "--cross-check",
        action="store_true",
        help="solve on z3 and clingo and compare; any disagreement makes the verdicts inconclusive",
    )
    c = sub.add_parser("check", help="parse and type-check only")
    c.add_argument("files", nargs="+", metavar="FILE", help=_FILES_HELP)
    c.add_argument("--ken", type=Path, action="append", default=[], help="Ken graph file (.json/.csv/.graphml)")
    c.add_argument("--json", action="store_true", help=_JSON_HELP)
    c.add_argument("--format", choices=["text", "json", "jsonl", "junit"], default=None, help=_FORMAT_HELP)
    fm = sub.add_parser("fmt", help="rewrite .cda files in the canonical layout, comments kept (--check: only report)")
    fm.add_argument("files", nargs="+", metavar="FILE", help="DSL files (.cda); - formats standard input to stdout")
    fm.add_argument("--check", action="store_true", help="change nothing; exit 1 naming the files not formatted")
    pr = sub.add_parser("prove", help="prove or refute first-order claims (a .fol file; see docs/fol.md)")
    pr.add_argument("file", type=Path, help="a .fol file, or a .cda file with fol { … } blocks")
    pr.add_argument("--backend", choices=["auto", "z3", "clingo"], default="auto", help=_BACKEND_HELP)
    pr.add_argument("--timeout", type=_seconds, default=10.0,
                    help="wall-clock budget in seconds for each claim, not for the whole file (inf: no limit)")
    pr.add_argument("--json", action="store_true", help="print one JSON object")
    pr.add_argument("--cross-check", action="store_true", help="re-solve on the other backend and compare")
    pr.add_argument(
        "--unique-names", action="store_true", help="read distinct constants as distinct objects (see docs/fol.md)"
    )
    d = sub.add_parser("diagnose", help="minimal diagnoses of a circuit (.bench + observations, or mbd-mobs .wcnf.gz)")
    d.add_argument("file", type=Path, help="a .bench netlist (with --observations) or an mbd-mobs .wcnf.gz instance")
    d.add_argument("--observations", type=Path, default=None, help=_OBSERVATIONS_HELP)
    d.add_argument("--backend", choices=["auto", "z3", "clingo"], default="auto", help=_BACKEND_HELP)
    d.add_argument("--mode", nargs="+", default=["all"], metavar="MODE", help="all | min_cardinality | top K")
    d.add_argument("--timeout", type=_seconds, default=None, help=_TIMEOUT_HELP)
    d.add_argument("--json", action="store_true", help="print one JSON object")
    pb = sub.add_parser(
        "probe", help="next-best net to measure (expected information gain), or a simulated probing loop"
    )
    pb.add_argument("file", type=Path, help="a .bench netlist (with --observations) or an mbd-mobs .wcnf.gz instance")
    pb.add_argument("--observations", type=Path, default=None, help=_OBSERVATIONS_HELP)
    pb.add_argument("--backend", choices=["auto", "z3", "clingo"], default="auto", help=_BACKEND_HELP)
    pb.add_argument("--top", type=_count("--top"), default=5, help="how many candidate nets to list")
    pb.add_argument("--prior", type=_probability, default=0.01, help="per-gate failure probability")
    pb.add_argument("--max-size", type=_count("--max-size"), default=None, help="only diagnoses of at most this many gates")
    pb.add_argument(
        "--inject",
        action="append",
        default=None,
        metavar="G1,G2",
        help="simulate: these gates are broken; probe until one diagnosis remains",
    )
    pb.add_argument("--strategy", choices=["ig", "random"], default="ig", help="probe choice in the simulated loop")
    pb.add_argument("--vectors", type=_vectors, default=1, help="input vectors to observe in the simulated loop")
    pb.add_argument("--seed", type=_seed, default=0, help="random seed of the simulated loop and of the solvers")
    pb.add_argument("--timeout", type=_seconds, default=None, help=_TIMEOUT_HELP)
    pb.add_argument("--json", action="store_true", help="print one JSON object")
    pb.add_argument("--interactive", action="store_true", help="ask for each measured value, diagnose again, repeat")
    r = sub.add_parser("run", help="run a CDA Action from inputs.json: events, artifacts, receipts")
    r.add_argument("inputs", type=Path, help="the Action's inputs (CDAInputs JSON)")
    r.add_argument("--out", type=Path, default=None, help="folder for artifacts and receipts.sqlite")
    r.add_argument("--json", action="store_true", help="print every event as one JSON line")
    sv = sub.add_parser("serve", help="the CDA service: WebSocket ToolBus, SSE action streams, a page (docs/service.md)")
    sv.add_argument("db", type=Path, help="the store: DIR/receipts.sqlite (as cda run --out DIR writes; created if missing)")
    sv.add_argument("--host", default="127.0.0.1", help="address to bind (not loopback: needs --auth)")
    sv.add_argument("--port", type=_port, default=8765, help="TCP port, 0 to 65535 (0: any free port)")
    sv.add_argument("--auth", type=Path, default=None, help="JSON file of hashed bearer tokens and their profiles")
    sv.add_argument("--cors-origin", action="append", default=[], help="an origin allowed to read the streams")
    sv.add_argument("--retention-hours", type=_retention, default=24, help="keep finished streams this long (>= 24)")
    sv.add_argument("--workers", type=_workers, default=2, help="actions run at once (threads, 1 to 64)")
    sv.add_argument("--partner-wall", type=_partner_wall, default=300.0, metavar="SECONDS",
                    help="a partner's action runs at most this long, up to a day (its budgets.wall is lowered to it; default 300)")
    sv.add_argument("--partner-slots", type=_partner_slots, default=None, metavar="N",
                    help="with --auth: actions of one partner running at once (default: half the workers, at least 1)")
    sv.add_argument("--processes", type=_processes, default=0,
                    help="run the actions in N runner processes, --workers at a time in each (0: in the server's threads)")
    sv.add_argument("--egress-cap", choices=["local", "partner", "external"], default="local",
                    help="egress allowed without an approval")
    sv.add_argument("--debug", action="store_true", help="enable the internal debug.* ToolBus namespace")
    sv.add_argument("--fsync", action="store_true",
                    help="fsync every commit of the store (slower; survives a power loss, not only a crash)")
    sv.add_argument("--providers", type=Path, default=None,
                    help="folder of local sub-action providers: DIR/<research|sandbox|default>/<source>.txt")
    sv.add_argument("--otel-endpoint", default=None, metavar="URL",
                    help="export each run's §10 metrics to this OTLP/HTTP collector (needs cda[otel]; default off)")
    mc = sub.add_parser("mcp", help="serve CDA's tools to agents over the Model Context Protocol (docs/agents.md)")
    mc.add_argument("--http", action="store_true", help="streamable HTTP instead of stdio")
    mc.add_argument("--host", default="127.0.0.1", help="address to listen on (with --http)")
    mc.add_argument("--port", type=_port, default=8000, help="TCP port (with --http)")
    sc = sub.add_parser("schema", help="write the JSON schemas of the contracts (--check: compare)")
    sc.add_argument("folder", type=Path, help="folder of the .schema.json files")
    sc.add_argument("--check", action="store_true", help="exit 1 listing stale/missing/extra files")
    rc = sub.add_parser("receipts", help="the receipt log")
    rcsub = rc.add_subparsers(dest="receipts_command", required=True)
    rv = rcsub.add_parser("verify", help="check a receipt log: signed head, chain, schema, events, traces "
                          "(exit 0 intact, 1 tampered, 2 not a CDA log)")
    rv.add_argument("db", type=Path, help="the receipt log (receipts.sqlite)")
    rv.add_argument("--head", default=None, help="the head hash an action recorded (detects truncation)")
    rv.add_argument("--public-key", default=None, help="the signer's Ed25519 public key (64 hex digits); "
                    "default: the local key in $CDA_KEY_DIR or ~/.config/cda")
    rv.add_argument("--unsigned", action="store_true", help="accept a log with no signed head beside it")
    rv.add_argument("--json", action="store_true", help="print one JSON object")
    mt = sub.add_parser("metrics", help="spec §10 metrics across the runs of a store, SLOs as a gate "
                        "(exit 0 met, 1 broken, 2 usage, 3 no run; docs/operations.md)")
    mt.add_argument("store", type=Path, help="the store: receipts.sqlite of cda run --out / cda serve (or its folder)")
    mt.add_argument("--since", default=None, help="only runs ended since: ISO-8601 (UTC if no offset) or an age (90m, 24h, 7d)")
    mt.add_argument("--json", action="store_true", help="print one JSON object")
    from cda.cli.policy import add_policy_parser

    add_policy_parser(sub, _seconds)
    from cda.cli.task import add_task_parser  # argparse only

    add_task_parser(sub, _count)

    jb = sub.add_parser("jobs", help="batch jobs from a manifest (docs/jobs.md)")
    jbsub = jb.add_subparsers(dest="jobs_command", required=True)
    jr = jbsub.add_parser("run", help="run a MANIFEST.toml on a local process pool or Dask; resumes where it stopped")
    jr.add_argument("manifest", type=Path, help="the manifest (docs/jobs.md)")
    jr.add_argument("--out", type=Path, default=None, help="folder for results.sqlite and results.jsonl "
                    "(default: MANIFEST.results beside the manifest)")
    jr.add_argument("--workers", type=_job_workers, default=None, help="jobs at once (default: one per core)")
    jr.add_argument("--dask", default=None, metavar="SCHEDULER",
                    help="run on Dask: a scheduler address, or 'local' for a LocalCluster CDA starts and stops")
    jr.add_argument("--retry-failed", action="store_true", help="run again the jobs recorded as failed")

    from cda.cli.investigate import add_investigate_parser  # argparse and json only

    add_investigate_parser(sub, _count)
    from cda.cli.guard import add_guard_parser  # argparse only

    add_guard_parser(sub, _seed, _count)
    cd = sub.add_parser("conduct", help="the conductor: a request -> obligations -> tools -> verified reply (docs/conductor.md)")
    cd.add_argument("utterance", help="the request, e.g. 'compute (1 + 2) * 0.1; solve problem.cda'")
    cd.add_argument("--db", type=Path, required=True, help="the IR database (SQLite, created if missing)")
    cd.add_argument("--registry", type=Path, default=None, help="tools.toml (default: the shipped registry)")
    cd.add_argument("--ken", type=Path, action="append", default=[], help="Ken graph file for ken.lookup")
    cd.add_argument("--translator", choices=["rules", "openai"], default="rules",
                    help="Translator-In: the rule grammar (default) or an OpenAI-compatible model")
    cd.add_argument("--llm-base-url", default=None, help="with --translator openai: the provider's base URL")
    cd.add_argument("--llm-model", default=None, help="with --translator openai: the model name")
    cd.add_argument("--llm-timeout", type=_option("--llm-timeout", False, lambda n, v: limits.seconds(n, v, unlimited=False, positive=True, high=3600)), default=30.0,
                    help="with --translator openai: seconds to wait for the model")
    cd.add_argument("--seed", type=_seed, default=0, help="seed of the deterministic tools")
    cd.add_argument("--json", action="store_true", help="print the trace as one JSON object")
    b = sub.add_parser("bench", help="run a benchmark data set")
    bsub = b.add_subparsers(dest="suite", required=True)
    folio = bsub.add_parser("folio", help="FOLIO examples with gold first-order logic (.jsonl)")
    folio.add_argument("file", type=Path, help="FOLIO examples, one JSON object a line")
    folio.add_argument("--json", action="store_true", help="print one JSON object")
    folio.add_argument("--timeout", type=_seconds, default=10.0, help="per example, seconds (inf: no limit)")
    return p


def _fmt(x: float) -> str:
    return f"{x:.4f}".rstrip("0").rstrip(".") if x else "0"


def _fmt_exact(x: Fraction) -> str:
    """``x`` to four decimals like :func:`_fmt`, but from the exact rational: a cost of 10**30
    prints all its digits right, where the float would print 1000000000000000019884624838656.

    >>> _fmt_exact(Fraction(10**30)), _fmt_exact(Fraction(5, 2)), _fmt_exact(Fraction(1, 3)), _fmt_exact(Fraction(0))
    ('1000000000000000000000000000000', '2.5', '0.3333', '0')
    """
    scaled = round(x * 10_000)  # half to even, as float formatting rounds a tie
    whole, frac = divmod(abs(scaled), 10_000)
    text = f"{'-' if scaled < 0 else ''}{whole}.{frac:04d}".rstrip("0").rstrip(".")
    return text if scaled else "0"


def render_table(result: SolveResult) -> str:
    """The human-readable report (golden-file tested)."""
    out = [f"status: {result.status}   backend: {result.backend}   seed: {result.seed}"]
    if result.partial:
        stopped = any(n.startswith("interrupted") for n in result.notes)  # a Ctrl-C (cda.cli.interrupts)
        out.append(f"PARTIAL: {'interrupted' if stopped else 'a budget ran out'}; what follows is what was found")
    if result.conflict is not None:
        out.append("")
        out.append("conflict: the hard clauses and observations cannot all hold")
        for core in result.conflict.cores:
            out.append(f"  core:       {', '.join(core)}")
        for fix in result.conflict.corrections:
            out.append(f"  drop one of: {', '.join(fix)}" if len(fix) > 1 else f"  drop:       {fix[0]}")
        if not result.conflict.complete:
            out.append("  (stopped early; more may exist)")
    if result.hypotheses:
        out.append("")
        total = result.hypotheses_enumerated
        more = "" if result.enumeration_complete else ", enumeration capped"
        out.append(f"hypotheses (top {len(result.hypotheses)} of {total}{more}):")
        width = max(len("assumed"), *(len(", ".join(h.assumed) or "(none)") for h in result.hypotheses))
        costs = [_fmt_exact(h.exact_cost()) for h in result.hypotheses]
        cost_width = max(7, *(len(c) for c in costs))
        out.append(f"  {'id':<4} {'assumed':<{width}}  {'cost':>{cost_width}}  {'posterior':>9}")
        for h, cost in zip(result.hypotheses, costs):
            assumed = ", ".join(h.assumed) or "(none)"
            out.append(f"  {h.id:<4} {assumed:<{width}}  {cost:>{cost_width}}  {_fmt(h.posterior):>9}")
    if result.minimal_explanations is not None:  # goal minimal_explanations: its answer
        out.append("")
        found = result.minimal_explanations
        how = "complete" if result.minimal_complete else "the search stopped early; more may exist"
        if found or not result.minimal_complete:
            out.append(f"minimal explanations ({len(found)}, {how}):")
            out.extend(f"  {', '.join(e) or '(nothing assumed)'}" for e in found)
        else:
            out.append("minimal explanations: none (no set of abducibles is consistent with every observation)")
    if result.verdicts:
        out.append("")
        out.append("verdicts:")
        for v in result.verdicts:
            line = f"  {v.goal} {v.claim}: {v.status.upper()} (confidence {_fmt(v.confidence)})"
            out.append(line)
            if v.justification:
                out.append(f"    because of: {', '.join(v.justification)}")
            for w in v.witnesses:
                out.append(
                    f"    {'holds' if w.holds else 'fails'} under: {', '.join(w.assumed) or '(nothing assumed)'}"
                )
            if v.reason and not v.justification and not v.witnesses:
                out.append(f"    {v.reason}")
    if result.next_tests:
        out.append("")
        out.append("next tests (expected information gain, bits):")
        for t in result.next_tests:
            out.append(
                f"  {t.observable:<24} {_fmt(t.expected_information_gain):>7}   P(true)={_fmt(t.probability_true)}"
            )
    if result.expectations:
        out.append("")
        out.append("expectations:")
        for e in result.expectations:
            out.append(f"  expect {e.text}: {'PASSED' if e.passed else 'FAILED'}")
            out.append(f"    {e.reason}")
    for note in result.notes:
        out.append(f"note: {note}")
    return "\n".join(out) + "\n"


def _asker(out: TextIO) -> Callable[[str], str | None]:
    """A prompt on ``out`` and one line from standard input (``None`` at its end)."""

    def ask(prompt: str) -> str | None:
        out.write(prompt)
        out.flush()
        line = sys.stdin.readline()
        return line if line else None

    return ask


def main(
    argv: Sequence[str] | None = None,
    stdout: TextIO | None = None,
    stderr: TextIO | None = None,
    stdin: TextIO | None = None,
) -> int:
    out, err, inp = stdout or sys.stdout, stderr or sys.stderr, stdin or sys.stdin
    try:
        return _main(argv, out, err, inp)
    except KeyboardInterrupt:  # before a command's own handling is in place (argparse), or a server's start-up
        err.write("\ncda: interrupted\n")
        return EXIT_INTERRUPTED


def _main(argv: Sequence[str] | None, out: TextIO, err: TextIO, inp: TextIO) -> int:
    try:
        args = _parser().parse_args(argv)
    except _UsageError as exc:
        err.write(str(exc))
        return EXIT_BAD_INPUT
    except _VersionShown as shown:
        out.write(str(shown))
        return EXIT_OK
    if args.command in ("serve", "mcp", "jobs"):  # their own Ctrl-C handling: a server stops its runs
        return _command(args, out, err, inp)  # (docs/service.md, "Stopping"), a batch kills its job processes
    from cda.cli.interrupts import interruptible

    with interruptible() as stop:  # Ctrl-C / SIGTERM: the solver stops, the partial is printed, exit 130 / 143
        code = _command(args, out, err, inp)
    if stop.signum is None:
        return code
    if code != stop.code:  # a command that handled it itself (jobs) has said so
        err.write(stop.note())
    return stop.code


def _command(args: argparse.Namespace, out: TextIO, err: TextIO, inp: TextIO) -> int:
    """Run the parsed command; its exit status."""
    if args.command == "guard":
        from cda.cli.guard import main_guard

        return main_guard(args, out, err, inp)
    if args.command == "mcp":
        from cda.mcp.server import main_mcp

        return main_mcp("streamable-http" if args.http else "stdio", args.host, args.port, err)
    if args.command == "fmt":
        from cda.cli.fmt import main_fmt

        return main_fmt(args.files, args.check, out, err, inp)
    if args.command == "prove":
        from cda.cli.fol import main_prove

        return main_prove(
            args.file, args.json, out, err=err, timeout=args.timeout, backend=args.backend, cross_check=args.cross_check,
            unique_names=args.unique_names,
        )
    if args.command == "diagnose":
        from cda.cli.terminal import progress
        from cda.diagnosis.diagnose import main_diagnose

        with progress(err, f"diagnosing {args.file}"):
            return main_diagnose(args.file, args.observations, args.backend, args.mode, args.timeout, args.json, out, err)
    if args.command == "probe":
        from cda.cli.terminal import progress
        from cda.diagnosis.probe import main_probe

        if args.interactive:  # a progress line would overwrite the questions
            return main_probe(
                args.file, args.observations, args.backend, args.top, args.prior, args.max_size, args.inject,
                args.strategy, args.vectors, args.seed, args.timeout, args.json, out, err, interactive=_asker(out),
            )
        with progress(err, f"probing {args.file}"):
            return main_probe(
            args.file,
            args.observations,
            args.backend,
            args.top,
            args.prior,
            args.max_size,
            args.inject,
            args.strategy,
            args.vectors,
            args.seed,
            args.timeout,
            args.json,
            out,
            err,
            interactive=None,
        )
    if args.command == "run":
        from cda.cli.run import main_run

        return main_run(args.inputs, args.out, args.json, out, err)
    if args.command == "serve":
        from cda.service.serve import main_serve

        return main_serve(args.db, args.host, args.port, out, err, auth_file=args.auth, cors=args.cors_origin,
                          retention_h=args.retention_hours, workers=args.workers, processes=args.processes,
                          egress_cap=args.egress_cap, debug=args.debug, providers=args.providers, fsync=args.fsync,
                          otel_endpoint=args.otel_endpoint,
                          partner_wall=args.partner_wall,
                          partner_slots=args.partner_slots)
    if args.command == "schema":
        from cda.cli.schema import main_schema

        return main_schema(args.folder, args.check, out, err)
    if args.command == "receipts":
        from cda.cli.receipts import main_receipts_verify

        return main_receipts_verify(args.db, args.head, args.json, out, err, public_key=args.public_key,
                                    unsigned=args.unsigned)
    if args.command == "metrics":
        from cda.cli.metrics import main_metrics

        return main_metrics(args.store, args.since, args.json, out, err)
    if args.command == "policy":
        from cda.cli.policy import main_policy

        return main_policy(args, out, err)
    if args.command == "task":
        from cda.cli.task import main_task

        return main_task(args, out, err)
    if args.command == "jobs":
        from cda.cli.jobs import main_jobs_run

        return main_jobs_run(args.manifest, args.out, args.workers, args.dask, args.retry_failed, out, err)
    if args.command == "investigate":
        from cda.cli.investigate import main_investigate

        return main_investigate(args, out, err)
    if args.command == "conduct":
        from cda.cli.conduct import main_conduct

        return main_conduct(
            args.utterance, args.db, args.registry, args.ken, args.json, out, err, translator=args.translator,
            llm_base_url=args.llm_base_url, llm_model=args.llm_model, llm_timeout=args.llm_timeout, seed=args.seed,
        )
    if args.command == "bench":
        from cda.cli.terminal import progress
        from cda.fol.folio import main_bench

        with progress(err, f"running {args.file}"):
            return main_bench(args.file, args.json, out, timeout=args.timeout, err=err)
    from cda.cli.ci import main_check_files, main_solve_files  # here, not at the top: `cda --help` starts fast

    fmt = args.format or ("json" if args.json else "text")
    path = Path("-")
    try:
        ken = None
        if args.ken:
            from cda.ken.graph import KenGraph
            from cda.ken.loaders import load_ken

            ken = KenGraph()
            for path in args.ken:
                ken = ken.merged(load_ken(path))
    except CDAError as exc:
        if fmt == "text":
            err.write(exc.render() + "\n")
        else:
            from cda.cli.ci_report import error_object

            out.write(json.dumps(error_object(exc, str(path)), ensure_ascii=False) + "\n")
        return EXIT_BAD_INPUT
    if args.command == "check":
        return main_check_files(args.files, fmt, ken, out, err, inp)
    options = {"backend": args.backend, "top": args.top, "seed": args.seed, "timeout": args.timeout}
    return main_solve_files(args.files, fmt, options, args.cross_check, ken, out, err, inp)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
