"""Shared fixtures: paths to the examples and every ground backend of the registry as a parameter."""

from __future__ import annotations

from pathlib import Path

import pytest

from cda.solver.backend import REGISTRY

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"


#: the backends that take a ground problem, as registered (cda.solver.backend.REGISTRY)
GROUND_BACKENDS = [name for name, spec in REGISTRY.items() if spec.accepts == "ground"]


@pytest.fixture(params=GROUND_BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(autouse=True)
def _private_key_dir(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Runs sign their receipt logs with the key in $CDA_KEY_DIR: never the real ~/.config/cda."""
    monkeypatch.setenv("CDA_KEY_DIR", str(tmp_path_factory.getbasetemp() / "cda-keys"))
