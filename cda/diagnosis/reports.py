"""What ``cda probe`` prints: the report of the best probes and of a simulated probing session.

Apart from :mod:`cda.diagnosis.probe` (which re-exports them) so that declaring the ``probe``
operation, which names its result model, does not import the probing loop: ``cda diagnose``
declares both operations and runs neither loop (docs/benchmarks.md, the diagnosis start-up).
Every model here builds its validator on first use (``defer_build``): ``cda diagnose`` declares
the probe operation and never makes one of them.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

__all__ = ["ProbeOption", "ProbeReport", "ProbeRun", "ProbeStep"]


class ProbeOption(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)

    observation: int  # 1-based, as the observation file numbers them
    net: str
    gain_bits: float
    p_one: float


class ProbeReport(BaseModel):
    """What ``cda probe`` prints without ``--inject``: the diagnoses and the best probes."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    file: str
    backend: str
    diagnoses: list[list[str]]
    complete: bool  # every diagnosis was found (of at most ``max_size`` gates, when that is set)
    timed_out: bool
    observations: int
    probes: list[ProbeOption]
    max_size: int | None = None  # --max-size: larger diagnoses were not sought
    time_s: float
    notes: list[str]


class ProbeStep(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)

    observation: int  # 1-based
    net: str
    value: bool
    gain_bits: float | None  # None for a random probe
    diagnoses: int  # how many remain after it


class ProbeRun(BaseModel):
    """A simulated probing session: the injected fault, each probe, the diagnoses at the end."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    file: str
    backend: str
    strategy: str
    injected: list[str]
    vectors: int
    timed_out: bool
    initial_diagnoses: int
    steps: list[ProbeStep]
    final: list[list[str]]
    resolved: bool  # exactly one diagnosis remains
    probes: int
    time_s: float
    notes: list[str]
