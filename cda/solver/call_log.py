"""One record per solver call, for callers that must account for each (the Action's receipts).

:class:`RecordingBackend` wraps a backend and hands every call the engine makes to a log
function: which method, what it was asked (assumptions as a count and a digest, limits,
projection size) and what came back (status, model count, completeness). Only deterministic
facts go in, no durations, so two runs on the same inputs log the same calls.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from typing import Any

from cda.encodings.ir import Clause
from cda.solver.backend import Backend, Enumeration, Lit, Outcome, SetStream, _OutOfTime

__all__ = ["SolverCallLog", "RecordingBackend"]

#: ``log(method, inputs, outcome, status)``; status is ``ok`` or ``timeout``
SolverCallLog = Callable[[str, dict[str, Any], dict[str, Any], str], None]


def _digest(assumptions: Sequence[Lit]) -> dict[str, Any]:
    h = hashlib.sha256()
    for key, value in assumptions:
        h.update(f"{key}={int(value)}\n".encode())
    return {"assumptions": len(assumptions), "assumptions_sha256": h.hexdigest()}


class RecordingBackend:
    """``inner`` with every solver call reported to ``log`` (a timeout is reported, then raised)."""

    def __init__(self, inner: Backend, log: SolverCallLog) -> None:
        self.inner = inner
        self.name = inner.name
        self._log = log

    def __getattr__(self, key: str) -> Any:  # what the engine reads besides the protocol
        return getattr(self.inner, key)

    def _call(
        self, method: str, inputs: dict[str, Any], call: Callable[[], Any], summary: Callable[[Any], dict[str, Any]]
    ) -> Any:
        try:
            out = call()
        except _OutOfTime:
            self._log(f"{self.name}.{method}", inputs, {"status": "unknown"}, "timeout")
            raise
        outcome = summary(out)
        timed_out = outcome.get("timed_out", False) or outcome.get("status") == "unknown"
        self._log(f"{self.name}.{method}", inputs, outcome, "timeout" if timed_out else "ok")
        return out

    def check(self, assumptions: Sequence[Lit]) -> Outcome:
        return self._call(  # type: ignore[no-any-return]
            "check", _digest(assumptions), lambda: self.inner.check(assumptions), lambda o: {"status": o.status}
        )

    def minimize(self, assumptions: Sequence[Lit]) -> Outcome:
        return self._call(  # type: ignore[no-any-return]
            "minimize", _digest(assumptions), lambda: self.inner.minimize(assumptions), lambda o: {"status": o.status}
        )

    def enumerate(self, project: Sequence[str], assumptions: Sequence[Lit], limit: int) -> Enumeration:
        return self._call(  # type: ignore[no-any-return]
            "enumerate",
            {"project": len(project), "limit": limit, **_digest(assumptions)},
            lambda: self.inner.enumerate(project, assumptions, limit),
            _enumeration,
        )

    def enumerate_minimal(
        self, project: Sequence[str], assumptions: Sequence[Lit], limit: int, max_size: int | None = None
    ) -> Enumeration:
        return self._call(  # type: ignore[no-any-return]
            "enumerate_minimal",
            {"project": len(project), "limit": limit, "max_size": max_size, **_digest(assumptions)},
            lambda: self.inner.enumerate_minimal(project, assumptions, limit, max_size),
            _enumeration,
        )

    def minimal_sets(
        self,
        project: Sequence[str],
        assumptions: Sequence[Lit],
        on_set: Callable[[frozenset[str]], bool],
        max_size: int | None = None,
    ) -> SetStream:
        seen = [0]

        def counted(s: frozenset[str]) -> bool:
            seen[0] += 1
            return on_set(s)

        return self._call(  # type: ignore[no-any-return]
            "minimal_sets",
            {"project": len(project), "max_size": max_size, **_digest(assumptions)},
            lambda: self.inner.minimal_sets(project, assumptions, counted, max_size),
            lambda s: {"sets": seen[0], "complete": s.complete, "timed_out": s.timed_out},
        )

    def add_clauses(self, clauses: Sequence[Clause], atoms: Sequence[str]) -> None:
        self.inner.add_clauses(clauses, atoms)


def _enumeration(e: Enumeration) -> dict[str, Any]:
    return {"models": len(e.models), "complete": e.complete, "timed_out": e.timed_out}
