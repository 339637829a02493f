"""A problem whose observations arrive one at a time, on a solver kept alive between them.

The problem text is grounded and encoded once. Each observation is encoded into the running
solver behind its own selector (:meth:`cda.engine.Backend.add_clauses`: clingo's
multi-shot program parts, z3's assertions behind an indicator), and the questions are asked
under the assumptions that switch on the observations still in force; taking one back (an
undo) only stops assuming its selector. What the solver learnt is kept.

:meth:`LiveProblem.rebuilt` is the fallback: the problem text and every observation in force
written out as DSL and solved from scratch on a fresh backend. It must give the same answer
(the tests ask so at every step).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from cda.api import ground
from cda.contracts.deadline import Deadline
from cda.errors import CDAError, DSLError
from cda.investigation.focus import ken_parts, parts
from cda.ir import And, Atom, Card, Clause, Const, GroundProblem, Iff, Linear, Node, NodeFactory, Not, Or, Xor, walk

if TYPE_CHECKING:
    from cda.api import KenGraph
from cda.engine import Backend, CheckedBackend, Lit, all_clauses_on, integer_weights, make_backend, selector

__all__ = ["Observation", "LiveProblem", "InvestigationError"]


class InvestigationError(CDAError, ValueError):
    """A step the investigation cannot take: an observation the problem cannot take (an unknown
    atom, an abducible, bad syntax), a revision that does not read, a note with no text.
    ``field``: the parameter the user gave it in (``observation``, ``add``, ``retract``, ``text``),
    which every door names as the place of the mistake; ``column``: where in that text (whitespace
    collapsed) the DSL found the fault, when known."""

    def __init__(self, message: str, column: int | None = None, *, field: str = "observation") -> None:
        super().__init__(message)
        self.column = column
        self.field = field


@dataclass(frozen=True)
class Observation:
    """One observation in force: its text as the analyst wrote it, its step, its clause."""

    text: str
    step: int
    clause: Clause


def _copy(node: Node, f: NodeFactory) -> Node:
    """``node`` (built by another factory) rebuilt in ``f``."""
    if isinstance(node, Const):
        return f.const(node.value)
    if isinstance(node, Atom):
        return f.atom(node.name)
    if isinstance(node, Not):
        return f.not_(_copy(node.arg, f))
    if isinstance(node, And):
        return f.and_(_copy(a, f) for a in node.args)
    if isinstance(node, Or):
        return f.or_(_copy(a, f) for a in node.args)
    if isinstance(node, Iff):
        return f.iff(_copy(node.lhs, f), _copy(node.rhs, f))
    if isinstance(node, Xor):
        return f.xor(_copy(a, f) for a in node.args)
    if isinstance(node, Card):
        return f.card(node.op, node.k, (_copy(a, f) for a in node.args))
    if isinstance(node, Linear):
        return f.linear({v: c for c, v in node.terms}, node.op, node.bound)
    raise TypeError(f"unknown IR node {type(node).__name__}")  # pragma: no cover - every kind is above


class LiveProblem:
    """The problem, its observations in force and a live backend (see the module docstring)."""

    def __init__(self, text: str, backend_name: str, *, filename: str | None = None, ken: KenGraph | None = None,
                 seed: int = 0) -> None:
        self.text = text if text.endswith("\n") else text + "\n"
        self.backend_name = backend_name
        self.filename = filename
        self.ken = ken
        self.seed = seed
        try:
            self.base = ground(self.text, ken=ken)
        except DSLError as exc:  # a mistake in the problem file names the file, not <input>
            raise exc.with_filename(filename) if filename is not None and exc.filename is None else exc from None
        self.base_clauses = list(self.base.clauses)
        self.base_observed = set(self.base.observed)
        self.problem = dataclasses.replace(self.base, clauses=list(self.base_clauses), observed=set(self.base_observed))
        self.backend: Backend = make_backend(backend_name, self.problem, seed=seed, deadline=Deadline(None),
                                             weights=integer_weights(self.problem))
        self.encoded: set[str] = set()
        self.active: list[Observation] = []
        self.solver = self._checked()
        self.parts = (ken_parts(self.base, ken) if ken is not None else None) or parts(self.base)

    def follow(self) -> None:
        """Let this call's cancel token stop the live backend, which an earlier call built (under
        its own token): a server cancels or caps each call on its own (docs/service.md, "Stopping")."""
        self.backend.follow(Deadline(None))

    # ---- observations
    def parse(self, text: str, step: int) -> Observation:
        """``text`` as an observation clause over this problem's atoms (``slow(auth)``, ``not
        slow(auth)``, or any formula an ``observe`` line takes, ``value(metric:m) = 300 ms``)."""
        words = " ".join(text.split())
        if not words:
            raise InvestigationError("an observation is needed, e.g. 'slow(auth)' or 'not slow(auth)'")
        name = f"observe!{step}"  # "!" cannot appear in a DSL clause name
        f = self.problem.factory
        # the usual case, a literal: looked up in the atom table (no parsing); anything else
        # goes through the DSL below
        negated = words.startswith("not ")
        rest = words[4:] if negated else words
        atom = next((a for a in (rest, rest.replace(" ", ""), rest.replace(" ", "").replace(",", ", "))
                     if a in self.problem.atoms), rest)
        info = self.problem.atoms.get(atom)
        if info is not None and info.kind != "hyp":
            node = f.atom(atom)
            return Observation(words, step, Clause(name, "observation", f.not_(node) if negated else node, step))
        # anything else: grounded as the DSL grounds an observe line, then carried into this factory
        try:
            gp = ground(self.text + f"observe {words}\n", ken=self.ken)
        except DSLError as exc:
            column = exc.column - len("observe ") if exc.column is not None and exc.column > len("observe ") else None
            raise InvestigationError(f"cannot observe {words!r}: {exc.message}", column) from None
        clause = gp.clauses[-1]
        if clause.kind != "observation":  # pragma: no cover - the last statement is the observe line
            raise InvestigationError(f"cannot observe {words!r}")
        unknown = sorted(n.name for n in _atoms(clause.node) if n.name not in self.problem.atoms)
        if unknown:
            raise InvestigationError(f"cannot observe {words!r}: {unknown[0]} is not an atom of the problem")
        return Observation(words, step, Clause(name, "observation", _copy(clause.node, f), step))

    def observe(self, obs: Observation) -> None:
        """Put ``obs`` in force: encoded into the live solver once, then assumed."""
        if obs.clause.name not in self.encoded:
            self.backend.add_clauses([obs.clause], [])
            self.encoded.add(obs.clause.name)
        self.active.append(obs)
        self.solver = self._checked()

    def restore(self, obs: Observation) -> None:
        """Put ``obs`` back in force in its place among the others (a failed undo)."""
        self.active = sorted([*self.active, obs], key=lambda o: o.step)
        self.solver = self._checked()

    def retract(self, step: int) -> None:
        """Stop assuming the observation of ``step`` (it stays encoded, switched off)."""
        self.active = [o for o in self.active if o.step != step]
        self.solver = self._checked()

    def _checked(self) -> CheckedBackend:
        self.problem.clauses = self.base_clauses + [o.clause for o in self.active]
        self.problem.observed = self.base_observed | {a.name for o in self.active for a in _atoms(o.clause.node)}
        # the selectors of clauses an earlier checker added stay taken in the live backend
        solver = CheckedBackend(self.problem, self.backend, after=getattr(self, "solver", None))
        solver.base = all_clauses_on(self.base_clauses) + [(selector(o.clause.name), True) for o in self.active]
        return solver

    @property
    def observation_clauses(self) -> list[Clause]:
        return [c for c in self.problem.clauses if c.kind == "observation"]

    def assumptions(self) -> Sequence[Lit]:
        return self.solver.base

    # ---- the fallback
    def rebuilt_text(self) -> str:
        """The problem and every observation in force, as DSL text."""
        return self.text + "".join(f"observe {o.text}\n" for o in self.active)

    def rebuilt(self) -> tuple[GroundProblem, CheckedBackend]:
        """The problem re-grounded from :meth:`rebuilt_text` on a fresh backend."""
        gp = ground(self.rebuilt_text(), ken=self.ken)
        backend = make_backend(self.backend_name, gp, seed=self.seed, deadline=Deadline(None),
                               weights=integer_weights(gp))
        return gp, CheckedBackend(gp, backend)

    def step_of_line(self, line: int) -> int | None:
        """In a rebuilt problem, the step whose observation is on ``line`` (None: the problem's own)."""
        index = line - self.text.count("\n") - 1
        return self.active[index].step if 0 <= index < len(self.active) else None


def _atoms(node: Node) -> list[Atom]:
    return [n for n in walk([node]) if isinstance(n, Atom)]
