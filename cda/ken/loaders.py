"""Loading Ken from files: JSON (networkx node-link), CSV edge lists, GraphML.

CSV: a header naming ``source``, ``relation`` and ``target`` columns (``label``, ``type``,
``predicate`` and ``rel`` are accepted for the relation). JSON: networkx's node-link format,
with the relation in each link's ``relation`` (or ``label``/``key``) attribute. GraphML: the
relation in an edge's ``relation`` (or ``label``) data key. A malformed file raises
:class:`~cda.errors.KenError` naming the file and the problem.

Every loader builds a compact :class:`~cda.ken.store.FrozenGraph` (issue 34: a million edges in
seconds and a few hundred megabytes; docs/benchmarks.md, "Ken"). Node-link JSON and GraphML are
read element by element (:mod:`cda.ken.nodelink`, :mod:`cda.ken.graphml`); a file outside their
everyday shape is read through networkx as before, whose graph is copied into the same store in
the same order, so every answer is the one networkx's reading gives.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path
from xml.etree.ElementTree import ParseError

import networkx as nx

from cda.access import readable
from cda.errors import CDAError, KenError
from cda.files import read_bytes, read_json, read_text
from cda.ken.graph import KenGraph
from cda.ken.graphml import read_graphml
from cda.ken.nodelink import RELATION_KEYS as _RELATION_KEYS
from cda.ken.nodelink import Unusual, read_node_link
from cda.ken.nodelink import relation_of as _relation
from cda.ken.store import GraphBuilder

__all__ = ["load_ken", "load_json", "load_csv", "load_graphml"]


def _from_graph(g: nx.Graph, where: str, keys_are_relations: bool) -> KenGraph:
    """Copy a networkx graph into Ken; a multigraph's edge key counts as the relation only when
    the file gave it as a string (networkx numbers keyless edges 0, 1, …)."""
    ken = GraphBuilder()
    for node, data in g.nodes(data=True):
        ken.add_node(str(node), {k: v for k, v in data.items() if k != "id"})
    edges: list[tuple[object, object, dict[str, object]]] = []
    if g.is_multigraph():
        for u, v, k, d in g.edges(keys=True, data=True):
            data = dict(d)
            if keys_are_relations and isinstance(k, str) and not any(r in data for r in _RELATION_KEYS):
                data["key"] = k
            edges.append((u, v, data))
    else:
        edges = list(g.edges(data=True))
    for u, v, data in edges:
        ken.add_edge(str(u), _relation(data, where), str(v))
        if not g.is_directed():
            ken.add_edge(str(v), _relation(data, where), str(u))
    return KenGraph.of_frozen(ken.freeze())


def load_json(path: Path) -> KenGraph:
    try:
        return KenGraph.of_frozen(read_node_link(path))
    except Unusual:
        return _load_json_networkx(path)


def _load_json_networkx(path: Path) -> KenGraph:
    """What :func:`read_node_link` leaves aside, read by networkx (its answers, its errors)."""
    data = read_json(path, KenError)
    if not isinstance(data, dict) or "nodes" not in data:
        raise KenError(f"{path}: expected networkx node-link JSON with 'nodes' and 'links'/'edges'")
    if not isinstance(data["nodes"], list):
        raise KenError(f"{path}: not node-link JSON ('nodes' must be a list of node objects)")
    edges_key = "links" if "links" in data else "edges"
    try:
        g = nx.node_link_graph(
            data, directed=data.get("directed", True), multigraph=data.get("multigraph", True), edges=edges_key
        )
    except (KeyError, TypeError, ValueError, AttributeError, nx.NetworkXError) as exc:
        raise KenError(f"{path}: not node-link JSON ({type(exc).__name__}: {exc})") from None
    return _from_graph(g, str(path), keys_are_relations=True)


def load_csv(path: Path) -> KenGraph:
    try:
        return _load_csv(path)
    except UnicodeDecodeError as exc:
        raise KenError(f"{path}: not UTF-8 text (byte {exc.start})") from None
    except csv.Error as exc:
        raise KenError(f"{path}: not a CSV edge list ({exc})") from None


def _load_csv(path: Path) -> KenGraph:
    """As :class:`csv.DictReader` reads the file (so blank lines are skipped and counted as it
    counts them, a repeated column's last value wins), without a dict per row."""
    ken = GraphBuilder()
    try:
        text = read_text(path)  # read once: what is parsed is what a digest of the file covers
    except CDAError as exc:
        raise KenError(str(exc)) from None
    with io.StringIO(text, newline="") as fh:
        reader = csv.reader(fh)
        header = next(reader, [])
        fields = [f.strip().lower() for f in header]
        if "source" not in fields or "target" not in fields:
            raise KenError(f"{path}:1: the header must name 'source' and 'target' columns, found {fields}")
        rel_col = next((k for k in _RELATION_KEYS if k in fields), None)
        if rel_col is None:
            raise KenError(f"{path}:1: the header must name a relation column ({', '.join(_RELATION_KEYS)})")
        # DictReader keys a row by the header's names (a repeated name: its last column), in the
        # order of their first appearance; lower-cased, a later name wins the same slot
        raw = {name: col for col, name in enumerate(header)}
        column: dict[str, int] = {}
        for name in dict.fromkeys(header):
            column[name.strip().lower()] = raw[name]
        s_col, r_col, t_col = column["source"], column[rel_col], column["target"]
        width = max(s_col, r_col, t_col) + 1
        add = ken.add_edge
        lineno = 1
        for row in reader:
            if not row:
                continue  # DictReader skips an empty row and does not count it
            lineno += 1
            if len(row) < width:
                row = row + [""] * (width - len(row))
            source, relation, target = row[s_col].strip(), row[r_col].strip(), row[t_col].strip()
            if not source or not target or not relation:
                raise KenError(f"{path}:{lineno}: empty source, target or relation")
            add(source, relation, target)
    return KenGraph.of_frozen(ken.freeze())


def load_graphml(path: Path) -> KenGraph:
    try:
        return KenGraph.of_frozen(read_graphml(path))
    except Unusual:
        return _load_graphml_networkx(path)


def _load_graphml_networkx(path: Path) -> KenGraph:
    """What :func:`read_graphml` leaves aside, read by networkx (its answers, its errors)."""
    try:
        data = read_bytes(path)
    except CDAError as exc:
        raise KenError(str(exc)) from None
    try:
        g = nx.read_graphml(io.BytesIO(data), force_multigraph=True)
    except (ParseError, nx.NetworkXError, ValueError, KeyError, TypeError, UnicodeDecodeError) as exc:
        raise KenError(f"{path}: not GraphML ({type(exc).__name__}: {exc})") from None
    return _from_graph(g, str(path), keys_are_relations=False)


def load_ken(path: str | Path) -> KenGraph:
    """Load a Ken graph, choosing the format by extension (.json, .csv, .graphml/.xml).

    Every failure is a ``KenError`` naming the file, the operating system's included (a name
    too long for the file system, a directory without permission).
    """
    path = readable(path)  # cda.access: refused before anything is opened, for a caller that may not read it
    try:
        return _load_ken(path)
    except OSError as exc:
        shown = str(path) if len(str(path)) <= 80 else f"{str(path)[:60]}…{str(path)[-16:]}"
        raise KenError(f"{shown}: cannot read ({exc.strerror or type(exc).__name__})") from None


def _load_ken(path: Path) -> KenGraph:
    if not path.exists():
        raise KenError(f"{path}: no such file")
    if not path.is_file():
        raise KenError(f"{path}: not a file")
    suffix = path.suffix.lower()
    if suffix == ".json":
        return load_json(path)
    if suffix in (".csv", ".tsv"):
        return load_csv(path)
    if suffix in (".graphml", ".xml"):
        return load_graphml(path)
    raise KenError(f"{path}: unknown Ken format '{suffix}' (use .json, .csv or .graphml)")
