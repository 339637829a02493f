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
for :attr:`KenGraph.graph`.

**Loaded graphs are compact.** A graph from the loaders is a
:class:`~cda.ken.store.FrozenGraph` (integer ids, sorted arrays: about a tenth of the memory of
the dicts, and built in a few numpy sorts; docs/benchmarks.md, "Ken: loading a million edges").
It never changes: writes to it (the grounder's ``fact`` lines, an Action's inline nodes) go to a
dict graph laid over it, so that copy-on-write copies only what was written, and the queries
read both layers. Merging two graphs that both hold data builds a new frozen graph.
"""

from __future__ import annotations

import weakref
from bisect import bisect_right
from collections import deque
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping
from itertools import accumulate
from typing import TYPE_CHECKING, Any

from cda.gcpause import gc_paused

if TYPE_CHECKING:
    import networkx as nx

    from cda.ken.store import FrozenGraph

__all__ = ["NO_LABEL", "KenGraph"]

class _NoLabel:
    """The label of a node that has none, in a frozen graph (``None`` is a label: it reads "none")."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "NO_LABEL"

    def __reduce__(self) -> str:
        return "NO_LABEL"  # pickled by name: the module's one instance comes back


NO_LABEL = _NoLabel()

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


_Step = Callable[[Any], Iterable[Any]]


def _dict_step(adj: _Adjacency, relation: str | None) -> _Step:
    return lambda node: _along(adj, node, relation)


def _layered_step(base: _Step, adj: _Adjacency, relation: str | None) -> _Step:
    """Neighbours in a frozen graph and in the dict graph laid over it: each once, sorted."""

    def step(node: Any) -> Iterable[Any]:
        below = base(node)
        if node not in adj:
            return below
        above = _along(adj, node, relation)
        if not above:
            return below
        return sorted(set(below).union(above))

    return step


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

    def __init__(self, labelled: Iterable[tuple[Any, Any]] | None = None) -> None:
        """Over (id, label) pairs; a label of :data:`~cda.ken.store.NO_LABEL` reads as ""."""
        self.ids: list[str] | None = None
        self.starts: Any = [0]
        self.text = ""
        if labelled is not None:
            self._fill(list(labelled), is_sorted=False)

    @classmethod
    def of(cls, g: nx.MultiDiGraph | _DictGraph) -> _TextIndex:
        index = cls()
        if all(isinstance(n, str) for n in g):
            index._fill(g.nodes(data="label", default=""), is_sorted=False)
        return index

    @classmethod
    def of_frozen(cls, fg: FrozenGraph) -> _TextIndex:
        index = cls()
        index._fill(zip(fg.names, fg.labels, strict=True), is_sorted=True, ids=fg.names)
        return index

    def _fill(self, labelled: Iterable[tuple[Any, Any]], *, is_sorted: bool, ids: list[str] | None = None) -> None:
        from array import array

        with gc_paused():  # a few hundred thousand small objects, none of them in a cycle
            pairs = labelled if is_sorted else sorted(labelled, key=lambda pair: pair[0])
            records = [n.lower() + _SEP + _label_text(label) + _SEP for n, label in pairs]
            self.ids = ids if ids is not None else [n for n, _ in pairs]  # type: ignore[union-attr]
            self.starts = array("q", accumulate(map(len, records), initial=0))
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


def _label_text(label: Any) -> str:
    """A label as search reads it: lower case; none at all reads as the empty string."""
    return "" if label is NO_LABEL else str(label).lower()


class _Store:
    """A graph, what is derived from it, and the KenGraphs that share it (copy-on-write).

    ``base`` is a frozen graph loaded from a file, or None; ``g`` the dict (or networkx) graph
    written over it, or the whole graph when there is no base. ``relations`` is the set of
    ``g``'s edge keys, kept in step by ``add_edge`` (None until first needed for a graph handed
    to the constructor); ``text`` is the search index, None until built. ``frozen`` marks a
    graph that cannot be written in place (a read-only networkx graph handed to the
    constructor): the first write copies it, as a write to a shared store does.
    """

    __slots__ = ("g", "base", "relations", "text", "view", "holders", "frozen", "size", "__weakref__")

    def __init__(self, g: nx.MultiDiGraph | _DictGraph, relations: set[Hashable] | None,
                 base: FrozenGraph | None = None) -> None:
        self.g = g
        self.base = base
        self.relations = relations
        self.text: _TextIndex | None = None
        self.view: nx.MultiDiGraph | None = None
        self.holders: weakref.WeakSet[KenGraph] = weakref.WeakSet()
        self.frozen = bool(getattr(g, "frozen", False))  # networkx's is_frozen
        self.size: int | None = None  # the node count, with a base (None: count again)

    def layered(self) -> bool:
        """Whether a base is written over (the queries then read two layers)."""
        return self.base is not None and self.g.number_of_nodes() > 0


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


def _delta_edges(g: nx.MultiDiGraph | _DictGraph) -> Iterator[tuple[str, str, str]]:
    return ((u, str(k), v) for u, v, k in g.edges(keys=True))


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

    @classmethod
    def of_frozen(cls, base: FrozenGraph) -> KenGraph:
        """Ken over a frozen graph (what the loaders build); writes go to a layer over it."""
        ken = cls.__new__(cls)
        ken._store = _Store(_DictGraph(), set(), base)
        ken._store.holders.add(ken)
        return ken

    def __copy__(self) -> KenGraph:
        """A copy that shares this one's storage until either is written to."""
        twin = type(self).__new__(type(self))
        twin.__dict__.update(self.__dict__)
        self._store.holders.add(twin)
        return twin

    def __getstate__(self) -> dict[str, Any]:
        """Pickled as its graph alone: the index is rebuilt on use, and sharing is per process."""
        return {"graph": self._store.g, "base": self._store.base}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self._store = _Store(state["graph"], None, state.get("base"))
        self._store.holders.add(self)

    # ---- storage: shared until written
    def _share(self) -> KenGraph:
        twin = KenGraph.__new__(KenGraph)
        twin._store = self._store
        self._store.holders.add(twin)
        return twin

    def _writable(self) -> _Store:
        """This graph's storage, copied first when another KenGraph shares it or it is frozen.
        A frozen base is never copied: only what was written over it."""
        store = self._store
        if store.frozen or len(store.holders) > 1:
            store.holders.discard(self)
            relations = set(store.relations) if store.relations is not None else None
            copied = _Store(_copy_graph(store.g), relations, store.base)
            copied.size = store.size
            if store.base is not None:
                copied.text = store.text  # the base's index, shared: the base never changes
            store = copied
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
        self._index()

    def _index(self) -> _TextIndex:
        """The search index: of the base when there is one (the layer over it is scanned)."""
        store = self._store
        if store.text is None:
            store.text = _TextIndex.of_frozen(store.base) if store.base is not None else _TextIndex.of(store.g)
        return store.text

    # ---- building (used by loaders and by grounding of `fact` lines)
    def add_node(self, node: str, **attrs: object) -> None:
        node = str(node)
        store = self._writable()
        if store.base is None and ("label" in attrs or node not in store.g):
            store.text = None  # a new node, or a new label, changes what search finds
        if node not in store.g:
            store.size = None
        store.g.add_node(node, **attrs)

    def add_edge(self, source: str, relation: str, target: str) -> None:
        source, target, relation = str(source), str(target), str(relation)
        if self._has_edge(source, relation, target):
            return
        store = self._writable()
        g = store.g
        if source not in g or target not in g:
            store.size = None
            if store.base is None and store.text is not None:
                store.text = None
        g.add_edge(source, target, key=relation, relation=relation)
        if store.relations is not None:
            store.relations.add(relation)

    def merged(self, other: KenGraph) -> KenGraph:
        """A new graph holding this one's nodes and edges and ``other``'s.

        When either side is empty the result shares the other's storage until one of them is
        written to, so grounding a problem against a large Ken does not copy it. When either
        side holds a loaded (frozen) graph, the result is a new frozen graph.
        """
        if len(other) == 0:
            return self._share()
        if len(self) == 0:
            return other._share()
        if self._store.base is None and other._store.base is None:
            return KenGraph(_copy_graph(self._store.g, other._store.g))
        from cda.ken.store import GraphBuilder

        builder = GraphBuilder()
        with gc_paused():
            for side in (self._store, other._store):
                nodes: Iterable[tuple[str, Mapping[str, Any]]] = side.g.nodes(data=True)
                if side.base is not None:
                    nodes = _chain(side.base.nodes_in_order(), nodes)
                builder.add_graph(nodes, side.base, _delta_edges(side.g))
            return KenGraph.of_frozen(builder.freeze())

    def __len__(self) -> int:
        store = self._store
        if store.base is None:
            return int(store.g.number_of_nodes())
        if store.size is None:
            base = store.base
            store.size = len(base) + sum(1 for n in store.g if n not in base)
        return store.size

    def has_node(self, node: str) -> bool:
        return self._contains(node)

    def _contains(self, node: str) -> bool:
        """``has_node``, for the queries' own use (a subclass may refuse the public one)."""
        store = self._store
        return bool(store.g.has_node(node)) or (store.base is not None and node in store.base)

    def has_relation(self, relation: str) -> bool:
        base = self._store.base
        return relation in self._relations() or (base is not None and relation in base.rel_ids)

    def _has_edge(self, source: str, relation: str, target: str) -> bool:
        store = self._store
        if store.base is not None and store.base.has_edge(source, relation, target):
            return True
        return bool(store.g.has_edge(source, target, key=relation))

    def node_ids(self) -> list[str]:
        """Every node id, in the order the nodes were added (without building the networkx view)."""
        store = self._store
        if store.base is None:
            return list(store.g)
        base = store.base
        return [n for n, _ in base.nodes_in_order()] + [n for n in store.g if n not in base]

    # ---- the safe query set
    def search(self, text: str, limit: int = 50) -> list[str]:
        """Node ids whose id or ``label`` attribute contains ``text`` (case-insensitive), sorted.

        >>> ken = KenGraph(); ken.add_node("db", label="Primary database"); ken.add_node("dbproxy")
        >>> ken.search("DB"), ken.search("primary"), ken.search("db", limit=1)
        (['db', 'dbproxy'], ['db'], ['db'])
        """
        needle = text.lower()
        index = self._index()
        if index.ids is None or _SEP in needle:
            return self._scan(needle, limit)
        if self._store.layered():
            return self._layered_search(index, needle, limit)
        if isinstance(limit, int) and limit > 0:
            return index.hits(needle, limit)
        return index.hits(needle, None)[:limit]  # a limit of 0 or below slices as it always did

    def _layered_search(self, index: _TextIndex, needle: str, limit: int) -> list[str]:
        """``search`` over a base and the layer written over it: the base's index, less the nodes
        the layer relabelled, and a scan of the layer's own nodes and relabelled ones."""
        store = self._store
        base, g = store.base, store.g
        assert base is not None
        relabelled = {n for n, attrs in g.nodes(data=True) if n in base and "label" in attrs}
        want = limit + len(relabelled) if isinstance(limit, int) and limit > 0 else None
        hits = [n for n in index.hits(needle, want) if n not in relabelled]
        hits += [n for n, attrs in g.nodes(data=True)
                 if (n not in base or n in relabelled)
                 and (needle in n.lower() or needle in _label_text(attrs.get("label", "")))]
        return sorted(set(hits))[:limit]

    def _labelled(self) -> Iterator[tuple[Any, Any]]:
        """(id, label) of every node, the layer's label winning over the base's."""
        store = self._store
        g, base = store.g, store.base
        if base is not None:
            for n, label in zip(base.names, base.labels, strict=True):
                attrs = g._node.get(n) if n in g else None
                yield n, (attrs["label"] if attrs is not None and "label" in attrs else label)
        for n, attrs in g.nodes(data=True):
            if base is None or n not in base:
                yield n, attrs.get("label", "")

    def _scan(self, needle: str, limit: int) -> list[str]:
        """``search`` without the index: every node, one by one."""
        hits = [n for n, label in self._labelled() if needle in n.lower() or needle in _label_text(label)]
        return sorted(hits)[:limit]

    def _steps(self, relation: str | None, *, forward: bool = True, backward: bool = True) -> list[_Step]:
        """Functions from a node to its successors and predecessors along ``relation`` (any when
        None), each neighbour once; from a base alone, or a base and a layer, in id order."""
        store = self._store
        g, base = store.g, store.base
        out: list[_Step] = []
        for wanted, adj_name in ((forward, "_succ"), (backward, "_pred")):
            if not wanted:
                continue
            adj = getattr(g, adj_name)
            if base is None:
                out.append(_dict_step(adj, relation))
                continue
            step = base.stepper(adj_name == "_succ", relation)  # memoised by the base
            out.append(_layered_step(step, adj, relation) if len(adj) else step)
        return out

    def neighborhood(self, node: str, hops: int = 1, relation: str | None = None) -> list[str]:
        """Nodes reachable from ``node`` in at most ``hops`` edges either way, sorted, node excluded."""
        if not self._contains(node):
            return []
        store = self._store
        if store.base is not None and not store.layered():
            return store.base.ball(node, hops, relation)  # a walk over integer ids
        # networkx's adjacency dicts (or the frozen graph's arrays), read directly: its edge
        # views cost more than the walk
        steps = self._steps(relation)
        seen = {node}
        frontier = [node]
        for _ in range(hops):
            nxt = []
            for n in frontier:
                for step in steps:
                    for m in step(n):
                        if m not in seen:
                            seen.add(m)
                            nxt.append(m)
            frontier = nxt
        seen.discard(node)
        return sorted(seen)

    def related_by(self, node: str, relation: str) -> list[str]:
        """Direct successors of ``node`` along ``relation`` edges, sorted."""
        store = self._store
        if store.base is not None and not store.layered():
            return store.base.succ(node, relation)  # sorted already: ids are in name order
        if not self._contains(node):
            return []
        (succ,) = self._steps(relation, backward=False)
        return sorted(succ(node))

    def path(
        self, source: str, target: str, relation: str | None = None, max_hops: int | None = None
    ) -> list[str] | None:
        """A shortest directed path (list of nodes) along ``relation`` edges, or None.

        Among shortest paths, the one whose node list is lexicographically smallest is
        returned, so the answer does not depend on insertion order. The search is breadth-first
        with each node's successors in sorted order, so the first parent found for a node lies
        on the least shortest path to it, and the search can stop when it first meets ``target``.
        """
        if not (self._contains(source) and self._contains(target)):
            return None
        if source == target:
            return [source]
        store = self._store
        if store.base is not None and not store.layered():
            return store.base.least_path(source, target, relation, max_hops)  # a walk over integer ids
        (succ,) = self._steps(relation, backward=False)
        if self._store.base is None:  # a layered base's steps come sorted already
            return least_path(lambda node: sorted(succ(node)), source, target, max_hops)
        return least_path(succ, source, target, max_hops)

    @property
    def graph(self) -> nx.MultiDiGraph:
        """A read-only view of the underlying graph, for loaders and exporters (not for clauses).

        Read-only because the search index follows :meth:`add_node` and :meth:`add_edge` only;
        networkx raises on any structural change made through the view. A frozen base is
        turned into networkx here, with its layer, in the order the graph was built: it costs
        the memory compact storage saves, so the queries never ask for it.
        """
        store = self._store
        if store.base is not None:
            g = _DictGraph()
            with gc_paused():
                for n, attrs in _chain(store.base.nodes_in_order(), store.g.nodes(data=True)):
                    g.add_node(n, **attrs)
                for u, rel, v in _chain(store.base.edges_in_order(), _delta_edges(store.g)):
                    g.add_edge(u, v, rel, relation=rel)
            store.g, store.base, store.relations, store.text = g, None, None, None
        if isinstance(store.g, _DictGraph):  # networkx from here on, for this storage
            store.g = _to_networkx(store.g)
        if store.view is None:
            store.view = store.g.copy(as_view=True)
            _VIEWS[store.view] = weakref.ref(store)  # so that KenGraph(ken.graph) shares: see __init__
        return store.view


def least_path(successors: Callable[[Any], Iterable[Any]], source: Any, target: Any,
               max_hops: int | None) -> list[Any] | None:
    """The least shortest path from ``source`` to another node ``target`` (None if none within
    ``max_hops``): breadth first, each node's ``successors`` given in ascending order, so the first
    parent found for a node lies on the least shortest path to it and the walk stops when it first
    meets ``target``. Over names (:meth:`KenGraph.path`) or integer ids (the compact store's)."""
    parent: dict[Any, Any] = {}
    queue: deque[tuple[Any, int]] = deque([(source, 0)])
    while queue:
        node, depth = queue.popleft()
        if max_hops is not None and depth >= max_hops:
            continue
        for nxt in successors(node):
            if nxt != source and nxt not in parent:
                parent[nxt] = node
                if nxt == target:
                    out = [nxt]
                    while out[-1] != source:
                        out.append(parent[out[-1]])
                    return out[::-1]
                queue.append((nxt, depth + 1))
    return None


def _chain(*parts: Iterable[Any]) -> Iterator[Any]:
    for part in parts:
        yield from part
