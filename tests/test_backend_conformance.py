"""Every registered backend follows the protocol (Hypothesis's provider_conformance is the model).

The backends come from the registry (:data:`cda.solver.backend.REGISTRY`), never from a list
here: a backend added there runs every test below that its kind takes. For each backend:

* it is installed, named as registered, answers what its spec says and refuses the rest by name;
* every answer kind: ``sat`` with a model (re-checked by an independent evaluator), ``unsat``
  (from a complete backend only), ``unknown`` once its deadline has passed (or ``OutOfTime``);
* determinism: the same question on a fresh instance gets the same answer, model and world;
* ground backends: every IR node through the whole scheme against the evaluator under every
  assignment, the engine's verdict kinds (supported, refuted, inconclusive, the conflict), and
  the canonical ranked list, the same on every ground backend;
* first-order backends: a corpus of small problems against brute force over every structure of
  up to three elements (an oracle that shares no code with z3), a found world re-checked by the
  first-order evaluator, and an incomplete backend never answering ``unsat``.

Cancellation is not here yet: the engine has only the deadline (a cancel token is being added).
"""

from __future__ import annotations

import inspect
import itertools
from collections.abc import Iterator, Sequence
from typing import Any

import pytest

import cda.engine as engine
from cda.contracts.deadline import Deadline, OutOfTime
from cda.encodings.evaluate import evaluate as evaluate_ir
from cda.errors import BackendUnsupported
from cda.fol.backends import FolQuestion
from cda.fol.parse import build_problem
from cda.fol.structures import Structure
from cda.fol.structures import evaluate as evaluate_fol
from cda.fol.syntax import FOLProblem
from cda.ir import AtomInfo, Claim, Clause, GroundProblem, NodeFactory
from cda.solver import TEMPLATE
from cda.solver.backend import EVERY_METHOD, REGISTRY, Backend, _load
from tests.test_encoders import ATOMS, INTS, KINDS, TERMS, _problem, assignments, samples

GROUND = [n for n, spec in REGISTRY.items() if spec.accepts == "ground"]
FOL = [n for n, spec in REGISTRY.items() if spec.accepts == "fol"]


class Stoppable(Deadline):
    """A deadline the test ends when it chooses (no waiting on a clock)."""

    def __init__(self) -> None:
        super().__init__(3600)

    def stop(self) -> None:
        self._end = 0.0  # long past


# ---- questions each kind of backend takes
def ground_problem() -> GroundProblem:
    """``a or b`` hard, ``not (a and b)`` behind its selector, claims on ``a``."""
    f = NodeFactory()
    a, b = f.atom("a"), f.atom("b")
    return GroundProblem(
        f, atoms={n: AtomInfo(n, "hyp", n, ()) for n in ("a", "b")},
        clauses=[Clause("either", "hard", f.or_([a, b]), 1), Clause("not_both", "hard", f.not_(f.and_([a, b])), 2)],
        claims=[Claim("c", "prove", a, "a", 3)],
    )


CATS = build_problem(["∀x (Cat(x) → Pet(x))", "Cat(tom)"], ["Pet(tom)"])


def question(name: str, deadline: Deadline | None = None, problem: FOLProblem = CATS) -> Backend:
    """A fresh instance of backend ``name`` on its kind's sample question."""
    d = deadline or Deadline(None)
    if REGISTRY[name].accepts == "ground":
        return engine.make_backend(name, ground_problem(), seed=0, deadline=d, weights={})
    return engine.make_backend(name, FolQuestion(problem, problem.claims[0]), seed=0, deadline=d, weights={})


def satisfiable(name: str) -> list[engine.Lit]:
    if REGISTRY[name].accepts == "ground":
        return [(engine.ALL_CLAUSES, True), ("a", True)]
    return [(engine.selector("p1"), True), (engine.selector("p2"), True), (engine.claim_key("claim"), True)]


def unsatisfiable(name: str) -> list[engine.Lit]:
    if REGISTRY[name].accepts == "ground":
        return [(engine.ALL_CLAUSES, True), ("a", False), ("b", False)]
    return [(engine.selector("p1"), True), (engine.selector("p2"), True), (engine.claim_key("negated"), True)]


# ---- every backend
@pytest.mark.parametrize("name", list(REGISTRY))
def test_a_registered_backend_is_installed_named_and_refuses_what_it_does_not_answer(name: str) -> None:
    spec = REGISTRY[name]
    assert name in engine.available_backends(spec.accepts)
    cls = _load(name)
    assert cls.name == name and spec.answers <= EVERY_METHOD and "check" in spec.answers
    backend = question(name)
    for method in sorted(EVERY_METHOD - spec.answers):
        with pytest.raises(BackendUnsupported, match=f"{name}.*{method}|{method}.*{name}"):
            _call(backend, method)


def _call(backend: Backend, method: str) -> object:
    args: dict[str, tuple[Any, ...]] = {
        "enumerate": ((), [], 1), "enumerate_ranked": ((), [], 1), "minimize": ([],),
        "enumerate_minimal": ((), [], 1), "minimal_sets": ((), [], lambda s: True), "add_clauses": ([], []),
    }
    return getattr(backend, method)(*args[method])


@pytest.mark.parametrize("name", list(REGISTRY))
def test_every_answer_kind(name: str) -> None:
    backend = question(name)
    sat = backend.check(satisfiable(name))
    assert sat.status == "sat" and (sat.model is not None or sat.witness is not None)
    refuted = backend.check(unsatisfiable(name))
    assert refuted.status == ("unsat" if REGISTRY[name].complete else "unknown")
    stoppable = Stoppable()
    late = question(name, stoppable)
    stoppable.stop()
    try:
        after = late.check(satisfiable(name))
    except OutOfTime:
        return
    assert after.status == "unknown"


@pytest.mark.parametrize("name", list(REGISTRY))
def test_the_same_question_gets_the_same_answer(name: str) -> None:
    first, second = question(name), question(name)
    for lits in (satisfiable(name), unsatisfiable(name)):
        a, b = first.check(lits), second.check(lits)
        assert (a.status, a.model, a.reason) == (b.status, b.model, b.reason)
        if a.witness is not None:
            assert first.structure(a.witness) == second.structure(b.witness)  # type: ignore[attr-defined]


def test_the_template_keeps_every_method_of_the_protocol() -> None:
    """A backend begun from cda/solver/TEMPLATE.py has the protocol's whole surface, with its
    signatures; the template itself is registered nowhere."""
    for method in EVERY_METHOD:
        assert inspect.signature(getattr(TEMPLATE.TemplateBackend, method)) == inspect.signature(getattr(Backend, method))
    assert "template" not in REGISTRY
    with pytest.raises(BackendUnsupported, match="template backend does not answer check"):
        TEMPLATE.TemplateBackend(ground_problem(), seed=0, deadline=Deadline(None), weights={}).check([])


# ---- ground backends
@pytest.mark.parametrize("name", GROUND)
@pytest.mark.parametrize("kind", KINDS, ids=[k.__name__ for k in KINDS])
def test_every_ir_node_through_the_scheme(name: str, kind: type) -> None:
    """A claim's key holds exactly when the evaluator says the claim does, under each assignment
    (atoms assumed, integers and terms pinned by clauses switched on by their selectors)."""
    f, nodes = samples(kind)
    for node in nodes:
        for assignment in assignments(node):
            pins: dict[str, int | str] = {k: int(v) for k, v in assignment.items() if k in INTS}
            pins.update({k: str(v) for k, v in assignment.items() if k in TERMS})
            problem = _problem(node, f, pins)
            try:
                b = engine.make_backend(name, problem, seed=0, deadline=Deadline(None), weights={})
            except BackendUnsupported as exc:  # refused by name: the node and the backend
                assert kind.__name__ in str(exc) and name in str(exc)
                break
            atoms = [(n, bool(assignment[n])) for n in ATOMS]
            sels = [(engine.selector(c.name), True) for c in problem.clauses]
            expected = evaluate_ir(node, assignment)
            assert b.check([*atoms, *sels, (engine.claim_key("c"), True)]).status == ("sat" if expected else "unsat")
            assert b.check([*atoms, *sels, (engine.claim_key("c"), False)]).status == ("unsat" if expected else "sat")


VERDICTS = """\
hyp a, b
observable seen
hard: seen iff (a or b)
hard: not (a and b)
observe seen
goal prove a or b
goal disprove a and b
goal prove a
"""


@pytest.mark.parametrize("name", GROUND)
def test_every_verdict_kind_through_the_engine(name: str) -> None:
    from cda import api

    result = engine.run(api.ground(VERDICTS), engine.Options(backend=name))
    assert [v.status for v in result.verdicts] == ["supported", "supported", "inconclusive"]
    refuted = engine.run(api.ground("hyp a\nhard: not a\ngoal prove a\n"), engine.Options(backend=name))
    assert [v.status for v in refuted.verdicts] == ["refuted"]
    conflict = engine.run(api.ground("hyp a\nhard h1: a\nhard h2: not a\ngoal prove a\n"), engine.Options(backend=name))
    assert conflict.status == "unsat" and conflict.conflict is not None and conflict.conflict.cores == [["h1", "h2"]]


def test_the_ranked_list_is_the_same_on_every_ground_backend() -> None:
    from cda import api

    text = "hyp a, b, c\nhard: a or b or c\nsoft: not a weight 2\nsoft: not b weight 1\nsoft: not c weight 1\n"
    listed = {name: engine.run(api.ground(text), engine.Options(backend=name, top=10)).model_dump_json()
              for name in GROUND}
    assert len({r.replace(f'"backend":"{n}"', "") for n, r in listed.items()}) == 1


# ---- first-order backends, against brute force over small structures
CORPUS: list[tuple[list[str], str]] = [
    (["∀x (Cat(x) → Pet(x))", "Cat(tom)"], "Pet(tom)"),
    (["∀x (Cat(x) → Pet(x))", "Cat(tom)"], "Pet(rex)"),
    (["∃x Cat(x)", "∀x ¬Cat(x)"], "Pet(tom)"),
    (["∀x ∃y Likes(x, y)", "¬Likes(a, a)"], "∃y Likes(a, y)"),
    (["Likes(a, b) ∨ Likes(b, a)", "∀x ∀y (Likes(x, y) → Likes(y, x))"], "Likes(a, b)"),
    (["∀x (P(x) ↔ ¬Q(x))", "P(c)"], "Q(c)"),
]


def structures(problem: FOLProblem, size: int) -> Iterator[Structure]:
    """Every structure over ``size`` elements: each constant anywhere, each predicate any relation."""
    sig = problem.signature
    domain = tuple(f"e{i}" for i in range(size))
    constants = sorted(sig.constants)
    preds = sorted(sig.predicates.items())
    tuples = {p: list(itertools.product(domain, repeat=n)) for p, n in preds}
    for values in itertools.product(domain, repeat=len(constants)):
        for choice in itertools.product(*[range(2 ** len(tuples[p])) for p, _ in preds]):
            relations = {p: frozenset(t for i, t in enumerate(tuples[p]) if bits >> i & 1)
                         for (p, _), bits in zip(preds, choice)}
            yield Structure(domain, dict(zip(constants, values)), {}, relations)


def brute_force(problem: FOLProblem, value: bool, up_to: int = 3) -> bool:
    """Whether some structure of at most ``up_to`` elements makes every premise true and the
    claim ``value`` (the first-order evaluator, no solver)."""
    claim = problem.claims[0].formula
    return any(all(evaluate_fol(st.formula, s) for st in problem.premises) and evaluate_fol(claim, s) == value
               for size in range(1, up_to + 1) for s in structures(problem, size))


@pytest.mark.parametrize("name", FOL)
@pytest.mark.parametrize(("premises", "claim"), CORPUS, ids=[c for _, c in CORPUS])
def test_a_first_order_backend_agrees_with_brute_force(name: str, premises: Sequence[str], claim: str) -> None:
    problem = build_problem(list(premises), [claim])
    backend = question(name, problem=problem)
    every = [(engine.selector(st.name), True) for st in problem.premises]
    for value, key in ((True, "claim"), (False, "negated")):
        out = backend.check([*every, (engine.claim_key(key), True)])
        small = brute_force(problem, value)
        if out.status == "sat":
            world = backend.structure(out.witness)  # type: ignore[attr-defined]
            assert all(evaluate_fol(st.formula, world) for st in problem.premises)
            assert evaluate_fol(problem.claims[0].formula, world) == value
        elif out.status == "unsat":
            assert REGISTRY[name].complete and not small  # no world at all, so none small
        if small:
            assert out.status == "sat", (name, claim, value)  # a small world exists: both find one
