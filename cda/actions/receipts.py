"""The receipt log: append-only, hash-chained, in one SQLite file (docs/actions.md, "The audit log").

Each entry stores the receipt's canonical JSON (``body``), the hash of the entry before it
(``prev_hash``; :data:`GENESIS_HASH` for the first) and its own hash,
``entry_hash = sha256(prev_hash + body)``. Rewriting any entry changes its hash and breaks the
link to the next one, so :func:`verify` finds edits, deletions, insertions and reorderings by
walking the chain. SQLite triggers refuse UPDATE and DELETE, and refuse an INSERT that does not
extend the chain, so honest code cannot damage the log by mistake; someone who drops the
triggers or edits the file's bytes is caught by :func:`verify`, which also reports the missing
or altered triggers.

What a chain alone cannot see: removing the last entries, or rewriting the last one together
with its hash, leaves a valid (shorter) chain. That is what the **anchor** is for: an Action
records :meth:`ReceiptLog.head` in its outputs, and ``verify(path, expected_head=that_hash)``
checks that the chain still contains that entry, which vouches for every entry up to and
including it. Entries appended after the anchor are vouched for only by a later anchor.

Anyone who can write the file can append a well-formed entry, exactly as :meth:`ReceiptLog.append`
does. A log opened with the signing key (``signer``) vouches for each receipt it appends, at the
place it lands (:func:`cda.keys.signing.vouch`: its seq and the previous entry's hash), so the
key's holder can later tell its own entries after the last signed head from anyone else's, and a
vouched receipt copied to another log, moved or appended twice no longer counts
(:func:`tail_vouches`; docs/actions.md, "Vouched receipts"). Without a key the log proves only
that what was written before an anchor has not changed since.

>>> log = ReceiptLog(":memory:")
>>> r = Receipt(action_id="a1", seq=0, kind="solver", name="z3.check", inputs_hash="00")
>>> head = log.append(r)
>>> head == entry_hash(GENESIS_HASH, canonical_json(r.model_dump(mode="json")))
True
>>> report = log.verify(expected_head=head)
>>> report.ok, report.entries
(True, 1)
>>> log.close()
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import TracebackType
from typing import NamedTuple

from pydantic import BaseModel, ConfigDict, ValidationError

from cda.actions.store_file import GENESIS_HASH, LOG_FORMAT, RECEIPTS_SCHEMA, TRIGGERS
from cda.contracts.receipt import Receipt, canonical_json, sha256_hex
from cda.keys.signing import Signer, VouchState, vouch, vouch_state
from cda.store import Durability, FileFormat, StoreFileError, open_store, read_snapshot, recognise_any

__all__ = [
    "GENESIS_HASH",
    "LogEntry",
    "LogRow",
    "ReceiptLog",
    "ReceiptLogError",
    "SCHEMA",
    "TRIGGERS",
    "VerifyReport",
    "entry_hash",
    "tail_vouches",
    "verify",
    "verify_connection",
]

_TABLE = "receipts"
_COLUMNS = ("rowid", "seq", "action_id", "body", "prev_hash", "entry_hash")

SCHEMA = RECEIPTS_SCHEMA
"""The receipt log's table, index and triggers (:mod:`cda.actions.store_file` spells them out)."""


class ReceiptLogError(StoreFileError):
    """The file cannot be used as a receipt log: closed, damaged, or an entry that cannot be logged.

    (A file that is missing, not SQLite or not CDA's own is a :class:`StoreFileError`.)"""


class LogEntry(BaseModel):
    """One entry of the log: its global position, the receipt, and the two chain hashes."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    seq: int
    receipt: Receipt
    prev_hash: str
    entry_hash: str


class LogRow(NamedTuple):
    """One row as :func:`verify_connection` read it: its position, the receipt (None when the
    body does not parse) and its stored entry hash."""

    position: int
    receipt: Receipt | None
    entry_hash: str


class VerifyReport(BaseModel):
    """What :func:`verify` found. ``ok`` is True only when ``problems`` is empty.

    ``head`` is the stored hash of the last entry (:data:`GENESIS_HASH` when empty);
    ``anchor_seq`` is the position in the chain (the seq, in an intact log) of the entry whose
    hash is ``expected_head``, when one was given and found.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    ok: bool
    entries: int
    head: str
    expected_head: str | None = None
    anchor_seq: int | None = None
    problems: list[str]


def _append_locked(conn: sqlite3.Connection, receipts: Sequence[Receipt], signer: Signer | None) -> list[str]:
    """Append ``receipts`` after the current head; the caller holds the write lock. With a
    ``signer`` each is vouched for at the place it takes (:func:`cda.keys.signing.vouch`): the one
    place every writer of a log passes, so a writer with a key never leaves an entry unvouched."""
    last = conn.execute("SELECT seq, entry_hash FROM receipts ORDER BY rowid DESC LIMIT 1").fetchone()
    seq, prev = (int(last[0]) + 1, str(last[1])) if last else (0, GENESIS_HASH)
    hashes: list[str] = []
    for receipt in receipts:
        body = _body(receipt if signer is None else vouch(signer, receipt, seq, prev))
        digest = entry_hash(prev, body)
        conn.execute(
            "INSERT INTO receipts (seq, action_id, body, prev_hash, entry_hash) VALUES (?, ?, ?, ?, ?)",
            (seq, receipt.action_id, body, prev, digest),
        )
        hashes.append(digest)
        seq, prev = seq + 1, digest
    return hashes


def tail_vouches(tail: Sequence[tuple[Receipt | None, str]], count: int, head: str,
                 public_key: str | None) -> dict[VouchState, list[int]]:
    """The entries after entry ``count``, whose hash is ``head`` (``tail``: each receipt, None for
    a body that does not parse, with its entry hash, in chain order), by what their vouch shows
    for ``public_key`` at the place they are (:func:`cda.keys.signing.vouch_state`), each as its
    1-based position (as a signed head counts). Only :attr:`VouchState.VOUCHED` entries show that
    the key's holder appended them there.

    >>> tail_vouches([(Receipt(action_id="a", seq=0, kind="action", name="x", inputs_hash="h"), "ab" * 32)], 0,
    ...              GENESIS_HASH, None)
    {<VouchState.NONE: 'none'>: [1]}
    """
    found: dict[VouchState, list[int]] = {}
    prev = head
    for index, (receipt, digest) in enumerate(tail, start=count):
        state = VouchState.NONE if receipt is None else vouch_state(receipt, public_key, index, prev)
        found.setdefault(state, []).append(index + 1)
        prev = digest
    return found


def entry_hash(prev_hash: str, body: str) -> str:
    """The hash that chains an entry to the one before it: SHA-256 of ``prev_hash + body``.

    ``prev_hash`` is always 64 hex digits, so the concatenation is unambiguous.

    >>> entry_hash(GENESIS_HASH, "{}") == sha256_hex("0" * 64 + "{}")
    True
    """
    return sha256_hex(prev_hash + body)


def _has_table(conn: sqlite3.Connection, name: str) -> bool:
    row = conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (name,)).fetchone()
    return row is not None


def _check_columns(conn: sqlite3.Connection, where: str) -> None:
    if not _has_table(conn, _TABLE):
        raise ReceiptLogError(f"{where}: not a CDA receipt log (no '{_TABLE}' table)")
    names = {str(row[1]) for row in conn.execute(f"PRAGMA table_info({_TABLE})")}
    missing = [c for c in _COLUMNS if c not in names]
    if missing:
        raise ReceiptLogError(f"{where}: the '{_TABLE}' table is not a CDA receipt log (no column {', '.join(missing)})")


class ReceiptLog:
    """The append-only receipt log in one SQLite file (created if missing), safe to share
    between threads (one lock: :attr:`store`'s) and processes (``BEGIN IMMEDIATE``).

    The file is CDA's log file (:data:`~cda.actions.store_file.LOG_FORMAT`), or another format
    that holds a receipt log beside its own tables (``fmt``: the jobs' results); the log owns
    only the ``receipts`` table. ``":memory:"`` gives a private log for tests and quick use.
    :attr:`store` is the open file (:class:`cda.store.Store`: its lock, its durability).
    """

    def __init__(self, path: Path | str, *, fmt: FileFormat = LOG_FORMAT,
                 durability: Durability = Durability.FULL, signer: Signer | None = None) -> None:
        self.path = path
        # vouches for every receipt appended (:func:`cda.keys.signing.vouch`); None: a writer
        # without a key, whose entries verify reports as vouched for by nobody
        self.signer = signer
        self.file = open_store(path, fmt, durability=durability)
        self._closed = False
        try:
            # Never recreate a table or trigger here: a dropped one is evidence for verify().
            _check_columns(self.file.conn, str(path))
        except sqlite3.DatabaseError as exc:
            self.close()
            raise ReceiptLogError(f"{path}: cannot read the receipt log ({exc})") from None
        except BaseException:
            self.close()
            raise

    def _connection(self) -> sqlite3.Connection:
        if self._closed:
            raise ReceiptLogError(f"the receipt log {self.path} is closed")
        return self.file.conn

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """A write transaction on the open log (see :meth:`cda.store.Store.transaction`)."""
        with self.file.lock:
            self._connection()
            with self.file.transaction() as conn:
                yield conn

    def append(self, receipt: Receipt) -> str:
        """Add one receipt at the end; returns its entry hash, which is the new head."""
        return self.append_many([receipt])[-1]

    def append_many(self, receipts: Iterable[Receipt]) -> list[str]:
        """Add receipts in order, all or none, in one transaction; returns their entry hashes.

        An empty iterable adds nothing and returns ``[]``. A receipt holding NaN or infinity
        (which canonical JSON cannot spell) is a :class:`ReceiptLogError`, and then nothing is added.
        """
        batch = list(receipts)  # one JSON cannot spell rolls the transaction back: nothing is added
        if not batch:
            return []
        with self._write() as conn:
            return _append_locked(conn, batch, self.signer)

    def append_with(self, write: Callable[[sqlite3.Connection], Receipt]) -> tuple[Receipt, str]:
        """Write something else in the log's file and the receipt that accounts for it, in one
        transaction: ``write(conn)`` makes its change on the log's connection and returns the
        receipt (the jobs' row and its receipt: a kill can never leave one without the other).
        Returns (the receipt as built, its entry hash)."""
        with self._write() as conn:
            receipt = write(conn)
            return receipt, _append_locked(conn, [receipt], self.signer)[0]

    def begin_attempt(self, action_id: str, receipt_for: Callable[[int], Receipt]) -> tuple[int, str]:
        """Number a new attempt (run) of ``action_id`` and log its first receipt, atomically.

        The attempt is one more than the largest attempt any receipt of ``action_id`` names
        (1 for the first run), counted under the write lock, so two processes re-running one
        action id at once get different numbers. ``receipt_for(attempt)`` builds the receipt to
        log; returns (attempt, its entry hash).
        """
        with self._write() as conn:
            row = conn.execute(
                "SELECT MAX(json_extract(body, '$.attempt')) FROM receipts WHERE action_id = ?", (action_id,)
            ).fetchone()
            attempt = 1 if row is None or row[0] is None else int(row[0]) + 1
            return attempt, _append_locked(conn, [receipt_for(attempt)], self.signer)[0]

    def confirm(self, appended: Sequence[str]) -> list[str]:
        """Problems found re-reading what this run appended: ``appended`` are the entry hashes
        :meth:`append` returned, in order. Empty when every one of them is still in the log, in
        that order, and the chain from the first of them to the end re-hashes to what is stored,
        with the log's triggers as CDA made them.

        Something that rewrote the log meanwhile (even one that recomputed the chain and put the
        triggers back) changes at least one of these hashes, so this is how a run notices.
        """
        if not appended:
            return []
        with self.file.lock:
            conn = self._connection()
            try:
                problems = _trigger_problems(conn)
                first = conn.execute("SELECT rowid FROM receipts WHERE entry_hash = ?", (appended[0],)).fetchone()
                if first is None:
                    return [*problems, f"the run's first receipt (entry {appended[0]}) is no longer in the log"]
                before = conn.execute(
                    "SELECT entry_hash FROM receipts WHERE rowid < ? ORDER BY rowid DESC LIMIT 1", (first[0],)
                ).fetchone()
                rows = conn.execute(
                    "SELECT seq, body, prev_hash, entry_hash FROM receipts WHERE rowid >= ? ORDER BY rowid", (first[0],)
                ).fetchall()
            except sqlite3.DatabaseError as exc:
                return [f"{self.path}: the receipt log can no longer be read ({exc})"]
        prev = GENESIS_HASH if before is None else str(before[0])
        for seq, body, prev_hash, stored in rows:
            if prev_hash != prev or not isinstance(body, str) or entry_hash(str(prev_hash), body) != stored:
                problems.append(f"seq {seq}: the chain no longer re-hashes to what is stored")
                break
            prev = str(stored)
        position = {str(row[3]): index for index, row in enumerate(rows)}
        last = -1
        for digest in appended:
            if position.get(digest, -1) <= last:
                problems.append(
                    f"receipt entry {digest} that this run appended is missing or moved: "
                    "the log was rewritten during the run"
                )
                break
            last = position[digest]
        return problems

    def entries(self, action_id: str | None = None, *, after: int = 0) -> list[LogEntry]:
        """The entries in log order, all of them or those of one action; ``after``: only those
        after the first ``after`` entries of the log (the tail after a signed head).

        A body that no longer parses is a :class:`ReceiptLogError` naming its seq; use
        :meth:`verify` to see every problem at once.
        """
        query = "SELECT seq, body, prev_hash, entry_hash FROM receipts"
        params: tuple[str | int, ...] = ()
        if action_id is not None:
            query, params = query + " WHERE action_id = ?", (action_id,)
        with self.file.lock:
            rows = self._connection().execute(query + " ORDER BY rowid LIMIT -1 OFFSET ?", (*params, after)).fetchall()
        out: list[LogEntry] = []
        for seq, body, prev_hash, digest in rows:
            try:
                receipt = Receipt.model_validate_json(body)
            except ValidationError as exc:
                raise ReceiptLogError(f"{self.path}: entry seq {seq} is not a receipt: {_first_error(exc)}") from None
            if not _as_written(body):
                raise ReceiptLogError(f"{self.path}: entry seq {seq}: {_RESPELLED}")
            out.append(LogEntry(seq=seq, receipt=receipt, prev_hash=prev_hash, entry_hash=digest))
        return out

    def count(self, action_id: str | None = None) -> int:
        """How many entries the log holds, in all or for one action."""
        with self.file.lock:
            conn = self._connection()
            if action_id is None:
                row = conn.execute("SELECT COUNT(*) FROM receipts").fetchone()
            else:
                row = conn.execute("SELECT COUNT(*) FROM receipts WHERE action_id = ?", (action_id,)).fetchone()
        return int(row[0])

    def head(self) -> str:
        """The hash of the last entry, :data:`GENESIS_HASH` when the log is empty: the anchor an
        Action records so that :func:`verify` can later detect a truncated tail."""
        with self.file.lock:
            row = self._connection().execute("SELECT entry_hash FROM receipts ORDER BY rowid DESC LIMIT 1").fetchone()
        return GENESIS_HASH if row is None else str(row[0])

    def holds(self, head: str, count: int) -> bool:
        """Whether entry number ``count`` (1-based; 0: the empty log) has the hash ``head``."""
        if count == 0:
            return head == GENESIS_HASH
        with self.file.lock:
            row = self._connection().execute(
                "SELECT entry_hash FROM receipts ORDER BY rowid LIMIT 1 OFFSET ?", (count - 1,)).fetchone()
        return row is not None and str(row[0]) == head

    def named(self, name: str) -> int:
        """How many receipts are called ``name`` (such as ``action.tampered``)."""
        with self.file.lock:
            row = self._connection().execute(
                "SELECT COUNT(*) FROM receipts WHERE json_extract(body, '$.name') = ?", (name,)).fetchone()
        return int(row[0])

    def vouched_for_by(self, public_key: str) -> bool:
        """Whether any receipt carries a vouch naming ``public_key`` (of the form that names its
        place): the log was written by a CDA that signs its heads, with this key."""
        with self.file.lock:
            row = self._connection().execute(
                "SELECT 1 FROM receipts WHERE json_extract(body, '$.result.vouched.key') = ? LIMIT 1",
                (public_key,)).fetchone()
        return row is not None

    def tip(self) -> tuple[str, int]:
        """(the head, how many entries the log holds), read together: what a signed head vouches for."""
        with self.file.lock:
            conn = self._connection()
            row = conn.execute("SELECT entry_hash, (SELECT COUNT(*) FROM receipts) FROM receipts "
                               "ORDER BY rowid DESC LIMIT 1").fetchone()
        return (GENESIS_HASH, 0) if row is None else (str(row[0]), int(row[1]))

    def verify(self, expected_head: str | None = None) -> VerifyReport:
        """:func:`verify` on this open log (the only way for a ``":memory:"`` log)."""
        with self.file.lock:
            try:
                return verify_connection(self._connection(), str(self.path), expected_head)
            except sqlite3.DatabaseError as exc:
                raise ReceiptLogError(f"{self.path}: not a readable receipt log ({exc})") from None

    def close(self) -> None:
        """Close the connection; closing twice is harmless."""
        with self.file.lock:
            if not self._closed:
                self._closed = True
                self.file.close()

    def __enter__(self) -> ReceiptLog:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


def verify(path: Path | str, expected_head: str | None = None,
           formats: Sequence[FileFormat] = (LOG_FORMAT,)) -> VerifyReport:
    """Re-walk the chain of the log at ``path`` and report every problem found.

    Each problem names the entry (seq and rowid) and what is wrong: ``entry hash mismatch``
    (the body or its hash was edited), ``chain broken`` (its ``prev_hash`` is not the previous
    entry's hash: an entry was deleted, inserted, moved, or rewritten with a fresh hash),
    ``seq gap``, ``not a receipt`` (the body no longer parses), an ``action_id`` column that
    disagrees with the body, missing or altered triggers, and a damaged database file.

    ``expected_head`` is an anchor recorded earlier (an Action's :meth:`ReceiptLog.head`): the
    chain must still contain an entry with that hash. Without it, removing the last entries or
    rewriting the last one leaves a valid chain and cannot be seen.

    Raises :class:`~cda.store.StoreFileError` when ``path`` is missing or is not a file of one of
    ``formats`` (the formats that hold a receipt log), :class:`ReceiptLogError` when it holds no
    receipt log. The file is read read-only and without a trace
    (:func:`~cda.store.read_snapshot`): no ``-wal``/``-shm`` is left beside it.
    """
    try:
        return read_snapshot(path, lambda conn: verify_connection(conn, str(path), expected_head, formats=formats))
    except sqlite3.DatabaseError as exc:
        raise ReceiptLogError(f"{path}: not a readable receipt log ({exc})") from None


def verify_connection(
    conn: sqlite3.Connection, where: str, expected_head: str | None, collect: list[LogRow] | None = None,
    formats: Sequence[FileFormat] = (LOG_FORMAT,),
) -> VerifyReport:
    """:func:`verify` on an open connection; ``collect`` (when given) receives every row as a
    :class:`LogRow`, for checks that need the receipts as well (:mod:`cda.actions.audit`)."""
    if where != ":memory:":
        recognise_any(conn, formats, where)
    _check_columns(conn, where)
    problems = _trigger_problems(conn)
    seen: dict[str, int] = {}
    prev, count = GENESIS_HASH, 0
    try:
        rows = conn.execute(
            "SELECT rowid, seq, action_id, body, prev_hash, entry_hash FROM receipts ORDER BY rowid"
        ).fetchall()
        damage = [str(r[0]) for r in conn.execute("PRAGMA quick_check").fetchall()]
    except sqlite3.DatabaseError as exc:
        return VerifyReport(ok=False, entries=0, head=GENESIS_HASH, expected_head=expected_head,
                            problems=[*problems, f"the database file is damaged: {exc}"])
    if damage != ["ok"]:
        problems.append("the database file is damaged: " + "; ".join(damage[:5]))
    for index, (rowid, seq, action_id, body, prev_hash, stored) in enumerate(rows):
        found, receipt = _entry_problems(index, rowid, seq, action_id, body, prev_hash, stored, prev)
        problems.extend(found)
        prev, count = str(stored), count + 1
        if collect is not None:
            collect.append(LogRow(index, receipt, prev))
        seen.setdefault(prev, index)
    anchor_seq: int | None = None
    if expected_head is not None and expected_head != GENESIS_HASH:
        if expected_head in seen:
            anchor_seq = seen[expected_head]
        else:
            problems.append(
                f"anchor {expected_head} is not in the chain: entries up to the anchor were removed "
                "(a truncated tail) or rewritten"
            )
    return VerifyReport(
        ok=not problems, entries=count, head=prev, expected_head=expected_head, anchor_seq=anchor_seq, problems=problems
    )


def _trigger_problems(conn: sqlite3.Connection) -> list[str]:
    found = dict(conn.execute("SELECT name, sql FROM sqlite_master WHERE type = 'trigger' AND tbl_name = ?", (_TABLE,)))
    problems: list[str] = []
    for name, sql in TRIGGERS.items():
        if name not in found:
            problems.append(f"trigger {name} is missing: the log is no longer write-protected")
        elif found[name] != sql:
            problems.append(f"trigger {name} was altered")
    return problems


def _entry_problems(
    index: int, rowid: object, seq: object, action_id: object, body: object, prev_hash: object, stored: object, prev: str
) -> tuple[list[str], Receipt | None]:
    where = f"seq {seq} (rowid {rowid})"
    problems: list[str] = []
    if seq != index:
        problems.append(f"{where}: seq gap: entry number {index} in the chain has seq {seq}, expected {index}")
    if prev_hash != prev:
        problems.append(
            f"{where}: chain broken: prev_hash is not the previous entry's hash "
            "(an entry before it was deleted, inserted, moved or rewritten)"
        )
    if not (isinstance(body, str) and isinstance(prev_hash, str)):
        problems.append(f"{where}: body or prev_hash is not text")
        return problems, None
    if entry_hash(prev_hash, body) != stored:
        problems.append(f"{where}: entry hash mismatch: the body or its entry_hash was edited")
    try:
        receipt = Receipt.model_validate_json(body)
    except ValidationError as exc:
        problems.append(f"{where}: body is not a receipt: {_first_error(exc)}")
        return problems, None
    if not _as_written(body):
        problems.append(f"{where}: {_RESPELLED}")
    if receipt.action_id != action_id:
        problems.append(f"{where}: action_id column {action_id!r} disagrees with the body's {receipt.action_id!r}")
    return problems, receipt


_RESPELLED = ("body not spelled as CDA writes it (canonical JSON: sorted keys, no spaces, no key twice): "
              "respelled after it was written, which its vouch does not cover")


def _as_written(body: str) -> bool:
    """Whether ``body`` is spelled as :func:`_body` writes every body (canonical JSON). A vouch
    signs the receipt as a value (:func:`cda.keys.signing.vouch`), so a body respelled after it
    was written — above all one with a key twice, which SQLite's ``json_extract`` (the service's
    attempts, the metrics) reads as the first and the receipt parser as the last — would keep its
    vouch while CDA's own queries read something the key never vouched for."""
    try:
        return canonical_json(json.loads(body)) == body
    except ValueError:  # (NaN or infinity, which no body CDA writes holds)
        return False


def _body(receipt: Receipt) -> str:
    try:
        return canonical_json(receipt.model_dump(mode="json"))
    except ValueError as exc:  # NaN or infinity in caps/result: JSON has no spelling for them
        raise ReceiptLogError(f"receipt {receipt.action_id}/{receipt.seq} cannot be logged: {exc}") from None


def _first_error(exc: ValidationError) -> str:
    first = exc.errors()[0]
    loc = ".".join(str(part) for part in first.get("loc", ()))
    return f"{loc}: {first.get('msg', 'invalid')}" if loc else str(first.get("msg", "invalid"))
