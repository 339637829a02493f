"""An offline, deterministic stand-in for an LLM fact-checker: claim-level citation enforcement.

The most common way a generated claim goes wrong is that it states a number or names a thing
the evidence never mentions. :class:`OfflineProvider` checks exactly that, with no model and no
network, so the LLM gate has a provider in every run (tests, air-gapped sites, ``egress:
local``). It never says more than "these fragments have no support"; the gate can only use that
to lower a verdict.

Tokenisation (the same for claim and evidence):

1. A **word** is a run of word characters, joined by single inner ``.`` ``-`` ``:`` ``/``
   and optionally ending in ``%``: ``auth-svc``, ``entity:A``, ``3.5``, ``40%``, ``2h``,
   ``v1.2.3``. A trailing full stop is not part of a word; ``1,000`` is two words.
2. A word is a **number** when it is digits, optionally a decimal part, optionally a unit
   suffix of letters or ``%`` attached with no space (``3.5``, ``40%``, ``2h``, ``15ms``).
   Numbers are compared by value (``3.50`` is ``3.5``) and suffix (case-insensitive); a bare
   number is also supported by the same value with any suffix.
3. A word is an **entity** when it is not a stop word (English function words and DSL
   keywords, :data:`STOPWORDS`) and any of these holds: it is an argument of a call
   ``pred(args)`` (the predicate name itself is vocabulary, not an entity); it is inside
   backticks; it contains a digit or one of ``_ . - : /``; it has a capital letter (``Alice``,
   ``PostgreSQL``, ``AWS``); or it is a lowercase abbreviation of two or more letters with no
   vowel (``db``, ``svc``, ``tcp``). Other lowercase words are prose and are not checked. A
   capitalised word at the start of a sentence is checked like any other (``Restarting`` is
   flagged when the evidence never says it); the stop words cover the common openers.
4. An entity is supported when the same word (case-insensitive) occurs in an evidence string
   or among the known Ken node ids. A ``sort:name`` word is also matched by its ``name``, and
   the other way round (``entity:db`` in the evidence supports ``db``).

A claim made only of words copied from the evidence is therefore never flagged (property-tested).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Literal

from cda.verifiers.llm_gate import LLMJudgement

__all__ = ["Fragment", "OfflineProvider", "STOPWORDS", "claim_fragments", "unsupported_fragments"]

_WORD = re.compile(r"\w+(?:[.\-:/]\w+)*%?")
_NUMBER = re.compile(r"([0-9]+(?:\.[0-9]+)?)(%|[A-Za-z]+)?")
_CALL_OPEN = re.compile(r"\s*\(")
_IDENTIFIER_MARKS = frozenset("_.-:/")
_VOWELS = frozenset("aeiouy")

STOPWORDS: frozenset[str] = frozenset(
    """
    a an the this that these those it its we our us they their them he his she her i me my you your
    in on at of for to from by with into onto over under about as than via per
    and or but nor not no yes if then else when while after before because so since until
    is are was were be been being has have had do does did will would can could may might must shall should
    all any some each every both either neither none there here what which who whom whose how why where
    also only just very more most less least same other such own
    holds exists path within hops weight only_if implies iff xor forall at_most at_least exactly
    prefer use value risk low medium high hard true false
    """.split()
)
"""Words never taken for entities, compared case-insensitively."""

FragmentKind = Literal["number", "entity"]


@dataclass(frozen=True)
class Fragment:
    """A checkable piece of a claim: characters ``[start, end)`` of the text, and what it is."""

    text: str
    kind: FragmentKind
    start: int
    end: int


def _is_number(word: str) -> bool:
    return _NUMBER.fullmatch(word) is not None


def _number_key(word: str) -> tuple[str, str]:
    match = _NUMBER.fullmatch(word)
    assert match is not None
    try:
        value = format(Decimal(match.group(1)).normalize(), "f")
    except InvalidOperation:  # pragma: no cover - the regex admits only decimal literals
        value = match.group(1)
    return value, (match.group(2) or "").casefold()


def _looks_like_entity(word: str) -> bool:
    if any(ch in _IDENTIFIER_MARKS for ch in word) or any(ch.isdigit() for ch in word):
        return True
    if any(ch.isupper() for ch in word):
        return True
    return len(word) >= 2 and word.isascii() and word.isalpha() and word.islower() and not (set(word) & _VOWELS)


def _contexts(text: str) -> tuple[list[bool], list[bool]]:
    """Per character: is it inside the arguments of a call, and is it inside backticks?"""
    in_args = [False] * len(text)
    in_ticks = [False] * len(text)
    stack: list[bool] = []  # True: the parenthesis opens a call's arguments
    ticks = False
    last = ""  # the last non-space character seen
    for i, ch in enumerate(text):
        if ch == "`":
            ticks = not ticks
        elif ch == "(":
            stack.append(last.isalnum() or last == "_")
        elif ch == ")" and stack:
            stack.pop()
        in_args[i] = bool(stack) and stack[-1]
        in_ticks[i] = ticks
        if not ch.isspace():
            last = ch
    return in_args, in_ticks


def claim_fragments(text: str) -> list[Fragment]:
    """The numbers and entities of ``text``, in order (see the module docstring for the rules).

    >>> [(f.text, f.kind) for f in claim_fragments("holds(down(db)) after 3.5h; Alice saw 40% of auth-svc")]
    [('db', 'entity'), ('3.5h', 'number'), ('Alice', 'entity'), ('40%', 'number'), ('auth-svc', 'entity')]
    """
    in_args, in_ticks = _contexts(text)
    out: list[Fragment] = []
    for match in _WORD.finditer(text):
        word, start, end = match.group(), match.start(), match.end()
        if _is_number(word):
            out.append(Fragment(word, "number", start, end))
            continue
        if word.casefold() in STOPWORDS:
            continue
        if _CALL_OPEN.match(text, end):
            continue  # a predicate name: vocabulary, not a thing
        if in_args[start] or in_ticks[start] or _looks_like_entity(word):
            out.append(Fragment(word, "entity", start, end))
    return out


def _name_forms(word: str) -> set[str]:
    folded = word.casefold()
    forms = {folded}
    if ":" in folded:
        forms.add(folded.rsplit(":", 1)[1])
    return forms


class _Support:
    """Everything the evidence (and the known ids) mentions, ready for lookups."""

    def __init__(self, evidence: Iterable[str], known_ids: Iterable[str]) -> None:
        self.names: set[str] = set()
        self.numbers: set[tuple[str, str]] = set()
        for ident in known_ids:
            self.names |= _name_forms(ident)
        for text in evidence:
            for match in _WORD.finditer(text):
                word = match.group()
                self.names |= _name_forms(word)
                if _is_number(word):
                    self.numbers.add(_number_key(word))
        self.bare_values = {value for value, _ in self.numbers}

    def supports(self, fragment: Fragment) -> bool:
        if fragment.kind == "number":
            value, suffix = _number_key(fragment.text)
            if (value, suffix) in self.numbers or (not suffix and value in self.bare_values):
                return True
            return fragment.text.casefold() in self.names
        return bool(_name_forms(fragment.text) & self.names)


def unsupported_fragments(claim: str, evidence: Iterable[str], known_ids: Iterable[str] = ()) -> list[Fragment]:
    """The fragments of ``claim`` that no evidence string (nor known id) mentions; first occurrence each.

    >>> [f.text for f in unsupported_fragments("db latency rose 40% in 2h", ["db latency up 40%"])]
    ['2h']
    """
    support = _Support(evidence, known_ids)
    seen: set[str] = set()
    out: list[Fragment] = []
    for fragment in claim_fragments(claim):
        if fragment.text in seen or support.supports(fragment):
            continue
        seen.add(fragment.text)
        out.append(fragment)
    return out


class OfflineProvider:
    """Flags every number and entity of a claim that the evidence does not mention.

    ``known_ids`` (e.g. the node ids of a Ken graph) count as mentioned too. Deterministic:
    the same claim and evidence always give the same judgement. It never states a confidence,
    so when it flags nothing the gate changes nothing.

    >>> OfflineProvider().judge("auth-svc failed 3 times", ["auth-svc failed"]).flagged
    ['3']
    """

    def __init__(self, known_ids: Iterable[str] = (), name: str = "offline") -> None:
        self.name = name
        self.known_ids: tuple[str, ...] = tuple(sorted(set(known_ids)))

    def judge(self, claim: str, evidence: list[str]) -> LLMJudgement:
        """Judge ``claim``: ``agrees`` is "no" when anything is flagged, "yes" otherwise."""
        fragments = claim_fragments(claim)
        missing = unsupported_fragments(claim, evidence, self.known_ids)
        if missing:
            listed = ", ".join(f"{f.text!r} ({f.kind})" for f in missing)
            rationale = f"{len(missing)} fragment(s) of the claim occur in no evidence: {listed}"
        elif fragments:
            rationale = f"every number and entity of the claim occurs in the evidence ({len(fragments)} checked)"
        else:
            rationale = "the claim names no number or entity to check"
        return LLMJudgement(
            provider=self.name,
            agrees="no" if missing else "yes",
            confidence=None,
            flagged=[f.text for f in missing],
            rationale=rationale,
        )
