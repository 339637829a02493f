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
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, model_validator

from cda.contracts.action import KenSource
from cda.contracts.hypothesis_record import TraceRecord
from cda.investigation.session import MemoryBlock
from cda.operations.base import OperationError, Params, Result, at, one_source
from cda.operations.params import DslText, checked, optional_path, optional_text, whole_in
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
KEPT_SESSIONS = 16  # live sessions a desk keeps between steps (the least recently used one is let go)
MOVED_RETRIES = 3  # a step taken again when another process wrote one first
SESSION_ID = r"^[A-Za-z0-9_\-]{1,64}$"
AUTHOR = r"^[A-Za-z0-9_.@\-]{1,64}$"  # a principal's name, or the name --as gives


class InvestigateStartParams(Params):
    dsl: optional_text("the problem as DSL text", dsl=True, max_length=MAX_PROBLEM) = None  # type: ignore[valid-type]
    path: optional_path("a .cda file on this machine (the local user, under its roots)") = None  # type: ignore[valid-type]
    ken: KenSource | None = Field(default=None, description="inline nodes/edges; a path only for the local user")
    backend: Literal["z3", "clingo"] = Field(default="z3", description="the live solver")
    task_id: str | None = Field(default=None, pattern=r"^[A-Za-z0-9_.:\-]{1,128}$",
                                description="task id (default: the problem file's name)")
    top: whole_in(1, 50) = Field(default=5, description="hypotheses kept as candidate records")  # type: ignore[valid-type]
    author: str | None = Field(default=None, pattern=AUTHOR, description="who starts it (as for a step)")

    @model_validator(mode="after")
    def _one_problem(self) -> InvestigateStartParams:
        one_source(self.dsl, self.path, "dsl")
        return self


class SessionRef(Params):
    session_id: str = Field(pattern=SESSION_ID, description="the session id investigate.start returned")


def _step_number(description: str) -> Any:
    def check(name: str, value: Any) -> int:
        from cda.contracts import limits

        return limits.whole(name, value, low=0, high=MAX_STEP)

    return Annotated[Annotated[int, Field(ge=0, le=MAX_STEP)] | None, *checked(check, whole=True),
                     Field(description=description)]


MAX_STEP = 1_000_000


class StepParams(SessionRef):
    """What every step takes: who takes it and why."""

    author: str | None = Field(default=None, pattern=AUTHOR, description="who takes the step: the local user may "
                               "name anyone (--as NAME); another caller is its principal's name or nothing")
    reason: optional_text("why, kept with the step", max_length=2_000) = None  # type: ignore[valid-type]


class InvestigateObserveParams(StepParams):
    observation: optional_text("'slow(auth)', 'not slow(auth)', or 'value(metric:m) = 300 ms'",  # type: ignore[valid-type]
                               dsl=True, max_length=10_000)

    @model_validator(mode="after")
    def _given(self) -> InvestigateObserveParams:
        if self.observation is None:
            raise ValueError("an observation is needed, e.g. 'slow(auth)' or 'not slow(auth)'")
        return self


_Statement = Annotated[str, Field(min_length=1, max_length=10_000)]


class InvestigateReviseParams(StepParams):
    add: Annotated[list[_Statement], DslText(), Field(  # type: ignore[valid-type]
        max_length=50, description="DSL statements added to the model: 'fact depends(a, b)', a hard or soft clause, "
        "a domain written again, an observe line")] = []
    retract: Annotated[list[_Statement], Field(  # type: ignore[valid-type]
        max_length=50, description="lines of the model taken out, as the model writes them")] = []

    @model_validator(mode="after")
    def _something(self) -> InvestigateReviseParams:
        if not self.add and not self.retract:
            raise ValueError("a revision adds or retracts at least one statement, e.g. 'fact depends(a, b)'")
        return self


class InvestigateUndoParams(StepParams):
    step: _step_number("the step to take back: an observation or a revision in force (default: the last)") = None  # type: ignore[valid-type]


class InvestigateNoteParams(SessionRef):
    step: _step_number("the step the note is on") = None  # type: ignore[valid-type]
    text: optional_text("the note", max_length=4_000) = None  # type: ignore[valid-type]
    author: str | None = Field(default=None, pattern=AUTHOR, description="who writes it (as for a step)")

    @model_validator(mode="after")
    def _given(self) -> InvestigateNoteParams:
        if self.step is None or self.text is None:
            raise ValueError("a note names a step and has some text")
        return self


class InvestigateShareParams(SessionRef):
    member: str = Field(pattern=AUTHOR, description="the principal (a token's name) who may take steps too")


class InvestigateStartResult(Result):
    session_id: str
    memory: MemoryBlock = Field(description="the memory block after the start step")
    trace: TraceRecord | None = Field(default=None, description="the step as the hypothesis record's trace")


class InvestigateMemoryResult(Result):
    session_id: str
    memory: MemoryBlock
    trace: TraceRecord | None = Field(default=None, description="the step as the hypothesis record's trace")


class StepRecord(Result):
    step: int
    kind: Literal["start", "observe", "revise", "undo", "close"]
    observation: str | None = None
    undoes: int | None = None
    author: str | None = None
    reason: str | None = None
    revision: dict[str, list[str]] | None = None
    trace: dict[str, Any] = Field(default_factory=dict)
    at_utc: str


class NoteRecord(Result):
    step: int
    author: str
    text: str
    at_utc: str


class InvestigateHistoryResult(Result):
    session_id: str
    owner: str | None = None
    members: list[str] = Field(default_factory=list)
    steps: list[StepRecord]
    notes: list[NoteRecord] = Field(default_factory=list)


class InvestigateShareResult(Result):
    session_id: str
    owner: str | None
    members: list[str]


class InvestigationDesk:
    """The investigations of one sessions store: who owns each session, one step at a time."""

    def __init__(self, db: Path, *, sessions_file: Path | None = None) -> None:
        from cda.store import companion

        self.db = sessions_file if sessions_file is not None else companion(db, "investigations")
        self.ken_dir = (self.db.with_name(self.db.name + "-ken") if sessions_file is not None
                        else db.with_name(db.name + ".investigations-ken"))
        self.lock = threading.Lock()
        self.session_locks: dict[str, threading.Lock] = {}
        self.open: OrderedDict[str, Any] = OrderedDict()  # session id -> its live Investigation (LRU)
        if sessions_file is None:  # a server's: made (or recognised and brought up to date) before the first call
            with self._sessions():
                pass
        # a command's own file (cda investigate --db) is made by its first start: status never creates one

    def call(self, call: Any, method: str, params: BaseModel) -> BaseModel:
        """Run one ``investigate.*`` method; every failure is an OperationError (never a traceback),
        but a mistake in a problem file of the local user's, which names its place as a compiler does."""
        from cda.errors import AccessDenied, DSLError

        try:
            if isinstance(params, InvestigateStartParams):
                return self._start(call, params)
            assert isinstance(params, SessionRef)
            return self._step(call.principal, method, params)
        except (OperationError, AccessDenied):
            raise
        except DSLError as exc:
            if exc.filename is not None and call.principal.role == "local":
                raise  # a mistake in the local user's own problem file: named by its file, line and column
            raise self._mapped(exc) from None
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
            what = "a folder, not a file" if problem.is_dir() else "no such file"
            raise OperationError("invalid_params", f"{p.path}: {what}", ["params", "path"])
        author = self._author(call.principal, p.author)
        try:
            with self._own_files():
                inv = Investigation.start(problem, db=self.db, backend=p.backend, ken=ken, task_id=p.task_id,
                                          top=p.top, session_id=sid, author=author)
        except BaseException:
            if ken is not None and ken.parent == self.ken_dir:
                ken.unlink(missing_ok=True)
            raise
        with self._sessions() as sessions:
            sessions.set_owner(sid, call.principal.name)
        self._keep(sid, inv)
        return InvestigateStartResult(session_id=sid, memory=inv.memory, trace=inv.memory.trace_record())

    @staticmethod
    def _author(who: Principal, named: str | None) -> str:
        """Who takes a step: the local user names anyone (``--as``); another caller is itself."""
        if who.role == "local":
            return named or who.name
        if named is not None and named != who.name:
            raise OperationError("forbidden", f"a step is taken as the caller ({who.name}), not as {named!r}",
                                 ["params", "author"])
        return who.name

    def _may(self, who: Principal, sid: str, *, owner_only: bool = False) -> None:
        """The session is the caller's: its owner's, a member's (not to share it on), or any for a
        principal that sees all; at the local user's own store every session is theirs."""
        if who.role == "local":
            return
        owner: str | None = None
        members: list[str] = []
        if self.db.is_file():
            with self._sessions(read_only=True) as sessions:
                owner = sessions.owner(sid)
                members = sessions.members(sid) if owner is not None else []
        if owner is None or (owner != who.name and who.name not in members and not who.reviews_sessions):
            raise OperationError("not_found", f"no investigation {sid!r}", ["params", "session_id"])
        if owner_only and owner != who.name and not who.reviews_sessions:
            raise OperationError("forbidden", f"only the owner of investigation {sid} shares it", ["params", "session_id"])

    def _step(self, who: Principal, method: str, p: SessionRef) -> BaseModel:
        from cda.errors import BudgetExceeded, CDAError
        from cda.investigation.session_store import SessionMoved

        sid = p.session_id
        self._may(who, sid, owner_only=method == "investigate.share")
        if method in ("investigate.status", "investigate.history"):
            return self._read(sid, method)
        with self.lock:
            lock = self.session_locks.setdefault(sid, threading.Lock())
        # two callers of one session meet here (one at a time, each on the state the other left);
        # another process's step in between is found by the store (SessionMoved): the step is
        # taken again on the session as that process left it, never lost and never written twice
        with lock, self._own_files():
            for attempt in range(MOVED_RETRIES + 1):
                inv = self._live(sid)
                try:
                    answer = self._take(inv, who, method, p)
                except SessionMoved:
                    inv.release()
                    if attempt == MOVED_RETRIES:
                        raise
                    continue
                except BudgetExceeded as exc:  # stopped mid-step: the live state may be half-changed
                    inv.release()  # the next call reopens the session from the store (nothing was written)
                    raise _stopped(exc) from None
                except (CDAError, OperationError):
                    self._keep(sid, inv)  # a refused step changed nothing: the session is kept as it was
                    raise
                except BaseException:
                    inv.release()  # anything else: the next call reopens the session from the store
                    raise
                self._keep(sid, inv)
                return answer
        raise AssertionError("unreachable")  # pragma: no cover

    def _take(self, inv: Any, who: Principal, method: str, p: SessionRef) -> BaseModel:
        sid = p.session_id
        if isinstance(p, InvestigateShareParams):
            from datetime import UTC, datetime

            inv.store.add_member(sid, p.member, who.name, datetime.now(UTC).isoformat())
            return InvestigateShareResult(session_id=sid, owner=inv.store.owner(sid), members=inv.store.members(sid))
        if isinstance(p, InvestigateNoteParams):
            inv.note(p.step or 0, p.text or "", author=self._author(who, p.author))
            return self._read(sid, "investigate.history")
        assert isinstance(p, StepParams)
        author, reason = self._author(who, p.author), p.reason
        if isinstance(p, InvestigateObserveParams):
            memory = inv.observe(p.observation or "", author=author, reason=reason)
        elif isinstance(p, InvestigateReviseParams):
            memory = inv.revise(p.add, p.retract, author=author, reason=reason)
        elif isinstance(p, InvestigateUndoParams):
            memory = inv.undo(p.step, author=author, reason=reason)
        else:
            memory = inv.close(author=author, reason=reason)
        return InvestigateMemoryResult(session_id=sid, memory=memory, trace=memory.trace_record())

    def _read(self, sid: str, method: str) -> BaseModel:
        """``status`` and ``history``: read from the store (a fresh snapshot), no solver built."""
        from cda.investigation.session import MemoryBlock

        with self._sessions(read_only=True) as sessions:
            if method == "investigate.status":
                memory = MemoryBlock.model_validate(sessions.load(sid).memory)
                return InvestigateMemoryResult(session_id=sid, memory=memory, trace=memory.trace_record())
            sessions.load(sid)  # unknown: not_found
            steps = [StepRecord(step=s.step, kind=s.kind, observation=s.observation,  # type: ignore[arg-type]
                                undoes=s.undoes, author=s.author, reason=s.reason, revision=s.revision, trace=s.trace,
                                at_utc=s.at_utc) for s in sessions.steps(sid)]
            notes = [NoteRecord(step=n.step, author=n.author, text=n.text, at_utc=n.at_utc) for n in sessions.notes(sid)]
            return InvestigateHistoryResult(session_id=sid, owner=sessions.owner(sid), members=sessions.members(sid),
                                            steps=steps, notes=notes)

    # ---- the live sessions this desk keeps: each step on the solver the last one left
    def _live(self, sid: str) -> Any:
        """The session's live investigation: the one kept since its last step when no other process
        wrote a step since (the store's ``last_step`` says), else reopened from the store. Between
        calls no connection to the file is held (a kept session gets a new one for its step)."""
        from cda.investigation.session import Investigation
        from cda.investigation.session_store import SessionStore

        with self.lock:
            kept = self.open.pop(sid, None)
        if kept is not None:
            store = SessionStore(self.db, create=False)
            try:
                if store.last_step(sid) == kept.stored.last_step:
                    kept.store = store
                    kept.live.follow()  # this call's cancel token and wall stop its solver
                    return kept
            except Exception:  # noqa: BLE001 - the kept one is dropped; reopened below
                pass
            store.close()
        return Investigation.open(sid, self.db)

    def _keep(self, sid: str, inv: Any) -> None:
        """Keep ``inv`` for the session's next step (its connection closed; the least recently used let go)."""
        inv.release()
        with self.lock:
            self.open[sid] = inv
            self.open.move_to_end(sid)
            while len(self.open) > KEPT_SESSIONS:
                self.open.popitem(last=False)

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
        from cda.errors import BudgetExceeded, CDAError, DSLError, KenError
        from cda.investigation.live import InvestigationError
        from cda.investigation.revision import StepRefused
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
            path: list[str | int] = ["params", exc.field] + ([exc.column] if exc.column is not None else [])
            return OperationError("invalid_params", str(exc), path)
        if isinstance(exc, KenError):
            return OperationError("invalid_params", self._hide(str(exc)), ["params", "ken"])
        if isinstance(exc, UnknownSession):
            return OperationError("not_found", str(exc), ["params", "session_id"])
        if isinstance(exc, ClosedInvestigation | SessionMoved):
            return OperationError("conflict", str(exc), ["params", "session_id"])
        if isinstance(exc, StepRefused):  # the session as it is stands in the way (named in the message)
            return OperationError("conflict", self._hide(str(exc)), ["params", "session_id"])
        if isinstance(exc, BudgetExceeded):
            return _stopped(exc)
        if isinstance(exc, CDAError | ValueError):
            return OperationError("invalid_params", self._hide(str(exc)), ["params"])
        if isinstance(exc, sqlite3.Error):
            return OperationError("internal", f"the investigation store cannot be used ({type(exc).__name__})", [])
        return OperationError("internal", f"the investigation failed ({type(exc).__name__})", [])

    def _hide(self, text: str) -> str:
        """No server path in a message: the folder of the store is left out."""
        return text.replace(str(self.ken_dir) + "/", "").replace(str(self.db.parent) + "/", "")


def _stopped(exc: Exception) -> OperationError:
    """A step its caller's cancel, the server's stop or the call's wall cut short: nothing of it
    was written, and the session is as it was before it."""
    from cda.contracts.deadline import current_token

    token = current_token()
    why = token.reason if token is not None and token.reason else str(exc)
    return OperationError("conflict", f"the step did not finish ({why}); nothing of it was written", [])


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
_CLI_NAMES = {Door.CLI: {"session_id": "session", "task_id": "task", "author": "as"}}


@operation("investigate.start", InvestigateStartParams, InvestigateStartResult,
           summary="start an investigation of a problem; its session id and first memory block", doors=_DOORS,
           needs=Needs(files=True, store=True, long=True), cli_positional=("path",), door_only={Door.CLI: ("dsl",)},
           renames=_CLI_NAMES)
def start(call: Any, p: InvestigateStartParams) -> InvestigateStartResult:
    result = _desk(call).call(call, "investigate.start", p)
    assert isinstance(result, InvestigateStartResult)
    return result


def _session_op(name: str, params: type[BaseModel], result: type[BaseModel], summary: str, *,
                store: bool, positional: tuple[str, ...] = ("session_id",), reads: bool = False) -> None:
    def run(call: Any, p: BaseModel) -> BaseModel:
        return _desk(call).call(call, name, p)

    run.__name__ = name.replace(".", "_")
    # reads: DSL in the call (an observation, a revision's statements): a ken line in it names a file
    operation(name, params, result, summary=summary, doors=_DOORS, cli_positional=positional,
              needs=Needs(files=reads, store=store, long=store), renames=_CLI_NAMES)(run)


_session_op("investigate.observe", InvestigateObserveParams, InvestigateMemoryResult,
            "add one observation: 'slow(auth)', 'not slow(auth)', a metric value", store=True,
            positional=("session_id", "observation"), reads=True)
_session_op("investigate.revise", InvestigateReviseParams, InvestigateMemoryResult,
            "revise the model: add statements ('fact depends(a, b)', clauses, a domain), retract lines; solved again",
            store=True, positional=("session_id", "add"), reads=True)
_session_op("investigate.status", SessionRef, InvestigateMemoryResult,
            "the records, the focus, the next probe and the step's trace record", store=False)
_session_op("investigate.history", SessionRef, InvestigateHistoryResult,
            "every step with its author and trace, the notes, the owner and members", store=False)
_session_op("investigate.undo", InvestigateUndoParams, InvestigateMemoryResult,
            "take back a step (an observation or a revision; default the last), the later ones kept", store=True,
            positional=("session_id", "step"))
_session_op("investigate.note", InvestigateNoteParams, InvestigateHistoryResult, "attach a note to a step",
            store=True, positional=("session_id", "step", "text"))
_session_op("investigate.share", InvestigateShareParams, InvestigateShareResult,
            "let another principal take steps in the session (its owner only)", store=True,
            positional=("session_id", "member"))
_session_op("investigate.close", StepParams, InvestigateMemoryResult, "close the investigation", store=True)
