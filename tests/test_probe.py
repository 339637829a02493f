"""Next-best probes (issue 3, part 4): expected information gain over the current diagnoses,
and the simulated measure–update loop.

Oracles: the gain of every candidate probe is recomputed by brute force, from predictions made
by enumerating every choice of the broken gates' outputs and hidden inputs with a plain
one-vector simulator, and from posteriors written out for each outcome; the loop must end with
(a subset of) the injected fault among the final diagnoses."""

from __future__ import annotations

import io
import itertools
import json
import math
import random
from collections.abc import Iterator
from fractions import Fraction
from pathlib import Path

import pytest

from cda.diagnosis.bench_import import Netlist, load_bench, parse_bench
from cda.diagnosis.probe import ProbeState, diagnosis_prior, failing_vectors, simulate_probing
from cda.encodings.ir import MinimalGoal
from tests.conftest import DATA
from tests.probe_cli import main_probe
from tests.test_diagnosis import _brute_minimal, _eval, _faulty_observations, _random_circuit

C17 = DATA / "iscas85" / "c17.bench"
C432 = DATA / "iscas85" / "c432.bench"


def _values(net: Netlist, broken: set[str], obs: dict[str, bool], target: str) -> set[bool]:
    """Every value ``target`` takes over the completions of ``obs`` with ``broken`` free."""
    free_inputs = [i for i in net.inputs if i not in obs]
    kinds = {g: (k, ins) for g, k, ins in net.gates}
    seen: set[bool] = set()
    for bits in itertools.product([False, True], repeat=len(broken) + len(free_inputs)):
        values = {i: obs[i] for i in net.inputs if i in obs}
        values.update(zip(free_inputs, bits[len(broken):]))
        chosen = dict(zip(sorted(broken), bits[: len(broken)]))
        for g, _, _ in net.gates:
            k, ins = kinds[g]
            values[g] = chosen[g] if g in broken else _eval(k, [values[i] for i in ins])
        if all(values[n] == v for n, v in obs.items()):
            seen.add(values[target])
    return seen


def _entropy(ps: list[Fraction]) -> float:
    return -math.fsum(float(p) * math.log2(float(p)) for p in ps if p > 0)


def _oracle(net: Netlist, observations: list[dict[str, bool]], diagnoses: list[list[str]],
            failure: dict[str, Fraction], j: int, target: str) -> tuple[float, float]:
    """(gain, P(1)) written out: prior ∝ Π p/(1-p); likelihood 1, 0 or 1/2; posterior per outcome."""
    weights = [math.prod((failure[g] / (1 - failure[g]) for g in d), start=Fraction(1)) for d in diagnoses]
    prior = [w / sum(weights) for w in weights]
    lik1 = []
    for d in diagnoses:
        vals = _values(net, set(d), observations[j], target)
        assert vals, "a diagnosis is consistent with its observations"
        lik1.append(Fraction(1) if vals == {True} else Fraction(0) if vals == {False} else Fraction(1, 2))
    expected = 0.0
    p_one = sum(p * q for p, q in zip(prior, lik1))
    for p_out, lik in ((p_one, lik1), (1 - p_one, [1 - q for q in lik1])):
        if p_out == 0:
            continue
        expected += float(p_out) * _entropy([p * q / p_out for p, q in zip(prior, lik)])
    return _entropy(prior) - expected, float(p_one)


def test_gain_matches_brute_force_expected_entropy() -> None:
    rng = random.Random(2)
    checked, informative = 0, 0
    for case in range(40):
        net = _random_circuit(rng)
        observations = _faulty_observations(net, rng, rng.randint(1, 2), partial=case % 3 == 2)
        diagnoses = _brute_minimal(net, observations)
        if len(diagnoses) < 2:
            continue
        gates = [g for g, _, _ in net.gates]
        failure = {g: Fraction(rng.choice([1, 2, 5, 10]), 100) for g in gates} if case % 2 else dict.fromkeys(
            gates, Fraction(1, 100))
        inst = load_bench(net, observations, MinimalGoal())
        assert inst.circuit is not None
        state = ProbeState(inst.circuit, observations, diagnoses, {g: float(p) for g, p in failure.items()})
        ranked = state.rank()
        assert {(c.observation, c.net) for c in ranked} == {
            (j, n) for j, o in enumerate(observations) for n in net.inputs + gates if n not in o}
        for choice in ranked:
            gain, p_one = _oracle(net, observations, diagnoses, failure, choice.observation, choice.net)
            assert choice.gain == pytest.approx(gain, abs=1e-9)
            assert choice.p_one == pytest.approx(p_one, abs=1e-9)
            checked += 1
            informative += choice.gain > 1e-9
        # best first; ties by test vector, then netlist position
        position = {n: i for i, n in enumerate(inst.circuit.nets)}
        assert ranked == sorted(ranked, key=lambda c: (-c.gain, c.observation, position[c.net]))
    assert checked > 100 and informative > 20


def test_prior_is_the_independent_failure_prior() -> None:
    assert diagnosis_prior([["a"], ["a", "b"]], 0.5) == [0.5, 0.5]
    got = diagnosis_prior([["a"], ["b"], ["a", "c"]], {"a": 0.1, "b": 0.2, "c": 0.5})
    w = [0.1 / 0.9, 0.2 / 0.8, 0.1 / 0.9]
    assert got == pytest.approx([x / sum(w) for x in w])


def test_measuring_updates_like_a_fresh_simulation_and_keeps_diagnoses_exactly() -> None:
    """After a measurement, the masked simulations predict what a fresh simulation of the updated
    observations predicts; when no diagnosis is refuted, the minimal diagnoses are unchanged."""
    rng = random.Random(8)
    kept = 0
    for _ in range(12):
        net = _random_circuit(rng)
        flipped = rng.sample([g for g, _, _ in net.gates], 1)
        inst = load_bench(net, [{}], MinimalGoal())
        assert inst.circuit is not None
        observations = failing_vectors(inst.circuit, net.outputs, flipped, 2, rng)
        if not observations:
            continue
        truth = [inst.circuit.evaluate({i: o[i] for i in net.inputs}, flipped) for o in observations]
        diagnoses = _brute_minimal(net, observations)
        state = ProbeState(inst.circuit, observations, diagnoses)
        for _ in range(4):
            cands = state.candidates()
            if not cands:
                break
            j, n = cands[rng.randrange(len(cands))]
            refuted = state.measure(j, n, truth[j][n])
            fresh = ProbeState(inst.circuit, state.observations, diagnoses)
            assert refuted == any(not _values(net, set(d), state.observations[j], n) for d in diagnoses)
            if refuted:
                diagnoses = _brute_minimal(net, state.observations)
                state = ProbeState(inst.circuit, state.observations, diagnoses)
                continue
            assert (state.likelihoods(fresh.candidates()) == fresh.likelihoods(fresh.candidates())).all()
            assert _brute_minimal(net, state.observations) == diagnoses
            kept += 1
    assert kept > 5


@pytest.mark.parametrize("strategy", ["ig", "random"])
def test_loop_ends_with_the_injected_fault_on_random_circuits(strategy: str) -> None:
    rng = random.Random(4)
    runs = 0
    for _ in range(10):
        net = _random_circuit(rng)
        inst = load_bench(net, [{}], MinimalGoal())
        assert inst.circuit is not None
        flipped = rng.sample([g for g, _, _ in net.gates], rng.randint(1, 2))
        if not failing_vectors(inst.circuit, net.outputs, flipped, 1, random.Random(0)):
            continue
        run = simulate_probing(inst, flipped, strategy=strategy, seed=0, backend="clingo")
        assert any(set(d) <= set(flipped) for d in run.final), (flipped, run.final)
        if run.resolved and len(flipped) == 1:
            assert run.final == [flipped]
        runs += 1
    assert runs >= 5


@pytest.mark.skipif(not C432.exists(), reason=f"{C432} is absent (external data, README.md, Test data)")
@pytest.mark.parametrize("backend", ["clingo", "z3"])
def test_loop_on_c432_single_and_double_faults(backend: str) -> None:
    net = parse_bench(C432.read_text(), str(C432))
    inst = load_bench(net, [{}], MinimalGoal())
    rng = random.Random(43)
    gates = [g for g, _, _ in net.gates]
    for size in (1, 2):
        flipped = rng.sample(gates, size)
        ig = simulate_probing(inst, flipped, strategy="ig", seed=1, backend=backend, max_size=2)
        assert ig.resolved and len(ig.final) == 1 and set(ig.final[0]) <= set(flipped)
        assert ig.probes < ig.initial_diagnoses  # each probe is informative
        assert all(s.gain_bits is not None and s.gain_bits > 0 for s in ig.steps)


@pytest.mark.skipif(not C17.exists(), reason=f"{C17} is absent (external data, README.md, Test data)")
def test_cli_probe(tmp_path: Path) -> None:
    obs = tmp_path / "obs.txt"
    obs.write_text("1 2 3 6 7 22 23\n1 0 1 1 0 0 1\n")
    out, err = io.StringIO(), io.StringIO()
    code = main_probe(C17, obs, "auto", 3, 0.01, None, None, "ig", 1, 0, None, True, out, err)
    assert code == 0, err.getvalue()
    data = json.loads(out.getvalue())
    assert data["diagnoses"] == [["10", "19"], ["10", "23"], ["16", "22"], ["19", "22"], ["22", "23"]]
    gains = [p["gain_bits"] for p in data["probes"]]
    assert len(gains) == 3 and gains == sorted(gains, reverse=True) and gains[0] > 0
    out = io.StringIO()
    code = main_probe(C17, None, "clingo", 3, 0.01, None, ["22"], "ig", 1, 0, None, True, out, io.StringIO())
    run = json.loads(out.getvalue())
    assert code == 0 and run["resolved"] and run["final"] == [["22"]]
    for args in ((C17, None, None), (C17, obs, ["nope"]), (tmp_path / "none.bench", obs, None)):
        err = io.StringIO()
        code = main_probe(args[0], args[1], "auto", 3, 0.01, None, args[2], "ig", 1, 0, None, False, io.StringIO(), err)
        assert code == 2 and "Traceback" not in err.getvalue() and "error" in err.getvalue()


@pytest.mark.skipif(not C17.exists(), reason=f"{C17} is absent (external data, README.md, Test data)")
def test_cda_probe_command_line(tmp_path: Path) -> None:
    """``cda probe`` is wired into the console script: same answer as ``main_probe``."""
    from cda.cli.main import main

    obs = tmp_path / "obs.txt"
    obs.write_text("1 2 3 6 7 22 23\n1 0 1 1 0 0 1\n")
    out, err = io.StringIO(), io.StringIO()
    code = main(["probe", str(C17), "--observations", str(obs), "--top", "2", "--json"], stdout=out, stderr=err)
    assert code == 0, err.getvalue()
    data = json.loads(out.getvalue())
    assert len(data["probes"]) == 2 and data["diagnoses"][0] == ["10", "19"]
    out = io.StringIO()
    code = main(["probe", str(C17), "--inject", "22", "--strategy", "random", "--json"], stdout=out, stderr=io.StringIO())
    run = json.loads(out.getvalue())
    assert code == 0 and run["resolved"] and run["final"] == [["22"]]


def _bench_text(net: Netlist) -> str:
    lines = [f"INPUT({i})" for i in net.inputs] + [f"OUTPUT({o})" for o in net.outputs]
    return "\n".join(lines + [f"{g} = {k}({', '.join(ins)})" for g, k, ins in net.gates]) + "\n"


def test_interactive_loop_measures_until_one_diagnosis(tmp_path: Path) -> None:
    """The interactive loop, answered from a faulty copy of random circuits: bad answers are
    asked again, and every report's diagnoses are brute force's under the measurements so far."""
    from cda.diagnosis.diagnose import load_instance
    from cda.diagnosis.probe import interactive_probing

    rng = random.Random(11)
    loops = 0
    for _ in range(12):
        net = _random_circuit(rng)
        broken = set(rng.sample([g for g, _, _ in net.gates], 1))
        kinds = {g: (k, ins) for g, k, ins in net.gates}
        values = {i: rng.random() < 0.5 for i in net.inputs}
        for g, _, _ in net.gates:
            k, ins = kinds[g]
            values[g] = _eval(k, [values[i] for i in ins]) != (g in broken)
        first = {x: values[x] for x in net.inputs + net.outputs}
        if not _brute_minimal(net, [first]) or _brute_minimal(net, [first]) == [[]]:
            continue  # the fault does not show in this vector
        bench, obs = tmp_path / "c.bench", tmp_path / "obs.txt"
        bench.write_text(_bench_text(net))
        obs.write_text(" ".join(f"{x}={int(v)}" for x, v in first.items()) + "\n")
        answers = iter(["maybe", "nosuchnet=1"])
        asked: list[str] = []

        def ask(
            prompt: str, asked: list[str] = asked, answers: Iterator[str] = answers, values: dict[str, bool] = values
        ) -> str | None:
            asked.append(prompt)
            scripted = next(answers, None)
            if scripted is not None:
                return scripted
            proposed = prompt.split("measure net ", 1)[1].split(" ", 1)[0]
            return str(int(values[proposed]))

        out = io.StringIO()
        final, timed_out = interactive_probing(
            load_instance(bench, obs, MinimalGoal()), ask, out, backend="clingo", file=str(bench)
        )
        assert not timed_out
        text = out.getvalue()
        reports = text.split(f"{bench}: ")[1:]
        if len(reports) > 1:  # two bad answers asked again, then one measurement per new report
            loops += 1
            assert len(asked) == 2 + len(reports) - 1
            assert "expected 0, 1, NET=0, NET=1 or q, got 'maybe'" in text and "has no net 'nosuchnet'" in text
        # the last report's diagnoses (the indented lines under its header) are brute force's
        # under every measurement taken
        shown = []
        for line in reports[-1].split("\n")[1:]:
            if not line.startswith("  "):
                break
            shown.append(line.strip().split(", "))
        assert shown == _brute_minimal(net, final)
        assert len(shown) == 1 or "next probes" not in reports[-1]
        assert all(final[0][x] == values[x] for x in final[0])  # measured from the faulty circuit
        assert any(set(d) <= broken for d in _brute_minimal(net, final))
    assert loops >= 3


@pytest.mark.skipif(not C17.exists(), reason=f"{C17} is absent (external data, README.md, Test data)")
def test_a_max_size_that_hides_every_diagnosis_says_so(tmp_path: Path) -> None:
    """Every diagnosis of this observation has two gates (checked unbounded): ``--max-size 1``
    printed "0 diagnoses (complete)"; it must say that the bound hid them."""
    obs = tmp_path / "obs.txt"
    obs.write_text("1=0 2=0 3=0 6=0 7=1 22=1 23=0\n")
    out = io.StringIO()
    assert main_probe(C17, obs, "auto", 3, 0.01, None, None, "ig", 1, 0, None, True, out, io.StringIO()) == 0
    unbounded = json.loads(out.getvalue())["diagnoses"]
    assert unbounded and min(len(d) for d in unbounded) == 2
    out = io.StringIO()
    assert main_probe(C17, obs, "auto", 3, 0.01, 1, None, "ig", 1, 0, None, False, out, io.StringIO()) == 0
    text = out.getvalue()
    assert "0 diagnoses (complete up to 1 gate)" in text and "(complete)" not in text
    assert "the bound hid every diagnosis" in text
    out = io.StringIO()
    assert main_probe(C17, obs, "auto", 3, 0.01, 1, None, "ig", 1, 0, None, True, out, io.StringIO()) == 0
    data = json.loads(out.getvalue())
    assert data["diagnoses"] == [] and data["max_size"] == 1 and any("hid every diagnosis" in n for n in data["notes"])
    out = io.StringIO()
    assert main_probe(C17, obs, "auto", 3, 0.01, 2, None, "ig", 1, 0, None, False, out, io.StringIO()) == 0
    assert f"{len(unbounded)} diagnoses (complete up to 2 gates)" in out.getvalue()
    assert "larger ones may exist" in out.getvalue()


@pytest.mark.skipif(not C17.exists(), reason=f"{C17} is absent (external data, README.md, Test data)")
@pytest.mark.parametrize("inject", [["10,10"], ["10", "10"]])
def test_probe_refuses_a_gate_injected_twice(inject: list[str]) -> None:
    err = io.StringIO()
    code = main_probe(C17, None, "clingo", 3, 0.01, None, inject, "ig", 1, 0, None, False, io.StringIO(), err)
    assert code == 2 and "cda: error: --inject names gate 10 more than once" in err.getvalue()


def test_one_diagnosis_left_of_a_cut_list_is_not_resolved() -> None:
    """``resolved`` read ``len(diagnoses) == 1`` alone: one diagnosis left of a list cut by the
    time budget or the cap proves nothing about those it did not hold."""
    from types import SimpleNamespace

    from cda.diagnosis.probe import _Session

    def resolved(**kw: object) -> bool:
        state = {"diagnoses": [["10"]], "complete": True, "timed_out": False, **kw}
        return _Session.resolved(SimpleNamespace(**state))  # type: ignore[arg-type]

    assert resolved()
    assert not resolved(complete=False) and not resolved(timed_out=True)
    assert not resolved(diagnoses=[["10"], ["16"]]) and not resolved(diagnoses=[])
