"""A huge finite time limit is "wait as long as z3 can", never a crash (rule 4; audit finding: a
``--timeout 1e306`` that the checker accepts became an infinity of milliseconds that ``int`` could not
take, a traceback at ``cda solve``/``cda prove``/``cda policy analyze``, an Action's ``budgets.wall``
and a job's ``timeout``). The clamp is in one place, ``cda.contracts.limits.z3_timeout_ms``; each door
is driven here as a user would, in a child process (the answer with no limit, which the huge one must
equal, is read in this process through ``tests/cli_run.py``'s ``cda_here``: the same function a child
calls, half the children; docs/testing.md)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli_run import cda_here
from tests.conftest import EXAMPLES, ROOT


def _cda(*argv: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "CDA_KEY_DIR": str(cwd / "keys")}
    return subprocess.run([sys.executable, "-m", "cda", *argv], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=300)


def _no_crash(done: subprocess.CompletedProcess[str]) -> None:
    assert "Traceback" not in done.stderr and "OverflowError" not in done.stderr + done.stdout, done.stderr[-2000:]


@pytest.mark.parametrize("argv, code", [
    (("solve", str(EXAMPLES / "claim_check.cda"), "--json"), 1),  # 1: a claim is inconclusive (the file's own answer)
    (("solve", str(EXAMPLES / "claim_check.cda"), "--json", "--backend", "clingo"), 1),
    (("prove", str(EXAMPLES / "syllogism.fol")), None),
    (("policy", "analyze", "always-allows", str(EXAMPLES / "cedar" / "new.cedar"),
      "--schema", str(EXAMPLES / "cedar" / "schema.cedarschema")), None),
])
def test_a_huge_timeout_at_the_cli_is_the_longest_wait(tmp_path: Path, argv: tuple[str, ...], code: int | None) -> None:
    plain = cda_here(*argv, cwd=tmp_path, env={"CDA_KEY_DIR": str(tmp_path / "keys")})
    huge = _cda(*argv, "--timeout", "1e306", cwd=tmp_path)
    _no_crash(huge)
    assert huge.returncode == plain.returncode, (huge.returncode, plain.returncode, huge.stderr[-2000:])
    if code is not None:
        assert huge.returncode == code
    assert huge.stdout == plain.stdout  # the same answer as with no limit at all


def test_a_huge_wall_budget_of_an_action_and_a_job_timeout(tmp_path: Path) -> None:
    for f in (EXAMPLES / "action").glob("*.json"):
        shutil.copy(f, tmp_path / f.name)
    action = json.loads((tmp_path / "service_outage.json").read_text())
    action["budgets"]["wall"] = 60
    text = json.dumps(action).replace('"wall": 60', '"wall": 1e306')
    (tmp_path / "huge.json").write_text(text)
    ran = _cda("run", "huge.json", cwd=tmp_path)
    _no_crash(ran)
    assert ran.returncode == 0, ran.stderr[-2000:]
    shutil.copy(EXAMPLES / "claim_check.cda", tmp_path / "claim_check.cda")
    (tmp_path / "m.toml").write_text('[[job]]\nname = "a"\nkind = "solve"\nfile = "claim_check.cda"\n'
                                     'params = {timeout = 1e308}\n')
    jobs = _cda("jobs", "run", "m.toml", "--out", "o", cwd=tmp_path)
    _no_crash(jobs)
    (row,) = [json.loads(line) for line in (tmp_path / "o" / "results.jsonl").read_text().splitlines()]
    assert "internal error" not in json.dumps(row) and "Overflow" not in json.dumps(row), row
    assert row["result"]["status"] == "sat"
