"""The engine's intermediate representation, as products build it: nodes, clauses, problems.

Everything CDA decides is a :class:`GroundProblem`: a hash-consed DAG of Boolean and linear
nodes made by one :class:`NodeFactory`, named hard clauses and observations, soft clauses with
exact weights (``Fraction``: no float reaches a solver), claims to prove or disprove, and the
atoms and numeric variables they range over. The DSL grounds into it (:func:`cda.api.ground`);
a product that already holds structure builds it here directly, and hands it to
:func:`cda.api.solve` or :func:`cda.engine.run` without writing DSL text to parse back
(docs/architecture.md, "Products are clients").

>>> from fractions import Fraction
>>> f = NodeFactory()
>>> leak, spill, wet = f.atom("leak"), f.atom("spill"), f.atom("wet")
>>> problem = GroundProblem(
...     f,
...     atoms={"leak": AtomInfo("leak", "hyp", "leak", ()), "spill": AtomInfo("spill", "hyp", "spill", ()),
...            "wet": AtomInfo("wet", "observable", "wet", ())},
...     clauses=[Clause("model", "hard", f.iff(wet, f.or_([leak, spill])), 0),
...              Clause("seen", "observation", wet, 0)],
...     soft=[SoftClause("spill_rare", f.not_(spill), Fraction(2), 0)],
...     claims=[Claim("c1", "prove", f.or_([leak, spill]), "leak or spill", 0)],
...     observed={"wet"},
... )
>>> from cda.api import solve
>>> r = solve(problem)
>>> [h.assumed for h in r.hypotheses], r.verdicts[0].status
([['leak'], ['spill'], ['leak', 'spill']], 'supported')

Nodes are interned per factory: every node of one problem comes from its own factory (a node
of another factory is a different node). The factory folds constants and flattens nested
``and``/``or`` as it builds, so ``f.and_([f.true, a])`` is ``a``.

Numbers are exact from the user to the solver: :func:`exact_number` reads one (an ``int``, a
``Decimal``, a ``Fraction`` or decimal text; never a float's binary approximation) as the DSL
reads a literal, and :func:`show_number` writes one back as the user would (``1.5``, ``1/3``).
:func:`evaluate` is the independent evaluator: a node's value under a model, what every model a
backend returns is re-checked with (a product reads its own atoms of a model with it too).

A problem whose observations fall into independent groups (one copy of a system per
observation, as in circuit diagnosis) can be handed over as a :class:`GroupedProblem`, whose
groups are built only when the search needs them (docs/diagnosis.md).
"""

from __future__ import annotations

from fractions import Fraction

from cda.encodings import ir as _nodes
from cda.encodings.evaluate import evaluate
from cda.encodings.ir import *  # noqa: F403  (every node type, the factory, a problem's parts: _nodes.__all__)
from cda.encodings.ir import (
    Atom,
    AtomInfo,
    Claim,
    Clause,
    GroundProblem,
    Linear,
    Node,
    NodeFactory,
    NumVar,
    Product,
    SoftClause,
    walk,
)
from cda.encodings.numbers import exact_number
from cda.encodings.numbers import show as show_number
from cda.errors import ProblemError
from cda.solver import observations as _groups
from cda.solver.observations import *  # noqa: F403  (observation groups: _groups.__all__)

#: what encodings/ir.py and solver/observations.py publish (a node type added there is public
#: here too), and the helpers below
__all__ = ["metric", "event", "check_problem", "evaluate", "exact_number", "show_number"]
__all__ += _nodes.__all__
__all__ += _groups.__all__


def metric(name: str) -> str:
    """The numeric variable of the DSL's ``metric:name`` (its key in :attr:`GroundProblem.numvars`
    and in a :class:`Linear` node's terms), in whole units of the metric's declared unit.

    >>> f = NodeFactory()
    >>> f.linear({metric("cost"): 1}, "=", 125)
    (1*metric:cost <= 125 and -1*metric:cost <= -125)
    """
    return f"metric:{name}"


def event(name: str) -> str:
    """The numeric variable of the DSL's ``event:name``: its time in whole seconds."""
    return f"event:{name}"


_ATOM_KINDS = ("hyp", "observable", "var")
_CLAUSE_KINDS = ("hard", "observation", "fact")


def check_problem(problem: GroundProblem) -> GroundProblem:
    """``problem`` when the engine can take it, else :class:`~cda.errors.ProblemError` saying what
    is wrong: what the grounder guarantees for a problem read from DSL text, checked for one built
    by hand (:func:`cda.api.solve` calls it on every problem it is given).

    Every clause, soft clause and claim is named once; kinds are known ones; every atom and
    numeric variable a node mentions is declared; soft weights are exact positive numbers (an
    ``int`` or a ``Fraction``, never a ``float``: docs/dsl.md, "numbers are exact").

    >>> f = NodeFactory()
    >>> check_problem(GroundProblem(f, clauses=[Clause("c", "hard", f.atom("x"), 0)]))
    Traceback (most recent call last):
    ...
    cda.errors.ProblemError: clause c mentions the atom x, which problem.atoms does not declare
    """
    if not isinstance(problem, GroundProblem) or not isinstance(problem.factory, NodeFactory):
        raise ProblemError("a GroundProblem with its NodeFactory is expected")
    for name, info in problem.atoms.items():
        if not isinstance(info, AtomInfo) or info.name != name or info.kind not in _ATOM_KINDS:
            raise ProblemError(f"problem.atoms[{name!r}] must be an AtomInfo of that name whose kind is one of "
                               f"{', '.join(_ATOM_KINDS)}")
    for name, numvar in problem.numvars.items():
        if not isinstance(numvar, NumVar) or numvar.name != name:
            raise ProblemError(f"problem.numvars[{name!r}] must be a NumVar of that name")
    seen: set[str] = set()
    named: list[tuple[str, str, Node]] = []
    for c in problem.clauses:
        if not isinstance(c, Clause) or c.kind not in _CLAUSE_KINDS:
            raise ProblemError(f"every clause must be a Clause whose kind is one of {', '.join(_CLAUSE_KINDS)}")
        named.append(("clause", c.name, c.node))
    for s in problem.soft:
        if not isinstance(s, SoftClause):
            raise ProblemError("every soft clause must be a SoftClause")
        if isinstance(s.weight, bool) or not isinstance(s.weight, (int, Fraction)) or s.weight <= 0:
            raise ProblemError(f"soft clause {s.name}: the weight must be an int or a Fraction above 0, "
                               f"not {s.weight!r}")
        named.append(("soft clause", s.name, s.node))
    for claim in problem.claims:
        if not isinstance(claim, Claim) or claim.mode not in ("prove", "disprove"):
            raise ProblemError("every claim must be a Claim whose mode is prove or disprove")
        named.append(("claim", claim.name, claim.node))
    for i, node in enumerate(problem.background):
        named.append(("background", f"[{i}]", node))
    for what, name, node in named:
        if not isinstance(name, str) or not name:
            raise ProblemError(f"every {what} needs a name")
        if name in seen and what != "background":
            raise ProblemError(f"the name {name} is used twice (clauses, soft clauses and claims share one namespace)")
        seen.add(name)
        if not isinstance(node, Node):
            raise ProblemError(f"{what} {name}: its node must be built by the problem's NodeFactory")
        for sub in walk([node]):
            if isinstance(sub, Atom) and sub.name not in problem.atoms:
                raise ProblemError(f"{what} {name} mentions the atom {sub.name}, which problem.atoms does not declare")
            if isinstance(sub, Linear | Product):
                for term in sub.variables if isinstance(sub, Product) else (t for _, t in sub.terms):
                    if term not in problem.numvars:
                        raise ProblemError(f"{what} {name} mentions the numeric variable {term}, which "
                                           "problem.numvars does not declare")
    return problem
