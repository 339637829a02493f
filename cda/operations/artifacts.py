"""``artifacts.get {id}``: what an action's artifact ids name (spec §8; the spec has no REST, so
this is how a client reads them): the boundary summary (``summary:…``), the plan bundle's files
(``cda_plan:…``) or the evidence bundle (``evidence:…``), to the action's owner only.

The ids are content addresses, so what is read is checked against the id before it is returned:
a file changed on disk since the run is refused (``conflict``), never passed on as the artifact.
The door provides the store (``call.env.artifacts``, an :class:`ArtifactShelf`): the folder the
runs wrote into, the event store whose terminal events name the ids, and who owns each action.
An id that is not one of the caller's actions' is answered as an unknown id would be.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from cda.operations.base import OperationError, Params, Result
from cda.operations.registry import Door, operation

__all__ = ["ArtifactParams", "ArtifactResult", "ArtifactShelf"]

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
        if not path.is_file() or name == "receipts_head.json":  # the signed head is written after the id is made
            continue
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
