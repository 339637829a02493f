"""Arithmetic verifier: re-evaluate a numeric equation or inequality in exact rationals.

``0.1 + 0.2 == 0.3`` is true here, as it is on paper: every literal becomes a
:class:`sympy.Rational` read from its decimal text, never a float. The claim is read by a small
recursive-descent parser of this module that accepts only numbers, ``+ - * / **``,
parentheses and comparisons (``= == != < <= > >=`` and ``≤ ≥ ≠``); anything else — a name, a
quote, an attribute — is rejected before sympy sees a character, and nothing is ever passed
to ``eval`` (sympy's own ``parse_expr`` uses ``eval``, which is why it is not used).

A chain ``a < b <= c`` holds when every adjacent comparison does. Undefined values (division by
zero), non-real values compared by order, and sizes beyond the guards (exponents, digits,
nesting) are *inconclusive*, with the reason; so is a comparison sympy cannot decide.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from fractions import Fraction
from typing import TYPE_CHECKING

from cda.contracts.verification import VerifierOutcome, VerifierStatus

if TYPE_CHECKING:  # sympy (~0.2 s to import) loads with the first number a claim holds, not with the runner
    import sympy

__all__ = ["verify_arithmetic", "looks_arithmetic", "MAX_CLAIM_CHARS", "MAX_RESULT_BITS"]

MAX_CLAIM_CHARS = 2000
MAX_DEPTH = 64  # nested parentheses / unary signs / powers
MAX_LITERAL_EXPONENT = 100  # 1e100 is fine, 1e1000000000 is not
MAX_EXPONENT = 10_000  # |b| in a ** b
MAX_RESULT_BITS = 1_000_000  # estimated size of a ** b for rational a
MAX_SHOWN_CHARS = 80  # of each value in the detail and the data

_COMPARISONS = {"=": "=", "==": "=", "!=": "!=", "≠": "!=", "<": "<", "<=": "<=", "≤": "<=", ">": ">", ">=": ">=", "≥": ">="}
_TOKEN = re.compile(
    r"\s*(?:(?P<num>(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?)"
    r"|(?P<op>\*\*|==|!=|<=|>=|[-+*/()<>=≤≥≠]))"
)

_LOOKS_ARITHMETIC = re.compile(r"^[\d\s.+\-*/()<>=!]+$")


def looks_arithmetic(text: str) -> bool:
    """Whether a free-text line (a success criterion, an observation) is only numbers, operators
    and comparisons: the lines the Action hands this verifier.

    >>> looks_arithmetic("0.1 + 0.2 == 0.3"), looks_arithmetic("p99 below 200 ms")
    (True, False)
    """
    return bool(_LOOKS_ARITHMETIC.match(text))


class _Rejected(Exception):
    """The claim is not a numeric comparison this verifier reads, or cannot be decided."""


def _tokens(text: str) -> list[tuple[str, str, int]]:
    """(kind, text, column) triples; kind is ``num`` or ``op``. Rejects any other character."""
    out: list[tuple[str, str, int]] = []
    pos = 0
    end = len(text.rstrip())
    while pos < end:
        m = _TOKEN.match(text, pos)
        if m is None or m.end() == pos:
            bad = text[pos:].lstrip()[:1]
            column = len(text) - len(text[pos:].lstrip()) + 1
            raise _Rejected(
                f"unexpected {bad!r} at column {column}; only numbers, + - * / ** ( ) and comparisons are allowed"
            )
        kind = "num" if m.group("num") is not None else "op"
        out.append((kind, m.group(kind), m.start(kind) + 1))
        pos = m.end()
    return out


def _rational(text: str) -> sympy.Rational:
    mantissa, _, exponent = text.lower().partition("e")
    if exponent and abs(int(exponent)) > MAX_LITERAL_EXPONENT:
        raise _Rejected(f"the number {text} is out of range (exponents up to ±{MAX_LITERAL_EXPONENT})")
    import sympy

    value = Fraction(text)
    return sympy.Rational(value.numerator, value.denominator)


def _bits(value: sympy.Rational) -> int:
    return max(abs(int(value.p)).bit_length(), int(value.q).bit_length(), 1)


class _Parser:
    """expr := term (('+'|'-') term)* ; term := unary (('*'|'/') unary)* ;
    unary := ('+'|'-') unary | power ; power := atom ('**' unary)? ; atom := number | '(' expr ')'

    The precedence is Python's: ``-2 ** 2`` is -4 and ``2 ** 3 ** 2`` is 512.
    """

    def __init__(self, tokens: list[tuple[str, str, int]]) -> None:
        self.tokens = tokens
        self.i = 0
        self.depth = 0

    def peek(self) -> str | None:
        return self.tokens[self.i][1] if self.i < len(self.tokens) else None

    def take(self) -> tuple[str, str, int]:
        token = self.tokens[self.i]
        self.i += 1
        return token

    def where(self) -> str:
        if self.i < len(self.tokens):
            return f"{self.tokens[self.i][1]!r} at column {self.tokens[self.i][2]}"
        return "the end of the claim"

    def chain(self) -> tuple[list[sympy.Expr], list[str]]:
        values = [self.expr()]
        ops: list[str] = []
        while self.peek() in _COMPARISONS and self.tokens[self.i][0] == "op":
            ops.append(_COMPARISONS[self.take()[1]])
            values.append(self.expr())
        if self.i < len(self.tokens):
            raise _Rejected(f"unexpected {self.where()}")
        if not ops:
            raise _Rejected("the claim compares nothing: write an equation or inequality")
        return values, ops

    def expr(self) -> sympy.Expr:
        value = self.term()
        while self.peek() in ("+", "-"):
            op = self.take()[1]
            rhs = self.term()
            value = value + rhs if op == "+" else value - rhs
        return value

    def term(self) -> sympy.Expr:
        value = self.unary()
        while self.peek() in ("*", "/"):
            op = self.take()[1]
            rhs = self.unary()
            if op == "*":
                value = value * rhs
            else:
                if rhs.is_zero:
                    raise _Rejected("division by zero: the value is undefined")
                value = value / rhs
        return value

    def nested(self) -> None:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise _Rejected(f"the claim is nested more than {MAX_DEPTH} deep")

    def unary(self) -> sympy.Expr:
        if self.peek() in ("+", "-"):
            op = self.take()[1]
            self.nested()
            value = self.unary()
            self.depth -= 1
            return -value if op == "-" else value
        return self.power()

    def power(self) -> sympy.Expr:
        base = self.atom()
        if self.peek() != "**":
            return base
        self.take()
        self.nested()
        exponent = self.unary()
        self.depth -= 1
        return _pow(base, exponent)

    def atom(self) -> sympy.Expr:
        if self.i >= len(self.tokens):
            raise _Rejected("the claim ends where a number was expected")
        kind, text, column = self.take()
        if kind == "num":
            return _rational(text)
        if text == "(":
            self.nested()
            value = self.expr()
            self.depth -= 1
            if self.peek() != ")":
                raise _Rejected(f"expected ')' but found {self.where()}")
            self.take()
            return value
        raise _Rejected(f"expected a number but found {text!r} at column {column}")


def _pow(base: sympy.Expr, exponent: sympy.Expr) -> sympy.Expr:
    import sympy

    if not isinstance(exponent, sympy.Rational):
        raise _Rejected("an exponent must be a rational number")
    if abs(exponent) > MAX_EXPONENT:
        raise _Rejected(f"the exponent {exponent} is larger than {MAX_EXPONENT}")
    if base.is_zero and exponent < 0:
        raise _Rejected("division by zero: 0 to a negative power is undefined")
    if isinstance(base, sympy.Rational) and _bits(base) * abs(int(exponent.p)) > MAX_RESULT_BITS * int(exponent.q):
        raise _Rejected(f"the power would have more than {MAX_RESULT_BITS} bits")
    if not isinstance(base, sympy.Rational) and abs(int(exponent.p)) > 64:
        raise _Rejected("a power of an irrational number with an exponent above 64 is not evaluated")
    return base**exponent


def _compare(lhs: sympy.Expr, op: str, rhs: sympy.Expr) -> bool:
    import sympy

    diff = sympy.expand(lhs - rhs) if not isinstance(lhs - rhs, sympy.Rational) else lhs - rhs
    if op in ("=", "!="):
        zero = diff.is_zero
        if zero is None:
            raise _Rejected(f"sympy cannot decide whether {lhs} = {rhs}")
        return bool(zero) if op == "=" else not zero
    if not (lhs.is_extended_real and rhs.is_extended_real):
        raise _Rejected(f"{lhs} {op} {rhs} orders values that are not real numbers")
    sign = 0 if diff.is_zero else 1 if diff.is_positive else -1 if diff.is_negative else None
    if sign is None:
        raise _Rejected(f"sympy cannot decide the sign of {lhs} - ({rhs})")
    return {"<": sign < 0, "<=": sign <= 0, ">": sign > 0, ">=": sign >= 0}[op]


def _show(value: sympy.Expr) -> str:
    """The exact value as text; past :data:`MAX_SHOWN_CHARS`, a 12-digit approximation and the size.

    (``10 ** 9000`` has 9001 digits, more than Python will even turn into text by default.)
    """
    try:
        text: str | None = str(value)
    except ValueError:  # int-to-str conversion limit
        text = None
    if text is not None and len(text) <= MAX_SHOWN_CHARS:
        return text
    size = f"{len(text)} characters exactly" if text is not None else "too long to print exactly"
    return f"≈{value.evalf(12)} ({size})"


def _one(claim: str) -> VerifierOutcome:
    def out(status: VerifierStatus, detail: str, **data: object) -> VerifierOutcome:
        return VerifierOutcome(
            verifier="arithmetic", claim=claim, status=status, detail=detail,
            confidence_cap=0.0 if status == "failed" else None, data=dict(data),
        )

    if len(claim) > MAX_CLAIM_CHARS:
        return out("inconclusive", f"the claim is longer than {MAX_CLAIM_CHARS} characters")
    try:
        values, ops = _Parser(_tokens(claim)).chain()
        results = [_compare(a, op, b) for a, op, b in zip(values, ops, values[1:])]
    except _Rejected as exc:
        return out("inconclusive", str(exc))
    shown = [_show(v) for v in values]
    holds = all(results)
    steps = " ; ".join(f"{a} {op} {b}" for a, op, b in zip(shown, ops, shown[1:]))
    detail = f"{'true' if holds else 'false'} in exact arithmetic: {steps}"
    return out("passed" if holds else "failed", detail, values=shown, comparisons=ops, holds=holds)


def verify_arithmetic(claims: Sequence[str]) -> list[VerifierOutcome]:
    """One outcome per claim: passed when it holds exactly, failed when not, else inconclusive.

    >>> [o.status for o in verify_arithmetic(["0.1 + 0.2 == 0.3", "3 * 1.5 <= 4", "1 / 0 = 1", "x = 1"])]
    ['passed', 'failed', 'inconclusive', 'inconclusive']
    >>> verify_arithmetic(["120 + 80 = 200"])[0].detail
    'true in exact arithmetic: 200 = 200'
    """
    return [_one(claim) for claim in claims]
