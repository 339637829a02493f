"""Where a new backend starts: copy this file, rename the class, fill in the steps in order.

(CPMpy's ``solvers/TEMPLATE.py`` is the model: the parts are ordered so that one can start at the
top and go down.) Nothing here is registered, so nothing calls it; ``tests/test_backend_conformance.py``
checks that it keeps every method of the protocol, and runs every test it has on each backend of
:data:`cda.solver.backend.REGISTRY` once you add yours there.

1. **Register it.** One line in ``REGISTRY`` (``cda/solver/backend.py``)::

       BackendSpec("mysolver", "cda.solver.mysolver_backend:MySolverBackend",
                   answers=frozenset({"check", "enumerate", ...}), summary="what it is good at")

   ``answers`` lists the protocol's methods you implement; the others must raise
   :class:`~cda.errors.BackendUnsupported` naming the method and the backend. The conformance
   suite then runs on it: every IR node against the evaluator, every answer kind, determinism,
   the deadline. ``backend="auto"`` only chooses z3 or clingo; yours is used when asked for.

2. **Import the solver's library at the top of your module**, not here and not in
   ``backend.py``: the registry imports a backend's module only when it is asked for, and an
   ``ImportError`` there makes the backend unavailable (:class:`~cda.errors.BackendUnavailable`)
   instead of breaking ``import cda``.

3. **Build everything in** ``__init__``. The encoding is the one scheme every backend writes
   (:func:`cda.encodings.scheme.build_scheme`): every atom of ``scheme.atoms`` is a Boolean
   (even one no clause mentions), every ``scheme.numvars`` an integer in
   [:data:`~cda.encodings.ir.NUM_MIN`, :data:`~cda.encodings.ir.NUM_MAX`]; ``scheme.background``
   always holds; each ``(key, node)`` of ``scheme.defined`` is ``key ⇔ node`` (claim and soft
   keys); each ``(selector, node)`` of ``scheme.guarded`` is ``selector ⇒ node``; and
   ``scheme.every`` (:data:`~cda.solver.backend.ALL_CLAUSES`) implies every selector. Read
   ``deadline.tick()`` in every loop and raise :class:`~cda.contracts.deadline.OutOfTime` saying
   where (``"while encoding for mysolver (clause 12,288 of 40,000)"``).

4. **One method per IR node** (:mod:`cda.encodings.ir`: Const, Atom, Not, And, Or, Iff, Xor, Card,
   Linear), each node translated once (memoise by ``node.uid``: the IR is a DAG). A node you
   cannot encode raises ``BackendUnsupported`` naming the node and the backend, and a backend
   that can (``"the mysolver backend cannot encode IR node Linear; use z3"``).

5. **Answer under assumptions.** Each method takes ``(key, value)`` literals: atoms, selectors,
   claim keys, ``ALL_CLAUSES``. Give the solver what is left of the deadline; a solver's own
   "unknown" or timeout is ``Outcome("unknown", reason=...)``, never ``sat``. A model is a dict
   of every atom (``bool``) and every integer (``int``): the engine re-checks each one with the
   independent evaluator before reading it.

6. **Be canonical.** The same problem and seed give the same answers and models on every run;
   ``enumerate_ranked`` returns the list every backend returns (cost, then fewer true atoms, then
   names: :func:`cda.encodings.scheme.rank_order`). Use the seed for the solver's own choices.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from cda.contracts.deadline import Deadline, OutOfTime
from cda.encodings.ir import And, Atom, Card, Clause, Const, GroundProblem, Iff, Linear, Node, Not, Or, Xor
from cda.encodings.scheme import build_scheme
from cda.errors import BackendUnsupported
from cda.solver.backend import Enumeration, Lit, Outcome, SetStream

__all__ = ["TemplateBackend"]


class TemplateBackend:
    """A backend's skeleton (see the module docstring); every question refuses by name until filled in."""

    name = "template"  # the name it is registered under

    def __init__(self, problem: GroundProblem, *, seed: int, deadline: Deadline, weights: dict[str, int]) -> None:
        self.problem = problem
        self.deadline = deadline
        self.seed = seed
        self.scheme = build_scheme(problem, weights)
        self._memo: dict[int, object] = {}  # node uid → the solver's term, each node encoded once
        for i, atom in enumerate(self.scheme.atoms):
            if deadline.tick():
                raise OutOfTime(f"while encoding for {self.name} (atom {i:,} of {len(self.scheme.atoms):,})")
            self._declare_bool(atom)
        # step 3: numvars, background, defined keys, guarded clauses, the every-clause atom

    # ---- step 4: one method per IR node
    def encode(self, node: Node) -> object:
        """The solver's term for ``node`` (memoised by uid)."""
        term = self._memo.get(node.uid)
        if term is None:
            method = self._ENCODERS.get(type(node))
            if method is None:
                raise BackendUnsupported(f"the {self.name} backend cannot encode IR node {type(node).__name__}")
            term = self._memo[node.uid] = method(self, node)
        return term

    def _declare_bool(self, name: str) -> None:
        """A Boolean of the solver named ``name``."""

    def _unsupported(self, node: Node) -> object:
        raise BackendUnsupported(f"the {self.name} backend cannot encode IR node {type(node).__name__} (not written yet)")

    _ENCODERS: dict[type, Callable[[TemplateBackend, Node], object]] = dict.fromkeys(
        (Const, Atom, Not, And, Or, Iff, Xor, Card, Linear), _unsupported
    )

    # ---- step 5: the protocol's questions
    def _refuse(self, what: str) -> BackendUnsupported:
        return BackendUnsupported(f"the {self.name} backend does not answer {what} yet")

    def check(self, assumptions: Sequence[Lit]) -> Outcome:
        raise self._refuse("check")

    def enumerate(self, project: Sequence[str], assumptions: Sequence[Lit], limit: int) -> Enumeration:
        raise self._refuse("enumerate")

    def enumerate_ranked(self, project: Sequence[str], assumptions: Sequence[Lit], limit: int) -> Enumeration:
        raise self._refuse("enumerate_ranked")

    def minimize(self, assumptions: Sequence[Lit]) -> Outcome:
        raise self._refuse("minimize")

    def enumerate_minimal(
        self, project: Sequence[str], assumptions: Sequence[Lit], limit: int, max_size: int | None = None
    ) -> Enumeration:
        raise self._refuse("enumerate_minimal")

    def minimal_sets(
        self,
        project: Sequence[str],
        assumptions: Sequence[Lit],
        on_set: Callable[[frozenset[str]], bool],
        max_size: int | None = None,
    ) -> SetStream:
        raise self._refuse("minimal_sets")

    def add_clauses(self, clauses: Sequence[Clause], atoms: Sequence[str]) -> None:
        raise self._refuse("add_clauses")
