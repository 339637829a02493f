"""Redaction of personal data before text leaves the machine (PII posture ``on``: docs/actions.md, "Egress, PII, the LLM gate").

With ``pii_posture: on``, a claim and its evidence are redacted before an external provider
sees them. Each piece of personal data becomes a placeholder naming its kind, numbered by first
occurrence: ``[EMAIL_1]``, ``[PHONE_1]``, ``[IPV4_1]``, ``[CARD_1]``, ``[IBAN_1]``, ``[PERSON_1]``.
The same value always gets the same placeholder (``a@x.org`` and ``A@X.org`` are one email; a
phone number is compared by its digits), so a model can still see that two texts talk about the
same person, and the mapping lets the caller put the values back into what the model returns.

What is detected, in order of precedence where matches overlap (leftmost, then longest wins):

- ``EMAIL``: ``local@domain.tld``;
- ``IBAN``: two letters, two check digits, 11-30 letters or digits (spaces every four allowed),
  in either case (``de89 3704 …`` too), kept only when the ISO 13616 mod-97 check passes;
- ``CARD``: 13-19 digits, single spaces or hyphens between groups allowed, kept only when the
  Luhn check passes;
- ``IPV4``: four dotted octets 0-255 (not part of a longer dotted number);
- ``PHONE``: ``+`` and 8-15 digits, in groups or not (E.164: ``+14155552671``);
  ``(area) 123 4567``; ``555-123-4567`` (one separator, used twice); national numbers starting
  with ``0`` (``030 1234567``; in two to four groups with at least 9 digits: ``020 7946 0958``,
  ``0171 234 5678``, ``06-12345678``); 10 or 11 bare digits (``5551234567``); the national
  forms not when they are part of a longer run of digit groups (``3704 0044 0532``). Bare
  10-11 digit numbers that are not phones (an epoch timestamp) are hidden too;
- ``PERSON``: only a title and a capitalised name: ``Mr.``/``Mrs.``/``Ms.``/``Mx.``/``Dr.``/
  ``Prof.`` followed by one or two capitalised words. Bare names are not detected.

Not detected: bare names, postal addresses, IPv6 addresses, national id numbers. Matching errs
towards redacting: a number that looks like a phone number is hidden even when it is not one.

Deterministic: the same input always gives the same output, byte for byte.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

__all__ = ["KINDS", "RedactionResult", "Redactor", "iban_valid", "luhn_valid", "redact"]

KINDS: tuple[str, ...] = ("EMAIL", "IBAN", "CARD", "IPV4", "PHONE", "PERSON")
"""Kinds in order of precedence when two matches start at the same place with the same length."""

_OCTET = r"(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])"
_EMAIL = re.compile(r"(?<![A-Za-z0-9._%+-])[A-Za-z0-9._%+-]+@(?:[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?\.)+[A-Za-z]{2,}")
"""An address starts where its local part's run starts (the look-behind): the leftmost match
began there anyway, and without it a run of n local-part characters before an ``@`` that leads
to no address was tried from each of its n places (n = 100,000: minutes; audit3)."""
_IBAN = re.compile(r"(?<![A-Za-z0-9])[A-Za-z]{2}[0-9]{2}(?: ?[A-Za-z0-9]{4}){2,7}(?: ?[A-Za-z0-9]{1,4})?(?![A-Za-z0-9])")
_DIGIT_RUN = re.compile(r"(?<![\w.])[0-9]+(?:[ -][0-9]+)*(?![\w]|\.[0-9])")
_IPV4 = re.compile(rf"(?<![\w.]){_OCTET}(?:\.{_OCTET}){{3}}(?![\w]|\.[0-9])")
_PHONES = (
    re.compile(r"(?<![\w+])\+[0-9]{1,3}(?:[ .\-]?(?:\([0-9]{1,4}\)|[0-9]{1,4})){2,5}(?![\w]|[.\-][0-9])"),
    re.compile(r"(?<![\w])\([0-9]{2,4}\)[ .\-]?[0-9]{3,4}[ .\-]?[0-9]{3,4}(?![\w])"),
    re.compile(r"(?<![\w.])(?<![0-9][ -])[0-9]{3}([ .\-])[0-9]{3}\1[0-9]{4}(?![\w]|[ .\-][0-9])"),
    re.compile(r"(?<![\w.])(?<![0-9][ -])0[0-9]{2,4}[ /\-][0-9]{4,8}(?![\w]|[ .\-/][0-9])"),
    # national numbers in two to four groups: 020 7946 0958, 0171 234 5678, 06-12345678
    re.compile(r"(?<![\w.+])(?<![0-9][ -])0[0-9]{1,4}(?:[ /\-][0-9]{2,8}){1,3}(?![\w]|[ .\-/][0-9])"),
    # ten or eleven bare digits: 5551234567, 02079460958
    re.compile(r"(?<![\w.+,\-])[0-9]{10,11}(?![\w]|[.,\-][0-9])"),
)
_MIN_GROUPED_NATIONAL = 9  # digits a grouped national number needs (a date such as 05-10-2024 has 8)
_PERSON = re.compile(
    r"(?<![\w.])(?:Mr|Mrs|Ms|Mx|Dr|Prof)\.?[ \t]+[A-ZÀ-ÖØ-Þ][^\W\d_]+(?:[ \t-][A-ZÀ-ÖØ-Þ][^\W\d_]+)?"
)


def luhn_valid(digits: str) -> bool:
    """The Luhn checksum of a card number (digits only).

    >>> luhn_valid("4111111111111111"), luhn_valid("4111111111111112")
    (True, False)
    """
    if not digits.isdigit():
        return False
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = int(ch)
        if i % 2 == 1:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return total % 10 == 0


def iban_valid(iban: str) -> bool:
    """The ISO 13616 mod-97 check of an IBAN (spaces ignored).

    >>> iban_valid("DE89 3704 0044 0532 0130 00"), iban_valid("DE88 3704 0044 0532 0130 00")
    (True, False)
    """
    compact = iban.replace(" ", "").upper()
    if not 15 <= len(compact) <= 34 or not compact.isalnum() or not compact.isascii():
        return False
    rearranged = compact[4:] + compact[:4]
    return int("".join(str(int(ch, 36)) for ch in rearranged)) % 97 == 1


def _digits(text: str) -> str:
    return "".join(ch for ch in text if ch.isdigit())


def _ibans(text: str) -> Iterable[tuple[int, int]]:
    for match in _IBAN.finditer(text):
        candidate = match.group()
        while not iban_valid(candidate) and " " in candidate:  # a trailing group may be a word
            candidate = candidate.rsplit(" ", 1)[0]
        if iban_valid(candidate):
            yield match.start(), match.start() + len(candidate)


def _cards(text: str) -> Iterable[tuple[int, int]]:
    """Leftmost-longest run of digit groups with 13-19 digits that passes Luhn, in every digit run."""
    for run in _DIGIT_RUN.finditer(text):
        groups = [(m.start() + run.start(), m.end() + run.start()) for m in re.finditer(r"[0-9]+", run.group())]
        i = 0
        while i < len(groups):
            found = None
            for j in range(len(groups), i, -1):
                start, end = groups[i][0], groups[j - 1][1]
                digits = _digits(text[start:end])
                if 13 <= len(digits) <= 19 and luhn_valid(digits):
                    found = (start, end, j)
                    break
            if found is None:
                i += 1
                continue
            yield found[0], found[1]
            i = found[2]


def _regex(pattern: re.Pattern[str], check: Callable[[str], bool] = lambda _: True) -> Callable[[str], Iterable[tuple[int, int]]]:
    def find(text: str) -> Iterable[tuple[int, int]]:
        return ((m.start(), m.end()) for m in pattern.finditer(text) if check(m.group()))

    return find


def _phones(text: str) -> Iterable[tuple[int, int]]:
    for index, pattern in enumerate(_PHONES):
        for match in pattern.finditer(text):
            candidate = match.group()
            if index == 4 and len(_digits(candidate)) < _MIN_GROUPED_NATIONAL:
                continue
            while len(_digits(candidate)) > 15 and re.search(r"[ .\-]", candidate):
                candidate = re.split(r"[ .\-](?=[^ .\-]*$)", candidate)[0]  # drop a trailing group
            if 7 <= len(_digits(candidate)) <= 15:
                yield match.start(), match.start() + len(candidate)


_FINDERS: dict[str, Callable[[str], Iterable[tuple[int, int]]]] = {
    "EMAIL": _regex(_EMAIL),
    "IBAN": _ibans,
    "CARD": _cards,
    "IPV4": _regex(_IPV4),
    "PHONE": _phones,
    "PERSON": _regex(_PERSON),
}


def _key(kind: str, value: str) -> str:
    """What makes two matches "the same value" for a kind."""
    if kind in ("PHONE", "CARD"):
        return ("+" if value.lstrip().startswith("+") else "") + _digits(value)
    if kind == "IBAN":
        return value.replace(" ", "").upper()
    if kind == "PERSON":
        return " ".join(value.replace(".", " ").split()).casefold()
    return value.casefold()


@dataclass(frozen=True)
class RedactionResult:
    """Redacted text and the mapping from each placeholder to the value it hides (first spelling)."""

    text: str
    mapping: dict[str, str] = field(default_factory=dict)

    def restore(self, text: str) -> str:
        """Put the hidden values back into ``text`` (e.g. a model's reply)."""
        return _restore(text, self.mapping)


def _restore(text: str, mapping: dict[str, str]) -> str:
    if not mapping:
        return text
    pattern = re.compile("|".join(re.escape(p) for p in sorted(mapping, key=len, reverse=True)))
    return pattern.sub(lambda m: mapping[m.group()], text)


class Redactor:
    """Redacts several texts with one numbering, so a value has one placeholder across all of them.

    >>> r = Redactor()
    >>> r.redact("mail a@x.org"), r.redact("A@X.org again, or b@x.org")
    ('mail [EMAIL_1]', '[EMAIL_1] again, or [EMAIL_2]')
    >>> r.mapping
    {'[EMAIL_1]': 'a@x.org', '[EMAIL_2]': 'b@x.org'}
    """

    def __init__(self) -> None:
        self._placeholders: dict[tuple[str, str], str] = {}
        self._mapping: dict[str, str] = {}
        self._counts: dict[str, int] = {}

    @property
    def mapping(self) -> dict[str, str]:
        """Placeholder -> original value, in order of first occurrence (a copy)."""
        return dict(self._mapping)

    def _placeholder(self, kind: str, value: str) -> str:
        key = (kind, _key(kind, value))
        if key not in self._placeholders:
            self._counts[kind] = self._counts.get(kind, 0) + 1
            placeholder = f"[{kind}_{self._counts[kind]}]"
            self._placeholders[key] = placeholder
            self._mapping[placeholder] = value
        return self._placeholders[key]

    def redact(self, text: str) -> str:
        """``text`` with every detected value replaced by its placeholder."""
        candidates = sorted(
            (start, -(end - start), KINDS.index(kind), end, kind)
            for kind, finder in _FINDERS.items()
            for start, end in finder(text)
            if end > start
        )
        pieces: list[str] = []
        cursor = 0
        for start, _, _, end, kind in candidates:
            if start < cursor:
                continue  # overlaps a match already taken
            pieces.append(text[cursor:start])
            pieces.append(self._placeholder(kind, text[start:end]))
            cursor = end
        pieces.append(text[cursor:])
        return "".join(pieces)

    def restore(self, text: str) -> str:
        """Put the hidden values back into ``text``."""
        return _restore(text, self._mapping)


def redact(text: str) -> RedactionResult:
    """Replace personal data in ``text`` by stable placeholders; return the text and the mapping.

    >>> result = redact("Dr. Jane Roe (jane@example.com, +44 20 7946 0958) at 10.0.0.7; jane@example.com")
    >>> result.text
    '[PERSON_1] ([EMAIL_1], [PHONE_1]) at [IPV4_1]; [EMAIL_1]'
    >>> result.mapping["[PHONE_1]"]
    '+44 20 7946 0958'
    """
    redactor = Redactor()
    return RedactionResult(text=redactor.redact(text), mapping=redactor.mapping)
