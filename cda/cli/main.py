"""The ``cda`` command: ``cda solve FILE...``, ``cda check FILE...``, ``cda fmt FILE...``, ``cda prove FILE.fol``,
``cda diagnose FILE``, ``cda probe FILE``, ``cda run INPUTS.json``, ``cda serve DB``, ``cda receipts verify DB``, ``cda schema DIR``,
``cda bench folio FILE.jsonl``, ``cda jobs run MANIFEST.toml``, ``cda conduct "utterance" --db IR``,
``cda guard ACTION``, ``cda investigate …``, ``cda reflect approve ACTION --store DB``.

The commands that are operations (:mod:`cda.cli.commands`) have their arguments generated from
the operation (:mod:`cda.cli.generate`) and run through the gate as the local user. Each
subcommand imports its module only when it runs (tests/test_startup_imports.py holds this):
``cda --help`` loads neither a solver nor pydantic, nor any operation.

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
import io
import json
import os
import re
import sys
from collections.abc import Callable, Sequence
from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, TextIO, cast

from cda.cli.commands import GROUPS, JOINED, OPERATION_COMMANDS, Command, presenter
from cda.contracts import limits
from cda.errors import OptionError
from cda.terminal_text import for_terminal

if TYPE_CHECKING:
    from cda.contracts.result import SolveResult

__all__ = ["main", "render_table"]

EXIT_OK, EXIT_GOAL_FAILED, EXIT_BAD_INPUT, EXIT_UNKNOWN, EXIT_INTERRUPTED = 0, 1, 2, 3, 130


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


def _cors_origin(text: str) -> str:
    """An argparse ``type`` for ``--cors-origin``: checked by the guard's own reading of an origin
    (:func:`cda.adapters.http_guard.cors_origin`), so a typo is a usage error, not an origin that
    silently matches nothing."""
    from cda.adapters.http_guard import cors_origin

    try:
        cors_origin(text)
    except OptionError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def _count(name: str) -> Callable[[str], Any]:
    return _option(name, True, limits.count)


_seed = _option("--seed", True, limits.seed)
_port = _option("--port", True, limits.port)
_seconds = _option("--timeout", False, limits.seconds)
_vectors = _option("--vectors", True, limits.vectors)
_samples = _option("--samples", True, limits.samples)
_reply_bytes = _option("--max-reply-bytes", True, limits.reply_bytes)
_workers = _option("--workers", True, lambda name, v: limits.whole(name, v, low=1, high=64))
_processes = _option("--processes", True, lambda name, v: limits.whole(name, v, low=0, high=64))
_retention = _option("--retention-hours", True, lambda name, v: limits.whole(name, v, low=24, high=24 * 365,
                                                                               why="spec §7.2: at least 24 h"))
_partner_wall = _option("--partner-wall", False, lambda name, v: limits.seconds(name, v, unlimited=False, positive=True,
                                                                              high=86_400))  # a cap: never none
_call_wall = _option("--call-wall", False, lambda name, v: limits.seconds(name, v, unlimited=False, positive=True,
                                                                        high=86_400))  # a cap: never none
_partner_slots = _option("--partner-slots", True, lambda name, v: limits.whole(name, v, low=1, high=64))
_job_workers = _option("--workers", True, lambda name, value: limits.whole(name, value, low=1, high=1024))


class _UsageError(Exception):
    """Internal: argparse refused the command line; carries the usage and the message."""


class _Parser(argparse.ArgumentParser):
    """argparse that hands its refusal to :func:`main` (printed on main's ``stderr``, exit 2)
    instead of writing to ``sys.stderr`` and exiting itself. Its subcommands are built only where
    the command line goes (:class:`_Commands`)."""

    #: the command words still to come below this parser: only the first one's parser is built
    #: (``()``: none, each command named only); ``None``: every one (the whole parser)
    wanted: tuple[str, ...] | None = None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.register("action", "parsers", _Commands)

    def add_subparsers(self, **kwargs: Any) -> Any:
        commands = cast(_Commands, super().add_subparsers(**kwargs))
        commands.wanted = self.wanted
        return commands

    def error(self, message: str) -> NoReturn:
        raise _UsageError(f"{self.format_usage()}{self.prog}: error: {message}\n")


class _Commands(argparse._SubParsersAction):  # type: ignore[type-arg]
    """Subcommands of which only the one the command line names is built; the others are named
    (their help line for ``--help``, their name for an unknown command's error) by an
    :class:`_Unbuilt`. A parser costs about 0.1 ms and each argument more: building every
    command's took a fifth of ``cda prove``'s start-up beyond its floor (docs/architecture.md,
    "Start-up")."""

    wanted: tuple[str, ...] | None = None

    def add_parser(self, name: str, **kwargs: Any) -> Any:
        wanted = self.wanted
        if wanted is None or wanted[:1] == (name,):
            parser = super().add_parser(name, **kwargs)
            parser.wanted = (wanted[1:] or None) if wanted is not None else None  # words used up: all below
            return parser
        if "help" in kwargs:
            self._choices_actions.append(self._ChoicesPseudoAction(name, (), kwargs["help"]))
        unbuilt = self._name_parser_map[name] = _Unbuilt()
        return unbuilt


class _Unbuilt:
    """A command's parser not built: whatever its builder adds to it is dropped. Parsing that
    reaches it (the command words were not what :func:`_chosen` read) raises :class:`_Rebuild`,
    and the command line is parsed again by the whole parser."""

    def __getattr__(self, name: str) -> Callable[..., _Unbuilt]:
        return _unbuilt

    def parse_known_args(self, *args: Any, **kwargs: Any) -> NoReturn:
        raise _Rebuild()


def _unbuilt(*args: Any, **kwargs: Any) -> _Unbuilt:
    return _Unbuilt()


class _Rebuild(Exception):
    """Internal: parsing reached a command that was not built; parse with the whole parser."""


_BACKEND_HELP = "solver: auto (chosen per problem), z3 or clingo"
_JSON_HELP = "print one JSON object (a mistake in the input too, on stdout)"
_FORMAT_HELP = "report: text (default), json (one object), jsonl (one line per file), junit (JUnit XML)"


#: the solvers (and the reader) whose versions decide an answer, as ``--version`` names them
_SOLVERS = (("z3", "z3-solver"), ("clingo", "clingo"), ("clingo-dl", "clingo-dl"), ("lark", "lark"))


def _version() -> str:
    """The installed distribution's version (``0+unknown`` when run from a bare checkout), then the
    solvers' and Python's, read from their installed metadata (no solver is imported):
    ``0.1.0 (z3 4.13.0, clingo 5.7.1, clingo-dl 1.5.0, lark 1.2.2; Python 3.11.7)``."""
    from importlib.metadata import PackageNotFoundError, version

    def of(dist: str) -> str:
        try:
            return version(dist)
        except PackageNotFoundError:
            return "not installed"

    mine = of("cda").replace("not installed", "0+unknown")
    solvers = ", ".join(f"{name} {of(dist)}" for name, dist in _SOLVERS)
    return f"{mine} ({solvers}; Python {sys.version.split()[0]})"


class _VersionAction(argparse.Action):
    """``--version``: the version is looked up only when asked (no import at start-up)."""

    def __init__(self, option_strings: Sequence[str], dest: str = argparse.SUPPRESS, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, *_: Any) -> None:
        raise _VersionShown(f"cda {_version()}\n")


class _VersionShown(Exception):
    """Internal: ``--version`` was given; carries the line to print."""


def _chosen(argv: Sequence[str]) -> tuple[str, ...]:
    """The command words of ``argv`` (the first one or two words that are not options)."""
    words = [a for a in argv if not a.startswith("-")]
    return tuple(words[:2]) if words and words[0] in GROUPS else tuple(words[:1])


def _joined(argv: list[str]) -> list[str]:
    """``argv`` with a two-word command of :data:`~cda.cli.commands.JOINED` as one word
    (``guard resolve``): ``cda guard FILE`` keeps its positional action, ``cda guard resolve`` is a
    command of its own (a file named ``resolve`` is ``./resolve``)."""
    if len(argv) >= 2 and (argv[0], argv[1]) in JOINED:
        return [f"{argv[0]} {argv[1]}", *argv[2:]]
    return argv


def _add_operations(sub: Any, chosen: tuple[str, ...] | None) -> None:
    """The commands that are operations: the chosen one (or the chosen group's) generated from its
    operation, the others named only (nothing imported for them); ``None``: every one generated."""
    groups: dict[str, Any] = {}
    for words, command in OPERATION_COMMANDS.items():
        if (words[0], words[-1]) in JOINED:
            p = sub.add_parser(" ".join(words), help=command.help)
            if chosen is None or chosen == (" ".join(words),):
                _generated(p, command)
            continue
        if len(words) == 2:
            if words[0] not in groups:
                g = sub.add_parser(words[0], help=GROUPS[words[0]])
                groups[words[0]] = g.add_subparsers(dest=f"{words[0]}_command", required=True)
            parent = groups[words[0]]
        else:
            parent = sub
        p = parent.add_parser(words[-1], help=command.help)
        if chosen is None or chosen == words or (len(words) == 2 and chosen == words[:1]):
            _generated(p, command)


def _generated(p: argparse.ArgumentParser, command: Command) -> None:
    from cda.cli.generate import add_operation_arguments
    from cda.operations import get

    op = get(command.operation)
    extras = presenter(command.extras) if command.extras else None
    shape = dict(extras(p, op) or {}) if extras is not None else {}
    after = shape.pop("after", None)  # the command's own arguments that follow the generated positionals
    add_operation_arguments(p, op, **shape)
    if after is not None:
        after(p)
    p.set_defaults(operation=command.operation, presenter=command.presenter)


def _parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The ``cda`` parser for ``argv`` (only the chosen command's operation is imported); for
    ``None`` the whole parser, every command generated (what tests walk)."""
    chosen = None if argv is None else _chosen(argv)
    p = _Parser(prog="cda", description="Constraint-Driven Abduction")
    p.wanted = chosen
    p.add_argument("--version", action=_VersionAction, help="print the version and exit")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _add_operations(sub, chosen)
    fm = sub.add_parser("fmt", help="rewrite .cda files in the canonical layout, comments kept (--check: only report)")
    fm.add_argument("files", nargs="+", metavar="FILE", help="DSL files (.cda); - formats standard input to stdout")
    fm.add_argument("--check", action="store_true", help="change nothing; exit 1 naming the files not formatted")
    fm.add_argument("--json", action="store_true", help="print one JSON object: each file, formatted or not")
    sv = sub.add_parser("serve", help="the CDA service: WebSocket ToolBus, SSE action streams, a page (docs/service.md)")
    sv.add_argument("db", type=Path, help="the store: DIR/receipts.sqlite (as cda run --out DIR writes; created if missing)")
    sv.add_argument("--host", default="127.0.0.1", help="address to bind (not loopback: needs --auth)")
    sv.add_argument("--port", type=_port, default=8765, help="TCP port, 0 to 65535 (0: any free port)")
    sv.add_argument("--auth", type=Path, default=None, help="JSON file of hashed bearer tokens and their profiles")
    sv.add_argument("--cors-origin", action="append", default=[], type=_cors_origin,
                    help="an origin (scheme://host:port) whose pages may use this server")
    sv.add_argument("--allowed-host", action="append", default=[], metavar="NAME",
                    help="a further name clients reach this server by (Host header); loopback names and the "
                    "bound address are always accepted")
    sv.add_argument("--allow-code", action="store_true",
                    help="let the internal role run user code (an action's functions); partners never do")
    sv.add_argument("--guard-policies", type=Path, default=None, help="guard.evaluate's policy store (TOML)")
    sv.add_argument("--guard-ledger", type=Path, default=None, help="guard.evaluate's guardian file (SQLite)")
    sv.add_argument("--retention-hours", type=_retention, default=24, help="keep finished streams this long (>= 24)")
    sv.add_argument("--workers", type=_workers, default=2, help="actions run at once (threads, 1 to 64)")
    sv.add_argument("--partner-wall", type=_partner_wall, default=300.0, metavar="SECONDS",
                    help="a partner's action runs at most this long, up to a day (its budgets.wall is lowered to it; default 300)")
    sv.add_argument("--call-wall", type=_call_wall, default=300.0, metavar="SECONDS",
                    help="a ToolBus investigate/guard/conduct call runs at most this long, up to a day (default 300)")
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
    sv.add_argument("--legacy-aliases", action="store_true",
                    help="spec §13, for one CalVer window (default off): stream wu_* events beside action_* and "
                    "accept inputs.work_unit_id (mapped to the action's id, kept under legacy.aliases[] in receipts)")
    mc = sub.add_parser("mcp", help="serve CDA's tools to agents over the Model Context Protocol (docs/agents.md)")
    mc.add_argument("--http", action="store_true", help="streamable HTTP instead of stdio")
    mc.add_argument("--host", default="127.0.0.1", help="address to listen on (with --http)")
    mc.add_argument("--port", type=_port, default=8000, help="TCP port (with --http)")
    mc.add_argument("--allow-root", action="append", default=[], type=Path, metavar="DIR",
                    help="a folder whose files the tools may read (default: the client's MCP roots, else the "
                    "working directory); repeat for more")
    mc.add_argument("--allow-code", action="store_true", help="let run_action run an action's functions (user code)")
    mc.add_argument("--egress-cap", choices=["local", "partner", "external"], default="local",
                    help="network egress the tools may use (an LLM provider); above it a call is refused")
    mc.add_argument("--auth", type=Path, default=None,
                    help="with --http: JSON file of hashed bearer tokens (as cda serve's); required off loopback")
    mc.add_argument("--allowed-host", action="append", default=[], metavar="NAME",
                    help="with --http: a further name clients reach it by (Host header)")
    mc.add_argument("--cors-origin", action="append", default=[], type=_cors_origin,
                    help="with --http: an origin (scheme://host:port) whose pages may call it")
    mc.add_argument("--out", type=Path, default=None,
                    help="folder for run_action's artifacts and receipts (default: a temporary one for this session)")
    mc.add_argument("--guard-policies", type=Path, default=None, help="guard_evaluate's policy store (TOML)")
    mc.add_argument("--guard-ledger", type=Path, default=None, help="guard_evaluate's guardian file (SQLite)")
    from cda.cli.guard import add_proxy_parser

    add_proxy_parser(sub, _seed, _count, _port, _cors_origin, _reply_bytes)
    sc = sub.add_parser("schema", help="write the JSON schemas of the contracts (--check: compare)")
    sc.add_argument("folder", type=Path, help="folder of the .schema.json files")
    sc.add_argument("--check", action="store_true", help="exit 1 listing stale/missing/extra files")
    sc.add_argument("--json", action="store_true", help="print one JSON object")
    rc = sub.add_parser("receipts", help="the receipt log")
    rcsub = rc.add_subparsers(dest="receipts_command", required=True)
    rv = rcsub.add_parser("verify", help="check a receipt log: signed head, chain, schema, events, traces "
                          "(exit 0 intact, 1 tampered, 2 not a CDA log, 3 unverified: no trusted key)")
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
    from cda.cli.task import add_task_parser  # argparse only

    add_task_parser(sub, _count, samples=_samples)

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
    jr.add_argument("--json", action="store_true", help="print the summary as one JSON object")
    cp = sub.add_parser("completion", help="print a shell completion script (bash, zsh or fish) for cda")
    cp.add_argument("shell", choices=["bash", "zsh", "fish"], help="the shell the script is for")

    b = sub.add_parser("bench", help="run a benchmark data set")
    bsub = b.add_subparsers(dest="suite", required=True)
    folio = bsub.add_parser("folio", help="FOLIO examples with gold first-order logic (.jsonl)")
    folio.add_argument("file", type=Path, help="FOLIO examples, one JSON object a line")
    folio.add_argument("--json", action="store_true", help="print one JSON object")
    folio.add_argument("--timeout", type=_seconds, default=10.0, help="per example, seconds (inf: no limit)")
    return p


def _confidence_words(confidence: float | None) -> str:
    """``confidence 0.75``, or for an *unknown* verdict that none was computed (docs/dsl.md, "Verdicts")."""
    return "not decided: no confidence" if confidence is None else f"confidence {_fmt(confidence)}"


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
            line = f"  {v.goal} {v.claim}: {v.status.upper()} ({_confidence_words(v.confidence)})"
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


EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE: what a tool killed by the signal exits with


def main(
    argv: Sequence[str] | None = None,
    stdout: TextIO | None = None,
    stderr: TextIO | None = None,
    stdin: TextIO | None = None,
) -> int:
    """The ``cda`` command. ``-`` names standard input wherever a command reads a text file
    (:func:`cda.files.standard_input`), and a reader that closes the pipe early (``cda … | head``)
    ends the command quietly: exit 141, as a tool the signal would have killed, no traceback."""
    from cda.cli.launch import command_began

    command_began(process=argv is None)  # a --timeout counts from here, or from the process's launch
    words = list(sys.argv[1:] if argv is None else argv)
    try:
        return _answered(words, stdout, stderr, stdin)
    finally:
        if argv is None:  # the process's own command line (the console script, python -m cda): it exits next
            from cda.gcpause import before_exit

            before_exit()


def _answered(words: list[str], stdout: TextIO | None, stderr: TextIO | None, stdin: TextIO | None) -> int:
    from cda.files import standard_input

    try:
        with standard_input(stdin or sys.stdin):
            if "--json" not in words:
                return _main(words, stdout, stderr, stdin)
            # with --json a mistake is one JSON object on stdout, whichever command made it
            answer, said = _Written(stdout or sys.stdout), io.StringIO()
            code = _main(words, cast(TextIO, answer), cast(TextIO, _Tee(stderr or sys.stderr, said)), stdin)
            if code != 0 and not answer.written and said.getvalue().strip():  # bad input, or a refusal
                answer.write(json.dumps(_mistake(said.getvalue()), ensure_ascii=False) + "\n")
            return code
    except BrokenPipeError:
        if stdout is None:  # the process's own stdout: nothing may be flushed to it at exit either
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_BROKEN_PIPE


class _Written:
    """A stream that remembers whether anything was written to it."""

    def __init__(self, stream: TextIO) -> None:
        self.stream, self.written = stream, False

    def write(self, text: str) -> int:
        self.written = self.written or bool(text)
        return self.stream.write(text)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.stream, name)


class _Tee(_Written):
    """A stream whose text also goes to a second one."""

    def __init__(self, stream: TextIO, copy: TextIO) -> None:
        super().__init__(stream)
        self.copy = copy

    def write(self, text: str) -> int:
        self.copy.write(text)
        return super().write(text)


_LOCATED = re.compile(r"(?P<file>[^:\n]+):(?P<line>\d+)(?::(?P<column>\d+))?: (?P<kind>[a-z ]*error): (?P<message>.*)")
_FILED = re.compile(r"(?P<file>[^:\n]+): (?P<kind>[a-z ]*error): (?P<message>.*)")


def _mistake(said: str) -> dict[str, Any]:
    """The JSON object of a mistake a command printed on stderr (as ``cda solve --json`` prints
    one): ``file``, ``line``, ``column`` when it names a place, ``kind``, ``message``.

    >>> _mistake("x.cda:2:12: syntax error: unexpected end of input\\n    hard: a and\\n")["column"]
    12
    >>> _mistake("cda: error: runs/x.sqlite: no such file\\n")["message"]
    'runs/x.sqlite: no such file'
    """
    lines = [line for line in said.splitlines() if line.strip()]
    first = lines[0] if lines else "the command refused its input"
    found = None if first.startswith("cda") else _LOCATED.match(first)  # `cda: error: …` names no place first
    if found is not None:
        return {"file": found["file"], "line": int(found["line"]),
                "column": int(found["column"]) if found["column"] else None, "kind": found["kind"],
                "message": found["message"], "expected": []}
    filed = None if first.startswith("cda") else _FILED.match(first)  # a file's mistake with no line (JSON data)
    if filed is not None:
        return {"file": filed["file"], "line": None, "column": None, "kind": filed["kind"],
                "message": filed["message"], "expected": []}
    if first.startswith("cda: refused: "):  # the operation refused the call (exit 1), not bad input
        return {"file": None, "line": None, "column": None, "kind": "refused",
                "message": first[len("cda: refused: "):], "expected": []}
    usage = [line for line in lines if ": error: " in line]
    message = (usage[-1] if usage else first).split(": error: ", 1)[-1]
    return {"file": None, "line": None, "column": None, "kind": "error", "message": message, "expected": []}


def _main(
    argv: Sequence[str] | None = None,
    stdout: TextIO | None = None,
    stderr: TextIO | None = None,
    stdin: TextIO | None = None,
) -> int:
    out, err, inp = stdout or sys.stdout, stderr or sys.stderr, stdin or sys.stdin
    try:
        return _run(argv, out, err, inp)
    except KeyboardInterrupt:  # before a command's own handling is in place (argparse), or a server's start-up
        err.write("\ncda: interrupted\n")
        return EXIT_INTERRUPTED


def _run(argv: Sequence[str] | None, out: TextIO, err: TextIO, inp: TextIO) -> int:
    from cda.gcpause import gc_paused

    try:
        argv = _joined(sys.argv[1:] if argv is None else list(argv))
        # building the parser imports the command's operation, pydantic and its models: tens of
        # thousands of objects that live as long as the process; the cyclic collector walking
        # them again and again was about a tenth of `cda diagnose`'s start-up (docs/benchmarks.md)
        with gc_paused():
            try:
                args = _parser(argv).parse_args(argv)
            except _Rebuild:  # the command words were not where _chosen looked: the whole parser
                args = _parser().parse_args(argv)
    except _UsageError as exc:
        err.write(for_terminal(str(exc)))  # argparse quotes what was typed
        return EXIT_BAD_INPUT
    except _VersionShown as shown:
        out.write(str(shown))
        return EXIT_OK
    if getattr(args, "json", False) and getattr(args, "format", None) not in (None, "json"):
        err.write(f"cda {args.command}: error: --json and --format {args.format} ask for two reports; give one\n")
        return EXIT_BAD_INPUT
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
    if getattr(args, "operation", None) is not None:
        from cda.operations import get

        return int(presenter(args.presenter)(get(args.operation), args, out, err, inp))
    if args.command == "completion":
        from cda.cli.completion import main_completion

        return main_completion(args.shell, _parser(), out)
    if args.command == "mcp":
        from cda.mcp.server import main_mcp

        return main_mcp(args, err)
    if args.command == "guard proxy":
        from cda.mcp.proxy import main_proxy

        return main_proxy(args, err)
    if args.command == "fmt":
        from cda.cli.fmt import main_fmt

        return main_fmt(args.files, args.check, out, err, inp, as_json=args.json)
    if args.command == "serve":
        from cda.service.serve import main_serve

        return main_serve(args.db, args.host, args.port, out, err, auth_file=args.auth, cors=args.cors_origin,
                          retention_h=args.retention_hours, workers=args.workers, processes=args.processes,
                          egress_cap=args.egress_cap, debug=args.debug, providers=args.providers, fsync=args.fsync,
                          otel_endpoint=args.otel_endpoint, allowed_hosts=args.allowed_host,
                          allow_code=args.allow_code, guard_policies=args.guard_policies,
                          guard_ledger=args.guard_ledger, partner_wall=args.partner_wall,
                          partner_slots=args.partner_slots, legacy_aliases=args.legacy_aliases,
                          call_wall=args.call_wall)
    if args.command == "schema":
        from cda.cli.schema import main_schema

        return main_schema(args.folder, args.check, out, err, as_json=args.json)
    if args.command == "receipts":
        from cda.cli.receipts import main_receipts_verify

        return main_receipts_verify(args.db, args.head, args.json, out, err, public_key=args.public_key,
                                    unsigned=args.unsigned)
    if args.command == "metrics":
        from cda.cli.metrics import main_metrics

        return main_metrics(args.store, args.since, args.json, out, err)
    if args.command == "task":
        from cda.cli.task import main_task

        return main_task(args, out, err)
    if args.command == "jobs":
        from cda.cli.jobs import main_jobs_run

        return main_jobs_run(args.manifest, args.out, args.workers, args.dask, args.retry_failed, out, err,
                             as_json=args.json)
    if args.command == "bench":
        from cda.cli.bench import main_bench
        from cda.cli.terminal import progress

        with progress(err, f"running {args.file}") as bar:
            return main_bench(args.file, args.json, bar.guard(out), timeout=args.timeout, err=bar.guard(err))
    raise AssertionError(f"no handler for {args.command!r}")  # pragma: no cover - every command has one


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
