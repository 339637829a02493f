"""A command's ``--timeout`` counts from its launch (cda/cli/launch.py): the process's, when the
command is the process's own, else the call of ``main(argv)``. Each check asserts only lower
bounds on elapsed time (a loaded machine makes them larger, never smaller)."""

from __future__ import annotations

import io
import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cda.cli import launch
from cda.cli.main import main
from tests.conftest import DATA

C17 = DATA / "iscas85" / "c17.bench"
ROOT = Path(__file__).resolve().parents[1]


def _python(code: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=300,
                          env={**os.environ, "CDA_KEY_DIR": str(tmp_path)})


def test_the_process_launch_counts_not_the_import(tmp_path: Path) -> None:
    """Half a second spent before cda is imported is part of the command's age."""
    done = _python("import time; time.sleep(0.5)\n"
                   "from cda.cli.launch import command_began, since_launch\n"
                   "command_began(process=True); print(since_launch())", tmp_path)
    assert done.returncode == 0, done.stderr
    assert float(done.stdout) >= 0.5


def test_main_called_in_a_process_that_goes_on_counts_from_its_call(monkeypatch: pytest.MonkeyPatch) -> None:
    launch.command_began(process=False)
    assert launch.since_launch() < time.monotonic() - launch._IMPORTED + 1e-9  # not the process's age
    monkeypatch.setattr(launch, "_began", time.monotonic() - 100.0)  # a command launched 100 s ago
    assert launch.budget_left(5.0) == 0.0 and 90.0 < launch.budget_left(200.0) <= 100.0  # type: ignore[operator]
    assert launch.budget_left(None) is None and launch.budget_left(math.inf) == math.inf


@pytest.mark.skipif(not C17.exists(), reason=f"{C17} is absent")
def test_a_budget_spent_before_the_command_ran_is_a_labelled_partial(tmp_path: Path) -> None:
    """``cda diagnose --timeout 0.5`` in a process that spent 1 s before it ran: the budget was
    the process's, so it is spent; the answer is the labelled partial (exit 3), not a full run."""
    obs = tmp_path / "obs.txt"
    obs.write_text("1 2 3 6 7 22 23\n1 0 1 1 0 0 1\n")
    argv = ["cda", "diagnose", str(C17), "--observations", str(obs), "--json", "--timeout", "0.5"]
    done = _python(f"import time, sys, runpy; time.sleep(1.0); sys.argv = {argv!r}\n"
                   "runpy.run_module('cda', run_name='__main__')", tmp_path)
    assert done.returncode == 3, done.stderr
    data = json.loads(done.stdout)
    assert data["timed_out"] and not data["complete"]
    # the same command called in this process counts from its call: a 60 s budget, the whole answer
    out = io.StringIO()
    assert main(argv[1:-1] + ["60"], out, io.StringIO()) == 0
    assert json.loads(out.getvalue())["complete"]
