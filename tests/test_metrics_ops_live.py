"""The service's ``metrics`` topic and its OpenTelemetry export, on a real ``cda serve`` over loopback.

Clients are real libraries (httpx + httpx-sse for the stream, websockets for the ToolBus); the
OTLP collector is a loopback HTTP server that decodes what the SDK's exporter posts with the
OpenTelemetry protobuf definitions. Every number is compared with what the run's own action
stream carried and with ``cda metrics --json`` over the same store.
"""

from __future__ import annotations

import io
import json
import signal
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any

import httpx
from httpx_sse import connect_sse

from cda.adapters.action_entry import run_inputs
from cda.adapters.auth import token_hash
from cda.cli.main import main
from cda.contracts.action import CDAInputs
from tests.service_harness import Server, call, example_inputs, follow, serving, toolbus, wait_for
from tests.timing import HANG


def metrics_json(db: Path) -> dict[str, Any]:
    out = io.StringIO()
    main(["metrics", str(db), "--json"], out, io.StringIO())
    return json.loads(out.getvalue())  # type: ignore[no-any-return]


class Listener:
    """A thread following ``/streams/metrics`` and keeping every message it gets."""

    def __init__(self, server: Server, last_event_id: int | None = None, want: int = 1) -> None:
        self.messages: list[dict[str, Any]] = []
        self.opened = threading.Event()
        self.done = threading.Event()
        self.want = want
        headers = {} if last_event_id is None else {"Last-Event-ID": str(last_event_id)}
        self.thread = threading.Thread(target=self._run, args=(server.base, headers), daemon=True)
        self.thread.start()

    def _run(self, base: str, headers: dict[str, str]) -> None:
        try:
            with httpx.Client(timeout=60) as client, \
                    connect_sse(client, "GET", f"{base}/streams/metrics", headers=headers) as source:
                source.response.raise_for_status()
                for sse in source.iter_sse():
                    if not sse.data:
                        continue
                    self.messages.append({"id": sse.id, "event": sse.event, "data": json.loads(sse.data)})
                    if sse.event == "slo_status":
                        self.opened.set()
                    if sum(1 for m in self.messages if m["event"] == "action_metrics") >= self.want:
                        break
        finally:
            self.opened.set()
            self.done.set()

    def runs(self) -> list[dict[str, Any]]:
        return [m for m in self.messages if m["event"] == "action_metrics"]


def test_metrics_topic_streams_each_finished_run_and_the_rolling_slos(tmp_path: Path) -> None:
    db = tmp_path / "receipts.sqlite"
    with serving(db) as server:
        live = Listener(server, want=3)
        assert live.opened.wait(HANG) and live.messages[0]["event"] == "slo_status"
        assert live.messages[0]["data"]["window"]["runs"] == 0
        with toolbus(server) as ws:
            started = [call(ws, "actions.start", {"ability": "cda", "inputs": example_inputs(f"live{i}")})["result"][
                "action_id"] for i in range(2)]
        streamed = {a: follow(server, a)[-1] for a in started}
        # a run another process writes into the same file (cda run --out) is on the topic too
        other = run_inputs(CDAInputs.model_validate(example_inputs("outside")), tmp_path)
        assert live.done.wait(HANG), live.messages
        runs = live.runs()
        names = [m["data"]["action_id"] for m in runs]  # in the order they ended (two workers run at once)
        assert sorted(names[:2]) == sorted(started) and names[2] == other.outputs.action_id
        ids = [int(m["id"]) for m in runs]
        assert ids == sorted(ids) and len(set(ids)) == 3
        for message in runs[:2]:
            terminal = streamed[message["data"]["action_id"]]
            assert message["data"]["status"] == terminal["data"]["outputs"]["status"]
            assert message["data"]["metrics"] == terminal["data"]["metrics"]  # the run's own numbers
        assert runs[2]["data"]["metrics"] == other.events[-1].model_dump(mode="json")["metrics"]
        # the rolling status after the last run is what cda metrics judges over the same store
        judged = {s["slo"]: (s["status"], s["value"], s["samples"]) for s in metrics_json(db)["slos"]}
        rolling = {s["slo"]: (s["status"], s["value"], s["samples"]) for s in runs[-1]["data"]["slo"]}
        assert rolling == judged and runs[-1]["data"]["window"]["runs"] == 3
        assert [len(m["data"]["window"]["statuses"]) > 0 for m in runs] == [True] * 3
        # resuming by Last-Event-ID replays the runs after it, from the store
        again = Listener(server, last_event_id=ids[0], want=2)
        assert again.done.wait(HANG)
        replayed = again.runs()
        assert [int(m["id"]) for m in replayed] == ids[1:]
        assert [m["data"]["metrics"] for m in replayed] == [m["data"]["metrics"] for m in runs[1:]]
        bad = httpx.get(f"{server.base}/streams/metrics", headers={"Last-Event-ID": "abc"}, timeout=10)
        assert bad.status_code == 400 and "Last-Event-ID" in bad.text


def test_metrics_topic_under_auth_is_for_the_internal_profile(tmp_path: Path) -> None:
    auth = tmp_path / "auth.json"
    auth.write_text(json.dumps({"tokens": [
        {"name": "partner-a", "sha256": token_hash("tok-partner"), "profile": "partner"},
        {"name": "ops", "sha256": token_hash("tok-ops"), "profile": "internal"},
    ]}), encoding="utf-8")
    with serving(tmp_path / "receipts.sqlite", "--auth", str(auth)) as server:
        url = f"{server.base}/streams/metrics"
        assert httpx.head(url, timeout=10).status_code == 401
        assert httpx.head(url, headers={"Authorization": "Bearer wrong"}, timeout=10).status_code == 401
        assert httpx.head(url, headers={"Authorization": "Bearer tok-partner"}, timeout=10).status_code == 403
        assert httpx.head(url, headers={"Authorization": "Bearer tok-ops"}, timeout=10).status_code == 200
        assert httpx.head(url + "?token=tok-ops", timeout=10).status_code == 200
        assert httpx.post(url, timeout=10).status_code == 405  # no REST: only GET, HEAD, OPTIONS


class _Collector(BaseHTTPRequestHandler):
    """An OTLP/HTTP metrics receiver: keeps every decoded ExportMetricsServiceRequest."""

    received: list[Any] = []

    def do_POST(self) -> None:  # noqa: N802 - the http.server hook's name
        from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest

        body = self.rfile.read(int(self.headers["Content-Length"]))
        request = ExportMetricsServiceRequest()
        request.ParseFromString(body)
        type(self).received.append((self.path, self.headers.get("Content-Type"), request))
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


def test_serve_exports_to_an_otlp_collector_the_numbers_cda_metrics_prints(tmp_path: Path) -> None:
    collector = HTTPServer(("127.0.0.1", 0), _Collector)
    _Collector.received = []
    thread = threading.Thread(target=collector.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True)  # shutdown() waits one interval
    thread.start()
    db = tmp_path / "receipts.sqlite"
    try:
        endpoint = f"http://127.0.0.1:{collector.server_address[1]}/v1/metrics"
        with serving(db, "--otel-endpoint", endpoint) as server:
            with toolbus(server) as ws:
                started = [call(ws, "actions.start", {"ability": "cda", "inputs": example_inputs(f"otel{i}")})[
                    "result"]["action_id"] for i in range(2)]
            for action_id in started:
                follow(server, action_id)
            wait_for(lambda: metrics_json(db)["runs"] == 2)
            assert server.stop() == 0  # SIGTERM: the export is flushed on the way out
    finally:
        collector.shutdown()
        collector.server_close()
    assert _Collector.received, "the collector got nothing"
    path, content_type, _ = _Collector.received[-1]
    assert path == "/v1/metrics" and content_type == "application/x-protobuf"
    last: dict[str, Any] = {}
    for _, _, request in _Collector.received:  # cumulative temporality: the last point of each is the total
        for resource in request.resource_metrics:
            for scope in resource.scope_metrics:
                for metric in scope.metrics:
                    if metric.HasField("histogram"):
                        p = metric.histogram.data_points[-1]
                        last[metric.name] = {"count": p.count, "sum": p.sum, "min": p.min, "max": p.max}
                    elif metric.HasField("sum"):
                        last[metric.name] = sum(p.as_int for p in metric.sum.data_points)
    doc = metrics_json(db)["metrics"]
    for instrument, key in (("cda.ttfs", "ttfs_us"), ("cda.ken.query.p95", "ken_query_p95_us"),
                            ("cda.frontier.size", "frontier_size"), ("cda.run.duration", "run_total_us")):
        assert last[instrument] == {k: doc[key][k] for k in ("count", "sum", "min", "max")}, instrument
    assert last["cda.runs"] == 2
    assert (last["cda.claims.cited"], last["cda.claims.supported"]) == (
        doc["citation_coverage"]["numerator"], doc["citation_coverage"]["denominator"])


def test_otel_endpoint_is_checked_before_the_server_starts(tmp_path: Path) -> None:
    err = io.StringIO()
    code = main(["serve", str(tmp_path / "r.sqlite"), "--otel-endpoint", "collector:4318"], io.StringIO(), err)
    assert code == 2 and "--otel-endpoint 'collector:4318'" in err.getvalue()
    assert not (tmp_path / "r.sqlite").exists()


def test_sigterm_ends_an_open_metrics_stream_at_once_and_cleanly(tmp_path: Path) -> None:
    """A reader on the metrics topic does not hold the server's shutdown for uvicorn's graceful
    timeout, nor end it with a traceback: the topic's streams end first, as the actions' do."""
    from tests.timing import Stopwatch

    server = Server(tmp_path / "receipts.sqlite")
    live = Listener(server, want=1)  # waits for a run that never comes
    try:
        assert live.opened.wait(HANG) and live.messages[0]["event"] == "slo_status"
        with Stopwatch() as watch:  # the server is our child: its waits for a core are not its time
            assert server.stop() == 0
    finally:
        if server.proc.poll() is None:
            server.stop(signal.SIGKILL)
    assert live.done.wait(HANG)  # the reader's end; how soon the server stopped is the bound below
    assert watch.uncontended < 3.0, watch  # uvicorn's graceful timeout cut it off at ~5.5 s before
    err = server.stderr()
    assert "Traceback" not in err and "graceful shutdown exceeded" not in err, err
