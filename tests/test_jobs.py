"""Batch jobs (issue 16): `cda jobs run MANIFEST.toml` on the local process pool and on a Dask
LocalCluster gives the same JSONL bytes; each result equals a direct call of the public API;
a failing, timing-out and memory-hogging job is recorded while the others finish; kill -9
mid-batch and a re-run completes every job exactly once; manifest mistakes name line and field.
"""

from __future__ import annotations

import io
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cda.actions.receipts import ReceiptLog
from cda.actions.receipts import verify as verify_receipts
from cda.adapters.jobs.batch import DB_NAME, JSONL_NAME
from cda.adapters.jobs.child import outcome_of
from cda.adapters.jobs.manifest import ManifestError, read_manifest
from cda.adapters.jobs.results_store import JOBS_FORMAT
from cda.cli.main import main
from tests.cli_run import cda_here
from tests.conftest import DATA, copy_cedar_test
from tests.timing import HANG, Stopwatch, wait_until

ROOT = Path(__file__).resolve().parent.parent
CLAIM = (ROOT / "examples" / "claim_check.cda").read_text(encoding="utf-8")
# claim_check.cda without its one goal the evidence cannot settle: every goal supported, `cda solve` exits 0
CLAIM_OK = CLAIM.replace("goal prove deploy_broke_login\n", "")
assert CLAIM_OK != CLAIM
SYLLOGISM = (ROOT / "examples" / "syllogism.fol").read_text(encoding="utf-8")
C17 = """INPUT(1)\nINPUT(2)\nINPUT(3)\nINPUT(6)\nINPUT(7)\nOUTPUT(22)\nOUTPUT(23)
10 = NAND(1, 3)\n11 = NAND(3, 6)\n16 = NAND(2, 11)\n19 = NAND(11, 7)\n22 = NAND(10, 16)\n23 = NAND(16, 19)\n"""
C17_OBS = "1=1 2=1 3=1 6=1 7=1 22=0 23=0\n"  # the healthy circuit gives 22=1, 23=0: gate 10 or 22 is broken


def _cube(n: int) -> str:
    """A problem that grounds n**3 clauses and solves for a long time: 20 values take ~35 s and 1.4 GB."""
    values = ", ".join(f"v{i}" for i in range(n))
    return (f"domain D = {{{values}}}\nhyp r(D, D, D)\n"
            "hard: forall x in D: forall y in D: forall z in D: r(x, y, z) implies r(y, z, x)\nhard: r(v0, v1, v2)\n")


def _inputs(folder: Path) -> None:
    (folder / "claim.cda").write_text(CLAIM, encoding="utf-8")
    (folder / "syllogism.fol").write_text(SYLLOGISM, encoding="utf-8")
    (folder / "c17.bench").write_text(C17, encoding="utf-8")
    (folder / "c17.obs").write_text(C17_OBS, encoding="utf-8")
    (folder / "bad.cda").write_text("hyp a\nhard: a and\n", encoding="utf-8")
    (folder / "cube.cda").write_text(_cube(20), encoding="utf-8")


MIXED = """
[defaults]
timeout_s = 60
memory_mb = 2048

[[job]]
kind = "solve"
file = "claim.cda"
params = { backend = "z3", top = 2 }

[[job]]
name = "claim on clingo"
kind = "solve"
file = "claim.cda"
params = { backend = "clingo", top = 2 }

[[job]]
kind = "check"
file = "claim.cda"

[[job]]
kind = "prove"
file = "syllogism.fol"

[[job]]
kind = "diagnose"
file = "c17.bench"
params = { observations = "c17.obs" }

[[job]]
kind = "solve"
file = "bad.cda"

[[job]]
kind = "cedar-test"
file = "bad.cda"
"""


def _run(manifest: Path, *args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(["jobs", "run", str(manifest), *args], stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def _lines(folder: Path) -> list[dict]:
    return [json.loads(line) for line in (folder / JSONL_NAME).read_text(encoding="utf-8").splitlines()]


@pytest.mark.slow  # a real Dask LocalCluster (44 s at load 13): .ci/run's slow step
def test_pool_and_dask_local_cluster_write_the_same_jsonl(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _inputs(tmp_path)
    manifest = tmp_path / "jobs.toml"
    manifest.write_text(MIXED, encoding="utf-8")
    code, out, _ = _run(manifest, "--workers", "2", "--out", str(tmp_path / "pool"))
    assert code == 1, out  # the claims not supported, the bad file and the Cedar job fail; the batch still finishes
    code_dask, out_dask, err_dask = _run(manifest, "--workers", "2", "--dask", "local", "--out", str(tmp_path / "dask"))
    assert code_dask == 1, out_dask + err_dask
    pool_bytes = (tmp_path / "pool" / JSONL_NAME).read_bytes()
    assert pool_bytes == (tmp_path / "dask" / JSONL_NAME).read_bytes()

    lines = _lines(tmp_path / "pool")
    assert [r["index"] for r in lines] == list(range(7))
    # claim.cda's `prove deploy_broke_login` is inconclusive and syllogism.fol refutes one claim and
    # leaves one open: failed, as `cda solve` and `cda prove` exit 1 on them, with the result kept
    assert [r["status"] for r in lines] == ["failed", "failed", "ok", "failed", "ok", "failed", "failed"]
    assert "prove deploy_broke_login: inconclusive" in lines[0]["error"] and "cda solve` exits 1" in lines[0]["error"]
    assert "c2: refuted; c3: inconclusive" in lines[3]["error"]
    for line in pool_bytes.decode().splitlines():  # stable key order, no timing
        assert list(json.loads(line)) == sorted(json.loads(line))
        assert "seconds" not in line and "time_s" not in line
    # each result is what the public API answers when called directly
    from cda.api import check, solve
    from cda.diagnosis.diagnose import diagnose
    from cda.fol.parse import parse_fol
    from cda.fol.prove import prove_all

    monkeypatch.chdir(tmp_path)
    assert lines[0]["result"] == json.loads(solve(Path("claim.cda"), backend="z3", top=2).json_text())
    assert lines[1]["result"] == json.loads(solve(Path("claim.cda"), backend="clingo", top=2).json_text())
    assert lines[2]["result"] == check(Path("claim.cda")).model_dump(mode="json")
    proofs = prove_all(parse_fol(SYLLOGISM, filename="syllogism.fol"), 10.0)
    assert lines[3]["result"] == {"results": [p.model_dump(mode="json") for p in proofs]}
    assert [p["status"] for p in lines[3]["result"]["results"]] == ["supported", "refuted", "inconclusive"]
    direct = diagnose(Path("c17.bench"), Path("c17.obs")).model_dump(mode="json")
    del direct["time_s"]
    assert lines[4]["result"] == direct and direct["diagnoses"] == [["10"], ["22"]]
    assert "bad.cda:2:12: syntax error" in lines[5]["error"]
    assert "bad.cda" in lines[6]["error"] and "not valid JSON" in lines[6]["error"]  # cda.policy read it
    # one receipt per job, in an intact chain
    with ReceiptLog(tmp_path / "pool" / DB_NAME, fmt=JOBS_FORMAT) as log:
        assert sorted(e.receipt.inputs_hash for e in log.entries()) == sorted(r["key"] for r in lines)
    assert verify_receipts(tmp_path / "pool" / DB_NAME, formats=(JOBS_FORMAT,)).ok


def test_failing_timed_out_and_memory_hog_jobs_are_recorded_while_others_finish(tmp_path: Path) -> None:
    _inputs(tmp_path)
    manifest = tmp_path / "jobs.toml"
    manifest.write_text("""
[[job]]
name = "slow"
kind = "solve"
file = "cube.cda"
timeout_s = 1.5

[[job]]
name = "hog"
kind = "solve"
file = "cube.cda"
memory_mb = 150
params = { seed = 1 }

[[job]]
name = "raises"
kind = "solve"
file = "bad.cda"

[[job]]
name = "fine"
kind = "check"
file = "claim.cda"
""", encoding="utf-8")
    with Stopwatch() as watch:
        code, out, _ = _run(manifest, "--workers", "2")
    assert watch.cpu < 30, watch  # the slow job (35 s of CPU alone) was killed, not waited for
    assert code == 3  # the worst of failed (1), memory and timeout (3: no answer), as over several files
    by_name = {r["name"]: r for r in _lines(tmp_path / "jobs.results")}
    assert by_name["slow"]["status"] == "timeout" and "time limit of 1.5 s" in by_name["slow"]["error"]
    assert by_name["hog"]["status"] == "memory", by_name["hog"]
    assert "150 MiB" in by_name["hog"]["error"]
    assert by_name["raises"]["status"] == "failed" and "syntax error" in by_name["raises"]["error"]
    assert by_name["fine"]["status"] == "ok" and by_name["fine"]["result"]["abducibles"] == 3
    assert "1 failed, 1 memory, 1 ok, 1 timeout" in out


@pytest.mark.slow  # a kill-and-restart loop: .ci/run's slow step (README: the test command leaves it out)
def test_kill_9_mid_batch_then_rerun_finishes_every_job_exactly_once(tmp_path: Path) -> None:
    (tmp_path / "claim.cda").write_text(CLAIM_OK, encoding="utf-8")
    jobs = "".join(f'[[job]]\nkind = "solve"\nfile = "claim.cda"\nparams = {{ seed = {i}, backend = "z3" }}\n\n'
                   for i in range(8))
    manifest = tmp_path / "jobs.toml"
    manifest.write_text(jobs, encoding="utf-8")
    db = tmp_path / "jobs.results" / DB_NAME
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    log = tmp_path / "stderr.txt"
    with log.open("wb") as stderr:
        proc = subprocess.Popen([sys.executable, "-m", "cda", "jobs", "run", str(manifest), "--workers", "1"],
                                env=env, stdout=subprocess.DEVNULL, stderr=stderr)

    def done() -> dict[str, tuple[str, int]]:
        if not db.exists():
            return {}
        try:
            with sqlite3.connect(db) as conn:
                return {k: (r, a) for k, r, a in conn.execute("SELECT key, run_id, attempt FROM job_results")}
        except sqlite3.OperationalError:  # the table is not made yet
            return {}

    deadline = time.monotonic() + 60
    while len(done()) < 2 and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.05)
    assert proc.poll() is None, log.read_text()
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    before = done()
    assert 2 <= len(before) < 8, "the batch was not killed mid-way"
    # the running job's process dies with its parent (PR_SET_PDEATHSIG): the kernel's kill lands
    wait_until(lambda: not _job_processes_in(tmp_path), "the job processes to die with their killed batch")

    code, out, _ = _run(manifest, "--workers", "2")
    assert code == 0, out
    assert f"{8 - len(before)} ran now, {len(before)} were done before" in out
    after = done()
    assert len(after) == 8
    assert all(after[k] == before[k] for k in before)  # finished jobs were not run again
    assert all(attempt == 0 for _, attempt in after.values())
    assert len({run for run, _ in after.values()}) == 2
    lines = _lines(tmp_path / "jobs.results")
    assert [r["index"] for r in lines] == list(range(8)) and all(r["status"] == "ok" for r in lines)
    assert sorted(r["key"] for r in lines) == sorted(after)
    with ReceiptLog(db, fmt=JOBS_FORMAT) as log:  # exactly one receipt per job, the chain intact
        assert sorted(e.receipt.inputs_hash for e in log.entries()) == sorted(after)
    assert verify_receipts(db, formats=(JOBS_FORMAT,)).ok
    out = io.StringIO()  # and the head the resumed batch signed covers every receipt
    assert main(["receipts", "verify", str(db)], stdout=out, stderr=io.StringIO()) == 0, out.getvalue()
    assert "signed head at entry 8 (0 entries after it)" in out.getvalue()
    # a third run finds everything done, runs nothing and writes the same bytes
    first = (tmp_path / "jobs.results" / JSONL_NAME).read_bytes()
    code, out, _ = _run(manifest)
    assert code == 0 and "0 ran now, 8 were done before" in out
    assert (tmp_path / "jobs.results" / JSONL_NAME).read_bytes() == first


def _job_processes_in(folder: Path) -> list[int]:
    """Live job processes (``cda.adapters.jobs.child``) running in ``folder``, from /proc."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
            cwd = Path(os.readlink(entry / "cwd"))
        except OSError:  # gone meanwhile, or not ours to read
            continue
        if b"cda.adapters.jobs.child" in cmdline and cwd == folder.resolve():
            found.append(int(entry.name))
    return found


def test_cedar_kind_without_cda_policy_is_a_clear_failure(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setitem(sys.modules, "cda.policy", None)  # absent, whether or not it is installed
    monkeypatch.setitem(sys.modules, "cda.policy.jobs", None)
    for kind in ("cedar-test", "policy-analysis", "request-batch"):
        outcome = outcome_of({"kind": kind, "file": "x.json", "params": {}, "memory_mb": 1024})
        assert outcome["status"] == "failed"
        assert "cda.policy not available" in outcome["error"] and repr(kind) in outcome["error"]


def test_progress_bar_on_a_terminal_only(tmp_path: Path) -> None:
    (tmp_path / "claim.cda").write_text(CLAIM, encoding="utf-8")
    manifest = tmp_path / "jobs.toml"
    manifest.write_text('[[job]]\nkind = "check"\nfile = "claim.cda"\n', encoding="utf-8")

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    err = Terminal()
    assert main(["jobs", "run", str(manifest)], stdout=io.StringIO(), stderr=err) == 0
    assert "[########################] 1/1 jobs" in err.getvalue()
    code, _, plain = _run(manifest)
    assert code == 0 and plain == ""


def test_job_key_follows_kind_params_and_file_bytes_not_name_or_order(tmp_path: Path) -> None:
    (tmp_path / "a.cda").write_text(CLAIM, encoding="utf-8")
    manifest = tmp_path / "m.toml"
    manifest.write_text('[[job]]\nkind = "solve"\nfile = "a.cda"\nparams = { top = 2, seed = 1 }\n'
                        '[[job]]\nkind = "check"\nfile = "a.cda"\n', encoding="utf-8")
    first = [j.key for j in read_manifest(manifest).jobs]
    manifest.write_text('[[job]]\nkind = "check"\nname = "renamed"\nfile = "a.cda"\ntimeout_s = 5\n'
                        '[[job]]\nkind = "solve"\nfile = "a.cda"\nparams = { seed = 1, top = 2 }\n', encoding="utf-8")
    assert [j.key for j in read_manifest(manifest).jobs] == first[::-1]
    (tmp_path / "a.cda").write_text(CLAIM + "\n# edited\n", encoding="utf-8")
    assert set(j.key for j in read_manifest(manifest).jobs).isdisjoint(first)


BAD_MANIFESTS = [
    ('[[job]]\nkind = "solve"\nfile = "a.cda"\nparam = {}\n', ":4: job 1: unknown key 'param'"),
    ('[[job]]\nkind = "check"\nfile = "a.cda"\n\n[[job]]\nkind = "sovle"\nfile = "a.cda"\n',
     ":6: job 2: unknown kind 'sovle'"),
    ('[[job]]\nkind = "solve"\nfile = "a.cda"\nparams = { backend = "cvc5" }\n',
     ":4: job 1: params.backend must be one of auto, z3, clingo, not 'cvc5'"),
    ('[[job]]\nkind = "solve"\nfile = "a.cda"\nparams = { depth = 3 }\n', ":4: job 1: a solve job has no parameter 'depth'"),
    ('[[job]]\nkind = "solve"\nfile = "a.cda"\nparams = { top = 0 }\n', "params.top must be a whole number"),
    ('[[job]]\nkind = "solve"\nfile = "a.cda"\nparams = { seed = -1 }\n', "params.seed must be a whole number from 0"),
    ('[[job]]\nkind = "solve"\nfile = "a.cda"\nparams = { timeout = -1 }\n', "params.timeout must be a number of seconds"),
    ('[[job]]\nkind = "solve"\nfile = "missing.cda"\n', ":3: job 1: file 'missing.cda': no such file"),
    ('[[job]]\nkind = "solve"\n', ":1: job 1: missing 'file'"),
    ('[[job]]\nkind = "check"\nfile = "a.cda"\ntimeout_s = nan\n', ":4: job 1: timeout_s must be a number of seconds"),
    ('[[job]]\nkind = "check"\nfile = "a.cda"\ntimeout_s = -1\n', "timeout_s must be a number of seconds, more than 0"),
    ('[[job]]\nkind = "check"\nfile = "a.cda"\nmemory_mb = 10\n', ":4: job 1: memory_mb must be a whole number from 64"),
    ('[[job]]\nkind = "check"\nfile = "a.cda"\nmemory_mb = 99999999999999999999\n', "memory_mb must be a whole number"),
    ('[defaults]\ntimeout = 5\n[[job]]\nkind = "check"\nfile = "a.cda"\n', ":2: [defaults]: unknown key 'timeout'"),
    ('jobs = []\n', "unknown top-level key 'jobs'"),
    ('[defaults]\ntimeout_s = 5\n', "no jobs"),
    ('[[job]]\nkind = "check"\nfile = "a.cda"\n[[job]]\nkind = "check"\nfile = "./a.cda"\nname = "again"\n',
     ":4: job 2 repeats job 1"),
    ('[[job]]\nkind = "check"\nfile = "a.cda"\nname = "x"\n[[job]]\nkind = "solve"\nfile = "a.cda"\nname = "x"\n',
     ":8: job 2: the name 'x' is taken by job 1"),
    ('[[job]]\nkind = "check"\nfile = "a.cda"\nfile = "b.cda"\n', "not valid TOML: Cannot overwrite a value (at line 4"),
    ('[[job]\n', "not valid TOML"),
    ('[[job]]\nkind = "check"\nfile = "."\n', "file '.': a folder, not a file"),
    ('[[job]]\nkind = "policy-analysis"\nfile = "a.cda"\nparams = { action = "view" }\n',
     ":4: job 1: a policy-analysis job needs params.analysis"),
    ('[[job]]\nkind = "policy-analysis"\nfile = "a.cda"\nparams = { analysis = "always-allow" }\n',
     "params.analysis must be one of always-allows, always-denies"),
    ('[[job]]\nkind = "policy-analysis"\nfile = "a.cda"\nparams = { analysis = "always-allows" }\n',
     ":4: job 1: a policy-analysis job needs params.schema"),
    ('[[job]]\nkind = "policy-analysis"\nfile = "a.cda"\n'
     'params = { analysis = "no-new-access", schema = "a.cda" }\n',
     ":4: job 1: no-new-access compares two policy sets: it needs params.other"),
    ('[[job]]\nkind = "policy-analysis"\nfile = "a.cda"\nparams.analysis = "implies"\nparams.schema = "a.cda"\n',
     ":4: job 1: implies compares two policy sets: it needs params.other"),
    ('[[job]]\nkind = "policy-analysis"\nfile = "a.cda"\n'
     'params = { analysis = "never-errors", schema = "a.cda", other = "a.cda" }\n',
     ":4: job 1: never-errors analyses one policy set: params.other would not be read"),
    ('[[job]]\nkind = "diagnose"\nfile = "a.cda"\nparams = { observations = "none.obs" }\n',
     "params.observations 'none.obs': no such file"),
]


@pytest.mark.parametrize("text,expected", BAD_MANIFESTS)
def test_manifest_mistakes_name_the_line_and_field(tmp_path: Path, text: str, expected: str) -> None:
    (tmp_path / "a.cda").write_text(CLAIM, encoding="utf-8")
    manifest = tmp_path / "m.toml"
    manifest.write_text(text, encoding="utf-8")
    with pytest.raises(ManifestError) as info:
        read_manifest(manifest)
    assert expected in str(info.value)
    code, out, err = _run(manifest)
    assert code == 2 and out == "" and expected in err and "Traceback" not in err
    assert not (tmp_path / "m.results").exists()  # nothing ran, nothing written


def test_usage_errors_exit_2(tmp_path: Path) -> None:
    assert _run(tmp_path / "none.toml")[0] == 2
    (tmp_path / "m.toml").write_text('[[job]]\nkind = "check"\nfile = "m.toml"\n', encoding="utf-8")
    code, _, err = _run(tmp_path / "m.toml", "--workers", "0")
    assert code == 2 and "--workers must be a whole number from 1" in err


def test_what_a_kind_raises_is_the_jobs_error_never_the_batchs(monkeypatch: pytest.MonkeyPatch) -> None:
    from cda.adapters.jobs import kinds

    def boom(job: kinds.JobInput) -> object:
        raise RuntimeError("boom")

    def hog(job: kinds.JobInput) -> object:
        raise MemoryError

    def not_json(job: kinds.JobInput) -> object:
        return {"x": float("nan")}

    for name, run in (("boom", boom), ("hog", hog), ("nan", not_json)):
        monkeypatch.setitem(kinds.KINDS, name, kinds.JobKind(name, run, needs_file=False))
    assert outcome_of({"kind": "boom", "file": None, "params": {}, "memory_mb": 99}) == {
        "status": "failed", "error": "internal error: RuntimeError: boom", "reads": {}}
    assert outcome_of({"kind": "hog", "file": None, "params": {}, "memory_mb": 99}) == {
        "status": "memory", "error": "the job went over its memory cap of 99 MiB", "reads": {}}
    assert outcome_of({"kind": "nan", "file": None, "params": {}, "memory_mb": 99})["status"] == "failed"


def test_results_store_is_sqlite_in_wal_mode(tmp_path: Path) -> None:
    (tmp_path / "claim.cda").write_text(CLAIM, encoding="utf-8")
    manifest = tmp_path / "m.toml"
    manifest.write_text('[[job]]\nkind = "check"\nfile = "claim.cda"\n', encoding="utf-8")
    assert _run(manifest)[0] == 0
    with sqlite3.connect(tmp_path / "m.results" / DB_NAME) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert conn.execute("SELECT kind, status, attempt FROM job_results").fetchall() == [("check", "ok", 0)]


def test_retry_failed_runs_only_the_failed_jobs_again(tmp_path: Path) -> None:
    (tmp_path / "claim.cda").write_text(CLAIM, encoding="utf-8")
    manifest = tmp_path / "m.toml"
    manifest.write_text('[[job]]\nkind = "check"\nfile = "claim.cda"\n\n[[job]]\nkind = "cedar-test"\nfile = "claim.cda"\n',
                        encoding="utf-8")
    assert _run(manifest)[0] == 1
    code, out, _ = _run(manifest)
    assert code == 1 and "0 ran now, 2 were done before" in out  # a failed job is done: not run again
    code, out, _ = _run(manifest, "--retry-failed")
    assert code == 1 and "1 ran now, 1 were done before" in out
    db = tmp_path / "m.results" / DB_NAME
    with sqlite3.connect(db) as conn:
        assert sorted(conn.execute("SELECT kind, attempt FROM job_results")) == [("cedar-test", 1), ("check", 0)]
    with ReceiptLog(db, fmt=JOBS_FORMAT) as log:
        assert sorted((e.receipt.name, e.receipt.seq) for e in log.entries()) == [
            ("job.cedar-test", 0), ("job.cedar-test", 1), ("job.check", 0)]
    assert verify_receipts(db, formats=(JOBS_FORMAT,)).ok


def test_a_malformed_dask_scheduler_is_a_usage_error(tmp_path: Path) -> None:
    (tmp_path / "claim.cda").write_text(CLAIM, encoding="utf-8")
    manifest = tmp_path / "m.toml"
    manifest.write_text('[[job]]\nkind = "check"\nfile = "claim.cda"\n', encoding="utf-8")
    code, out, err = _run(manifest, "--dask", "no-port-here")
    assert code == 2 and "--dask no-port-here: cannot reach the scheduler" in err and "Traceback" not in err


def _interrupt(proc: subprocess.Popen[bytes], folder: Path) -> bytes:
    """SIGINT to the batch; its stderr. A batch that does not end within the hang bound (tests/timing.py:
    how fast it ends is benchmarks/bench_cancel.py's to measure, not a loaded machine's wall clock) is
    killed (with its job processes) before the test fails, so no process outlives the test."""
    proc.send_signal(signal.SIGINT)
    try:
        _, err = proc.communicate(timeout=HANG)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        for pid in _job_processes_in(folder):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        pytest.fail(f"the batch did not end within {HANG:g} s of Ctrl-C")
    return err


def _ctrl_c_manifest(folder: Path) -> Path:
    _inputs(folder)
    manifest = folder / "m.toml"
    manifest.write_text('[[job]]\nkind = "check"\nfile = "claim.cda"\n\n'
                        '[[job]]\nkind = "solve"\nfile = "cube.cda"\ntimeout_s = 120\n', encoding="utf-8")
    return manifest


def _start(manifest: Path) -> subprocess.Popen[bytes]:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.Popen([sys.executable, "-m", "cda", "jobs", "run", str(manifest), "--workers", "2"], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def test_ctrl_c_kills_the_running_jobs_and_keeps_the_finished(tmp_path: Path) -> None:
    manifest = _ctrl_c_manifest(tmp_path)
    proc = _start(manifest)
    db = tmp_path / "m.results" / DB_NAME

    def finished() -> int:
        try:
            with sqlite3.connect(db) as conn:
                return int(conn.execute("SELECT COUNT(*) FROM job_results").fetchone()[0])
        except sqlite3.OperationalError:  # not made yet
            return 0

    deadline = time.monotonic() + 30
    while (not db.exists() or finished() < 1) and time.monotonic() < deadline:  # the check job finishes;
        time.sleep(0.05)  # the cube job runs on (35 s alone)
    if not _job_processes_in(tmp_path):
        _interrupt(proc, tmp_path)
        pytest.fail("the cube job is not running")
    err = _interrupt(proc, tmp_path)  # right after the check job's row: its receipt may be being written
    assert proc.returncode == 130 and b"interrupted" in err and b"Traceback" not in err
    assert not _job_processes_in(tmp_path)
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT kind, status FROM job_results").fetchall() == [("check", "ok")]


def test_ctrl_c_at_any_moment_ends_the_batch(tmp_path: Path) -> None:
    """Ctrl-C at random moments of a batch (starting, jobs starting, the check job's row being
    committed, the cube running): exit 130 promptly, no job process left, only finished rows kept."""
    import random

    rng = random.Random()
    for attempt in range(4):
        folder = tmp_path / str(attempt)
        folder.mkdir()
        manifest = _ctrl_c_manifest(folder)
        proc = _start(manifest)
        time.sleep(rng.uniform(0.0, 1.5))
        running = (folder / "m.results").is_dir()  # the batch command has started (imports done)
        err = _interrupt(proc, folder)
        if running:
            assert proc.returncode == 130, (attempt, proc.returncode, err)
            assert b"interrupted" in err and b"Traceback" not in err, err
        else:  # still starting: CDA's handler in __main__ (130), or earlier, the interpreter's own start-up
            # (killed by the signal: -2; a KeyboardInterrupt while importing `site`: 1, "Fatal Python error")
            assert proc.returncode in (130, -signal.SIGINT) or (
                proc.returncode == 1 and b"init_import_site" in err), (attempt, proc.returncode, err)
        assert not _job_processes_in(folder)
        db = folder / "m.results" / DB_NAME
        if db.exists():  # a Ctrl-C as the store was being made may leave it marked but without the table
            with sqlite3.connect(db) as conn:
                made = conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'job_results'").fetchone()
                rows = conn.execute("SELECT kind, status FROM job_results").fetchall() if made else []
            assert rows in ([], [("check", "ok")])


def test_a_job_started_after_the_stop_is_killed_at_once(tmp_path: Path) -> None:
    """The pool's thread that had taken a job but not yet started its process when the batch was
    stopped: its process is never started, or killed at once (it is not yet in kill_running's set)."""
    import threading

    from cda.adapters.jobs.isolate import kill_running, run_job

    _inputs(tmp_path)
    spec = read_manifest(_ctrl_c_manifest(tmp_path)).jobs[1]
    stop = threading.Event()
    kill_running(stop)
    with Stopwatch() as watch:
        outcome = run_job(spec, stop)
    assert outcome.status == "crashed" and watch.uncontended < 5, watch
    assert not _job_processes_in(tmp_path)


def test_cedar_kinds_run_through_cda_policy(tmp_path: Path) -> None:
    """The three Cedar kinds, wired to cda.policy.jobs; each answer equals the direct call."""
    from cda.policy.analyze import analyze_files
    from cda.policy.authorization import authorize

    cedar = ROOT / "examples" / "cedar"
    for name in ("old.cedar", "new.cedar", "schema.cedarschema", "entities.json"):
        (tmp_path / name).write_bytes((cedar / name).read_bytes())
    request = json.loads((cedar / "request.json").read_text(encoding="utf-8"))
    (tmp_path / "requests.json").write_text(json.dumps([request, {**request, "context": {"mfa": True, "hour": 10}}]))
    manifest = tmp_path / "m.toml"
    manifest.write_text(
        '[[job]]\nkind = "policy-analysis"\nfile = "new.cedar"\n'
        'params = { analysis = "no-new-access", other = "old.cedar", schema = "schema.cedarschema", '
        'entities = "entities.json" }\n\n'
        '[[job]]\nkind = "request-batch"\nfile = "new.cedar"\n'
        'params = { schema = "schema.cedarschema", entities = "entities.json", requests = "requests.json" }\n',
        encoding="utf-8")
    code, out, _ = _run(manifest)
    assert code == 1 and "1 failed, 1 ok" in out  # the analysis does not hold: failed, as the CLI exits 1
    lines = [json.loads(line) for line in (tmp_path / "m.results" / "results.jsonl").read_text().splitlines()]
    analysis, batch = (line["result"] for line in lines)  # the failed analysis keeps its result
    assert lines[1]["status"] == "ok", lines[1]["error"]
    assert lines[0]["status"] == "failed"
    assert lines[0]["error"].startswith('no-new-access does not hold for (User, Action::"read", Doc)')
    # the job's file is NEW and other is OLD: the verdict is the CLI's `no-new-access OLD NEW`
    cli = ["policy", "analyze", "no-new-access", str(tmp_path / "old.cedar"), str(tmp_path / "new.cedar"),
           "--schema", str(tmp_path / "schema.cedarschema"), "--entities", str(tmp_path / "entities.json"), "--json"]
    out = io.StringIO()
    assert main(cli, stdout=out, stderr=io.StringIO()) == 1  # FAILS: the owner policy of new.cedar is new access
    assert analysis["status"] == "fails" and analysis["environments"] == json.loads(out.getvalue())
    direct = analyze_files("no-new-access", [tmp_path / "old.cedar", tmp_path / "new.cedar"],
                           schema=tmp_path / "schema.cedarschema", entities=tmp_path / "entities.json")
    assert analysis["environments"] == [r.to_json() for r in direct]
    assert analysis["status"] == min(r.status for r in direct)
    assert analysis["environments"][0]["answers"]["NEW"]["decision"] == "allow"
    answers = [authorize(tmp_path / "new.cedar", r, schema=tmp_path / "schema.cedarschema",
                         entities=tmp_path / "entities.json").to_json() for r in json.loads(
        (tmp_path / "requests.json").read_text())]
    assert batch["answers"] == answers


@pytest.mark.skipif(not (DATA / "cedar" / "tests").is_dir(),
                    reason="needs ../shared/data/cedar/tests (Cedar's handwritten integration tests)")
def test_a_cedar_test_job_agrees_with_cedar(tmp_path: Path) -> None:
    tests = DATA / "cedar" / "tests"
    first = copy_cedar_test(sorted(tests.rglob("*.json"))[0], tmp_path)
    manifest = tmp_path / "m.toml"
    manifest.write_text(f'[[job]]\nkind = "cedar-test"\nfile = "{first.relative_to(tmp_path)}"\n', encoding="utf-8")
    code, _, err = _run(manifest)
    assert code == 0, err
    (line,) = [json.loads(x) for x in (tmp_path / "m.results" / "results.jsonl").read_text().splitlines()]
    assert line["result"]["total"] >= 1 and line["result"]["agreed"] == line["result"]["total"]


def test_a_policy_analysis_job_decides_every_store_and_refuses_a_store_with_no_request(tmp_path: Path) -> None:
    """Without entities the job decides the property for every store the schema allows (here
    it fails, with a scenario); a given store with no request to range over fails the job,
    never a vacuous holds."""
    cedar = ROOT / "examples" / "cedar"
    for name in ("old.cedar", "schema.cedarschema"):
        (tmp_path / name).write_bytes((cedar / name).read_bytes())
    (tmp_path / "teams.json").write_text(json.dumps([{"uid": {"type": "Team", "id": "t"}, "attrs": {}, "parents": []}]))
    manifest = tmp_path / "m.toml"
    manifest.write_text('[[job]]\nkind = "policy-analysis"\nfile = "old.cedar"\n'
                        'params = { analysis = "always-allows", schema = "schema.cedarschema" }\n\n'
                        '[[job]]\nkind = "policy-analysis"\nfile = "old.cedar"\n'
                        'params = { analysis = "always-allows", schema = "schema.cedarschema", entities = "teams.json" }\n',
                        encoding="utf-8")  # fmt: skip
    code, _, _ = _run(manifest)
    every, given = _lines(tmp_path / "m.results")
    assert code == 1 and every["status"] == "failed" and every["result"]["status"] == "fails"
    [env] = every["result"]["environments"]
    assert env["proved_for"] == "every entity store the schema allows" and env["counterexample"]["entities"]
    assert given["status"] == "failed" and given["result"] is None
    assert "no User entities in the store: nothing to decide" in given["error"]


def test_a_cedar_test_jobs_key_follows_the_policy_schema_and_entities_it_names(tmp_path: Path) -> None:
    """Editing the policy file a Cedar test names makes a new job (its tests run again)."""
    cedar = ROOT / "examples" / "cedar"
    for name in ("old.cedar", "schema.cedarschema", "entities.json"):
        (tmp_path / name).write_bytes((cedar / name).read_bytes())
    request = json.loads((cedar / "request.json").read_text(encoding="utf-8"))
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "t.json").write_text(json.dumps(
        {"policies": "old.cedar", "schema": "schema.cedarschema", "entities": "entities.json",
         "requests": [{**request, "decision": "deny", "reason": ["policy1"], "errors": []}]}), encoding="utf-8")
    manifest = tmp_path / "m.toml"
    manifest.write_text('[[job]]\nkind = "cedar-test"\nfile = "tests/t.json"\n', encoding="utf-8")
    keys = [read_manifest(manifest).jobs[0].key]
    for name, edit in (("old.cedar", "\n// edited\n"), ("schema.cedarschema", "\n"), ("entities.json", "\n")):
        with (tmp_path / name).open("a", encoding="utf-8") as f:
            f.write(edit)
        keys.append(read_manifest(manifest).jobs[0].key)
    assert len(set(keys)) == 4
    code, out, _ = _run(manifest)
    assert code == 0 and "1 ran now" in out
    (tmp_path / "old.cedar").write_text("permit(principal, action, resource);\n", encoding="utf-8")
    code, out, _ = _run(manifest)
    assert "1 ran now, 0 were done before" in out  # the edited policy is run, not skipped
    (line,) = _lines(tmp_path / "m.results")
    assert line["result"]["agreed"] == 0 and line["result"]["imported"] == 1
    # a disagreement is a failed job with its result kept, and the batch exits 1 as `cda policy test` does
    assert code == 1 and line["status"] == "failed"
    assert line["error"].startswith("1 of 1 imported request(s) disagree with Cedar's expected answer")
    assert main(["policy", "test", str(tmp_path / "tests")], stdout=io.StringIO(), stderr=io.StringIO()) == 1
    with ReceiptLog(tmp_path / "m.results" / DB_NAME, fmt=JOBS_FORMAT) as log:
        assert len(list(log.entries())) == 2
    assert verify_receipts(tmp_path / "m.results" / DB_NAME, formats=(JOBS_FORMAT,)).ok
    (tmp_path / "old.cedar").unlink()  # a named file that is gone is keyed as absent; the job reports it
    assert read_manifest(manifest).jobs[0].key not in keys


def test_a_cedar_test_job_with_no_request_fails(tmp_path: Path) -> None:
    (tmp_path / "t.json").write_text('{"policies": "p.cedar", "requests": []}', encoding="utf-8")
    (tmp_path / "p.cedar").write_text("permit(principal, action, resource);", encoding="utf-8")
    outcome = outcome_of({"kind": "cedar-test", "file": str(tmp_path / "t.json"), "params": {}, "memory_mb": 1024})
    assert outcome["status"] == "failed" and "nothing checked" in outcome["error"]


REFUTED = """hyp a, b
observable o
observe o
hard: o implies (a or b)
hard: not b
expect status unsat
goal prove not a
"""


def test_a_negative_verdict_is_a_failed_job_and_exits_1_as_the_cli_does(tmp_path: Path) -> None:
    """Issue 27: a solve job whose `expect status unsat` fails and whose `prove` goal is refuted,
    and a prove job with a refuted claim, were "ok" (exit 0) where `cda solve`/`cda prove` exit 1."""
    (tmp_path / "refuted.cda").write_text(REFUTED, encoding="utf-8")
    (tmp_path / "ok.cda").write_text(CLAIM_OK, encoding="utf-8")
    (tmp_path / "syllogism.fol").write_text(SYLLOGISM, encoding="utf-8")
    for argv, code in ((["solve", str(tmp_path / "refuted.cda")], 1), (["prove", str(tmp_path / "syllogism.fol")], 1),
                       (["solve", str(tmp_path / "ok.cda")], 0)):
        assert main(argv, stdout=io.StringIO(), stderr=io.StringIO()) == code, argv  # the CLI's own answer
    manifest = tmp_path / "checks.toml"
    manifest.write_text('[[job]]\nkind = "solve"\nfile = "refuted.cda"\n\n[[job]]\nkind = "solve"\nfile = "ok.cda"\n\n'
                        '[[job]]\nkind = "prove"\nfile = "syllogism.fol"\n', encoding="utf-8")
    code, out, _ = _run(manifest, "--workers", "1")
    assert code == 1 and out.startswith("3 jobs: 2 failed, 1 ok;"), out
    refuted, ok, prove = _lines(tmp_path / "checks.results")
    assert refuted["status"] == "failed" and refuted["result"]["verdicts"][0]["status"] == "refuted"
    assert "prove not a: refuted" in refuted["error"] and "expect status unsat: failed" in refuted["error"]
    assert ok["status"] == "ok" and ok["error"] is None
    assert prove["status"] == "failed" and "c2: refuted" in prove["error"]
    # the store such a batch leaves verifies intact, as docs/jobs.md tells users to check it
    verify_out = io.StringIO()
    assert main(["receipts", "verify", str(tmp_path / "checks.results" / DB_NAME)], stdout=verify_out,
                stderr=io.StringIO()) == 0, verify_out.getvalue()
    assert ": intact: 3 entries" in verify_out.getvalue()


def test_a_partial_solve_job_is_partial_and_the_batch_exits_3(tmp_path: Path) -> None:
    """A solver budget that runs out inside the job is `cda solve`'s exit 3: the job is recorded
    `partial` (no complete answer; not `timeout`, the job's own limit), its partial result kept,
    and the batch exits 3."""
    (tmp_path / "cube.cda").write_text(_cube(20), encoding="utf-8")
    manifest = tmp_path / "jobs.toml"
    manifest.write_text('[[job]]\nkind = "solve"\nfile = "cube.cda"\ntimeout_s = 120\nparams = { timeout = 0.5 }\n',
                        encoding="utf-8")
    code, out, _ = _run(manifest)
    (line,) = _lines(tmp_path / "jobs.results")
    assert code == 3 and line["status"] == "partial", (out, line["error"])
    assert line["result"]["partial"] is True and "cda solve` exits 3" in line["error"]


def test_an_edited_or_deleted_result_row_is_tampering(tmp_path: Path) -> None:
    """`cda receipts verify` checks each job_results row against the receipt of its attempt."""
    (tmp_path / "ok.cda").write_text(CLAIM_OK, encoding="utf-8")
    manifest = tmp_path / "jobs.toml"
    manifest.write_text('[[job]]\nkind = "solve"\nfile = "ok.cda"\n\n[[job]]\nkind = "check"\nfile = "ok.cda"\n',
                        encoding="utf-8")
    assert _run(manifest)[0] == 0
    db = tmp_path / "jobs.results" / DB_NAME

    def verify() -> tuple[int, str]:
        out = io.StringIO()
        return main(["receipts", "verify", str(db)], stdout=out, stderr=io.StringIO()), out.getvalue()

    assert verify()[0] == 0
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE job_results SET status = 'ok', result = '{\"holds\": true}' WHERE kind = 'solve'")
    code, text = verify()
    assert code == 1 and "is not the answer its receipt vouches for" in text, text
    with sqlite3.connect(db) as conn:
        conn.execute("DELETE FROM job_results WHERE kind = 'solve'")
    code, text = verify()
    assert code == 1 and "is gone, yet a receipt names it" in text, text


# --- audit2 findings 2, 4, 7 and 9 (docs/jobs.md): through the `cda` command in a child process


def _cda(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "cda", *args], env=env, cwd=cwd, capture_output=True, text=True,
                          timeout=HANG)


def test_a_jobs_files_must_be_inside_the_manifests_folder(tmp_path: Path) -> None:
    """An absolute path, a `..` and a link out of the folder (as `file` or a file parameter) are
    refused at reading the manifest, with line and field, before anything runs; nothing of the
    outside file reaches the output. A link that stays inside is fine."""
    secret = "root:x:0:0:root:/root:/bin/bash"
    (tmp_path / "secret.cda").write_text(secret + "\n", encoding="utf-8")
    (tmp_path / "secret.obs").write_text(secret + "\n", encoding="utf-8")
    folder = tmp_path / "m"
    folder.mkdir()
    (folder / "claim.cda").write_text(CLAIM_OK, encoding="utf-8")
    (folder / "c17.bench").write_text(C17, encoding="utf-8")
    (folder / "out.cda").symlink_to(tmp_path / "secret.cda")
    (folder / "sub").mkdir()
    (folder / "sub" / "in.cda").symlink_to(folder / "claim.cda")
    cases = [(f'file = "{tmp_path / "secret.cda"}"', "file", "an absolute path"),
             ('file = "../secret.cda"', "file", "through '..' or a link"),
             ('file = "sub/../../secret.cda"', "file", "through '..' or a link"),
             ('file = "out.cda"', "file", "through '..' or a link")]
    manifest = folder / "m.toml"
    for n, (line, field, how) in enumerate(cases):
        manifest.write_text(f'[defaults]\ntimeout_s = 60\n\n[[job]]\nkind = "check"\n{line}\n', encoding="utf-8")
        # the refusal's exit 2 once in a child; the other cases' words from the same main in process
        done = (_cda if n == 0 else cda_here)("jobs", "run", str(manifest))
        assert done.returncode == 2, (line, done.stderr)
        assert f"m.toml:6: job 1: {field} " in done.stderr and "outside the manifest's folder" in done.stderr, done.stderr
        assert how in done.stderr and secret not in done.stdout + done.stderr and "Traceback" not in done.stderr
        assert not (folder / "m.results").exists()
    manifest.write_text('[[job]]\nkind = "diagnose"\nfile = "c17.bench"\nparams = { observations = "../secret.obs" }\n',
                        encoding="utf-8")
    done = cda_here("jobs", "run", str(manifest))
    assert done.returncode == 2 and "m.toml:4: job 1: params.observations '../secret.obs': outside" in done.stderr
    manifest.write_text('[[job]]\nkind = "check"\nfile = "sub/in.cda"\n', encoding="utf-8")
    done = _cda("jobs", "run", str(manifest))
    assert done.returncode == 0, done.stderr


def test_a_jobs_error_has_no_cli_prefix_and_quotes_little_of_its_file(tmp_path: Path) -> None:
    """A `prove` job on a `.cda` file with no fol block fails like every other job, without the
    CLI's `cda: error: ` (audit2 finding 9); a syntax error quotes at most a clipped line."""
    (tmp_path / "claim.cda").write_text(CLAIM, encoding="utf-8")
    long_line = "zz" + "q" * 20_000
    (tmp_path / "long.cda").write_text(long_line + "\n", encoding="utf-8")
    manifest = tmp_path / "m.toml"
    manifest.write_text('[[job]]\nkind = "prove"\nfile = "claim.cda"\n\n[[job]]\nkind = "check"\nfile = "long.cda"\n',
                        encoding="utf-8")
    done = _cda("jobs", "run", str(manifest))
    assert done.returncode == 1, done.stderr
    prove, check = _lines(tmp_path / "m.results")
    assert prove["status"] == "failed" and prove["error"].startswith(f"{tmp_path / 'claim.cda'}: no fol"), prove
    assert "cda: error" not in prove["error"]
    assert check["status"] == "failed", check
    assert check["error"].startswith(f"{tmp_path / 'long.cda'}:1:1: syntax error"), check["error"][:200]
    assert len(check["error"]) <= 2000 and "q" * 2000 not in check["error"]  # the 20 000 q's are cut


def _three_jobs(folder: Path) -> Path:
    (folder / "claim.cda").write_text(CLAIM_OK, encoding="utf-8")
    (folder / "c17.bench").write_text(C17, encoding="utf-8")
    (folder / "c17.obs").write_text(C17_OBS, encoding="utf-8")
    manifest = folder / "m.toml"
    manifest.write_text('[[job]]\nkind = "solve"\nfile = "claim.cda"\n\n[[job]]\nkind = "diagnose"\nfile = "c17.bench"\n'
                        'params = { observations = "c17.obs" }\n\n[[job]]\nkind = "check"\nfile = "claim.cda"\n',
                        encoding="utf-8")
    return manifest


def _tampered_copy(base: Path, into: Path, sql: str) -> Path:
    import shutil

    shutil.copytree(base, into)
    with sqlite3.connect(into / DB_NAME) as conn:
        conn.executescript(sql)
    return into / DB_NAME


def test_a_results_store_is_signed_and_every_column_a_user_reads_is_covered(tmp_path: Path) -> None:
    """audit2 finding 2: the batch signs its head; a job deleted with its receipt (the triggers
    dropped and put back), an edit to seconds, run_id, finished_at or kind, and a missing signed
    head are tampering; a batch refuses to extend (and sign) a store whose signed head is gone."""
    manifest = _three_jobs(tmp_path)
    assert _cda("jobs", "run", str(manifest), "--workers", "1").returncode == 0
    base = tmp_path / "m.results"
    done = _cda("receipts", "verify", str(base / DB_NAME))
    assert done.returncode == 0 and "intact: 3 entries" in done.stdout and "signed head at entry 3" in done.stdout
    with sqlite3.connect(base / DB_NAME) as conn:
        triggers = "".join(sql + ";\n" for (sql,) in conn.execute(
            "SELECT sql FROM sqlite_master WHERE type = 'trigger' AND tbl_name = 'receipts'"))
    deleted = _tampered_copy(base, tmp_path / "deleted", (
        "DROP TRIGGER receipts_no_delete; DROP TRIGGER receipts_no_update; DROP TRIGGER receipts_extend_only;\n"
        "DELETE FROM job_results WHERE key = (SELECT substr(action_id, 5) FROM receipts ORDER BY rowid DESC LIMIT 1);\n"
        "DELETE FROM receipts WHERE rowid = (SELECT MAX(rowid) FROM receipts);\n" + triggers))
    done = cda_here("receipts", "verify", str(deleted))
    assert done.returncode == 1 and "the signed head (entry 3" in done.stdout and "is not in the log" in done.stdout
    resumed = cda_here("jobs", "run", str(manifest), "--out", str(deleted.parent))
    assert resumed.returncode == 2 and "will not extend this receipt log" in resumed.stderr, resumed.stderr
    for column, sql in (("seconds", "seconds = seconds * 100"), ("run_id", "run_id = 'x'"),
                        ("finished_at", "finished_at = finished_at - 86400")):
        db = _tampered_copy(base, tmp_path / column, f"UPDATE job_results SET {sql};")
        # verify's exit 1 once in a child (the first column); the others' words in process
        done = (_cda if column == "seconds" else cda_here)("receipts", "verify", str(db))
        assert done.returncode == 1 and f": {column} not as its receipt vouches (edited)" in done.stdout, done.stdout
    db = _tampered_copy(base, tmp_path / "kind", "UPDATE job_results SET kind = 'prove' WHERE kind = 'check';")
    done = cda_here("receipts", "verify", str(db))
    assert done.returncode == 1 and "is not the answer its receipt vouches for" in done.stdout
    db = _tampered_copy(base, tmp_path / "unsigned", "")
    (tmp_path / "unsigned" / f"{DB_NAME}.head.json").unlink()
    done = cda_here("receipts", "verify", str(db))
    assert done.returncode == 1 and "no signed head beside the results store" in done.stdout
    assert cda_here("receipts", "verify", str(db), "--unsigned").returncode == 0


def test_two_batches_racing_on_one_folder_do_each_job_once(tmp_path: Path) -> None:
    """audit2 finding 4: two `cda jobs run` started together on one --out: whichever order the
    kernel gives them, every job is done once (one row at attempt 0, one receipt), the log is
    intact, and a batch that found the folder taken says so and ran nothing."""
    (tmp_path / "claim.cda").write_text(CLAIM_OK, encoding="utf-8")
    manifest = tmp_path / "m.toml"
    manifest.write_text("".join(f'[[job]]\nkind = "solve"\nfile = "claim.cda"\nparams = {{ seed = {i} }}\n\n'
                                for i in range(6)), encoding="utf-8")
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    command = [sys.executable, "-m", "cda", "jobs", "run", str(manifest), "--workers", "1", "--out", str(tmp_path / "o")]
    procs = [subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(2)]
    outputs = [proc.communicate(timeout=HANG) for proc in procs]
    codes = sorted(proc.returncode for proc in procs)
    ran = 0
    for proc, (out, err) in zip(procs, outputs, strict=True):
        assert "Traceback" not in err
        if proc.returncode == 2:
            assert "another `cda jobs run` is running on this results folder" in err and out == "", err
        else:
            assert proc.returncode == 0, err
            ran += int(out.split(" ran now")[0].rsplit(" ", 1)[-1])
    assert codes in ([0, 0], [0, 2]) and ran == 6, outputs
    db = tmp_path / "o" / DB_NAME
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT COUNT(*), COUNT(DISTINCT key), MAX(attempt) FROM job_results").fetchone() == (6, 6, 0)
        assert conn.execute("SELECT COUNT(*) FROM receipts").fetchone() == (6,)
    assert _cda("receipts", "verify", str(db)).returncode == 0


def test_a_second_batch_on_a_busy_folder_is_refused_at_once(tmp_path: Path) -> None:
    """While a batch runs (its long job's process is alive), a second one on the same folder,
    by another path to it, exits 2 and writes nothing; the first is then stopped (Ctrl-C)."""
    manifest = _ctrl_c_manifest(tmp_path)
    proc = _start(manifest)
    db = tmp_path / "m.results" / DB_NAME

    def receipts() -> int:
        try:
            with sqlite3.connect(db) as conn:
                return int(conn.execute("SELECT COUNT(*) FROM receipts").fetchone()[0])
        except sqlite3.OperationalError:  # not made yet
            return 0

    try:  # the check job done (its receipt written), the cube job running on (35 s alone)
        wait_until(lambda: db.exists() and receipts() == 1 and _job_processes_in(tmp_path),
                   "the first batch's check job to finish while its cube job runs")
        (tmp_path / "alias").symlink_to(tmp_path / "m.results")
        done = _cda("jobs", "run", str(manifest), "--out", str(tmp_path / "alias"))
        assert done.returncode == 2 and "another `cda jobs run` is running on this results folder" in done.stderr
        assert receipts() == 1 and _job_processes_in(tmp_path)  # nothing written; the first batch runs on
    finally:
        err = _interrupt(proc, tmp_path)
    assert proc.returncode == 130, err
    done = _cda("receipts", "verify", str(tmp_path / "m.results" / DB_NAME))
    assert done.returncode == 0, done.stdout  # the finished job's receipt was signed as the batch stopped
