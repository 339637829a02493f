"""Solvers are freed by reference counting, not left for the cyclic collector (docs/architecture.md,
"Freeing solvers").

Each path runs once to warm up (first-use caches, z3's main context), then again with the cyclic
collector off; a solver object still in ``gc.get_objects()`` after the second run is one that only
the collector could free. The FOL path's count failed before QuickXplain's recursion stopped being
a closure that refers to itself: every ``cda prove`` decision kept its z3 context, and once a few
hundred had piled up (as ``cda.gcpause``'s move to the oldest generation let them), z3's memory cap
made ``p, ¬p`` answer "out of memory" on one side while clingo found the conflict.
"""

from __future__ import annotations

import gc
from collections.abc import Callable
from pathlib import Path

import clingo
import pytest
import z3

import cda
from cda.fol.prove import prove
from cda.gcpause import gc_paused

ROOT = Path(__file__).resolve().parent.parent

#: evidence that contradicts itself: the conflict's minimal sets are found by QuickXplain and MARCO
CONFLICT = "observable alarm\nobserve on: alarm\nobserve off: not alarm\n"


def _solvers() -> list[object]:
    """Every z3 context, clingo control and CDA backend the interpreter still tracks."""
    from cda.fol.backends import FiniteModelBackend, FolZ3Backend
    from cda.solver.clingo_backend import ClingoBackend
    from cda.solver.z3_backend import Z3Backend

    kinds = (z3.Context, clingo.Control, Z3Backend, ClingoBackend, FolZ3Backend, FiniteModelBackend)
    return [o for o in gc.get_objects() if isinstance(o, kinds)]


def _left_behind(run: Callable[[], object]) -> list[str]:
    """The solver objects a second ``run`` leaves for the cyclic collector (names of their types)."""
    run()
    gc.collect()
    with gc_paused():  # the collector off: what is left now only it could free
        before = {id(o) for o in _solvers()}
        run()
        left = [type(o).__qualname__ for o in _solvers() if id(o) not in before]
    gc.collect()
    return sorted(left)


@pytest.mark.parametrize(
    ("premises", "claim"),
    [
        (["p", "¬p"], "p"),  # a conflict: QuickXplain on both backends
        (["∀x (Cat(x) → Pet(x))", "Cat(tom)"], "Pet(tom)"),  # supported, its premises minimised
        (["∃x (¬P(x))", "P(a)"], "P(a)"),  # open domain, inconclusive
    ],
)
def test_prove_leaves_no_solver_for_the_collector(premises: list[str], claim: str) -> None:
    left = _left_behind(lambda: prove(premises, claim, timeout=None, cross_check=True))
    assert left == []


@pytest.mark.parametrize(
    "source", [CONFLICT, ROOT / "examples" / "pump_diagnosis.cda", ROOT / "examples" / "service_outage.cda"],
    ids=["conflict", "minimal_explanations", "outage"],
)
def test_solve_leaves_no_solver_for_the_collector(backend: str, source: str | Path) -> None:
    left = _left_behind(lambda: cda.solve(source, backend=backend))
    assert left == []


def test_prove_decides_p_and_not_p_after_many_runs_under_frozen_pauses() -> None:
    """The failure as it was seen: proves, each followed by a pause whose end moves everything to
    the oldest generation, which is collected rarely. With the contexts kept alive by a cycle they
    piled up there until z3's memory cap was reached (hundreds of contexts); now every prove frees
    its own, so none accumulates and the answer stays a conflict both backends find."""
    gc.collect()
    before = sum(isinstance(o, z3.Context) for o in gc.get_objects())
    for _ in range(30):
        r = prove(["p", "¬p"], "p", timeout=None, cross_check=True)
        assert r.conflict == ["p1", "p2"] and r.cross_check == "agree", r.text()
        with gc_paused():
            pass
    assert sum(isinstance(o, z3.Context) for o in gc.get_objects()) <= before
