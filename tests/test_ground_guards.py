"""Quantifiers guarded by a closed predicate: grounding only the guard's instances.

The oracle is the grounder itself with the shortcut switched off (every instance of the
domain grounded, the dropped ones included): the ground formulas, the atoms and the errors
must be the same.
"""

from __future__ import annotations

import random

import pytest

import cda
from cda.encodings import ground as G
from cda.encodings.ir import GroundProblem
from cda.errors import DSLTypeError
from cda.ken.graph import KenGraph

TEMPLATES = [
    # the service-graph propagation clause: the guard on the inner exists, variable second
    "hard: forall s in D: slow(s) iff (down(s) or exists t in D: rel(s, t) and slow(t))",
    # the variable first (Ken answers successors only), and a prefixed guard
    "hard: forall s in D: slow(s) implies exists t in D: pred:rel(t, s) and down(t)",
    # the variable twice
    "hard: exists t in D: rel(t, t) and down(t)",
    # three arguments, constants around the variable, a forall's premise
    "hard: forall t in D: rel3({c0}, t, {c1}) implies not down(t)",
    # a premise that is a conjunction, nested quantifiers, a subdomain
    "hard: forall s in D: forall t in E: (rel(s, t) and down(s)) implies slow(t)",
    # not a guard: negated, or under an or (every instance grounded)
    "hard: forall s in D: exists t in D: not rel(s, t) and down(t)",
    "hard: forall s in D: exists t in D: rel(s, t) or down(t)",
    # a guard whose body has a cardinality and a nested exists
    "hard: forall s in D: exists t in D: rel(s, t) and at_most(1, [down(t), slow(t)]) and exists u in E: rel(t, u)",
]


def _problem(seed: int) -> tuple[str, KenGraph]:
    rnd = random.Random(seed)
    n = rnd.randint(2, 7)
    values = [f"v{i}" for i in range(n)]
    sub = values[: rnd.randint(1, n)]
    lines = [
        f"domain D = {{{', '.join(values)}}}",
        f"domain E = {{{', '.join(sub)}}}",
        "hyp down(D)",
        "observable slow(D)",
        "pred rel(D, D)",
        "pred rel3(D, D, D)",
    ]
    for a in values:
        for b in values:
            if rnd.random() < 0.3:
                lines.append(f"fact rel({a}, {b})")
            for c in values:
                if rnd.random() < 0.1:
                    lines.append(f"fact rel3({a}, {b}, {c})")
    ken = KenGraph()
    for a in values:
        for b in values:
            if rnd.random() < 0.15:
                ken.add_edge(a, "rel", b)
    for template in rnd.sample(TEMPLATES, rnd.randint(1, len(TEMPLATES))):
        lines.append(template.format(c0=rnd.choice(values), c1=rnd.choice(values)))
    return "\n".join(lines) + "\n", ken


def _every_instance(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(G._Grounder, "_instances", lambda self, node, values, env: values)


def _shape(gp: GroundProblem) -> tuple[list[str], list[str]]:
    return list(gp.atoms), [f"{c.name}: {c.node!r}" for c in gp.clauses]


@pytest.mark.parametrize("seed", range(60))
def test_guarded_grounding_gives_the_formulas_of_full_grounding(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    text, ken = _problem(seed)
    guarded = _shape(cda.ground(text, ken=ken))
    _every_instance(monkeypatch)
    full = _shape(cda.ground(text, ken=ken))
    assert guarded == full


def test_guarded_and_full_grounding_solve_alike() -> None:
    """The formulas are the same; so, on both backends, are the answers."""
    text, ken = _problem(7)
    text += "observe slow(v0)\ngoal best_explanation top 5\n"
    z3 = cda.solve(text, backend="z3", ken=ken)
    clingo = cda.solve(text, backend="clingo", ken=ken)
    assert z3.model_dump(exclude={"backend"}) == clingo.model_dump(exclude={"backend"})


def test_a_guarded_quantifier_grounds_only_the_guards_instances(monkeypatch: pytest.MonkeyPatch) -> None:
    """300 services, 3 dependencies each: the propagation clause grounds the inner exists for
    each dependency, not for each of the 90,000 pairs (counted: formula calls)."""
    rnd = random.Random(0)
    n = 300
    facts = [f"fact depends(s{i}, s{j})" for i in range(1, n) for j in rnd.sample(range(i), min(i, 3))]
    text = (
        f"domain Service = {{{', '.join(f's{i}' for i in range(n))}}}\n"
        "hyp down(Service)\nobservable slow(Service)\npred depends(Service, Service)\n"
        + "\n".join(facts)
        + "\nhard: forall s in Service: slow(s) iff (down(s) or exists t in Service: depends(s, t) and slow(t))\n"
    )
    calls = 0
    real = G._Grounder.formula

    def counted(self: G._Grounder, node: object, env: dict[str, str]) -> object:
        nonlocal calls
        calls += 1
        return real(self, node, env)  # type: ignore[arg-type]

    monkeypatch.setattr(G._Grounder, "formula", counted)
    guarded = _shape(cda.ground(text))
    guarded_calls, calls = calls, 0
    assert guarded_calls < 10 * (n + len(facts))  # per service and per dependency, a few calls
    _every_instance(monkeypatch)
    assert _shape(cda.ground(text)) == guarded
    assert calls > n * n  # without the guard: every pair


@pytest.mark.parametrize(
    "clause, message",
    [
        # other(c) is outside E: an error whichever instances the guard selects
        ("hard: exists t in D: rel(a, t) and other(t)", "'c' is not in domain E"),
        ("hard: forall t in D: rel(a, t) implies other(t)", "'c' is not in domain E"),
        ("hard: exists t in D: rel(a, t) and hyp:rel(t, t)", "declared pred, not hyp"),
        ("hard: exists t in D: rel(a, t) and unknown(t)", "unknown predicate 'unknown'"),
        ("hard: exists t in D: rel(a, t) and down(t, t)", "down takes 1 argument"),
    ],
)
def test_a_mistake_in_a_guarded_body_is_reported_as_before(
    clause: str, message: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = (
        "domain D = {a, b, c}\ndomain E = {a, b}\npred rel(D, D)\nhyp other(E)\nhyp down(D)\n"
        f"fact rel(a, b)\n{clause}\n"
    )
    with pytest.raises(DSLTypeError) as guarded:
        cda.ground(text)
    assert message in str(guarded.value)
    _every_instance(monkeypatch)
    with pytest.raises(DSLTypeError) as full:
        cda.ground(text)
    assert str(full.value) == str(guarded.value)
