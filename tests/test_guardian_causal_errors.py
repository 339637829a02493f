"""Every way a causal model, an action's parameters or a simulation's options can be wrong is one
clear error naming the file and the field (never a traceback from numpy, networkx or tomllib)."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from decimal import Decimal
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest

from cda.errors import CDAError, OptionError
from cda.guardian.causal import MAX_CELLS, simulate
from cda.guardian.causal_model import CausalError, CausalInputError, CausalModelError, load_causal_model
from tests.conftest import ROOT

BASE: dict[str, Any] = {
    "nodes": {
        "x": {"input": "x"},
        "y": {"mechanism": "linear", "intercept": 1, "parents": {"x": 2}, "noise": 1},
    },
    "kpis": [{"node": "y", "threshold": 10, "direction": "above"}],
}


def changed(path: str, value: Any) -> dict[str, Any]:
    """BASE with the value at a dotted path replaced (``...`` deletes it)."""
    spec = copy.deepcopy(BASE)
    *head, last = path.split(".")
    here: Any = spec
    for key in head:
        here = here[int(key)] if isinstance(here, list) else here[key]
    if value is ...:
        del here[last]
    elif isinstance(here, list):
        here[int(last)] = value
    else:
        here[last] = value
    return spec


def cyclic(*edges: tuple[str, str]) -> dict[str, Any]:
    spec = copy.deepcopy(BASE)
    for parent, child in edges:
        node = spec["nodes"].setdefault(child, {"mechanism": "linear"})
        node.setdefault("parents", {})[parent] = 1
    return spec


@pytest.mark.parametrize(("spec", "message"), [
    (cyclic(("y", "a"), ("a", "b"), ("b", "y")), "model: nodes: the graph has a cycle: a -> b -> y -> a"),
    (cyclic(("y", "y")), "the graph has a cycle: y -> y"),
    (changed("nodes.y.parents", {"x": 1, "ghost": 2}), "model: nodes.y.parents.ghost: unknown parent 'ghost' (nodes: x, y)"),
    (changed("nodes.y.mechanism", ...), "model: nodes.y: missing mechanism"),
    (changed("nodes.y.mechanism", "quadratic"), "nodes.y.mechanism: one of linear, bernoulli, logistic, not 'quadratic'"),
    (changed("nodes.y.noise", float("nan")), "model: nodes.y.noise: must be a finite number, not nan"),
    (changed("nodes.y.noise", float("inf")), "nodes.y.noise: must be a finite number, not inf"),
    (changed("nodes.y.intercept", 10**13), "nodes.y.intercept: must be 0 or between 1e-30 and 1e12 in size, not 10000000000000"),
    (changed("nodes.y.intercept", 10**400), "nodes.y.intercept: must be at most 1e12 in size"),
    (changed("nodes.y.parents", {"x": Decimal("1e-40")}), "nodes.y.parents.x: must be 0 or between 1e-30 and 1e12"),
    (changed("nodes.y.parents", {"x": Decimal("1." + "1" * 50)}), "with at most 40 digits"),
    (changed("nodes.y.parents", {"x": True}), "nodes.y.parents.x: must be a number, not a Boolean (true)"),
    (changed("nodes.y.intercept", "3"), "nodes.y.intercept: must be a number, not text ('3')"),
    (changed("nodes.y.parents", {"x": Fraction(1, 2**300)}), "must be a number of at most 256 bits"),
    (changed("nodes.y.noise", -1), "nodes.y.noise: a standard deviation is 0 or more, not -1"),
    (changed("nodes.y.mechanism", "bernoulli"), "nodes.y.noise: a bernoulli node has no noise"),
    (changed("nodes.y.scale", 2), "nodes.y.scale: only a logistic node has a scale"),
    (changed("nodes.y.parent", {"x": 1}), "nodes.y.parent: unknown key (known: description, input, intercept,"),
    (changed("nodes.x.intercept", 1), "nodes.x.intercept: an input node without a mechanism has no parents"),
    (changed("nodes.x.input", "a..b"), "nodes.x.input: a field path is up to 8 dot-separated names"),
    (changed("nodes.x.input", 3), "nodes.x.input: must be text, not int"),
    (changed("nodes.x", [1]), "nodes.x: a node is a table, not a list"),
    (changed("nodes", {}), "model: nodes: a model needs a table of nodes, one or more"),
    (changed("nodes", {"bad name": {"input": "x"}}), "nodes: a name is a letter or _ then letters"),
    (changed("nodes", {"1x": {"input": "x"}}), "nodes: a name is a letter or _ then letters"),
    (changed("nodes", {"x" * 65: {"input": "x"}}), "nodes: a name is a letter or _ then letters"),
    (changed("nodes", {"café": {"input": "x"}}), "nodes: a name is a letter or _ then letters"),
    (changed("nodes.x.input", "a b"), "nodes.x.input: a field path is up to 8 dot-separated names"),
    (changed("nodes.x.input", ".".join("abcdefghi")), "nodes.x.input: a field path is up to 8 dot-separated names"),
    (changed("kpis.0.node", "z"), "model: kpis[0].node: unknown node 'z' (nodes: x, y)"),
    (changed("kpis.0.direction", "over"), "kpis[0].direction: above or below"),
    (changed("kpis.0.threshold", float("nan")), "kpis[0].threshold: must be a finite number"),
    (changed("kpis.0.threshold", ...), "kpis[0].threshold: missing"),
    (changed("kpis", []), "kpis: a model needs a list of KPIs, one or more"),
    (changed("kpis", [BASE["kpis"][0]] * 2), "kpis[1].name: a second KPI named 'y'"),
    (changed("format", 2), "format: this CDA reads format 1, not 2"),
    (changed("colour", "red"), "model: colour: unknown key"),
])
def test_a_bad_model_is_one_clear_error(spec: dict[str, Any], message: str) -> None:
    with pytest.raises(CausalModelError) as caught:
        load_causal_model(spec)
    assert message in str(caught.value)
    assert isinstance(caught.value, CDAError) and isinstance(caught.value, ValueError)


TOML = """\
[nodes.x]
input = "x"

[nodes.y]
mechanism = "linear"
parents = { x = 2 }
noise = {noise}

[[kpis]]
node = "y"
threshold = 10
direction = "above"
"""


@pytest.mark.parametrize(("noise", "message"), [
    ("nan", "nodes.y.noise: must be a finite number, not NaN"),
    ("inf", "nodes.y.noise: must be a finite number, not Infinity"),
    ("1e13", "nodes.y.noise: must be 0 or between 1e-30 and 1e12"),
    ("1" * 5000, "not valid TOML"),
    ("[1", "not valid TOML"),
])
def test_toml_errors_name_the_file_and_field(tmp_path: Path, noise: str, message: str) -> None:
    path = tmp_path / "model.toml"
    path.write_text(TOML.replace("{noise}", noise))
    with pytest.raises(CausalModelError) as caught:
        load_causal_model(path)
    assert str(caught.value).startswith(f"{path}: ") and message in str(caught.value)


@pytest.mark.parametrize(("text", "message"), [
    ('{"nodes": {"x": {"input": "x", "mechanism": "linear", "noise": NaN}}, "kpis": []}',
     "nodes.x.noise: must be a finite number, not NaN"),
    ('{"nodes": {"x": {"input": "x"}, "x": {"input": "y"}}, "kpis": []}', "the key 'x' appears twice"),
    ('{"nodes": ', "not valid JSON"),
    ("[1, 2]", "a causal model is a JSON object (a table), not a list"),
])
def test_json_errors_name_the_file_and_field(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "model.json"
    path.write_text(text)
    with pytest.raises(CausalModelError) as caught:
        load_causal_model(path)
    assert str(caught.value).startswith(f"{path}") and message in str(caught.value)


def test_a_missing_or_misnamed_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(CausalModelError, match="cannot read .*nope.toml: No such file"):
        load_causal_model(tmp_path / "nope.toml")
    with pytest.raises(CausalModelError, match=r"model.yaml: a causal model file ends in .toml or .json"):
        load_causal_model(tmp_path / "model.yaml")


# ---------------------------------------------------------------------- the action's inputs


@pytest.mark.parametrize(("params", "path", "message"), [
    ({}, "x", "the action's parameters have no x (it sets node x of model)"),
    ({"x": "12"}, "x", "the action's parameter x (node x): must be a number, not text ('12')"),
    ({"x": True}, "x", "must be a number, not a Boolean (true)"),
    ({"x": float("nan")}, "x", "must be a finite number, not nan"),
    ({"x": Decimal("Infinity")}, "x", "must be a finite number, not Infinity"),
    ({"x": 10**15}, "x", "must be 0 or between 1e-30 and 1e12 in size"),
    ({"x": None}, "x", "must be a number, not null"),
])
def test_an_action_that_cannot_feed_the_model_names_the_field(params: dict[str, Any], path: str, message: str) -> None:
    model = load_causal_model(BASE)
    with pytest.raises(CausalInputError) as caught:
        simulate(model, params, samples=10, seed=0)
    assert message in str(caught.value) and caught.value.path == path


def test_nested_field_paths_and_list_indexes() -> None:
    spec = changed("nodes.x.input", "plan.0.usd")
    model = load_causal_model(spec)
    assert simulate(model, {"plan": [{"usd": 3}]}, samples=10, seed=0).inputs == {"x": "3"}
    for params in ({"plan": []}, {"plan": {"0": {}}}, {"plan": "0"}, {"plan": [{"usd": 3}, 4][1:]}):
        with pytest.raises(CausalInputError) as caught:
            simulate(model, params, samples=10, seed=0)
        assert caught.value.path == "plan.0.usd"
    with pytest.raises(CausalInputError, match="must be an object, not list"):
        simulate(model, [], samples=10, seed=0)  # type: ignore[arg-type]


# ----------------------------------------------------------------------------- the options


@pytest.mark.parametrize(("samples", "seed", "message"), [
    (0, 0, "samples must be a whole number from 2 to 1000000"),
    (1, 0, "samples must be a whole number from 2 to 1000000 (a variance needs two draws), not 1"),
    (1_000_001, 0, "not 1000001"),
    (True, 0, "samples must be a whole number"),
    (10.0, 0, "samples must be a whole number"),
    (10, -1, "seed must be a whole number from 0 to 4294967295"),
    (10, 2**32, "seed must be a whole number from 0 to 4294967295"),
    (10, "1", "seed must be a whole number"),
])
def test_bad_options_are_option_errors(samples: Any, seed: Any, message: str) -> None:
    with pytest.raises(OptionError) as caught:
        simulate(load_causal_model(BASE), {"x": 1}, samples=samples, seed=seed)
    assert message in str(caught.value)


def test_a_big_model_cannot_ask_for_unbounded_memory() -> None:
    spec = {"nodes": {f"n{i}": {"mechanism": "linear"} for i in range(30)},
            "kpis": [{"node": "n0", "threshold": 0, "direction": "above"}]}
    with pytest.raises(OptionError, match=f"samples × nodes must be at most {MAX_CELLS:,}"):
        simulate(load_causal_model(spec), {}, samples=1_000_000, seed=0)


def test_values_past_the_float_range_are_an_error_not_inf() -> None:
    # 30 layers of 1e12: every number is in bounds, their product is not
    nodes: dict[str, Any] = {"n00": {"input": "x"}}
    for i in range(1, 30):
        nodes[f"n{i:02}"] = {"mechanism": "linear", "parents": {f"n{i - 1:02}": 10**12}}
    spec = {"nodes": nodes, "kpis": [{"node": "n29", "threshold": 0, "direction": "above"}]}
    with pytest.raises(CausalError, match=r"model: nodes.n26: the simulated values leave the float range"):
        simulate(load_causal_model(spec), {"x": 1}, samples=10, seed=0)
    # a sigmoid of a huge argument is fine (no overflow, no warning): it saturates
    spec = {"nodes": {"x": {"input": "x"}, "p": {"mechanism": "bernoulli", "parents": {"x": 10**12}},
                      "q": {"mechanism": "logistic", "parents": {"x": -(10**12)}, "noise": 1}},
            "kpis": [{"node": "p", "threshold": Fraction(1, 2), "direction": "above"},
                     {"node": "q", "threshold": Fraction(1, 2), "direction": "above"}]}
    out = simulate(load_causal_model(spec), {"x": 10**12}, samples=10, seed=0)
    assert [k.mean for k in out.kpis] == [1.0, 0.0]


# ------------------------------------------------------------------------------- start-up


def test_importing_the_simulator_loads_neither_numpy_nor_networkx() -> None:
    code = ("import sys, cda.guardian.causal, cda.guardian.causal_model; "
            "print(sorted(m for m in ('numpy', 'networkx') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120,
                         env={**os.environ, "PYTHONPATH": str(ROOT)}, cwd=ROOT).stdout
    assert json.loads(out.replace("'", '"')) == []
