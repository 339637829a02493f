"""Where in a JSON input a validation error sits, written the way DSL errors name their field.

pydantic's locations are tuples (``("constraints", "soft", 0, "weight")``); CDA prints fields as
``constraints.soft[0].weight`` everywhere (DSL errors inside an Action say
``constraints.hard[0]:1:14``), so one input's errors read alike whichever check found them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import ValidationError

__all__ = ["field_path", "problem_message", "validation_problems"]

_PYDANTIC_PREFIXES = ("Value error, ", "Assertion failed, ")
"""What pydantic puts before a validator's own words (``ValueError``, ``assert``)."""


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


def problem_message(error: Mapping[str, Any]) -> str:
    """One of pydantic's errors (an item of ``ValidationError.errors()``) in the words a user
    reads: the validator's own message, without the ``Value error, `` pydantic puts before it.
    Every door that shows a validation error takes its text from here.

    >>> problem_message({"msg": "Value error, timeout_s must be 1 or more, not -1"})
    'timeout_s must be 1 or more, not -1'
    >>> problem_message({"msg": "Input should be a valid integer"})
    'Input should be a valid integer'
    """
    message = str(error.get("msg", ""))
    for prefix in _PYDANTIC_PREFIXES:
        message = message.removeprefix(prefix)
    return message


def validation_problems(exc: ValidationError) -> str:
    """Every problem pydantic found, ``field: message``, joined by ``; ``."""
    return "; ".join(f"{field_path(e['loc'])}: {problem_message(e)}" for e in exc.errors(include_url=False))
