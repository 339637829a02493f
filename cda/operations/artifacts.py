"""``artifacts.get {id}``: what an action's artifact ids name (spec §8; the spec has no REST, so
this is how a client reads them): the boundary summary (``summary:…``), the plan bundle's files
(``cda_plan:…``) or the evidence bundle (``evidence:…``), to the action's owner only.

The ids are content addresses, so what is read is checked against the id before it is returned:
a file changed on disk since the run is refused (``conflict``), never passed on as the artifact.
The door provides the store (``call.env.artifacts``, an :class:`ArtifactShelf`): the folder the
runs wrote into, the event store whose terminal events name the ids, and who owns each action.
An id that is not one of the caller's actions' is answered as an unknown id would be.

``artifacts.integrity {action_id}`` is the page's integrity drawer (docs/service.md): what
``cda receipts verify`` says of the log the action wrote into, and whether the signed head kept in
the action's plan bundle is signed by CDA's key and is an entry of that log's chain.
"""

from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field

from cda.operations.base import OperationError, Params, Result
from cda.operations.registry import Door, operation

__all__ = ["ArtifactParams", "ArtifactResult", "ArtifactShelf", "IntegrityParams", "IntegrityResult"]

ARTIFACT_ID = r"^(summary|cda_plan|evidence):[0-9a-f]{16}$"
_TERMINAL = ("action_completed", "action_partial", "action_failed")
_MAX_BYTES = 32 << 20  # a plan bundle larger than this is not sent in one answer


class ArtifactParams(Params):
    id: str = Field(pattern=ARTIFACT_ID, description="an artifact id an action's outputs name "
                    "(summary_artifact_id, plan_bundle_id, evidence_bundle_id)")


class ArtifactResult(Result):
    id: str
    kind: Literal["summary", "cda_plan", "evidence"]
    action_id: str
    text: str | None = Field(default=None, description="the boundary summary (Markdown)")
    files: dict[str, str] | None = Field(default=None, description="the plan bundle: file name -> text")
    evidence: dict[str, Any] | None = Field(default=None, description="the evidence bundle")


@dataclass
class ArtifactShelf:
    """Where a door's runs put their artifacts: ``root/<action_id>/…`` and the event store ``db``;
    ``owner(action_id)`` names the principal that started an action (None: unknown)."""

    root: Path
    db: Path
    owner: Callable[[str], str | None]


def _actions_naming(db: Path, artifact_id: str) -> list[str]:
    from cda.store import StoreFileError, read_snapshot

    def read(conn: sqlite3.Connection) -> list[str]:
        rows = conn.execute(
            "SELECT DISTINCT action_id FROM events WHERE instr(body, ?) > 0 AND "
            f"json_extract(body, '$.type') IN ({', '.join('?' * len(_TERMINAL))}) ORDER BY action_id",
            (f'"{artifact_id}"', *_TERMINAL)).fetchall()
        return [str(r[0]) for r in rows]

    try:
        return read_snapshot(db, read)
    except (StoreFileError, sqlite3.Error):
        return []


def _plan_files(folder: Path) -> dict[str, str]:
    files: dict[str, str] = {}
    size = 0
    for path in sorted(folder.rglob("*")):
        name = path.relative_to(folder).as_posix()
        if not path.is_file() or name == "receipts_head.json" or name.startswith("."):  # the signed head is written
            continue  # after the id is made; a temporary file or the folder's manifest (one up) is no part of it
        size += path.stat().st_size
        if size > _MAX_BYTES:
            raise OperationError("conflict", f"the plan bundle is larger than {_MAX_BYTES >> 20} MiB", ["params", "id"])
        files[name] = path.read_text(encoding="utf-8")
    return files


@operation("artifacts.get", ArtifactParams, ArtifactResult,
           summary="an artifact an action's ids name: boundary summary, plan bundle files, evidence bundle (owner only)",
           doors={Door.TOOLBUS, Door.MCP})
def get(call: Any, p: ArtifactParams) -> ArtifactResult:
    from cda.actions.artifacts import content_id
    from cda.contracts.receipt import canonical_json, sha256_hex

    shelf: ArtifactShelf | None = getattr(call.env, "artifacts", None)
    unknown = OperationError("not_found", f"no artifact {p.id} among your actions", ["params", "id"])
    if shelf is None:
        raise unknown
    kind = p.id.split(":", 1)[0]
    mine = [a for a in _actions_naming(shelf.db, p.id) if shelf.owner(a) == call.principal.name]
    for action_id in mine:
        folder = shelf.root / action_id
        try:
            if kind == "summary":
                text = (folder / "summary.md").read_text(encoding="utf-8")
                if content_id("summary", text) == p.id:
                    return ArtifactResult(id=p.id, kind="summary", action_id=action_id, text=text)
            elif kind == "evidence":
                text = (folder / "evidence.json").read_text(encoding="utf-8")
                if content_id("evidence", text) == p.id:
                    return ArtifactResult(id=p.id, kind="evidence", action_id=action_id, evidence=json.loads(text))
            else:
                files = _plan_files(folder / "cda_plan")
                if content_id("cda_plan", canonical_json({k: sha256_hex(v) for k, v in files.items()})) == p.id:
                    return ArtifactResult(id=p.id, kind="cda_plan", action_id=action_id, files=files)
        except (OSError, UnicodeDecodeError, ValueError):
            continue
    if mine:
        raise OperationError("conflict", f"{p.id}: the files on disk no longer match the artifact id (changed "
                             "since the run)", ["params", "id"])
    raise unknown


ActionIdParam = Annotated[str, Field(min_length=1, max_length=200, pattern=r"^[A-Za-z0-9_.:\-]+$")]


class IntegrityParams(Params):
    action_id: ActionIdParam = Field(description="one of your actions")


class IntegrityResult(Result):
    action_id: str
    status: Literal["intact", "tampered", "unverified"] = Field(
        description="intact: the log verifies, its signed head is signed by CDA's key and covers every receipt of the "
        "action; tampered: a check failed (problems say which); unverified: no signed head covers the action yet")
    log_entries: int = Field(description="receipts in the log")
    log_head: str = Field(description="the hash of the log's last entry")
    action_receipts: int = Field(description="receipts of this action in the log")
    signed_head: str | None = Field(default=None, description="the head a signed head names (the log's, else the bundle's)")
    signed_count: int | None = Field(default=None, description="entries that signed head covers")
    signed_by: str | None = Field(default=None, description="the public key (hex) that signed it")
    signature: Literal["valid", "invalid", "missing"]
    covered: bool = Field(default=False, description="every receipt of the action is among the signed entries")
    problems: list[str] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)


def _action_receipts(db: Path, action_id: str, count: int | None) -> tuple[int, int | None, str | None]:
    """(receipts of ``action_id``, the position in the log of its last ``action.end`` (None: no run
    of it has ended), the hash of entry ``count``)."""
    from cda.store import read_snapshot

    def read(conn: sqlite3.Connection) -> tuple[int, int | None, str | None]:
        n = conn.execute("SELECT count(*) FROM receipts WHERE action_id = ?", (action_id,)).fetchone()[0]
        end = conn.execute("SELECT max(seq) FROM receipts WHERE action_id = ? AND json_extract(body, '$.name') = "
                           "'action.end'", (action_id,)).fetchone()[0]
        position = None if end is None else conn.execute("SELECT count(*) FROM receipts WHERE seq <= ?",
                                                         (end,)).fetchone()[0]
        at = None
        if count:
            row = conn.execute("SELECT entry_hash FROM receipts ORDER BY seq LIMIT 1 OFFSET ?", (count - 1,)).fetchone()
            at = None if row is None else str(row[0])
        return int(n), None if position is None else int(position), at

    return read_snapshot(db, read)


_ACTION_ID = re.compile(r"cda-[0-9a-f]{16}")


@operation("artifacts.integrity", IntegrityParams, IntegrityResult,
           summary="the integrity of an action's receipts: the log verified, its signed head checked (owner only)",
           doors={Door.TOOLBUS, Door.MCP})
def integrity(call: Any, p: IntegrityParams) -> IntegrityResult:
    """Checked only once the action's run has ended and a signed head covers its ``action.end``:
    before that the answer is ``unverified`` (a log being written is not judged mid-write). What
    the audit finds about *other* actions (one finishing meanwhile) is not this action's answer."""
    from cda.actions.audit import audit_file
    from cda.keys.signing import SigningError, head_path, read_head, signature_problems, trusted_public_key
    from cda.store import StoreFileError

    shelf: ArtifactShelf | None = getattr(call.env, "artifacts", None)
    if shelf is None or shelf.owner(p.action_id) != call.principal.name:
        raise OperationError("not_found", f"no action {p.action_id} among your actions", ["params", "action_id"])
    unreadable = "the log of {} cannot be read: {}"
    trusted = trusted_public_key()
    problems: list[str] = []
    head: dict[str, Any] | None = None
    for where in (head_path(shelf.db), shelf.root / p.action_id / "cda_plan" / "receipts_head.json"):
        if where.is_file():
            try:
                head = read_head(where)
            except SigningError as exc:
                problems.append(str(exc))
            break
    try:
        n, end, at = _action_receipts(shelf.db, p.action_id, None if head is None else int(head["count"]))
    except (StoreFileError, sqlite3.Error) as exc:
        raise OperationError("not_found", unreadable.format(p.action_id, exc), ["params", "action_id"]) from None
    result = IntegrityResult(action_id=p.action_id, status="unverified", log_entries=0, log_head="", action_receipts=n,
                             signature="missing", problems=problems)
    if head is not None:
        result.signed_head, result.signed_count, result.signed_by = head["head"], int(head["count"]), head["public_key"]
        bad = signature_problems(head, trusted)
        problems.extend(bad)
        result.signature = "invalid" if bad else "valid"
        if at != head["head"]:
            problems.append(f"entry {head['count']} of the log is not the signed head {str(head['head'])[:16]}…: the "
                            "log was rewritten after it was signed")
        result.covered = end is not None and end <= int(head["count"])
    result.problems = problems
    if not result.covered and not problems:
        result.notes.append("no signed head covers this action's run yet: it is running, or just ended and the "
                            "log is about to be signed")
        return result
    try:
        report = audit_file(shelf.db, trusted_key=trusted)
    except StoreFileError as exc:
        raise OperationError("not_found", unreadable.format(p.action_id, exc), ["params", "action_id"]) from None
    result.log_entries, result.log_head = report.entries, report.head
    others = {m for x in report.problems for m in _ACTION_ID.findall(x)} - {p.action_id}
    # a finding is this action's unless it names only other actions (one finishing meanwhile)
    problems.extend(x for x in report.problems if p.action_id in x or not set(_ACTION_ID.findall(x)) & others)
    result.notes.extend(report.notes)
    if others:
        result.notes.append(f"the audit's findings about {len(others)} other action(s) are theirs, not this one's")
    result.problems = problems
    result.status = "tampered" if problems else ("intact" if result.covered else "unverified")
    return result
