"""Verifying a CDA log file as a whole: what ``cda receipts verify`` checks.

On top of the receipt chain (:func:`cda.actions.receipts.verify_connection`) this checks:

- **the schema**, object by object, against ``sqlite_master`` as CDA writes it (tables,
  indices, triggers): anything added (an extra ``BEFORE INSERT … RAISE(IGNORE)`` trigger, a
  view, an index), altered or missing is tampering;
- **the events** of each attempt: their own hash chain, and for an attempt that ended, the
  number and chain head its ``action.end`` receipt names (:mod:`cda.actions.event_chain`); an
  event after those is accepted only as an update offered to the ended action (a server's
  ``action_update_available``), each vouched for by an ``update.offered`` receipt of that
  attempt naming its seq and the SHA-256 of its stored body;
- **the reflection traces**: each one's SHA-256 against its latest ``reflection.put`` receipt,
  and the approval secret (``reflection_meta``) against the hash the signed head names;
- **the attempts**: every run is numbered (``action.start`` … ``action.end``); one without its
  ``action.end`` was interrupted (killed, crashed) and is reported as such, not as tampering;
- **the signed head** beside the log (:mod:`cda.keys.signing`): a valid Ed25519 signature
  by the trusted key, over a head that is still the entry at the count it names. Entries after
  it (a later reviewer's reflection receipts, an interrupted attempt) are an unsigned tail: the
  log is *unverified* (exit 3) unless the trusted key vouched for each of them one by one (a
  ``cda jobs run`` vouches for every receipt it appends), since anyone who can write the file
  can append.

A file that carries CDA's mark, or has a signed head beside it, and cannot be read as a log
(wiped, truncated, replaced by something else) is *tampered*, not "not a log".
"""

from __future__ import annotations

import functools
import json
import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from cda.actions import receipts as receipts_mod
from cda.actions.event_chain import timeless_body
from cda.actions.receipts import GENESIS_HASH, LogRow, ReceiptLogError, entry_hash, verify_connection
from cda.actions.store_file import LEGACY_TABLES, LOG_FORMAT
from cda.contracts.receipt import Receipt, sha256_hex
from cda.keys.signing import VOUCHED, SigningError, VouchState, head_path, read_head, signature_problems
from cda.store import FileFormat, StoreFileError, read_snapshot, recognise_any

__all__ = ["AuditReport", "audit_file", "expected_schema", "file_meta_digest", "file_schema_problems",
           "meta_digest"]

_SQLITE_MAGIC = b"SQLite format 3\x00"
_SchemaObject = tuple[str, str, str | None]  # (type, tbl_name, sql)


class AuditReport(BaseModel):
    """What :func:`audit_file` found; ``ok`` is True only when ``status`` is ``intact``: no
    problem, and the signed head (if any) checked against a trusted key.

    ``interrupted`` names the attempts (``action_id#attempt``) without an ``action.end``
    receipt; ``unsigned_tail`` counts the entries after the signed head; ``notes`` says what
    was not checked and why.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    ok: bool
    #: ``intact`` (ok), ``tampered`` (problems found) or ``unverified``: nothing is wrong with the
    #: file, but its signed head cannot be checked here for want of a trusted key (``unverified``
    #: names why); a missing key is not tampering
    status: Literal["intact", "tampered", "unverified"] = "intact"
    unverified: str | None = None
    entries: int
    head: str
    expected_head: str | None = None
    anchor_seq: int | None = None
    signed_head: str | None = None
    signed_count: int | None = None
    unsigned_tail: int = 0
    attempts: int = 0
    interrupted: list[str] = []
    problems: list[str]
    notes: list[str] = []


@functools.cache
def expected_schema(fmt: FileFormat = LOG_FORMAT) -> dict[str, _SchemaObject]:
    """Every object CDA creates in a file of ``fmt``, by name, read back from ``sqlite_master`` of
    a scratch database made by ``fmt``'s own migrations."""
    conn = sqlite3.connect(":memory:", isolation_level=None)
    try:
        fmt.migrate(conn, 0)
        rows = conn.execute("SELECT type, name, tbl_name, sql FROM sqlite_master").fetchall()
    finally:
        conn.close()
    return {str(name): (str(kind), str(table), sql) for kind, name, table, sql in rows}


_LEGACY_OBJECTS: dict[str, _SchemaObject] = {
    "events": ("table", "events", LEGACY_TABLES["events"]),
    "sqlite_autoindex_events_1": ("index", "events", None),
}


def _schema_problems(conn: sqlite3.Connection, fmt: FileFormat = LOG_FORMAT) -> tuple[list[str], bool]:
    """(problems, whether the events table is store format 1's) for a file of ``fmt``."""
    expected = expected_schema(fmt)
    found = {str(name): (str(kind), str(table), sql)
             for kind, name, table, sql in conn.execute("SELECT type, name, tbl_name, sql FROM sqlite_master")}
    legacy = found.get("events") == _LEGACY_OBJECTS["events"]
    if legacy:
        expected = {k: v for k, v in expected.items() if v[1] != "events"} | _LEGACY_OBJECTS
    problems: list[str] = []
    for name, obj in sorted(found.items()):
        if name in receipts_mod.TRIGGERS:
            continue  # the chain check reports these by name
        want = expected.get(name)
        if want is None:
            problems.append(f"schema: {obj[0]} {name} on {obj[1]} is not one CDA creates (added by someone else)")
        elif obj != want:
            problems.append(f"schema: {obj[0]} {name} is not as CDA creates it (altered)")
    tables = {obj[1] for obj in found.values() if obj[0] == "table"}
    for name, want in sorted(expected.items()):
        if want[1] in tables and name not in found and name not in receipts_mod.TRIGGERS:
            problems.append(f"schema: {want[0]} {name} on {want[1]} is missing")
    return problems, legacy


def file_schema_problems(path: Path | str, fmt: FileFormat = LOG_FORMAT) -> list[str]:
    """What :func:`audit_file` would say about the schema of the CDA file of ``fmt`` at ``path`` (read-only)."""
    return read_snapshot(path, lambda conn: _schema_problems(conn, fmt)[0])


class _Attempts:
    """The attempts the receipts tell of: which started, which ended and what their end vouches for."""

    def __init__(self, rows: list[LogRow]) -> None:
        self.seen: set[tuple[str, int]] = set()
        self.ends: dict[tuple[str, int], Receipt] = {}
        self.puts: dict[str, str] = {}
        self.offered: dict[tuple[str, int], dict[int, str]] = {}  # update.offered: event seq -> body SHA-256
        self.tampered: list[str] = []
        for row in rows:
            r = row.receipt
            if r is None:
                continue
            if r.attempt is not None:
                self.seen.add((r.action_id, r.attempt))
                if r.name == "action.end":
                    self.ends[(r.action_id, r.attempt)] = r
                elif r.name == "update.offered" and isinstance(r.result.get("event_seq"), int):
                    self.offered.setdefault((r.action_id, r.attempt), {})[r.result["event_seq"]] = \
                        str(r.result.get("event_sha256"))
            if r.name == "reflection.put" and r.result.get("in_log_file") is True:
                self.puts[r.action_id] = str(r.result.get("sha256"))
            elif r.name == "action.tampered":
                self.tampered.append(f"{r.action_id}#{r.attempt}: the run found its receipt log rewritten while it ran")

    def interrupted(self) -> list[str]:
        return [f"{a}#{n}" for a, n in sorted(self.seen - set(self.ends))]


def _has_table(conn: sqlite3.Connection, name: str) -> bool:
    return conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (name,)).fetchone() is not None


def _event_problems(conn: sqlite3.Connection, attempts: _Attempts,
                    signed: dict[str, Any] | None) -> tuple[list[str], list[str]]:
    """(problems, notes) about the events table, against the attempts' ``action.end`` receipts
    (the chain over the events without their times) and the signed head (the full chain)."""
    problems: list[str] = []
    full: dict[tuple[str, int], tuple[int, str]] = {}
    timeless: dict[tuple[str, int], str] = {}
    broken: set[tuple[str, int]] = set()
    # what action.end vouches for is the events up to its count; the rest must be offered updates
    vouched = {key: end.result.get("events") for key, end in attempts.ends.items()}
    at_end: dict[tuple[str, int], tuple[int, str | None]] = {}  # (count, timeless head) at action.end's count
    signed_key = None if signed is None or signed["phase"] != "end" else (signed["action_id"], signed["attempt"])
    at_signed: tuple[int, str] | None = None  # the full chain at the signed head's count
    after_end: dict[tuple[str, int], list[tuple[int, str, dict[str, Any] | None]]] = {}
    rows = conn.execute(
        "SELECT action_id, attempt, seq, body, prev_hash, entry_hash FROM events ORDER BY action_id, attempt, seq")
    for action_id, attempt, seq, body, prev_hash, stored in rows:
        key = (str(action_id), attempt if isinstance(attempt, int) else -1)
        count, prev = full.get(key, (0, GENESIS_HASH))
        where = f"event {seq} of {action_id}#{attempt}"
        data: dict[str, Any] | None = None
        if key not in broken:
            problem = None
            if seq != count:
                problem = f"{where}: seq gap (expected {count}): an event was removed or added"
            elif prev_hash != prev:
                problem = f"{where}: chain broken: an event before it was removed, added, moved or rewritten"
            elif not isinstance(body, str) or entry_hash(str(prev_hash), body) != stored:
                problem = f"{where}: entry hash mismatch: the event or its hash was edited"
            else:
                problem, data = _event_body(where, body, key, seq)
            if problem is not None:
                problems.append(problem)
                broken.add(key)
        end_count = vouched.get(key)
        if isinstance(end_count, int) and count >= end_count:
            after_end.setdefault(key, []).append((count, body if isinstance(body, str) else "", data))
        full[key] = (count + 1, str(stored))
        if data is not None:
            timeless[key] = entry_hash(timeless.get(key, GENESIS_HASH), timeless_body(data))
        if count + 1 == end_count:
            at_end[key] = (count + 1, timeless.get(key) if data is not None else None)
        if key == signed_key and signed is not None and count + 1 == signed["events"]:
            at_signed = full[key]
    notes: list[str] = []
    for key, end in sorted(attempts.ends.items()):
        claimed = (end.result.get("events"), end.result.get("events_head"))
        if key not in full:
            if claimed[0]:
                notes.append(f"the {claimed[0]} events of {key[0]}#{key[1]} are not in this file "
                             "(pruned, or the run kept no event store)")
        elif key not in broken and at_end.get(key, (0, GENESIS_HASH) if claimed[0] == 0 else None) != claimed:
            problems.append(f"the events of {key[0]}#{key[1]} are not those its action.end receipt vouches for "
                            f"({full[key][0]} stored, {claimed[0]} vouched for): an event was edited, removed or added")
        elif key not in broken:
            problems += _offered_problems(key, after_end.get(key, []), attempts.offered.get(key, {}))
    if signed_key is not None and signed is not None:
        key = signed_key
        if key not in full and signed["events"]:
            problems.append(f"the {signed['events']} events of {key[0]}#{key[1]} the signed head vouches for were "
                            "deleted (pruning keeps an action's latest attempt)")
        elif key in full and key not in broken and (at_signed or (0, GENESIS_HASH)) != (signed["events"],
                                                                                         signed["events_head"]):
            problems.append(f"the events of {key[0]}#{key[1]} are not those the signed head vouches for "
                            "(an event, or its time, was edited)")
    for key in sorted(set(full) - attempts.seen):
        problems.append(f"the events of {key[0]}#{key[1]} belong to no attempt in the receipt log (added)")
    return problems, notes


def _offered_problems(key: tuple[str, int], after: list[tuple[int, str, dict[str, Any] | None]],
                      offered: dict[int, str]) -> list[str]:
    """Problems with the events stored after an attempt's ``action.end`` count: each must be an
    ``action_update_available`` whose body's SHA-256 its ``update.offered`` receipt names, and
    every event such a receipt names must be stored (docs/service.md, "Sub-actions")."""
    problems: list[str] = []
    where = f"{key[0]}#{key[1]}"
    for seq, body, data in after:
        want = offered.get(seq)
        if want is None or data is None or data.get("type") != "action_update_available":
            problems.append(f"event {seq} of {where} follows its action.end and no update.offered receipt vouches "
                            "for it: an event was added")
        elif sha256_hex(body) != want:
            problems.append(f"event {seq} of {where} (an offered update) is not the one its update.offered receipt "
                            "vouches for: edited")
    stored = {seq for seq, _, _ in after}
    for seq in sorted(set(offered) - stored):
        problems.append(f"event {seq} of {where}, an offered update its update.offered receipt names, is missing: deleted")
    return problems


def _event_body(where: str, body: str, key: tuple[str, int], seq: int) -> tuple[str | None, dict[str, Any] | None]:
    """(a problem or None, the event's fields) for a stored event body."""
    try:
        data = json.loads(body)
    except ValueError:
        return f"{where}: not JSON", None
    if not isinstance(data, dict) or (data.get("action_id"), data.get("attempt") or 1, data.get("seq")) != (*key, seq):
        return f"{where}: its body names another action, attempt or position than its row", None
    return None, data


def _reflection_problems(conn: sqlite3.Connection, attempts: _Attempts) -> list[str]:
    problems: list[str] = []
    stored = dict(conn.execute("SELECT action_id, body FROM reflection_traces").fetchall())
    for action_id, body in sorted(stored.items()):
        want = attempts.puts.get(action_id)
        if want is None:
            problems.append(f"reflection trace of {action_id}: no reflection.put receipt vouches for it (added)")
        elif not isinstance(body, str) or sha256_hex(body) != want:
            problems.append(f"reflection trace of {action_id}: edited (its hash is not the one its receipt names)")
    for action_id in sorted(set(attempts.puts) - set(stored)):
        problems.append(f"reflection trace of {action_id}: deleted (a reflection.put receipt names it)")
    return problems


def meta_digest(conn: sqlite3.Connection) -> str:
    """SHA-256 of the rows of ``reflection_meta`` (the approval secret): the signed head names it,
    since a receipt naming a random secret's hash would make receipts differ between two runs."""
    if not _has_table(conn, "reflection_meta"):
        return GENESIS_HASH
    rows = conn.execute("SELECT key, value FROM reflection_meta ORDER BY key").fetchall()
    return sha256_hex(json.dumps([[str(k), str(v)] for k, v in rows], separators=(",", ":")))


def file_meta_digest(path: Path | str) -> str:
    """:func:`meta_digest` of the CDA file at ``path`` (read-only)."""
    return read_snapshot(path, meta_digest)


def _audit_connection(conn: sqlite3.Connection, where: str, expected_head: str | None, rows: list[LogRow],
                      signed: dict[str, Any] | None,
                      formats: Sequence[FileFormat]) -> tuple[receipts_mod.VerifyReport, list[str], list[str], _Attempts]:
    rows.clear()  # read_snapshot may call this more than once
    fmt, _ = recognise_any(conn, formats, where)
    report = verify_connection(conn, where, expected_head, collect=rows, formats=(fmt,))
    problems, legacy = _schema_problems(conn, fmt)
    attempts = _Attempts(rows)
    problems += attempts.tampered
    if signed is not None and signed["phase"] == "end" and meta_digest(conn) != signed["meta"]:
        problems.append("reflection_meta: the approval secret is not the one the signed head names (replaced)")
    notes: list[str] = []
    if legacy:
        notes.append("the events table is store format 1's: events are not chained")
    elif _has_table(conn, "events"):
        found, more = _event_problems(conn, attempts, signed)
        problems += found
        notes += more
    if _has_table(conn, "reflection_traces") and int(conn.execute("PRAGMA user_version").fetchone()[0]) >= 2:
        problems += _reflection_problems(conn, attempts)
    return report, problems, notes, attempts


def _cda_header(path: Path, formats: Sequence[FileFormat]) -> bool:
    """The file starts as an SQLite file with the application_id of one of ``formats`` (bytes
    68–71 of the header)."""
    try:
        with path.open("rb") as handle:
            header = handle.read(100)
    except OSError:
        return False
    return (len(header) == 100 and header.startswith(_SQLITE_MAGIC)
            and int.from_bytes(header[68:72], "big") in {fmt.app_id for fmt in formats})


def _tail_findings(rows: list[LogRow], count: int, trusted_key: str | None) -> tuple[list[str], str | None, list[str]]:
    """The entries after the signed head (entry ``count``): anyone who can write the file can
    append, so a tail is believed only entry by entry, where the trusted key vouched for each at
    the place it is (every writer with a key vouches for what it appends: :class:`ReceiptLog`).
    (problems, why the log is unverified or None, notes)."""
    tail = receipts_mod.tail_vouches([(r.receipt, r.entry_hash) for r in rows[count:]], count,
                                     rows[count - 1].entry_hash if count else GENESIS_HASH, trusted_key)
    problems: list[str] = []
    notes: list[str] = []

    def named(places: list[int]) -> str:
        return ", ".join(f"entry {at} (seq {at - 1})" for at in places[:5]) + (" …" if len(places) > 5 else "")

    misplaced = tail.get(VouchState.MISPLACED, [])
    if misplaced:
        problems.append(f"{named(misplaced)}: the trusted key's vouch does not hold at this place in this log: "
                        "copied from another log, moved, appended twice or edited")
    vouched = set(tail.get(VouchState.VOUCHED, []))
    # every finished run signs a head after its action.end: an unvouched end past the signed head was
    # appended by something that could not sign (a vouched one: a writer killed in the instant between)
    ended = [f"{r.action_id}#{r.attempt}" for at, row in enumerate(rows[count:], start=count + 1)
             if (r := row.receipt) is not None and r.name == "action.end" and at not in vouched]
    if ended:
        problems.append(f"attempt(s) {', '.join(ended[:5])} ended after the signed head, and no signature "
                        "covers them: appended by something that could not sign")
    loose = sorted(at for state in (VouchState.NONE, VouchState.OLD_FORM, VouchState.OTHER_KEY)
                   for at in tail.get(state, []))
    unverified: str | None = None
    if loose and not problems:
        where = f"after the signed head (entry {count})" if count else "of the log, which has no signed head,"
        unverified = (f"{len(loose)} of the {len(rows) - count} entries {where} are "
                      f"covered by no signature and vouched for by no trusted key ({named(loose)}): nothing shows "
                      "CDA wrote them (a writer without a key, or rows appended by whoever can write the file)")
    if tail.get(VouchState.OLD_FORM):
        notes.append(f"{named(tail[VouchState.OLD_FORM])}: vouched for in the form CDA wrote before a vouch named "
                     "its place in the log, which a copy from another log also passes: counted as not vouched for")
    if tail.get(VouchState.OTHER_KEY) and trusted_key is not None:
        notes.append(f"{named(tail[VouchState.OTHER_KEY])}: vouched for by another key than the trusted one")
    if vouched and not loose and not problems:
        notes.append(f"{len(vouched)} entries after the signed head are each vouched for by the trusted key where "
                     "they are (a writer stopped before it signed its head; the next one signs them)")
    return problems, unverified, notes


def _tampered(expected_head: str | None, problems: list[str], signed: dict[str, Any] | None) -> AuditReport:
    return AuditReport(ok=False, status="tampered", entries=0, head=GENESIS_HASH, expected_head=expected_head, problems=problems,
                       signed_head=None if signed is None else signed["head"],
                       signed_count=None if signed is None else signed["count"])


def audit_file(
    path: Path | str,
    expected_head: str | None = None,
    *,
    trusted_key: str | None = None,
    require_signature: bool = True,
    formats: Sequence[FileFormat] = (LOG_FORMAT,),
) -> AuditReport:
    """Check the CDA log at ``path`` and the signed head beside it; see the module's docstring.

    ``trusted_key`` is the public key (hex) the head must be signed with (None: the key the head
    names, with a note). With ``require_signature`` a log in which a run ended must have a signed
    head. ``formats`` are the file formats that hold a receipt log (CDA's log file; the CLI adds
    the jobs' results). Raises :class:`~cda.store.StoreFileError` only when ``path`` is not a
    CDA log at all (missing, foreign, not SQLite) and no signed head says it was one.
    """
    target = Path(path)
    head_file = head_path(target)
    signed: dict[str, Any] | None = None
    problems: list[str] = []
    if head_file.exists():
        try:
            signed = read_head(head_file)
        except SigningError as exc:
            problems.append(f"the signed head file is damaged: {exc}")
    claimed = head_file.exists()
    if target.exists() and not target.is_file():
        raise StoreFileError(f"{path}: not a file")
    if not target.exists():
        if claimed:
            return _tampered(expected_head, [*problems, f"{path}: the log is gone, but its signed head is still "
                                             f"beside it ({head_file.name}): deleted"], signed)
        raise StoreFileError(f"{path}: no such file")
    rows: list[LogRow] = []
    try:
        report, found, notes, attempts = read_snapshot(
            target, lambda conn: _audit_connection(conn, str(path), expected_head, rows, signed, formats))
    except (StoreFileError, ReceiptLogError, sqlite3.DatabaseError, UnicodeDecodeError) as exc:
        if isinstance(exc, UnicodeDecodeError):  # a text column whose bytes are not UTF-8 any more
            return _tampered(expected_head, [*problems, f"{path}: a text in the log is not UTF-8: its bytes "
                                             "were edited"], signed)
        if claimed or _cda_header(target, formats):
            why = "its signed head is beside it" if claimed else "it carries CDA's mark"
            return _tampered(expected_head, [*problems, f"{path}: cannot be read as a CDA log, yet {why}: "
                                             f"wiped, truncated or replaced ({exc})"], signed)
        if isinstance(exc, sqlite3.DatabaseError):
            raise StoreFileError(f"{path}: not a readable receipt log ({exc})") from None
        raise
    problems = [*report.problems, *found, *problems]
    unsigned_tail = 0
    unverified: str | None = None
    if signed is not None:
        problems += signature_problems(signed, trusted_key)
        count = signed["count"]
        hashes = [row.entry_hash for row in rows]
        at = GENESIS_HASH if count == 0 else (hashes[count - 1] if count <= len(hashes) else None)
        if at != signed["head"]:
            problems.append(f"the signed head (entry {count}, {signed['head'][:16]}…) is not in the log: "
                            "the log was truncated, wiped, replaced or rewritten")
        else:
            unsigned_tail = len(hashes) - count
            found, unverified, tail_notes = _tail_findings(rows, count, trusted_key)
            problems += found
            notes += tail_notes
        if trusted_key is None:
            unverified = ("no trusted key to check the head's signature against (no local signing key here): "
                          "give the signer's --public-key; a head signed by any key would pass otherwise")
    elif attempts.ends and require_signature and not claimed:  # (a damaged head file is said above)
        problems.append(f"no signed head beside the log ({head_file.name} is missing) although runs ended in it")
    elif trusted_key is not None and any(
            r.receipt is not None and isinstance(v := r.receipt.result.get(VOUCHED), dict) and v.get("key") == trusted_key
            for r in rows):
        # written by a CDA that vouches, and no head: a writer killed before its first signature, or
        # the head file deleted; the whole log is then a tail, believed entry by entry
        found, unverified, tail_notes = _tail_findings(rows, 0, trusted_key)
        problems += found
        notes += [*tail_notes, "no signed head: the trusted key vouched for entries of this log, so it was written "
                  "by a CDA that signs heads (a writer killed before its first signature, or the head file deleted: "
                  "entries removed from the end cannot be seen)"]
    else:
        notes.append("no signed head: only the chain vouches for the log")
    interrupted = attempts.interrupted()
    if interrupted:
        notes.append(f"{len(interrupted)} attempt(s) interrupted (no action.end receipt): {', '.join(interrupted[:10])}")
    status: Literal["intact", "tampered", "unverified"] = (
        "tampered" if problems else "unverified" if unverified is not None else "intact")
    return AuditReport(
        ok=status == "intact", status=status, unverified=None if problems else unverified, entries=report.entries, head=report.head, expected_head=expected_head,
        anchor_seq=report.anchor_seq, signed_head=None if signed is None else signed["head"],
        signed_count=None if signed is None else signed["count"], unsigned_tail=unsigned_tail,
        attempts=len(attempts.seen), interrupted=interrupted, problems=problems, notes=notes,
    )
