"""A fake OpenAI-compatible chat-completions server on 127.0.0.1, started and stopped by a test.

``FakeProvider.mode`` picks how every request is answered (a failure mode or a judgement);
every request body is kept in ``bodies`` so a test can read exactly what left the process.
The server is bounded: a delayed reply waits at most ``delay_s`` and is cut short when the
test ends (``stop``), and the thread is joined.
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.timing import HANG

JUDGEMENT_YES = {"agrees": "yes", "confidence": None, "flagged": [], "rationale": "supported by the evidence"}


def chat_reply(content: str, usage: int | None = None) -> bytes:
    body: dict[str, Any] = {"id": "fake", "object": "chat.completion", "model": "fake",
                            "choices": [{"index": 0, "finish_reason": "stop",
                                         "message": {"role": "assistant", "content": content}}]}
    if usage is not None:
        body["usage"] = {"prompt_tokens": usage - 10, "completion_tokens": 10, "total_tokens": usage}
    return json.dumps(body).encode()


@dataclass
class Answer:
    status: int = 200
    body: bytes = b""
    delay_s: float = 0.0
    headers: dict[str, str] = field(default_factory=dict)
    reset: bool = False  # close the socket without answering


def judgement(**kw: Any) -> Answer:
    return Answer(body=chat_reply(json.dumps({**JUDGEMENT_YES, **kw})))


MODES: dict[str, Callable[[], Answer]] = {
    "ok": lambda: judgement(),
    "429": lambda: Answer(429, b'{"error": "rate limited"}', headers={"Retry-After": "0"}),
    "500": lambda: Answer(500, b'{"error": "boom"}'),
    "503": lambda: Answer(503, b'{"error": "overloaded"}'),
    "timeout": lambda: Answer(body=chat_reply(json.dumps(JUDGEMENT_YES)), delay_s=5.0),
    "malformed_json": lambda: Answer(body=chat_reply('{"agrees": "yes", ')),
    "not_json_body": lambda: Answer(body=b"<html>bad gateway</html>"),
    "no_choices": lambda: Answer(body=b'{"choices": []}'),
    "unexpected_field": lambda: judgement(verdict="true"),
    "bad_value": lambda: judgement(agrees="probably"),
    "review_bad_type": lambda: Answer(body=chat_reply(json.dumps(
        {"status": "OK", "problems": [{"type": "VIBES", "span": "x", "fix": "remove"}], "rewritten_report": ""}))),
    "reset": lambda: Answer(reset=True),
}
"""Every failure mode the tests try (``ok`` aside): none of them is a judgement."""


class FakeProvider:
    def __init__(self) -> None:
        self.mode: str | Callable[[bytes], Answer] = "ok"
        self.bodies: list[bytes] = []
        self.authorizations: list[str | None] = []  # each request's Authorization header (None: none sent)
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.url = ""
        self.active = 0
        self.max_active = 0

    def answer(self, body: bytes) -> Answer:
        return self.mode(body) if callable(self.mode) else MODES[self.mode]()


def _handler(fake: FakeProvider) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - the stdlib's name
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            with fake.lock:
                fake.bodies.append(body)
                fake.authorizations.append(self.headers.get("Authorization"))
                fake.active += 1
                fake.max_active = max(fake.max_active, fake.active)
            try:
                answer = fake.answer(body)
                if answer.delay_s:
                    fake.stop.wait(answer.delay_s)
                if answer.reset:
                    self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
                    self.connection.close()
                    return
                self.send_response(answer.status)
                self.send_header("Content-Type", "application/json")
                for key, value in answer.headers.items():
                    self.send_header(key, value)
                self.send_header("Content-Length", str(len(answer.body)))
                self.end_headers()
                self.wfile.write(answer.body)
            except OSError:
                pass  # the client gave up (a timeout)
            finally:
                with fake.lock:
                    fake.active -= 1

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the stdlib's name
            pass

    return Handler


@contextmanager
def fake_provider() -> Iterator[FakeProvider]:
    fake = FakeProvider()
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(fake))
    httpd.daemon_threads = True
    httpd.handle_error = lambda request, client_address: None  # type: ignore[method-assign]
    fake.url = f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield fake
    finally:
        fake.stop.set()
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=HANG)
