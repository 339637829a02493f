"""The signed head of a receipt log: Ed25519 over (head, count, attempt), kept beside the log.

A hash chain shows that nothing *before* a known head changed; it cannot say which head is the
true one, since whoever can write the file can rewrite it and recompute every hash. So after
each run (and at the start of each attempt) CDA signs the log's head with a key that lives
outside the log's folder and outside a run's checks (their sandbox sees neither), and writes
``<log>.head.json`` beside the log (and a copy into the run's plan bundle)::

    {"format": "cda-receipts-head-v1", "head": <entry hash>, "count": <entries up to it>,
     "action_id": ..., "attempt": ..., "phase": "start" | "end",
     "events": <the attempt's events>, "events_head": <their full chain's head, times included>,
     "meta": <SHA-256 of the reflection store's secret table>,
     "public_key": <32 bytes hex>, "signature": <64 bytes hex>}

The signature covers the canonical JSON of every field but ``signature``.

**The key.** ``$CDA_KEY_DIR`` (default ``~/.config/cda``) holds ``receipts-ed25519.key``, the
raw private key in hex, created on first use with mode 0600 in a 0700 folder (a key file that
others can read is refused). ``cda receipts verify`` trusts the public key derived from it
(or ``--public-key``): a head re-signed with any other key is tampering. Whoever holds this file
can sign anything; keep it out of shared folders and backups of the logs.

``cryptography`` is imported only when a key is loaded or a signature checked, never by
``import cda`` or ``cda --help``.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path
from typing import Any

from cda.contracts.receipt import canonical_json
from cda.errors import SigningError
from cda.files import KEY_DIR_ENV, key_dir, parse_json

__all__ = [
    "HEAD_FORMAT",
    "KEY_DIR_ENV",
    "KEY_FILE",
    "Signer",
    "SigningError",
    "head_path",
    "key_dir",
    "load_signer",
    "read_head",
    "signature_problems",
    "trusted_public_key",
    "write_head",
]

KEY_FILE = "receipts-ed25519.key"
HEAD_FORMAT = "cda-receipts-head-v1"
_HEAD_FIELDS = ("format", "head", "count", "action_id", "attempt", "phase", "events", "events_head", "meta",
                "public_key", "signature")


def head_path(db: Path | str) -> Path:
    """The signed head file of the log at ``db``: ``<db>.head.json``."""
    return Path(f"{db}.head.json")


class Signer:
    """An Ed25519 private key that signs heads."""

    def __init__(self, private_hex: str) -> None:
        from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
        from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

        self._key = Ed25519PrivateKey.from_private_bytes(bytes.fromhex(private_hex))
        self.public_key = self._key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw).hex()

    def sign_head(self, head: str, count: int, action_id: str, attempt: int, phase: str,
                  events: int = 0, events_head: str = "0" * 64, meta: str = "0" * 64) -> dict[str, Any]:
        """The signed head document for these values (``events``/``events_head``: the count and
        full chain head of the attempt's stored events, ``meta`` the hash of the reflection
        store's secret table, at the end of a run)."""
        doc: dict[str, Any] = {"format": HEAD_FORMAT, "head": head, "count": count, "action_id": action_id,
                               "attempt": attempt, "phase": phase, "events": events, "events_head": events_head,
                               "meta": meta, "public_key": self.public_key}
        doc["signature"] = self._key.sign(_signed_bytes(doc)).hex()
        return doc


def _signed_bytes(doc: dict[str, Any]) -> bytes:
    return canonical_json({k: v for k, v in doc.items() if k != "signature"}).encode("utf-8")


def _read_key(path: Path) -> str:
    mode = path.stat().st_mode & 0o777
    if mode & 0o077:
        raise SigningError(f"{path}: the signing key is readable by others (mode {mode:o}); chmod 600 it")
    text = path.read_text(encoding="ascii").strip()
    try:
        if len(bytes.fromhex(text)) != 32:
            raise ValueError
    except ValueError:
        raise SigningError(f"{path}: not an Ed25519 key (64 hex digits)") from None
    return text


def load_signer(directory: Path | None = None) -> Signer:
    """The signing key in ``directory`` (default :func:`key_dir`), created on first use.

    Creation is atomic (a 0600 temporary file linked into place), so two processes starting at
    once agree on one key and a killed process never leaves half a key behind.
    """
    folder = directory or key_dir()
    path = folder / KEY_FILE
    try:
        if not path.exists():
            folder.mkdir(mode=0o700, parents=True, exist_ok=True)
            temp = folder / f".{KEY_FILE}.{os.getpid()}.{secrets.token_hex(4)}"
            fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            try:
                with os.fdopen(fd, "w", encoding="ascii") as handle:
                    handle.write(secrets.token_bytes(32).hex() + "\n")
                    handle.flush()
                    os.fsync(handle.fileno())
                try:
                    os.link(temp, path)
                except FileExistsError:
                    pass  # another process made the key first: use theirs
            finally:
                temp.unlink(missing_ok=True)
        return Signer(_read_key(path))
    except OSError as exc:
        raise SigningError(f"{path}: cannot make or read the signing key ({exc.strerror or exc}); "
                           f"set {KEY_DIR_ENV} to a private folder") from None


def trusted_public_key(directory: Path | None = None) -> str | None:
    """The public key of the local signing key (None when there is none yet); never creates one."""
    path = (directory or key_dir()) / KEY_FILE
    if not path.exists():
        return None
    try:
        return Signer(_read_key(path)).public_key
    except OSError as exc:
        raise SigningError(f"{path}: cannot read the signing key ({exc.strerror or exc})") from None


def write_head(path: Path, doc: dict[str, Any]) -> None:
    """Write a signed head file atomically (a temporary file renamed over it)."""
    temp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        temp.write_text(canonical_json(doc) + "\n", encoding="utf-8")
        os.replace(temp, path)
    except OSError as exc:  # a full disk, a read-only folder
        temp.unlink(missing_ok=True)
        raise SigningError(f"{path}: cannot write the signed head ({exc.strerror or exc})") from None


def read_head(path: Path) -> dict[str, Any]:
    """The signed head document at ``path``; :class:`SigningError` when it is not one."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise SigningError(f"{path}: cannot read the signed head ({exc})") from None
    doc = parse_json(text, str(path), SigningError)
    if not isinstance(doc, dict) or sorted(doc) != sorted(_HEAD_FIELDS) or doc.get("format") != HEAD_FORMAT:
        raise SigningError(f"{path}: not a CDA signed head ({HEAD_FORMAT})")
    for name in ("count", "events", "attempt"):
        if not (isinstance(doc[name], int) and not isinstance(doc[name], bool) and doc[name] >= 0):
            raise SigningError(f"{path}: {name} must be a non-negative integer")
    for name in ("head", "public_key", "signature", "action_id", "phase", "events_head", "meta"):
        if not isinstance(doc[name], str):
            raise SigningError(f"{path}: {name} must be text")
    return doc


def signature_problems(doc: dict[str, Any], trusted: str | None) -> list[str]:
    """Why the signed head ``doc`` is not to be believed (empty: signed by ``trusted``, or by the
    key it names when no key is trusted)."""
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    problems: list[str] = []
    if trusted is not None and doc["public_key"] != trusted:
        problems.append(f"the head was signed by another key ({doc['public_key'][:16]}…), not the trusted one "
                        f"({trusted[:16]}…)")
    try:
        Ed25519PublicKey.from_public_bytes(bytes.fromhex(doc["public_key"])).verify(
            bytes.fromhex(doc["signature"]), _signed_bytes(doc))
    except (ValueError, InvalidSignature):
        problems.append("the signature of the head file does not match its contents")
    return problems
