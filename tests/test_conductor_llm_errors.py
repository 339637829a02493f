"""The conductor's OpenAI-compatible translator against a real HTTP endpoint on loopback that
always fails with an error page quoting the request's Authorization header (audit finding 9):
the user is told the model translator failed (endpoint, HTTP status, attempts), no internal class
name is shown, and the API key is in no output and no file CDA writes."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import pytest

from tests.conftest import ROOT

KEY = "sk-TEST-SECRET-0123456789abcdef"


class _Failing(BaseHTTPRequestHandler):
    def log_message(self, *args: object) -> None:
        pass

    def do_POST(self) -> None:  # noqa: N802 (http.server's name)
        self.rfile.read(int(self.headers["Content-Length"]))
        data = f"bad gateway; you sent Authorization: {self.headers.get('Authorization')}".encode()
        self.send_response(502)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@pytest.fixture()
def endpoint() -> Iterator[str]:
    server = HTTPServer(("127.0.0.1", 0), _Failing)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}/v1"
    finally:
        server.shutdown()
        server.server_close()


def test_a_failing_model_is_reported_as_such_and_its_key_is_never_stored(tmp_path: Path, endpoint: str) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "CDA_LLM_API_KEY": KEY, "CDA_KEY_DIR": str(tmp_path / "keys")}
    run = subprocess.run([sys.executable, "-m", "cda", "conduct", "check the service", "--db", str(tmp_path / "ir.sqlite"),
                          "--translator", "openai", "--llm-base-url", endpoint, "--llm-model", "m", "--llm-timeout", "20"],
                         capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)
    shown = run.stdout + run.stderr
    assert run.returncode == 4, shown  # translation_failed (docs/conductor.md)
    assert "the model translator failed" in shown and "HTTP 502" in shown and "after 3 attempt(s)" in shown, shown
    assert endpoint in shown and "no rule reads this request" not in shown
    assert "_Retryable" not in shown and "LLMProviderError" not in shown and "Traceback" not in shown
    assert KEY not in shown and "Bearer sk-" not in shown
    for path in tmp_path.rglob("*"):  # the IR database (and its WAL), receipts, keys
        if path.is_file():
            assert KEY.encode() not in path.read_bytes(), path
