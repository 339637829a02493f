"""Constructors for frozen dataclasses made by the thousand (syntax trees, clauses).

Why: a frozen dataclass's ``__init__`` sets each field through ``object.__setattr__``, a call
per field; reading and grounding a large problem make a few objects per clause, and that was a
third of reading it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["fast_constructor"]

_T = TypeVar("_T")


def fast_constructor(cls: type[_T]) -> Callable[..., _T]:
    """A constructor for the frozen dataclass ``cls``, positional, that fills ``__dict__`` directly.

    Why: a frozen dataclass's ``__init__`` sets each field through ``object.__setattr__``; that
    was a third of reading a large problem. The object made is the one ``cls(...)`` makes (same
    class, same ``__dict__``, so equal and hashed alike). A class this does not fit (slots,
    ``__post_init__``, fields outside ``__init__``) gets its own constructor back.
    """
    fields = dataclasses.fields(cls)  # type: ignore[arg-type]
    if "__slots__" in vars(cls) or hasattr(cls, "__post_init__") or not all(f.init for f in fields):
        return cls
    names = [f.name for f in fields]
    source = "\n".join(
        [f"def make({', '.join(names)}):", "    obj = new(cls)", "    fill = obj.__dict__"]
        + [f"    fill[{name!r}] = {name}" for name in names]
        + ["    return obj"]
    )
    namespace: dict[str, Any] = {"new": object.__new__, "cls": cls}
    exec(source, namespace)  # as dataclasses builds __init__ itself
    make: Callable[..., _T] = namespace["make"]
    return make
