"""``session_put|remove|show|solve``: a problem an agent builds item by item, by name
(:class:`~cda.operations.clause_session.ClauseSession`), kept by the door for its client
(``call.env.sessions``: the MCP server's, for the life of the connection)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from cda.contracts.result import SolveResult
from cda.operations.base import OperationError, Params
from cda.operations.clause_session import MAX_ITEM_CHARS, ClauseSession
from cda.operations.params import Backend, Seed, Top, dsl_text
from cda.operations.registry import Door, Needs, operation

__all__ = ["SessionOutput", "SessionSolveOutput"]

_SESSION = Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_\-]+$", description="the session's name")
_NAME = Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_]+$", description="the item's name")


class PutParams(Params):
    session: str = _SESSION
    name: str = _NAME
    statement: dsl_text("one or more DSL statements", max_length=MAX_ITEM_CHARS)  # type: ignore[valid-type]


class RemoveParams(Params):
    session: str = _SESSION
    name: str = _NAME


class ShowParams(Params):
    session: str = _SESSION


class SolveParams(Params):
    session: str = _SESSION
    backend: Backend = Field(default="auto", description="auto, z3 or clingo")
    top: Top = None
    seed: Seed = 0


class SessionOutput(BaseModel):
    session: str
    items: list[str] = Field(description="the item names, in order")
    text: str = Field(description="the problem the items make, as solved")
    changed: str = Field(default="", description="what the call did")


class SessionSolveOutput(BaseModel):
    session: str
    solved_again: bool = Field(description="false when the session had not changed since the last solve")
    result: SolveResult


MAX_SESSIONS = 1000


def _session(call: Any, name: str) -> ClauseSession:
    sessions: dict[str, ClauseSession] = call.env.sessions
    if name not in sessions and len(sessions) >= MAX_SESSIONS:
        raise OperationError("conflict", f"at most {MAX_SESSIONS} sessions at once", ["params", "session"])
    return sessions.setdefault(name, ClauseSession())


def _out(p: Any, state: ClauseSession, changed: str = "") -> SessionOutput:
    return SessionOutput(session=p.session, items=list(state.items), text=state.text(), changed=changed)


_MCP = {Door.MCP}


@operation("session_put", PutParams, SessionOutput, doors=_MCP, needs=Needs(files=True),
           summary="Add an item (one or more DSL statements) to a session under a name, or replace it.")
def put(call: Any, p: PutParams) -> SessionOutput:
    state = _session(call, p.session)
    new = state.put(p.name, p.statement)
    return _out(p, state, f"{'added' if new else 'replaced'} {p.name}")


@operation("session_remove", RemoveParams, SessionOutput, doors=_MCP, summary="Remove an item of a session by name.")
def remove(call: Any, p: RemoveParams) -> SessionOutput:
    state = _session(call, p.session)
    state.remove(p.name)
    return _out(p, state, f"removed {p.name}")


@operation("session_show", ShowParams, SessionOutput, doors=_MCP, summary="The items of a session and the problem they make.")
def show(call: Any, p: ShowParams) -> SessionOutput:
    return _out(p, _session(call, p.session))


@operation("session_solve", SolveParams, SessionSolveOutput, doors=_MCP, needs=Needs(files=True, long=True),
           summary="Solve a session's problem (the last answer again if nothing changed).")
def solve(call: Any, p: SolveParams) -> SessionSolveOutput:
    state = _session(call, p.session)
    before = state.solves
    result = state.solve(backend=p.backend, top=p.top, seed=p.seed)
    return SessionSolveOutput(session=p.session, solved_again=state.solves > before, result=result)
