"""Where in a JSON input a validation error sits, written the way DSL errors name their field.

pydantic's locations are tuples (``("constraints", "soft", 0, "weight")``); CDA prints fields as
``constraints.soft[0].weight`` everywhere (DSL errors inside an Action say
``constraints.hard[0]:1:14``), so one input's errors read alike whichever check found them.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import ValidationError

__all__ = ["field_path", "validation_problems"]


def field_path(loc: Sequence[int | str]) -> str:
    """``loc`` as a field path: names joined by dots, list indices in brackets.

    >>> field_path(("constraints", "soft", 0, "weight"))
    'constraints.soft[0].weight'
    >>> field_path(())
    '(top level)'
    """
    text = ""
    for part in loc:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text or "(top level)"


def validation_problems(exc: ValidationError) -> str:
    """Every problem pydantic found, ``field: message``, joined by ``; ``."""
    return "; ".join(f"{field_path(e['loc'])}: {e['msg']}" for e in exc.errors(include_url=False))
