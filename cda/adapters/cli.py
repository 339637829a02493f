"""The ``cda`` command: ``cda solve FILE``, ``cda check FILE``, ``cda prove FILE.fol``,
``cda diagnose FILE``, ``cda probe FILE``, ``cda run INPUTS.json``, ``cda serve DB``, ``cda receipts verify DB``, ``cda schema DIR``,
``cda conduct "utterance" --db IR``,
``cda bench folio FILE.jsonl``.

Each subcommand imports its module only when it runs (tests/test_startup_imports.py holds this):
``cda --help`` loads neither a solver nor pydantic.

Exit codes: 0 answered, 1 a prove/disprove goal failed, 2 bad input, 3 timeout/unknown.
Mistakes in the input print like a compiler (``file:line:col: error: …`` and a caret) and
never a traceback.
"""

from __future__ import annotations

import argparse
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

EXIT_OK, EXIT_GOAL_FAILED, EXIT_BAD_INPUT, EXIT_UNKNOWN = 0, 1, 2, 3


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


class _UsageError(Exception):
    """Internal: argparse refused the command line; carries the usage and the message."""


class _Parser(argparse.ArgumentParser):
    """argparse that hands its refusal to :func:`main` (printed on main's ``stderr``, exit 2)
    instead of writing to ``sys.stderr`` and exiting itself."""

    def error(self, message: str) -> NoReturn:
        raise _UsageError(f"{self.format_usage()}{self.prog}: error: {message}\n")


def _parser() -> argparse.ArgumentParser:
    p = _Parser(prog="cda", description="Constraint-Driven Abduction")
    sub = p.add_subparsers(dest="command", required=True)
    s = sub.add_parser("solve", help="rank explanations, check claims, propose next tests")
    s.add_argument("file", type=Path)
    s.add_argument("--backend", choices=["auto", "z3", "clingo"], default="auto")
    s.add_argument("--top", type=_count("--top"), default=None, help="how many hypotheses to list")
    s.add_argument("--seed", type=_seed, default=0)
    s.add_argument("--timeout", type=_seconds, default=None, help=_TIMEOUT_HELP)
    s.add_argument("--ken", type=Path, action="append", default=[], help="Ken graph file (.json/.csv/.graphml)")
    s.add_argument("--json", action="store_true", help="print one JSON object")
    s.add_argument(
        "--cross-check",
        action="store_true",
        help="solve on z3 and clingo and compare; any disagreement makes the verdicts inconclusive",
    )
    c = sub.add_parser("check", help="parse and type-check only")
    c.add_argument("file", type=Path)
    c.add_argument("--ken", type=Path, action="append", default=[])
    pr = sub.add_parser("prove", help="prove or refute first-order claims (a .fol file; see docs/fol.md)")
    pr.add_argument("file", type=Path)
    pr.add_argument("--backend", choices=["auto", "z3", "clingo"], default="auto")
    pr.add_argument("--timeout", type=_seconds, default=10.0,
                    help="wall-clock budget in seconds for each claim, not for the whole file (inf: no limit)")
    pr.add_argument("--json", action="store_true")
    pr.add_argument("--cross-check", action="store_true", help="re-solve on the other backend and compare")
    pr.add_argument(
        "--unique-names", action="store_true", help="read distinct constants as distinct objects (see docs/fol.md)"
    )
    d = sub.add_parser("diagnose", help="minimal diagnoses of a circuit (.bench + observations, or mbd-mobs .wcnf.gz)")
    d.add_argument("file", type=Path)
    d.add_argument("--observations", type=Path, default=None, help="observation file for a .bench netlist")
    d.add_argument("--backend", choices=["auto", "z3", "clingo"], default="auto")
    d.add_argument("--mode", nargs="+", default=["all"], metavar="MODE", help="all | min_cardinality | top K")
    d.add_argument("--timeout", type=_seconds, default=None, help=_TIMEOUT_HELP)
    d.add_argument("--json", action="store_true", help="print one JSON object")
    pb = sub.add_parser(
        "probe", help="next-best net to measure (expected information gain), or a simulated probing loop"
    )
    pb.add_argument("file", type=Path)
    pb.add_argument("--observations", type=Path, default=None, help="observation file for a .bench netlist")
    pb.add_argument("--backend", choices=["auto", "z3", "clingo"], default="auto")
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
    pb.add_argument("--seed", type=_seed, default=0)
    pb.add_argument("--timeout", type=_seconds, default=None, help=_TIMEOUT_HELP)
    pb.add_argument("--json", action="store_true", help="print one JSON object")
    pb.add_argument("--interactive", action="store_true", help="ask for each measured value, diagnose again, repeat")
    r = sub.add_parser("run", help="run a CDA Action from inputs.json: events, artifacts, receipts")
    r.add_argument("inputs", type=Path)
    r.add_argument("--out", type=Path, default=None, help="folder for artifacts and receipts.sqlite")
    r.add_argument("--json", action="store_true", help="print every event as one JSON line")
    sv = sub.add_parser("serve", help="serve the action event streams of a receipts.sqlite over SSE (Last-Event-ID resume)")
    sv.add_argument("db", type=Path, help="the event store: DIR/receipts.sqlite written by cda run --out DIR")
    sv.add_argument("--host", default="127.0.0.1")
    sv.add_argument("--port", type=_port, default=8765, help="TCP port, 0 to 65535 (0: any free port)")
    sc = sub.add_parser("schema", help="write the JSON schemas of the contracts (--check: compare)")
    sc.add_argument("folder", type=Path)
    sc.add_argument("--check", action="store_true", help="exit 1 listing stale/missing/extra files")
    rc = sub.add_parser("receipts", help="the receipt log")
    rcsub = rc.add_subparsers(dest="receipts_command", required=True)
    rv = rcsub.add_parser("verify", help="check the hash chain of a receipt log")
    rv.add_argument("db", type=Path)
    rv.add_argument("--head", default=None, help="the head hash an action recorded (detects truncation)")
    rv.add_argument("--json", action="store_true")
    cd = sub.add_parser("conduct", help="the conductor: a request -> obligations -> tools -> verified reply (docs/conductor.md)")
    cd.add_argument("utterance", help="the request, e.g. 'compute (1 + 2) * 0.1; solve problem.cda'")
    cd.add_argument("--db", type=Path, required=True, help="the IR database (SQLite, created if missing)")
    cd.add_argument("--registry", type=Path, default=None, help="tools.toml (default: the shipped registry)")
    cd.add_argument("--ken", type=Path, action="append", default=[], help="Ken graph file for ken.lookup")
    cd.add_argument("--translator", choices=["rules", "openai"], default="rules",
                    help="Translator-In: the rule grammar (default) or an OpenAI-compatible model")
    cd.add_argument("--llm-base-url", default=None, help="with --translator openai: the provider's base URL")
    cd.add_argument("--llm-model", default=None, help="with --translator openai: the model name")
    cd.add_argument("--llm-timeout", type=_option("--llm-timeout", False, limits.seconds), default=30.0,
                    help="with --translator openai: seconds to wait for the model")
    cd.add_argument("--seed", type=_seed, default=0)
    cd.add_argument("--json", action="store_true", help="print the trace as one JSON object")
    b = sub.add_parser("bench", help="run a benchmark data set")
    bsub = b.add_subparsers(dest="suite", required=True)
    folio = bsub.add_parser("folio", help="FOLIO examples with gold first-order logic (.jsonl)")
    folio.add_argument("file", type=Path)
    folio.add_argument("--json", action="store_true")
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
        out.append("PARTIAL: a budget ran out; what follows is what was found")
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
    for note in result.notes:
        out.append(f"note: {note}")
    return "\n".join(out) + "\n"


def _exit_code(result: SolveResult) -> int:
    if result.status == "unknown" or result.partial:
        return EXIT_UNKNOWN
    if any(v.status != "supported" for v in result.verdicts):
        return EXIT_GOAL_FAILED
    return EXIT_OK


def _asker(out: TextIO) -> Callable[[str], str | None]:
    """A prompt on ``out`` and one line from standard input (``None`` at its end)."""

    def ask(prompt: str) -> str | None:
        out.write(prompt)
        out.flush()
        line = sys.stdin.readline()
        return line if line else None

    return ask


def main(argv: Sequence[str] | None = None, stdout: TextIO | None = None, stderr: TextIO | None = None) -> int:
    out, err = stdout or sys.stdout, stderr or sys.stderr
    try:
        args = _parser().parse_args(argv)
    except _UsageError as exc:
        err.write(str(exc))
        return EXIT_BAD_INPUT
    if args.command == "prove":
        from cda.adapters.fol_cli import main_prove

        return main_prove(
            args.file, args.json, out, err=err, timeout=args.timeout, backend=args.backend, cross_check=args.cross_check,
            unique_names=args.unique_names,
        )
    if args.command == "diagnose":
        from cda.diagnosis.diagnose import main_diagnose

        return main_diagnose(args.file, args.observations, args.backend, args.mode, args.timeout, args.json, out, err)
    if args.command == "probe":
        from cda.diagnosis.probe import main_probe

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
            interactive=_asker(out) if args.interactive else None,
        )
    if args.command == "run":
        from cda.adapters.run_cli import main_run

        return main_run(args.inputs, args.out, args.json, out, err)
    if args.command == "serve":
        from cda.adapters.sse_server import main_serve

        return main_serve(args.db, args.host, args.port, out, err)
    if args.command == "schema":
        from cda.adapters.schema_cli import main_schema

        return main_schema(args.folder, args.check, out, err)
    if args.command == "receipts":
        from cda.adapters.receipts_cli import main_receipts_verify

        return main_receipts_verify(args.db, args.head, args.json, out, err)
    if args.command == "conduct":
        from cda.adapters.conduct_cli import main_conduct

        return main_conduct(
            args.utterance, args.db, args.registry, args.ken, args.json, out, err, translator=args.translator,
            llm_base_url=args.llm_base_url, llm_model=args.llm_model, llm_timeout=args.llm_timeout, seed=args.seed,
        )
    if args.command == "bench":
        from cda.fol.folio import main_bench

        return main_bench(args.file, args.json, out, timeout=args.timeout, err=err)
    from cda.api import check, solve, solve_cross_checked  # here, not at the top: `cda --help` starts fast

    try:
        ken = None
        if args.ken:
            from cda.ken.graph import KenGraph
            from cda.ken.loaders import load_ken

            ken = KenGraph()
            for path in args.ken:
                ken = ken.merged(load_ken(path))
        if not args.file.exists():
            raise CDAError(f"{args.file}: no such file")
        if args.command == "check":
            report = check(args.file, ken=ken)
            print(
                f"{args.file}: ok — " + ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in report.model_dump().items()),
                file=out,
            )
            return EXIT_OK
        if args.cross_check:
            result = solve_cross_checked(args.file, top=args.top, seed=args.seed, timeout=args.timeout, ken=ken)
        else:
            result = solve(args.file, backend=args.backend, top=args.top, seed=args.seed, timeout=args.timeout, ken=ken)
    except CDAError as exc:
        print(exc.render(), file=err)
        return EXIT_BAD_INPUT
    out.write(result.json_text() + "\n" if args.json else render_table(result))
    return _exit_code(result)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
