"""Shared fixtures: paths to the examples and both backends as a parameter."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"


@pytest.fixture(params=["z3", "clingo"])
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)
