"""The attacks of issue 26, each through the real server (``cda serve`` on loopback, real
websockets/httpx clients) or ``cda mcp`` driven by the official MCP SDK client, bounded in time.

Every attack asserts what it tried to get did not happen (no file content, no request at the fake
provider, no socket, no page) and that the refusal is a receipt where the door keeps them. The
variants cover a ``ken`` line in every field that carries DSL, a path through ``..`` or a symbolic
link out of an allowed root, approvals written into a partner's own inputs, DNS rebinding through
the Host header, a foreign Origin on a WebSocket, a flood of token-less connects and a ``?token=``
that must not reach a log.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from websockets.sync.client import connect

from tests.conftest import ROOT
from tests.fake_llm import Answer, chat_reply, fake_provider
from tests.service_harness import call, example_inputs, serving, toolbus, wait_for, write_tokens
from tests.timing import HANG

SECRET = "secret_api_key=sk-live-0123456789"
PARTNER, INTERNAL, APPROVER = "tok-partner-1", "tok-internal-1", "tok-approver-1"
PROBLEM = "hyp a, b\nobservable o\nhard: o iff (a or b)\n"


def _auth(tmp_path: Path) -> Path:
    return write_tokens(tmp_path / "tokens.json", {
        "partner-1": (PARTNER, "partner"), "partner-2": ("tok-partner-2", "partner"),
        "reviewer": (INTERNAL, "internal"), "approver": (APPROVER, "approver")})


def _secret(tmp_path: Path) -> Path:
    folder = tmp_path / "private"
    folder.mkdir(exist_ok=True)
    secret = folder / "secret.csv"
    secret.write_text(f"{SECRET}\nsource,relation,target\n", encoding="utf-8")
    return secret


def _receipts(db: Path, action_id: str | None = None) -> list[dict[str, Any]]:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        rows = conn.execute("SELECT body FROM receipts" + (" WHERE action_id = ?" if action_id else ""),
                            (action_id,) if action_id else ()).fetchall()
    finally:
        conn.close()
    return [json.loads(r[0]) for r in rows]


def _no_secret_in(*texts: str) -> None:
    for text in texts:
        assert SECRET not in text and "sk-live" not in text, text[:500]


# ---- 1. a partner reads server files through investigate.* and actions.start ----------------------


def test_a_partner_names_no_server_file_in_any_field_that_carries_dsl(tmp_path: Path) -> None:
    secret = _secret(tmp_path)
    missing = tmp_path / "private" / "no-such.csv"
    db = tmp_path / "receipts.sqlite"
    answers: list[dict[str, Any]] = []
    with serving(db, "--auth", str(_auth(tmp_path))) as server, toolbus(server, PARTNER) as ws:
        sid = call(ws, "investigate.start", {"dsl": PROBLEM})["result"]["session_id"]
        for path in (secret, missing):
            line = f'ken "{path}"'
            attempts = [
                ("investigate.observe", {"session_id": sid, "observation": f"o {line}"}),  # the attack
                ("investigate.observe", {"session_id": sid, "observation": f"not o\n{line}"}),
                ("investigate.start", {"dsl": PROBLEM + line + "\n"}),
                ("investigate.start", {"dsl": PROBLEM, "ken": {"path": str(path)}}),
                ("investigate.start", {"path": str(path)}),
                ("actions.start", {"ability": "cda", "inputs": example_inputs("a1", dsl=PROBLEM + line)}),
                ("actions.start", {"ability": "cda", "inputs": example_inputs(
                    "a2", constraints={"hard": [f"a or b\n{line}"]})}),
                ("actions.start", {"ability": "cda", "inputs": example_inputs(
                    "a3", observations=[{"text": f"o {line}"}])}),
                ("actions.start", {"ability": "cda", "inputs": example_inputs("a4", ken={"path": str(path)})}),
                ("actions.start", {"ability": "cda", "inputs": example_inputs(
                    "a5", goals={"kind": "prove", "claims": [f"a {line}"]})}),
                ("conduct.request", {"utterance": f"solve {path}"}),
            ]
            for method, params in attempts:
                answer = call(ws, method, params)
                answers.append(answer)
                text = json.dumps(answer)
                _no_secret_in(text)
                if method == "conduct.request":  # the conductor's tool is refused by the gate: no file read
                    assert "reading files is not allowed" in text or "names no file" in text, answer
                    # said in words, no Python class name (AccessDenied: …) in the CLARIFY the user reads
                    assert "Denied" not in text and "Error:" not in text, answer
                    continue
                assert answer.get("error", {}).get("code") in ("forbidden", "invalid_params"), (method, answer)
                if answer["error"]["code"] == "invalid_params":  # a CDAInputs field that takes no DSL statement
                    assert "secret" not in answer["error"]["message"]
                else:
                    assert answer["error"]["path"][:1] == ["params"], answer
        # the wording does not tell whether the path exists
        refused = [a["error"]["message"] for a in answers if a.get("error", {}).get("code") == "forbidden"]
        half = len(refused) // 2
        assert refused[:half] == refused[half:]
    receipts = _receipts(db)
    gate = [r for r in receipts if r["name"] == "gate.refused"]
    assert len(gate) >= len(refused) and all(r["status"] == "denied" for r in gate)
    assert {r["result"]["need"] for r in gate} == {"files"}


def test_a_partner_runs_no_code_and_the_internal_role_only_with_allow_code(tmp_path: Path) -> None:
    code = {"name": "leak", "source": "def check(claim):\n    return open('/etc/hostname').read() != ''\n"}
    db = tmp_path / "receipts.sqlite"
    auth = _auth(tmp_path)
    with serving(db, "--auth", str(auth)) as server:
        for token in (PARTNER, INTERNAL):
            with toolbus(server, token) as ws:
                answer = call(ws, "actions.start", {"ability": "cda", "inputs": example_inputs("c", functions=[code])})
                assert answer["error"]["code"] == "forbidden" and answer["error"]["path"] == [
                    "params", "inputs", "functions"], answer
    with serving(tmp_path / "second.sqlite", "--auth", str(auth), "--allow-code") as server:
        with toolbus(server, PARTNER) as ws:
            assert call(ws, "actions.start", {"ability": "cda", "inputs": example_inputs(
                "c", functions=[code])})["error"]["code"] == "forbidden"
        with toolbus(server, INTERNAL) as ws:
            started = call(ws, "actions.start", {"ability": "cda", "inputs": example_inputs("c", functions=[code])})
            assert started["result"]["status"] in ("running", "completed"), started


# ---- 2. any web page drives an open server -----------------------------------------------------


def test_a_foreign_origin_or_a_rebound_host_gets_nothing_from_an_open_server(tmp_path: Path) -> None:
    db = tmp_path / "receipts.sqlite"
    with serving(db) as server:
        url = f"ws://{server.host}:{server.port}/toolbus"
        for origin in ("https://evil.example", "null", "http://127.0.0.1.evil.example"):
            with pytest.raises(Exception) as refused:  # noqa: B017 - the handshake's HTTP status is what matters
                connect(url, origin=origin, open_timeout=10)  # type: ignore[arg-type]
            assert "403" in str(refused.value), refused.value
        import socket

        with pytest.raises(Exception) as rebound:  # noqa: B017 - the page's name resolved to this server (rebinding)
            sock = socket.create_connection((server.host, server.port), timeout=10)
            connect(f"ws://rebind.evil.example:{server.port}/toolbus", sock=sock, open_timeout=10)
        assert "421" in str(rebound.value)
        with httpx.Client(timeout=10) as client:
            for path in ("/streams/metrics", "/streams/actions/anything", "/"):
                r = client.get(server.base + path, headers={"Host": f"rebind.evil.example:{server.port}"})
                assert r.status_code == 421, (path, r.status_code)
                r = client.get(server.base + path, headers={"Origin": "https://evil.example"})
                assert r.status_code == 403, (path, r.status_code)
            # the server's own page, and a client that sends no Origin, are served
            assert client.get(server.base + "/").status_code == 200
            assert client.get(server.base + "/", headers={"Origin": server.base}).status_code == 200
        with connect(url, origin=server.base, open_timeout=10) as ws:  # type: ignore[arg-type]  # its own page
            assert "error" in call(ws, "actions.get", {"action_id": "none"})


def test_a_page_of_another_local_port_or_scheme_is_another_origin(tmp_path: Path) -> None:
    """Audit 2, finding 3: the Origin's port and scheme count, not only its host. A page served by
    another web server on this machine (``http://localhost:1``) gets 403 on the page, the streams
    and the ToolBus handshake (so ``investigate.start`` never runs); the server's own origin (the
    port it bound with ``--port 0``), a forwarded port that the Host names, and a ``--cors-origin``
    are served."""
    with serving(tmp_path / "r.sqlite", "--cors-origin", "http://localhost:9998") as server, \
            httpx.Client(timeout=10) as client:
        port = server.port
        url = f"ws://{server.host}:{port}/toolbus"
        foreign = ["http://localhost:1", "http://127.0.0.1:9999", "http://127.0.0.9:80", f"https://127.0.0.1:{port}",
                   f"http://127.0.0.1:{port + 1 if port < 65535 else 1}", "http://localhost", f"http://[::1]:{port}x"]
        for origin in foreign:
            for path in ("/", "/streams/metrics", "/streams/actions/anything"):
                assert client.get(server.base + path, headers={"Origin": origin}).status_code == 403, (origin, path)
            with pytest.raises(Exception) as refused:  # noqa: B017 - the handshake's HTTP status is what matters
                connect(url, origin=origin, open_timeout=10)  # type: ignore[arg-type]
            assert "403" in str(refused.value), (origin, refused.value)
        assert not list(tmp_path.glob("*invest*")), "no investigation was started by a refused page"
        for own in (server.base, f"http://localhost:{port}", f"HTTP://LOCALHOST:{port}/", f"http://[::1]:{port}",
                    "http://localhost:9998"):
            assert client.get(server.base + "/", headers={"Origin": own}).status_code == 200, own
            with connect(url, origin=own, open_timeout=10) as ws:  # type: ignore[arg-type]
                assert call(ws, "investigate.start", {"dsl": PROBLEM + "observe o\n"}).get("result"), own
        # a forwarded port (ssh -L 8080:localhost:PORT): the browser's Host and Origin name port 8080
        forwarded = {"Host": "localhost:8080", "Origin": "http://localhost:8080"}
        assert client.get(server.base + "/", headers=forwarded).status_code == 200
        other = {"Host": "localhost:8080", "Origin": "http://localhost:8081"}
        assert client.get(server.base + "/", headers=other).status_code == 403
        import socket

        with pytest.raises(Exception) as refused:  # noqa: B017
            connect("ws://localhost:8080/toolbus", sock=socket.create_connection((server.host, port), timeout=10),
                    origin="http://127.0.0.1:8080", open_timeout=10)  # type: ignore[arg-type]
        assert "403" in str(refused.value)
        with connect("ws://localhost:8080/toolbus", sock=socket.create_connection((server.host, port), timeout=10),
                     origin="http://localhost:8080", open_timeout=10) as ws:  # type: ignore[arg-type]
            assert "error" in call(ws, "actions.get", {"action_id": "none"})


def test_a_cors_origin_that_is_no_origin_is_a_usage_error_at_every_http_door(tmp_path: Path) -> None:
    """``--cors-origin localhost:8080`` (no scheme) would match no page at all: refused, exit 2."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    for argv in (["serve", str(tmp_path / "r.sqlite"), "--port", "0"], ["mcp", "--http", "--port", "0"]):
        for bad in ("localhost:8080", "https://console.example/app", "null"):
            proc = subprocess.run([sys.executable, "-m", "cda", *argv, "--cors-origin", bad], capture_output=True,
                                  text=True, timeout=60, env=env)
            assert proc.returncode == 2 and "--cors-origin must be an origin" in proc.stderr, (argv, bad, proc.stderr)
            assert "Traceback" not in proc.stderr
    assert not (tmp_path / "r.sqlite").exists()


def test_allowed_host_and_cors_origin_widen_the_guard(tmp_path: Path) -> None:
    with serving(tmp_path / "r.sqlite", "--allowed-host", "cda.internal", "--cors-origin",
                 "https://console.example") as server, httpx.Client(timeout=10) as client:
        assert client.get(server.base + "/", headers={"Host": "cda.internal"}).status_code == 200
        assert client.get(server.base + "/", headers={"Origin": "https://console.example"}).status_code == 200
        assert client.get(server.base + "/", headers={"Host": "other.internal"}).status_code == 421


# ---- 3. a partner approves its own egress ---------------------------------------------------------


def test_a_partner_cannot_approve_its_own_egress(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    db = tmp_path / "receipts.sqlite"
    with fake_provider() as fake:
        monkeypatch.setenv("CDA_LLM_ENDPOINTS", fake.url)  # the operator's endpoint: the egress is what waits
        with serving(db, "--auth", str(_auth(tmp_path)), "--egress-cap", "local") as server:
            inputs = example_inputs(
                "egress", policies={"egress": "local", "approvals": ["egress:external"], "pii_posture": "off"},
                llm={"provider": "openai", "base_url": fake.url, "model": "m", "egress_class": "external", "when": "always"},
                problem="Write to jane.doe@example.com or +1 555 0100 about the outage")
            with toolbus(server, PARTNER) as ws:
                started = call(ws, "actions.start", {"ability": "cda", "inputs": inputs})["result"]
                assert started["status"] == "waiting_user", started
                assert started["approvals_ignored"] == ["inputs.policies.approvals"]
                action_id = started["action_id"]
                assert call(ws, "actions.get", {"action_id": action_id})["result"]["approvals_needed"] == [
                    "egress:external"]
                refused = call(ws, "actions.approve", {"action_id": action_id, "approval": "egress:external"})
                assert refused["error"]["code"] == "forbidden"
            assert fake.bodies == []  # nothing left the machine
            with toolbus(server, APPROVER) as ws:  # an approver's grant is what lets it out
                granted = call(ws, "actions.approve", {"action_id": action_id, "approval": "egress:external"})
                assert "result" in granted, granted
            wait_for(lambda: fake.bodies, timeout=60)
    names = [(r["name"], r["status"]) for r in _receipts(db, "gate")]
    assert ("gate.approvals_ignored", "denied") in names and ("gate.refused", "denied") in names
    assert any(r["name"] == "approval.granted" for r in _receipts(db, action_id))


def test_a_client_sends_nothing_to_an_llm_endpoint_the_operator_did_not_list(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A partner naming the LLM endpoint made the server post its evidence there (and the
    conductor its CDA_LLM_API_KEY): the gate lets a client name only the endpoints the operator
    lists in CDA_LLM_ENDPOINTS, at every door (the conductor's translator and an Action's llm)."""
    db = tmp_path / "receipts.sqlite"
    with fake_provider() as listed, fake_provider() as chosen:
        listed.mode = lambda body: Answer(body=chat_reply(json.dumps({"obligations": []})))
        monkeypatch.setenv("CDA_LLM_API_KEY", "sk-server-secret-123")
        monkeypatch.setenv("CDA_LLM_ENDPOINTS", f"{listed.url}/ , http://other.example/v1")
        with serving(db, "--auth", str(_auth(tmp_path)), "--egress-cap", "external") as server:
            with toolbus(server, PARTNER) as ws:
                for url in (chosen.url, chosen.url.replace("127.0.0.1", "localhost"), f"{listed.url}/../x",
                            listed.url.replace("http://", "http://user:pw@")):
                    refused = call(ws, "conduct.request", {"utterance": "compute 1 + 1", "translator": "openai",
                                                           "llm_base_url": url, "llm_model": "m", "llm_timeout": 5})
                    assert refused["error"]["code"] == "forbidden", refused
                    assert "CDA_LLM_ENDPOINTS" in refused["error"]["message"], refused
                    assert refused["error"]["path"] == ["params", "llm_base_url"], refused
                inputs = example_inputs("egress", policies={"egress": "external", "pii_posture": "off"},
                                        llm={"provider": "openai", "base_url": chosen.url, "model": "m",
                                             "egress_class": "partner"})
                refused = call(ws, "actions.start", {"ability": "cda", "inputs": inputs})
                assert refused["error"]["code"] == "forbidden", refused
                assert refused["error"]["path"] == ["params", "inputs", "llm", "base_url"], refused
                # the endpoint the operator listed (trailing slash and default port aside) is let through
                answered = call(ws, "conduct.request", {"utterance": "compute 1 + 1", "translator": "openai",
                                                        "llm_base_url": listed.url + "/", "llm_model": "m",
                                                        "llm_timeout": 5})
                assert "result" in answered, answered
        assert chosen.bodies == [] and chosen.authorizations == []  # nothing reached the client's host
        assert listed.authorizations and set(listed.authorizations) == {"Bearer sk-server-secret-123"}  # where it belongs
    refusals = [r for r in _receipts(db, "gate") if r["name"] == "gate.refused"]
    assert len(refusals) == 5 and all("sk-server-secret" not in json.dumps(r) for r in refusals)


# ---- 4. cda mcp --http: guard and authentication -------------------------------------------------


@contextmanager
def _mcp_http(tmp_path: Path, *args: str) -> Iterator[tuple[subprocess.Popen[str], int]]:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    log = (tmp_path / "mcp.log").open("w")
    proc = subprocess.Popen([sys.executable, "-m", "cda", "mcp", "--http", "--port", str(port), *args],
                            env=env, cwd=str(tmp_path), stdout=log, stderr=subprocess.STDOUT, text=True)
    try:
        wait_for(lambda: proc.poll() is not None or "streamable HTTP at" in (tmp_path / "mcp.log").read_text(),
                 timeout=60)
        assert proc.poll() is None, (tmp_path / "mcp.log").read_text()
        yield proc, port
    finally:
        proc.terminate()
        proc.wait(timeout=HANG)
        log.close()


def test_mcp_http_off_loopback_needs_auth(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "cda", "mcp", "--http", "--host", "0.0.0.0", "--port", "0"],
                          capture_output=True, text=True, timeout=60, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 2 and "--auth" in proc.stderr


def _initialize(client: httpx.Client, url: str, **headers: str) -> httpx.Response:
    body = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}}
    return client.post(url, json=body, headers={"Accept": "application/json, text/event-stream", **headers})


@pytest.mark.slow
def test_mcp_http_checks_host_origin_and_tokens(tmp_path: Path) -> None:
    secret = _secret(tmp_path)
    with _mcp_http(tmp_path, "--auth", str(_auth(tmp_path))) as (_, port), httpx.Client(timeout=20) as client:
        url = f"http://127.0.0.1:{port}/mcp"
        assert _initialize(client, url, Host=f"rebind.evil.example:{port}").status_code == 421
        assert _initialize(client, url, Origin="https://evil.example").status_code == 403
        assert _initialize(client, url, Origin="http://localhost:1").status_code == 403  # another local page
        assert _initialize(client, url).status_code == 401
        assert _initialize(client, url, Authorization="Bearer wrong").status_code == 401
        assert _initialize(client, url, Authorization=f"Bearer {PARTNER}").status_code == 200

    async def as_partner() -> Any:
        import httpx2  # the SDK's own HTTP client
        from mcp import Client
        from mcp.client.streamable_http import streamable_http_client

        with _mcp_http(tmp_path, "--auth", str(_auth(tmp_path))) as (_, port):
            http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {PARTNER}"}, timeout=60)
            async with http, Client(streamable_http_client(f"http://127.0.0.1:{port}/mcp", http_client=http),
                                    read_timeout_seconds=60) as mcp:
                return [await mcp.call_tool("check", {"dsl": PROBLEM + f'ken "{secret}"\n'}),
                        await mcp.call_tool("check", {"path": str(secret)}),
                        await mcp.call_tool("solve", {"dsl": PROBLEM})]

    import anyio

    ken_line, by_path, fine = anyio.run(as_partner)
    for refused in (ken_line, by_path):
        assert refused.is_error and "names no file" in refused.content[0].text
        _no_secret_in(refused.content[0].text)
    assert not fine.is_error


# ---- 5. MCP over stdio: files under the allowed roots only, no code, no approvals ---------------


def _stdio(tmp_path: Path, *args: str) -> Any:
    from mcp.client.stdio import StdioServerParameters

    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return StdioServerParameters(command=sys.executable, args=["-m", "cda", "mcp", *args], env=env,
                                 cwd=str(tmp_path))


def test_mcp_stdio_reads_only_under_its_roots_runs_no_code_approves_nothing(tmp_path: Path) -> None:
    import anyio
    from mcp import Client

    work = tmp_path / "work"
    work.mkdir()
    secret = _secret(tmp_path)  # tmp_path/private: outside the root
    (work / "ken.csv").write_text("source,relation,target\na,causes,b\n", encoding="utf-8")
    (work / "p.cda").write_text(PROBLEM, encoding="utf-8")
    (work / "escape.csv").symlink_to(secret)  # a link inside the root that points out of it
    (work / "escape.cda").write_text(PROBLEM + f'ken "{secret}"\n', encoding="utf-8")  # a file that names one
    inputs = example_inputs("x", ken={"path": str(secret)})
    code = {"name": "leak", "source": "def check(claim):\n    return True\n"}

    async def body() -> dict[str, Any]:
        async with Client(_stdio(tmp_path, "--allow-root", str(work)), read_timeout_seconds=60) as client:
            out: dict[str, Any] = {}
            out["inside"] = await client.call_tool("check", {"dsl": PROBLEM + 'ken "work/ken.csv"\n'})
            out["inside_path"] = await client.call_tool("check", {"path": str(work / "p.cda")})
            for name, args in {
                "absolute": {"dsl": PROBLEM + f'ken "{secret}"\n'},
                "dotdot": {"dsl": PROBLEM + f'ken "{work}/../private/secret.csv"\n'},
                "symlink": {"dsl": PROBLEM + 'ken "work/escape.csv"\n'},
                "path": {"path": str(secret)},
                "file_names_one": {"path": str(work / "escape.cda")},
                "ken_param": {"dsl": PROBLEM, "ken": [str(secret)]},
            }.items():
                out[name] = await client.call_tool("check", args)
            out["inputs_ken"] = await client.call_tool("run_action", {"inputs": inputs})
            out["code"] = await client.call_tool("run_action", {"inputs": example_inputs("y", functions=[code])})
            out["approve"] = await client.call_tool("reflect_approve", {"action_id": "a", "reviewer": "me"})
            out["session"] = await client.call_tool("session_put", {"session": "s", "name": "k",
                                                                    "statement": f'ken "{secret}"'})
            return out

    out = anyio.run(body)
    assert not out["inside"].is_error and not out["inside_path"].is_error, out["inside"].content
    for name in ("absolute", "dotdot", "symlink", "path", "file_names_one", "ken_param", "inputs_ken", "code",
                 "approve", "session"):
        result = out[name]
        assert result.is_error, name
        _no_secret_in(result.content[0].text)
    assert "outside the allowed roots" in out["symlink"].content[0].text
    assert "code" in out["code"].content[0].text and "approver" in out["approve"].content[0].text


# ---- 6. a flood of token-less connects; 7. ?token= in no log ------------------------------------


def test_token_less_connects_are_rate_limited_not_one_receipt_each(tmp_path: Path) -> None:
    db = tmp_path / "receipts.sqlite"
    refused = 0
    with serving(db, "--auth", str(_auth(tmp_path))) as server:
        url = f"ws://{server.host}:{server.port}/toolbus"
        for _ in range(300):
            try:
                with connect(url, open_timeout=10) as ws:
                    ws.recv(timeout=10)
            except Exception:  # noqa: BLE001 - closed 1008, or answered 429: refused either way
                refused += 1
        with toolbus(server, PARTNER) as ws:  # a known token still gets in
            assert "error" in call(ws, "actions.get", {"action_id": "none"})
    assert refused == 300
    receipts = [r for r in _receipts(db, "toolbus") if r["name"] == "auth.refused"]
    assert 1 <= len(receipts) <= 40, len(receipts)


def test_a_query_token_reaches_no_log_and_no_store(tmp_path: Path) -> None:
    db = tmp_path / "receipts.sqlite"
    secret_token = "tok-never-logged-" + "9" * 20
    with serving(db, "--auth", str(_auth(tmp_path))) as server:
        with httpx.Client(timeout=10) as client:
            assert client.get(f"{server.base}/streams/metrics?token={secret_token}").status_code == 401
            assert client.head(f"{server.base}/streams/metrics?token={INTERNAL}").status_code == 200
        for token in (secret_token, PARTNER):
            try:
                with connect(f"ws://{server.host}:{server.port}/toolbus?token={token}", open_timeout=10) as ws:
                    ws.send(json.dumps({"id": 1, "method": "actions.get", "params": {"action_id": "x"}}))
                    ws.recv(timeout=10)
            except Exception:  # noqa: BLE001 - the unknown token's socket is closed
                pass
        server.stop()
        logs = server.stderr()
    stored = b"".join(p.read_bytes() for p in tmp_path.rglob("*") if p.is_file())
    for token in (secret_token, PARTNER, INTERNAL):
        assert token not in logs and token.encode() not in stored


def test_the_guard_takes_a_query_token_out_before_an_access_log_line_is_written(
        caplog: pytest.LogCaptureFixture) -> None:
    """With uvicorn's access log on (a person may run the server so), the line it writes names the
    path without the token: the guard took it out of the request the log reads."""
    import threading

    import uvicorn

    from cda.adapters.http_guard import HostOriginGuard

    seen: dict[str, Any] = {}

    async def app(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while (await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        seen["query"], seen["token"] = scope["query_string"], scope.get("cda.token")
        await send({"type": "http.response.start", "status": 204, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    server = uvicorn.Server(uvicorn.Config(HostOriginGuard(app, bind="127.0.0.1"), host="127.0.0.1", port=0,
                                           log_level="info", access_log=True, lifespan="on", log_config=None))
    thread = threading.Thread(target=server.run, daemon=True)
    secret_token = "tok-in-the-query-" + "7" * 16
    with caplog.at_level("INFO", logger="uvicorn.access"):
        thread.start()
        try:
            wait_for(lambda: server.started)
            port = server.servers[0].sockets[0].getsockname()[1]
            with httpx.Client(timeout=10) as client:
                assert client.get(f"http://127.0.0.1:{port}/s?a=1&token={secret_token}").status_code == 204
            wait_for(lambda: any("GET /s" in r.getMessage() for r in caplog.records))
        finally:
            server.should_exit = True
            thread.join(timeout=HANG)
    lines = "\n".join(r.getMessage() for r in caplog.records)
    assert "GET /s?a=1" in lines and secret_token not in lines
    assert seen == {"query": b"a=1", "token": secret_token}
