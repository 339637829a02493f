"""Terms of sorts (populations, strings) and integers with ranges, on both backends.

Random formulas over equalities between term variables and constants are decided by z3 (its
theories of uninterpreted sorts and strings) and by clingo (the finite-domain rewrite of
:mod:`cda.encodings.finite`); both must agree with brute force over the small model (the named
constants and one fresh value per variable), and every model passes the independent re-check.
"""

from __future__ import annotations

import itertools
import random

import pytest

from cda.encodings.evaluate import evaluate
from cda.encodings.finite import FiniteDomains
from cda.encodings.ir import Clause, GroundProblem, Node, NodeFactory, Sort, TermConst, TermVar, fresh_labels
from cda.errors import BackendUnsupported
from cda.solver.backend import Deadline, make_backend
from cda.solver.recheck import CheckedBackend

POP = Sort("P", "population")
CLOSED = Sort("C", "population", ("c1", "c2"))
TEXT = Sort("W", "string")


def _random_problem(rng: random.Random) -> tuple[GroundProblem, Node]:
    f = NodeFactory()
    p = GroundProblem(f)
    pop = [p.declare_term(f"x{i}", POP) for i in range(3)]
    closed = [p.declare_term(f"k{i}", CLOSED) for i in range(2)]
    text = [p.declare_term(f"w{i}", TEXT) for i in range(2)]
    consts = {POP: ["a", "b"], CLOSED: ["c1", "c2", "c3"], TEXT: ["", "hi"]}

    def leaf() -> Node:
        group = rng.choice([pop, closed, text])
        a = rng.choice(group)
        if rng.random() < 0.5:
            return f.eq(a, rng.choice(group))
        return f.eq(a, TermConst(a.sort, rng.choice(consts[a.sort])))

    def formula(depth: int) -> Node:
        if depth == 0 or rng.random() < 0.3:
            return leaf()
        kids = [formula(depth - 1) for _ in range(rng.randint(1, 3))]
        op = rng.choice(["and", "or", "not", "iff"])
        if op == "and":
            return f.and_(kids)
        if op == "or":
            return f.or_(kids)
        if op == "not":
            return f.not_(kids[0])
        return f.iff(kids[0], kids[-1])

    node = formula(3)
    p.clauses.append(Clause("c", "hard", node, 1))
    return p, node


def _brute_force(p: GroundProblem, node: Node) -> bool:
    """Some assignment over the small model satisfies ``node``."""
    names = list(p.terms)
    domains = []
    for name in names:
        sort = p.terms[name].sort
        if sort.domain is not None:
            domains.append(list(sort.domain))
        else:
            named = {"P": ["a", "b"], "W": ["", "hi"]}[sort.name]
            domains.append(named + fresh_labels(set(named), sum(1 for v in p.terms.values() if v.sort == sort)))
    return any(evaluate(node, dict(zip(names, values))) for values in itertools.product(*domains))


@pytest.mark.parametrize("seed", range(60))
def test_both_backends_agree_with_brute_force_over_the_small_model(seed: int) -> None:
    rng = random.Random(seed)
    p, node = _random_problem(rng)
    expected = _brute_force(p, node)
    for backend in ("z3", "clingo"):
        solver = CheckedBackend(p, make_backend(backend, p, seed=0, deadline=Deadline(None), weights={}))
        got = solver.status(solver.base, "random terms")  # a model is re-checked here
        assert got.has_model is expected, (backend, node)


def test_a_closed_sort_keeps_its_variables_in_its_domain_and_constants_apart() -> None:
    f = NodeFactory()
    p = GroundProblem(f)
    k = p.declare_term("k", CLOSED)
    assert f.eq(k, TermConst(CLOSED, "c3")) is f.false  # c3 is named but outside the domain
    p.clauses.append(Clause("c", "hard", f.and_([f.not_(f.eq(k, TermConst(CLOSED, "c1")))]), 1))
    for backend in ("z3", "clingo"):
        solver = CheckedBackend(p, make_backend(backend, p, seed=0, deadline=Deadline(None), weights={}))
        out = solver.backend.check(solver.base)
        assert out.status == "sat" and out.model is not None and out.model["k"] == "c2"


def test_integers_keep_their_own_range_and_clingo_refuses_64_bit_ones_by_name() -> None:
    f = NodeFactory()
    p = GroundProblem(f)
    p.declare_int("n", -(2**63), 2**63 - 1)
    # n + 1 leaves the 64-bit range exactly at the top value: the check is a range check
    overflow = f.linear({"n": 1}, "<=", 2**63 - 2)
    assert overflow is not f.true  # the factory folds with n's own range, not the DSL's ±10⁹
    p.clauses.append(Clause("c", "hard", f.not_(overflow), 1))
    solver = CheckedBackend(p, make_backend("z3", p, seed=0, deadline=Deadline(None), weights={}))
    out = solver.backend.check(solver.base)
    assert out.model is not None and out.model["n"] == 2**63 - 1
    with pytest.raises(BackendUnsupported, match="32-bit.*n ranges over.*use backend 'z3'"):
        make_backend("clingo", p, seed=0, deadline=Deadline(None), weights={})


def test_like_on_a_variable_is_decided_by_z3_and_refused_by_clingo_by_name() -> None:
    f = NodeFactory()
    p = GroundProblem(f)
    w = p.declare_term("w", TEXT)
    p.clauses.append(Clause("c", "hard", f.and_([f.like(w, ("a", None, "z")), f.not_(f.eq(w, TermConst(TEXT, "az")))]), 1))
    solver = CheckedBackend(p, make_backend("z3", p, seed=0, deadline=Deadline(None), weights={}))
    out = solver.backend.check(solver.base)
    assert out.model is not None and str(out.model["w"]).startswith("a") and out.model["w"] != "az"
    with pytest.raises(BackendUnsupported, match="Like on a term variable.*use backend 'z3'"):
        make_backend("clingo", p, seed=0, deadline=Deadline(None), weights={})


def test_the_finite_rewrite_reads_models_back_as_values() -> None:
    f = NodeFactory()
    p = GroundProblem(f)
    x, y = p.declare_term("x", POP), p.declare_term("y", POP)
    p.clauses.append(Clause("c", "hard", f.and_([f.not_(f.eq(x, y)), f.not_(f.eq(x, TermConst(POP, "a")))]), 1))
    fd = FiniteDomains(p, "clingo")
    assert fd.domains["P"] == ["a", "#0", "#1"]
    assert not fd.problem.terms and all(t.startswith("dom!") for t in fd.problem.atoms)
    solver = CheckedBackend(p, make_backend("clingo", p, seed=0, deadline=Deadline(None), weights={}))
    out = solver.backend.check(solver.base)
    assert out.model is not None and out.model["x"] != "a" and out.model["x"] != out.model["y"]
    assert set(out.model) == {"x", "y"}


def test_a_term_outside_its_closed_domain_is_caught_by_the_recheck() -> None:
    from cda.errors import EvaluatorDisagreement

    f = NodeFactory()
    p = GroundProblem(f)
    p.declare_term("k", CLOSED)
    solver = CheckedBackend(p, make_backend("z3", p, seed=0, deadline=Deadline(None), weights={}))
    with pytest.raises(EvaluatorDisagreement, match="outside its sort"):
        solver.verified({"k": "c9"}, [], "forged")


def test_eq_of_two_sorts_is_false_and_like_needs_a_string() -> None:
    f = NodeFactory()
    x = TermVar("x", POP)
    assert f.eq(x, TermVar("w", TEXT)) is f.false
    with pytest.raises(ValueError, match="like needs a string"):
        f.like(x, ("a",))


@pytest.mark.parametrize("text", ["a\x00b", "x\\u{41}y", "é\U0001f600", "\\", 'q"', ""])
def test_any_text_is_one_string_and_one_entity_id_on_both_backends(text: str) -> None:
    """z3 reads escapes inside string literals and symbols as C strings: a NUL or a backslash
    must neither merge two values nor change one. A string equal to ``text`` and matching its
    first character's pattern is found with exactly that text; two ids differing after a NUL
    stay two entities."""
    from cda.contracts.deadline import Deadline
    from cda.solver.query import Query

    f = NodeFactory()
    p = GroundProblem(f)
    w = p.declare_term("w", TEXT)
    x = p.declare_term("x", POP)
    p.clauses.append(Clause("c", "hard", f.and_([
        f.eq(w, TermConst(TEXT, text)), f.like(w, (text[:1], None)),
        f.eq(x, TermConst(POP, text + "\x00one")), f.not_(f.eq(x, TermConst(POP, text + "\x00two")))]), 1))  # fmt: skip
    answer = Query(p, "z3", Deadline(None)).check()
    assert answer.model is not None and answer.model["w"] == text and answer.model["x"] == text + "\x00one"


def test_a_problem_may_ask_for_one_cost_objective_instead_of_a_level_per_soft_clause() -> None:
    """Hypotheses need the violated set canonical (a level per soft clause after the cost); a
    product that only wants a cheap model turns that off and gets the cost alone."""
    from fractions import Fraction

    from cda.encodings.ir import SoftClause
    from cda.encodings.scheme import build_scheme

    f = NodeFactory()
    p = GroundProblem(f, soft=[SoftClause(n, f.atom(n), Fraction(1), 0) for n in ("a", "b", "c")])
    assert len(build_scheme(p, dict.fromkeys("abc", 1)).objectives) == 4
    p.canonical_soft = False
    assert len(build_scheme(p, dict.fromkeys("abc", 1)).objectives) == 1
