"""A cancel never calls into a solver being freed.

The cancel token holds its hooks weakly (a backend that is gone is neither kept nor called). But
CPython runs an object's ``__del__`` *before* it clears the weak references to it, so a weak hook
to a solver handle's own method (clingo's ``Control.interrupt``) still resolved while clingo's
``__del__`` was freeing the Control; a Ctrl-C landing in that window called
``clingo_control_interrupt`` on freed memory: ``cda bench folio`` died with SIGSEGV in a loaded
test run (reproduced 1 in ~40 runs: the watcher thread in ``Control.interrupt``, the main thread in
``Control.__del__``). Hooks are now the owning backend's methods, and the token refuses a method
of an object with ``__del__``.
"""

from __future__ import annotations

from pathlib import Path

import clingo
import pytest
import z3

import cda
from cda.contracts.deadline import CancelToken, cancel_scope

PUMP = Path(__file__).resolve().parent.parent / "examples" / "pump_diagnosis.cda"


@pytest.mark.parametrize("handle", [clingo.Control, z3.Context], ids=["clingo", "z3"])
def test_a_hook_on_a_solver_handle_is_refused(handle: type) -> None:
    token = CancelToken()
    with pytest.raises(TypeError, match="__del__"):
        token.on_cancel(handle().interrupt)
    assert token.watchers == 0


def test_a_cancel_while_a_clingo_control_is_freed_does_not_reach_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """The window itself, made certain: the Control's ``__del__`` cancels the token of the solve
    that built it (as the Ctrl-C watcher may at that instant). No hook may reach the Control then."""
    import cda.solver.clingo_backend as clingo_backend

    token = CancelToken()
    reached: list[str] = []
    freed: list[bool] = []

    class Watched(clingo.Control):
        freeing = False

        def interrupt(self) -> None:
            reached.append("while freed" if self.freeing else "live")
            super().interrupt()

        def __del__(self) -> None:
            self.freeing = True
            token.cancel("interrupted (Ctrl-C)")  # fires the live hooks in this thread, now
            freed.append(True)
            super().__del__()

    monkeypatch.setattr(clingo_backend.clingo, "Control", Watched)
    with cancel_scope(token):
        result = cda.solve(PUMP, backend="clingo")
    assert result.status == "sat" and result.enumeration_complete, result  # the solve ran to its end
    assert freed, "the backend's Control was freed when the solve returned"
    assert "while freed" not in reached, reached  # a live Control may be interrupted; a freed one never


def test_a_cancel_while_an_examples_formulas_are_read_ends_the_folio_bench_with_its_score(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A Ctrl-C landing while ``cda bench folio`` read an example's formulas (the reader keeps the
    budget) was a fatal "time ran out while reading the formulas" with nothing scored (2 of 12
    runs of the Ctrl-C test on an idle machine); it ends the run like a stop in a solver call."""
    import json

    import cda.fol.folio as folio
    from cda.contracts.deadline import OutOfTime

    example = {"premises-FOL": ["∀x (Cat(x) → Pet(x))", "Cat(tom)"], "conclusion-FOL": "Pet(tom)", "label": "True"}
    path = tmp_path / "three.jsonl"
    path.write_text("".join(json.dumps(example) + "\n" for _ in range(3)), encoding="utf-8")
    token = CancelToken()
    reads = []
    real = folio.build_problem

    def build(*args: object, **kwargs: object) -> object:
        reads.append(1)
        if len(reads) == 3:  # the second example's first reading: the stop lands as it is read
            token.cancel("interrupted (Ctrl-C)")
            raise OutOfTime("while reading the formulas")
        return real(*args, **kwargs)

    monkeypatch.setattr(folio, "build_problem", build)
    with cancel_scope(token):
        report = folio.run_bench(path, timeout=10.0)
    assert [r.outcome for r in report.results] == ["correct"]  # the first example scored, none as a miss
