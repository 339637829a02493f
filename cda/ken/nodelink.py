"""Reading networkx node-link JSON straight into a frozen graph, one node and one link at a time.

Why not ``json.load`` and ``networkx.node_link_graph`` (what :mod:`cda.ken.loaders` did, and
still does for the files this reader leaves to it): at a million links the parse is not the
cost (about a second), the objects are. ``json.load`` holds every link as a dict of four new
strings at once (some 500 MB), networkx then builds its dicts of dicts (another 1.5 GB and 10
seconds), and Ken copied them. Here the file is read in chunks, each node and link is decoded
by the json module's own C scanner and dropped once its ids are interned, and what is kept is a
few integer arrays per link. So no third-party parser is needed: the per-link work left is
interning strings, which a faster parser (``orjson``) would not remove, and a parser that
materialises the whole document would bring back the memory (docs/benchmarks.md, "Ken").

**The same graph as networkx makes.** ``node_link_graph`` has rules a file can lean on, and
each one is kept: the ``directed``/``multigraph`` flags (wherever they stand in the file); a
node without ``id`` numbered by its position; nodes named only in links added after the listed
ones; links repeating a (source, target, key) — or a (source, target) pair in a simple graph,
either way round in an undirected one — merge their attributes, later ones winning; a multigraph
link's string ``key`` is its relation when it has no relation attribute. The nodes and edges
come out in the order the networkx route added them, so even the networkx view of the graph
(:attr:`~cda.ken.graph.KenGraph.graph`) is the same.

**What it leaves to networkx** (:class:`Unusual`): anything outside the everyday shape — a
syntax error (so that the message, line and column are json's own), a top-level value that is
not an object or a key given twice, node ids mixing strings and numbers (networkx would keep
``1`` and ``"1"`` apart and Ken would not), ids that are not strings or integers, non-string
keys or relation values. Those files take the old route and get its answers and its errors.
"""

from __future__ import annotations

import json
from array import array
from collections.abc import Callable, Iterator
from json import decoder as _decoder
from json import scanner as _scanner
from pathlib import Path
from typing import Any

import numpy as np

from cda.errors import CDAError, KenError
from cda.files import text_stream
from cda.gcpause import gc_paused
from cda.ken.store import FrozenGraph, GraphBuilder, sort_order

__all__ = ["RELATION_KEYS", "Unusual", "read_node_link", "relation_of"]

#: where an edge's relation may stand, in the order they are looked for
RELATION_KEYS = ("relation", "label", "key", "type", "predicate", "rel")

#: json's own whitespace between tokens (a file's JSON, read as the json module reads it)
WHITESPACE = _decoder.WHITESPACE  # type: ignore[attr-defined]

CHUNK = 1 << 22  # characters read at a time (4 Mi: a few megabytes held whatever the file's size)


class Unusual(Exception):
    """The file is not of the everyday shape this reader takes: read it the networkx way."""


def relation_of(data: dict[str, Any], where: str) -> str:
    """The relation an edge's attributes name (the first of :data:`RELATION_KEYS` set)."""
    for key in RELATION_KEYS:
        if key in data and data[key] not in (None, ""):
            return str(data[key])
    raise KenError(f"{where}: an edge has no relation (looked for {', '.join(RELATION_KEYS)})")


class _Text:
    """A text file read in chunks, with a cursor, and json's scanner over it."""

    def __init__(self, fh: Any) -> None:
        self.fh = fh
        self.buf = ""
        self.pos = 0
        self.eof = False
        self.scan: Callable[[str, int], tuple[Any, int]] = _scanner.make_scanner(json.JSONDecoder())  # type: ignore[arg-type]
        self.more(1)

    def more(self, want: int) -> None:
        """At least ``want`` characters past the cursor, unless the file ends first."""
        if self.pos:
            self.buf, self.pos = self.buf[self.pos:], 0
        while len(self.buf) < want and not self.eof:
            chunk = self.fh.read(max(CHUNK, want - len(self.buf)))
            self.eof = not chunk
            self.buf += chunk

    def skip_ws(self) -> None:
        while True:
            self.pos = WHITESPACE.match(self.buf, self.pos).end()
            if self.pos < len(self.buf) or self.eof:
                return
            self.more(1)

    def char(self) -> str:
        """The character at the cursor, after whitespace ("" at the end of the file)."""
        self.skip_ws()
        return self.buf[self.pos:self.pos + 1]

    def expect(self, c: str) -> None:
        if self.char() != c:
            raise Unusual(f"expected {c!r}")
        self.pos += 1

    def value(self) -> Any:
        """One whole JSON value at the cursor (read as far as it needs)."""
        self.skip_ws()
        want = CHUNK
        while True:
            try:
                obj, end = self.scan(self.buf, self.pos)
            except (StopIteration, ValueError) as exc:
                if self.eof:
                    raise Unusual(str(exc)) from None
            else:
                if end < len(self.buf) or self.eof:  # a number may go on past the buffer
                    self.pos = end
                    return obj
            want *= 2
            self.more(want)

    def batches(self) -> Iterator[list[Any]]:
        """The elements of the array at the cursor, a buffer's worth at a time.

        A buffer's elements are read by one ``json.loads`` of ``"[" + text + "]"``, the text cut
        after its last ``}``: that parses only when the cut is where an element of this array
        ends (a cut inside a string, or inside an element, leaves something open), and then
        reads what the json module would. When it does not parse (elements that are not
        objects, a ``}`` in a string at the cut, a syntax error), the buffer is read element by
        element instead.
        """
        self.expect("[")
        if self.char() == "]":
            self.pos += 1
            return
        while True:
            if not self.eof and len(self.buf) - self.pos < CHUNK:
                self.more(CHUNK)
            buf, pos = self.buf, self.pos
            cut = buf.rfind("}", pos)
            batch = None
            if cut >= 0:
                try:
                    batch = json.loads("[" + buf[pos:cut + 1] + "]")
                except (ValueError, RecursionError):
                    batch = None
            if batch is None:
                batch, done = self._elements()
                if batch:
                    yield batch
                if done:
                    return
                continue
            self.pos = cut + 1
            yield batch
            if self.closed_after_item("]"):
                return
            self.skip_ws()

    def closed_after_item(self, close: str) -> bool:
        """Past what follows an item: ``close`` (True: the list or object ends) or a comma
        (False); anything else is :class:`Unusual` (json's own error then names it)."""
        c = self.char()
        self.pos += 1
        if c == close:
            return True
        if c != ",":
            raise Unusual(f"expected ',' or '{close}'")
        return False

    def _elements(self) -> tuple[list[Any], bool]:
        """The array's elements from the cursor, one by one, as far as the buffer goes (reading
        more when not even one fits); and whether the array ended."""
        scan, ws = self.scan, WHITESPACE.match
        want = CHUNK
        while True:
            # each element must be followed by its separator inside the buffer; the first one
            # that is not (cut off by the buffer's end, or malformed) is read again with more text
            buf, pos, done = self.buf, self.pos, False
            batch: list[Any] = []
            add = batch.append
            while True:
                try:
                    obj, end = scan(buf, pos)
                except (StopIteration, ValueError):
                    break
                sep = buf[end:end + 1]
                if sep not in _SEPARATORS:
                    end = ws(buf, end).end()
                    sep = buf[end:end + 1]
                if sep == ",":
                    add(obj)
                    pos = end + 1
                    if buf[pos:pos + 1] in _SPACE:
                        pos = ws(buf, pos).end()
                    continue
                if sep == "]":
                    add(obj)
                    pos, done = end + 1, True
                break
            self.pos = pos
            if batch or done:
                return batch, done
            if self.eof:
                raise Unusual("a malformed element")
            want *= 2
            self.more(want)


_SEPARATORS = (",", "]")
_SPACE = frozenset(" \t\n\r")


class _Links:
    """The links of one array: interned endpoints and relation attributes, in file order.

    A link's *signature* is its relation attributes (those of :data:`RELATION_KEYS` it has,
    ``key`` among them) as a flat tuple of names and values; most files have a handful."""

    def __init__(self, ids: _Ids) -> None:
        self.ids = ids
        self.u, self.v = array("q"), array("q")
        self.sig = array("q")  # the signature's number
        self.sigs: dict[tuple[Any, ...], int] = {}
        self.shapes: dict[tuple[Any, Any, int], int] = {}

    def add_all(self, batch: list[Any]) -> None:
        """A batch of links, a column at a time (one comprehension per column costs a third of
        a loop doing it all per link)."""
        try:
            sources = [d["source"] for d in batch]
            targets = [d["target"] for d in batch]
        except (KeyError, TypeError):
            raise Unusual("a link that is not an object with source and target") from None
        self.u.extend(self.ids.numbers(sources))
        self.v.extend(self.ids.numbers(targets))
        # a link with no attribute but source, target, relation and key: its signature is its
        # (relation, key, size); any other link is read on its own
        shapes = [(d.get("relation", _NONE), d.get("key", _NONE), len(d)) for d in batch]
        known = self.shapes
        sids = [known.get(shape, -1) for shape in shapes]
        if -1 in sids:
            for at, sid in enumerate(sids):
                if sid == -1:
                    sids[at] = self._signature(batch[at], shapes[at])
        self.sig.extend(sids)

    def _signature(self, d: dict[str, Any], shape: tuple[Any, Any, int]) -> int:
        sig = tuple([x for r in RELATION_KEYS if r in d for x in (r, d[r])])
        try:
            sid = self.sigs.get(sig)
        except TypeError:  # a list or an object
            raise Unusual("a relation that is not a string") from None
        if sid is None:
            if any(x is not None and x.__class__ is not str for x in sig[1::2]):
                raise Unusual("a relation or key that is not a string")
            sid = self.sigs[sig] = len(self.sigs)
        relation, key, size = shape
        if size == 2 + (relation is not _NONE) + (key is not _NONE):  # nothing else: the shape says it all
            self.shapes[shape] = sid
        return sid


class _None:
    """An attribute a link does not have (``None`` is JSON's null)."""

    __slots__ = ()


_NONE = _None()


class _Ids:
    """Node ids as the builder's numbers; all strings or all integers (else :class:`Unusual`)."""

    def __init__(self, builder: GraphBuilder) -> None:
        self.builder = builder
        self.kind: type | None = None
        self.seen: dict[Any, int] = {}

    def node(self, value: Any) -> int:
        try:
            i = self.seen.get(value)
        except TypeError:  # a list or an object
            raise Unusual("a node id that is not a string or an integer") from None
        if i is not None and value.__class__ is self.kind:
            return i
        kind = value.__class__
        if kind is not str and kind is not int:
            raise Unusual("a node id that is not a string or an integer")
        if self.kind is None:
            self.kind = kind
        elif kind is not self.kind:
            raise Unusual("node ids of two kinds")
        if kind is str:
            self.seen = self.builder.index  # the builder's own index: one dict, not two
            return self.builder.node(value)
        i = self.seen[value] = self.builder.node(str(value))
        return i

    def numbers(self, values: list[Any]) -> list[int]:
        """:meth:`node` of each value. Among string ids (kept in the builder's own index) a value
        of another kind cannot hit, so only the new ones are looked at, all at once."""
        if self.kind is None and values and all(x.__class__ is str for x in values):
            self.kind, self.seen = str, self.builder.index
        if self.kind is not str:
            return [self.node(x) for x in values]
        try:
            return self.builder.numbers(values, check=True)
        except TypeError:
            raise Unusual("node ids of two kinds, or an id that is a list or an object") from None


def read_node_link(path: Path) -> FrozenGraph:
    """The graph in a node-link JSON file, as networkx's reading of it gives it to Ken.

    Raises :class:`Unusual` for a file outside the everyday shape (the caller reads it the
    networkx way), :class:`~cda.errors.KenError` for an edge without a relation.
    """
    builder = GraphBuilder()
    ids = _Ids(builder)
    arrays: dict[str, _Links] = {}
    flags: dict[str, Any] = {}
    nodes = _Nodes(builder, ids)
    seen_keys: set[str] = set()
    try:
        # read once, hashed as read (cda.files: what is parsed is what a digest covers)
        with gc_paused(), text_stream(path) as fh:  # nothing read here is in a cycle
            text = _Text(fh)
            text.expect("{")
            if text.char() == "}":
                text.pos += 1
            else:
                while True:
                    name = text.value()
                    if name.__class__ is not str or name in seen_keys:
                        raise Unusual("a key given twice")
                    seen_keys.add(name)
                    text.expect(":")
                    if name in ("nodes", "links", "edges"):
                        if text.char() != "[":
                            raise Unusual(f"{name} is not a list")
                        take = nodes.add_all if name == "nodes" else arrays.setdefault(name, _Links(ids)).add_all
                        for batch in text.batches():
                            take(batch)
                    else:
                        flags[name] = text.value()
                    if text.closed_after_item("}"):
                        break
            if text.char() != "":
                raise Unusual("extra data")
    except (UnicodeDecodeError, CDAError):
        raise Unusual("not UTF-8, or not readable") from None
    except RecursionError:
        raise Unusual("nested too deeply") from None
    if "nodes" not in seen_keys:
        raise Unusual("no nodes")
    links = arrays.get("links") if "links" in seen_keys else arrays.get("edges")
    if links is None:
        raise Unusual("no links")
    directed = bool(flags.get("directed", True))
    multigraph = bool(flags.get("multigraph", True))
    with gc_paused():
        sigs = [dict(zip(t[::2], t[1::2], strict=True)) for t in links.sigs]
        key_ids: dict[str, int] = {}  # a multigraph's link keys (strings), numbered
        sig_key = np.array([key_ids.setdefault(d["key"], len(key_ids)) if isinstance(d.get("key"), str) else -1
                            for d in sigs] or [-1], dtype=np.int64)
        sig = _int64(links.sig)
        key = sig_key[sig] if multigraph else np.full(len(sig), -1, dtype=np.int64)
        return assemble(builder, nodes.listed, _int64(links.u), _int64(links.v), sig, sigs, key, len(key_ids),
                        directed=directed, multigraph=multigraph, keys_are_relations=multigraph, where=str(path))


class _Nodes:
    """The listed nodes: their numbers in file order, their attributes into the builder."""

    def __init__(self, builder: GraphBuilder, ids: _Ids) -> None:
        self.builder, self.ids = builder, ids
        self.listed = array("q")
        self.count = 0

    def add_all(self, batch: list[Any]) -> None:
        builder, listed = self.builder, self.listed
        try:
            values = [d["id"] for d in batch]
        except (KeyError, TypeError):  # a node without an id (networkx numbers it), or not an object
            values = [d.get("id", self.count + at) if d.__class__ is dict else None for at, d in enumerate(batch)]
            if None in values:
                raise Unusual("a node that is not an object, or whose id is null") from None
        self.count += len(batch)
        numbers = self.ids.numbers(values)
        listed.extend(numbers)
        labels, attrs = builder.labels, builder.attrs
        for i, d in zip(numbers, batch, strict=True):
            if len(d) == 2 and "label" in d and "id" in d and i not in attrs:
                labels[i] = d["label"]
            elif len(d) > 1 or "id" not in d:
                builder.add_node(builder.names[i], {k: v for k, v in d.items() if k != "id"})


def _int64(a: array[int]) -> np.ndarray:
    return np.frombuffer(a, dtype=np.int64) if len(a) else np.empty(0, dtype=np.int64)


def assemble(builder: GraphBuilder, listed: array[int], u: np.ndarray, v: np.ndarray, sig: np.ndarray,
             sigs: list[dict[str, Any]], key: np.ndarray, n_keys: int, *, directed: bool, multigraph: bool,
             keys_are_relations: bool, where: str) -> FrozenGraph:
    """The Ken edges of networkx's graph, added in the order the networkx route added them.

    Link ``i`` joins builder nodes ``u[i]`` and ``v[i]``, has the relation attributes
    ``sigs[sig[i]]`` and, in a multigraph, the key number ``key[i]`` (< ``n_keys``; -1: none, an
    edge of its own). With ``keys_are_relations`` (node-link JSON) the ``key`` attribute is the
    key, and names the relation of an edge that has no relation attribute; otherwise (GraphML)
    a ``key`` attribute is an attribute like the others. ``listed`` are the nodes listed in the
    file, in order, before the links.
    """
    n_links = len(u)
    link = np.arange(n_links, dtype=np.int64)
    # networkx's node order: the listed nodes, then those links name (source, then target)
    n = len(builder.names)
    listed_ = np.frombuffer(listed, dtype=np.int64) if len(listed) else np.empty(0, np.int64)
    mentions = np.concatenate([listed_, np.stack([u, v], axis=1).reshape(-1)])
    first_mention = np.empty(n, dtype=np.int64)
    named, at = np.unique(mentions, return_index=True)
    first_mention[named] = at
    # the pair of nodes a link joins, either way round when undirected
    a, b = (u, v) if directed else (np.minimum(u, v), np.maximum(u, v))
    pair_first = _runs_first((a, n), (b, n))
    if multigraph:  # a link without a key is an edge of its own
        keyed = np.where(key >= 0, key, n_keys + link)
        group_first = _runs_first((a, n), (b, n), (keyed, n_keys + n_links))
    else:
        group_first = pair_first
    edges = np.flatnonzero(group_first == link)  # one networkx edge per group, at its first link
    rel = _relations(builder, sigs, sig, edges, group_first, keys_are_relations, where)
    # networkx's edge order: by node (its order), neighbour (first link of the pair), key
    if directed:
        src, dst = u[edges], v[edges]
    else:
        eu, ev = u[edges], v[edges]
        swap = first_mention[ev] < first_mention[eu]
        src, dst = np.where(swap, ev, eu), np.where(swap, eu, ev)
    order = sort_order((first_mention[src], len(mentions)), (pair_first[edges], n_links), (edges, n_links))
    src, dst, rel = src[order], dst[order], rel[order]
    if not directed:  # each edge both ways, one after the other
        src, dst, rel = (np.stack([src, dst], axis=1).reshape(-1), np.stack([dst, src], axis=1).reshape(-1),
                         np.repeat(rel, 2))
    builder.add_edge_ids(src, rel, dst)
    return builder.freeze(added=first_mention)


def _runs_first(*cols: tuple[np.ndarray, int]) -> np.ndarray:
    """For each row, the smallest row number among the rows equal to it in every column
    (columns as (values, bound))."""
    m = len(cols[0][0])
    order = sort_order(*cols)  # stable: within a run of equal rows, in increasing order
    new = np.zeros(m, dtype=bool)
    new[:1] = True
    for c, _ in cols:
        s = c[order]
        new[1:] |= s[1:] != s[:-1]
    out = np.empty(m, dtype=np.int64)
    out[order] = order[new][np.cumsum(new) - 1]
    return out


def _relations(builder: GraphBuilder, sigs: list[dict[str, Any]], sig: np.ndarray, edges: np.ndarray,
               group_first: np.ndarray, keys_are_relations: bool, where: str) -> np.ndarray:
    """The builder's relation number of each networkx edge (its links' attributes merged)."""

    def relation(data: dict[str, Any]) -> int:
        if keys_are_relations:
            k = data.pop("key", None)  # networkx takes the key out
            if isinstance(k, str) and not any(r in data for r in RELATION_KEYS):
                data["key"] = k
        return builder.relation(relation_of(data, where))

    size = np.bincount(group_first, minlength=len(group_first))[edges]
    out = np.empty(len(edges), dtype=np.int64)
    single = size == 1
    if single.any():  # one link alone: its relation is its signature's
        distinct, back = np.unique(sig[edges[single]], return_inverse=True)
        table = np.array([relation(dict(sigs[s])) for s in distinct.tolist()], dtype=np.int64)
        out[single] = table[back.reshape(-1)]
    if not single.all():  # links merged into one edge (a repeated key, or a simple graph's pair)
        shared = np.flatnonzero(~single)
        members: dict[int, list[int]] = {g: [] for g in edges[shared].tolist()}
        for i in np.flatnonzero(np.isin(group_first, edges[shared])).tolist():
            members[int(group_first[i])].append(i)
        for j in shared.tolist():
            merged: dict[str, Any] = {}
            for i in members[int(edges[j])]:
                merged.update(sigs[int(sig[i])])
            out[j] = relation(merged)
    return out
