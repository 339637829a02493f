"""An LLM provider over HTTP: any server that speaks the OpenAI Chat Completions API.

OpenAI, Azure-style gateways, vLLM, llama.cpp's server, Ollama and LM Studio all accept
``POST {base_url}/chat/completions``, so one small client (stdlib ``urllib``, no SDK) covers
them. The request asks for a JSON object with the fields of
:class:`~cda.verifiers.llm_gate.LLMJudgement`, at temperature 0 and seed 0, so that a
deterministic server gives the same answer twice.

Policies of the run (spec §6) are enforced here, at the edge, before anything leaves:

- ``egress="local"`` forbids this provider outright: construction raises :class:`EgressDenied`,
  so no connection is ever opened (even to a loopback address: "local" means no provider call
  at all, and a loopback port may forward anywhere). ``partner`` and ``external`` are allowed.
- ``pii_posture="on"`` redacts the claim and the evidence (one numbering across them, see
  :mod:`cda.verifiers.redact`) before sending, and puts the values back into the flagged
  fragments and rationale of the reply. ``"consent"`` redacts too unless ``pii_consent=True``
  records that the approval was given; ``"off"`` sends the text as it is.

Every failure (HTTP status, timeout, refused connection, a reply that is not the JSON asked
for, a key outside the contract) raises :class:`~cda.verifiers.llm_gate.LLMProviderError`; the
Action treats it as no judgement, and a required check without a judgement *fails closed*
(:func:`cda.verifiers.llm_gate.fail_closed`).

A reply is read in either of two contracts: the judgement asked for (``agrees``, ``confidence``,
``flagged``, ``rationale``) or the abstain gate's verifier contract (docs/actions.md, Abstention) (``status`` ``OK | NEEDS_REWRITE |
ABSTAIN``, typed ``problems``, ``rewritten_report``). Anything else is malformed.

Time and tokens (:meth:`OpenAICompatibleProvider.judge_bounded`): every attempt's socket timeout
is the smaller of ``timeout_s`` and what is left before the caller's deadline; HTTP 429 and 5xx
(and a connection reset) are retried at most ``max_attempts`` times with exponential backoff
(``Retry-After`` honoured up to 5 s) when the wait still fits before the deadline; tokens are
reserved from the action's :class:`~cda.verifiers.llm_gate.TokenMeter` before sending and
settled at the reply's ``usage.total_tokens``.
"""

from __future__ import annotations

import json
import re
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Any, Literal

from pydantic import ValidationError

from cda.contracts.locations import validation_problems
from cda.errors import CDAError
from cda.verifiers.llm_gate import LLMJudgement, LLMProviderError, ReviewContext, TokenMeter
from cda.verifiers.redact import Redactor

__all__ = [
    "Egress", "EgressDenied", "LLMProviderError", "OpenAICompatibleProvider", "PiiPosture", "REVIEW_PROMPT", "SYSTEM_PROMPT",
]

Egress = Literal["local", "partner", "external"]
PiiPosture = Literal["on", "off", "consent"]

MAX_REPLY_BYTES = 1 << 20
"""A reply larger than this is refused (a judgement is a few hundred bytes)."""

SYSTEM_PROMPT = (
    "You check one claim against the evidence given, and nothing else. Reply with one JSON object "
    'with exactly these keys: "agrees" ("yes" if the evidence supports the claim, "no" if it '
    'contradicts it or leaves part of it unsupported, "unsure" otherwise), "confidence" (your '
    'probability from 0 to 1 that the claim holds given the evidence, or null), "flagged" (a list '
    "of the claim's fragments - numbers, names, identifiers - that no evidence supports, copied "
    'exactly from the claim), "rationale" (one or two sentences). Bracketed placeholders such as '
    "[EMAIL_1] stand for hidden values: treat equal placeholders as equal values."
)

REVIEW_PROMPT = (
    "You review a draft diagnosis whose knowledge-graph coverage is low. You are given the draft report, "
    "the observations verbatim, a summary of the knowledge graph's traversal (root causes, causal chains, "
    "nodes reached), the coverage figures with why they are low, and one claim of the draft to judge. "
    'Reply with one JSON object with exactly these keys: "status" ("OK" if the claim and the draft are '
    'grounded, "NEEDS_REWRITE" if something must be removed or softened, "ABSTAIN" if no grounded '
    'diagnosis can be given), "problems" (a list of objects with "type" - one of UNSUPPORTED_METRIC, '
    "UNGROUNDED_ROOT_CAUSE, UNGROUNDED_NODE, UNKNOWN_NODE, UNGROUNDED_OBSERVATION -, \"span\" copied "
    'exactly from the draft or the claim, and "fix" - remove, downgrade_to_hypothesis or abstain), '
    '"rewritten_report" (the draft rewritten, or an empty string). Rules: a specific root cause while the '
    "coverage has no root cause is ABSTAIN or a rewrite to UNKNOWN with hypotheses; a number that is in no "
    "observation is removed; a node that is not among the nodes reached becomes a hypothesis. Bracketed "
    "placeholders such as [EMAIL_1] stand for hidden values: treat equal placeholders as equal values."
)
"""The system prompt of a call that carries a :class:`~cda.verifiers.llm_gate.ReviewContext`:
the low-coverage verifier's contract (docs/actions.md, "The LLM verifier")."""

_JUDGEMENT_KEYS = ("agrees", "confidence", "flagged", "rationale")
_REVIEW_KEYS = ("status", "problems", "rewritten_report")
_RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})
MAX_REPLY_TOKENS = 512
"""The reply cap asked for (``max_tokens``); part of each call's token reservation."""
MAX_RETRY_AFTER_S = 5.0


def _json_kind(value: object) -> str:
    """What a JSON value is, in JSON's words (``an array``), not Python's (``list``).

    >>> _json_kind([1]), _json_kind("x"), _json_kind(True), _json_kind(2.5), _json_kind(None)
    ('a JSON array', 'a JSON string', 'a JSON boolean', 'a JSON number', 'JSON null')
    """
    if value is None:
        return "JSON null"
    if isinstance(value, bool):
        return "a JSON boolean"
    if isinstance(value, (int, float)):
        return "a JSON number"
    return "a JSON string" if isinstance(value, str) else "a JSON array"


class _Retryable(LLMProviderError):
    """A failure worth another attempt (429, 5xx, a reset connection); carries Retry-After."""

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class EgressDenied(CDAError, PermissionError):
    """The run's egress class does not allow this call to leave the machine."""


class OpenAICompatibleProvider:
    """Judges claims with a model behind an OpenAI-compatible ``/chat/completions`` endpoint.

    >>> OpenAICompatibleProvider("http://127.0.0.1:9", "m", egress="local", pii_posture="on")
    Traceback (most recent call last):
    ...
    cda.adapters.llm_http.EgressDenied: egress 'local' forbids the HTTP LLM provider (model 'm' at http://127.0.0.1:9); use the offline provider or an egress class of 'partner' or 'external'
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str | None = None,
        timeout_s: float = 30,
        *,
        egress: Egress,
        pii_posture: PiiPosture,
        pii_consent: bool = False,
        name: str | None = None,
        max_attempts: int = 3,
        backoff_s: float = 0.1,
    ) -> None:
        if egress not in ("local", "partner", "external"):
            raise ValueError(f"egress must be 'local', 'partner' or 'external'; got {egress!r}")
        if pii_posture not in ("on", "off", "consent"):
            raise ValueError(f"pii_posture must be 'on', 'off' or 'consent'; got {pii_posture!r}")
        if egress == "local":
            raise EgressDenied(
                f"egress 'local' forbids the HTTP LLM provider (model {model!r} at {base_url}); "
                "use the offline provider or an egress class of 'partner' or 'external'"
            )
        parts = urllib.parse.urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise LLMProviderError(f"base_url must be an http(s) URL with a host; got {base_url!r}")
        if not timeout_s > 0:
            raise ValueError(f"timeout_s must be positive; got {timeout_s!r}")
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.timeout_s = float(timeout_s)
        self.egress: Egress = egress
        self.pii_posture: PiiPosture = pii_posture
        self.redacts = pii_posture == "on" or (pii_posture == "consent" and not pii_consent)
        self.name = name or f"http:{model}"
        self._api_key = api_key
        if not 1 <= max_attempts <= 10:
            raise ValueError(f"max_attempts must be from 1 to 10; got {max_attempts!r}")
        self.max_attempts = max_attempts
        self.backoff_s = float(backoff_s)

    def __repr__(self) -> str:  # never shows the key
        return f"OpenAICompatibleProvider({self.base_url!r}, {self.model!r}, egress={self.egress!r}, pii_posture={self.pii_posture!r})"

    @property
    def endpoint(self) -> str:
        """The URL every request goes to."""
        return f"{self.base_url}/chat/completions"

    def request_body(
        self, claim: str, evidence: list[str], context: ReviewContext | None = None
    ) -> tuple[bytes, Redactor | None]:
        """The exact bytes sent for a claim (redacted when the posture asks) and the redactor used.

        With a review context the call is the low-coverage verifier's (:data:`REVIEW_PROMPT`): the
        draft report, the observations, Ken's summary and the coverage go with the claim, every
        string of them redacted with the same numbering as the claim."""
        redactor = Redactor() if self.redacts else None
        payload: dict[str, Any] = {"claim": claim, "evidence": list(evidence)}
        if context is not None:
            payload.update(context.model_dump(mode="json"))
        if redactor is not None:
            payload = _redacted(payload, redactor)
        user = json.dumps(payload, ensure_ascii=False, sort_keys=True)
        system = SYSTEM_PROMPT if context is None else REVIEW_PROMPT
        body = {
            "model": self.model,
            "messages": [{"role": "system", "content": system}, {"role": "user", "content": user}],
            "temperature": 0,
            "seed": 0,
            "max_tokens": MAX_REPLY_TOKENS,
            "response_format": {"type": "json_object"},
        }
        return json.dumps(body, sort_keys=True, separators=(",", ":")).encode("utf-8"), redactor

    def judge(self, claim: str, evidence: list[str]) -> LLMJudgement:
        """Ask the model; raise :class:`LLMProviderError` on any failure."""
        return self.judge_bounded(claim, evidence, None, None)

    def judge_bounded(
        self, claim: str, evidence: list[str], deadline: float | None, meter: TokenMeter | None,
        context: ReviewContext | None = None,
    ) -> LLMJudgement:
        """Ask the model before ``deadline`` (``time.monotonic()``), within ``meter``'s tokens;
        with ``context``, as the low-coverage verifier (:meth:`request_body`)."""
        body, redactor = self.request_body(claim, evidence, context)
        estimate = len(body) // 4 + MAX_REPLY_TOKENS  # ~4 bytes a token, plus the reply cap
        if meter is not None and not meter.reserve(estimate):
            raise LLMProviderError(
                f"token budget: {meter.spent} of {meter.limit} tokens spent, this call may need {estimate}; not sent"
            )
        used = len(body) // 4  # a refused or failed call is counted at its prompt
        reported: int | None = None
        try:
            reply = self._post_with_retries(body, deadline)
            reported = _usage(reply)
            # no usage given: the worst case; a usage below the prompt's own size is not believed (a reply
            # saying 0 tokens would switch budgets.tokens off)
            used = estimate if reported is None else max(reported, len(body) // 4)
        finally:
            if meter is not None:
                meter.settle(estimate, used)
        content = _content(reply, self.endpoint)
        judgement = self._judgement(content).model_copy(update={"tokens": reported})
        if redactor is None:
            return judgement
        return judgement.model_copy(
            update={
                "flagged": [redactor.restore(text) for text in judgement.flagged],
                "rationale": redactor.restore(judgement.rationale),
                "problems": [p.model_copy(update={"span": redactor.restore(p.span)}) for p in judgement.problems],
                "rewritten_report": redactor.restore(judgement.rewritten_report),
            }
        )

    def complete_json(self, system: str, user: str, schema: dict[str, Any] | None = None) -> str:
        """One chat completion asking for a JSON object (temperature 0, seed 0): the reply's text.
        For a caller that reads the model's reply itself (the conductor's Translator-In); the
        current call's egress cap applies (:mod:`cda.access`). With ``schema``, the provider is
        asked for structured output against it (``response_format`` ``json_schema``); the caller
        still validates the reply."""
        response_format: dict[str, Any] = {"type": "json_object"} if schema is None else {
            "type": "json_schema", "json_schema": {"name": "reply", "schema": schema}}
        body = {"model": self.model, "temperature": 0, "seed": 0, "response_format": response_format,
                "messages": [{"role": "system", "content": system}, {"role": "user", "content": user}]}
        reply = self._post_with_retries(json.dumps(body, sort_keys=True, separators=(",", ":")).encode("utf-8"), None)
        return _content(reply, self.endpoint)

    def _post_with_retries(self, body: bytes, deadline: float | None) -> bytes:
        errors: list[str] = []
        tried = 0
        for attempt in range(self.max_attempts):
            timeout = self.timeout_s
            if deadline is not None:
                timeout = min(timeout, deadline - time.monotonic())
                if timeout <= 0.01:
                    errors.append("no time left in the action's budget")
                    break
            tried += 1
            try:
                return self._post(body, timeout)
            except _Retryable as error:
                errors.append(str(error))
                if attempt + 1 == self.max_attempts:
                    break
                wait = self.backoff_s * (2 ** attempt)
                if error.retry_after is not None:
                    wait = max(wait, min(error.retry_after, MAX_RETRY_AFTER_S))
                if deadline is not None and time.monotonic() + wait >= deadline:
                    errors.append(f"a retry after {wait:g} s would pass the action's deadline")
                    break
                time.sleep(wait)
        raise LLMProviderError(f"no answer after {tried} attempt(s): " + " | ".join(errors))

    def _post(self, body: bytes, timeout: float | None = None) -> bytes:
        from cda.access import may_egress
        from cda.errors import AccessDenied

        try:  # cda.access: the call's caller may not send this far (whatever door it came by)
            may_egress(self.egress)
        except AccessDenied as exc:
            raise LLMProviderError(str(exc)) from None
        timeout = self.timeout_s if timeout is None else timeout
        headers = {"Content-Type": "application/json", "Accept": "application/json", "User-Agent": "cda"}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        request = urllib.request.Request(self.endpoint, data=body, headers=headers, method="POST")
        where = f"LLM provider {self.name} at {self.endpoint}"
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                data: bytes = response.read(MAX_REPLY_BYTES + 1)
        except urllib.error.HTTPError as error:
            try:
                detail = _excerpt(error.read(2000), key=self._api_key) if error.fp is not None else ""
                retry_after = _seconds(error.headers.get("Retry-After") if error.headers else None)
            finally:
                error.close()
            message = f"{where} answered HTTP {error.code} {error.reason}: {detail}"
            if error.code in _RETRY_STATUSES:
                raise _Retryable(message, retry_after) from error
            raise LLMProviderError(message) from error
        except urllib.error.URLError as error:
            if isinstance(error.reason, TimeoutError):
                raise LLMProviderError(f"{where} did not answer within {timeout:.3g} s") from error
            if isinstance(error.reason, ConnectionResetError):
                raise _Retryable(f"{where} reset the connection") from error
            raise LLMProviderError(f"{where} could not be reached: {error.reason}") from error
        except TimeoutError as error:
            raise LLMProviderError(f"{where} did not answer within {timeout:.3g} s") from error
        except ConnectionResetError as error:
            raise _Retryable(f"{where} reset the connection: {error}") from error
        except OSError as error:  # remote closed mid-reply …
            raise LLMProviderError(f"{where} failed: {error}") from error
        if len(data) > MAX_REPLY_BYTES:
            raise LLMProviderError(f"{where} sent a reply larger than {MAX_REPLY_BYTES} bytes")
        return data

    def _judgement(self, content: str) -> LLMJudgement:
        try:
            obj = json.loads(_unfence(content))
        except json.JSONDecodeError as error:
            raise LLMProviderError(
                f"LLM provider {self.name} replied with content that is not JSON ({error.msg}): {_excerpt(content)}"
            ) from error
        except (RecursionError, ValueError) as error:  # nested past the recursion limit, a huge integer
            why = "nested too deeply" if isinstance(error, RecursionError) else "a number too long to read"
            raise LLMProviderError(
                f"LLM provider {self.name} replied with JSON that cannot be read ({why}): {_excerpt(content)}"
            ) from None
        if not isinstance(obj, dict):
            raise LLMProviderError(
                f"LLM provider {self.name} replied with {_json_kind(obj)} where the verifier contract asks for a "
                f"JSON object ({{\"status\": …}}): {_excerpt(content)}"
            )
        keys = set(obj)
        if "status" in obj:  # the abstain gate's verifier contract (docs/actions.md, Abstention)
            if keys - set(_REVIEW_KEYS):
                raise LLMProviderError(
                    f"LLM provider {self.name} replied outside the verifier contract (unexpected "
                    f"{', '.join(sorted(keys - set(_REVIEW_KEYS)))}): {_excerpt(content)}"
                )
            fields = _from_review(obj)
        else:
            if keys - set(_JUDGEMENT_KEYS):
                raise LLMProviderError(
                    f"LLM provider {self.name} replied outside the judgement contract (unexpected "
                    f"{', '.join(sorted(keys - set(_JUDGEMENT_KEYS)))}): {_excerpt(content)}"
                )
            fields = dict(obj)
        try:
            return LLMJudgement.model_validate({**fields, "provider": self.name})
        except ValidationError as error:
            raise LLMProviderError(
                f"LLM provider {self.name} replied with a malformed judgement ({validation_problems(error)}): "
                f"{_excerpt(content)}"
            ) from error


def _redacted(value: Any, redactor: Redactor) -> Any:
    """Every string of a JSON value redacted (keys are the contract's names, left as they are)."""
    if isinstance(value, str):
        return redactor.redact(value)
    if isinstance(value, list):
        return [_redacted(item, redactor) for item in value]
    if isinstance(value, dict):
        return {key: _redacted(item, redactor) for key, item in value.items()}
    return value


def _content(reply: bytes, where: str) -> str:
    """``choices[0].message.content`` of a chat-completions reply, or a clear error."""
    try:
        data: Any = json.loads(reply.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise LLMProviderError(f"{where} sent a reply that is not JSON: {_excerpt(reply)}") from error
    except (RecursionError, ValueError):  # nested past the recursion limit, a huge integer
        raise LLMProviderError(f"{where} sent a reply that is not readable JSON: {_excerpt(reply)}") from None
    try:
        content = data["choices"][0]["message"]["content"]
    except (KeyError, IndexError, TypeError) as error:
        raise LLMProviderError(
            f"{where} sent JSON without choices[0].message.content: {_excerpt(reply)}"
        ) from error
    if not isinstance(content, str):
        raise LLMProviderError(f"{where} sent a message content that is not a string: {_excerpt(reply)}")
    return content


def _from_review(obj: dict[str, Any]) -> dict[str, Any]:
    """A seed-001 verifier reply as judgement fields: OK agrees, NEEDS_REWRITE and ABSTAIN do not."""
    status, problems = obj.get("status"), obj.get("problems", [])
    spans = [p.get("span") for p in problems if isinstance(p, dict)] if isinstance(problems, list) else []
    rewritten = obj.get("rewritten_report")
    return {
        "review_status": status,
        "problems": problems,
        "agrees": "yes" if status == "OK" else "no",
        "flagged": [s for s in spans if isinstance(s, str)],
        "rationale": f"verifier {status}",
        "rewritten_report": rewritten if isinstance(rewritten, str) else "",
    }


def _usage(reply: bytes) -> int | None:
    """``usage.total_tokens`` of a chat-completions reply; None when it gives none."""
    try:
        total = json.loads(reply.decode("utf-8"))["usage"]["total_tokens"]
    except (ValueError, KeyError, TypeError, UnicodeDecodeError, RecursionError):
        return None
    return total if isinstance(total, int) and not isinstance(total, bool) and 0 <= total < 1 << 40 else None


def _seconds(header: str | None) -> float | None:
    """A ``Retry-After`` given in seconds (an HTTP date is ignored)."""
    try:
        value = float(header) if header is not None else None
    except ValueError:
        return None
    return value if value is not None and 0 <= value < 1e6 else None


def _unfence(content: str) -> str:
    """Some servers wrap the JSON object in one Markdown code fence; take it out."""
    text = content.strip()
    if text.startswith("```") and text.endswith("```") and len(text) >= 6:
        text = text[3:-3]
        if text.startswith("json"):
            text = text[4:]
    return text.strip()


_SECRET = re.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]{6,}|\bsk-[A-Za-z0-9_-]{6,}|"
                     r"\b(api[_-]?key|authorization|x-api-key)([\"']?\s*[:=]\s*[\"']?)(?:(?:bearer|basic)\s+)?[^\s\"',;]{6,}")


def redact_secrets(text: str, key: str | None = None) -> str:
    """``text`` with the configured API key's exact value and anything that looks like a secret
    (``Bearer …``, ``sk-…``, ``api_key=…``, ``Authorization: …``) replaced by ``[redacted]``: a
    provider's error page may quote the request's headers, and what it says is stored in the
    conductor's IR database and shown (docs/conductor.md)."""
    if key:
        text = text.replace(key, "[redacted]")

    def hide(match: re.Match[str]) -> str:
        if match[1]:
            return f"{match[1]} [redacted]"
        if match[2]:
            return f"{match[2]}{match[3]}[redacted]"
        return "[redacted]"

    return _SECRET.sub(hide, text)


def _excerpt(data: bytes | str, limit: int = 200, key: str | None = None) -> str:
    text = data.decode("utf-8", "replace") if isinstance(data, bytes) else data
    flat = redact_secrets(" ".join(text.split()), key)
    return repr(flat if len(flat) <= limit else flat[: limit - 1] + "…")
