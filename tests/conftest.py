"""Shared fixtures: paths to the examples and every ground backend of the registry as a parameter."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType

import pytest

from cda.solver.backend import REGISTRY

# The suite keeps the byte code it compiles, whatever PYTHONDONTWRITEBYTECODE says (CI images and
# containers set it): else each pytest-xdist worker rewrites and compiles every test module from
# source again (12 of the 18 s of CPU its collection took), and every `python -m cda` child of a
# test compiles CDA's modules again (README.md: what `python -m compileall -q cda` is for). Only
# __pycache__ folders are written, beside the sources; the variable still reaches the children.
sys.dont_write_bytecode = False

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
#: the outside data sets (README.md, "Test data"): ``../shared/data`` beside the clone, or the
#: folder ``$CDA_DATA`` names; the tests that need a set skip, naming it, when it is absent
DATA = Path(os.environ.get("CDA_DATA") or ROOT.parent / "shared" / "data").resolve()
SHARED_DATA = DATA  # the same folder under the name the policy and Ken tests use


#: the backends that take a ground problem, as registered (cda.solver.backend.REGISTRY)
GROUND_BACKENDS = [name for name, spec in REGISTRY.items() if spec.accepts == "ground"]


def copy_cedar_test(test: Path, into: Path) -> Path:
    """A copy, under ``into``, of one Cedar integration-test file and the policy, schema and
    entities files it names, at the same places relative to each other: a jobs manifest reads
    only files inside its own folder (docs/jobs.md), so a test's manifest runs on this copy."""
    import json

    root = next(p.parent for p in test.parents if p.name in ("tests", "corpus-tests"))
    data = json.loads(test.read_text(encoding="utf-8"))
    for name in (str(test.relative_to(root)), *(data[k] for k in ("policies", "schema", "entities") if data.get(k))):
        (into / name).parent.mkdir(parents=True, exist_ok=True)
        (into / name).write_bytes((root / name).read_bytes())
    return into / test.relative_to(root)


def benchmark_module(name: str) -> ModuleType:
    """``benchmarks/<name>.py`` loaded as the module ``name`` (the benchmarks are scripts, not a
    package), once per session."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module

@pytest.fixture(params=GROUND_BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(autouse=True)
def _private_key_dir(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Runs sign their receipt logs with the key in $CDA_KEY_DIR: never the real ~/.config/cda."""
    monkeypatch.setenv("CDA_KEY_DIR", str(tmp_path_factory.getbasetemp() / "cda-keys"))
