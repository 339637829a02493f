"""The coverage report: how much of an anomaly Ken can ground, computed with the safe queries only.

The abstain rule (:mod:`cda.verifiers.abstain`) needs deterministic figures, not a model's
impression: which Ken nodes the observations name, which nodes can cause the symptoms, along
which chains, and what Ken knows to fix them. Everything here is asked of Ken through the safe
query set (``search``, ``neighborhood``, ``path``, ``related_by``) and every query is recorded in
``CoverageReport.queries`` so the caller can write one receipt per query.

Ken's relation model: an edge ``u -relation-> v`` is stored as written. Relations differ in which
end is the cause, so they come in two kinds:

* *causal* relations (``causes``, ``affects``, ``triggers``, ``leads_to``): ``u`` can cause ``v``;
* *dependency* relations (``depends``, ``depends_on``, ``requires``): ``u`` fails when ``v``
  does, so ``v`` can cause ``u``.

Fix relations come in the same two kinds: ``fix -fixes-> target`` and ``target -fixed_by-> fix``.
A *root cause* of a symptom ``s`` is a node other than ``s`` with a causal path to ``s`` of at
most ``depth`` steps; its chain is the shortest such path, the lexicographically least among
equals, so the report does not depend on insertion order.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Sequence
from typing import Literal

from cda.contracts.abstain import (
    AbstainConfigError,
    CausalChain,
    ChainEdge,
    CoverageReport,
    KenQuery,
    MatchedEntity,
    RelevantFix,
    RootCause,
)
from cda.ken.graph import KenGraph

__all__ = [
    "DEFAULT_CAUSAL_RELATIONS",
    "DEFAULT_DEPENDENCY_RELATIONS",
    "DEFAULT_FIXED_BY_RELATIONS",
    "DEFAULT_FIX_RELATIONS",
    "SafeKen",
    "coverage_report",
    "observation_terms",
]

DEFAULT_CAUSAL_RELATIONS: tuple[str, ...] = ("causes", "affects", "triggers", "leads_to")
DEFAULT_DEPENDENCY_RELATIONS: tuple[str, ...] = ("depends", "depends_on", "requires")
DEFAULT_FIX_RELATIONS: tuple[str, ...] = ("fixes", "mitigates", "resolves")
DEFAULT_FIXED_BY_RELATIONS: tuple[str, ...] = ("fixed_by", "mitigated_by")

_TOKEN = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.:/\-]*")
_SEPARATORS = re.compile(r"[^a-z0-9]+")
_STOPWORDS = frozenset(
    "a an and are as at be but by for from has have in is it its of on or the to was were with "
    "not no than then this that these those into over under after before when while".split()
)


class SafeKen:
    """The safe query set of a :class:`KenGraph`, memoised and recorded.

    Each distinct query runs once; ``log`` lists them in the order first asked, which is what a
    receipt needs (name, arguments, result size).

    >>> ken = KenGraph(); ken.add_edge("db", "causes", "api")
    >>> safe = SafeKen(ken)
    >>> safe.related_by("db", "causes"), safe.related_by("db", "causes"), len(safe.log)
    (['api'], ['api'], 1)
    """

    def __init__(self, ken: KenGraph, log: list[KenQuery] | None = None) -> None:
        self._ken = ken
        self.log: list[KenQuery] = log if log is not None else []
        self._memo: dict[tuple[object, ...], list[str] | None] = {}

    def _record(
        self, name: Literal["search", "neighborhood", "path", "related_by"], args: dict[str, str | int | None],
        result: list[str] | None,
    ) -> None:
        self.log.append(KenQuery(name=name, args=args, result_size=len(result or [])))

    def search(self, text: str, limit: int) -> list[str]:
        key = ("search", text, limit)
        if key not in self._memo:
            self._memo[key] = self._ken.search(text, limit=limit)
            self._record("search", {"text": text, "limit": limit}, self._memo[key])
        return list(self._memo[key] or [])

    def neighborhood(self, node: str, hops: int, relation: str | None) -> list[str]:
        key = ("neighborhood", node, hops, relation)
        if key not in self._memo:
            self._memo[key] = self._ken.neighborhood(node, hops=hops, relation=relation)
            self._record("neighborhood", {"node": node, "hops": hops, "relation": relation}, self._memo[key])
        return list(self._memo[key] or [])

    def related_by(self, node: str, relation: str) -> list[str]:
        key = ("related_by", node, relation)
        if key not in self._memo:
            self._memo[key] = self._ken.related_by(node, relation)
            self._record("related_by", {"node": node, "relation": relation}, self._memo[key])
        return list(self._memo[key] or [])

    def path(self, source: str, target: str, relation: str | None = None, max_hops: int | None = None) -> list[str] | None:
        key = ("path", source, target, relation, max_hops)
        if key not in self._memo:
            self._memo[key] = self._ken.path(source, target, relation=relation, max_hops=max_hops)
            self._record(
                "path", {"source": source, "target": target, "relation": relation, "max_hops": max_hops}, self._memo[key]
            )
        found = self._memo[key]
        return None if found is None else list(found)

    def has_node(self, node: str) -> bool:
        """Whether Ken has ``node``: ``path(node, node)`` is ``[node]`` exactly then (a safe query)."""
        return self.path(node, node, max_hops=0) is not None


def observation_terms(text: str, min_length: int = 2) -> list[str]:
    """The words of an observation worth looking up in Ken: lower-cased, with a letter, no stopwords.

    >>> observation_terms("API latency p99 is 2300 ms; db-primary at 97%.")
    ['api', 'latency', 'p99', 'ms', 'db-primary']
    """
    out: list[str] = []
    for raw in _TOKEN.findall(text):
        term = raw.rstrip(".:/-").lower()
        if len(term) < min_length or term in _STOPWORDS or not any(c.isalpha() for c in term):
            continue
        if term not in out:
            out.append(term)
    return out


def _parts(text: str) -> list[str]:
    return [p for p in _SEPARATORS.split(text.lower()) if p]


def _names_node(term: str, node: str) -> bool:
    """Whether ``term`` names ``node`` as whole words: its parts are a contiguous run of the id's."""
    t, n = _parts(term), _parts(node)
    return bool(t) and any(n[i : i + len(t)] == t for i in range(len(n) - len(t) + 1))


def _check_relations(first: Sequence[str], second: Sequence[str], what: str) -> None:
    both = sorted(set(first) & set(second))
    if both:
        raise AbstainConfigError(f"{what}: relation {both[0]!r} cannot point both ways")


def coverage_report(
    ken: KenGraph,
    observations: Sequence[str],
    symptoms: Sequence[str],
    *,
    depth: int = 3,
    limit: int = 50,
    causal_relations: Sequence[str] = DEFAULT_CAUSAL_RELATIONS,
    dependency_relations: Sequence[str] = DEFAULT_DEPENDENCY_RELATIONS,
    fix_relations: Sequence[str] = DEFAULT_FIX_RELATIONS,
    fixed_by_relations: Sequence[str] = DEFAULT_FIXED_BY_RELATIONS,
    match: Literal["word", "substring"] = "word",
    min_term_length: int = 2,
) -> CoverageReport:
    """What Ken covers of the anomaly that ``observations`` describe and ``symptoms`` (node ids) name.

    * matched entities: for each term of the observations, ``search(term, limit)``; a hit counts
      when the term names the node id as whole words (``match="word"``: ``api`` names
      ``api_gateway`` but not ``rapid``), or, with ``match="substring"``, whenever ``search``
      returns it (which also reads the node's ``label``);
    * root causes and causal chains: see the module docstring; ``depth`` bounds the chain length;
    * required nodes: the distinct nodes of all chains;
    * relevant fixes: nodes linked by a fix relation to a required node or a symptom (a node
      linked to itself is not its own fix).

    >>> ken = KenGraph()
    >>> ken.add_edge("db", "causes", "api"); ken.add_edge("restart_db", "fixes", "db")
    >>> rep = coverage_report(ken, ["api is slow"], ["api"])
    >>> [m.node for m in rep.matched_entities], [r.node for r in rep.root_causes], rep.required_nodes
    (['api'], ['db'], ['api', 'db'])
    >>> [f.node for f in rep.relevant_fixes], rep.causal_chains_count
    (['restart_db'], 1)
    """
    if isinstance(depth, bool) or not isinstance(depth, int) or depth < 0:
        raise AbstainConfigError(f"coverage depth: expected a whole number >= 0, got {depth!r}")
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise AbstainConfigError(f"coverage limit: expected a whole number >= 1, got {limit!r}")
    if match not in ("word", "substring"):
        raise AbstainConfigError(f"coverage match: expected 'word' or 'substring', got {match!r}")
    _check_relations(causal_relations, dependency_relations, "causal/dependency relations")
    _check_relations(fix_relations, fixed_by_relations, "fix/fixed_by relations")
    causal, dependency = sorted(set(causal_relations)), sorted(set(dependency_relations))
    fixes, fixed_by = sorted(set(fix_relations)), sorted(set(fixed_by_relations))
    safe = SafeKen(ken)

    # ---- matched entities
    terms_of: dict[str, set[str]] = defaultdict(set)
    seen_in: dict[str, set[int]] = defaultdict(set)
    for index, text in enumerate(observations):
        for term in observation_terms(text, min_term_length):
            for node in safe.search(term, limit):
                if match == "substring" or _names_node(term, node):
                    terms_of[node].add(term)
                    seen_in[node].add(index)
    entities = [
        MatchedEntity(node=n, terms=sorted(terms_of[n]), observations=sorted(seen_in[n])) for n in sorted(terms_of)
    ]

    # ---- symptoms that Ken has
    wanted = sorted(set(symptoms))
    present = [s for s in wanted if safe.has_node(s)]
    missing = [s for s in wanted if s not in present]

    # ---- root causes: backwards breadth-first search from each symptom over causal steps
    causes_memo: dict[str, list[tuple[str, ChainEdge]]] = {}

    def causes_of(node: str) -> list[tuple[str, ChainEdge]]:
        if node not in causes_memo:
            found: list[tuple[str, ChainEdge]] = []
            for rel in causal:
                for cand in safe.neighborhood(node, 1, rel):
                    if node in safe.related_by(cand, rel):
                        found.append((cand, ChainEdge(source=cand, relation=rel, target=node)))
            for rel in dependency:
                for cand in safe.related_by(node, rel):
                    found.append((cand, ChainEdge(source=node, relation=rel, target=cand)))
            found.sort(key=lambda p: (p[0], p[1].relation, p[1].source, p[1].target))
            causes_memo[node] = found
        return causes_memo[node]

    reaches: dict[str, dict[str, int]] = defaultdict(dict)  # cause -> symptom -> hops
    chains: list[CausalChain] = []
    for symptom in present:
        dist = {symptom: 0}
        effects: dict[str, list[tuple[str, ChainEdge]]] = defaultdict(list)
        frontier = [symptom]
        for hops in range(1, depth + 1):
            nxt: list[str] = []
            for node in frontier:
                for cause, edge in causes_of(node):
                    effects[cause].append((node, edge))
                    if cause not in dist:
                        dist[cause] = hops
                        nxt.append(cause)
            frontier = sorted(nxt)
        for cause in sorted(dist):
            if cause == symptom:
                continue
            reaches[cause][symptom] = dist[cause]
            nodes, edges, cur = [cause], [], cause
            while cur != symptom:
                step = min(
                    ((n, e) for n, e in effects[cur] if dist[n] == dist[cur] - 1),
                    key=lambda p: (p[0], p[1].relation, p[1].source, p[1].target),
                )
                nodes.append(step[0])
                edges.append(step[1])
                cur = step[0]
            chains.append(CausalChain(root_cause=cause, symptom=symptom, nodes=nodes, edges=edges))
    chains.sort(key=lambda c: (c.root_cause, c.symptom))
    roots = [
        RootCause(node=n, symptoms=sorted(reaches[n]), hops=min(reaches[n].values())) for n in sorted(reaches)
    ]
    required = sorted({n for c in chains for n in c.nodes})

    # ---- relevant fixes of the causal picture
    fix_targets: dict[str, set[str]] = defaultdict(set)
    fix_rels: dict[str, set[str]] = defaultdict(set)
    for target in sorted(set(required) | set(present)):
        for rel in fixes:
            for cand in safe.neighborhood(target, 1, rel):
                if target in safe.related_by(cand, rel):
                    fix_targets[cand].add(target)
                    fix_rels[cand].add(rel)
        for rel in fixed_by:
            for cand in safe.related_by(target, rel):
                if cand == target:
                    continue
                fix_targets[cand].add(target)
                fix_rels[cand].add(rel)
    relevant = [
        RelevantFix(node=n, targets=sorted(fix_targets[n]), relations=sorted(fix_rels[n])) for n in sorted(fix_targets)
    ]

    return CoverageReport(
        observations=list(observations),
        symptoms=present,
        unmatched_symptoms=missing,
        depth=depth,
        causal_relations=causal,
        dependency_relations=dependency,
        fix_relations=fixes,
        fixed_by_relations=fixed_by,
        matched_entities=entities,
        root_causes=roots,
        causal_chains=chains,
        required_nodes=required,
        relevant_fixes=relevant,
        queries=safe.log,
    )
