"""An investigation: a problem, observations over time, and the memory block after each step.

Each step runs the loop of docs/investigate.md once: *decompose* (the problem's parts, :mod:`.focus`), *ground*
(the observation into the live solver, :mod:`.live`), *integrate* (global consistency: are the
hard clauses and every observation still satisfiable? if not, the step ends with the conflict's
cores) and *execute* (the records of the hypotheses, the step rule's choice and its next probe,
:func:`cda.engine.compute_records`). The memory block it leaves is written to the store in one
transaction; :meth:`Investigation.open` rebuilds the live solver from the problem text and the
observations in force, and finds the block exactly as it was written.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from cda.contracts.deadline import Deadline
from cda.contracts.hypothesis_record import HypothesisRecord
from cda.contracts.refs import SpanRef
from cda.contracts.result import Conflict
from cda.engine import (
    CheckedBackend,
    Ranking,
    cite,
    compute_records,
    conflict,
    hypothesis_cap,
    hypothesis_record,
    posterior,
    rank_hypotheses,
)
from cda.errors import CDAError
from cda.files import read_text
from cda.investigation.focus import choose_focus
from cda.investigation.live import LiveProblem, Observation
from cda.investigation.session_store import SessionStore, StoredSession, StoredStep
from cda.ir import Atom, Clause, Not

__all__ = ["Investigation", "MemoryBlock", "ClosedInvestigation"]


class ClosedInvestigation(CDAError):
    """The investigation was closed: it can be read, not changed."""


class MemoryBlock(BaseModel):
    """Seed 004's runtime memory block, with the trace fields of its step."""

    model_config = ConfigDict(extra="forbid")

    session_id: str
    task_id: str
    step: int
    focus_subsystem: str | None
    focus_reason: str
    global_invariants: list[str] = Field(default_factory=list)
    candidate_hypotheses: list[HypothesisRecord] = Field(default_factory=list)
    hypotheses_total: int = 0
    selected_hypothesis_id: str | None = None
    selected_hypothesis_reason: str | None = None
    next_probe: str | None = None
    observations: list[str] = Field(default_factory=list)
    conflict: Conflict | None = None
    integration_risks: list[str] = Field(default_factory=list)
    policy_fallback_applied: bool = False
    closed: bool = False
    updated_at_utc: str


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class Investigation:
    """A live investigation. Start one with :meth:`start`, reopen one with :meth:`open`."""

    def __init__(self, store: SessionStore, stored: StoredSession, live: LiveProblem) -> None:
        self.store = store
        self.stored = stored
        self.live = live
        self._cache = _Cache()
        self.memory = MemoryBlock.model_validate(stored.memory)

    # ---- lifecycle
    @classmethod
    def start(cls, problem: str | Path, *, db: str | Path = ":memory:", backend: str = "z3", ken: str | Path | None = None,
              task_id: str | None = None, top: int = 5, session_id: str | None = None) -> Investigation:
        """A new investigation of ``problem`` (DSL text, or a Path to a .cda file), stored in ``db``."""
        from cda.contracts import limits

        limits.count("top", top)
        text = read_text(problem) if isinstance(problem, Path) else problem
        filename = str(problem) if isinstance(problem, Path) else None
        live = LiveProblem(text, backend, filename=filename, ken=_load_ken(ken))
        sid = session_id or uuid.uuid4().hex[:16]
        task = task_id or (Path(filename).stem if filename else "task")
        store = SessionStore(db)
        stored = StoredSession(sid, task, live.text, filename, None if ken is None else str(Path(ken).resolve()), backend, top,
                               False, 0, {})
        cache = _Cache()
        memory, trace = _compute(live, stored, [], cache=cache)
        stored = _with(stored, memory=memory)
        store.create(stored, trace, memory["updated_at_utc"])
        inv = cls(store, stored, live)
        inv._cache = cache
        return inv

    @classmethod
    def open(cls, session_id: str, db: str | Path, *, read_only: bool = False) -> Investigation:
        """Reopen a stored investigation where it was: the live solver rebuilt from its problem
        and the observations in force. The store must exist; ``read_only`` (to look, not to step)
        never writes it."""
        store = SessionStore(db, read_only=read_only, create=False)
        stored = store.load(session_id)
        live = LiveProblem(stored.problem, stored.backend, filename=stored.filename, ken=_load_ken(stored.ken))
        for step, text in store.active_observations(session_id):
            live.observe(live.parse(text, step))
        return cls(store, stored, live)

    def close(self) -> MemoryBlock:
        """Close the investigation (a last step in its history)."""
        self._writable()
        memory = dict(self.stored.memory, closed=True, updated_at_utc=_now())
        self._commit("close", None, None, memory, {"closed": True})
        return self.memory

    def release(self) -> None:
        """Close the store's connection (the investigation stays open on disk)."""
        self.store.close()

    # ---- steps
    def observe(self, text: str) -> MemoryBlock:
        """One step: ``text`` (``slow(auth)``, ``not slow(auth)``, ``value(metric:m) = 3 ms``) into the live solver."""
        self._writable()
        step = self.stored.last_step + 1
        obs = self.live.parse(text, step)
        self.live.observe(obs)
        try:
            memory, trace = _compute(self.live, self.stored, self._history_observations(), step=step,
                                     cache=self._cache)
            self._commit("observe", obs.text, None, memory, trace)
        except BaseException:  # not written: the live solver goes back to the step before
            self.live.retract(step)
            raise
        return self.memory

    def undo(self) -> MemoryBlock:
        """Take back the last observation still in force (a step of its own)."""
        self._writable()
        if not self.live.active:
            raise CDAError("nothing to undo: no observation is in force")
        last = self.live.active[-1]
        self.live.retract(last.step)
        step = self.stored.last_step + 1
        try:
            memory, trace = _compute(self.live, self.stored, self._history_observations(), step=step,
                                     cache=self._cache)
            trace["undid"] = {"step": last.step, "observation": last.text}
            self._commit("undo", None, last.step, memory, trace)
        except BaseException:  # not written: the observation stays in force
            self.live.observe(last)
            raise
        return self.memory

    def status(self) -> MemoryBlock:
        return self.memory

    def history(self) -> list[StoredStep]:
        return self.store.steps(self.stored.session_id)

    def rebuilt_memory(self) -> dict[str, Any]:
        """The memory block computed again on a solver rebuilt from text (the fallback path);
        equal to :attr:`memory` but for ``updated_at_utc``."""
        gp, solver = self.live.rebuilt()
        observations = [c for c in gp.clauses if c.kind == "observation"]
        memory, _ = _compute(self.live, self.stored, self._history_observations(), step=self.memory.step,
                             solver=solver, observations=observations,
                             step_of=lambda c: self.live.step_of_line(c.line))
        memory["closed"] = self.memory.closed
        return memory

    @property
    def session_id(self) -> str:
        return self.stored.session_id

    # ---- internals
    def _history_observations(self) -> list[Observation]:
        return list(self.live.active)

    def _writable(self) -> None:
        if self.stored.closed or self.memory.closed:
            raise ClosedInvestigation(f"investigation {self.stored.session_id} is closed")

    def _commit(self, kind: str, observation: str | None, undoes: int | None, memory: dict[str, Any],
                trace: dict[str, Any]) -> None:
        step = self.stored.last_step + 1
        memory["step"] = step
        stored = _with(self.stored, memory=memory, last_step=step, closed=bool(memory.get("closed")))
        self.store.step(stored, StoredStep(step, kind, observation, undoes, trace, memory["updated_at_utc"]))
        self.stored = stored
        self.memory = MemoryBlock.model_validate(memory)


#: the most hypotheses whose backbones an investigation computes (the gains are over them): as
#: many as it enumerates, so that every step can narrow the ranking instead of solving it again
CONSIDERED = 10_000


@dataclass
class _Cache:
    """What the live path keeps between steps, never the rebuild: whether H ∧ h entails each
    observation (it does not depend on the others), and per set of observations in force the
    ranking and each hypothesis's backbone."""

    entailments: dict[tuple[frozenset[str] | None, str], bool] = field(default_factory=dict)
    states: dict[tuple[str, ...], tuple[Ranking, list[set[str]]]] = field(default_factory=dict)

    def narrowed(self, key: tuple[str, ...], last: Clause | None) -> tuple[Ranking, list[set[str]]] | None:
        """The state of ``key`` when known, or derived from the state before ``last`` (a literal):
        a hypothesis that determined the literal's atom keeps its models (and so its cost,
        violations and backbone) when it predicted the value observed and is gone otherwise.
        ``None`` when some hypothesis left the atom open (then it must be solved again)."""
        if key in self.states:
            return self.states[key]
        literal = _literal(last) if last is not None else None
        before = self.states.get(key[:-1])
        if literal is None or before is None:
            return None
        ranking, fixed = before
        atom, value = literal
        name = last.name if last is not None else ""
        if not ranking.complete or len(fixed) != len(ranking) or not all(atom in f for f in fixed):
            return None
        keep = [i for i, h in enumerate(ranking.hypotheses) if bool(h.model[atom]) == value]
        hyps = [ranking.hypotheses[i] for i in keep]
        # a hypothesis h for which H ∧ h entails every earlier observation has the same models
        # under H ∧ h as under them: H ∧ h entails the new literal exactly when h determined its
        # atom (it did, for every hypothesis, or we would not be here), with no solver call
        for i in keep:
            h = ranking.hypotheses[i]
            if (h.assumed, name) not in self.entailments and all(
                    self.entailments.get((h.assumed, n)) is True for n in key[:-1]):
                self.entailments[(h.assumed, name)] = True
        narrowed = Ranking(hyps, posterior([h.cost for h in hyps]), complete=True, capped=False, timed_out=False,
                           cap=ranking.cap)
        return narrowed, [fixed[i] - {atom} for i in keep]


def _literal(clause: Clause) -> tuple[str, bool] | None:
    node = clause.node
    if isinstance(node, Atom):
        return node.name, True
    if isinstance(node, Not) and isinstance(node.arg, Atom):
        return node.arg.name, False
    return None


def _with(s: StoredSession, **changes: Any) -> StoredSession:
    import dataclasses

    return dataclasses.replace(s, **changes)


def _load_ken(path: str | Path | None) -> Any:
    if path is None:
        return None
    from cda.api import load_ken

    return load_ken(Path(path))


def _compute(
    live: LiveProblem, stored: StoredSession, active: list[Observation], *, step: int = 0,
    solver: CheckedBackend | None = None, observations: list[Clause] | None = None,
    step_of: Callable[[Clause], int | None] | None = None, cache: _Cache | None = None,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The memory block after a step and the step's trace (seed 004's loop, once)."""
    started = time.perf_counter()
    solver = solver or live.solver
    observations = observations if observations is not None else live.observation_clauses
    by_name = {o.clause.name: o.step for o in active}
    texts = {o.step: o.text for o in active}

    def where(c: Clause) -> int | None:
        return step_of(c) if step_of is not None else by_name.get(c.name)

    lines = live.text.split("\n")
    source = live.filename or "problem"

    def cited(c: Clause) -> SpanRef:
        at = where(c)
        if at is None:
            return cite(c, source, lines)
        return SpanRef(source=f"investigation:{stored.session_id}:step:{at}", excerpt=f"observe {texts[at]}")

    memory: dict[str, Any] = {
        "session_id": stored.session_id, "task_id": stored.task_id, "step": step,
        "observations": [o.text for o in active], "updated_at_utc": _now(),
    }
    trace: dict[str, Any] = {"decompose": {"parts": len(live.parts)}}
    # integrate: global consistency of every clause and observation in force
    if not solver.holds(solver.base, "hard clauses and observations"):
        found = conflict(solver, 16, Deadline(None))
        names = {c.name: c for c in solver.problem.clauses}

        def label(n: str) -> str:
            c = names[n]
            at = where(c)
            return f"observe {texts[at]} (step {at})" if at is not None else cite(c, source, lines).excerpt or n

        cores = [[label(n) for n in core] for core in found.cores]
        corrections = [[label(n) for n in fix] for fix in found.corrections]
        memory.update(
            focus_subsystem=None, focus_reason="the observations contradict the hard clauses",
            conflict=Conflict(cores=cores, corrections=corrections, complete=found.complete).model_dump(mode="json"),
            integration_risks=[f"inconsistent: {' & '.join(core)}" for core in cores],
            policy_fallback_applied=True,
            selected_hypothesis_reason="no hypothesis: the hard clauses and the observations conflict "
            "(undo an observation of a core)",
        )
        trace["integrate"] = {"consistent": False, "cores": cores}
        trace["ms"] = round((time.perf_counter() - started) * 1000, 3)
        return MemoryBlock.model_validate(memory).model_dump(mode="json"), trace
    key = tuple(c.name for c in observations)
    known = cache.narrowed(key, observations[-1] if observations else None) if cache is not None else None
    ranking, fixed = known if known is not None else (rank_hypotheses(solver, hypothesis_cap(solver.problem, 10_000)), None)
    found_records = compute_records(solver, ranking, stored.top, CONSIDERED, observations=observations, fixed=fixed,
                                    entailments=cache.entailments if cache is not None else None)
    if cache is not None:
        cache.states[key] = (ranking, found_records.fixed)
    trace["narrowed"] = known is not None
    clauses = {c.name: c for c in solver.problem.clauses}
    soft_lines = {s.name: s.line for s in solver.problem.soft}
    records = []
    for comp in found_records.records:
        rec = hypothesis_record(comp, clauses, soft_lines, source, lines)
        rec.evidence_for = [cited(clauses[n]) for n in comp.evidence_for]
        rec.evidence_against = [e for e in rec.evidence_against if not (isinstance(e, SpanRef) and (e.excerpt or "")
                                .startswith("unexplained "))] + [
            cited(clauses[n]).model_copy(update={"excerpt": "unexplained " + (cited(clauses[n]).excerpt or "")})
            for n in comp.unexplained]
        records.append(rec)
    chosen = next((r for r in found_records.records if r.id == found_records.selected), None)
    focus, why = choose_focus(live.parts, found_records.tests, list(chosen.assumed) if chosen else [])
    invariants = [f"{'' if v else 'not '}{o} (every hypothesis predicts it)" for o, v in found_records.agreed.items()]
    if ranking.complete and ranking.hypotheses:
        for a in solver.hyps:
            values = {a in h.assumed for h in ranking.hypotheses}
            if len(values) == 1:
                invariants.append(f"{'' if values.pop() else 'not '}{a} (in every hypothesis)")
    probe = chosen.next_probe if chosen else None
    memory.update(
        focus_subsystem=focus.name if focus else None, focus_reason=why, global_invariants=invariants,
        candidate_hypotheses=[r.model_dump(mode="json") for r in records], hypotheses_total=len(ranking),
        selected_hypothesis_id=found_records.selected, selected_hypothesis_reason=found_records.reason,
        next_probe=probe.observable if probe else None, policy_fallback_applied=probe is None,
        integration_risks=[] if ranking.complete else ["the hypotheses were capped; posteriors are over those enumerated"],
    )
    trace["integrate"] = {"consistent": True, "hypotheses": len(ranking)}
    trace["execute"] = {"selected": found_records.selected, "reason": found_records.reason,
                        "next_probe": memory["next_probe"],
                        "gain": probe.gain if probe else 0.0}
    trace["ms"] = round((time.perf_counter() - started) * 1000, 3)
    return MemoryBlock.model_validate(memory).model_dump(mode="json"), trace
