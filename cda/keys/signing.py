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

from enum import Enum
from pathlib import Path
from typing import Any

from cda.contracts.receipt import Receipt, canonical_json
from cda.errors import SigningError
from cda.files import KEY_DIR_ENV, key_dir, parse_json, replace_file
from cda.keys.ed25519 import private_key_of, public_key_of, sign_bytes, verifies
from cda.keys.key_files import create_key_file, read_key_file

__all__ = [
    "HEAD_FORMAT",
    "KEY_DIR_ENV",
    "KEY_FILE",
    "Signer",
    "SigningError",
    "head_path",
    "key_dir",
    "load_signer",
    "local_signer",
    "read_head",
    "signature_problems",
    "trusted_public_key",
    "VOUCHED",
    "VouchState",
    "vouch",
    "vouch_state",
    "vouched_by",
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
    """An Ed25519 private key that signs heads (and, for the guardian, the header of its file)."""

    def __init__(self, private_hex: str) -> None:
        self._private = private_hex
        self._loaded: Any = None  # cryptography's key object, loaded on the first signature
        self.public_key = public_key_of(private_hex)

    def sign_bytes(self, data: bytes) -> str:
        """The signature (hex) of this key over ``data``."""
        if self._loaded is None:
            self._loaded = private_key_of(self._private)
        return sign_bytes(self._loaded, data)

    def sign_head(self, head: str, count: int, action_id: str, attempt: int, phase: str,
                  events: int = 0, events_head: str = "0" * 64, meta: str = "0" * 64) -> dict[str, Any]:
        """The signed head document for these values (``events``/``events_head``: the count and
        full chain head of the attempt's stored events, ``meta`` the hash of the reflection
        store's secret table, at the end of a run)."""
        doc: dict[str, Any] = {"format": HEAD_FORMAT, "head": head, "count": count, "action_id": action_id,
                               "attempt": attempt, "phase": phase, "events": events, "events_head": events_head,
                               "meta": meta, "public_key": self.public_key}
        doc["signature"] = self.sign_bytes(_signed_bytes(doc))
        return doc


def _signed_bytes(doc: dict[str, Any]) -> bytes:
    return canonical_json({k: v for k, v in doc.items() if k != "signature"}).encode("utf-8")


_WHAT = "the signing key"


def load_signer(directory: Path | None = None) -> Signer:
    """The signing key in ``directory`` (default :func:`key_dir`), created on first use
    (:func:`cda.keys.key_files.create_key_file`: atomic, so two processes starting at once
    agree on one key and a killed process never leaves half a key behind)."""
    path = (directory or key_dir()) / KEY_FILE
    if path.exists():
        return Signer(read_key_file(path, SigningError, _WHAT))
    return Signer(create_key_file(path, SigningError, _WHAT, keep_existing=True))


def local_signer(directory: Path | None = None) -> Signer | None:
    """The local signing key when there is one (None: none yet); never creates one. What a log
    opened by a writer that makes no key of its own vouches with (:class:`cda.actions.receipts.ReceiptLog`)."""
    path = (directory or key_dir()) / KEY_FILE
    if not path.exists():
        return None
    return Signer(read_key_file(path, SigningError, _WHAT))


def trusted_public_key(directory: Path | None = None) -> str | None:
    """The public key of the local signing key (None when there is none yet); never creates one."""
    signer = local_signer(directory)
    return None if signer is None else signer.public_key


def write_head(path: Path, doc: dict[str, Any]) -> None:
    """Write a signed head file atomically (a temporary file renamed over it)."""
    try:
        replace_file(path, (canonical_json(doc) + "\n").encode("utf-8"), durable=True)  # a link planted at the name is replaced
    except OSError as exc:  # a full disk, a read-only folder
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
    problems: list[str] = []
    if trusted is not None and doc["public_key"] != trusted:
        problems.append(f"the head was signed by another key ({doc['public_key'][:16]}…), not the trusted one "
                        f"({trusted[:16]}…)")
    if not verifies(doc["public_key"], _signed_bytes(doc), doc["signature"]):
        problems.append("the signature of the head file does not match its contents")
    return problems


VOUCHED = "vouched"
"""The key of a receipt's ``result`` that holds the writer's vouch for the receipt at its place:
``{"key": <public key hex>, "signature": <hex>}`` (:func:`vouch`)."""

_LOWER_HEX = frozenset("0123456789abcdef")

VOUCH_FORMAT = "cda-vouch-v2"
"""What a vouch signs: this tag, the receipt's place in its log (``seq``, ``prev_hash``) and the
receipt without its vouch. (The first form, a bare signature of the receipt alone, bound it to no
place: docs/jobs.md, "Vouched receipts".)"""


class VouchState(Enum):
    """What a receipt's vouch shows at the place it is read, for one trusted key."""

    NONE = "none"  # no vouch: written by a writer without a key, or by someone else
    OLD_FORM = "old form"  # a signature of the receipt alone (CDA before the vouch named its place)
    OTHER_KEY = "another key"  # vouched for by a key that is not the trusted one (or no key is trusted)
    MISPLACED = "misplaced"  # the trusted key's vouch for another place: copied, moved or duplicated
    VOUCHED = "vouched"  # the trusted key vouched for this receipt at exactly this place


def _receipt_without_vouch(receipt: Receipt) -> dict[str, Any]:
    body = receipt.model_dump(mode="json")
    body["result"] = {k: v for k, v in body["result"].items() if k != VOUCHED}
    return body


def _placed_bytes(receipt: Receipt, seq: int, prev_hash: str) -> bytes:
    """The bytes a vouch signs. ``prev_hash`` is the hash of every entry before the receipt, so
    it names the log (its history from its first entry on) as well as the place in it."""
    return canonical_json({"format": VOUCH_FORMAT, "seq": seq, "prev_hash": prev_hash,
                           "receipt": _receipt_without_vouch(receipt)}).encode("utf-8")


def vouch(signer: Signer, receipt: Receipt, seq: int, prev_hash: str) -> Receipt:
    """``receipt`` vouched for by ``signer`` as entry ``seq`` of its log, after the entry whose hash
    is ``prev_hash`` (:data:`~cda.actions.store_file.GENESIS_HASH` for the first). Only the log's
    writer calls this (:class:`cda.actions.receipts.ReceiptLog`, which knows the place as it
    appends): a receipt appended after the signed head, before the next head is signed (a run
    killed in its last second), still shows who wrote it and where; anyone can append a row, only
    the key holder can vouch, and a vouched receipt copied to another log, moved or appended twice
    no longer counts. About 65 µs of CPU a receipt, where a head costs a durable write (docs/actions.md)."""
    signature = signer.sign_bytes(_placed_bytes(receipt, seq, prev_hash))
    return receipt.model_copy(update={"result": {**receipt.result,
                                                 VOUCHED: {"key": signer.public_key, "signature": signature}}})


def vouch_state(receipt: Receipt, public_key: str | None, seq: int, prev_hash: str) -> VouchState:
    """What ``receipt``'s vouch shows when it is entry ``seq`` of a log after ``prev_hash``, for the
    trusted ``public_key`` (None: no key is trusted).

    >>> from cda.contracts.receipt import Receipt
    >>> signer = Signer("11" * 32)
    >>> r = vouch(signer, Receipt(action_id="a", seq=0, kind="action", name="job.x", inputs_hash="h"), 3, "ab" * 32)
    >>> [vouch_state(r, signer.public_key, *place).value for place in [(3, "ab" * 32), (4, "ab" * 32), (3, "cd" * 32)]]
    ['vouched', 'misplaced', 'misplaced']
    >>> vouch_state(r.model_copy(update={"status": "failed"}), signer.public_key, 3, "ab" * 32).value
    'misplaced'
    """
    found = receipt.result.get(VOUCHED)
    if isinstance(found, str):
        return VouchState.OLD_FORM
    if not (isinstance(found, dict) and sorted(found) == ["key", "signature"] and isinstance(found["key"], str)
            and isinstance(found["signature"], str) and len(found["signature"]) == 128
            and set(found["signature"]) <= _LOWER_HEX):
        return VouchState.NONE  # not a vouch as CDA writes it: no spelling of one passes but the one signed
    if public_key is None or found["key"] != public_key:
        return VouchState.OTHER_KEY
    if verifies(public_key, _placed_bytes(receipt, seq, prev_hash), found["signature"]):
        return VouchState.VOUCHED
    return VouchState.MISPLACED


def vouched_by(receipt: Receipt, public_key: str | None, seq: int, prev_hash: str) -> bool:
    """Whether ``public_key`` vouched for ``receipt`` as entry ``seq`` after ``prev_hash`` (:func:`vouch`)."""
    return vouch_state(receipt, public_key, seq, prev_hash) is VouchState.VOUCHED
