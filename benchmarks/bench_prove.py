"""``cda prove`` as a user runs it (issue 34): its start-up against the floor of any Python front
end on the same libraries, what byte code saves, and a suite of FOLIO problems in one ``cda
prove`` call against the E prover run on each problem and its negation.

**Start-up** (each line a fresh process; lines interleaved, ``--rounds`` rounds; CPU time of
each child from ``os.wait4``, since the machine is shared and wall time stretches with its load):

* *floor*: ``python -c "import z3, clingo, lark, pydantic"`` and one pydantic model built and
  used (issue 34's floor line: a front end on these libraries that answers with one model);
* ``cda prove examples/syllogism.fol`` with CDA's byte code (as the README's install leaves it);
* the same with ``PYTHONDONTWRITEBYTECODE=1`` and no byte code for CDA's modules (an editable
  install without ``compileall``; the libraries keep theirs).

**Suite vs E**: the 104 examples of ``folio/folio-v0.0-validation-dev.jsonl`` written as ``.fol``
files (gold premises and conclusion), all proved by one ``cda prove --format jsonl FILE…``; and
each written as two TPTP problems (the conclusion, and its negation, as the conjecture) given to
``eprover --auto`` one process each, as a regression suite would run E. An answer is True when
the conclusion is proved, False when its negation is, Uncertain otherwise; both sides' answers
are compared with each other and with the gold labels (CDA's must be those of ``cda bench
folio``: 102/104, the two misses gold labels the gold logic does not entail). Target: CDA's
suite at most 0.5x E's time. E is Debian's ``eprover`` package; where it is absent the E part
is skipped with a message.

Run ``python benchmarks/bench_prove.py`` (``--write`` rewrites its section of
docs/benchmarks.md). Data: ``$CDA_DATA`` or ``../shared/data``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.child_process import run_child  # noqa: E402
from benchmarks.doc_section import load_average, machine, write_section  # noqa: E402
from cda.errors import CDAError  # noqa: E402
from cda.fol.parse import build_problem  # noqa: E402
from cda.fol.syntax import And, Atom, BoolConst, Eq, Formula, Iff, Implies, Not, Or, Quant, Term, Xor  # noqa: E402

DATA = Path(os.environ.get("CDA_DATA") or ROOT.parent / "shared" / "data")
FOLIO = DATA / "folio" / "folio-v0.0-validation-dev.jsonl"
DOC = ROOT / "docs" / "benchmarks.md"
START, END = "<!-- bench_prove:start -->", "<!-- bench_prove:end -->"
FLOOR = "import z3, clingo, lark, pydantic\nclass M(pydantic.BaseModel):\n    x: int\nprint(M(x=1).model_dump_json())"
LABEL = {"supported": "True", "refuted": "False", "inconclusive": "Uncertain"}


def run_cpu(argv: list[str], env: dict[str, str], cwd: Path) -> tuple[float, float, bytes, int]:
    """(CPU seconds of the child, wall seconds, its stdout, exit status): one child measured by
    ``benchmarks/child_process.py`` (``os.wait4``)."""
    child = run_child(argv, env=env, cwd=cwd)
    assert child.returncode is not None  # no timeout asked for
    return child.cpu, child.wall, child.stdout.encode(), child.returncode


def _env(pycache: Path | None, no_bytecode: bool = False) -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    if no_bytecode:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    if pycache is not None:
        env["PYTHONPYCACHEPREFIX"] = str(pycache)
    return env


# ---------------------------------------------------------------- start-up
def startup(rounds: int) -> dict[str, list[float]]:
    """CPU seconds per line, interleaved. Two bytecode caches (``PYTHONPYCACHEPREFIX``), both
    filled by an untimed round; the second then loses CDA's own files."""
    example = str(ROOT / "examples" / "syllogism.fol")
    prove = [sys.executable, "-m", "cda", "prove", example]
    with tempfile.TemporaryDirectory() as tmp:
        warm, cold = Path(tmp) / "warm", Path(tmp) / "cold"
        lines = {
            "floor": ([sys.executable, "-c", FLOOR], _env(warm)),
            "python -c pass": ([sys.executable, "-c", "pass"], _env(warm)),
            "cda prove (byte code)": (prove, _env(warm)),
            "cda prove (no byte code for CDA)": (prove, _env(cold, no_bytecode=True)),
        }
        for argv, env in lines.values():  # the untimed round that writes both caches
            run_cpu(argv, {k: v for k, v in env.items() if k != "PYTHONDONTWRITEBYTECODE"}, ROOT)
        shutil.rmtree(cold / str(ROOT / "cda").lstrip("/"), ignore_errors=True)
        times: dict[str, list[float]] = {k: [] for k in lines}
        for _ in range(rounds):
            for label, (argv, env) in lines.items():
                cpu, _, _, code = run_cpu(argv, env, ROOT)
                if code not in (0, 1):
                    raise SystemExit(f"{label} exited {code}")
                times[label].append(cpu)
    return times


# ---------------------------------------------------------------- FOLIO as .fol files and TPTP
def _tptp_name(prefix: str, name: str) -> str:
    return prefix + "".join(c if c.isascii() and (c.isalnum() or c == "_") else f"_u{ord(c):x}_" for c in name)


def _term(t: Term, bound: set[str]) -> str:
    if not t.args and t.name in bound:
        return _tptp_name("X", t.name)
    head = _tptp_name("c_" if not t.args else "f_", t.name)
    return head + ("(" + ",".join(_term(a, bound) for a in t.args) + ")" if t.args else "")


def tptp(f: Formula, bound: frozenset[str] = frozenset()) -> str:
    """A formula in TPTP's FOF syntax (variables ``X…``, constants ``c_…``, functions ``f_…``,
    predicates ``p_…``: the names CDA's checker gives them)."""
    b = set(bound)
    if isinstance(f, Atom):
        return _tptp_name("p_", f.pred) + ("(" + ",".join(_term(a, b) for a in f.args) + ")" if f.args else "")
    if isinstance(f, Eq):
        return f"({_term(f.lhs, b)} = {_term(f.rhs, b)})"
    if isinstance(f, BoolConst):
        return "$true" if f.value else "$false"
    if isinstance(f, Not):
        return f"~ ({tptp(f.arg, bound)})"
    if isinstance(f, And | Or):
        op = " & " if isinstance(f, And) else " | "
        return "(" + op.join(tptp(a, bound) for a in f.args) + ")"
    if isinstance(f, Implies | Iff | Xor):
        op = {Implies: "=>", Iff: "<=>", Xor: "<~>"}[type(f)]
        return f"({tptp(f.lhs, bound)} {op} {tptp(f.rhs, bound)})"
    assert isinstance(f, Quant)
    q = "!" if f.kind == "forall" else "?"
    return f"{q} [{_tptp_name('X', f.var)}] : ({tptp(f.body, bound | {f.var})})"


def write_suite(folder: Path) -> list[dict[str, Any]]:
    """Each example as ``NNN.fol`` and, when its gold logic reads, ``NNN.p`` / ``NNN.neg.p``."""
    rows = []
    for i, line in enumerate(FOLIO.read_text(encoding="utf-8").splitlines(), 1):
        ex = json.loads(line)
        premises = [str(p).replace("\n", " ") for p in ex["premises-FOL"]]
        claim = str(ex["conclusion-FOL"]).replace("\n", " ")
        fol = folder / f"{i:03d}.fol"
        fol.write_text("".join(f"premise {p}\n" for p in premises) + f"claim {claim}\n", encoding="utf-8")
        row: dict[str, Any] = {"n": i, "gold": ex["label"], "fol": fol, "tptp": None}
        try:
            problem = build_problem(premises, claim)
        except CDAError:
            rows.append(row)  # CDA refuses the gold logic by name; E is not asked either
            continue
        axioms = "".join(f"fof(p{k}, axiom, {tptp(s.formula)}).\n" for k, s in enumerate(problem.premises, 1))
        goal = tptp(problem.claims[0].formula)
        pos, neg = folder / f"{i:03d}.p", folder / f"{i:03d}.neg.p"
        pos.write_text(axioms + f"fof(goal, conjecture, {goal}).\n")
        neg.write_text(axioms + f"fof(goal, conjecture, ~ ({goal})).\n")
        row["tptp"] = (pos, neg)
        rows.append(row)
    return rows


def run_e(rows: list[dict[str, Any]], eprover: str, timeout: int) -> tuple[float, float, dict[int, str]]:
    cpu = wall = 0.0
    answers: dict[int, str] = {}
    for row in rows:
        if row["tptp"] is None:
            continue
        proved = []
        for p in row["tptp"]:
            c, w, out, _ = run_cpu([eprover, "--auto", "--tstp-format", "-s", f"--cpu-limit={timeout}", str(p)], dict(os.environ), p.parent)
            cpu, wall = cpu + c, wall + w
            m = re.search(rb"SZS status (\w+)", out)
            proved.append(bool(m and m.group(1) == b"Theorem"))
        answers[row["n"]] = "True" if proved[0] else "False" if proved[1] else "Uncertain"
    return cpu, wall, answers


def run_cda(rows: list[dict[str, Any]], timeout: int) -> tuple[float, float, dict[int, str]]:
    argv = [sys.executable, "-m", "cda", "prove", "--format", "jsonl", "--timeout", str(timeout),
            *[str(r["fol"]) for r in rows]]  # fmt: skip
    cpu, wall, out, code = run_cpu(argv, _env(None), ROOT)
    answers: dict[int, str] = {}
    for line in out.decode().splitlines():
        obj = json.loads(line)
        data = obj.get("result") or obj.get("data") or obj
        results = data.get("results") if isinstance(data, dict) else None
        n = int(Path(obj.get("file") or data.get("file")).stem)
        if results:
            r = results[0]
            answers[n] = "unknown" if r.get("unknown") else LABEL[r["status"]]
    if not answers:
        raise SystemExit(f"cda prove --format jsonl FILE… answered nothing (exit {code}): it needs several files in one call")
    return cpu, wall, answers


def render(st: dict[str, list[float]], suite: dict[str, Any] | None, load: tuple[str, str], seconds: float) -> str:
    med = {k: statistics.median(v) for k, v in st.items()}
    floor = med["floor"]
    lines = [
        START,
        "## `cda prove`: start-up, byte code, a FOLIO suite against E (`benchmarks/bench_prove.py`)",
        "",
        f"Start-up: each command a fresh process, the lines interleaved, {len(st['floor'])} rounds; CPU time of "
        "each child (`os.wait4`: the machine is shared, so wall time says more about the load than the command), "
        "medians. *Floor*: `python -c \"import z3, clingo, lark, pydantic\"` building and printing one pydantic model.",
        "",
        "| command | CPU (ms) | / floor | target |",
        "|---|---:|---:|---|",
    ]
    for label, v in med.items():
        target = ""
        if label == "cda prove (byte code)":
            target = f"≤ 1.25× ({'met' if v / floor <= 1.25 else 'missed'})"
        lines.append(f"| {label} | {1000 * v:.0f} | {v / floor:.2f}× | {target} |")
    lines += ["", "`cda prove` imports z3 and pydantic, not clingo or lark; it builds only its own command's parser, and "
              "its process ends with `gc.freeze()` (`cda.gcpause.before_exit`) so that the interpreter's final "
              "collections skip everything it imported, about 40 ms of CPU the floor line pays at its exit "
              "(docs/architecture.md, \"Start-up\")."]
    saved = med["cda prove (no byte code for CDA)"] - med["cda prove (byte code)"]
    lines += ["", f"Byte code: without it (`PYTHONDONTWRITEBYTECODE=1` and an editable install not compiled) `cda prove` "
              f"costs {1000 * saved:.0f} ms more CPU; the README's install runs `python -m compileall -q cda` once.", ""]  # fmt: skip
    if suite is None:
        lines += ["Suite against E: skipped (no `eprover` on this machine: `apt-get install eprover`).", ""]
    else:
        ratio = suite["cda_cpu"] / suite["e_cpu"]
        lines += [
            f"Suite: the {suite['problems']} FOLIO dev examples, one `cda prove --format jsonl` call on {suite['problems']} "
            f"`.fol` files against `eprover --auto` on each example's conclusion and its negation ({suite['e_runs']} "
            f"processes); {suite['rounds']} rounds, the two alternated, medians.",
            "",
            "| system | CPU (s) | wall (s) | correct vs gold | agrees with the other |",
            "|---|---:|---:|---:|---:|",
            f"| E {suite['e_version']} (one process per problem) | {suite['e_cpu']:.2f} | {suite['e_wall']:.2f} | "
            f"{suite['e_correct']}/{suite['problems']} | {suite['agree']}/{suite['both']} |",
            f"| CDA, one `cda prove` | {suite['cda_cpu']:.2f} | {suite['cda_wall']:.2f} | {suite['cda_correct']}/{suite['problems']} | "
            f"{suite['agree']}/{suite['both']} |",
            "",
            f"**CDA / E: {ratio:.2f}× CPU** ({suite['cda_wall'] / suite['e_wall']:.2f}× wall); target ≤ 0.5× "
            f"({'met' if ratio <= 0.5 else 'missed'}). Where they differ: {suite['differ'] or 'nowhere'}. "
            "E answers Uncertain when it proves neither side within its limit (it does not build counter-models here); "
            "CDA's answers are those of `cda bench folio` (102/104: #87 and #91 are gold labels their gold logic "
            "does not entail).",
            "",
        ]
    lines += [
        f"Measured {time.strftime('%Y-%m-%d')} on {machine()}, Python {sys.version.split()[0]}, in {seconds:.0f} s; "
        f"load average {load[0]} at the start and {load[1]} at the end.",
        "",
        "Reproduce: `pip install -e . && apt-get install eprover && python benchmarks/bench_prove.py --write`.",
        END,
    ]
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=15, help="start-up rounds")
    ap.add_argument("--suite-rounds", type=int, default=2)
    ap.add_argument("--timeout", type=int, default=10, help="per problem, both systems")
    ap.add_argument("--write", action="store_true", help="rewrite this script's section of docs/benchmarks.md")
    args = ap.parse_args()
    load0, t0 = load_average(), time.perf_counter()
    st = startup(args.rounds)
    suite = None
    eprover = shutil.which("eprover")
    if eprover is None:
        print("eprover not found (apt-get install eprover): the suite against E is skipped", file=sys.stderr)
    elif not FOLIO.exists():
        print(f"FOLIO data not found at {FOLIO}: the suite against E is skipped", file=sys.stderr)
    else:
        with tempfile.TemporaryDirectory() as tmp:
            rows = write_suite(Path(tmp))
            e_runs: list[tuple[float, float]] = []
            cda_runs: list[tuple[float, float]] = []
            for _ in range(args.suite_rounds):
                e_cpu, e_wall, e_ans = run_e(rows, eprover, args.timeout)
                e_runs.append((e_cpu, e_wall))
                c_cpu, c_wall, c_ans = run_cda(rows, args.timeout)
                cda_runs.append((c_cpu, c_wall))
        gold = {r["n"]: r["gold"] for r in rows}
        both = sorted(set(e_ans) & set(c_ans))
        version = subprocess.run([eprover, "--version"], capture_output=True, text=True).stdout.split("\n")[0]
        suite = {
            "problems": len(rows), "rounds": args.suite_rounds, "e_runs": 2 * sum(r["tptp"] is not None for r in rows),
            "e_cpu": statistics.median(c for c, _ in e_runs), "e_wall": statistics.median(w for _, w in e_runs),
            "cda_cpu": statistics.median(c for c, _ in cda_runs), "cda_wall": statistics.median(w for _, w in cda_runs),
            "e_correct": sum(e_ans.get(n) == g for n, g in gold.items()),
            "cda_correct": sum(c_ans.get(n) == g for n, g in gold.items()),
            "agree": sum(e_ans[n] == c_ans[n] for n in both), "both": len(both),
            "differ": ", ".join(f"#{n} (E {e_ans[n]}, CDA {c_ans[n]}, gold {gold[n]})" for n in both if e_ans[n] != c_ans[n]),
            "e_version": version.replace("E ", "").strip(),
        }  # fmt: skip
    text = render(st, suite, (load0, load_average()), time.perf_counter() - t0)
    print(text)
    if args.write:
        write_section(DOC, START, END, text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
