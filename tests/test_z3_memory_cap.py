"""z3's memory cap is one setting for the whole process (``memory_max_size``), held by FOL's
open-domain checks (docs/fol.md, "Open domains"). Two checks on two threads, as a server runs
claims side by side, must not take it from each other: the cap stays while either runs, and what
was there before comes back once both are done — whatever order they end in."""

from __future__ import annotations

import threading

import z3

from cda.fol.to_z3 import _Z3_MEMORY_CAP


def _hold(entered: threading.Event, leave: threading.Event) -> None:
    with _Z3_MEMORY_CAP.held(512):
        entered.set()
        assert leave.wait(60)


def test_the_cap_stays_while_any_check_holds_it_and_goes_after_the_last() -> None:
    before = z3.get_param("memory_max_size")
    for first_out in ("a", "b"):
        events = {name: (threading.Event(), threading.Event()) for name in "ab"}
        threads = {name: threading.Thread(target=_hold, args=events[name]) for name in "ab"}
        threads["a"].start()
        assert events["a"][0].wait(60)
        threads["b"].start()
        assert events["b"][0].wait(60)
        assert z3.get_param("memory_max_size") == "512"
        last_out = "b" if first_out == "a" else "a"
        events[first_out][1].set()
        threads[first_out].join(60)
        assert z3.get_param("memory_max_size") == "512"  # the other check still runs under it
        events[last_out][1].set()
        threads[last_out].join(60)
        assert z3.get_param("memory_max_size") == before


def test_no_cap_asked_leaves_the_setting_alone() -> None:
    before = z3.get_param("memory_max_size")
    with _Z3_MEMORY_CAP.held(0):
        assert z3.get_param("memory_max_size") == before
    assert z3.get_param("memory_max_size") == before
