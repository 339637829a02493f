"""Reading first-order text: one formula (:func:`parse_formula`), premises and claims given as
strings (:func:`build_problem`), or the ``.fol`` format (:func:`parse_fol`).

Formulas are written in the FOLIO notation (``∀ ∃ ¬ ∧ ∨ → ↔ ⊕``, also ``⟷`` for ``↔``) or in
ASCII (``forall``, ``exists``, ``~``, ``&``, ``|``, ``->``, ``<->``, ``^``); the grammar is
``fol.lark``. Unbalanced parentheses and every other syntax mistake raise
:class:`~cda.errors.DSLSyntaxError` pointing at the spot; the problems read are checked by
:func:`cda.fol.check.check_problem`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Literal

from cda.errors import DSLError, DSLSyntaxError, DSLTypeError
from cda.fol.check import check_problem
from cda.fol.fastparse import Fallback, read_formula
from cda.fol.syntax import (
    FOLProblem,
    Formula,
    Pos,
    Statement,
)

__all__ = ["parse_formula", "build_problem", "parse_fol"]


def _error(
    cls: type[DSLError], message: str, pos: Pos, source_line: str | None, filename: str | None, line: int
) -> DSLError:
    return cls(message, line=line, column=pos[1] or None, source_line=source_line, filename=filename)


def _check_parentheses(text: str, source_line: str, filename: str | None, line: int) -> None:
    stack: list[int] = []
    for i, ch in enumerate(text):
        if ch == "(":
            stack.append(i)
        elif ch == ")":
            if not stack:
                raise _error(
                    DSLSyntaxError, "unbalanced parentheses: this ')' closes nothing", (1, i + 1), source_line, filename, line
                )
            stack.pop()
    if stack:
        more = f" ({len(stack)} left open)" if len(stack) > 1 else ""
        raise _error(
            DSLSyntaxError, f"unbalanced parentheses: this '(' is never closed{more}", (1, stack[-1] + 1),
            source_line, filename, line,
        )


MAX_NESTING = 420
"""How deeply operators, quantifiers and terms may nest in one formula: every later stage (type
check, grounding, the z3 compiler) recurses once per level, and Python's stack holds ~450."""

_TOO_DEEP = f"the formula is nested too deeply to read (more than {MAX_NESTING} levels); split it into several statements"


def parse_formula(
    text: str, *, filename: str | None = None, line: int = 1, column: int = 1, source_line: str | None = None
) -> Formula:
    """Parse one formula; ``line``/``column`` say where ``text`` starts in its file (for errors).

    >>> parse_formula("∀x (Cat(x) → Pet(x))")  # doctest: +ELLIPSIS
    Quant(kind='forall', var='x', body=Implies(lhs=Atom(pred='Cat', ...
    >>> parse_formula("forall x (Cat(x) -> Pet(x)") # doctest: +ELLIPSIS
    Traceback (most recent call last):
    cda.errors.DSLSyntaxError: <input>:1:10: syntax error: unbalanced parentheses: this '(' is never closed
    ...
    """
    padded = " " * (column - 1) + text
    if source_line is None:
        source_line = padded
    _check_parentheses(padded, source_line, filename, line)
    try:
        return read_formula(padded)
    except Fallback:
        from cda.fol.lark_reader import read_with_lark

        return read_with_lark(padded, source_line, filename, line, column)


def _statement(
    kind: Literal["premise", "claim"], name: str, text: str, filename: str | None, line: int = 1, column: int = 1,
    source_line: str | None = None,
) -> Statement:
    src = source_line if source_line is not None else " " * (column - 1) + text
    formula = parse_formula(text, filename=filename, line=line, column=column, source_line=src)
    return Statement(kind, name, formula, text.strip(), line, src, filename)


def build_problem(
    premises: Sequence[str | tuple[str, str]],
    claims: Sequence[str | tuple[str, str]] | str = (),
    domain: Sequence[str] | None = None,
) -> FOLProblem:
    """Parse and check premises and claims given as strings or ``(name, text)`` pairs.

    Unnamed premises are ``p1, p2, …``; an unnamed claim is ``claim`` (``c1, c2, …`` when
    there are several). Errors name the statement in place of a file name.

    >>> p = build_problem(["∀x (Cat(x) → Pet(x))", "Cat(tom)"], "Pet(tom)")
    >>> [s.name for s in p.premises], p.claims[0].name, p.signature.predicates
    (['p1', 'p2'], 'claim', {'Cat': 1, 'Pet': 1})
    >>> build_problem(["Love(x, mary)"], "Love(tom)")
    Traceback (most recent call last):
    cda.errors.DSLTypeError: premise p1:1:6: type error: free variable 'x': no quantifier binds it
        Love(x, mary)
             ^
    """
    if isinstance(claims, str):
        claims = [claims]
    stmts_p: list[Statement] = []
    for i, item in enumerate(premises, 1):
        name, text = (f"p{i}", item) if isinstance(item, str) else item
        stmts_p.append(_statement("premise", name, text, f"premise {name}"))
    stmts_c: list[Statement] = []
    for i, item in enumerate(claims, 1):
        default = "claim" if len(claims) == 1 else f"c{i}"
        name, text = (default, item) if isinstance(item, str) else item
        stmts_c.append(_statement("claim", name, text, f"claim {name}"))
    dom = tuple(domain) if domain is not None else None
    if dom is not None and (not dom or len(set(dom)) != len(dom)):
        raise DSLTypeError("a declared domain must list at least one element, each once")
    return check_problem(FOLProblem(stmts_p, stmts_c, dom))


_LINE = re.compile(r"^(\s*)(premise|claim)\b\s*(?:([\w'’]+)\s*:(?![:=]))?\s*")
_DOMAIN = re.compile(r"^\s*domain\b\s*:?\s*\{?([^}]*)\}?\s*$")


def parse_fol(text: str, filename: str | None = None) -> FOLProblem:
    """Read the ``.fol`` format: one statement per line, ``#`` comments.

    ``premise [name:] φ`` and ``claim [name:] φ``; optionally one ``domain a, b, c`` line,
    which makes the domain exactly those (distinct) elements.

    >>> p = parse_fol("# cats\\npremise all: ∀x (Cat(x) → Pet(x))\\npremise Cat(tom)\\nclaim Pet(tom)")
    >>> [(s.name, s.line) for s in p.premises + p.claims]
    [('all', 2), ('p2', 3), ('claim', 4)]
    """
    premises: list[Statement] = []
    claims: list[tuple[int, str | None, str, int, str]] = []
    domain: tuple[str, ...] | None = None
    lines = text.splitlines()
    for number, raw in enumerate(lines, 1):
        line = raw.split("#", 1)[0]
        if not line.strip():
            continue
        dm = _DOMAIN.match(line)
        if dm:
            if domain is not None:
                raise DSLTypeError("the domain is declared twice", line=number, column=1, source_line=raw, filename=filename)
            values = [v.strip() for v in dm.group(1).split(",") if v.strip()]
            bad = [v for v in values if not re.fullmatch(r"[\w'’]+", v)]
            if bad or not values or len(set(values)) != len(values):
                reason = f"'{bad[0]}' is not a name" if bad else "list at least one element, each once"
                raise DSLTypeError(
                    f"bad domain declaration: {reason}", line=number, column=1, source_line=raw, filename=filename
                )
            domain = tuple(values)
            continue
        m = _LINE.match(line)
        if not m:
            col = len(line) - len(line.lstrip()) + 1
            raise DSLSyntaxError(
                "expected a statement: 'premise [name:] formula', 'claim [name:] formula' or 'domain a, b, …'",
                line=number, column=col, source_line=raw, filename=filename,
            )
        kind, name = m.group(2), m.group(3)
        body = line[m.end():]
        if not body.strip():
            raise DSLSyntaxError(
                f"this {kind} has no formula", line=number, column=len(line.rstrip()) + 1, source_line=raw,
                filename=filename,
            )
        if kind == "premise":
            pname = name or f"p{len(premises) + 1}"
            premises.append(_statement("premise", pname, body, filename, number, m.end() + 1, raw))
        else:
            claims.append((number, name, body, m.end() + 1, raw))
    stmts_c: list[Statement] = []
    for i, (number, name, body, col, raw) in enumerate(claims, 1):
        cname = name or ("claim" if len(claims) == 1 else f"c{i}")
        stmts_c.append(_statement("claim", cname, body, filename, number, col, raw))
    return check_problem(FOLProblem(premises, stmts_c, domain, filename=filename))
