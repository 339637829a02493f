"""Reading the text files users hand to CDA, with one clear error for every way it fails."""

from __future__ import annotations

from pathlib import Path

from cda.errors import CDAError

__all__ = ["read_text"]


def read_text(path: Path) -> str:
    """The file's text as UTF-8 (a byte-order mark some editors write first is dropped); a
    missing, unreadable or non-UTF-8 file is a ``CDAError``.

    >>> read_text(Path("/no/such/file.cda"))
    Traceback (most recent call last):
    cda.errors.CDAError: cannot read /no/such/file.cda: No such file or directory
    """
    try:
        return path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as exc:
        raise CDAError(f"cannot read {path}: not UTF-8 text (byte {exc.start} is {exc.object[exc.start]:#04x})") from None
    except OSError as exc:
        raise CDAError(f"cannot read {path}: {exc.strerror}") from None
