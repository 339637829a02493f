"""The guardian's causal simulator: first-order effects of a proposed action, by seeded Monte Carlo
on a structural causal model (:mod:`cda.guardian.causal_model`).

The action sets the model's input nodes, ``do(node = value)``: the value is read from the action's
parameters at the node's declared field path, exactly, and turned into a float once, here; an
intervened node ignores its own mechanism, so its incoming edges are cut. Every other node is drawn
in topological order, vectorised over the samples, from its own random stream (numpy's
``default_rng`` seeded with the run's seed and a hash of the node's name), so one node's draws do
not depend on which other nodes exist or are intervened on, and two actions simulated with the
same seed see the same noise (common random numbers: their difference is not sampling noise).

**What comes out is approximate.** Each KPI gets its sample mean and variance and the share of
samples that cross its threshold, each with its Monte Carlo standard error; ``risk_score`` is the
estimated probability that **any** KPI crosses its threshold, counted jointly on the same samples
(a sample counts once however many KPIs it crosses), so it is at least each KPI's own crossing
probability and at most their sum. Its standard error is ``sqrt(p(1-p)/n)``, and
``risk_upper_95`` is the Wilson score 95% upper bound, for a gate that wants to be cautious when
``p`` is estimated as 0. Sums are taken with :func:`math.fsum` (correctly rounded, whatever the
SIMD path), so the same model, inputs, samples and seed give the same bytes on one platform.

>>> model = load_causal_model({"nodes": {"x": {"input": "x"},
...     "y": {"mechanism": "linear", "parents": {"x": 2}, "noise": 1}},
...     "kpis": [{"node": "y", "threshold": 10, "direction": "above"}]})
>>> p = simulate(model, {"x": 5}, samples=20_000, seed=7)
>>> abs(p.kpis[0].mean - 10) < 4 * p.kpis[0].mean_standard_error, abs(p.risk_score - 0.5) < 0.02
(True, True)
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from fractions import Fraction
from os import PathLike
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from cda.contracts import limits
from cda.contracts.receipt import canonical_json, sha256_hex
from cda.errors import OptionError
from cda.guardian.causal_model import (
    CausalError,
    CausalInputError,
    CausalModel,
    Node,
    exact_text,
    load_causal_model,
    read_number,
)

__all__ = [
    "ENGINE",
    "MAX_CELLS",
    "MAX_SAMPLES",
    "MIN_SAMPLES",
    "RISK_DEFINITION",
    "CausalHypothesis",
    "CausalPrediction",
    "CausalSimulator",
    "KPIEstimate",
    "read_inputs",
    "simulate",
]

ENGINE = "cda.causal/1"
"""Names the simulation method; part of every prediction's id, changed when the draws change."""
MIN_SAMPLES, MAX_SAMPLES = limits.MIN_SAMPLES, limits.MAX_SAMPLES  # one range for every door
MAX_CELLS = 20_000_000
"""Samples × nodes at most: one float array per node (160 MB), so a big model cannot exhaust memory."""
RISK_DEFINITION = "P(any KPI crosses its threshold), counted jointly over the same samples"
_Z95 = 1.959963984540054  # the standard normal's 97.5% quantile


@dataclass(frozen=True, slots=True)
class KPIEstimate:
    """One KPI's Monte Carlo estimates, each with its standard error (all approximate);
    ``threshold`` is the model's exact number as text."""

    name: str
    node: str
    threshold: str
    direction: str
    mean: float
    mean_standard_error: float
    variance: float
    variance_standard_error: float
    crossing_probability: float
    crossing_standard_error: float
    approximate: bool = True

    def as_dict(self) -> dict[str, Any]:
        return {
            "node": self.node,
            "threshold": self.threshold,
            "direction": self.direction,
            "mean": self.mean,
            "mean_standard_error": self.mean_standard_error,
            "variance": self.variance,
            "variance_standard_error": self.variance_standard_error,
            "crossing_probability": self.crossing_probability,
            "crossing_standard_error": self.crossing_standard_error,
            "approximate": self.approximate,
        }


@dataclass(frozen=True, slots=True)
class CausalPrediction:
    """The outcome of one simulation: per-KPI estimates and the risk score, all approximate.

    ``id`` is the SHA-256 of the canonical JSON of the engine, the model's digest, the inputs
    (node -> exact value), the sample count and the seed: the same id, the same numbers.
    """

    id: str
    model: str
    model_digest: str
    inputs: Mapping[str, str]
    samples: int
    seed: int
    kpis: tuple[KPIEstimate, ...]
    risk_score: float
    risk_standard_error: float
    risk_upper_95: float
    approximate: bool = True

    def kpi(self, name: str) -> KPIEstimate:
        for k in self.kpis:
            if k.name == name:
                return k
        raise KeyError(name)

    @property
    def summary(self) -> dict[str, Any]:
        """A JSON-able dict for ``DecisionRecord.details``: the risk and its error, every KPI's
        estimates, and what was simulated (model, inputs, samples, seed)."""
        return {
            "sim_id": self.id,
            "engine": ENGINE,
            "model": self.model,
            "model_digest": self.model_digest,
            "inputs": dict(self.inputs),
            "samples": self.samples,
            "seed": self.seed,
            "approximate": self.approximate,
            "method": "monte_carlo",
            "risk_score": self.risk_score,
            "risk_standard_error": self.risk_standard_error,
            "risk_upper_95": self.risk_upper_95,
            "risk_definition": RISK_DEFINITION,
            "kpis": {k.name: k.as_dict() for k in self.kpis},
        }

    def json_text(self) -> str:
        """The summary's canonical JSON: the bytes that the same inputs and seed reproduce."""
        return canonical_json(self.summary)


# ------------------------------------------------------------------------------------- inputs


def read_inputs(model: CausalModel, action_params: Mapping[str, Any]) -> dict[str, Fraction]:
    """The interventions an action's parameters make: node -> exact value, for each input node
    whose field path is present. A pure input node (no mechanism) whose field is missing, or a
    field that is not a bounded number, is a :class:`CausalInputError` carrying the path.

    >>> model = load_causal_model({"nodes": {"spend": {"input": "budget.usd"}},
    ...     "kpis": [{"node": "spend", "threshold": 100, "direction": "above"}]})
    >>> read_inputs(model, {"budget": {"usd": 12}})
    {'spend': Fraction(12, 1)}
    >>> read_inputs(model, {"budget": {}})
    Traceback (most recent call last):
    cda.guardian.causal_model.CausalInputError: the action's parameters have no budget.usd (it sets node spend of model)
    """
    if not isinstance(action_params, Mapping):
        raise CausalInputError(f"the action's parameters must be an object, not {type(action_params).__name__}", path="")
    out: dict[str, Fraction] = {}
    for node in model.inputs:
        assert node.input is not None
        found, value = _lookup(action_params, node.input_path)
        if not found:
            if node.mechanism is None:
                raise CausalInputError(f"the action's parameters have no {node.input} (it sets node {node.name} "
                                       f"of {model.source})", path=node.input)
            continue  # an optional input: the node follows its mechanism
        out[node.name] = read_number(value, f"the action's parameter {node.input} (node {node.name})", CausalInputError,
                                     path=node.input)
    return out


def _lookup(params: Mapping[str, Any], path: Sequence[str]) -> tuple[bool, Any]:
    here: Any = params
    for segment in path:
        if isinstance(here, Mapping) and segment in here:
            here = here[segment]
        elif isinstance(here, Sequence) and not isinstance(here, str | bytes) and segment.isdigit() \
                and int(segment) < len(here):
            here = here[int(segment)]
        else:
            return False, None
    return True, here


# --------------------------------------------------------------------------------- simulation


def simulate(model: CausalModel, action_params: Mapping[str, Any], *, samples: int, seed: int) -> CausalPrediction:
    """Simulate ``model`` under the action's interventions: ``samples`` Monte Carlo draws (2 to
    1,000,000) from ``seed`` (0 to 2**32 - 1). Bad options are an :class:`OptionError`, bad
    parameters a :class:`CausalInputError`, values past the float range a :class:`CausalError`.
    """
    n = limits.samples("samples", samples)
    seed = limits.seed("seed", seed)
    if n * len(model.nodes) > MAX_CELLS:
        raise OptionError(f"samples × nodes must be at most {MAX_CELLS:,} (one array per node), "
                          f"not {n:,} × {len(model.nodes)}")
    do = read_inputs(model, action_params)
    inputs = {name: exact_text(value) for name, value in sorted(do.items())}
    sim_id = sha256_hex(canonical_json({"engine": ENGINE, "model": model.digest, "inputs": inputs,
                                        "samples": n, "seed": seed}))

    import numpy as np

    values: dict[str, Any] = {}
    with np.errstate(over="ignore", invalid="ignore"):
        for node in model.nodes:
            if node.name in do:
                values[node.name] = np.full(n, float(do[node.name]))
            else:
                values[node.name] = _draw(np, node, values, n, seed)
            if not np.isfinite(values[node.name]).all():
                raise CausalError(f"{model.source}: nodes.{node.name}: the simulated values leave the float range "
                                  f"(inputs {inputs}); the model's numbers are too large for these inputs")

    any_crossing = np.zeros(n, dtype=bool)
    kpis: list[KPIEstimate] = []
    for kpi in model.kpis:
        x = values[kpi.node]
        crossing = x > float(kpi.threshold) if kpi.direction == "above" else x < float(kpi.threshold)
        any_crossing |= crossing
        mean, mean_se, var, var_se = _moments(np, x, n)
        p = int(np.count_nonzero(crossing)) / n
        kpis.append(KPIEstimate(name=kpi.name, node=kpi.node, threshold=exact_text(kpi.threshold),
                                direction=kpi.direction, mean=mean, mean_standard_error=mean_se, variance=var,
                                variance_standard_error=var_se, crossing_probability=p,
                                crossing_standard_error=math.sqrt(p * (1 - p) / n)))
    risk = int(np.count_nonzero(any_crossing)) / n
    return CausalPrediction(id=sim_id, model=model.name, model_digest=model.digest, inputs=inputs, samples=n,
                            seed=seed, kpis=tuple(kpis), risk_score=risk,
                            risk_standard_error=math.sqrt(risk * (1 - risk) / n),
                            risk_upper_95=_wilson_upper(risk, n))


def _draw(np: Any, node: Node, values: Mapping[str, Any], n: int, seed: int) -> Any:
    """``n`` draws of ``node`` given its parents' draws (its own random stream)."""
    eta = np.full(n, float(node.intercept))
    for parent, coefficient in node.parents:
        eta += float(coefficient) * values[parent]
    if node.mechanism == "bernoulli":
        u = _stream(np, node.name, seed).random(n)
        return (u < _sigmoid(np, eta)).astype(np.float64)
    if node.noise:
        eta += float(node.noise) * _stream(np, node.name, seed).standard_normal(n)
    if node.mechanism == "logistic":
        return float(node.scale) * _sigmoid(np, eta)
    return eta


def _stream(np: Any, name: str, seed: int) -> Any:
    """The node's own generator: seeded by the run's seed and 64 bits of SHA-256 of its name."""
    key = int.from_bytes(hashlib.sha256(name.encode("utf-8")).digest()[:8], "big")
    return np.random.default_rng([seed, key])


def _sigmoid(np: Any, x: Any) -> Any:
    """``1 / (1 + e^-x)`` written with tanh, which never overflows."""
    return 0.5 + 0.5 * np.tanh(0.5 * x)


def _moments(np: Any, x: Any, n: int) -> tuple[float, float, float, float]:
    """Mean, its standard error, the unbiased variance and its (asymptotic) standard error;
    sums by :func:`math.fsum`, so the result does not depend on numpy's summation order."""
    mean = math.fsum(x.tolist()) / n
    d2 = np.square(x - mean)
    ss = math.fsum(d2.tolist())
    var = ss / (n - 1)
    m2, m4 = ss / n, math.fsum(np.square(d2).tolist()) / n
    var_se = math.sqrt(max(0.0, (m4 - m2 * m2 * (n - 3) / (n - 1)) / n))
    return mean, math.sqrt(var / n), var, var_se


def _wilson_upper(p: float, n: int) -> float:
    """The Wilson score interval's upper end at 95%: above 0 even when no sample crossed."""
    z2 = _Z95 * _Z95
    centre = p + z2 / (2 * n)
    spread = _Z95 * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n))
    return min(1.0, (centre + spread) / (1 + z2 / n))


class CausalSimulator:
    """What the gate holds: a checked model, a sample count and a default seed.

    >>> sim = CausalSimulator({"nodes": {"x": {"input": "x"}},
    ...     "kpis": [{"node": "x", "threshold": 3, "direction": "above"}]}, samples=10, seed=1)
    >>> sim.simulate({"x": 4}).risk_score
    1.0
    """

    def __init__(self, model: CausalModel | str | PathLike[str] | Mapping[str, Any], *, samples: int = 1000,
                 seed: int = 0) -> None:
        self.model = model if isinstance(model, CausalModel) else load_causal_model(model)
        self.samples = limits.samples("samples", samples)
        self.seed = limits.seed("seed", seed)

    def simulate(self, action_params: Mapping[str, Any] | Any, *, seed: int | None = None) -> CausalPrediction:
        """:func:`simulate` with this simulator's model and samples (and its seed unless given).
        ``action_params`` is the action's parameters, or the proposed action itself (its
        ``parameters``): so the gate holds a ``CausalSimulator`` as it holds any simulator
        (:class:`cda.guardian.simulation.Simulator`)."""
        params = action_params if isinstance(action_params, Mapping) else getattr(action_params, "parameters", None)
        if not isinstance(params, Mapping):
            raise CausalInputError(f"a simulation takes the action's parameters (a mapping) or a proposed action, "
                                   f"not {type(action_params).__name__}", path="")
        return simulate(self.model, params, samples=self.samples, seed=self.seed if seed is None else seed)


# --------------------------------------------------------------------------- the hypothesis


HypothesisState = Literal["simulated", "confirmed", "refuted"]
_ID = r"^[A-Za-z0-9][A-Za-z0-9_.:@-]{0,127}$"  # the guardian's ids (cda.guardian.tasks.ID_PATTERN)


class CausalHypothesis(BaseModel):
    """The seed's CAUSAL_HYPOTHESIS: what was simulated (``inputs``), what came out
    (``prediction``: KPIs with mean, variance and crossing probability) and the risk score, for
    the guardian's store to keep as JSON; ``tool_id`` links it to the tool registry (the seed's
    ERD: a tool is used_by hypotheses).

    ``state`` is ``simulated`` when made; ``confirmed`` or ``refuted`` once the action's real
    outcome is compared with the prediction. ``risk_score`` is a Monte Carlo estimate: its
    standard error is kept beside it and ``approximate`` is always true.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    hypothesis_id: str = Field(pattern=_ID)
    agent_id: str = Field(pattern=_ID)
    description: str = Field(default="", max_length=1024)
    inputs: dict[str, Any]
    prediction: dict[str, Any]
    risk_score: float = Field(ge=0, le=1, allow_inf_nan=False)
    risk_standard_error: float = Field(ge=0, le=0.5, allow_inf_nan=False)
    approximate: Literal[True] = True
    created_at: datetime
    state: HypothesisState = "simulated"
    tool_id: str | None = Field(default=None, pattern=_ID, description="the tool the action would call (the ERD's used_by)")

    @field_validator("created_at")
    @classmethod
    def _aware(cls, value: datetime) -> datetime:
        if value.tzinfo is None or value.utcoffset() is None:
            raise ValueError("created_at must carry a time zone (UTC)")
        return value

    @classmethod
    def from_prediction(cls, prediction: CausalPrediction, *, agent_id: str, created_at: datetime,
                        description: str = "", hypothesis_id: str | None = None,
                        state: HypothesisState = "simulated", tool_id: str | None = None) -> CausalHypothesis:
        """The hypothesis a simulation makes; its id defaults to ``hyp-`` and the prediction's id
        (the same simulation, the same hypothesis)."""
        summary = prediction.summary
        inputs = {k: summary[k] for k in ("engine", "model", "model_digest", "inputs", "samples", "seed")}
        outputs = {k: v for k, v in summary.items() if k not in inputs}
        return cls(hypothesis_id=hypothesis_id or f"hyp-{prediction.id}", agent_id=agent_id, description=description,
                   inputs=inputs, prediction=outputs, risk_score=prediction.risk_score,
                   risk_standard_error=prediction.risk_standard_error, created_at=created_at, state=state,
                   tool_id=tool_id)
