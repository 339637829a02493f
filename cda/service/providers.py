"""Pluggable local providers of sub-Actions (spec §4 escalation: ``research``, ``sandbox``, ``default``).

A provider turns a ``source`` name into the text of an evidence artifact. The one shipped here
reads a folder (``--providers DIR``: ``DIR/<ability>/<source>.txt``), which is what a local
research corpus or a sandbox's recorded results look like; another provider (a crawler behind
approvals, a real sandbox) plugs in by implementing :class:`Provider`. The text is what the
consuming CDA action adopts as an observation when it binds the output (``observe ...`` lines).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Protocol

from cda.errors import CDAError

__all__ = ["SOURCE", "FolderProvider", "Provider", "ProviderError"]

SOURCE = re.compile(r"^[A-Za-z0-9_\-]{1,64}$")
MAX_TEXT = 1 << 20


class ProviderError(CDAError, ValueError):
    """A provider could not produce the output (no such source, too large, not text)."""


class Provider(Protocol):
    def produce(self, source: str) -> str:
        """The current text of ``source``; a new revision whenever it changes."""
        ...


class FolderProvider:
    """``folder/<source>.txt``, read fresh each time (so an edited file is a new revision)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def sources(self) -> list[str]:
        """The source names this folder holds now (what finds the source of a sub-action a server
        before the state file spawned: its id keeps only a hash of the name)."""
        try:
            return sorted(p.stem for p in self.folder.glob("*.txt") if SOURCE.match(p.stem))
        except OSError:
            return []

    def produce(self, source: str) -> str:
        if not SOURCE.match(source):
            raise ProviderError(f"source {source[:80]!r}: 1-64 of A-Z a-z 0-9 _ -")
        path = self.folder / f"{source}.txt"
        try:
            data = path.read_bytes()
        except OSError:
            raise ProviderError(f"source {source!r}: this server's provider has no such source") from None
        if len(data) > MAX_TEXT:
            raise ProviderError(f"source {source!r}: larger than {MAX_TEXT} bytes")
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            raise ProviderError(f"source {source!r}: not UTF-8 text") from None
