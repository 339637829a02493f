"""Every encoder and the evaluator handle every IR node type, or refuse it by name.

The node types are read off :mod:`cda.encodings.ir` itself, so a new node type fails
:func:`test_every_node_type_has_a_sample` until it is given a sample here, and then every
encoder test below until each encoder handles it (or refuses it with ``BackendUnsupported``
naming the node and the backend). What an encoder makes of a node is checked against the
evaluator under every assignment of the node's atoms; the evaluator itself against Python's
own arithmetic over the same assignments, in the backend tests at the end (through the whole
scheme: a claim's key, the clause selectors).
"""

from __future__ import annotations

import inspect
import itertools
import re
from collections.abc import Callable
from fractions import Fraction

import clingo
import pytest
import z3

from cda.encodings import ir
from cda.encodings.evaluate import BatchEvaluator, evaluate
from cda.encodings.ir import (
    AtomInfo,
    Claim,
    Clause,
    GroundProblem,
    Node,
    NodeFactory,
    NumVar,
    SoftClause,
)
from cda.encodings.scheme import ALL_CLAUSES, build_scheme, claim_key, selector, soft_key
from cda.encodings.to_asp import AspEncoder, ProgramText
from cda.encodings.to_z3 import Z3Encoder, smtlib
from cda.errors import BackendUnsupported
from cda.solver.backend import Deadline, make_backend
from tests.conftest import GROUND_BACKENDS

ATOMS = ("a", "b", "c")
INTS = ("x", "y", "z")
#: term variables: two members of a population (open: any number of elements) and a string
POP = ir.Sort("P", "population")
TEXT = ir.Sort("W", "string")
TERMS = {"s": POP, "t": POP, "w": TEXT}
TERM_VALUES = {"P": ("a", "b", "#0"), "W": ("", "a", "ab", "ba", "x*b")}


def node_types() -> set[type]:
    """Every node class :mod:`cda.encodings.ir` defines (``Node`` itself aside)."""
    return {
        cls
        for _, cls in inspect.getmembers(ir, inspect.isclass)
        if issubclass(cls, Node) and cls is not Node and cls.__module__ == ir.__name__
    }


KINDS = sorted(node_types(), key=lambda k: k.__name__)


def _samples(f: NodeFactory) -> dict[type, list[Node]]:
    a, b, c = (f.atom(n) for n in ATOMS)
    for name in INTS:  # a product needs its variables declared: the metrics' range, as _problem's
        f.declare_int(name, ir.NUM_MIN, ir.NUM_MAX)
    return {
        ir.Const: [f.true, f.false],
        ir.Atom: [a],
        ir.Not: [f.not_(f.and_([a, b]))],
        ir.And: [f.and_([a, f.not_(b), c])],
        ir.Or: [f.or_([a, f.not_(b)])],
        ir.Iff: [f.iff(a, f.or_([b, c]))],
        ir.Xor: [f.xor([a, b]), f.xor([a, b, c])],
        ir.Card: [f.card(op, k, [a, b, c]) for op, k in (("<=", 1), ("<=", 2), (">=", 2), ("=", 1), ("=", 2))],
        ir.Linear: [f.linear({"x": 1, "y": -1}, "<=", 0), f.linear({"x": 1}, "<=", 1)],
        ir.Product: [f.product("z", "x", "y"), f.product("z", "x", "x")],
        ir.Eq: [f.eq(_t("s"), ir.TermConst(POP, "a")), f.eq(_t("s"), _t("t")), f.eq(_t("w"), ir.TermConst(TEXT, "ab"))],
        ir.Like: [f.like(_t("w"), ("a", None)), f.like(_t("w"), (None, "b", None)), f.like(_t("w"), ("x*b",))],
    }


def _t(name: str) -> ir.TermVar:
    return ir.TermVar(name, TERMS[name])


def samples(kind: type) -> tuple[NodeFactory, list[Node]]:
    f = NodeFactory()
    nodes = _samples(f)[kind]
    assert nodes and all(type(n) is kind for n in nodes), kind
    return f, nodes


def test_every_node_type_has_a_sample() -> None:
    """Fails when ir.py gains a node type: give it a sample, then every encoder must take it."""
    assert set(_samples(NodeFactory())) == node_types()


def _ints(node: Node) -> list[str]:
    return sorted({v for n in ir.walk([node]) if isinstance(n, ir.Linear | ir.Product)
                   for v in (n.variables if isinstance(n, ir.Product) else (t for _, t in n.terms))})  # fmt: skip


def _terms(node: Node) -> list[str]:
    out = set()
    for n in ir.walk([node]):
        for t in (n.lhs, n.rhs) if isinstance(n, ir.Eq) else (n.term,) if isinstance(n, ir.Like) else ():
            if isinstance(t, ir.TermVar):
                out.add(t.name)
    return sorted(out)


def assignments(node: Node) -> list[dict[str, bool | int | str]]:
    """Every assignment of the atoms, of the integers over -1..2 and of the term variables over
    a few values of their sort (a population's values: two constants and a fresh element)."""
    ints, terms = _ints(node), _terms(node)
    out: list[dict[str, bool | int | str]] = []
    for bits in itertools.product((False, True), repeat=len(ATOMS)):
        for values in itertools.product(range(-1, 3), repeat=len(ints)):
            for texts in itertools.product(*(TERM_VALUES[TERMS[t].name] for t in terms)):
                out.append({**dict(zip(ATOMS, bits)), **dict(zip(ints, values)), **dict(zip(terms, texts))})
    return out


# ---- each encoder on its own: a node's encoding is true exactly when the evaluator says so
def z3_truths(node: Node) -> list[bool] | None:
    """The node's truth under each assignment, as z3 decides its encoding."""
    ctx = z3.Context()
    enc = Z3Encoder(ctx)
    term = enc.encode(node)
    out = []
    for assignment in assignments(node):
        solver = z3.Solver(ctx=ctx)
        for name, value in assignment.items():
            if isinstance(value, bool):
                solver.add(enc.bool_var(name) == value)
            elif isinstance(value, str) and TERMS[name].kind == "string":
                solver.add(enc.term(_t(name)) == z3.StringVal(value, ctx))
            elif isinstance(value, str):  # a population's element: a named constant, or none of them
                element = z3.Const(f"elem!{value}", enc.sort(POP))
                solver.add(enc.term(_t(name)) == element)
                named = [enc.term(ir.TermConst(POP, v)) for v in TERM_VALUES["P"] if not v.startswith("#")]
                solver.add(z3.Distinct(*named, *([element] if value.startswith("#") else [])))
                if not value.startswith("#"):
                    solver.add(element == enc.term(ir.TermConst(POP, value)))
            else:
                solver.add(enc.int_var(name) == value)
        solver.add(term)
        out.append(solver.check() == z3.sat)
    return out


def asp_truths(node: Node, sink: str) -> list[bool] | None:
    """The node's truth under each assignment, as clingo decides its encoding written to
    ``sink``: ``backend`` (clingo's backend API) or ``text`` (program text, grounded)."""
    ctl = clingo.Control(["--models=1"])
    out_sym = clingo.Function("out")
    if sink == "backend":
        with ctl.backend() as b:
            lits = {n: b.add_atom(clingo.Function(n)) for n in ATOMS}
            for lit in lits.values():
                b.add_rule([lit], [], True)
            head = b.add_atom(out_sym)
            b.add_rule([head], [AspEncoder(b, lits.__getitem__).lit(node)])
        ctl.add("base", [], "#show out/0.")
    else:
        text = ProgramText()
        lits = {n: text.add_atom(clingo.Function(n)) for n in ATOMS}
        for lit in lits.values():
            text.add_rule([lit], [], True)
        if _ints(node):
            return None  # program text with clingo-dl: checked through the backend below
        head = text.add_atom(out_sym)
        text.add_rule([head], [AspEncoder(text, lits.__getitem__).lit(node)])
        text.add_text("#show out/0.")
        ctl.add("base", [], text.take())
    ctl.ground([("base", [])])
    out: list[bool] = []
    for assignment in assignments(node):
        assumptions = [(clingo.Function(n), bool(assignment[n])) for n in ATOMS]
        with ctl.solve(assumptions=assumptions, yield_=True) as handle:  # type: ignore[union-attr]
            [shown] = [m.contains(out_sym) for m in handle]
        out.append(shown)
    return out


ENCODERS: dict[str, Callable[[Node], list[bool] | None]] = {
    "z3": z3_truths,
    "clingo": lambda node: asp_truths(node, "backend"),
    "clingo (program text)": lambda node: asp_truths(node, "text"),
}


@pytest.mark.parametrize("kind", KINDS, ids=[k.__name__ for k in KINDS])
@pytest.mark.parametrize("encoder", sorted(ENCODERS))
def test_every_encoder_handles_every_node_type_or_refuses_it_by_name(encoder: str, kind: type) -> None:
    _, nodes = samples(kind)
    for node in nodes:
        expected = [evaluate(node, a) for a in assignments(node)]
        try:
            truths = ENCODERS[encoder](node)
        except BackendUnsupported as exc:
            assert kind.__name__ in str(exc) and encoder.split()[0] in str(exc)
            continue
        if truths is not None:
            assert truths == expected, (encoder, node)


@pytest.mark.parametrize("kind", KINDS, ids=[k.__name__ for k in KINDS])
def test_the_evaluator_handles_every_node_type(kind: type) -> None:
    """Single and batch evaluation agree, and with Python's own reading of the node."""
    _, nodes = samples(kind)
    for node in nodes:
        rows = assignments(node)
        single = [evaluate(node, a) for a in rows]
        assert BatchEvaluator([node]).evaluate(rows)[0].tolist() == single
        assert single == [_python_truth(node, a) for a in rows]


@pytest.mark.parametrize("n", [0, 1, 3, 8, 64, 65, 300])
def test_the_batch_evaluator_agrees_with_the_single_one_on_random_batches(n: int) -> None:
    """The bit-parallel columns (ripple-carry counts for cardinality, 0/1 bytes for rows) agree
    with :func:`evaluate` model by model, at batch sizes on and off byte and word boundaries."""
    import random

    rng = random.Random(n)
    f = NodeFactory()
    atoms = [f.atom(f"p{i}") for i in range(12)]
    nodes: list[Node] = []
    for _ in range(40):
        args = rng.sample(atoms, rng.randint(1, 12))
        k = rng.choice([-1, 0, 1, len(args) // 2, len(args) - 1, len(args), len(args) + 1, 2**40])
        card = f.card(rng.choice(["<=", ">=", "="]), k, args)
        nodes += [card, f.not_(card), f.or_([card, rng.choice(atoms)]), f.xor([card, *args[:2]])]
    nodes.append(f.linear({"x": 3, "y": -2}, "<=", 1))
    rows = [{**{f"p{i}": rng.random() < 0.5 for i in range(12)}, "x": rng.randint(-3, 3), "y": rng.randint(-3, 3)}
            for _ in range(n)]
    batch = BatchEvaluator(nodes)
    columns = batch.columns(rows)
    per_model = batch.rows(rows)
    for i, row in enumerate(rows):
        single = [evaluate(node, row) for node in nodes]
        assert single == [_python_truth(node, row) for node in nodes]
        assert [bool(c >> i & 1) for c in columns] == single
        assert list(per_model[i]) == [int(v) for v in single]
    assert all(c >> n == 0 for c in columns)  # no bit beyond the last model
    assert batch.evaluate(rows).shape == (len(nodes), n)


def _python_truth(node: Node, a: dict[str, bool | int]) -> bool:
    """The meaning of each node type, written out independently of the evaluator."""
    match node:
        case ir.Const():
            return node.value
        case ir.Atom():
            return bool(a[node.name])
        case ir.Not():
            return not _python_truth(node.arg, a)
        case ir.And():
            return all(_python_truth(x, a) for x in node.args)
        case ir.Or():
            return any(_python_truth(x, a) for x in node.args)
        case ir.Iff():
            return _python_truth(node.lhs, a) == _python_truth(node.rhs, a)
        case ir.Xor():
            return sum(_python_truth(x, a) for x in node.args) % 2 == 1
        case ir.Card():
            n = sum(_python_truth(x, a) for x in node.args)
            return {"<=": n <= node.k, ">=": n >= node.k, "=": n == node.k}[node.op]
        case ir.Linear():
            return sum(c * int(a[v]) for c, v in node.terms) <= node.bound
        case ir.Product():
            return int(a[node.product]) == int(a[node.left]) * int(a[node.right])
        case ir.Eq():
            return _python_term(node.lhs, a) == _python_term(node.rhs, a)
        case ir.Like():
            regex = "".join(".*" if p is None else re.escape(p) for p in node.pattern)
            return re.fullmatch(regex, _python_term(node.term, a), re.DOTALL) is not None
    raise AssertionError(f"no meaning written for {type(node).__name__}")


def _python_term(t: ir.Term, a: dict[str, bool | int | str]) -> str:
    return t.value if isinstance(t, ir.TermConst) else str(a[t.name])


class Mystery(Node):
    """A node type no encoder knows."""

    __slots__ = ()


def mystery() -> Node:
    node = Mystery()
    node.uid = 10**6
    return node


def _z3_encode(node: Node) -> object:
    return Z3Encoder(z3.Context()).encode(node)


def _asp_backend_encode(node: Node) -> object:
    ctl = clingo.Control()
    with ctl.backend() as b:
        return AspEncoder(b, lambda name: 1).lit(node)


REFUSERS: dict[str, tuple[str, Callable[[Node], object]]] = {
    "z3": ("the z3 backend", _z3_encode),
    "clingo": ("the clingo backend", _asp_backend_encode),
    "clingo (program text)": ("the clingo backend", lambda n: AspEncoder(ProgramText(), lambda name: 1).lit(n)),
    "evaluator": ("the evaluator", lambda n: evaluate(n, {})),
    "batch evaluator": ("the evaluator", lambda n: BatchEvaluator([n]).evaluate([{}])),
}


@pytest.mark.parametrize("who", sorted(REFUSERS))
def test_an_unknown_node_type_is_refused_by_name(who: str) -> None:
    name, run = REFUSERS[who]
    with pytest.raises(BackendUnsupported, match=f"{name} cannot .* IR node Mystery"):
        run(mystery())


def test_the_backend_api_sink_refuses_a_linear_node_by_name() -> None:
    """Difference constraints need clingo-dl's grounder: through clingo's backend API the
    encoder refuses them, naming the node and the backend (the clingo backend writes problems
    with integers as program text)."""
    f = NodeFactory()
    with pytest.raises(BackendUnsupported, match="clingo backend cannot encode IR node Linear"):
        _asp_backend_encode(f.linear({"x": 1, "y": -1}, "<=", 0))


# ---- through the whole scheme, on every ground backend (each node: tests/test_backend_conformance.py)
def _problem(node: Node, f: NodeFactory, pins: dict[str, int | str]) -> GroundProblem:
    """``node`` as a claim; the integers pinned by hard clauses, each behind its selector."""
    problem = GroundProblem(f)
    for name in ATOMS:
        problem.atoms[name] = AtomInfo(name, "var", name, ())
    fresh: dict[str, tuple[ir.TermVar, str]] = {}  # term variables pinned to a fresh element
    for name, value in pins.items():
        if isinstance(value, str):  # a term variable, pinned to a value of its sort
            var = problem.declare_term(name, TERMS[name])
            if value.startswith("#"):  # a fresh element: none of the named constants; the same
                # fresh element as another variable pinned to the same label, not the others'
                others = [f.eq(var, ir.TermConst(var.sort, v)) for v in TERM_VALUES[var.sort.name] if not v.startswith("#")]
                same = [f.eq(var, w) if label == value else f.not_(f.eq(var, w)) for w, label in fresh.values()]
                fresh[name] = (var, value)
                problem.clauses.append(Clause(f"pin_{name}", "hard", f.and_([f.not_(f.or_(others)), *same]), 1))
            else:
                problem.clauses.append(Clause(f"pin_{name}", "hard", f.eq(var, ir.TermConst(var.sort, value)), 1))
            continue
        problem.numvars[name] = NumVar(name, "metric", "1")
        problem.clauses.append(Clause(f"pin_{name}", "hard", f.linear({name: 1}, "=", value), 1))
    problem.claims.append(Claim("c", "prove", node, repr(node), 1))
    return problem


def _soft_problem(weights: dict[str, int], order: tuple[str, str]) -> GroundProblem:
    """``a xor b`` hard; soft clauses ``s_a: a`` and ``s_b: b`` in ``order``."""
    f = NodeFactory()
    a, b = f.atom("a"), f.atom("b")
    problem = GroundProblem(f)
    problem.atoms = {n: AtomInfo(n, "hyp", n, ()) for n in ("a", "b")}
    problem.clauses = [Clause("h1", "hard", f.xor([a, b]), 1)]
    problem.claims = [Claim("g", "prove", a, "a", 2)]
    soft = {"s_a": a, "s_b": b}
    problem.soft = [SoftClause(n, soft[n], Fraction(weights[n]), 3) for n in order]
    return problem


def test_the_scheme_is_written_once_for_every_backend() -> None:
    """What each backend builds: selectors, the every-clause atom, claim and soft keys, the
    lexicographic objectives (the cost first, then each soft clause in source order)."""
    problem = _soft_problem({"s_a": 3, "s_b": 5}, ("s_a", "s_b"))
    a, b = problem.factory.atom("a"), problem.factory.atom("b")
    scheme = build_scheme(problem, {"s_a": 3, "s_b": 5})
    assert scheme.guarded == ((selector("h1"), problem.clauses[0].node),)
    assert scheme.every == ALL_CLAUSES
    assert scheme.defined == ((claim_key("g"), a), (soft_key("s_a"), a), (soft_key("s_b"), b))
    assert [o.terms for o in scheme.objectives] == [((a, 3), (b, 5)), ((a, 1),), ((b, 1),)]
    assert scheme.project == ("a", "b")


@pytest.mark.parametrize("backend", GROUND_BACKENDS)
@pytest.mark.parametrize(
    ("weights", "order", "best"),
    [
        ({"s_a": 3, "s_b": 5}, ("s_a", "s_b"), "b"),  # the cost decides: violate the cheaper s_a
        ({"s_a": 3, "s_b": 3}, ("s_a", "s_b"), "a"),  # a tie: the earlier soft clause is kept
        ({"s_a": 3, "s_b": 3}, ("s_b", "s_a"), "b"),
    ],
)
def test_the_objectives_are_lexicographic_on_both_backends(
    backend: str, weights: dict[str, int], order: tuple[str, str], best: str
) -> None:
    problem = _soft_problem(weights, order)
    built = make_backend(backend, problem, seed=0, deadline=Deadline(None), weights=weights)
    outcome = built.minimize([(ALL_CLAUSES, True)])
    assert outcome.model is not None
    assert [n for n in ("a", "b") if outcome.model[n]] == [best]


def test_smtlib_printing_round_trips_through_z3() -> None:
    """The one z3 encoder's SMT-LIB text, parsed back by z3, has the models the terms have."""
    f = NodeFactory()
    a, b, c = (f.atom(n) for n in ATOMS)
    node = f.and_([f.card("=", 1, [a, b, c]), f.xor([a, b]), f.linear({"x": 1, "y": -1}, "<=", -1)])
    enc = Z3Encoder(z3.Context())
    text = smtlib([enc.encode(node)])
    assert "(check-sat)" in text
    solver = z3.Solver(ctx=enc.ctx)
    solver.add(z3.parse_smt2_string(text, ctx=enc.ctx))
    count = 0
    for bits in itertools.product((False, True), repeat=3):
        assignment = dict(zip(ATOMS, bits))
        want = evaluate(f.and_([f.card("=", 1, [a, b, c]), f.xor([a, b])]), assignment)
        got = solver.check(*[enc.bool_var(n) == v for n, v in assignment.items()]) == z3.sat
        assert got == want
        count += got
    assert count == 2  # a alone, b alone


@pytest.mark.parametrize("backend", GROUND_BACKENDS)
@pytest.mark.parametrize("with_ints", [False, True], ids=["boolean", "integers"])
def test_clauses_added_later_go_to_the_same_sink(backend: str, with_ints: bool) -> None:
    """Clauses added to a built backend (clingo: through its backend API for a Boolean problem,
    as a new part of program text with integers) sit behind their selectors, over new atoms."""
    f = NodeFactory()
    a, fresh = f.atom("a"), f.atom("fresh")
    problem = _problem(f.true, f, {"x": 1} if with_ints else {})
    b = make_backend(backend, problem, seed=0, deadline=Deadline(None), weights={})
    b.add_clauses([Clause("later", "hard", f.and_([fresh, f.not_(a)]), 0)], ["fresh"])
    on = [(selector("later"), True)]
    assert b.check([*on, ("a", True)]).status == "unsat"
    assert b.check([("a", True)]).status == "sat"  # the clause is off unless selected
    outcome = b.check([*on, ("a", False)])
    assert outcome.status == "sat" and outcome.model is not None and outcome.model["fresh"] is True
    if with_ints:
        pinned = b.check([(selector("pin_x"), True), *on, ("a", False)])
        assert pinned.model is not None and pinned.model["x"] == 1 and pinned.model["fresh"] is True


def test_false_body_fast_path_equals_the_general_walk(monkeypatch: pytest.MonkeyPatch) -> None:
    """Clauses of the common shape (atoms, negated atoms, negated conjunctions of literals, and
    others mixed in) get the same body from the one-loop path as from the general walk."""
    import random

    rng = random.Random(3)
    f = ir.NodeFactory()
    names = [f"a{i}" for i in range(8)]
    nodes = []
    for _ in range(300):
        parts = []
        for _ in range(rng.randint(2, 5)):
            kind = rng.random()
            lit = f.atom(rng.choice(names)) if rng.random() < 0.5 else f.not_(f.atom(rng.choice(names)))
            if kind < 0.4:
                parts.append(lit)
            elif kind < 0.8:
                parts.append(f.not_(f.and_([lit, f.atom(rng.choice(names)), f.not_(f.atom(rng.choice(names)))])))
            else:
                parts.append(f.iff(f.atom(rng.choice(names)), lit))  # not of the common shape
        nodes.append(f.or_(parts))

    def bodies() -> list[list[int]]:
        sink = ProgramText()
        lits = {n: sink.add_atom(n) for n in names}
        enc = AspEncoder(sink, lits.__getitem__)
        return [enc.false_body(n) for n in nodes]

    fast = bodies()
    monkeypatch.setattr(AspEncoder, "_false_disjunction", lambda self, node: None)
    assert fast == bodies()


@pytest.mark.parametrize("spell", ["bool", "zero_one", "any_int"])
def test_the_batch_evaluator_reads_atom_values_as_bools_however_spelt(spell: str) -> None:
    """An atom's value may be a bool or an int read as a bool (2 and -1 are true): the columns
    (read through one byte string when every value is 0/1, else value by value) agree with
    :func:`evaluate` model by model."""
    import random

    rng = random.Random(spell)
    f = NodeFactory()
    atoms = [f.atom(f"p{i}") for i in range(7)]
    nodes = [f.or_([atoms[0], f.not_(atoms[1])]), f.and_(atoms[2:5]), f.xor(atoms[4:7]), *atoms]
    spelt = {"bool": lambda v: v, "zero_one": int, "any_int": lambda v: rng.choice([2, -1, 7]) if v else 0}[spell]
    rows = [{f"p{i}": spelt(rng.random() < 0.5) for i in range(7)} for _ in range(70)]
    columns = BatchEvaluator(nodes).columns(rows)
    for i, row in enumerate(rows):
        assert [bool(c >> i & 1) for c in columns] == [evaluate(node, row) for node in nodes]
