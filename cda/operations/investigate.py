"""``investigate.start|observe|status|history|undo|close``: an investigation (:mod:`cda.investigation`)
at any door, kept in a sessions store the door provides (``call.env.investigations``, an
:class:`InvestigationDesk`: the CLI's ``--db`` file, the server's ``<store>.investigations.sqlite``,
the MCP server's folder).

``investigate.start`` takes the problem as DSL text (``dsl``) or a ``.cda`` file (``path``, the
local user's, under its roots), and a Ken graph inline (``ken.nodes``/``ken.edges``, written beside
the sessions store so the session reopens with it) or by path (the local user's). A session is its
starter's (a principal that sees all may act on any; at the local user's own store, every session is
theirs). Every call reopens the session from its file, so a restart loses nothing and two callers on
one session cannot both write the same step. Faults are :class:`~cda.operations.base.OperationError`:
a bad problem or observation is ``invalid_params`` whose ``path`` ends with the DSL line and column.
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

from pydantic import BaseModel, Field, model_validator

from cda.contracts.action import KenSource
from cda.investigation.session import MemoryBlock
from cda.operations.base import OperationError, Params, Result, at, one_source
from cda.operations.params import optional_path, optional_text, whole_in
from cda.operations.principals import Principal
from cda.operations.registry import Door, Needs, operation

__all__ = [
    "InvestigateHistoryResult",
    "InvestigateMemoryResult",
    "InvestigateObserveParams",
    "InvestigateStartParams",
    "InvestigateStartResult",
    "InvestigationDesk",
    "MAX_PROBLEM",
    "SessionRef",
    "StepRecord",
    "desk_for",
]

MAX_PROBLEM = 256_000  # characters of DSL text in one call
SESSION_ID = r"^[A-Za-z0-9_\-]{1,64}$"


class InvestigateStartParams(Params):
    dsl: optional_text("the problem as DSL text", dsl=True, max_length=MAX_PROBLEM) = None  # type: ignore[valid-type]
    path: optional_path("a .cda file on this machine (the local user, under its roots)") = None  # type: ignore[valid-type]
    ken: KenSource | None = Field(default=None, description="inline nodes/edges; a path only for the local user")
    backend: Literal["z3", "clingo"] = Field(default="z3", description="the live solver")
    task_id: str | None = Field(default=None, pattern=r"^[A-Za-z0-9_.:\-]{1,128}$",
                                description="task id (default: the problem file's name)")
    top: whole_in(1, 50) = Field(default=5, description="hypotheses kept as candidate records")  # type: ignore[valid-type]

    @model_validator(mode="after")
    def _one_problem(self) -> InvestigateStartParams:
        one_source(self.dsl, self.path, "dsl")
        return self


class SessionRef(Params):
    session_id: str = Field(pattern=SESSION_ID, description="the session id investigate.start returned")


class InvestigateObserveParams(Params):
    session_id: str = Field(pattern=SESSION_ID, description="the session id investigate.start returned")
    observation: optional_text("'slow(auth)', 'not slow(auth)', or 'value(metric:m) = 300 ms'",  # type: ignore[valid-type]
                               dsl=True, max_length=10_000)

    @model_validator(mode="after")
    def _given(self) -> InvestigateObserveParams:
        if self.observation is None:
            raise ValueError("an observation is needed, e.g. 'slow(auth)' or 'not slow(auth)'")
        return self


class InvestigateStartResult(Result):
    session_id: str
    memory: MemoryBlock = Field(description="the memory block after the start step")


class InvestigateMemoryResult(Result):
    session_id: str
    memory: MemoryBlock


class StepRecord(Result):
    step: int
    kind: Literal["start", "observe", "undo", "close"]
    observation: str | None = None
    undoes: int | None = None
    trace: dict[str, Any] = Field(default_factory=dict)
    at_utc: str


class InvestigateHistoryResult(Result):
    session_id: str
    steps: list[StepRecord]


class InvestigationDesk:
    """The investigations of one sessions store: who owns each session, one step at a time."""

    def __init__(self, db: Path, *, sessions_file: Path | None = None) -> None:
        from cda.store import companion

        self.db = sessions_file if sessions_file is not None else companion(db, "investigations")
        self.ken_dir = (self.db.with_name(self.db.name + "-ken") if sessions_file is not None
                        else db.with_name(db.name + ".investigations-ken"))
        self.lock = threading.Lock()
        self.session_locks: dict[str, threading.Lock] = {}
        if sessions_file is None:  # a server's: made (or recognised and brought up to date) before the first call
            with self._sessions():
                pass
        # a command's own file (cda investigate --db) is made by its first start: status never creates one

    def call(self, call: Any, method: str, params: BaseModel) -> BaseModel:
        """Run one ``investigate.*`` method; every failure is an OperationError (never a traceback)."""
        from cda.errors import AccessDenied

        try:
            if isinstance(params, InvestigateStartParams):
                return self._start(call, params)
            assert isinstance(params, SessionRef | InvestigateObserveParams)
            return self._step(call.principal, method, params)
        except (OperationError, AccessDenied):
            raise
        except Exception as exc:  # noqa: BLE001 - mapped to an error a client reads: never a traceback
            raise self._mapped(exc) from None

    def _own_files(self) -> Any:
        """The desk's own Ken files are readable to every call that reopens a session."""
        from cda.access import current, granted, with_root

        return granted(with_root(current(), self.ken_dir))

    def _start(self, call: Any, p: InvestigateStartParams) -> BaseModel:
        from cda.investigation.session import Investigation

        sid = uuid.uuid4().hex[:16]
        ken: Path | None = None
        if p.ken is not None and p.ken.path is not None:
            ken = at(call, p.ken.path)
        elif p.ken is not None:
            self.ken_dir.mkdir(exist_ok=True)
            ken = self.ken_dir / f"{sid}.json"
            ken.write_text(json.dumps({"directed": True, "multigraph": True, "nodes": [
                {"id": n.id, **({"label": n.label} if n.label else {})} for n in p.ken.nodes],
                "links": [{"source": e.source, "target": e.target, "relation": e.relation}
                          for e in p.ken.edges]}), encoding="utf-8")
        problem: str | Path = p.dsl if p.dsl is not None else at(call, p.path or "")
        if isinstance(problem, Path) and not problem.is_file():
            raise OperationError("invalid_params", f"{p.path}: no such file", ["params", "path"])
        try:
            with self._own_files():
                inv = Investigation.start(problem, db=self.db, backend=p.backend, ken=ken, task_id=p.task_id,
                                          top=p.top, session_id=sid)
        except BaseException:
            if ken is not None and ken.parent == self.ken_dir:
                ken.unlink(missing_ok=True)
            raise
        try:
            with self._sessions() as sessions:
                sessions.set_owner(sid, call.principal.name)
            return InvestigateStartResult(session_id=sid, memory=inv.memory)
        finally:
            inv.release()

    def _step(self, who: Principal, method: str, p: SessionRef | InvestigateObserveParams) -> BaseModel:
        from cda.investigation.session import Investigation

        sid = p.session_id
        if who.role != "local":  # at the local user's own store every session is theirs
            owner = None
            if self.db.is_file():
                with self._sessions(read_only=True) as sessions:
                    owner = sessions.owner(sid)
            if owner is None or (owner != who.name and not who.sees_all):
                raise OperationError("not_found", f"no investigation {sid!r}", ["params", "session_id"])
        with self.lock:
            lock = self.session_locks.setdefault(sid, threading.Lock())
        with lock, self._own_files():
            inv = Investigation.open(sid, self.db, read_only=method in ("investigate.status", "investigate.history"))
            try:
                if method == "investigate.history":
                    steps = [StepRecord(step=s.step, kind=s.kind, observation=s.observation,  # type: ignore[arg-type]
                                        undoes=s.undoes, trace=s.trace, at_utc=s.at_utc) for s in inv.history()]
                    return InvestigateHistoryResult(session_id=sid, steps=steps)
                if isinstance(p, InvestigateObserveParams):
                    memory = inv.observe(p.observation or "")
                elif method == "investigate.undo":
                    memory = inv.undo()
                elif method == "investigate.close":
                    memory = inv.close()
                else:
                    memory = inv.status()
                return InvestigateMemoryResult(session_id=sid, memory=memory)
            finally:
                inv.release()

    @contextmanager
    def _sessions(self, *, read_only: bool = False) -> Iterator[Any]:
        from cda.investigation.session_store import SessionStore

        store = SessionStore(self.db, read_only=read_only)
        try:
            yield store
        finally:
            store.close()

    def _mapped(self, exc: Exception) -> Exception:
        """A failure as the error a client gets: its kind, a reason without server paths, and where."""
        from cda.errors import CDAError, DSLError, KenError
        from cda.investigation.live import InvestigationError
        from cda.investigation.session import ClosedInvestigation
        from cda.investigation.session_store import SessionMoved, UnknownSession

        if isinstance(exc, DSLError):
            where: list[str | int] = ["params", "dsl"]
            if exc.line is not None:
                where.append(exc.line)
                if exc.column is not None:
                    where.append(exc.column)
            at_ = f"line {exc.line}" + (f", column {exc.column}" if exc.column is not None else "") if exc.line else ""
            return OperationError("invalid_params", f"{exc.kind}: {exc.message}" + (f" ({at_})" if at_ else ""), where)
        if isinstance(exc, InvestigationError):
            path: list[str | int] = ["params", "observation"] + ([exc.column] if exc.column is not None else [])
            return OperationError("invalid_params", str(exc), path)
        if isinstance(exc, KenError):
            return OperationError("invalid_params", self._hide(str(exc)), ["params", "ken"])
        if isinstance(exc, UnknownSession):
            return OperationError("not_found", str(exc), ["params", "session_id"])
        if isinstance(exc, ClosedInvestigation | SessionMoved):
            return OperationError("conflict", str(exc), ["params", "session_id"])
        if isinstance(exc, CDAError) and str(exc).startswith("nothing to undo"):
            return OperationError("conflict", str(exc), ["params", "session_id"])
        if isinstance(exc, CDAError | ValueError):
            return OperationError("invalid_params", self._hide(str(exc)), ["params"])
        if isinstance(exc, sqlite3.Error):
            return OperationError("internal", f"the investigation store cannot be used ({type(exc).__name__})", [])
        return OperationError("internal", f"the investigation failed ({type(exc).__name__})", [])

    def _hide(self, text: str) -> str:
        """No server path in a message: the folder of the store is left out."""
        return text.replace(str(self.ken_dir) + "/", "").replace(str(self.db.parent) + "/", "")


_desks: dict[Path, InvestigationDesk] = {}
_desks_lock = threading.Lock()


def desk_for(db: Path, *, sessions_file: bool = False) -> InvestigationDesk:
    """The desk of a store (one per file; made on first use, in a worker thread). ``sessions_file``:
    ``db`` is the sessions file itself (the CLI's ``--db``), not a server store beside which it lives."""
    key = db.resolve()
    with _desks_lock:
        if key not in _desks:
            _desks[key] = InvestigationDesk(db, sessions_file=db if sessions_file else None)
        return _desks[key]


def _desk(call: Any) -> InvestigationDesk:
    desk = getattr(call.env, "investigations", None)
    if desk is None:  # pragma: no cover - a door that lists investigate.* provides one
        raise OperationError("internal", "this door keeps no investigations")
    return desk  # type: ignore[no-any-return]


_DOORS = {Door.CLI, Door.TOOLBUS, Door.MCP}
_CLI_NAMES = {Door.CLI: {"session_id": "session", "task_id": "task"}}


@operation("investigate.start", InvestigateStartParams, InvestigateStartResult,
           summary="start an investigation of a problem; its session id and first memory block", doors=_DOORS,
           needs=Needs(files=True, store=True, long=True), cli_positional=("path",), door_only={Door.CLI: ("dsl",)},
           renames=_CLI_NAMES)
def start(call: Any, p: InvestigateStartParams) -> InvestigateStartResult:
    result = _desk(call).call(call, "investigate.start", p)
    assert isinstance(result, InvestigateStartResult)
    return result


def _session_op(name: str, params: type[BaseModel], result: type[BaseModel], summary: str, *,
                store: bool, positional: tuple[str, ...] = ("session_id",)) -> None:
    def run(call: Any, p: BaseModel) -> BaseModel:
        return _desk(call).call(call, name, p)

    run.__name__ = name.replace(".", "_")
    reads = name == "investigate.observe"  # an observation is DSL: a ken line in it names a file
    operation(name, params, result, summary=summary, doors=_DOORS, cli_positional=positional,
              needs=Needs(files=reads, store=store, long=store), renames=_CLI_NAMES)(run)


_session_op("investigate.observe", InvestigateObserveParams, InvestigateMemoryResult,
            "add one observation: 'slow(auth)', 'not slow(auth)', a metric value", store=True,
            positional=("session_id", "observation"))
_session_op("investigate.status", SessionRef, InvestigateMemoryResult,
            "the records, the focus and the next probe", store=False)
_session_op("investigate.history", SessionRef, InvestigateHistoryResult, "the trace of each step", store=False)
_session_op("investigate.undo", SessionRef, InvestigateMemoryResult, "take the last observation back", store=True)
_session_op("investigate.close", SessionRef, InvestigateMemoryResult, "close the investigation", store=True)
