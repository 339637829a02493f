"""What the CLI does differently on a terminal: colour and a progress line on stderr.

Both only when the stream is a terminal, so CI logs and pipes get plain, stable bytes; colour
never under ``NO_COLOR`` (https://no-color.org: set and not empty). The progress line appears only once work has taken longer than
:data:`PROGRESS_AFTER` seconds, and is erased when the work ends, and before anything else is
written while it shows: a command writes its answer through :meth:`Progress.guard`, so an
answer is never glued onto the progress line (stdout and stderr are one screen on a terminal).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TextIO, cast

from cda.terminal_text import for_terminal

__all__ = ["PROGRESS_AFTER", "is_terminal", "use_colour", "paint", "Progress", "progress", "escaped"]

#: seconds of work before a progress line is shown
PROGRESS_AFTER = 1.0

_COLOURS = {"red": "31", "green": "32", "yellow": "33", "bold": "1", "dim": "2"}


def is_terminal(stream: TextIO) -> bool:
    """Whether ``stream`` is a terminal (a StringIO, a pipe or a closed stream is not)."""
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):
        return False


def use_colour(stream: TextIO) -> bool:
    """Colour on ``stream``: a terminal, and ``NO_COLOR`` unset or empty.

    >>> import io; use_colour(io.StringIO())
    False
    """
    return is_terminal(stream) and not os.environ.get("NO_COLOR")


def paint(text: str, colour: str, stream: TextIO) -> str:
    """``text`` in ``colour`` when :func:`use_colour` allows it on ``stream``, else unchanged.

    >>> import io; paint("error", "red", io.StringIO())
    'error'
    """
    if not use_colour(stream):
        return text
    return f"\x1b[{_COLOURS[colour]}m{text}\x1b[0m"


class Progress:
    """A one-line progress display on ``stream``, redrawn every tenth of a second by a daemon
    thread once :data:`PROGRESS_AFTER` seconds have passed: the label, an optional ``done/total``
    and the elapsed time. Silent (no thread) when ``stream`` is not a terminal."""

    def __init__(self, stream: TextIO, label: str, total: int | None = None, *, after: float | None = None) -> None:
        self.stream, self.label, self.total = stream, label, total
        self.after = PROGRESS_AFTER if after is None else after
        self.done = 0
        self._start = time.monotonic()
        self._stop = threading.Event()
        self._shown = False
        self._lock = threading.Lock()  # a redraw and an erase never interleave
        self._thread: threading.Thread | None = None
        if is_terminal(stream):
            self._thread = threading.Thread(target=self._run, name="cda-progress", daemon=True)
            self._thread.start()

    def step(self, label: str | None = None) -> None:
        """One unit of work done (and, optionally, what is being done now)."""
        self.done += 1
        if label is not None:
            self.label = label

    def line(self) -> str:
        """The text of the progress line now."""
        count = f" [{self.done}/{self.total}]" if self.total is not None else ""
        return f"cda: {for_terminal(self.label, keep='')}{count} {time.monotonic() - self._start:.1f} s"

    def _run(self) -> None:
        if self._stop.wait(self.after):
            return
        while not self._stop.is_set():
            text = self.line()[:78]
            with self._lock:
                if self._stop.is_set():
                    break
                self.stream.write("\r" + text + "\x1b[K")
                self.stream.flush()
                self._shown = True
            self._stop.wait(0.1)

    def clear(self) -> None:
        """Erase the progress line if it shows (it is drawn again at its next tick)."""
        with self._lock:
            if self._shown:
                self.stream.write("\r\x1b[K")
                self.stream.flush()
                self._shown = False

    def guard(self, stream: TextIO) -> TextIO:
        """``stream``, erasing the progress line before each write: what a command prints while
        the progress line shows starts on a clean line."""
        return cast(TextIO, _Cleared(stream, self)) if self._thread is not None else stream

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self.clear()


class _Cleared:
    """A text stream whose writes first erase a progress line (:meth:`Progress.guard`)."""

    def __init__(self, stream: TextIO, bar: Progress) -> None:
        self._stream, self._bar = stream, bar

    def write(self, text: str) -> int:
        if text:
            self._bar.clear()
        return self._stream.write(text)

    def __getattr__(self, name: str) -> object:
        return getattr(self._stream, name)


@contextmanager
def progress(stream: TextIO, label: str, total: int | None = None) -> Iterator[Progress]:
    """``with progress(err, "solving x.cda"):`` shows :class:`Progress` while the block runs."""
    bar = Progress(stream, label, total)
    try:
        yield bar
    finally:
        bar.close()


class _Escaped:
    """A text stream whose writes pass :func:`~cda.terminal_text.for_terminal` (:func:`escaped`)."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self.unescaped = stream  # for a JSON document written whole into a text report's stream

    def write(self, text: str) -> int:
        return self._stream.write(for_terminal(text))

    def __getattr__(self, name: str) -> object:
        return getattr(self._stream, name)


def escaped(stream: TextIO) -> TextIO:
    """``stream`` for a text report built from input text (policy ids, file names): every write has
    its control characters shown escaped, newlines and tabs kept. Never for a report that paints
    (its colour codes would be escaped too) and never for JSON (which escapes them itself).

    >>> import io; s = io.StringIO(); _ = escaped(s).write("id\\x1b[2J\\n"); s.getvalue()
    'id\\\\x1b[2J\\n'
    """
    return cast(TextIO, _Escaped(stream))
