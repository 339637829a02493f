"""Per-stage instruction counts of ``cda.solve`` on the clingo path, under callgrind (issue 34).

CPU time on a shared 2-core machine grows with the load and the caches, not only with the work
(docs/benchmarks.md, "The clingo path"); instructions do not. This child script runs bench_core's
stage-timed ``cda_run`` with its clock replaced: every ``perf_counter()`` call makes callgrind dump
(``--dump-before=sched_yield``) and returns a *stamp*, a linear form over dump indices, so each
stage (a sum of clock differences, as bench_core computes it) comes out as a form that the parent
evaluates on the cumulative instruction counts. The direct clingo program is counted the same way
in the same process (the floor line), and ``gc.callbacks`` counts the collections during the call.

Run by bench_clingo_path.py (``--growth-instructions``); prints one JSON object.
"""

from __future__ import annotations

import gc
import json
import os
import sys
import types
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_core as core  # noqa: E402


class Stamp:
    """A linear form over callgrind dump indices: ``{index: coefficient}``; floats only as 0."""

    def __init__(self, terms: Counter[int]) -> None:
        self.terms = terms

    @staticmethod
    def _of(x: object) -> Counter[int]:
        if isinstance(x, Stamp):
            return x.terms
        assert x == 0, f"a stamp combined with a nonzero number {x!r}"
        return Counter()

    def __add__(self, other: object) -> Stamp:
        t = Counter(self.terms)
        t.update(self._of(other))
        return Stamp(t)

    __radd__ = __add__

    def __sub__(self, other: object) -> Stamp:
        t = Counter(self.terms)
        t.subtract(self._of(other))
        return Stamp(t)

    def __rsub__(self, other: object) -> Stamp:
        t = Counter(self._of(other))
        t.subtract(self.terms)
        return Stamp(t)


def main(n: int) -> None:
    marks = [0]

    def mark() -> int:
        os.sched_yield()  # callgrind dumps here: dump number marks[0] + 1 holds what ran since the last
        marks[0] += 1
        return marks[0]

    p = core.generate(n, 0)
    text = core.to_dsl(p)
    core.warm_up()
    gc.collect()
    raw_from = mark()
    core.raw_clingo(p)
    raw_to = mark()
    gc.collect()
    collections: Counter[int] = Counter()
    gc_marks: list[int] = []

    def on_gc(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            collections[info["generation"]] += 1
        gc_marks.append(mark())

    core.time = types.SimpleNamespace(perf_counter=lambda: Stamp(Counter({mark(): 1})))  # type: ignore[assignment]
    gc.callbacks.append(on_gc)
    try:
        run = core.cda_run(text, "clingo")
    finally:
        gc.callbacks.remove(on_gc)
    forms = {k: {str(i): c for i, c in Stamp._of(getattr(run, k)).items() if c}
             for k in ("e2e", "parse", "ground", "encode", "enumerate", "other_calls", "decode", "glue")}
    json.dump({"raw": [raw_from, raw_to], "stages": forms, "gc": {str(g): c for g, c in collections.items()},
               "gc_marks": gc_marks, "marks": marks[0], "hyps": len(run.hyps)}, sys.stdout)


if __name__ == "__main__":
    main(int(sys.argv[1]))
