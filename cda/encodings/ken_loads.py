"""The Ken graphs a problem's own ``ken "…"`` statements name, loaded and merged.

One function for every path from DSL text to a problem (``cda solve`` through :mod:`cda.api`, an
Action's ``dsl`` through :mod:`cda.actions.problem`): a ``ken`` line that one path read and
another ignored gave two answers to one text. Files are read through :mod:`cda.ken.loaders`,
which asks the current call's :class:`~cda.access.Access` (a caller that names no file here is
refused where the line is, not after).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from cda.encodings.ast import KenLoad
from cda.errors import AccessDenied, CDAError, DSLError

__all__ = ["with_ken_loads"]


def with_ken_loads(statements: Sequence[Any], ken: Any, base: Path, filename: str | None) -> Any:
    """``ken`` (a ``KenGraph`` or ``None``) merged with every graph the ``ken`` statements name,
    relative paths read from ``base``; ``ken`` itself when there are none. A file that cannot be
    read is a :class:`~cda.errors.DSLError` at the statement's line and column."""
    loads = [st for st in statements if isinstance(st, KenLoad)]
    if not loads:
        return ken
    from cda.ken.graph import KenGraph
    from cda.ken.loaders import load_ken

    merged = ken if ken is not None else KenGraph()
    for st in loads:
        try:
            merged = merged.merged(load_ken(base / st.path))
        except AccessDenied as exc:  # cda.access: this caller reads no file here; where the line is
            exc.path = [st.pos[0], st.pos[1]]
            raise
        except CDAError as exc:
            raise DSLError(str(exc), line=st.pos[0], column=st.pos[1], filename=filename) from None
    return merged
