r"""Checking a tool's arguments against a JSON Schema whose regular expressions may backtrack.

An upstream MCP server writes its tools' schemas and the agent writes the arguments; JSON Schema's
``pattern`` (and ``patternProperties``, whose regexes meet property names the agent chose) are
matched by Python's ``re``, which backtracks with no time limit: ``^(a+)+$`` against ``"a" * 28 +
"!"`` holds a thread for seconds and twice as long for each more character. So a schema is read
once, when its tool is registered: a regex with a repetition inside a repetition, an alternation
inside a repetition or a backreference (the forms whose matching can take exponential time) makes
every check of that tool's arguments run in a child process with a deadline. A check that does not
finish is a refusal (the call is not made): a guardian that cannot tell fails closed.

One common shape is read as safe although it nests repetitions: a repetition whose body is single
characters and repetitions of one character, where every inner repetition is followed — before the
next one, going round into the next iteration — by a required character it cannot match
(``^([a-z]+\.)+[a-z]+$``, ``(\.\w+)*``, ``(\d{1,3}\.){3}``). Where each iteration ends and each inner
run stops is then decided by the text, so there is one way to match and no exponential search (a
check in a child costs 0.1–0.3 s a call under load). Whether the separator is outside a run is
asked of ``re`` itself, character by character, under the pattern's flags; anything else nested —
``(a+)+``, ``(a+,a+)+``, ``(a+a+\.)+``, ``(x|xy)*`` — still goes to the child.
"""

from __future__ import annotations

import json
import secrets
import subprocess
import sys
from collections.abc import Iterator, Mapping
from decimal import Decimal
from typing import Any

__all__ = ["CHILD_SECONDS", "backtracking_patterns", "errors_in_child"]

#: how long a child process may take to check one call's arguments
CHILD_SECONDS = 5.0

_REPEATS = ("MAX_REPEAT", "MIN_REPEAT")


def _regexes(schema: Any) -> Iterator[str]:
    """Every regex a schema holds: ``pattern`` values and ``patternProperties`` keys, at any depth."""
    stack = [schema]
    while stack:
        node = stack.pop()
        if isinstance(node, Mapping):
            for key, value in node.items():
                if key == "pattern" and isinstance(value, str):
                    yield value
                elif key == "patternProperties" and isinstance(value, Mapping):
                    yield from (k for k in value if isinstance(k, str))
                stack.append(value)
        elif isinstance(node, list):
            stack.extend(node)


_SINGLE = ("LITERAL", "NOT_LITERAL", "IN", "ANY")
"""The items that match exactly one character."""

_MAX_SEPARATOR = 1024
"""A separator is checked character by character: a class of more characters is not used as one."""


def _separator_chars(item: Any) -> list[str] | None:
    r"""The characters a one-character item matches, when they are few enough to list: a literal
    or a class of literals and ranges (not negated, no ``\w``-like category)."""
    op, av = item
    if str(op) == "LITERAL":
        return [chr(av)]
    if str(op) != "IN":
        return None
    chars: list[str] = []
    for sub_op, sub_av in av:
        if str(sub_op) == "LITERAL":
            chars.append(chr(sub_av))
        elif str(sub_op) == "RANGE" and sub_av[1] - sub_av[0] < _MAX_SEPARATOR:
            chars.extend(chr(c) for c in range(sub_av[0], sub_av[1] + 1))
        else:
            return None
        if len(chars) > _MAX_SEPARATOR:
            return None
    return chars


def _delimited(body: Any, state: Any) -> bool:
    """Whether a repetition of ``body`` matches one way only, for the shape the module docstring
    describes; False for anything else (the caller then counts the repetition as risky)."""
    from re import _compiler, _parser  # type: ignore[attr-defined]

    items: list[Any] = []
    stack = list(reversed(list(body)))
    while stack:  # groups without flags of their own are flattened: they do not change what matches
        op, av = stack.pop()
        if str(op) == "SUBPATTERN" and not av[1] and not av[2]:
            stack.extend(reversed(list(av[3])))
        else:
            items.append((op, av))
    runs: list[int] = []  # positions of repetitions that may match more than one length
    for i, (op, av) in enumerate(items):
        if str(op) in _SINGLE:
            continue
        if str(op) not in _REPEATS or len(av[2]) != 1 or str(av[2][0][0]) not in _SINGLE:
            return False
        if av[0] != av[1]:
            runs.append(i)

    def matcher(item: Any) -> Any:
        return _compiler.compile(_parser.SubPattern(state, [item]), state.flags)

    for i in runs:
        run = matcher(items[i][1][2][0])
        for k in range(1, len(items) + 1):  # onwards from the run, round into the next iteration
            op, av = items[(i + k) % len(items)]
            if (i + k) % len(items) in runs:
                return False  # another run (or this one again) with no separator between
            chars = _separator_chars((op, av)) if str(op) in _SINGLE else None
            if chars is not None and not any(run.fullmatch(c) for c in chars):
                break  # a required character the run cannot take: here the run stops
    return True


def _may_backtrack(pattern: str) -> bool:
    """Whether ``pattern`` holds a form whose matching may take exponential time (see the module
    docstring); a pattern ``re`` cannot read counts as one (``jsonschema`` refuses it anyway)."""
    try:
        from re import _parser  # type: ignore[attr-defined]  # CPython's reader of regexes

        parsed = _parser.parse(pattern)
    except Exception:  # noqa: BLE001 - unreadable, or a Python without the module: treated as risky
        return True

    def walk(items: Any, inside_repeat: bool) -> bool:
        for op, av in items:
            name = str(op)
            if name in ("GROUPREF", "GROUPREF_EXISTS"):
                return True
            if name in _REPEATS:
                low, high, body = av
                repeated = high is _parser.MAXREPEAT or high > 1
                if repeated and inside_repeat:
                    return True
                if repeated and not inside_repeat and _delimited(body, parsed.state):
                    continue
                if walk(body, inside_repeat or repeated):
                    return True
            elif name == "BRANCH":
                if inside_repeat:
                    return True
                if any(walk(branch, inside_repeat) for branch in av[1]):
                    return True
            elif name == "SUBPATTERN":
                if walk(av[-1], inside_repeat):
                    return True
            elif name in ("ASSERT", "ASSERT_NOT"):
                if walk(av[1], inside_repeat):
                    return True
            elif name == "ATOMIC_GROUP" or name == "POSSESSIVE_REPEAT":
                continue  # no backtracking into it
        return False

    return walk(parsed, False)


def backtracking_patterns(schema: Any) -> list[str]:
    """The regexes of ``schema`` that may take exponential time to match (sorted, each once)."""
    return sorted({p for p in _regexes(schema) if _may_backtrack(p)})


_CHILD = r"""
import json, sys
from decimal import Decimal
from jsonschema.validators import validator_for
tag = sys.stdin.readline().strip()
def hook(d):  # a Decimal of the parameters, as the parent holds it (the tag is a random token of the call)
    return Decimal(d[tag]) if len(d) == 1 and tag in d else d
schema, instance = json.load(sys.stdin, object_hook=hook)
errors = sorted(validator_for(schema)(schema).iter_errors(instance), key=lambda e: [str(p) for p in e.absolute_path])
json.dump([[list(e.absolute_path), e.message] for e in errors[:1]], sys.stdout)
"""


def errors_in_child(schema: Mapping[str, Any], instance: Mapping[str, Any],
                    seconds: float = CHILD_SECONDS) -> list[tuple[list[str | int], str]] | None:
    """The first schema error of ``instance`` as (path, message), checked by ``jsonschema`` in a
    child process; ``[]`` when it matches; ``None`` when the check did not finish in ``seconds``
    (the child is killed) or failed."""
    tag = secrets.token_hex(16)

    def exact(value: object) -> dict[str, str]:  # the parameters' decimals (JSON's fractions), digit for digit
        if isinstance(value, Decimal):
            return {tag: str(value)}
        raise TypeError(f"{type(value).__name__} is not JSON")

    try:
        sent = tag + "\n" + json.dumps([schema, instance], default=exact)
        done = subprocess.run(
            [sys.executable, "-I", "-c", _CHILD], input=sent, capture_output=True, text=True, timeout=seconds,
            check=False,
        )
    except (subprocess.TimeoutExpired, OSError, ValueError, TypeError):
        return None
    if done.returncode != 0:
        return None
    try:
        return [(list(path), str(message)) for path, message in json.loads(done.stdout)]
    except (ValueError, TypeError):
        return None
