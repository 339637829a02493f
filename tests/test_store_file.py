"""CDA's SQLite file: a file CDA did not create is never modified, and what is only read is read
without a trace.

Oracles: the bytes of the user's file and the listing of its folder, taken before and compared
after (a modification, an added table, a ``-wal``/``-shm`` left behind all show there); legacy
logs are built from the CREATE statements CDA used before the mark existed, spelled out here,
not taken from the code under test.
"""

from __future__ import annotations

import hashlib
import io
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from cda.actions.receipts import GENESIS_HASH, ReceiptLog, verify
from cda.actions.reflection import ReflectionStore
from cda.actions.store_file import APPLICATION_ID, LOG_FORMAT
from cda.adapters.event_store import EventStore, read_events
from cda.cli.main import main
from cda.contracts.receipt import Receipt
from cda.service.serve import main_serve
from cda.store import StoreFileError, open_store, read_snapshot
from tests.conftest import ROOT

EXAMPLE = ROOT / "examples" / "action" / "service_outage.json"

# What CDA wrote before files were marked (the statements of the receipt log, event store and
# reflection store as they were), to build a legacy log that must still be accepted.
LEGACY_SCHEMA = (
    "CREATE TABLE receipts (rowid INTEGER PRIMARY KEY, seq INTEGER NOT NULL UNIQUE, action_id TEXT NOT NULL, "
    "body TEXT NOT NULL, prev_hash TEXT NOT NULL, entry_hash TEXT NOT NULL)",
    "CREATE INDEX receipts_by_action ON receipts (action_id, rowid)",
    "CREATE TRIGGER receipts_no_update BEFORE UPDATE ON receipts "
    "BEGIN SELECT RAISE(ABORT, 'receipts are append-only: UPDATE refused'); END",
    "CREATE TRIGGER receipts_no_delete BEFORE DELETE ON receipts "
    "BEGIN SELECT RAISE(ABORT, 'receipts are append-only: DELETE refused'); END",
    "CREATE TRIGGER receipts_extend_only BEFORE INSERT ON receipts "
    "WHEN NEW.seq IS NOT COALESCE((SELECT MAX(seq) FROM receipts), -1) + 1 "
    "OR NEW.prev_hash IS NOT COALESCE((SELECT entry_hash FROM receipts ORDER BY rowid DESC LIMIT 1), "
    f"'{GENESIS_HASH}') "
    "OR (NEW.rowid <> -1 AND NEW.rowid <= COALESCE((SELECT MAX(rowid) FROM receipts), 0)) "
    "BEGIN SELECT RAISE(ABORT, 'receipts are append-only: an entry must extend the chain'); END",
    "CREATE TABLE IF NOT EXISTS events (action_id TEXT NOT NULL, seq INTEGER NOT NULL, "
    "stored_at REAL NOT NULL, body TEXT NOT NULL, PRIMARY KEY (action_id, seq))",
    "CREATE TABLE IF NOT EXISTS reflection_traces (action_id TEXT PRIMARY KEY, body TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS reflection_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
)


def _receipt(i: int) -> Receipt:
    return Receipt(action_id="a1", seq=i, kind="solver", name="z3.check", inputs_hash=f"{i:064x}")


def _state(folder: Path) -> dict[str, str]:
    """Every file in ``folder`` with the SHA-256 of its bytes: what 'unchanged' means here."""
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir()) if p.is_file()}


def _sqlite(path: Path, *statements: str, wal: bool = False) -> None:
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        if wal:
            conn.execute("PRAGMA journal_mode=WAL")
        for statement in statements:
            conn.execute(statement)
    finally:
        conn.close()


FOREIGN: dict[str, Callable[[Path], None]] = {
    "another program's table": lambda p: _sqlite(p, "CREATE TABLE orders (id INTEGER PRIMARY KEY, total TEXT)",
                                                  "INSERT INTO orders VALUES (1, '9.99')"),
    "another program's table, in WAL mode": lambda p: _sqlite(
        p, "CREATE TABLE orders (id INTEGER PRIMARY KEY, total TEXT)", "INSERT INTO orders VALUES (1, '9.99')",
        wal=True),
    "a CDA table beside a foreign one": lambda p: _sqlite(p, LEGACY_SCHEMA[5], "CREATE TABLE notes (t TEXT)"),
    "a CDA table name with other columns": lambda p: _sqlite(p, "CREATE TABLE events (id INTEGER, what TEXT)"),
    "a view": lambda p: _sqlite(p, LEGACY_SCHEMA[5], "CREATE VIEW v AS SELECT 1"),
    "another program's application_id": lambda p: _sqlite(p, "PRAGMA application_id = 1196444487",
                                                          "CREATE TABLE gpkg_contents (table_name TEXT)"),
    "an empty database someone else made": lambda p: _sqlite(p, "PRAGMA user_version = 7"),
}


@pytest.mark.parametrize("kind", sorted(FOREIGN))
def test_a_foreign_database_is_refused_and_left_exactly_as_it_was(tmp_path: Path, kind: str) -> None:
    path = tmp_path / "other.sqlite"
    FOREIGN[kind](path)
    before = _state(tmp_path)
    assert list(before) == ["other.sqlite"]
    log = ReceiptLog(":memory:")
    for open_it in (ReceiptLog, EventStore, lambda p: ReflectionStore(p, log, secret="s"), verify, lambda p: open_store(p, LOG_FORMAT),
                    lambda p: read_events(p, "a1")):
        with pytest.raises(StoreFileError, match="not a CDA file, and CDA never modifies files it did not create"):
            open_it(path)
        assert _state(tmp_path) == before, (kind, open_it)


def test_cda_serve_refuses_a_foreign_database_and_leaves_it_unchanged(tmp_path: Path) -> None:
    path = tmp_path / "other.sqlite"
    FOREIGN["another program's table, in WAL mode"](path)
    before = _state(tmp_path)
    err = io.StringIO()
    assert main_serve(path, "127.0.0.1", 0, io.StringIO(), err) == 2
    assert "not a CDA file" in err.getvalue() and "Traceback" not in err.getvalue()
    assert _state(tmp_path) == before


def test_cda_run_over_a_foreign_receipts_sqlite_is_refused_and_leaves_it_unchanged(tmp_path: Path) -> None:
    out_dir = tmp_path / "runs"
    out_dir.mkdir()
    FOREIGN["another program's table"](out_dir / "receipts.sqlite")
    before = _state(out_dir)
    out, err = io.StringIO(), io.StringIO()
    assert main(["run", str(EXAMPLE), "--out", str(out_dir)], out, err) == 2
    assert "receipts.sqlite: not a CDA file" in err.getvalue() and "Traceback" not in err.getvalue()
    assert _state(out_dir) == before and [p.name for p in out_dir.iterdir()] == ["receipts.sqlite"]


def test_files_cda_creates_are_marked_and_reopened(tmp_path: Path) -> None:
    path = tmp_path / "receipts.sqlite"
    with ReceiptLog(path) as log:
        log.append(_receipt(0))
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID == 0x43444131
        assert conn.execute("PRAGMA user_version").fetchone()[0] == LOG_FORMAT.version
    finally:
        conn.close()
    assert (path.read_bytes()[68:72]) == b"CDA1"  # the header field, as the SQLite file format places it
    EventStore(path).close()
    with ReceiptLog(path) as log, ReflectionStore(path, log, secret="s") as store:
        store.put("a1", {"k": 1})
        assert log.count() == 2  # the trace's reflection.put, then the approval
    assert verify(path).ok
    empty = tmp_path / "touched.sqlite"
    empty.touch()  # a 0-byte file holds nothing to lose: it is taken as new
    with ReceiptLog(empty) as log:
        log.append(_receipt(0))
    assert verify(empty).ok


def test_a_file_from_a_newer_cda_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "receipts.sqlite"
    _sqlite(path, f"PRAGMA application_id = {APPLICATION_ID}", f"PRAGMA user_version = {LOG_FORMAT.version + 1}",
            LEGACY_SCHEMA[5])
    before = _state(tmp_path)
    with pytest.raises(StoreFileError, match="written by a newer CDA"):
        EventStore(path)
    assert _state(tmp_path) == before


def test_an_unmarked_log_written_before_the_mark_is_still_accepted(tmp_path: Path) -> None:
    path = tmp_path / "receipts.sqlite"
    _sqlite(path, *LEGACY_SCHEMA, wal=True)
    with ReceiptLog(path) as log:
        heads = log.append_many([_receipt(i) for i in range(3)])
    events = EventStore(path)
    events.close()
    with ReceiptLog(path) as log, ReflectionStore(path, log, secret="s") as store:
        store.put("a1", {"k": 1})
        assert store.read("a1", store.issue_approval("a1", "ana")) == {"k": 1}  # three receipts more
    report = verify(path, expected_head=heads[-1])
    assert report.ok and report.entries == 6 and report.anchor_seq == 2
    only_events = tmp_path / "events.sqlite"  # a file that only ever held events
    _sqlite(only_events, LEGACY_SCHEMA[5], wal=True)
    assert read_events(only_events, "a1") == []
    EventStore(only_events).close()


def test_receipts_verify_leaves_the_folder_exactly_as_it_was(tmp_path: Path) -> None:
    path = tmp_path / "receipts.sqlite"
    with ReceiptLog(path) as log:
        log.append_many([_receipt(i) for i in range(5)])
    EventStore(path).close()
    before = _state(tmp_path)
    assert list(before) == ["receipts.sqlite"]  # WAL mode, but the last writer cleaned up
    assert main(["receipts", "verify", str(path)], io.StringIO(), io.StringIO()) == 0
    assert _state(tmp_path) == before
    assert verify(path).ok
    assert _state(tmp_path) == before
    assert read_events(path, "a1") == []
    assert _state(tmp_path) == before


def test_verify_beside_a_live_writer_sees_its_committed_entries(tmp_path: Path) -> None:
    """While a writer holds the file (its entries possibly only in the -wal), the read-only
    reader must see every committed entry; once the writer closes, nothing is left behind."""
    path = tmp_path / "receipts.sqlite"
    with ReceiptLog(path) as log:
        log.append_many([_receipt(i) for i in range(3)])
        assert (tmp_path / "receipts.sqlite-wal").exists()
        report = verify(path)
        assert report.ok and report.entries == 3 and report.head == log.head()
    assert [p.name for p in tmp_path.iterdir()] == ["receipts.sqlite"]


def test_snapshot_reads_stay_consistent_while_writers_come_and_go(tmp_path: Path) -> None:
    """Writers that open, append and close (each leaving no -wal behind) race a reader that
    verifies again and again: every read must be a consistent chain that never shrinks."""
    path = tmp_path / "receipts.sqlite"
    ReceiptLog(path).close()
    stop = threading.Event()
    failures: list[BaseException] = []

    def writer() -> None:
        try:
            for i in range(60):
                with ReceiptLog(path) as log:
                    log.append(_receipt(i))
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            failures.append(exc)
        finally:
            stop.set()

    thread = threading.Thread(target=writer)
    thread.start()
    seen = [0]
    while not stop.is_set():
        report = verify(path)
        assert report.ok, report.problems
        assert report.entries >= seen[-1]
        seen.append(report.entries)
    thread.join()
    assert not failures
    assert verify(path).entries == 60 and len(seen) > 2


def test_read_snapshot_is_read_only(tmp_path: Path) -> None:
    path = tmp_path / "receipts.sqlite"
    ReceiptLog(path).close()
    with pytest.raises(sqlite3.OperationalError, match="readonly"):
        read_snapshot(path, lambda conn: conn.execute("CREATE TABLE x (y)"))
    assert list(_state(tmp_path)) == ["receipts.sqlite"]


@pytest.mark.parametrize("writer_stays_open", [False, True])
def test_a_writer_that_starts_during_an_immutable_read_makes_it_read_again(
    tmp_path: Path, writer_stays_open: bool
) -> None:
    """The immutable read sees only the main file; a writer that starts meanwhile either still
    holds its -wal (stays open) or has changed the main file when it closed (checkpoint): either
    way the first read must be thrown away and the file read again, now with the new entry."""
    path = tmp_path / "receipts.sqlite"
    with ReceiptLog(path) as log:
        log.append(_receipt(0))
    writers: list[ReceiptLog] = []
    calls: list[int] = []

    def count_then_race(conn: sqlite3.Connection) -> int:
        seen = int(conn.execute("SELECT COUNT(*) FROM receipts").fetchone()[0])
        calls.append(seen)
        if len(calls) == 1:  # a writer appends while this first read is still open
            writer = ReceiptLog(path)
            writer.append(_receipt(1))
            if writer_stays_open:
                writers.append(writer)
            else:
                writer.close()
        return seen

    try:
        assert read_snapshot(path, count_then_race) == 2
        assert calls == [1, 2]
    finally:
        for writer in writers:
            writer.close()
    assert [p.name for p in tmp_path.iterdir()] == ["receipts.sqlite"]


def test_reading_events_from_a_file_that_is_not_sqlite_is_a_clear_error(tmp_path: Path) -> None:
    text = tmp_path / "receipts.sqlite"
    text.write_text("not a database, just text long enough to look like a header " * 20)
    with pytest.raises(StoreFileError, match="not an SQLite database"):
        read_events(text, "a1")
    assert read_events(tmp_path / "missing.sqlite", "a1") == []


def _crashed_copy(make: Callable[[sqlite3.Connection], None], folder: Path, source: Path) -> Path:
    """A database and its ``-wal`` as a crash (or a copy) leaves them: no ``-shm``, no writer."""
    conn = sqlite3.connect(source, isolation_level=None)
    try:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA wal_autocheckpoint=0")  # keep the writes in the -wal
        make(conn)
        folder.mkdir()
        target = folder / "left.sqlite"
        target.write_bytes(source.read_bytes())
        Path(f"{target}-wal").write_bytes(Path(f"{source}-wal").read_bytes())
    finally:
        conn.close()
    return target


def test_a_wal_without_its_shm_is_read_without_leaving_a_file(tmp_path: Path) -> None:
    """A read-only SQLite connection to a WAL database makes a ``-shm`` beside it when none is
    there; CDA reads such a file through a copy, so nothing appears beside the user's file."""
    foreign = _crashed_copy(lambda c: (c.execute("CREATE TABLE orders (id INTEGER)"),
                                       c.execute("INSERT INTO orders VALUES (1)")), tmp_path / "f", tmp_path / "f.db")
    before = _state(foreign.parent)
    for read in (verify, lambda p: read_events(p, "a1")):
        with pytest.raises(StoreFileError, match="not a CDA file"):
            read(foreign)
        assert _state(foreign.parent) == before
    source = tmp_path / "log.sqlite"
    with ReceiptLog(source) as log:
        log.append(_receipt(0))
        log.append(_receipt(1))
        ours = _crashed_copy(lambda c: None, tmp_path / "c", source)
    before = _state(ours.parent)
    report = verify(ours)
    assert report.ok and report.entries == 2, report
    assert _state(ours.parent) == before
