"""Diagnosis of circuits with many observations (issue 3): importers, goal minimal_explanations,
``cda diagnose``. Oracles: brute force over gate subsets with an independent simulator (c17 and
random circuits); on mbd-mobs instances, simulation of every diagnosis against every
observation, minimality by removing each gate, the injected fault, the published count."""

from __future__ import annotations

import gzip
import io
import itertools
import json
import random
from pathlib import Path

import pytest

from cda.adapters.bench_import import Netlist, load_bench, parse_bench, parse_observations
from cda.adapters.cli import main
from cda.adapters.diagnose import diagnose
from cda.api import ground
from cda.encodings.format import format_problem
from cda.encodings.ir import MinimalGoal
from cda.encodings.parse import parse_problem
from cda.errors import CDAError
from cda.solver.backend import Deadline, make_backend, selector
from cda.solver.engine import EngineOptions, run

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"
C17 = DATA / "iscas85" / "c17.bench"
MOBS = DATA / "mbd-mobs"
BACKENDS = ["clingo", "z3"]


# ---- an independent simulator and brute force -------------------------------------------------
def _eval(kind: str, xs: list[bool]) -> bool:
    if kind == "AND":
        return all(xs)
    if kind == "NAND":
        return not all(xs)
    if kind == "OR":
        return any(xs)
    if kind == "NOR":
        return not any(xs)
    if kind == "XOR":
        return sum(xs) % 2 == 1
    if kind == "XNOR":
        return sum(xs) % 2 == 0
    if kind == "NOT":
        return not xs[0]
    return xs[0]  # BUFF


def _consistent(net: Netlist, broken: set[str], obs: dict[str, bool]) -> bool:
    """Some outputs of the broken gates (and values of unobserved inputs) reproduce ``obs``."""
    free_inputs = [i for i in net.inputs if i not in obs]
    order = [g for g, _, _ in net.gates]  # .bench files here list gates after their inputs
    for bits in itertools.product([False, True], repeat=len(broken) + len(free_inputs)):
        values = {i: obs[i] for i in net.inputs if i in obs}
        values.update(zip(free_inputs, bits[len(broken):]))
        chosen = dict(zip(sorted(broken), bits[: len(broken)]))
        kinds = {g: (k, ins) for g, k, ins in net.gates}
        for g in order:
            k, ins = kinds[g]
            values[g] = chosen[g] if g in broken else _eval(k, [values[i] for i in ins])
        if all(values[n] == v for n, v in obs.items()):
            return True
    return False


def _brute_minimal(net: Netlist, observations: list[dict[str, bool]]) -> list[list[str]]:
    gates = [g for g, _, _ in net.gates]
    ok = {
        frozenset(s)
        for r in range(len(gates) + 1)
        for s in itertools.combinations(gates, r)
        if all(_consistent(net, set(s), o) for o in observations)
    }
    minimal = [s for s in ok if not any(t < s for t in ok)]
    return sorted((sorted(s) for s in minimal), key=lambda s: (len(s), s))


def _random_circuit(rng: random.Random) -> Netlist:
    inputs = [f"i{k}" for k in range(rng.randint(2, 4))]
    nets = list(inputs)
    gates = []
    for k in range(rng.randint(4, 8)):
        kind = rng.choice(["AND", "NAND", "OR", "NOR", "XOR", "XNOR", "NOT", "BUFF"])
        arity = 1 if kind in ("NOT", "BUFF") else rng.randint(2, min(3, len(nets)))
        gates.append((f"g{k}", kind, tuple(rng.sample(nets, arity))))
        nets.append(f"g{k}")
    used = {i for _, _, ins in gates for i in ins}
    outputs = [g for g, _, _ in gates if g not in used] or [gates[-1][0]]
    return Netlist(inputs, outputs, gates)


def _faulty_observations(net: Netlist, rng: random.Random, n: int) -> list[dict[str, bool]]:
    broken = set(rng.sample([g for g, _, _ in net.gates], rng.randint(1, 2)))
    out = []
    kinds = {g: (k, ins) for g, k, ins in net.gates}
    for _ in range(n):
        values = {i: rng.random() < 0.5 for i in net.inputs}
        for g, _, _ in net.gates:
            k, ins = kinds[g]
            value = _eval(k, [values[i] for i in ins])
            values[g] = (not value) if g in broken else value
        out.append({x: values[x] for x in net.inputs + net.outputs})
    return out


def _solve(net: Netlist, observations: list[dict[str, bool]], backend: str, goal: MinimalGoal, lazy: bool = True) -> tuple[list[list[str]], bool]:
    inst = load_bench(net, observations, goal)
    result = run(inst.problem, backend, EngineOptions(lazy_observations=lazy, check_minimality=True))
    assert result.minimal_explanations is not None
    names = [[a[3:-1] for a in d] for d in result.minimal_explanations]
    return sorted((sorted(d) for d in names), key=lambda d: (len(d), d)), result.minimal_complete


# ---- the DSL goal -----------------------------------------------------------------------------
def test_goal_round_trips_through_the_formatter() -> None:
    for text in ["goal minimal_explanations all\n", "goal minimal_explanations top 4\n", "goal minimal_explanations min_cardinality\n"]:
        assert format_problem(parse_problem(text)) == text
    assert format_problem(parse_problem("goal minimal_explanations")) == "goal minimal_explanations all\n"


@pytest.mark.parametrize("backend", BACKENDS)
def test_goal_minimal_on_a_dsl_problem(backend: str) -> None:
    src = "hyp a, b, c, d\nvar y\nhard: (a and b) or c or (d and y)\nhard: not y or a\ngoal minimal_explanations\n"
    gp = ground(src)
    r = run(gp, backend, EngineOptions(check_minimality=True))
    assert r.minimal_explanations == [["c"], ["a", "b"], ["a", "d"]] and r.minimal_complete
    gp2 = ground(src.replace("minimal_explanations", "minimal_explanations min_cardinality"))
    assert run(gp2, backend, EngineOptions()).minimal_explanations == [["c"]]
    gp3 = ground(src.replace("minimal_explanations", "minimal_explanations top 2"))
    assert run(gp3, backend, EngineOptions()).minimal_explanations == [["c"], ["a", "b"]]


@pytest.mark.parametrize("backend", BACKENDS)
def test_backend_models_are_subset_minimal(backend: str) -> None:
    rng = random.Random(7)
    for _ in range(10):
        atoms = [f"h{i}" for i in range(5)]
        clauses = [" or ".join(rng.sample(atoms, rng.randint(1, 3))) for _ in range(rng.randint(1, 4))]
        src = "hyp " + ", ".join(atoms) + "\n" + "".join(f"hard: {c}\n" for c in clauses)
        gp = ground(src)
        be = make_backend(backend, gp, seed=0, deadline=Deadline(None), weights={})
        base = [(selector(c.name), True) for c in gp.clauses]
        got = {frozenset(a for a in atoms if m[a]) for m in be.enumerate_minimal(atoms, base, 1000).models}
        sat = [frozenset(s) for r in range(6) for s in itertools.combinations(atoms, r)
               if all(any(x in s for x in c.split(" or ")) for c in clauses)]
        assert got == {s for s in sat if not any(t < s for t in sat)}


# ---- .bench: c17 and random circuits against brute force --------------------------------------
@pytest.mark.skipif(not C17.exists(), reason=f"{C17} is absent (external data, see ../shared/data/README.md)")
@pytest.mark.parametrize("backend", BACKENDS)
def test_c17_matches_brute_force(backend: str) -> None:
    net = parse_bench(C17.read_text(), str(C17))
    rng = random.Random(17)
    for _ in range(4):
        observations = _faulty_observations(net, rng, rng.randint(1, 4))
        expected = _brute_minimal(net, observations)
        got, complete = _solve(net, observations, backend, MinimalGoal())
        assert complete and got == expected
        got_card, _ = _solve(net, observations, backend, MinimalGoal("min_cardinality"))
        assert got_card == [d for d in expected if len(d) == len(expected[0])]


def test_random_circuits_match_brute_force_on_both_backends() -> None:
    rng = random.Random(3)
    for _ in range(12):
        net = _random_circuit(rng)
        observations = _faulty_observations(net, rng, rng.randint(1, 5))
        expected = _brute_minimal(net, observations)
        results = [_solve(net, observations, b, MinimalGoal(), lazy=lazy) for b in BACKENDS for lazy in (True, False)]
        for got, complete in results:
            assert complete and got == expected
        top2 = [_solve(net, observations, b, MinimalGoal("top", 2))[0] for b in BACKENDS]
        assert top2[0] == top2[1] == expected[:2]


def test_observation_file_formats() -> None:
    pairs = parse_observations("# c\n1=1 2=0\n3=1\n")
    table = parse_observations("1 2 3\n1 0 1\n011\n")
    assert pairs == [{"1": True, "2": False}, {"3": True}]
    assert table == [{"1": True, "2": False, "3": True}, {"1": False, "2": True, "3": True}]
    with pytest.raises(CDAError):
        parse_observations("1 2\n1 0 1\n")
    with pytest.raises(CDAError):
        parse_observations("x=2\n")
    with pytest.raises(CDAError):
        parse_bench("INPUT(a)\nz = FOO(a)\n")
    with pytest.raises(CDAError):
        parse_bench("INPUT(a)\nz = AND(a, q)\n")


# ---- mbd-mobs ---------------------------------------------------------------------------------
def _read_wcnf(path: Path) -> tuple[list[list[int]], list[int], list[dict[int, bool]], list[int]]:
    hard, health, obs, mutated = [], [], [], []
    top = 0
    for line in gzip.decompress(path.read_bytes()).decode().splitlines():
        t = line.split()
        if not t:
            continue
        if t[0] == "o":
            obs.append({abs(int(v)): int(v) > 0 for v in t[1:-1]})
        elif line.startswith("c corresp. vars:"):
            mutated = [int(v) for v in line.split(":")[1].split()]
        elif t[0] == "p":
            top = int(t[4])
        elif t[0] != "c":
            w, lits = int(t[0]), [int(v) for v in t[1:-1]]
            (hard.append(lits) if w >= top else health.append(lits[0]))
    return hard, health, obs, mutated


def _wcnf_consistent(hard: list[list[int]], health: list[int], broken: set[int], obs: dict[int, bool]) -> bool:
    """Simulate: a healthy gate's output h-1 is the value satisfying its clauses; broken ones free."""
    gate_clauses = {h: [c for c in hard if -h in c] for h in health}
    deps = {h: {abs(v) for c in gate_clauses[h] for v in c} - {h, h - 1} for h in health}
    out_of = {h - 1: h for h in health}
    order: list[int] = []
    done: set[int] = set()
    while len(order) < len(health):
        for h in health:
            if h not in done and all(d not in out_of or out_of[d] in done for d in deps[h]):
                order.append(h)
                done.add(h)
    brk = sorted(broken)
    for bits in itertools.product([False, True], repeat=len(brk)):
        values = {v: b for v, b in obs.items() if v not in out_of}
        chosen = dict(zip(brk, bits))
        for h in order:
            if h in chosen:
                values[h - 1] = chosen[h]
                continue
            fits = [val for val in (False, True) if all(
                any((values[abs(x)] if abs(x) != h - 1 else val) == (x > 0) for x in c if abs(x) != h) for c in gate_clauses[h])]
            assert len(fits) == 1, "a healthy gate's clauses define its output"
            values[h - 1] = fits[0]
        if all(values[v] == b for v, b in obs.items()):
            return True
    return False


def _published() -> dict[str, int]:
    data = json.loads((MOBS / "published-results" / "hsd.json").read_text())
    return {Path(k).name.removesuffix(".wcnf"): v["diags"] for k, v in data["stats"].items()}


MOBS_CASES = [("c17", "c17mut8n", BACKENDS), ("c17", "c17mut14p", BACKENDS), ("c432", "c432mut273n", ["clingo"])]


@pytest.mark.skipif(not MOBS.exists(), reason=f"{MOBS} is absent (external data, see ../shared/data/README.md)")
@pytest.mark.parametrize(("circuit", "name", "backends"), MOBS_CASES)
def test_mbd_mobs_instances(circuit: str, name: str, backends: list[str]) -> None:
    path = MOBS / circuit / f"{name}.wcnf.gz"
    if not path.exists():
        pytest.skip(f"{path} is absent")
    hard, health, obs, mutated = _read_wcnf(path)
    answers = []
    for backend in backends:
        report = diagnose(path, backend=backend)
        assert report.complete and report.observations == len(obs)
        assert len(report.diagnoses) == _published()[name]
        for d in report.diagnoses:
            broken = {int(g) for g in d}
            assert all(_wcnf_consistent(hard, health, broken, o) for o in obs), d
            for g in broken:
                assert not all(_wcnf_consistent(hard, health, broken - {g}, o) for o in obs), (d, g)
        injected = {v + 1 for v in mutated}
        assert any(injected <= {int(g) for g in d} for d in report.diagnoses)
        answers.append(report.diagnoses)
    assert all(a == answers[0] for a in answers)


# ---- CLI --------------------------------------------------------------------------------------
@pytest.mark.skipif(not C17.exists(), reason=f"{C17} is absent")
def test_cli_diagnose(tmp_path: Path) -> None:
    obs = tmp_path / "obs.txt"
    obs.write_text("1 2 3 6 7 22 23\n1 0 1 1 0 0 1\n")
    out, err = io.StringIO(), io.StringIO()
    assert main(["diagnose", str(C17), "--observations", str(obs), "--json"], out, err) == 0
    data = json.loads(out.getvalue())
    assert data["diagnoses"] == [["10", "19"], ["10", "23"], ["16", "22"], ["19", "22"], ["22", "23"]]
    assert data["complete"] and data["observations"] == 1 and "time_s" in data
    for argv in (["diagnose", str(C17)], ["diagnose", str(tmp_path / "none.bench")],
                 ["diagnose", str(C17), "--observations", str(obs), "--mode", "top", "x"]):
        err = io.StringIO()
        assert main(argv, io.StringIO(), err) == 2 and "Traceback" not in err.getvalue() and "error" in err.getvalue()
