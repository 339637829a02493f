"""A real ``cda serve`` in a child process on a free loopback port, and the clients the tests use.

The server is started the way a person starts it (``python -m cda serve DB --port 0``), its
address read from the line it prints, and stopped with SIGTERM (or SIGKILL, for the crash
tests). Clients are real libraries: ``websockets`` for the ToolBus, ``httpx`` + ``httpx-sse``
for the streams.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
from httpx_sse import connect_sse
from websockets.sync.client import ClientConnection, connect

from tests.conftest import ROOT
from tests.timing import HANG, wait_until

EXAMPLE = ROOT / "examples" / "action" / "service_outage.json"


def example_inputs(purpose: str = "svc", **changes: Any) -> dict[str, Any]:
    """The outage example with its Ken graph inline (a partner cannot name server files)."""
    data = json.loads(EXAMPLE.read_text(encoding="utf-8"))
    ken = json.loads((EXAMPLE.parent / "ken_services.json").read_text(encoding="utf-8"))
    data["ken"] = {"nodes": [{"id": n["id"], **({"label": n["label"]} if n.get("label") else {})}
                             for n in ken["nodes"]],
                   "edges": [{"source": e["source"], "relation": e.get("relation", "related_to"),
                              "target": e["target"]} for e in ken.get("links", ken.get("edges", []))]}
    data["seed"] = {"purpose": purpose}
    data.update(changes)
    return data


def write_tokens(path: Path, tokens: dict[str, tuple[str, str]]) -> Path:
    """An ``--auth`` file at ``path``: each name -> (its token, its profile), stored as the hash."""
    from cda.adapters.auth import token_hash

    path.write_text(json.dumps({"tokens": [{"name": name, "sha256": token_hash(token), "profile": profile}
                                           for name, (token, profile) in tokens.items()]}), encoding="utf-8")
    return path


class Server:
    """One ``cda serve`` child process."""

    def __init__(self, db: Path, *args: str, port: int = 0) -> None:
        env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"}
        self.proc = subprocess.Popen([sys.executable, "-m", "cda", "serve", str(db), "--port", str(port), *args],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT)
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        match = re.search(r"http://([0-9.]+):([0-9]+)/", line)
        if match is None:
            self.proc.kill()
            raise AssertionError(f"server did not start: {line!r} {self.proc.stderr.read() if self.proc.stderr else ''}")
        self.host, self.port = match.group(1), int(match.group(2))
        self.base = f"http://{self.host}:{self.port}"
        self.err_text = ""

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 15) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        code = self.proc.wait(timeout)
        if self.proc.stderr is not None and not self.proc.stderr.closed:
            self.err_text = self.proc.stderr.read()
        for stream in (self.proc.stdout, self.proc.stderr):
            if stream is not None:
                stream.close()
        return code

    def stderr(self) -> str:
        """What the server wrote to stderr (after :meth:`stop`)."""
        return self.err_text

    def cpu(self) -> float:
        """CPU seconds the server process has used so far (``/proc``): how much work it has done,
        whatever the load on the machine (a busy machine slows the wall clock, not this)."""
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rpartition(")")[2].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


@contextmanager
def serving(db: Path, *args: str, port: int = 0) -> Iterator[Server]:
    server = Server(db, *args, port=port)
    try:
        yield server
    finally:
        if server.proc.poll() is None:
            server.stop()


def toolbus(server: Server, token: str | None = None) -> ClientConnection:
    headers = {"Authorization": f"Bearer {token}"} if token else None
    return connect(f"ws://{server.host}:{server.port}/toolbus", additional_headers=headers, open_timeout=10)


_ids = iter(range(1, 1 << 30))


def call(ws: ClientConnection, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    """One request, its answer frame (result or error)."""
    frame_id = next(_ids)
    ws.send(json.dumps({"id": frame_id, "method": method, "params": params or {}}))
    answer = json.loads(ws.recv(timeout=30))
    assert answer["id"] == frame_id, answer
    return answer  # type: ignore[no-any-return]


def follow(server: Server, action_id: str, last_event_id: int | str | None = None, stop_after: int | None = None,
           timeout: float = 60, token: str | None = None, query: str = "",
           into: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """The SSE messages of an action's stream as {id (the seq), attempt, sse_id, event, data}, until
    it ends (or ``stop_after``); ``query`` is added to the URL (``?attempt=2``). ``into`` receives
    each message as it arrives (a test in another thread waits on it: the reader is connected)."""
    headers = {} if last_event_id is None else {"Last-Event-ID": str(last_event_id)}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    out: list[dict[str, Any]] = [] if into is None else into
    with httpx.Client(timeout=timeout) as client, \
            connect_sse(client, "GET", f"{server.base}/streams/actions/{action_id}{query}", headers=headers) as source:
        if source.response.status_code == 204:
            return out
        source.response.raise_for_status()
        for sse in source.iter_sse():
            if not sse.data or sse.event.startswith("wu_"):
                continue  # the opening "retry:" alone (a browser dispatches nothing for it); a §13 alias
            attempt, _, seq = sse.id.rpartition(":")  # "seq", or "attempt:seq" for a re-run
            out.append({"id": int(seq), "attempt": int(attempt or 1), "sse_id": sse.id, "event": sse.event,
                        "data": json.loads(sse.data)})
            if stop_after is not None and len(out) >= stop_after:
                break
    return out


def wait_for(predicate: Any, timeout: float = HANG, every: float = 0.05) -> Any:
    """``predicate``'s first true value (tests/timing.py's wait on a condition)."""
    return wait_until(predicate, getattr(predicate, "__name__", "a condition"), timeout, every)


def wait_signed(db: Path, action_id: str, attempt: int = 1, timeout: float = HANG) -> dict[str, Any]:
    """The signed head beside ``db`` once it vouches for the end of ``action_id``'s ``attempt``
    (the server signs just after an attempt's terminal event, which a client may see first)."""
    from cda.keys.signing import head_path, read_head

    def signed() -> dict[str, Any] | None:
        path = head_path(db)
        doc = read_head(path) if path.exists() else None
        ok = doc is not None and (doc["action_id"], doc["attempt"], doc["phase"]) == (action_id, attempt, "end")
        return doc if ok else None

    return wait_for(signed, timeout)  # type: ignore[no-any-return]
