"""Circuits with observations → a :class:`~cda.ir.GroupedProblem`.

Shared by the ``.bench`` and mbd-mobs WCNF importers. The weak fault model, as CDA problems:

* the base: one abducible ``ab(g)`` per gate (``hyp``), shared by every observation, and
  ``goal minimal_explanations``;
* observation group ``k`` (built only when the engine asks for it): a copy of the nets as
  ``var`` atoms ``net@k`` (an observed net is the constant it was seen at, so the factory folds
  it away) and one clause (kind ``observation``, named ``obs<k>``): the conjunction of every
  gate's "``ab(g)`` or behaves" constraint on that copy.

A copy mentions only its own ``net@k`` atoms and the ``ab`` atoms, which is the contract that
makes the groups independent. The groups come with a :class:`~cda.diagnosis.circuit.CircuitOracle`
(bit-parallel simulation of the same circuit), the engine's independent check of every
candidate against every observation. ``GroupedProblem.materialize()`` gives the eager problem,
every copy built, when a caller wants it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from cda.diagnosis.circuit import Circuit, CircuitOracle, Simulator
from cda.ir import (
    AtomInfo,
    Clause,
    GroundProblem,
    GroupedProblem,
    GroupTemplate,
    MinimalGoal,
    Node,
    NodeFactory,
    ObservationGroup,
)

__all__ = ["CircuitInstance", "build_grouped", "build_problem", "ab_atom", "GateConstraint", "TemplateClauses"]

#: builds, on one observation's copy, the constraint a healthy gate imposes: ``net`` maps a
#: net name to its node there (an atom, or a constant when observed)
GateConstraint = Callable[[NodeFactory, Callable[[str], Node]], Node]


#: clauses over the nets and some gates' ``ab`` atoms, as a :class:`GroupTemplate` numbers them:
#: (those gates, clauses of literals ``±(j + 1)``), ``j`` a net's position in ``nets`` or, past
#: the nets, the position of a gate in the first list; positive is true
TemplateClauses = tuple[Sequence[str], tuple[tuple[int, ...], ...]]


def ab_atom(gate: str) -> str:
    return f"ab({gate})"


@dataclass
class CircuitInstance:
    """An imported diagnosis problem and what the CLI reports about it."""

    problem: GroupedProblem
    gates: list[str]  # gate names, in file order
    observations: int
    injected: list[str] | None = None  # the fault injected by the benchmark, when the file says
    notes: list[str] = field(default_factory=list)
    circuit: Circuit | None = None  # the simulator's view (None when the file is not a plain circuit)
    observed: list[dict[str, bool]] = field(default_factory=list)  # the observations, by net name
    #: the same circuit under other observations (``cda probe`` adds measured nets)
    remake: Callable[[Sequence[Mapping[str, bool]]], GroupedProblem] | None = None
    outputs: list[str] = field(default_factory=list)  # primary outputs (observed in a test vector)


def build_grouped(
    gates: Sequence[tuple[str, GateConstraint]],
    nets: Sequence[str],
    observations: Sequence[Mapping[str, bool]],
    goal: MinimalGoal,
    filename: str | None = None,
    structure: GateConstraint | None = None,
    circuit: Circuit | None = None,
    clauses: TemplateClauses | None = None,
) -> GroupedProblem:
    """One ``hyp`` per gate in the base; group ``k`` (0-based) is observation ``k+1``'s copy.

    ``structure`` (optional) is a constraint that holds on every copy whatever the gates' health.
    With ``circuit`` (gate names equal to those of ``gates``), candidates are checked by its
    simulator. ``clauses`` (optional) are the same constraints as clauses (``ab(g)`` or each
    clause of gate ``g``): the groups' :class:`~cda.ir.GroupTemplate`, which a
    backend that can copy writes each group from; see :data:`TemplateClauses`.
    """
    f = NodeFactory()
    base = GroundProblem(factory=f, filename=filename, minimal=goal)
    abs_: dict[str, Node] = {}
    for name, _ in gates:
        atom = ab_atom(name)
        base.atoms[atom] = AtomInfo(atom, "hyp", "ab", (name,))
        abs_[name] = f.atom(atom)
    frozen = [dict(o) for o in observations]

    def build(index: int) -> ObservationGroup:
        k = index + 1
        seen = frozen[index]
        local: dict[str, Node] = {}
        atoms: dict[str, AtomInfo] = {}

        def net(name: str) -> Node:
            node = local.get(name)
            if node is None:
                if name in seen:
                    node = f.const(seen[name])
                else:
                    atom = f"{name}@{k}"
                    atoms[atom] = AtomInfo(atom, "var", "net", (name, str(k)))
                    node = f.atom(atom)
                local[name] = node
            return node

        for name in nets:  # every net exists in every copy, used or not
            net(name)
        parts = [f.or_([abs_[name], build_gate(f, net)]) for name, build_gate in gates]
        if structure is not None:
            parts.append(structure(f, net))
        clause = Clause(f"obs{k}", "observation", f.and_(parts), k)
        return ObservationGroup(clause.name, (clause,), atoms)

    oracle = None
    if circuit is not None:
        oracle = CircuitOracle(Simulator(circuit, frozen), {ab_atom(name): name for name, _ in gates})
    template = None
    if clauses is not None:
        slot = {name: j for j, name in enumerate(nets)}
        template = GroupTemplate(
            tuple(nets), tuple(ab_atom(g) for g in clauses[0]), clauses[1],
            fixed=lambda i: {slot[name]: value for name, value in frozen[i].items()},
            atom_name=lambda name, i: f"{name}@{i + 1}", clause_name=lambda i: f"obs{i + 1}",
        )
    return GroupedProblem(base, len(frozen), build, oracle, template)


def build_problem(
    gates: Sequence[tuple[str, GateConstraint]],
    nets: Sequence[str],
    observations: Sequence[Mapping[str, bool]],
    goal: MinimalGoal,
    filename: str | None = None,
    structure: GateConstraint | None = None,
) -> GroundProblem:
    """The eager form: every observation's copy in one ordinary ground problem."""
    return build_grouped(gates, nets, observations, goal, filename, structure).materialize()
