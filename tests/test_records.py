"""Hypothesis records computed by the solver, against brute force over every assignment.

Random small problems (≤ 3 abducibles, ≤ 3 observables, a few hard clauses, literal
observations, soft clauses on the abducibles); the oracle enumerates all 2^n assignments and
answers each field from its definition (cda/solver/records.py), on both backends.
"""

from __future__ import annotations

import itertools
import json
import math
from fractions import Fraction
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cda.api import ground
from cda.solver.information import information_gain
from cda.solver.records import NO_FALSIFIER, hypothesis_record, solve_records

BACKENDS = ["z3", "clingo"]


def formulas(atoms: list[str]) -> st.SearchStrategy[tuple[str, object]]:
    """A formula as (DSL text, evaluation tree)."""
    leaf = st.sampled_from(atoms).map(lambda a: (a, ("atom", a)))

    def extend(inner: st.SearchStrategy[tuple[str, object]]) -> st.SearchStrategy[tuple[str, object]]:
        neg = inner.map(lambda f: (f"not ({f[0]})", ("not", f[1])))
        bins = st.tuples(st.sampled_from(["and", "or", "implies", "iff"]), inner, inner).map(
            lambda t: (f"({t[1][0]}) {t[0]} ({t[2][0]})", (t[0], t[1][1], t[2][1])))
        return neg | bins

    return st.recursive(leaf, extend, max_leaves=4)


def value(tree: object, env: dict[str, bool]) -> bool:
    op, *args = tree  # type: ignore[misc]
    if op == "atom":
        return env[args[0]]
    if op == "not":
        return not value(args[0], env)
    a, b = value(args[0], env), value(args[1], env)
    return {"and": a and b, "or": a or b, "implies": (not a) or b, "iff": a == b}[op]


@st.composite
def problems(draw: st.DrawFn) -> dict[str, object]:
    hyps = [f"a{i}" for i in range(draw(st.integers(1, 3)))]
    obs = [f"o{i}" for i in range(draw(st.integers(1, 3)))]
    atoms = hyps + obs
    hard = draw(st.lists(formulas(atoms), min_size=1, max_size=3))
    observed = draw(st.lists(st.tuples(st.sampled_from(obs), st.booleans()), max_size=2, unique_by=lambda t: t[0]))
    soft = draw(st.lists(st.tuples(st.sampled_from(hyps), st.integers(1, 3)), max_size=3, unique_by=lambda t: t[0]))
    lines = [f"hyp {', '.join(hyps)}", f"observable {', '.join(obs)}"]
    lines += [f"hard: {text}" for text, _ in hard]
    lines += [f"observe {'' if v else 'not '}{o}" for o, v in observed]
    lines += [f"soft: not {a} weight {w}" for a, w in soft]
    return {"text": "\n".join(lines) + "\n", "hyps": hyps, "obs": obs, "hard": [t for _, t in hard],
            "observed": observed, "soft": soft}


def brute(p: dict[str, object]) -> dict[frozenset[str], dict[str, object]]:
    """Every hypothesis (projection of a model of H ∧ O) and what its record must say."""
    hyps, obs = p["hyps"], p["obs"]
    assert isinstance(hyps, list) and isinstance(obs, list)
    atoms = hyps + obs
    envs = [dict(zip(atoms, bits)) for bits in itertools.product([False, True], repeat=len(atoms))]
    hard = [e for e in envs if all(value(t, e) for t in p["hard"])]  # type: ignore[attr-defined]
    observed = p["observed"]
    assert isinstance(observed, list)
    lits = [(o, v) for o, v in observed]

    def holds(e: dict[str, bool]) -> bool:
        return all(e[o] == v for o, v in lits)

    both = [e for e in hard if holds(e)]
    out: dict[frozenset[str], dict[str, object]] = {}
    unobserved = [o for o in obs if o not in {o for o, _ in lits}]
    for e in both:
        key = frozenset(a for a in hyps if e[a])
        if key in out:
            continue
        under_h = [x for x in hard if all(x[a] == (a in key) for a in hyps)]
        under_all = [x for x in under_h if holds(x)]
        cost = min(sum(Fraction(w) for a, w in p["soft"] if x[a]) for x in under_all)  # type: ignore[attr-defined]
        out[key] = {
            "for": [i for i, (o, v) in enumerate(lits)
                    if all(x[o] == v for x in under_h) and not all(x[o] == v for x in hard)],
            "unexplained": [i for i, (o, v) in enumerate(lits)
                            if not all(x[o] == v for x in under_h) and not all(x[o] == v for x in hard)],
            "fixed": {o: under_all[0][o] for o in unobserved if len({x[o] for x in under_all}) == 1},
            "cost": cost,
        }
    return out


@pytest.mark.parametrize("backend", BACKENDS)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(p=problems())
def test_records_match_brute_force(backend: str, p: dict[str, object]) -> None:
    text = p["text"]
    assert isinstance(text, str)
    gp = ground(text)
    expect = brute(p)
    found = solve_records(gp, backend, top=len(expect) or 1)
    if not expect:
        assert found is None
        return
    assert found is not None
    assert {frozenset(r.assumed) for r in found.records} == set(expect)
    obs_names = [c.name for c in gp.clauses if c.kind == "observation"]
    # the posterior the gains are taken over, from the brute-force costs
    keys = sorted(expect, key=lambda k: (expect[k]["cost"], len(k), sorted(k)))
    low = min(expect[k]["cost"] for k in keys)  # type: ignore[type-var]
    weights = [math.exp(-float(expect[k]["cost"] - low)) for k in keys]  # type: ignore[operator]
    prior = [w / math.fsum(weights) for w in weights]
    gains = {}
    for o in [t.observable for t in found.tests]:
        lik = [(1.0 if expect[k]["fixed"][o] else 0.0) if o in expect[k]["fixed"] else 0.5  # type: ignore[index]
               for k in keys]
        gains[o] = information_gain(prior, lik)[0]
    for t in found.tests:
        assert t.expected_information_gain == pytest.approx(gains[t.observable], abs=1e-8)
    best_gain = -1.0
    for r in found.records:
        e = expect[frozenset(r.assumed)]
        assert list(r.evidence_for) == [obs_names[i] for i in e["for"]]  # type: ignore[attr-defined]
        assert list(r.unexplained) == [obs_names[i] for i in e["unexplained"]]  # type: ignore[attr-defined]
        assert {f.observable: f.predicted for f in r.falsifiers} == e["fixed"]
        useful = [f for f in r.falsifiers if gains[f.observable] > 1e-9]
        if not useful:
            assert r.next_probe is None or r.next_probe.gain <= 1e-8
        else:
            assert r.next_probe is not None
            assert gains[r.next_probe.observable] == pytest.approx(max(gains[f.observable] for f in useful), abs=1e-8)
        if r.next_probe is not None:
            best_gain = max(best_gain, r.next_probe.gain)
        rec = hypothesis_record(r, {c.name: c for c in gp.clauses}, {s.name: s.line for s in gp.soft},
                                "p.cda", text.split("\n"))
        assert len(rec.falsifiers) == len(r.falsifiers)
        assert (rec.falsifiers_note == NO_FALSIFIER) == (not r.falsifiers)
        for f in r.falsifiers:  # the refuting observation is the other value
            assert f"observe {'not ' if e['fixed'][f.observable] else ''}{f.observable}" in rec.falsifiers  # type: ignore[index]
    chosen = next(r for r in found.records if r.id == found.selected)
    if best_gain >= 0:
        assert chosen.next_probe is not None and chosen.next_probe.gain == best_gain
        assert chosen.next_probe.observable in found.reason
    else:
        assert chosen.id == "h1" and "no hypothesis has a probe" in found.reason


def test_records_cite_clause_and_line_and_say_when_nothing_is_predicted() -> None:
    text = "hyp a, b\nobservable o, q\nhard: o iff a\nobserve o\nsoft: not a weight 1\n"
    gp = ground(text)
    found = solve_records(gp, "z3", top=5)
    assert found is not None
    [r] = [x for x in found.records if x.assumed == ("a",)]  # b is free: two hypotheses assume a
    rec = hypothesis_record(r, {c.name: c for c in gp.clauses}, {s.name: s.line for s in gp.soft}, "p.cda",
                            text.split("\n"))
    assert [(e.source, e.excerpt) for e in rec.evidence_for] == [("p.cda:line:4", "observe@4: observe o")]  # type: ignore[union-attr]
    assert rec.evidence_against[0].excerpt == "violates soft clause soft@5: soft: not a weight 1"  # type: ignore[union-attr]
    assert rec.falsifiers == [] and rec.falsifiers_note == NO_FALSIFIER  # q is unconstrained
    assert rec.next_probe is None


def test_action_records_are_the_solvers_and_cite_the_inputs(tmp_path: Path) -> None:
    """An Action's hypotheses carry the records computed here (not one shared list of next
    tests): the oracle is solve_records on the same problem as one text."""
    from cda.ken.loaders import load_ken
    from tests.test_actions import EXAMPLE, _as_one_text, _outage, run_inputs_here

    inputs = _outage()
    run = run_inputs_here(inputs, tmp_path)
    hypotheses = json.loads((tmp_path / run.outputs.action_id / "cda_plan" / "hypotheses.json").read_text())
    gp = ground(_as_one_text(inputs), ken=load_ken(EXAMPLE.parent / inputs.ken.path))  # type: ignore[union-attr]
    found = solve_records(gp, "clingo", top=len(hypotheses))
    assert found is not None and hypotheses and len(found.records) == len(hypotheses)
    for data, r in zip(hypotheses, found.records):
        assert data["assumptions"] == list(r.assumed)
        assert data["falsifiers"] == [f"observe {f.refuting}" for f in r.falsifiers]
        assert data["next_probe"] == (r.next_probe.observable if r.next_probe else None)
        assert len(data["evidence_for"]) == len(r.evidence_for) > 0
        assert data["selected"] == (r.id == found.selected)
    assert len({tuple(d["falsifiers"]) for d in hypotheses}) > 1  # each its own, not the problem's top 3
    assert any(e["source"].startswith("pager:") for d in hypotheses for e in d["evidence_for"])
