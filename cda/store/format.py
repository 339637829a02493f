"""What makes a SQLite file a CDA product's: its mark, its version and the migrations between.

Every product that keeps a file (the receipt log, the service's state, investigations, the
guardian, the conductor's IR database, the jobs' results) describes it with one
:class:`FileFormat`: the ``PRAGMA application_id`` that marks it (:data:`MARKS` lists every
one, so two products never share a mark) and its list of migrations, in order. A file's
``PRAGMA user_version`` is the number of migrations applied to it; opening it applies the rest.

:func:`recognise` tells, by reading only, whether a file is the product's own and at which
version: marked with its id (and not newer than this CDA), or — a file an earlier CDA wrote
before it was marked this way — accepted by the format's ``legacy`` rule. Anything else is a
:class:`StoreFileError` naming what was found: another program's mark, a table CDA does not
create, another CDA product's file, a newer version.

>>> import sqlite3
>>> fmt = FileFormat("a notes file", 0x43444158, (("CREATE TABLE notes (text TEXT NOT NULL)",),))
>>> conn = sqlite3.connect(":memory:")
>>> recognise(conn, fmt, "notes.sqlite")
Traceback (most recent call last):
cda.store.format.StoreFileError: notes.sqlite: not a CDA file, and CDA never modifies files it did not create (an SQLite database with no CDA mark and no table)
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from contextlib import closing
from dataclasses import dataclass, field
from typing import Any

from cda.errors import CDAError

__all__ = [
    "CONDUCTOR_IR_MARK",
    "GUARDIAN_MARK",
    "INVESTIGATIONS_MARK",
    "JOBS_RESULTS_MARK",
    "MARKS",
    "RECEIPT_LOG_MARK",
    "SERVICE_STATE_MARK",
    "FileFormat",
    "Migration",
    "StoreFileError",
    "columns_of",
    "has_columns",
    "recognise",
    "recognise_any",
    "tables_of",
]


class StoreFileError(CDAError, ValueError):
    """An SQLite file CDA cannot use: missing, not a file, not SQLite, another program's or
    another CDA product's, written by a newer CDA, or one it cannot write."""


RECEIPT_LOG_MARK = 0x43444131  # "CDA1"
SERVICE_STATE_MARK = 0x43444153  # "CDAS"
INVESTIGATIONS_MARK = 0x43444149  # "CDAI"
GUARDIAN_MARK = 0x43444147  # "CDAG"
CONDUCTOR_IR_MARK = 0x43444143  # "CDAC"
JOBS_RESULTS_MARK = 0x4344414A  # "CDAJ"

MARKS: dict[int, str] = {
    RECEIPT_LOG_MARK: "a CDA receipt log",
    SERVICE_STATE_MARK: "the CDA service's state file",
    INVESTIGATIONS_MARK: "a CDA investigations file",
    GUARDIAN_MARK: "a CDA guardian file",
    CONDUCTOR_IR_MARK: "a CDA conductor IR database",
    JOBS_RESULTS_MARK: "a CDA jobs results file",
}
"""Every ``application_id`` a CDA product marks its file with, and what such a file is."""

Migration = Sequence[str] | Callable[[sqlite3.Connection], None]
"""One step of a format: SQL statements run in order, or a function of the connection (for a
step that must look before it writes); it runs inside the opening transaction."""

Legacy = Callable[[sqlite3.Connection, int, int, str], "int | None"]
"""``legacy(conn, application_id, user_version, where)``: the version a file written by an earlier
CDA (with another mark, or none) corresponds to, or None when the file is not such a one; a
:class:`StoreFileError` naming ``where`` when it is one that this CDA cannot take. Only reads."""


@dataclass(frozen=True)
class FileFormat:
    """A product's file: its name in messages, its mark, its migrations (``migrations[i]`` takes a
    file from version ``i`` to ``i + 1``; append only, never edit one that has shipped), the
    rule that recognises files earlier CDAs wrote, and ``check``: what a marked file must also
    satisfy (a reason it is not this product's, or None)."""

    name: str
    app_id: int
    migrations: tuple[Migration, ...]
    legacy: Legacy | None = field(default=None, compare=False)
    check: Callable[[sqlite3.Connection], str | None] | None = field(default=None, compare=False)

    @property
    def version(self) -> int:
        """The version a file has once this CDA has opened it for writing."""
        return len(self.migrations)

    def migrate(self, conn: sqlite3.Connection, start: int, upto: int | None = None) -> None:
        """Apply migrations ``start`` … ``upto`` (default: all) and mark the file, inside the
        caller's transaction. (``upto`` below the newest makes an old file, which is how a
        migration from an older version is tested.)"""
        end = self.version if upto is None else upto
        for step in self.migrations[start:end]:
            if callable(step):
                step(conn)
            else:
                for statement in step:
                    conn.execute(statement)
        conn.execute(f"PRAGMA application_id = {self.app_id}")
        conn.execute(f"PRAGMA user_version = {max(start, end)}")


def tables_of(conn: sqlite3.Connection) -> dict[str, str]:
    """Every table of the database behind ``conn`` (SQLite's own left out) with its ``CREATE`` text."""
    return {str(name): str(sql) for name, sql in conn.execute(
        "SELECT name, sql FROM sqlite_master WHERE type = 'table' AND name NOT GLOB 'sqlite_*'")}


def columns_of(statement: str) -> list[tuple[Any, ...]]:
    """The columns a ``CREATE TABLE`` statement makes, as ``PRAGMA table_info`` lists them (name,
    type, not null, default, primary key): what two spellings of one table have in common."""
    with closing(sqlite3.connect(":memory:")) as scratch:
        scratch.execute(statement)
        (table,) = scratch.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchone()
        return [tuple(row[1:]) for row in scratch.execute(f"PRAGMA table_info({table})")]


def has_columns(conn: sqlite3.Connection, table: str, statement: str) -> bool:
    """Whether ``table`` in ``conn`` has exactly the columns ``statement`` makes."""
    have = [tuple(row[1:]) for row in conn.execute(f"PRAGMA table_info({table})")]
    return have == columns_of(statement)


def _found(conn: sqlite3.Connection, app_id: int) -> str:
    """What the file is, in words, for a refusal."""
    if app_id in MARKS:
        return f"it is {MARKS[app_id]}"
    if app_id != 0:
        return f"its application_id is {app_id:#010x}, another program's format"
    objects = [f"{kind} {name}" if kind != "table" else str(name) for kind, name in conn.execute(
        "SELECT type, name FROM sqlite_master WHERE name NOT GLOB 'sqlite_*' AND type IN ('table', 'view') "
        "ORDER BY type, name")]
    if not objects:
        return "an SQLite database with no CDA mark and no table"
    shown = ", ".join(objects[:5]) + (f" and {len(objects) - 5} more" if len(objects) > 5 else "")
    return f"no CDA mark; it holds {shown}"


def recognise(conn: sqlite3.Connection, fmt: FileFormat, where: str) -> int:
    """The version of ``fmt``'s file behind ``conn``; :class:`StoreFileError` when it is not one
    (see the module's docstring). Only reads."""
    app_id = int(conn.execute("PRAGMA application_id").fetchone()[0])
    version = int(conn.execute("PRAGMA user_version").fetchone()[0])
    if fmt.legacy is not None:
        earlier = fmt.legacy(conn, app_id, version, where)
        if earlier is not None:
            return earlier
    if app_id == fmt.app_id:
        if version > fmt.version:
            raise StoreFileError(f"{where}: written by a newer CDA ({fmt.name} of version {version}; "
                                 f"this CDA reads up to {fmt.version})")
        problem = fmt.check(conn) if fmt.check is not None else None
        if problem is not None:
            raise StoreFileError(f"{where}: not {fmt.name} ({problem})")
        return version
    if app_id in MARKS:
        raise StoreFileError(f"{where}: {MARKS[app_id]}, not {fmt.name}: CDA keeps each in a file of its own")
    raise StoreFileError(f"{where}: not a CDA file, and CDA never modifies files it did not create "
                         f"({_found(conn, app_id)})")


def recognise_any(conn: sqlite3.Connection, formats: Sequence[FileFormat], where: str) -> tuple[FileFormat, int]:
    """The first of ``formats`` whose file ``conn`` is, with its version; the first format's
    refusal when it is none of them. Only reads."""
    refusal: StoreFileError | None = None
    for fmt in formats:
        try:
            return fmt, recognise(conn, fmt, where)
        except StoreFileError as exc:
            refusal = refusal or exc
    assert refusal is not None, "recognise_any needs at least one format"
    raise refusal
