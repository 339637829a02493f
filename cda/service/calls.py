"""The ToolBus calls running in worker threads, each under its own cancel token (docs/service.md,
"Stopping" and "Calls").

A method runs in a thread (``anyio.to_thread``), which nothing outside can stop; what can stop it
is the run's :class:`~cda.contracts.deadline.CancelToken` (the one ``actions.cancel`` and Ctrl-C
use): every deadline made under it expires, and z3's or clingo's search in flight is interrupted.
So each call gets one, and it is cancelled when

* the client disconnects while the call runs (nobody is left to read the answer);
* the server is asked to stop (SIGTERM, Ctrl-C): :meth:`Calls.stop_all`, from the signal's handler;
* a product call (``investigate.*``, ``guard.*``, ``conduct.*``) reaches the server's call wall
  (``cda serve --call-wall``, default 300 s): such a call has no budget of its own, and a partner
  could otherwise keep each of the few product threads busy for as long as a search lasts.
"""

from __future__ import annotations

import threading

from cda.contracts.deadline import CancelToken

__all__ = ["CALL_WALL_S", "STOP_GRACE_S", "Calls"]

CALL_WALL_S = 300.0
"""The default wall of one product call (``--call-wall``), the default partner wall of an action."""
STOP_GRACE_S = 3.0
"""Seconds a cancelled call's thread is waited for before its connection lets it go (a run in code
that reads no deadline; the process still exits within its promise, docs/service.md)."""


class Calls:
    """The live calls' tokens; thread-safe (calls begin in the event loop, stop in a signal's handler)."""

    def __init__(self, wall: float | None = CALL_WALL_S) -> None:
        self.wall = wall
        self.stopping = False
        self._live: dict[CancelToken, threading.Timer | None] = {}
        self._lock = threading.Lock()

    def begin(self, *, capped: bool) -> CancelToken:
        """A new call's token; ``capped``: it ends at the call wall (a product call)."""
        token = CancelToken()
        timer = None
        if capped and self.wall is not None:
            timer = threading.Timer(self.wall, token.cancel,
                                    (f"time ran out: the server's call wall of {self.wall:g} s", "timeout"))
            timer.daemon = True
        with self._lock:
            stopping = self.stopping
            self._live[token] = timer
        if stopping:
            token.cancel("interrupted: the server is stopping", "interrupted")
        elif timer is not None:
            timer.start()
        return token

    def end(self, token: CancelToken) -> None:
        """The call is over (answered or abandoned): its wall timer goes."""
        with self._lock:
            timer = self._live.pop(token, None)
        if timer is not None:
            timer.cancel()

    @property
    def running(self) -> int:
        with self._lock:
            return len(self._live)

    def stop_all(self) -> None:
        """The server is stopping: every call's solver is interrupted now, and a call begun later
        starts cancelled. Never blocks (called from the signal's handler)."""
        with self._lock:
            self.stopping = True
            tokens = list(self._live)
        for token in tokens:
            token.cancel("interrupted: the server is stopping", "interrupted")
