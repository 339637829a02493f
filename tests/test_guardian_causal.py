"""The causal simulator against answers computed independently of it.

Linear-Gaussian models have closed forms: with the structural equations written ``X = c + B X +
D ε``, ``X = (I - B)^-1 (c + D ε)``, so the means are ``A c`` and the covariance ``A D² Aᵀ`` with
``A = (I - B)^-1``; the test computes these exactly with sympy's rational matrices (no code shared
with the simulator) and a crossing probability with the normal CDF (``math.erfc``). An
intervention ``do(m = v)`` is the same algebra with m's row of B and its noise set to zero and its
intercept to v. Logistic nodes are checked against enumeration (Bernoulli parents) and
Gauss-Hermite quadrature (Gaussian noise inside the sigmoid). Monte Carlo answers must fall within
four of their own standard errors, and those errors must match the theoretical ones.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from datetime import UTC, datetime
from fractions import Fraction
from typing import Any

import pytest
import sympy
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from cda.guardian.causal import (
    MAX_SAMPLES,
    CausalHypothesis,
    CausalPrediction,
    CausalSimulator,
    simulate,
)
from cda.guardian.causal_model import CausalModel, load_causal_model
from tests.conftest import EXAMPLES, ROOT

SIGMAS = 4  # how many standard errors a Monte Carlo estimate may be from the exact answer


# ----------------------------------------------------------------------- independent algebra


def gaussian_moments(spec: dict[str, Any], do: dict[str, Fraction]) -> tuple[dict[str, Any], Any]:
    """Exact means and covariance of a linear-Gaussian model dict under ``do`` (node -> value),
    by rational linear algebra: X = c + B X + D ε  =>  X = A (c + D ε), A = (I - B)^-1."""
    names = sorted(spec["nodes"])
    index = {n: i for i, n in enumerate(names)}
    k = len(names)
    b = sympy.zeros(k, k)
    c = sympy.zeros(k, 1)
    d2 = sympy.zeros(k, k)
    for name, node in spec["nodes"].items():
        i = index[name]
        if name in do:
            c[i] = sympy.Rational(do[name])
            continue
        assert node["mechanism"] == "linear"
        c[i] = sympy.Rational(str(node.get("intercept", 0)))
        for parent, coef in node.get("parents", {}).items():
            b[i, index[parent]] = sympy.Rational(str(coef))
        d2[i, i] = sympy.Rational(str(node.get("noise", 0))) ** 2
    a = (sympy.eye(k) - b).inv()
    mean = a * c
    cov = a * d2 * a.T
    return {n: mean[index[n]] for n in names}, {(m, n): cov[index[m], index[n]] for m in names for n in names}


def normal_tail(mu: float, var: float, threshold: float, direction: str) -> float:
    """P(X > t) or P(X < t) for X ~ N(mu, var), by the complementary error function."""
    z = (threshold - mu) / math.sqrt(2 * var)
    above = 0.5 * math.erfc(z)
    return above if direction == "above" else 1 - above


def sigmoid(x: float) -> float:
    return 1 / (1 + math.exp(-x))


def close(estimate: float, exact: float, standard_error: float) -> bool:
    return abs(estimate - exact) <= SIGMAS * standard_error


# ------------------------------------------------------------------------ linear-Gaussian


DIAMOND: dict[str, Any] = {
    "name": "diamond",
    "nodes": {
        "a": {"mechanism": "linear", "intercept": 1, "noise": 2},
        "b": {"mechanism": "linear", "intercept": -1, "parents": {"a": Fraction(3, 2)}, "noise": 1},
        "c": {"mechanism": "linear", "intercept": Fraction(1, 2), "parents": {"a": -1}, "noise": Fraction(1, 2)},
        "d": {"mechanism": "linear", "parents": {"b": 1, "c": 2}, "noise": 1},
        "e": {"input": "plan.level"},
        "f": {"mechanism": "linear", "parents": {"d": Fraction(1, 4), "e": 1}, "noise": 3},
    },
    "kpis": [
        {"name": "d_high", "node": "d", "threshold": 1, "direction": "above"},
        {"name": "f_low", "node": "f", "threshold": 0, "direction": "below"},
        {"name": "c_low", "node": "c", "threshold": -2, "direction": "below"},
    ],
}
N = 200_000


def test_linear_gaussian_means_variances_and_crossings_match_the_closed_form() -> None:
    model = load_causal_model(DIAMOND)
    prediction = simulate(model, {"plan": {"level": 2}}, samples=N, seed=11)
    mean, cov = gaussian_moments(DIAMOND, {"e": Fraction(2)})
    # d = b + 2c mixes two children of a with opposite signs: its variance needs the covariance
    assert cov["b", "c"] != 0 and cov["d", "d"] != cov["b", "b"] + 4 * cov["c", "c"] + 1
    for kpi in DIAMOND["kpis"]:
        est = prediction.kpi(kpi["name"])
        mu, var = float(mean[kpi["node"]]), float(cov[kpi["node"], kpi["node"]])
        assert est.approximate
        assert est.mean_standard_error == pytest.approx(math.sqrt(var / N), rel=0.02)
        assert close(est.mean, mu, est.mean_standard_error), (kpi, est.mean, mu)
        var_se = math.sqrt(2 * var * var / (N - 1))  # Gaussian: Var(s²) = 2σ⁴/(n-1)
        assert est.variance_standard_error == pytest.approx(var_se, rel=0.05)
        assert close(est.variance, var, var_se), (kpi, est.variance, var)
        p = normal_tail(mu, var, float(kpi["threshold"]), kpi["direction"])
        assert 0.01 < p < 0.99  # a crossing that the test can see both ways
        assert close(est.crossing_probability, p, math.sqrt(p * (1 - p) / N)), (kpi, est.crossing_probability, p)
    # risk is "any KPI crosses": at least each KPI's own probability, at most their sum
    probs = [k.crossing_probability for k in prediction.kpis]
    assert max(probs) <= prediction.risk_score <= min(1.0, sum(probs))
    assert prediction.risk_score > max(probs)  # these KPIs are not nested: the union is larger


def test_risk_score_is_the_probability_that_any_kpi_crosses() -> None:
    # two independent nodes: P(any) = 1 - (1 - p1)(1 - p2) exactly
    spec = {"nodes": {"u": {"mechanism": "linear", "noise": 1},
                      "v": {"mechanism": "linear", "intercept": 1, "noise": 2}},
            "kpis": [{"node": "u", "threshold": 1, "direction": "above"},
                     {"node": "v", "threshold": 0, "direction": "below"}]}
    n = 100_000
    p = simulate(load_causal_model(spec), {}, samples=n, seed=3)
    p1, p2 = normal_tail(0, 1, 1, "above"), normal_tail(1, 4, 0, "below")
    exact = 1 - (1 - p1) * (1 - p2)
    se = math.sqrt(exact * (1 - exact) / n)
    assert close(p.risk_score, exact, se)
    assert p.risk_standard_error == pytest.approx(se, rel=0.02)
    assert p.risk_score < p.risk_upper_95 < p.risk_score + 3 * se
    # with the KPIs the max would be p2 alone: the joint count is well above it
    assert p.risk_score > max(p1, p2) + 10 * se


def test_an_intervention_cuts_the_incoming_edges() -> None:
    # x -> m -> y and x -> y: do(m = 4) leaves x alone and feeds y the constant 4
    spec: dict[str, Any] = {
        "nodes": {
            "x": {"mechanism": "linear", "intercept": 1, "noise": 1},
            "m": {"input": "m", "mechanism": "linear", "parents": {"x": 2}, "noise": 1},
            "y": {"mechanism": "linear", "parents": {"x": 2, "m": 3}, "noise": 1},
        },
        "kpis": [{"node": "y", "threshold": 15, "direction": "above"},
                 {"node": "m", "threshold": 3, "direction": "above"},
                 {"node": "x", "threshold": 2, "direction": "above"}],
    }
    model = load_causal_model(spec)
    n = 100_000
    seen = simulate(model, {}, samples=n, seed=5)  # the field is optional: m follows its mechanism
    done = simulate(model, {"m": 4}, samples=n, seed=5)
    for prediction, do in ((seen, {}), (done, {"m": Fraction(4)})):
        mean, cov = gaussian_moments(spec, do)
        y = prediction.kpi("y")
        assert close(y.mean, float(mean["y"]), y.mean_standard_error)
        assert close(y.variance, float(cov["y", "y"]), math.sqrt(2 * float(cov["y", "y"]) ** 2 / (n - 1)))
    # by hand: y = 8x + 3ε_m + ε_y observed (64 + 9 + 1), y = 2x + 12 + ε_y under do(m = 4) (4 + 1)
    assert gaussian_moments(spec, {})[1]["y", "y"] == 74
    assert gaussian_moments(spec, {"m": Fraction(4)})[1]["y", "y"] == 5
    m = done.kpi("m")
    assert (m.mean, m.variance, m.crossing_probability) == (4.0, 0.0, 1.0)
    # the parent's draws do not move when its child is intervened on (its own stream)
    assert seen.kpi("x") == done.kpi("x")
    assert done.inputs == {"m": "4"} and seen.inputs == {}


_COEFS = [Fraction(c, 2) for c in range(-4, 5) if c]


@st.composite
def linear_gaussian_models(draw: st.DrawFn) -> tuple[dict[str, Any], dict[str, Fraction]]:
    """A random linear-Gaussian DAG of 2 to 6 nodes (edges only from lower to higher index),
    every node noisy, perhaps one node intervened on through an optional input."""
    k = draw(st.integers(2, 6))
    nodes: dict[str, Any] = {}
    for j in range(k):
        parents = draw(st.lists(st.integers(0, j - 1), unique=True, max_size=j)) if j else []
        nodes[f"n{j}"] = {"mechanism": "linear", "intercept": draw(st.integers(-3, 3)),
                          "parents": {f"n{i}": draw(st.sampled_from(_COEFS)) for i in parents},
                          "noise": draw(st.sampled_from([Fraction(1, 2), Fraction(1), Fraction(2)]))}
    do: dict[str, Fraction] = {}
    target = draw(st.none() | st.integers(0, k - 1))
    if target is not None:
        nodes[f"n{target}"]["input"] = "set"
        do[f"n{target}"] = Fraction(draw(st.integers(-5, 5)))
    kpis = [{"node": name, "threshold": draw(st.integers(-4, 4)), "direction": draw(st.sampled_from(["above", "below"]))}
            for name in nodes]
    return {"nodes": nodes, "kpis": kpis}, do


@settings(max_examples=25, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(linear_gaussian_models(), st.integers(0, 2**32 - 1))
def test_random_linear_gaussian_dags_match_the_closed_form(case: tuple[dict[str, Any], dict[str, Fraction]],
                                                          seed: int) -> None:
    spec, do = case
    n = 20_000
    params = {"set": next(iter(do.values()))} if do else {}
    prediction = simulate(load_causal_model(spec), params, samples=n, seed=seed)
    mean, cov = gaussian_moments(spec, do)
    for kpi in spec["kpis"]:
        est, node = prediction.kpi(kpi["node"]), kpi["node"]
        mu, var = float(mean[node]), float(cov[node, node])
        assert close(est.mean, mu, 1.25 * math.sqrt(var / n)), (node, est.mean, mu)  # 5 standard errors
        assert close(est.variance, var, 1.25 * math.sqrt(2 * var * var / (n - 1))), (node, est.variance, var)
        p = normal_tail(mu, var, kpi["threshold"], kpi["direction"]) if var else float(
            mu > kpi["threshold"] if kpi["direction"] == "above" else mu < kpi["threshold"])
        assert close(est.crossing_probability, p, 1.25 * max(math.sqrt(p * (1 - p) / n), 1 / n))


# ---------------------------------------------------------------------------------- logistic


def test_bernoulli_chain_matches_enumeration() -> None:
    spec = {
        "nodes": {
            "a": {"mechanism": "bernoulli", "intercept": Fraction(3, 10)},
            "b": {"mechanism": "bernoulli", "intercept": -1, "parents": {"a": 2}},
            "c": {"mechanism": "linear", "intercept": 1, "parents": {"a": 3, "b": -2}},
        },
        "kpis": [{"node": "b", "threshold": Fraction(1, 2), "direction": "above"},
                 {"node": "c", "threshold": Fraction(3, 2), "direction": "above"}],
    }
    n = 100_000
    p = simulate(load_causal_model(spec), {}, samples=n, seed=9)
    pa = sigmoid(0.3)
    joint = {}  # brute force over the four worlds
    for a in (0, 1):
        for b in (0, 1):
            pb = sigmoid(-1 + 2 * a)
            joint[a, b] = (pa if a else 1 - pa) * (pb if b else 1 - pb)
    p_b = sum(w for (_, b), w in joint.items() if b)
    e_c = sum(w * (1 + 3 * a - 2 * b) for (a, b), w in joint.items())
    v_c = sum(w * (1 + 3 * a - 2 * b - e_c) ** 2 for (a, b), w in joint.items())
    p_c = sum(w for (a, b), w in joint.items() if 1 + 3 * a - 2 * b > 1.5)
    b_est, c_est = p.kpi("b"), p.kpi("c")
    assert close(b_est.crossing_probability, p_b, math.sqrt(p_b * (1 - p_b) / n))
    assert close(b_est.mean, p_b, b_est.mean_standard_error)
    assert close(c_est.mean, e_c, c_est.mean_standard_error)
    assert close(c_est.variance, v_c, c_est.variance_standard_error)
    assert close(c_est.crossing_probability, p_c, math.sqrt(p_c * (1 - p_c) / n))
    # risk: b crosses or c crosses, counted per world
    p_any = sum(w for (a, b), w in joint.items() if b or 1 + 3 * a - 2 * b > 1.5)
    assert close(p.risk_score, p_any, math.sqrt(p_any * (1 - p_any) / n))


def test_bounded_logistic_with_noise_matches_quadrature() -> None:
    import numpy as np

    spec = {
        "nodes": {"x": {"input": "x"},
                  "y": {"mechanism": "logistic", "scale": 10, "intercept": Fraction(-1, 2), "parents": {"x": 2},
                        "noise": Fraction(7, 10)}},
        "kpis": [{"node": "y", "threshold": 8, "direction": "above"}],
    }
    n = 100_000
    est = simulate(load_causal_model(spec), {"x": 1}, samples=n, seed=2).kpi("y")
    t, w = np.polynomial.hermite.hermgauss(80)  # E[f(mu + s Z)] = Σ w f(mu + √2 s t) / √π
    values = [10 * sigmoid(1.5 + math.sqrt(2) * 0.7 * ti) for ti in t]
    mean = sum(wi * v for wi, v in zip(w, values)) / math.sqrt(math.pi)
    var = sum(wi * (v - mean) ** 2 for wi, v in zip(w, values)) / math.sqrt(math.pi)
    assert close(est.mean, mean, est.mean_standard_error)
    assert close(est.variance, var, est.variance_standard_error)
    # y > 8  <=>  1.5 + ε > logit(0.8)
    p = normal_tail(1.5, 0.49, math.log(4), "above")
    assert close(est.crossing_probability, p, math.sqrt(p * (1 - p) / n))
    assert 0 < est.mean < 10


# ------------------------------------------------------------------------------ determinism


_CHILD = """
import sys
from cda.guardian.causal import simulate
from cda.guardian.causal_model import load_causal_model
model = load_causal_model(sys.argv[1])
sys.stdout.write(simulate(model, {"budget_usd": 20000, "ads_per_day": 7}, samples=1000, seed=42).json_text())
"""


def test_same_inputs_and_seed_give_the_same_bytes_in_two_processes() -> None:
    path = str(EXAMPLES / "guardian" / "marketing_launch.toml")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    outs = [subprocess.run([sys.executable, "-c", _CHILD, path], capture_output=True, text=True, env=env,
                           cwd=ROOT, timeout=120, check=True).stdout for _ in range(2)]
    here = simulate(load_causal_model(path), {"budget_usd": 20000, "ads_per_day": 7}, samples=1000, seed=42)
    assert outs[0] == outs[1] == here.json_text()
    summary = json.loads(outs[0])
    assert summary["sim_id"] == here.id and summary["approximate"] is True


def test_the_id_names_model_inputs_samples_and_seed() -> None:
    model = load_causal_model(EXAMPLES / "guardian" / "marketing_launch.toml")
    base = simulate(model, {"budget_usd": 20000}, samples=500, seed=1)
    again = simulate(model, {"budget_usd": 20000, "unrelated": "x"}, samples=500, seed=1)
    assert again.json_text() == base.json_text()  # fields the model does not read do not count
    others = [simulate(model, {"budget_usd": 20001}, samples=500, seed=1),
              simulate(model, {"budget_usd": 20000}, samples=501, seed=1),
              simulate(model, {"budget_usd": 20000}, samples=500, seed=2),
              simulate(model, {"budget_usd": 20000, "ads_per_day": 3}, samples=500, seed=1)]
    assert len({base.id, *(o.id for o in others)}) == 5
    assert others[2].json_text() != base.json_text()  # another seed, other draws
    # an exact decimal is read exactly: 0.1 as Decimal and as Fraction are one input
    from decimal import Decimal

    d = simulate(model, {"budget_usd": Decimal("20000.1")}, samples=500, seed=1)
    f = simulate(model, {"budget_usd": Fraction(200001, 10)}, samples=500, seed=1)
    assert d.id == f.id and d.inputs == {"spend": "20000.1"}
    # a float is the decimal its repr writes, not its binary expansion
    assert simulate(model, {"budget_usd": 20000.1}, samples=500, seed=1).id == d.id


# ---------------------------------------------------------------------- the example and API


def test_the_example_model_separates_calm_risky_and_reckless_launches() -> None:
    sim = CausalSimulator(EXAMPLES / "guardian" / "marketing_launch.toml", samples=1000, seed=0)
    assert len(sim.model.nodes) == 10 and [k.name for k in sim.model.kpis] == ["loss", "churn", "complaints"]
    calm = sim.simulate({"budget_usd": 20000})
    risky = sim.simulate({"budget_usd": 20000, "ads_per_day": 7})
    reckless = sim.simulate({"budget_usd": 20000, "ads_per_day": 9})
    overspent = sim.simulate({"budget_usd": 250000})
    assert calm.risk_score < 0.05 < 0.1 < risky.risk_score < 0.5 < 0.9 < reckless.risk_score
    assert overspent.kpi("loss").crossing_probability > 0.5 and overspent.kpi("loss").mean < 0
    assert sim.simulate({"budget_usd": 20000}, seed=0).json_text() == calm.json_text()


def test_summary_is_json_for_the_decision_record() -> None:
    from cda.guardian.decision import Decision, DecisionRecord

    p = simulate(load_causal_model(DIAMOND), {"plan": {"level": 2}}, samples=100, seed=0)
    record = DecisionRecord(decision=Decision.ESCALATE, reason="causal_risk", details=p.summary)
    assert json.loads(record.model_dump_json())["details"] == json.loads(p.json_text())
    assert p.summary["risk_definition"].startswith("P(any KPI")
    assert p.summary["kpis"]["d_high"]["threshold"] == "1" and p.summary["inputs"] == {"e": "2"}


def test_the_hypothesis_is_the_seeds_record() -> None:
    p = simulate(load_causal_model(DIAMOND), {"plan": {"level": 2}}, samples=100, seed=0)
    at = datetime(2026, 11, 24, 21, 0, tzinfo=UTC)
    h = CausalHypothesis.from_prediction(p, agent_id="agent-42", created_at=at, description="launch")
    assert h.hypothesis_id == f"hyp-{p.id}" and h.state == "simulated" and h.approximate
    assert h.risk_score == p.risk_score and h.risk_standard_error == p.risk_standard_error
    assert h.inputs["model_digest"] == p.model_digest and h.inputs["inputs"] == {"e": "2"}
    assert h.prediction["kpis"] == p.summary["kpis"]
    assert CausalHypothesis.model_validate_json(h.model_dump_json()) == h
    assert h.tool_id is None
    tool = CausalHypothesis.from_prediction(p, agent_id="agent-42", created_at=at, tool_id="ads.launch:1")
    assert tool.tool_id == "ads.launch:1" and tool.hypothesis_id == h.hypothesis_id
    seed_fields = {"hypothesis_id", "agent_id", "description", "inputs", "prediction", "risk_score", "created_at",
                   "state"}
    assert seed_fields <= set(h.model_dump())
    for bad in ({"created_at": datetime(2026, 11, 24)}, {"risk_score": 1.5}, {"state": "approved"},
                {"risk_score": float("nan")}, {"agent_id": ""}, {"tool_id": "a b"}, {"extra": 1}):
        with pytest.raises(ValidationError):
            CausalHypothesis(**{**h.model_dump(), **bad})


def test_models_from_toml_json_and_dict_are_one_model(tmp_path: Any) -> None:
    toml_model = load_causal_model(EXAMPLES / "guardian" / "marketing_launch.toml")
    as_dict = toml_model.as_dict()
    from_dict = load_causal_model(as_dict)
    path = tmp_path / "m.json"
    path.write_text(json.dumps(as_dict, default=_json_number))
    from_json = load_causal_model(path)
    assert toml_model == from_dict == from_json
    assert toml_model.digest == from_dict.digest == from_json.digest
    assert isinstance(toml_model, CausalModel)
    # the order a file lists nodes in does not change the model or the draws
    shuffled = {**as_dict, "nodes": dict(reversed(list(as_dict["nodes"].items())))}
    assert load_causal_model(shuffled).digest == toml_model.digest


def _json_number(value: object) -> float:
    assert isinstance(value, Fraction)
    return float(value)  # the example's decimals (0.0001, 0.08) round-trip through their float repr


def test_prediction_is_a_value() -> None:
    p = simulate(load_causal_model(DIAMOND), {"plan": {"level": 2}}, samples=10, seed=0)
    assert isinstance(p, CausalPrediction) and p.samples == 10 and p.seed == 0
    with pytest.raises(KeyError):
        p.kpi("nope")
    assert MAX_SAMPLES == 1_000_000


# --------------------------------------------------------------------- docs/causal.md is true


def _approx_equal(shown: Any, fresh: Any) -> bool:
    """Strings, Booleans and whole numbers exactly; floats to 1e-9 (the last bits of tanh may
    differ between CPUs)."""
    if isinstance(shown, dict) and isinstance(fresh, dict):
        return shown.keys() == fresh.keys() and all(_approx_equal(shown[k], fresh[k]) for k in shown)
    if isinstance(shown, float) or isinstance(fresh, float):
        return isinstance(fresh, float) and fresh == pytest.approx(shown, rel=1e-9, abs=1e-12)
    return bool(shown == fresh)


def test_the_docs_show_what_the_simulator_answers() -> None:
    doc = (ROOT / "docs" / "causal.md").read_text(encoding="utf-8")
    sim = CausalSimulator(EXAMPLES / "guardian" / "marketing_launch.toml", samples=1000, seed=0)
    after = doc[doc.index("(a test checks this block against a fresh run):"):]
    block = after[after.index("```json\n") + 8:after.index("```\n", after.index("```json\n") + 8)]
    assert _approx_equal(json.loads(block), sim.simulate({"budget_usd": 20000, "ads_per_day": 7}).summary)
    rows = [line for line in doc.splitlines() if line.startswith("| `budget_usd")]
    assert len(rows) == 4
    for row in rows:
        cells = [c.strip() for c in row.strip("|").split("|")]
        params = {k: int(v) for k, v in (p.split(" = ") for p in cells[0].strip("`").split(", "))}
        p = sim.simulate(params)
        shown = [float(c.split()[0]) for c in cells[1:]]
        fresh = [k.crossing_probability for k in p.kpis] + [p.risk_score, p.risk_upper_95]
        assert shown == [round(x, 3) for x in fresh], row
        assert f"(± {p.risk_standard_error:.3f})" in cells[4]
