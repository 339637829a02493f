"""The last stop's "noticed and left alone" list, each through a real door (the `cda` command in
a child process, a real `cda jobs run`, the MCP SDK's client): what a job's status says when there
is no complete answer, the files a job's file names, a signed head with rows after it, a DSL
error's excerpt, a file name that is not UTF-8, text outputs escaped, and small messages."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import cda
from cda.adapters.jobs.kinds import KINDS
from cda.cli.ci import solve_exit_code
from cda.cli.jobs import EXIT_OF_STATUS
from tests.cli_run import cda_here
from tests.conftest import ROOT
from tests.timing import HANG

#: a strict order with no greatest element: only infinite models, so z3 gives up and no finite world
#: settles the claim; with time to spare, the solvers' own unknown (tests/test_fol.py has the oracle)
ONLY_INFINITE = """premise p1: ∀x ∃y Less(x, y)
premise p2: ∀x ¬Less(x, x)
premise p3: ∀x ∀y ∀z (Less(x, y) ∧ Less(y, z) → Less(x, z))
claim c1: P(a)
"""

ENTAILED = "hyp a, b\nobservable o\nobserve o\nhard: o iff (a or b)\ngoal prove a or b\n"


def _cda(*args: str | Path, cwd: Path | None = None, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    run_env = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    return subprocess.run([sys.executable, "-m", "cda", *map(str, args)], env=run_env, cwd=cwd, capture_output=True,
                          text=True, timeout=HANG)


def _jsonl(folder: Path) -> list[dict]:
    return [json.loads(line) for line in (folder / "results.jsonl").read_text(encoding="utf-8").splitlines()]


# --- 1. a solver's own unknown and a budget's cut, on every door the same --------------------


def test_a_jobs_status_says_cut_or_undecided_as_the_cli_does(tmp_path: Path) -> None:
    """A `prove` job whose solvers could not decide was recorded `timeout` (a word for the job's
    own time limit); one cut off by its budget too. Now: `unknown` and `partial`, as the `partial`
    field `cda prove --json` gives for the same claim, and the batch exits 3 as `cda prove` does."""
    (tmp_path / "inf.fol").write_text(ONLY_INFINITE, encoding="utf-8")
    (tmp_path / "t.cda").write_text(ENTAILED, encoding="utf-8")
    keys = {"CDA_KEY_DIR": str(tmp_path / "keys")}
    by_cli = {}
    for budget in ("10", "0"):  # exit 3 once in a child; the budget's cut from the same main in process
        done = (_cda if budget == "10" else cda_here)("prove", "inf.fol", "--timeout", budget, "--json", cwd=tmp_path)
        assert done.returncode == 3, done.stderr
        [claim] = json.loads(done.stdout)["results"]
        assert claim["unknown"] is True
        by_cli[budget] = claim["partial"]
    assert by_cli == {"10": False, "0": True}  # the solvers gave up with time to spare; the budget cut
    (tmp_path / "m.toml").write_text(
        '[[job]]\nkind = "prove"\nfile = "inf.fol"\nparams = { timeout = 10 }\n\n'
        '[[job]]\nkind = "prove"\nfile = "inf.fol"\nparams = { timeout = 0 }\n\n'
        '[[job]]\nkind = "solve"\nfile = "t.cda"\nparams = { timeout = 0 }\n', encoding="utf-8")
    done = _cda("jobs", "run", "m.toml", "--workers", "1", cwd=tmp_path, env=keys)
    assert done.returncode == 3, done.stderr
    assert done.stdout.startswith("3 jobs: 2 partial, 1 unknown;"), done.stdout
    undecided, cut, solve_cut = _jsonl(tmp_path / "m.results")
    assert undecided["status"] == "unknown" and "a solver said unknown, nothing was cut short" in undecided["error"]
    assert cut["status"] == "partial" and "the time budget ran out" in cut["error"]
    assert solve_cut["status"] == "partial" and solve_cut["result"]["partial"] is True
    assert "a budget ran out; what was found is kept" in solve_cut["error"]
    verified = cda_here("receipts", "verify", tmp_path / "m.results" / "results.sqlite", env=keys)
    assert verified.returncode == 0, verified.stdout + verified.stderr


def test_a_solve_job_and_cda_solve_give_one_exit_for_every_answer() -> None:
    """`cda solve` exits 3 for a claim a solver left unknown in a run that was not cut; the solve
    job called that `failed` (exit 1). The oracle is `cda solve`'s own exit code: for every mix of
    status, partial, verdicts and expectations the job's status maps to the same code."""
    base = cda.solve(ENTAILED, backend="z3")
    [verdict] = base.verdicts
    [expectation] = cda.solve(ENTAILED + "expect status sat\n", backend="z3").expectations
    unknown = verdict.model_copy(update={"status": "unknown", "confidence": None, "reason": "z3 returned unknown"})
    refuted = verdict.model_copy(update={"status": "refuted", "confidence": 0.0})
    failed_expect = expectation.model_copy(update={"passed": False})
    seen = set()
    for status, partial, verdicts, expects in itertools.product(
            ("sat", "unknown"), (False, True), ([], [verdict], [unknown], [refuted], [refuted, unknown]),
            ([], [expectation], [failed_expect])):
        result = base.model_copy(update={"status": status, "partial": partial, "verdicts": verdicts,
                                         "expectations": expects})
        negative = KINDS["solve"].verdict(json.loads(result.json_text()))
        job_status = "ok" if negative is None else negative.status
        assert EXIT_OF_STATUS[job_status] == solve_exit_code(result), (status, partial, verdicts, expects, job_status)
        seen.add(job_status)
    assert seen == {"ok", "failed", "partial", "unknown"}


# --- 4. a DSL syntax error quotes a long token cut, with its length, on every door -----------

LONG = "x" * 20000
LONG_TOKEN = f"hyp a\nhard: a {LONG} b\n"


def _mcp(body: Any, cwd: Path = ROOT) -> Any:
    """``await body(client)`` with the official MCP SDK's client on a `cda mcp` over stdio."""
    import anyio
    import pytest

    pytest.importorskip("mcp", reason="the MCP SDK is in the test extra (cda[mcp])")
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    server = StdioServerParameters(command=sys.executable, args=["-m", "cda", "mcp"],
                                   env={**os.environ, "PYTHONPATH": str(ROOT)}, cwd=str(cwd))

    async def main() -> Any:
        async with Client(server, read_timeout_seconds=120) as client:
            return await body(client)

    return anyio.run(main)


def _mcp_call(tool: str, arguments: dict) -> Any:
    async def body(client: Any) -> Any:
        return await client.call_tool(tool, arguments)

    return _mcp(body)


def test_a_long_token_is_quoted_cut_with_its_length_at_every_door(tmp_path: Path) -> None:
    """A 20,000-character token was printed whole in "unexpected '…'" (the line under it was
    already cut): now its first 60 characters, "…" and its length; line, column and what was
    expected stay exact. The CLI's text and --json, and the MCP tool, say the same."""
    (tmp_path / "long.cda").write_text(LONG_TOKEN, encoding="utf-8")
    cut = "unexpected '" + "x" * 60 + "…' (a token of 20,000 characters); expected "
    text = _cda("check", "long.cda", cwd=tmp_path)
    assert text.returncode == 2 and len(text.stderr) < 1000, len(text.stderr)
    assert text.stderr.startswith(f"long.cda:2:9: syntax error: {cut}"), text.stderr[:300]
    as_json = cda_here("check", "long.cda", "--json", cwd=tmp_path)
    error = json.loads(as_json.stdout)
    assert (error["line"], error["column"], error["kind"]) == (2, 9, "syntax error")
    assert error["message"].startswith(cut) and len(error["message"]) < 1000 and error["expected"]
    assert error["message"] == text.stderr.split(": syntax error: ", 1)[1].split("\n", 1)[0]
    result = _mcp_call("check", {"dsl": LONG_TOKEN})
    shown = " ".join(getattr(c, "text", "") for c in result.content)  # type: ignore[attr-defined]
    assert result.is_error and cut in shown and LONG not in shown, shown[:400]  # type: ignore[attr-defined]
    # a Cedar policy and a .fol file go through the same error
    (tmp_path / "long.fol").write_text(f"premise p1: P(a) ∧ Q(b) {LONG} b\n", encoding="utf-8")
    fol = cda_here("prove", "long.fol", cwd=tmp_path)
    assert fol.returncode == 2 and "(a token of 20,000 characters)" in fol.stderr and len(fol.stderr) < 1000


# --- 5. a file name that is not UTF-8 ---------------------------------------------------------


def test_a_file_name_that_is_not_utf8_is_named_and_said_what_is_wrong(tmp_path: Path) -> None:
    """`cda solve bad\\xff.cda` said "path: Input should be a valid string, unable to parse raw data
    as a unicode string" (pydantic's words, no file named). Now the name, its byte escaped, and
    what to do; the same through --json. The file itself is untouched."""
    name = os.fsdecode(b"bad\xff.cda")  # as Python reads the argument: the byte as a surrogate escape
    (tmp_path / name).write_text(ENTAILED, encoding="utf-8")
    for args in (("solve",), ("check", "--json"), ("prove",)):
        done = subprocess.run([sys.executable, "-m", "cda", args[0], os.fsencode(name), *args[1:]],
                              env={**os.environ, "PYTHONPATH": str(ROOT)}, cwd=tmp_path, capture_output=True,
                              timeout=HANG)
        shown = (done.stdout + done.stderr).decode("utf-8")  # UTF-8, the byte escaped: the old JSON held 0xff
        if "--json" in args:
            error = json.loads(done.stdout)
            assert error["file"] == "bad\\xff.cda", error
            shown = error["message"]
        assert done.returncode == 2, shown
        assert "the file name 'bad\\xff.cda' is not UTF-8 (the byte 0xff at character 4)" in shown, shown
        assert "Input should be a valid string" not in shown and "Traceback" not in shown
    assert (tmp_path / name).read_text(encoding="utf-8") == ENTAILED


# --- 6. `cda task` and `cda schema` text escaped ----------------------------------------------


def test_cda_task_and_cda_schema_text_shows_controls_escaped(tmp_path: Path) -> None:
    """A folder or store named with ESC sequences reached the terminal raw in `cda schema`'s
    "wrote 35 schemas to …" and `cda task add-signer`'s "first signer of …": a title set, a screen
    cleared. Now escaped as every other line built from input; the JSON forms are JSON."""
    keys = {"CDA_KEY_DIR": str(tmp_path / "keys")}
    folder = tmp_path / "s\x1b[2Jx"
    done = _cda("schema", folder, env=keys)
    assert done.returncode == 0, done.stderr
    assert "\x1b" not in done.stdout and "s\\x1b[2Jx" in done.stdout, done.stdout
    assert (folder / "SolveResult.schema.json").is_file()  # the name itself is kept: only its display is escaped
    check = cda_here("schema", "--check", folder, env=keys)
    assert check.returncode == 0 and "\x1b" not in check.stdout and "s\\x1b[2Jx: schemas are current" in check.stdout
    store = tmp_path / "g\x1b]0;owned\x07.db"
    done = cda_here("task", "add-signer", "--store", store, "orc:alice", env=keys)
    assert done.returncode == 0, done.stderr
    assert "\x1b" not in done.stdout + done.stderr and "\x07" not in done.stdout, done.stdout
    assert "g\\x1b]0;owned\\x07.db" in done.stdout, done.stdout
    as_json = cda_here("task", "add-signer", "--store", store, "orc:bob", "--by", "orc:alice", "--json", env=keys)
    assert as_json.returncode == 0, as_json.stderr  # the JSON form stays JSON (json.dumps escapes controls itself)
    assert json.loads(as_json.stdout)["signer_id"] == "orc:bob"


# --- 8. an investigation's mistake names the field the user gave ------------------------------


def test_an_investigation_error_names_the_field_it_came_in(tmp_path: Path) -> None:
    """A refused revision said its place was `params.observation`, a field `investigate.revise`
    does not have; now `params.add` (what was added does not read, or is a goal) and, for a note
    with no text, `params.text`. An observation's mistake stays at `params.observation`."""

    async def body(client: Any) -> dict[str, str]:
        started = (await client.call_tool("investigate_start", {
            "dsl": "hyp a, b\nobservable o\nhard: o iff (a or b)\n"})).structured_content
        assert isinstance(started, dict)
        session = started["session_id"]
        said = {}
        for name, tool, args in (
                ("goal", "investigate_revise", {"add": ["goal prove a"]}),
                ("unreadable", "investigate_revise", {"add": ["hard: a and and b"]}),
                ("observe", "investigate_observe", {"observation": "nosuch(x)"}),
                ("note", "investigate_note", {"step": 0, "text": "   "})):
            reply = await client.call_tool(tool, {"session_id": session, **args})
            assert reply.is_error, (name, reply)
            said[name] = " ".join(getattr(c, "text", "") for c in reply.content)
        return said

    said = _mcp(body, tmp_path)
    for name, field in (("goal", "add"), ("unreadable", "add"), ("observe", "observation"), ("note", "text")):
        assert f"params.{field}" in said[name] or f'"params", "{field}"' in said[name], (name, said[name])
    assert "observation" not in said["goal"] + said["unreadable"] + said["note"], said


# --- 2. the files a job's file names are held to the manifest's folder ------------------------

SECRET = "root:x:0:0:root:/root:/bin/bash"


def test_the_files_a_jobs_file_names_are_held_to_the_manifests_folder(tmp_path: Path) -> None:
    """`file` and the file parameters were held to the manifest's folder; a `.cda` file's `ken "…"`
    and a Cedar test's `policies` were not: a shared manifest could make a job read any file its
    runner can. Now each is refused before anything runs (exit 2), naming the job, its file and
    the path; nothing of the outside file reaches the output; a graph inside is fine."""
    (tmp_path / "secret.json").write_text(json.dumps({"nodes": [{"id": SECRET}], "links": []}), encoding="utf-8")
    (tmp_path / "p.cedar").write_text("permit(principal, action, resource);", encoding="utf-8")
    folder = tmp_path / "m"
    (folder / "tests").mkdir(parents=True)
    (folder / "inside.json").write_text(json.dumps({"nodes": [{"id": "n"}], "links": []}), encoding="utf-8")
    (folder / "link.json").symlink_to(tmp_path / "secret.json")
    model = "hyp a\nobservable o\nhard: o iff a\n"
    cases = {"up.cda": ('ken "../secret.json"', "it leads out of the folder"),
             "abs.cda": (f'ken "{tmp_path / "secret.json"}"', "it leads out of the folder"),
             "link.cda": ('ken "link.json"', "through a link")}
    keys = {"CDA_KEY_DIR": str(tmp_path / "keys")}
    for name, (line, how) in cases.items():
        (folder / name).write_text(f"{line}\n{model}", encoding="utf-8")
        (folder / "m.toml").write_text(f'[[job]]\nkind = "check"\nfile = "{name}"\n', encoding="utf-8")
        # the refusal's exit 2 once in a child; the other cases' words from the same main in process
        done = (_cda if name == "up.cda" else cda_here)("jobs", "run", "m.toml", cwd=folder, env=keys)
        assert done.returncode == 2, (name, done.stdout, done.stderr)
        written = line.split('"')[1]
        assert f"m.toml:3: job 1: file '{name}' names 'ken {written}': outside the manifest's folder" in done.stderr
        assert how in done.stderr and SECRET not in done.stdout + done.stderr, done.stderr
        assert not (folder / "m.results").exists()  # nothing ran, nothing written
    (folder / "ok.cda").write_text(f'ken "inside.json"\n{model}', encoding="utf-8")
    (folder / "m.toml").write_text('[[job]]\nkind = "check"\nfile = "ok.cda"\n', encoding="utf-8")
    assert _cda("jobs", "run", "m.toml", cwd=folder, env=keys).returncode == 0
    # a Cedar test's policies, found above its tests/ folder: outside when that is above the manifest's
    (folder / "tests" / "t.json").write_text(json.dumps({"policies": "../p.cedar", "requests": []}), encoding="utf-8")
    (folder / "c.toml").write_text('[[job]]\nkind = "cedar-test"\nfile = "tests/t.json"\n', encoding="utf-8")
    done = cda_here("jobs", "run", "c.toml", cwd=folder, env=keys)
    assert done.returncode == 2 and "names 'policies': outside the manifest's folder" in done.stderr, done.stderr


def test_a_jobs_process_reads_only_inside_the_manifests_folder(tmp_path: Path) -> None:
    """What the manifest's reading does not find (a file changed to name another after it was
    read) meets the gate's access check in the job's process: the same roots, the job's error
    naming the file. The oracle: the same job with no folder given reads it."""
    from cda.adapters.jobs.child import outcome_of

    (tmp_path / "secret.json").write_text(json.dumps({"nodes": [{"id": SECRET}], "links": []}), encoding="utf-8")
    folder = tmp_path / "m"
    folder.mkdir()
    (folder / "p.cda").write_text('ken "../secret.json"\nhyp a\nobservable o\nhard: o iff a\n', encoding="utf-8")
    wire = {"kind": "check", "file": str(folder / "p.cda"), "params": {}, "memory_mb": 2048}
    assert outcome_of(wire)["status"] == "ok"  # no folder: the local user reads any file
    held = outcome_of({**wire, "base": str(folder)})
    assert held["status"] == "failed", held
    assert f"the job read a file '{folder / '..' / 'secret.json'}' outside the manifest's folder {folder}" in held["error"]
    assert SECRET not in held["error"]


def test_a_policy_analysis_cut_by_its_budget_is_partial_at_the_cli_and_in_a_job(tmp_path: Path) -> None:
    """`cda policy analyze --timeout 0` exits 3 with every environment unknown; `--json` now says
    it was cut (`partial: true`) and the job records `partial`, not `timeout` (the job's own limit)."""
    import shutil

    for name in ("new.cedar", "schema.cedarschema"):
        shutil.copy(ROOT / "examples" / "cedar" / name, tmp_path / name)
    done = _cda("policy", "analyze", "always-allows", "new.cedar", "--schema", "schema.cedarschema", "--timeout", "0",
                "--json", cwd=tmp_path)
    assert done.returncode == 3, done.stderr
    assert [(e["status"], e.get("partial")) for e in json.loads(done.stdout)] == [("unknown", True)]
    (tmp_path / "m.toml").write_text('[[job]]\nkind = "policy-analysis"\nfile = "new.cedar"\nparams = { analysis = '
                                     '"always-allows", schema = "schema.cedarschema", timeout = 0 }\n', encoding="utf-8")
    done = _cda("jobs", "run", "m.toml", cwd=tmp_path, env={"CDA_KEY_DIR": str(tmp_path / "keys")})
    assert done.returncode == 3, done.stderr
    [line] = _jsonl(tmp_path / "m.results")
    assert line["status"] == "partial" and "its time budget ran out" in line["error"], line["error"]


# --- 3. rows appended after a signed head are not signed over ---------------------------------


def test_receipts_appended_after_the_signed_head_are_unverified_and_never_signed_over(tmp_path: Path) -> None:
    """Someone who can write results.sqlite appends a receipt after the signed head: verify called
    it a note (exit 0) and the next batch signed over it. Now verify says UNVERIFIED (exit 3) and
    the next batch refuses to extend the log (exit 2), running nothing. The batch's own receipts
    after its head (vouched for one by one) are believed: the oracle, a batch stopped before its
    last head, whose tail verifies intact and is signed by the next run."""
    import sqlite3

    from cda.actions.receipts import ReceiptLog
    from cda.adapters.jobs.batch import DB_NAME, _receipt
    from cda.adapters.jobs.manifest import read_manifest
    from cda.adapters.jobs.results_store import JOBS_FORMAT
    from cda.keys.signing import head_path, read_head

    keys = {"CDA_KEY_DIR": str(tmp_path / "keys")}
    (tmp_path / "a.cda").write_text(ENTAILED, encoding="utf-8")
    (tmp_path / "m.toml").write_text('[[job]]\nkind = "check"\nfile = "a.cda"\n', encoding="utf-8")
    assert _cda("jobs", "run", "m.toml", cwd=tmp_path, env=keys).returncode == 0
    db = tmp_path / "m.results" / DB_NAME
    assert _cda("receipts", "verify", db, env=keys).returncode == 0
    # the batch's own tail: the head put back one entry, as a batch killed before its last signature
    head = read_head(head_path(db))
    with ReceiptLog(db, fmt=JOBS_FORMAT) as log:
        own = log.entries()[-1].receipt
        assert own.result.get("vouched"), own.result  # each receipt signed by the batch's key
    # the forgery: job b.cda "done, ok" — a row and the receipt the batch would write for it, appended
    (tmp_path / "b.cda").write_text(ENTAILED.replace("prove a or b", "prove a"), encoding="utf-8")
    (tmp_path / "m.toml").write_text('[[job]]\nkind = "check"\nfile = "a.cda"\n\n[[job]]\nkind = "check"\n'
                                     'file = "b.cda"\n', encoding="utf-8")
    spec = read_manifest(tmp_path / "m.toml").jobs[1]
    row = {"kind": "check", "status": "ok", "result": {"forged": True}, "error": None, "attempt": 0,
           "seconds": 0.5, "run_id": "f" * 32, "finished_at": 1.0}
    with sqlite3.connect(db) as conn:
        conn.execute("INSERT INTO job_results VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                     (spec.key, "check", "ok", '{"forged": true}', None, 0.5, 0, "f" * 32, 1.0))
    conn.close()
    with ReceiptLog(db, fmt=JOBS_FORMAT) as log:
        log.append(_receipt(spec, row))
    done = _cda("receipts", "verify", db, env=keys)
    assert done.returncode == 3, done.stdout + done.stderr
    assert "UNVERIFIED" in done.stdout and "1 of the 1 entries after the signed head (entry" in done.stdout, done.stdout
    again = _cda("jobs", "run", "m.toml", cwd=tmp_path, env=keys)
    assert again.returncode == 2, again.stdout + again.stderr
    assert "will not extend this receipt log: 1 entries after its signed head" in again.stderr, again.stderr
    assert read_head(head_path(db)) == head  # nothing signed
    assert len(_jsonl(tmp_path / "m.results")) == 1  # nothing ran: b.cda's forged "ok" was not taken


def test_a_batch_stopped_before_its_head_leaves_a_tail_it_vouched_for(tmp_path: Path) -> None:
    """The legitimate tail: receipts the batch appended and vouched for before a kill stopped its
    next signature. Verify believes them entry by entry (exit 0, a note), and the next batch signs."""
    from cda.adapters.jobs.batch import DB_NAME
    from cda.keys.signing import head_path, read_head, write_head

    keys = {"CDA_KEY_DIR": str(tmp_path / "keys")}
    (tmp_path / "a.cda").write_text(ENTAILED, encoding="utf-8")
    (tmp_path / "m.toml").write_text('[[job]]\nkind = "check"\nfile = "a.cda"\n', encoding="utf-8")
    assert _cda("jobs", "run", "m.toml", cwd=tmp_path, env=keys).returncode == 0
    db = tmp_path / "m.results" / DB_NAME
    from cda.keys.signing import load_signer

    signer = load_signer(tmp_path / "keys")
    head = read_head(head_path(db))
    # the head as it was before the job's receipt: the state a kill -9 in the batch's last second leaves
    write_head(head_path(db), signer.sign_head("0" * 64, 0, head["action_id"], 1, "end"))
    done = _cda("receipts", "verify", db, env=keys)
    assert done.returncode == 0, done.stdout
    assert "each vouched for by the trusted key" in done.stdout, done.stdout
    assert _cda("jobs", "run", "m.toml", cwd=tmp_path, env=keys).returncode == 0
    assert read_head(head_path(db))["count"] == head["count"]  # signed over its own tail


def test_the_toolbus_gives_the_cut_token_and_names_a_file_name_that_is_not_utf8(tmp_path: Path) -> None:
    """The ToolBus door (a real `cda serve` on loopback, a real websocket client): the long token
    is quoted cut as at the CLI, line and column exact; a path parameter holding a lone surrogate
    (a JSON "\\udcff") is refused with the same words as the CLI's, not pydantic's."""
    from tests.service_harness import call, serving, toolbus

    with serving(tmp_path / "s.sqlite") as server, toolbus(server) as ws:
        answer = call(ws, "investigate.start", {"dsl": LONG_TOKEN})
        refused = call(ws, "investigate.start", {"path": "bad\udcff.cda"})
    error = answer["error"]
    text = json.dumps(error, ensure_ascii=False)
    assert "unexpected '" + "x" * 60 + "…' (a token of 20,000 characters)" in text and LONG not in text, text[:500]
    assert error["path"] == ["params", "dsl", 2, 9] and "(line 2, column 9)" in error["message"], error
    said = json.dumps(refused["error"], ensure_ascii=False)
    assert "the file name 'bad\\\\xff.cda' is not UTF-8 (the byte 0xff at character 4)" in said, said
    assert "Input should be a valid string" not in said
