"""Shared fixtures: paths to the examples and both backends as a parameter."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
#: the outside data sets (README.md, "Test data"): ``../shared/data`` beside the clone, or the
#: folder ``$CDA_DATA`` names; the tests that need a set skip, naming it, when it is absent
DATA = Path(os.environ.get("CDA_DATA") or ROOT.parent / "shared" / "data").resolve()


@pytest.fixture(params=["z3", "clingo"])
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(autouse=True)
def _private_key_dir(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Runs sign their receipt logs with the key in $CDA_KEY_DIR: never the real ~/.config/cda."""
    monkeypatch.setenv("CDA_KEY_DIR", str(tmp_path_factory.getbasetemp() / "cda-keys"))
