"""A job's memory cap is reported as ``memory`` whatever the cap keeps from happening.

Before: ``memory_mb = 64`` on a z3 job was recorded ``failed`` with "Z3Exception: libz3.so.5.4
not found": under ``RLIMIT_AS`` the library cannot be mapped, and z3's loader reports every
failure to load it as not found. A clingo job of the same problem fits in 64 MiB and stays ok,
so the cap does not count the library a job does not load.
"""

from __future__ import annotations

import json
from pathlib import Path

from cda.cli.main import main
from tests.conftest import EXAMPLES


def test_a_cap_too_small_for_z3s_library_is_memory_and_a_job_that_fits_is_ok(tmp_path: Path) -> None:
    text = (EXAMPLES / "service_outage.cda").read_text(encoding="utf-8")  # its explanations, not its open claims
    (tmp_path / "outage.cda").write_text("".join(line for line in text.splitlines(keepends=True)
                                                 if not line.startswith(("goal prove", "goal disprove"))))
    manifest = tmp_path / "jobs.toml"
    manifest.write_text("".join(
        f'[[job]]\nname = "{backend}"\nkind = "solve"\nfile = "outage.cda"\nmemory_mb = 64\n'
        f'params = {{ backend = "{backend}" }}\n\n' for backend in ("z3", "clingo")), encoding="utf-8")
    code = main(["jobs", "run", str(manifest), "--workers", "1"])
    rows = {r["name"]: r for r in map(json.loads, (tmp_path / "jobs.results" / "results.jsonl").read_text().splitlines())}
    assert rows["z3"]["status"] == "memory", rows["z3"]
    assert rows["z3"]["error"].startswith("the job went over its memory cap of 64 MiB (z3's library could not be loaded")
    assert "not found" not in rows["z3"]["error"] and str(tmp_path) not in rows["z3"]["error"]
    assert rows["clingo"]["status"] == "ok" and rows["clingo"]["result"]["hypotheses"]
    assert code == 3  # a job over its cap gave no answer: the batch exits as the CLI does without a verdict (docs/jobs.md)
