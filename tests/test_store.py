"""cda.store: one conformance suite run against every product's file format.

Each of the six formats CDA keeps (the receipt log, the service's state, investigations, the
guardian, the conductor's IR database, the jobs' results) must behave alike at the edges: a new
file is marked and at the newest version in one step; reopening it changes no byte; a reader
never creates or changes a file; a file that is not the product's own — another program's,
another CDA product's, a newer CDA's, a text file, a folder — is refused by name and left byte
for byte as it was, with no ``-wal``/``-shm`` beside it.

Oracles: the bytes of every file in the folder (SHA-256), taken before and compared after; the
``PRAGMA``s read back with a plain ``sqlite3`` connection.
"""

from __future__ import annotations

import hashlib
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from cda.actions.store_file import LOG_FORMAT
from cda.adapters.jobs.results_store import JOBS_FORMAT
from cda.conductor.irdb import IR_FORMAT
from cda.guardian.guardian_db import GUARDIAN_FORMAT
from cda.investigation.session_store import INVESTIGATIONS_FORMAT
from cda.service.state import _format as service_format
from cda.store import MARKS, Durability, FileFormat, StoreFileError, family, open_store, read_store, share_lock

FORMATS: dict[str, FileFormat] = {
    "log": LOG_FORMAT,
    "service": service_format(Path("/nonexistent/db.sqlite"), []),
    "investigations": INVESTIGATIONS_FORMAT,
    "guardian": GUARDIAN_FORMAT,
    "conductor": IR_FORMAT,
    "jobs": JOBS_FORMAT,
}


def _state(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir()) if p.is_file()}


def _pragmas(path: Path) -> tuple[int, int, str]:
    conn = sqlite3.connect(path)
    try:
        return (int(conn.execute("PRAGMA application_id").fetchone()[0]),
                int(conn.execute("PRAGMA user_version").fetchone()[0]),
                str(conn.execute("PRAGMA journal_mode").fetchone()[0]))
    finally:
        conn.close()


def test_every_product_has_a_mark_of_its_own() -> None:
    marks = [fmt.app_id for fmt in FORMATS.values()]
    assert len(set(marks)) == len(marks) == 6
    assert all(mark in MARKS for mark in marks)
    assert all(fmt.version >= 1 for fmt in FORMATS.values())


@pytest.mark.parametrize("name", sorted(FORMATS))
def test_a_new_file_is_marked_at_the_newest_version_and_reopening_changes_nothing(tmp_path: Path, name: str) -> None:
    fmt, path = FORMATS[name], tmp_path / "f.sqlite"
    store = open_store(path, fmt)
    assert store.found_version == 0 and store.durability is Durability.FULL
    store.close()
    assert _pragmas(path) == (fmt.app_id, fmt.version, "wal")
    before = _state(tmp_path)
    again = open_store(path, fmt, durability=Durability.NORMAL)
    assert again.found_version == fmt.version
    assert again.conn.execute("PRAGMA synchronous").fetchone()[0] == 1  # NORMAL
    again.close()
    assert _state(tmp_path) == before
    assert read_store(path, fmt, lambda conn: conn.execute("PRAGMA user_version").fetchone()[0]) == fmt.version
    assert _state(tmp_path) == before and sorted(p.name for p in tmp_path.iterdir()) == ["f.sqlite"]


def _sqlite(*statements: str) -> Callable[[Path], None]:
    """A database another program made with ``statements``."""

    def make(path: Path) -> None:
        conn = sqlite3.connect(path)
        for statement in statements:
            conn.execute(statement)
        conn.commit()
        conn.close()

    return make


REFUSED = {
    "another program's tables": (_sqlite("PRAGMA journal_mode=WAL", "CREATE TABLE orders (id INTEGER PRIMARY KEY, total TEXT)",
                                         "INSERT INTO orders VALUES (1, '9.99')"),
                                 "not a CDA file, and CDA never modifies files it did not create"),
    "another program's mark": (_sqlite("PRAGMA application_id = 1196444487", "CREATE TABLE gpkg_contents (t TEXT)"),
                               "application_id is 0x47504b47"),
    "an empty database someone else made": (_sqlite("PRAGMA user_version = 7"), "no CDA mark and no table"),
    "a text file": (lambda p: p.write_text("id,total\n1,9.99\n" * 40), "not an SQLite database"),
    "a folder": (lambda p: p.mkdir(), "not a file"),
}


@pytest.mark.parametrize("name", sorted(FORMATS))
@pytest.mark.parametrize("kind", sorted(REFUSED))
def test_a_file_that_is_not_the_products_is_refused_by_name_and_left_as_it_was(tmp_path: Path, name: str,
                                                                                kind: str) -> None:
    fmt, path = FORMATS[name], tmp_path / "other.sqlite"
    make, words = REFUSED[kind]
    make(path)
    before, listing = _state(tmp_path), sorted(p.name for p in tmp_path.iterdir())
    for attempt in (lambda: open_store(path, fmt), lambda: read_store(path, fmt, lambda conn: None)):
        with pytest.raises(StoreFileError, match=words) as caught:
            attempt()
        assert str(path) in str(caught.value)
        assert _state(tmp_path) == before and sorted(p.name for p in tmp_path.iterdir()) == listing


@pytest.mark.parametrize("name", sorted(FORMATS))
def test_another_products_file_is_refused_naming_what_it_is(tmp_path: Path, name: str) -> None:
    fmt = FORMATS[name]
    for other_name, other in FORMATS.items():
        if other_name == name:
            continue
        path = tmp_path / f"{other_name}.sqlite"
        open_store(path, other).close()
        before = _state(tmp_path)
        with pytest.raises(StoreFileError, match=f"{MARKS[other.app_id]}, not {fmt.name}"):
            open_store(path, fmt)
        assert _state(tmp_path) == before


@pytest.mark.parametrize("name", sorted(FORMATS))
def test_a_file_from_a_newer_cda_is_refused_untouched(tmp_path: Path, name: str) -> None:
    fmt, path = FORMATS[name], tmp_path / "f.sqlite"
    open_store(path, fmt).close()
    conn = sqlite3.connect(path)
    conn.execute(f"PRAGMA user_version = {fmt.version + 1}")
    conn.commit()
    conn.close()
    before = _state(tmp_path)
    with pytest.raises(StoreFileError, match="written by a newer CDA"):
        open_store(path, fmt)
    with pytest.raises(StoreFileError, match="written by a newer CDA"):
        read_store(path, fmt, lambda conn: None)
    assert _state(tmp_path) == before


@pytest.mark.parametrize("name", sorted(FORMATS))
def test_a_reader_or_a_writer_that_may_not_create_never_makes_a_file(tmp_path: Path, name: str) -> None:
    fmt, path = FORMATS[name], tmp_path / "typo.sqlite"
    with pytest.raises(StoreFileError, match="no such file"):
        read_store(path, fmt, lambda conn: None)
    with pytest.raises(StoreFileError, match="no such file"):
        open_store(path, fmt, create=False)
    assert list(tmp_path.iterdir()) == []
    path.touch()  # 0 bytes: nothing to read, and a reader does not make it a database
    with pytest.raises(StoreFileError, match="an empty file"):
        read_store(path, fmt, lambda conn: None)
    assert path.stat().st_size == 0


@pytest.mark.parametrize("name", sorted(FORMATS))
def test_an_older_version_is_migrated_step_by_step(tmp_path: Path, name: str) -> None:
    """Each migration, applied to a file of the version before it, gives a file whose schema is
    that of a file made new (the one list takes every version forward)."""
    from dataclasses import replace

    fmt = FORMATS[name]
    fresh = tmp_path / "fresh.sqlite"
    open_store(fresh, fmt).close()

    def schema(path: Path) -> list[tuple[str, str]]:
        conn = sqlite3.connect(path)
        try:
            return sorted((str(n), " ".join(str(s).split())) for n, s in conn.execute(
                "SELECT name, sql FROM sqlite_master WHERE sql IS NOT NULL"))
        finally:
            conn.close()

    for start in range(1, fmt.version):
        old = tmp_path / f"v{start}.sqlite"
        open_store(old, replace(fmt, migrations=fmt.migrations[:start])).close()
        assert _pragmas(old)[1] == start
        store = open_store(old, fmt)
        assert store.found_version == start
        store.close()
        assert _pragmas(old)[1] == fmt.version
        assert [n for n, _ in schema(old)] == [n for n, _ in schema(fresh)], (name, start)


@pytest.mark.parametrize("name", sorted(FORMATS))
def test_connections_racing_to_create_one_file_agree_on_it(tmp_path: Path, name: str) -> None:
    fmt, path, errors = FORMATS[name], tmp_path / "fresh.sqlite", []
    barrier = threading.Barrier(6)

    def opener() -> None:
        barrier.wait()
        try:
            open_store(path, fmt).close()
        except Exception as exc:  # noqa: BLE001 - collected and asserted on below
            errors.append(exc)

    threads = [threading.Thread(target=opener) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert errors == []
    assert _pragmas(path) == (fmt.app_id, fmt.version, "wal")


def test_stores_of_one_file_can_share_one_lock(tmp_path: Path) -> None:
    a, b = open_store(tmp_path / "f.sqlite", LOG_FORMAT), open_store(tmp_path / "f.sqlite", LOG_FORMAT)
    lock = share_lock(a, b)
    assert a.lock is b.lock is lock
    with a.transaction():
        with b.lock:  # re-entrant: a store that calls another under the shared lock does not deadlock
            pass
    a.close()
    b.close()


def test_the_family_of_a_store_is_what_cda_keeps_beside_it(tmp_path: Path) -> None:
    db = tmp_path / "receipts.sqlite"
    for name in ("receipts.sqlite", "receipts.sqlite-wal", "receipts.sqlite.service.sqlite",
                 "receipts.sqlite.head.json", "receipts.sqlite2", "notes.txt"):
        (tmp_path / name).write_text("x")
    assert [p.name for p in family(db)] == ["receipts.sqlite", "receipts.sqlite-wal", "receipts.sqlite.head.json",
                                            "receipts.sqlite.service.sqlite"]


def test_reading_a_file_this_process_writes_keeps_the_writers_locks(tmp_path: Path) -> None:
    """Every read here goes through SQLite: a file descriptor of our own on the database, once
    closed, would drop every POSIX lock this process holds on it, and another process closing its
    connection would then take itself for the last one and delete the live write-ahead log under
    the writer (whose commits nobody would see until it closed)."""
    import subprocess
    import sys

    path = tmp_path / "f.sqlite"
    writer = open_store(path, INVESTIGATIONS_FORMAT)
    for step in range(3):
        with writer.transaction() as conn:
            conn.execute("INSERT INTO owners VALUES (?, 'ann')", (f"s{step}",))
        read_store(path, INVESTIGATIONS_FORMAT, lambda conn: None)
        open_store(path, INVESTIGATIONS_FORMAT).close()
        subprocess.run([sys.executable, "-c", "import sqlite3, sys; c = sqlite3.connect(sys.argv[1]); "
                        "c.execute('SELECT 1 FROM owners').fetchall(); c.close()", str(path)], check=True, timeout=60)
        assert Path(f"{path}-wal").exists()
        seen = subprocess.run([sys.executable, "-c", "import sqlite3, sys; c = sqlite3.connect(sys.argv[1]); "
                               "print(c.execute('SELECT COUNT(*) FROM owners').fetchone()[0])", str(path)],
                              check=True, timeout=60, capture_output=True, text=True).stdout
        assert int(seen) == step + 1
    writer.close()
