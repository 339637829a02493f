"""Which upstream schema regexes the gateway checks in a child process (cda/guardian/schema_check.py):
the delimited shapes that nest repetitions but match one way (``^([a-z]+\\.)+[a-z]+$``) stay in
process — each was a 0.1–0.3 s child per call — and every pattern that really backtracks without
end still goes to the child. Both sets are checked against the real ``jsonschema``: a safe pattern
answers a long hostile argument as ``jsonschema`` does on a short one, a risky one does not answer
within a second on 40 characters."""

from __future__ import annotations

import pytest
from jsonschema.validators import validator_for

from cda.guardian.schema_check import backtracking_patterns, errors_in_child

SAFE = [r"^([a-z]+\.)+[a-z]+$", r"^[a-z]+(\.[a-z]+)*$", r"^(?:\d{1,3}\.){3}\d{1,3}$", r"^(\w+-)*\w+$",
        r"(?i)^([a-z]+@)+x$", r"^(a+,)+$", r"^[a-z0-9_]{1,64}$", r"^(ab)?c+$"]

RISKY = [r"^(a+)+$", r"^(x|xy)*z$", r"(\w+)\s\1", r"^(k*)*$", r"^(a+,a+)+$", r"^(a+a+\.)+$",
         r"^([a-z]+[a-z.]+\.)+$", r"^([\w.]+\.)+$", r"(?i)^([a-z]+A)+$", r"^([^,]+.)+$", r"^(a*\.?)+$",
         r"^(a+b?)+$", r"^(([a-z]+\.)+,)+$"]

HOSTILE = {  # an argument that fails after every way of splitting it was tried: 2^40 or 5^20 tries
    r"^(a+)+$": "a" * 40 + "!",
    r"^(a+,a+)+$": "a," + ",".join(["aaaaaa"] * 20) + "!",
    r"^(a+a+\.)+$": "aaaaaa." * 20 + "!",
}


def _schema(pattern: str) -> dict[str, object]:
    return {"type": "object", "properties": {"x": {"type": "string", "pattern": pattern}}}


def test_delimited_nestings_stay_in_process_and_the_rest_go_to_the_child() -> None:
    assert backtracking_patterns({"anyOf": [_schema(p) for p in SAFE]}) == []
    assert backtracking_patterns({"anyOf": [_schema(p) for p in RISKY]}) == sorted(RISKY)


UNIT = {r"^([a-z]+\.)+[a-z]+$": "ab.", r"^[a-z]+(\.[a-z]+)*$": "ab.", r"^(\w+-)*\w+$": "ab-",
        r"(?i)^([a-z]+@)+x$": "aB@", r"^(a+,)+$": "aa,", r"^(?:\d{1,3}\.){3}\d{1,3}$": "12."}
"""A piece of each nesting safe pattern, repeated into an argument that fails only at its end."""


@pytest.mark.parametrize("pattern", sorted(UNIT))
def test_a_safe_nesting_answers_a_long_hostile_argument_as_jsonschema_does(pattern: str) -> None:
    # the shape that is exponential for (a+)+ — a long run that fails at its end — made of the
    # pattern's own pieces; checked in a child (were the detector wrong, the deadline says so
    # instead of the test hanging), and its answer is jsonschema's on the same argument, short
    schema = _schema(pattern)
    assert pattern in SAFE
    unit = UNIT[pattern]
    validator = validator_for(schema)(schema)
    for count in (3, 20_000):
        instance = {"x": unit * count + "!"}
        expected = [(["x"], e.message) for e in validator.iter_errors(instance)][:1] if count == 3 else None
        answer = errors_in_child(schema, instance, seconds=120)
        assert answer is not None and len(answer) == 1 and answer[0][0] == ["x"]
        if expected is not None:
            assert answer == expected


@pytest.mark.parametrize("pattern", sorted(HOSTILE))
def test_a_risky_pattern_really_does_not_answer_a_hostile_argument(pattern: str) -> None:
    # the other direction: what the detector sends to the child needs the child (years of work here)
    assert pattern in RISKY
    assert errors_in_child(_schema(pattern), {"x": HOSTILE[pattern]}, seconds=1.0) is None
    assert errors_in_child(_schema(pattern), {"x": "b"}, seconds=120) == [
        (["x"], f"'b' does not match {pattern!r}")]
