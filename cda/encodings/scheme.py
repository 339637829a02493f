"""The backend-independent encoding scheme: what every backend builds from a ground problem.

Written once here, mapped by each backend onto its solver (z3 terms, an ASP program):

* every problem atom is a free Boolean, every numeric variable an integer in its range
  ([``NUM_MIN``, ``NUM_MAX``] unless declared otherwise); every term variable a value of its
  sort, the named constants of a population all different (:class:`SortUse`: each sort with the
  constants the problem names and its variables);
* the background holds always;
* each clause holds under its *selector* (``selector(name) ⇒ node``), so that a call can switch
  clauses on and off by assumptions, and one atom, :data:`ALL_CLAUSES`, implies every selector
  the backend was built with (thousands of selector assumptions cost every call);
* each claim and each soft clause has a *key* equivalent to its node (``claim_key(name) ⇔
  node``): assuming the key assumes the claim, and a model tells whether it holds;
* the soft clauses are ranked by lexicographic *objectives*, most important first: the weighted
  cost of the violated soft clauses, then each soft clause on its own in source order, so that
  the violated set of a cheapest model is canonical (the same on every backend);
* the abducibles are the projection (hypotheses are models projected on them); a capped list
  of hypotheses is the first of the canonical order (:func:`rank_order`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from cda.encodings.ir import Clause, Eq, GroundProblem, Like, Node, Sort, TermConst, TermVar, walk
from cda.encodings.keys import ALL_CLAUSES, claim_key, selector, soft_key
from cda.errors import BackendUnsupported

__all__ = [
    "ALL_CLAUSES",
    "Objective",
    "Scheme",
    "SortUse",
    "sort_uses",
    "build_scheme",
    "claim_key",
    "guarded_clauses",
    "rank_order",
    "selector",
    "soft_key",
]


@dataclass(frozen=True)
class Objective:
    """Minimise the total weight of the ``terms`` whose node is false."""

    terms: tuple[tuple[Node, int], ...]


@dataclass(frozen=True)
class SortUse:
    """A sort as one problem uses it: the values of the constants it names (sorted) and its
    variables (in declaration order)."""

    sort: Sort
    constants: tuple[str, ...]
    variables: tuple[str, ...]


def sort_uses(problem: GroundProblem, nodes: Sequence[Node] | None = None) -> tuple[SortUse, ...]:
    """Every sort the problem's term variables and the terms of its nodes (``nodes``: all its
    roots unless given) belong to, by name. A term variable a node names but the problem does
    not declare is refused: a backend would not know it."""
    if not problem.terms and nodes is None:
        return ()
    sorts: dict[str, Sort] = {}
    constants: dict[str, set[str]] = {}
    variables: dict[str, list[str]] = {}
    for var in problem.terms.values():
        sorts[var.sort.name] = var.sort
        variables.setdefault(var.sort.name, []).append(var.name)
        constants.setdefault(var.sort.name, set()).update(var.sort.domain or ())
    for node in walk(problem.roots() if nodes is None else nodes):
        if isinstance(node, Eq | Like):
            for t in (node.lhs, node.rhs) if isinstance(node, Eq) else (node.term,):
                sorts.setdefault(t.sort.name, t.sort)
                if isinstance(t, TermConst):
                    constants.setdefault(t.sort.name, set()).add(t.value)
                elif isinstance(t, TermVar) and t.name not in problem.terms:
                    raise BackendUnsupported(f"the term variable {t.name} is not declared in the problem")
    return tuple(
        SortUse(sorts[name], tuple(sorted(constants.get(name, ()))), tuple(variables.get(name, ())))
        for name in sorted(sorts)
    )


@dataclass(frozen=True)
class Scheme:
    """One problem as the backends build it (see the module docstring)."""

    atoms: tuple[str, ...]  # free Booleans, in the problem's order
    numvars: tuple[str, ...]  # integers, each in its range (``ranges``)
    ranges: tuple[tuple[int, int], ...]  # each numeric variable's (low, high), in numvars' order
    sorts: tuple[SortUse, ...]  # the sorts of the term variables and constants
    background: tuple[Node, ...]  # always true
    guarded: tuple[tuple[str, Node], ...]  # (selector, clause): selector ⇒ clause
    every: str | None  # ALL_CLAUSES when there is a clause: it implies every selector
    defined: tuple[tuple[str, Node], ...]  # (claim or soft key, node): key ⇔ node
    objectives: tuple[Objective, ...]  # lexicographic, most important first
    project: tuple[str, ...]  # the abducibles


def guarded_clauses(clauses: Sequence[Clause]) -> tuple[tuple[str, Node], ...]:
    """Each clause behind its selector, as built first and as added later."""
    return tuple((selector(c.name), c.node) for c in clauses)


def build_scheme(problem: GroundProblem, weights: dict[str, int]) -> Scheme:
    """The scheme of ``problem``; ``weights`` are the soft clauses' integer weights.

    >>> from fractions import Fraction
    >>> from cda.encodings.ir import NodeFactory, SoftClause
    >>> f = NodeFactory()
    >>> p = GroundProblem(f, soft=[SoftClause("s", f.atom("a"), Fraction(2), 1)])
    >>> s = build_scheme(p, {"s": 2})
    >>> s.defined, [o.terms for o in s.objectives]
    ((('soft!s', a),), [((a, 2),), ((a, 1),)])
    """
    soft = problem.soft
    objectives = [Objective(tuple((s.node, weights[s.name]) for s in soft))] if soft else []
    if problem.canonical_soft:
        objectives += [Objective(((s.node, 1),)) for s in soft]
    return Scheme(
        atoms=tuple(problem.atoms),
        numvars=tuple(problem.numvars),
        ranges=tuple((v.low, v.high) for v in problem.numvars.values()),
        sorts=sort_uses(problem),
        background=tuple(problem.background),
        guarded=guarded_clauses(problem.clauses),
        every=ALL_CLAUSES if problem.clauses else None,
        defined=tuple((claim_key(c.name), c.node) for c in problem.claims)
        + tuple((soft_key(s.name), s.node) for s in soft),
        objectives=tuple(objectives),
        project=tuple(problem.hyp_atoms),
    )



def rank_order(scheme: Scheme) -> Objective:
    """The objective that ranks hypotheses first: the weighted cost of the violated soft
    clauses (without the per-clause levels below it, which only pick canonical violations).

    The canonical order of hypotheses is this cost, then the number of abducibles assumed, then
    the sorted names. A backend lists its first k hypotheses (``enumerate_ranked``) level by
    level: the least (cost c, size s) over the hypotheses not yet listed, by optimisation, then
    every hypothesis with a model of cost at most c and at most s atoms true (exactly that
    level, the cheaper and smaller ones being listed already), sorted by name. Which models its
    search meets first then changes nothing.

    >>> from fractions import Fraction
    >>> from cda.encodings.ir import NodeFactory, SoftClause
    >>> f = NodeFactory()
    >>> p = GroundProblem(f, soft=[SoftClause("s", f.atom("a"), Fraction(2), 1)])
    >>> rank_order(build_scheme(p, {"s": 2})).terms
    ((a, 2),)
    """
    return scheme.objectives[0] if scheme.objectives else Objective(())
