"""Ken's indexes change the cost of a query, never its answer.

The oracle is a plain model of the graph — a dict of node labels and a set of (source,
relation, target) triples, kept beside the KenGraph — and the four queries written from their
definitions as scans over it. Random graphs and random interleavings of writes and queries
(so that indexes are built, then written past) must agree with it exactly: same results, same
order. The rest pins the storage rules the indexes rely on: copies share until written, the
``graph`` view is read-only, a pickled graph comes back whole.
"""

from __future__ import annotations

import copy
import pickle
import random
from dataclasses import dataclass, field

import networkx as nx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cda.ken.graph import KenGraph

# ids and labels with the awkward cases: case folding, a final sigma, a dotted capital I whose
# lower case is two characters, the index's separator (NUL), the empty string, a non-str label.
NODES = ["a", "ab", "B", "bA", "Σx", "ς", "İ", "n\x00ul", "c_1", ""]
LABELS: list[object] = ["", "Alpha", "ALPHA beta", "ΟΔΟΣ", "İstanbul", "x\x00y", None, 7, "a-b_c 1"]
NEEDLES = ["", "a", "A", "b", "al", "ha b", "σ", "ς", "i̇", "\x00", "x\x00y", "zz", "_", "1", "7", "none", "n"]
RELATIONS = ["r", "q", "causes"]
ABSENT = "missing"


@dataclass
class Model:
    """The oracle: what the graph holds, and the queries by their definitions."""

    labels: dict[str, object] = field(default_factory=dict)  # node -> label, if it has one
    nodes: set[str] = field(default_factory=set)
    edges: set[tuple[str, str, str]] = field(default_factory=set)

    def add_node(self, node: str, label: object | None = None, has_label: bool = False) -> None:
        self.nodes.add(node)
        if has_label:
            self.labels[node] = label

    def add_edge(self, u: str, rel: str, v: str) -> None:
        self.nodes |= {u, v}
        self.edges.add((u, rel, v))

    def search(self, text: str, limit: int) -> list[str]:
        t = text.lower()
        hits = [n for n in self.nodes if t in n.lower() or t in str(self.labels.get(n, "")).lower()]
        return sorted(hits)[:limit]

    def _along(self, relation: str | None) -> set[tuple[str, str]]:
        return {(u, v) for u, r, v in self.edges if relation is None or r == relation}

    def neighborhood(self, node: str, hops: int, relation: str | None) -> list[str]:
        if node not in self.nodes:
            return []
        pairs = self._along(relation)
        seen = {node}
        frontier = {node}
        for _ in range(hops):
            frontier = {v for u, v in pairs if u in frontier} | {u for u, v in pairs if v in frontier}
            frontier -= seen
            seen |= frontier
        return sorted(seen - {node})

    def related_by(self, node: str, relation: str) -> list[str]:
        return sorted({v for u, r, v in self.edges if u == node and r == relation})

    def path(self, source: str, target: str, relation: str | None, max_hops: int | None) -> list[str] | None:
        """The least node list among the shortest paths: every shortest path, level by level."""
        if source not in self.nodes or target not in self.nodes:
            return None
        pairs = self._along(relation)
        best: dict[str, list[str]] = {source: [source]}
        level = [source]
        depth = 0
        while True:
            if target in best:
                return best[target]
            if not level or (max_hops is not None and depth >= max_hops):
                return None
            nxt: dict[str, list[str]] = {}
            for u, v in pairs:
                if u in level and v not in best:
                    cand = best[u] + [v]
                    if v not in nxt or cand < nxt[v]:
                        nxt[v] = cand
            best.update(nxt)
            level = list(nxt)
            depth += 1

    def has_relation(self, relation: str) -> bool:
        return any(r == relation for _, r, _ in self.edges)


def check_all(ken: KenGraph, model: Model, rng: random.Random, rounds: int = 12) -> None:
    """A random batch of every query, answered identically by Ken and by the model."""
    names = sorted(model.nodes) + [ABSENT]
    rels: list[str | None] = [None, *RELATIONS, ABSENT]
    for _ in range(rounds):
        text, limit = rng.choice(NEEDLES), rng.choice([-1, 0, 1, 2, 3, 50])
        assert ken.search(text, limit) == model.search(text, limit), (text, limit)
        node, hops, rel = rng.choice(names), rng.randint(0, 3), rng.choice(rels)
        assert ken.neighborhood(node, hops, rel) == model.neighborhood(node, hops, rel), (node, hops, rel)
        node, rel2 = rng.choice(names), rng.choice([*RELATIONS, ABSENT])
        assert ken.related_by(node, rel2) == model.related_by(node, rel2), (node, rel2)
        src, dst, hops2 = rng.choice(names), rng.choice(names), rng.choice([None, -1, 0, 1, 2, 3])
        assert ken.path(src, dst, rel, hops2) == model.path(src, dst, rel, hops2), (src, dst, rel, hops2)
        assert ken.has_relation(rel2) == model.has_relation(rel2)
    for text in NEEDLES:  # every needle once, at the default limit and unlimited
        assert ken.search(text) == model.search(text, 50)
        assert ken.search(text, len(model.nodes) + 1) == model.search(text, len(model.nodes) + 1)


_op = st.one_of(
    st.tuples(st.just("edge"), st.sampled_from(NODES), st.sampled_from(RELATIONS), st.sampled_from(NODES)),
    st.tuples(st.just("node"), st.sampled_from(NODES), st.sampled_from(LABELS), st.booleans()),
    st.tuples(st.just("query"), st.integers(0, 2**32 - 1)),
)


@settings(max_examples=200, derandomize=True, deadline=None)
@given(st.lists(_op, max_size=40))
def test_interleaved_writes_and_queries_agree_with_the_definitions(ops: list[tuple[object, ...]]) -> None:
    """Indexes built by a query and then written past (new nodes, edges, labels) stay exact."""
    ken, model = KenGraph(), Model()
    for op in ops:
        if op[0] == "edge":
            _, u, r, v = op
            ken.add_edge(str(u), str(r), str(v))
            model.add_edge(str(u), str(r), str(v))
        elif op[0] == "node":
            _, n, label, has_label = op
            if has_label:
                ken.add_node(str(n), label=label)
            else:
                ken.add_node(str(n))
            model.add_node(str(n), label, bool(has_label))
        else:
            check_all(ken, model, random.Random(int(str(op[1]))), rounds=3)
    check_all(ken, model, random.Random(0))


@pytest.mark.parametrize("seed", range(6))
def test_random_graphs_of_a_few_hundred_edges_agree_with_the_definitions(seed: int) -> None:
    rng = random.Random(seed)
    names = [f"{rng.choice(['svc', 'Svc', 'db', 'fault'])}_{i}" for i in range(120)] + NODES
    ken, model = KenGraph(), Model()
    for n in rng.sample(names, 80):
        label = rng.choice(LABELS + ["Payments API", "primary DB in eu-west", "runbook: restart"])
        ken.add_node(n, label=label)
        model.add_node(n, label, True)
    for _ in range(400):
        u, r, v = rng.choice(names), rng.choice(RELATIONS), rng.choice(names)
        ken.add_edge(u, r, v)
        model.add_edge(u, r, v)
    check_all(ken, model, rng, rounds=150)
    # a second wave of writes after every index exists
    for _ in range(50):
        u, r, v = rng.choice(names), rng.choice(RELATIONS), f"late_{rng.randrange(30)}"
        ken.add_edge(u, r, v)
        model.add_edge(u, r, v)
        ken.add_node(u, label="Late label")
        model.add_node(u, "Late label", True)
    check_all(ken, model, rng, rounds=150)


def test_a_graph_handed_to_the_constructor_is_indexed_on_first_use() -> None:
    g = nx.MultiDiGraph()
    g.add_node("api", label="Public API")
    g.add_edge("api", "auth", key="depends", relation="depends")
    g.add_edge("auth", "db", key="depends", relation="depends")
    g.add_edge("ops", "db", key="fixes", relation="fixes")
    ken = KenGraph(g)
    model = Model()
    model.add_node("api", "Public API", True)
    for u, r, v in [("api", "depends", "auth"), ("auth", "depends", "db"), ("ops", "fixes", "db")]:
        model.add_edge(u, r, v)
    check_all(ken, model, random.Random(1))
    ken.add_edge("db", "depends", "disk")
    model.add_edge("db", "depends", "disk")
    check_all(ken, model, random.Random(2))


def test_search_over_non_string_node_ids_fails_as_it_always_did() -> None:
    g = nx.MultiDiGraph()
    g.add_edge(1, 2, key="r")
    with pytest.raises(AttributeError):
        KenGraph(g).search("1")


# ---- storage: copies share until written; the graph view is read-only ----------------------


def small() -> tuple[KenGraph, Model]:
    ken, model = KenGraph(), Model()
    for u, r, v in [("api", "depends", "auth"), ("auth", "depends", "db"), ("fix_db", "fixes", "db")]:
        ken.add_edge(u, r, v)
        model.add_edge(u, r, v)
    ken.add_node("db", label="Primary database")
    model.add_node("db", "Primary database", True)
    return ken, model


def edges_of(ken: KenGraph) -> set[tuple[str, str, str]]:
    return {(u, k, v) for u, v, k in ken.graph.edges(keys=True)}


@pytest.mark.parametrize("side", ["left", "right"])
def test_merging_with_an_empty_graph_shares_until_either_side_is_written(side: str) -> None:
    ken, model = small()
    ken.search("db"), ken.neighborhood("db")  # indexes exist before the copy
    copy = ken.merged(KenGraph()) if side == "left" else KenGraph().merged(ken)
    assert edges_of(copy) == edges_of(ken) and copy.search("primary") == ["db"]

    copy.add_edge("db", "depends", "disk")  # the copy's write stays in the copy
    copy.add_node("auth", label="Primary auth")
    assert ken.related_by("db", "depends") == [] and ken.search("primary") == ["db"]
    assert copy.related_by("db", "depends") == ["disk"] and copy.search("primary") == ["auth", "db"]
    check_all(ken, model, random.Random(3))

    ken.add_edge("api", "depends", "cache")  # and the original's stays in the original
    model.add_edge("api", "depends", "cache")
    assert "cache" not in copy.neighborhood("api") and "cache" in ken.neighborhood("api")
    check_all(ken, model, random.Random(4))


def test_an_original_written_to_while_shared_leaves_the_copy_as_it_was() -> None:
    ken, model = small()
    copy = ken.merged(KenGraph())
    ken.add_edge("db", "depends", "disk")
    assert copy.related_by("db", "depends") == [] and ken.related_by("db", "depends") == ["disk"]
    check_all(copy, model, random.Random(5))


def test_the_graph_view_is_read_only_and_current() -> None:
    ken, _ = small()
    view = ken.graph
    with pytest.raises(nx.NetworkXError):
        view.add_edge("x", "y", key="r")
    with pytest.raises(nx.NetworkXError):
        view.remove_node("db")
    ken.add_edge("db", "depends", "disk")
    assert ken.graph.has_edge("db", "disk", key="depends")


def test_a_kengraph_over_another_ones_view_shares_it_copy_on_write() -> None:
    ken, model = small()
    other = KenGraph(ken.graph)
    assert other.search("primary") == ["db"] and other.path("api", "db", "depends") == ["api", "auth", "db"]
    other.add_edge("db", "depends", "disk")  # writable, and private to ``other``
    assert other.related_by("db", "depends") == ["disk"] and ken.related_by("db", "depends") == []
    ken.add_edge("api", "depends", "cache")
    model.add_edge("api", "depends", "cache")
    assert other.related_by("api", "depends") == ["auth"]
    check_all(ken, model, random.Random(6))


def test_a_frozen_graph_handed_in_is_copied_on_the_first_write() -> None:
    g = nx.MultiDiGraph()
    g.add_edge("a", "b", key="r", relation="r")
    ken = KenGraph(nx.freeze(g))
    ken.add_edge("b", "r", "c")
    assert ken.path("a", "c", "r") == ["a", "b", "c"] and not g.has_edge("b", "c")


def test_copies_are_independent_of_the_original() -> None:
    ken, model = small()
    ken.search("a")
    shallow, deep = copy.copy(ken), copy.deepcopy(ken)
    shallow.add_edge("db", "depends", "disk")
    deep.add_node("auth", label="Primary auth")
    assert ken.related_by("db", "depends") == [] and shallow.related_by("db", "depends") == ["disk"]
    assert ken.search("primary") == ["db"] and deep.search("primary") == ["auth", "db"]
    check_all(ken, model, random.Random(8))


def test_a_pickled_graph_comes_back_with_every_answer() -> None:
    ken, model = small()
    ken.search("a"), ken.neighborhood("db")
    back = pickle.loads(pickle.dumps(ken))
    check_all(back, model, random.Random(7))
    back.add_edge("db", "depends", "disk")
    assert ken.related_by("db", "depends") == []
