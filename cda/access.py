"""What the current call may touch: files under allowed roots, user code, network egress.

One :class:`Access` is in force for each call (a context variable): the operation gate
(:mod:`cda.operations.gate`) sets it from the caller's principal before the operation runs, and
the places where CDA reads a user's file (:func:`cda.files.read_text`, the Ken loader, the WCNF
reader, the conductor's tool paths), runs a user's code (function checks) or opens a network
connection (the LLM provider) consult it. So a door that forgot a check cannot let a path through:
the reader refuses it, whatever door the call came in by, and ``ken "…"`` anywhere in DSL text is
caught where the graph is loaded.

A path is resolved first (``..`` and symbolic links, :func:`os.path.realpath`), then compared with
the roots (resolved the same way), so ``root/../etc/passwd`` and a symlink inside a root that
points out of it are both refused. The refusal never says whether the file exists.

The default, outside any door, is :data:`UNRESTRICTED`: a Python program calling ``cda.solve`` is
its own user. Threads do not inherit a context variable: code that hands a call to a pool or
another process carries the :class:`Access` along and re-enters it with :func:`granted`.

>>> import tempfile, pathlib
>>> root = pathlib.Path(tempfile.mkdtemp())
>>> with granted(Access(roots=(root,))):
...     readable(root / "a" / ".." / "b.cda") == (root / "b.cda").resolve()
True
>>> with granted(Access(roots=(root,))):
...     readable(root / ".." / "secret")
Traceback (most recent call last):
cda.errors.AccessDenied: reading files outside the allowed roots is not allowed for this caller
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from cda.errors import AccessDenied

__all__ = ["Access", "EGRESS_RANK", "EgressClass", "NOTHING", "UNRESTRICTED", "current", "granted", "may_egress",
           "may_run_code", "readable", "resolved_root", "under", "with_root"]

EgressClass = Literal["local", "partner", "external"]
EGRESS_RANK: dict[str, int] = {"local": 0, "partner": 1, "external": 2}


@dataclass(frozen=True)
class Access:
    """What a call may touch. ``roots``: ``None`` reads any file the process can; a tuple reads
    only below those folders (empty: no file at all). ``code``: may run a user's ``functions``.
    ``egress``: the highest network egress class it may use without an approval."""

    roots: tuple[Path, ...] | None = None
    code: bool = True
    egress: EgressClass = "external"
    who: str = "this caller"
    #: what was refused under this access, ``(need, reason)``, for the caller to receipt
    refused: list[tuple[str, str]] = field(default_factory=list, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.roots is not None:
            object.__setattr__(self, "roots", tuple(resolved_root(r) for r in self.roots))

    @property
    def reads_files(self) -> bool:
        return self.roots is None or bool(self.roots)


UNRESTRICTED = Access()
"""A local program's own call: any file, code, any egress (its policies decide)."""

NOTHING = Access(roots=(), code=False, egress="local", who="a remote caller")
"""A caller that may read no file, run no code and send nothing out."""

_current: ContextVar[Access] = ContextVar("cda_access", default=UNRESTRICTED)


def resolved_root(path: Path | str) -> Path:
    """A root as the checks compare it: absolute, ``..`` and symbolic links resolved."""
    return Path(os.path.realpath(os.path.abspath(os.fspath(path))))


def current() -> Access:
    """The :class:`Access` in force for this call."""
    return _current.get()


@contextmanager
def granted(access: Access) -> Iterator[Access]:
    """Run the block under ``access`` (restored afterwards, also on an error)."""
    token = _current.set(access)
    try:
        yield access
    finally:
        _current.reset(token)


def under(path: Path, roots: tuple[Path, ...]) -> bool:
    """Whether the resolved ``path`` is one of ``roots`` or inside one (``roots`` resolved)."""
    return any(path == root or path.is_relative_to(root) for root in roots)


def readable(path: Path | str, access: Access | None = None) -> Path:
    """``path`` resolved, when the call may read it; else :class:`~cda.errors.AccessDenied`
    (the same words whether or not the file exists). Every reader of a user's file calls this."""
    access = access if access is not None else _current.get()
    if access.roots is None:
        return Path(path)
    given = os.fspath(path)
    if not access.roots:
        raise _refuse(access, "files", f"reading files is not allowed for {access.who}", given)
    try:
        resolved = Path(os.path.realpath(os.path.abspath(given)))
    except (OSError, ValueError):  # a NUL byte, a name the OS refuses: not readable either way
        raise _refuse(access, "files", f"reading files outside the allowed roots is not allowed for {access.who}",
                      given) from None
    if not under(resolved, access.roots):
        raise _refuse(access, "files", f"reading files outside the allowed roots is not allowed for {access.who}", given)
    return resolved


def _refuse(access: Access, need: str, reason: str, file: str | None = None) -> AccessDenied:
    access.refused.append((need, reason))
    return AccessDenied(reason, need=need, file=file)


def with_root(access: Access, root: Path) -> Access:
    """``access`` that also reads below ``root`` (a folder the call made for itself: text it was
    sent, written to a temporary file); the refusals keep being recorded on the same list."""
    if access.roots is None:
        return access
    wider = Access(roots=(*access.roots, root), code=access.code, egress=access.egress, who=access.who)
    object.__setattr__(wider, "refused", access.refused)
    return wider


def may_run_code(access: Access | None = None) -> None:
    """Refuse (:class:`~cda.errors.AccessDenied`) when the call may not run a user's code."""
    access = access if access is not None else _current.get()
    if not access.code:
        raise _refuse(access, "code", f"running user code (functions) is not allowed for {access.who}")


def may_egress(egress_class: str, access: Access | None = None) -> None:
    """Refuse (:class:`~cda.errors.AccessDenied`) a connection of ``egress_class`` above the cap."""
    access = access if access is not None else _current.get()
    if EGRESS_RANK.get(egress_class, 3) > EGRESS_RANK[access.egress]:
        raise _refuse(access, "egress", f"network egress '{egress_class}' is above the cap '{access.egress}' "
                      f"for {access.who}")
