"""Messages a user reads are in their words (audit finding 14): the type error for a name declared
twice says "an observable predicate", through the CLI a person uses."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import ROOT


def test_a_name_declared_twice_is_named_with_its_article(tmp_path: Path) -> None:
    (tmp_path / "p.cda").write_text("observable o\nhyp o\n", encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "CDA_KEY_DIR": str(tmp_path / "keys")}
    run = subprocess.run([sys.executable, "-m", "cda", "check", "p.cda"], capture_output=True, text=True, env=env,
                         cwd=tmp_path, timeout=120)
    assert run.returncode == 2, run.stdout + run.stderr
    assert "p.cda:2:5: type error: 'o' is already declared as an observable predicate" in run.stderr, run.stderr
