"""The IR's product of two unknowns (``z = x * y``): z3 (nonlinear integer arithmetic), clingo
(pairs of values) and the evaluator against brute force on small ranges; clingo refuses by name
where the pairs are too many (docs/architecture.md, "The IR")."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from cda.api import solve
from cda.encodings.products import MAX_PAIRS
from cda.errors import BackendUnsupported, ProblemError
from cda.ir import AtomInfo, Claim, Clause, GroundProblem, Node, NodeFactory, check_problem, evaluate

VARS = ("x", "y", "z")
bound = st.integers(-3, 3)
ranges = st.tuples(bound, bound).map(sorted)
# a difference constraint (what both backends decide): v <= k, -v <= k, or v - w <= k
difference = st.one_of(
    st.tuples(st.sampled_from(VARS), st.sampled_from((1, -1)), st.integers(-9, 9)).map(lambda t: ({t[0]: t[1]}, t[2])),
    st.tuples(st.permutations(VARS), st.integers(-6, 6)).map(lambda t: ({t[0][0]: 1, t[0][1]: -1}, t[1])),
)


def _problem(xr: list[int], yr: list[int], square: bool, negated: bool, hard: list[tuple[dict[str, int], int]],
             claim: tuple[dict[str, int], int]) -> tuple[GroundProblem, Node, list[Node]]:  # fmt: skip
    f = NodeFactory()
    p = GroundProblem(f)
    p.declare_int("x", *xr)
    p.declare_int("y", *(xr if square else yr))
    corners = [a * b for a in xr for b in (xr if square else yr)]
    p.declare_int("z", min(corners) - 1, max(corners) + 1)  # a value no product reaches, each side
    p.atoms["a"] = AtomInfo("a", "var", "a", ())
    mul = f.product("z", "x", "x" if square else "y")
    # the product as part of a formula: either it holds, or (negated) a chooses whether it does
    top = f.or_([f.atom("a"), f.not_(mul)]) if negated else mul
    nodes = [top, *(f.linear(t, "<=", k) for t, k in hard)]
    p.clauses.extend(Clause(f"h{i}", "hard", n, i + 1) for i, n in enumerate(nodes))
    goal = f.linear(claim[0], "<=", claim[1])
    p.claims.append(Claim("c", "prove", goal, "claim", 99))
    return p, goal, nodes


def _brute(p: GroundProblem, goal: Node, nodes: list[Node]) -> tuple[bool, bool]:
    """(the hard clauses allow the claim, they allow its negation), over every assignment."""
    doms = [range(v.low, v.high + 1) for v in p.numvars.values()]
    can = {True: False, False: False}
    for values in itertools.product(*doms, (False, True)):
        model: dict[str, int | bool] = {**dict(zip(p.numvars, values[:-1])), "a": values[-1]}
        if all(evaluate(n, model) for n in nodes):
            can[evaluate(goal, model)] = True
    return can[True], can[False]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ranges, ranges, st.booleans(), st.booleans(), st.lists(difference, max_size=3), difference)
def test_both_backends_decide_a_product_as_brute_force_does(xr: list[int], yr: list[int], square: bool,
                                                            negated: bool, hard: list[tuple[dict[str, int], int]],
                                                            claim: tuple[dict[str, int], int]) -> None:  # fmt: skip
    p, goal, nodes = _problem(xr, yr, square, negated, hard, claim)
    can_hold, can_fail = _brute(p, goal, nodes)
    assume(can_hold or can_fail)  # the hard clauses have a model: a verdict, not a conflict
    want = "inconclusive" if can_hold and can_fail else "supported" if can_hold else "refuted"
    for backend in ("z3", "clingo"):
        r = solve(check_problem(p), backend=backend)
        assert [v.status for v in r.verdicts] == [want], backend


def test_a_square_of_a_wide_variable_is_decided_by_z3_exactly() -> None:
    """x * x = 2 has no integer solution; x * y = 2**62 + 2**31 has one, over 64-bit ranges."""
    f = NodeFactory()
    p = GroundProblem(f)
    p.declare_int("x", -(2**63), 2**63 - 1)
    p.declare_int("y", -(2**63), 2**63 - 1)
    p.declare_int("z", -(2**126), 2**126)
    p.clauses.append(Clause("mul", "hard", f.product("z", "x", "y"), 1))
    p.claims.append(Claim("two", "prove", f.not_(f.and_([f.linear({"z": 1}, "=", 2), f.linear({"x": 1, "y": -1}, "=", 0)])),
                          "x*x is never 2", 2))  # fmt: skip
    p.claims.append(Claim("big", "disprove", f.linear({"z": 1}, "=", 2**62 + 2**31), "x*y can be big", 3))
    r = solve(check_problem(p), backend="z3")
    assert [v.status for v in r.verdicts] == ["supported", "inconclusive"]
    with pytest.raises(BackendUnsupported, match=f"at most {MAX_PAIRS:,}.*use backend 'z3'"):
        solve(p, backend="clingo")


def test_the_evaluator_and_the_problem_check_read_a_product() -> None:
    f = NodeFactory()
    for v in VARS:
        f.declare_int(v, -5, 5)
    mul = f.product("z", "x", "y")
    assert evaluate(mul, {"x": -2, "y": 2, "z": -4}) and not evaluate(mul, {"x": -2, "y": 2, "z": 4})
    p = GroundProblem(f, clauses=[Clause("c", "hard", mul, 1)])
    with pytest.raises(ProblemError, match="numeric variable"):
        check_problem(p)  # x, y and z are the factory's, not declared in the problem
    with pytest.raises(ValueError, match="declare the integer variable w"):
        f.product("z", "x", "w")
