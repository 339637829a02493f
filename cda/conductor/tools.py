"""The tools and conditions the conductor ships: a calculator, a read-only SQLite query, a Ken
lookup, and CDA's own solver (``cda.solve``) with its re-check on the other backend.

Each is deterministic: the same inputs and files give the same outputs, which is what lets the
verify loop re-evaluate an answer and compare, and the trace be the same bytes twice.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Mapping
from typing import Any

from cda.conductor.arithmetic import check_expression, evaluate, exact_text, recompute
from cda.conductor.tooling import Condition, Outputs, Tool, Toolbox, ToolContext, ToolError
from cda.errors import CDAError

__all__ = ["builtin_toolbox", "solve_outputs"]

MAX_ROWS = 1000
"""A query answer holds at most this many rows (``truncated`` says when there were more)."""


# ---- the calculator
def _calculate(inputs: Mapping[str, Any], ctx: ToolContext) -> Outputs:
    value = evaluate(str(inputs["expression"]))
    return {"value": exact_text(value)}


def _recalculate(inputs: Mapping[str, Any], outputs: Outputs, ctx: ToolContext) -> str | None:
    again = exact_text(recompute(str(inputs["expression"])))
    return None if again == outputs.get("value") else f"sympy gives {again}, the tool said {outputs.get('value')}"


# ---- SQLite, read only
_READ_ONLY_ACTIONS = {sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ, sqlite3.SQLITE_FUNCTION}


def _authorizer(action: int, *args: object) -> int:
    """Only reading is allowed: no write, no ATTACH, no PRAGMA (SQLite asks before each step)."""
    return sqlite3.SQLITE_OK if action in _READ_ONLY_ACTIONS else sqlite3.SQLITE_DENY


def _query(inputs: Mapping[str, Any], ctx: ToolContext) -> Outputs:
    from cda.store import StoreFileError, read_snapshot

    path = ctx.path(inputs["database"])
    sql = str(inputs["sql"])

    def read(conn: sqlite3.Connection) -> Outputs:
        conn.set_authorizer(_authorizer)
        try:
            cur = conn.execute(sql)
            rows = cur.fetchmany(MAX_ROWS + 1)
        except sqlite3.Error as exc:
            raise ToolError(f"the query failed: {exc}") from None
        columns = [d[0] for d in cur.description or ()]
        return {"columns": columns, "rows": [list(r) for r in rows[:MAX_ROWS]], "truncated": len(rows) > MAX_ROWS}

    try:  # read without a trace: the user's database is never modified, no -wal left beside it
        return read_snapshot(path, read)
    except StoreFileError as exc:
        raise ToolError(str(exc)) from None


def _requery(inputs: Mapping[str, Any], outputs: Outputs, ctx: ToolContext) -> str | None:
    again = _query(inputs, ctx)
    return None if again == outputs else "the same query now gives different rows"


# ---- Ken lookup
_ID = re.compile(r"^[A-Za-z0-9_.:-]+$")


def _lookup(inputs: Mapping[str, Any], ctx: ToolContext) -> Outputs:
    if ctx.ken is None:
        raise ToolError("no Ken graph was given (--ken FILE)")
    entity = str(inputs["entity"])
    if not ctx.ken.has_node(entity):
        return {"entity": entity, "found": False, "facts": []}
    g = ctx.ken.graph
    facts = set()
    for u, v, relation in list(g.out_edges(entity, keys=True)) + list(g.in_edges(entity, keys=True)):
        if all(_ID.match(str(x)) for x in (u, v, relation)):
            facts.add(f"{relation}({u}, {v})")
    return {"entity": entity, "found": True, "facts": sorted(facts)}


# ---- CDA's solver
def solve_outputs(result: Any) -> Outputs:
    """The part of a :class:`~cda.contracts.result.SolveResult` a conductor answers with: exact
    costs as text, verdicts with their justification, conflict cores."""
    return {
        "status": str(result.status),
        "backend": result.backend,
        "partial": result.partial,
        "hypotheses": [{"assumed": list(h.assumed), "cost": exact_text(h.exact_cost())} for h in result.hypotheses],
        "enumerated": result.hypotheses_enumerated,
        "verdicts": [
            {"goal": v.goal, "claim": v.claim, "status": str(v.status), "justification": list(v.justification)}
            for v in result.verdicts
        ],
        "conflict": None if result.conflict is None else [list(c) for c in result.conflict.cores],
    }


def _solve(inputs: Mapping[str, Any], ctx: ToolContext) -> Outputs:
    from cda.api import solve

    try:
        result = solve(ctx.path(inputs["problem"]), backend=str(inputs.get("backend", "auto")), seed=ctx.seed,
                       ken=ctx.ken)
    except CDAError as exc:
        raise ToolError(str(exc)) from None
    return solve_outputs(result)


def _resolve(inputs: Mapping[str, Any], outputs: Outputs, ctx: ToolContext) -> str | None:
    """Solve again on the other backend; status, hypotheses (with costs), verdicts and conflict
    cores must agree. A problem only one backend takes (optimisation over numbers is z3's) is
    re-solved on the same backend: still a re-evaluation, said so in the answer."""
    from cda.api import solve
    from cda.errors import BackendUnsupported

    other = "clingo" if outputs.get("backend") == "z3" else "z3"
    problem = ctx.path(inputs["problem"])
    try:
        again = solve_outputs(solve(problem, backend=other, seed=ctx.seed, ken=ctx.ken))
    except BackendUnsupported:
        other = str(outputs.get("backend"))
        again = solve_outputs(solve(problem, backend=other, seed=ctx.seed, ken=ctx.ken))
    for key in ("status", "hypotheses", "verdicts", "conflict"):
        if again[key] != outputs.get(key):
            return f"{other} disagrees on {key}"
    return None


# ---- conditions
def _file(inputs: Mapping[str, Any], outputs: Outputs | None, ctx: ToolContext, args: tuple[str, ...]) -> str | None:
    name = args[0]
    return None if ctx.path(inputs[name]).is_file() else f"{name}: {inputs[name]} is not a file"


def _suffix(inputs: Mapping[str, Any], outputs: Outputs | None, ctx: ToolContext, args: tuple[str, ...]) -> str | None:
    name, *suffixes = args
    text = str(inputs[name]).lower()
    return None if any(text.endswith(s.lower()) for s in suffixes) else f"{name}: not a {' or '.join(suffixes)} file"


def _arithmetic(inputs: Mapping[str, Any], outputs: Outputs | None, ctx: ToolContext, args: tuple[str, ...]) -> str | None:
    return check_expression(str(inputs[args[0]]))


def _select_only(inputs: Mapping[str, Any], outputs: Outputs | None, ctx: ToolContext, args: tuple[str, ...]) -> str | None:
    sql = str(inputs[args[0]]).strip().rstrip(";")
    if not sql.lower().startswith(("select", "with")) or ";" in sql:
        return f"{args[0]}: one SELECT statement only"
    return None


def _ken(inputs: Mapping[str, Any], outputs: Outputs | None, ctx: ToolContext, args: tuple[str, ...]) -> str | None:
    return None if ctx.ken is not None else "no Ken graph was given"


def _has(inputs: Mapping[str, Any], outputs: Outputs | None, ctx: ToolContext, args: tuple[str, ...]) -> str | None:
    missing = [k for k in args if outputs is None or outputs.get(k) is None]
    return f"the output has no {', '.join(missing)}" if missing else None


def _exact(inputs: Mapping[str, Any], outputs: Outputs | None, ctx: ToolContext, args: tuple[str, ...]) -> str | None:
    value = None if outputs is None else outputs.get(args[0])
    ok = isinstance(value, str) and re.fullmatch(r"-?\d+(/\d+)?", value) is not None
    return None if ok else f"{args[0]} is not an exact number: {value!r}"


def _status_in(inputs: Mapping[str, Any], outputs: Outputs | None, ctx: ToolContext, args: tuple[str, ...]) -> str | None:
    key, *allowed = args
    value = None if outputs is None else outputs.get(key)
    return None if value in allowed else f"{key} is {value!r}, not one of {', '.join(allowed)}"


def _justified(inputs: Mapping[str, Any], outputs: Outputs | None, ctx: ToolContext, args: tuple[str, ...]) -> str | None:
    """Every settled verdict (supported or refuted) names the clauses it stands on."""
    bare = [v.get("claim") for v in (outputs or {}).get("verdicts", [])
            if v.get("status") in ("supported", "refuted") and not v.get("justification")]
    return f"a verdict without a justification: {', '.join(map(str, bare))}" if bare else None


def _complete(inputs: Mapping[str, Any], outputs: Outputs | None, ctx: ToolContext, args: tuple[str, ...]) -> str | None:
    return "the answer is partial (a budget ran out)" if (outputs or {}).get("partial") else None


PRECONDITIONS: dict[str, Condition] = {
    "file": _file, "suffix": _suffix, "arithmetic": _arithmetic, "select_only": _select_only, "ken": _ken,
}
POSTCONDITIONS: dict[str, Condition] = {
    "has": _has, "exact": _exact, "status_in": _status_in, "justified": _justified, "complete": _complete,
}


def builtin_toolbox() -> Toolbox:
    """The implementations and conditions every conductor has."""
    return Toolbox(
        tools={
            "calculator": Tool(_calculate, _recalculate),
            "sqlite.query": Tool(_query, _requery),
            "ken.lookup": Tool(_lookup),
            "cda.solve": Tool(_solve, _resolve),
        },
        preconditions=dict(PRECONDITIONS),
        postconditions=dict(POSTCONDITIONS),
    )
