"""The whole CDA log against an attacker: signed heads, schema, events, traces, attempts, kills.

Every attack starts from a real log (two runs of the example Action, signed with the test key)
and is done as an attacker would: raw sqlite3 with the triggers dropped and put back afterwards
(so only the hashes and the signature can give it away), or by editing, replacing or deleting
files. Each must make ``cda receipts verify`` exit 1; the untouched log must exit 0.
"""

from __future__ import annotations

import io
import json
import os
import random
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cda.actions.audit import audit_file
from cda.actions.receipts import GENESIS_HASH, TRIGGERS, ReceiptLog, entry_hash
from cda.adapters.action_entry import AuditLogError, load_inputs, run_inputs
from cda.adapters.event_store import EventStore, read_events
from cda.cli import run as run_cli
from cda.cli.receipts import main_receipts_verify
from cda.contracts.events import ActionEvent
from cda.contracts.receipt import Receipt
from cda.keys.signing import (
    KEY_DIR_ENV,
    KEY_FILE,
    Signer,
    SigningError,
    head_path,
    load_signer,
    read_head,
    write_head,
)
from tests.audit_helpers import edit_under_triggers as _raw
from tests.conftest import ROOT

EXAMPLE = ROOT / "examples" / "action" / "service_outage.json"

# ---------------------------------------------------------------------------------------- helpers


def _key_dir(factory: pytest.TempPathFactory) -> Path:
    return factory.getbasetemp() / "cda-keys"  # the folder tests/conftest.py points CDA_KEY_DIR at


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A log of two runs (attempts 1 and 2) of the example, signed with the test key."""
    folder = tmp_path_factory.mktemp("template")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(KEY_DIR_ENV, str(_key_dir(tmp_path_factory)))
        inputs = load_inputs(EXAMPLE)
        for _ in range(2):
            run_inputs(inputs, folder, base_dir=EXAMPLE.parent)
    return folder / "receipts.sqlite"


def _copy(template: Path, folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    db = folder / "receipts.sqlite"
    shutil.copyfile(template, db)
    shutil.copyfile(head_path(template), head_path(db))
    return db


def _verify(db: Path, head: str | None = None) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main_receipts_verify(db, head, False, out, err)
    return code, out.getvalue() + err.getvalue()


def _rechain_receipts(conn: sqlite3.Connection, from_seq: int) -> None:
    """Recompute every entry hash from ``from_seq`` on: the chain is valid again afterwards."""
    prev = GENESIS_HASH
    for rowid, seq, body in conn.execute("SELECT rowid, seq, body FROM receipts ORDER BY rowid").fetchall():
        if seq >= from_seq:
            digest = entry_hash(prev, body)
            conn.execute("UPDATE receipts SET prev_hash = ?, entry_hash = ? WHERE rowid = ?", (prev, digest, rowid))
        prev = conn.execute("SELECT entry_hash FROM receipts WHERE rowid = ?", (rowid,)).fetchone()[0]


def _rechain_events(conn: sqlite3.Connection, attempt: int) -> None:
    prev = GENESIS_HASH
    rows = conn.execute("SELECT action_id, seq, body FROM events WHERE attempt = ? ORDER BY seq", (attempt,)).fetchall()
    for action_id, seq, body in rows:
        digest = entry_hash(prev, body)
        conn.execute("UPDATE events SET prev_hash = ?, entry_hash = ? WHERE action_id = ? AND attempt = ? AND seq = ?",
                     (prev, digest, action_id, attempt, seq))
        prev = digest


def _solver_seq(conn: sqlite3.Connection) -> int:
    return int(conn.execute("SELECT MIN(seq) FROM receipts WHERE body LIKE '%\"kind\":\"solver\"%'").fetchone()[0])


def _edit_outcome(conn: sqlite3.Connection, rehash: bool = False) -> int:
    seq = _solver_seq(conn)
    body, prev = conn.execute("SELECT body, prev_hash FROM receipts WHERE seq = ?", (seq,)).fetchone()
    data = json.loads(body)
    data["result"]["tampered"] = True
    new = json.dumps(data, sort_keys=True, separators=(",", ":"))
    conn.execute("UPDATE receipts SET body = ? WHERE seq = ?", (new, seq))
    if rehash:
        conn.execute("UPDATE receipts SET entry_hash = ? WHERE seq = ?", (entry_hash(prev, new), seq))
    return seq


def _terminal_edit(conn: sqlite3.Connection, attempt: int = 2) -> None:
    conn.execute("UPDATE events SET body = replace(body, '\"action_completed\"', '\"action_failed\"') "
                 "WHERE attempt = ? AND seq = (SELECT MAX(seq) FROM events WHERE attempt = ?)", (attempt, attempt))


def _event_sql(sql: str) -> Callable[[sqlite3.Connection], object]:
    return lambda conn: conn.execute(sql)


def _rechain_after(edit: Callable[[sqlite3.Connection], object], *, events: int | None = None
                   ) -> Callable[[sqlite3.Connection], None]:
    def attack(conn: sqlite3.Connection) -> None:
        edit(conn)
        if events is None:
            _rechain_receipts(conn, 0)
        else:
            _rechain_events(conn, events)
    return attack


def _insert_event(conn: sqlite3.Connection, attempt: int, seq: int, *, extend: bool) -> None:
    action_id = conn.execute("SELECT action_id FROM events LIMIT 1").fetchone()[0]
    body = json.dumps({"action_id": action_id, "attempt": attempt, "seq": seq, "ts": 1.0, "type": "action_notice",
                       "level": "info", "message": "all clear"}, sort_keys=True, separators=(",", ":"))
    row = conn.execute("SELECT entry_hash FROM events WHERE attempt = ? ORDER BY seq DESC LIMIT 1", (attempt,)).fetchone()
    prev = row[0] if (row and extend) else GENESIS_HASH
    conn.execute("INSERT INTO events VALUES (?, ?, ?, ?, ?, ?)", (action_id, attempt, seq, body, prev, entry_hash(prev, body)))


def _swap_receipts(conn: sqlite3.Connection) -> None:
    cols = "action_id, body, prev_hash, entry_hash"
    a = conn.execute(f"SELECT {cols} FROM receipts WHERE seq = 3").fetchone()
    b = conn.execute(f"SELECT {cols} FROM receipts WHERE seq = 4").fetchone()
    conn.execute("UPDATE receipts SET action_id = ?, body = ?, prev_hash = ?, entry_hash = ? WHERE seq = 3", b)
    conn.execute("UPDATE receipts SET action_id = ?, body = ?, prev_hash = ?, entry_hash = ? WHERE seq = 4", a)


def _insert_receipt_first(conn: sqlite3.Connection) -> None:
    body = Receipt(action_id="evil", seq=0, kind="action", name="forged", inputs_hash="00").model_dump_json()
    conn.execute("INSERT INTO receipts (rowid, seq, action_id, body, prev_hash, entry_hash) VALUES (0, -1, 'evil', ?, ?, ?)",
                 (body, GENESIS_HASH, entry_hash(GENESIS_HASH, body)))


def _receipt_triggers_back(conn: sqlite3.Connection) -> None:
    for sql in TRIGGERS.values():
        conn.execute(sql)


#: row edits of every column of every table, deletions, insertions, reorderings, schema changes
EDITS: dict[str, tuple[Callable[[sqlite3.Connection], object], bool]] = {
    # receipts: every column
    "receipt body (an outcome)": (_edit_outcome, True),
    "receipt body and its entry hash": (lambda c: _edit_outcome(c, rehash=True), True),
    "receipt outcome with the whole chain recomputed": (_rechain_after(_edit_outcome), True),
    "receipt seq": (_event_sql("UPDATE receipts SET seq = seq + 1000 WHERE seq = 7"), True),
    "receipt action_id column": (_event_sql("UPDATE receipts SET action_id = 'other' WHERE seq = 7"), True),
    "receipt prev_hash": (_event_sql(f"UPDATE receipts SET prev_hash = '{'1' * 64}' WHERE seq = 7"), True),
    "receipt entry_hash": (_event_sql(f"UPDATE receipts SET entry_hash = '{'2' * 64}' WHERE seq = 7"), True),
    "receipt rowid (moved to the end)": (_event_sql("UPDATE receipts SET rowid = 100000 WHERE seq = 7"), True),
    "receipt deleted in the middle": (_event_sql("DELETE FROM receipts WHERE seq = 7"), True),
    "last receipts deleted (tail)": (_event_sql("DELETE FROM receipts WHERE seq >= (SELECT MAX(seq) - 2 FROM receipts)"), True),
    "every receipt deleted": (_event_sql("DELETE FROM receipts"), True),
    "receipt inserted before the first": (_insert_receipt_first, True),
    "two receipts swapped": (_swap_receipts, True),
    "tail deleted and chain recomputed": (_rechain_after(_event_sql("DELETE FROM receipts WHERE seq > 100")), True),
    # events: every column, deletions, insertions
    "event body (the verdict a client is sent)": (_terminal_edit, True),
    "event body, its attempt's chain recomputed": (_rechain_after(_terminal_edit, events=2), True),
    "event of the older attempt, chain recomputed": (_rechain_after(lambda c: _terminal_edit(c, 1), events=1), True),
    "event time only, chain recomputed": (_rechain_after(_event_sql(
        "UPDATE events SET body = replace(body, '\"ts\":', '\"ts\":1') WHERE attempt = 2 AND seq = 3"), events=2), True),
    "event seq": (_event_sql("UPDATE events SET seq = 999 WHERE attempt = 2 AND seq = 3"), True),
    "event attempt column": (_event_sql("UPDATE events SET attempt = 7 WHERE attempt = 2 AND seq = 3"), True),
    "event action_id column": (_event_sql("UPDATE events SET action_id = 'x' WHERE attempt = 2 AND seq = 3"), True),
    "event prev_hash": (_event_sql(f"UPDATE events SET prev_hash = '{'3' * 64}' WHERE attempt = 2 AND seq = 3"), True),
    "event entry_hash": (_event_sql(f"UPDATE events SET entry_hash = '{'4' * 64}' WHERE attempt = 2 AND seq = 3"), True),
    "event deleted in the middle": (_event_sql("DELETE FROM events WHERE attempt = 2 AND seq = 3"), True),
    "terminal event deleted": (_event_sql(
        "DELETE FROM events WHERE attempt = 2 AND seq = (SELECT MAX(seq) FROM events WHERE attempt = 2)"), True),
    "every event of the signed attempt deleted": (_event_sql("DELETE FROM events WHERE attempt = 2"), True),
    "event appended, extending the chain": (lambda c: _insert_event(c, 2, int(c.execute(
        "SELECT MAX(seq) + 1 FROM events WHERE attempt = 2").fetchone()[0]), extend=True), True),
    "events of an attempt that never ran": (lambda c: _insert_event(c, 9, 0, extend=False), True),
    # reflection store
    "reflection trace body": (_event_sql("UPDATE reflection_traces SET body = '{}'"), True),
    "reflection trace action_id": (_event_sql("UPDATE reflection_traces SET action_id = 'other'"), True),
    "reflection trace deleted": (_event_sql("DELETE FROM reflection_traces"), True),
    "reflection trace inserted": (_event_sql("INSERT INTO reflection_traces VALUES ('ghost', '{}')"), True),
    "approval secret replaced": (_event_sql(f"UPDATE reflection_meta SET value = '{'5' * 64}'"), True),
    "approval secret key renamed": (_event_sql("UPDATE reflection_meta SET key = 'other'"), True),
    # schema and triggers
    "receipt triggers dropped": (lambda c: None, False),
    "extra BEFORE INSERT ... RAISE(IGNORE) trigger": (_event_sql(
        "CREATE TRIGGER quiet BEFORE INSERT ON receipts BEGIN SELECT RAISE(IGNORE); END"), True),
    "trigger replaced by a harmless one": (lambda c: c.execute(
        "CREATE TRIGGER receipts_no_update BEFORE UPDATE ON receipts BEGIN SELECT 1; END"), False),
    "events trigger dropped": (_receipt_triggers_back, False),
    "column added to receipts": (_event_sql("ALTER TABLE receipts ADD COLUMN note TEXT"), True),
    "view added": (_event_sql("CREATE VIEW v AS SELECT * FROM receipts"), True),
    "index added": (_event_sql("CREATE INDEX ix ON events (body)"), True),
    "index dropped": (_event_sql("DROP INDEX receipts_by_action"), True),
    "table added": (_event_sql("CREATE TABLE notes (x TEXT)"), True),
    "events table renamed": (lambda c: (_receipt_triggers_back(c), c.execute("ALTER TABLE events RENAME TO events_old")),
                             False),
}


def test_the_untouched_log_is_intact_and_names_its_signed_head(template: Path, tmp_path: Path) -> None:
    db = _copy(template, tmp_path)
    code, out = _verify(db)
    assert code == 0, out
    head = read_head(head_path(db))
    assert head["attempt"] == 2 and head["phase"] == "end"
    report = audit_file(db, trusted_key=load_signer().public_key)
    assert report.ok and report.signed_count == report.entries and report.unsigned_tail == 0
    assert report.attempts == 2 and report.interrupted == []
    plan_copy = next(template.parent.glob("cda-*/cda_plan/receipts_head.json"))
    assert json.loads(plan_copy.read_text()) == head  # the plan bundle holds the same signed head
    assert not any(p.name.endswith(("-wal", "-shm")) for p in tmp_path.iterdir())


@pytest.mark.parametrize("name", list(EDITS))
def test_every_row_or_schema_edit_is_detected(template: Path, tmp_path: Path, name: str) -> None:
    db = _copy(template, tmp_path)
    attack, restore = EDITS[name]
    _raw(db, attack, restore=restore)
    code, out = _verify(db)
    assert code == 1, (name, out)
    assert "TAMPERED" in out


def test_the_edit_table_is_as_large_as_the_issue_asks() -> None:
    assert len(EDITS) >= 29


# ------------------------------------------------------------------------------ file-level attacks


def _other_log(folder: Path, n: int = 3) -> Path:
    """Another CDA log with a head signed by the same (trusted) key."""
    folder.mkdir(parents=True, exist_ok=True)
    db = folder / "receipts.sqlite"
    with ReceiptLog(db) as log:
        log.append_many([Receipt(action_id="b", seq=i, kind="action", name="x", inputs_hash="00", attempt=1)
                         for i in range(n)])
        head, count = log.tip()
    write_head(head_path(db), load_signer().sign_head(head, count, "b", 1, "start"))
    return db


def _truncate(db: Path, tmp: Path) -> None:
    data = db.read_bytes()
    db.write_bytes(data[: len(data) // 2])


def _wipe(db: Path, tmp: Path) -> None:
    db.write_bytes(b"")


def _delete(db: Path, tmp: Path) -> None:
    db.unlink()


def _replace_with_other_log(db: Path, tmp: Path) -> None:
    shutil.copyfile(_other_log(tmp / "other"), db)


def _replace_with_foreign(db: Path, tmp: Path) -> None:
    db.unlink()
    conn = sqlite3.connect(db)
    conn.execute("CREATE TABLE receipts (x)")
    conn.commit()
    conn.close()


def _swap_head_file(db: Path, tmp: Path) -> None:
    shutil.copyfile(head_path(_other_log(tmp / "other")), head_path(db))


def _resign_with_other_key(db: Path, tmp: Path) -> None:
    _raw(db, _rechain_after(_edit_outcome))
    conn = sqlite3.connect(db)
    head, count = conn.execute("SELECT entry_hash, (SELECT COUNT(*) FROM receipts) FROM receipts "
                               "ORDER BY rowid DESC LIMIT 1").fetchone()
    conn.close()
    old = read_head(head_path(db))
    attacker = Signer(os.urandom(32).hex())
    write_head(head_path(db), attacker.sign_head(head, count, old["action_id"], old["attempt"], "end",
                                                 old["events"], old["events_head"], old["meta"]))


def _delete_head_file(db: Path, tmp: Path) -> None:
    head_path(db).unlink()


def _edit_head_file(db: Path, tmp: Path) -> None:
    doc = read_head(head_path(db))
    doc["count"] -= 5
    head_path(db).write_text(json.dumps(doc))


def _garble_head_file(db: Path, tmp: Path) -> None:
    head_path(db).write_text("{not json")


FILE_ATTACKS: dict[str, Callable[[Path, Path], None]] = {
    "truncated to half": _truncate,
    "wiped (0 bytes)": _wipe,
    "deleted (its head file left)": _delete,
    "replaced by another CDA log": _replace_with_other_log,
    "replaced by a foreign SQLite file": _replace_with_foreign,
    "head file swapped for another log's": _swap_head_file,
    "chain rewritten and re-signed with another key": _resign_with_other_key,
    "head file deleted": _delete_head_file,
    "head file's count edited": _edit_head_file,
    "head file garbled": _garble_head_file,
}


@pytest.mark.parametrize("name", list(FILE_ATTACKS))
def test_every_file_level_attack_is_detected(template: Path, tmp_path: Path, name: str) -> None:
    db = _copy(template, tmp_path / "log")
    FILE_ATTACKS[name](db, tmp_path)
    code, out = _verify(db)
    assert code == 1, (name, out)


def test_a_deleted_wal_loses_committed_entries_and_is_detected(template: Path, tmp_path: Path) -> None:
    live = _copy(template, tmp_path / "live")
    snapshot = tmp_path / "snapshot"
    snapshot.mkdir()
    with ReceiptLog(live) as log:  # a writer still open: its last entries are only in the -wal
        log.append(Receipt(action_id="r", seq=0, kind="action", name="reflection.read", inputs_hash="00"))
        head, count = log.tip()
        write_head(head_path(live), load_signer().sign_head(head, count, "r", 1, "start"))
        for suffix in ("", "-wal", ".head.json"):
            shutil.copyfile(f"{live}{suffix}", snapshot / f"receipts.sqlite{suffix}")
    copy = snapshot / "receipts.sqlite"
    assert _verify(copy)[0] == 0  # the snapshot with its -wal is intact
    Path(f"{copy}-wal").unlink()
    code, out = _verify(copy)
    assert code == 1 and "signed head" in out


def test_a_rollback_of_log_and_head_is_caught_by_the_printed_head(template: Path, tmp_path: Path) -> None:
    before = _copy(template, tmp_path / "before")
    with pytest.MonkeyPatch.context():
        run = run_inputs(load_inputs(EXAMPLE), before.parent, base_dir=EXAMPLE.parent)
    printed = run.receipts_head
    old = tmp_path / "old"
    _copy(template, old)  # the attacker puts back the older (validly signed) log and head
    for suffix in ("", ".head.json"):
        shutil.copyfile(old / f"receipts.sqlite{suffix}", f"{before}{suffix}")
    assert _verify(before)[0] == 0  # without an outside anchor a rollback is a valid older log ...
    code, out = _verify(before, head=printed)
    assert code == 1 and "anchor" in out  # ... the head `cda run` printed catches it


def test_a_run_never_starts_over_a_wiped_or_rewritten_log(template: Path, tmp_path: Path) -> None:
    for name, attack in (("wiped", _wipe), ("deleted", _delete), ("rewritten", _resign_with_other_key)):
        db = _copy(template, tmp_path / name)
        attack(db, tmp_path)
        before = db.read_bytes() if db.exists() else None
        with pytest.raises(AuditLogError, match="will not"):
            run_inputs(load_inputs(EXAMPLE), db.parent, base_dir=EXAMPLE.parent)
        assert (db.read_bytes() if db.exists() else None) == before, name  # the evidence is left as it was


def test_not_a_cda_log_is_exit_2_and_a_missing_one_too(tmp_path: Path) -> None:
    text = tmp_path / "notes.sqlite"
    text.write_text("hello " * 100)
    assert _verify(text)[0] == 2
    assert _verify(tmp_path / "missing.sqlite")[0] == 2
    empty = tmp_path / "empty.sqlite"
    empty.touch()
    assert _verify(empty)[0] == 2  # nothing says it was ever a CDA log


# ------------------------------------------------------------------ random byte flips and cuts


def _rows_of(path: Path) -> object:
    """Every row of every table and the schema, or the error reading them: what 'a row changed' means."""
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            names = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]
            return (conn.execute("SELECT type, name, tbl_name, sql FROM sqlite_master ORDER BY name").fetchall(),
                    [conn.execute(f"SELECT * FROM \"{n}\" ORDER BY rowid").fetchall() if n != "events" else
                     conn.execute("SELECT * FROM events ORDER BY action_id, attempt, seq").fetchall() for n in names],
                    conn.execute("PRAGMA application_id").fetchone())
        finally:
            conn.close()
    except (sqlite3.DatabaseError, UnicodeDecodeError) as exc:
        return f"unreadable: {exc}"


@pytest.fixture(scope="module")
def pristine(template: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[bytes, bytes, object]:
    db = _copy(template, tmp_path_factory.mktemp("pristine"))
    return db.read_bytes(), head_path(db).read_bytes(), _rows_of(db)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_any_byte_flip_or_cut_that_changes_a_row_is_detected(pristine: tuple[bytes, bytes, object],
                                                              data: st.DataObject) -> None:
    raw, head, rows = pristine
    if data.draw(st.booleans(), label="cut"):
        damaged = raw[: data.draw(st.integers(0, len(raw) - 1), label="length")]
    else:
        at = data.draw(st.integers(0, len(raw) - 1), label="offset")
        flipped = raw[at] ^ data.draw(st.integers(1, 255), label="xor")
        damaged = raw[:at] + bytes([flipped]) + raw[at + 1:]
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "receipts.sqlite"
        db.write_bytes(damaged)
        head_path(db).write_bytes(head)
        changed = _rows_of(db) != rows
        code, out = _verify(db)
    if changed:
        assert code == 1, out  # never "intact" when a row changed; tampered, since its head is beside it


# ------------------------------------------------------------------ a run whose log is rewritten


def _rewrite_mid_run(db: Path) -> Callable[[ActionEvent], None]:
    """What a check escaping its sandbox did: drop the triggers, change a receipt's outcome of
    the running attempt, recompute the chain, restore the triggers. Done once, at 'verify'."""
    done: list[bool] = []

    def attacker(event: ActionEvent) -> None:
        if event.type == "action_progress" and event.phase == "verify" and not done:  # type: ignore[union-attr]
            done.append(True)

            def attack(conn: sqlite3.Connection) -> None:
                seq = int(conn.execute(
                    "SELECT MAX(seq) FROM receipts WHERE body LIKE '%\"kind\":\"solver\"%'").fetchone()[0])
                body = conn.execute("SELECT body FROM receipts WHERE seq = ?", (seq,)).fetchone()[0]
                conn.execute("UPDATE receipts SET body = ? WHERE seq = ?",
                             (body.replace('"status":"ok"', '"status":"timeout"'), seq))
                _rechain_receipts(conn, seq)

            _raw(db, attack)

    return attacker


def test_a_log_rewritten_during_the_run_fails_the_run(tmp_path: Path) -> None:
    db = tmp_path / "receipts.sqlite"
    seen: list[ActionEvent] = []
    with pytest.raises(AuditLogError, match="changed during the run"):
        run_inputs(load_inputs(EXAMPLE), tmp_path, base_dir=EXAMPLE.parent,
                   subscribers=[_rewrite_mid_run(db), seen.append])
    terminal = seen[-1]
    assert terminal.type == "action_failed" and terminal.error_type == "AuditLogTampered"  # type: ignore[union-attr]
    assert "was changed during the run" in terminal.error  # type: ignore[union-attr]
    code, out = _verify(db)
    assert code == 1 and "rewritten while it ran" in out
    # and the next run refuses to sign on top of it
    with pytest.raises(AuditLogError):
        run_inputs(load_inputs(EXAMPLE), tmp_path, base_dir=EXAMPLE.parent)


def test_cda_run_exits_1_when_its_log_is_rewritten(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    db = tmp_path / "receipts.sqlite"
    from cda.adapters import action_entry

    real = action_entry.run_inputs

    def with_attacker(*args: object, subscribers: list[object], **kwargs: object) -> object:
        return real(*args, subscribers=[_rewrite_mid_run(db), *subscribers], **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(action_entry, "run_inputs", with_attacker)
    out, err = io.StringIO(), io.StringIO()
    code = run_cli.main_run(EXAMPLE, tmp_path, True, out, err)
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    assert code == 1 and "changed during the run" in err.getvalue() and "Traceback" not in err.getvalue()
    assert lines[-1]["type"] == "action_failed" and lines[-1]["error_type"] == "AuditLogTampered"


def test_an_event_edited_or_a_trigger_added_during_the_run_fails_it(tmp_path: Path) -> None:
    attacks = {
        "event": lambda c: c.execute("UPDATE events SET body = replace(body, 'initialise', 'INITIALISE')"),
        "trigger": lambda c: c.execute("CREATE TRIGGER quiet BEFORE INSERT ON receipts BEGIN SELECT RAISE(IGNORE); END"),
    }
    for name, attack in attacks.items():
        folder = tmp_path / name
        db = folder / "receipts.sqlite"
        seen: list[ActionEvent] = []

        def at_verify(event: ActionEvent, db: Path = db, attack: Callable[[sqlite3.Connection], object] = attack) -> None:
            if event.type == "action_progress" and event.phase == "verify":  # type: ignore[union-attr]
                _raw(db, attack)

        with pytest.raises(AuditLogError):
            run_inputs(load_inputs(EXAMPLE), folder, base_dir=EXAMPLE.parent, subscribers=[at_verify, seen.append])
        assert seen[-1].type == "action_failed", name
        assert seen[-1].error_type == "AuditLogTampered", name  # type: ignore[union-attr]


# ------------------------------------------------------------------------------ attempts, re-runs


def test_a_rerun_streams_only_its_own_attempt(template: Path) -> None:
    action_id = read_head(head_path(template))["action_id"]
    served = read_events(template, action_id)
    assert {e.attempt for e in served} == {2}  # never the first attempt's events
    assert [e.seq for e in served] == list(range(len(served))) and served[-1].type == "action_completed"
    conn = sqlite3.connect(f"file:{template}?mode=ro", uri=True)
    try:
        per_attempt = dict(conn.execute("SELECT attempt, COUNT(*) FROM events GROUP BY attempt").fetchall())
        attempts = sorted({json.loads(b)["attempt"] for (b,) in conn.execute("SELECT body FROM receipts")} - {None})
    finally:
        conn.close()
    assert per_attempt == {1: len(served), 2: len(served)} and attempts == [1, 2]


def test_a_rerun_after_different_events_serves_the_new_ones(tmp_path: Path) -> None:
    """The SSE bug: INSERT OR IGNORE kept the first run's events under the same (action, seq)."""
    store = EventStore(tmp_path / "e.sqlite")
    from cda.actions.stream import EventStream

    for attempt, verdict in ((1, "inconclusive"), (2, "supported")):
        stream = EventStream("a1", [store.append], attempt=attempt)
        stream.started("00")
        stream.notice(verdict)
    served = store.since("a1")
    store.close()
    assert [(e.attempt, getattr(e, "message", None)) for e in served] == [(2, None), (2, "supported")]


def test_pruning_keeps_the_latest_attempt_and_is_not_tampering(template: Path, tmp_path: Path) -> None:
    db = _copy(template, tmp_path)
    store = EventStore(db)
    try:
        action_id = read_head(head_path(db))["action_id"]
        latest = store.since(action_id)
        removed = store.prune(older_than_s=-1)  # everything is "old": only earlier attempts may go
        assert removed == len(latest) and store.since(action_id) == latest
    finally:
        store.close()
    code, out = _verify(db)
    assert code == 0 and f"events of {action_id}#1 are not in this file" in out


def test_the_key_is_private_and_a_readable_one_is_refused(tmp_path: Path) -> None:
    signer = load_signer(tmp_path / "keys")
    key = tmp_path / "keys" / KEY_FILE
    assert key.stat().st_mode & 0o777 == 0o600 and (tmp_path / "keys").stat().st_mode & 0o777 == 0o700
    assert load_signer(tmp_path / "keys").public_key == signer.public_key  # made once, then reused
    assert [p.name for p in (tmp_path / "keys").iterdir()] == [KEY_FILE]  # no temporary file left
    key.chmod(0o644)
    with pytest.raises(SigningError, match="readable by others"):
        load_signer(tmp_path / "keys")


def test_format_1_events_are_migrated_into_chained_attempts(tmp_path: Path) -> None:
    from cda.actions.store_file import LEGACY_TABLES

    db = tmp_path / "old.sqlite"
    conn = sqlite3.connect(db)
    conn.execute(LEGACY_TABLES["events"])
    for seq in range(3):
        body = json.dumps({"action_id": "a1", "seq": seq, "ts": 1.0, "type": "action_notice", "level": "info",
                           "message": f"m{seq}"}, sort_keys=True, separators=(",", ":"))
        conn.execute("INSERT INTO events VALUES ('a1', ?, 0, ?)", (seq, body))
    conn.commit()
    conn.close()
    assert [e.seq for e in read_events(db, "a1")] == [0, 1, 2]  # read as format 1, untouched
    EventStore(db).close()
    conn = sqlite3.connect(db)
    rows = conn.execute("SELECT attempt, seq, prev_hash, entry_hash FROM events ORDER BY seq").fetchall()
    conn.close()
    assert [r[:2] for r in rows] == [(1, 0), (1, 1), (1, 2)]
    assert [r[2] for r in rows] == [GENESIS_HASH, rows[0][3], rows[1][3]]
    assert [getattr(e, "message", None) for e in read_events(db, "a1")] == ["m0", "m1", "m2"]


def _run_cda(out: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen([sys.executable, "-m", "cda", "run", str(EXAMPLE), "--out", str(out)], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _wait_for_attempt(db: Path, attempt: int, proc: subprocess.Popen[bytes], limit_s: float = 30.0) -> bool:
    """Wait until the child signed the start of ``attempt`` (it logged action.start), or exited."""
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            if read_head(head_path(db))["attempt"] >= attempt:
                return True
        except SigningError:  # not written yet
            pass
        time.sleep(0.005)
    return False


@pytest.mark.slow  # a kill-and-restart loop: .ci/run's slow step (README: the test command leaves it out)
def test_kill_9_at_random_points_leaves_a_log_that_verifies(tmp_path: Path) -> None:
    db = tmp_path / "receipts.sqlite"
    load_signer()  # the key exists before the first child, as after any first run
    rng = random.Random(13)
    for attempt in range(1, 11):
        proc = _run_cda(tmp_path)
        assert _wait_for_attempt(db, attempt, proc), "the child never started its attempt"
        time.sleep(rng.uniform(0.0, 0.3))  # a random point of the run (it takes about a second)
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
    report = audit_file(db, trusted_key=load_signer().public_key)
    # nothing is tampered; a kill after action.start leaves that attempt's receipts after the signed
    # head, each vouched for by the run's key where it is (docs/actions.md, "Vouched receipts"): intact, noted
    assert not report.problems and report.status == "intact", report
    assert not report.unsigned_tail or any("each vouched for by the trusted key" in n for n in report.notes), report
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        bodies = [json.loads(b) for (b,) in conn.execute("SELECT body FROM receipts")]
    finally:
        conn.close()
    started_attempts = {b["attempt"] for b in bodies if b["name"] == "action.start"}
    ended = {b["attempt"] for b in bodies if b["name"] == "action.end"}
    assert started_attempts == set(range(1, 11))
    action_id = bodies[0]["action_id"]
    assert report.interrupted == [f"{action_id}#{n}" for n in sorted(started_attempts - ended)]
    assert report.interrupted, "no kill landed inside a run"
    code, out = _verify(db)
    assert code == 0 and "interrupted" in out
    # a new run after the kills extends the log, signs it, and its stream is its own
    final = _run_cda(tmp_path)
    assert final.wait(60) == 0
    assert _verify(db)[0] == 0
    served = read_events(db, action_id)
    assert {e.attempt for e in served} == {max(started_attempts) + 1} and served[-1].type == "action_completed"


def test_a_forged_attempt_appended_after_the_signed_head_is_tampering(template: Path, tmp_path: Path) -> None:
    """Appending needs no key: a whole attempt copied after the signed head (action.start …
    action.end) must not pass as an uncovered tail."""
    from cda.actions.receipts import ReceiptLog

    db = _copy(template, tmp_path / "forged")
    with ReceiptLog(db) as log:
        second = [e.receipt for e in log.entries() if e.receipt.attempt == 2]
        log.append_many([r.model_copy(update={"attempt": 3}) for r in second])
    code, text = _verify(db)
    assert code == 1 and "ended after the signed head" in text, text


def test_without_a_trusted_key_a_head_signed_by_anyone_is_not_believed(template: Path, tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    db = _copy(template, tmp_path / "resigned")
    _resign_with_other_key(db, tmp_path)
    monkeypatch.setenv(KEY_DIR_ENV, str(tmp_path / "no-key-here"))  # another machine: no local key
    code, text = _verify(db)
    assert code == 3 and "UNVERIFIED" in text and "--public-key" in text, text  # not believed: never exit 0
    pristine = _copy(template, tmp_path / "pristine")
    # an intact log read by another user (no local key) is not TAMPERED: a missing key is not tampering
    code, text = _verify(pristine)
    assert code == 3 and text.startswith(f"{pristine}: UNVERIFIED:") and "TAMPERED" not in text, text
    out = io.StringIO()
    assert main_receipts_verify(pristine, None, True, out, io.StringIO()) == 3
    assert json.loads(out.getvalue())["status"] == "unverified"
    public = read_head(head_path(pristine))["public_key"]
    out, err = io.StringIO(), io.StringIO()
    assert main_receipts_verify(pristine, None, False, out, err, public_key=public) == 0, out.getvalue()
    assert main_receipts_verify(db, None, False, io.StringIO(), io.StringIO(), public_key=public) == 1
