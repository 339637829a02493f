"""Wave G's vouched receipts audited as an attacker (docs/actions.md, "Vouched receipts"): a vouch
signs the receipt as a value, so an entry after the signed head whose stored body was respelled
(a duplicate key that SQLite's ``json_extract`` reads one way and the receipt parser the other,
key order, spaces) kept its vouch and the log verified "intact" while CDA's own queries read
another status; such a body is now tampering to ``cda receipts verify`` and a writer refuses to
sign over it. Replays, moves, stripped vouches and rows a receipt does not account for are held
by tests/test_receipts_audit.py and tests/test_jobs.py; here what they missed."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest

from cda.actions.receipts import ReceiptLog, entry_hash
from cda.contracts.receipt import Receipt
from cda.keys.signing import head_path, load_signer
from tests.audit_helpers import edit_under_triggers
from tests.cli_run import cda_here
from tests.conftest import ROOT

EXAMPLE = ROOT / "examples" / "action" / "service_outage.json"


@pytest.fixture(scope="module")
def signed_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """A log of one run of the example with its signed head, and the environment that signed it."""
    folder = tmp_path_factory.mktemp("run")
    env = {"CDA_KEY_DIR": str(tmp_path_factory.mktemp("keys"))}
    done = cda_here("run", EXAMPLE, "--out", folder / "runs", env=env)
    assert done.returncode == 0, done.stderr
    return folder / "runs", env


def _copy(runs: Path, to: Path) -> Path:
    shutil.copytree(runs, to)
    return to / "receipts.sqlite"


def _respell_last(db: Path, respell: str) -> None:
    """The last entry's body respelled (``respell``: how), its entry hash recomputed, the triggers put back."""

    def attack(conn: sqlite3.Connection) -> None:
        rowid, body, prev = conn.execute("SELECT rowid, body, prev_hash FROM receipts ORDER BY rowid DESC LIMIT 1"
                                         ).fetchone()
        new = {"duplicate key": '{"status":"failed",' + body[1:],
               "space": body.replace('","', '", "', 1),
               "key order": '{"status":"ok",' + body[1:].replace(',"status":"ok"', "")}[respell]
        assert new != body
        conn.execute("UPDATE receipts SET body = ?, entry_hash = ? WHERE rowid = ?", (new, entry_hash(prev, new), rowid))

    edit_under_triggers(db, attack)


@pytest.mark.parametrize("respell", ["duplicate key", "space", "key order"])
def test_a_vouched_entry_after_the_signed_head_whose_body_was_respelled_is_tampering(
        signed_run: tuple[Path, dict[str, str]], tmp_path: Path, respell: str) -> None:
    runs, env = signed_run
    db = _copy(runs, tmp_path / "runs")
    # a writer with the key appends after the signed head (a reviewer's reflection receipt): vouched where it is
    with ReceiptLog(db, signer=load_signer(Path(env["CDA_KEY_DIR"]))) as log:
        action = log.entries()[-1].receipt.action_id
        log.append(Receipt(action_id=action, seq=0, kind="action", name="reflection.put", inputs_hash="h" * 64,
                           status="ok", result={"sha256": "a" * 64}))
    before = cda_here("receipts", "verify", db, env=env)
    assert before.returncode == 0 and "each vouched for by the trusted key" in before.stdout, before.stdout
    _respell_last(db, respell)
    if respell == "duplicate key":  # what CDA's own SQL reads (service attempts, metrics) is not what was vouched
        with sqlite3.connect(db) as conn:
            assert conn.execute("SELECT json_extract(body, '$.status') FROM receipts ORDER BY rowid DESC LIMIT 1"
                                ).fetchone() == ("failed",)
    after = cda_here("receipts", "verify", db, env=env)
    assert after.returncode == 1, after.stdout + after.stderr  # was 0, "intact"
    assert "TAMPERED" in after.stdout and "not spelled as CDA writes it" in after.stdout, after.stdout
    # and no writer signs over it
    again = cda_here("run", EXAMPLE, "--out", db.parent, env=env)
    assert again.returncode != 0, again.stdout
    assert "not spelled as CDA writes it" in again.stderr + again.stdout, again.stderr
    assert head_path(db).exists()


def test_an_untouched_log_and_its_vouched_tail_still_verify_and_extend(
        signed_run: tuple[Path, dict[str, str]], tmp_path: Path) -> None:
    runs, env = signed_run
    db = _copy(runs, tmp_path / "runs")
    with ReceiptLog(db, signer=load_signer(Path(env["CDA_KEY_DIR"]))) as log:
        action = log.entries()[-1].receipt.action_id
        log.append(Receipt(action_id=action, seq=0, kind="action", name="reflection.put", inputs_hash="h" * 64,
                           status="ok", result={"sha256": "a" * 64, "note": "ünïcode ✓"}))
    assert cda_here("receipts", "verify", db, env=env).returncode == 0
    again = cda_here("run", EXAMPLE, "--out", db.parent, env=env)
    assert again.returncode == 0, again.stderr
    done = cda_here("receipts", "verify", db, env=env)
    assert done.returncode == 0 and "intact" in done.stdout, done.stdout


@pytest.mark.parametrize("count", [-1, "7", 1.5])
def test_a_damaged_head_file_is_said_to_be_damaged_not_missing(
        signed_run: tuple[Path, dict[str, str]], tmp_path: Path, count: object) -> None:
    import json

    runs, env = signed_run
    db = _copy(runs, tmp_path / "runs")
    head = json.loads(head_path(db).read_text())
    head_path(db).write_text(json.dumps({**head, "count": count}))
    done = cda_here("receipts", "verify", db, env=env)
    assert done.returncode == 1 and "the signed head file is damaged" in done.stdout, done.stdout
    assert "is missing" not in done.stdout, done.stdout  # the file is there: verify said it was missing
