"""The layer contract of DESIGN.md, checked by import-linter (configured in pyproject.toml)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from tests.conftest import ROOT


def test_imports_only_go_down_the_layers() -> None:
    exe = shutil.which("lint-imports") or str(Path(sys.executable).with_name("lint-imports"))
    proc = subprocess.run([exe, "--no-cache"], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "1 kept, 0 broken" in proc.stdout


def test_every_module_of_cda_adapters_has_a_layer() -> None:
    """``cda.adapters`` holds modules of two layers (doors kept there, infrastructure below the
    operations), so the contract names them one by one: a new module must be given its layer."""
    import tomllib

    contract = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["importlinter"]["contracts"][0]
    named = {part.strip() for layer in contract["layers"] for part in layer.split("|")}
    modules = {("adapters." + p.relative_to(ROOT / "cda" / "adapters").with_suffix("").parts[0])
               for p in (ROOT / "cda" / "adapters").rglob("*.py") if p.name != "__init__.py" or p.parent.name != "adapters"}
    assert modules - {"adapters.__init__"} <= named, sorted(modules - named)
