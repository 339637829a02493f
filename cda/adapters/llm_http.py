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
for) raises :class:`~cda.verifiers.llm_gate.LLMProviderError`; the caller treats it as no
judgement, which the gate reads as no change.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from typing import Any, Literal

from pydantic import ValidationError

from cda.contracts.locations import validation_problems
from cda.errors import CDAError
from cda.verifiers.llm_gate import LLMJudgement, LLMProviderError
from cda.verifiers.redact import Redactor

__all__ = ["Egress", "EgressDenied", "LLMProviderError", "OpenAICompatibleProvider", "PiiPosture", "SYSTEM_PROMPT"]

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

_JUDGEMENT_KEYS = ("agrees", "confidence", "flagged", "rationale")


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

    def __repr__(self) -> str:  # never shows the key
        return f"OpenAICompatibleProvider({self.base_url!r}, {self.model!r}, egress={self.egress!r}, pii_posture={self.pii_posture!r})"

    @property
    def endpoint(self) -> str:
        """The URL every request goes to."""
        return f"{self.base_url}/chat/completions"

    def request_body(self, claim: str, evidence: list[str]) -> tuple[bytes, Redactor | None]:
        """The exact bytes sent for a claim (redacted when the posture asks) and the redactor used."""
        redactor = Redactor() if self.redacts else None
        if redactor is not None:
            claim = redactor.redact(claim)
            evidence = [redactor.redact(text) for text in evidence]
        user = json.dumps({"claim": claim, "evidence": list(evidence)}, ensure_ascii=False, sort_keys=True)
        body = {
            "model": self.model,
            "messages": [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": user}],
            "temperature": 0,
            "seed": 0,
            "response_format": {"type": "json_object"},
        }
        return json.dumps(body, sort_keys=True, separators=(",", ":")).encode("utf-8"), redactor

    def judge(self, claim: str, evidence: list[str]) -> LLMJudgement:
        """Ask the model; raise :class:`LLMProviderError` on any failure."""
        body, redactor = self.request_body(claim, evidence)
        reply = self._post(body)
        content = _content(reply, self.endpoint)
        judgement = self._judgement(content)
        if redactor is None:
            return judgement
        return judgement.model_copy(
            update={
                "flagged": [redactor.restore(text) for text in judgement.flagged],
                "rationale": redactor.restore(judgement.rationale),
            }
        )

    def _post(self, body: bytes) -> bytes:
        headers = {"Content-Type": "application/json", "Accept": "application/json", "User-Agent": "cda"}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        request = urllib.request.Request(self.endpoint, data=body, headers=headers, method="POST")
        where = f"LLM provider {self.name} at {self.endpoint}"
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                data: bytes = response.read(MAX_REPLY_BYTES + 1)
        except urllib.error.HTTPError as error:
            try:
                detail = _excerpt(error.read(2000)) if error.fp is not None else ""
            finally:
                error.close()
            raise LLMProviderError(f"{where} answered HTTP {error.code} {error.reason}: {detail}") from error
        except urllib.error.URLError as error:
            if isinstance(error.reason, TimeoutError):
                raise LLMProviderError(f"{where} did not answer within {self.timeout_s:g} s") from error
            raise LLMProviderError(f"{where} could not be reached: {error.reason}") from error
        except TimeoutError as error:
            raise LLMProviderError(f"{where} did not answer within {self.timeout_s:g} s") from error
        except OSError as error:  # connection reset, remote closed mid-reply …
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
            raise LLMProviderError(
                f"LLM provider {self.name} replied with JSON that cannot be read ({type(error).__name__}): "
                f"{_excerpt(content)}"
            ) from None
        if not isinstance(obj, dict):
            raise LLMProviderError(
                f"LLM provider {self.name} replied with JSON {type(obj).__name__}, expected an object: {_excerpt(content)}"
            )
        fields = {key: obj[key] for key in _JUDGEMENT_KEYS if key in obj}  # extra keys are ignored
        try:
            return LLMJudgement.model_validate({**fields, "provider": self.name})
        except ValidationError as error:
            raise LLMProviderError(
                f"LLM provider {self.name} replied with a malformed judgement ({validation_problems(error)}): "
                f"{_excerpt(content)}"
            ) from error


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


def _unfence(content: str) -> str:
    """Some servers wrap the JSON object in one Markdown code fence; take it out."""
    text = content.strip()
    if text.startswith("```") and text.endswith("```") and len(text) >= 6:
        text = text[3:-3]
        if text.startswith("json"):
            text = text[4:]
    return text.strip()


def _excerpt(data: bytes | str, limit: int = 200) -> str:
    text = data.decode("utf-8", "replace") if isinstance(data, bytes) else data
    flat = " ".join(text.split())
    return repr(flat if len(flat) <= limit else flat[: limit - 1] + "…")
