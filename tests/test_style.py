"""cda/ stays ruff- and mypy-clean (STYLE.md, habit 11); the configuration is in pyproject.toml."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import ROOT


def test_ruff_is_clean() -> None:
    proc = subprocess.run([sys.executable, "-m", "ruff", "check", "cda"], capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_mypy_is_clean() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "mypy", "cda", "--no-incremental"], capture_output=True, text=True, cwd=ROOT, timeout=600
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
