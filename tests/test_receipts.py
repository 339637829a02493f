"""The receipt log (append-only, hash-chained, SQLite/WAL), its verifier, the reflection store
and ``cda receipts verify``.

Tampering is done the way an attacker would: with raw sqlite3 after dropping the triggers (and,
where it makes the attack stronger, putting them back), or by editing the file's bytes.
"""

from __future__ import annotations

import hashlib
import io
import json
import multiprocessing
import sqlite3
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cda.actions.receipts import GENESIS_HASH, ReceiptLog, ReceiptLogError, entry_hash, verify
from cda.actions.reflection import SECRET_ENV, TOKEN_PREFIX, ReflectionError, ReflectionStore
from cda.cli.receipts import main_receipts_verify
from cda.contracts.receipt import Receipt, canonical_json
from cda.contracts.refs import SpanRef
from cda.store import StoreFileError

# ---------------------------------------------------------------------------------------- helpers


def _receipt(i: int, action: str = "a1") -> Receipt:
    return Receipt(
        action_id=action,
        seq=i,
        kind="solver" if i % 2 == 0 else "ken",
        name="z3.check" if i % 2 == 0 else "ken.path",
        inputs_hash=hashlib.sha256(f"inputs {i}".encode()).hexdigest(),
        seed=f"hmac-v1:{i:016x}",
        caps={"timeout_s": 2.5, "k": i, "mode": "exact"},
        result={"status": "sat", "models": [i, i + 1], "note": "naïve ✓"},
        citations=[SpanRef(source=f"doc{i}", start=0, end=4, excerpt="text")],
    )


def _make_log(path: Path, n: int) -> list[str]:
    with ReceiptLog(path) as log:
        return log.append_many([_receipt(i) for i in range(n)])


def _rows(path: Path) -> list[tuple[object, ...]]:
    conn = sqlite3.connect(path)
    try:
        return conn.execute("SELECT rowid, seq, action_id, body, prev_hash, entry_hash FROM receipts ORDER BY rowid").fetchall()
    finally:
        conn.close()


def _tamper(path: Path, attack: Callable[[sqlite3.Connection], object], *, restore_triggers: bool = True) -> None:
    """Drop the triggers, run ``attack`` with raw SQL, and (by default) put the triggers back,
    so that only the chain itself can give the attack away."""
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        triggers = conn.execute("SELECT name, sql FROM sqlite_master WHERE type = 'trigger' AND tbl_name = 'receipts'").fetchall()
        assert len(triggers) == 3
        for name, _ in triggers:
            conn.execute(f"DROP TRIGGER {name}")
        attack(conn)
        if restore_triggers:
            for _, sql in triggers:
                conn.execute(sql)
    finally:
        conn.close()


def _edited_body(body: str) -> str:
    data = json.loads(body)
    data["result"] = {"status": "unsat"}
    return canonical_json(data)


def _body_of(conn: sqlite3.Connection, seq: int) -> tuple[str, str]:
    body, prev = conn.execute("SELECT body, prev_hash FROM receipts WHERE seq = ?", (seq,)).fetchone()
    return str(body), str(prev)


# ------------------------------------------------------------------------------ the honest log


def test_file_is_in_wal_mode_and_round_trips(tmp_path: Path) -> None:
    path = tmp_path / "r.db"
    receipts = [_receipt(i, "a1") for i in range(3)] + [_receipt(0, "a2")]
    with ReceiptLog(path) as log:
        hashes = [log.append(r) for r in receipts]
        assert log.head() == hashes[-1]
        entries = log.entries()
        assert [e.receipt for e in entries] == receipts
        assert [e.seq for e in entries] == [0, 1, 2, 3]
        assert [e.entry_hash for e in entries] == hashes
        assert [e.prev_hash for e in entries] == [GENESIS_HASH, *hashes[:-1]]
        assert [e.receipt for e in log.entries("a2")] == [receipts[-1]]
        assert log.count() == 4 and log.count("a1") == 3 and log.count("nobody") == 0
        assert verify(path).ok  # read-only, while the entries may still sit in the WAL file
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    finally:
        conn.close()
    with ReceiptLog(path) as again:  # reopening keeps the chain and extends it
        assert again.head() == hashes[-1]
        again.append(_receipt(3, "a1"))
        assert again.count() == 5
    assert verify(path).ok


def test_empty_log_head_is_genesis(tmp_path: Path) -> None:
    with ReceiptLog(tmp_path / "r.db") as log:
        assert log.head() == GENESIS_HASH
        assert log.append_many([]) == []
        assert log.entries() == []
    report = verify(tmp_path / "r.db", expected_head=GENESIS_HASH)
    assert report.ok and report.entries == 0 and report.head == GENESIS_HASH


def test_body_and_hash_are_the_documented_bytes(tmp_path: Path) -> None:
    # Spelled out by hand, so a change of the canonical form or of the hash recipe fails here.
    receipt = Receipt(action_id="a1", seq=0, kind="solver", name="z3.check", inputs_hash="00")
    body = (
        '{"action_id":"a1","attempt":null,"caps":{},"citations":[],"inputs_hash":"00","kind":"solver",'
        '"name":"z3.check","result":{},"seed":null,"seq":0,"status":"ok"}'
    )
    with ReceiptLog(tmp_path / "r.db") as log:
        head = log.append(receipt)
    assert _rows(tmp_path / "r.db")[0][3] == body
    assert head == hashlib.sha256(("0" * 64 + body).encode("utf-8")).hexdigest() == entry_hash(GENESIS_HASH, body)


def test_same_receipts_give_byte_identical_logs(tmp_path: Path) -> None:
    assert _make_log(tmp_path / "one.db", 6) == _make_log(tmp_path / "two.db", 6)
    assert _rows(tmp_path / "one.db") == _rows(tmp_path / "two.db")


def test_honest_update_delete_and_broken_inserts_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "r.db"
    hashes = _make_log(path, 3)
    conn = sqlite3.connect(path)
    try:
        for statement in ("UPDATE receipts SET body = '{}' WHERE seq = 1", "DELETE FROM receipts WHERE seq = 2"):
            with pytest.raises(sqlite3.IntegrityError, match="append-only"):
                conn.execute(statement)
        insert = "INSERT INTO receipts (seq, action_id, body, prev_hash, entry_hash) VALUES (?, 'a1', '{}', ?, 'h')"
        with pytest.raises(sqlite3.IntegrityError, match="extend the chain"):
            conn.execute(insert, (3, GENESIS_HASH))  # does not link to the head
        with pytest.raises(sqlite3.IntegrityError, match="extend the chain"):
            conn.execute(insert, (7, hashes[-1]))  # skips seqs
        with pytest.raises(sqlite3.IntegrityError, match="extend the chain"):  # REPLACE would delete row 1
            conn.execute(
                "INSERT OR REPLACE INTO receipts (rowid, seq, action_id, body, prev_hash, entry_hash) "
                "VALUES (1, 3, 'a1', '{}', ?, 'h')",
                (hashes[-1],),
            )
        conn.rollback()
    finally:
        conn.close()
    assert verify(path, expected_head=hashes[-1]).ok


def test_a_receipt_that_json_cannot_spell_is_refused_whole(tmp_path: Path) -> None:
    bad = _receipt(1).model_copy(update={"caps": {"timeout_s": float("nan")}})
    with ReceiptLog(tmp_path / "r.db") as log:
        with pytest.raises(ReceiptLogError, match="a1/1 cannot be logged"):
            log.append_many([_receipt(0), bad])
        assert log.count() == 0


def test_threads_sharing_one_log_keep_the_chain(tmp_path: Path) -> None:
    with ReceiptLog(tmp_path / "r.db") as log:

        def work(action: str) -> None:
            for i in range(20):
                log.append(_receipt(i, action))

        threads = [threading.Thread(target=work, args=(f"t{k}",)) for k in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert log.count() == 80
    report = verify(tmp_path / "r.db")
    assert report.ok, report.problems
    assert report.entries == 80


def _append_worker(path: str, action: str, n: int) -> None:
    with ReceiptLog(path) as log:
        for i in range(n):
            log.append(_receipt(i, action))


def test_two_processes_appending_keep_a_valid_chain(tmp_path: Path) -> None:
    path = tmp_path / "r.db"  # not created beforehand: both processes race to create it, too
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_append_worker, args=(str(path), f"p{k}", 25)) for k in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
    assert [p.exitcode for p in procs] == [0, 0]
    report = verify(path)
    assert report.ok, report.problems
    assert report.entries == 50
    with ReceiptLog(path) as log:
        for action in ("p0", "p1"):
            assert [e.receipt.seq for e in log.entries(action)] == list(range(25))


def test_closed_log_and_foreign_files_are_clear_errors(tmp_path: Path) -> None:
    log = ReceiptLog(tmp_path / "r.db")
    log.close()
    log.close()
    with pytest.raises(ReceiptLogError, match="closed"):
        log.append(_receipt(0))
    text = tmp_path / "notes.txt"
    text.write_text("not a database at all " * 100)
    with pytest.raises(StoreFileError, match="not an SQLite database"):
        ReceiptLog(text)
    foreign = tmp_path / "foreign.db"
    conn = sqlite3.connect(foreign)
    conn.execute("CREATE TABLE receipts (id INTEGER, total REAL)")
    conn.commit()
    conn.close()
    with pytest.raises(StoreFileError, match="not a CDA file.*no CDA mark; it holds receipts"):
        ReceiptLog(foreign)
    with pytest.raises(StoreFileError, match="not a CDA file"):
        verify(foreign)
    with pytest.raises(StoreFileError, match="no such file"):
        verify(tmp_path / "missing.db")
    assert not (tmp_path / "missing.db").exists()


def test_in_memory_log_works_and_verifies() -> None:
    with ReceiptLog(":memory:") as log:
        hashes = log.append_many([_receipt(i) for i in range(3)])
        report = log.verify(expected_head=hashes[1])
        assert report.ok and report.anchor_seq == 1 and report.head == hashes[-1]


# ------------------------------------------------------------------------------------ tampering


@pytest.fixture()
def log5(tmp_path: Path) -> tuple[Path, list[str]]:
    path = tmp_path / "r.db"
    return path, _make_log(path, 5)


def test_dropped_triggers_are_reported(log5: tuple[Path, list[str]]) -> None:
    path, hashes = log5
    _tamper(path, lambda conn: None, restore_triggers=False)
    report = verify(path, expected_head=hashes[-1])
    assert not report.ok
    assert sorted(report.problems) == [
        f"trigger {name} is missing: the log is no longer write-protected"
        for name in ("receipts_extend_only", "receipts_no_delete", "receipts_no_update")
    ]


def test_a_trigger_replaced_by_a_harmless_one_is_reported(log5: tuple[Path, list[str]]) -> None:
    path, _ = log5
    conn = sqlite3.connect(path)
    conn.execute("DROP TRIGGER receipts_no_update")
    conn.execute("CREATE TRIGGER receipts_no_update BEFORE UPDATE ON receipts BEGIN SELECT 1; END")
    conn.commit()
    conn.close()
    assert verify(path).problems == ["trigger receipts_no_update was altered"]


def test_edited_body_is_a_hash_mismatch(log5: tuple[Path, list[str]]) -> None:
    path, hashes = log5

    def attack(conn: sqlite3.Connection) -> None:
        body, _ = _body_of(conn, 2)
        conn.execute("UPDATE receipts SET body = ? WHERE seq = 2", (_edited_body(body),))

    _tamper(path, attack)
    report = verify(path, expected_head=hashes[-1])
    assert report.problems == ["seq 2 (rowid 3): entry hash mismatch: the body or its entry_hash was edited"]


def test_body_rehashed_without_the_chain_breaks_the_next_link(log5: tuple[Path, list[str]]) -> None:
    path, hashes = log5

    def attack(conn: sqlite3.Connection) -> None:
        body, prev = _body_of(conn, 2)
        new = _edited_body(body)
        conn.execute("UPDATE receipts SET body = ?, entry_hash = ? WHERE seq = 2", (new, entry_hash(prev, new)))

    _tamper(path, attack)
    report = verify(path, expected_head=hashes[-1])
    assert len(report.problems) == 1
    assert report.problems[0].startswith("seq 3 (rowid 4): chain broken: prev_hash is not the previous entry's hash")


def test_relinked_entry_with_consistent_hash_breaks_its_own_link(log5: tuple[Path, list[str]]) -> None:
    path, hashes = log5

    def attack(conn: sqlite3.Connection) -> None:
        body, _ = _body_of(conn, 1)
        conn.execute("UPDATE receipts SET prev_hash = ?, entry_hash = ? WHERE seq = 1", (GENESIS_HASH, entry_hash(GENESIS_HASH, body)))

    _tamper(path, attack)
    problems = verify(path, expected_head=hashes[-1]).problems
    assert any(p.startswith("seq 1 (rowid 2): chain broken") for p in problems)
    assert any(p.startswith("seq 2 (rowid 3): chain broken") for p in problems)


def test_deleted_middle_row_breaks_chain_and_seq(log5: tuple[Path, list[str]]) -> None:
    path, hashes = log5
    _tamper(path, lambda conn: conn.execute("DELETE FROM receipts WHERE seq = 2"))
    report = verify(path)
    assert not report.ok and report.entries == 4
    assert any(p.startswith("seq 3 (rowid 4): chain broken") for p in report.problems)
    assert "seq 3 (rowid 4): seq gap: entry number 2 in the chain has seq 3, expected 2" in report.problems


def test_deleted_tail_needs_the_anchor(log5: tuple[Path, list[str]]) -> None:
    path, hashes = log5
    _tamper(path, lambda conn: conn.execute("DELETE FROM receipts WHERE seq >= 3"))
    assert verify(path).ok  # a shorter chain is still a valid chain: this is what anchors are for
    report = verify(path, expected_head=hashes[-1])
    assert not report.ok
    assert report.problems == [
        f"anchor {hashes[-1]} is not in the chain: entries up to the anchor were removed (a truncated tail) or rewritten"
    ]
    older = verify(path, expected_head=hashes[2])  # an older anchor still vouches for its prefix
    assert older.ok and older.anchor_seq == 2


def test_swapped_rows_break_the_chain(log5: tuple[Path, list[str]]) -> None:
    path, hashes = log5

    def attack(conn: sqlite3.Connection) -> None:
        cols = "action_id, body, prev_hash, entry_hash"
        one = conn.execute(f"SELECT {cols} FROM receipts WHERE seq = 1").fetchone()
        three = conn.execute(f"SELECT {cols} FROM receipts WHERE seq = 3").fetchone()
        update = "UPDATE receipts SET action_id = ?, body = ?, prev_hash = ?, entry_hash = ? WHERE seq = ?"
        conn.execute(update, (*three, 1))
        conn.execute(update, (*one, 3))

    _tamper(path, attack)
    report = verify(path, expected_head=hashes[-1])
    assert [p.split(":")[0] for p in report.problems] == [f"seq {s} (rowid {s + 1})" for s in (1, 2, 3, 4)]
    assert all("chain broken" in p for p in report.problems)


def test_forged_rows_are_caught_unless_they_extend_the_chain(log5: tuple[Path, list[str]]) -> None:
    path, hashes = log5
    forged = canonical_json(_receipt(9, "evil").model_dump(mode="json"))

    def attack(conn: sqlite3.Connection) -> None:
        conn.execute(
            "INSERT INTO receipts (rowid, seq, action_id, body, prev_hash, entry_hash) VALUES (0, -1, 'evil', ?, ?, ?)",
            (forged, GENESIS_HASH, entry_hash(GENESIS_HASH, forged)),
        )
        conn.execute(
            "INSERT INTO receipts (seq, action_id, body, prev_hash, entry_hash) VALUES (5, 'evil', ?, ?, ?)",
            (forged, hashes[-1], "f" * 64),
        )

    _tamper(path, attack)
    problems = verify(path, expected_head=hashes[-1]).problems
    assert "seq -1 (rowid 0): seq gap: entry number 0 in the chain has seq -1, expected 0" in problems
    assert any(p.startswith("seq 0 (rowid 1): chain broken") for p in problems)
    assert "seq 5 (rowid 6): entry hash mismatch: the body or its entry_hash was edited" in problems


def test_a_well_formed_append_is_not_tampering(log5: tuple[Path, list[str]]) -> None:
    # The log proves that nothing before an anchor changed, not who wrote an entry.
    path, hashes = log5
    forged = canonical_json(_receipt(9, "evil").model_dump(mode="json"))
    conn = sqlite3.connect(path)
    conn.execute(
        "INSERT INTO receipts (seq, action_id, body, prev_hash, entry_hash) VALUES (5, 'evil', ?, ?, ?)",
        (forged, hashes[-1], entry_hash(hashes[-1], forged)),
    )
    conn.commit()
    conn.close()
    report = verify(path, expected_head=hashes[-1])
    assert report.ok and report.anchor_seq == 4 and report.entries == 6


def test_unparseable_body_and_moved_action_id_are_named(log5: tuple[Path, list[str]]) -> None:
    path, hashes = log5

    def attack(conn: sqlite3.Connection) -> None:
        body, prev = _body_of(conn, 4)
        broken = body.replace('"kind":"solver"', '"kind":"oracle"')
        conn.execute("UPDATE receipts SET body = ?, entry_hash = ? WHERE seq = 4", (broken, entry_hash(prev, broken)))
        conn.execute("UPDATE receipts SET action_id = 'hidden' WHERE seq = 0")

    _tamper(path, attack)
    problems = verify(path, expected_head=hashes[-1]).problems
    assert "seq 0 (rowid 1): action_id column 'hidden' disagrees with the body's 'a1'" in problems
    assert any(p.startswith("seq 4 (rowid 5): body is not a receipt: kind:") for p in problems)
    assert any(p.startswith("anchor ") for p in problems)  # the last entry was rewritten
    with ReceiptLog(path) as log, pytest.raises(ReceiptLogError, match="entry seq 4 is not a receipt"):
        log.entries()


def test_raw_byte_edit_of_the_file_is_caught(log5: tuple[Path, list[str]]) -> None:
    path, hashes = log5  # the log is closed: the WAL was checkpointed into the main file
    data = path.read_bytes()
    needle = b'"name":"ken.path"'
    assert data.count(needle) == 2
    path.write_bytes(data.replace(needle, b'"name":"ken.pith"', 1))
    report = verify(path, expected_head=hashes[-1])
    assert len(report.problems) == 1
    assert report.problems[0].endswith("entry hash mismatch: the body or its entry_hash was edited")


# --------------------------------------------------------------------------------- the property


def _op_edit(conn: sqlite3.Connection, k: int, n: int) -> None:
    body, _ = _body_of(conn, k)
    conn.execute("UPDATE receipts SET body = ? WHERE seq = ?", (_edited_body(body), k))


def _op_rehash(conn: sqlite3.Connection, k: int, n: int) -> None:
    body, prev = _body_of(conn, k)
    new = _edited_body(body)
    conn.execute("UPDATE receipts SET body = ?, entry_hash = ? WHERE seq = ?", (new, entry_hash(prev, new), k))


def _op_delete(conn: sqlite3.Connection, k: int, n: int) -> None:
    conn.execute("DELETE FROM receipts WHERE seq = ?", (k,))


def _op_swap(conn: sqlite3.Connection, k: int, n: int) -> None:
    j = (k + 1) % n
    cols = "action_id, body, prev_hash, entry_hash"
    a = conn.execute(f"SELECT {cols} FROM receipts WHERE seq = ?", (k,)).fetchone()
    b = conn.execute(f"SELECT {cols} FROM receipts WHERE seq = ?", (j,)).fetchone()
    update = "UPDATE receipts SET action_id = ?, body = ?, prev_hash = ?, entry_hash = ? WHERE seq = ?"
    conn.execute(update, (*b, k))
    conn.execute(update, (*a, j))


def _op_forge(conn: sqlite3.Connection, k: int, n: int) -> None:
    body = canonical_json(_receipt(k, "evil").model_dump(mode="json"))
    conn.execute(
        "INSERT INTO receipts (rowid, seq, action_id, body, prev_hash, entry_hash) VALUES (?, ?, 'evil', ?, ?, ?)",
        (-k, -1 - k, body, GENESIS_HASH, entry_hash(GENESIS_HASH, body)),
    )


def _op_reseq(conn: sqlite3.Connection, k: int, n: int) -> None:
    conn.execute("UPDATE receipts SET seq = ? WHERE seq = ?", (n + 10, k))


def _op_drop_trigger(conn: sqlite3.Connection, k: int, n: int) -> None:
    """Nothing to do here: the harness below leaves trigger number ``k % 3`` dropped."""


OPS: dict[str, Callable[[sqlite3.Connection, int, int], None]] = {
    "edit": _op_edit,
    "rehash": _op_rehash,
    "delete": _op_delete,
    "swap": _op_swap,
    "forge": _op_forge,
    "reseq": _op_reseq,
    "drop_trigger": _op_drop_trigger,
}


@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, 6), op=st.sampled_from(["none", *OPS]), data=st.data())
def test_any_single_tampering_is_detected_and_none_is_not(n: int, op: str, data: st.DataObject) -> None:
    if op == "swap" and n < 2:
        op = "none"
    k = data.draw(st.integers(0, n - 1), label="entry")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "r.db"
        hashes = _make_log(path, n)
        if op == "none":
            report = verify(path, expected_head=hashes[-1])
            assert report.ok and report.problems == [] and report.entries == n and report.head == hashes[-1]
            return
        conn = sqlite3.connect(path, isolation_level=None)
        try:
            triggers = conn.execute("SELECT name, sql FROM sqlite_master WHERE type = 'trigger' AND tbl_name = 'receipts'").fetchall()
            for name, _ in triggers:
                conn.execute(f"DROP TRIGGER {name}")
            OPS[op](conn, k, n)
            for index, (_, sql) in enumerate(triggers):  # put them back: only the chain may tell
                if op != "drop_trigger" or index != k % len(triggers):
                    conn.execute(sql)
        finally:
            conn.close()
        report = verify(path, expected_head=hashes[-1])
        assert not report.ok, (op, k, n)
        assert report.problems


# ------------------------------------------------------------------------------------ reflection


def _store(tmp_path: Path, secret: str | None = "test-secret") -> tuple[ReceiptLog, ReflectionStore]:
    log = ReceiptLog(tmp_path / "receipts.db")
    return log, ReflectionStore(tmp_path / "reflection.db", log, secret=secret)


def test_reflection_needs_a_valid_token_for_that_action(tmp_path: Path) -> None:
    log, store = _store(tmp_path)
    with log, store:
        trace = {"steps": [{"solver": "z3", "result": "sat"}], "note": "raw ✓"}
        store.put("a1", trace)
        store.put("a2", {"other": True})
        good = store.issue_approval("a1", "ana")
        other = store.issue_approval("a2", "ana")
        mac = good.rpartition(":")[2]
        attempts = {
            "none": None,
            "empty": "",
            "malformed": "let me in",
            "forged": f"{TOKEN_PREFIX}ana:{'0' * 64}",
            "other action": other,
            "other reviewer": f"{TOKEN_PREFIX}bob:{mac}",
            "no reviewer": f"{TOKEN_PREFIX}:{mac}",
        }
        for label, token in attempts.items():
            assert store.read("a1", token) is None, label
        assert store.read("a1", good) == trace
        assert store.read("nothing-stored", store.issue_approval("nothing-stored", "ana")) is None

        reads = [e.receipt for e in log.entries("a1") if e.receipt.name == "reflection.read"]
        assert [r.status for r in reads] == ["denied"] * 7 + ["ok"]
        assert [r.result["reason"] for r in reads] == [
            "no approval", "no approval", "malformed approval", "invalid approval",
            "invalid approval", "invalid approval", "malformed approval", None,
        ]
        assert reads[-1].result == {"granted": True, "reviewer": "ana", "reason": None, "found": True}
        assert all(r.kind == "action" for r in reads)
        assert [e.receipt.seq for e in log.entries("a1")] == list(range(log.count("a1")))
        missing = [e.receipt for e in log.entries("nothing-stored")][-1]
        assert missing.status == "ok" and missing.result["found"] is False
        everything = "".join(e.model_dump_json() for e in log.entries())
        assert mac not in everything  # tokens are credentials: never logged
    assert verify(tmp_path / "receipts.db").ok


def test_reflection_secret_from_env_and_persisted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(SECRET_ENV, "from-env")
    log = ReceiptLog(":memory:")
    with log, ReflectionStore(tmp_path / "x.db", log) as a, ReflectionStore(tmp_path / "y.db", log) as b:
        b.put("a1", {"k": 1})
        assert b.read("a1", a.issue_approval("a1", "ana")) == {"k": 1}
    monkeypatch.delenv(SECRET_ENV)
    with ReceiptLog(":memory:") as log:
        with ReflectionStore(tmp_path / "p.db", log) as first:
            first.put("a1", {"k": 2})
            token = first.issue_approval("a1", "ana")
        with ReflectionStore(tmp_path / "p.db", log) as reopened:  # the random secret was kept
            assert reopened.read("a1", token) == {"k": 2}
        with ReflectionStore(tmp_path / "q.db", log) as stranger:  # another store, another secret
            stranger.put("a1", {"k": 2})
            assert stranger.read("a1", token) is None
        with ReflectionStore(tmp_path / "p.db", log, secret="rotated") as rotated:
            assert rotated.read("a1", token) is None


def test_reflection_shares_the_log_file_and_rejects_bad_input(tmp_path: Path) -> None:
    path = tmp_path / "cda.db"
    with ReceiptLog(path) as log, ReflectionStore(path, log, secret="s") as store:
        store.put("a1", {"v": 1})
        store.put("a1", {"v": 2})  # a later put replaces the trace
        assert store.read("a1", store.issue_approval("a1", "ana")) == {"v": 2}
        with pytest.raises(ReflectionError, match="not JSON"):
            store.put("a1", {"v": object()})
        with pytest.raises(ReflectionError, match="reviewer"):
            store.issue_approval("a1", "")
        with pytest.raises(ReflectionError, match="must not be empty"):
            ReflectionStore(path, log, secret=b"")
    assert verify(path).ok


# ---------------------------------------------------------------------------------------- the CLI


def _cli(db: Path, head: str | None = None, as_json: bool = False) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main_receipts_verify(db, head, as_json, out, err)
    return code, out.getvalue(), err.getvalue()


def test_cli_intact_tampered_and_bad_input(tmp_path: Path) -> None:
    path = tmp_path / "r.db"
    hashes = _make_log(path, 3)
    unsigned = "note: no signed head: only the chain vouches for the log\n"
    assert _cli(path) == (0, f"{path}: intact: 3 entries, head {hashes[-1]}\n{unsigned}", "")
    code, out, _ = _cli(path, head=hashes[0].upper())
    assert code == 0 and out.endswith(f"anchor found at seq 0 (2 entries after it)\n{unsigned}")

    code, out, err = _cli(path, as_json=True)
    data = json.loads(out)
    assert code == 0 and err == ""
    assert data["file"] == str(path) and data["ok"] is True and data["entries"] == 3 and data["head"] == hashes[-1]

    _tamper(path, lambda conn: conn.execute("DELETE FROM receipts WHERE seq = 1"))
    code, out, err = _cli(path)
    assert code == 1 and err == ""
    lines = out.splitlines()
    assert lines[0] == f"{path}: TAMPERED: 2 problems in 2 entries"
    assert lines[1].startswith("  seq 2 (rowid 3): seq gap")
    assert lines[2].startswith("  seq 2 (rowid 3): chain broken")
    code, out, _ = _cli(path, as_json=True)
    assert code == 1 and json.loads(out)["ok"] is False and len(json.loads(out)["problems"]) == 2

    text = tmp_path / "notes.txt"
    text.write_text("hello " * 200)
    cases = {
        tmp_path / "missing.db": "no such file",
        tmp_path: "not a file",
        text: "not a readable receipt log",
    }
    for db, message in cases.items():
        code, out, err = _cli(db)
        assert code == 2 and out == "" and message in err and "Traceback" not in err, (db, err)
        assert err.startswith("cda: error: ")
    code, out, err = _cli(path, head="abc")
    assert code == 2 and "--head (a SHA-256 hash) must be 64 hex digits" in err
