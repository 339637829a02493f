"""Action event streams over Server-Sent Events (spec §7.2), resumable by ``Last-Event-ID``.

``GET /streams/actions/<action_id>`` streams the events of one action from the event store
(:class:`~cda.adapters.event_store.EventStore`, the SQLite file ``cda run --out`` writes): those
already stored, then new ones as the action emits them, until its terminal event
(``action_completed``, ``action_partial`` or ``action_failed``). Each event is one SSE message
whose ``id`` is the event's ``seq``, whose ``event`` is its type and whose ``data`` is its JSON.
A client that lost the stream reconnects with the ``Last-Event-ID`` header (or
``?last_event_id=N``, for a first connection that cannot set headers) and gets exactly the
events after that one, so its timeline has no gap and no repeat. The store is the only state,
so this holds across server restarts ("deploys").

Every stream ends, so that a reconnecting ``EventSource`` never hangs: an action the store does
not hold (no event stored under that id: unknown, or not started yet) is answered
**404 Not Found**, and a finished action resumed with its terminal event's id (or any later one),
which has nothing left to send, **204 No Content** — the status the SSE specification gives a
server to tell the client to stop reconnecting. A client that wants an action it is about to
start connects once the action has emitted its first event (``action_started``), or retries on 404.

The server only reads the store: the file is opened read-only and leaves no ``-wal``/``-shm``
behind (:func:`~cda.adapters.event_store.read_events`), and a file CDA did not create is refused
when the server starts.

Streams only: there is no REST surface. Any other path is 404, any other method 405. Built on
the standard library's ``ThreadingHTTPServer`` (one thread per stream), which is enough for
the handful of clients one CDA process serves; each poll of a stream reads the store through its
own read-only SQLite connection (WAL: readers never block the action writing).
"""

from __future__ import annotations

import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import TextIO
from urllib.parse import parse_qs, urlsplit

from cda.adapters.event_store import check_event_file, read_events
from cda.errors import CDAError

__all__ = ["TERMINAL_EVENTS", "EventStreamServer", "main_serve"]

TERMINAL_EVENTS = frozenset({"action_completed", "action_partial", "action_failed"})
_PATH = re.compile(r"^/streams/actions/([A-Za-z0-9_.:\-]{1,200})$")


class EventStreamServer:
    """An SSE server over one event store, on ``host:port`` (port 0: any free port).

    >>> import tempfile, pathlib
    >>> with EventStreamServer(pathlib.Path(tempfile.mkdtemp()) / "events.sqlite") as server:
    ...     server.url("a1").startswith("http://127.0.0.1:")
    True
    """

    def __init__(
        self,
        db: Path,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        poll_s: float = 0.05,
        heartbeat_s: float = 15.0,
    ) -> None:
        self.db = Path(db)
        if self.db.exists():  # a clear error now for a file that is not CDA's (a missing one may come)
            check_event_file(self.db)
        self.poll_s = poll_s
        self.heartbeat_s = heartbeat_s
        self.stopping = threading.Event()
        self._httpd = ThreadingHTTPServer((host, port), _handler_for(self))
        self._httpd.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def address(self) -> tuple[str, int]:
        host, port = self._httpd.server_address[:2]
        return str(host), int(port)

    def url(self, action_id: str) -> str:
        host, port = self.address
        return f"http://{host}:{port}/streams/actions/{action_id}"

    def start(self) -> EventStreamServer:
        """Serve in a background thread (returns at once)."""
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="cda-sse", daemon=True)
        self._thread.start()
        return self

    def serve_forever(self) -> None:
        """Serve in this thread until :meth:`stop` (from another thread) or Ctrl-C."""
        self._httpd.serve_forever()

    def stop(self) -> None:
        """Stop accepting, end every open stream at its next poll, release the port."""
        self.stopping.set()
        if self._thread is not None:
            self._httpd.shutdown()
            self._thread.join()
            self._thread = None
        self._httpd.server_close()

    def __enter__(self) -> EventStreamServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _handler_for(server: EventStreamServer) -> type[BaseHTTPRequestHandler]:
    class Handler(_StreamHandler):
        owner = server

    return Handler


class _StreamHandler(BaseHTTPRequestHandler):
    owner: EventStreamServer
    server_version = "cda-sse/1"

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - the base class's name
        return  # a library does not write to stderr on every request

    def _plain(self, code: int, text: str, allow: str | None = None) -> None:
        body = (text + "\n").encode()
        self.send_response(code)
        self.send_header("Content-Type", "text/plain; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        if allow:
            self.send_header("Allow", allow)
        self.end_headers()
        self.wfile.write(body)

    def _not_allowed(self) -> None:
        self._plain(405, "event streams only: GET /streams/actions/<action_id>", allow="GET")

    do_POST = do_PUT = do_DELETE = do_PATCH = _not_allowed  # noqa: N815 - http.server's naming

    def do_GET(self) -> None:  # noqa: N802 - http.server's naming
        url = urlsplit(self.path)
        match = _PATH.match(url.path)
        if match is None:
            self._plain(404, "no such stream: event streams are at /streams/actions/<action_id>")
            return
        raw: str | None = self.headers.get("Last-Event-ID")
        if raw is None:
            given = parse_qs(url.query).get("last_event_id")
            raw = given[0] if given else None
        try:
            last = None if raw is None or raw.strip() == "" else int(raw)
            if last is not None and last < -1:
                raise ValueError
        except ValueError:
            self._plain(400, f"Last-Event-ID must be an event id (a whole number), got {raw!r}")
            return
        self._stream(match.group(1), last)

    def _stream(self, action_id: str, last: int | None) -> None:
        owner = self.owner
        try:
            stored = read_events(owner.db, action_id)
        except CDAError as exc:  # the file was replaced by one that is not CDA's, or damaged
            # the reason, without the server's own path to the store
            self._plain(500, f"cannot read the event store: {str(exc).replace(str(owner.db), Path(owner.db).name)}")
            return
        if not stored:
            self._plain(404, f"no such action in this store: {action_id} (none of its events is stored)")
            return
        pending = [e for e in stored if last is None or e.seq > last]
        if not pending and any(e.type in TERMINAL_EVENTS for e in stored):
            self.send_response(204)  # finished, nothing after the client's last event: stop reconnecting
            self.end_headers()
            return
        try:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream; charset=utf-8")
            self.send_header("Cache-Control", "no-cache")
            self.end_headers()
            self.wfile.write(b"retry: 1000\n\n")
            self.wfile.flush()
            quiet_since = time.monotonic()
            events = pending
            while not owner.stopping.is_set():
                for event in events:
                    data = json.dumps(event.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))
                    self.wfile.write(f"id: {event.seq}\nevent: {event.type}\ndata: {data}\n\n".encode())
                    last = event.seq
                    if event.type in TERMINAL_EVENTS:
                        self.wfile.flush()
                        return
                if events:
                    self.wfile.flush()
                    quiet_since = time.monotonic()
                elif time.monotonic() - quiet_since >= owner.heartbeat_s:
                    self.wfile.write(b": keep-alive\n\n")  # a comment: keeps proxies from closing
                    self.wfile.flush()
                    quiet_since = time.monotonic()
                owner.stopping.wait(owner.poll_s)
                events = read_events(owner.db, action_id, last)
        except (BrokenPipeError, ConnectionResetError):
            return  # the client went away: it resumes with Last-Event-ID
        except CDAError:
            return  # the store became unreadable: end the stream; a reconnect gets the reason (500)


def main_serve(db: Path, host: str, port: int, out: TextIO, err: TextIO) -> int:
    """``cda serve DB``: serve the event streams of ``DB`` until Ctrl-C; 2 when it cannot start."""
    if not host.strip():
        # an empty host would bind every interface (0.0.0.0): that must be asked for by name
        err.write("cda: error: --host is empty; give an address (127.0.0.1, or 0.0.0.0 for every interface)\n")
        return 2
    if not db.exists():
        err.write(f"cda: error: {db}: no such event store (cda run --out DIR writes DIR/receipts.sqlite)\n")
        return 2
    try:
        server = EventStreamServer(db, host, port)
    except (CDAError, OSError) as exc:
        err.write(f"cda: error: cannot serve {db} on {host}:{port}: {exc}\n")
        return 2
    bound_host, bound_port = server.address
    out.write(f"serving the event streams of {db} at http://{bound_host}:{bound_port}/streams/actions/<action_id>\n")
    out.flush()
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
    return 0
