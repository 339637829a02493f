"""Circuits with observations → an ordinary :class:`~cda.encodings.ir.GroundProblem`.

Shared by the ``.bench`` and mbd-mobs WCNF importers. The weak fault model, as CDA problems:

* one abducible ``ab(g)`` per gate (``hyp``), shared by every observation;
* per observation ``k`` a copy of the nets as ``var`` atoms ``net@k``; an observed net is the
  constant it was seen at, so the factory folds it away;
* per observation one clause (kind ``observation``, named ``obs<k>``): the conjunction of every
  gate's "healthy implies behaves" constraint on that copy.

Size is linear in #observations × #gates. The problem asks ``goal minimal_explanations``, so
the engine answers it with the backends' subset-minimal enumeration, like any other problem.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from cda.encodings.ir import AtomInfo, Clause, GroundProblem, MinimalGoal, Node, NodeFactory

__all__ = ["CircuitInstance", "build_problem", "ab_atom"]

#: builds, on one observation's copy, the constraint a healthy gate imposes: ``net`` maps a
#: net name to its node there (an atom, or a constant when observed), ``ab`` is the gate's atom
GateConstraint = Callable[[NodeFactory, Callable[[str], Node]], Node]


def ab_atom(gate: str) -> str:
    return f"ab({gate})"


@dataclass
class CircuitInstance:
    """An imported diagnosis problem and what the CLI reports about it."""

    problem: GroundProblem
    gates: list[str]  # gate names, in file order
    observations: int
    injected: list[str] | None = None  # the fault injected by the benchmark, when the file says
    notes: list[str] = field(default_factory=list)


def build_problem(
    gates: Sequence[tuple[str, GateConstraint]],
    nets: Sequence[str],
    observations: Sequence[Mapping[str, bool]],
    goal: MinimalGoal,
    filename: str | None = None,
    structure: GateConstraint | None = None,
) -> GroundProblem:
    """One ``hyp`` per gate, one ``var`` per unobserved net and observation, one clause per observation.

    ``structure`` (optional) is a constraint that holds on every copy whatever the gates' health.
    """
    f = NodeFactory()
    gp = GroundProblem(factory=f, filename=filename, minimal=goal)
    abs_: dict[str, Node] = {}
    for name, _ in gates:
        atom = ab_atom(name)
        gp.atoms[atom] = AtomInfo(atom, "hyp", "ab", (name,))
        abs_[name] = f.atom(atom)
    for k, seen in enumerate(observations, 1):
        local: dict[str, Node] = {}

        def net(name: str, k: int = k, seen: Mapping[str, bool] = seen, local: dict[str, Node] = local) -> Node:
            node = local.get(name)
            if node is None:
                if name in seen:
                    node = f.const(seen[name])
                else:
                    atom = f"{name}@{k}"
                    gp.atoms[atom] = AtomInfo(atom, "var", "net", (name, str(k)))
                    node = f.atom(atom)
                local[name] = node
            return node

        for name in nets:  # every net exists in every copy, used or not
            net(name)
        parts = [f.or_([abs_[name], build(f, net)]) for name, build in gates]
        if structure is not None:
            parts.append(structure(f, net))
        gp.clauses.append(Clause(f"obs{k}", "observation", f.and_(parts), k))
    return gp
