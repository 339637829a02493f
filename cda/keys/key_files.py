"""CDA's private key files: made once and atomically, read only when their owner alone can.

Every private key CDA keeps — the key that signs receipt-log heads
(:mod:`cda.keys.signing`) and each HITL signer's key (:mod:`cda.guardian.signers`) — is one
file: 32 random bytes as 64 lowercase hex digits and a newline, mode 0600, in a folder made 0700.

*Made atomically.* The key is written to a temporary file of its own (``O_EXCL``, mode 0600),
fsynced, then hard-linked to its name, which fails if the name exists: a killed process never
leaves half a key behind, and two processes making one key at once agree on one (the second
takes the first's, or is refused, as the caller asks). A key file is never overwritten.

*Read only when private.* A key file that its group or others may read is refused (``chmod 600``
it), as is a folder, a file that is not a key, or one that cannot be read; every refusal is the
caller's error class, naming the file.

>>> import tempfile, pathlib
>>> from cda.errors import CDAError
>>> path = pathlib.Path(tempfile.mkdtemp()) / "keys" / "k.key"
>>> key = create_key_file(path, CDAError, "the test key", keep_existing=False)
>>> oct(path.stat().st_mode & 0o777), read_key_file(path, CDAError, "the test key") == key
('0o600', True)
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

from cda.errors import CDAError
from cda.files import KEY_DIR_ENV

__all__ = ["create_key_file", "read_key_file"]

_HEX_DIGITS = frozenset("0123456789abcdef")


def read_key_file(path: Path, error: type[CDAError], what: str) -> str:
    """The private key (64 lowercase hex digits) in ``path``; ``error`` naming ``what`` (such as
    "the signing key") when it is a folder, others may read it, or it is not a key."""
    if path.is_dir():
        raise error(f"{path}: a directory, not {what} file")
    try:
        mode = path.stat().st_mode & 0o777
        if mode & 0o077:
            raise error(f"{path}: {what} is readable by others (mode {mode:o}); chmod 600 it")
        text = path.read_text(encoding="ascii").strip().lower()
    except (OSError, UnicodeDecodeError) as exc:
        raise error(f"{path}: cannot read {what} ({getattr(exc, 'strerror', None) or exc})") from None
    if len(text) != 64 or not set(text) <= _HEX_DIGITS:
        raise error(f"{path}: not an Ed25519 private key (64 hex digits)")
    return text


def create_key_file(path: Path, error: type[CDAError], what: str, *, keep_existing: bool) -> str:
    """Make a new private key in ``path`` and return it (hex). When ``path`` exists already (or is
    made by another process meanwhile): with ``keep_existing`` its key is read and returned,
    otherwise it is an ``error`` (a key is never overwritten)."""
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        temp = path.parent / f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}"
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            with os.fdopen(fd, "w", encoding="ascii") as handle:
                handle.write(secrets.token_bytes(32).hex() + "\n")
                handle.flush()
                os.fsync(handle.fileno())
            try:
                os.link(temp, path)
            except FileExistsError:
                if not keep_existing:
                    raise error(f"{path}: {what} exists already; it is never overwritten") from None
        finally:
            temp.unlink(missing_ok=True)
    except OSError as exc:
        raise error(f"{path}: cannot make {what} ({exc.strerror or exc}); set {KEY_DIR_ENV} to a private folder") from None
    return read_key_file(path, error, what)
