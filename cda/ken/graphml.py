"""Reading GraphML straight into a frozen graph, a chunk of the file at a time.

Why not ``networkx.read_graphml`` (which :mod:`cda.ken.loaders` still uses for the files this
reader leaves to it): it builds the whole XML tree first (ElementTree: a few hundred bytes an
element, three elements an edge) and then networkx's dicts, some 2.5 GB and 25 seconds at a
million edges. Here the file is read in chunks of :data:`~cda.ken.nodelink.CHUNK` characters;
each chunk is cut after its last end tag and parsed by ElementTree (its C parser, as networkx
uses) inside copies of the root's and the graph's own start tags, so that it has their
namespaces. A cut inside an element, a comment or a CDATA section leaves something open and
does not parse, and the cut before it is tried: a chunk that parses is a run of whole children
of the graph. Their ids and data are interned a column at a time and dropped with the chunk's
tree (docs/benchmarks.md, "Ken").

**Two readers of the body, one graph.** ElementTree's callbacks are most of that reading's cost
at a million edges, so the body is first *matched* by :mod:`cda.ken.graphml_scan` (one compiled
pattern over each chunk, for the everyday shape networkx and most tools write); a body of any
other shape (a comment, CDATA, a character reference, single quotes, …) makes it stop, and the
file is read again, parsed as above. Both fill the same :class:`_Reader`, which decides what the
elements mean. A syntax error met by either is reported as networkx's reading reports it
(ElementTree's message: what, line, column), found by a parse with no tree that holds a chunk
at a time (:func:`_check_well_formed`), so that a broken million-edge file costs neither
networkx's memory nor a traceback.

The graph is the one networkx reads: the first ``<graph>`` of the ``graphml`` namespace, its
nodes then its edges, a data value typed by its key (``int``, ``long``, ``float``, ``double``,
``boolean``, ``string``; an empty element is the empty string; the text is ElementTree's, as
networkx's is), edges repeating an ``id`` between the same nodes merged, the edge default
direction; and Ken's reading of it (:func:`cda.ken.nodelink.assemble`): nodes and edges in the
same order, each undirected edge both ways.

**What it leaves to networkx** (:class:`~cda.ken.nodelink.Unusual`): anything outside that — a
file that is not UTF-8, a document type declaration, a root outside
the namespace, a second graph or anything after the graph, hyperedges, ports, yFiles group
nodes or data with elements inside, key defaults, keys without a type, a name or an id or of
an unknown type, data of an unknown key or that does not convert, data of the graph itself,
edge ids that read as integers, an edge ``key`` attribute standing in for an id, a
``directed`` attribute against the default, relations that are not strings.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable
from pathlib import Path
from typing import Any
from xml.etree.ElementTree import ParseError, XMLParser, fromstring

import numpy as np

from cda.errors import CDAError, KenError
from cda.files import data_max_bytes, open_regular, text_stream
from cda.gcpause import gc_paused
from cda.ken.graphml_scan import scan
from cda.ken.nodelink import CHUNK, RELATION_KEYS, Unusual, assemble
from cda.ken.store import FrozenGraph, GraphBuilder

__all__ = ["read_graphml"]

_NS = "{http://graphml.graphdrawing.org/xmlns}"  # ElementTree's name: {namespace}local name
_ROOT, _KEY, _GRAPH, _NODE, _EDGE, _DATA = (_NS + t for t in ("graphml", "key", "graph", "node", "edge", "data"))
_HYPEREDGE, _PORT, _DEFAULT = (_NS + t for t in ("hyperedge", "port", "default"))
_TYPES: dict[str, type] = {"integer": int, "yfiles": str, "string": str, "int": int, "long": int, "float": float,
                           "double": float, "boolean": bool}
_BOOLS = {"true": True, "false": False, "0": False, "1": True}
_RELATION_SET = frozenset(RELATION_KEYS)


def _value(kind: type, text: str | None) -> Any:
    """A data element's text typed as networkx types it (an empty element: the empty string)."""
    if text is None:
        return ""
    try:
        return _BOOLS[text.lower()] if kind is bool else kind(text)
    except (KeyError, ValueError):
        raise Unusual("data that does not convert") from None


class _Reader:
    """What the chunks' elements give: a batch of nodes' and edges' XML attributes, and their
    ``<data>`` elements as rows (owner, key, text), interned a column at a time (:meth:`flush`),
    as the JSON reader does. Both readers of the body fill it (:mod:`cda.ken.graphml_scan`'s
    matches and this module's parsed chunks), so that the two give one graph."""

    value = staticmethod(_value)

    def __init__(self) -> None:
        self.keys: dict[str, tuple[str, type]] = {}
        self.directed = False
        self.builder = GraphBuilder()
        self.listed: array[int] = array("q")
        self.u, self.v, self.sig, self.key = array("q"), array("q"), array("q"), array("q")
        self.sigs: dict[tuple[tuple[str, Any], ...], int] = {}  # an edge's data -> its relation attributes' number
        self.relation_sigs: dict[tuple[tuple[str, Any], ...], int] = {}
        self.edge_ids: dict[str, int] = {}

    def take(self, graph: Any) -> None:
        """The nodes, then the edges (networkx adds every node before any edge; within each
        kind, in document order), of a ``<graph>`` element parsed from one chunk."""
        if graph.find(_HYPEREDGE) is not None or graph.find(_DATA) is not None:
            raise Unusual("a hyperedge, or data of the graph")
        nodes, edges = graph.findall(_NODE), graph.findall(_EDGE)
        self.add_nodes([e.attrib for e in nodes], self.data(nodes))
        self.take_edges(edges)

    def take_edges(self, edges: list[Any]) -> None:
        """The edges, in one loop for the usual shape (a source, a target and one data element
        of a string key whose relation attributes were seen before), the others in batches by
        :meth:`add_edges`; in document order either way."""
        known, sig_get = self.keys.get, self.sigs.get
        sources: list[str] = []
        targets: list[str] = []
        sids: list[int] = []
        others: list[Any] = []
        for e in edges:
            a = e.attrib
            if len(a) == 2 and len(e) == 1:
                d = e[0]
                typed = known(d.get("key")) if d.tag == _DATA and not len(d) else None
                if typed is not None and typed[1] is str:
                    text = d.text
                    sid = sig_get(((typed[0], "" if text is None else text),))
                    source, target = a.get("source"), a.get("target")
                    if sid is not None and source is not None and target is not None:
                        if others:
                            self.add_edges([x.attrib for x in others], self.data(others))
                            others = []
                        sources.append(source)
                        targets.append(target)
                        sids.append(sid)
                        continue
            if sources:
                self.add_columns(sources, targets, [-1] * len(sources), sids)
                sources, targets, sids = [], [], []
            others.append(e)
        if others:
            self.add_edges([x.attrib for x in others], self.data(others))
        if sources:
            self.add_columns(sources, targets, [-1] * len(sources), sids)

    def add_columns(self, sources: list[str], targets: list[str], keys: list[int], sids: list[int]) -> None:
        builder = self.builder
        self.u.extend(builder.numbers(sources))
        self.v.extend(builder.numbers(targets))
        self.key.extend(keys)
        self.sig.extend(sids)

    def data(self, elements: list[Any]) -> list[tuple[tuple[str, Any], ...]]:
        """Each element's data as (name, value) pairs, typed by its key as networkx types it;
        a column at a time when every element has one child, a data element (the usual file)."""
        firsts = [e.find(_DATA) for e in elements]
        if None in firsts or any(len(e) != 1 for e in elements):
            return [self.decode(list(e)) for e in elements]
        if any(len(d) for d in firsts):
            raise Unusual("data with elements inside")
        get = self.keys.get
        typed = [get(d.get("key")) for d in firsts]  # type: ignore[arg-type]
        if None in typed:
            self.unknown_key()
        texts = [d.text for d in firsts]
        if all(kind is str for _, kind in typed):  # type: ignore[misc]
            return [((name, "" if text is None else text),) for (name, _), text in zip(typed, texts, strict=True)]  # type: ignore[misc]
        return [((name, _value(kind, text)),) for (name, kind), text in zip(typed, texts, strict=True)]  # type: ignore[misc]

    def decode(self, children: list[Any]) -> tuple[tuple[str, Any], ...]:
        out: dict[str, Any] = {}
        for child in children:
            if child.tag == _PORT:
                raise Unusual("a port")
            if child.tag != _DATA:
                continue
            if len(child):
                raise Unusual("data with elements inside")
            try:
                name, kind = self.keys[child.get("key")]
            except KeyError:
                raise Unusual("data of an unknown key") from None
            out[name] = _value(kind, child.text)
        return tuple(out.items())

    def add_key(self, attrs: dict[str, str]) -> None:
        kind, name, key_id = attrs.get("attr.type"), attrs.get("attr.name"), attrs.get("id")
        if kind not in _TYPES or name is None or key_id is None or "yfiles.type" in attrs:
            raise Unusual("a key without a known type, a name or an id")
        self.keys[key_id] = (name, _TYPES[kind])

    @staticmethod
    def unknown_key() -> None:
        raise Unusual("data of an unknown key")

    def add_nodes(self, nodes: list[dict[str, str]], data: list[tuple[tuple[str, Any], ...]]) -> None:
        ids = [a.get("id") for a in nodes]
        if None in ids or any(a.get("yfiles.foldertype") == "group" for a in nodes):
            raise Unusual("a node without an id, or a group")
        self.add_node_ids(ids, data)  # type: ignore[arg-type]

    def add_node_ids(self, ids: list[str], data: list[tuple[tuple[str, Any], ...]]) -> None:
        """Nodes listed in the file, in order, with their data as (name, value) pairs."""
        builder = self.builder
        numbers = builder.numbers(ids)
        self.listed.extend(numbers)
        labels, attrs = builder.labels, builder.attrs
        for i, name, pairs in zip(numbers, ids, data, strict=True):
            if len(pairs) == 1 and pairs[0][0] == "label" and i not in attrs:
                labels[i] = pairs[0][1]
            elif pairs:
                builder.add_node(name, {k: v for k, v in pairs if k != "id"})  # type: ignore[arg-type]

    def add_edges(self, edges: list[dict[str, str]], data: list[tuple[tuple[str, Any], ...]]) -> None:
        sources = [a.get("source") for a in edges]
        targets = [a.get("target") for a in edges]
        if None in sources or None in targets:
            raise Unusual("an edge without a source or a target")
        keys = [-1] * len(edges)
        if any(len(a) != 2 for a in edges):  # an id, a direction, …
            against = "false" if self.directed else "true"
            for at, attrs in enumerate(edges):
                if attrs.get("directed") == against:
                    raise Unusual("an edge against the default direction")
                edge_id = attrs.get("id")
                if edge_id:
                    try:
                        int(edge_id)
                    except ValueError:
                        keys[at] = self.edge_ids.setdefault(edge_id, len(self.edge_ids))
                        continue
                    raise Unusual("an edge id that networkx reads as an integer")
        get = self.sigs.get
        sids = [get(pairs, -1) for pairs in data]
        if -1 in sids:
            sids = [self.signature(pairs, key) if sid == -1 else sid for pairs, key, sid in zip(data, keys, sids, strict=True)]
        self.add_columns(sources, targets, keys, sids)  # type: ignore[arg-type]

    def signature(self, pairs: tuple[tuple[str, Any], ...], key: int) -> int:
        """The number of an edge's data, as far as its relation goes (the data's relation
        attributes are what an edge's data is interned by: :data:`sigs` maps the data to it)."""
        if key == -1 and any(name == "key" for name, _ in pairs):
            raise Unusual("an edge key given as data")
        relation = tuple((name, value) for name, value in pairs if name in _RELATION_SET)
        if any(value.__class__ is not str for _, value in relation):
            raise Unusual("a relation that is not a string")
        sid = self.relation_sigs.setdefault(relation, len(self.relation_sigs))
        if not any(name == "key" for name, _ in pairs):  # data with a "key" is checked each time
            self.sigs[pairs] = sid
        return sid


def read_graphml(path: Path) -> FrozenGraph:
    """The graph in a GraphML file, as ``networkx.read_graphml(force_multigraph=True)`` gives it
    to Ken. Raises :class:`~cda.ken.nodelink.Unusual` for a file outside the shape it reads (see
    the module docstring), :class:`~cda.errors.KenError` for an edge without a relation or XML
    that is not well-formed (networkx's message: what, line and column)."""
    reader = _fill(path, scanned=True) or _fill(path, scanned=False)
    assert reader is not None
    sigs = [dict(t) for t in reader.relation_sigs]
    with gc_paused():
        return assemble(reader.builder, reader.listed, _int64(reader.u), _int64(reader.v), _int64(reader.sig), sigs,
                        _int64(reader.key), len(reader.edge_ids), directed=reader.directed, multigraph=True,
                        keys_are_relations=False, where=str(path))


def _fill(path: Path, *, scanned: bool) -> _Reader | None:
    """The file read into a new reader: its body matched by :func:`~cda.ken.graphml_scan.scan`
    (None when the body is not of the shape it takes), or parsed a chunk at a time."""
    reader = _Reader()
    try:
        # read once a pass, hashed as read (cda.files: what is parsed is what a digest covers)
        with gc_paused(), text_stream(path) as fh:  # nothing read here is in a cycle
            text, root_tag, graph_tag = _head(fh.read(CHUNK), fh, reader)
            head = root_tag + graph_tag
            if not scanned:
                _read(fh, text, head, reader, lambda: _check_well_formed(path))
            elif fromstring(head + "<node/></graph></graphml>")[0][0].tag != _NODE or not scan(fh, text, reader, CHUNK):
                return None  # unprefixed names outside the namespace, or a body of another shape
    except ParseError:
        _check_well_formed(path)
        raise Unusual("well-formed XML that the chunks cut wrongly") from None
    except (UnicodeDecodeError, RecursionError, CDAError):
        raise Unusual("not UTF-8, or not read") from None
    return reader


class _Nothing:
    """An ``XMLParser`` target without handlers: the parse checks the XML and builds nothing."""


def _check_well_formed(path: Path) -> None:
    """A :class:`~cda.errors.KenError` with the message networkx's reading gives (ElementTree's
    parser on the file's bytes: what is wrong, line and column) when the file is not well-formed
    XML, found in a streamed parse that holds a chunk at a time (a million-edge file that breaks
    at its end is not parsed into a tree first, as networkx would)."""
    parser = XMLParser(target=_Nothing())
    left = data_max_bytes()
    try:
        with open_regular(path) as fh:
            while data := fh.read(CHUNK):
                left -= len(data)
                if left < 0:
                    return  # grown past the cap since it was read: networkx's reading refuses it
                parser.feed(data)
            parser.close()
    except ParseError as exc:
        raise KenError(f"{path}: not GraphML (ParseError: {exc})") from None


def _read(fh: Any, text: str, head: str, reader: _Reader, check: Callable[[], None]) -> None:
    """The graph's children a chunk at a time, each chunk cut after its last end tag and parsed
    inside copies of the root's and the graph's own start tags (``head``, so that it has their
    namespaces), the end read whole with what follows the graph. When no cut parses for two
    chunks, ``check`` looks for a syntax error in the file (raising its error) once, so that a
    broken file is not carried, and copied at every cut tried, to its end."""
    checked = False
    while True:
        more = fh.read(CHUNK)
        if not more:
            break
        text += more
        cuts = sorted((text.rfind(tag) + len(tag) for tag in ("/>", "</edge>", "</node>") if tag in text), reverse=True)
        for cut in cuts:  # after the last end of an element, or the one before that, …
            try:
                graph = fromstring(head + text[:cut] + "</graph></graphml>")[0]
            except ParseError:
                continue  # the cut was inside an element (a data element's "/>", a comment, …)
            reader.take(graph)
            text = text[cut:]
            break
        else:
            if not checked and len(text) > 2 * CHUNK:
                check()
                checked = True
    root = fromstring(head + text)
    if len(root) != 1 or root[0].tag != _GRAPH:
        raise Unusual("something after the graph")
    reader.take(root[0])


def _head(text: str, fh: Any, reader: _Reader) -> tuple[str, str, str]:
    """The text up to the end of the first graph's start tag (reading as far as it takes), the
    root's and the graph's start tags; the keys and the graph's direction go into ``reader``."""
    pos = 0
    while True:
        at = text.find("<graph", pos)
        if at >= 0 and at + 6 < len(text):
            if text[at + 6] in " \t\r\n>":
                break
            pos = at + 6
            continue
        more = fh.read(CHUNK)
        if not more:
            raise Unusual("no graph")
        text += more
    end = text.find(">", at) + 1
    if text.startswith("<?xml"):  # read as UTF-8: a file that says it is in another encoding is not
        declared = text[:text.find("?>") + 2]
        at_enc = declared.find("encoding=")
        if at_enc >= 0 and declared[at_enc + 10:at_enc + 16].lower() not in ("utf-8'", 'utf-8"'):
            raise Unusual("an encoding other than UTF-8")
    if end <= 0 or text[end - 2] == "/" or "<!DOCTYPE" in text[:at]:
        raise Unusual("an empty graph, or a document type declaration")
    start = text.rfind("<graphml", 0, at)
    if start < 0:
        raise Unusual("no graphml root")
    root_tag, graph_tag = text[start:text.find(">", start) + 1], text[at:end]
    root = fromstring(text[:end] + "</graph></graphml>")
    if root.tag != _ROOT or fromstring(root_tag + "</graphml>").tag != _ROOT or not len(root) or root[-1].tag != _GRAPH:
        raise Unusual("not the graphml namespace")
    for child in root[:-1]:
        if child.tag == _KEY:
            if child.find(_DEFAULT) is not None:
                raise Unusual("a key default")
            reader.add_key(child.attrib)
    reader.directed = root[-1].get("edgedefault") == "directed"
    return text[end:], root_tag, graph_tag


def _int64(a: array[int]) -> np.ndarray:
    return np.frombuffer(a, dtype=np.int64) if len(a) else np.empty(0, dtype=np.int64)
