"""What the gate needs from a causal simulator and from the CFO ledger, as typing protocols, and
the adapter that makes gsim's causal model (:mod:`cda.guardian.causal`, docs/causal.md) one.

The gate (:func:`cda.guardian.decide.evaluate`) is typed against these protocols only, so any
simulator with a seeded ``simulate`` and any ledger with ``within_budget``/``remaining`` plugs in:
the causal model in production, a closed-form simulator in a test.
"""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal
from importlib import import_module
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from cda.errors import CDAError
from cda.guardian.proposal import ProposedAction

__all__ = ["BudgetLedger", "CausalModelSimulator", "Prediction", "Simulator", "load_simulator"]


@runtime_checkable
class Prediction(Protocol):
    """A simulation's answer: ``risk_score`` in [0, 1] (approximate: a Monte Carlo estimate),
    a JSON-able ``summary`` (the KPIs) and an ``id`` naming the simulation (model, inputs, seed)."""

    @property
    def risk_score(self) -> float: ...

    @property
    def summary(self) -> Mapping[str, Any]: ...

    @property
    def id(self) -> str: ...


@runtime_checkable
class Simulator(Protocol):
    """Simulates the first-order effects of an action; the same action and seed give the same
    prediction."""

    def simulate(self, action: ProposedAction, *, seed: int) -> Prediction: ...


@runtime_checkable
class BudgetLedger(Protocol):
    """The part of the CFO ledger (:class:`cda.guardian.ledger.Ledger`) the gate reads: it checks
    a budget and reserves nothing (reservation happens when a signed task executes)."""

    def within_budget(self, agent_id: str, cost: Decimal | int, currency_code: str = ...) -> bool: ...

    def remaining(self, agent_id: str, currency_code: str = ...) -> Decimal: ...


class CausalModelSimulator:
    """gsim's causal model as a :class:`Simulator`: the action's parameters are the model's
    inputs, ``samples`` Monte Carlo draws with the gate's seed."""

    def __init__(self, model: Any, *, samples: int = 1000) -> None:
        """``model``: a checked causal model, or its file (``.toml``/``.json``) or dict, read and
        checked here (a bad one is a :class:`~cda.errors.CDAError` naming the file and field)."""
        from cda.contracts import limits

        causal = import_module("cda.guardian.causal")
        if not isinstance(model, causal.CausalModel):
            model = causal.load_causal_model(model)  # type: ignore[attr-defined]
        self.model = model
        self.samples = limits.samples("samples", samples)  # refused here, before any decision

    def simulate(self, action: ProposedAction, *, seed: int) -> Prediction:
        causal = import_module("cda.guardian.causal")
        prediction: Prediction = causal.simulate(self.model, dict(action.parameters), samples=self.samples, seed=seed)
        return prediction


def load_simulator(path: Path, *, samples: int = 1000) -> Simulator:
    """A :class:`CausalModelSimulator` over the causal model file at ``path``; a
    :class:`~cda.errors.CDAError` when the file is bad or the causal simulator is not installed."""
    try:
        causal = import_module("cda.guardian.causal")
    except ModuleNotFoundError:
        raise CDAError(
            "--sim needs the causal simulator (cda.guardian.causal, docs/causal.md), which this build does not have"
        ) from None
    return CausalModelSimulator(causal.load_causal_model(path), samples=samples)
