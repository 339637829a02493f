"""Engine semantics: conflicts, budgets, re-checking, integer arithmetic, policies, the Python API."""

from __future__ import annotations

from pathlib import Path

import pytest

import cda
from cda.contracts.result import SolveResult
from cda.solver import engine
from cda.solver.backend import Deadline, Enumeration, make_backend, selector

CONFLICT = """
observable alarm, smoke
hyp fire
observe a1: alarm
observe s0: not smoke
hard chain: alarm implies fire
hard fire_smoke: fire implies smoke
goal prove fire
"""


def test_conflict_cores_and_corrections(backend: str) -> None:
    # alarm → fire → smoke, yet no smoke: the only core is all four; dropping any one fixes it
    r = cda.solve(CONFLICT, backend=backend)
    assert r.status == "unsat"
    assert r.hypotheses == [] and r.conflict is not None
    assert r.conflict.cores == [["a1", "s0", "chain", "fire_smoke"]]
    assert r.conflict.corrections == [["a1"], ["s0"], ["chain"], ["fire_smoke"]]
    assert r.conflict.complete
    assert r.verdicts[0].status == "inconclusive" and "conflict" in (r.verdicts[0].reason or "")


def test_two_independent_conflicts(backend: str) -> None:
    text = """
    observable a, b
    observe p: a
    observe q: not a
    observe r: b
    hard h: not b
    hard ok: a or b
    """
    r = cda.solve(text, backend=backend)
    assert r.conflict is not None
    # not a, not b and a-or-b conflict too: three cores
    assert r.conflict.cores == [["p", "q"], ["r", "h"], ["q", "h", "ok"]]
    # corrections are the minimal hitting sets of the cores, in source order, smallest first
    assert r.conflict.corrections == [["p", "h"], ["q", "r"], ["q", "h"], ["p", "r", "ok"]]


def test_timeout_gives_a_labelled_partial_result(backend: str) -> None:
    # 2^18 hypotheses cannot be enumerated, verified and ranked within a millisecond
    names = ", ".join(f"a{i}" for i in range(18))
    r = cda.solve(f"hyp {names}\nhard: a0 or a1", backend=backend, timeout=0.001)
    assert r.partial
    assert any("time" in note for note in r.notes)


def test_a_claim_the_timeout_left_undecided_is_still_answered(backend: str) -> None:
    """Every goal asked for gets a verdict: the time budget runs out in the enumeration, before
    the claims, and each is listed as unknown, with no confidence and the reason (a mutation that
    drops them leaves the verdicts empty; docs/dsl.md, "Verdicts")."""
    names = ", ".join(f"a{i}" for i in range(18))
    text = f"hyp {names}\nhard: a0 or a1\ngoal prove a0\ngoal disprove a1 and a2"
    r = cda.solve(text, backend=backend, timeout=0.001)
    assert r.partial
    assert [(v.goal, v.claim, v.status) for v in r.verdicts] == [
        ("prove", "a0", "unknown"),
        ("disprove", "a1 and a2", "unknown"),
    ]
    assert all("time" in (v.reason or "") and v.confidence is None for v in r.verdicts)


def test_enumeration_cap_is_reported(backend: str) -> None:
    r = cda.solve("hyp a, b, c, d\nhard: a or b", backend=backend, max_hypotheses=5)
    assert r.hypotheses_enumerated == 5
    assert not r.enumeration_complete
    assert any("capped at 5" in note for note in r.notes)


def test_a_model_the_evaluator_rejects_raises(monkeypatch: pytest.MonkeyPatch, backend: str) -> None:
    """A wrong model from a backend is a bug that raises, never output."""
    made = engine._backend

    def corrupting(name, problem, options, deadline):  # type: ignore[no-untyped-def]
        inner = made(name, problem, options, deadline)
        original = inner.enumerate

        def bad_enumerate(project, assumptions, limit):  # type: ignore[no-untyped-def]
            out = original(project, assumptions, limit)
            flipped = [{**m, "a": not m["a"]} for m in out.models]
            return Enumeration(models=flipped, complete=out.complete, timed_out=out.timed_out)

        inner.enumerate = bad_enumerate
        return inner

    monkeypatch.setattr(engine, "_backend", corrupting)
    with pytest.raises(cda.EvaluatorDisagreement):
        cda.solve("hyp a, b\nhard: a", backend=backend)


def test_metrics_are_whole_units_and_units_convert(backend: str) -> None:
    base = "metric lat : ms\nobservable fast\nhard: fast iff value(metric:lat) <= 1.5 s\n"
    assert cda.solve(base + "observe value(metric:lat) >= 1500 ms\nobserve fast", backend=backend).status == "sat"
    assert cda.solve(base + "observe value(metric:lat) >= 1501 ms\nobserve fast", backend=backend).status == "unsat"
    # a metric in whole seconds cannot take 1.5 s: x <= 1.5 s and x >= 1.2 s has no whole solution
    text = "metric t : s\nhard: value(metric:t) <= 1.5 s\nhard: value(metric:t) >= 1200 ms"
    assert cda.solve(text, backend=backend).status == "unsat"


def test_events_before_and_within(backend: str) -> None:
    text = """
    event deploy, alert, page
    hyp late_page
    hard: before(event:deploy, event:alert)
    hard: within(event:alert, 10 min of event:deploy)
    hard: late_page iff not within(event:page, 5 min of event:alert)
    hard: before(event:alert, event:page)
    hard: time(event:page) - time(event:deploy) >= 20 min
    goal prove late_page
    """
    # page is ≥ 20 min after deploy and alert ≤ 10 min after it, so page is > 5 min after alert
    r = cda.solve(text, backend=backend)
    assert r.verdicts[0].status == "supported"


GENERAL_SUM = """
    metric a : USD
    metric b : USD
    hyp big
    hard: value(metric:a) + 2 * value(metric:b) <= 10 USD
    hard: value(metric:a) >= 0 USD
    hard: big iff value(metric:b) >= 5 USD
    goal disprove big
    """


def test_general_linear_sum_uses_integer_semantics() -> None:
    r = cda.solve(GENERAL_SUM, backend="z3")
    # b = 5 needs a <= 0: a = 0 works, so big is possible; b = 6 is impossible. `disprove big`:
    # the goal holds where big is false (nothing assumed) and fails where big holds
    assert r.verdicts[0].status == "inconclusive"
    assert [(w.holds, w.assumed) for w in r.verdicts[0].witnesses] == [(True, []), (False, ["big"])]
    assert cda.solve(GENERAL_SUM).backend == "z3"  # auto routes arithmetic to z3


def test_clingo_refuses_a_general_sum_and_names_z3() -> None:
    with pytest.raises(cda.BackendUnsupported, match="use backend 'z3'"):
        cda.solve(GENERAL_SUM, backend="clingo")


def test_bounds_beyond_the_variable_range_fold_on_both_backends(backend: str) -> None:
    # every numeric variable lies in [-1e9, 1e9]: these constants never reach the solver
    text = "metric m : s\nhyp a\nhard: a iff value(metric:m) <= 5000000000\nhard: value(metric:m) >= -2147483648"
    r = cda.solve(text, backend=backend)
    assert [h.assumed for h in r.hypotheses] == [["a"]]


def test_risk_policy(backend: str) -> None:
    text = """
    hyp use_x
    observable need
    observe need
    observe risk = high
    hard: need implies use(provider:ModelX) or use_x
    hard: use(provider:ModelX) only_if risk <= medium
    goal prove use_x
    """
    r = cda.solve(text, backend=backend)
    assert r.verdicts[0].status == "supported"
    low = cda.solve(text.replace("risk = high", "risk <= medium"), backend=backend)
    assert low.verdicts[0].status == "inconclusive"


def test_clause_strings_from_python(backend: str) -> None:
    r = cda.solve(
        "hyp a, b\nobservable o\nobserve o",
        backend=backend,
        hard=["o implies (a or b)"],
        soft=[("not a", 2), "prefer(not b) weight 0.5"],
        top=5,
    )
    assert [h.assumed for h in r.hypotheses] == [["b"], ["a"], ["a", "b"]]
    assert [h.cost for h in r.hypotheses] == [0.5, 2.0, 2.5]
    assert [h.violated for h in r.hypotheses][0] == ["soft#2"]


def test_soft_clause_over_observables_is_minimised(backend: str) -> None:
    # the cost of a hypothesis is the cheapest completion: `down` leaves `slow` free, so 0
    text = "hyp down\nobservable slow\nhard: down implies slow or not slow\nsoft weight 3: not slow\nhard: not down implies slow"
    r = cda.solve(text, backend=backend, top=5)
    costs = {tuple(h.assumed): h.cost for h in r.hypotheses}
    assert costs == {("down",): 0.0, (): 3.0}


def test_unknown_backend_is_a_clear_error() -> None:
    with pytest.raises(cda.BackendUnsupported, match="unknown backend 'cvc5'"):
        cda.solve("hyp a", backend="cvc5")


def test_auto_routes_arithmetic_to_z3_and_booleans_to_clingo() -> None:
    assert cda.solve("hyp a").backend == "clingo"
    assert cda.solve("metric m : s\nhard: value(metric:m) <= 3 s").backend == "z3"


def test_same_seed_same_bytes(backend: str) -> None:
    text = "hyp a, b, c\nobservable o, p\nhard: o iff (a or b)\nhard: p iff xor(b, c)\nsoft weight 0.3: not b\ngoal prove a"
    assert cda.solve(text, backend=backend, seed=7).json_text() == cda.solve(text, backend=backend, seed=7).json_text()


def test_violated_is_canonical_when_cheapest_models_tie(backend: str) -> None:
    # every model violates exactly one of the two soft clauses: the earlier one is kept satisfied
    text = "hyp a\nobservable x, y\nhard: not (x and y)\nsoft first: x\nsoft second: y\n"
    r = cda.solve(text, backend=backend, top=5)
    assert [(h.assumed, h.cost, h.violated) for h in r.hypotheses] == [([], 1.0, ["second"]), (["a"], 1.0, ["second"])]


# ---- streaming solver calls: what a consumer raises, asks or runs out of
def _backend_for(text: str, backend: str, seconds: float | None = None):  # type: ignore[no-untyped-def]
    gp = cda.ground(text)
    built = make_backend(backend, gp, seed=0, deadline=Deadline(seconds), weights={})
    return gp, built, [(selector(c.name), True) for c in gp.clauses]


def test_what_a_set_consumer_raises_reaches_the_caller_unchanged(backend: str) -> None:
    gp, built, base = _backend_for("hyp a, b, c\nhard: a or b", backend)

    class Stop(Exception):
        pass

    def refuse(chosen: frozenset[str]) -> bool:
        raise Stop(sorted(chosen))

    with pytest.raises(Stop) as caught:
        built.minimal_sets(gp.hyp_atoms, base, refuse)
    assert caught.value.args[0] in (["a"], ["b"])
    # the solver is usable afterwards: both minimal sets, in some order
    got: list[frozenset[str]] = []
    built.minimal_sets(gp.hyp_atoms, base, lambda s: got.append(s) is None)
    assert sorted(map(sorted, got)) == [["a"], ["b"]]


def test_a_set_consumer_that_stops_gets_no_more_sets(backend: str) -> None:
    gp, built, base = _backend_for("hyp a, b, c\nhard: a or b", backend)
    got: list[frozenset[str]] = []
    out = built.minimal_sets(gp.hyp_atoms, base, lambda s: got.append(s) is not None)
    assert len(got) == 1 and got[0] in ({"a"}, {"b"})
    assert out.stopped and out.delivered == 1


def test_an_enumeration_the_deadline_cuts_is_partial_and_every_model_holds(backend: str) -> None:
    # 2^16 * 3/4 projections cannot be enumerated and decoded in 50 ms
    names = [f"a{i}" for i in range(18)]
    gp, built, base = _backend_for(f"hyp {', '.join(names)}\nhard: a0 or a1", backend, seconds=0.05)
    out = built.enumerate(gp.hyp_atoms, base, 10**6)
    assert out.timed_out and not out.complete
    assert all(m["a0"] or m["a1"] for m in out.models)
    assert len({frozenset(a for a in names if m[a]) for m in out.models}) == len(out.models)


# ---- next tests: the backbone of each hypothesis, a block of observables per solver call
def _service_chain(n: int, open_ones: int = 0) -> str:
    """n services in a chain; the last ``open_ones`` observables are left free by every
    hypothesis (no clause mentions them), the others are determined by it."""
    names = [f"s{i}" for i in range(n)]
    facts = "\n".join(f"fact depends(s{i}, s{i - 1})" for i in range(1, n))
    determined = names[: n - open_ones]
    return (
        f"domain Service = {{{', '.join(names)}}}\n"
        "hyp down(Service)\nobservable slow(Service)\npred depends(Service, Service)\n"
        f"{facts}\n"
        f"domain Shown = {{{', '.join(determined)}}}\n"
        "hard: forall s in Shown: slow(s) iff (down(s) or exists t in Shown: depends(s, t) and slow(t))\n"
        f"hard: at_most(1, [{', '.join(f'down({s})' for s in names)}])\n"
        f"observe slow(s{n - open_ones - 1})\n"
    )


def test_next_tests_ask_one_block_of_observables_per_hypothesis(backend: str) -> None:
    text = _service_chain(30)
    calls: list[str] = []
    gp = cda.ground(text)
    options = engine.EngineOptions(call_log=lambda method, inputs, outcome, status: calls.append(method))
    result = engine.run(gp, backend, options)
    hyps, tests = result.hypotheses_enumerated, len(result.next_tests)
    assert hyps == 30 and tests == 29
    # every observable is determined by the hypothesis: one unsat call per hypothesis settles all
    # of them (asking per observable took hyps * tests = 870 calls)
    assert calls.count(f"{backend}.check") <= 1 + hyps


def test_next_tests_with_open_observables_match_the_per_observable_definition(backend: str) -> None:
    """Observables no clause mentions are open under every hypothesis (likelihood 1/2, no
    information); the rest are determined. Checked against asking the solver key by key."""
    text = _service_chain(12, open_ones=4)
    gp = cda.ground(text)
    result = engine.run(gp, backend, engine.EngineOptions())
    built = make_backend(backend, gp, seed=0, deadline=Deadline(None), weights={})
    base = [(selector(c.name), True) for c in gp.clauses]
    hyps = [frozenset(h.assumed) for h in cda.solve(text, backend=backend, top=100).hypotheses]
    open_names = {f"slow(s{i})" for i in range(8, 12)}
    for t in result.next_tests:
        per_hyp = []
        for h in hyps:
            lits = base + [(a, a in h) for a in gp.hyp_atoms]
            can_true = built.check(lits + [(t.observable, True)]).status == "sat"
            can_false = built.check(lits + [(t.observable, False)]).status == "sat"
            per_hyp.append(0.5 if can_true and can_false else 1.0 if can_true else 0.0)
        assert (t.observable in open_names) == all(q == 0.5 for q in per_hyp)
        want = sum(per_hyp) / len(per_hyp)  # the hypotheses are equally likely here (no soft clauses)
        assert abs(t.probability_true - want) < 1e-9
        if t.observable in open_names:
            assert t.expected_information_gain == 0.0


def _calls(text: str, backend: str) -> tuple[SolveResult, list[str]]:
    calls: list[str] = []
    result = engine.run(cda.ground(text), backend, engine.EngineOptions(call_log=lambda m, i, o, s: calls.append(m)))
    return result, calls


def test_canonical_violations_take_one_optimisation_per_hypothesis(backend: str) -> None:
    """Soft clauses on observables the hypotheses leave open: each hypothesis's cheapest model,
    with its canonical violations, comes from one lexicographic optimisation (clause by clause it
    took one more per violated soft clause)."""
    open_ones = [f"s{i}" for i in range(8, 12)]
    text = _service_chain(12, open_ones=4) + "".join(
        f"soft keep_{s}: slow({s})\nsoft drop_{s} weight 2: not slow({s})\n" for s in open_ones
    )
    result, calls = _calls(text, backend)
    assert result.hypotheses_enumerated == 8
    assert calls.count(f"{backend}.minimize") == 8
    # the cheaper side wins each pair (not slow, weight 2); keep_* are violated, in source order
    assert all(h.violated == [f"keep_{s}" for s in open_ones] for h in result.hypotheses)


def test_soft_clauses_the_hypothesis_decides_need_no_optimisation(backend: str) -> None:
    """Soft clauses on observables every hypothesis determines: one backbone check per
    hypothesis shows its model's cost is the only one, and no optimisation runs."""
    text = _service_chain(12) + "".join(f"soft weight {1 + i % 2}: not slow(s{i})\n" for i in range(12))
    result, calls = _calls(text, backend)
    assert result.hypotheses_enumerated == 12
    assert calls.count(f"{backend}.minimize") == 0
    # the costs are those of the definition: slow(s_i) holds for i >= the fault, weights 1, 2, 1, 2...
    for h in result.hypotheses:
        fault = int(h.assumed[0][len("down(s"):-1])
        assert h.cost == sum(1 + i % 2 for i in range(fault, 12))


# ---- every clause on in one literal
def test_all_clauses_on_answers_as_each_selector_on(backend: str) -> None:
    """Assuming the one ALL_CLAUSES atom and assuming every clause's selector give the same
    answers, with and without a clause switched off or abducibles fixed besides (20 random
    problems); with no clause there is nothing to assume."""
    import random

    from cda.solver.backend import ALL_CLAUSES, all_clauses_on

    assert all_clauses_on([]) == []
    rnd = random.Random(5)
    answers = set()
    for _ in range(20):
        atoms = [f"a{i}" for i in range(5)]
        clauses = []
        for i in range(rnd.randint(2, 8)):
            lits = [f"{'not ' if rnd.random() < 0.5 else ''}{a}" for a in rnd.sample(atoms, rnd.randint(1, 3))]
            clauses.append(f"hard c{i}: {' or '.join(lits)}")
        gp, built, each = _backend_for(f"hyp {', '.join(atoms)}\n" + "\n".join(clauses), backend)
        assert all_clauses_on(gp.clauses) == [(ALL_CLAUSES, True)]
        for extra in ([], [(selector("c0"), False)], [("a0", True), ("a1", False)]):
            one = built.check([(ALL_CLAUSES, True), *extra]).status
            assert one == built.check(each + extra).status, (clauses, extra)
            answers.add(one)
    assert answers == {"sat", "unsat"}  # both kinds of answer were compared


def _brute_status(atoms: list[str], clauses: list[list[tuple[str, bool]]], assumed: list[tuple[str, bool]]) -> str:
    """Whether some assignment meets the assumptions, by the selector semantics: clause ``ci``
    must hold when its selector is assumed on or every clause is (ALL_CLAUSES), and ALL_CLAUSES
    on with a selector assumed off is a contradiction; other clauses may be off."""
    import itertools

    from cda.solver.backend import ALL_CLAUSES

    given = dict(assumed)
    every = given.get(ALL_CLAUSES) is True
    if every and any(v is False for k, v in given.items() if k.startswith("sel!c")):
        return "unsat"
    on = [c for i, c in enumerate(clauses) if every or given.get(selector(f"c{i}")) is True]
    for values in itertools.product([False, True], repeat=len(atoms)):
        row = dict(zip(atoms, values))
        if all(row[a] == v for a, v in given.items() if a in row) and all(
            any(row[a] == pos for a, pos in c) for c in on
        ):
            return "sat"
    return "unsat"


def test_clauses_switched_one_by_one_or_all_at_once_against_brute_force(backend: str) -> None:
    """Checks under every kind of assumption a caller makes (every clause on, clauses one by one,
    one switched off, none, abducibles fixed) against brute force, on 40 random problems. z3
    answers calls that keep every clause on from a solver without selectors and builds the
    guarded one only for the others; clingo writes each clause behind ALL_CLAUSES alone and makes
    the selectors (in the same program, keeping what clasp learnt) on the first call that switches
    clauses one by one: the first calls here keep every clause on and must not make them, so both
    forms of each backend are compared."""
    import random

    from cda.solver.backend import ALL_CLAUSES

    rnd = random.Random(11)
    seen: set[tuple[bool, str]] = set()
    for _ in range(40):
        atoms = [f"a{i}" for i in range(5)]
        clauses = [
            [(a, rnd.random() < 0.5) for a in rnd.sample(atoms, rnd.randint(1, 3))] for _ in range(rnd.randint(2, 7))
        ]
        text = f"hyp {', '.join(atoms)}\n" + "".join(
            f"hard c{i}: {' or '.join(a if pos else f'not {a}' for a, pos in c)}\n" for i, c in enumerate(clauses)
        )
        gp, built, each = _backend_for(text, backend)
        fixed = [(a, rnd.random() < 0.5) for a in rnd.sample(atoms, 2)]
        plain_calls = [[(ALL_CLAUSES, True)], [(ALL_CLAUSES, True), *fixed], [(ALL_CLAUSES, True), *each[:1]]]
        guarded_calls = [
            each,
            [(ALL_CLAUSES, True), (selector("c0"), False)],
            [(selector("c0"), False), *fixed],
            [*each[1:], *fixed],
            fixed,
            [(ALL_CLAUSES, False), *each[:2]],
        ]
        for i, assumed in enumerate(plain_calls + guarded_calls):
            status = built.check(assumed).status
            assert status == _brute_status(atoms, clauses, assumed), (text, assumed)
            seen.add((i < len(plain_calls), status))
            if backend == "z3" and i == len(plain_calls) - 1:
                assert built._guarded is None, "a call keeping every clause on built the guarded solver"
            if backend == "clingo" and i == 1:  # (the third plain call names a selector: clingo makes them there)
                assert built._unselected, "a call keeping every clause on made the clauses' selectors"
        if backend == "z3":
            assert built._guarded is not None
        if backend == "clingo":
            assert not built._unselected  # made on the first call switching clauses one by one
    assert seen == {(True, "sat"), (True, "unsat"), (False, "sat"), (False, "unsat")}


def test_a_file_name_passed_as_text_gets_a_hint(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "p.cda").write_text("hyp leak\nhard: leak\n")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(cda.DSLSyntaxError, match=r"pass pathlib.Path\('p.cda'\)"):
        cda.solve("p.cda")
    assert cda.solve(Path("p.cda")).hypotheses[0].assumed == ["leak"]
    with pytest.raises(cda.DSLSyntaxError) as info:  # a string naming no file: no hint
        cda.solve("q.cda\x00")
    assert "pathlib" not in str(info.value)


@pytest.mark.parametrize("weight", [float("nan"), float("inf"), "heavy"])
def test_a_weight_given_from_python_that_is_no_number_is_a_type_error(weight: object) -> None:
    with pytest.raises(cda.DSLTypeError, match="weight must be a positive number") as info:
        cda.solve("hyp a", soft=[("not a", weight)])  # type: ignore[list-item]
    assert info.value.filename == "soft#1"


def test_engine_options_refuse_what_no_solver_takes() -> None:
    for bad in ({"seed": -1}, {"seed": 2**32}, {"seed": 1.5}, {"timeout": -0.5}, {"timeout": float("nan")}, {"top": 0}):
        with pytest.raises(cda.OptionError):
            engine.EngineOptions(**bad)  # type: ignore[arg-type]
    ok = engine.EngineOptions(seed=2**32 - 1, timeout=float("inf"))
    assert Deadline(ok.timeout).remaining() is None  # infinity: no limit


@pytest.mark.parametrize(
    ("goal", "status"),
    [
        ("prove false", "refuted"),
        ("disprove false", "supported"),
        ("prove before(event:e, event:e)", "refuted"),
        ("disprove v and before(event:e, event:e)", "supported"),
    ],
)
def test_a_claim_no_model_satisfies_on_the_clingo_text_path(goal: str, status: str) -> None:
    """With a var and an event the clingo program is text; the grounder drops the claim's atom
    when no answer set can make it true, and clingo raised 'lost atom x(1)'. Now it answers, and
    as z3 does, byte for byte."""
    text = f"var v\nevent e\nsoft: v\ngoal {goal}\n"
    z3, clingo = (cda.solve(text, backend=b) for b in ("z3", "clingo"))
    assert [v.status for v in clingo.verdicts] == [status]
    assert clingo.json_text().replace('"clingo"', '"z3"') == z3.json_text()


MINIMAL_WITH_CLAIMS = [
    "hyp a, b\ngoal prove a\n",
    "hyp a, b, c\nobservable o\nhard: o iff (a or b)\nobserve o\nsoft weight 0.5: not a\ngoal prove a\ngoal disprove c\n",
    "hyp a, b\nobservable o, p\nhard: o iff (a or b)\nhard: p iff a\nobserve o\nsoft weight 2: not p\n"
    "goal prove b\ngoal disprove a and b\ngoal prove o\n",
]


@pytest.mark.parametrize("text", MINIMAL_WITH_CLAIMS)
def test_claims_under_minimal_explanations_are_answered_as_without_it(text: str, backend: str) -> None:
    """`goal minimal_explanations` changes what the result lists, not what a claim means: each
    verdict (confidence in between, a witness each way) is the one the same problem gets without
    that goal. They came back with confidence 0.0 or 1.0 and no witnesses."""
    plain = cda.solve(text, backend=backend)
    minimal = cda.solve(text + "goal minimal_explanations\n", backend=backend)
    assert minimal.minimal_explanations is not None and minimal.minimal_complete
    assert [v.model_dump() for v in minimal.verdicts] == [v.model_dump() for v in plain.verdicts]
    open_claims = [v for v in minimal.verdicts if v.status == "inconclusive"]
    assert open_claims and all(0 < v.confidence < 1 and len(v.witnesses) == 2 for v in open_claims)


def test_statuses_are_ordered_enums_that_print_as_their_strings() -> None:
    """Lowering a status is a min: refuted < unknown < inconclusive < supported (a ceiling never
    lifts an undecided claim to inconclusive), unsat < unknown < sat; the JSON keeps the strings."""
    from cda.contracts.status import SolverStatus, VerdictStatus

    assert sorted(VerdictStatus) == [VerdictStatus.REFUTED, VerdictStatus.UNKNOWN, VerdictStatus.INCONCLUSIVE,
                                     VerdictStatus.SUPPORTED]
    assert min(VerdictStatus.UNKNOWN, VerdictStatus.INCONCLUSIVE) is VerdictStatus.UNKNOWN
    assert sorted(SolverStatus) == [SolverStatus.UNSAT, SolverStatus.UNKNOWN, SolverStatus.SAT]
    assert min(VerdictStatus.SUPPORTED, VerdictStatus("inconclusive")) is VerdictStatus.INCONCLUSIVE
    assert min(VerdictStatus.REFUTED, VerdictStatus.INCONCLUSIVE) is VerdictStatus.REFUTED
    assert VerdictStatus.SUPPORTED > "refuted" and SolverStatus.UNKNOWN < "sat"  # a member's string compares as it
    r = cda.solve(CONFLICT, backend="z3")
    # (by name and value: pytest's doctest collection may have imported a second copy of the module)
    assert type(r.status).__name__ == "SolverStatus" and r.status == SolverStatus.UNSAT
    assert type(r.verdicts[0].status).__name__ == "VerdictStatus" and r.verdicts[0].status == "inconclusive"
    assert min(r.verdicts[0].status, "refuted") == "refuted"
    assert '"status": "unsat"' in r.json_text() and f"{r.status}" == "unsat" and repr(r.status) == "'unsat'"


def test_a_size_bound_that_hides_every_explanation_is_no_conflict(backend: str) -> None:
    """With explanations of at most one abducible asked for and the only one of two, the answer
    was status unsat with an empty conflict ("the hard clauses and observations conflict")."""
    gp = cda.ground("hyp a, b\nobservable o\nhard: o iff (a and b)\nobserve o\ngoal minimal_explanations\ngoal prove a\n")
    r = engine.run(gp, backend, engine.EngineOptions(max_explanation_size=1))
    assert (r.status, r.conflict, r.minimal_explanations) == ("sat", None, [])
    assert r.notes == ["no explanation assumes at most 1 abducible; every one assumes more"]
    assert [(v.status, v.confidence) for v in r.verdicts] == [("supported", 1.0)]  # o forces a
    unbounded = engine.run(gp, backend, engine.EngineOptions())
    assert unbounded.minimal_explanations == [["a", "b"]]


@pytest.mark.parametrize("text", ["observable o\nobserve o\ngoal minimal_explanations\n",
                                  "hyp a\nobservable o\nobserve o\nhard: o implies a\ngoal minimal_explanations\n"])
def test_minimal_explanations_print_nothing_on_stderr(backend: str, text: str, capfd: pytest.CaptureFixture[str]) -> None:
    """clasp's domain heuristic with no abducibles printed 'domRec ignored: No domain atoms
    found.' (and an info about abd/1) on the user's terminal; the answer is the same either way."""
    result = cda.solve(text, backend=backend)
    assert result.status == "sat" and result.minimal_explanations
    out, err = capfd.readouterr()
    assert err == "" and out == ""


def test_gc_paused_leaves_no_collection_owed_and_keeps_what_others_froze() -> None:
    """After the pause what was built is in the oldest generation and the young generation's count
    is reset (the first allocation after the block does not walk everything built in it); objects
    someone else froze stay frozen."""
    import gc

    from cda.gcpause import gc_paused

    with gc_paused():
        built = [[i] for i in range(50_000)]
    assert gc.isenabled() and gc.get_count()[0] < 1_000 and len(built) == 50_000
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        with gc_paused():
            more = [[i] for i in range(1_000)]
        assert gc.get_freeze_count() == frozen and len(more) == 1_000
    finally:
        gc.unfreeze()


@pytest.mark.parametrize("backend", ["clingo", "z3"])
def test_hypotheses_are_ranked_by_size_then_sorted_names_with_shared_atoms(backend: str) -> None:
    """Every hypothesis assumes the pinned atoms p0…p5 and some of a, b, c, d (at least one):
    the ranking is by size, then by the sorted names, the pinned ones included, exactly as
    sorting the whole lists would order them (the ranking leaves the shared atoms out of its key)."""
    pins = "\n".join(f"hard: p{i}" for i in range(6))
    text = "hyp a, b, c, d, p0, p1, p2, p3, p4, p5\n" + pins + "\nhard: a or b or c or d\n"
    result = cda.solve(text, backend=backend, top=20)
    got = [h.assumed for h in result.hypotheses]
    assert len(got) == 15 and all({f"p{i}" for i in range(6)} <= set(h) for h in got)
    assert got == sorted(got, key=lambda h: (len(h), sorted(h)))


def test_witnesses_are_relative_to_the_goal_as_status_and_confidence_are(backend: str) -> None:
    """Issue 27: `disprove a` printed "holds under: a / fails under: b" while `prove not a`, the
    same goal, printed the opposite with the same confidence. Each witness is checked by brute
    force: under its hypothesis (its atoms true, the others false) `a or b` holds and the goal
    (not a, for both) holds exactly when the witness says so."""
    text = "hyp a, b\nhard: a or b\nsoft weight 3: not a\ngoal disprove a\ngoal prove not a\n"
    disprove, prove_not = cda.solve(text, backend=backend).verdicts
    assert disprove.status == prove_not.status == "inconclusive"
    assert disprove.confidence == prove_not.confidence
    assert disprove.witnesses == prove_not.witnesses and [w.holds for w in disprove.witnesses] == [True, False]
    for w in disprove.witnesses:
        a, b = "a" in w.assumed, "b" in w.assumed
        assert (a or b) and w.holds == (not a), w
    assert disprove.witnesses[0].assumed == ["b"]  # the most probable world where a fails (cost 0)
