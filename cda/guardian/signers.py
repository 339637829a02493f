"""Human-in-the-loop signatures on task drafts: a signer registry and Ed25519 over canonical bytes.

*The registry* (the ``signers`` table of the guardian's file) maps a ``signer_id`` to the Ed25519
public key that speaks for it. A signer is registered once; registering another key under the
same id is refused (a key is rotated by a new signer id), so a signature can never be made to
verify by swapping the registry's key behind it.

*Authority.* The first signer of a guardian file needs none (whoever makes the file owns it);
every later signer, and the pinned policy store (:func:`pin_policy_store`: the one store whose
decisions :func:`cda.guardian.execution.execute` accepts), must be authorised by a registered
signer's Ed25519 signature, which is stored beside what it authorised and checked again when used.

*Signing* (:func:`sign`) refuses a signer that is not registered and a private key whose public
key is not the registered one. The signature covers :meth:`TaskDraft.signing_bytes
<cda.guardian.tasks.TaskDraft.signing_bytes>`: the canonical JSON
(:func:`cda.contracts.receipt.canonical_json`) of every field of the draft, the signer's id,
``HITL`` and the signing time, so none of them can be changed afterwards.

*Verifying* (:func:`verify_problems`) re-derives those bytes from the signed task and checks them
against the registered key: a changed field, a changed signer id or time, a signature made by
another key, or an unknown signer is a problem, named.

*Keys* live where CDA's receipt signing key lives (:func:`cda.files.key_dir`: ``$CDA_KEY_DIR`` or
``~/.config/cda``, a folder the check sandbox hides), under ``signers/<signer_id>.ed25519.key``:
the raw private key in hex, mode 0600 in a 0700 folder, made atomically; a key file others can
read is refused. The seed asks for HSM-held keys in production; a key file is the local stand-in
(:func:`sign` takes the private key's hex, so a caller backed by an HSM can pass its own signer).

``cryptography`` is imported only when a key is made, loaded or a signature checked.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path

from cda.errors import SigningError
from cda.files import KEY_DIR_ENV, key_dir
from cda.guardian.store import Clock, GuardianStore, is_identifier, utc_now
from cda.guardian.tasks import ID_PATTERN, ID_PUNCTUATION, Signature, TaskDraft, TaskError, TaskSigned

__all__ = [
    "SignerError",
    "SignerRegistry",
    "create_signer_key",
    "endorse",
    "endorsed",
    "pin_policy_store",
    "pinned_policy_digest",
    "pinned_setting",
    "load_signer_key",
    "public_key_of",
    "sign",
    "signer_key_path",
    "verify_problems",
]

_HEX_DIGITS = frozenset("0123456789abcdef")
REGISTRATION_FORMAT = "cda-signer-registration-v1"
SETTING_FORMAT = "cda-guardian-setting-v1"


def _is_hex_key(value: object) -> bool:
    """32 bytes as 64 lowercase hex digits."""
    return isinstance(value, str) and len(value) == 64 and set(value) <= _HEX_DIGITS


class SignerError(SigningError):
    """A signer or key that cannot sign: not registered, not the registered key, unreadable."""


def _check_signer_id(signer_id: str) -> str:
    if not is_identifier(signer_id, ID_PUNCTUATION):
        raise SignerError(f"a signer id matches {ID_PATTERN}, not {signer_id!r}")
    return signer_id


class SignerRegistry:
    """``signer_id`` -> Ed25519 public key (hex), in the guardian's store."""

    def __init__(self, store: GuardianStore) -> None:
        self.store = store

    def register(self, signer_id: str, public_key: str, *, by: str | None = None, key: str | None = None) -> None:
        """Register a signer; the same id again is a no-op with the same key and refused with another.

        Who may add a signer: the first signer of a file needs no authority (whoever creates
        the guardian file owns it); every later one must be endorsed by a registered signer
        ``by`` holding its private ``key`` (hex), whose Ed25519 signature over the registration
        is stored beside the new signer. So a caller who can run ``cda`` on the file but holds
        no signer's key cannot register a signer of its own."""
        _check_signer_id(signer_id)
        if not _is_hex_key(public_key):
            raise SignerError(f"signer {signer_id!r}: a public key is 64 lowercase hex digits")
        with self.store.transaction() as conn:
            row = conn.execute("SELECT public_key FROM signers WHERE signer_id = ?", (signer_id,)).fetchone()
            if row is not None:
                if row[0] != public_key:
                    raise SignerError(f"signer {signer_id!r} is registered with another key; "
                                      f"a key is replaced by registering a new signer id")
                return
            endorsement = None
            if conn.execute("SELECT COUNT(*) FROM signers").fetchone()[0]:
                if by is None or key is None:
                    raise SignerError(f"{self.store.where} has signers already: a new signer is added only with the "
                                      f"signature of a registered one (by= and its key; cda task add-signer --by)")
                payload = {"format": REGISTRATION_FORMAT, "signer_id": signer_id, "public_key": public_key, "by": by}
                endorsement = endorse(payload, by, key, self)
            conn.execute("INSERT INTO signers (signer_id, public_key, registered_at, endorsed_by, endorsement) "
                         "VALUES (?, ?, ?, ?, ?)", (signer_id, public_key, self.store.now(), by if endorsement else None,
                                                    endorsement))

    def public_key(self, signer_id: str, _asking: tuple[str, ...] = ()) -> str | None:
        """The registered public key of ``signer_id`` (None: not a registered signer). Every signer
        after the file's first counts only while its endorsement verifies against its endorser's
        key, itself checked the same way up to the first signer: a row written into the file by
        hand, past :meth:`register`, speaks for no one."""
        conn = self.store.conn
        row = conn.execute("SELECT public_key, endorsed_by, endorsement, rowid FROM signers WHERE signer_id = ?",
                           (signer_id,)).fetchone()
        if row is None:
            return None
        public_key, by, endorsement, rowid = str(row[0]), row[1], row[2], row[3]
        if rowid == conn.execute("SELECT MIN(rowid) FROM signers").fetchone()[0]:
            return public_key
        if by is None or endorsement is None or by in _asking or by == signer_id:
            return None
        payload = {"format": REGISTRATION_FORMAT, "signer_id": signer_id, "public_key": public_key, "by": by}
        return public_key if _verifies(self.public_key(by, (*_asking, signer_id)), payload, endorsement) else None

    def signers(self) -> list[str]:
        return [str(r[0]) for r in self.store.conn.execute("SELECT signer_id FROM signers ORDER BY signer_id")]


def endorse(payload: Mapping[str, object], by: str, private_hex: str, registry: SignerRegistry) -> str:
    """The Ed25519 signature (hex) of registered signer ``by`` over ``payload``'s canonical JSON;
    refused when ``by`` is not registered or ``private_hex`` is not its registered key."""
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    from cda.contracts.receipt import canonical_json

    registered = registry.public_key(_check_signer_id(by))
    if registered is None:
        raise SignerError(f"{by!r} is not in the signer registry: only a registered signer may authorise this")
    if public_key_of(private_hex) != registered:
        raise SignerError(f"the key given is not the one registered for {by!r}")
    key = Ed25519PrivateKey.from_private_bytes(bytes.fromhex(private_hex))
    return key.sign(canonical_json(dict(payload)).encode("utf-8")).hex()


def endorsed(payload: Mapping[str, object], by: str, signature: str, registry: SignerRegistry) -> bool:
    """Whether ``signature`` is registered signer ``by``'s over ``payload`` (see :func:`endorse`)."""
    return _verifies(registry.public_key(by), payload, signature)


def _verifies(public_hex: str | None, payload: Mapping[str, object], signature: str) -> bool:
    """Whether ``signature`` (hex) is the Ed25519 signature of ``public_hex``'s key over
    ``payload``'s canonical JSON (False for no key)."""
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    from cda.contracts.receipt import canonical_json

    if public_hex is None:
        return False
    try:
        Ed25519PublicKey.from_public_bytes(bytes.fromhex(public_hex)).verify(
            bytes.fromhex(signature), canonical_json(dict(payload)).encode("utf-8"))
    except (ValueError, InvalidSignature):
        return False
    return True


def _pin_payload(key: str, value: str, by: str) -> dict[str, object]:
    return {"format": SETTING_FORMAT, "key": key, "value": value, "by": by}


def pin_policy_store(registry: SignerRegistry, digest: str, by: str, private_hex: str, *,
                     model_digest: str | None = None, samples: int | None = None) -> None:
    """Pin the policy store (its :attr:`~cda.guardian.policies.PolicyStore.digest`) whose
    decisions the guardian file accepts for execution, and optionally the causal model (its
    digest) and sample count they must have been simulated with; only a registered signer, with
    its key, may (the signature is stored with each setting and checked at every execution).
    Pinning again replaces the pin (a model left out is no longer required)."""
    if not _is_hex_key(digest):
        raise SignerError(f"a policy store digest is 64 lowercase hex digits, not {digest[:70]!r}")
    simulation = "" if model_digest is None else f"{model_digest}:{samples or 0}"
    for key, value in (("policy_digest", digest), ("simulation", simulation)):
        registry.store.set_setting(key, value, by, endorse(_pin_payload(key, value, by), by, private_hex, registry))


def pinned_setting(registry: SignerRegistry, key: str) -> tuple[str | None, str]:
    """A pinned setting (``policy_digest``; ``simulation``: ``MODEL_DIGEST:SAMPLES`` or empty) and,
    when it cannot be used, why: (None, why) when it is not set or its signature does not verify
    against the registered signer that set it."""
    row = registry.store.conn.execute("SELECT value, set_by, signature FROM guardian_config WHERE key = ?",
                                      (key,)).fetchone()
    if row is None:
        return None, (f"{registry.store.where} pins no policy store, so no decision of the guardian counts "
                      f"(a signer pins one: cda task pin-policies POLICIES --store FILE --by SIGNER)")
    value, by, signature = (str(part) for part in row)
    if not endorsed(_pin_payload(key, value, by), by, signature, registry):
        return None, f"the pinned {key} of {registry.store.where} is not signed by the registered signer {by!r}"
    return value, ""


def pinned_policy_digest(registry: SignerRegistry) -> tuple[str | None, str]:
    """The pinned policy store digest, or (None, why) (see :func:`pinned_setting`)."""
    return pinned_setting(registry, "policy_digest")


def signer_key_path(signer_id: str, directory: Path | None = None) -> Path:
    """Where the private key of ``signer_id`` lives: ``<key dir>/signers/<signer_id>.ed25519.key``."""
    return (directory or key_dir()) / "signers" / f"{_check_signer_id(signer_id)}.ed25519.key"


def public_key_of(private_hex: str) -> str:
    """The public key (hex) of an Ed25519 private key (hex)."""
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
    from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

    try:
        key = Ed25519PrivateKey.from_private_bytes(bytes.fromhex(private_hex))
    except ValueError:
        raise SignerError("not an Ed25519 private key (64 hex digits)") from None
    return key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw).hex()


def create_signer_key(signer_id: str, directory: Path | None = None) -> str:
    """Make a new private key for ``signer_id`` (refused when one exists) and return its public key."""
    path = signer_key_path(signer_id, directory)
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        temp = path.parent / f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}"
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        private = secrets.token_bytes(32).hex()
        try:
            with os.fdopen(fd, "w", encoding="ascii") as handle:
                handle.write(private + "\n")
                handle.flush()
                os.fsync(handle.fileno())
            os.link(temp, path)  # never over an existing key
        finally:
            temp.unlink(missing_ok=True)
    except FileExistsError:
        raise SignerError(f"{path}: a key for {signer_id!r} exists already; it is never overwritten") from None
    except OSError as exc:
        raise SignerError(f"{path}: cannot make the signer's key ({exc.strerror or exc}); "
                          f"set {KEY_DIR_ENV} to a private folder") from None
    return public_key_of(private)


def load_signer_key(path: Path) -> str:
    """The private key (hex) in ``path``; refused when others can read the file or it is not a key."""
    if path.is_dir():
        raise SignerError(f"{path}: a directory, not a signer's key file")
    try:
        mode = path.stat().st_mode & 0o777
        if mode & 0o077:
            raise SignerError(f"{path}: the signer's key is readable by others (mode {mode:o}); chmod 600 it")
        content = path.read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise SignerError(f"{path}: cannot read the signer's key ({getattr(exc, 'strerror', None) or exc})") from None
    if not _is_hex_key(content):
        raise SignerError(f"{path}: not an Ed25519 private key (64 lowercase hex digits)")
    return content


def sign(draft: TaskDraft, signer_id: str, private_hex: str, registry: SignerRegistry,
         clock: Clock = utc_now) -> TaskSigned:
    """The draft signed by ``signer_id``; refused (:class:`SignerError`) when the signer is not
    registered or ``private_hex`` is not the registered signer's key, and (:class:`TaskError`)
    when ``draft`` is not a draft."""
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    if type(draft) is not TaskDraft:
        raise TaskError(f"task {draft.task_id!r} is {draft.state}: only a draft can be signed")
    registered = registry.public_key(_check_signer_id(signer_id))
    if registered is None:
        raise SignerError(f"{signer_id!r} is not in the signer registry: only registered signers may sign")
    if public_key_of(private_hex) != registered:
        raise SignerError(f"the key given is not the one registered for {signer_id!r}")
    signed_at = _aware(clock())
    key = Ed25519PrivateKey.from_private_bytes(bytes.fromhex(private_hex))
    signature = key.sign(draft.signing_bytes(signer_id, signed_at)).hex()
    mark = Signature(signer_id=signer_id, signature=signature, signed_at=signed_at)
    return TaskSigned(**draft.carried(TaskDraft), state="signed", signature=mark)


def verify_problems(task: TaskSigned, registry: SignerRegistry) -> list[str]:
    """Why the signature on ``task`` is not to be believed (empty: it verifies against the
    registered key of its signer)."""
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    if not isinstance(task, TaskSigned):
        return [f"task {task.task_id!r} is {task.state}: it carries no signature"]
    sig = task.signature
    registered = registry.public_key(sig.signer_id)
    if registered is None:
        return [f"the signer {sig.signer_id!r} is not in the signer registry"]
    try:
        Ed25519PublicKey.from_public_bytes(bytes.fromhex(registered)).verify(
            bytes.fromhex(sig.signature), task.as_draft().signing_bytes(sig.signer_id, sig.signed_at))
    except (ValueError, InvalidSignature):
        return [f"the signature does not match the task's fields under the registered key of {sig.signer_id!r} "
                f"(a field was changed after signing, or another key signed it)"]
    return []


def _aware(moment: datetime) -> datetime:
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise TaskError("the signing clock must give timezone-aware times")
    return moment
