"""The model translator's failure has its own status and exit code (docs/conductor.md, "Exit codes
and statuses"), through ``cda conduct`` against a real OpenAI-compatible endpoint on loopback
that this test starts: an HTTP error, a timeout, a reply body that is not JSON and two replies
whose content is not an obligations document each end ``translation_failed`` with exit 4, and
what the rule translator read instead is still answered under it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT

RELEASE = "release"  # the hanging endpoint waits on the server's event, set when the test ends


class _Provider(BaseHTTPRequestHandler):
    """``/<mode>/v1/chat/completions``: ``fail`` (HTTP 400), ``hang`` (no answer until the test
    ends), ``body`` (200, not JSON), ``content`` (200, a chat reply whose content is prose),
    ``good`` (an obligations document: compute 2 * 3)."""

    server: Any

    def log_message(self, *args: object) -> None:
        pass

    def do_POST(self) -> None:  # noqa: N802 (http.server's name)
        self.rfile.read(int(self.headers["Content-Length"]))
        mode = self.path.strip("/").split("/")[0]
        self.server.calls.append(mode)
        if mode == "hang":
            self.server.release.wait()
            return
        if mode == "fail":
            self._send(400, b"bad request: no such model")
            return
        if mode == "body":
            self._send(200, b"<html>surprise</html>")
            return
        content = "Sure! Here is what I understood." if mode == "content" else json.dumps(
            {"obligations": [{"type": "compute", "inputs": {"expression": "2 * 3"}}]})
        self._send(200, json.dumps({"choices": [{"message": {"role": "assistant", "content": content}}]}).encode())

    def _send(self, code: int, data: bytes) -> None:
        self.send_response(code)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@pytest.fixture()
def provider() -> Iterator[Any]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Provider)
    server.daemon_threads = True
    server.calls = []  # type: ignore[attr-defined]
    server.release = threading.Event()  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.release.set()  # type: ignore[attr-defined]
        server.shutdown()
        server.server_close()


def _conduct(tmp_path: Path, server: Any, mode: str, utterance: str, *extra: str) -> tuple[int, dict[str, Any], str]:
    base = f"http://127.0.0.1:{server.server_port}/{mode}/v1"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "CDA_KEY_DIR": str(tmp_path / "keys")}
    env.pop("CDA_LLM_API_KEY", None)
    run = subprocess.run([sys.executable, "-m", "cda", "conduct", utterance, "--db", str(tmp_path / f"{mode}.sqlite"),
                          "--translator", "openai", "--llm-base-url", base, "--llm-model", "m", *extra, "--json"],
                         capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600, check=False)
    assert "Traceback" not in run.stderr, run.stderr
    return run.returncode, json.loads(run.stdout) if run.stdout.strip() else {}, run.stderr


@pytest.mark.parametrize(
    ("mode", "extra", "said"),
    [
        ("fail", (), "answered HTTP 400"),
        ("hang", ("--llm-timeout", "1"), "did not answer within 1 s"),
        ("body", (), "sent a reply that is not JSON"),
        ("content", (), "replies were refused twice (the last: the reply is not JSON"),
    ],
    ids=["http-error", "timeout", "bad-json-body", "bad-content-twice"],
)
def test_a_failed_model_translator_has_its_own_status_and_exit_code(
    tmp_path: Path, provider: Any, mode: str, extra: tuple[str, ...], said: str
) -> None:
    code, trace, err = _conduct(tmp_path, provider, mode, "compute 2 * 3", *extra)
    assert code == 4, (code, err, trace)
    assert trace["status"] == "translation_failed"
    failed = [o for o in trace["obligations"] if o["type"] == "translation_failed"]
    assert len(failed) == 1 and failed[0]["status"] == "active"
    assert said in failed[0]["inputs"]["reason"] and "the rule translator read the request instead" in (
        failed[0]["inputs"]["reason"]), failed
    assert "Error" not in failed[0]["inputs"]["reason"]  # words, not class names
    # what the rules read is answered under the failure, which comes first in the reply
    assert [o["type"] for o in trace["obligations"]] == ["translation_failed", "compute"]
    assert trace["answer"].startswith("TRANSLATION_FAILED: ") and "2 * 3 = 6" in trace["answer"]
    assert provider.calls and set(provider.calls) == {mode}


def test_a_request_the_rules_cannot_read_either_is_a_translation_failure_alone(tmp_path: Path, provider: Any) -> None:
    code, trace, err = _conduct(tmp_path, provider, "fail", "frobnicate the flux capacitor")
    assert code == 4, (code, err, trace)
    assert [o["type"] for o in trace["obligations"]] == ["translation_failed"]
    assert trace["obligations"][0]["inputs"]["reason"].endswith("the rule translator read nothing of the request either")


def test_a_model_that_answers_is_not_a_translation_failure(tmp_path: Path, provider: Any) -> None:
    code, trace, err = _conduct(tmp_path, provider, "good", "six, please")
    assert code == 0, (code, err, trace)
    assert trace["status"] == "answered" and [o["type"] for o in trace["obligations"]] == ["compute"]
