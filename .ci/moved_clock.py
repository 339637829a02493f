"""Moves the wall clock of every Python process of a test run by ``MOVED_CLOCK_OFFSET_S`` seconds.

Installed by ``.ci/moved-clock`` as a ``.pth`` hook of the test environment that also sets the
variable, so every Python process of that environment moves: a ``cda`` child whose ``PYTHONPATH``
the tests set, and an MCP stdio server started with the SDK's default environment. ``time.time``/``time.time_ns``, ``gmtime``/``localtime``/``strftime`` of now and
``datetime.now``/``utcnow``/``today``/``date.today`` read the moved clock; the monotonic clock and
sleeps are left alone (budgets and waits stay real). Without the variable it does nothing. It is no
part of ``cda``: CDA has no clock a test may set from outside (docs/testing.md, "The date").
"""

from __future__ import annotations

import os

_OFFSET = os.environ.get("MOVED_CLOCK_OFFSET_S")

if _OFFSET:
    import datetime as _dt
    import time as _time
    from typing import Any

    _seconds = float(_OFFSET)
    _real_time, _real_time_ns = _time.time, _time.time_ns
    _time.time = lambda: _real_time() + _seconds
    _time.time_ns = lambda: _real_time_ns() + int(_seconds * 1_000_000_000)
    _real_gmtime, _real_localtime, _real_strftime = _time.gmtime, _time.localtime, _time.strftime
    _time.gmtime = lambda secs=None: _real_gmtime(_time.time() if secs is None else secs)  # type: ignore[misc]
    _time.localtime = lambda secs=None: _real_localtime(_time.time() if secs is None else secs)  # type: ignore[misc]
    _time.strftime = lambda fmt, t=None: _real_strftime(fmt, _time.localtime() if t is None else t)  # type: ignore[misc]
    _RealDatetime, _RealDate = _dt.datetime, _dt.date

    class _DatetimeType(type):
        def __instancecheck__(cls, obj: object) -> bool:  # a datetime made anywhere is one
            return isinstance(obj, _RealDatetime)

    class _DateType(type):
        def __instancecheck__(cls, obj: object) -> bool:
            return isinstance(obj, _RealDate)

    class _MovedDatetime(_RealDatetime, metaclass=_DatetimeType):
        @classmethod
        def now(cls, tz: Any = None) -> Any:
            return cls.fromtimestamp(_time.time(), tz)

        @classmethod
        def utcnow(cls) -> Any:
            return cls.utcfromtimestamp(_time.time())

        @classmethod
        def today(cls) -> Any:
            return cls.fromtimestamp(_time.time())

    class _MovedDate(_RealDate, metaclass=_DateType):
        @classmethod
        def today(cls) -> Any:
            return cls.fromtimestamp(_time.time())

    _dt.datetime = _MovedDatetime  # type: ignore[misc]
    _dt.date = _MovedDate  # type: ignore[misc]
