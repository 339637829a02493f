"""Reading the files users hand to CDA: once, into bytes, with one clear error for every way it fails.

*Hash what you parsed.* Every user file CDA parses is read by :func:`read_bytes`, once, and what is
parsed is those bytes: a digest CDA pins or records (a job's key, a policy store's digest) is
taken over the same bytes (:func:`sha256_of`), never over a second read that a file swapped in
between would make differ. :func:`recording` lists, for a piece of work, every file it read and
the SHA-256 of the bytes it parsed (a job's process reports them, and its result counts only if
they are those its key names).

>>> import tempfile
>>> path = Path(tempfile.mkdtemp()) / "a.cda"
>>> _ = path.write_text("hyp a")
>>> with recording() as reads:
...     text = read_text(path)
>>> reads == {str(path.resolve()): sha256_of(b"hyp a")}
True
"""

from __future__ import annotations

import contextvars
import hashlib
import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from cda.access import readable
from cda.errors import AccessDenied, CDAError

__all__ = ["CHANGED", "KEY_DIR_ENV", "decode_text", "key_dir", "parse_json", "read_bytes", "read_json",
           "read_text", "recording", "sha256_of"]

CHANGED = "changed"
"""What :func:`recording` holds for a file read twice with different bytes."""

_READS: contextvars.ContextVar[dict[str, str] | None] = contextvars.ContextVar("cda_file_reads", default=None)


def sha256_of(data: bytes) -> str:
    """The SHA-256 (hex) of bytes read: what a pinned or recorded digest of a file is."""
    return hashlib.sha256(data).hexdigest()


@contextmanager
def recording() -> Iterator[dict[str, str]]:
    """Within it, every :func:`read_bytes` notes its file (resolved path) and the SHA-256 of what
    it read (:data:`CHANGED` when one file was read twice and differed); yields that mapping."""
    reads: dict[str, str] = {}
    token = _READS.set(reads)
    try:
        yield reads
    finally:
        _READS.reset(token)


def read_bytes(path: Path) -> bytes:
    """The bytes of the file at ``path``, read once (noted by :func:`recording` when one is in
    force); a missing or unreadable file, or a folder, is a ``CDAError``; one the current call may
    not read (:mod:`cda.access`) is :class:`~cda.errors.AccessDenied`, before anything is opened."""
    checked = readable(path)  # cda.access: a file the current call may not read is refused before it is opened
    try:
        data = checked.read_bytes()
    except OSError as exc:
        raise CDAError(f"cannot read {path}: {exc.strerror}") from None
    reads = _READS.get()
    if reads is not None:
        name, digest = str(path.resolve()), sha256_of(data)
        reads[name] = digest if reads.get(name, digest) == digest else CHANGED
    return data


def decode_text(data: bytes, path: Path | str) -> str:
    """``data`` (a file's bytes) as UTF-8 text, a byte-order mark some editors write first dropped;
    bytes that are not UTF-8 are a ``CDAError`` naming the file and the byte."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise CDAError(f"cannot read {path}: not UTF-8 text (byte {exc.start} is {exc.object[exc.start]:#04x})") from None


def read_text(path: Path) -> str:
    """The file's text as UTF-8 (:func:`read_bytes`, then :func:`decode_text`); a missing,
    unreadable or non-UTF-8 file is a ``CDAError``.

    >>> read_text(Path("/no/such/file.cda"))
    Traceback (most recent call last):
    cda.errors.CDAError: cannot read /no/such/file.cda: No such file or directory
    """
    return decode_text(read_bytes(path), path)


def parse_json(text: str, where: str, error: type[CDAError] = CDAError, *, line: int | None = None) -> Any:
    """``text`` decoded as JSON; every way the decoder fails (bad syntax, nesting deeper than
    Python's recursion limit, a number too long to convert) is an ``error`` naming ``where`` (a
    file name) and, for syntax, line:column (``line`` says which line of the file a one-line
    ``text`` is, as in a JSON-lines file).

    >>> parse_json('[' * 100000 + ']' * 100000, "deep.json")
    Traceback (most recent call last):
    cda.errors.CDAError: deep.json: not valid JSON: nested too deeply to read
    >>> parse_json('{"a": }', "x.json")
    Traceback (most recent call last):
    cda.errors.CDAError: x.json:1:7: not valid JSON: Expecting value
    """
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        at = f"{exc.lineno}:{exc.colno}" if line is None else f"{line}:{exc.colno}"
        raise error(f"{where}:{at}: not valid JSON: {exc.msg}") from None
    except RecursionError:
        at = "" if line is None else f":{line}"
        raise error(f"{where}{at}: not valid JSON: nested too deeply to read") from None
    except ValueError as exc:  # e.g. an integer longer than Python's digit limit
        at = "" if line is None else f":{line}"
        raise error(f"{where}{at}: not valid JSON: {exc}") from None


def read_json(path: Path, error: type[CDAError] = CDAError) -> Any:
    """The JSON value in the file at ``path`` (read as :func:`read_text` does); any failure is an
    ``error`` naming the file."""
    try:
        text = read_text(path)
    except AccessDenied:
        raise
    except CDAError as exc:
        raise error(str(exc)) from None
    return parse_json(text, str(path), error)


KEY_DIR_ENV = "CDA_KEY_DIR"
"""The environment variable naming the folder of CDA's signing key."""


def key_dir() -> Path:
    """Where CDA's signing key lives: ``$CDA_KEY_DIR``, else ``~/.config/cda``. Here, at the
    bottom layer, because two parts need it: the signer (:mod:`cda.keys.signing`) and the
    sandbox, which hides this folder from every check (:mod:`cda.verifiers.sandbox`)."""
    configured = os.environ.get(KEY_DIR_ENV)
    return Path(configured) if configured else Path.home() / ".config" / "cda"
