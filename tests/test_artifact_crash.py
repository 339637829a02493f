"""A run killed while it writes its artifacts leaves a folder the next run takes back (rule 4: bad
input or a crash loses nothing; docs/actions.md, "Receipts, artifacts, reflection").

``cda run --out DIR`` writes ``DIR/<id>/`` file by file; before, a run killed between a file and
the manifest's rewrite left a file the manifest did not list, and every later run refused the
folder as not CDA's until the user removed it. Each case here kills a real ``cda run`` process
(``os._exit``, no clean-up) at one of its file writes, or with a write's temporary file half
written, then runs ``cda run`` again over the same folder: it must succeed and leave exactly the
files a run that was never killed leaves, each with the bytes its manifest lists, and nothing
else. A file that is not CDA's is still refused, crash or not."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli_run import cda_here
from tests.conftest import EXAMPLES, ROOT

ACTION = EXAMPLES / "action" / "service_outage.json"

_CRASHING = """
import os, sys
import cda.actions.artifacts as artifacts
import cda.files as files

at, mode, count_to = int(os.environ["CRASH_AT"]), os.environ["CRASH_MODE"], os.environ.get("CRASH_COUNT")
calls = 0
real = artifacts.replace_file

def replace_file(path, data, **kw):
    global calls
    calls += 1
    if count_to:
        with open(count_to, "w") as fh:
            fh.write(str(calls))
    if calls == at:
        if mode == "temporary":  # the write's temporary file made, half its bytes in it, then death
            files._temporary_beside(path, data[: len(data) // 2])
        os._exit(9)
    return real(path, data, **kw)

artifacts.replace_file = replace_file
from cda.cli.main import main
sys.exit(main())
"""


def _cda(folder: Path, *argv: str, crash: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "CDA_KEY_DIR": str(folder / "keys"), **(crash or {})}
    command = [sys.executable, "-c", _CRASHING] if crash else [sys.executable, "-m", "cda"]
    return subprocess.run([*command, *argv], cwd=folder, env=env, capture_output=True, text=True, timeout=300)


def _again(folder: Path, out: str) -> subprocess.CompletedProcess[str]:
    """The next ``cda run`` over the killed run's folder, in this process (``tests/cli_run.py``'s
    ``cda_here``): what is tested is what it finds on disk, not its process; every killed run, the
    clean run and the refusal below are real children (docs/testing.md)."""
    return cda_here("run", ACTION.name, "--out", out, cwd=folder, env={"CDA_KEY_DIR": str(folder / "keys")})


def _files(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def _assert_whole(folder: Path, clean: dict[str, bytes]) -> None:
    """The folder holds the files a run never killed leaves, each as its manifest lists it, and nothing else."""
    held = _files(folder)
    assert sorted(held) == sorted(clean), sorted(set(held) ^ set(clean))
    manifest = json.loads(held[".cda-artifacts.json"])
    assert "pending" not in manifest
    assert {name: hashlib.sha256(data).hexdigest() for name, data in held.items() if name != ".cda-artifacts.json"} \
        == manifest["files"]
    assert held["summary.md"] == clean["summary.md"]
    assert held["cda_plan/hypotheses.json"] == clean["cda_plan/hypotheses.json"]


@pytest.fixture(scope="module")
def clean_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, dict[str, bytes], int]:
    """The inputs, the action's id, the files of a run never killed, and how many files a run writes."""
    folder = tmp_path_factory.mktemp("crash")
    for f in (EXAMPLES / "action").glob("*.json"):
        shutil.copy(f, folder / f.name)
    counted = folder / "count"
    done = _cda(folder, "run", ACTION.name, "--out", "clean",
                crash={"CRASH_AT": "0", "CRASH_MODE": "none", "CRASH_COUNT": str(counted)})
    assert done.returncode == 0, done.stderr[-2000:]
    (ident,) = [p.name for p in (folder / "clean").iterdir() if p.is_dir()]
    clean = _files(folder / "clean" / ident)
    writes = int(counted.read_text())
    assert writes > len(clean) // 2  # the bundle's files, the summary, the evidence, the manifest's rewrites
    return folder, ident, clean, writes


def _points(writes: int) -> list[int]:
    return sorted({1, 2, 3, 4, 5, writes // 2, writes - 2, writes - 1, writes})


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["dead", "temporary"])
def test_a_run_killed_while_writing_is_taken_back_by_the_next(clean_run: tuple[Path, str, dict[str, bytes], int],
                                                               mode: str) -> None:
    folder, ident, clean, writes = clean_run
    for at in _points(writes):
        out = f"{mode}-{at}"
        killed = _cda(folder, "run", ACTION.name, "--out", out, crash={"CRASH_AT": str(at), "CRASH_MODE": mode})
        assert killed.returncode == 9, (at, killed.returncode, killed.stderr[-2000:])
        again = _again(folder, out)
        assert again.returncode == 0, (mode, at, again.stderr[-2000:])
        _assert_whole(folder / out / ident, clean)


@pytest.mark.slow
def test_a_run_killed_over_its_own_earlier_folder_is_taken_back(clean_run: tuple[Path, str, dict[str, bytes], int]
                                                                ) -> None:
    """The second run over a folder: a killed rewrite leaves old bytes, new bytes or a temporary file."""
    folder, ident, clean, writes = clean_run
    for at in (2, writes // 2, writes - 1):
        for mode in ("dead", "temporary"):
            out = f"again-{mode}-{at}"
            shutil.copytree(folder / "clean", folder / out, ignore=shutil.ignore_patterns("receipts.sqlite*"))
            killed = _cda(folder, "run", ACTION.name, "--out", out, crash={"CRASH_AT": str(at), "CRASH_MODE": mode})
            assert killed.returncode == 9, (at, killed.stderr[-2000:])
            again = _again(folder, out)
            assert again.returncode == 0, (mode, at, again.stderr[-2000:])
            _assert_whole(folder / out / ident, clean)


def test_a_temporary_name_beside_a_finished_file_is_still_refused(
        clean_run: tuple[Path, str, dict[str, bytes], int]) -> None:
    """Only a name CDA was writing when it was killed is CDA's unfinished write; the same pattern
    beside a finished file, or anything else the manifest does not list, is someone else's."""
    folder, ident, _clean, _writes = clean_run
    out = folder / "planted"
    shutil.copytree(folder / "clean", out, ignore=shutil.ignore_patterns("receipts.sqlite*"))
    planted = out / ident / ".summary.md.0123456789abcdef.tmp"
    planted.write_text("someone's\n")
    done = _cda(folder, "run", ACTION.name, "--out", "planted")
    assert done.returncode == 2, done.stderr[-2000:]
    assert "was not written by CDA" in done.stderr and "Traceback" not in done.stderr
    assert planted.read_text() == "someone's\n"
    # a pending listing does not make a changed file CDA's: its bytes must be the old or the new
    manifest_path = out / ident / ".cda-artifacts.json"
    planted.unlink()
    manifest = json.loads(manifest_path.read_text())
    manifest["pending"] = {"summary.md": "0" * 64}
    manifest_path.write_text(json.dumps(manifest))
    (out / ident / "summary.md").write_text("my own words\n")
    done = _cda(folder, "run", ACTION.name, "--out", "planted")
    assert done.returncode == 2 and "changed since CDA wrote it" in done.stderr, done.stderr[-2000:]
    assert (out / ident / "summary.md").read_text() == "my own words\n"
