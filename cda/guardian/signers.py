"""Human-in-the-loop signatures on task drafts: a signer registry anchored in a signature, and
Ed25519 over canonical bytes.

*The root.* A guardian file's **first signer** is fixed when it is registered, in the file's
signed header (the ``guardian_header`` table): the file's id, the first signer's id and public
key, signed by that signer's key (when it is given) and by this CDA's own key (the key that signs
receipt-log heads, :func:`cda.keys.signing.load_signer`, kept outside the file in
``$CDA_KEY_DIR``). Whoever reads the file trusts the header only when that signature verifies
under the local CDA key — or when the first signer's key fingerprint (:func:`fingerprint`) is
given from outside the file (``cda task … --root FINGERPRINT``; :attr:`GuardianStore.root
<cda.guardian.guardian_db.GuardianStore.root>`), which is how another user's process trusts it. No
row of the ``signers`` table makes a root: its order (``rowid``) means nothing.

*Every later signer* speaks only through a chain of endorsements back to the root: its row holds
the Ed25519 signature of a signer (``endorsed_by``) over its id, its public key and the file's
id; that signer must itself be the root or endorsed the same way. A row without that chain — one
inserted by hand (whatever its ``rowid``), a key updated, an endorsement deleted or copied from
another file — speaks for no one. The **pinned policy store** (:func:`pin_policy_store`) is
signed the same way and checked again at every use.

*A file from before headers* (guardian schema 3 and earlier) has signers but no header: until its
owner anchors it once (:meth:`SignerRegistry.anchor`, ``cda task anchor SIGNER``: the first
signer's key, and this CDA's key, sign a header that also lists the rows and pins that chain to
it as they were then signed), no signer speaks for it.

*Signing* (:func:`sign`) refuses a signer that does not speak for the file and a private key whose
public key is not the registered one. The signature covers :meth:`TaskDraft.signing_bytes
<cda.guardian.tasks.TaskDraft.signing_bytes>`: the canonical JSON
(:func:`cda.contracts.receipt.canonical_json`) of every field of the draft, the signer's id,
``HITL`` and the signing time, so none of them can be changed afterwards.

*Verifying* (:func:`verify_problems`) re-derives those bytes from the signed task and checks them
against the registered key: a changed field, a changed signer id or time, a signature made by
another key, or a signer that speaks for no one is a problem, named.

*Keys* live where CDA's receipt signing key lives (:func:`cda.files.key_dir`: ``$CDA_KEY_DIR`` or
``~/.config/cda``, a folder the check sandbox hides), under ``signers/<signer_id>.ed25519.key``,
made and read by :mod:`cda.keys.key_files`. The seed asks for HSM-held keys in production; a
key file is the local stand-in (:func:`sign` takes the private key's hex, so a caller backed by
an HSM can pass its own signer).

``cryptography`` is imported only when a key is made, loaded or a signature checked.
"""

from __future__ import annotations

import hashlib
import json
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from cda.errors import SigningError
from cda.files import KEY_DIR_ENV, key_dir
from cda.guardian.guardian_db import Clock, GuardianStore, is_identifier, utc_now
from cda.guardian.tasks import ID_PATTERN, ID_PUNCTUATION, Signature, TaskDraft, TaskError, TaskSigned
from cda.keys.ed25519 import public_key_of, sign_bytes, verifies
from cda.keys.key_files import create_key_file, read_key_file

__all__ = [
    "Header",
    "SignerError",
    "SignerRegistry",
    "create_signer_key",
    "fingerprint",
    "load_signer_key",
    "pin_policy_store",
    "pinned_policy_digest",
    "pinned_setting",
    "public_key_of",
    "sign",
    "signer_key_path",
    "verifies",
    "verify_problems",
]

_HEX_DIGITS = frozenset("0123456789abcdef")
HEADER_FORMAT = "cda-guardian-header-v1"
REGISTRATION_FORMAT = "cda-signer-registration-v2"
SETTING_FORMAT = "cda-guardian-setting-v2"
_EARLIER = {REGISTRATION_FORMAT: "cda-signer-registration-v1", SETTING_FORMAT: "cda-guardian-setting-v1"}
"""What a signature made before headers covered (no file id): counted only for what a header adopted."""


def _is_hex_key(value: object) -> bool:
    """32 bytes as 64 lowercase hex digits."""
    return isinstance(value, str) and len(value) == 64 and set(value) <= _HEX_DIGITS


class SignerError(SigningError):
    """A signer or key that cannot sign: not registered, not the registered key, unreadable; or a
    registry that cannot be trusted (no signed header, or one that does not verify)."""


def _check_signer_id(signer_id: str) -> str:
    if not is_identifier(signer_id, ID_PUNCTUATION):
        raise SignerError(f"a signer id matches {ID_PATTERN}, not {signer_id!r}")
    return signer_id


def fingerprint(public_hex: str) -> str:
    """A public key's fingerprint: the SHA-256 (hex) of its 32 bytes (what ``--root`` names)."""
    return hashlib.sha256(bytes.fromhex(public_hex)).hexdigest()


def _canonical(payload: Mapping[str, object]) -> bytes:
    from cda.contracts.receipt import canonical_json

    return canonical_json(dict(payload)).encode("utf-8")


Adopted = tuple[tuple[str, str, str, str], ...]
"""Rows signed before headers that a header adopted: (id or key, public key or value, by, signature)."""


@dataclass(frozen=True)
class Header:
    """A guardian file's signed header, checked (see the module's docstring)."""

    store_id: str
    root: str
    root_key: str
    signers: Adopted
    settings: Adopted


def _endorsement(signer_id: str, public_key: str, by: str, store_id: str) -> dict[str, object]:
    return {"format": REGISTRATION_FORMAT, "store": store_id, "signer_id": signer_id, "public_key": public_key, "by": by}


def _setting(key: str, value: str, by: str, store_id: str) -> dict[str, object]:
    return {"format": SETTING_FORMAT, "store": store_id, "key": key, "value": value, "by": by}


def _earlier(payload: dict[str, object]) -> dict[str, object]:
    """``payload`` as a signature made before headers covered it (no file id)."""
    return {k: (_EARLIER[str(v)] if k == "format" else v) for k, v in payload.items() if k != "store"}


class SignerRegistry:
    """``signer_id`` -> Ed25519 public key (hex), in the guardian's store, from its root down."""

    def __init__(self, store: GuardianStore) -> None:
        self.store = store

    # ---- the header
    def header(self) -> Header:
        """The file's header, checked against the root fingerprint given to the store, else against
        this CDA's key; :class:`SignerError` (naming why) when there is none or it does not verify."""
        from cda.keys.signing import trusted_public_key

        where = self.store.where
        row = self.store.conn.execute(
            "SELECT body, root_signature, anchor_signature FROM guardian_header WHERE id = 1").fetchone()
        if row is None:
            if self.store.conn.execute("SELECT COUNT(*) FROM signers").fetchone()[0]:
                raise SignerError(f"{where} names no first signer in a signed header, so no signer speaks for it "
                                  f"(a file from before headers: its first signer anchors it once, "
                                  f"cda task anchor SIGNER --store {where})")
            raise SignerError(f"{where} has no signer yet (cda task add-signer registers the first)")
        body, root_signature, anchor_signature = (str(part) for part in row)
        try:
            doc = json.loads(body)
            header = Header(str(doc["store"]), _check_signer_id(str(doc["root"])), str(doc["root_key"]),
                            tuple(tuple(map(str, r)) for r in doc["signers"]),  # type: ignore[misc]
                            tuple(tuple(map(str, r)) for r in doc["settings"]))  # type: ignore[misc]
            assert doc["format"] == HEADER_FORMAT and _is_hex_key(header.root_key)
            assert all(len(r) == 4 for r in (*header.signers, *header.settings))
        except (ValueError, KeyError, TypeError, AssertionError, SignerError):
            raise SignerError(f"{where}: its header is not a CDA guardian header (edited)") from None
        data = body.encode("utf-8")
        if root_signature and not verifies(header.root_key, data, root_signature):
            raise SignerError(f"{where}: its header is not signed by the first signer it names (edited)")
        given = getattr(self.store, "root", None)
        if given is not None:
            if fingerprint(header.root_key) != given:
                raise SignerError(f"{where}: its first signer {header.root!r} (key {fingerprint(header.root_key)[:16]}…) "
                                  f"is not the one given (--root {given[:16]}…)")
            return header
        trusted = trusted_public_key()
        if trusted is None:
            raise SignerError(f"{where}: no CDA key here ({KEY_DIR_ENV}) to check its header against: give its "
                              f"first signer's fingerprint (--root FINGERPRINT)")
        if doc.get("anchor_key") != trusted or not verifies(trusted, data, anchor_signature):
            raise SignerError(f"{where}: its header is not signed by this CDA's key: it was edited, or made with "
                              f"another CDA's key (give its first signer's fingerprint: --root FINGERPRINT)")
        return header

    def _write_header(self, conn: Any, store_id: str, root: str, root_key: str, root_private: str | None,
                      signers: list[list[str]], settings: list[list[str]]) -> None:
        from cda.contracts.receipt import canonical_json
        from cda.keys.signing import load_signer

        anchor = load_signer()
        doc = {"format": HEADER_FORMAT, "store": store_id, "root": root, "root_key": root_key,
               "anchor_key": anchor.public_key, "signers": signers, "settings": settings,
               "created_at": self.store.now()}
        body = canonical_json(doc)
        root_signature = "" if root_private is None else sign_bytes(root_private, body.encode("utf-8"))
        conn.execute("INSERT INTO guardian_header VALUES (1, ?, ?, ?)",
                     (body, root_signature, anchor.sign_bytes(body.encode("utf-8"))))

    # ---- registering
    def register_root(self, signer_id: str, public_key: str, private_hex: str | None = None) -> str:
        """Register the file's first signer and write the header naming it (its key signs the
        header when ``private_hex`` is given); returns its fingerprint. Refused once the file has
        a signer."""
        _check_signer_id(signer_id)
        if not _is_hex_key(public_key):
            raise SignerError(f"signer {signer_id!r}: a public key is 64 lowercase hex digits")
        if private_hex is not None and public_key_of(private_hex) != public_key:
            raise SignerError(f"the key given is not {signer_id!r}'s")
        with self.store.transaction() as conn:
            if conn.execute("SELECT COUNT(*) FROM signers").fetchone()[0] or conn.execute(
                    "SELECT 1 FROM guardian_header").fetchone():
                raise SignerError(f"{self.store.where} has its first signer already")
            self._write_header(conn, secrets.token_hex(16), signer_id, public_key, private_hex, [], [])
            conn.execute("INSERT INTO signers (signer_id, public_key, registered_at) VALUES (?, ?, ?)",
                         (signer_id, public_key, self.store.now()))
        return fingerprint(public_key)

    def register(self, signer_id: str, public_key: str, *, by: str | None = None, key: str | None = None) -> None:
        """Register a signer; the same id again is a no-op with the same key and refused with another.

        The first signer of a file is its root (:meth:`register_root`); every later one must be
        endorsed by a signer ``by`` that speaks for the file, holding its private ``key`` (hex),
        whose Ed25519 signature over the registration and the file's id is stored beside the new
        signer. So a caller who can run ``cda`` on the file but holds no signer's key cannot
        register a signer of its own."""
        _check_signer_id(signer_id)
        if not _is_hex_key(public_key):
            raise SignerError(f"signer {signer_id!r}: a public key is 64 lowercase hex digits")
        row = self.store.conn.execute("SELECT public_key FROM signers WHERE signer_id = ?", (signer_id,)).fetchone()
        if row is not None:
            if row[0] != public_key:
                raise SignerError(f"signer {signer_id!r} is registered with another key; "
                                  f"a key is replaced by registering a new signer id")
            return
        if not self.store.conn.execute("SELECT COUNT(*) FROM signers").fetchone()[0]:
            self.register_root(signer_id, public_key)
            return
        if by is None or key is None:
            raise SignerError(f"{self.store.where} has signers already: a new signer is added only with the "
                              f"signature of a registered one (by= and its key; cda task add-signer --by)")
        header = self.header()
        endorsement = self._authorise(_endorsement(signer_id, public_key, by, header.store_id), by, key)
        with self.store.transaction() as conn:
            conn.execute("INSERT INTO signers (signer_id, public_key, registered_at, endorsed_by, endorsement) "
                         "VALUES (?, ?, ?, ?, ?)", (signer_id, public_key, self.store.now(), by, endorsement))

    def anchor(self, signer_id: str, private_hex: str) -> tuple[list[str], list[str]]:
        """Anchor a file from before headers: ``signer_id`` (holding ``private_hex``) becomes its
        root, and the header adopts the signers whose endorsements chain to it and the pins they
        signed, as they were signed then. Returns (the signers adopted, the rows left speaking for
        no one). Refused when the file has a header already."""
        root_key = public_key_of(private_hex)
        with self.store.transaction() as conn:
            if conn.execute("SELECT 1 FROM guardian_header").fetchone():
                raise SignerError(f"{self.store.where} is anchored already: its header names its first signer")
            rows = {str(r[0]): (str(r[1]), r[2], r[3]) for r in conn.execute(
                "SELECT signer_id, public_key, endorsed_by, endorsement FROM signers")}
            if rows.get(signer_id, ("",))[0] != root_key:
                raise SignerError(f"{signer_id!r} is not a signer of {self.store.where} with the key given")
            given = getattr(self.store, "root", None)
            if given is not None and fingerprint(root_key) != given:
                raise SignerError(f"{signer_id!r} is not the first signer given (--root {given[:16]}…)")
            keys, adopted = {signer_id: root_key}, []
            grew = True
            while grew:  # endorsements as signed before headers (no file id), from the root down
                grew = False
                for sid, (public, by, endorsement) in sorted(rows.items()):
                    if sid in keys or by not in keys or endorsement is None:
                        continue
                    payload = _earlier(_endorsement(sid, public, str(by), ""))
                    if verifies(keys[str(by)], _canonical(payload), str(endorsement)):
                        keys[sid] = public
                        adopted.append([sid, public, str(by), str(endorsement)])
                        grew = True
            settings = [[str(k), str(v), str(by), str(sig)] for k, v, by, sig in conn.execute(
                "SELECT key, value, set_by, signature FROM guardian_config ORDER BY key")
                if by in keys and verifies(keys[str(by)], _canonical(_earlier(_setting(k, v, by, ""))), str(sig))]
            self._write_header(conn, secrets.token_hex(16), signer_id, root_key, private_hex, adopted, settings)
        return sorted(keys), sorted(set(rows) - set(keys))

    def _authorise(self, payload: Mapping[str, object], by: str, private_hex: str) -> str:
        """The Ed25519 signature (hex) of ``by`` over ``payload`` (see :meth:`sign_as`)."""
        return self.sign_as(by, private_hex, _canonical(payload), "authorise this")

    def sign_as(self, signer_id: str, private_hex: str, data: bytes, doing: str = "sign") -> str:
        """The Ed25519 signature (hex) of ``signer_id`` over ``data``; refused when it speaks for no
        one in the file (or the file's header cannot be trusted) or ``private_hex`` is not its key."""
        registered = self.public_key(_check_signer_id(signer_id))
        if registered is None:
            raise SignerError(f"{signer_id!r} does not speak for {self.store.where}: only a registered signer "
                              f"endorsed back to its first signer may {doing}")
        if public_key_of(private_hex) != registered:
            raise SignerError(f"the key given is not the one registered for {signer_id!r}")
        return sign_bytes(private_hex, data)

    # ---- who speaks for the file
    def public_key(self, signer_id: str) -> str | None:
        """The public key of ``signer_id`` when it speaks for the file: the root named by the
        header, or a signer whose endorsements chain back to it (None: it speaks for no one).
        :class:`SignerError` when the header is missing or does not verify."""
        header = self.header()
        return self._key(header, signer_id, ())

    def _key(self, header: Header, signer_id: str, asking: tuple[str, ...]) -> str | None:
        if signer_id == header.root:
            return header.root_key
        row = self.store.conn.execute("SELECT public_key, endorsed_by, endorsement FROM signers WHERE signer_id = ?",
                                      (signer_id,)).fetchone()
        if row is None or row[1] is None or row[2] is None or row[1] in asking or row[1] == signer_id:
            return None
        public_key, by, endorsement = str(row[0]), str(row[1]), str(row[2])
        endorser = self._key(header, by, (*asking, signer_id))
        payload = _endorsement(signer_id, public_key, by, header.store_id)
        if (signer_id, public_key, by, endorsement) in header.signers:
            payload = _earlier(payload)
        return public_key if endorser is not None and verifies(endorser, _canonical(payload), endorsement) else None

    def signers(self) -> list[str]:
        """Every signer id the file names (whether or not it speaks for it)."""
        return [str(r[0]) for r in self.store.conn.execute("SELECT signer_id FROM signers ORDER BY signer_id")]

    # ---- settings
    def set(self, key: str, value: str, by: str, private_hex: str) -> None:
        """Set a setting of the file, signed by ``by`` (see :func:`pin_policy_store`)."""
        header = self.header()
        signature = self._authorise(_setting(key, value, by, header.store_id), by, private_hex)
        self.store.set_setting(key, value, by, signature)

    def setting(self, key: str) -> tuple[str | None, str]:
        """A setting and, when it cannot be used, why (see :func:`pinned_setting`)."""
        where = self.store.where
        try:
            header = self.header()
        except SignerError as exc:
            return None, str(exc)
        row = self.store.conn.execute("SELECT value, set_by, signature FROM guardian_config WHERE key = ?",
                                      (key,)).fetchone()
        if row is None:
            return None, (f"{where} pins no policy store, so no decision of the guardian counts "
                          f"(a signer pins one: cda task pin-policies POLICIES --store FILE --by SIGNER)")
        value, by, signature = (str(part) for part in row)
        payload = _setting(key, value, by, header.store_id)
        if (key, value, by, signature) in header.settings:
            payload = _earlier(payload)
        signer = self._key(header, by, ())
        if signer is None or not verifies(signer, _canonical(payload), signature):
            return None, f"the pinned {key} of {where} is not signed by a signer who speaks for it ({by!r})"
        return value, ""


def pin_policy_store(registry: SignerRegistry, digest: str, by: str, private_hex: str, *,
                     model_digest: str | None = None, samples: int | None = None) -> None:
    """Pin the policy store (its :attr:`~cda.guardian.policies.PolicyStore.digest`) whose
    decisions the guardian file accepts for execution, and optionally the causal model (its
    digest) and sample count they must have been simulated with; only a signer who speaks for the
    file, with its key, may (the signature, over the value and the file's id, is stored with each
    setting and checked at every execution). Pinning again replaces the pin (a model left out is
    no longer required)."""
    if not _is_hex_key(digest):
        raise SignerError(f"a policy store digest is 64 lowercase hex digits, not {digest[:70]!r}")
    simulation = "" if model_digest is None else f"{model_digest}:{samples or 0}"
    for key, value in (("policy_digest", digest), ("simulation", simulation)):
        registry.set(key, value, by, private_hex)


def pinned_setting(registry: SignerRegistry, key: str) -> tuple[str | None, str]:
    """A pinned setting (``policy_digest``; ``simulation``: ``MODEL_DIGEST:SAMPLES`` or empty) and,
    when it cannot be used, why: (None, why) when it is not set, the header cannot be trusted, or
    its signature does not verify against a signer who speaks for the file."""
    return registry.setting(key)


def pinned_policy_digest(registry: SignerRegistry) -> tuple[str | None, str]:
    """The pinned policy store digest, or (None, why) (see :func:`pinned_setting`)."""
    return pinned_setting(registry, "policy_digest")


def signer_key_path(signer_id: str, directory: Path | None = None) -> Path:
    """Where the private key of ``signer_id`` lives: ``<key dir>/signers/<signer_id>.ed25519.key``."""
    return (directory or key_dir()) / "signers" / f"{_check_signer_id(signer_id)}.ed25519.key"


_WHAT = "a signer's key"


def create_signer_key(signer_id: str, directory: Path | None = None) -> str:
    """Make a new private key for ``signer_id`` (refused when one exists) and return its public key."""
    return public_key_of(create_key_file(signer_key_path(signer_id, directory), SignerError, _WHAT,
                                         keep_existing=False))


def load_signer_key(path: Path) -> str:
    """The private key (hex) in ``path``; refused when others can read the file or it is not a key."""
    return read_key_file(path, SignerError, _WHAT)


def sign(draft: TaskDraft, signer_id: str, private_hex: str, registry: SignerRegistry,
         clock: Clock = utc_now) -> TaskSigned:
    """The draft signed by ``signer_id``; refused (:class:`SignerError`) when the signer speaks for
    no one in the file (or the file's header cannot be trusted) or ``private_hex`` is not its
    key, and (:class:`TaskError`) when ``draft`` is not a draft."""
    if type(draft) is not TaskDraft:
        raise TaskError(f"task {draft.task_id!r} is {draft.state}: only a draft can be signed")
    signed_at = _aware(clock())
    signature = registry.sign_as(signer_id, private_hex, draft.signing_bytes(signer_id, signed_at))
    mark = Signature(signer_id=signer_id, signature=signature, signed_at=signed_at)
    return TaskSigned(**draft.carried(TaskDraft), state="signed", signature=mark)


def verify_problems(task: TaskSigned, registry: SignerRegistry) -> list[str]:
    """Why the signature on ``task`` is not to be believed (empty: it verifies against the key of
    a signer who speaks for the file)."""
    if not isinstance(task, TaskSigned):
        return [f"task {task.task_id!r} is {task.state}: it carries no signature"]
    sig = task.signature
    try:
        registered = registry.public_key(sig.signer_id)
    except SignerError as exc:
        return [str(exc)]
    if registered is None:
        return [f"the signer {sig.signer_id!r} does not speak for {registry.store.where} (not registered, or not "
                f"endorsed back to its first signer)"]
    if not verifies(registered, task.as_draft().signing_bytes(sig.signer_id, sig.signed_at), sig.signature):
        return [f"the signature does not match the task's fields under the registered key of {sig.signer_id!r} "
                f"(a field was changed after signing, or another key signed it)"]
    return []


def _aware(moment: datetime) -> datetime:
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise TaskError("the signing clock must give timezone-aware times")
    return moment
