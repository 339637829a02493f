"""A clause-editing session for agents (the MCP server's ``session_*`` tools).

An agent builds a problem item by item — declarations, clauses, observations, goals,
expectations, each a DSL statement under a name — then adds, replaces and removes items by name
and solves again. Each item is read on its own when it is put, so a mistake is reported at once,
at its line and column within that item; the whole problem is checked on the next solve, and a
type error there is traced back to the item it came from. Solving again an unchanged session
returns the answer already found (keyed by the text and options) instead of solving again.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from cda.encodings.parse import parse_problem
from cda.errors import CDAError, DSLError

if TYPE_CHECKING:
    from cda.contracts.result import SolveResult

__all__ = ["ClauseSession", "ItemError", "MAX_ITEMS", "MAX_ITEM_CHARS"]

MAX_ITEMS = 10_000
MAX_ITEM_CHARS = 100_000


class ItemError(CDAError, ValueError):
    """A mistake in one item of a session: its name, and the DSL error located inside it."""

    def __init__(self, item: str, error: DSLError | CDAError) -> None:
        self.item, self.error = item, error
        where = ""
        if isinstance(error, DSLError) and error.line is not None:
            where = f" at line {error.line}, column {error.column}"
        text = error.message if isinstance(error, DSLError) else str(error)
        super().__init__(f"item '{item}'{where}: {text}")


@dataclass
class ClauseSession:
    """Named DSL items, in the order first put; the problem is their text, one after another."""

    items: dict[str, str] = field(default_factory=dict)
    _cache: dict[str, SolveResult] = field(default_factory=dict)
    solves: int = 0  # how many times the engine ran (an unchanged session does not run it)

    def put(self, name: str, statement: str) -> bool:
        """Add the item ``name`` or replace its text; ``True`` when it was new. The text must be
        one or more complete statements (``hard h: a or b``, ``hyp a, b``)."""
        if not name or not name.replace("_", "a").isalnum():
            raise CDAError(f"an item name is letters, digits and '_', not {name!r}")
        if len(statement) > MAX_ITEM_CHARS:
            raise CDAError(f"item '{name}': {len(statement)} characters, more than {MAX_ITEM_CHARS}")
        if name not in self.items and len(self.items) >= MAX_ITEMS:
            raise CDAError(f"a session holds at most {MAX_ITEMS} items")
        try:
            if not parse_problem(statement, name).statements:
                raise CDAError(f"item '{name}' holds no statement")
        except DSLError as exc:
            raise ItemError(name, exc) from None
        new = name not in self.items
        self.items[name] = statement.strip("\n")
        return new

    def remove(self, name: str) -> None:
        if name not in self.items:
            raise CDAError(f"no item named '{name}' (items: {', '.join(self.items) or 'none'})")
        del self.items[name]

    def text(self) -> str:
        return "".join(body + "\n" for body in self.items.values())

    def item_at(self, line: int) -> tuple[str, int] | None:
        """The item holding ``line`` of :meth:`text`, and the line within it."""
        first = 1
        for name, body in self.items.items():
            count = body.count("\n") + 1
            if first <= line < first + count:
                return name, line - first + 1
            first += count
        return None

    def solve(self, **options: Any) -> SolveResult:
        """Solve the session's problem (again only when it changed since the same options)."""
        from cda.api import solve

        text = self.text()
        key = hashlib.sha256((text + repr(sorted(options.items()))).encode()).hexdigest()
        if key in self._cache:
            return self._cache[key]
        try:
            result = solve(text, **options)
        except DSLError as exc:
            raise self._traced(exc) from None
        self.solves += 1
        self._cache = {key: result}  # the latest answer only: a session's memory stays bounded
        return result

    def _traced(self, exc: DSLError) -> CDAError:
        place = self.item_at(exc.line) if exc.line is not None else None
        if place is None:
            return exc
        name, line = place
        exc.line, exc.filename = line, name
        exc.args = (exc.render(),)
        return ItemError(name, exc)
