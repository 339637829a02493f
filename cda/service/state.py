"""What the service must remember across a restart: owners, sub-action outputs and bindings.

The event store and the receipt log (the server's CDA file) keep what happened; this keeps what
the server needs to go on afterwards, in ``<store>.service.sqlite`` beside it (SQLite, WAL), as
``<store>.investigations.sqlite`` keeps investigation sessions. The CDA file itself is audited
object by object by ``cda receipts verify``, so the service adds no table to it.

- **owners**: who started an action or a sub-action (the principal's *name* from ``--auth``,
  never a token), so an action recovered after a restart is still its starter's;
- **sources** and **revisions** of sub-actions: the provider and source of each sub-action, and
  the text and hash of each revision (``actions.refresh`` and ``update_available`` after a
  restart; the revision's own stream may have been swept meanwhile);
- **consumers**: an action that bound sub-action outputs — its inputs, its structure revision
  and plan bundle, the revisions it locked — so ``actions.accept_update`` works after a restart;
- **offers**: the newer revisions offered to a consumer (``updates_available``).

*Marked and migrated* by :mod:`cda.store` (``PRAGMA application_id`` = :data:`APPLICATION_ID`,
"CDAS"; ``PRAGMA user_version`` the schema's version): before the file is opened for writing it
is recognised without a trace: the mark, or, unmarked, exactly this module's tables (a file
written before the mark existed, then marked); anything else (another program's file, a foreign
table, a newer version, a folder) is a :class:`~cda.store.StoreFileError` and the file is left
as it was. Opening a file of an older version (or none: a store written before this file
existed) brings it forward in one transaction. Version 1 also recovers the owners of actions started before it: their
``service.start`` receipts hash ``{"principal", "profile"}`` into ``inputs_hash``, which is
matched against the principals the server knows (``--auth``, or the open server's anonymous
partner); an action no known principal matches stays without an owner (internal only).
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cda.actions.bindings import BoundOutput
from cda.adapters.auth import Principal
from cda.contracts.action import CDAInputs
from cda.contracts.receipt import canonical_json, sha256_hex
from cda.contracts.refs import ArtifactRef
from cda.store import (
    SERVICE_STATE_MARK,
    Durability,
    FileFormat,
    StoreFileError,
    companion,
    open_store,
    read_snapshot,
    read_store,
)

__all__ = ["APPLICATION_ID", "SCHEMA_VERSION", "Consumer", "ServiceState", "check_state", "state_path"]

SCHEMA_VERSION = 1

APPLICATION_ID = SERVICE_STATE_MARK
"""``PRAGMA application_id`` of the service's state file: the bytes of "CDAS"."""

_V1 = (
    "CREATE TABLE owners (key TEXT PRIMARY KEY, principal TEXT NOT NULL, profile TEXT NOT NULL)",
    "CREATE TABLE sources (base TEXT PRIMARY KEY, ability TEXT NOT NULL, source TEXT NOT NULL)",
    "CREATE TABLE revisions (revision_id TEXT PRIMARY KEY, base TEXT NOT NULL, ability TEXT NOT NULL, "
    "revision INTEGER NOT NULL, sha256 TEXT NOT NULL, text TEXT NOT NULL)",
    "CREATE TABLE consumers (action_id TEXT PRIMARY KEY, inputs TEXT NOT NULL, revision INTEGER NOT NULL, "
    "plan_bundle_id TEXT, bound TEXT NOT NULL)",
    "CREATE TABLE binds (base TEXT NOT NULL, consumer TEXT NOT NULL, PRIMARY KEY (base, consumer))",
    "CREATE TABLE offers (consumer TEXT NOT NULL, revision_id TEXT NOT NULL, PRIMARY KEY (consumer, revision_id))",
)


def state_path(db: Path) -> Path:
    """The service's state file beside the server's CDA file ``db``."""
    return companion(db, "service")


def _tables() -> dict[str, str]:
    return {statement.split()[2]: statement for statement in _V1}


def _legacy(conn: sqlite3.Connection, app_id: int, version: int, where: str) -> int | None:
    """Unmarked: an empty database (SQLite's own first page, or a crash mid-creation), or the
    first version's tables exactly (written before the mark existed)."""
    if app_id != 0:
        return None
    objects = {str(name): sql for name, sql in conn.execute(
        "SELECT name, sql FROM sqlite_master WHERE name NOT GLOB 'sqlite_*'").fetchall()}
    if not objects and version == 0:
        return 0
    return 1 if objects == _tables() and version == 1 else None


def _format(db: Path, principals: list[Principal]) -> FileFormat:
    """The state file's format; its first migration also recovers the owners of the actions a
    server before it started (from ``db``'s receipts, for ``principals``)."""

    def first(conn: sqlite3.Connection) -> None:
        for statement in _V1:
            conn.execute(statement)
        for action_id, owner in _owners_from_receipts(db, principals).items():
            conn.execute("INSERT OR IGNORE INTO owners VALUES (?, ?, ?)", (action_id, owner.name, owner.profile))

    return FileFormat("the CDA service's state file", APPLICATION_ID, (first,), legacy=_legacy)


def check_state(db: Path) -> None:
    """Raise :class:`StoreFileError` unless the state file beside ``db`` is missing, empty or
    the service's own of a version this CDA reads; reads it without a trace, creates nothing."""
    path = state_path(db)
    if not path.exists() and not path.is_symlink():
        return
    if path.is_file() and path.stat().st_size == 0:
        return
    read_store(path, _format(db, []), lambda conn: None)


@dataclass(frozen=True)
class Consumer:
    """An action that bound sub-action outputs, as ``accept_update`` needs it."""

    action_id: str
    inputs: CDAInputs
    revision: int
    plan_bundle_id: str | None
    bound: list[BoundOutput]


class ServiceState:
    """The state file; every method is one short transaction under a lock (any thread)."""

    def __init__(self, db: Path, principals: Iterable[Principal] = (),
                 durability: Durability = Durability.NORMAL) -> None:
        self.path = state_path(db)
        self._lock = threading.Lock()
        self._store = open_store(self.path, _format(db, list(principals)), durability=durability)
        self._conn = self._store.conn

    def _rows(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        with self._lock:
            return self._conn.execute(sql, params).fetchall()

    def _write(self, sql: str, params: tuple[Any, ...]) -> None:
        with self._lock:
            self._conn.execute(sql, params)

    # -- owners -------------------------------------------------------------------------------
    def own(self, key: str, who: Principal) -> None:
        """Record ``who`` as the starter of ``key`` (an action id or a sub-action base); the first one stays."""
        self._write("INSERT OR IGNORE INTO owners VALUES (?, ?, ?)", (key, who.name, who.profile))

    def owner(self, key: str) -> str | None:
        rows = self._rows("SELECT principal FROM owners WHERE key = ?", (key,))
        return str(rows[0][0]) if rows else None

    # -- sub-actions ----------------------------------------------------------------------------
    def put_source(self, base: str, ability: str, source: str) -> None:
        self._write("INSERT OR IGNORE INTO sources VALUES (?, ?, ?)", (base, ability, source))

    def source(self, base: str) -> tuple[str, str] | None:
        rows = self._rows("SELECT ability, source FROM sources WHERE base = ?", (base,))
        return (str(rows[0][0]), str(rows[0][1])) if rows else None

    def put_revision(self, out: BoundOutput) -> None:
        text = out.artifact.text or ""
        self._write("INSERT OR IGNORE INTO revisions VALUES (?, ?, ?, ?, ?, ?)",
                    (f"{out.action_id}.r{out.revision}", out.action_id, out.ability, out.revision, sha256_hex(text),
                     text))

    def revision(self, revision_id: str) -> BoundOutput | None:
        """A sub-action revision (``<base>.r<n>``) this server produced, with its text."""
        rows = self._rows("SELECT base, ability, revision, sha256, text FROM revisions WHERE revision_id = ?",
                          (revision_id,))
        if not rows:
            return None
        base, ability, revision, digest, text = rows[0]
        if sha256_hex(str(text)) != digest:
            raise StoreFileError(f"{self.path}: the text of {revision_id} is not the one its hash names (edited)")
        return BoundOutput(str(base), ability, int(revision), ArtifactRef(artifact_id=f"{base}:output", text=str(text)))

    # -- consumers and offers -------------------------------------------------------------------
    def put_consumer(self, action_id: str, inputs: CDAInputs, revision: int, plan_bundle_id: str | None,
                     bound: list[BoundOutput]) -> None:
        """Remember a finished action that bound ``bound`` (each already a stored revision)."""
        ids = [f"{b.action_id}.r{b.revision}" for b in bound]
        with self._lock, self._store.transaction() as conn:
            conn.execute("INSERT OR REPLACE INTO consumers VALUES (?, ?, ?, ?, ?)", (
                action_id, canonical_json(inputs.model_dump(mode="json")), revision, plan_bundle_id, json.dumps(ids)))
            for b in bound:
                conn.execute("INSERT OR IGNORE INTO binds VALUES (?, ?)", (b.action_id, action_id))

    def consumer(self, action_id: str) -> Consumer | None:
        rows = self._rows("SELECT inputs, revision, plan_bundle_id, bound FROM consumers WHERE action_id = ?",
                          (action_id,))
        if not rows:
            return None
        inputs, revision, plan, ids = rows[0]
        bound = []
        for revision_id in json.loads(ids):
            out = self.revision(revision_id)
            if out is None:
                raise StoreFileError(f"{self.path}: {action_id} bound {revision_id}, which is not recorded")
            bound.append(out)
        return Consumer(action_id, CDAInputs.model_validate_json(inputs), int(revision),
                        None if plan is None else str(plan), bound)

    def consumers_of(self, base: str) -> list[str]:
        return sorted(str(c) for (c,) in self._rows("SELECT consumer FROM binds WHERE base = ?", (base,)))

    def offer(self, consumer: str, revision_id: str) -> None:
        self._write("INSERT OR IGNORE INTO offers VALUES (?, ?)", (consumer, revision_id))

    def withdraw(self, consumer: str, base: str, up_to: int) -> None:
        """``consumer`` accepted revision ``up_to`` of ``base``: it and every older revision of
        that base offered to it are no longer available to it."""
        with self._lock:
            for (revision_id,) in self._conn.execute("SELECT revision_id FROM offers WHERE consumer = ?",
                                                     (consumer,)).fetchall():
                head, _, number = str(revision_id).rpartition(".r")
                if head == base and number.isdigit() and int(number) <= up_to:
                    self._conn.execute("DELETE FROM offers WHERE consumer = ? AND revision_id = ?",
                                       (consumer, revision_id))

    def offers(self, consumer: str) -> list[str]:
        return [str(r) for (r,) in self._rows("SELECT revision_id FROM offers WHERE consumer = ? ORDER BY rowid",
                                              (consumer,))]

    def close(self) -> None:
        with self._lock:
            self._store.close()


def _owners_from_receipts(db: Path, principals: list[Principal]) -> dict[str, Principal]:
    """The starters of actions a server before state version 1 started, from their receipts.

    Its ``service.start`` receipt's ``inputs_hash`` is the SHA-256 of the canonical JSON of
    ``{"principal": name, "profile": profile}``: a principal the server knows is matched exactly."""
    if not principals or not db.exists():
        return {}
    by_hash = {sha256_hex(canonical_json({"principal": p.name, "profile": p.profile})): p for p in principals}

    def read(conn: sqlite3.Connection) -> list[tuple[Any, ...]]:
        try:
            return conn.execute("SELECT action_id, json_extract(body, '$.inputs_hash') FROM receipts "
                                "WHERE json_extract(body, '$.name') = 'service.start'").fetchall()
        except sqlite3.OperationalError:  # no receipts table yet
            return []

    rows = read_snapshot(db, read)
    found: dict[str, Principal] = {}
    for action_id, digest in rows:
        if digest in by_hash:
            found.setdefault(str(action_id), by_hash[str(digest)])
    return found
