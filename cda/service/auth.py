"""Who is calling: bearer tokens mapped to a profile (``partner`` | ``internal``).

The ``--auth FILE`` of ``cda serve`` is JSON::

    {"tokens": [{"name": "ci", "sha256": "<hex of SHA-256 of the token>", "profile": "partner"}]}

Only the hash is stored, so the file can be read by the server without holding a secret; a
presented token is hashed and compared in constant time. Without a file the server binds
loopback only and every client is a partner (:data:`OPEN`).
"""

from __future__ import annotations

import hashlib
import hmac
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from cda.errors import CDAError

__all__ = ["OPEN", "AuthConfig", "AuthError", "Principal", "presented_token", "token_hash"]

Profile = Literal["partner", "internal"]


class AuthError(CDAError, ValueError):
    """The ``--auth`` file cannot be used: not JSON, a field missing or wrong; names it."""


@dataclass(frozen=True)
class Principal:
    """A caller the server recognised: the token's name and its profile."""

    name: str
    profile: Profile


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
            if profile not in ("partner", "internal"):
                raise AuthError(f"{where}.profile: 'partner' or 'internal', got {profile!r}")
            entries.append((digest, Principal(name, profile)))
        return cls(tuple(entries), open=False)

    def principal(self, token: str | None) -> Principal | None:
        """The caller a token names, or None (unknown or missing); an open server: a partner."""
        if self.open:
            return Principal("anonymous", "partner")
        if not token:
            return None
        digest = token_hash(token)
        found = None
        for known, who in self.entries:  # compare with every entry: the time does not say which matched
            if hmac.compare_digest(known, digest):
                found = who
        return found


OPEN = AuthConfig()
