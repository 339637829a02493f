"""Ed25519 over bytes, in the three forms CDA uses: a private key's public key, a signature,
a check. Keys and signatures are hex text, as they are kept in files and rows.

``cryptography`` is imported when one of these runs, never by ``import cda``.

>>> private = "11" * 32
>>> signature = sign_bytes(private, b"hello")
>>> verifies(public_key_of(private), b"hello", signature), verifies(public_key_of(private), b"hullo", signature)
(True, False)
"""

from __future__ import annotations

from typing import Any

__all__ = ["private_key_of", "public_key_of", "sign_bytes", "verifies"]


def public_key_of(private_hex: str) -> str:
    """The public key (hex) of an Ed25519 private key (hex); ``ValueError`` for one that is not."""
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
    from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

    try:
        key = Ed25519PrivateKey.from_private_bytes(bytes.fromhex(private_hex))
    except ValueError:
        raise ValueError("not an Ed25519 private key (64 hex digits)") from None
    return key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw).hex()


def private_key_of(private_hex: str) -> Any:
    """The loaded private key (``cryptography``'s object) of ``private_hex``: loading costs as much
    as a signature, so a signer that signs many times keeps it (:class:`cda.keys.signing.Signer`)."""
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    return Ed25519PrivateKey.from_private_bytes(bytes.fromhex(private_hex))


def sign_bytes(private_key: str | Any, data: bytes) -> str:
    """The Ed25519 signature (hex) over ``data`` of a private key, in hex or as :func:`private_key_of` loaded it."""
    key = private_key_of(private_key) if isinstance(private_key, str) else private_key
    return str(key.sign(data).hex())


def verifies(public_hex: str | None, data: bytes, signature: str) -> bool:
    """Whether ``signature`` (hex) is the Ed25519 signature of ``public_hex``'s key over ``data``
    (False for no key, or a key or signature that is not hex of the right length)."""
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    if public_hex is None:
        return False
    try:
        Ed25519PublicKey.from_public_bytes(bytes.fromhex(public_hex)).verify(bytes.fromhex(signature), data)
    except (ValueError, InvalidSignature):
        return False
    return True
