"""Who is calling: bearer tokens mapped to a principal (:mod:`cda.operations.principals`).

The ``--auth FILE`` of ``cda serve`` and ``cda mcp --http`` is JSON::

    {"tokens": [{"name": "ci", "sha256": "<hex of SHA-256 of the token>", "profile": "partner"}]}

``profile`` is the principal's role: ``partner``, ``internal`` (an internal reviewer: approves,
reads traces with a reflection approval) or ``approver`` (approves what actions wait for). Only
the hash is stored, so the file can be read by the server without holding a secret; a presented
token is hashed and compared in constant time. Without a file the server binds loopback only and
its one client is the anonymous partner that approves its own actions (:data:`OPEN`).
"""

from __future__ import annotations

import hashlib
import hmac
import json
from dataclasses import dataclass, replace
from pathlib import Path

from cda.errors import CDAError
from cda.operations.principals import Principal, anonymous

__all__ = ["OPEN", "AuthConfig", "AuthError", "Principal", "presented_token", "token_hash"]

PROFILES = ("partner", "internal", "approver")


class AuthError(CDAError, ValueError):
    """The ``--auth`` file cannot be used: not JSON, a field missing or wrong; names it."""


def presented_token(authorization: str, query_token: str | None) -> str | None:
    """The token a stream request presents: ``Authorization: Bearer <token>``, else ``?token=``
    (a browser's ``EventSource`` cannot set headers); None when neither is given.

    >>> presented_token("bearer  abc ", None), presented_token("Basic x", "q"), presented_token("", None)
    ('abc', 'q', None)
    """
    token = authorization[7:].strip() if authorization[:7].lower() == "bearer " else None
    return token or query_token


def token_hash(token: str) -> str:
    """The hex SHA-256 of a token, as the ``--auth`` file stores it.

    >>> token_hash("secret")[:12]
    '2bb80d537b1d'
    """
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class AuthConfig:
    """Known token hashes; ``None`` entries mean an open (loopback-only) server."""

    entries: tuple[tuple[str, Principal], ...] = ()
    open: bool = True

    @classmethod
    def load(cls, path: Path) -> AuthConfig:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except OSError as exc:
            raise AuthError(f"--auth {path}: cannot read: {exc.strerror or exc}") from None
        except ValueError as exc:
            raise AuthError(f"--auth {path}: not JSON: {exc}") from None
        tokens = data.get("tokens") if isinstance(data, dict) else None
        if not isinstance(tokens, list) or not tokens:
            raise AuthError(f"--auth {path}: expected {{\"tokens\": [{{\"name\", \"sha256\", \"profile\"}}, ...]}}")
        entries = []
        for i, item in enumerate(tokens):
            where = f"--auth {path}: tokens[{i}]"
            if not isinstance(item, dict):
                raise AuthError(f"{where}: expected an object")
            name, digest, profile = item.get("name"), item.get("sha256"), item.get("profile")
            if not isinstance(name, str) or not name:
                raise AuthError(f"{where}.name: a non-empty string is required")
            if not isinstance(digest, str) or len(digest) != 64 or any(c not in "0123456789abcdef" for c in digest):
                raise AuthError(f"{where}.sha256: 64 lowercase hex digits (the SHA-256 of the token) are required")
            if profile not in PROFILES:
                raise AuthError(f"{where}.profile: one of {', '.join(PROFILES)}, got {profile!r}")
            entries.append((digest, Principal(name, profile, approves=profile in ("internal", "approver"))))
        return cls(tuple(entries), open=False)

    def with_code(self) -> AuthConfig:
        """The same tokens, the internal role allowed to run code (``--allow-code``)."""
        return replace(self, entries=tuple((d, replace(who, code=who.role == "internal")) for d, who in self.entries))

    def principal(self, token: str | None) -> Principal | None:
        """The caller a token names, or None (unknown or missing); an open server: its one
        anonymous client."""
        if self.open:
            return anonymous()
        if not token:
            return None
        digest = token_hash(token)
        found = None
        for known, who in self.entries:  # compare with every entry: the time does not say which matched
            if hmac.compare_digest(known, digest):
                found = who
        return found


OPEN = AuthConfig()
