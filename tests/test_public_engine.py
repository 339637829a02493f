"""The engine's public face (cda.ir, cda.engine, cda.api with a GroundProblem): what products use.

A problem built with cda.ir must get the answer the same problem written in the DSL gets, to
the byte, on every backend; a problem built wrong is refused by name, never crashes a backend;
the options travel as one object; and the guardian decides its policies without writing DSL.
"""

from __future__ import annotations

from fractions import Fraction

import pytest

import cda.engine as engine
from cda import api
from cda.errors import DSLTypeError, OptionError, ProblemError
from cda.ir import AtomInfo, Claim, Clause, GroundProblem, NodeFactory, NumVar, SoftClause, check_problem, metric

TEXT = """\
hyp leak, spill
observable wet, puddle
hard model: wet iff (leak or spill)
hard floor: puddle implies spill
observe seen: wet
soft spill_rare weight 2: not spill
goal prove leak or spill
goal disprove puddle
"""


def built() -> GroundProblem:
    """TEXT, built with cda.ir instead of written."""
    f = NodeFactory()
    leak, spill, wet, puddle = (f.atom(n) for n in ("leak", "spill", "wet", "puddle"))
    atoms = {n: AtomInfo(n, k, n, ()) for n, k in
             (("leak", "hyp"), ("spill", "hyp"), ("wet", "observable"), ("puddle", "observable"))}
    return GroundProblem(
        f, atoms=atoms,
        clauses=[Clause("model", "hard", f.iff(wet, f.or_([leak, spill])), 3),
                 Clause("floor", "hard", f.implies(puddle, spill), 4),
                 Clause("seen", "observation", wet, 5)],
        soft=[SoftClause("spill_rare", f.not_(spill), Fraction(2), 6)],
        claims=[Claim("prove@7", "prove", f.or_([leak, spill]), "leak or spill", 7),
                Claim("disprove@8", "disprove", puddle, "puddle", 8)],
        observed={"wet"},
    )


@pytest.mark.parametrize("backend", ["z3", "clingo"])
def test_a_problem_built_with_the_ir_is_answered_as_the_same_problem_written(backend: str) -> None:
    written = api.solve(TEXT, backend, seed=3)
    made = api.solve(built(), backend, seed=3)
    assert made.model_dump_json() == written.model_dump_json()
    assert [v.status for v in made.verdicts] == ["supported", "inconclusive"]


def test_engine_run_takes_one_options_object() -> None:
    opts = engine.Options(backend="clingo", top=1, seed=5)
    result = engine.run(built(), opts)
    assert (result.backend, result.seed, len(result.hypotheses)) == ("clingo", 5, 1)
    assert api.solve(built(), options=opts).model_dump_json() == result.model_dump_json()
    with pytest.raises(OptionError, match="not both"):
        api.solve(built(), "z3", options=opts)
    with pytest.raises(OptionError, match="seed"):
        engine.Options(seed=-1)


def test_top_none_lists_the_problems_own_goal() -> None:
    gp = built()
    gp.top = 1
    assert len(engine.run(gp, engine.Options(backend="z3")).hypotheses) == 1
    assert len(engine.run(gp, engine.Options(backend="z3", top=2)).hypotheses) == 2


@pytest.mark.parametrize(
    ("break_it", "message"),
    [
        (lambda gp: gp.clauses.append(Clause("stray", "hard", gp.factory.atom("nowhere"), 0)), "atom nowhere"),
        (lambda gp: gp.clauses.append(Clause("model", "hard", gp.factory.true, 0)), "used twice"),
        (lambda gp: gp.soft.append(SoftClause("w", gp.factory.true, 0.5, 0)), "weight must be an int or a Fraction"),  # type: ignore[arg-type]
        (lambda gp: gp.soft.append(SoftClause("w", gp.factory.true, Fraction(0), 0)), "above 0"),
        (lambda gp: gp.clauses.append(Clause("m", "hard", gp.factory.linear({metric("x"): 1}, "<=", 3), 0)),
         "numeric variable metric:x"),
        (lambda gp: gp.clauses.append(Clause("k", "maybe", gp.factory.true, 0)), "kind is one of"),
        (lambda gp: gp.atoms.update(leak=AtomInfo("leak", "abducible", "leak", ())), "problem.atoms"),
    ],
)
def test_a_problem_built_wrong_is_refused_by_name(break_it, message: str) -> None:  # type: ignore[no-untyped-def]
    gp = built()
    break_it(gp)
    with pytest.raises(ProblemError, match=message):
        api.solve(gp)


def test_a_ground_problem_takes_no_clause_strings() -> None:
    with pytest.raises(OptionError, match="GroundProblem carries"):
        api.solve(built(), hard=["leak"])


def test_a_checked_problem_with_metrics_passes() -> None:
    gp = built()
    gp.numvars[metric("cost")] = NumVar(metric("cost"), "metric", "USD")
    gp.clauses.append(Clause("cap", "hard", gp.factory.linear({metric("cost"): 1}, "<=", 10), 0))
    assert check_problem(gp) is gp
    assert api.solve(gp, "z3").status == "sat"


def test_a_vocabulary_grounds_as_the_same_declarations_written() -> None:
    hard = ["not (deletes and prod)", "value(metric:cost) <= 5000 USD"]
    written = api.ground("var deletes\nvar prod\nmetric cost : USD\n", hard=hard)
    given = api.ground(api.Vocabulary(("deletes", "prod"), {"cost": "USD"}), hard=hard)
    assert list(given.atoms.values()) == list(written.atoms.values())
    assert given.numvars == written.numvars
    assert [(c.name, repr(c.node)) for c in given.clauses] == [(c.name, repr(c.node)) for c in written.clauses]


@pytest.mark.parametrize(
    "vocabulary",
    [api.Vocabulary(("Bad-name",)), api.Vocabulary(metrics={"cost": "US D"}), api.Vocabulary(metrics={"cost": "parsecs_of_nothing"})],
)
def test_a_bad_vocabulary_is_a_dsl_error(vocabulary: api.Vocabulary) -> None:
    with pytest.raises(DSLTypeError):
        api.ground(vocabulary, hard=["true"])


def test_the_guardian_decides_its_policies_without_writing_dsl(monkeypatch: pytest.MonkeyPatch) -> None:
    """Only the policies' own formulas are read (as clauses); no problem text is parsed."""
    from cda.encodings import assemble
    from cda.guardian.policies import judge, load_policy_store
    from cda.guardian.proposal import read_action

    store = load_policy_store({
        "facts": {"deletes": {"action_type": ["db.delete"]}, "prod": {"resource": ["prod/*"]}},
        "policy": [{"id": "no_prod_delete", "dsl": "not (deletes and prod)"},
                   {"id": "cheap", "dsl": "value(metric:cost) <= 100 USD"}],
    })
    read: list[str] = []
    real = assemble.parse_clause
    monkeypatch.setattr(assemble, "parse_clause", lambda text: read.append(text.strip()) or real(text))
    monkeypatch.setattr(assemble, "parse_problem", lambda *a, **k: pytest.fail("problem text was parsed"))
    monkeypatch.setattr(api, "parse", lambda *a, **k: pytest.fail("problem text was parsed"))
    action = read_action({"action_id": "a1", "agent_id": "bot", "action_type": "db.delete",
                          "resources": ["prod/users"], "tool": {"name": "psql", "version": "1"},
                          "cost_estimate": "250", "currency": "USD", "parameters": {}})
    verdict = judge(store, action)
    assert verdict.violation is not None and verdict.violation.policy == "no_prod_delete"
    assert [f.name for f in verdict.violation.facts] == ["deletes", "prod"]
    assert sorted(read) == ["not (deletes and prod)", "value(metric:cost) <= 100 USD"]


def test_products_see_the_registry() -> None:
    assert {"z3", "clingo"} <= set(engine.available_backends())
    assert engine.choose_backend(built(), "auto") == "clingo"
