"""The texts a counterexample gives an unnamed string read, in Cedar, as the value the model chose.

cda/policy/spellings.py writes them; cedarpy (Cedar's own evaluator) reads each back and compares
it with the value built another way (the epoch offset by the value in milliseconds, or the
milliseconds themselves), at random values and at the ends of the ranges.
"""

from __future__ import annotations

import itertools
import random

import cedarpy

from cda.policy.entities import parse_datetime, parse_duration
from cda.policy.lower import DATETIME_READ_RANGE
from cda.policy.spellings import spellings
from cda.policy.symvalues import IntV, Lin

REQUEST = {"principal": 'User::"a"', "action": 'Action::"r"', "resource": 'User::"b"', "context": {}}


def _cedar_agrees(conditions: list[str]) -> bool:
    policy = "permit(principal, action, resource) when { " + " && ".join(conditions) + " };"
    r = cedarpy.is_authorized(REQUEST, policy, [])
    assert not r.diagnostics.errors, (policy, [str(e) for e in r.diagnostics.errors])
    return r.decision.value == "Allow"


def _texts(kind: str, v: int, n: int) -> list[str]:
    return list(itertools.islice(spellings(kind, IntV(Lin.of(v), kind), {}), n))


def test_datetime_spellings_read_back_as_their_value_in_cedar() -> None:
    rng = random.Random(29)
    low, high = DATETIME_READ_RANGE
    values = [low, low + 1, high, high - 1, -62_167_219_200_001, 0, -1, *(rng.randint(low, high) for _ in range(40))]
    for v in values:
        texts = _texts("datetime", v, 6)
        # different strings need different texts: at the very ends one offset reads (one or two texts)
        assert len(set(texts)) == len(texts) >= (1 if v in (low, low + 1, high, high - 1) else 6), (v, texts)
        assert all(parse_datetime(t).ms == v for t in texts)
        # the epoch offset by v ms is v, in Cedar's arithmetic (two steps: a duration is 64-bit)
        half = v // 2
        built = f'datetime("1970-01-01").offset(duration("{half}ms")).offset(duration("{v - half}ms"))'
        assert _cedar_agrees([f'datetime("{t}") == {built}' for t in texts]), (v, texts)


def test_duration_spellings_read_back_as_their_value_in_cedar() -> None:
    rng = random.Random(30)
    values = [0, 1, -1, 86_400_000, -86_400_000, 90_061_001, -(2**63), 2**63 - 1,
              *(rng.randint(-(2**63), 2**63 - 1) for _ in range(40))]  # fmt: skip
    for v in values:
        texts = _texts("duration", v, 3)
        assert len(set(texts)) == len(texts) == 3, (v, texts)
        assert all(parse_duration(t).ms == v for t in texts)
        assert _cedar_agrees([f'duration("{t}").toMilliseconds() == {v}' if v != -(2**63)
                              else f'duration("{t}") < duration("-9223372036854775807ms")' for t in texts]), (v, texts)  # fmt: skip


def test_an_error_reading_is_spelled_as_a_text_that_is_neither() -> None:
    for kind, reader in (("datetime", parse_datetime), ("duration", parse_duration)):
        for t in itertools.islice(spellings(kind, None, {}), 3):
            try:
                reader(t)
            except Exception:  # noqa: BLE001 - any refusal is the error wanted
                continue
            raise AssertionError(f"{t!r} reads as a {kind}")
