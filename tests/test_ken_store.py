"""Ken's compact store and its streaming loaders answer exactly as the networkx route did.

The reference is that route, written out here as plainly as it was: ``json.load`` and
``networkx.node_link_graph``, ``networkx.read_graphml``, ``csv.DictReader``, each graph copied
edge by edge into a networkx ``MultiDiGraph`` (a multigraph's string key naming the relation of
an edge without one, undirected edges both ways) and queried by a :class:`KenGraph` over it —
the dict-walking code, not the compact store. Random graphs of every shape the loaders take —
directed or not, multi or simple, keys given, missing or repeated, links repeating a pair,
integer ids, nodes named only by links, links before nodes, labels with the index's awkward
characters, pretty-printed or not — are written in each format and loaded both ways; the node
order, the edge order, the attributes, every query's answer and every error must be equal.
The buffers are made tiny in some runs so that every cut (inside a string, a number, between an
element and its comma) is crossed.
"""

from __future__ import annotations

import copy
import csv
import json
import pickle
import random
from pathlib import Path
from typing import Any
from xml.etree.ElementTree import ParseError
from xml.sax.saxutils import escape, quoteattr

import networkx as nx
import pytest

from cda.errors import KenError
from cda.files import read_json
from cda.ken import graphml as graphml_reader
from cda.ken import nodelink
from cda.ken.graph import KenGraph
from cda.ken.loaders import load_ken
from cda.ken.store import GraphBuilder

RELATION_KEYS = ("relation", "label", "key", "type", "predicate", "rel")
NAMES = ["a", "ab", "B", "Σx", "ς", "İ", "c}1", 'q"x', "n,1", "x\x00y", " s ", "z]"]
LABELS: list[Any] = ["Alpha", "ALPHA beta", "ΟΔΟΣ", "İstanbul", "", "a}, {b", "7", "x\x00y", "[1, 2]"]
RELS = ["depends", "causes", "fixes", "r,1", "R"]


# ---- the reference: the networkx route, as it was ----------------------------------------------


def _relation(data: dict[str, Any], where: str) -> str:
    for key in RELATION_KEYS:
        if key in data and data[key] not in (None, ""):
            return str(data[key])
    raise KenError(f"{where}: an edge has no relation (looked for {', '.join(RELATION_KEYS)})")


def _copy(g: nx.Graph, where: str, keys_are_relations: bool) -> nx.MultiDiGraph:
    out = nx.MultiDiGraph()
    for node, data in g.nodes(data=True):
        out.add_node(str(node), **{k: v for k, v in data.items() if k != "id"})
    edges: list[tuple[Any, Any, dict[str, Any]]] = []
    if g.is_multigraph():
        for u, v, k, d in g.edges(keys=True, data=True):
            data = dict(d)
            if keys_are_relations and isinstance(k, str) and not any(r in data for r in RELATION_KEYS):
                data["key"] = k
            edges.append((u, v, data))
    else:
        edges = list(g.edges(data=True))
    for u, v, data in edges:
        pairs = [(str(u), str(v))] + ([] if g.is_directed() else [(str(v), str(u))])
        for a, b in pairs:
            rel = _relation(data, where)
            if not out.has_edge(a, b, key=rel):
                out.add_edge(a, b, key=rel, relation=rel)
    return out


def reference(path: Path) -> nx.MultiDiGraph:
    where = str(path)
    if path.suffix == ".json":
        data = read_json(path, KenError)
        if not isinstance(data, dict) or "nodes" not in data:
            raise KenError(f"{path}: expected networkx node-link JSON with 'nodes' and 'links'/'edges'")
        if not isinstance(data["nodes"], list):
            raise KenError(f"{path}: not node-link JSON ('nodes' must be a list of node objects)")
        edges = "links" if "links" in data else "edges"
        try:
            g = nx.node_link_graph(data, directed=data.get("directed", True), multigraph=data.get("multigraph", True),
                                   edges=edges)
        except (KeyError, TypeError, ValueError, AttributeError, nx.NetworkXError) as exc:
            raise KenError(f"{path}: not node-link JSON ({type(exc).__name__}: {exc})") from None
        return _copy(g, where, keys_are_relations=True)
    if path.suffix == ".graphml":
        try:
            g = nx.read_graphml(path, force_multigraph=True)
        except (ParseError, nx.NetworkXError, ValueError, KeyError, TypeError, UnicodeDecodeError) as exc:
            raise KenError(f"{path}: not GraphML ({type(exc).__name__}: {exc})") from None
        return _copy(g, where, keys_are_relations=False)
    out = nx.MultiDiGraph()
    with path.open(newline="", encoding="utf-8") as fh:
        for lineno, row in enumerate(csv.DictReader(fh), start=2):
            row = {k.strip().lower(): (v or "").strip() for k, v in row.items() if k is not None}
            rel = next(row[k] for k in RELATION_KEYS if k in row)
            if not row.get("source") or not row.get("target") or not rel:
                raise KenError(f"{path}:{lineno}: empty source, target or relation")
            if not out.has_edge(row["source"], row["target"], key=rel):
                out.add_edge(row["source"], row["target"], key=rel, relation=rel)
    return out


# ---- random graphs in each format --------------------------------------------------------------


def random_node_link(rng: random.Random) -> dict[str, Any]:
    ints = rng.random() < 0.2
    pool: list[Any] = list(range(14)) if ints else NAMES + [f"n{i}" for i in range(6)]
    nodes = []
    for node in rng.sample(pool, rng.randint(0, len(pool) // 2)):
        d: dict[str, Any] = {"id": node}
        shape = rng.random()
        if shape < 0.6:
            d["label"] = rng.choice(LABELS)
        elif shape < 0.75:
            d.update(kind=rng.choice(["svc", "db"]), label=rng.choice(LABELS))
        nodes.append(d)
        if rng.random() < 0.1:
            nodes.append({"id": node, "label": rng.choice(LABELS), "extra": 1})  # listed twice: attributes merge
    multigraph = rng.random() < 0.75
    links = []
    for _ in range(rng.randint(0, 40)):
        d = {"source": rng.choice(pool), "target": rng.choice(pool)}
        shape = rng.random()
        rel = rng.choice(RELS)
        if shape < 0.45:
            d.update(relation=rel, key=rel)
        elif shape < 0.65:
            d["relation"] = rel
        elif shape < 0.75:
            d["key"] = rel  # a multigraph's key names the relation
        elif shape < 0.82:
            d.update(label=rel, weight=rng.random())
        elif shape < 0.88:
            d.update(relation=rel, key=rng.choice(RELS))  # a key other than the relation: merges by key
        elif shape < 0.93:
            d.update(type=rel, rel=rng.choice(RELS), relation=None)
        else:
            d.update(relation=rel, key=None)
        links.append(d)
    if links and rng.random() < 0.3:
        links += [dict(x) for x in rng.sample(links, min(3, len(links)))]  # repeated links
    out: dict[str, Any] = {}
    order = ["directed", "multigraph", "graph", "nodes", "links"]
    if rng.random() < 0.3:
        rng.shuffle(order)  # the flags after the links, the links before the nodes
    values = {"directed": rng.random() < 0.8, "multigraph": multigraph, "graph": {"name": "g"}, "nodes": nodes,
              "links": links}
    for key in order:
        if key in ("directed", "multigraph", "graph") and rng.random() < 0.2:
            continue  # left to the defaults
        out[key] = values[key]
    if rng.random() < 0.1:
        out["edges"] = out.pop("links")
    return out


def write_json(path: Path, data: dict[str, Any], rng: random.Random) -> None:
    style = rng.choice([{}, {"indent": 2}, {"separators": (",", ":")}, {"indent": "\t", "ensure_ascii": False}])
    path.write_text(json.dumps(data, **style), encoding="utf-8")  # type: ignore[arg-type]


def write_graphml(path: Path, rng: random.Random, directed: bool) -> None:
    xml_names = [n for n in NAMES if "\x00" not in n]  # XML has no NUL
    labels = [x for x in LABELS if "\x00" not in x]
    nodes = rng.sample(xml_names + [f"n{i}" for i in range(6)], rng.randint(0, 10))
    pool = nodes + ["only_in_edges", "n0"]
    lines = ['<?xml version="1.0" encoding="utf-8"?>',
             '<graphml xmlns="http://graphml.graphdrawing.org/xmlns" '
             'xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance">',
             '<key id="d0" for="node" attr.name="label" attr.type="string"/>',
             '<key id="d1" for="edge" attr.name="relation" attr.type="string"/>',
             '<key id="d2" for="edge" attr.name="weight" attr.type="double"/>',
             '<key id="d3" for="node" attr.name="rank" attr.type="int"/>',
             '<key id="d4" for="edge" attr.name="label" attr.type="string"/>',
             f'<graph edgedefault="{"directed" if directed else "undirected"}">']
    body = []
    for node in nodes:
        shape = rng.random()
        if shape < 0.6:
            body.append(f'<node id={quoteattr(node)}><data key="d0">{escape(rng.choice(labels))}</data></node>')
        elif shape < 0.8:
            body.append(f'<node id={quoteattr(node)}>\n  <data key="d3">{rng.randint(0, 9)}</data>\n'
                        f'  <data key="d0">{escape(rng.choice(labels))}</data>\n</node>')
        else:
            body.append(f"<node id={quoteattr(node)}/>")
    for _ in range(rng.randint(0, 30)):
        u, v, rel = rng.choice(pool), rng.choice(pool), escape(rng.choice(RELS))
        shape = rng.random()
        ends = f"source={quoteattr(u)} target={quoteattr(v)}"
        if shape < 0.5:
            body.append(f'<edge {ends}><data key="d1">{rel}</data></edge>')
        elif shape < 0.65:
            body.append(f'<edge id="e{rng.randint(0, 5)}" {ends}><data key="d1">{rel}</data></edge>')  # ids repeat
        elif shape < 0.75:
            body.append(f'<edge {ends}>\n <data key="d2">1.5</data>\n <data key="d4">{rel}</data>\n</edge>')
        elif shape < 0.85:
            body.append(f'<edge {ends}><data key="d1"><![CDATA[{rng.choice(RELS)}]]></data></edge>')
        else:
            body.append(f'<edge {ends}><!-- c --><data key="d1">{rel}</data></edge>')
    if rng.random() < 0.3:
        rng.shuffle(body)  # edges before nodes
    path.write_text("\n".join(lines + body + ["</graph>", "</graphml>"]) + "\n", encoding="utf-8")


def write_csv(path: Path, rng: random.Random) -> None:
    header = rng.choice([["source", "relation", "target"], [" Source", "Label", "TARGET "],
                         ["target", "rel", "source", "note"]])
    rows = []
    for _ in range(rng.randint(0, 30)):
        row = {"source": rng.choice(NAMES[:8]), "target": rng.choice(NAMES[:8]), "rel": rng.choice(RELS)}
        rows.append([row["source"] if h.strip().lower() == "source" else row["target"] if h.strip().lower() == "target"
                     else "n" if h == "note" else row["rel"] for h in header])
    with path.open("w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(header)
        for row in rows:
            w.writerow(row)
            if rng.random() < 0.1:
                fh.write("\r\n")  # a blank line: skipped, and not counted


# ---- the comparison -----------------------------------------------------------------------------


def assert_same(loaded: KenGraph, ref_graph: nx.MultiDiGraph, rng: random.Random, rounds: int = 40) -> None:
    ref = KenGraph(ref_graph)
    assert loaded.node_ids() == list(ref_graph.nodes)
    assert_queries(loaded, ref, random.Random(rng.random()), rounds)  # the compact store's own walks
    view = loaded.graph  # from here on, the graph as networkx holds it
    assert list(view.nodes(data=True)) == list(ref_graph.nodes(data=True))
    assert list(view.edges(keys=True, data=True)) == list(ref_graph.edges(keys=True, data=True))
    assert_queries(KenGraph(view), ref, rng, rounds)


def assert_queries(ken: KenGraph, ref: KenGraph, rng: random.Random, rounds: int = 40) -> None:
    names = sorted(ref.node_ids()) + ["missing"]
    rels: list[str | None] = [None, *RELS, "missing"]
    assert len(ken) == len(ref)
    for _ in range(rounds):
        needle, limit = rng.choice(["", "a", "Σ", "ς", "i̇", "}", "\x00", "n", "alpha b", "7"]), rng.choice([-1, 0, 1, 3, 50])
        assert ken.search(needle, limit) == ref.search(needle, limit), (needle, limit)
        node, hops, rel = rng.choice(names), rng.randint(0, 3), rng.choice(rels)
        assert ken.neighborhood(node, hops, rel) == ref.neighborhood(node, hops, rel)
        rel2 = rng.choice(RELS + ["missing"])
        assert ken.related_by(node, rel2) == ref.related_by(node, rel2)
        src, dst, max_hops = rng.choice(names), rng.choice(names), rng.choice([None, -1, 0, 1, 2, 4])
        assert ken.path(src, dst, rel, max_hops) == ref.path(src, dst, rel, max_hops)
        assert ken.has_relation(rel2) == ref.has_relation(rel2) and ken.has_node(node) == ref.has_node(node)


def load_both(path: Path) -> tuple[KenGraph | str, nx.MultiDiGraph | str]:
    def attempt(f: Any) -> Any:
        try:
            return f(path)
        except KenError as exc:
            return f"KenError: {exc}"
    return attempt(load_ken), attempt(reference)


@pytest.mark.parametrize("tiny", [False, True])
@pytest.mark.parametrize("seed", range(40))
def test_node_link_json_loads_as_networkx_reads_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, seed: int,
                                                  tiny: bool) -> None:
    if tiny:
        monkeypatch.setattr(nodelink, "CHUNK", 7)  # every cut crossed: inside strings, numbers, after '}'
    rng = random.Random(seed)
    path = tmp_path / "g.json"
    write_json(path, random_node_link(rng), rng)
    loaded, ref = load_both(path)
    if isinstance(ref, str) or isinstance(loaded, str):
        assert loaded == ref
    else:
        assert_same(loaded, ref, rng)


def test_the_fast_reader_takes_the_everyday_files(tmp_path: Path) -> None:
    """The random files above are mostly read by the fast path, not handed back to networkx
    (which would make the comparison vacuous)."""
    fast = 0
    for seed in range(40):
        rng = random.Random(seed)
        path = tmp_path / f"g{seed}.json"
        write_json(path, random_node_link(rng), rng)
        try:
            nodelink.read_node_link(path)
            fast += 1
        except nodelink.Unusual:
            pass
        except KenError:
            fast += 1
    assert fast >= 30


@pytest.mark.parametrize("tiny", [False, True])
@pytest.mark.parametrize("seed", range(25))
def test_graphml_loads_as_networkx_reads_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, seed: int,
                                           tiny: bool) -> None:
    if tiny:
        monkeypatch.setattr(graphml_reader, "CHUNK", 50)
    rng = random.Random(seed)
    path = tmp_path / "g.graphml"
    write_graphml(path, rng, directed=rng.random() < 0.7)
    graphml_reader.read_graphml(path)  # the fast path takes every one of these files
    loaded, ref = load_both(path)
    if isinstance(ref, str) or isinstance(loaded, str):
        assert loaded == ref
    else:
        assert_same(loaded, ref, rng)


@pytest.mark.parametrize("seed", range(15))
def test_csv_loads_as_dictreader_reads_it(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    path = tmp_path / "g.csv"
    write_csv(path, rng)
    loaded, ref = load_both(path)
    if isinstance(ref, str) or isinstance(loaded, str):
        assert loaded == ref
    else:
        assert_same(loaded, ref, rng)


@pytest.mark.parametrize("text", [
    '{"nodes": [], "links": [{"source": "a", "target": "b"}]}',  # no relation
    '{"nodes": [], "links": [{"source": "a", "target": "b", "key": ""}]}',
    '{"nodes": [], "links": [{"source": "a", "target": "b", "relation": null, "key": "k"}]}',
    '{"multigraph": false, "nodes": [], "links": [{"source": "a", "target": "b"}, {"source": "a", "target": "b", "rel": "r"}]}',
    '{"nodes": [], "links": [{"source": "a", "target": "b", "key": "k"}, {"source": "a", "target": "b", "key": "k", "type": "t"}]}',
    '{"nodes": [{"id": 1}, {"id": "1"}], "links": []}',  # two kinds of id: networkx's way
    '{"nodes": [{"label": "x"}, {"label": "y"}], "links": [{"source": 0, "target": 1, "relation": "r"}]}',
    '{"nodes": [], "links": [{"source": [1, 2], "target": "b", "relation": "r"}]}',
    '{"nodes": [], "links": [], "nodes": []}',
    '{"nodes": [], "links": [{"source": "a", "target": "b", "relation": 5}]}',
    '{"nodes": {}, "links": []}',
    '{"nodes": [], "links": [{"source": "a", "target": "b", "relation": "r"},]}',
    '{"nodes": [], "links": [{"source": "a", "target": "b", "relation": "r"}]} x',
    '{"nodes": [], "links": [{"source": "a", "target": "b", "relation": "r"}',
    '[1, 2]',
    '{"nodes": [], "edges": [{"source": "a", "target": "b", "relation": "r"}]}',
])
def test_odd_node_link_files_load_or_fail_as_networkx_reads_them(tmp_path: Path, text: str) -> None:
    path = tmp_path / "g.json"
    path.write_text(text, encoding="utf-8")
    loaded, ref = load_both(path)
    if isinstance(ref, str) or isinstance(loaded, str):
        assert loaded == ref
    else:
        assert_same(loaded, ref, random.Random(0))


# ---- writes over a loaded graph, merges, copies --------------------------------------------------


def loaded_and_reference(tmp_path: Path, seed: int) -> tuple[KenGraph, KenGraph]:
    rng = random.Random(seed)
    data = random_node_link(rng)
    data.update(directed=True, multigraph=True)
    for link in data.get("links", data.get("edges", [])):
        link.update(relation=rng.choice(RELS))
    path = tmp_path / "g.json"
    write_json(path, data, rng)
    return load_ken(path), KenGraph(reference(path))


@pytest.mark.parametrize("seed", range(12))
def test_writes_over_a_loaded_graph_answer_as_writes_to_networkx(tmp_path: Path, seed: int) -> None:
    loaded, ref = loaded_and_reference(tmp_path, seed)
    rng = random.Random(seed)
    loaded.search("a")  # the base's index exists before the writes
    twin = loaded.merged(KenGraph())
    pool = NAMES + ["new1", "new2"]
    for _ in range(rng.randint(1, 12)):
        if rng.random() < 0.6:
            u, r, v = rng.choice(pool), rng.choice(RELS), rng.choice(pool)
            loaded.add_edge(u, r, v)
            ref.add_edge(u, r, v)
        else:
            n, label = rng.choice(pool), rng.choice(LABELS)
            loaded.add_node(n, label=label)
            ref.add_node(n, label=label)
        assert_queries(loaded, ref, rng, rounds=8)
    assert loaded.node_ids() == ref.node_ids()
    assert list(loaded.graph.edges(keys=True)) == list(ref.graph.edges(keys=True))
    _, fresh = loaded_and_reference(tmp_path, seed)
    assert_queries(twin, fresh, rng)  # the twin shared the base and saw none of the writes


@pytest.mark.parametrize("seed", range(8))
def test_merging_loaded_graphs_is_merging_their_networkx_graphs(tmp_path: Path, seed: int) -> None:
    a, ref_a = loaded_and_reference(tmp_path, seed)
    (tmp_path / "b").mkdir()
    b, ref_b = loaded_and_reference(tmp_path / "b", seed + 100)
    inline = KenGraph()
    inline.add_node("a", label="inline label")
    inline.add_edge("a", "depends", "inline_only")
    for left, right, ref_left, ref_right in [(a, b, ref_a, ref_b), (inline, a, inline, ref_a), (a, inline, ref_a, inline)]:
        got, want = left.merged(right), ref_left.merged(ref_right)
        assert got.node_ids() == want.node_ids()
        assert list(got.graph.nodes(data=True)) == list(want.graph.nodes(data=True))
        assert list(got.graph.edges(keys=True)) == list(want.graph.edges(keys=True))
        assert_queries(got, want, random.Random(seed))


def test_a_loaded_graph_pickles_and_copies_whole(tmp_path: Path) -> None:
    loaded, ref = loaded_and_reference(tmp_path, 3)
    loaded.search("a")
    for back in (pickle.loads(pickle.dumps(loaded)), copy.deepcopy(loaded), copy.copy(loaded)):
        assert_queries(back, ref, random.Random(1))
        back.add_edge("zz", "depends", "a")
        assert not loaded.has_node("zz")


def test_the_builder_keeps_the_first_call_and_updates_attributes() -> None:
    b = GraphBuilder()
    b.add_edge("b", "r", "a")
    b.add_node("a", {"label": "one"})
    b.add_edge("b", "r", "a")  # again: kept once, in its first place
    b.add_edge("a", "q", "c")
    b.add_node("a", {"kind": "db"})
    fg = b.freeze()
    assert [n for n, _ in fg.nodes_in_order()] == ["b", "a", "c"]
    assert dict(fg.nodes_in_order())["a"] == {"label": "one", "kind": "db"}
    assert list(fg.edges_in_order()) == [("b", "r", "a"), ("a", "q", "c")]
    assert fg.succ("b", "r") == ["a"] and fg.pred("a", None) == ["b"] and fg.succ("a", "missing") == []


@pytest.mark.parametrize("suffix", [".json", ".graphml", ".csv"])
def test_a_loaded_file_is_read_once_and_recorded_with_the_hash_of_what_was_parsed(tmp_path: Path, suffix: str) -> None:
    from cda.files import recording, sha256_of

    rng = random.Random(5)
    path = tmp_path / f"g{suffix}"
    if suffix == ".json":
        write_json(path, {"nodes": [{"id": "a", "label": "Ａ"}], "links": [{"source": "a", "target": "b", "relation": "r"}]}, rng)
    elif suffix == ".graphml":
        write_graphml(path, rng, directed=True)
    else:
        write_csv(path, rng)
    with recording() as reads:
        load_ken(path)
    assert reads == {str(path.resolve()): sha256_of(path.read_bytes())}


# ---- determinism ----------------------------------------------------------------------------------

_DIGEST = r"""
import hashlib, json, pickle, sys
from cda.ken.loaders import load_ken
ken = load_ken(sys.argv[1])
names = sorted(ken.node_ids())
answers = [[ken.neighborhood(n, 2), ken.path(names[0], n), ken.related_by(n, "depends"), ken.search(n[:1])]
           for n in names]
print(hashlib.sha256(pickle.dumps(ken, protocol=5)).hexdigest(), hashlib.sha256(json.dumps(answers).encode()).hexdigest())
"""


def test_loading_gives_the_same_bytes_in_every_process_and_from_json_and_graphml(tmp_path: Path) -> None:
    """Ground rule 9: the same file gives the same stored graph, byte for byte (its pickle: names,
    labels, every array), and the same answers, whatever the interpreter's string hashing; and
    the same graph written as node-link JSON and as GraphML loads into the same bytes."""
    import os
    import subprocess
    import sys

    rng = random.Random(11)
    nodes = [f"n{i:03d}" for i in range(300)]
    labels = {n: f"{rng.choice(['api', 'db', 'cache'])} {i}" for i, n in enumerate(nodes)}
    links = [(rng.choice(nodes), rng.choice(RELS[:3]), rng.choice(nodes)) for _ in range(1500)]
    (tmp_path / "g.json").write_text(json.dumps({
        "directed": True, "multigraph": True, "graph": {},
        "nodes": [{"id": n, "label": labels[n]} for n in nodes],
        "links": [{"source": u, "target": v, "relation": r, "key": r} for u, r, v in links]}), encoding="utf-8")
    (tmp_path / "g.graphml").write_text("\n".join([
        '<?xml version="1.0" encoding="utf-8"?>', '<graphml xmlns="http://graphml.graphdrawing.org/xmlns">',
        '<key id="d0" for="node" attr.name="label" attr.type="string"/>',
        '<key id="d1" for="edge" attr.name="relation" attr.type="string"/>', '<graph edgedefault="directed">',
        *(f'<node id="{n}"><data key="d0">{labels[n]}</data></node>' for n in nodes),
        *(f'<edge source="{u}" target="{v}"><data key="d1">{r}</data></edge>' for u, r, v in links),
        "</graph></graphml>"]), encoding="utf-8")
    digests = set()
    for name in ("g.json", "g.graphml"):
        for hash_seed in ("1", "2"):
            env = {**os.environ, "PYTHONHASHSEED": hash_seed}
            out = subprocess.run([sys.executable, "-c", _DIGEST, str(tmp_path / name)], capture_output=True, text=True,
                                 env=env, check=True).stdout
            digests.add(out)
    assert len(digests) == 1, digests
    assert [len(part) for part in digests.pop().split()] == [64, 64]  # each child printed both digests
