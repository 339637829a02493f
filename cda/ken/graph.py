"""Ken, the background knowledge graph, and its safe query set.

Ken is a directed multigraph (networkx) whose edges carry a ``relation`` label. Its whole
public surface is four queries — :meth:`KenGraph.search`, :meth:`KenGraph.neighborhood`,
:meth:`KenGraph.path`, :meth:`KenGraph.related_by` — so a clause can never run arbitrary code
against it. Loaders for JSON/CSV/GraphML files live in :mod:`cda.ken.loaders`.

**Why the queries are built the way they are.** An action asks Ken thousands of queries
before its first summary (the coverage step walks the causal neighbourhood of every symptom and
searches the whole graph for each word of the observations), and the spec wants the first
summary within 3 s on a graph of a million edges (``benchmarks/bench_action.py``). Scanning every
node from Python took a quarter of a second per ``search`` there, and copying the graph for
grounding ten seconds. So:

* ``search`` reads a *text index*: every node's lower-cased id and label in one string, in
  node-id order, so that one ``str.find`` (C speed: about 16 ms over a million edges' worth of
  labels) finds the next hit and a search stops after ``limit`` hits. It is built on the first
  ``search`` (or by :meth:`KenGraph.prepare`) and dropped when a node or a label is added;
* the traversals read networkx's own adjacency dicts and test the relation with one dict
  lookup per neighbour; networkx's edge views made them about five times slower;
* ``merged`` with an empty graph on either side — what grounding does to every problem, so
  that its ``fact`` lines cannot leak into the caller's graph — shares the storage and its
  index, and copies only when one side is written to.

None of this changes an answer (``tests/test_ken_index.py`` checks them against the
definitions on random graphs). It does mean the graph must change only through
:meth:`~KenGraph.add_node` and :meth:`~KenGraph.add_edge`: :attr:`KenGraph.graph` is a read-only
view (networkx raises on a structural change), and a node's attribute dict must not be edited
in place.

**networkx on demand.** Every problem with two-place ``fact`` lines builds a Ken, and importing
networkx costs more than the rest of ``cda check`` (about 50 ms). A graph built here is therefore
held in :class:`_DictGraph`, plain dicts laid out as networkx lays out a ``MultiDiGraph`` (so the
traversals read it the same way); it becomes a networkx graph, in place, only when something asks
for :attr:`KenGraph.graph`. Graphs from the loaders are networkx graphs from the start.
"""

from __future__ import annotations

import weakref
from bisect import bisect_right
from collections import deque
from collections.abc import Hashable, Iterable, Mapping
from itertools import accumulate
from typing import TYPE_CHECKING, Any

from cda.gcpause import gc_paused

if TYPE_CHECKING:
    import networkx as nx

__all__ = ["KenGraph"]

#: separates the id and the label of a node, and one node from the next, in the text index.
#: A needle holding it could match across two fields, so such a needle is answered by a scan.
_SEP = "\x00"

_Adjacency = Mapping[Any, Mapping[Any, Mapping[Any, Any]]]  # node -> neighbour -> key -> edge data


def _along(adj: _Adjacency, node: Hashable, relation: str | None) -> Iterable[Any]:
    """The neighbours of ``node`` in ``adj`` (networkx's successor or predecessor dict) joined to
    it by a ``relation`` edge (by any edge when None); each one once."""
    nbrs = adj[node]
    if relation is None:
        return nbrs
    return [m for m, keys in nbrs.items() if relation in keys]


class _DictGraph:
    """The part of networkx's ``MultiDiGraph`` Ken uses, in the same dicts: ``_node[n]`` the
    attributes, ``_succ[u][v][key]`` (the same dict as ``_pred[v][u][key]``) an edge's data."""

    __slots__ = ("_node", "_succ", "_pred", "__weakref__")
    frozen = False

    def __init__(self) -> None:
        self._node: dict[Any, dict[str, Any]] = {}
        self._succ: dict[Any, dict[Any, dict[Any, dict[str, Any]]]] = {}
        self._pred: dict[Any, dict[Any, dict[Any, dict[str, Any]]]] = {}

    def __iter__(self) -> Any:
        return iter(self._node)

    def __contains__(self, node: object) -> bool:
        try:
            return node in self._node
        except TypeError:
            return False

    def has_node(self, node: object) -> bool:
        return node in self

    def number_of_nodes(self) -> int:
        return len(self._node)

    def add_node(self, node: Any, **attrs: Any) -> None:
        if node not in self._node:
            self._node[node] = {}
            self._succ[node] = {}
            self._pred[node] = {}
        self._node[node].update(attrs)

    def add_edge(self, u: Any, v: Any, key: Any, **attrs: Any) -> None:
        self.add_node(u)
        self.add_node(v)
        keys = self._succ[u].get(v)
        if keys is None:
            keys = self._succ[u][v] = self._pred[v][u] = {}
        keys.setdefault(key, {}).update(attrs)

    def has_edge(self, u: Any, v: Any, key: Any) -> bool:
        return key in self._succ.get(u, {}).get(v, {})

    def nodes(self, data: bool | str = False, default: Any = None) -> Any:
        if data is True:
            return list(self._node.items())
        if data is False:
            return list(self._node)
        return [(n, attrs.get(data, default)) for n, attrs in self._node.items()]

    def edges(self, keys: bool = False, data: bool = False) -> list[tuple[Any, ...]]:
        out: list[tuple[Any, ...]] = []
        for u, nbrs in self._succ.items():
            for v, keydict in nbrs.items():
                for k, d in keydict.items():
                    out.append((u, v) + ((k,) if keys else ()) + ((d,) if data else ()))
        return out


def _to_networkx(g: _DictGraph) -> nx.MultiDiGraph:
    import networkx as nx

    out = nx.MultiDiGraph()
    with gc_paused():
        out.add_nodes_from(g.nodes(data=True))
        out.add_edges_from(g.edges(keys=True, data=True))
    return out


class _TextIndex:
    """The text ``search`` reads, laid out for ``str.find``.

    Record ``i`` is ``id.lower() + SEP + str(label).lower() + SEP`` of the i-th node in id order
    and starts at ``starts[i]`` (``starts`` ends with the text's length). A needle without
    ``SEP`` cannot match across two fields, so the record a hit starts in is the node it names,
    and the hits come in the order ``search`` returns them. ``ids`` is None when some node id is
    not a string (only a graph handed to the constructor can have one): ``search`` then scans,
    failing exactly as it always has.
    """

    __slots__ = ("ids", "starts", "text")

    def __init__(self, g: nx.MultiDiGraph | _DictGraph) -> None:
        self.ids: list[str] | None = None
        self.starts: list[int] = [0]
        self.text = ""
        if not all(isinstance(n, str) for n in g):
            return
        with gc_paused():  # a few hundred thousand small objects, none of them in a cycle
            labelled = sorted(g.nodes(data="label", default=""), key=lambda pair: pair[0])
            records = [n.lower() + _SEP + str(label).lower() + _SEP for n, label in labelled]
            self.ids = [n for n, _ in labelled]
            self.starts = list(accumulate(map(len, records), initial=0))
            self.text = "".join(records)

    def hits(self, needle: str, limit: int | None) -> list[str]:
        """The ids whose id or label contains ``needle`` (lower-case, no SEP): the first ``limit``."""
        assert self.ids is not None
        if not needle:
            return self.ids[:limit]
        out: list[str] = []
        find, starts, ids = self.text.find, self.starts, self.ids
        pos = 0
        while limit is None or len(out) < limit:
            at = find(needle, pos)
            if at < 0:
                break
            record = bisect_right(starts, at) - 1
            out.append(ids[record])
            pos = starts[record + 1]
        return out


class _Store:
    """A graph, what is derived from it, and the KenGraphs that share it (copy-on-write).

    ``relations`` is the set of edge keys, kept in step by ``add_edge`` (None until first needed
    for a graph handed to the constructor); ``text`` is the search index, None until built.
    ``frozen`` marks a graph that cannot be written in place (a read-only networkx graph handed
    to the constructor): the first write copies it, as a write to a shared store does.
    """

    __slots__ = ("g", "relations", "text", "view", "holders", "frozen", "__weakref__")

    def __init__(self, g: nx.MultiDiGraph | _DictGraph, relations: set[Hashable] | None) -> None:
        self.g = g
        self.relations = relations
        self.text: _TextIndex | None = None
        self.view: nx.MultiDiGraph | None = None
        self.holders: weakref.WeakSet[KenGraph] = weakref.WeakSet()
        self.frozen = bool(getattr(g, "frozen", False))  # networkx's is_frozen


#: the read-only views :attr:`KenGraph.graph` handed out, to the storage each one shows
_VIEWS: weakref.WeakKeyDictionary[nx.MultiDiGraph, weakref.ref[_Store]] = weakref.WeakKeyDictionary()


def _copy_graph(*sources: nx.MultiDiGraph | _DictGraph) -> _DictGraph:
    g = _DictGraph()
    with gc_paused():
        for src in sources:
            for n, attrs in src.nodes(data=True):
                g.add_node(n, **attrs)
            for u, v, k, d in src.edges(keys=True, data=True):
                g.add_edge(u, v, k, **d)
    return g


class KenGraph:
    """An in-memory knowledge graph.

    >>> ken = KenGraph()
    >>> ken.add_edge("api", "depends", "auth"); ken.add_edge("auth", "depends", "db")
    >>> ken.path("api", "db", relation="depends", max_hops=2)
    ['api', 'auth', 'db']
    >>> ken.path("api", "db", relation="depends", max_hops=1) is None
    True
    """

    def __init__(self, graph: nx.MultiDiGraph | _DictGraph | None = None) -> None:
        """Ken over ``graph``, or over an empty graph.

        A graph handed in is taken over: change it only through this object from now on, or
        the search index goes stale. The :attr:`graph` view of another KenGraph is shared with
        that one until either of them is written to.
        """
        owner = _VIEWS.get(graph) if graph is not None else None
        shared = owner() if owner is not None else None
        if shared is not None:
            self._store = shared
        elif graph is None:
            self._store = _Store(_DictGraph(), set())
        else:
            self._store = _Store(graph, None)
        self._store.holders.add(self)

    def __copy__(self) -> KenGraph:
        """A copy that shares this one's storage until either is written to."""
        twin = type(self).__new__(type(self))
        twin.__dict__.update(self.__dict__)
        self._store.holders.add(twin)
        return twin

    def __getstate__(self) -> dict[str, Any]:
        """Pickled as its graph alone: the index is rebuilt on use, and sharing is per process."""
        return {"graph": self._store.g}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self._store = _Store(state["graph"], None)
        self._store.holders.add(self)

    # ---- storage: shared until written
    def _share(self) -> KenGraph:
        twin = KenGraph.__new__(KenGraph)
        twin._store = self._store
        self._store.holders.add(twin)
        return twin

    def _writable(self) -> _Store:
        """This graph's storage, copied first when another KenGraph shares it or it is frozen."""
        store = self._store
        if store.frozen or len(store.holders) > 1:
            store.holders.discard(self)
            relations = set(store.relations) if store.relations is not None else None
            store = _Store(_copy_graph(store.g), relations)
            store.holders.add(self)
            self._store = store
        return store

    def _relations(self) -> set[Hashable]:
        store = self._store
        if store.relations is None:
            store.relations = {k for _, _, k in store.g.edges(keys=True)}
        return store.relations

    def prepare(self) -> None:
        """Build the search index now rather than on the first ``search`` (say, after loading).

        >>> ken = KenGraph(); ken.add_node("db", label="Primary database"); ken.prepare()
        >>> ken.search("primary")
        ['db']
        """
        self._relations()
        if self._store.text is None:
            self._store.text = _TextIndex(self._store.g)

    # ---- building (used by loaders and by grounding of `fact` lines)
    def add_node(self, node: str, **attrs: object) -> None:
        node = str(node)
        store = self._writable()
        if "label" in attrs or node not in store.g:
            store.text = None  # a new node, or a new label, changes what search finds
        store.g.add_node(node, **attrs)

    def add_edge(self, source: str, relation: str, target: str) -> None:
        source, target, relation = str(source), str(target), str(relation)
        if self._has_edge(source, relation, target):
            return
        store = self._writable()
        g = store.g
        if store.text is not None and (source not in g or target not in g):
            store.text = None
        g.add_edge(source, target, key=relation, relation=relation)
        if store.relations is not None:
            store.relations.add(relation)

    def merged(self, other: KenGraph) -> KenGraph:
        """A new graph holding this one's nodes and edges and ``other``'s.

        When either side is empty the result shares the other's storage until one of them is
        written to, so grounding a problem against a large Ken does not copy it.
        """
        if len(other) == 0:
            return self._share()
        if len(self) == 0:
            return other._share()
        return KenGraph(_copy_graph(self._store.g, other._store.g))

    def __len__(self) -> int:
        return int(self._store.g.number_of_nodes())

    def has_node(self, node: str) -> bool:
        return bool(self._store.g.has_node(node))

    def has_relation(self, relation: str) -> bool:
        return relation in self._relations()

    def _has_edge(self, source: str, relation: str, target: str) -> bool:
        return bool(self._store.g.has_edge(source, target, key=relation))

    # ---- the safe query set
    def search(self, text: str, limit: int = 50) -> list[str]:
        """Node ids whose id or ``label`` attribute contains ``text`` (case-insensitive), sorted.

        >>> ken = KenGraph(); ken.add_node("db", label="Primary database"); ken.add_node("dbproxy")
        >>> ken.search("DB"), ken.search("primary"), ken.search("db", limit=1)
        (['db', 'dbproxy'], ['db'], ['db'])
        """
        needle = text.lower()
        store = self._store
        if store.text is None:
            store.text = _TextIndex(store.g)
        index = store.text
        if index.ids is None or _SEP in needle:
            return self._scan(needle, limit)
        if isinstance(limit, int) and limit > 0:
            return index.hits(needle, limit)
        return index.hits(needle, None)[:limit]  # a limit of 0 or below slices as it always did

    def _scan(self, needle: str, limit: int) -> list[str]:
        """``search`` without the index: every node, one by one."""
        hits = [
            n
            for n, data in self._store.g.nodes(data=True)
            if needle in n.lower() or needle in str(data.get("label", "")).lower()
        ]
        return sorted(hits)[:limit]

    def neighborhood(self, node: str, hops: int = 1, relation: str | None = None) -> list[str]:
        """Nodes reachable from ``node`` in at most ``hops`` edges either way, sorted, node excluded."""
        g = self._store.g
        if not g.has_node(node):
            return []
        # networkx's adjacency dicts, read directly: its edge views cost more than the walk
        succ, pred = g._succ, g._pred
        seen = {node}
        frontier = [node]
        for _ in range(hops):
            nxt = []
            for n in frontier:
                for adj in (succ, pred):
                    for m in _along(adj, n, relation):
                        if m not in seen:
                            seen.add(m)
                            nxt.append(m)
            frontier = nxt
        seen.discard(node)
        return sorted(seen)

    def related_by(self, node: str, relation: str) -> list[str]:
        """Direct successors of ``node`` along ``relation`` edges, sorted."""
        g = self._store.g
        if not g.has_node(node):
            return []
        return sorted(_along(g._succ, node, relation))

    def path(
        self, source: str, target: str, relation: str | None = None, max_hops: int | None = None
    ) -> list[str] | None:
        """A shortest directed path (list of nodes) along ``relation`` edges, or None.

        Among shortest paths, the one whose node list is lexicographically smallest is
        returned, so the answer does not depend on insertion order. The search is breadth-first
        with each node's successors in sorted order, so the first parent found for a node lies
        on the least shortest path to it, and the search can stop when it first meets ``target``.
        """
        g = self._store.g
        if not (g.has_node(source) and g.has_node(target)):
            return None
        if source == target:
            return [source]
        succ = g._succ
        parent: dict[str, str] = {}
        queue: deque[tuple[str, int]] = deque([(source, 0)])
        while queue:
            node, depth = queue.popleft()
            if max_hops is not None and depth >= max_hops:
                continue
            for nxt in sorted(_along(succ, node, relation)):
                if nxt != source and nxt not in parent:
                    parent[nxt] = node
                    if nxt == target:
                        out = [nxt]
                        while out[-1] != source:
                            out.append(parent[out[-1]])
                        return out[::-1]
                    queue.append((nxt, depth + 1))
        return None

    @property
    def graph(self) -> nx.MultiDiGraph:
        """A read-only view of the underlying graph, for loaders and exporters (not for clauses).

        Read-only because the search index follows :meth:`add_node` and :meth:`add_edge` only;
        networkx raises on any structural change made through the view.
        """
        store = self._store
        if isinstance(store.g, _DictGraph):  # networkx from here on, for this storage
            store.g = _to_networkx(store.g)
        if store.view is None:
            store.view = store.g.copy(as_view=True)
            _VIEWS[store.view] = weakref.ref(store)  # so that KenGraph(ken.graph) shares: see __init__
        return store.view
