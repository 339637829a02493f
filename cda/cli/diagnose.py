"""``cda diagnose FILE`` and ``cda probe FILE``: the ``diagnose`` and ``probe`` operations at the
command line (a ``.bench`` netlist with ``--observations``, or an mbd-mobs ``.wcnf[.gz]``).

``cda probe`` has two ways of its own, on the local user's machine only: ``--inject G1,G2``
simulates broken gates and probes until one diagnosis remains (``--strategy``, ``--vectors``,
``--seed``), and ``--interactive`` asks for each measured value on standard input.

Exit codes: 0 answered, 2 bad input (one line on stderr, or a JSON object on stdout with
``--json``; never a traceback), 3 when time ran out (what was found is printed).

``--timeout`` is counted from the process's launch (:mod:`cda.cli.launch`): the seconds the
interpreter and the imports took are taken off the budget the operation gets.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

from cda.errors import CDAError, OptionError
from cda.terminal_text import for_terminal

__all__ = ["diagnose_options", "present_diagnose", "present_probe", "probe_options"]


def diagnose_options(p: Any, op: Any) -> dict[str, Any]:
    p.add_argument("--mode", nargs="+", default=["all"], metavar="MODE", help="all | min_cardinality | top K")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    return {"own": ("mode", "k"), "metavars": {"path": "FILE", "observations_path": "FILE"}}


def probe_options(p: Any, op: Any) -> dict[str, Any]:
    from cda.cli.main import _seed, _vectors

    p.add_argument("--inject", action="append", default=None, metavar="G1,G2",
                   help="simulate: these gates are broken; probe until one diagnosis remains")
    p.add_argument("--strategy", choices=["ig", "random"], default="ig", help="probe choice in the simulated loop")
    p.add_argument("--vectors", type=_vectors, default=1, help="input vectors to observe in the simulated loop")
    p.add_argument("--seed", type=_seed, default=0, help="random seed of the simulated loop and of the solvers")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--interactive", action="store_true", help="ask for each measured value, diagnose again, repeat")
    return {"metavars": {"path": "FILE", "observations_path": "FILE"}}


def _mode(words: list[str]) -> tuple[str, int | None]:
    from cda.contracts import limits

    if words in (["all"], ["min_cardinality"]):
        return words[0], None
    if len(words) == 2 and words[0] == "top":
        try:
            k = int(words[1])
        except ValueError:
            k = 0
        if k >= 1:
            return "top", limits.count("--mode top K", k)
    raise CDAError(f"--mode {' '.join(words)}: expected all, min_cardinality or top K (K at least 1)")


def _bad(exc: CDAError, path: str, as_json: bool, out: TextIO, err: TextIO) -> int:
    if as_json:  # the mistake as a JSON object on stdout, as every --json command prints it
        out.write(json.dumps(exc.as_dict(path), indent=2, ensure_ascii=False) + "\n")
    else:
        print(exc.render(), file=err)
    return 2


def present_diagnose(op: Any, args: Any, out: TextIO, err: TextIO, inp: TextIO | None = None) -> int:
    from cda.cli.call import call_local
    from cda.cli.generate import params_of
    from cda.cli.terminal import progress
    from cda.diagnosis.diagnose import render

    try:
        mode, k = _mode(args.mode)
        with progress(err, f"diagnosing {args.path}"):
            report = call_local(op, _from_launch({**params_of(op, args), "mode": mode, **({"k": k} if k is not None else {})}))
    except CDAError as exc:
        return _bad(exc, args.path, args.json, out, err)
    out.write(json.dumps(report.model_dump(), indent=2) + "\n" if args.json else render(report))
    return 3 if report.timed_out else 0


def _from_launch(params: dict[str, Any]) -> dict[str, Any]:
    """``params`` with a ``timeout`` the command line gave made what is left of it since launch.
    The value is checked first (the operation's own check would otherwise see the remainder, and
    a refusal name a number the user never typed); a spent budget is 0, a partial at once."""
    from cda.cli.launch import budget_left
    from cda.contracts import limits

    timeout = params.get("timeout")
    if isinstance(timeout, int | float) and not isinstance(timeout, bool):
        return {**params, "timeout": budget_left(limits.seconds("--timeout", timeout))}
    return params


def _asker(out: TextIO) -> Callable[[str], str | None]:
    """A prompt on ``out`` and one line from standard input (``None`` at its end)."""

    def ask(prompt: str) -> str | None:
        out.write(for_terminal(prompt))
        out.flush()
        line = sys.stdin.readline()
        return line if line else None

    return ask


def present_probe(op: Any, args: Any, out: TextIO, err: TextIO, inp: TextIO | None = None) -> int:
    from cda.cli.call import call_local
    from cda.cli.generate import params_of
    from cda.cli.terminal import progress
    from cda.diagnosis.probe import ProbeRun, render_report, render_run

    try:
        if args.interactive or args.inject:
            result: Any = _local_loop(op, args, out)
            if result is None:
                return 0
            if isinstance(result, int):
                return result
        else:
            with progress(err, f"probing {args.path}"):
                result = call_local(op, _from_launch(params_of(op, args)))
    except CDAError as exc:
        return _bad(exc, args.path, args.json, out, err)
    if args.json:
        out.write(json.dumps(result.model_dump(), indent=2) + "\n")
    else:
        out.write(for_terminal(render_run(result) if isinstance(result, ProbeRun) else render_report(result)))
    return 3 if getattr(result, "timed_out", False) else 0


def _local_loop(op: Any, args: Any, out: TextIO) -> Any:
    """``--interactive`` (the exit code) or ``--inject`` (the simulated run): the probe's loops on
    the local user's own netlist; the parameters are the operation's, checked by its model."""
    from cda.diagnosis.bench_import import load_bench, read_bench
    from cda.diagnosis.diagnose import load_instance
    from cda.diagnosis.probe import interactive_probing, simulate_probing
    from cda.files import is_stdin
    from cda.ir import MinimalGoal
    from cda.operations.diagnosis import ProbeParams

    p = ProbeParams.model_validate({**{k: v for k, v in vars(args).items() if k in ProbeParams.model_fields
                                       and v is not None}})
    path = Path(args.path)
    observations = Path(p.observations_path) if p.observations_path is not None else None
    if args.interactive:
        if args.inject or args.json:
            raise CDAError("--interactive asks for measurements: it does not go with --inject or --json")
        _, timed_out = interactive_probing(
            load_instance(path, observations, MinimalGoal()), _asker(out), out, backend=p.backend, top=p.top,
            failure=p.prior, max_size=p.max_size, timeout=p.timeout, file=str(path))
        return 3 if timed_out else 0
    if observations is not None:
        raise CDAError("--inject draws its own test vectors; drop --observations")
    if not is_stdin(path) and not path.name.lower().endswith(".bench"):
        raise CDAError(f"{path}: --inject needs a .bench netlist")
    if not is_stdin(path) and not path.exists():
        raise CDAError(f"{path}: no such file")
    # the observations are drawn by the simulation; the instance is rebuilt under them
    inst = load_bench(read_bench(path), [{}], MinimalGoal(), str(path))
    gates = [g.strip() for item in args.inject for g in item.split(",") if g.strip()]
    twice = sorted({g for g in gates if gates.count(g) > 1})
    if twice:
        raise OptionError(f"--inject names gate {', '.join(twice)} more than once; name each faulty gate once")
    return simulate_probing(inst, gates, strategy=args.strategy, vectors=args.vectors, seed=args.seed,
                            backend=p.backend, failure=p.prior, max_size=p.max_size, timeout=p.timeout, file=str(path))
