"""Ctrl-C and SIGTERM in a ``cda`` command: the solver stops, what was found is printed, exit 130.

The obvious way does not work: Python runs a signal's handler in the main thread between two
bytecodes, and a command's main thread spends its time inside z3's or clingo's native code,
where no bytecode runs (Ctrl-C in ``cda solve`` on clingo was ignored until the solve ended; z3
caught it itself and the run reported a *timeout*). So the signal is read from a wakeup file
descriptor (:func:`signal.set_wakeup_fd`: written by the C handler at the moment the signal
arrives) by a watcher thread, which cancels the command's :class:`~cda.contracts.deadline.CancelToken`.
The token is the ambient one of the command (:func:`~cda.contracts.deadline.cancel_scope`):
every deadline the command makes expires with it and the solver in flight is interrupted (z3's
``Context.interrupt``, clingo's ``Control.interrupt``), so the command comes back through the
path a timeout takes and prints its labelled partial (``note: interrupted (Ctrl-C) …``); then
:func:`interruptible`'s caller exits 130 (143 for SIGTERM) and says on stderr that the output
is partial. No ``KeyboardInterrupt`` is raised in the command, so no traceback can reach the user.

Two safety nets: a second Ctrl-C ends the process at once, and a command that has not come
back after spending :data:`GRACE_S` seconds of CPU since the signal (a loop that never reads its
deadline), or :data:`GRACE_WALL_S` seconds of wall time (one blocked), is ended by the watcher,
with a line saying that nothing more could be printed. Both exit 130 (143). The grace is CPU
time because printing the partial is work the load stretches: on a 2-core machine at load 13 a
``cda diagnose`` that needed 0.3 s of CPU to print what it found took over 2 s of wall time, and
a 2 s wall grace cut it off with nothing printed.
docs/cli.md, "Ctrl-C", says the same to users; ``benchmarks/bench_cancel.py`` measures the latency.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from types import FrameType
from typing import Any

from cda.contracts.deadline import CancelToken, cancel_scope

__all__ = ["EXIT_INTERRUPTED", "GRACE_S", "GRACE_WALL_S", "Interruption", "interruptible"]

EXIT_INTERRUPTED = 130
"""The exit status of a command stopped by Ctrl-C (128 + SIGINT); SIGTERM gives 143."""

GRACE_S = 2.0
"""CPU seconds a command may spend, after the signal, to print what it found before the watcher
ends it (CPU, which load cannot stretch; see :data:`GRACE_WALL_S` for a command that is blocked)."""

GRACE_WALL_S = 30.0
"""Wall seconds after the signal past which the watcher ends a command that has not come back
however little CPU it spent (blocked on a read, a lock, a child)."""

_GRACE_POLL_S = 0.05

_NAMES = {signal.SIGINT: "Ctrl-C", signal.SIGTERM: "SIGTERM"}


@dataclass
class Interruption:
    """What :func:`interruptible` saw: the token it cancels, and the signal once one came."""

    token: CancelToken = field(default_factory=CancelToken)
    signum: int | None = None
    at: float | None = None  # time.monotonic() of the first signal

    @property
    def code(self) -> int:
        """The exit status for the signal seen (130 for Ctrl-C, 143 for SIGTERM)."""
        return 128 + (self.signum or signal.SIGINT)

    def note(self) -> str:
        """The stderr line that says the output above is partial."""
        name = _NAMES.get(signal.Signals(self.signum or signal.SIGINT), "a signal")
        took = "" if self.at is None else f" {time.monotonic() - self.at:.2f} s after it came"
        return f"cda: interrupted ({name}): the command stopped{took}; what it printed is what was found until then\n"


def _ignore(signum: int, frame: FrameType | None) -> None:
    """The Python-level handler: nothing (the watcher acts on the wakeup fd). Installed so that
    no ``KeyboardInterrupt`` is raised at whatever bytecode the main thread is at."""


def _end_now(signum: int, why: str) -> None:
    os.write(2, f"\ncda: interrupted ({_NAMES.get(signal.Signals(signum), 'a signal')}): {why}\n".encode())
    os._exit(128 + signum)


@contextmanager
def interruptible() -> Iterator[Interruption]:
    """Run the block with Ctrl-C and SIGTERM turned into a cancel of the yielded token (see the
    module's docstring). Only in the main thread, and only for the signals whose handler is
    still the default one (a signal the caller ignores stays ignored); elsewhere a token no
    signal cancels."""
    state = Interruption()
    if threading.current_thread() is not threading.main_thread():
        with cancel_scope(state.token):
            yield state
        return
    caught = [s for s in (signal.SIGINT, signal.SIGTERM)
              if signal.getsignal(s) in (signal.default_int_handler, signal.SIG_DFL)]
    read_end, write_end = os.pipe()
    os.set_blocking(write_end, False)
    done = threading.Event()

    def watch() -> None:
        while True:
            try:
                data = os.read(read_end, 64)
            except OSError:
                return
            if not data or done.is_set():
                return
            for signum in data:
                if signum not in caught:
                    continue
                if state.signum is not None:  # the second one: at once
                    _end_now(signum, "stopped at once (second signal)")
                state.signum, state.at = signum, time.monotonic()
                name = _NAMES.get(signal.Signals(signum), "a signal")
                cpu_at = time.process_time()
                state.token.cancel(f"interrupted ({name})", "cancelled")
                threading.Thread(target=_grace, args=(signum, cpu_at), name="cda-grace", daemon=True).start()

    def _grace(signum: int, cpu_at: float) -> None:
        """End the process once it has spent GRACE_S of CPU (every thread's) since the signal, or
        GRACE_WALL_S of wall time, without coming back."""
        assert state.at is not None
        while not done.wait(_GRACE_POLL_S):
            if time.process_time() - cpu_at >= GRACE_S:
                _end_now(signum, f"the command did not stop within {GRACE_S:g} s of CPU; nothing more could be printed")
            if time.monotonic() - state.at >= GRACE_WALL_S:
                _end_now(signum, f"the command did not stop within {GRACE_WALL_S:g} s; nothing more could be printed")

    with ExitStack() as stack:
        previous_fd = signal.set_wakeup_fd(write_end, warn_on_full_buffer=False)
        previous: dict[int, Any] = {s: signal.signal(s, _ignore) for s in caught}

        def restore() -> None:
            done.set()
            for s, handler in previous.items():
                signal.signal(s, handler)
            signal.set_wakeup_fd(previous_fd)
            os.close(write_end)  # the watcher reads end of file and returns
            watcher.join(1.0)
            os.close(read_end)

        watcher = threading.Thread(target=watch, name="cda-signals", daemon=True)
        watcher.start()
        stack.callback(restore)
        stack.enter_context(cancel_scope(state.token))
        yield state
