"""No file CDA did not create is modified, at the doors that take a store's path (issue 27).

``cda investigate … --db`` and ``cda jobs run --out``, given a file that is not theirs (the signed
receipt log of a run, another program's database, a text file, a folder, a name that does not
exist, a results file someone else wrote), refuse it with exit 2 and one line naming it, no
traceback, and leave every file in the folder byte for byte as it was, no file added.

Oracles: the SHA-256 of every file in the folder before and after; ``cda receipts verify`` on the
receipt log afterwards (intact, as before).
"""

from __future__ import annotations

import hashlib
import io
import json
import sqlite3
from pathlib import Path

import pytest

from cda.cli.main import main
from tests.conftest import EXAMPLES


def _cli(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(args), out, err)
    return code, out.getvalue(), err.getvalue()


def _state(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture
def run_log(tmp_path: Path) -> Path:
    """A folder with a run's signed receipt log (``cda run … --out runs``)."""
    folder = tmp_path / "runs"
    code, _, err = _cli("run", str(EXAMPLES / "action" / "service_outage.json"), "--out", str(folder))
    assert code == 0, err
    return folder


def _refused(folder: Path, args: list[str], words: str) -> None:
    before = _state(folder)
    code, out, err = _cli(*args)
    assert code == 2, (out, err)
    assert words in err and "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert _state(folder) == before


def test_investigate_start_on_the_signed_receipt_log_is_refused_and_the_log_stays_intact(run_log: Path) -> None:
    db = run_log / "receipts.sqlite"
    assert _cli("receipts", "verify", str(db))[0] == 0
    _refused(run_log, ["investigate", "start", str(EXAMPLES / "service_outage.cda"), "--db", str(db)],
             "a CDA receipt log, not a CDA investigations file")
    for command in (["status", "abc"], ["history", "abc"], ["observe", "abc", "slow(api)"], ["undo", "abc"],
                    ["close", "abc"]):
        _refused(run_log, ["investigate", *command, "--db", str(db)], "a CDA receipt log, not a CDA investigations file")
    code, out, _ = _cli("receipts", "verify", str(db))
    assert code == 0 and "intact" in out.lower()


def test_investigate_on_another_programs_database_is_refused_untouched(tmp_path: Path) -> None:
    db = tmp_path / "app.sqlite"
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("CREATE TABLE sessions (id INTEGER PRIMARY KEY, user TEXT)")  # a name CDA uses, another shape
    conn.execute("INSERT INTO sessions VALUES (1, 'ann')")
    conn.commit()
    conn.close()
    _refused(tmp_path, ["investigate", "start", str(EXAMPLES / "service_outage.cda"), "--db", str(db)],
             "not a CDA file, and CDA never modifies files it did not create")
    _refused(tmp_path, ["investigate", "status", "1", "--db", str(db)], "not a CDA file")


def test_investigate_on_a_name_that_does_not_exist_creates_nothing(tmp_path: Path) -> None:
    for command in (["status", "abc"], ["history", "abc"], ["observe", "abc", "slow(api)"], ["undo", "abc"],
                    ["close", "abc"]):
        _refused(tmp_path, ["investigate", *command, "--db", str(tmp_path / "typo.sqlite")], "typo.sqlite: no such file")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("command", [["start", str(EXAMPLES / "service_outage.cda")], ["status", "abc"],
                                     ["observe", "abc", "slow(api)"]])
def test_investigate_on_a_text_file_or_a_folder_is_a_clear_error(tmp_path: Path, command: list[str]) -> None:
    text = tmp_path / "notes.txt"
    text.write_text("not a database\n" * 50)
    _refused(tmp_path, ["investigate", *command, "--db", str(text)], "not an SQLite database")
    folder = tmp_path / "folder"
    folder.mkdir()
    _refused(tmp_path, ["investigate", *command, "--db", str(folder)], "not a file")


def test_investigate_start_then_status_on_its_own_file_still_works(tmp_path: Path) -> None:
    db = tmp_path / "inv.sqlite"
    code, out, err = _cli("investigate", "start", str(EXAMPLES / "service_outage.cda"), "--db", str(db), "--json")
    assert code == 0, err
    sid = json.loads(out)["session_id"]
    before = _state(tmp_path)
    code, out, err = _cli("investigate", "status", sid, "--db", str(db))
    assert code == 0 and sid in out, err
    assert _state(tmp_path) == before  # a status only reads


def _manifest(folder: Path) -> Path:
    (folder / "claim.cda").write_text("hyp a\nobservable o\nobserve o\nhard: o implies a\ngoal prove a\n")
    manifest = folder / "m.toml"
    manifest.write_text('[[job]]\nkind = "check"\nfile = "claim.cda"\n')
    return manifest


def test_jobs_run_never_replaces_a_results_jsonl_it_did_not_write(tmp_path: Path) -> None:
    manifest = _manifest(tmp_path)
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    (out_dir / "results.jsonl").write_text("my own notes, not CDA's\n")
    _refused(tmp_path, ["jobs", "run", str(manifest), "--out", str(out_dir), "--workers", "1"],
             "a file CDA did not write is in the way")
    assert sorted(p.name for p in out_dir.iterdir()) == ["results.jsonl"]  # no results store made either


def test_jobs_run_replaces_its_own_results_but_not_once_someone_edited_them(tmp_path: Path) -> None:
    manifest = _manifest(tmp_path)
    out_dir = tmp_path / "out"
    code, _, err = _cli("jobs", "run", str(manifest), "--out", str(out_dir), "--workers", "1")
    assert code == 0, err
    written = (out_dir / "results.jsonl").read_bytes()
    code, out, err = _cli("jobs", "run", str(manifest), "--out", str(out_dir), "--workers", "1")
    assert code == 0 and "0 ran now, 1 were done before" in out, err  # its own file: replaced, same bytes
    assert (out_dir / "results.jsonl").read_bytes() == written
    (out_dir / "results.jsonl").write_bytes(written + b'{"a note": "kept by hand"}\n')
    _refused(tmp_path, ["jobs", "run", str(manifest), "--out", str(out_dir), "--workers", "1"],
             "changed since this batch wrote it")
    (out_dir / "results.jsonl").unlink()
    (out_dir / "results.jsonl").mkdir()
    _refused(tmp_path, ["jobs", "run", str(manifest), "--out", str(out_dir), "--workers", "1"],
             "a folder is in the way")


def test_jobs_run_on_a_folder_holding_another_programs_results_sqlite_is_refused(tmp_path: Path) -> None:
    manifest = _manifest(tmp_path)
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    conn = sqlite3.connect(out_dir / "results.sqlite")
    conn.execute("CREATE TABLE results (id INTEGER)")
    conn.commit()
    conn.close()
    _refused(tmp_path, ["jobs", "run", str(manifest), "--out", str(out_dir), "--workers", "1"], "not a CDA file")


def test_a_fresh_jobs_store_verifies_as_intact(tmp_path: Path) -> None:
    manifest = _manifest(tmp_path)
    code, _, err = _cli("jobs", "run", str(manifest), "--out", str(tmp_path / "out"), "--workers", "1")
    assert code == 0, err
    code, out, err = _cli("receipts", "verify", str(tmp_path / "out" / "results.sqlite"))
    assert code == 0 and "intact" in out.lower(), out + err
    conn = sqlite3.connect(tmp_path / "out" / "results.sqlite")
    conn.execute("CREATE TRIGGER quiet BEFORE INSERT ON job_results BEGIN SELECT RAISE(IGNORE); END")
    conn.commit()
    conn.close()
    code, out, _ = _cli("receipts", "verify", str(tmp_path / "out" / "results.sqlite"))
    assert code == 1 and "trigger quiet on job_results is not one CDA creates" in out
