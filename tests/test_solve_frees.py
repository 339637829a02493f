"""A solve frees what it built by reference counting, with no cyclic garbage left behind.

``cda.solve`` pauses the cyclic collector from parsing to the answer and relies on reference
counting to free the problem and the backend when it returns (cda/api.py). A reference cycle
through them (clingo's ``Control`` kept its last solve's model handler, a closure over the
backend) left the whole problem to the collector instead, which walked every node of it when it
ran again: 0.09 s of a 10,000-clause solve (docs/benchmarks.md, "The clingo path").
"""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from cda import api
from cda.encodings.ir import Clause, NodeFactory
from cda.solver.clingo_backend import ClingoBackend
from cda.solver.z3_backend import Z3Backend

PROBLEM = "hyp a, b, c\nobservable w\nobserve w\nhard: w iff (a or b)\nhard: not (a and c)\nsoft: not b weight 2\n"


@pytest.fixture
def collector_paused() -> Iterator[None]:
    gc.collect()
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def _alive(kind: type) -> int:
    return sum(1 for o in gc.get_objects() if type(o) is kind)


@pytest.mark.parametrize(("backend", "kind"), [("clingo", ClingoBackend), ("z3", Z3Backend)])
def test_a_solve_leaves_its_backend_and_problem_to_reference_counting(
    backend: str, kind: type, collector_paused: None
) -> None:
    before = (_alive(kind), _alive(NodeFactory), _alive(Clause))
    result = api.solve(PROBLEM, backend=backend, top=3)
    assert [h.assumed for h in result.hypotheses] == [["a"], ["b"], ["a", "b"]]  # b costs 2
    # nothing collected yet (the collector is off): what is gone was freed by reference counting
    assert (_alive(kind), _alive(NodeFactory), _alive(Clause)) == before
