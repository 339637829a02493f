"""First-order logic: the front end, the prover's three answers, the backends, FOLIO, the CLI.

The FOLIO dev file is read from ``../shared/data/`` (relative to the repository root) and
never copied here; those tests skip, saying so, when it is absent.
"""

from __future__ import annotations

import io
import json
from collections.abc import Sequence
from itertools import product
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import z3
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cda.cli.bench import main_bench
from cda.cli.fol import main_prove
from cda.contracts.deadline import Deadline
from cda.errors import BackendUnsupported, CDAError, DSLSyntaxError, DSLTypeError, EvaluatorDisagreement, OptionError
from cda.fol import folio as folio_bench
from cda.fol import prove as fol_prove
from cda.fol import syntax as fol
from cda.fol import to_z3
from cda.fol.fragments import fragment
from cda.fol.parse import build_problem, parse_fol, parse_formula
from cda.fol.prove import OPEN_DOMAIN_NOTE, prove
from cda.fol.structures import Structure
from cda.fol.syntax import format_formula
from cda.fol.to_ir import ground_claim
from cda.operations.fol import read_fol_file
from tests.conftest import DATA

FOLIO = DATA / "folio" / "folio-v0.0-validation-dev.jsonl"


# ---- parsing --------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("unicode", "ascii_"),
    [
        ("∀x (Cat(x) → Pet(x))", "forall x (Cat(x) -> Pet(x))"),
        ("∃x (A(x) ∧ ¬B(x))", "exists x (A(x) & ~B(x))"),
        ("A(a) ∨ B(a) ↔ C(a) ⊕ D(a)", "A(a) | B(a) <-> C(a) ^ D(a)"),
    ],
)
def test_unicode_and_ascii_read_alike(unicode: str, ascii_: str) -> None:
    assert format_formula(parse_formula(unicode)) == format_formula(parse_formula(ascii_))


@pytest.mark.parametrize(
    ("text", "read_as"),
    [
        ("A ∧ B ∨ C", "A ∧ B ∨ C"),  # ∧ binds tighter than ∨
        ("A ∨ B ∧ C", "A ∨ B ∧ C"),
        ("A → B → C", "A → (B → C)"),  # → is right-associative
        ("A ∧ B → C ⊕ D", "A ∧ B → C ⊕ D"),  # ⊕ binds tighter than → …
        ("A ∨ B ⊕ C", "A ∨ B ⊕ C"),  # … and looser than ∨
        ("∀x P(x) → Q(x)", "∀x (P(x) → Q(x))"),  # a quantifier's body extends to the right
        ("¬P(a) ∧ Q(a)", "¬P(a) ∧ Q(a)"),
        ("A ↔ B → C", "A ↔ (B → C)"),
    ],
)
def test_precedence(text: str, read_as: str) -> None:
    assert _shape(parse_formula(text)) == _shape(parse_formula(read_as))


def _shape(f: Any) -> Any:
    """A formula without positions, for comparing parses."""
    if isinstance(f, fol.Atom):
        return ("atom", f.pred, tuple(a.name for a in f.args))
    if isinstance(f, fol.Not):
        return ("not", _shape(f.arg))
    if isinstance(f, fol.And | fol.Or):
        return (type(f).__name__, tuple(_shape(a) for a in f.args))
    if isinstance(f, fol.Implies | fol.Iff | fol.Xor):
        return (type(f).__name__, _shape(f.lhs), _shape(f.rhs))
    if isinstance(f, fol.Quant):
        return (f.kind, f.var, _shape(f.body))
    return repr(f)


def test_several_variables_after_one_quantifier() -> None:
    expected = _shape(parse_formula("∀x ∀y (R(x, y) → R(y, x))"))
    for text in ("∀x, y (R(x, y) → R(y, x))", "∀x y (R(x, y) → R(y, x))", "forall x y: R(x, y) -> R(y, x)"):
        assert _shape(parse_formula(text)) == expected
    # a name that does not look like a variable starts the body
    assert _shape(parse_formula("∀x Cat (x)")) == ("forall", "x", ("atom", "Cat", ("x",)))


def test_folio_spellings() -> None:
    f = parse_formula(" ∃x (Companies’Stocks(x) ∧ GrowthCompanies’Stocks(x))")
    assert _shape(f)[2][1][0][1] == "Companies’Stocks"
    assert parse_formula("ValuedAt(yalesendowment, y42.3billion)").args[1].name == "y42.3billion"  # type: ignore[union-attr]
    assert _shape(parse_formula("¬ Fly (rock) ∧ ¬ Bird (rock)")) == _shape(parse_formula("¬Fly(rock) ∧ ¬Bird(rock)"))
    assert _shape(parse_formula("Привет(мир)")) == ("atom", "Привет", ("мир",))


@pytest.mark.parametrize(
    ("text", "column", "words"),
    [
        ("∀x (Cat(x) → Pet(x)", 4, "this '(' is never closed"),
        ("∀x (Cat(x) → Pet(x)))", 21, "this ')' closes nothing"),
        ("∀x (Cat(x) →)", 13, "unexpected ')'"),
        ("P(a) ∧∧ Q(a)", 7, "unexpected '∧'"),
        ("P(a,)", 5, "expected a name"),
        ("", 1, "unexpected end of input"),
        ("P(a) $", 6, "unexpected character '$'"),
    ],
)
def test_syntax_errors_point_at_the_spot(text: str, column: int, words: str) -> None:
    with pytest.raises(DSLSyntaxError) as info:
        parse_formula(text, filename="f")
    err = info.value
    assert (err.line, err.column) == (1, column)
    assert words in err.message
    rendered = err.render().splitlines()
    assert rendered[0].startswith(f"f:1:{column}: syntax error:")
    assert rendered[2].index("^") == 4 + column - 1


@pytest.mark.parametrize(
    ("premises", "claim", "words", "where"),
    [
        (["Love(a, b)", "Love(c)"], "P", "predicate 'Love' is used with 1 argument here but with 2", ("premise p2", 1)),
        (["∀x Love(x, y)"], "P", "free variable 'y'", ("premise p1", 12)),
        (["P(f(a))"], "P(f)", "function 'f' is used as a constant here but as a function of 1 argument", ("claim claim", 3)),
        (["∀x P(x(a))"], "P", "variable 'x' is applied to arguments", ("premise p1", 6)),
        ([("h", "P(a)"), ("h", "Q(a)")], "P(a)", "the name 'h' is given to two statements", ("premise h", 1)),
    ],
)
def test_type_errors_point_at_the_spot(premises: list[Any], claim: str, words: str, where: tuple[str, int]) -> None:
    with pytest.raises(DSLTypeError) as info:
        build_problem(premises, claim)
    assert words in info.value.message
    assert (info.value.filename, info.value.column) == where


def test_declared_domain_checks_constants() -> None:
    with pytest.raises(DSLTypeError, match="constant 'c' is not in the declared domain"):
        build_problem(["P(c)"], "P(a)", domain=["a", "b"])


def test_fragments() -> None:
    assert fragment(build_problem(["P(a) → Q(a)"], "Q(a)")).name == "ground"
    assert fragment(build_problem(["∃x ∀y R(x, y)"], "∀x ∀y R(x, y)")).name == "epr"
    f = fragment(build_problem(["∀x ∃y R(x, y)"], "R(a, a)"))
    assert (f.name, f.decidable) == ("fol", False) and "∃y under ∀x" in f.detail
    # ¬∀ under ∀ is an existential too; an ∃ that does not depend on the ∀ is a Skolem constant
    assert fragment(build_problem(["∀x ¬∀y R(x, y)"], "R(a, a)")).name == "fol"
    assert fragment(build_problem(["∀x (P(x) ∨ ∃y Q(y))"], "Q(a)")).name == "epr"
    assert "function symbol 'f'" in fragment(build_problem(["∀x P(f(x))"], "P(a)")).detail
    # the claim matters on both sides: a ∀∃ claim is ∃∀ negated (the "supported" check) but
    # not as stated (the "refuted" check)
    f = fragment(build_problem(["P(a)"], "∀x ∃y R(x, y)"))
    assert f.name == "fol" and f.detail.startswith("∃y under ∀x in claim claim:")
    assert fragment(build_problem(["P(a)"], "P(a)", domain=["a"])).name == "finite"


# ---- the three answers ----------------------------------------------------------------------
CATS = ["∀x (Cat(x) → Pet(x))", "Dog(rex)", "Cat(tom)", "∀x (Dog(x) → ¬Cat(x))"]


def test_supported_with_the_canonical_minimal_premises() -> None:
    r = prove(CATS, "Pet(tom)")
    assert r.status == "supported" and r.premises_used == ["p1", "p3"] and r.minimal
    assert r.fragment == "epr" and not r.unknown and r.worlds == []
    assert OPEN_DOMAIN_NOTE in r.notes


def test_refuted_with_the_premises_that_contradict_the_claim() -> None:
    r = prove(CATS, "Cat(rex)")
    assert r.status == "refuted" and r.premises_used == ["p2", "p4"]


def test_inconclusive_gives_two_rechecked_worlds() -> None:
    r = prove(CATS, "Pet(rex)")
    assert r.status == "inconclusive" and not r.unknown
    assert [w.claim_holds for w in r.worlds] == [True, False]
    holds, fails = r.worlds
    assert "Pet(rex)" in holds.true_atoms and "Pet(rex)" not in fails.true_atoms
    assert "Dog(rex)" in fails.true_atoms and "Cat(rex)" not in fails.true_atoms
    assert "a world where the claim fails" in r.text()


def test_inconsistent_premises_are_a_conflict_not_a_proof() -> None:
    r = prove(["P(a)", "Q(b)", "¬P(a)"], "Q(c)")
    assert r.status == "inconclusive" and r.conflict == ["p1", "p3"]


def test_an_epr_problem_z3_cannot_instantiate_stops_at_the_memory_cap_and_is_decided() -> None:
    """Found by the EPR property test: z3's model-based quantifier instantiation took 24 GB in
    three seconds on these two premises without the claim (the machine killed the test run).
    z3 now stops at its memory cap with an honest unknown. The prover never needs that question:
    z3's unsat core of premises ∧ ¬claim leaves the claim out, so the premises contradict each
    other (y = a in the first, x = a in the second) and QuickXplain's question about both
    premises alone is settled by that core; clingo over the Herbrand universe agrees."""
    premises = ["∀x ∀y ¬(R(y, a) ↔ P(a))", "¬∃x ¬(P(x) ↔ R(x, x))"]
    problem = build_problem(premises, ["∀x ¬P(x)"])
    oracle = to_z3.Z3Oracle(problem, problem.claims[0], Deadline(None))
    status, _, reason = oracle.check(["p1", "p2"], None)
    assert status == "unknown" and "memory" in reason
    assert z3.get_param("memory_max_size") == "0"  # the cap is z3-global: put back after each check
    # no budget: the answer is exact, not a race with a 10 s default a loaded machine can lose
    r = prove(premises, "∀x ¬P(x)", cross_check=True, timeout=None)
    assert r.status == "inconclusive" and not r.unknown and r.conflict == ["p1", "p2"] and r.minimal
    assert r.cross_check == "agree"
    assert z3.get_param("memory_max_size") == "0"
    # one premise alone is consistent: both sides of the claim have a world, on the plain path
    r = prove(premises[1:], "∀x ¬P(x)", timeout=None)
    assert r.status == "inconclusive" and not r.unknown and len(r.worlds) == 2


def test_a_valid_claim_needs_no_premise() -> None:
    r = prove(["P(a)"], "∀x (Q(x) ∨ ¬Q(x))")
    assert r.status == "supported" and r.premises_used == []


def test_equality_and_functions_go_to_z3() -> None:
    r = prove(["∀x (f(x) = x)", "P(f(a))"], "P(a)")
    assert r.status == "supported" and r.fragment == "fol"
    r = prove(["a = b", "P(a)"], "P(b)", cross_check=True)
    assert r.status == "supported" and r.cross_check == "skipped"


def test_only_infinite_models_give_an_honest_unknown() -> None:
    # a strict order with no greatest element has only infinite models: z3 cannot finish,
    # and the finite-model search finds nothing; neither answer may be claimed
    premises = ["∀x ∃y Less(x, y)", "∀x ¬Less(x, x)", "∀x ∀y ∀z (Less(x, y) ∧ Less(y, z) → Less(x, z))"]
    r = prove(premises, "P(a)", timeout=1.0)
    assert r.status == "inconclusive" and r.unknown
    assert "outside the decidable fragments" in r.reason


def _every_oracle_says_unknown(monkeypatch: pytest.MonkeyPatch) -> None:
    """z3 on the open domain, the Herbrand grounding it falls back to and the finite-model search
    all come back undecided."""
    unknown = lambda self, p, c, atoms=(): ("unknown", None, "z3 returned unknown (test)")  # noqa: E731
    monkeypatch.setattr(to_z3.Z3Oracle, "check", unknown)
    monkeypatch.setattr(fol_prove._GroundOracle, "check", unknown)
    monkeypatch.setattr(fol_prove, "_finite_search", lambda *a: (None, ""))


def test_unknown_is_never_supported(monkeypatch: pytest.MonkeyPatch) -> None:
    _every_oracle_says_unknown(monkeypatch)
    r = prove(CATS, "Pet(tom)")
    assert r.status == "inconclusive" and r.unknown and "unknown (test)" in r.reason


def test_an_undecided_epr_problem_falls_back_to_its_herbrand_universe(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(to_z3.Z3Oracle, "check", lambda self, p, c, atoms=(): ("unknown", None, "z3 returned unknown (test)"))
    monkeypatch.setattr(fol_prove, "_finite_search", lambda *a: (None, ""))
    r = prove(CATS, "Pet(tom)")
    assert r.status == "supported" and not r.unknown
    assert any("Herbrand universe" in note and "unknown (test)" in note for note in r.notes)


def test_finite_model_search_finds_the_worlds_z3_cannot(monkeypatch: pytest.MonkeyPatch) -> None:
    real = to_z3.Z3Oracle.check

    def open_mode_gives_up(self: Any, premises: Sequence[str], claim: bool | None, atoms: Any = ()) -> Any:
        if self.mode == "open":
            return "unknown", None, "z3 returned unknown (incomplete quantifiers)"
        return real(self, premises, claim, atoms)

    monkeypatch.setattr(to_z3.Z3Oracle, "check", open_mode_gives_up)
    r = prove(["∀x ∃y Owns(y, x)", "Cat(tom)"], "Owns(tom, tom)")
    assert r.status == "inconclusive" and not r.unknown and r.backend == "z3 + finite-model search"
    assert {w.claim_holds for w in r.worlds} == {True, False}


def test_a_bad_world_is_caught_before_it_is_shown(monkeypatch: pytest.MonkeyPatch) -> None:
    def empty(self: Any, m: Any) -> Structure:
        return Structure(("tom",), {c: "tom" for c in self.problem.signature.constants}, {}, {})

    monkeypatch.setattr(to_z3.Z3Oracle, "structure", empty)
    with pytest.raises(EvaluatorDisagreement, match="premise p1 is false"):
        prove(["Cat(tom)"], "Pet(tom)")


# ---- routing and the finite-domain backends -------------------------------------------------
def test_router_refuses_clingo_on_an_open_domain() -> None:
    with pytest.raises(BackendUnsupported, match="cannot decide first-order logic over an open domain"):
        prove(CATS, "Pet(tom)", backend="clingo")


def test_grounding_refuses_what_clingo_cannot_hold() -> None:
    p = build_problem(["∀x ∃y R(x, y)"], "R(a, a)")
    with pytest.raises(BackendUnsupported, match="Skolem function"):
        ground_claim(p, p.claims[0])


TOWN = (
    ["∀x (Cat(x) → Pet(x))", "Cat(tom) ∧ ¬Cat(rex)", "∃x (Owner(ann, x) ∧ Cat(x))", "∀x ∀y (Owner(x, y) → x ≠ y)"],
    ["tom", "rex", "ann"],
)


@pytest.mark.parametrize(
    ("claim", "status"),
    [("Pet(tom)", "supported"), ("Owner(ann, ann)", "refuted"), ("Owner(ann, tom)", "supported"),
     ("Owner(rex, tom)", "inconclusive"), ("∀x ¬Owner(x, x)", "supported"), ("∃x Owner(x, tom)", "supported")],
)
def test_declared_domain_both_backends_agree(claim: str, status: str) -> None:
    premises, domain = TOWN
    z = prove(premises, claim, backend="z3", domain=domain)
    c = prove(premises, claim, backend="clingo", domain=domain)
    assert z.status == c.status == status
    assert z.premises_used == c.premises_used and z.conflict == c.conflict
    assert z.fragment == "finite" and z.backend == "z3" and c.backend == "clingo"
    assert prove(premises, claim, domain=domain, cross_check=True).cross_check == "agree"


# ---- brute force: an independent model checker over tuples ----------------------------------
# formula: ("atom", P, args) | ("not", f) | (op, f, g) for op in and/or/imp/iff/xor | ("all"/"ex", v, f)
Tup = tuple[Any, ...]
_OPS = {
    "and": ("∧", "&"), "or": ("∨", "|"), "imp": ("→", "->"), "iff": ("↔", "<->"), "xor": ("⊕", "^"),
}


def render(f: Tup, ascii_: bool) -> str:
    kind = f[0]
    if kind == "atom":
        return f"{f[1]}({', '.join(f[2])})" if f[2] else f[1]
    if kind == "not":
        return ("~" if ascii_ else "¬") + render(f[1], ascii_)
    if kind in ("all", "ex"):
        word = ("forall " if kind == "all" else "exists ") if ascii_ else ("∀" if kind == "all" else "∃")
        return f"{word}{f[1]} ({render(f[2], ascii_)})"
    return f"({render(f[1], ascii_)} {_OPS[kind][ascii_]} {render(f[2], ascii_)})"


class Brute:
    """Every interpretation of the predicates over ``n`` elements at once, as numpy bit columns."""

    def __init__(self, n: int, preds: dict[str, int], consts: dict[str, int]) -> None:
        atoms = [(p, t) for p, k in sorted(preds.items()) for t in product(range(n), repeat=k)]
        assert len(atoms) <= 16
        worlds = np.arange(1 << len(atoms), dtype=np.uint32)
        self.col = {a: ((worlds >> i) & 1).astype(bool) for i, a in enumerate(atoms)}
        self.n, self.consts, self.size = n, consts, len(worlds)

    def ev(self, f: Tup, env: dict[str, int]) -> np.ndarray:
        kind = f[0]
        if kind == "atom":
            args = tuple(env[a] if a in env else self.consts[a] for a in f[2])
            return self.col[(f[1], args)]
        if kind == "not":
            return ~self.ev(f[1], env)
        if kind in ("all", "ex"):
            parts = [self.ev(f[2], {**env, f[1]: e}) for e in range(self.n)]
            return np.logical_and.reduce(parts) if kind == "all" else np.logical_or.reduce(parts)
        a, b = self.ev(f[1], env), self.ev(f[2], env)
        return {"and": a & b, "or": a | b, "imp": ~a | b, "iff": a == b, "xor": a != b}[kind]

    def sat(self, formulas: Sequence[Tup]) -> bool:
        acc = np.ones(self.size, dtype=bool)
        for f in formulas:
            acc &= self.ev(f, {})
        return bool(acc.any())


def brute_sat(formulas: Sequence[Tup], preds: dict[str, int], max_size: int, consts: Sequence[str]) -> bool:
    """Open domain: some model with 1…max_size elements (constants fixed up to symmetry: the
    first to element 0, the others anywhere)."""
    for n in range(1, max_size + 1):
        for rest in product(range(n), repeat=max(0, len(consts) - 1)):
            mapping = dict(zip(consts, (0, *rest)))
            if Brute(n, preds, mapping).sat(formulas):
                return True
    return False


def expected(premises: list[Tup], claim: Tup, sat: Any) -> str:
    can_fail, can_hold = sat(premises + [("not", claim)]), sat(premises + [claim])
    if not can_fail and not can_hold:
        return "conflict"
    return "supported" if not can_fail else "refuted" if not can_hold else "inconclusive"


def check_against_brute(premises: list[Tup], claim: Tup, sat: Any, ascii_: bool, **kw: Any) -> fol_prove.ProofResult:
    # no wall-clock budget: these fragments are decided, and a budget would make the answer
    # depend on how loaded the machine is
    kw.setdefault("timeout", None)
    r = prove([render(p, ascii_) for p in premises], render(claim, not ascii_), **kw)
    want = expected(premises, claim, sat)
    assert not r.unknown
    assert ("conflict" if r.conflict is not None else r.status) == want, (r.text(), want)
    if want in ("supported", "refuted"):
        side = ("not", claim) if want == "supported" else claim
        used = [premises[int(n[1:]) - 1] for n in r.premises_used]
        assert not sat(used + [side])  # the premises used suffice …
        for i in range(len(used)):  # … and each of them is needed
            assert sat(used[:i] + used[i + 1 :] + [side])
    return r


PROPS = st.sampled_from([("atom", p, ()) for p in ("p", "q", "r")])


def _tree(leaves: st.SearchStrategy[Tup]) -> st.SearchStrategy[Tup]:
    return st.recursive(
        leaves,
        lambda sub: st.one_of(
            st.tuples(st.just("not"), sub),
            st.tuples(st.sampled_from(sorted(_OPS)), sub, sub),
        ),
        max_leaves=5,
    )


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(premises=st.lists(_tree(PROPS), max_size=3), claim=_tree(PROPS), ascii_=st.booleans())
def test_propositional_prove_agrees_with_all_assignments(premises: list[Tup], claim: Tup, ascii_: bool) -> None:
    preds = {"p": 0, "q": 0, "r": 0}
    check_against_brute(premises, claim, lambda fs: Brute(1, preds, {}).sat(fs), ascii_, cross_check=True)


EPR_PREDS = {"P": 1, "Q": 1, "R": 2}


@st.composite
def epr_problem(draw: st.DrawFn) -> tuple[list[Tup], Tup, int]:
    """∃*∀* premises over P/1, Q/1, R/2 and the constant a, with at most one existential in
    all, and a claim with at most one quantifier: every model question then has a witness of
    at most 1 + 1 + 1 elements (the constant and one Skolem constant per side)."""

    def matrix(variables: tuple[str, ...]) -> st.SearchStrategy[Tup]:
        terms = st.sampled_from((*variables, "a"))
        atoms = st.one_of(
            st.tuples(st.just("atom"), st.sampled_from(["P", "Q"]), st.tuples(terms)),
            st.tuples(st.just("atom"), st.just("R"), st.tuples(terms, terms)),
        )
        return _tree(atoms)

    shapes = {"": (), "∀": ("all",), "∃": ("ex",), "¬∃": ("notex",), "∀∀": ("all", "all"), "∃∀": ("ex", "all")}
    premises: list[Tup] = []
    existentials = 0
    for _ in range(draw(st.integers(0, 3))):
        shape = draw(st.sampled_from(sorted(shapes)))
        if "∃" in shape and not shape.startswith("¬") and existentials:
            shape = "∀"
        existentials += "∃" in shape and not shape.startswith("¬")
        kinds = shapes[shape]
        variables = ("x", "y")[: len(kinds)]
        body = draw(matrix(variables))
        for kind, var in reversed(list(zip(kinds, variables))):
            body = ("not", ("ex", var, ("not", body))) if kind == "notex" else (kind, var, body)
        premises.append(body)
    kind = draw(st.sampled_from(["", "all", "ex"]))
    claim = draw(matrix(("x",) if kind else ()))
    if kind:
        claim = (kind, "x", claim)
    return premises, claim, 1 + existentials + (1 if kind else 0)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(problem=epr_problem(), ascii_=st.booleans())
def test_epr_prove_agrees_with_all_small_interpretations(problem: tuple[list[Tup], Tup, int], ascii_: bool) -> None:
    premises, claim, bound = problem
    r = check_against_brute(premises, claim, lambda fs: brute_sat(fs, EPR_PREDS, bound, ["a"]), ascii_, cross_check=True)
    assert r.fragment in ("epr", "ground") and r.cross_check == "agree"


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(problem=epr_problem(), ascii_=st.booleans())
def test_declared_domain_backends_agree_with_brute_force(problem: tuple[list[Tup], Tup, int], ascii_: bool) -> None:
    premises, claim, _ = problem
    domain = ["a", "b"]
    sat = lambda fs: Brute(2, EPR_PREDS, {"a": 0, "b": 1}).sat(fs)  # noqa: E731
    for backend in ("z3", "clingo"):
        check_against_brute(premises, claim, sat, ascii_, backend=backend, domain=domain)


# ---- the .fol format and main_prove ---------------------------------------------------------
def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "p.fol"
    path.write_text(text, encoding="utf-8")
    return path


def test_fol_file_format(tmp_path: Path) -> None:
    path = _write(tmp_path, "# pets\npremise all: ∀x (Cat(x) → Pet(x))\n\npremise Cat(tom)  # tom\nclaim Pet(tom)\n")
    p = read_fol_file(path)
    assert [(s.name, s.line) for s in p.premises + p.claims] == [("all", 2), ("p2", 4), ("claim", 5)]
    assert parse_fol("domain {a, b}\npremise P(a)\nclaim P(b)").domain == ("a", "b")


@pytest.mark.parametrize(
    ("text", "where", "words"),
    [
        ("premise ∀x (Cat(x) → Pet(x)\nclaim Pet(tom)\n", ":1:12:", "never closed"),
        ("premise Cat(tom)\nclaim Pet(tom, y)\n", ":2:16:", "free variable 'y'"),
        ("premise Cat(tom)\nclam Pet(tom)\n", ":2:1:", "expected a statement"),
        ("domain a, b\npremise Cat(c)\nclaim Cat(a)\n", ":2:13:", "not in the declared domain"),
        ("premise Cat(tom)\n", "", "no claim to prove"),
    ],
)
def test_main_prove_reports_bad_input(tmp_path: Path, text: str, where: str, words: str) -> None:
    out, err = io.StringIO(), io.StringIO()
    assert main_prove(_write(tmp_path, text), out=out, err=err) == 2
    assert where in err.getvalue() and words in err.getvalue() and "Traceback" not in err.getvalue()


@pytest.mark.parametrize(
    ("claims", "code"), [("claim Pet(tom)", 0), ("claim Pet(tom)\nclaim Pet(rex)", 1), ("claim ¬Cat(tom)", 1)]
)
def test_main_prove_exit_codes(tmp_path: Path, claims: str, code: int) -> None:
    path = _write(tmp_path, "premise ∀x (Cat(x) → Pet(x))\npremise Cat(tom)\n" + claims + "\n")
    out = io.StringIO()
    assert main_prove(path, out=out) == code
    assert out.getvalue().count("\n\n") == claims.count("\n")  # one block per claim
    data = io.StringIO()
    assert main_prove(path, as_json=True, out=data) == code
    results = json.loads(data.getvalue())["results"]
    assert [r["claim"] for r in results] == [line.split(" ", 1)[1] for line in claims.splitlines()]


def test_main_prove_exit_code_for_unknown(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _every_oracle_says_unknown(monkeypatch)
    path = _write(tmp_path, "premise Cat(tom)\nclaim Cat(tom)\n")
    assert main_prove(path, out=io.StringIO()) == 3


# ---- FOLIO ----------------------------------------------------------------------------------
def test_bench_classifies_malformed_gold_logic(tmp_path: Path) -> None:
    rows = [
        {"premises": ["a", "b"], "premises-FOL": ["∀x (Cat(x) → Pet(x)", "Cat(tom)"], "conclusion-FOL": "Pet(tom)", "label": "True"},
        {"premises": ["a"], "premises-FOL": ["∀x Cat(y)"], "conclusion-FOL": "Cat(tom)", "label": "True"},
        {"premises": ["a", "b"], "premises-FOL": ["Love(a, b)", "Love(a)"], "conclusion-FOL": "Love(a, b)", "label": "True"},
        {"premises": ["a", "b", "c"], "premises-FOL": ["Cat(tom)"], "conclusion-FOL": "Pet(tom)", "label": "True"},
        {"premises": ["a"], "premises-FOL": ["Cat(tom)"], "conclusion-FOL": "Cat(tom)", "label": "True"},
        {"premises": ["a", "b"], "premises-FOL": ["Cat(tom)", "¬Cat(tom)"], "conclusion-FOL": "Pet(tom)", "label": "True"},
    ]
    path = tmp_path / "mini.jsonl"
    path.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in rows) + "\n", encoding="utf-8")
    out = io.StringIO()
    assert main_bench(path, as_json=True, out=out) == 0
    data = json.loads(out.getvalue())
    assert data["total"] == 6 and data["accuracy"] == round(1 / 6, 4)
    got = [(r["index"], r["predicted"], r["outcome"]) for r in data["results"]]
    assert got == [
        (0, None, "malformed gold logic"),
        (1, None, "malformed gold logic"),
        (2, None, "malformed gold logic"),
        (3, "Uncertain", "malformed gold logic"),
        (4, "True", "correct"),
        (5, None, "inconsistent gold premises"),
    ]
    reasons = [r["reason"] for r in data["results"]]
    assert "never closed" in reasons[0] and "free variable 'y'" in reasons[1] and "'Love'" in reasons[2]
    assert "premise count mismatch" in reasons[3]
    text = io.StringIO()
    main_bench(path, out=text)
    assert "confusion" in text.getvalue() and "#0 gold True, predicted —" in text.getvalue()


#: dev-file examples whose gold logic is defective, one by one, with the reason
DEFECTIVE = {
    8: ("correct", "premise count mismatch: the story has 6 premises in English but 5 in the gold logic"),
    9: ("correct", "premise count mismatch (same story as #8)"),
    10: ("correct", "premise count mismatch (same story as #8)"),
    87: (
        "gold label not entailed",
        "gold False, but nothing in the premises stops James from loving fall as well as summer",
    ),
    91: (
        "gold label not entailed",
        "gold True, but if James is a manager he lunches in the company (through 'Meetings', a typo "
        "for 'Meeting'), so the antecedent holds and the consequent fails",
    ),
}


def _folio_rows() -> list[dict[str, Any]]:
    if not FOLIO.exists():
        pytest.skip(f"FOLIO dev data not found at {FOLIO} (README.md, Test data)")
    return [json.loads(line) for line in FOLIO.read_text(encoding="utf-8").splitlines() if line.strip()]


@pytest.mark.parametrize("index", range(104))
def test_folio_dev_example(index: int) -> None:
    rows = _folio_rows()
    r = folio_bench.run_example(index, rows[index])
    if index in DEFECTIVE:
        outcome, why = DEFECTIVE[index]
        assert r.outcome == outcome, why
        assert r.defects or r.outcome in folio_bench.GOLD_DEFECTS, f"#{index} must be reported as defective: {why}"
    else:
        assert r.outcome == "correct", (r.reason, r.gold, r.predicted)
        assert not r.defects
    assert r.cross_check == "agree"  # every dev example is EPR: clingo over the Herbrand universe agrees


def test_folio_answers_are_the_same_when_earlier_answers_settle_questions(monkeypatch: pytest.MonkeyPatch) -> None:
    """The prover skips QuickXplain's questions an earlier answer settles (an unsat core inside
    the set asked, a model of a larger set): on every FOLIO dev example the bytes of the answers
    are those of asking the solver every question, with fewer solver calls in all."""
    rows = _folio_rows()
    calls = {True: 0, False: 0}
    real = to_z3.Z3Oracle.check

    def counted(self: Any, premises: Sequence[str], claim: bool | None, atoms: Any = ()) -> Any:
        calls[fol_prove._Decision.infer] += 1
        return real(self, premises, claim, atoms)

    monkeypatch.setattr(to_z3.Z3Oracle, "check", counted)
    answers: dict[bool, list[str]] = {True: [], False: []}
    for infer in (False, True):
        monkeypatch.setattr(fol_prove._Decision, "infer", infer)
        for row in rows:
            premises = [str(p).replace("\n", " ") for p in row["premises-FOL"]]
            try:
                problem = build_problem(premises, [str(row["conclusion-FOL"]).replace("\n", " ")])
            except CDAError as exc:
                answers[infer].append(type(exc).__name__)
                continue
            answers[infer].extend(r.model_dump_json() for r in fol_prove.prove_all(problem, timeout=None))
    assert answers[True] == answers[False]
    assert sum(a.startswith("{") for a in answers[True]) >= 100
    assert calls[True] < calls[False]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(problem=epr_problem())
def test_settled_questions_change_no_answer(problem: tuple[list[Tup], Tup, int]) -> None:
    """Random EPR problems (many contradict themselves, so cores without the claim are met):
    the same result with and without earlier answers settling later questions. Where asking
    every question meets one z3 cannot decide (then decided over the Herbrand universe, and a
    note says so), the settled side may never ask it, and z3's quantifier instantiation may give
    up on either side under load: every other field is still the same."""
    premises, claim, _ = problem
    results = []
    for infer in (False, True):
        fol_prove._Decision.infer = infer
        try:
            results.append(prove([render(p, False) for p in premises], render(claim, False), timeout=None).model_dump())
        finally:
            fol_prove._Decision.infer = True
    asked_all, settled = results
    for side in results:  # either side may meet one (seen on the settled side in a loaded run): only the note differs
        side["notes"] = [n for n in side["notes"] if "did not decide" not in n]
    assert asked_all == settled


def test_folio_dev_file_count() -> None:
    assert len(_folio_rows()) == 104


def test_cross_check_does_not_compare_an_unminimised_premise_list() -> None:
    """A side whose minimisation was cut short lists every premise: not a disagreement."""
    base = dict(claim_name="c", claim="P(a)", conflict=None, worlds=[], fragment="epr", fragment_detail="",
                unknown=False, cross_check=None, notes=[], status="supported", reason="")
    full = fol_prove.ProofResult(**base, backend="z3", premises_used=["p1", "p2", "p3"], minimal=False)
    core = fol_prove.ProofResult(**base, backend="clingo", premises_used=["p1", "p3"], minimal=True)
    assert fol_prove._compare(full, core) == []
    wrong = core.model_copy(update={"status": "refuted", "minimal": True})
    assert fol_prove._compare(full, wrong) == ["status: z3 says supported, clingo says refuted"]
    other = core.model_copy(update={"premises_used": ["p2"]})
    assert fol_prove._compare(core.model_copy(update={"backend": "z3"}), other) == [
        "premises_used: z3 says ['p1', 'p3'], clingo says ['p2']"
    ]


# ---- issue 12: reading, budgets, options, canonical worlds, the unique-names reading ---------
def test_long_arrow_reads_as_iff() -> None:
    """FOLIO's gold logic writes ⟷ (U+27F7) for ↔."""
    assert format_formula(parse_formula("∀x (A(x) ⟷ B(x))")) == format_formula(parse_formula("∀x (A(x) ↔ B(x))"))
    assert prove(["∀x (Cat(x) ⟷ Pet(x))", "Pet(tom)"], "Cat(tom)").status == "supported"


def _cli(*argv: str) -> tuple[int, str, str]:
    from cda.cli.main import main

    out, err = io.StringIO(), io.StringIO()
    return main(list(argv), out, err), out.getvalue(), err.getvalue()


@pytest.mark.parametrize("value", ["nan", "-3", "-inf"])
def test_prove_refuses_a_bad_timeout(tmp_path: Path, value: str) -> None:
    path = _write(tmp_path, "premise P(a)\nclaim P(a)\n")
    code, out, err = _cli("prove", str(path), f"--timeout={value}")
    assert code == 2 and out == ""
    assert "timeout must be a number of seconds, 0 or more" in err and "Traceback" not in err
    with pytest.raises(OptionError):
        prove(["P(a)"], "P(a)", timeout=float(value))


def test_bench_folio_refuses_a_bad_timeout(tmp_path: Path) -> None:
    path = tmp_path / "one.jsonl"
    path.write_text(json.dumps({"premises-FOL": ["P(a)"], "conclusion-FOL": "P(a)", "label": "True"}) + "\n")
    code, out, err = _cli("bench", "folio", str(path), "--timeout", "nan")
    assert code == 2 and out == "" and "timeout must be a number of seconds" in err


@pytest.mark.parametrize("text", ["", "\n  \n\n"])
def test_bench_folio_says_an_empty_file_is_empty(tmp_path: Path, text: str) -> None:
    path = tmp_path / "empty.jsonl"
    path.write_text(text, encoding="utf-8")
    code, out, err = _cli("bench", "folio", str(path))
    assert code == 2 and out == ""
    assert "no FOLIO examples" in err and "empty" in err and str(path) in err


WIDE = """premise inj: ∀X, Y (s(X) = s(Y) → X = Y)
premise nz: ∀X (s(X) ≠ o)
premise wide: ∀A, B, C, D, E, F, G, H, I (R(A, B, C, D, E, F, G, H, I) → R(s(A), B, C, D, E, F, G, H, I))
premise R(o, o, o, o, o, o, o, o, o)
claim R(s(o), o, o, o, o, o, o, o, o) ∧ Q(o)
"""
#: a 9-place predicate over a declared domain of 6 elements: 10 million instances to ground
WIDE_DECLARED = """domain a, b, c, d, e, f
premise wide: ∀A, B, C, D, E, F, G, H, I (R(A, B, C, D, E, F, G, H, I) → R(B, A, C, D, E, F, G, H, I))
claim R(a, a, a, a, a, a, a, a, a)
"""


@pytest.mark.parametrize(
    ("text", "backend"), [(WIDE, "auto"), (WIDE_DECLARED, "z3"), (WIDE_DECLARED, "clingo")], ids=["finite-search", "z3", "clingo"]
)
def test_a_timeout_holds_inside_grounding_and_expansion(tmp_path: Path, text: str, backend: str) -> None:
    """The finite-model search (and the declared-domain expansion on either backend) built every
    quantifier instance before looking at the clock: 26.7 s on a 2 s budget. The time is taken
    uncontended for a CPU (tests/timing.py): a shared machine adds only the wait for a core; the
    bug was many seconds to minutes."""
    from tests.timing import Stopwatch

    problem = read_fol_file(_write(tmp_path, text))
    with Stopwatch() as watch:
        [r] = fol_prove.prove_all(problem, 1.0, backend=backend)
    assert watch.uncontended < 1.0 + 1.5, watch
    assert r.status == "inconclusive" and r.unknown and "time ran out" in r.reason


def test_the_wide_file_on_the_command_line_answers_timeout(tmp_path: Path) -> None:
    code, out, _ = _cli("prove", str(_write(tmp_path, WIDE)), "--timeout", "2", "--json")
    [r] = json.loads(out)["results"]
    assert code == 3 and r["status"] == "inconclusive" and r["unknown"] and "time ran out" in r["reason"]


#: declared-domain problems whose answer is inconclusive, so each shows two worlds
WITNESSED = [
    (["∀x (Cat(x) → Pet(x))", "∃x Cat(x)"], "Pet(tom)", ["tom", "rex", "kit"]),
    (["∀x (A(x) ∨ B(x))"], "A(a)", ["a", "b"]),  # z3 used to drop the unnamed element b
    (["∀x ∃y R(x, y)"], "R(a, a)", ["a", "b", "c"]),
    (["P(a) ∨ P(b)", "∀x (P(x) → Q(x))"], "Q(a)", ["a", "b"]),
    (["∀x (P(x) ⊕ Q(x))", "∃x ∃y (R(x, y) ∧ x ≠ y)", "Flag"], "P(a) ∧ ¬Flag ∨ R(b, a)", ["a", "b"]),
]


def _fol_text(premises: list[str], claim: str, domain: list[str]) -> str:
    return f"domain {', '.join(domain)}\n" + "".join(f"premise {p}\n" for p in premises) + f"claim {claim}\n"


@pytest.mark.parametrize(("premises", "claim", "domain"), WITNESSED)
def test_witness_worlds_are_the_same_bytes_on_both_backends(
    tmp_path: Path, premises: list[str], claim: str, domain: list[str]
) -> None:
    path = _write(tmp_path, _fol_text(premises, claim, domain))
    answers = {}
    for backend in ("z3", "clingo"):
        code, out, _ = _cli("prove", str(path), "--json", "--backend", backend)
        assert code == 1
        data = json.loads(out)
        [r] = data["results"]
        assert r["backend"] == backend and len(r["worlds"]) == 2
        r["backend"] = "(either)"  # the one field that names the backend
        answers[backend] = json.dumps(data, ensure_ascii=False, indent=2)
    assert answers["z3"] == answers["clingo"]


def _least_world_by_brute_force(premises: list[str], claim: str, domain: list[str], holds: bool) -> list[str]:
    """The first assignment, in the documented order (atoms by predicate then tuple, false before
    true), that the evaluator accepts: enumerated, no solver involved."""
    problem = build_problem(premises, claim, domain=domain)
    atoms = [(p, args) for p, n in problem.signature.predicates.items() for args in product(domain, repeat=n)]
    hold = [s.formula for s in problem.premises]
    for bits in product((False, True), repeat=len(atoms)):
        rel: dict[str, set[tuple[str, ...]]] = {p: set() for p in problem.signature.predicates}
        for (p, args), bit in zip(atoms, bits):
            if bit:
                rel[p].add(args)
        s = Structure(tuple(domain), {d: d for d in domain}, {}, {p: frozenset(r) for p, r in rel.items()})
        if all(fol_prove.evaluate(f, s) for f in hold) and fol_prove.evaluate(problem.claims[0].formula, s) == holds:
            return [f"{p}({', '.join(a)})" if a else p for (p, a), bit in zip(atoms, bits) if bit]
    raise AssertionError("no world")


@pytest.mark.parametrize(("premises", "claim", "domain"), WITNESSED)
@pytest.mark.parametrize("backend", ["z3", "clingo"])
def test_witness_worlds_are_the_least_worlds(premises: list[str], claim: str, domain: list[str], backend: str) -> None:
    r = prove(premises, claim, domain=domain, backend=backend)
    for w in r.worlds:
        assert w.domain == domain
        assert sorted(w.true_atoms) == sorted(_least_world_by_brute_force(premises, claim, domain, w.claim_holds))


UNA = ["∀x (Cat(x) → x = tom)", "Cat(tom)"]


def test_unique_names_reading_tells_constants_apart(tmp_path: Path) -> None:
    standard = prove(UNA, "¬Cat(rex)")
    assert standard.status == "inconclusive" and not standard.unique_names
    assert any(w.aliases == {"rex": "tom"} for w in standard.worlds)  # rex may be tom
    una = prove(UNA, "¬Cat(rex)", unique_names=True)
    assert una.status == "supported" and una.premises_used == ["p1"] and una.unique_names
    worlds = prove(["∀x (Cat(x) → Pet(x))"], "Pet(rex)", unique_names=True).worlds
    assert worlds and all(not w.aliases for w in worlds)
    path = _write(tmp_path, "".join(f"premise {p}\n" for p in UNA) + "claim ¬Cat(rex)\n")
    assert _cli("prove", str(path))[0] == 1
    code, out, _ = _cli("prove", str(path), "--unique-names", "--json")
    assert code == 0 and json.loads(out)["results"][0]["unique_names"] is True
    assert "reading: unique names" in _cli("prove", str(path), "--unique-names")[1]


def test_unique_names_finite_search_starts_at_the_number_of_constants() -> None:
    # outside EPR (a function symbol): z3 may give up, the finite search then needs ≥ 3 elements
    r = prove(["∀x (f(x) = a)"], "b = c", timeout=5.0, unique_names=True)
    assert r.status == "refuted"
    r = prove(["∀x ∃y (R(x, y) ∧ f(y) = x)"], "R(a, b)", timeout=5.0, unique_names=True)
    assert r.status == "inconclusive" and not r.unknown
    for w in r.worlds:
        assert len(w.domain) >= 2 and not w.aliases


def test_bench_folio_reports_the_unique_names_reading_beside(tmp_path: Path) -> None:
    rows = [
        {"premises-FOL": UNA, "conclusion-FOL": "¬Cat(rex)", "label": "True"},  # changes: Uncertain → True
        {"premises-FOL": ["Cat(tom)"], "conclusion-FOL": "Cat(tom)", "label": "True"},
    ]
    path = tmp_path / "una.jsonl"
    path.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in rows) + "\n", encoding="utf-8")
    report = folio_bench.run_bench(path, timeout=5.0)
    assert report.correct == 1 and report.unique_names.correct == 2
    assert [(c.index, c.standard, c.unique_names) for c in report.unique_names.changed] == [(0, "Uncertain", "True")]
    code, out, _ = _cli("bench", "folio", str(path))
    assert "unique-names reading (distinct constants denote distinct objects): 2/2 correct" in out
    assert "#0 gold True: standard Uncertain, unique names True" in out
    code, out, _ = _cli("bench", "folio", str(path), "--json")
    assert json.loads(out)["unique_names"]["changed"][0]["index"] == 0


@pytest.mark.slow  # the whole FOLIO dev file: .ci/run's slow step
def test_unique_names_changes_nothing_on_the_folio_dev_file() -> None:
    """No dev example uses equality, and without it distinct names cannot change an answer."""
    _folio_rows()  # skips when the data is absent
    report = folio_bench.run_bench(FOLIO)
    assert report.unique_names.changed == [] and report.unique_names.correct == report.correct


@pytest.mark.parametrize(("premises", "claim", "domain"), WITNESSED)
def test_cross_check_compares_canonical_worlds(premises: list[str], claim: str, domain: list[str]) -> None:
    r = prove(premises, claim, domain=domain, cross_check=True)
    assert r.cross_check == "agree" and len(r.worlds) == 2


def test_cross_check_sees_different_worlds() -> None:
    r = prove(*WITNESSED[1][:2], domain=WITNESSED[1][2])
    other = r.model_copy(update={"backend": "clingo", "worlds": list(reversed(r.worlds))})
    assert fol_prove._compare(r, other) == []  # open domain: worlds are not canonical
    assert fol_prove._compare(r, other, worlds=True) == ["worlds: z3 and clingo show different canonical worlds"]
    cut = other.model_copy(update={"notes": ["a world is not the canonical one (time ran out)"]})
    assert fol_prove._compare(r, cut, worlds=True) == []


def test_a_huge_timeout_reaches_z3_capped_not_wrapped(monkeypatch: pytest.MonkeyPatch) -> None:
    """z3's timeout is an unsigned 32-bit count of milliseconds: 2**32 + 50 ms wraps round to a
    50 ms limit. A timeout that large must reach z3 as its largest value (which means none)."""
    seen: list[int] = []
    real_set = z3.Solver.set

    def spy(self: z3.Solver, *args: Any, **kw: Any) -> None:
        if args and args[0] == "timeout":
            seen.append(int(args[1]))
        real_set(self, *args, **kw)

    monkeypatch.setattr(z3.Solver, "set", spy)
    result = prove(["∀X (P(X) → Q(X))", "P(a)"], "Q(a)", timeout=(2**32 + 50) / 1000, backend="z3")
    assert result.status == "supported"
    assert seen and max(seen) <= 2**32 - 1
    assert min(seen) > 2**31  # the remaining time, not a wrapped few milliseconds


# ---- nesting past Python's stack ------------------------------------------------------------
@pytest.mark.parametrize("depth", [500, 5000])
def test_deeply_nested_negation_is_a_located_syntax_error(tmp_path: Path, depth: int) -> None:
    path = _write(tmp_path, "premise " + "¬" * depth + "P(a)\nclaim P(a)\n")
    with pytest.raises(DSLSyntaxError, match="nested too deeply") as info:
        read_fol_file(path)
    assert info.value.line == 1 and info.value.column is not None and info.value.column > 8


def test_nesting_below_the_limit_still_proves() -> None:
    assert prove(["¬¬" * 200 + "P(a)"], "P(a)").status == "supported"


def test_bench_folio_reports_a_too_deep_example_and_goes_on(tmp_path: Path) -> None:
    rows = [
        {"premises": ["a"], "premises-FOL": ["Cat(tom)"], "conclusion-FOL": "¬" * 600 + "Cat(tom)", "label": "True"},
        {"premises": ["a"], "premises-FOL": ["Cat(tom)"], "conclusion-FOL": "Cat(tom)", "label": "True"},
    ]
    path = tmp_path / "deep.jsonl"
    path.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in rows) + "\n", encoding="utf-8")
    report = folio_bench.run_bench(path, timeout=5.0, cross_check=False)
    assert [(r.outcome, r.predicted) for r in report.results] == [("malformed gold logic", None), ("correct", "True")]
    assert "nested too deeply" in report.results[0].reason


def test_bench_folio_names_the_line_of_json_nested_too_deeply(tmp_path: Path) -> None:
    path = tmp_path / "deep.jsonl"
    path.write_text('{"a": 1}\n' + "[" * 100_000 + "]" * 100_000 + "\n", encoding="utf-8")
    with pytest.raises(CDAError, match=r"deep\.jsonl:2: not valid JSON: nested too deeply"):
        folio_bench.read_examples(path)


def test_a_claim_the_unique_names_reading_decides_says_so(tmp_path: Path) -> None:
    path = _write(tmp_path, "premise P(a)\nclaim a ≠ b\n")
    out = io.StringIO()
    assert main_prove(path, out=out, unique_names=True) == 0
    assert "premises used: none (the claim decides itself under the unique-names reading)" in out.getvalue()
    out = io.StringIO()
    main_prove(_write(tmp_path, "premise P(a)\nclaim P(b) ∨ ¬P(b)\n"), out=out)
    assert "premises used: none (the claim decides itself)" in out.getvalue()


def test_prove_help_says_the_timeout_is_per_claim(capsys: pytest.CaptureFixture[str]) -> None:
    from cda.cli.main import main

    with pytest.raises(SystemExit):
        main(["prove", "--help"])
    assert "for each claim" in " ".join(capsys.readouterr().out.split())


@pytest.mark.parametrize("label", [None, "Yes", "true"])
def test_a_gold_label_that_is_no_label_is_malformed_not_a_defect(label: str | None) -> None:
    """A missing or unknown label was scored as 'gold label not entailed', with a reason that
    quoted 'gold label None'; it is an example the data cannot score."""
    row = {"premises-FOL": ["Cat(tom)"], "conclusion-FOL": "Cat(tom)", "label": label}
    if label is None:
        del row["label"]
    r = folio_bench.run_example(0, row)
    assert r.outcome == "malformed gold logic" and "True, False or Uncertain" in r.reason
    good = folio_bench.run_example(0, {**row, "label": "True"})
    assert good.outcome == "correct"
