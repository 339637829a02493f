"""Exact arithmetic for the calculator tool, and sympy's for the verify loop.

An expression is read once, by Python's own parser, into a small tree of numbers and the
operators ``+ - * / **`` and parentheses — anything else (names, calls, attributes, strings) is
refused, so no user text is ever evaluated as code. The calculator computes over
:class:`~fractions.Fraction` with each number taken from its literal text (``0.1`` is 1/10, never
a float); the verify loop recomputes the same tree with sympy's rationals, an independent
arithmetic, and the two must agree exactly.

>>> evaluate("(1 + 2) * 0.1 / 3")
Fraction(1, 10)
>>> recompute("(1 + 2) * 0.1 / 3") == Fraction(1, 10)
True
>>> evaluate("2 ** 0.5")
Traceback (most recent call last):
...
cda.conductor.tooling.ToolError: 2 ** 0.5: an exponent must be a whole number (the result would not be exact)
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable
from fractions import Fraction
from typing import Any

from cda.conductor.tooling import ToolError

__all__ = ["check_expression", "evaluate", "exact_text", "recompute"]

MAX_EXPRESSION = 10_000
MAX_EXPONENT = 1000
MAX_DIGITS = 4_000
"""A literal or a result whose numerator or denominator passes this many digits is refused
(``9**9**9``, ``1e9999999999``): checked from the literal's text and from bit lengths before any
big number is built or printed (Python refuses to print an int of more than 4,300 digits)."""

_EXPONENT = re.compile(r"[eE]([+-]?\d+)$")

_BINARY = (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.Pow)


_FOUND = {"Call": "a function call", "Name": "a name", "Attribute": "an attribute", "Subscript": "an index",
          "Compare": "a comparison", "BoolOp": "and/or", "Lambda": "a lambda", "IfExp": "an if-expression",
          "List": "a list", "Tuple": "a tuple", "Dict": "a dict", "Set": "a set", "JoinedStr": "a string"}
"""What a user wrote, in words, where the calculator refuses it (never Python's node names)."""


def _tree(text: str) -> ast.expr:
    if len(text) > MAX_EXPRESSION:
        raise ToolError(f"an expression of {len(text)} characters (at most {MAX_EXPRESSION})")
    try:
        node = ast.parse(text.strip(), mode="eval").body
    except SyntaxError as exc:
        raise ToolError(f"{text!r} is not an arithmetic expression (column {exc.offset}: {exc.msg})") from None
    for part in ast.walk(node):
        if isinstance(part, ast.BinOp):
            if not isinstance(part.op, _BINARY):
                raise ToolError(f"{text!r}: only + - * / ** and parentheses are allowed")
        elif isinstance(part, ast.UnaryOp):
            if not isinstance(part.op, ast.USub | ast.UAdd):
                raise ToolError(f"{text!r}: only + - * / ** and parentheses are allowed")
        elif isinstance(part, ast.Constant):
            if isinstance(part.value, bool) or not isinstance(part.value, int | float):
                raise ToolError(f"{text!r}: only numbers and + - * / ** are allowed")
            if isinstance(part.value, complex):
                raise ToolError(f"{text!r}: complex numbers are not supported")
        elif not isinstance(part, ast.operator | ast.unaryop | ast.expr_context):
            found = _FOUND.get(type(part).__name__, "another kind of expression")
            raise ToolError(f"{text!r}: only numbers and + - * / ** are allowed, not {found}")
    return node


def check_expression(text: str) -> str | None:
    """``None`` when ``text`` is an arithmetic expression the calculator reads, else why not."""
    try:
        _tree(text)
    except ToolError as exc:
        return str(exc)
    return None


def _literal(node: ast.Constant, text: str) -> str:
    """The number's own text, refused before it is read when it would pass :data:`MAX_DIGITS`
    (``1e9999999999`` would otherwise build a ten-billion-digit integer)."""
    segment = ast.get_source_segment(text.strip(), node)
    assert segment is not None
    literal = segment.replace("_", "")
    exponent = _EXPONENT.search(literal)
    mantissa = literal[:exponent.start()] if exponent else literal
    size = len(mantissa) + (abs(int(exponent.group(1))) if exponent and len(exponent.group(1)) < 12 else
                            (MAX_DIGITS + 1 if exponent else 0))
    if size > MAX_DIGITS:
        raise ToolError(f"{text}: the number {literal[:40]}{'…' if len(literal) > 40 else ''} has more than "
                        f"{MAX_DIGITS} digits")
    return literal


def _too_long(value: Fraction) -> bool:
    """Whether the numerator or denominator passes :data:`MAX_DIGITS` digits, decided from bit
    lengths where that is certain and by printing only numbers Python can print."""
    for part in (abs(value.numerator), value.denominator):
        bits = part.bit_length()
        if bits > MAX_DIGITS * 3.33 + 4:  # more than MAX_DIGITS digits for sure (log2 10 > 3.32)
            return True
        if bits > MAX_DIGITS * 3.32 - 4 and len(str(part)) > MAX_DIGITS:
            return True
    return False


def _walk(text: str, number: Callable[[str], Any], power: Callable[[Any, int], Any], exact: Callable[[Any], Fraction],
          ) -> Any:
    source = text.strip()

    def go(node: ast.expr) -> Any:
        if isinstance(node, ast.Constant):
            return number(_literal(node, source))
        if isinstance(node, ast.UnaryOp):
            value = go(node.operand)
            return -value if isinstance(node.op, ast.USub) else value
        assert isinstance(node, ast.BinOp)
        left, right = go(node.left), go(node.right)
        if isinstance(node.op, ast.Add):
            result = left + right
        elif isinstance(node.op, ast.Sub):
            result = left - right
        elif isinstance(node.op, ast.Mult):
            result = left * right
        elif isinstance(node.op, ast.Div):
            if exact(right) == 0:
                raise ToolError(f"{text}: division by zero")
            result = left / right
        else:
            e = exact(right)
            if e.denominator != 1:
                raise ToolError(f"{text}: an exponent must be a whole number (the result would not be exact)")
            if abs(e.numerator) > MAX_EXPONENT:
                raise ToolError(f"{text}: an exponent of {e.numerator} (at most {MAX_EXPONENT} either way)")
            if e.numerator < 0 and exact(left) == 0:
                raise ToolError(f"{text}: division by zero")
            base = exact(left)
            if max(base.numerator.bit_length(), base.denominator.bit_length()) * abs(e.numerator) > MAX_DIGITS * 4:
                raise ToolError(f"{text}: a result of more than {MAX_DIGITS} digits")
            result = power(left, int(e.numerator))
        if _too_long(exact(result)):
            raise ToolError(f"{text}: a result of more than {MAX_DIGITS} digits")
        return result

    return go(_tree(text))


def evaluate(text: str) -> Fraction:
    """The exact value of ``text`` over fractions."""
    value: Fraction = _walk(text, Fraction, lambda b, e: b**e, lambda v: v)
    return value


def recompute(text: str) -> Fraction:
    """The same value computed by sympy's rational arithmetic (the verify loop's re-evaluation)."""
    import sympy

    def exact(v: Any) -> Fraction:
        r = sympy.Rational(v)
        return Fraction(int(r.p), int(r.q))

    return exact(_walk(text, sympy.Rational, lambda b, e: sympy.Pow(b, e), exact))


def exact_text(value: Fraction) -> str:
    """``7``, ``-1/3``: the exact value as text (what the calculator reports)."""
    return str(value.numerator) if value.denominator == 1 else f"{value.numerator}/{value.denominator}"
