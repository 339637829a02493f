"""The reflection store: raw traces of Actions, readable only with an approval (docs/actions.md, "Receipts, artifacts, reflection").

Clients only ever see boundary summaries and artifact ids; what an Action actually did (the
full trace) is kept here for internal reviewers. A reviewer needs an **approval token** for one
action: ``issue_approval(action_id, reviewer)`` returns
``cda-approval-v1:<reviewer>:<HMAC-SHA256 hex>`` where the HMAC is keyed by the store's secret
and computed over the canonical JSON of ``["cda-reflection-approval-v1", action_id, reviewer]``,
so a token is good for that action only and cannot be forged without the secret. Tokens do not
expire; rotating the secret revokes them all.

Every trace stored, every read attempt, granted or denied, and every approval issued, is
written as a receipt (kind ``action``; name ``reflection.put`` with the SHA-256 of the stored
trace, ``reflection.read`` with status ``ok``/``denied``, or ``reflection.approve``) to the
receipt log given to the store; ``cda receipts verify`` compares each stored trace with the
hash its latest ``reflection.put`` names. The token itself is never
logged; the reviewer it names is.

The secret comes from the constructor, else the environment variable ``CDA_REFLECTION_SECRET``,
else a random secret created once and kept in the store's own database. The last is
convenient, not a security boundary: whoever can read the database file can read the traces
anyway.

>>> log = ReceiptLog(":memory:")
>>> store = ReflectionStore(":memory:", log, secret="s3cret")
>>> _ = store.put("a1", {"steps": ["parse", "solve"]})
>>> store.read("a1", None) is None
True
>>> store.read("a1", store.issue_approval("a1", "ana"))
{'steps': ['parse', 'solve']}
>>> [(e.receipt.name, e.receipt.status) for e in log.entries("a1")]
[('reflection.put', 'ok'), ('reflection.read', 'denied'), ('reflection.approve', 'ok'), ('reflection.read', 'ok')]
>>> store.close(); log.close()
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
import sqlite3
from pathlib import Path
from types import TracebackType
from typing import Any, Literal

from cda.actions.receipts import ReceiptLog
from cda.actions.store_file import LOG_FORMAT
from cda.contracts.receipt import Receipt, canonical_json, sha256_hex
from cda.errors import CDAError
from cda.store import Durability, open_store

__all__ = ["ReflectionStore", "ReflectionError", "SECRET_ENV", "TOKEN_PREFIX"]

SECRET_ENV = "CDA_REFLECTION_SECRET"
TOKEN_PREFIX = "cda-approval-v1:"
_PURPOSE = "cda-reflection-approval-v1"



class ReflectionError(CDAError, ValueError):
    """A trace that is not JSON, an empty reviewer or secret, or a reflection DB that cannot be used."""


def _same_file(a: Path | str, b: Path | str) -> bool:
    if str(b) == ":memory:":
        return False
    try:
        return Path(a).resolve() == Path(b).resolve()
    except OSError:
        return False


class ReflectionStore:
    """Raw traces per action id in an SQLite file (the receipt log's file or another one).

    ``put`` stores (or replaces) the trace of an action; ``read`` returns it only for a valid
    approval token and records the attempt in ``log``.
    """

    def __init__(self, path: Path | str, log: ReceiptLog, *, secret: str | bytes | None = None,
                 durability: Durability = Durability.FULL) -> None:
        self.path = path
        self._log = log
        self.file = open_store(path, LOG_FORMAT, durability=durability)
        self._closed = False
        try:
            self._secret = self._resolve_secret(secret)
        except sqlite3.DatabaseError as exc:  # its tables were dropped since CDA made them
            self.close()
            raise ReflectionError(f"{self.path}: cannot use the reflection store ({exc})") from None
        except BaseException:
            self.close()
            raise

    def _resolve_secret(self, secret: str | bytes | None) -> bytes:
        if secret is None:
            secret = os.environ.get(SECRET_ENV) or None
        if secret is None:
            return self._persisted_secret()
        key = secret.encode("utf-8") if isinstance(secret, str) else bytes(secret)
        if not key:
            raise ReflectionError("the reflection secret must not be empty")
        return key

    def _persisted_secret(self) -> bytes:
        # INSERT OR IGNORE then SELECT: two processes creating the store at once agree on one secret.
        conn = self._connection()
        conn.execute("INSERT OR IGNORE INTO reflection_meta (key, value) VALUES ('secret', ?)", (secrets.token_hex(32),))
        row = conn.execute("SELECT value FROM reflection_meta WHERE key = 'secret'").fetchone()
        try:
            return bytes.fromhex(str(row[0]))
        except ValueError:
            raise ReflectionError(f"{self.path}: the stored reflection secret is not hex") from None

    def _connection(self) -> sqlite3.Connection:
        if self._closed:
            raise ReflectionError(f"the reflection store {self.path} is closed")
        return self.file.conn

    def _mac(self, action_id: str, reviewer: str) -> str:
        message = canonical_json([_PURPOSE, action_id, reviewer]).encode("utf-8")
        return hmac.new(self._secret, message, hashlib.sha256).hexdigest()

    def put(self, action_id: str, trace: dict[str, Any], attempt: int | None = None) -> str:
        """Store the raw trace of an action (JSON-serialisable), replacing an earlier one, and log
        a ``reflection.put`` receipt holding the SHA-256 of the stored text (so ``cda receipts
        verify`` detects an edited trace); returns that receipt's entry hash."""
        try:
            body = canonical_json(trace)
        except (TypeError, ValueError) as exc:
            raise ReflectionError(f"the trace of {action_id!r} is not JSON: {exc}") from None
        with self.file.lock:
            self._connection().execute(
                "INSERT INTO reflection_traces (action_id, body) VALUES (?, ?) "
                "ON CONFLICT (action_id) DO UPDATE SET body = excluded.body",
                (action_id, body),
            )
        in_log_file = str(self.path) != ":memory:" and _same_file(self.path, self._log.path)
        result = {"sha256": sha256_hex(body), "in_log_file": in_log_file}
        return self._record(action_id, "reflection.put", result, "ok", attempt=attempt)

    def issue_approval(self, action_id: str, reviewer: str) -> str:
        """A token that lets ``reviewer`` read the trace of ``action_id`` (and no other); the
        issue is itself recorded as a ``reflection.approve`` receipt."""
        if not reviewer or reviewer != reviewer.strip():
            raise ReflectionError(f"reviewer must be a non-empty name without surrounding spaces, got {reviewer!r}")
        token = f"{TOKEN_PREFIX}{reviewer}:{self._mac(action_id, reviewer)}"
        self._record(action_id, "reflection.approve", {"reviewer": reviewer}, "ok")
        return token

    def read(self, action_id: str, approval: str | None) -> dict[str, Any] | None:
        """The trace of ``action_id`` if ``approval`` is a valid token for it, else None (also
        None when no trace was stored). The attempt is recorded as a receipt either way."""
        reviewer, reason = self._check(action_id, approval)
        trace: dict[str, Any] | None = None
        if reason is None:
            with self.file.lock:
                row = self._connection().execute(
                    "SELECT body FROM reflection_traces WHERE action_id = ?", (action_id,)
                ).fetchone()
            trace = None if row is None else json.loads(row[0])
        result = {"granted": reason is None, "reviewer": reviewer, "reason": reason, "found": trace is not None}
        self._record(action_id, "reflection.read", result, "ok" if reason is None else "denied")
        return trace

    def _check(self, action_id: str, approval: str | None) -> tuple[str | None, str | None]:
        """(the reviewer the token names, why it is refused or None)."""
        if not approval:
            return None, "no approval"
        if not approval.startswith(TOKEN_PREFIX):
            return None, "malformed approval"
        reviewer, _, mac = approval[len(TOKEN_PREFIX):].rpartition(":")
        if not reviewer:
            return None, "malformed approval"
        if not hmac.compare_digest(mac.encode("utf-8"), self._mac(action_id, reviewer).encode("utf-8")):
            return reviewer, "invalid approval"
        return reviewer, None

    def _record(self, action_id: str, name: str, result: dict[str, Any], status: Literal["ok", "denied"],
                attempt: int | None = None) -> str:
        inputs = {"action_id": action_id, "reviewer": result.get("reviewer")}
        with self.file.lock:
            receipt = Receipt(
                action_id=action_id,
                seq=self._log.count(action_id),
                kind="action",
                name=name,
                inputs_hash=sha256_hex(canonical_json(inputs)),
                result=result,
                status=status,
                attempt=attempt,
            )
            return self._log.append(receipt)

    def close(self) -> None:
        """Close the store's connection (not the receipt log, which the caller owns)."""
        with self.file.lock:
            if not self._closed:
                self._closed = True
                self.file.close()

    def __enter__(self) -> ReflectionStore:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
