"""The CDA service over the wire: ToolBus frames (websockets), SSE streams (httpx + httpx-sse), auth.

One real ``cda serve`` per test module (a child process on a free loopback port); each test uses
its own action (its own seed), so the tests do not depend on each other's order.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import jsonschema
import pytest
from websockets.exceptions import ConnectionClosed

from cda.actions.receipts import ReceiptLog
from cda.actions.reflection import ReflectionStore
from cda.adapters.auth import token_hash
from cda.contracts.events import EVENT_TYPES
from cda.service.protocol import toolbus_schemas
from tests.conftest import ROOT
from tests.service_harness import Server, call, example_inputs, follow, serving, toolbus

SCHEMAS = ROOT / "schemas" / "toolbus"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    db = tmp_path_factory.mktemp("svc") / "receipts.sqlite"
    with serving(db, "--cors-origin", "http://page.example") as s:
        yield s


def _schema(name: str) -> dict[str, Any]:
    return json.loads((SCHEMAS / name).read_text(encoding="utf-8"))  # type: ignore[no-any-return]


def _valid(frame: dict[str, Any], method: str | None = None) -> None:
    """Every answer matches the committed frame schema (and the method's result schema)."""
    if "error" in frame:
        jsonschema.validate(frame, _schema("error.schema.json"))
    else:
        jsonschema.validate(frame, _schema("result.schema.json"))
        if method and (SCHEMAS / f"{method}.result.schema.json").exists():
            jsonschema.validate(frame["result"], _schema(f"{method}.result.schema.json"))


def test_committed_toolbus_schemas_are_those_the_models_generate() -> None:
    generated = toolbus_schemas()
    committed = {p.name for p in SCHEMAS.glob("*.json")}
    assert committed == set(generated), "run: python -c 'from cda.service.protocol import write_schemas; ...'"
    for name, schema in generated.items():
        assert json.loads((SCHEMAS / name).read_text(encoding="utf-8")) == schema, f"{name} is stale"


def test_start_follow_get_an_action_end_to_end(server: Server) -> None:
    with toolbus(server) as ws:
        answer = call(ws, "actions.start", {"ability": "cda", "inputs": example_inputs("e2e")})
        _valid(answer, "actions.start")
        action_id = answer["result"]["action_id"]
        assert answer["result"]["topic"] == f"actions/{action_id}"
        events = follow(server, action_id)
        assert [e["id"] for e in events] == list(range(len(events)))  # every event once, in order
        assert events[0]["event"] == "action_started" and events[-1]["event"] == "action_completed"
        assert {e["event"] for e in events} <= set(EVENT_TYPES)
        kinds = {e["data"]["kind"] for e in events if e["event"] == "action_checkpoint"}
        assert {"boundary_summary", "plan_delta", "verifier_update"} <= kinds
        got = call(ws, "actions.get", {"action_id": action_id})
        _valid(got, "actions.get")
        result = got["result"]
        assert result["status"] == "completed" and result["summary_artifact_id"] and result["plan_bundle_id"]
        assert result["last_event_id"] == events[-1]["id"] and "Best explanation" in (result["boundary_summary"] or
                                                                                      "Best explanation")
        again = call(ws, "actions.start", {"ability": "cda", "inputs": example_inputs("e2e")})
        assert again["result"]["existing"] is True and again["result"]["action_id"] == action_id


def test_resume_with_last_event_id_gives_exactly_the_rest(server: Server) -> None:
    with toolbus(server) as ws:
        action_id = call(ws, "actions.start", {"ability": "cda", "inputs": example_inputs("resume")})["result"][
            "action_id"]
    full = follow(server, action_id)
    head = follow(server, action_id, stop_after=3)
    tail = follow(server, action_id, last_event_id=head[-1]["id"])
    assert head + tail == full
    assert follow(server, action_id, last_event_id=full[-1]["id"]) == []  # past the end: 204, not a hang
    with httpx.Client(timeout=10) as client:
        url = f"{server.base}/streams/actions/{action_id}"
        assert client.get(url, headers={"Last-Event-ID": str(full[-1]["id"])}).status_code == 204
        assert client.get(url, headers={"Last-Event-ID": "999999999999"}).status_code == 204
        for bad in ("9223372036854775808", "-2", "abc", "1e3", "9" * 400):
            r = client.get(url, headers={"Last-Event-ID": bad})
            assert r.status_code == 400 and "Last-Event-ID" in r.text and "Traceback" not in r.text
        assert client.get(f"{server.base}/streams/actions/cda-unknown").status_code == 204
        assert client.head(url).status_code == 200
        options = client.options(url)
        assert options.status_code == 204 and "GET" in options.headers["allow"]
        first = client.get(url + "?last_event_id=2")
        assert first.text.startswith("retry: ") and "\nid: 3\n" in first.text and "\nid: 2\n" not in first.text


def test_cors_for_a_configured_origin_only(server: Server) -> None:
    with toolbus(server) as ws:
        action_id = call(ws, "actions.start", {"ability": "cda", "inputs": example_inputs("cors")})["result"][
            "action_id"]
    follow(server, action_id)
    url = f"{server.base}/streams/actions/{action_id}"
    with httpx.Client(timeout=10) as client:
        ok = client.get(url, headers={"Origin": "http://page.example"})
        assert ok.headers.get("access-control-allow-origin") == "http://page.example"
        other = client.get(url, headers={"Origin": "http://evil.example"})
        assert "access-control-allow-origin" not in other.headers
        pre = client.options(url, headers={"Origin": "http://page.example", "Access-Control-Request-Method": "GET",
                                           "Access-Control-Request-Headers": "last-event-id"})
        assert pre.status_code == 200 and pre.headers["access-control-allow-origin"] == "http://page.example"


def test_frames_are_validated_and_errors_name_the_path(server: Server) -> None:
    with toolbus(server) as ws:
        ws.send("not json")
        bad = json.loads(ws.recv(timeout=10))
        _valid(bad)
        assert bad["error"]["code"] == "invalid_frame"
        for method in ("cda.run", "cda.solve", "reflect.trace", "debug.topics", "actions.explode"):
            answer = call(ws, method, {})
            _valid(answer)
            assert answer["error"]["code"] == "unknown_method", method  # a partner sees no cda.* at all
        wrong = call(ws, "actions.start", {"ability": "research", "inputs": example_inputs()})
        assert wrong["error"]["code"] == "invalid_params" and wrong["error"]["path"] == ["params", "ability"]
        inputs = example_inputs()
        inputs["budgets"] = {"wall": -1}
        neg = call(ws, "actions.start", {"ability": "cda", "inputs": inputs})
        assert neg["error"]["code"] == "invalid_params" and neg["error"]["path"][:4] == ["params", "inputs",
                                                                                          "budgets", "wall"]
        path = call(ws, "actions.start", {"ability": "cda", "inputs": example_inputs(ken={"path": "/etc/passwd.json"})})
        assert path["error"]["code"] == "forbidden" and path["error"]["path"] == ["params", "inputs", "ken", "path"]
        missing = call(ws, "actions.get", {"action_id": "cda-nope"})
        assert missing["error"]["code"] == "not_found"
        _valid(missing)


def test_routes_are_only_the_toolbus_the_streams_the_metrics_topic_and_the_page(tmp_path: Path) -> None:
    from starlette.routing import Route, WebSocketRoute

    from cda.service.app import ServiceConfig, build_app

    app = build_app(ServiceConfig(db=tmp_path / "r.sqlite"))
    found = {(type(r).__name__, r.path, tuple(sorted(getattr(r, "methods", None) or ()))) for r in app.routes}
    assert found == {
        ("WebSocketRoute", "/toolbus", ()),
        ("Route", "/streams/actions/{action_id}", ("GET", "HEAD", "OPTIONS")),
        ("Route", "/streams/metrics", ("GET", "HEAD", "OPTIONS")),
        ("Route", "/", ("GET", "HEAD")),
    }
    assert all(isinstance(r, Route | WebSocketRoute) for r in app.routes)


def test_auth_tokens_profiles_and_a_policy_close_for_an_unknown_token(tmp_path: Path) -> None:
    auth = tmp_path / "auth.json"
    auth.write_text(json.dumps({"tokens": [
        {"name": "partner-a", "sha256": token_hash("tok-partner"), "profile": "partner"},
        {"name": "reviewer", "sha256": token_hash("tok-internal"), "profile": "internal"},
    ]}), encoding="utf-8")
    assert "tok-partner" not in auth.read_text(encoding="utf-8")  # stored hashed
    db = tmp_path / "receipts.sqlite"
    with serving(db, "--auth", str(auth), "--debug") as server:
        for token in (None, "wrong"):
            with toolbus(server, token) as ws, pytest.raises(ConnectionClosed) as closed:
                ws.recv(timeout=10)
            assert closed.value.rcvd is not None and closed.value.rcvd.code == 1008
        with toolbus(server, "tok-partner") as ws:
            assert call(ws, "debug.topics")["error"]["code"] == "unknown_method"
            waiting = call(ws, "actions.start", {"ability": "cda", "inputs": example_inputs(
                "auth-wait", policies={"pii_posture": "consent"})})["result"]["action_id"]
            own = call(ws, "actions.approve", {"action_id": waiting, "approval": "pii:consent"})
            assert own["error"]["code"] == "forbidden"  # a partner cannot approve its own action
            with toolbus(server, "tok-internal") as reviewer:
                granted = call(reviewer, "actions.approve", {"action_id": waiting, "approval": "pii:consent"})
                assert granted["result"]["status"] in ("running", "completed")
            action_id = call(ws, "actions.start", {"ability": "cda", "inputs": example_inputs("auth")})["result"][
                "action_id"]
        follow(server, action_id, token="tok-partner")
        with toolbus(server, "tok-internal") as ws:
            assert "topics" in call(ws, "debug.topics")["result"]
            refused = call(ws, "reflect.trace", {"action_id": action_id, "approval": "cda-approval-v1:bob:00"})
            assert refused["error"]["code"] == "forbidden"
            log = ReceiptLog(db)
            try:
                with ReflectionStore(db, log) as store:  # a reviewer's approval, issued out of band
                    approval = store.issue_approval(action_id, "alice")
            finally:
                log.close()
            trace = call(ws, "reflect.trace", {"action_id": action_id, "approval": approval})["result"]["trace"]
            assert trace["action_id"] == action_id and trace["rounds"]
            with toolbus(server, "tok-partner") as partner:  # the same approval is no use to a partner
                assert call(partner, "reflect.trace", {"action_id": action_id, "approval": approval})[
                    "error"]["code"] == "unknown_method"
            with toolbus(server, "tok-partner") as partner:  # a partner cannot cancel another's action
                assert call(partner, "actions.cancel", {"action_id": action_id})["error"]["code"] == "not_found"
    log = ReceiptLog(db)
    try:
        names = [(e.receipt.name, e.receipt.status) for e in log.entries("toolbus")]
        assert names.count(("auth.refused", "denied")) == 2
        assert any(e.receipt.name == "reflection.read" and e.receipt.status == "denied"
                   for e in log.entries(action_id))
        assert log.verify().ok
    finally:
        log.close()


def test_help_loads_no_server_library() -> None:
    from tests.test_startup_imports import loaded

    for argv in (("--help",), ("serve", "--help")):
        code, mods = loaded(*argv)
        assert code == 0 and not {"starlette", "uvicorn", "websockets", "anyio", "httpx"} & mods, argv


def test_auth_guards_the_streams_and_get_refresh_accept_are_the_owners(tmp_path: Path) -> None:
    """With --auth a stream needs a known token (header or ?token=); get/refresh/accept_update: the owner or internal."""
    auth = tmp_path / "auth.json"
    auth.write_text(json.dumps({"tokens": [
        {"name": "alice", "sha256": token_hash("tok-alice"), "profile": "partner"},
        {"name": "bob", "sha256": token_hash("tok-bob"), "profile": "partner"},
        {"name": "reviewer", "sha256": token_hash("tok-internal"), "profile": "internal"},
    ]}), encoding="utf-8")
    providers = tmp_path / "providers"
    (providers / "research").mkdir(parents=True)
    (providers / "research" / "probe-auth.txt").write_text("observe slow(auth)\n", encoding="utf-8")
    with serving(tmp_path / "receipts.sqlite", "--auth", str(auth), "--providers", str(providers)) as server:
        with toolbus(server, "tok-alice") as alice:
            started = call(alice, "actions.start", {"ability": "cda", "inputs": example_inputs("guard"), "subactions": [
                {"ability": "research", "source": "probe-auth", "edge": "bind"}]})["result"]
            action_id, (sub,) = started["action_id"], started["linked"]
            events = follow(server, action_id, token="tok-alice")
            assert events and events[-1]["event"].startswith("action_")
            url = f"{server.base}/streams/actions/{action_id}"
            with httpx.Client(timeout=30) as client:
                for headers, query in (({}, ""), ({"Authorization": "Bearer wrong"}, ""), ({}, "?token=wrong")):
                    assert client.get(url + query, headers=headers).status_code == 401
                    assert client.head(url + query, headers=headers).status_code == 401
                assert client.head(url, headers={"Authorization": "Bearer tok-bob"}).status_code == 204  # not his
                assert client.get(url, headers={"Authorization": "Bearer tok-bob"}).status_code == 204  # as unknown
                assert client.head(url, headers={"Authorization": "Bearer tok-internal"}).status_code == 200
                assert client.head(url + "?token=tok-alice").status_code == 200  # what the page sends
            with toolbus(server, "tok-bob") as bob:  # another partner: answered as for an unknown id
                for method, params, unknown in (
                        ("actions.get", {"action_id": action_id}, {"action_id": "cda-0000000000000000"}),
                        ("actions.refresh", {"action_id": sub}, {"action_id": "research-000000000000.r1"}),
                        ("actions.accept_update", {"action_id": action_id, "update": sub},
                         {"action_id": "cda-0000000000000000", "update": sub})):
                    answer, other = call(bob, method, params)["error"], call(bob, method, unknown)["error"]
                    assert answer["code"] == other["code"] == "not_found", (method, answer)
                    assert answer["message"] == other["message"].replace(unknown["action_id"], params["action_id"])
            assert call(alice, "actions.get", {"action_id": action_id})["result"]["action_id"] == action_id
            assert call(alice, "actions.refresh", {"action_id": sub})["error"]["code"] == "conflict"  # unchanged
            with toolbus(server, "tok-internal") as reviewer:
                assert call(reviewer, "actions.get", {"action_id": action_id})["result"]["action_id"] == action_id


def test_a_binary_or_deeply_nested_frame_is_an_invalid_frame_and_the_socket_stays(tmp_path: Path) -> None:
    with serving(tmp_path / "receipts.sqlite") as server:
        with toolbus(server) as ws:
            for frame in (b'{"id": 1, "method": "actions.get", "params": {}}', "[" * 200000 + "]" * 200000,
                          '{"id": 2, "params": ' + "{\"a\": " * 100000 + "1" + "}" * 100000 + "}"):
                ws.send(frame)
                bad = json.loads(ws.recv(timeout=10))
                _valid(bad)
                assert bad["error"]["code"] == "invalid_frame", bad
            missing = call(ws, "actions.get", {"action_id": "cda-nope"})  # the same socket still answers
            assert missing["error"]["code"] == "not_found"
        server.stop()
        assert "Traceback" not in server.stderr(), server.stderr()


def test_frame_ids_are_bounded_as_the_schema_says(server: Server) -> None:
    """A string id of at most 128 characters, an integer within ±2**53; any other is invalid_frame, not echoed."""
    with toolbus(server) as ws:
        for bad_id in ("x" * 129, "y" * 100000, 2**53 + 1, -(2**53) - 1, 10**400):
            ws.send(json.dumps({"id": bad_id, "method": "actions.get", "params": {"action_id": "cda-nope"}}))
            bad = json.loads(ws.recv(timeout=10))
            _valid(bad)
            assert bad["id"] is None and bad["error"]["code"] == "invalid_frame", bad
            assert bad["error"]["path"][:1] == ["id"], bad
        for good_id in ("z" * 128, 2**53, -(2**53), 0):
            ws.send(json.dumps({"id": good_id, "method": "actions.get", "params": {"action_id": "cda-nope"}}))
            answer = json.loads(ws.recv(timeout=10))
            _valid(answer)
            assert answer["id"] == good_id and answer["error"]["code"] == "not_found", answer
