"""The SSE event streams (spec §7.2, QA scenario 5 over a real loopback server).

A real ``EventStreamServer`` on 127.0.0.1 and the standard library's ``http.client`` as the
client: the stream drops after a few events, the server is restarted on the same store (a
"deploy"), and the client resumes with ``Last-Event-ID``; the timeline it ends up with must be
exactly the action's events, with no gap and no repeat. Also: a client that connects before the
action starts sees it live to its terminal event, and the server's errors are plain statuses.
"""

from __future__ import annotations

import http.client
import io
import json
import threading
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from cda.adapters.action_entry import load_inputs, run_inputs
from cda.adapters.sse_server import TERMINAL_EVENTS, EventStreamServer, main_serve
from cda.contracts.events import event_without_time
from tests.conftest import ROOT

EXAMPLE = ROOT / "examples" / "action" / "service_outage.json"


def _connect(url: str, last_event_id: int | None = None) -> http.client.HTTPResponse:
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
    headers = {"Accept": "text/event-stream"}
    if last_event_id is not None:
        headers["Last-Event-ID"] = str(last_event_id)
    conn.request("GET", parts.path + (f"?{parts.query}" if parts.query else ""), headers=headers)
    return conn.getresponse()


def _messages(response: http.client.HTTPResponse, stop_after: int | None = None) -> list[dict[str, Any]]:
    """SSE messages as {id, event, data}, parsed line by line as a browser's EventSource does."""
    out: list[dict[str, Any]] = []
    fields: dict[str, str] = {}
    while stop_after is None or len(out) < stop_after:
        raw = response.readline()
        if not raw:
            break
        line = raw.decode().rstrip("\n")
        if line == "":
            if "data" in fields:
                out.append({"id": int(fields["id"]), "event": fields["event"], "data": json.loads(fields["data"])})
            fields = {}
            continue
        if line.startswith(":"):
            continue  # a comment (keep-alive)
        name, _, value = line.partition(":")
        fields[name] = value[1:] if value.startswith(" ") else value
    return out


def _without_time(data: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in data.items() if k != "ts"}


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Any]:
    out = tmp_path_factory.mktemp("sse")
    run = run_inputs(load_inputs(EXAMPLE), out, base_dir=EXAMPLE.parent)
    return out / "receipts.sqlite", run


def test_stream_drops_server_restarts_client_resumes_with_last_event_id(finished_run: tuple[Path, Any]) -> None:
    db, run = finished_run
    action_id = run.outputs.action_id
    expected = [json.loads(json.dumps(event_without_time(e))) for e in run.events]
    with EventStreamServer(db) as first:
        response = _connect(first.url(action_id))
        assert response.status == 200 and response.getheader("Content-Type", "").startswith("text/event-stream")
        head = _messages(response, stop_after=4)
        response.close()  # the connection is lost after four events
    assert [m["id"] for m in head] == [0, 1, 2, 3]
    with EventStreamServer(db) as second:  # a new deploy, another port, the same store
        response = _connect(second.url(action_id), last_event_id=head[-1]["id"])
        rest = _messages(response)
    timeline = head + rest
    assert [m["id"] for m in timeline] == list(range(len(run.events)))
    assert [m["event"] for m in timeline] == [e.type for e in run.events]
    assert [_without_time(m["data"]) for m in timeline] == [_without_time(e) for e in expected]
    assert timeline[-1]["event"] in TERMINAL_EVENTS and timeline[-1]["event"] == run.events[-1].type


def test_a_client_that_connects_as_the_action_starts_sees_it_live(tmp_path: Path) -> None:
    """The client connects when the action has stored only its first event (the run waits for
    it), and sees every later event live, to the terminal one, where the stream ends."""
    inputs = load_inputs(EXAMPLE)
    db = tmp_path / "receipts.sqlite"
    got: list[dict[str, Any]] = []
    statuses: list[int] = []
    readers: list[threading.Thread] = []
    with EventStreamServer(db, poll_s=0.01) as server:

        def connect_on_start(event: Any) -> None:
            if event.seq != 0:
                return
            response = _connect(server.url(event.action_id))
            statuses.append(response.status)
            readers.append(threading.Thread(target=lambda: got.extend(_messages(response))))
            readers[0].start()

        run = run_inputs(inputs, tmp_path, subscribers=[connect_on_start], base_dir=EXAMPLE.parent)
        readers[0].join(timeout=60)
        assert not readers[0].is_alive(), "the stream did not end at the terminal event"
    assert statuses == [200]
    assert [m["id"] for m in got] == list(range(len(run.events)))
    assert [_without_time(m["data"]) for m in got] == [
        _without_time(json.loads(json.dumps(event_without_time(e)))) for e in run.events
    ]


def _status(server: EventStreamServer, action_id: str, last_event_id: int | None = None) -> tuple[int, bytes]:
    """Status and whole body of one request, read to the end: a stream that never ends fails
    here (the client's timeout) instead of hanging the test."""
    parts = urlsplit(server.url(action_id))
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=5)
    headers = {"Accept": "text/event-stream"}
    if last_event_id is not None:
        headers["Last-Event-ID"] = str(last_event_id)
    try:
        conn.request("GET", parts.path, headers=headers)
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


def test_every_stream_ends_finished_actions_204_unknown_ones_404(finished_run: tuple[Path, Any]) -> None:
    """An EventSource reconnects after a stream ends unless the answer is 204 (or an error):
    resuming a finished action at (or after) its terminal event, or asking for an action the
    store does not hold, must answer at once, never with an open stream that stays silent."""
    db, run = finished_run
    action_id = run.outputs.action_id
    terminal = run.events[-1].seq
    with EventStreamServer(db, poll_s=0.01, heartbeat_s=60) as server:  # no keep-alive within the client's 5 s
        assert _status(server, action_id, terminal) == (204, b"")
        assert _status(server, action_id, terminal + 5) == (204, b"")
        status, body = _status(server, action_id, terminal - 1)  # one event left: sent, then the end
        assert status == 200 and body.count(b"\nid: ") + body.startswith(b"id: ") == 1
        assert f"id: {terminal}\nevent: {run.events[-1].type}\n".encode() in body
        status, body = _status(server, "no-such-action")
        assert status == 404 and b"no such action" in body
        status, body = _status(server, "no-such-action", 3)
        assert status == 404 and b"no such action" in body


def test_query_parameter_resume_and_plain_errors(finished_run: tuple[Path, Any]) -> None:
    db, run = finished_run
    action_id = run.outputs.action_id
    n = len(run.events)
    with EventStreamServer(db) as server:
        tail = _messages(_connect(server.url(action_id) + f"?last_event_id={n - 3}"))
        assert [m["id"] for m in tail] == [n - 2, n - 1]
        host, port = server.address
        for method, path, headers, status in (
            ("GET", "/actions/start", {}, 404),
            ("POST", f"/streams/actions/{action_id}", {}, 405),
            ("GET", f"/streams/actions/{action_id}", {"Last-Event-ID": "seven"}, 400),
        ):
            conn = http.client.HTTPConnection(host, port, timeout=10)
            conn.request(method, path, headers=headers)
            response = conn.getresponse()
            body = response.read().decode()
            conn.close()
            assert response.status == status and body.strip(), (method, path, body)


def test_cda_serve_refuses_a_missing_store_with_exit_2(tmp_path: Path) -> None:
    err = io.StringIO()
    assert main_serve(tmp_path / "none.sqlite", "127.0.0.1", 0, io.StringIO(), err) == 2
    assert "no such event store" in err.getvalue() and "Traceback" not in err.getvalue()
    bad = tmp_path / "bad.sqlite"
    bad.write_text("not a database, just text that is long enough to look like a header" * 20)
    err = io.StringIO()
    assert main_serve(bad, "127.0.0.1", 0, io.StringIO(), err) == 2
    assert "cannot serve" in err.getvalue()


def test_cda_serve_refuses_an_empty_host_and_prints_errors_like_every_command(tmp_path: Path) -> None:
    db = tmp_path / "none.sqlite"
    for host in ("", "  "):
        err = io.StringIO()
        assert main_serve(db, host, 0, io.StringIO(), err) == 2
        assert err.getvalue().startswith("cda: error: --host is empty")
    err = io.StringIO()
    assert main_serve(db, "127.0.0.1", 0, io.StringIO(), err) == 2
    assert err.getvalue().startswith("cda: error: ")


@pytest.mark.parametrize("body", ["not json", "[" * 100_000 + "]" * 100_000, '{"type": "no_such_event"}'])
def test_a_bad_stored_event_is_a_500_with_its_reason_not_a_dropped_connection(
    finished_run: tuple[Path, Any], tmp_path: Path, body: str
) -> None:
    """A row the store holds but CDA did not write (or that was damaged) is a clear 500 naming
    the event, never a traceback in the server and a connection closed without an answer; the
    answer does not show the server's path to the store."""
    import shutil
    import sqlite3

    db_source, run = finished_run
    db = tmp_path / "receipts.sqlite"
    shutil.copyfile(db_source, db)
    action_id = run.outputs.action_id
    conn = sqlite3.connect(db)
    try:
        conn.execute("DROP TRIGGER IF EXISTS events_no_update")  # CDA's store refuses edits; this damages it
        conn.execute("UPDATE events SET body = ? WHERE action_id = ? AND seq = 2", (body, action_id))
        conn.commit()
    finally:
        conn.close()
    with EventStreamServer(db, poll_s=0.01, heartbeat_s=60) as server:
        status, answer = _status(server, action_id)
    assert status == 500 and b"event 2 of action" in answer, answer[:300]
    assert str(tmp_path).encode() not in answer
