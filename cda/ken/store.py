"""Ken's compact storage: a graph held in arrays over integer node ids, not in per-edge objects.

Why (issue 34; the numbers are in docs/benchmarks.md, "Ken: loading a million edges"): a graph
of a million edges held as networkx dicts costs about 2 KB an edge while loading and some 500
bytes once loaded, and building those dicts is most of a 20-second load. Here a node is an
integer, its position in the sorted list of node ids, and the edges are sorted integer arrays
(compressed sparse rows), built by a few numpy sorts:

* ``out`` holds each node's outgoing edges sorted by (relation, target), so the targets along
  one relation are one contiguous, already sorted run, found by bisection; ``inn`` the same
  for incoming edges;
* ``out.any`` / ``inn.any`` hold each node's neighbours along any relation, each once, sorted;
* because ids are in the order of the names, "sorted by id" is "sorted by name": the queries'
  sorted answers and the least shortest path need no string comparison.

A :class:`FrozenGraph` never changes. :class:`~cda.ken.graph.KenGraph` writes past it into a
small dict graph laid over it, and merges a large graph into another by building a new one
(:class:`GraphBuilder`). Node attributes are kept as given (a label list, and the whole
attribute dict of the few nodes that have more than a label), and every edge keeps the rank of
the call that first added it, so that :meth:`FrozenGraph.nodes_in_order` and
:meth:`FrozenGraph.edges_in_order` replay the graph exactly as it was built: the networkx view
of a loaded graph is the one the loaders made before this storage existed, in the same order.
"""

from __future__ import annotations

from array import array
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

import numpy as np

from cda.ken.graph import NO_LABEL, least_path

__all__ = ["FrozenGraph", "GraphBuilder"]




def sort_order(*cols: tuple[np.ndarray, int]) -> np.ndarray:
    """The stable order sorting rows by the columns, the first the most significant; each
    column given as (values, bound) with 0 <= values < bound. One sort of a combined key when
    the bounds' product fits in 63 bits (three times faster than ``np.lexsort``)."""
    total = 1
    for _, bound in cols:
        total *= max(int(bound), 1)
    if total >= 1 << 63:
        return np.lexsort(tuple(c for c, _ in reversed(cols)))
    key = np.zeros(len(cols[0][0]), dtype=np.int64)
    for c, bound in cols:
        key *= max(int(bound), 1)
        key += c
    return np.argsort(key, kind="stable")


def _offsets(keys: np.ndarray, n: int) -> np.ndarray:
    """Row offsets (length n + 1) of a sorted array of row numbers."""
    off = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(keys, minlength=n), out=off[1:])
    return off


def _first_of_runs(*cols: np.ndarray) -> np.ndarray:
    """A mask of the rows of sorted columns that differ from the row before (the first row of
    each run of equal rows)."""
    m = len(cols[0])
    keep = np.ones(m, dtype=bool)
    if m > 1:
        diff = cols[0][1:] != cols[0][:-1]
        for c in cols[1:]:
            diff |= c[1:] != c[:-1]
        keep[1:] = diff
    return keep


class _Rows:
    """One direction of the edges: for each node, its (relation, neighbour) pairs sorted, and its
    neighbours along any relation, each once, sorted. Read through memoryviews, whose indexing
    and ``tolist`` cost less from Python than numpy's."""

    __slots__ = ("off", "rel", "nbr", "any_off", "any_nbr", "_mv")

    def __init__(self, node: np.ndarray, rel: np.ndarray, nbr: np.ndarray, n: int, n_rel: int, *,
                 is_sorted: bool = False) -> None:
        """From edges as (node, relation, neighbour) numbers, sorted that way when ``is_sorted``."""
        if not is_sorted:
            order = sort_order((node, n), (rel, n_rel), (nbr, n))
            node, rel, nbr = node[order], rel[order], nbr[order]
        self.off = _offsets(node, n)
        self.rel = rel.astype(np.int32)
        self.nbr = nbr.astype(np.int32)
        pairs = sort_order((node, n), (nbr, n))
        pn, pv = node[pairs], nbr[pairs]
        keep = _first_of_runs(pn, pv)
        self.any_off = _offsets(pn[keep], n)
        self.any_nbr = pv[keep].astype(np.int32)
        self._views()

    def _views(self) -> None:
        self._mv: tuple[Any, ...] = tuple(memoryview(a) for a in (self.off, self.rel, self.nbr, self.any_off, self.any_nbr))  # type: ignore[arg-type]

    def __getstate__(self) -> tuple[np.ndarray, ...]:
        return (self.off, self.rel, self.nbr, self.any_off, self.any_nbr)

    def __setstate__(self, state: tuple[np.ndarray, ...]) -> None:
        self.off, self.rel, self.nbr, self.any_off, self.any_nbr = state
        self._views()

    def along(self, node: int, rel: int | None) -> list[int]:
        """The neighbours of ``node`` joined by a ``rel`` edge (any edge when None), each once,
        in id order."""
        off, rels, nbrs, any_off, any_nbr = self._mv
        if rel is None:
            return any_nbr[any_off[node]:any_off[node + 1]].tolist()  # type: ignore[no-any-return]
        a, b = off[node], off[node + 1]
        lo = bisect_left(rels, rel, a, b)
        return nbrs[lo:bisect_right(rels, rel, lo, b)].tolist()  # type: ignore[no-any-return]

    def has(self, node: int, rel: int, nbr: int) -> bool:
        off, rels, nbrs, _, _ = self._mv
        a, b = off[node], off[node + 1]
        lo = bisect_left(rels, rel, a, b)
        hi = bisect_right(rels, rel, lo, b)
        at = bisect_left(nbrs, nbr, lo, hi)
        return at < hi and nbrs[at] == nbr


class FrozenGraph:
    """A directed multigraph with labelled edges, fixed once built (see the module docstring).

    >>> g = GraphBuilder(); g.add_edge("b", "r", "a"); g.add_node("a", {"label": "Alpha"})
    >>> fg = g.freeze(); fg.names, fg.succ("b", "r"), fg.pred("a", None), fg.label("a")
    (['a', 'b'], ['a'], ['b'], 'Alpha')
    """

    __slots__ = ("names", "ids", "labels", "attrs", "order", "relations", "rel_ids", "out", "inn", "rank", "_steppers")

    def __init__(self, names: list[str], labels: list[Any], attrs: dict[int, dict[str, Any]],
                 relations: list[str], eu: np.ndarray, er: np.ndarray, ev: np.ndarray,
                 added: np.ndarray | None = None, index: dict[str, int] | None = None) -> None:
        """From nodes numbered 0, 1, … (``labels[i]`` and ``attrs.get(i)`` node ``i``'s), added
        in that order unless ``added[i]`` gives node ``i``'s place in the order of addition, and
        edges ``(eu[j], er[j], ev[j])`` (node and relation numbers) in the order of the calls that
        added them; repeated edges are kept once, with the rank of the first call. ``index``, the
        map from name to number, is taken over when given (renumbered in place: one dict less)."""
        n = len(names)
        if index is None:
            index = {name: i for i, name in enumerate(names)}
        # the numbers in name order, sorted directly (names are distinct: a dict's keys), not
        # looked up name by name afterwards (a dict probe each, cache misses at a million names)
        by_name_list = sorted(range(n), key=names.__getitem__)
        self.names = list(map(names.__getitem__, by_name_list))
        by_name = np.array(by_name_list, dtype=np.int64) if n else np.empty(0, dtype=np.int64)
        del by_name_list
        new_id = np.empty(n, dtype=np.int64)
        new_id[by_name] = np.arange(n, dtype=np.int64)
        index.update(zip(self.names, range(n), strict=True))  # the same dict, renumbered
        self.ids = index
        self.labels = list(map(labels.__getitem__, by_name.tolist()))
        del by_name
        self.attrs = {int(new_id[i]): a for i, a in attrs.items()}
        in_order = new_id if added is None else new_id[np.argsort(added, kind="stable")]
        self.order = in_order.astype(np.int32)  # order[k]: the id of the k-th node added
        self.relations = list(relations)
        self.rel_ids = {r: i for i, r in enumerate(self.relations)}
        u, r, v = new_id[np.asarray(eu, dtype=np.int64)], np.asarray(er, dtype=np.int64), new_id[np.asarray(ev, dtype=np.int64)]
        del eu, er, ev, new_id
        n_rel = len(relations)
        first = sort_order((u, n), (r, n_rel), (v, n))  # stable: a repeated edge's first call first
        keep = _first_of_runs(u[first], r[first], v[first])
        kept = first[keep]  # sorted by (source, relation, target); each edge's first call
        del first, keep
        u, r, v = u[kept], r[kept], v[kept]
        self.out = _Rows(u, r, v, n, n_rel, is_sorted=True)
        self.inn = _Rows(v, r, u, n, n_rel)
        self.rank = kept  # in ``out``'s order: a larger rank was added later (edges_in_order)
        self._steppers: dict[tuple[bool, str | None], Callable[[str], list[str]]] = {}

    def __getstate__(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.__slots__ if name != "_steppers"}

    def __setstate__(self, state: dict[str, Any]) -> None:
        for name, value in state.items():
            setattr(self, name, value)
        self._steppers = {}

    # ---- size and membership
    def __len__(self) -> int:
        return len(self.names)

    def __contains__(self, name: object) -> bool:
        return name in self.ids

    @property
    def number_of_edges(self) -> int:
        return len(self.out.nbr)

    def label(self, name: str) -> Any:
        """The node's label, or :data:`NO_LABEL`."""
        return self.labels[self.ids[name]]

    def node_attrs(self, i: int) -> dict[str, Any]:
        """Node ``i``'s attributes, as given (a new dict)."""
        if i in self.attrs:
            return dict(self.attrs[i])
        label = self.labels[i]
        return {} if label is NO_LABEL else {"label": label}

    # ---- adjacency by name (each neighbour once, in name order)
    def succ(self, name: str, relation: str | None) -> list[str]:
        return self.stepper(True, relation)(name)

    def pred(self, name: str, relation: str | None) -> list[str]:
        return self.stepper(False, relation)(name)

    def stepper(self, forward: bool, relation: str | None) -> Callable[[str], list[str]]:
        """A function from a node id to its successors (``forward``) or predecessors along
        ``relation`` (any when None), each once, in name order; [] for a node not here."""
        if relation is not None and relation not in self.rel_ids:
            return _nothing
        made = self._steppers.get((forward, relation))
        if made is None:
            made = self._steppers[(forward, relation)] = self._stepper(forward, relation)
        return made

    def _stepper(self, forward: bool, relation: str | None) -> Callable[[str], list[str]]:
        rows = self.out if forward else self.inn
        rel = None if relation is None else self.rel_ids[relation]
        ids, names, along = self.ids, self.names, rows.along

        def step(name: str) -> list[str]:
            i = ids.get(name)
            return [] if i is None else [names[j] for j in along(i, rel)]

        return step

    # ---- the traversals of the safe query set, over integer ids (sorted ids are sorted names)
    def ball(self, name: str, hops: int, relation: str | None) -> list[str]:
        """The nodes within ``hops`` edges of ``name`` either way along ``relation`` (any when
        None), sorted, ``name`` excluded: :meth:`~cda.ken.graph.KenGraph.neighborhood` without a
        string per step (the walk is over ids; names are looked up once, for the answer)."""
        start = self.ids.get(name)
        rel = None if relation is None else self.rel_ids.get(relation)
        if start is None or (relation is not None and rel is None):
            return []
        out_along, in_along = self.out.along, self.inn.along
        seen = {start}
        frontier: Iterable[int] = (start,)
        for _ in range(hops):
            reached: set[int] = set()
            for i in frontier:
                reached.update(out_along(i, rel))
                reached.update(in_along(i, rel))
            reached -= seen
            if not reached:
                break
            seen |= reached
            frontier = reached
        seen.discard(start)
        names = self.names
        return [names[i] for i in sorted(seen)]

    def least_path(self, source: str, target: str, relation: str | None, max_hops: int | None) -> list[str] | None:
        """:meth:`~cda.ken.graph.KenGraph.path` over ids: breadth first with each node's
        successors in id order, that is name order, so the first path found to ``target`` is the
        lexicographically least shortest one."""
        s, t = self.ids.get(source), self.ids.get(target)
        rel = None if relation is None else self.rel_ids.get(relation)
        if s is None or t is None:
            return None
        if s == t:
            return [source]
        if relation is not None and rel is None:
            return None
        rows = self.out
        path = least_path(lambda i: rows.along(i, rel), s, t, max_hops)
        names = self.names
        return None if path is None else [names[i] for i in path]

    def has_edge(self, source: str, relation: str, target: str) -> bool:
        u, v, r = self.ids.get(source), self.ids.get(target), self.rel_ids.get(relation)
        return u is not None and v is not None and r is not None and self.out.has(u, r, v)

    # ---- the graph as it was built
    def nodes_in_order(self) -> Iterator[tuple[str, dict[str, Any]]]:
        """(id, attributes) of every node, in the order the nodes were added."""
        names = self.names
        for i in self.order.tolist():
            yield names[i], self.node_attrs(i)

    def edge_arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(source, relation, target) numbers of every edge, in the order they were added."""
        rows = np.repeat(np.arange(len(self.names), dtype=np.int32), np.diff(self.out.off))
        by_rank = np.argsort(self.rank, kind="stable")
        return rows[by_rank], self.out.rel[by_rank], self.out.nbr[by_rank]

    def edges_in_order(self) -> Iterator[tuple[str, str, str]]:
        """(source, relation, target) of every edge, in the order the edges were added."""
        names, rels = self.names, self.relations
        u, r, v = self.edge_arrays()
        for a, b, c in zip(u.tolist(), r.tolist(), v.tolist(), strict=True):
            yield names[a], rels[b], names[c]


def _nothing(name: str) -> list[str]:
    return []


class GraphBuilder:
    """Nodes and edges added one by one (or a whole graph at a time), then frozen.

    ``add_node`` updates a node's attributes as networkx does (later keys win); edges are
    numbered as they come, and :class:`FrozenGraph` keeps each once.
    """

    __slots__ = ("index", "names", "labels", "attrs", "rel_index", "relations", "_u", "_r", "_v", "_bulk")

    def __init__(self) -> None:
        self.index: dict[str, int] = {}
        self.names: list[str] = []
        self.labels: list[Any] = []
        self.attrs: dict[int, dict[str, Any]] = {}
        self.rel_index: dict[str, int] = {}
        self.relations: list[str] = []
        self._u, self._r, self._v = array("q"), array("q"), array("q")
        self._bulk: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []

    def node(self, name: str) -> int:
        """The number of node ``name``, added without attributes if new."""
        i = self.index.get(name)
        if i is None:
            i = self.index[name] = len(self.names)
            self.names.append(name)
            self.labels.append(NO_LABEL)
        return i

    def numbers(self, names: list[str], *, check: bool = False) -> list[int]:
        """:meth:`node` of each name, the new ones added all at once (a comprehension and a
        dict update, not a call per name). With ``check``, a new name that is not a string is
        a ``TypeError`` (an old one cannot be: only strings are in the index)."""
        get = self.index.get
        out: list[int | None] = list(map(get, names))  # a C loop: no Python frame per name
        if None in out:
            new = list(dict.fromkeys([x for x, i in zip(names, out, strict=True) if i is None]))
            if check and not all(x.__class__ is str for x in new):
                raise TypeError("a node id that is not a string")
            start = len(self.names)
            self.index.update(zip(new, range(start, start + len(new)), strict=True))
            self.names.extend(new)
            self.labels.extend([NO_LABEL] * len(new))
            out = list(map(get, names))
        return out  # type: ignore[return-value]

    def relation(self, name: str) -> int:
        r = self.rel_index.get(name)
        if r is None:
            r = self.rel_index[name] = len(self.relations)
            self.relations.append(name)
        return r

    def add_node(self, name: str, attrs: Mapping[str, Any]) -> None:
        i = self.node(name)
        if not attrs:
            return
        extra = self.attrs.get(i)
        if extra is None and not (len(attrs) == 1 and "label" in attrs):
            label = self.labels[i]
            extra = self.attrs[i] = {} if label is NO_LABEL else {"label": label}
        if extra is not None:
            extra.update(attrs)
        if "label" in attrs:
            self.labels[i] = attrs["label"]

    def add_edge(self, source: str, relation: str, target: str) -> None:
        self._u.append(self.node(source))
        self._r.append(self.relation(relation))
        self._v.append(self.node(target))

    def add_edge_ids(self, u: np.ndarray, r: np.ndarray, v: np.ndarray) -> None:
        """Edges by node and relation numbers of this builder, in order."""
        self._take_singles()
        self._bulk.append((np.asarray(u, dtype=np.int64), np.asarray(r, dtype=np.int64), np.asarray(v, dtype=np.int64)))

    def add_graph(self, nodes: Iterable[tuple[str, Mapping[str, Any]]], frozen: FrozenGraph | None = None,
                  edges: Iterable[tuple[str, str, str]] = ()) -> None:
        """Nodes (with attributes) in order, then a frozen graph's edges in order, then ``edges``."""
        for name, attrs in nodes:
            self.add_node(name, attrs)
        if frozen is not None:
            self._take_singles()
            node_map = np.fromiter((self.node(n) for n in frozen.names), dtype=np.int64, count=len(frozen.names))
            rel_map = np.fromiter((self.relation(r) for r in frozen.relations), dtype=np.int64, count=len(frozen.relations))
            u, r, v = frozen.edge_arrays()
            self._bulk.append((node_map[u], rel_map[r], node_map[v]))
        for u_, r_, v_ in edges:
            self.add_edge(u_, r_, v_)

    def _take_singles(self) -> None:
        """Move the edges added one by one into the bulk list, so that the calls keep their order."""
        if self._u:
            self._bulk.append((np.frombuffer(self._u, dtype=np.int64).copy(), np.frombuffer(self._r, dtype=np.int64).copy(),
                               np.frombuffer(self._v, dtype=np.int64).copy()))
            self._u, self._r, self._v = array("q"), array("q"), array("q")

    def freeze(self, added: np.ndarray | None = None) -> FrozenGraph:
        """The frozen graph; ``added`` as :class:`FrozenGraph` takes it (default: the order of
        the nodes' first mention here)."""
        self._take_singles()
        parts = self._bulk or [(np.empty(0, np.int64),) * 3]
        eu, er, ev = (np.concatenate([p[k] for p in parts]) for k in range(3))
        del parts
        self._bulk = []
        graph = FrozenGraph(self.names, self.labels, self.attrs, self.relations, eu, er, ev, added, self.index)
        self.__init__()  # type: ignore[misc]  # its index is the graph's now
        return graph
