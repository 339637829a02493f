"""Numbers as the user wrote them: read exactly, refused when no CDA quantity could need them.

Both readers (:mod:`cda.encodings.parse`, :mod:`cda.encodings.fastparse`) and the Python API
(weights given as ``int``/``float``) go through here, so they accept and refuse the same
literals. Every numeric variable lies in [−10⁹, 10⁹] of its unit (docs/dsl.md), so a literal
with an exponent beyond ±30 or more than 40 digits says nothing a bound inside that range could
not say; reading it anyway would cost seconds and gigabytes (``1e9999999``), hit Python's
4,300-digit limit on ``int(str)``, or overflow a float when a weight is reported. Values are
:class:`~fractions.Fraction` from the decimal text: no float on the way to the solver.
"""

from __future__ import annotations

from decimal import Decimal
from fractions import Fraction

from cda.contracts.json_numbers import exact_text as show  # one writer of exact numbers

__all__ = [
    "DIGIT_SEPARATORS", "MAX_DIGITS", "MAX_EXPONENT", "refusal", "separated", "separator_in", "whole_refusal",
    "read_number",
    "exact_number", "show",
]

#: the most digits a literal may have (before and after the point together)
MAX_DIGITS = 40
#: the largest exponent, either sign, of ``1.5e30``
MAX_EXPONENT = 30


#: the refusal of ``1_000``: a number is plain decimal digits (docs/dsl.md, "Numbers"). Both
#: readers would otherwise read ``_000`` as a unit and say "unknown unit '_000'"
DIGIT_SEPARATORS = "digit separators are not allowed: write 1000, not 1_000"


def separated(name: str) -> bool:
    """Whether a name read right after a number is the rest of a number with digit separators:
    ``_`` then a digit (``_000`` of ``1_000``). No unit or name a user means starts so.

    >>> separated("_000"), separated("ms"), separated("_x")
    (True, False, False)
    """
    return name[:1] == "_" and name[1:2].isdigit()


def separator_in(line: str) -> int | None:
    """The index of the first digit separator of a number in ``line`` (the ``_`` of ``1_000``,
    not of a name such as ``a1_000``), or None: where a syntax error further on began.

    >>> separator_in("observe value(metric:t) = 1_000 ms"), separator_in("hyp a1_0, b_1"), separator_in("x 2.5_0")
    (27, None, 5)
    """
    i = 0
    while i < len(line):
        c = line[i]
        if c.isalpha() or c == "_":  # a name: skip it whole, digits and underscores included
            while i < len(line) and (line[i].isalnum() or line[i] == "_"):
                i += 1
            continue
        if c == "#":  # a comment: nothing further is read
            return None
        if c.isdigit() and line[i + 1 : i + 2] == "_" and line[i + 2 : i + 3].isdigit():
            return i + 1
        i += 1
    return None


def _abbreviated(text: str) -> str:
    return text if len(text) <= 24 else f"{text[:12]}…{text[-4:]}"


def refusal(text: str) -> str | None:
    """Why the literal ``text`` (``-1.5e3``, ``0.45359237``) is out of range, or None.

    >>> refusal("0.45359237"), refusal("1e31")
    (None, 'the number 1e31 is out of range (exponents up to ±30)')
    >>> refusal("1" + "0" * 309)
    'the number 100000000000…0000 is out of range (310 digits; at most 40)'
    """
    mantissa, _, exponent = text.lower().partition("e")
    digits = sum(c.isdigit() for c in mantissa)
    if exponent:
        size = exponent.lstrip("+-")
        if len(size) > MAX_DIGITS or int(size) > MAX_EXPONENT:  # int() of at most 40 digits
            return f"the number {_abbreviated(text)} is out of range (exponents up to ±{MAX_EXPONENT})"
    if digits > MAX_DIGITS:
        return f"the number {_abbreviated(text)} is out of range ({digits} digits; at most {MAX_DIGITS})"
    return None


def whole_refusal(text: str) -> str | None:
    """Why a whole number (``top``, ``hops``, a cardinality) is out of range, or None.

    >>> whole_refusal("3"), whole_refusal("9" * 41)
    (None, 'the number 999999999999…9999 is out of range (41 digits; at most 40)')
    """
    if len(text) > MAX_DIGITS:
        return f"the number {_abbreviated(text)} is out of range ({len(text)} digits; at most {MAX_DIGITS})"
    return None


def read_number(text: str) -> Fraction:
    """The literal's exact value; ``ValueError`` (with :func:`refusal`'s reason) when out of range.

    >>> read_number("0.45359237"), read_number("-2.5e-3")
    (Fraction(45359237, 100000000), Fraction(-1, 400))
    """
    reason = refusal(text)
    if reason:
        raise ValueError(reason)
    return Fraction(text)


def exact_number(value: object) -> Fraction:
    """A number given from Python (a weight): ints and Fractions as they are, a float as the
    decimal it prints as (``0.1`` is 1/10), text as a literal; ``ValueError`` when it is no
    finite number or out of the literals' range.

    >>> exact_number(0.1), exact_number(2), exact_number("1/4"), exact_number(Decimal("2.50"))
    (Fraction(1, 10), Fraction(2, 1), Fraction(1, 4), Fraction(5, 2))
    """
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is not a number")
    if isinstance(value, int):
        if value.bit_length() > MAX_DIGITS * 4:  # 10**40 < 2**133: no int(str) limit, no float overflow
            digits = value.bit_length() * 30103 // 100000  # log10(2) ≈ 0.30103
            raise ValueError(f"the number is out of range (about {digits} digits; at most {MAX_DIGITS})")
        value = str(value)
    elif isinstance(value, Fraction):
        value = f"{value.numerator}/{value.denominator}"
    elif isinstance(value, float):
        value = repr(value)
    elif isinstance(value, Decimal):
        value = str(value)
    if not isinstance(value, str):
        raise ValueError(f"{value!r} is not a number")
    num, slash, den = value.strip().partition("/")
    try:
        if slash:
            return read_number(num) / read_number(den)
        return read_number(num)
    except ZeroDivisionError:
        raise ValueError(f"{value} divides by zero") from None


