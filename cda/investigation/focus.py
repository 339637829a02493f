"""The parts of a problem and which one to focus on (docs/investigate.md, "How it works").

A part is a connected component of the atom–clause graph of the hard clauses: two atoms are in
one part when some hard clause (each conjunct of a clause on its own) mentions both. With a Ken
graph, the parts are the Ken communities (Louvain, seeded) the atoms' arguments fall in, when
that places at least two parts; the atoms naming no Ken node form one more part. The focus
is the part whose best probe promises the greatest expected reduction in uncertainty (ties: the
earlier part); with nothing left to probe, the part of the selected hypothesis's atoms.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from cda.contracts.result import NextTest
from cda.ir import And, Atom, GroundProblem, Node, walk

__all__ = ["Part", "parts", "ken_parts", "choose_focus", "coupling_risks"]


@dataclass(frozen=True)
class Part:
    name: str
    atoms: frozenset[str]


def _conjuncts(node: Node) -> list[Node]:
    return list(node.args) if isinstance(node, And) else [node]


def parts(problem: GroundProblem) -> list[Part]:
    """The connected components, in the order of their first atom in the problem."""
    parent = {a: a for a in problem.atoms}

    def find(a: str) -> str:
        while parent[a] != a:
            parent[a] = parent[parent[a]]
            a = parent[a]
        return a

    for clause in problem.clauses:
        if clause.kind == "observation":
            continue
        for part in _conjuncts(clause.node):
            names = [n.name for n in walk([part]) if isinstance(n, Atom) and n.name in parent]
            for other in names[1:]:
                ra, rb = find(names[0]), find(other)
                if ra != rb:
                    parent[rb] = ra
    groups: dict[str, list[str]] = {}
    for a in problem.atoms:
        groups.setdefault(find(a), []).append(a)
    out = []
    for i, atoms in enumerate(groups.values(), 1):
        shown = ", ".join(atoms[:3]) + (f", … ({len(atoms)} atoms)" if len(atoms) > 3 else "")
        out.append(Part(f"part {i}: {shown}", frozenset(atoms)))
    return out


def ken_parts(problem: GroundProblem, ken: Any) -> list[Part] | None:
    """The atoms grouped by the Ken community of their first argument that is a Ken node;
    ``None`` when Ken gives fewer than two parts (then the components are used)."""
    import networkx as nx

    graph = getattr(ken, "graph", None)
    if not isinstance(graph, nx.Graph) or graph.number_of_nodes() == 0:
        return None
    simple = nx.Graph(graph.to_undirected()) if graph.is_directed() or graph.is_multigraph() else graph
    communities = sorted((sorted(map(str, c)) for c in nx.community.louvain_communities(simple, seed=0)),
                         key=lambda c: c[0])
    where = {node: i for i, c in enumerate(communities) for node in c}
    groups: dict[int, list[str]] = {}
    for name, info in problem.atoms.items():
        home = next((where[a] for a in info.args if a in where), -1)
        groups.setdefault(home, []).append(name)
    if len([k for k in groups if k >= 0]) < 2:
        return None
    out: list[Part] = []
    for k in sorted(groups, key=lambda k: (k < 0, k)):
        label = ("no Ken node" if k < 0 else "ken community " + ", ".join(communities[k][:3])
                 + (f", … ({len(communities[k])} nodes)" if len(communities[k]) > 3 else ""))
        out.append(Part(f"part {len(out) + 1}: {label}", frozenset(groups[k])))
    return out


def choose_focus(found: Sequence[Part], tests: Sequence[NextTest], selected_atoms: Sequence[str]) -> tuple[Part | None, str]:
    """The focus part and why."""
    best: dict[str, float] = {}
    for t in tests:
        for p in found:
            if t.observable in p.atoms:
                best[p.name] = max(best.get(p.name, 0.0), t.expected_information_gain)
    useful = [p for p in found if best.get(p.name, 0.0) > 0]
    if useful:
        top = max(useful, key=lambda p: best[p.name])  # max keeps the first of equals
        return top, f"its best probe gains {best[top.name]:g} bits, the most of the {len(found)} part(s)"
    for p in found:
        if set(selected_atoms) & p.atoms:
            return p, "nothing left to probe; the part of the selected hypothesis"
    return (found[0] if found else None), "nothing left to probe"


def coupling_risks(problem: GroundProblem, focus: Part | None, found: Sequence[Part], *, shown: int = 5) -> list[str]:
    """The integration risks of working on ``focus`` alone: the hard clauses (each conjunct on its
    own) that tie an atom of the focus to an atom of another part, one line per clause and part
    (at most ``shown``, then how many more). A change inside the focus can break them."""
    if focus is None:
        return []
    home = {a: p.name for p in found for a in p.atoms}
    risks: dict[tuple[str, str], int] = {}
    for clause in problem.clauses:
        if clause.kind == "observation":
            continue
        for part in _conjuncts(clause.node):
            names = {n.name for n in walk([part]) if isinstance(n, Atom)}
            if names & focus.atoms:
                for other in sorted({home[a] for a in names - focus.atoms if a in home and home[a] != focus.name}):
                    risks[(clause.name, other)] = risks.get((clause.name, other), 0) + 1
    lines = [f"{name} ties the focus to {other}" + (f" ({k} conjuncts)" if k > 1 else "")
             for (name, other), k in risks.items()]
    return lines[:shown] + ([f"… and {len(lines) - shown} more couplings across the focus boundary"]
                            if len(lines) > shown else [])
