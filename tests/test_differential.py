"""Differential (z3 vs clingo) and brute-force oracle tests of the engine.

A Hypothesis strategy builds random well-typed DSL problems as a small formula tree and
renders them to TEXT (sometimes with minimal parentheses, so operator precedence is exercised,
sometimes fully parenthesised). For each problem:

* both backends must give byte-identical JSON (``"backend"`` line aside);
* every part of the answer is checked against a brute force over all assignments of the
  atoms (``tests/oracle.py``), which evaluates the ground IR with its own bitset evaluator
  and never calls a solver: status, conflict cores and corrections (minimal, and all of them
  when complete), the ranked hypotheses with costs and posteriors, verdicts with minimal
  justifications and witnesses, and next tests with their information gain;
* the grounding itself is checked against the generator's own tree evaluation, so the
  parser/grounder cannot silently agree with the oracle on a wrong formula;
* the same problem solved twice with the same seed gives the same bytes (and another seed
  changes only the ``"seed"`` field);
* random event/metric problems: z3 and clingo (clingo-dl) agree byte for byte; a general sum of
  metrics is refused by clingo (``BackendUnsupported`` naming z3) and answered by z3 / auto.

Targeted regressions follow, among them the engine bug these tests found once
(``test_violated_is_canonical_with_many_tied_soft_clauses``; see KNOWN_BUG_STALE_CANONICAL, now
False: fixed).
"""

from __future__ import annotations

import difflib
import json
import math
from collections.abc import Sequence
from fractions import Fraction
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

import cda
from cda.api import solve_cross_checked
from cda.encodings import ir
from cda.errors import BackendUnsupported
from cda.testing import (  # the strategies are public: cda.testing
    Formula,
    Problem,
    Statement,
    arithmetic_problems,
    problems,
    render,
)
from tests import oracle  # the brute force: tests/oracle.py

BACKENDS = ("z3", "clingo")
TOP = 10_000
TOL_COST = 1e-9
TOL_PROB = 2e-9  # the engine rounds to 9 decimals
TOL_INFO = 1e-6

# ==============================================================================================
# Formula trees: rendered to DSL text, and evaluated independently of the parser and grounder
# ==============================================================================================
# ("atom", name[, prefix]) | ("patom", pred, term[, prefix]) | ("const", bool) | ("not", f) | ("and", [f..]) |
# ("or", [f..]) | ("implies", l, r) | ("iff", l, r) | ("xor", [f..]) | ("card", op, k, [f..]) |
# ("quant", "forall"|"exists", var, body) | ("wrap", "holds"|"prefer", f)


def tree_bits(f: Formula, bits: Any, domain: Sequence[str], env: dict[str, str] | None = None) -> int:
    """The truth table of ``f`` straight from the tree (no parser, no grounder)."""
    env = env or {}
    kind = f[0]
    if kind == "atom":
        return bits.var[f[1]]
    if kind == "patom":
        return bits.var[f"{f[1]}({env.get(f[2], f[2])})"]
    if kind == "const":
        return bits.full if f[1] else 0
    if kind == "not":
        return bits.neg(tree_bits(f[1], bits, domain, env))
    if kind == "and":
        return bits.all_of(tree_bits(a, bits, domain, env) for a in f[1])
    if kind == "or":
        return bits.any_of(tree_bits(a, bits, domain, env) for a in f[1])
    if kind == "implies":
        return bits.neg(tree_bits(f[1], bits, domain, env)) | tree_bits(f[2], bits, domain, env)
    if kind == "iff":
        return bits.neg(tree_bits(f[1], bits, domain, env) ^ tree_bits(f[2], bits, domain, env))
    if kind == "xor":
        return bits.parity(tree_bits(a, bits, domain, env) for a in f[1])
    if kind == "card":
        return bits.card(f[1], f[2], [tree_bits(a, bits, domain, env) for a in f[3]])
    if kind == "quant":
        parts = [tree_bits(f[3], bits, domain, {**env, f[2]: v}) for v in domain]
        return bits.all_of(parts) if f[1] == "forall" else bits.any_of(parts)
    if kind == "wrap":
        return tree_bits(f[2], bits, domain, env)
    raise ValueError(kind)


# ==============================================================================================
# Random problems
# ==============================================================================================
# ==============================================================================================
# Helpers
# ==============================================================================================
def strip_backend(json_text: str) -> str:
    lines = json_text.splitlines()
    kept = [ln for ln in lines if not ln.startswith('  "backend": ')]
    assert len(kept) == len(lines) - 1, "expected exactly one top-level backend line"
    return "\n".join(kept)


def strip_seed(json_text: str) -> str:
    return "\n".join(ln for ln in json_text.splitlines() if not ln.startswith('  "seed": '))


def solve_both(text: str, **kw: Any) -> dict[str, Any]:
    return {b: cda.solve(text, backend=b, top=TOP, **kw) for b in BACKENDS}


def without_violated(json_text: str) -> str:
    """The JSON with every hypothesis's ``violated`` list blanked (see KNOWN_BUG_STALE_CANONICAL)."""
    data = json.loads(json_text)
    for h in data["hypotheses"]:
        h["violated"] = None
    return json.dumps(data, indent=2)


#: Once an engine bug (fixed): ``_Run.cheapest`` decided which soft clauses to keep from the
#: first cheapest model's values; with tied cheapest models ``violated`` depended on the backend.
#: Kept as a switch so the property tests can be relaxed again if such a bug reappears.
KNOWN_BUG_STALE_CANONICAL = False


def assert_same_json(text: str, results: dict[str, Any], *, tied: bool = False) -> None:
    z, c = (strip_backend(results[b].json_text()) for b in BACKENDS)
    if tied and KNOWN_BUG_STALE_CANONICAL:
        z, c = without_violated(z), without_violated(c)
    if z != c:
        diff = "\n".join(difflib.unified_diff(z.splitlines(), c.splitlines(), "z3", "clingo", lineterm="", n=2))
        pytest.fail(f"z3 and clingo disagree on\n{text}\n{diff}")


def _mentions(node: ir.Node) -> set[str]:
    """Atom names in an IR node (own traversal)."""
    out: set[str] = set()
    stack = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, ir.Atom):
            out.add(n.name)
        stack.extend(n.children)
    return out


def check_against_oracle(text: str, gp: ir.GroundProblem, orc: Any, result: Any) -> None:
    """Every field of ``result`` against the brute force."""
    ctx = f"\n--- problem ---\n{text}"
    assert not result.partial, ctx
    names = orc.clause_names
    if not orc.satisfiable:
        assert result.status == "unsat", ctx
        assert result.hypotheses == [] and result.hypotheses_enumerated == 0, ctx
        assert result.next_tests == [], ctx
        assert [v.name for v in result.verdicts] == [c.name for c in gp.claims], ctx
        for v in result.verdicts:
            assert (v.status, v.confidence, v.justification, v.witnesses) == ("inconclusive", 0.0, [], []), ctx
        conflict = result.conflict
        assert conflict is not None, ctx
        position = {n: i for i, n in enumerate(names)}
        for core in conflict.cores:
            assert core == sorted(set(core), key=position.__getitem__), f"core {core} not in source order{ctx}"
            assert not orc.subset_sat(core), f"core {core} is satisfiable{ctx}"
            for c in core:
                assert orc.subset_sat([x for x in core if x != c]), f"core {core} is not minimal (drop {c}){ctx}"
        for mcs in conflict.corrections:
            assert mcs == sorted(set(mcs), key=position.__getitem__), f"correction {mcs} not in source order{ctx}"
            kept = [n for n in names if n not in mcs]
            assert orc.subset_sat(kept), f"dropping {mcs} does not restore consistency{ctx}"
            for c in mcs:
                assert not orc.subset_sat(kept + [c]), f"correction {mcs} is not minimal (keep {c}){ctx}"
        if len(names) <= 12:
            muses, mcses = oracle.all_muses_mcses(names, [orc.clause_vec[n] for n in names], orc.background)
            if conflict.complete:
                assert conflict.cores == muses, f"cores {conflict.cores} != all MUSes {muses}{ctx}"
                assert conflict.corrections == mcses, f"corrections {conflict.corrections} != all MCSes {mcses}{ctx}"
            else:  # the engine stops only at its limit of 64 sets
                assert max(len(conflict.cores), len(conflict.corrections)) >= 64, ctx
        return

    # ---- satisfiable
    assert result.status == "sat", ctx
    assert result.conflict is None, ctx
    assert result.enumeration_complete, ctx
    ranked, post = orc.ranked, orc.posterior
    assert result.hypotheses_enumerated == len(ranked), ctx
    got = [(h.assumed, h.cost) for h in result.hypotheses]
    want = [(h.assumed, float(h.cost)) for h in ranked]
    assert [a for a, _ in got] == [a for a, _ in want], f"ranking differs{ctx}"
    for (a, c), (_, wc) in zip(got, want):
        assert abs(c - wc) <= TOL_COST, f"cost of {a}: {c} != {wc}{ctx}"
    soft_w = {n: w for n, _, w in orc.soft}
    for i, (h, rh, p) in enumerate(zip(result.hypotheses, ranked, post)):
        assert h.id == f"h{i + 1}", ctx
        assert abs(h.posterior - p) <= TOL_PROB, f"posterior of {h.assumed}: {h.posterior} != {p}{ctx}"
        # `violated` names a cheapest model's violated soft clauses: the weights add up to the
        # cost, and some satisfying assignment of this hypothesis violates exactly those
        assert h.violated == [n for n in soft_w if n in set(h.violated)], f"violated not in source order{ctx}"
        assert sum((soft_w[n] for n in h.violated), Fraction(0)) == rh.cost, ctx
        assert tuple(h.violated) in rh.optimal_violations, (
            f"no cheapest model of {h.assumed} violates exactly {h.violated} "
            f"(cheapest models violate {sorted(rh.optimal_violations)}){ctx}"
        )
        # and when cheapest models tie, the canonical one: soft clauses kept greedily in order
        assert KNOWN_BUG_STALE_CANONICAL or tuple(h.violated) == orc.canonical_violations(rh), (
            f"{h.assumed}: violated {h.violated} is not the canonical {orc.canonical_violations(rh)}{ctx}"
        )
    assert abs(math.fsum(h.posterior for h in result.hypotheses) - 1.0) < 1e-6, ctx

    considered = ranked[: oracle.MAX_TESTED]
    w = post[: len(considered)]
    prior = [x / math.fsum(w) for x in w]

    # ---- verdicts
    assert [v.name for v in result.verdicts] == [c.name for c in gp.claims], ctx
    for claim, v in zip(gp.claims, result.verdicts):
        cvec = orc.claim_vec[claim.name]
        assert v.goal == claim.mode, ctx
        always = orc.sat & orc.bits.neg(cvec) == 0
        never = orc.sat & cvec == 0
        if always or never:
            holds = always  # the claim's entailed value
            want_status = "supported" if holds == (claim.mode == "prove") else "refuted"
            assert v.status == want_status, f"{claim.name}: {v.status} != {want_status}{ctx}"
            assert v.confidence == (1.0 if want_status == "supported" else 0.0), ctx
            assert v.witnesses == [], ctx
            opposite = orc.bits.neg(cvec) if holds else cvec
            just = v.justification
            assert set(just) <= set(names) and len(set(just)) == len(just), ctx
            assert just == [n for n in names if n in set(just)], f"justification not in source order{ctx}"
            assert not orc.subset_sat(just, opposite), f"{claim.name}: {just} does not force the answer{ctx}"
            for c in just:
                rest = [x for x in just if x != c]
                assert orc.subset_sat(rest, opposite), f"{claim.name}: {just} not minimal (drop {c}){ctx}"
        else:
            assert v.status == "inconclusive", f"{claim.name}: {v.status} != inconclusive{ctx}"
            assert v.justification == [], ctx
            want_w = []  # relative to the goal: for disprove c, the goal holds where c is false
            goal_true = cvec if claim.mode == "prove" else orc.bits.neg(cvec)
            for side, vec in ((True, goal_true), (False, orc.bits.neg(goal_true))):
                first = next(h for h in ranked if orc.possible(h, vec))
                want_w.append((side, first.assumed))
            assert [(x.holds, x.assumed) for x in v.witnesses] == want_w, f"{claim.name} witnesses{ctx}"
            # over every hypothesis (next tests use the most probable MAX_TESTED only)
            q = orc.likelihoods(cvec)
            p_true = math.fsum(p * x for p, x in zip(post, q)) / math.fsum(post)
            want_conf = p_true if claim.mode == "prove" else 1 - p_true
            assert abs(v.confidence - want_conf) <= TOL_INFO, (
                f"{claim.name}: confidence {v.confidence} != {want_conf}{ctx}"
            )

    # ---- next tests
    observed: set[str] = set()
    for c in gp.clauses:
        if c.kind == "observation":
            observed |= _mentions(c.node)
    candidates = [a.name for a in gp.atoms.values() if a.kind == "observable" and a.name not in observed]
    got_tests = {t.observable: t for t in result.next_tests}
    assert len(got_tests) == len(result.next_tests) and set(got_tests) == set(candidates), (
        f"next tests for {sorted(got_tests)} but unobserved observables are {sorted(candidates)}{ctx}"
    )
    keys = [(-t.expected_information_gain, t.observable) for t in result.next_tests]
    assert keys == sorted(keys), f"next tests not sorted by gain then name{ctx}"
    for obs in candidates:
        q = orc.likelihoods(orc.bits.var[obs])[: len(considered)]
        gain, p_true = oracle.information_gain_bits(prior, q)
        t = got_tests[obs]
        assert abs(t.expected_information_gain - gain) <= TOL_INFO, (
            f"IG({obs}) {t.expected_information_gain} != {gain}{ctx}"
        )
        assert abs(t.probability_true - p_true) <= TOL_INFO, f"P({obs}) {t.probability_true} != {p_true}{ctx}"
    if len(ranked) <= oracle.MAX_TESTED:
        assert result.notes == [], ctx


def check_grounding(p: Problem, gp: ir.GroundProblem) -> None:
    """The grounder's IR means what the generator's tree means (and atoms are as declared)."""
    assert [a.name for a in gp.atoms.values() if a.kind == "hyp"] == p.hyp_atoms
    assert [a.name for a in gp.atoms.values() if a.kind == "observable"] == p.observable_atoms
    bits = oracle.Bitsets(p.hyp_atoms + p.observable_atoms)
    dom = p.domain or []
    clauses = [s for s in p.statements if s.kind in ("hard", "observe")]
    softs = [s for s in p.statements if s.kind == "soft"]
    claims = [s for s in p.statements if s.kind in ("prove", "disprove")]
    assert len(gp.clauses) == len(clauses) and len(gp.soft) == len(softs) and len(gp.claims) == len(claims)

    def table(s: Statement) -> int:
        assert s.formula is not None
        return tree_bits(s.formula, bits, dom)

    for s, clause in zip(clauses, gp.clauses, strict=True):
        assert clause.kind == ("hard" if s.kind == "hard" else "observation")
        if s.name:
            assert clause.name == s.name
        assert bits.of(clause.node) == table(s), f"clause {clause.name} grounded wrongly:\n{p.text()}"
    for s, soft in zip(softs, gp.soft, strict=True):
        assert soft.weight == Fraction(s.weight or "1")
        assert bits.of(soft.node) == table(s), f"soft {soft.name} grounded wrongly:\n{p.text()}"
    for s, claim in zip(claims, gp.claims, strict=True):
        assert claim.mode == s.kind and s.formula is not None
        assert bits.of(claim.node) == table(s), f"claim {claim.name} grounded wrongly:\n{p.text()}"
        assert claim.text == " ".join(render(s.formula, parens=p.parens).split())


# ==============================================================================================
# Property tests
# ==============================================================================================
@settings(max_examples=300, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(problems())
def test_grounding_matches_generated_formulas(p: Problem) -> None:
    """Parser + grounder vs the generator's own tree semantics (no solver involved)."""
    text = p.text()
    check_grounding(p, cda.ground(text))


@settings(
    max_examples=150,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@pytest.mark.slow
@given(problems())
def test_backends_agree_and_match_brute_force(p: Problem) -> None:
    text = p.text()
    gp = cda.ground(text)
    orc = oracle.analyse(gp)
    event("unsat" if not orc.satisfiable else f"sat, {min(len(orc.ranked), 10) // 5 * 5}+ hypotheses")
    event(f"soft on observables: {any(_mentions(s.node) - set(orc.hyps) for s in gp.soft)}")
    if orc.violations_tied:
        event("cheapest models of a hypothesis violate different soft clauses")
    results = solve_both(text)
    assert_same_json(text, results, tied=orc.violations_tied)
    # the same bytes on both backends, but for `violated` in a tie while the known bug lasts
    for b in BACKENDS if orc.violations_tied else BACKENDS[:1]:
        check_against_oracle(text, gp, orc, results[b])


@settings(max_examples=20, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(problems(), st.sampled_from([1, 12345]), st.sampled_from(BACKENDS))
def test_same_seed_same_bytes(p: Problem, seed: int, backend: str) -> None:
    text = p.text()
    first = cda.solve(text, backend=backend, top=TOP, seed=seed).json_text()
    again = cda.solve(text, backend=backend, top=TOP, seed=seed).json_text()
    assert first == again, f"{backend} seed {seed} is not deterministic on\n{text}"
    # answers are canonical: another seed changes only the "seed" field
    other = cda.solve(text, backend=backend, top=TOP, seed=seed + 1).json_text()
    a, b = strip_seed(other), strip_seed(first)
    if KNOWN_BUG_STALE_CANONICAL and oracle.analyse(cda.ground(text)).violations_tied:
        a, b = without_violated(a), without_violated(b)
    assert a == b, f"{backend}: seed changes the answer on\n{text}"


#: a budget that only a solver blow-up can reach (these problems take milliseconds): it turns a
#: runaway solver into a failure instead of a hang, without making the tests depend on load
GUARD = 300.0


@settings(max_examples=25, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(st.booleans().flatmap(lambda general: arithmetic_problems(general)))
def test_arithmetic_backends_agree(text: str) -> None:
    """Events and metrics: z3 (integer arithmetic) vs clingo with clingo-dl, byte for byte; a
    general sum is refused by clingo (BackendUnsupported naming z3) and answered by z3 and auto."""
    general = "hard g:" in text
    event("general sum (z3 only)" if general else "difference constraints")
    z3 = cda.solve(text, backend="z3", top=TOP, timeout=GUARD)
    assert not z3.partial, text
    event(z3.status)
    if general:
        with pytest.raises(BackendUnsupported, match="z3"):
            cda.solve(text, backend="clingo", top=TOP)  # refused before any solving
        auto = cda.solve(text, top=TOP)
        assert auto.backend == "z3" and auto.json_text() == z3.json_text()
        return
    clingo = cda.solve(text, backend="clingo", top=TOP, timeout=GUARD)
    assert not clingo.partial, text
    assert_same_json(text, {"z3": z3, "clingo": clingo})


# ==============================================================================================
# Targeted regressions
# ==============================================================================================
def solve_checked(text: str) -> Any:
    """Both backends agree, and (when Boolean) the answer matches the brute force."""
    results = solve_both(text)
    assert_same_json(text, results)
    gp = cda.ground(text)
    if not gp.numvars:
        check_against_oracle(text, gp, oracle.analyse(gp), results["z3"])
    return results["z3"]


def test_no_abducibles() -> None:
    text = "observable o0, o1, o2\nobserve seen: o0\nhard rule: o0 implies o1\ngoal prove o1\ngoal prove o2\n"
    r = solve_checked(text)
    assert [(h.assumed, h.cost, h.posterior) for h in r.hypotheses] == [([], 0.0, 1.0)]
    assert [(v.status, v.justification) for v in r.verdicts] == [("supported", ["seen", "rule"]), ("inconclusive", [])]
    # one hypothesis: nothing left to learn from any observable
    assert [(t.observable, t.expected_information_gain) for t in r.next_tests] == [("o1", 0.0), ("o2", 0.0)]


def test_trivially_true_clauses() -> None:
    text = "hyp a, b\nhard: a or not a\nhard: true\nhard: at_most(2, [a, b])\ngoal prove a or b\n"
    r = solve_checked(text)
    assert [h.assumed for h in r.hypotheses] == [[], ["a"], ["b"], ["a", "b"]]
    assert all(h.posterior == 0.25 for h in r.hypotheses)
    assert r.verdicts[0].status == "inconclusive" and r.verdicts[0].confidence == 0.75


def test_unsatisfiable_cores_and_corrections() -> None:
    text = "hyp a\nobservable o\nobserve seen: o\nhard c1: a\nhard c2: not a\nhard c3: o implies not a\ngoal prove a\n"
    r = solve_checked(text)
    assert r.status == "unsat" and r.conflict is not None and r.conflict.complete
    assert r.conflict.cores == [["c1", "c2"], ["seen", "c1", "c3"]]
    assert r.conflict.corrections == [["c1"], ["seen", "c2"], ["c2", "c3"]]


def test_hard_false_alone_is_the_core() -> None:
    r = solve_checked("hyp a\nhard ok: a or not a\nhard bad: false\n")
    assert r.status == "unsat" and r.conflict is not None
    assert (r.conflict.cores, r.conflict.corrections) == ([["bad"]], [["bad"]])


def test_soft_clause_on_an_observable_needs_optimisation() -> None:
    # with no hypothesis, o is free: only the cheapest model (o false) has cost 0
    text = "hyp a, b\nobservable o\nhard: a implies o\nsoft quiet weight 2: not o\nsoft rare_b weight 0.5: not b\n"
    r = solve_checked(text)
    assert [(h.assumed, h.cost, h.violated) for h in r.hypotheses] == [
        ([], 0.0, []),
        (["b"], 0.5, ["rare_b"]),
        (["a"], 2.0, ["quiet"]),
        (["a", "b"], 2.5, ["quiet", "rare_b"]),
    ]


def test_violated_is_canonical_when_cheapest_models_tie() -> None:
    """Found by the differential test: z3 reported ['s2'] and clingo ['s1'] here (fixed in 9d7fd7a).
    Both hypotheses cost 1: o0 or o1 must hold, violating s1 or s2; the canonical choice keeps
    the earlier soft clause satisfied."""
    text = "hyp a\nobservable o0, o1\nhard: o0 or o1\nsoft s1: not o0\nsoft s2: not o1\n"
    r = solve_checked(text)
    assert [(h.assumed, h.cost, h.violated) for h in r.hypotheses] == [([], 1.0, ["s2"]), (["a"], 1.0, ["s2"])]
    for b in BACKENDS:  # and no seed changes that
        for seed in (1, 2, 3):
            assert cda.solve(text, backend=b, seed=seed).hypotheses[0].violated == ["s2"]


def test_violated_is_canonical_with_many_tied_soft_clauses() -> None:
    # one of o0..o3 must hold, each costs 1: keeping c1, c2, c3 in order leaves c4 violated
    text = (
        "observable o0, o1, o2, o3\nhard c0: at_least(1, [o0, o1, o2, o3])\n"
        "soft c1 weight 1: not o0\nsoft c2 weight 1: not o1\nsoft c3 weight 1: not o2\nsoft c4 weight 1: not o3\n"
    )
    for b in BACKENDS:
        for seed in range(3):
            assert cda.solve(text, backend=b, seed=seed).hypotheses[0].violated == ["c4"], (b, seed)


def test_violated_is_canonical_when_the_solver_would_rather_pick_the_last() -> None:
    # at most one of o0..o5 may hold and each one held saves 1: every cheapest model holds one;
    # the canonical one keeps the first soft clause (o0), whatever the solvers' own preference
    names = [f"o{i}" for i in range(6)]
    text = (
        f"observable {', '.join(names)}\nhard: at_most(1, [{', '.join(reversed(names))}])\n"
        + "".join(f"soft c{i} weight 1: {n}\n" for i, n in enumerate(names))
    )
    for b in BACKENDS:
        for seed in range(4):
            assert cda.solve(text, backend=b, seed=seed).hypotheses[0].violated == [f"c{i}" for i in range(1, 6)], (b, seed)


def test_xor_is_parity() -> None:
    r = solve_checked("hyp a, b, c\nhard: xor(a, b, c)\ngoal prove xor(a, b)\n")
    assert [h.assumed for h in r.hypotheses] == [["a"], ["b"], ["c"], ["a", "b", "c"]]


def test_empty_cardinality_and_an_empty_domain_refused() -> None:
    text = "hyp a\nhard: exactly(0, [])\nhard: at_least(1, [a, false])\ngoal prove a\n"
    r = solve_checked(text)
    assert [h.assumed for h in r.hypotheses] == [["a"]]
    assert r.verdicts[0].status == "supported"
    # a quantifier over an empty domain would be vacuous: the domain is refused where it is declared
    with pytest.raises(cda.DSLTypeError, match="domain E is empty") as info:
        cda.solve("domain E = {}\nhyp a\nhard: forall x in E: false\n")
    assert (info.value.line, info.value.column) == (1, 8)


EVENTS = """\
hyp fast_deploy, slow_deploy
event deploy, alert
metric cost : USD
hard some: fast_deploy or slow_deploy
hard order: before(event:deploy, event:alert)
hard fast: fast_deploy implies within(event:alert, 5 min of event:deploy)
hard slow: slow_deploy implies not within(event:alert, 10 min of event:deploy)
hard cheap: fast_deploy implies value(metric:cost) <= 5 USD
hard dear: slow_deploy implies value(metric:cost) >= 7 USD
soft budget weight 1: value(metric:cost) <= 3 USD
goal prove fast_deploy or slow_deploy
goal disprove fast_deploy and slow_deploy
goal prove fast_deploy
"""


def test_events_and_metric_bounds_agree() -> None:
    """Difference constraints only: clingo decides them with clingo-dl."""
    r = solve_checked(EVENTS)
    assert [(h.assumed, h.cost, h.violated) for h in r.hypotheses] == [
        (["fast_deploy"], 0.0, []),
        (["slow_deploy"], 1.0, ["budget"]),
    ]
    assert [v.status for v in r.verdicts] == ["supported", "supported", "inconclusive"]
    assert r.verdicts[1].justification == ["fast", "slow"] or r.verdicts[1].justification == ["cheap", "dear"]


def test_events_unsat_core() -> None:
    text = (
        "event a, b, c\nhard ab: before(event:a, event:b)\nhard bc: before(event:b, event:c)\n"
        "hard ca: before(event:c, event:a)\nhard near: within(event:a, 1 s of event:c)\n"
    )
    r = solve_checked(text)
    assert r.status == "unsat" and r.conflict is not None
    # a < b < c leaves c - a >= 2 s, so `near` conflicts with the order as well as `ca`
    assert r.conflict.cores == [["ab", "bc", "ca"], ["ab", "bc", "near"]]
    assert r.conflict.corrections == [["ab"], ["bc"], ["ca", "near"]]


LINEAR = """\
hyp x, y
metric a : USD
metric b : USD
hard total: value(metric:a) + value(metric:b) <= 10 USD
hard floor: value(metric:a) >= 4 USD
hard xb: x implies value(metric:b) >= 7 USD
hard yb: y implies 2 * value(metric:b) >= 12 USD
goal disprove x
goal prove y
"""


def test_general_linear_constraint_z3_answers_clingo_refuses() -> None:
    """A sum of two metrics is not a difference constraint. The brief had clingo answer it with
    clingcon; since 9d7fd7a the clingo backend refuses it (BackendUnsupported naming z3), because
    clingcon blew up on negated sums (see the next test). z3 and auto must answer it correctly."""
    r = cda.solve(LINEAR, backend="z3", top=TOP)
    assert [h.assumed for h in r.hypotheses] == [[], ["y"]]
    assert [(v.status, v.justification) for v in r.verdicts] == [
        ("supported", ["total", "floor", "xb"]),
        ("inconclusive", []),
    ]
    with pytest.raises(BackendUnsupported, match="z3"):
        cda.solve(LINEAR, backend="clingo", top=TOP)
    auto = cda.solve(LINEAR, top=TOP)
    assert auto.backend == "z3" and strip_backend(auto.json_text()) == strip_backend(r.json_text())


def test_negated_sum_of_metrics() -> None:
    """Found while writing the arithmetic differential test: with clingcon, the clingo backend
    grew to gigabytes (std::bad_alloc, or the process aborted) on `a + b != 10`. Now clingo must
    refuse it at once, and z3 must answer it: a = 4 and a + b != 10 rule out b = 6."""
    text = (
        "hyp y\nmetric a : USD\nmetric b : USD\nhard ne: value(metric:a) + value(metric:b) != 10 USD\n"
        "hard four: value(metric:a) = 4 USD\nhard six: y implies value(metric:b) = 6 USD\ngoal disprove y\n"
    )
    r = cda.solve(text, backend="z3", top=TOP, timeout=GUARD)
    assert not r.partial and [h.assumed for h in r.hypotheses] == [[]]
    assert [(v.status, v.justification) for v in r.verdicts] == [("supported", ["ne", "four", "six"])]
    with pytest.raises(BackendUnsupported, match="z3"):
        cda.solve(text, backend="clingo", top=TOP)  # refused before any solving


def test_more_hypotheses_than_the_tested_cap() -> None:
    """512 hypotheses: next tests use the 256 most probable (with a note), the claim's confidence
    every one of them (it was computed over the first 256 too, and came out 0.3775 here)."""
    text = (
        "hyp " + ", ".join(f"a{i}" for i in range(9)) + "\nobservable o0, o1\n"
        "hard: o0 iff (a0 or a8)\nhard: o1 iff xor(a1, a2, a3)\n"
        "soft rare: not a8 weight 2\nsoft: not a0 weight 0.5\ngoal prove o0\n"
    )
    r = solve_checked(text)
    assert r.hypotheses_enumerated == 512 and len(r.hypotheses) == 512
    assert r.notes == ["next tests computed over the 256 most probable hypotheses"]
    # a0 and a8 are independent, true with odds exp(-0.5) and exp(-2); o0 holds when either does
    p0, p8 = (math.exp(-w) / (1 + math.exp(-w)) for w in (0.5, 2))
    assert abs(r.verdicts[0].confidence - (1 - (1 - p0) * (1 - p8))) < 1e-9


def test_confidence_counts_every_hypothesis(backend: str) -> None:
    """Ten free abducibles, 1,024 hypotheses of 1/1024 each, half of them assume a5: the
    confidence is 1/2 (over the first 256 it was 0.2890625, with no note)."""
    text = "hyp " + ", ".join(f"a{i}" for i in range(10)) + "\ngoal prove a5\n"
    r = cda.solve(text, backend=backend, top=TOP, timeout=GUARD)
    assert r.hypotheses_enumerated == 1024 and r.enumeration_complete and r.notes == []
    [v] = r.verdicts
    assert (v.status, v.confidence) == ("inconclusive", 0.5)
    assert [(w.holds, w.assumed) for w in v.witnesses] == [(True, ["a5"]), (False, [])]


def test_a_capped_confidence_says_so(backend: str) -> None:
    """With the enumeration capped, the confidence is over the hypotheses enumerated, and both the
    verdict and the notes say so."""
    text = "hyp " + ", ".join(f"a{i}" for i in range(6)) + "\ngoal prove a5\n"
    r = cda.solve(text, backend=backend, top=TOP, timeout=GUARD, max_hypotheses=10)
    assert r.hypotheses_enumerated == 10 and not r.enumeration_complete
    assert any("claim confidences are normalised over those enumerated" in n for n in r.notes)
    [v] = r.verdicts
    assert v.reason is not None and "over the 10 hypotheses enumerated, not all of them" in v.reason


def test_top_only_truncates_the_list() -> None:
    text = (
        "hyp a, b, c\nobservable o\nhard: o iff (a or b or c)\nobserve o\n"
        "soft weight 0.5: not a\nsoft weight 1.5: not b\nsoft: not c\ngoal best_explanation top 2\n"
    )
    full = solve_checked(text)
    assert full.hypotheses_enumerated == 7
    for b in BACKENDS:
        default = cda.solve(text, backend=b)  # goal best_explanation top 2
        three = cda.solve(text, backend=b, top=3)
        assert [h.model_dump() for h in default.hypotheses] == [h.model_dump() for h in full.hypotheses[:2]]
        assert [h.model_dump() for h in three.hypotheses] == [h.model_dump() for h in full.hypotheses[:3]]
        assert default.hypotheses_enumerated == three.hypotheses_enumerated == 7


@pytest.mark.slow
@settings(max_examples=60, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(problems(), st.integers(min_value=1, max_value=5))
def test_capped_hypotheses_are_the_first_of_the_canonical_order(p: Problem, cap: int) -> None:
    """With more hypotheses than ``max_hypotheses``, both backends keep the same ones: the first
    ``cap`` of the brute force's ranking (cost, then fewer atoms, then names), not whichever
    their enumeration met first (z3 and clingo kept different ones, and a cross-check then
    downgraded verdicts the hard clauses prove)."""
    text = p.text()
    orc = oracle.analyse(cda.ground(text))
    results = solve_both(text, max_hypotheses=cap)
    assert_same_json(text, results)
    r = results["z3"]
    if len(orc.ranked) > cap:
        event("capped")
        assert not r.enumeration_complete and r.hypotheses_enumerated == cap
        want = [(h.assumed, h.cost) for h in orc.ranked[:cap]]
        got = [(h.assumed, Fraction(h.cost).limit_denominator(10**6)) for h in r.hypotheses]
        assert got == want, text


def test_capped_path_problem_cross_checks() -> None:
    """The audit's problem (issue 12): 2 hops from a to d, more hypotheses than the cap. Both
    backends list the same first ones, and the cross-check keeps SUPPORTED with no disagreement."""
    text = (
        "domain N = {a, b, c, d}\nhyp link(N, N)\nhard: exists path(a ->link-> d within 2 hops)\n"
        "hard: not link(a, d)\nsoft weight 1: forall x in N: forall y in N: not link(x, y)\n"
        "goal prove exists x in N: link(a, x)\ngoal best_explanation top 5\n"
    )
    results = solve_both(text, max_hypotheses=50)
    assert_same_json(text, results)
    assert [h.assumed for h in results["clingo"].hypotheses[:3]] == [
        ["link(a, b)", "link(b, d)"], ["link(a, c)", "link(c, d)"], ["link(a, a)", "link(a, b)", "link(b, d)"],
    ]
    r = solve_cross_checked(text, max_hypotheses=50)
    assert [(v.status, v.confidence) for v in r.verdicts] == [("supported", 1)]
    assert not any("DISAGREE" in n for n in r.notes)


@pytest.mark.parametrize("text", [LINEAR, "hyp a, b\nsoft weight 1e30: not a\nsoft: not b\ngoal prove not a\n"])
def test_cross_check_answers_what_clingo_refuses(text: str) -> None:
    """A sum of metrics, a weight beyond clingo's 32 bits: clingo refuses the problem, z3 answers
    it. The cross-check gives z3's answer, its verdicts as z3 gave them (an unchecked answer is
    not capped, as when a backend runs out of time), with a note saying why it is unchecked; it
    used to give no answer at all."""
    with pytest.raises(BackendUnsupported):
        cda.solve(text, backend="clingo", top=TOP)
    alone = cda.solve(text, backend="z3", top=TOP)
    r = solve_cross_checked(text, top=TOP)
    assert r.verdicts == alone.verdicts and r.hypotheses == alone.hypotheses
    [note] = [n for n in r.notes if n not in alone.notes]
    assert note.startswith("cross-check could not run on clingo: ") and "unchecked" in note


def test_cross_check_downgrades_only_what_the_difference_touches(monkeypatch: pytest.MonkeyPatch) -> None:
    """Backends that differ only in the hypotheses listed: the verdict the hard clauses prove (its
    justification reads no hypothesis) stands, the one whose confidence is computed over the
    hypotheses is downgraded; a difference inside the proved verdict downgrades it too."""
    from cda.verifiers import agreement

    text = "hyp a, b\nhard: a or b\nsoft: not a\ngoal prove a or b\ngoal prove not a\n"
    real = agreement.run
    change: dict[str, Any] = {}

    def run(problem: Any, backend: str, options: Any) -> Any:
        r = real(problem, backend, options)
        return r if backend == "z3" else r.model_copy(update=change)

    monkeypatch.setattr(agreement, "run", run)
    alone = cda.solve(text, backend="z3", top=TOP)
    assert [v.status for v in alone.verdicts] == ["supported", "inconclusive"] and alone.verdicts[1].confidence > 0.5
    change["hypotheses"] = alone.hypotheses[::-1]
    r = solve_cross_checked(text, top=TOP)
    assert r.verdicts[0] == alone.verdicts[0]
    assert (r.verdicts[1].status, r.verdicts[1].confidence) == ("inconclusive", 0.5)
    assert any(n.startswith("BACKENDS DISAGREE: result.hypotheses[0]") for n in r.notes)
    change["verdicts"] = [alone.verdicts[0].model_copy(update={"justification": ["other"]}), alone.verdicts[1]]
    r = solve_cross_checked(text, top=TOP)
    assert (r.verdicts[0].status, r.verdicts[0].confidence) == ("inconclusive", 0.5)


@pytest.mark.parametrize("cap", [1, 3, 5, 6, 9])
def test_capped_levels_across_costs_and_sizes(cap: int) -> None:
    """Sixteen hypotheses at costs 0, 1, 2, 3 and sizes 0 to 4: every cap cuts the canonical order
    at the same place on both backends, also inside a level (the names decide there)."""
    text = "hyp a, b, c, d\nsoft weight 1: not a\nsoft weight 2: not b\n"
    full = [h.assumed for h in cda.solve(text, backend="z3", top=TOP).hypotheses]
    assert full[:6] == [[], ["c"], ["d"], ["c", "d"], ["a"], ["a", "c"]]
    for b in BACKENDS:
        r = cda.solve(text, backend=b, top=TOP, max_hypotheses=cap)
        assert [h.assumed for h in r.hypotheses] == full[:cap], b


@pytest.mark.slow
@settings(max_examples=25, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(arithmetic_problems(), st.integers(min_value=1, max_value=3))
def test_capped_arithmetic_hypotheses_agree(text: str, cap: int) -> None:
    """Events and metrics under a cap: clingo's ranked levels go through its program text and
    clingo-dl (its cost bound reads the soft keys there); the first ``cap`` hypotheses of the
    uncapped answer on both backends."""
    full = cda.solve(text, backend="z3", top=TOP, timeout=GUARD)
    results = {b: cda.solve(text, backend=b, top=TOP, timeout=GUARD, max_hypotheses=cap) for b in BACKENDS}
    assert_same_json(text, results)
    if len(full.hypotheses) > cap:
        event("capped")
        assert [h.assumed for h in results["clingo"].hypotheses] == [h.assumed for h in full.hypotheses[:cap]]


def test_weights_that_sum_past_32_bits_under_a_cap_answer_on_z3() -> None:
    """Each weight fit clingo's 32 bits but their sum did not: a capped (ranked) enumeration
    crashed clingo with an integer overflow, and z3's pseudo-Boolean bound with 'k is too large'.
    auto now picks z3, which bounds the cost with integer arithmetic; clingo refuses by name."""
    text = "hyp a, b, c, d\n" + "".join(f"soft: not {x} weight 1000000000\n" for x in "abcd")
    from cda.solver import engine

    result = engine.run(cda.ground(text), "z3", engine.EngineOptions(max_hypotheses=3))
    assert [h.assumed for h in result.hypotheses[:3]] == [[], ["a"], ["b"]]
    with pytest.raises(cda.BackendUnsupported, match="sum to 4000000000"):
        cda.solve(text, backend="clingo")
    assert cda.solve(text).backend == "z3"
