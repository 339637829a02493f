"""The factory's shortcuts (``and2``, ``or2``, ``negation``) and the compiled grounders that use
them build the nodes the general calls build, with the same numbers."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from cda import api
from cda.encodings import ground as G
from cda.encodings.ir import Node, NodeFactory

# a program over a factory: each step builds one node from earlier ones
_STEP = st.tuples(st.sampled_from(["atom", "not", "and", "or", "implies", "const"]), st.integers(0, 40), st.integers(0, 40))


def _run(steps: list[tuple[str, int, int]], shortcuts: bool) -> list[tuple[int, str]]:
    f = NodeFactory()
    made: list[Node] = [f.atom("a"), f.atom("b")]
    for op, i, j in steps:
        a, b = made[i % len(made)], made[j % len(made)]
        if op == "atom":
            node = f.atom(f"p{i % 5}")
        elif op == "const":
            node = f.const(bool(i % 2))
        elif op == "not":
            node = (f.negation(a.uid) or f.not_(a)) if shortcuts else f.not_(a)
        elif op == "and":
            node = f.and2(a, b) if shortcuts else f.and_((a, b))
        elif op == "or":
            node = f.or2(a, b) if shortcuts else f.or_((a, b))
        else:
            node = f.or2(f.negation(a.uid) or f.not_(a), b) if shortcuts else f.implies(a, b)
        made.append(node)
    return [(n.uid, repr(n)) for n in made] + [(len(f), "")]


@settings(max_examples=300, derandomize=True, deadline=None)
@given(st.lists(_STEP, max_size=60))
def test_shortcuts_build_the_general_calls_nodes(steps: list[tuple[str, int, int]]) -> None:
    assert _run(steps, shortcuts=True) == _run(steps, shortcuts=False)


_TEXT = """hyp a, b, c, d
pred p
fact p
hard: (not a and b) implies c
hard: (not c and d) implies a
hard: (not p and a) implies b
hard: p or a or not p
hard: (a and a) or (b and not b)
hard: not (a or b) or (c and d)
hard: (not d and not d) implies (a or a)
"""


def _clauses(compiled: bool, monkeypatch: Any) -> list[Any]:
    saved = dict(G._SHAPE_GROUNDERS)
    try:
        G._SHAPE_GROUNDERS.clear()
        if not compiled:  # every formula walked by _Grounder.formula
            monkeypatch.setattr(G, "_compile_grounder", lambda formula: None)
        api.ground(_TEXT)  # compiles the shapes (when allowed)
        gp = api.ground(_TEXT)
        assert all(v is not None for v in G._SHAPE_GROUNDERS.values()) == compiled
        return [(c.name, c.node.uid, repr(c.node)) for c in gp.clauses] + [len(gp.factory)]
    finally:
        G._SHAPE_GROUNDERS.clear()
        G._SHAPE_GROUNDERS.update(saved)
        monkeypatch.undo()


def test_compiled_grounders_build_the_walk_s_nodes(monkeypatch: Any) -> None:
    """Constants from closed predicates, repeated operands and nested and/or: the compiled
    grounders fold them as the walk does, every node with the walk's number."""
    assert _clauses(True, monkeypatch) == _clauses(False, monkeypatch)
