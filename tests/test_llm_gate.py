"""The LLM gate only ever lowers; the providers feeding it behave (issue 5, part 4).

- the gate, property-tested over every status, confidence and judgement (valid or garbage);
- the offline provider flags invented numbers and entities and never flags copied text;
- redaction leaves no email, phone or IPv4 and numbers placeholders stably;
- the HTTP provider, driven against a real chat-completions server on 127.0.0.1.
"""

from __future__ import annotations

import json
import re
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from cda.adapters.llm_http import EgressDenied, OpenAICompatibleProvider
from cda.contracts.verification import VerifierOutcome
from cda.errors import CDAError
from cda.verifiers.llm_gate import (
    LLMJudgement,
    LLMProvider,
    LLMProviderError,
    apply_llm_gate,
    consult,
    judgement_cap,
    llm_outcome,
)
from cda.verifiers.llm_offline import OfflineProvider, claim_fragments, unsupported_fragments
from cda.verifiers.redact import Redactor, iban_valid, luhn_valid, redact

STATUSES = ("supported", "refuted", "inconclusive")
ALLOWED = {("supported", "supported"), ("supported", "inconclusive"), ("refuted", "refuted"),
           ("inconclusive", "inconclusive")}


# --------------------------------------------------------------------------------------------
# The gate
# --------------------------------------------------------------------------------------------

valid_judgements = st.builds(
    LLMJudgement,
    provider=st.text(max_size=10),
    agrees=st.sampled_from(["yes", "no", "unsure"]),
    confidence=st.none() | st.floats(0.0, 1.0),
    flagged=st.lists(st.text(max_size=8), max_size=4),
    rationale=st.text(max_size=30),
)
anything = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=8) | st.lists(
    st.integers() | st.text(max_size=4), max_size=3
)
garbage_judgements = st.builds(
    lambda **kw: LLMJudgement.model_construct(**kw),
    provider=anything,
    agrees=st.sampled_from(["yes", "no", "unsure"]) | anything,
    confidence=st.floats(0.0, 1.0) | anything,
    flagged=st.lists(st.text(max_size=4), max_size=2) | anything,
    rationale=anything,
)
judgements = st.none() | valid_judgements | garbage_judgements


@settings(max_examples=400, deadline=None)
@given(status=st.sampled_from(STATUSES), confidence=st.floats(0.0, 1.0), judgement=judgements)
def test_gate_never_raises_a_status_or_a_confidence(status: Any, confidence: float, judgement: Any) -> None:
    new_status, new_confidence, caveats = apply_llm_gate(status, confidence, judgement)
    assert (status, new_status) in ALLOWED
    assert new_confidence <= confidence
    assert 0.0 <= new_confidence <= 1.0
    assert all(isinstance(c, str) for c in caveats)
    if (new_status, new_confidence) == (status, confidence):
        assert caveats == []  # caveats say what changed, and only that
    else:
        assert caveats
    assert apply_llm_gate(status, confidence, judgement) == (new_status, new_confidence, caveats)


@settings(deadline=None)
@given(status=st.sampled_from(STATUSES), confidence=st.floats(0.0, 1.0), judgement=garbage_judgements)
def test_a_malformed_judgement_changes_nothing(status: Any, confidence: float, judgement: LLMJudgement) -> None:
    fields = {name: getattr(judgement, name) for name in LLMJudgement.model_fields}
    try:
        valid = LLMJudgement.model_validate(fields, strict=True)
    except ValidationError:
        assert apply_llm_gate(status, confidence, judgement) == (status, confidence, [])
    else:  # it happened to be well formed: it counts exactly like the validated judgement
        assert apply_llm_gate(status, confidence, judgement) == apply_llm_gate(status, confidence, valid)


def test_both_providers_follow_the_protocol() -> None:
    assert isinstance(OfflineProvider(), LLMProvider)
    provider = OpenAICompatibleProvider("https://llm.example", "m", egress="external", pii_posture="on")
    assert isinstance(provider, LLMProvider)
    assert provider.name == "http:m" and provider.endpoint == "https://llm.example/chat/completions"


@pytest.mark.parametrize(
    ("judgement", "status", "confidence", "expected"),
    [
        (LLMJudgement(provider="p", agrees="no"), "supported", 1.0, ("inconclusive", 0.5)),
        (LLMJudgement(provider="p", agrees="yes", flagged=["db"]), "supported", 1.0, ("inconclusive", 0.5)),
        (LLMJudgement(provider="p", agrees="unsure"), "supported", 1.0, ("supported", 0.8)),
        (LLMJudgement(provider="p", agrees="yes", confidence=0.9), "supported", 1.0, ("supported", 0.9)),
        (LLMJudgement(provider="p", agrees="yes", confidence=0.3), "supported", 1.0, ("inconclusive", 0.3)),
        (LLMJudgement(provider="p", agrees="no", confidence=0.2), "inconclusive", 0.7, ("inconclusive", 0.2)),
        (LLMJudgement(provider="p", agrees="no"), "inconclusive", 0.3, ("inconclusive", 0.3)),
        (LLMJudgement(provider="p", agrees="yes", confidence=1.0), "refuted", 0.0, ("refuted", 0.0)),
        (LLMJudgement(provider="p", agrees="no"), "refuted", 0.0, ("refuted", 0.0)),
        (LLMJudgement(provider="p", agrees="yes"), "supported", 1.0, ("supported", 1.0)),
        (None, "supported", 1.0, ("supported", 1.0)),
    ],
)
def test_gate_rules(judgement: LLMJudgement | None, status: Any, confidence: float, expected: tuple[str, float]) -> None:
    assert apply_llm_gate(status, confidence, judgement)[:2] == expected


def test_gate_caveats_say_what_changed() -> None:
    judgement = LLMJudgement(provider="offline", agrees="no", flagged=["3.5", "auth-svc"])
    status, confidence, caveats = apply_llm_gate("supported", 1.0, judgement)
    assert (status, confidence) == ("inconclusive", 0.5)
    assert caveats == [
        "llm offline: supported -> inconclusive (disagrees; flagged 2 unsupported fragment(s): '3.5', 'auth-svc')",
        "llm offline: confidence 1 -> 0.5 (disagrees; flagged 2 unsupported fragment(s): '3.5', 'auth-svc')",
    ]


@pytest.mark.parametrize(("status", "confidence"), [("proven", 1.0), ("supported", 1.5), ("supported", float("nan"))])
def test_gate_refuses_a_malformed_verdict(status: Any, confidence: float) -> None:
    with pytest.raises(ValueError):
        apply_llm_gate(status, confidence, None)


def test_llm_outcome() -> None:
    failed = llm_outcome("db down", LLMJudgement(provider="offline", agrees="no", flagged=["db"], rationale="r"))
    assert isinstance(failed, VerifierOutcome)
    assert (failed.verifier, failed.status, failed.confidence_cap) == ("llm", "failed", 0.5)
    assert failed.data["flagged"] == ["db"]
    unsure = llm_outcome("c", LLMJudgement(provider="p", agrees="unsure"))
    assert (unsure.status, unsure.confidence_cap) == ("inconclusive", 0.8)
    passed = llm_outcome("c", LLMJudgement(provider="p", agrees="yes"))
    assert (passed.status, passed.confidence_cap) == ("passed", None)
    capped = llm_outcome("c", LLMJudgement(provider="p", agrees="yes", confidence=0.7))
    assert (capped.status, capped.confidence_cap) == ("passed", 0.7)
    assert llm_outcome("c", None).status == "skipped"


@settings(deadline=None)
@given(judgement=judgements)
def test_outcome_cap_agrees_with_the_gate(judgement: Any) -> None:
    cap, demote, _ = judgement_cap(judgement)
    outcome = llm_outcome("claim", judgement)
    assert outcome.confidence_cap == (cap if cap < 1.0 else None)
    assert (outcome.status == "failed") == demote
    status, confidence, _ = apply_llm_gate("supported", 1.0, judgement)
    assert confidence == cap
    assert (status == "inconclusive") == demote


# --------------------------------------------------------------------------------------------
# The offline provider
# --------------------------------------------------------------------------------------------

EVIDENCE = [
    "2024-05-01 incident: auth-svc returned 503 for 40% of requests over 2h.",
    "Alice restarted the db at 14:05; latency fell to 3.5ms.",
]


@pytest.mark.parametrize(
    ("claim", "flagged"),
    [
        ("auth-svc returned 503 for 40% of requests", []),
        ("auth-svc returned 503 for 45% of requests", ["45%"]),
        ("Alice restarted the db, latency fell to 3.50ms", []),
        ("Alice restarted the db, latency fell to 3.5s", ["3.5s"]),
        ("Bob restarted the cache after 3h", ["Bob", "3h"]),
        ("the outage lasted 2h and hit payment-svc", ["payment-svc"]),
        ("holds(down(db)) and holds(down(cache))", ["cache"]),
        ("restart(auth-svc, Alice)", []),
        ("the `cache` node failed", ["cache"]),
        ("the svc and the dns failed", ["svc", "dns"]),
        ("The incident was bad and it was fixed", []),
        ("errors rose to 40", []),  # a bare number is supported by 40%
        ("exists path(entity:db ->related_to-> entity:auth-svc within 2 hops)", ["related_to"]),
    ],
)
def test_offline_provider_flags_invented_numbers_and_entities(claim: str, flagged: list[str]) -> None:
    judgement = OfflineProvider().judge(claim, EVIDENCE)
    assert judgement.flagged == flagged
    assert judgement.agrees == ("no" if flagged else "yes")
    assert judgement.provider == "offline"
    for fragment in flagged:
        assert repr(fragment) in judgement.rationale


def test_offline_provider_accepts_known_ken_ids() -> None:
    claim = "payment-svc depends on ledger-db"
    assert OfflineProvider().judge(claim, []).flagged == ["payment-svc", "ledger-db"]
    known = OfflineProvider(known_ids=["entity:payment-svc", "ledger-db"])
    assert known.judge(claim, []).flagged == []


def test_fragments_report_positions() -> None:
    text = "Alice saw 3.5h of db"
    for fragment in claim_fragments(text):
        assert text[fragment.start:fragment.end] == fragment.text
    assert [f.text for f in claim_fragments(text)] == ["Alice", "3.5h", "db"]


def test_offline_through_the_gate() -> None:
    judgement = OfflineProvider().judge("Bob restarted the db", EVIDENCE)
    assert apply_llm_gate("supported", 1.0, judgement)[:2] == ("inconclusive", 0.5)
    judgement = OfflineProvider().judge("Alice restarted the db", EVIDENCE)
    assert apply_llm_gate("supported", 1.0, judgement) == ("supported", 1.0, [])


_pieces = st.sampled_from(
    ["db", "auth-svc", "Alice", "PostgreSQL", "3.5", "40%", "2h", "15ms", "v1.2.3", "entity:A", "the", "and",
     "holds(", "down(db)", ")", "(", ",", ".", "`", "x", "1,000", "2024-05-01", "A", "tcp", "3.50", "%", ":"]
)
_evidence_text = st.lists(_pieces, max_size=12).map(" ".join) | st.text(max_size=40)


@settings(max_examples=300, deadline=None)
@given(data=st.data(), evidence=st.lists(_evidence_text, min_size=1, max_size=4))
def test_a_claim_copied_from_the_evidence_is_never_flagged(data: st.DataObject, evidence: list[str]) -> None:
    words = [word for text in evidence for word in text.split()]
    chosen = data.draw(st.lists(st.sampled_from(words), max_size=15)) if words else []
    claim = " ".join(chosen)
    assert unsupported_fragments(claim, evidence) == []
    assert OfflineProvider().judge(claim, evidence).agrees == "yes"


@settings(deadline=None)
@given(claim=st.text(max_size=60), evidence=st.lists(st.text(max_size=40), max_size=3))
def test_offline_provider_is_deterministic_and_total(claim: str, evidence: list[str]) -> None:
    first = OfflineProvider().judge(claim, evidence)
    assert first == OfflineProvider().judge(claim, evidence)
    assert set(first.flagged) <= {f.text for f in claim_fragments(claim)}


# --------------------------------------------------------------------------------------------
# Redaction
# --------------------------------------------------------------------------------------------

# Written independently of cda.verifiers.redact, to check that nothing of these kinds survives.
EMAIL_RE = re.compile(r"\S+@\S+\.\w+")
IPV4_RE = re.compile(r"\b\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3}\b")
PHONE_RE = re.compile(r"\+?\d[\d ()./-]{6,}\d")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("mail jane.doe+x@mail.example.org now", "mail [EMAIL_1] now"),
        ("call +1 (555) 123-4567 or 555-123-4567", "call [PHONE_1] or [PHONE_2]"),
        ("fax (030) 1234 5678, mobile 0171 1234567", "fax [PHONE_1], mobile [PHONE_2]"),
        ("host 192.168.0.12:8080 and 10.0.0.1.", "host [IPV4_1]:8080 and [IPV4_2]."),
        ("card 4111 1111 1111 1111 twice", "card [CARD_1] twice"),
        ("iban DE89 3704 0044 0532 0130 00 paid", "iban [IBAN_1] paid"),
        ("Dr. Jane Roe met Mr Smith and Ms. Jones", "[PERSON_1] met [PERSON_2] and [PERSON_3]"),
    ],
)
def test_redaction_examples(text: str, expected: str) -> None:
    result = redact(text)
    assert result.text == expected
    assert result.restore(result.text) == text
    assert not EMAIL_RE.search(result.text)
    assert not IPV4_RE.search(result.text)
    assert not PHONE_RE.search(result.text)


@pytest.mark.parametrize(
    "text",
    [
        "version 1.2.3.4.5 of 256.1.1.1",  # not IPv4 addresses
        "card 4111 1111 1111 1112",  # fails Luhn
        "iban DE88 3704 0044 0532 0130 00",  # fails mod 97
        "on 2024-05-01 the cost was 5000 USD for 12 hosts",
        "Jane Roe met Smith",  # bare names are not detected
    ],
)
def test_redaction_leaves_non_pii_alone(text: str) -> None:
    assert redact(text) == redact(text)
    assert redact(text).text == text
    assert redact(text).mapping == {}


def test_same_value_same_placeholder_numbered_by_first_occurrence() -> None:
    text = "b@x.org wrote to a@x.org; A@X.org replied from 10.0.0.2 and 10.0.0.1, then b@x.org again"
    result = redact(text)
    assert result.text == "[EMAIL_1] wrote to [EMAIL_2]; [EMAIL_2] replied from [IPV4_1] and [IPV4_2], then [EMAIL_1] again"
    assert result.mapping == {"[EMAIL_1]": "b@x.org", "[EMAIL_2]": "a@x.org", "[IPV4_1]": "10.0.0.2", "[IPV4_2]": "10.0.0.1"}
    assert list(result.mapping) == ["[EMAIL_1]", "[EMAIL_2]", "[IPV4_1]", "[IPV4_2]"]


def test_one_redactor_numbers_across_texts() -> None:
    redactor = Redactor()
    assert redactor.redact("from a@x.org") == "from [EMAIL_1]"
    assert redactor.redact("to c@x.org, cc a@x.org") == "to [EMAIL_2], cc [EMAIL_1]"


def test_checksums() -> None:
    assert luhn_valid("378282246310005") and not luhn_valid("378282246310006")
    assert iban_valid("GB82 WEST 1234 5698 7654 32") and not iban_valid("GB82 WEST 1234 5698 7654 33")


_emails = st.builds(
    "{}@{}.{}".format,
    st.from_regex(r"[a-z][a-z0-9._]{0,8}[a-z0-9]", fullmatch=True),
    st.from_regex(r"[a-z][a-z0-9-]{0,8}[a-z0-9]", fullmatch=True),
    st.sampled_from(["org", "com", "de", "co.uk"]),
)
_ips = st.builds("{}.{}.{}.{}".format, *[st.integers(0, 255)] * 4)
_phones = st.builds("+{} {} {}".format, st.integers(1, 99), st.integers(100, 999), st.integers(1000000, 9999999))
_words = st.sampled_from(["the", "db", "at", "Alice", "42", "ok", "v2", "port"])


@settings(max_examples=200, deadline=None)
@given(parts=st.lists(_emails | _ips | _phones | _words, max_size=12),
       seps=st.lists(st.sampled_from([" ", ", ", "; ", " and "]), min_size=12, max_size=12))
def test_redaction_leaves_no_email_ip_or_phone(parts: list[str], seps: list[str]) -> None:
    text = "".join(part + sep for part, sep in zip(parts, seps))
    result = redact(text)
    assert not EMAIL_RE.search(result.text)
    assert not IPV4_RE.search(result.text)
    # a phone as generated starts with "+"; words such as "42 42 42 42" may look like digits in
    # groups without being one (redact's rule: "+" and 8-15 digits, or an area code or dashes)
    assert not [m.group() for m in PHONE_RE.finditer(result.text) if m.group().startswith("+")]
    for part in parts:
        if part.startswith("+"):
            assert part not in result.text
    assert result.restore(result.text) == text
    assert redact(text) == result


# --------------------------------------------------------------------------------------------
# The HTTP provider against a real chat-completions server on 127.0.0.1
# --------------------------------------------------------------------------------------------


@dataclass
class Reply:
    content: str | None = None  # chat-completions content; None: send ``raw``
    status: int = 200
    raw: bytes = b""
    delay_s: float = 0.0


@dataclass
class ChatServer:
    url: str
    replies: list[Reply] = field(default_factory=list)
    requests: list[dict[str, Any]] = field(default_factory=list)
    release: threading.Event = field(default_factory=threading.Event)

    def script(self, *replies: Reply) -> None:
        self.replies.extend(replies)


def _handler(server: ChatServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - the stdlib's name
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            server.requests.append({"path": self.path, "headers": dict(self.headers), "body": body})
            reply = server.replies.pop(0) if server.replies else Reply(status=503, raw=b"no reply scripted")
            if reply.delay_s:
                server.release.wait(reply.delay_s)
            if reply.content is not None:
                payload = json.dumps({
                    "id": "chatcmpl-test", "object": "chat.completion", "model": "test-model",
                    "choices": [{"index": 0, "finish_reason": "stop",
                                 "message": {"role": "assistant", "content": reply.content}}],
                }).encode()
            else:
                payload = reply.raw
            try:
                self.send_response(reply.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)
            except OSError:
                pass  # the client gave up (the timeout test)

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the stdlib's name
            pass

    return Handler


@pytest.fixture
def chat_server(monkeypatch: pytest.MonkeyPatch) -> Iterator[ChatServer]:
    for var in ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.delenv(var, raising=False)
    state = ChatServer(url="")
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
    httpd.daemon_threads = True
    httpd.handle_error = lambda request, client_address: None  # type: ignore[method-assign]
    state.url = f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    # serve_forever checks for shutdown() once per poll interval: at its default 0.5 s every test's
    # teardown waited out half a second (11 s of the file); 10 ms keeps the wait a blink
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        state.release.set()
        httpd.shutdown()
        httpd.server_close()
        thread.join()


def _provider(server: ChatServer, **kw: Any) -> OpenAICompatibleProvider:
    options: dict[str, Any] = {"egress": "partner", "pii_posture": "off", "timeout_s": 10}
    options.update(kw)
    return OpenAICompatibleProvider(server.url, "test-model", **options)


def _judgement_json(**kw: Any) -> str:
    return json.dumps({"agrees": "yes", "confidence": None, "flagged": [], "rationale": "ok", **kw})


def test_http_provider_parses_a_judgement_and_sends_the_request_asked_for(chat_server: ChatServer) -> None:
    chat_server.script(Reply(_judgement_json(agrees="no", confidence=0.25, flagged=["3.5"], rationale="no 3.5")))
    provider = _provider(chat_server, api_key="sk-test")
    judgement = provider.judge("latency is 3.5ms", ["latency is 4ms"])
    assert judgement == LLMJudgement(
        provider="http:test-model", agrees="no", confidence=0.25, flagged=["3.5"], rationale="no 3.5"
    )
    (request,) = chat_server.requests
    assert request["path"] == "/v1/chat/completions"
    assert request["headers"]["Authorization"] == "Bearer sk-test"
    assert request["headers"]["Content-Type"] == "application/json"
    body = json.loads(request["body"])
    assert body["model"] == "test-model"
    assert (body["temperature"], body["seed"], body["response_format"]) == (0, 0, {"type": "json_object"})
    assert [m["role"] for m in body["messages"]] == ["system", "user"]
    assert json.loads(body["messages"][1]["content"]) == {"claim": "latency is 3.5ms", "evidence": ["latency is 4ms"]}
    assert "sk-test" not in repr(provider)


def test_http_requests_are_byte_for_byte_deterministic(chat_server: ChatServer) -> None:
    chat_server.script(Reply(_judgement_json()), Reply(_judgement_json()))
    provider = _provider(chat_server, pii_posture="on")
    claim, evidence = "mail a@x.org about 10.0.0.1", ["a@x.org owns 10.0.0.1"]
    assert provider.judge(claim, evidence) == provider.judge(claim, evidence)
    first, second = chat_server.requests
    assert first["body"] == second["body"]


def test_http_provider_accepts_a_fenced_object_and_refuses_keys_outside_the_contract(chat_server: ChatServer) -> None:
    chat_server.script(Reply("```json\n" + _judgement_json(agrees="unsure") + "\n```"),
                       Reply(_judgement_json(agrees="yes", note="extra")))
    assert _provider(chat_server).judge("c", ["e"]).agrees == "unsure"
    with pytest.raises(LLMProviderError, match="outside the judgement contract .unexpected note"):
        _provider(chat_server).judge("c", ["e"])


@pytest.mark.parametrize(
    ("reply", "message"),
    [
        (Reply("this is not json"), "not JSON"),
        (Reply("[1, 2]"), "replied with a JSON array where the verifier contract asks for a JSON object"),
        (Reply('"agrees"'), "replied with a JSON string where"),  # JSON's words, never Python's (list, str)
        (Reply("[" * 100_000 + "]" * 100_000), "JSON that cannot be read (nested too deeply)"),
        (Reply(json.dumps({"confidence": 0.5})), "agrees"),
        (Reply(_judgement_json(agrees="maybe")), "agrees"),
        (Reply(_judgement_json(confidence=1.5)), "confidence"),
        (Reply(_judgement_json(flagged="db")), "flagged"),
        (Reply(raw=b"<html>oops</html>"), "not JSON"),
        (Reply(raw=b'{"choices": []}'), "choices[0].message.content"),
        (Reply(raw=b'{"choices": [{"message": {"content": null}}]}'), "not a string"),
        (Reply(status=500, raw=b'{"error": "boom"}'), "HTTP 500"),
        (Reply(status=401, raw=b'{"error": "bad key"}'), "HTTP 401"),
    ],
)
def test_http_provider_failures_are_provider_errors(chat_server: ChatServer, reply: Reply, message: str) -> None:
    chat_server.script(reply)
    with pytest.raises(LLMProviderError) as info:
        _provider(chat_server, max_attempts=1).judge("c", ["e"])
    assert message in str(info.value)
    assert isinstance(info.value, CDAError)
    assert len(chat_server.requests) == 1


def test_http_provider_timeout_is_a_provider_error(chat_server: ChatServer) -> None:
    chat_server.script(Reply(_judgement_json(), delay_s=30))
    with pytest.raises(LLMProviderError, match="did not answer within 0.2 s"):
        _provider(chat_server, timeout_s=0.2).judge("c", ["e"])


def test_unreachable_server_is_a_provider_error() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    provider = OpenAICompatibleProvider(f"http://127.0.0.1:{port}", "m", egress="external", pii_posture="off",
                                        timeout_s=5)
    with pytest.raises(LLMProviderError, match="could not be reached"):
        provider.judge("c", [])


def test_egress_local_denies_the_provider_before_any_request(chat_server: ChatServer) -> None:
    chat_server.script(Reply(_judgement_json()))
    with pytest.raises(EgressDenied) as info:
        _provider(chat_server, egress="local")
    assert isinstance(info.value, PermissionError) and isinstance(info.value, CDAError)
    assert chat_server.requests == []


PII_CLAIM = "Dr. Jane Roe (jane.roe@example.com, +44 20 7946 0958) reset host 10.1.2.3"
PII_EVIDENCE = ["ticket from jane.roe@example.com", "callback +44 20 7946 0958 requested", "host 10.1.2.3 reset"]
SECRETS = ["jane.roe@example.com", "jane.roe", "7946 0958", "+44 20", "10.1.2.3", "Jane Roe"]


def test_pii_on_redacts_everything_sent_and_restores_the_reply(chat_server: ChatServer) -> None:
    chat_server.script(Reply(_judgement_json(agrees="no", flagged=["[EMAIL_1]", "[PERSON_1]"],
                                             rationale="[PERSON_1] is not in the evidence")))
    judgement = _provider(chat_server, pii_posture="on").judge(PII_CLAIM, PII_EVIDENCE)
    (request,) = chat_server.requests
    raw = request["body"].decode("utf-8")
    user = json.loads(json.loads(raw)["messages"][1]["content"])
    for secret in SECRETS:
        assert secret not in raw
        assert secret not in json.dumps(user, ensure_ascii=False)
    assert not EMAIL_RE.search(raw) and not IPV4_RE.search(raw) and not PHONE_RE.search(raw)
    assert user["claim"] == "[PERSON_1] ([EMAIL_1], [PHONE_1]) reset host [IPV4_1]"
    assert user["evidence"] == ["ticket from [EMAIL_1]", "callback [PHONE_1] requested", "host [IPV4_1] reset"]
    assert judgement.flagged == ["jane.roe@example.com", "Dr. Jane Roe"]
    assert judgement.rationale == "Dr. Jane Roe is not in the evidence"


@pytest.mark.parametrize(("posture", "consent", "redacted"),
                         [("off", False, False), ("consent", False, True), ("consent", True, False)])
def test_pii_postures(chat_server: ChatServer, posture: Any, consent: bool, redacted: bool) -> None:
    chat_server.script(Reply(_judgement_json()))
    _provider(chat_server, pii_posture=posture, pii_consent=consent).judge(PII_CLAIM, PII_EVIDENCE)
    (request,) = chat_server.requests
    assert (b"jane.roe@example.com" in request["body"]) is not redacted


def test_a_failing_provider_is_no_judgement_and_no_change(chat_server: ChatServer) -> None:
    chat_server.script(Reply(status=500, raw=b"{}"), Reply(_judgement_json(agrees="no")))
    provider = _provider(chat_server, max_attempts=1)
    judgement, error = consult(provider, "db is down", ["db is down"])
    assert judgement is None and error is not None and "HTTP 500" in error
    assert apply_llm_gate("supported", 1.0, judgement) == ("supported", 1.0, [])
    judgement, error = consult(provider, "db is down", ["db is down"])
    assert error is None
    assert apply_llm_gate("supported", 1.0, judgement)[:2] == ("inconclusive", 0.5)
