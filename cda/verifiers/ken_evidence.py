"""Ken evidence: look for support of claim atoms in Ken, through the safe query set only.

Each atom is mapped onto Ken's four queries (:meth:`~cda.ken.graph.KenGraph.search`,
``neighborhood``, ``path``, ``related_by``) and nothing else:

* ``rel(a, b)`` — supported when ``b`` is in ``related_by(a, rel)``: the edge ``a -rel-> b``;
* ``p(a)`` — supported when ``related_by(a, p)`` is not empty: edges ``a -p-> x``;
* ``path(a, b, rel, k)`` or ``exists path(entity:a ->rel-> entity:b within k hops)`` —
  supported when ``path(a, b, rel, k)`` finds one: its edges, hop by hop.

A supported atom is *passed*, with a :class:`~cda.contracts.refs.SpanRef` per edge
(``ken:edge:<u>-<rel>-><v>``, excerpt the triple) and per node it touches (``ken:node:<id>``,
excerpt the node's ``label`` or ``text`` attribute when it has one). Ken is open-world, so no
support is never a refutation: the atom is *inconclusive*, ``data["stub"]`` is true and the
action records a receipt stub for the missing evidence. When nothing is found a ``search`` for
the subject tells "no such node" from "no such edge". Every query is returned as a
:class:`KenQueryRecord` so the action can write one receipt per query; ``query_budget`` caps
their number, and atoms past the budget are inconclusive stubs too.

An atom is read from its syntax tree (a claim the Action parsed once, with the text it is shown
as) or from the problem's atom table (a hypothesis' ground atoms), never by pattern-matching
text: ``(depends(api, auth))`` and ``depends (entity:api, auth)`` are the same atom. Text given
directly is read by the DSL parser; ``path(a, b, rel, hops)`` is Ken's own shorthand.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict

from cda.contracts.refs import SpanRef
from cda.contracts.verification import VerifierOutcome
from cda.encodings import ast as A
from cda.encodings.ir import AtomInfo
from cda.encodings.parse import parse_clause
from cda.errors import DSLError
from cda.ken.graph import KenGraph

__all__ = ["ken_evidence", "KenQueryRecord", "ClaimAtom"]

QueryName = Literal["ken.search", "ken.neighborhood", "ken.path", "ken.related_by"]

_SEARCH_LIMIT = 1000


class KenQueryRecord(BaseModel):
    """One Ken query as asked and answered: what the action writes a receipt for."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    atom: str
    name: QueryName
    args: dict[str, str | int | None]
    result: list[str]
    result_size: int


class _BudgetExhausted(Exception):
    pass


@dataclass
class _Asker:
    """Runs the safe queries, counting them against the budget and recording each one."""

    ken: KenGraph
    budget: int
    records: list[KenQueryRecord]

    def _record(self, atom: str, name: QueryName, args: dict[str, str | int | None], result: list[str]) -> None:
        self.records.append(KenQueryRecord(atom=atom, name=name, args=args, result=result, result_size=len(result)))

    def _spend(self) -> None:
        if self.budget <= 0:
            raise _BudgetExhausted()
        self.budget -= 1

    def related_by(self, atom: str, node: str, relation: str) -> list[str]:
        self._spend()
        result = self.ken.related_by(node, relation)
        self._record(atom, "ken.related_by", {"node": node, "relation": relation}, result)
        return result

    def path(self, atom: str, source: str, target: str, relation: str, hops: int) -> list[str] | None:
        self._spend()
        result = self.ken.path(source, target, relation=relation, max_hops=hops)
        args: dict[str, str | int | None] = {"source": source, "target": target, "relation": relation, "max_hops": hops}
        self._record(atom, "ken.path", args, result or [])
        return result

    def search(self, atom: str, text: str) -> list[str]:
        self._spend()
        result = self.ken.search(text, limit=_SEARCH_LIMIT)
        self._record(atom, "ken.search", {"text": text, "limit": _SEARCH_LIMIT}, result)
        return result


def _excerpt(ken: KenGraph, node: str) -> str | None:
    # a read of one attribute of a node a safe query already returned: no traversal, no code
    data = ken.graph.nodes.get(node, {})
    for key in ("label", "text"):
        if data.get(key) not in (None, ""):
            return str(data[key])
    return None


def _citations(ken: KenGraph, edges: list[tuple[str, str, str]]) -> list[SpanRef]:
    refs = [SpanRef(source=f"ken:edge:{u}-{r}->{v}", excerpt=f"{u} -{r}-> {v}") for u, r, v in edges]
    nodes: list[str] = []
    for u, _r, v in edges:
        for n in (u, v):
            if n not in nodes:
                nodes.append(n)
    refs += [SpanRef(source=f"ken:node:{n}", excerpt=_excerpt(ken, n)) for n in nodes]
    return refs


@dataclass(frozen=True)
class _Query:
    """An atom read as one of the three shapes Ken can support."""

    shape: Literal["unary", "binary", "path"]
    subject: str
    relation: str
    target: str | None = None
    hops: int | None = None


#: a claim atom: a syntax tree with the text it is shown as, a ground atom of the problem, or text
#: (read by the DSL parser; ``path(a, b, rel, hops)`` is Ken's own shorthand for a path)
ClaimAtom = tuple[str, A.Formula] | AtomInfo | str

_UNCHECKABLE = "not an atom Ken can check: write pred(a), rel(a, b) or path(a, b, rel, hops)"


def _query(pred: str, args: Sequence[str]) -> _Query | str:
    """The query shape of the atom ``pred(args)``, or the reason it cannot be checked."""
    if not args:
        return _UNCHECKABLE
    if any(not a for a in args):
        return "an argument is empty"
    if pred == "path":
        if len(args) != 4 or not args[3].isdigit():
            return "path takes (source, target, relation, hops)"
        return _Query("path", args[0], args[2], args[1], int(args[3]))
    if len(args) == 1:
        return _Query("unary", args[0], pred)
    if len(args) == 2:
        return _Query("binary", args[0], pred, args[1])
    return f"Ken holds binary relations; {pred} with {len(args)} arguments cannot be checked"


def _of_formula(formula: A.Formula) -> _Query | str:
    """The query shape of a claim's syntax tree (an ``entity:``/``provider:`` prefix is no part of
    a Ken id; an ``hyp:``/``obs:``/``pred:`` prefix says what the atom is, not what it names)."""
    if isinstance(formula, A.FPath):
        return _Query("path", formula.source.name, formula.relation, formula.target.name, formula.hops)
    if isinstance(formula, A.FAtom):
        return _query(formula.pred, [t.name for t in formula.args])
    return _UNCHECKABLE


def _path_shorthand(text: str) -> _Query | str:
    """``path(source, target, relation, hops)``, which is Ken's notation and not the DSL's."""
    head, _, rest = text.strip().partition("(")
    if head.strip() != "path" or not rest.endswith(")"):
        return _UNCHECKABLE
    return _query("path", [a.strip() for a in rest[:-1].split(",")])


def _read(atom: ClaimAtom) -> tuple[str, _Query | str]:
    """The text an atom is shown as, and its query shape (or why it cannot be checked)."""
    if isinstance(atom, AtomInfo):
        return atom.name, _query(atom.pred, atom.args)
    if isinstance(atom, tuple):
        return atom[0], _of_formula(atom[1])
    try:
        formula, weight = parse_clause(atom)
    except DSLError:
        return atom, _path_shorthand(atom)
    return atom, _of_formula(formula) if weight is None else _UNCHECKABLE


def _inconclusive(atom: str, detail: str, *, stub: bool) -> VerifierOutcome:
    return VerifierOutcome(verifier="ken", claim=atom, status="inconclusive", detail=detail, data={"stub": stub})


def _absence(asker: _Asker, atom: str, q: _Query, what: str) -> VerifierOutcome:
    """No support: say whether the subject node exists at all (one ``search``, budget permitting)."""
    note = ""
    try:
        hits = asker.search(atom, q.subject)
        note = f" (node '{q.subject}' {'exists' if q.subject in hits else 'is not in Ken'})"
    except _BudgetExhausted:
        pass
    return _inconclusive(atom, f"no supporting evidence in Ken: {what}{note}; a receipt stub is recorded", stub=True)


def _one(asker: _Asker, atom: str, q: _Query | str) -> VerifierOutcome:
    if isinstance(q, str):
        return _inconclusive(atom, q, stub=False)
    edges: list[tuple[str, str, str]]
    if q.shape == "path":
        assert q.target is not None and q.hops is not None
        nodes = asker.path(atom, q.subject, q.target, q.relation, q.hops)
        if not nodes or len(nodes) < 2:
            return _absence(asker, atom, q, f"no {q.relation} path from {q.subject} to {q.target} within {q.hops} hops")
        edges = [(u, q.relation, v) for u, v in zip(nodes, nodes[1:])]
        detail = f"Ken has the {q.relation} path {' -> '.join(nodes)} ({len(edges)} hops)"
    else:
        found = asker.related_by(atom, q.subject, q.relation)
        if q.shape == "binary":
            if q.target not in found:
                return _absence(asker, atom, q, f"no edge {q.subject} -{q.relation}-> {q.target}")
            found = [q.target]
        elif not found:
            return _absence(asker, atom, q, f"no {q.relation} edge leaves {q.subject}")
        edges = [(q.subject, q.relation, v) for v in found]
        detail = "Ken has " + ", ".join(f"{u} -{r}-> {v}" for u, r, v in edges)
    return VerifierOutcome(
        verifier="ken", claim=atom, status="passed", detail=detail, citations=_citations(asker.ken, edges),
        data={"stub": False, "edges": [[u, r, v] for u, r, v in edges]},
    )


def ken_evidence(
    ken: KenGraph, claim_atoms: Sequence[ClaimAtom], query_budget: int = 50
) -> tuple[list[VerifierOutcome], list[KenQueryRecord]]:
    """One outcome per atom, and every query asked, in order.

    >>> ken = KenGraph(); ken.add_edge("api", "depends", "auth"); ken.add_node("auth", label="Auth service")
    >>> outcomes, queries = ken_evidence(ken, ["depends(api, auth)", "down(db)"])
    >>> [(o.status, [c.source for c in o.citations]) for o in outcomes]
    [('passed', ['ken:edge:api-depends->auth', 'ken:node:api', 'ken:node:auth']), ('inconclusive', [])]
    >>> [(r.name, r.result_size) for r in queries]
    [('ken.related_by', 1), ('ken.related_by', 0), ('ken.search', 0)]
    """
    asker = _Asker(ken, max(0, int(query_budget)), [])
    outcomes: list[VerifierOutcome] = []
    for item in claim_atoms:
        atom, query = _read(item)
        try:
            outcomes.append(_one(asker, atom, query))
        except _BudgetExhausted:
            outcomes.append(
                _inconclusive(atom, f"the Ken query budget of {query_budget} is spent; a receipt stub is recorded", stub=True)
            )
    return outcomes, asker.records
