"""One wall-clock budget for a whole run, one cancel token beside it, and the signal that either ran out.

It lives below every stage that spends time (the grounder in ``encodings``, the encoders, the
solver's backends, circuit probing), so each of them can check the same clock inside its own
loops: a budget is a promise about the whole run, and a loop that never looks at the clock
breaks it (the grounder took 41 s of a 1 s budget on a million instances before this).

Checking costs one ``time.monotonic()`` call (about 50 ns); loops check every few hundred
steps (:meth:`Deadline.tick`), so a check never shows on the normal path.

**Cancellation** (docs/service.md, "Cancel"; docs/cli.md, "Ctrl-C"). A run may also be stopped
before its budget ends: a client's ``actions.cancel``, a partner's wall cap, ``SIGTERM`` to the
server, Ctrl-C in the CLI. Each is one :class:`CancelToken`. A :class:`Deadline` built with a
token (or inside :func:`cancel_scope`, which makes a token the ambient one of the thread) counts
as expired once the token is cancelled, so every loop that reads the clock stops at the same
places a timeout stops it, and every stage returns its labelled partial the same way. A solver
busy inside native code does not read the clock: a backend registers its interrupt
(:meth:`Deadline.on_cancel`: z3's ``Context.interrupt``, clingo's ``Control.interrupt``), which
the token calls from the cancelling thread, at once. z3 drops an interrupt that arrives between
two checks, so the token calls its hooks again every :attr:`CancelToken.POKE_EVERY` seconds
for a while (:attr:`CancelToken.POKE_FOR`): a check that started just after the first call is
stopped by the next.
"""

from __future__ import annotations

import contextvars
import math
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from cda.errors import BudgetExceeded

__all__ = ["CancelToken", "Deadline", "OutOfTime", "NO_DEADLINE", "cancel_scope", "current_deadline", "current_token",
           "deadline_scope", "parse_within", "stop_signal"]


class OutOfTime(BudgetExceeded):
    """The deadline passed (or its token was cancelled); ``where`` says where time ran out
    (``"while grounding (12,288 of at most 435,660 instances)"``), or is empty when the caller
    knows better. Callers turn it into a labelled partial result; it never reaches a user as a
    traceback.

    >>> str(OutOfTime("while grounding")), OutOfTime("time ran out while grounding").where
    ('time ran out while grounding', 'while grounding')
    """

    def __init__(self, where: str = "") -> None:
        if where.startswith("time ran out"):  # a whole message ("time ran out while grounding")
            where = where[len("time ran out"):].strip()
        super().__init__(f"time ran out {where}" if where else "time ran out")
        self.where = where


Hook = Callable[[], Any]


class CancelToken:
    """A request to stop a run before its budget ends, made from any thread.

    ``kind`` says who stopped it, for the run's status: ``"cancelled"`` (a client, Ctrl-C) or
    ``"interrupted"`` (the server stopping); ``reason`` is the sentence a user reads. The first
    :meth:`cancel` wins; later ones change nothing.

    >>> token = CancelToken()
    >>> token.cancel("cancelled by the client"), token.cancel("again"), token.reason, token.kind
    (True, False, 'cancelled by the client', 'cancelled')
    >>> Deadline(None, token).expired(), Deadline(None, token).remaining()
    (True, 0.0)
    """

    #: seconds between two calls of the hooks after a cancel, and for how long they are repeated
    POKE_EVERY = 0.1
    POKE_FOR = 10.0

    def __init__(self) -> None:
        self.reason: str | None = None
        self.kind: str | None = None
        self.at: float | None = None  # time.monotonic() of the cancel
        self._hooks: list[Callable[[], Hook | None]] = []
        self._lock = threading.Lock()
        self._done = threading.Event()

    @property
    def cancelled(self) -> bool:
        return self.reason is not None

    def cancel(self, reason: str, kind: str = "cancelled") -> bool:
        """Stop the run: every deadline of the token expires and every registered interrupt is
        called now (then again, see the module's docstring). ``False`` when it was cancelled before."""
        with self._lock:
            if self.reason is not None:
                return False
            self.reason, self.kind, self.at = reason, kind, time.monotonic()
        self._done.set()
        if self._fire():
            threading.Thread(target=self._poke, name="cda-cancel", daemon=True).start()
        return True

    @property
    def watchers(self) -> int:
        """How many live interrupts are registered (a solver built under the token registers one)."""
        with self._lock:
            return sum(1 for h in self._hooks if h() is not None)

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the token is cancelled (``True``) or ``timeout`` passes (``False``)."""
        return self._done.wait(timeout)

    def on_cancel(self, hook: Hook) -> None:
        """Call ``hook`` when the token is cancelled (at once if it is already). A bound method is
        held weakly: a backend that is gone is not kept alive, nor called.

        Never the bound method of an object with a ``__del__`` (a solver's own handle: clingo's
        ``Control``, z3's ``Context``): CPython runs ``__del__`` before it clears the weak
        references, so the hook would still resolve, from the cancelling thread, while that
        ``__del__`` frees the native object (a SIGSEGV on Ctrl-C). Register a method of the
        object that owns the handle instead; this is refused with :class:`TypeError`."""
        ref: Callable[[], Hook | None]
        if hasattr(hook, "__self__") and hasattr(hook, "__func__"):
            if getattr(type(hook.__self__), "__del__", None) is not None:
                raise TypeError(f"{hook!r}: a cancel hook must not be a method of an object with __del__ "
                                "(it would be called while that object is freed); register its owner's method")
            try:
                ref = weakref.WeakMethod(hook)  # type: ignore[arg-type]
            except TypeError:  # a builtin's bound method cannot be weakly referenced
                ref = lambda: hook  # noqa: E731
        else:
            ref = lambda: hook  # noqa: E731
        with self._lock:
            self._hooks = [h for h in self._hooks if h() is not None]
            self._hooks.append(ref)
            cancelled = self.reason is not None
        if cancelled:
            _call(hook)

    def _fire(self) -> bool:
        """Call every live hook; whether any is left."""
        with self._lock:
            hooks = [h() for h in self._hooks]
        live = [h for h in hooks if h is not None]
        for hook in live:
            _call(hook)
        return bool(live)

    def _poke(self) -> None:
        end = time.monotonic() + self.POKE_FOR
        while time.monotonic() < end:
            time.sleep(self.POKE_EVERY)
            if not self._fire():
                return


def _call(hook: Hook) -> None:
    try:
        hook()
    except Exception:  # noqa: BLE001 - a solver already gone: nothing left to stop
        pass


_AMBIENT: contextvars.ContextVar[CancelToken | None] = contextvars.ContextVar("cda_cancel_token", default=None)


def current_token() -> CancelToken | None:
    """The ambient token of this thread (:func:`cancel_scope`), if any."""
    return _AMBIENT.get()


@contextmanager
def cancel_scope(token: CancelToken) -> Iterator[CancelToken]:
    """Make ``token`` the ambient one while the block runs: every :class:`Deadline` made in it
    without a token of its own (and :data:`NO_DEADLINE`, read in it) is cancelled with it. A
    context variable, so it belongs to this thread: a server runs each action under its own."""
    reset = _AMBIENT.set(token)
    try:
        yield token
    finally:
        _AMBIENT.reset(reset)


_RUN_DEADLINE: contextvars.ContextVar[Deadline | None] = contextvars.ContextVar("cda_deadline", default=None)


def current_deadline() -> Deadline:
    """The deadline of the run this thread is in (:func:`deadline_scope`), else :data:`NO_DEADLINE`
    (which still stops with the ambient token). For code far below the call that knows the
    budget and with no deadline of its own to take: a diagnosis oracle's simulation, called by
    the solver's search through an interface that has no room for one."""
    return _RUN_DEADLINE.get() or NO_DEADLINE


@contextmanager
def deadline_scope(deadline: Deadline) -> Iterator[Deadline]:
    """Make ``deadline`` the run's (:func:`current_deadline`) while the block runs."""
    reset = _RUN_DEADLINE.set(deadline)
    try:
        yield deadline
    finally:
        _RUN_DEADLINE.reset(reset)


class Deadline:
    """A wall-clock budget shared by every call of one run; ``None`` (or +infinity) means no limit.

    ``token``: the run's :class:`CancelToken`; by default the ambient one when the deadline is
    made (:func:`cancel_scope`), and for a deadline made outside any scope, the ambient one of
    the moment it is read.

    >>> Deadline(None).remaining() is None, Deadline(0).expired()
    (True, True)
    """

    #: how many :meth:`tick` calls between two looks at the clock (a power of two)
    EVERY = 256

    def __init__(self, seconds: float | None, token: CancelToken | None = None) -> None:
        self.seconds = None if seconds is None or seconds == math.inf else seconds  # +infinity: no limit
        self._end = None if self.seconds is None else time.monotonic() + self.seconds
        self._ticks = 0
        self._token = token if token is not None else _AMBIENT.get()

    @property
    def token(self) -> CancelToken | None:
        return self._token if self._token is not None else _AMBIENT.get()

    def cancelled(self) -> bool:
        """Whether the run was stopped by its token (not by the clock)."""
        token = self.token
        return token is not None and token.cancelled

    def remaining(self) -> float | None:
        """Seconds left (0 once the token is cancelled); ``None`` without a limit."""
        if self.cancelled():
            return 0.0
        if self._end is None:
            return None
        return max(0.0, self._end - time.monotonic())

    def expired(self) -> bool:
        """Whether the budget has run out or the run was cancelled (never, without either)."""
        return self.cancelled() or (self._end is not None and time.monotonic() >= self._end)

    def tick(self) -> bool:
        """Count one step of a loop; every :attr:`EVERY` steps, whether the budget has run out.

        Cheap enough for the innermost loop of the grounder: no clock read on most calls.
        """
        self._ticks += 1
        if self._ticks & (self.EVERY - 1):
            return False
        return self.expired()

    def check(self, where: str = "") -> None:
        """Raise :class:`OutOfTime` (``where``: what was being done) once the deadline has passed."""
        if self.expired():
            raise OutOfTime(where)

    def on_cancel(self, hook: Hook) -> None:
        """Register a solver's interrupt with the token (nothing without one)."""
        token = self.token
        if token is not None:
            token.on_cancel(hook)

    def why(self) -> str:
        """What stopped the run, for a partial result's note: the token's reason, or the budget."""
        token = self.token
        if token is not None and token.reason is not None:
            return token.reason
        return "time budget exhausted"


def stop_signal(exc: Exception, deadline: Deadline) -> OutOfTime:
    """``exc`` as the out-of-time signal when it is one, or when ``deadline`` was cancelled: a
    solver interrupted by a cancel may fail the call in flight in its own way (z3, after an
    interrupt, refuses to hand over or evaluate a model: "model is not available"), and that is
    the stop, not an error. Anything else is raised again.

    >>> token = CancelToken(); _ = token.cancel("stop")
    >>> str(stop_signal(RuntimeError("model is not available"), Deadline(None, token)))
    'time ran out'
    """
    if isinstance(exc, OutOfTime):
        return exc
    if deadline.cancelled():
        return OutOfTime()
    raise exc


def parse_within(parser: Any, text: str, deadline: Deadline, what: str = "while reading the text", **options: Any) -> Any:
    """``parser.parse(text, **options)`` for a lark LALR ``parser``, token by token so that
    ``deadline`` is read between tokens: a text of a million terms takes lark seconds, and a
    budget covers reading too (docs/cli.md, ``--timeout``). Without a limit or a token, lark's
    own loop. Raises :class:`OutOfTime` (``what``, at which line)."""
    if deadline.seconds is None and deadline.token is None:
        return parser.parse(text, **options)
    interactive = parser.parse_interactive(text, **options)
    for token in interactive.iter_parse():
        if deadline.tick():
            raise OutOfTime(f"{what} (at line {getattr(token, 'line', 0):,})")
    return interactive.feed_eof()


#: the deadline of a run without a time limit (cancelled with the ambient token of whoever reads it)
NO_DEADLINE = Deadline(None)
NO_DEADLINE._token = None  # never the token of a scope it happened to be imported in
