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
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from cda.contracts.deadline import Deadline
from cda.contracts.hypothesis_record import HypothesisRecord, TraceRecord
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
from cda.files import TEXT_MAX_BYTES, read_text
from cda.investigation.focus import choose_focus, coupling_risks
from cda.investigation.live import InvestigationError, LiveProblem, Observation
from cda.investigation.revision import (
    KEPT_STATEMENTS,
    Revision,
    StepRefused,
    change,
    ignored_statement,
    revised_text,
)
from cda.investigation.session_store import Note, SessionStore, StoredSession, StoredStep
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
    ways_out: list[str] = Field(default_factory=list, description="with a conflict: the two ways out (revise the "
                                "model: retract a statement of a core; the observation is wrong: undo its step)")
    change: dict[str, Any] | None = Field(default=None, description="what the step changed: hypotheses before and "
                                          "after, which appeared and which vanished")
    author: str | None = Field(default=None, description="who took the step")
    closed: bool = False
    updated_at_utc: str

    def trace_record(self) -> TraceRecord:
        """The step as the hypothesis record's trace (docs/investigate.md, "The trace record"): the
        confidence is the selected hypothesis's posterior."""
        chosen = next((h for h in self.candidate_hypotheses if h.id == self.selected_hypothesis_id), None)
        return TraceRecord(
            focus_subsystem=self.focus_subsystem or f"none ({self.focus_reason})",
            global_invariants=list(self.global_invariants), candidate_hypotheses=list(self.candidate_hypotheses),
            selected_hypothesis_id=self.selected_hypothesis_id, selected_hypothesis_reason=self.selected_hypothesis_reason,
            integration_risks=list(self.integration_risks), confidence=chosen.confidence if chosen else None,
            policy_fallback_applied=self.policy_fallback_applied)


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class Investigation:
    """A live investigation. Start one with :meth:`start`, reopen one with :meth:`open`.

    Every step names its ``author`` (the principal or ``--as NAME``; None in a session of one)
    and may give a ``reason``. The steps in force are the observations and revisions not undone."""

    def __init__(self, store: SessionStore, stored: StoredSession, live: LiveProblem,
                 revisions: list[Revision] | None = None) -> None:
        self.store = store
        self.stored = stored
        self.live = live
        self.revisions = list(revisions or [])
        self._cache = _Cache()
        self.memory = MemoryBlock.model_validate(stored.memory)
        self._last_trace: dict[str, Any] | None = None

    # ---- lifecycle
    @classmethod
    def start(cls, problem: str | Path, *, db: str | Path = ":memory:", backend: str = "z3", ken: str | Path | None = None,
              task_id: str | None = None, top: int = 5, session_id: str | None = None,
              author: str | None = None) -> Investigation:
        """A new investigation of ``problem`` (DSL text, or a Path to a .cda file), stored in ``db``."""
        from cda.contracts import limits

        limits.count("top", top)
        text = read_text(problem, limit=TEXT_MAX_BYTES) if isinstance(problem, Path) else problem
        filename = str(problem) if isinstance(problem, Path) else None
        live = LiveProblem(text, backend, filename=filename, ken=_load_ken(ken))
        sid = session_id or uuid.uuid4().hex[:16]
        task = task_id or (Path(filename).stem if filename else "task")
        store = SessionStore(db)
        stored = StoredSession(sid, task, live.text, filename, None if ken is None else str(Path(ken).resolve()), backend, top,
                               False, 0, {})
        cache = _Cache()
        memory, trace = _compute(live, stored, [], cache=cache)
        memory["author"] = author
        stored = _with(stored, memory=memory)
        store.create(stored, trace, memory["updated_at_utc"], author=author)
        inv = cls(store, stored, live)
        inv._cache = cache
        inv._last_trace = trace
        return inv

    @classmethod
    def open(cls, session_id: str, db: str | Path, *, read_only: bool = False) -> Investigation:
        """Reopen a stored investigation where it was: the live solver rebuilt from its problem,
        the revisions and the observations in force. The store must exist; ``read_only`` (to
        look, not to step) never writes it."""
        store = SessionStore(db, read_only=read_only, create=False)
        stored = store.load(session_id)
        in_force = store.in_force(session_id)
        revisions = [Revision.of(s.step, s.revision) for s in in_force if s.kind == "revise"]
        observations = [(s.step, s.observation or "") for s in in_force if s.kind == "observe"]
        live = _live(stored, revisions, observations)
        return cls(store, stored, live, revisions)

    def close(self, *, author: str | None = None, reason: str | None = None) -> MemoryBlock:
        """Close the investigation (a last step in its history)."""
        self._writable()
        memory = dict(self.stored.memory, closed=True, updated_at_utc=_now(), author=author, change=None)
        self._commit("close", None, None, memory, {"closed": True}, author=author, reason=reason)
        return self.memory

    def release(self) -> None:
        """Close the store's connection (the investigation stays open on disk)."""
        self.store.close()

    # ---- steps
    def observe(self, text: str, *, author: str | None = None, reason: str | None = None) -> MemoryBlock:
        """One step: ``text`` (``slow(auth)``, ``not slow(auth)``, ``value(metric:m) = 3 ms``) into the live solver."""
        self._writable()
        step = self.stored.last_step + 1
        obs = self.live.parse(text, step)
        self.live.observe(obs)
        try:
            memory, trace = _compute(self.live, self.stored, self._history_observations(), step=step,
                                     cache=self._cache)
            self._commit("observe", obs.text, None, memory, trace, author=author, reason=reason)
        except BaseException:  # not written: the live solver goes back to the step before
            self.live.retract(step)
            raise
        return self.memory

    def revise(self, add: Sequence[str] = (), retract: Sequence[str] = (), *, author: str | None = None,
               reason: str | None = None) -> MemoryBlock:
        """One step that revises the model: DSL statements added (``fact depends(a, b)``, a hard or
        soft clause, a domain written again, an ``observe`` line) and lines of the model retracted;
        solved again, with the hypotheses that appeared and vanished in :attr:`MemoryBlock.change`.
        An observation in force that no longer fits the revised model refuses the revision by step."""
        self._writable()
        add = [a for a in (" ".join(x.split()) if "\n" not in x else x.strip() for x in add) if a]
        retract = [r for r in (" ".join(x.split()) for x in retract) if r]
        if not add and not retract:
            raise InvestigationError("a revision adds or retracts at least one statement, e.g. 'fact depends(a, b)'",
                                     field="add")
        for a in add:
            why = ignored_statement(a)
            if why is not None:
                raise InvestigationError(f"this revision cannot be a step: {why}", field="add")
        step = self.stored.last_step + 1
        revisions = [*self.revisions, Revision(step, tuple(add), tuple(retract))]
        try:
            live = _live(self.stored, revisions, [(o.step, o.text) for o in self.live.active], revising=step)
        except InvestigationError as exc:  # the revised model does not read: what was added, else what was taken out
            exc.field = "add" if add else "retract"
            raise
        cache = _Cache()
        memory, trace = _compute(live, self.stored, list(live.active), step=step, cache=cache)
        self._commit("revise", None, None, memory, trace, author=author, reason=reason,
                     revision=revisions[-1].as_json())
        self.live, self.revisions, self._cache = live, revisions, cache
        return self.memory

    def undo(self, step: int | None = None, *, author: str | None = None, reason: str | None = None) -> MemoryBlock:
        """Take back ``step`` (an observation or a revision still in force; default the last one),
        as a step of its own. The later steps stay in force, applied again; one that cannot be (it
        retracts what the undone revision added, or observes what it declared) refuses the undo by name."""
        self._writable()
        observed = {o.step: o for o in self.live.active}
        revised = {r.step: r for r in self.revisions}
        if step is None:
            if not observed and not revised:
                raise StepRefused("nothing to undo: no observation or revision is in force")
            step = max([*observed, *revised])
        if step not in observed and step not in revised:
            raise StepRefused(self._not_in_force(step))
        at = self.stored.last_step + 1
        if step in observed:
            target = observed[step]
            self.live.retract(step)
            try:
                memory, trace = _compute(self.live, self.stored, self._history_observations(), step=at,
                                         cache=self._cache)
                trace["undid"] = {"step": step, "observation": target.text}
                self._commit("undo", None, step, memory, trace, author=author, reason=reason)
            except BaseException:  # not written: the observation stays in force, in its place
                self.live.restore(target)
                raise
            return self.memory
        revisions = [r for r in self.revisions if r.step != step]
        try:
            live = _live(self.stored, revisions, [(o.step, o.text) for o in self.live.active])
        except StepRefused as exc:
            raise StepRefused(f"cannot undo step {step}: {exc}; undo that step first") from None
        cache = _Cache()
        memory, trace = _compute(live, self.stored, list(live.active), step=at, cache=cache)
        trace["undid"] = {"step": step, "revision": revised[step].as_json()}
        self._commit("undo", None, step, memory, trace, author=author, reason=reason)
        self.live, self.revisions, self._cache = live, revisions, cache
        return self.memory

    def note(self, step: int, text: str, *, author: str) -> Note:
        """A free-text note on ``step`` (any step of the history; not a step itself)."""
        words = text.strip()
        if not words:
            raise InvestigationError("a note needs some text", field="text")
        if not 0 <= step <= self.stored.last_step:
            raise StepRefused(f"there is no step {step} (the last is {self.stored.last_step})")
        found = Note(step, author, words, _now())
        self.store.add_note(self.stored.session_id, found)
        return found

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
        memory["author"] = self.memory.author
        memory["change"] = self.memory.change
        return memory

    @property
    def session_id(self) -> str:
        return self.stored.session_id

    # ---- internals
    def _history_observations(self) -> list[Observation]:
        return list(self.live.active)

    def _not_in_force(self, step: int) -> str:
        if not 0 <= step <= self.stored.last_step:
            return f"there is no step {step} (the last is {self.stored.last_step})"
        taken = next((s for s in self.history() if s.step == step), None)
        if taken is not None and taken.kind in ("observe", "revise"):
            undone = next((s.step for s in self.history() if s.kind == "undo" and s.undoes == step), None)
            return f"step {step} was undone at step {undone}"
        kind = taken.kind if taken else "?"
        return f"step {step} is {'an' if kind[0] in 'aeiou' else 'a'} {kind} step: only an observation or a revision is undone"

    def _writable(self) -> None:
        if self.stored.closed or self.memory.closed:
            raise ClosedInvestigation(f"investigation {self.stored.session_id} is closed")

    def _commit(self, kind: str, observation: str | None, undoes: int | None, memory: dict[str, Any],
                trace: dict[str, Any], *, author: str | None = None, reason: str | None = None,
                revision: dict[str, list[str]] | None = None) -> None:
        step = self.stored.last_step + 1
        memory["step"] = step
        memory["author"] = author
        if kind != "close":
            before = self._last_trace if self._last_trace is not None else self.store.trace(
                self.stored.session_id, self.stored.last_step)
            memory["change"] = change(before, trace).as_json() if "hypotheses" in trace else None
            trace["change"] = memory["change"]
        block = MemoryBlock.model_validate(memory)
        if kind != "close":
            trace["record"] = block.trace_record().model_dump(mode="json")
        stored = _with(self.stored, memory=memory, last_step=step, closed=bool(memory.get("closed")))
        self.store.step(stored, StoredStep(step, kind, observation, undoes, trace, memory["updated_at_utc"], author, reason,
                                           revision))
        self.stored = stored
        self.memory = block
        if kind != "close":
            self._last_trace = trace


def _live(stored: StoredSession, revisions: Sequence[Revision], observations: Sequence[tuple[int, str]], *,
          revising: int | None = None) -> LiveProblem:
    """A live solver for the model in force (``revisions`` applied) with ``observations`` in force.
    What does not fit is refused by step (``revising``: the step being taken, named as "this revision")."""
    from cda.errors import DSLError

    text = revised_text(stored.problem, revisions)
    try:
        live = LiveProblem(text, stored.backend, filename=stored.filename, ken=_load_ken(stored.ken))
    except DSLError as exc:
        where = f"line {exc.line}: {text.split(chr(10))[exc.line - 1].strip()!r}: " if exc.line else ""
        who = "this revision" if revising is not None else "the model in force"
        raise InvestigationError(f"{who} does not read: {where}{exc.message}") from None
    for step, obs in observations:
        try:
            live.observe(live.parse(obs, step))
        except InvestigationError as exc:
            raise StepRefused(f"step {step} (observe {obs}) no longer fits the model: {exc}") from None
    return live


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
        wrong = sorted({at for core in found.cores for n in core if (at := where(names[n])) is not None})
        model = list(dict.fromkeys(lines[c.line - 1].strip() if c.line and 0 < c.line <= len(lines) else c.name
                                   for core in found.cores for n in core
                                   if where(c := names[n]) is None))
        ways_out = [f"the observation is wrong: undo step {at} (observe {texts[at]})" for at in wrong]
        ways_out += [f"revise the model: retract {m!r}" for m in model]
        trace["hypotheses"], trace["hypotheses_total"] = [], 0
        memory.update(ways_out=ways_out)
        memory.update(
            focus_subsystem=None, focus_reason="the observations contradict the hard clauses",
            conflict=Conflict(cores=cores, corrections=corrections, complete=found.complete).model_dump(mode="json"),
            integration_risks=[f"inconsistent: {' & '.join(core)}" for core in cores],
            policy_fallback_applied=True,
            selected_hypothesis_reason="no hypothesis: the hard clauses and the observations conflict "
            "(undo an observation of a core, or revise the model)",
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
        integration_risks=coupling_risks(live.base, focus, live.parts) + (
            [] if ranking.complete else ["the hypotheses were capped; posteriors are over those enumerated"]),
    )
    trace["integrate"] = {"consistent": True, "hypotheses": len(ranking)}
    trace["hypotheses"] = ["assume " + (", ".join(sorted(h.assumed)) or "nothing")
                           for h in ranking.hypotheses[:KEPT_STATEMENTS]]
    trace["hypotheses_total"] = len(ranking)
    trace["execute"] = {"selected": found_records.selected, "reason": found_records.reason,
                        "next_probe": memory["next_probe"],
                        "gain": probe.gain if probe else 0.0}
    trace["ms"] = round((time.perf_counter() - started) * 1000, 3)
    return MemoryBlock.model_validate(memory).model_dump(mode="json"), trace
