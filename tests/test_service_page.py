"""The page at ``GET /`` in a real browser: Debian's headless chromium, driven over the DevTools protocol.

The page follows an action live to its terminal event (timeline, boundary summary, verdicts with
bands, next tests), and resumes by itself across a server restart with a complete, duplicate-free
timeline (its ``EventSource`` reconnects with ``Last-Event-ID``). A screenshot of the finished page
is written to the test's folder and its path printed. Without chromium the test skips and says so
(``.ci/run`` installs it when apt is usable).
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from itertools import count
from pathlib import Path
from typing import Any

import pytest
from websockets.sync.client import ClientConnection, connect

from tests.service_harness import Server, call, example_inputs, follow, toolbus, write_tokens
from tests.timing import HANG

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install -y chromium)")

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-dev-shm-usage", "--remote-debugging-port=0", "--remote-allow-origins=*"]


class Page:
    """One tab over the DevTools protocol: evaluate JavaScript, navigate, take a screenshot."""

    def __init__(self, ws: ClientConnection) -> None:
        self.ws = ws
        self.ids = count(1)

    def send(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        my = next(self.ids)
        self.ws.send(json.dumps({"id": my, "method": method, "params": params or {}}))
        while True:
            msg = json.loads(self.ws.recv(timeout=30))
            if msg.get("id") == my:
                assert "error" not in msg, msg
                return msg["result"]  # type: ignore[no-any-return]

    def js(self, expression: str) -> Any:
        return self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True})["result"].get("value")

    def wait(self, expression: str, timeout: float = HANG) -> Any:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            value = self.js(expression)
            if value:
                return value
            time.sleep(0.1)
        raise AssertionError(f"page never satisfied {expression}: state {self.js('document.body.dataset.state')}")

    def timeline(self) -> list[int]:
        return self.js("[...document.querySelectorAll('#timeline li')].map(li => Number(li.dataset.id))")  # type: ignore[no-any-return]


@contextmanager
def browser(tmp: Path) -> Iterator[Page]:
    profile = tmp / "chromium-profile"
    proc = subprocess.Popen([str(CHROMIUM), *FLAGS, f"--user-data-dir={profile}", "about:blank"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        port_file = profile / "DevToolsActivePort"
        deadline = time.monotonic() + HANG  # chromium's start on a busy machine
        while not (port_file.exists() and port_file.read_text().count("\n") >= 1):
            assert time.monotonic() < deadline and proc.poll() is None, "chromium did not start"
            time.sleep(0.05)
        port = int(port_file.read_text().splitlines()[0])
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10) as r:
            target = next(t for t in json.load(r) if t["type"] == "page")
        with connect(target["webSocketDebuggerUrl"], max_size=None, open_timeout=10) as ws:
            page = Page(ws)
            page.send("Page.enable")
            yield page
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.slow
def test_the_page_follows_an_action_live_and_resumes_across_a_restart(tmp_path: Path) -> None:
    db = tmp_path / "receipts.sqlite"
    port = _free_port()
    server = Server(db, port=port)
    try:
        with browser(tmp_path) as page:
            # 1. live to the terminal event: the action waits for an approval while the page watches
            with toolbus(server) as ws:
                live = call(ws, "actions.start", {"ability": "cda", "inputs": example_inputs(
                    "page-live", policies={"pii_posture": "consent"})})["result"]["action_id"]
                page.send("Page.navigate", {"url": f"{server.base}/?action={live}"})
                page.wait("document.body.dataset.state === 'live'")
                page.wait("document.querySelectorAll('#timeline li').length === 2")  # started, then waiting
                assert page.timeline() == [0, 1]
                call(ws, "actions.approve", {"action_id": live, "approval": "pii:consent"})
            page.wait("document.body.dataset.state.startsWith('done')")
            ids = page.timeline()
            assert ids == list(range(len(ids))) and len(ids) > 5
            assert page.js("document.body.dataset.state") == "done action_completed"
            assert "boundary summary" in page.js("document.getElementById('summary').textContent")
            bands = page.js("[...document.querySelectorAll('#verdicts td.band')].map(td => td.textContent)")
            assert bands and set(bands) <= {"low", "medium", "high"}
            assert page.js("document.querySelectorAll('#tests li').length") > 0
            shot = tmp_path / "page.png"
            shot.write_bytes(base64.b64decode(page.send("Page.captureScreenshot")["data"]))
            print(f"screenshot of the finished page: {shot}")

            # 2. across a restart: the page keeps its EventSource; the next server on the same port
            # serves the rest (here: the interruption the stop caused), nothing twice
            with toolbus(server) as ws:
                cut = call(ws, "actions.start", {"ability": "cda", "inputs": example_inputs(
                    "page-restart", policies={"pii_posture": "consent"})})["result"]["action_id"]
            page.send("Page.navigate", {"url": f"{server.base}/?action={cut}"})
            page.wait("document.body.dataset.state === 'live'")
            assert server.stop() == 0
            server = Server(db, port=port)
            page.wait("document.body.dataset.state.startsWith('done')", timeout=30)
            assert page.timeline() == [0, 1, 2]  # started, waiting, then the interruption
            assert "ActionInterrupted" not in page.js("document.body.innerText")  # a person-readable reason
            assert "interrupted" in page.js("document.getElementById('timeline').innerText")
    finally:
        if server.proc.poll() is None:
            server.stop()


def _shots(tmp: Path) -> Path:
    """Where screenshots go: ``$CDA_SCREENSHOTS`` (``.ci/run`` keeps them as CI artifacts), else the test's folder."""
    folder = Path(os.environ.get("CDA_SCREENSHOTS") or tmp / "screenshots")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _shoot(page: Page, folder: Path, name: str) -> None:
    shot = folder / f"page-{name}.png"
    page.send("Emulation.setDeviceMetricsOverride", {"width": 1100, "height": 900, "deviceScaleFactor": 1, "mobile": False})
    page.js("window.scrollTo(0, 0)")
    shot.write_bytes(base64.b64decode(page.send("Page.captureScreenshot", {"captureBeyondViewport": False})["data"]))
    assert shot.stat().st_size > 1000
    print(f"screenshot of the {name} page: {shot}")


def _press_enter_on(page: Page, selector: str) -> None:
    """Focus ``selector`` and press Enter as a keyboard does (DevTools input events, not a click)."""
    assert page.js(f"(() => {{ const e = document.querySelector({json.dumps(selector)}); if (!e) return false; "
                   f"e.focus(); return document.activeElement === e; }})()"), selector
    for kind in ("keyDown", "keyUp"):
        page.send("Input.dispatchKeyEvent", {"type": kind, "key": "Enter", "code": "Enter",
                                             "windowsVirtualKeyCode": 13, **({"text": "\r"} if kind == "keyDown" else {})})


HOSTILE = '<img src=x onerror="window.__pwned=1"><script>window.__pwned=2</script> **bold** `x<b>`'


@pytest.mark.slow
def test_the_page_in_its_four_states_with_its_drawers_behind_a_token(tmp_path: Path) -> None:
    """Running, completed, partial and failed, each checked in the DOM and screenshotted; a hostile
    problem text stays text; the chips open their drawers from the keyboard, reading the artifacts
    over the ToolBus with the page's own ?token= (a server with --auth)."""
    token = "page-token-0123456789"
    approver = "approver-token-0123456789"
    tokens = write_tokens(tmp_path / "tokens.json", {"canvas": (token, "partner"), "lead": (approver, "approver")})
    server = Server(tmp_path / "receipts.sqlite", "--auth", str(tokens))
    shots = _shots(tmp_path)
    try:
        with browser(tmp_path) as page, toolbus(server, token) as ws:
            # running: waiting for an approval while the page watches
            live = call(ws, "actions.start", {"ability": "cda", "inputs": example_inputs(
                "page-four", problem=HOSTILE, policies={"pii_posture": "consent"})})["result"]["action_id"]
            page.send("Page.navigate", {"url": f"{server.base}/?action={live}&token={token}"})
            page.wait("document.body.dataset.state === 'live'")
            assert page.js("document.getElementById('state').textContent") == "live"
            _shoot(page, shots, "running")

            # completed: the summary rendered from Markdown, hostile text kept as text
            with toolbus(server, approver) as boss:
                assert "result" in call(boss, "actions.approve", {"action_id": live, "approval": "pii:consent"})
            page.wait("document.body.dataset.state === 'done action_completed'", timeout=120)
            assert page.js("window.__pwned") is None
            assert page.js("document.querySelectorAll('#summary img, #summary script, #summary b').length") == 0
            assert HOSTILE.split("**")[0] in page.js("document.getElementById('summary').textContent")
            assert page.js("document.querySelector('#summary h2') !== null")  # '# …' became a heading
            assert page.js("document.querySelectorAll('#summary li').length") > 3
            assert page.js("document.getElementById('summary').dataset.draft") == "no"
            outputs = follow(server, live, token=token)[-1]["data"]["outputs"]
            claims = page.js("[...document.querySelectorAll('#verdicts tr')].map(tr => tr.cells[0].textContent)")
            assert claims == [v["claim"] for v in outputs["verdicts"]]
            shown = page.js("[...document.querySelectorAll('#verdicts td.num')].map(td => td.textContent)")
            assert shown == [f"{v['confidence']:.2f}" for v in outputs["verdicts"]]
            assert page.js("[...document.querySelectorAll('#chips button')].map(b => b.id)") == \
                ["chip-receipts", "chip-context_pack", "chip-evidence", "chip-integrity"]

            # the drawers, opened from the keyboard
            _press_enter_on(page, "#chip-integrity")
            page.wait("document.getElementById('drawer-integrity').dataset.loaded === 'yes'")
            assert page.js("document.getElementById('drawer-integrity').dataset.status") == "intact"
            assert "signature: valid" in page.js("document.getElementById('drawer-integrity').textContent")
            _press_enter_on(page, "#chip-context_pack")
            page.wait("document.getElementById('drawer-context_pack').dataset.loaded === 'yes'")
            assert "adopted_observations" in page.js("document.getElementById('drawer-context_pack').textContent")
            _press_enter_on(page, "#chip-receipts")
            page.wait("document.getElementById('drawer-receipts').dataset.loaded === 'yes'")
            files = page.js("[...document.querySelectorAll('#drawer-receipts button[data-file]')].map(b => b.dataset.file)")
            assert any(f.startswith("receipts/") for f in files) and "context_pack.json" in files
            _press_enter_on(page, "#drawer-receipts button[data-file='hypotheses.json']")
            page.wait("[...document.querySelectorAll('#drawer-receipts pre')].some(p => p.dataset.file === 'hypotheses.json')")
            _press_enter_on(page, "#chip-integrity")  # Enter again closes it
            assert page.js("document.getElementById('drawer-integrity').hidden") is True
            _shoot(page, shots, "completed")

            # partial: a spent budget, an Incomplete badge and caveats naming the budget
            partial = call(ws, "actions.start", {"ability": "cda", "inputs": example_inputs(
                "page-partial", budgets={"wall": 0.05})})["result"]["action_id"]
            page.send("Page.navigate", {"url": f"{server.base}/?action={partial}&token={token}"})
            page.wait("document.body.dataset.state === 'done action_partial'", timeout=120)
            assert page.js("document.getElementById('state').textContent") == "Incomplete"
            assert page.js("document.getElementById('caveats-box').hidden") is False
            assert "budget" in page.js("document.getElementById('caveats').textContent")
            assert page.js("document.querySelectorAll('#tests li').length") > 0
            _shoot(page, shots, "partial")

            # failed: cancelled while it waits; no draft left up, the reason said
            failed = call(ws, "actions.start", {"ability": "cda", "inputs": example_inputs(
                "page-failed", policies={"pii_posture": "consent"})})["result"]["action_id"]
            page.send("Page.navigate", {"url": f"{server.base}/?action={failed}&token={token}"})
            page.wait("document.body.dataset.state === 'live'")
            assert "result" in call(ws, "actions.cancel", {"action_id": failed})
            page.wait("document.body.dataset.state === 'done action_failed'")
            assert page.js("document.getElementById('state').textContent") == "failed"
            assert page.js("document.getElementById('error').hidden") is False
            assert "still running" not in page.js("document.body.innerText")
            _shoot(page, shots, "failed")

            # another client's token cannot read this action's artifacts through the page
            page.send("Page.navigate", {"url": f"{server.base}/?action={live}&token=wrong-token"})
            page.wait("document.body.dataset.state !== 'connecting'")
            assert page.js("document.querySelectorAll('#verdicts tr').length") == 0
    finally:
        if server.proc.poll() is None:
            server.stop()
