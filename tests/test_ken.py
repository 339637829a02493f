"""Ken, the knowledge graph: its safe queries, its file loaders, and grounding paths against it.

networkx is the oracle for paths; brute force over every edge subset is the oracle for paths
whose edges are hypotheses.
"""

from __future__ import annotations

import csv
import itertools
import json
from pathlib import Path

import networkx as nx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cda
from cda.errors import DSLError, DSLTypeError, KenError
from cda.ken.graph import KenGraph
from cda.ken.loaders import load_csv, load_graphml, load_json, load_ken

EDGES = [
    ("api", "depends", "auth"),
    ("api", "depends", "cache"),
    ("auth", "depends", "db"),
    ("cache", "depends", "db"),
    ("db", "depends", "disk"),
    ("api", "owned_by", "team_a"),
    ("db", "owned_by", "team_b"),
    ("team_a", "reports_to", "team_b"),
]


def make_ken(edges: list[tuple[str, str, str]] = EDGES) -> KenGraph:
    ken = KenGraph()
    for s, r, t in edges:
        ken.add_edge(s, r, t)
    ken.add_node("api", label="Public API gateway")
    ken.add_node("lonely", label="Nothing links here")
    return ken


def edge_set(ken: KenGraph) -> set[tuple[str, str, str]]:
    return {(u, k, v) for u, v, k in ken.graph.edges(keys=True)}


def nx_view(edges: list[tuple[str, str, str]], relation: str | None) -> nx.DiGraph:
    g = nx.DiGraph()
    g.add_edges_from((s, t) for s, r, t in edges if relation is None or r == relation)
    return g


# ---- the safe query set -------------------------------------------------------------------
def test_search_matches_ids_and_labels_case_insensitively() -> None:
    ken = make_ken()
    assert ken.search("team") == ["team_a", "team_b"]
    assert ken.search("GATEWAY") == ["api"]  # via the label
    assert ken.search("a") == ["api", "auth", "cache", "team_a", "team_b"]
    assert ken.search("a", limit=2) == ken.search("a")[:2] and len(ken.search("a", limit=2)) == 2
    assert ken.search("no such thing") == []


def test_neighborhood_goes_both_ways_within_hops() -> None:
    ken = make_ken()
    assert ken.neighborhood("auth") == ["api", "db"]  # a predecessor and a successor
    assert ken.neighborhood("auth", hops=2) == ["api", "cache", "db", "disk", "team_a", "team_b"]
    assert ken.neighborhood("auth", hops=2, relation="depends") == ["api", "cache", "db", "disk"]
    assert ken.neighborhood("team_a", relation="owned_by") == ["api"]
    assert ken.neighborhood("auth", hops=0) == []
    assert ken.neighborhood("lonely", hops=3) == []
    assert ken.neighborhood("missing") == []
    assert "auth" not in ken.neighborhood("auth", hops=5)


def test_neighborhood_agrees_with_networkx() -> None:
    ken = make_ken()
    undirected = nx_view(EDGES, None).to_undirected()
    undirected.add_node("lonely")
    for node in undirected.nodes:
        for hops in range(4):
            lengths = nx.single_source_shortest_path_length(undirected, node, cutoff=hops)
            assert ken.neighborhood(node, hops=hops) == sorted(n for n in lengths if n != node)


def test_related_by_lists_direct_successors_along_one_relation() -> None:
    ken = make_ken()
    assert ken.related_by("api", "depends") == ["auth", "cache"]
    assert ken.related_by("api", "owned_by") == ["team_a"]
    assert ken.related_by("auth", "owned_by") == []
    assert ken.related_by("db", "depends") == ["disk"]
    assert ken.related_by("disk", "depends") == []  # edges are directed
    assert ken.related_by("nowhere", "depends") == []


def test_path_filters_by_relation_and_bounds_hops() -> None:
    ken = make_ken()
    assert ken.path("api", "db", relation="depends") == ["api", "auth", "db"]
    assert ken.path("api", "disk", relation="depends", max_hops=3) == ["api", "auth", "db", "disk"]
    assert ken.path("api", "disk", relation="depends", max_hops=2) is None
    assert ken.path("api", "team_b", relation="depends") is None
    assert ken.path("api", "team_b", relation="owned_by") is None
    assert ken.path("api", "team_b") == ["api", "team_a", "team_b"]  # any relation
    assert ken.path("db", "api", relation="depends") is None  # directed
    assert ken.path("api", "api", relation="depends", max_hops=0) == ["api"]
    assert ken.path("api", "nowhere") is None


def test_path_is_the_lexicographically_smallest_shortest_path_whatever_the_insertion_order() -> None:
    diamond = [("s", "r", "z"), ("z", "r", "t"), ("s", "r", "m"), ("m", "r", "t"), ("s", "r", "b"), ("b", "x", "t")]
    answers = set()
    for order in itertools.permutations(diamond):
        ken = KenGraph()
        for s, r, t in order:
            ken.add_edge(s, r, t)
        answers.add(tuple(ken.path("s", "t", relation="r") or ()))
    assert answers == {("s", "m", "t")}


_node = st.sampled_from(["a", "b", "c", "d", "e"])


@settings(max_examples=150, derandomize=True, deadline=None)
@given(st.lists(st.tuples(_node, st.sampled_from(["r", "q"]), _node), max_size=12), st.integers(0, 4))
def test_path_agrees_with_networkx(edges: list[tuple[str, str, str]], hops: int) -> None:
    ken = KenGraph()
    for s, r, t in edges:
        ken.add_edge(s, r, t)
    view = nx_view(edges, "r")
    for src, dst in itertools.product(view.nodes, repeat=2):
        got = ken.path(src, dst, relation="r", max_hops=hops)
        if not nx.has_path(view, src, dst) or nx.shortest_path_length(view, src, dst) > hops:
            assert got is None
            continue
        assert got is not None
        assert len(got) - 1 == nx.shortest_path_length(view, src, dst)
        assert got == min(nx.all_shortest_paths(view, src, dst))
        assert all(ken.graph.has_edge(u, v, key="r") for u, v in zip(got, got[1:]))


def test_merged_is_a_new_graph_holding_both() -> None:
    one, two = make_ken(EDGES[:3]), make_ken(EDGES[3:])
    both = one.merged(two)
    assert edge_set(both) == set(EDGES)
    assert edge_set(one) == set(EDGES[:3]) and edge_set(two) == set(EDGES[3:])
    assert both.has_relation("reports_to") and not one.has_relation("reports_to")


def test_add_edge_is_idempotent() -> None:
    ken = KenGraph()
    ken.add_edge("a", "r", "b")
    ken.add_edge("a", "r", "b")
    ken.add_edge("a", "q", "b")
    assert ken.graph.number_of_edges() == 2 and edge_set(ken) == {("a", "r", "b"), ("a", "q", "b")}


# ---- loaders --------------------------------------------------------------------------------------
def source_graph() -> nx.MultiDiGraph:
    g = nx.MultiDiGraph()
    for s, r, t in EDGES:
        g.add_edge(s, t, key=r, relation=r)
    g.nodes["api"]["label"] = "Public API gateway"
    return g


def write_json(path: Path, g: nx.Graph, edges_key: str = "links") -> Path:
    path.write_text(json.dumps(nx.node_link_data(g, edges=edges_key)), encoding="utf-8")
    return path


def write_csv(path: Path, edges: list[tuple[str, str, str]]) -> Path:
    with path.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(["source", "relation", "target"])
        writer.writerows(edges)
    return path


def write_graphml(path: Path, g: nx.Graph) -> Path:
    nx.write_graphml(g, path)
    return path


WRITERS = {
    "json": lambda p: write_json(p / "ken.json", source_graph()),
    "json-edges": lambda p: write_json(p / "ken.json", source_graph(), "edges"),
    "csv": lambda p: write_csv(p / "ken.csv", EDGES),
    "graphml": lambda p: write_graphml(p / "ken.graphml", source_graph()),
}


@pytest.mark.parametrize("fmt", sorted(WRITERS))
def test_loaders_read_every_edge(tmp_path: Path, fmt: str) -> None:
    path = WRITERS[fmt](tmp_path)
    ken = load_ken(path)
    assert edge_set(ken) == set(EDGES)
    assert ken.path("api", "disk", relation="depends") == ["api", "auth", "db", "disk"]
    if fmt != "csv":  # node attributes travel with JSON and GraphML
        assert ken.search("gateway") == ["api"]


def test_format_specific_loaders(tmp_path: Path) -> None:
    assert edge_set(load_json(write_json(tmp_path / "a.json", source_graph()))) == set(EDGES)
    assert edge_set(load_csv(write_csv(tmp_path / "a.csv", EDGES))) == set(EDGES)
    assert edge_set(load_graphml(write_graphml(tmp_path / "a.graphml", source_graph()))) == set(EDGES)


def test_simple_digraph_json_uses_the_relation_attribute(tmp_path: Path) -> None:
    g = nx.DiGraph()
    g.add_edge("x", "y", relation="feeds")
    g.add_edge("y", "z", label="feeds")  # `label` is accepted for the relation
    ken = load_ken(write_json(tmp_path / "d.json", g))
    assert edge_set(ken) == {("x", "feeds", "y"), ("y", "feeds", "z")}


def test_undirected_graph_gives_edges_both_ways(tmp_path: Path) -> None:
    g = nx.Graph()
    g.add_edge("x", "y", relation="near")
    for path in (write_json(tmp_path / "u.json", g), write_graphml(tmp_path / "u.graphml", g)):
        assert edge_set(load_ken(path)) == {("x", "near", "y"), ("y", "near", "x")}


def test_csv_header_is_flexible(tmp_path: Path) -> None:
    path = tmp_path / "k.csv"
    path.write_text(" Target , Source , predicate\nb,a,r\n", encoding="utf-8")
    assert edge_set(load_ken(path)) == {("a", "r", "b")}


MALFORMED = [
    # file name, content, words the message must contain besides the file name
    ("broken.json", b'{"nodes": [', ["not valid JSON", ":1:"]),
    ("list.json", b"[1, 2]", ["node-link"]),
    ("null.json", b"null", ["node-link"]),
    ("notarget.json", b'{"nodes":[{"id":"a"}],"links":[{"source":"a","relation":"r"}]}', ["node-link"]),
    ("linksnum.json", b'{"nodes":[],"links":5}', ["node-link"]),
    (
        "norel.json",
        b'{"directed":true,"multigraph":false,"nodes":[{"id":"a"},{"id":"b"}],"links":[{"source":"a","target":"b"}]}',
        ["no relation"],
    ),
    ("empty.csv", b"", ["header"]),
    ("noheader.csv", b"a,r,b\n", ["header", "'source'"]),
    ("norelcol.csv", b"source,target\na,b\n", ["relation column"]),
    ("blank.csv", b"source,relation,target\na,r,b\na,,b\n", [":3:", "empty"]),
    ("short.csv", b"source,relation,target\na,r\n", [":2:"]),
    ("broken.graphml", b"<graphml><graph", ["not GraphML"]),
    ("other.graphml", b"<foo/>", ["not GraphML"]),
    (
        "undeclared.graphml",
        b'<?xml version="1.0"?><graphml xmlns="http://graphml.graphdrawing.org/xmlns">'
        b'<graph edgedefault="directed"><node id="a"/><node id="b"/>'
        b'<edge source="a" target="b"><data key="d9">x</data></edge></graph></graphml>',
        ["not GraphML"],
    ),
    ("ken.txt", b"a r b", ["unknown Ken format"]),
]


@pytest.mark.parametrize("name,content,words", MALFORMED, ids=[m[0] for m in MALFORMED])
def test_malformed_files_raise_ken_error_naming_the_file(
    tmp_path: Path, name: str, content: bytes, words: list[str]
) -> None:
    path = tmp_path / name
    path.write_bytes(content)
    with pytest.raises(KenError) as info:
        load_ken(path)
    assert name in str(info.value)
    for word in words:
        assert word in str(info.value), (word, str(info.value))


def test_missing_file_is_a_ken_error(tmp_path: Path) -> None:
    with pytest.raises(KenError, match="gone.json: no such file"):
        load_ken(tmp_path / "gone.json")


_LATIN1 = "caf\u00e9".encode("latin-1")
_GRAPHML_HEAD = b'<?xml version="1.0"?><graphml xmlns="http://graphml.graphdrawing.org/xmlns">'


@pytest.mark.parametrize(
    "name,content",
    [
        ("nodes_not_objects.json", b'{"nodes": [1, 2], "links": []}'),  # was AttributeError
        ("nodes_dict.json", b'{"nodes": {"a": 1}, "links": []}'),
        ("latin1.json", b'{"nodes": [{"id": "' + _LATIN1 + b'"}], "links": []}'),  # was UnicodeDecodeError
        ("latin1.csv", b"source,relation,target\n" + _LATIN1 + b",r,b\n"),
        (
            "badvalue.graphml",  # ValueError from int('xx')
            _GRAPHML_HEAD + b'<key id="d0" for="edge" attr.name="w" attr.type="int"/>'
            b'<graph edgedefault="directed"><node id="a"/><node id="b"/>'
            b'<edge source="a" target="b"><data key="d0">xx</data></edge></graph></graphml>',
        ),
        (
            "badtype.graphml",  # KeyError('blob')
            _GRAPHML_HEAD + b'<key id="d0" for="edge" attr.name="w" attr.type="blob"/>'
            b'<graph edgedefault="directed"><node id="a"/></graph></graphml>',
        ),
        ("folder.json", None),  # IsADirectoryError
    ],
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_malformed_files_never_escape_as_other_errors(tmp_path: Path, name: str, content: bytes | None) -> None:
    # each of these once escaped as AttributeError, UnicodeDecodeError, ValueError, KeyError or OSError
    path = tmp_path / name
    if content is None:
        path.mkdir()
    else:
        path.write_bytes(content)
    with pytest.raises(KenError) as info:
        load_ken(path)
    assert name in str(info.value)


@pytest.mark.parametrize(
    "name,content",
    [
        ("norel_multi.json", b'{"nodes":[{"id":"a"},{"id":"b"}],"links":[{"source":"a","target":"b"}]}'),
        (
            "norel.graphml",
            _GRAPHML_HEAD + b'<graph edgedefault="directed"><node id="a"/><node id="b"/>'
            b'<edge source="a" target="b"/></graph></graphml>',
        ),
    ],
    ids=["json", "graphml"],
)
def test_edge_without_relation_is_refused(tmp_path: Path, name: str, content: bytes) -> None:
    # networkx numbers keyless multigraph edges 0, 1, …: that number is not a relation
    path = tmp_path / name
    path.write_bytes(content)
    with pytest.raises(KenError, match="no relation") as info:
        load_ken(path)
    assert name in str(info.value)


def test_json_edge_key_names_the_relation(tmp_path: Path) -> None:
    path = tmp_path / "keyed.json"
    path.write_text(
        '{"nodes":[{"id":"a"},{"id":"b"}],"links":[{"source":"a","target":"b","key":"feeds"}]}', encoding="utf-8"
    )
    assert edge_set(load_ken(path)) == {("a", "feeds", "b")}


# ---- grounding paths against Ken --------------------------------------------------------------------
def holds(text: str, ken: KenGraph | None = None) -> bool:
    result = cda.solve(text, ken=ken)
    assert result.status in ("sat", "unsat")
    return result.status == "sat"


def test_ken_paths_agree_with_networkx() -> None:
    ken = make_ken()
    view = nx_view(EDGES, "depends")
    checked = 0
    for src, dst in [
        ("api", "db"),
        ("api", "disk"),
        ("auth", "disk"),
        ("db", "api"),
        ("api", "team_b"),
        ("cache", "db"),
    ]:
        for hops in (1, 2, 3):
            text = f"hard: exists path(entity:{src} ->depends-> entity:{dst} within {hops} hops)"
            want = src in view and dst in view and nx.has_path(view, src, dst)
            want = want and nx.shortest_path_length(view, src, dst) <= hops
            assert holds(text, ken) == want, text
            assert (
                holds(f"hard: not exists path(entity:{src} ->depends-> entity:{dst} within {hops} hops)", ken) != want
            )
            checked += want
    assert 0 < checked < 18  # both answers occur


def test_ken_relation_is_unknown_without_ken() -> None:
    text = "hard: exists path(entity:api ->depends-> entity:db within 2 hops)"
    with pytest.raises(DSLTypeError, match="neither a declared predicate nor a Ken relation") as info:
        cda.check(text)
    assert (info.value.line, info.value.column) == (1, 32)  # the relation's name
    assert cda.check(text, ken=make_ken()).clauses == 1


def test_entity_outside_ken_and_domains_is_a_type_error() -> None:
    with pytest.raises(DSLTypeError, match="unknown entity 'mars'") as info:
        cda.check("hard: exists path(entity:api ->depends-> entity:mars within 2 hops)", ken=make_ken())
    assert info.value.column == 49  # the entity's name
    # an entity of a declared domain is fine, and simply unreachable
    text = "domain Place = {mars}\nhard: exists path(entity:api ->depends-> entity:mars within 2 hops)"
    assert not holds(text, make_ken())


def test_closed_predicate_reads_ken_edges_and_facts_do_not_leak_into_the_caller_graph() -> None:
    ken = make_ken()
    before = edge_set(ken)
    text = """
    domain Svc = {api, auth, db, cache, disk, queue}
    pred depends(Svc, Svc)
    fact depends(queue, disk)
    hard: depends(api, auth) and not depends(auth, api)
    hard: exists path(entity:queue ->depends-> entity:disk within 1 hop)
    """
    assert holds(text, ken)
    assert edge_set(ken) == before  # the fact was added to a copy
    assert not holds(text.replace("depends(api, auth) and", "depends(api, db) and"), ken)


@pytest.mark.parametrize("fmt", ["json", "csv", "graphml"])
def test_ken_statement_loads_relative_to_the_problem_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fmt: str
) -> None:
    folder = tmp_path / "problems"
    (folder / "kg").mkdir(parents=True)
    target = {"json": "kg/g.json", "csv": "kg/g.csv", "graphml": "kg/g.graphml"}[fmt]
    if fmt == "json":
        write_json(folder / target, source_graph())
    elif fmt == "csv":
        write_csv(folder / target, EDGES)
    else:
        write_graphml(folder / target, source_graph())
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)  # the path is relative to the file, not to the working directory
    view = nx_view(EDGES, "depends")
    for dst, hops in [("db", 2), ("disk", 2), ("disk", 3), ("cache", 1)]:
        problem = folder / f"p_{dst}_{hops}.cda"
        problem.write_text(
            f'# Ken from a file\nken "{target}"\n'
            f"hard: exists path(entity:api ->depends-> entity:{dst} within {hops} hops)\n",
            encoding="utf-8",
        )
        want = nx.shortest_path_length(view, "api", dst) <= hops
        assert (cda.solve(problem).status == "sat") == want, (dst, hops)


def test_ken_statement_and_ken_argument_merge(tmp_path: Path) -> None:
    write_csv(tmp_path / "extra.csv", [("disk", "depends", "tape")])
    problem = tmp_path / "p.cda"
    problem.write_text(
        'ken "extra.csv"\nhard: exists path(entity:api ->depends-> entity:tape within 4 hops)\n', encoding="utf-8"
    )
    assert cda.solve(problem, ken=make_ken()).status == "sat"
    assert cda.solve(problem, ken=make_ken(EDGES[:2])).status == "unsat"  # api reaches cache, not disk
    with pytest.raises(DSLTypeError, match="unknown entity 'api'"):
        cda.check(problem)  # the file alone does not know api


def test_ken_statement_with_a_broken_file_is_located(tmp_path: Path) -> None:
    (tmp_path / "bad.json").write_text("{nope", encoding="utf-8")
    problem = tmp_path / "p.cda"
    problem.write_text('hyp a\nken "bad.json"\nhard: a\n', encoding="utf-8")
    with pytest.raises(DSLError) as info:
        cda.check(problem)
    assert (info.value.line, info.value.column) == (2, 5)
    assert "bad.json" in info.value.message and "not valid JSON" in info.value.message
    (tmp_path / "q.cda").write_text('ken "missing.csv"\n', encoding="utf-8")
    with pytest.raises(DSLError, match="missing.csv: no such file"):
        cda.check(tmp_path / "q.cda")


# ---- paths over hypothetical edges: both backends against brute force ----------------------------
NODES = ("a", "b", "c")
EDGE_ATOMS = [(u, v) for u in NODES for v in NODES]  # 9 edge atoms, self-loops included


def brute_force(source: str, target: str, hops: int, negate: bool = False) -> set[frozenset[str]]:
    out = set()
    for bits in itertools.product((False, True), repeat=len(EDGE_ATOMS)):
        chosen = [e for e, on in zip(EDGE_ATOMS, bits) if on]
        g = nx.DiGraph()
        g.add_nodes_from(NODES)
        g.add_edges_from(chosen)
        # a path of 1..hops edges (source != target here, so this is shortest_path_length)
        ok = nx.has_path(g, source, target) and nx.shortest_path_length(g, source, target) <= hops
        if ok != negate:
            out.add(frozenset(f"link({u}, {v})" for u, v in chosen))
    return out


@pytest.mark.parametrize(
    "source,target,hops,negate",
    [("a", "c", 2, False), ("a", "c", 1, False), ("c", "a", 2, True)],
    ids=["a-c-2", "a-c-1", "not-c-a-2"],
)
def test_hypothetical_edges_match_brute_force_on_both_backends(
    source: str, target: str, hops: int, negate: bool
) -> None:
    text = (
        "domain Node = {a, b, c}\n"
        "hyp link(Node, Node)\n"
        f"hard: {'not ' if negate else ''}exists path(entity:{source} ->link-> entity:{target} within {hops} hops)\n"
    )
    want = brute_force(source, target, hops, negate)
    assert 0 < len(want) < 2 ** len(EDGE_ATOMS)
    results = {}
    for backend in ("z3", "clingo"):
        r = cda.solve(text, backend=backend, top=2 ** len(EDGE_ATOMS))
        assert r.status == "sat" and r.enumeration_complete
        assert {frozenset(h.assumed) for h in r.hypotheses} == want
        assert r.hypotheses_enumerated == len(want)
        results[backend] = [h.assumed for h in r.hypotheses]
    assert results["z3"] == results["clingo"]  # same hypotheses, same order


def test_hypothetical_edges_cheapest_explanations_match_brute_force() -> None:
    soft = "".join(f"soft weight 1: not link({u}, {v})\n" for u, v in EDGE_ATOMS)
    text = "domain Node = {a, b, c}\nhyp link(Node, Node)\n" + soft
    text += "hard: exists path(entity:a ->link-> entity:c within 2 hops)\nhard: not link(a, c)\n"
    want = {s for s in brute_force("a", "c", 2) if "link(a, c)" not in s}
    cheapest = min(len(s) for s in want)
    best = sorted(sorted(s) for s in want if len(s) == cheapest)
    assert best == [["link(a, b)", "link(b, c)"]]
    for backend in ("z3", "clingo"):
        r = cda.solve(text, backend=backend, top=3)
        assert r.hypotheses[0].assumed == best[0]
        assert r.hypotheses[0].cost == 2.0
        assert all(h.cost == len(h.assumed) for h in r.hypotheses)
        assert [h.cost for h in r.hypotheses] == sorted(h.cost for h in r.hypotheses)


@pytest.mark.parametrize("backend_name", ["z3", "clingo"])
def test_closed_and_hypothetical_paths_agree_from_a_node_to_itself(backend_name: str) -> None:
    # the empty path: a node reaches itself in 0 hops, as networkx's shortest_path_length says
    closed = "domain N = {a, b}\npred link(N, N)\nfact link(a, b)\nhard: exists path(entity:a ->link-> entity:a within 2 hops)"
    hypothetical = (
        "domain N = {a, b}\nhyp link(N, N)\nhard: link(a, b) and not link(a, a) and not link(b, a) and not link(b, b)\n"
        "hard: exists path(entity:a ->link-> entity:a within 2 hops)"
    )
    assert nx.shortest_path_length(nx.DiGraph([("a", "b")]), "a", "a") == 0
    assert cda.solve(closed, backend=backend_name).status == "sat"
    assert cda.solve(hypothetical, backend=backend_name).status == "sat"
    assert cda.solve(closed.replace("exists path", "not exists path"), backend=backend_name).status == "unsat"
    assert cda.solve(hypothetical.replace("exists path", "not exists path"), backend=backend_name).status == "unsat"


@pytest.mark.parametrize(
    "text,words",
    [
        ("hard: exists path(entity:zz ->nosuchrel-> entity:zz within 2 hops)", "neither a declared predicate"),
        ("domain S = {a}\nhyp r(S)\nhard: exists path(a ->r-> a within 2 hops)", "2 arguments"),
        ("domain S = {a}\nhyp r(S, S)\nhard: exists path(q ->r-> q within 2 hops)", "not a node"),
    ],
    ids=["unknown relation", "arity", "unknown node"],
)
def test_path_from_a_node_to_itself_is_still_checked(text: str, words: str) -> None:
    # the same clauses with source != target are refused (see the other type-error tests)
    with pytest.raises(DSLTypeError, match=words):
        cda.check(text)


def test_hypothetical_path_size_stops_growing_past_the_node_count() -> None:
    def size(hops: int) -> int:
        return cda.check(
            f"domain N = {{a, b, c}}\nhyp link(N, N)\nhard: exists path(entity:a ->link-> entity:c within {hops} hops)"
        ).ir_nodes

    # 3 nodes: a path needs at most 3 edges, so 200 hops says no more than 3 hops
    assert size(200) <= 2 * size(3)
    assert size(10**6) == size(200)  # and a huge bound costs nothing more


# ---- Hypothesis: whatever a file holds, loading it succeeds or raises KenError -------------------
_json_value = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=4),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(
            st.sampled_from(["id", "source", "target", "relation", "key", "label", "nodes", "links", "directed"]),
            inner,
            max_size=4,
        )
    ),
    max_leaves=12,
)
_node_link = st.fixed_dictionaries(
    {"nodes": _json_value, "links": _json_value}, optional={"directed": _json_value, "multigraph": _json_value}
)
_file = st.one_of(
    _node_link.map(lambda doc: ("f.json", json.dumps(doc).encode())),
    st.binary(max_size=40).map(lambda raw: ("f.json", raw)),
    st.text(alphabet='source,relation,target\n"ab \r\x00é', max_size=60).map(lambda t: ("f.csv", t.encode())),
    st.binary(max_size=40).map(lambda raw: ("f.csv", raw)),
    st.binary(max_size=40).map(lambda raw: ("f.graphml", raw)),
)


@settings(max_examples=300, derandomize=True, deadline=None)
@given(_file)
def test_any_file_loads_or_raises_ken_error(tmp_path_factory: pytest.TempPathFactory, case: tuple[str, bytes]) -> None:
    name, content = case
    path = tmp_path_factory.mktemp("fuzz") / name
    path.write_bytes(content)
    try:
        ken = load_ken(path)
    except KenError as err:
        assert name in str(err)
    else:
        assert all(isinstance(k, str) and k for _, _, k in ken.graph.edges(keys=True))


@pytest.mark.parametrize("backend_name", ["z3", "clingo"])
def test_the_documented_cycle_idiom_finds_a_cycle_and_only_one(backend_name: str) -> None:
    # docs/dsl.md: a path from a node to itself always holds; a cycle goes one edge out first
    facts = "domain N = {a, b, c}\npred r(N, N)\nfact r(a, b)\nfact r(b, c)\n"
    goal = "goal prove exists t in N: r(a, t) and exists path(t ->r-> a within 2 hops)\n"
    without = cda.solve(facts + goal, backend=backend_name)
    with_cycle = cda.solve(facts + "fact r(c, a)\n" + goal, backend=backend_name)
    assert nx.is_directed_acyclic_graph(nx.DiGraph([("a", "b"), ("b", "c")]))
    assert [v.status for v in without.verdicts] == ["refuted"]
    assert [v.status for v in with_cycle.verdicts] == ["supported"]
