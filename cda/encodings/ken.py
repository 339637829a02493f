"""Ken, the background knowledge graph, and its safe query set.

Ken is a directed multigraph (networkx) whose edges carry a ``relation`` label. Its whole
public surface is four queries — :meth:`KenGraph.search`, :meth:`KenGraph.neighborhood`,
:meth:`KenGraph.path`, :meth:`KenGraph.related_by` — so a clause can never run arbitrary code
against it. Loaders for JSON/CSV/GraphML files live in :mod:`cda.adapters.ken_loaders`.
"""

from __future__ import annotations

from collections import deque

import networkx as nx

__all__ = ["KenGraph"]


class KenGraph:
    """An in-memory knowledge graph.

    >>> ken = KenGraph()
    >>> ken.add_edge("api", "depends", "auth"); ken.add_edge("auth", "depends", "db")
    >>> ken.path("api", "db", relation="depends", max_hops=2)
    ['api', 'auth', 'db']
    >>> ken.path("api", "db", relation="depends", max_hops=1) is None
    True
    """

    def __init__(self, graph: nx.MultiDiGraph | None = None) -> None:
        self._g: nx.MultiDiGraph = graph if graph is not None else nx.MultiDiGraph()

    # ---- building (used by loaders and by grounding of `fact` lines)
    def add_node(self, node: str, **attrs: object) -> None:
        self._g.add_node(str(node), **attrs)

    def add_edge(self, source: str, relation: str, target: str) -> None:
        source, target, relation = str(source), str(target), str(relation)
        if not self._has_edge(source, relation, target):
            self._g.add_edge(source, target, key=relation, relation=relation)

    def merged(self, other: KenGraph) -> KenGraph:
        """A new graph holding this one's nodes and edges and ``other``'s."""
        g = nx.MultiDiGraph()
        g.add_nodes_from(self._g.nodes(data=True))
        g.add_edges_from(self._g.edges(keys=True, data=True))
        g.add_nodes_from(other._g.nodes(data=True))
        g.add_edges_from(other._g.edges(keys=True, data=True))
        return KenGraph(g)

    def __len__(self) -> int:
        return self._g.number_of_nodes()

    def has_node(self, node: str) -> bool:
        return self._g.has_node(node)

    def has_relation(self, relation: str) -> bool:
        return any(k == relation for _, _, k in self._g.edges(keys=True))

    def _has_edge(self, source: str, relation: str, target: str) -> bool:
        return self._g.has_edge(source, target, key=relation)

    # ---- the safe query set
    def search(self, text: str, limit: int = 50) -> list[str]:
        """Node ids whose id or ``label`` attribute contains ``text`` (case-insensitive), sorted."""
        needle = text.lower()
        hits = [
            n
            for n, data in self._g.nodes(data=True)
            if needle in n.lower() or needle in str(data.get("label", "")).lower()
        ]
        return sorted(hits)[:limit]

    def neighborhood(self, node: str, hops: int = 1, relation: str | None = None) -> list[str]:
        """Nodes reachable from ``node`` in at most ``hops`` edges either way, sorted, node excluded."""
        if not self._g.has_node(node):
            return []
        seen = {node}
        frontier = [node]
        for _ in range(hops):
            nxt = []
            for n in frontier:
                edges = list(self._g.out_edges(n, keys=True)) + [(v, u, k) for u, v, k in self._g.in_edges(n, keys=True)]
                for _, m, key in edges:
                    if (relation is None or key == relation) and m not in seen:
                        seen.add(m)
                        nxt.append(m)
            frontier = nxt
        seen.discard(node)
        return sorted(seen)

    def related_by(self, node: str, relation: str) -> list[str]:
        """Direct successors of ``node`` along ``relation`` edges, sorted."""
        if not self._g.has_node(node):
            return []
        return sorted({v for _, v, k in self._g.out_edges(node, keys=True) if k == relation})

    def path(
        self, source: str, target: str, relation: str | None = None, max_hops: int | None = None
    ) -> list[str] | None:
        """A shortest directed path (list of nodes) along ``relation`` edges, or None.

        Among shortest paths, the one whose node list is lexicographically smallest is
        returned, so the answer does not depend on insertion order.
        """
        if not (self._g.has_node(source) and self._g.has_node(target)):
            return None
        parent: dict[str, str | None] = {source: None}
        queue: deque[tuple[str, int]] = deque([(source, 0)])
        while queue:
            node, depth = queue.popleft()
            if node == target:
                out = [node]
                while parent[out[-1]] is not None:
                    out.append(parent[out[-1]])  # type: ignore[arg-type]
                return out[::-1]
            if max_hops is not None and depth >= max_hops:
                continue
            succ = sorted({v for _, v, k in self._g.out_edges(node, keys=True) if relation is None or k == relation})
            for nxt in succ:
                if nxt not in parent:
                    parent[nxt] = node
                    queue.append((nxt, depth + 1))
        return None

    @property
    def graph(self) -> nx.MultiDiGraph:
        """The underlying graph, for loaders and exporters (not for clauses)."""
        return self._g
