"""The ``investigate.*`` ToolBus methods: an investigation (:mod:`cda.investigation`) over the wire.

``investigate.start`` takes the problem as DSL text in the frame (``problem``); a path the server
reads (``problem_path``, and ``ken.path``) only from the internal profile, as ``actions.start``
treats ``ken.path``: the ToolBus is a network door and a partner names no server file. An inline
Ken graph (``ken.nodes``/``ken.edges``) is written beside the store, so that the session reopens
with it. ``investigate.observe|status|history|undo|close`` take the ``session_id`` it returns.

Sessions live in their own SQLite file beside the server's store (``<store>.investigations.sqlite``,
the :class:`~cda.investigation.store.SessionStore` schema plus an ``owners`` table): a session is
its starter's (an internal caller may act on any). Every call reopens the session from that file in
a worker thread (the solver work never runs on the event loop), as ``cda investigate`` does, so a
server restart loses nothing and two callers on one session cannot both write the same step.
Faults are :class:`~cda.service.actions.EdgeError` frames: a bad problem or observation
is ``invalid_params`` whose ``path`` ends with the DSL line and column (1-based) when known.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from cda.contracts.action import KenSource
from cda.investigation.session import MemoryBlock
from cda.investigation.store import SessionStore
from cda.service.auth import Principal
from cda.store import companion

__all__ = [
    "INVESTIGATE_METHODS",
    "InvestigationDesk",
    "InvestigateHistoryResult",
    "InvestigateMemoryResult",
    "InvestigateObserveParams",
    "InvestigateStartParams",
    "InvestigateStartResult",
    "SessionRef",
    "StepRecord",
    "desk_for",
]

MAX_PROBLEM = 256_000  # characters of DSL text in one frame
SESSION_ID = r"^[A-Za-z0-9_\-]{1,64}$"


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class InvestigateStartParams(_Model):
    problem: str | None = Field(default=None, min_length=1, max_length=MAX_PROBLEM, description="the problem as DSL text")
    problem_path: str | None = Field(default=None, min_length=1, max_length=4096,
                                     description="a .cda file the server reads (internal profile only)")
    ken: KenSource | None = Field(default=None, description="inline nodes/edges; a path only for the internal profile")
    backend: Literal["z3", "clingo"] = "z3"
    task_id: str | None = Field(default=None, pattern=r"^[A-Za-z0-9_.:\-]{1,128}$")
    top: int = Field(default=5, ge=1, le=50, description="hypotheses kept as candidate records")

    @model_validator(mode="after")
    def _one_problem(self) -> InvestigateStartParams:
        if (self.problem is None) == (self.problem_path is None):
            raise ValueError("give either 'problem' (DSL text) or 'problem_path', not both and not neither")
        return self


class SessionRef(_Model):
    session_id: str = Field(pattern=SESSION_ID)


class InvestigateObserveParams(_Model):
    session_id: str = Field(pattern=SESSION_ID)
    observation: str = Field(min_length=1, max_length=10_000,
                             description="'slow(auth)', 'not slow(auth)', or 'value(metric:m) = 300 ms'")


class InvestigateStartResult(_Model):
    session_id: str
    memory: MemoryBlock = Field(description="the memory block after the start step")


class InvestigateMemoryResult(_Model):
    session_id: str
    memory: MemoryBlock


class StepRecord(_Model):
    step: int
    kind: Literal["start", "observe", "undo", "close"]
    observation: str | None = None
    undoes: int | None = None
    trace: dict[str, Any] = Field(default_factory=dict)
    at_utc: str


class InvestigateHistoryResult(_Model):
    session_id: str
    steps: list[StepRecord]


#: method name -> (params model, result model), merged into protocol.METHODS
INVESTIGATE_METHODS: dict[str, tuple[type[BaseModel], type[BaseModel]]] = {
    "investigate.start": (InvestigateStartParams, InvestigateStartResult),
    "investigate.observe": (InvestigateObserveParams, InvestigateMemoryResult),
    "investigate.status": (SessionRef, InvestigateMemoryResult),
    "investigate.history": (SessionRef, InvestigateHistoryResult),
    "investigate.undo": (SessionRef, InvestigateMemoryResult),
    "investigate.close": (SessionRef, InvestigateMemoryResult),
}


def _edge(code: str, message: str, path: list[str | int]) -> Exception:
    from cda.service.actions import EdgeError

    return EdgeError(code, message, path)


class InvestigationDesk:
    """The investigations of one server: its sessions file, who owns each session, one step at a time."""

    def __init__(self, db: Path) -> None:
        self.db = companion(db, "investigations")
        self.ken_dir = db.with_name(db.name + ".investigations-ken")
        self.lock = threading.Lock()
        self.session_locks: dict[str, threading.Lock] = {}
        with self._sessions():  # made (or recognised and brought up to date) before the first call
            pass

    # ---- the calls (each in a worker thread)
    def call(self, who: Principal, method: str, params: BaseModel) -> BaseModel:
        """Run one ``investigate.*`` method; every failure is an EdgeError (never a traceback)."""
        from cda.service.actions import EdgeError

        try:
            if isinstance(params, InvestigateStartParams):
                return self._start(who, params)
            assert isinstance(params, SessionRef | InvestigateObserveParams)
            return self._step(who, method, params)
        except EdgeError:
            raise
        except Exception as exc:  # noqa: BLE001 - mapped to a frame: a client never gets a traceback
            raise self._mapped(exc) from None

    def _start(self, who: Principal, p: InvestigateStartParams) -> BaseModel:
        from cda.investigation.session import Investigation

        if who.profile != "internal":
            if p.problem_path is not None:
                raise _edge("forbidden", "problem_path names a server file: send the DSL text as 'problem'",
                            ["params", "problem_path"])
            if p.ken is not None and p.ken.path is not None:
                raise _edge("forbidden", "ken.path names a server file: send the graph inline (nodes/edges)",
                            ["params", "ken", "path"])
            if p.problem is not None:
                from cda.api import parse
                from cda.encodings.ast import KenLoad

                for st in parse(p.problem).statements:
                    if isinstance(st, KenLoad):  # loaded from the server's folder: a partner names no server file
                        raise _edge("forbidden", "a 'ken' statement names a server file: send the graph inline "
                                    "as 'ken' (nodes/edges)", ["params", "problem", st.pos[0], st.pos[1]])
        sid = uuid.uuid4().hex[:16]
        ken: Path | None = None
        if p.ken is not None and p.ken.path is not None:
            ken = Path(p.ken.path)
            ken = ken if ken.is_absolute() else self.db.parent / ken
        elif p.ken is not None:
            self.ken_dir.mkdir(exist_ok=True)
            ken = self.ken_dir / f"{sid}.json"
            ken.write_text(json.dumps({"directed": True, "multigraph": True, "nodes": [
                {"id": n.id, **({"label": n.label} if n.label else {})} for n in p.ken.nodes],
                "links": [{"source": e.source, "target": e.target, "relation": e.relation}
                          for e in p.ken.edges]}), encoding="utf-8")
        problem: str | Path = p.problem if p.problem is not None else Path(p.problem_path or "")
        if isinstance(problem, Path) and not problem.is_absolute():
            problem = self.db.parent / problem
        if isinstance(problem, Path) and not problem.is_file():
            raise _edge("invalid_params", f"{p.problem_path}: no such file", ["params", "problem_path"])
        try:
            inv = Investigation.start(problem, db=self.db, backend=p.backend, ken=ken, task_id=p.task_id, top=p.top,
                                      session_id=sid)
        except BaseException:
            if ken is not None and ken.parent == self.ken_dir:
                ken.unlink(missing_ok=True)
            raise
        try:
            with self._sessions() as sessions:
                sessions.set_owner(sid, who.name)
            return InvestigateStartResult(session_id=sid, memory=inv.memory)
        finally:
            inv.release()

    def _step(self, who: Principal, method: str, p: SessionRef | InvestigateObserveParams) -> BaseModel:
        from cda.investigation.session import Investigation

        sid = p.session_id
        with self._sessions() as sessions:
            owner = sessions.owner(sid)
        if owner is None or (owner != who.name and who.profile != "internal"):
            raise _edge("not_found", f"no investigation {sid!r}", ["params", "session_id"])
        with self.lock:
            lock = self.session_locks.setdefault(sid, threading.Lock())
        with lock:
            inv = Investigation.open(sid, self.db)
            try:
                if method == "investigate.history":
                    steps = [StepRecord(step=s.step, kind=s.kind, observation=s.observation,  # type: ignore[arg-type]
                                        undoes=s.undoes, trace=s.trace, at_utc=s.at_utc) for s in inv.history()]
                    return InvestigateHistoryResult(session_id=sid, steps=steps)
                if isinstance(p, InvestigateObserveParams):
                    memory = inv.observe(p.observation)
                elif method == "investigate.undo":
                    memory = inv.undo()
                elif method == "investigate.close":
                    memory = inv.close()
                else:
                    memory = inv.status()
                return InvestigateMemoryResult(session_id=sid, memory=memory)
            finally:
                inv.release()

    # ---- internals
    @contextmanager
    def _sessions(self) -> Iterator[SessionStore]:
        store = SessionStore(self.db)
        try:
            yield store
        finally:
            store.close()

    def _mapped(self, exc: Exception) -> Exception:
        """A failure as the frame a client gets: its kind, a reason without server paths, and where."""
        from cda.errors import CDAError, DSLError, KenError
        from cda.investigation.live import InvestigationError
        from cda.investigation.session import ClosedInvestigation
        from cda.investigation.store import SessionMoved, UnknownSession

        if isinstance(exc, DSLError):
            where: list[str | int] = ["params", "problem"]
            if exc.line is not None:
                where.append(exc.line)
                if exc.column is not None:
                    where.append(exc.column)
            at = f"line {exc.line}" + (f", column {exc.column}" if exc.column is not None else "") if exc.line else ""
            return _edge("invalid_params", f"{exc.kind}: {exc.message}" + (f" ({at})" if at else ""), where)
        if isinstance(exc, InvestigationError):
            path: list[str | int] = ["params", "observation"] + ([exc.column] if exc.column is not None else [])
            return _edge("invalid_params", str(exc), path)
        if isinstance(exc, KenError):
            return _edge("invalid_params", self._hide(str(exc)), ["params", "ken"])
        if isinstance(exc, UnknownSession):
            return _edge("not_found", "no such investigation", ["params", "session_id"])
        if isinstance(exc, ClosedInvestigation | SessionMoved):
            return _edge("conflict", str(exc), ["params", "session_id"])
        if isinstance(exc, CDAError) and str(exc).startswith("nothing to undo"):
            return _edge("conflict", str(exc), ["params", "session_id"])
        if isinstance(exc, CDAError | ValueError):
            return _edge("invalid_params", self._hide(str(exc)), ["params"])
        if isinstance(exc, sqlite3.Error):
            return _edge("internal", f"the investigation store cannot be used ({type(exc).__name__})", [])
        return _edge("internal", f"the investigation failed ({type(exc).__name__})", [])

    def _hide(self, text: str) -> str:
        """No server path in a message: the folder of the store is left out."""
        return text.replace(str(self.ken_dir) + "/", "").replace(str(self.db.parent) + "/", "")


_desks: dict[Path, InvestigationDesk] = {}
_desks_lock = threading.Lock()


def desk_for(db: Path) -> InvestigationDesk:
    """The server's desk (one per store; made on first use, in a worker thread)."""
    with _desks_lock:
        if db not in _desks:
            _desks[db] = InvestigationDesk(db)
        return _desks[db]
