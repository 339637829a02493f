"""PII posture ``on``: no email, phone, IBAN or card number reaches a provider's request body.

The property generates each kind in the formats people write (E.164 and national phone numbers,
IBANs in either case with or without spaces, card numbers grouped or not), puts them in a claim
and its evidence, sends them through the HTTP provider to a fake provider on loopback, and reads
the bytes the provider received. Before: ``5551234567``, ``020 7946 0958``, ``0171 234 5678``,
``06-12345678`` and lowercase IBANs left the process under ``on``. ``consent`` redacts like ``on``
until the action carries the approval ``pii:consent``; the oracle for the property is the same
request under ``off``, where every value does arrive.
"""

from __future__ import annotations

import json
import re
import string
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cda.actions.approvals import approve, pii_decision
from cda.adapters.llm_http import OpenAICompatibleProvider
from cda.contracts.action import CDAInputs
from cda.verifiers.redact import iban_valid, luhn_valid
from tests.fake_llm import FakeProvider, fake_provider
from tests.timing import HANG


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeProvider]:
    with fake_provider() as server:
        yield server


def _digits(text: str) -> str:
    return re.sub(r"\D", "", text)


# ---------------------------------------------------------------- generators of personal data

_LOCAL = st.text(string.ascii_lowercase + string.digits, min_size=1, max_size=8)
emails = st.builds(lambda a, b, dom, tld: f"{a}{b}@{dom}.{tld}", _LOCAL,
                   st.sampled_from(["", ".x", "+tag", "_y", "-z"]), _LOCAL, st.sampled_from(["org", "com", "co.uk", "de"]))


def _n(count: int) -> st.SearchStrategy[str]:
    return st.text(string.digits, min_size=count, max_size=count)


def _sep() -> st.SearchStrategy[str]:
    return st.sampled_from([" ", "-", ""])


e164 = st.builds(lambda cc, rest, sep: "+" + cc + sep + (sep.join(re.findall(r".{1,4}", rest)) if sep else rest),
                 st.sampled_from(["1", "44", "31", "49", "353", "86"]), st.integers(7, 11).flatmap(_n),
                 st.sampled_from(["", " "]))
national = st.one_of(
    st.builds(lambda a, b: f"020 {a} {b}", _n(4), _n(4)),  # London
    st.builds(lambda a, b, c: f"0{a} {b} {c}", _n(3), _n(3), _n(4)),  # 0171 234 5678
    st.builds(lambda a, b: f"0{a}-{b}", st.sampled_from(["6", "20", "10"]), _n(8)),  # 06-12345678
    st.builds(lambda a: f"555{a}", _n(7)),  # 5551234567
    st.builds(lambda a, b, s: f"555{s}{a}{s}{b}", _n(3), _n(4), st.sampled_from(["-", " ", "."])),
    st.builds(lambda a, b: f"(555) {a}-{b}", _n(3), _n(4)),
)


def _iban(country: str, bban: str) -> str:
    for check in range(2, 99):
        candidate = f"{country}{check:02d}{bban}"
        if iban_valid(candidate):
            return candidate
    raise AssertionError("no check digits")  # pragma: no cover - mod 97 always has one


ibans = st.builds(
    lambda country, bban, lower, spaced: (lambda i: " ".join(re.findall(r".{1,4}", i)) if spaced else i)(
        _iban(country, bban).lower() if lower else _iban(country, bban)),
    st.sampled_from(["DE", "GB", "NL", "FR"]), st.text(string.digits + "ABCDEFGHJK", min_size=14, max_size=22),
    st.booleans(), st.booleans(),
)


def _card(prefix: str, body: str) -> str:
    for last in string.digits:
        if luhn_valid(prefix + body + last):
            return prefix + body + last
    raise AssertionError("no Luhn digit")  # pragma: no cover


cards = st.builds(
    lambda number, sep: sep.join(re.findall(r".{1,4}", number)) if sep else number,
    st.sampled_from(["4", "51", "37", "6011"]).flatmap(  # 13 to 19 digits in all
        lambda prefix: st.integers(13, 19).flatmap(lambda total: _n(total - len(prefix) - 1).map(
            lambda body: _card(prefix, body)))),
    st.sampled_from(["", " ", "-"]),
)
personal = st.one_of(emails.map(lambda v: ("email", v)), e164.map(lambda v: ("phone", v)),
                     national.map(lambda v: ("phone", v)), ibans.map(lambda v: ("iban", v)),
                     cards.map(lambda v: ("card", v)))
frames = st.sampled_from(["contact {} today", "({})", "{}.", "see {}, then", "{}"])


def _provider(url: str, posture: Any, consent: bool = False) -> OpenAICompatibleProvider:
    return OpenAICompatibleProvider(url, "fake", egress="partner", pii_posture=posture, pii_consent=consent,
                                    timeout_s=HANG, max_attempts=1)  # a loopback answer: only a hang is late


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(values=st.lists(st.tuples(personal, frames), min_size=1, max_size=4))
def test_no_personal_data_reaches_the_provider_under_on(fake: FakeProvider, values: list[Any]) -> None:
    texts = [frame.format(value) for (_, value), frame in values]
    claim, evidence = " and ".join(texts[:2]), texts
    fake.mode = "ok"
    before = len(fake.bodies)
    _provider(fake.url, "on").judge(claim, evidence)
    body = fake.bodies[before].decode("utf-8")
    sent = json.loads(json.loads(body)["messages"][1]["content"])
    wire = json.dumps(sent, ensure_ascii=False)
    for (kind, value), _ in values:
        assert value not in wire, (kind, value, wire)
        if kind in ("phone", "card"):
            assert _digits(value) not in _digits(wire), (kind, value, wire)
        if kind == "iban":
            assert value.replace(" ", "").upper() not in wire.replace(" ", "").upper(), (value, wire)


@pytest.mark.parametrize("value", ["5551234567", "020 7946 0958", "0171 234 5678", "06-12345678",
                                   "de89 3704 0044 0532 0130 00", "+14155552671"])
def test_the_formats_that_leaked_are_redacted_and_arrive_under_off(fake: FakeProvider, value: str) -> None:
    fake.mode = "ok"
    before = len(fake.bodies)
    _provider(fake.url, "on").judge(f"call {value}", [f"owner {value}"])
    _provider(fake.url, "off").judge(f"call {value}", [f"owner {value}"])
    redacted, plain = (b.decode("utf-8") for b in fake.bodies[before:])
    assert value not in redacted and value in plain


def test_consent_redacts_until_the_action_carries_the_approval() -> None:
    inputs = CDAInputs(problem="p", policies={"pii_posture": "consent", "egress": "partner"})
    assert pii_decision(inputs).by == "refused" and not pii_decision(inputs).allowed
    assert pii_decision(approve(inputs, "pii:consent")).allowed
    on = inputs.model_copy(update={"policies": inputs.policies.model_copy(update={"pii_posture": "on"})})
    assert not pii_decision(approve(on, "pii:consent")).allowed  # an approval does not lift "on"
