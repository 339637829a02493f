"""Diagnosis of circuits with many observations (issue 3): importers, goal minimal_explanations,
the counterexample-guided (lazy) search over observation groups, ``cda diagnose``.

Oracles, none of which shares code with the engine, the encoders or the bit-parallel simulator:
brute force over gate subsets with a plain one-vector simulator (c17 and random circuits, with
many and with partial observations); on mbd-mobs instances, every diagnosis simulated against
every observation straight from the file's clauses, minimality by removing each gate, the
injected fault, and the published count. Lazy and eager searches, and the simulation oracle
and the solver-only oracle, must all give the same lists."""

from __future__ import annotations

import gzip
import io
import itertools
import json
import random
from pathlib import Path

import pytest

from cda.api import ground
from cda.cli.main import main
from cda.contracts.deadline import NO_DEADLINE
from cda.diagnosis.bench_import import Netlist, circuit_of, load_bench, parse_bench, parse_observations
from cda.diagnosis.circuit import Simulator
from cda.diagnosis.diagnose import diagnose
from cda.encodings.format import format_problem
from cda.encodings.ir import MinimalGoal
from cda.encodings.parse import parse_problem
from cda.errors import CDAError
from cda.solver.backend import Deadline, make_backend, selector
from cda.solver.engine import EngineOptions, run
from cda.solver.observations import GroupContractError, GroupedProblem, OracleUndecided, split_observations
from tests.conftest import DATA

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


def _faulty_observations(
    net: Netlist, rng: random.Random, n: int, partial: bool = False
) -> list[dict[str, bool]]:
    """``n`` random vectors through the circuit with 1–2 gates flipped: inputs and outputs, or
    (``partial``) some inputs hidden and some internal nets shown."""
    broken = set(rng.sample([g for g, _, _ in net.gates], rng.randint(1, 2)))
    out = []
    kinds = {g: (k, ins) for g, k, ins in net.gates}
    for _ in range(n):
        values = {i: rng.random() < 0.5 for i in net.inputs}
        for g, _, _ in net.gates:
            k, ins = kinds[g]
            value = _eval(k, [values[i] for i in ins])
            values[g] = (not value) if g in broken else value
        shown = net.inputs + net.outputs
        if partial:
            shown = [x for x in shown if rng.random() < 0.75] + rng.sample([g for g, _, _ in net.gates], 1)
        out.append({x: values[x] for x in shown})
    return out


def _solve(
    net: Netlist,
    observations: list[dict[str, bool]],
    backend: str,
    goal: MinimalGoal,
    lazy: bool = True,
    generic: bool = False,
) -> tuple[list[list[str]], bool]:
    """Solve through the engine; ``generic``: without the circuit's simulation oracle (the
    observation groups found by ``split_observations``, each asked of the solver)."""
    inst = load_bench(net, observations, goal)
    problem: GroupedProblem = split_observations(inst.problem.materialize()) if generic else inst.problem
    result = run(problem, backend, EngineOptions(lazy_observations=lazy, check_minimality=True))
    assert result.minimal_explanations is not None
    names = [[a[3:-1] for a in d] for d in result.minimal_explanations]
    return sorted((sorted(d) for d in names), key=lambda d: (len(d), d)), result.minimal_complete


# ---- the DSL goal -----------------------------------------------------------------------------
def test_goal_round_trips_through_the_formatter() -> None:
    for text in ["goal minimal_explanations\n", "goal minimal_explanations top 4\n", "goal minimal_explanations min_cardinality\n"]:
        assert format_problem(parse_problem(text)) == text
    # `all` is the default: the canonical text leaves it out (cda fmt keeps examples as written)
    assert format_problem(parse_problem("goal minimal_explanations all")) == "goal minimal_explanations\n"


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
@pytest.mark.skipif(not C17.exists(), reason=f"{C17} is absent (external data, README.md, Test data)")
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


@pytest.mark.parametrize("backend", BACKENDS)
def test_lazy_eager_and_solver_oracle_agree_with_many_observations(backend: str) -> None:
    """Many observations (up to 30, some partial: hidden inputs, shown internal nets): the lazy
    search with the simulation oracle, the lazy search asking the solver, and the eager search
    all equal brute force, in every goal mode."""
    rng = random.Random(11)
    for case in range(6):
        net = _random_circuit(rng)
        observations = _faulty_observations(net, rng, rng.randint(12, 30), partial=case % 2 == 1)
        expected = _brute_minimal(net, observations)
        for lazy, generic in ((True, False), (False, False), (True, True)):
            got, complete = _solve(net, observations, backend, MinimalGoal(), lazy=lazy, generic=generic)
            assert complete and got == expected, (case, lazy, generic)
        least = [d for d in expected if len(d) == len(expected[0])]
        assert _solve(net, observations, backend, MinimalGoal("min_cardinality"))[0] == least
        assert _solve(net, observations, backend, MinimalGoal("top", 3), generic=True)[0] == expected[:3]


class _Fussy:
    """The simulation oracle, except that it will not decide sets of two gates or more."""

    name = "a fussy oracle"
    monotone = True

    def __init__(self, inner: object) -> None:
        self.inner = inner

    def refuting(self, assumed: frozenset[str], groups: list[int], deadline: Deadline = NO_DEADLINE) -> int | None:
        if len(assumed) >= 2:
            raise OracleUndecided("two gates or more")
        return self.inner.refuting(assumed, groups, deadline)  # type: ignore[attr-defined, no-any-return]


@pytest.mark.parametrize("backend", BACKENDS)
def test_undecided_oracle_falls_back_to_the_solver(backend: str) -> None:
    rng = random.Random(17)
    for _ in range(6):
        net = _random_circuit(rng)
        observations = _faulty_observations(net, rng, rng.randint(3, 12))
        lazy = load_bench(net, observations, MinimalGoal()).problem
        fussy = GroupedProblem(lazy.base, len(lazy), lazy.group, _Fussy(lazy.oracle))
        r = run(fussy, backend, EngineOptions(check_minimality=True))
        assert r.minimal_complete
        assert [[a[3:-1] for a in d] for d in r.minimal_explanations or []] == _brute_minimal(net, observations)


@pytest.mark.parametrize("backend", BACKENDS)
def test_known_explanations_are_rechecked_and_skipped(backend: str) -> None:
    """Seeding the search with the diagnoses of fewer observations (some now refuted), with
    non-minimal sets and with sets above the size bound changes nothing in the answer."""
    rng = random.Random(29)
    for _ in range(6):
        net = _random_circuit(rng)
        observations = _faulty_observations(net, rng, rng.randint(2, 8))
        expected = _brute_minimal(net, observations)
        gates = [g for g, _, _ in net.gates]
        known = _brute_minimal(net, observations[:1]) + [gates[:3], gates]
        atoms = tuple(tuple(f"ab({g})" for g in d) for d in known)
        problem = load_bench(net, observations, MinimalGoal()).problem
        r = run(problem, backend, EngineOptions(known_explanations=atoms, check_minimality=True))
        assert r.minimal_complete and [[a[3:-1] for a in d] for d in r.minimal_explanations or []] == expected
        bounded = run(problem, backend, EngineOptions(known_explanations=atoms, max_explanation_size=1))
        assert [[a[3:-1] for a in d] for d in bounded.minimal_explanations or []] == [d for d in expected if len(d) <= 1]


def test_minimal_under_fewer_observations_is_not_minimal_under_all() -> None:
    """Why the lazy search cannot just filter the candidates of its first observation: a set
    minimal under one observation can be refuted by the others, and the true minimal diagnosis
    is then a strict superset of it. Find such a case by brute force, then check the engine
    (which starts from the first observation) returns the true list on both backends."""
    rng = random.Random(5)
    for _ in range(300):
        net = _random_circuit(rng)
        observations = _faulty_observations(net, rng, rng.randint(2, 6))
        first = _brute_minimal(net, observations[:1])
        every = _brute_minimal(net, observations)
        grown = [d for d in every if d not in first and any(set(f) < set(d) for f in first)]
        refuted = [f for f in first if f not in every]
        if grown and refuted:
            break
    else:  # pragma: no cover - the seed finds one
        pytest.fail("no instance with a grown diagnosis was found")
    for backend in BACKENDS:
        got, complete = _solve(net, observations, backend, MinimalGoal())
        assert complete and got == every


@pytest.mark.parametrize(("sim_bits", "seed", "sizes"), [(None, 23, (0, 3)), (40, 31, (2, 6))], ids=["default", "in-parts"])
def test_simulation_oracle_matches_brute_force(
    sim_bits: int | None, seed: int, sizes: tuple[int, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The bit-parallel oracle the engine trusts, against the plain one-vector brute force; also
    with the bits of one simulation bounded so low (``in-parts``: 4 bits a net or fewer) that
    wide candidates are simulated in parts, their free values split between lanes and an outer
    loop."""
    import cda.diagnosis.circuit as circuit_module

    if sim_bits is not None:
        monkeypatch.setattr(circuit_module, "MAX_SIM_BITS", sim_bits)
    rng = random.Random(seed)
    for _ in range(25):
        net = _random_circuit(rng)
        observations = _faulty_observations(net, rng, rng.randint(1, 8), partial=True)
        sim = Simulator(circuit_of(net), observations)
        gates = [g for g, _, _ in net.gates]
        for broken in [set(rng.sample(gates, min(len(gates), rng.randint(*sizes)))) for _ in range(6)]:
            bad = [j for j, o in enumerate(observations) if not _consistent(net, broken, o)]
            order = list(range(len(observations)))
            rng.shuffle(order)
            first_bad = next((j for j in order if j in bad), None)
            assert sim.refuting(sorted(broken), order) == first_bad


def test_group_contract_is_checked() -> None:
    """A group that mentions an atom of another group (not an abducible) is refused."""
    from cda.encodings.ir import AtomInfo, Clause, GroundProblem, NodeFactory
    from cda.solver.observations import ObservationGroup

    f = NodeFactory()
    base = GroundProblem(f, minimal=MinimalGoal())
    base.atoms["a"] = AtomInfo("a", "hyp", "a", ())

    def build(i: int) -> ObservationGroup:
        node = f.or_([f.atom("a"), f.atom("x0")])
        atoms = {"x0": AtomInfo("x0", "var", "x", ())} if i == 0 else {}
        return ObservationGroup(f"g{i}", (Clause(f"g{i}", "observation", node, 0),), atoms)

    gp = GroupedProblem(base, 2, build)
    gp.group(0)
    with pytest.raises(GroupContractError):
        gp.group(1)


def test_dsl_observations_shared_with_hard_clauses_stay_in_the_base() -> None:
    src = (
        "hyp a, b\nobservable o1, o2, o3\nhard: a implies o1\nhard: b implies o2\n"
        "observe o1\nobserve o2 or o3\ngoal minimal_explanations\n"
    )
    gp = ground(src)
    grouped = split_observations(gp)
    assert len(grouped) == 0 and [c.name for c in grouped.base.clauses] == [c.name for c in gp.clauses]
    for backend in BACKENDS:
        r = run(gp, backend, EngineOptions(check_minimality=True))
        assert r.minimal_explanations == [[]] and r.minimal_complete


@pytest.mark.parametrize("backend", BACKENDS)
def test_minimal_goal_with_claims_and_with_conflicts(backend: str) -> None:
    """Claims are answered on the whole problem; no explanation at all means the hard clauses
    and observations conflict, reported as cores like any unsatisfiable problem."""
    src = "hyp a, b\nhard: a or b\nhard: not a or not b\ngoal minimal_explanations\ngoal prove a or b\n"
    r = run(ground(src), backend, EngineOptions())
    assert r.minimal_explanations == [["a"], ["b"]] and r.minimal_complete
    assert [v.status for v in r.verdicts] == ["supported"]
    bad = run(ground("hyp a\nvar y\nhard: y\nhard: not y\ngoal minimal_explanations\n"), backend, EngineOptions())
    assert bad.status == "unsat" and bad.minimal_explanations == [] and bad.minimal_complete
    assert bad.conflict is not None and len(bad.conflict.cores) == 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_minimal_goal_with_arithmetic(backend: str) -> None:
    """Metrics keep the problem whole (no lazy groups); the confirmed sets are blocked through the
    backends' slower general path (clingo-dl program parts, z3 terms)."""
    src = (
        "hyp a, b, c\nmetric load : ms\nhard: a implies value(metric:load) <= 5 ms\n"
        "hard: (b and c) implies value(metric:load) >= 7 ms\nhard: a or (b and c)\nobserve value(metric:load) >= 1 ms\n"
        "goal minimal_explanations top 2\n"
    )
    r = run(ground(src), backend, EngineOptions(check_minimality=True))
    assert r.minimal_explanations == [["a"], ["b", "c"]] and r.minimal_complete


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
    with pytest.raises(CDAError, match="cycle through net"):
        parse_bench("INPUT(a)\nOUTPUT(z)\nz = AND(a, y)\ny = NOT(z)\n")


def test_a_cyclic_netlist_is_bad_input_not_a_traceback(tmp_path: Path) -> None:
    bench, obs = tmp_path / "loop.bench", tmp_path / "obs.txt"
    bench.write_text("INPUT(a)\nOUTPUT(z)\nz = AND(a, y)\ny = NOT(z)\n")
    obs.write_text("a=1 z=0\n")
    out, err = io.StringIO(), io.StringIO()
    assert main(["diagnose", str(bench), "--observations", str(obs)], out, err) == 2
    assert "cycle through net" in err.getvalue() and "Traceback" not in err.getvalue()


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


class _WcnfModel:
    """The file's circuit, simulated one observation at a time from its clauses: a healthy gate's
    output (variable h-1) is the one value that satisfies its clauses; a broken one's is tried
    both ways. Shares nothing with the importer or the bit-parallel simulator."""

    def __init__(self, hard: list[list[int]], health: list[int]) -> None:
        gate_clauses = {h: [[v for v in c if v != -h] for c in hard if -h in c] for h in health}
        self.ins = {h: sorted({abs(v) for c in gate_clauses[h] for v in c} - {h - 1}) for h in health}
        self.table: dict[int, dict[tuple[bool, ...], bool]] = {}
        for h in health:
            rows = {}
            for bits in itertools.product([False, True], repeat=len(self.ins[h])):
                val = dict(zip(self.ins[h], bits))
                fits = [o for o in (False, True) if all(
                    any((o if abs(x) == h - 1 else val[abs(x)]) == (x > 0) for x in c) for c in gate_clauses[h])]
                assert len(fits) == 1, "a healthy gate's clauses define its output"
                rows[bits] = fits[0]
            self.table[h] = rows
        out_of = {h - 1: h for h in health}
        self.order: list[int] = []
        done: set[int] = set()
        while len(self.order) < len(health):
            for h in health:
                if h not in done and all(d not in out_of or out_of[d] in done for d in self.ins[h]):
                    self.order.append(h)
                    done.add(h)
        self.outputs = set(out_of)

    def consistent(self, broken: set[int], obs: dict[int, bool]) -> bool:
        brk = sorted(broken)
        for bits in itertools.product([False, True], repeat=len(brk)):
            values = {v: b for v, b in obs.items() if v not in self.outputs}
            chosen = dict(zip(brk, bits))
            ok = True
            for h in self.order:
                out = chosen[h] if h in chosen else self.table[h][tuple(values[i] for i in self.ins[h])]
                if obs.get(h - 1, out) != out:
                    ok = False
                    break
                values[h - 1] = out
            if ok:
                return True
        return False

    def consistent_with_all(self, broken: set[int], observations: list[dict[int, bool]]) -> bool:
        return all(self.consistent(broken, o) for o in observations)


def _published() -> dict[str, int]:
    data = json.loads((MOBS / "published-results" / "hsd.json").read_text())
    return {Path(k).name.removesuffix(".wcnf"): v["diags"] for k, v in data["stats"].items()}


MOBS_CASES = [
    ("c17", "c17mut8n", BACKENDS),
    ("c17", "c17mut14p", BACKENDS),
    ("c432", "c432mut273n", BACKENDS),
    ("c499", "c499mut348n", ["clingo"]),
    ("c880", "c880mut279n", ["clingo"]),
]


@pytest.mark.skipif(not MOBS.exists(), reason=f"{MOBS} is absent (external data, README.md, Test data)")
@pytest.mark.parametrize(("circuit", "name", "backends"), MOBS_CASES)
def test_mbd_mobs_instances(circuit: str, name: str, backends: list[str]) -> None:
    path = MOBS / circuit / f"{name}.wcnf.gz"
    if not path.exists():
        pytest.skip(f"{path} is absent")
    hard, health, obs, mutated = _read_wcnf(path)
    model = _WcnfModel(hard, health)
    answers = []
    for backend in backends:
        report = diagnose(path, backend=backend)
        assert report.complete and not report.timed_out and report.observations == len(obs)
        assert len(report.diagnoses) == _published()[name]
        for d in report.diagnoses:
            broken = {int(g) for g in d}
            assert model.consistent_with_all(broken, obs), d
            for g in broken:
                assert not model.consistent_with_all(broken - {g}, obs), (d, g)
        injected = {v + 1 for v in mutated}
        assert any(injected <= {int(g) for g in d} for d in report.diagnoses)
        answers.append(report.diagnoses)
    assert all(a == answers[0] for a in answers)


@pytest.mark.skipif(not MOBS.exists(), reason=f"{MOBS} is absent (external data, README.md, Test data)")
@pytest.mark.parametrize(
    ("name", "backends"), [("c17/c17mut8n", BACKENDS), ("c17/c17mut10p", BACKENDS), ("c432/c432mut269p", ["clingo"])]
)
def test_mbd_mobs_lazy_equals_eager(name: str, backends: list[str]) -> None:
    """Every observation encoded up front, or only those a counterexample asked for: the same list,
    on both backends; lazily, fewer groups than observations were encoded."""
    path = MOBS / f"{name}.wcnf.gz"
    if not path.exists():
        pytest.skip(f"{path} is absent")
    lists = []
    for backend in backends:
        for lazy in (True, False):
            report = diagnose(path, backend=backend, lazy_observations=lazy)
            assert report.complete
            lists.append(report.diagnoses)
            if lazy:
                used = [n for n in report.notes if "observation groups were needed" in n]
                assert used and int(used[0].split("minimal explanations: ")[1].split(" of ")[0]) < report.observations
    assert all(x == lists[0] for x in lists)


@pytest.mark.skipif(not MOBS.exists(), reason=f"{MOBS} is absent (external data, README.md, Test data)")
def test_timeout_returns_checked_diagnoses_and_exit_3() -> None:
    """A budget that ends during encoding or search: partial, labelled, exit 3, and every
    diagnosis listed is one of the complete answer's (each was checked against every observation)."""
    path = MOBS / "c1908" / "c1908mut1256p.wcnf.gz"
    if not path.exists():
        pytest.skip(f"{path} is absent")
    full = diagnose(path, backend="clingo")
    assert full.complete
    for budget, lazy in ((0.0, True), (0.6, True), (0.6, False)):
        part = diagnose(path, backend="clingo", timeout=budget, lazy_observations=lazy)
        if part.timed_out:
            assert not part.complete and any("time budget" in n for n in part.notes)
        assert all(d in full.diagnoses for d in part.diagnoses)
    out, err = io.StringIO(), io.StringIO()
    from cda.cli.main import main

    code = main(["diagnose", str(path), "--backend", "clingo", "--timeout", "0", "--json"], out, err)
    data = json.loads(out.getvalue())
    assert code == 3 and data["timed_out"] and not data["complete"]


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


# ---- inputs read strictly ------------------------------------------------------------------------
#: one NOT gate: input 1, output 2, health 3 (healthy: 2 = not 1); observation 1=1, 2=1 needs gate 3 broken
_NOT_GATE = "c mutated gates: g\nc corresp. vars: 2\np wcnf 3 3 10\n10 -3 2 1 0\n10 -3 -2 -1 0\n1 3 0\no 1 2 0\n"


def test_a_consistent_wcnf_is_read_and_diagnosed(tmp_path: Path) -> None:
    f = tmp_path / "not.wcnf"
    f.write_text(_NOT_GATE)
    report = diagnose(f)
    assert report.diagnoses == [["3"]] and report.injected == ["3"]


@pytest.mark.parametrize(
    ("old", "new", "words"),
    [
        ("p wcnf 3 3 10", "p wcnf 5 3 10", ":3: the header declares 5 variables, the clauses use 1..3"),
        ("p wcnf 3 3 10", "p wcnf 3 4 10", ":3: the header declares 4 clauses, the file has 3"),
        ("o 1 2 0", "o 1 2 7 0", ":7: the observation names variable 7, outside 1..3"),
        ("o 1 2 0", "o 1 2 -1 0", ":7: variable 1 is observed twice on one line (1 and -1)"),
        ("o 1 2 0", "o 1 1 2 0", ":7: variable 1 is observed twice"),
        ("o 1 2 0", "o 1 2 3 0", ":7: the observation names health variable 3"),
        ("o 1 2 0", "o 1 0 2 0", ":7: a 0 before the end of an observation line"),
        ("1 3 0", "1 3 0\np wcnf 3 3 10", ":7: a second 'p wcnf' header (the first is on line 3)"),
        ("10 -3 2 1 0", "0 -3 2 1 0", ":4: a clause's weight must be 1 or more"),
    ],
)
def test_a_wcnf_whose_header_or_observations_do_not_match_its_body_is_an_error(
    tmp_path: Path, old: str, new: str, words: str
) -> None:
    """Each of these was diagnosed (as "no fault", or as if nothing were wrong) before."""
    f = tmp_path / "bad.wcnf"
    f.write_text(_NOT_GATE.replace(old, new, 1))
    out, err = io.StringIO(), io.StringIO()
    assert main(["diagnose", str(f)], out, err) == 2
    assert f"{f}{words}" in err.getvalue() and out.getvalue() == "" and "Traceback" not in err.getvalue()


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("1=1 1=0\n", "obs:1: net 1 is named twice on one line (1=1 and 1=0)"),
        ("1=1 2=0\n3=1 3=1\n", "obs:2: net 3 is named twice on one line"),
        ("1 2 1\n0 1 0\n", "obs:1: net 1 is named twice in the header"),
        ("1=1\n\n1=0 99=1\n", "obs:3: unknown net(s) 99"),
        ("1 99\n0 1\n", "obs:1: unknown net(s) 99"),
    ],
)
def test_observation_files_are_read_strictly_with_line_numbers(text: str, words: str) -> None:
    with pytest.raises(CDAError) as info:
        parse_observations(text, {"1", "2", "3"}, "obs")
    assert words in str(info.value)


def test_an_output_declared_twice_is_an_error() -> None:
    with pytest.raises(CDAError, match="n.bench:4: OUTPUT\\(z\\) is declared twice"):
        parse_bench("INPUT(a)\nOUTPUT(z)\nz = NOT(a)\nOUTPUT(z)\n", "n.bench")


@pytest.mark.skipif(not (MOBS / "c17" / "c17mut8n.wcnf.gz").exists(), reason="needs ../shared/data/mbd-mobs")
def test_the_injected_fault_has_one_name_in_text_and_json() -> None:
    """The file says ``mutated gates: 11`` (the original netlist's name) and ``corresp. vars: 8``:
    gate 9 here (health variable 9 drives variable 8), the single-gate diagnosis."""
    report = diagnose(MOBS / "c17" / "c17mut8n.wcnf.gz")
    assert report.injected == ["9"] and ["9"] in report.diagnoses
    note = next(n for n in report.notes if n.startswith("injected fault"))
    assert note.startswith("injected fault (from the file): 9 (the file's gate 11, output variable 8;")


def test_every_mbd_mobs_instance_passes_the_strict_reader() -> None:
    from cda.diagnosis.wcnf_import import read_wcnf

    files = sorted(MOBS.rglob("*.wcnf.gz"))
    if not files:
        pytest.skip("needs ../shared/data/mbd-mobs")
    for path in files:
        w = read_wcnf(path)
        assert w.observations and w.health, path


@pytest.mark.skipif(not C17.exists(), reason=f"{C17} is absent")
def test_cli_diagnose_text_names_the_empty_diagnosis_and_counts_in_the_singular(tmp_path: Path) -> None:
    obs = tmp_path / "obs.txt"
    obs.write_text("1=1 2=0\n")  # consistent with a healthy circuit: the one diagnosis is "no fault"
    out = io.StringIO()
    assert main(["diagnose", str(C17), "--observations", str(obs)], out, io.StringIO()) == 0
    lines = out.getvalue().splitlines()
    assert "1 diagnosis (complete)" in lines[0] and "1 observation," in lines[0]
    assert lines[1:] == ["  (no fault)"]


def test_interpreted_and_compiled_simulation_agree() -> None:
    """The simulator interprets its first passes and compiles the circuit after: both give every
    net's vector alike, broken gates' overrides included (random circuits, every gate type)."""
    rng = random.Random(7)
    for _ in range(30):
        circuit = circuit_of(_random_circuit(rng))
        width = 64
        mask = (1 << width) - 1
        inputs = [rng.getrandbits(width) for _ in circuit.inputs]
        overrides = [rng.getrandbits(width) if rng.random() < 0.3 else None for _ in circuit.gates]
        assert circuit._interpret(inputs, overrides, mask) == circuit._compile()(inputs, overrides, mask)


def test_gates_are_read_from_their_clauses_by_shape_or_by_truth_table() -> None:
    """A gate's Tseitin clauses give its type at once; any other clause set goes through the truth
    table; both must say what the clauses say (checked row by row here)."""
    from cda.diagnosis.wcnf_import import _gate_cnf, _standard_gate

    for kind in ("AND", "NAND", "OR", "NOR", "XOR", "XNOR"):
        for n in (2, 3):
            ins, out = list(range(1, n + 1)), n + 1
            clauses = [sorted(c) for c in _gate_cnf(kind, out, ins)]
            assert _standard_gate(clauses, out, ins) == kind
            for bits in itertools.product([False, True], repeat=n):
                value = {i: b for i, b in zip(ins, bits)}
                fits = [
                    o for o in (False, True)
                    if all(any((o if abs(v) == out else value[abs(v)]) == (v > 0) for v in c) for c in clauses)
                ]
                assert fits == [_eval(kind, list(bits))]
    # the same AND with one clause weakened is no standard gate: the truth table decides it
    assert _standard_gate([[3, -1, -2], [-3, 1]], 3, [1, 2]) is None


def test_template_copies_and_built_groups_agree_with_brute_force() -> None:
    """On clingo the groups are copies of the circuit's clause template (``add_copy``); with the
    template taken away they are built one by one from the IR. Both, lazily and eagerly, equal
    brute force; so does z3, which builds every group."""
    rng = random.Random(29)
    for case in range(8):
        net = _random_circuit(rng)
        observations = _faulty_observations(net, rng, rng.randint(2, 14), partial=case % 2 == 1)
        expected = _brute_minimal(net, observations)
        grouped = load_bench(net, observations, MinimalGoal()).problem
        assert grouped.template is not None
        built = GroupedProblem(grouped.base, len(grouped), grouped.group, grouped.oracle)  # no template
        for problem in (grouped, built):
            for lazy in (True, False):
                r = run(problem, "clingo", EngineOptions(lazy_observations=lazy, check_minimality=True))
                assert r.minimal_complete
                assert [[a[3:-1] for a in d] for d in r.minimal_explanations or []] == expected, (case, lazy)


def test_a_template_mentioning_a_non_abducible_is_refused() -> None:
    from cda.encodings.ir import AtomInfo, GroundProblem, NodeFactory
    from cda.solver.observations import GroupTemplate

    f = NodeFactory()
    base = GroundProblem(f, minimal=MinimalGoal())
    base.atoms["a"] = AtomInfo("a", "hyp", "a", ())
    base.atoms["z"] = AtomInfo("z", "var", "z", ())

    def template(shared: tuple[str, ...], clauses: tuple[tuple[int, ...], ...]) -> GroupTemplate:
        return GroupTemplate(("x",), shared, clauses, lambda i: {}, lambda s, i: f"{s}@{i}", lambda i: f"g{i}")

    ok = GroupedProblem(base, 1, lambda i: None, None, template(("a",), ((1, 2),)))  # type: ignore[arg-type, return-value]
    assert ok.template is not None
    for bad in (template(("z",), ((1, 2),)), template(("a",), ((1, 3),))):
        with pytest.raises(GroupContractError):
            assert GroupedProblem(base, 1, lambda i: None, None, bad).template is None  # type: ignore[arg-type, return-value]


def test_the_oracle_stops_at_the_deadline() -> None:
    from cda.contracts.deadline import OutOfTime

    rng = random.Random(5)
    net = _random_circuit(rng)
    observations = _faulty_observations(net, rng, 4)
    sim = Simulator(circuit_of(net), observations)
    with pytest.raises(OutOfTime):
        sim.refuting([net.gates[0][0]], [0, 1, 2, 3], Deadline(0))


@pytest.mark.skipif(not (MOBS / "c17" / "c17mut8n.wcnf.gz").exists(), reason="needs ../shared/data/mbd-mobs")
def test_gates_named_by_numbers_are_listed_in_numeric_order() -> None:
    """Issue 27: gate lists were sorted as text ("15, 7"): gates named by their health variable
    read 7 before 15, in each diagnosis and in the order of the diagnoses."""
    from cda.diagnosis.diagnose import diagnose, render

    report = diagnose(MOBS / "c17" / "c17mut8n.wcnf.gz", None)
    assert report.diagnoses[:3] == [["9"], ["7", "15"], ["7", "17"]]
    assert all(int(a) < int(b) for d in report.diagnoses for a, b in zip(d, d[1:]))
    assert "\n  7, 15\n" in render(report) and "15, 7" not in render(report)


def test_one_diagnosis_is_one_diagnosis(tmp_path: Path) -> None:
    """Issue 27: "1 diagnoses"."""
    from cda.diagnosis.probe import ProbeRun, render_run

    (tmp_path / "c.bench").write_text("INPUT(a)\nOUTPUT(y)\ny = NOT(a)\n")
    (tmp_path / "c.obs").write_text("a=1 y=1\n")
    out = io.StringIO()
    assert main(["diagnose", str(tmp_path / "c.bench"), "--observations", str(tmp_path / "c.obs")], stdout=out,
                stderr=io.StringIO()) == 0
    assert ": 1 diagnosis (complete)" in out.getvalue()
    run_ = ProbeRun(file="c.bench", backend="clingo", injected=["y"], vectors=1, timed_out=False, initial_diagnoses=1,
                    strategy="ig", steps=[], resolved=True, probes=0, time_s=0.0, final=[["y"]], notes=[])
    assert "1 diagnosis at first" in render_run(run_)
