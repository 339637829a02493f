"""Observations that come in independent groups, built and encoded only when a search needs them.

A diagnosis problem with many observations is one system copied once per observation: the
copies share the abducibles and nothing else. ``goal minimal_explanations`` rarely needs every
copy in the solver (two to four of a hundred on the mbd-mobs circuits), so a problem can be
handed to the engine as a :class:`GroupedProblem`: a *base* (the abducibles, the clauses that
always hold, the goal) and *observation groups* built on demand.

The contract of a group, checked by :meth:`GroupedProblem.group` when it builds one: its
clauses mention only its own atoms (private to it) and the abducibles. Once the abducibles are
fixed the groups are then independent, so a set of abducibles is consistent with every group
exactly when it is consistent with each one. That is what makes a check one group at a time
exact, and what lets the engine add a group only when a candidate fails it.

A :class:`ConsistencyOracle` answers "which group, if any, refutes this set of abducibles?"
without the search backend: the circuit importers give a bit-parallel simulator
(:mod:`cda.diagnosis.circuit`); without one the engine asks its backend, one group at a time.

:func:`split_observations` finds the groups of any ground problem (the DSL's ``observe``
clauses included): observation clauses that share a non-abducible atom are one group, and a
group that shares one with a clause that always holds joins the base.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from cda.contracts.deadline import Deadline
from cda.encodings.ir import Atom, AtomInfo, Clause, GroundProblem, Node, walk
from cda.errors import CDAError

__all__ = [
    "ObservationGroup",
    "GroupTemplate",
    "GroupedProblem",
    "ConsistencyOracle",
    "OracleUndecided",
    "GroupContractError",
    "split_observations",
]


class OracleUndecided(CDAError):
    """An oracle cannot decide this question (too many free values to simulate, say); ask a solver."""


class GroupContractError(CDAError, ValueError):
    """A group mentions an atom it does not own that is not an abducible: groups would not be independent."""


@dataclass(frozen=True)
class ObservationGroup:
    """One observation's clauses and the atoms only they mention (in order)."""

    name: str
    clauses: tuple[Clause, ...]
    atoms: dict[str, AtomInfo]


@dataclass(frozen=True)
class GroupTemplate:
    """Groups that are copies of one set of clauses, each copy with some of its atoms fixed.

    A circuit's observations are the circuit copied once per observation, the observed nets
    fixed to what was seen. A backend that can copy (the clingo backend's ``add_copy``) writes
    each copy from these clauses by renumbering, with no IR to build, fold and walk per copy
    (c5315: 0.3 s a copy before, a few hundredths now); other backends build the group itself
    (``GroupedProblem.group``), which must be the same group: the same clauses up to the
    constants folded there, the same atom names (the evaluator re-checks models against it).

    ``clauses`` are disjunctions of literals ``±(j + 1)``: slot ``j`` (an atom private to each
    copy) for ``j < len(slots)``, else ``shared[j - len(slots)]`` (an abducible, the same in
    every copy); positive is true. Group ``i``: every clause true under one selector named
    ``clause_name(i)``; slot ``j`` fixed to ``fixed(i)[j]`` when it is there, else a fresh atom
    named ``atom_name(slots[j], i)``.
    """

    slots: tuple[str, ...]
    shared: tuple[str, ...]
    clauses: tuple[tuple[int, ...], ...]
    fixed: Callable[[int], Mapping[int, bool]]
    atom_name: Callable[[str, int], str]
    clause_name: Callable[[int], str]


class ConsistencyOracle(Protocol):
    """An exact test of a set of abducibles against observation groups, independent of the backends.

    ``monotone``: a superset of a consistent set is consistent (true of the weak fault model,
    where a broken gate only removes constraints). Then a consistent set is subset-minimal as
    soon as removing any one atom makes it inconsistent.
    """

    name: str
    monotone: bool

    def refuting(self, assumed: frozenset[str], groups: Sequence[int], deadline: Deadline = ...) -> int | None:
        """The first of ``groups`` (in the order given) that no assignment reconciles with ``assumed``
        (those abducibles true, every other one false), or ``None`` when every group is consistent.
        Raises :class:`OracleUndecided` when it cannot tell, and
        :class:`~cda.contracts.deadline.OutOfTime` when ``deadline`` passes first."""
        ...


class GroupedProblem:
    """A base problem plus ``count`` observation groups, each built on first use and then kept.

    ``build(i)`` makes group ``i`` (0-based) with nodes of ``base.factory``. The base carries
    the goal (``goal minimal_explanations``); it holds no clause of any group.

    >>> from cda.encodings.ir import NodeFactory, MinimalGoal
    >>> f = NodeFactory(); base = GroundProblem(f, minimal=MinimalGoal())
    >>> base.atoms["a"] = AtomInfo("a", "hyp", "a", ())
    >>> def build(i: int) -> ObservationGroup:
    ...     x = f"x{i}"
    ...     node = f.or_([f.atom("a"), f.atom(x)])
    ...     return ObservationGroup(f"g{i}", (Clause(f"g{i}", "observation", node, 0),), {x: AtomInfo(x, "var", "x", ())})
    >>> gp = GroupedProblem(base, 2, build)
    >>> [c.name for c in gp.materialize().clauses]
    ['g0', 'g1']
    """

    def __init__(
        self,
        base: GroundProblem,
        count: int,
        build: Callable[[int], ObservationGroup],
        oracle: ConsistencyOracle | None = None,
        template: GroupTemplate | None = None,
    ) -> None:
        self.base = base
        self.count = count
        self.oracle = oracle
        self._template = template
        self._template_checked = False
        self._build = build
        self._groups: dict[int, ObservationGroup] = {}
        self._owner: dict[str, int] = {}
        self._hyps = frozenset(base.hyp_atoms)

    def __len__(self) -> int:
        return self.count

    def group(self, index: int) -> ObservationGroup:
        """Group ``index``, built (and its contract checked) on first use."""
        found = self._groups.get(index)
        if found is not None:
            return found
        group = self._build(index)
        for name in group.atoms:
            if name in self.base.atoms or name in self._owner:
                raise GroupContractError(f"group {group.name}: atom {name} is not private to it")
        for atom in _atoms(c.node for c in group.clauses):
            if atom not in group.atoms and atom not in self._hyps:
                raise GroupContractError(
                    f"group {group.name} mentions {atom}, which is neither its own atom nor an abducible"
                )
        for name in group.atoms:
            self._owner[name] = index
        self._groups[index] = group
        return group

    @property
    def template(self) -> GroupTemplate | None:
        """The groups' template, its contract checked on first use: its parts mention only its
        slots and the abducibles (so each copy mentions only its own atoms and the abducibles)."""
        t = self._template
        if t is not None and not self._template_checked:
            outside = [a for a in t.shared if a not in self._hyps]
            if outside:
                raise GroupContractError(f"the groups' template mentions {outside[0]}, neither a slot nor an abducible")
            top = len(t.slots) + len(t.shared)
            if any(x == 0 or abs(x) > top for c in t.clauses for x in c):
                raise GroupContractError("the groups' template has a literal outside its slots and abducibles")
            self._template_checked = True
        return t

    def materialize(self) -> GroundProblem:
        """Base and every group as one ordinary ground problem (eager; for conflicts and claims)."""
        atoms = dict(self.base.atoms)
        clauses = list(self.base.clauses)
        for i in range(self.count):
            group = self.group(i)
            atoms.update(group.atoms)
            clauses.extend(group.clauses)
        return dataclasses.replace(self.base, atoms=atoms, clauses=clauses)


def _atoms(roots: Iterable[Node]) -> list[str]:
    return [n.name for n in walk(roots) if isinstance(n, Atom)]


def _no_group(index: int) -> ObservationGroup:
    raise IndexError(index)


def split_observations(problem: GroundProblem) -> GroupedProblem:
    """The observation groups of an ordinary ground problem (no oracle: the engine asks its backend).

    Observation clauses sharing a non-abducible atom form one group; a group sharing one with a
    hard clause, a fact, the background structure, a soft clause or a claim is folded into the
    base, since it is not independent of what always holds. A problem with numeric variables
    (metrics, event times) is kept whole.

    >>> from cda.encodings.ir import NodeFactory
    >>> f = NodeFactory(); p = GroundProblem(f)
    >>> for n, k in [("a", "hyp"), ("x", "var"), ("y", "var"), ("z", "var")]:
    ...     p.atoms[n] = AtomInfo(n, k, n, ())
    >>> a, x, y, z = (f.atom(n) for n in "axyz")
    >>> p.clauses += [Clause("h", "hard", f.or_([a, z]), 1), Clause("o1", "observation", f.or_([a, x]), 2),
    ...               Clause("o2", "observation", y, 3), Clause("o3", "observation", f.and_([z, a]), 4)]
    >>> g = split_observations(p)
    >>> [c.name for c in g.base.clauses], [g.group(i).name for i in range(len(g))]
    (['h', 'o3'], ['o1', 'o2'])
    """
    if problem.numvars:  # numeric variables are shared by every clause that names them: keep it whole
        return GroupedProblem(problem, 0, _no_group)
    hyps = set(problem.hyp_atoms)
    fixed_nodes: list[Node] = [c.node for c in problem.clauses if c.kind != "observation"]
    fixed_nodes += list(problem.background) + [s.node for s in problem.soft] + [c.node for c in problem.claims]
    pinned = {a for a in _atoms(fixed_nodes) if a not in hyps}
    observations = [c for c in problem.clauses if c.kind == "observation"]
    parent = list(range(len(observations)))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    first_user: dict[str, int] = {}
    uses: list[list[str]] = []
    for i, clause in enumerate(observations):
        own = [a for a in _atoms([clause.node]) if a not in hyps]
        uses.append(own)
        for atom in own:
            j = first_user.setdefault(atom, i)
            if j != i:
                parent[find(i)] = find(j)
    members: dict[int, list[int]] = {}
    for i in range(len(observations)):
        members.setdefault(find(i), []).append(i)
    groups: list[ObservationGroup] = []
    for root in sorted(members, key=lambda r: members[r][0]):
        idx = members[root]
        atoms = list(dict.fromkeys(a for i in idx for a in uses[i]))
        if any(a in pinned for a in atoms):
            continue  # tied to what always holds: stays in the base
        clauses = tuple(observations[i] for i in idx)
        infos = {a: problem.atoms[a] for a in atoms}
        groups.append(ObservationGroup(clauses[0].name, clauses, infos))
    grouped_atoms = {a for g in groups for a in g.atoms}
    grouped_clauses = {c.name for g in groups for c in g.clauses}
    base = dataclasses.replace(
        problem,
        atoms={n: info for n, info in problem.atoms.items() if n not in grouped_atoms},
        clauses=[c for c in problem.clauses if c.name not in grouped_clauses],
    )
    return GroupedProblem(base, len(groups), lambda i: groups[i])
