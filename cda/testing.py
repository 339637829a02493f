"""Testing helpers made public: Hypothesis strategies of random well-typed DSL problems, and a
``cda_solve`` pytest fixture (defined by the CDA pytest plugin, :mod:`cda.adapters.pytest_plugin`, which
pytest loads by itself; import it from here in a conftest.py where the plugin is disabled).

The strategies are the ones CDA's own differential tests (z3 against clingo against a brute
force) draw from: :func:`problems` builds a small formula tree and renders it to DSL text
(``Problem.text()``), sometimes with minimal parentheses so that operator precedence is
exercised; :func:`arithmetic_problems` draws event/metric problems as text. Use them to test
code that consumes CDA's answers::

    from hypothesis import given
    from cda.testing import problem_texts

    @given(problem_texts())
    def test_my_ranker(text):
        result = cda.solve(text)
        ...

Needs ``hypothesis`` (in CDA's ``test`` extra); ``import cda`` never imports this module.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hypothesis import strategies as st

from cda.adapters.pytest_plugin import cda_solve  # the fixture, here too: `from cda.testing import cda_solve`

__all__ = [
    "Formula", "Statement", "Problem", "render", "problems", "problem_texts", "arithmetic_problems",
    "cda_solve", "MAX_ATOMS", "WEIGHTS", "DOMAIN_VALUES", "QUANT_VARS", "pigeonhole",
]

#: at most this many atoms in a problem of :func:`problems` (what a brute force enumerates: 2**16)
MAX_ATOMS = 16

# ("atom", name[, prefix]) | ("patom", pred, term[, prefix]) | ("const", bool) | ("not", f) | ("and", [f..]) |
# ("or", [f..]) | ("implies", l, r) | ("iff", l, r) | ("xor", [f..]) | ("card", op, k, [f..]) |
# ("quant", "forall"|"exists", var, body) | ("wrap", "holds"|"prefer", f)
Formula = tuple[Any, ...]

LEVEL = {"iff": 0, "implies": 1, "or": 2, "and": 3, "not": 4}


def render(f: Formula, ctx: int = 0, *, top: bool = True, parens: bool = False) -> str:
    """DSL text of ``f`` in a context of precedence ``ctx`` (0 = loosest: anything goes).

    ``top``: nothing follows to the right, so a quantifier (whose body extends as far right as
    it can) needs no parentheses. ``parens``: parenthesise every compound sub-formula.
    """
    kind = f[0]

    def wrap(text: str, level: int) -> str:
        return f"({text})" if level < ctx or (parens and not top) else text

    if kind == "atom":  # an optional kind prefix: hyp:a0, obs:o1
        return (f[2] if len(f) > 2 else "") + f[1]
    if kind == "patom":
        return (f[3] if len(f) > 3 else "") + f"{f[1]}({f[2]})"
    if kind == "const":
        return "true" if f[1] else "false"
    if kind == "not":
        return wrap("not " + render(f[1], LEVEL["not"], top=top, parens=parens), LEVEL["not"])
    if kind in ("and", "or"):
        lvl = LEVEL[kind]
        args = f[1]
        parts = [
            render(a, lvl + (kind == "and"), top=top and i == len(args) - 1, parens=parens) for i, a in enumerate(args)
        ]
        # an `and` operand sits at unary level (4); an `or` operand at `and` level (3)
        return wrap(f" {kind} ".join(parts), lvl)
    if kind == "implies":  # right-associative; the left side is an or_f
        return wrap(
            render(f[1], LEVEL["or"], top=False, parens=parens)
            + " implies "
            + render(f[2], LEVEL["implies"], top=top, parens=parens),
            LEVEL["implies"],
        )
    if kind == "iff":  # left-associative chains
        return wrap(
            render(f[1], LEVEL["iff"], top=False, parens=parens)
            + " iff "
            + render(f[2], LEVEL["implies"], top=top, parens=parens),
            LEVEL["iff"],
        )
    if kind == "xor":
        return "xor(" + ", ".join(render(a, parens=parens) for a in f[1]) + ")"
    if kind == "card":
        name = {"<=": "at_most", ">=": "at_least", "=": "exactly"}[f[1]]
        return f"{name}({f[2]}, [" + ", ".join(render(a, parens=parens) for a in f[3]) + "])"
    if kind == "quant":
        body = render(f[3], 0, top=True, parens=parens)
        text = f"{f[1]} {f[2]} in D: {body}"
        return text if top and ctx <= LEVEL["not"] and not parens else f"({text})"
    if kind == "wrap":
        return f"{f[1]}(" + render(f[2], parens=parens) + ")"
    raise ValueError(kind)



WEIGHTS = ("1", "2", "0.5", "1.5", "0.25", "3")
DOMAIN_VALUES = ("p", "q", "r")
QUANT_VARS = ("x", "y")


@dataclass
class Statement:
    kind: str  # hard | observe | soft | prove | disprove | best
    formula: Formula | None
    name: str | None = None
    weight: str | None = None
    style: int = 0  # which of the equivalent surface syntaxes to use
    comment: bool = False


@dataclass
class Problem:
    hyps: list[str]
    observables: list[str]
    domain: list[str] | None
    dom_hyp: bool  # hyp h(D)
    dom_obs: bool  # observable g(D)
    statements: list[Statement] = field(default_factory=list)
    parens: bool = False

    @property
    def hyp_atoms(self) -> list[str]:
        return self.hyps + ([f"h({v})" for v in self.domain] if self.domain and self.dom_hyp else [])

    @property
    def observable_atoms(self) -> list[str]:
        return self.observables + ([f"g({v})" for v in self.domain] if self.domain and self.dom_obs else [])

    def text(self) -> str:
        lines = []
        if self.domain is not None:
            lines.append(f"domain D = {{{', '.join(self.domain)}}}")
        hyp_sigs = self.hyps + (["h(D)"] if self.domain is not None and self.dom_hyp else [])
        obs_sigs = self.observables + (["g(D)"] if self.domain is not None and self.dom_obs else [])
        if hyp_sigs:
            lines.append("hyp " + ", ".join(hyp_sigs))
        if obs_sigs:
            lines.append("observable " + ", ".join(obs_sigs))
        for s in self.statements:
            body = render(s.formula, parens=self.parens) if s.formula is not None else ""
            named = f" {s.name}" if s.name else ""
            if s.kind == "hard":
                line = f"hard{named}: {body}"
            elif s.kind == "observe":
                line = f"observe {s.name}: {body}" if s.name else f"observe {body}"
            elif s.kind == "soft":
                if s.weight is None:
                    line = f"soft{named}: {body}"
                elif s.style == 0:
                    line = f"soft{named} weight {s.weight}: {body}"
                else:
                    line = f"soft{named}: {body} weight {s.weight}"
            elif s.kind in ("prove", "disprove"):
                line = f"goal {s.kind} {body}"
            elif s.kind == "best":
                line = f"goal best_explanation top {s.style}"
            else:  # pragma: no cover
                raise ValueError(s.kind)
            if s.comment:
                line += "  # a comment: not part of the formula"
            lines.append(line)
        return "\n".join(lines) + "\n"


def _formula(
    draw: Any,
    leaves: list[Formula],
    depth: int,
    *,
    domain: list[str] | None,
    dom_preds: list[str],
    bound: tuple[str, ...] = (),
    rich: bool = True,
) -> Formula:
    """A random formula over ``leaves`` (plus ``pred(var)`` for bound quantifier variables)."""
    var_leaves = [("patom", p, v) for v in bound for p in dom_preds]
    pool = leaves + var_leaves
    if depth <= 0 or draw(st.integers(0, 3)) == 0 or not pool:
        if not pool or (rich and draw(st.integers(0, 15)) == 0):
            return ("const", draw(st.booleans()))
        leaf = draw(st.sampled_from(pool))
        if draw(st.integers(0, 5)) == 0:  # the optional, checked kind prefix
            leaf = leaf + ("hyp:" if leaf[1] in ("h",) or leaf[1].startswith("a") else "obs:",)
        return leaf
    ops = ["not", "and", "or", "implies", "iff", "xor"]
    if rich:
        ops += ["card", "wrap"]
        if domain is not None and dom_preds and len(bound) < len(QUANT_VARS):
            ops += ["quant", "quant"]
    op = draw(st.sampled_from(ops))

    def sub(d: int = depth - 1, b: tuple[str, ...] = bound) -> Formula:
        return _formula(draw, leaves, d, domain=domain, dom_preds=dom_preds, bound=b, rich=rich)

    if op == "not":
        return ("not", sub())
    if op in ("and", "or"):
        return (op, [sub() for _ in range(draw(st.integers(2, 3)))])
    if op == "iff" and draw(st.booleans()):  # a chain: a iff b iff c is (a iff b) iff c
        return ("iff", ("iff", sub(), sub()), sub())
    if op in ("implies", "iff"):
        return (op, sub(), sub())
    if op == "xor":
        return ("xor", [sub() for _ in range(draw(st.integers(2, 4)))])
    if op == "card":
        n = draw(st.integers(0, 4))
        args = [sub() for _ in range(n)]
        return ("card", draw(st.sampled_from(["<=", ">=", "="])), draw(st.integers(0, n + 1)), args)
    if op == "wrap":
        return ("wrap", draw(st.sampled_from(["holds", "prefer"])), sub())
    var = QUANT_VARS[len(bound)]
    return ("quant", draw(st.sampled_from(["forall", "exists"])), var, sub(b=bound + (var,)))


@st.composite
def problems(draw: Any) -> Problem:
    domain = None
    dom_hyp = dom_obs = False
    if draw(st.integers(0, 2)) == 0:
        domain = list(DOMAIN_VALUES[: draw(st.integers(1, 3))])
        dom_hyp, dom_obs = draw(st.sampled_from([(True, False), (False, True), (True, True)]))
    n_dom_hyp = len(domain) if domain and dom_hyp else 0
    n_dom_obs = len(domain) if domain and dom_obs else 0
    n_hyp = draw(st.integers(0, 12 - n_dom_hyp))
    n_obs = draw(st.integers(0, max(0, min(4 - n_dom_obs, MAX_ATOMS - n_hyp - n_dom_hyp - n_dom_obs))))
    p = Problem([f"a{i}" for i in range(n_hyp)], [f"o{i}" for i in range(n_obs)], domain, dom_hyp, dom_obs)
    p.parens = draw(st.integers(0, 3)) == 0
    values = domain or []
    hyp_leaves: list[Formula] = [("atom", a) for a in p.hyps] + [("patom", "h", v) for v in (values if dom_hyp else [])]
    obs_leaves: list[Formula] = [("atom", o) for o in p.observables] + [
        ("patom", "g", v) for v in (values if dom_obs else [])
    ]
    leaves = hyp_leaves + obs_leaves
    preds = (["h"] if dom_hyp else []) + (["g"] if dom_obs else [])
    counter = iter(range(1000))

    def name() -> str | None:
        return f"c{next(counter)}" if draw(st.integers(0, 2)) == 0 else None

    def formula(
        depth: int, rich: bool = True, pool: list[Formula] | None = None, dp: list[str] | None = None
    ) -> Formula:
        return _formula(
            draw,
            leaves if pool is None else pool,
            depth,
            domain=domain,
            dom_preds=preds if dp is None else dp,
            rich=rich,
        )

    body: list[Statement] = []
    # keep the number of hypotheses small enough to enumerate on both backends quickly
    if len(hyp_leaves) > 6:
        k = draw(st.integers(1, 2))
        body.append(Statement("hard", ("card", "<=", k, hyp_leaves), name="limit"))
    for _ in range(draw(st.integers(0, 5))):
        body.append(Statement("hard", formula(3), name=name(), comment=draw(st.integers(0, 5)) == 0))
    if obs_leaves:
        obs_preds = ["g"] if dom_obs else []
        for _ in range(draw(st.integers(0, 3))):
            if draw(st.booleans()):
                f = draw(st.sampled_from(obs_leaves))
                f = ("not", f) if draw(st.booleans()) else f
            else:
                f = formula(2, rich=False, pool=obs_leaves, dp=obs_preds)
            body.append(Statement("observe", f, name=name()))
    for _ in range(draw(st.integers(0, 3))):
        weight = draw(st.sampled_from((None,) + WEIGHTS))
        if leaves and draw(st.booleans()):  # a prior on one atom, the common case
            f = draw(st.sampled_from(leaves))
            f = ("not", f) if draw(st.booleans()) else f
        else:
            f = formula(2)
        body.append(Statement("soft", f, name=name(), weight=weight, style=draw(st.integers(0, 1))))
    for _ in range(draw(st.integers(0, 3))):
        body.append(
            Statement(draw(st.sampled_from(["prove", "disprove"])), formula(2), comment=draw(st.integers(0, 5)) == 0)
        )
    if len(obs_leaves) >= 2 and draw(st.integers(0, 3)) == 0:
        # a trade-off: some observables must hold, each one costs the same; cheapest models tie
        group = draw(st.lists(st.sampled_from(obs_leaves), min_size=2, max_size=len(obs_leaves), unique=True))
        op, k = draw(st.sampled_from([">=", "="])), draw(st.integers(1, len(group) - 1))
        body.append(Statement("hard", ("card", op, k, group), name=name()))
        weight = draw(st.sampled_from(WEIGHTS))
        for leaf in group:
            body.append(Statement("soft", ("not", leaf), name=name(), weight=weight))
    if draw(st.integers(0, 4)) == 0:
        body.append(Statement("best", None, style=draw(st.integers(1, 4))))
    p.statements = draw(st.permutations(body))  # statements may come in any order after the declarations
    return p


@st.composite
def arithmetic_problems(draw: Any, general: bool = False) -> str:
    """Random event/metric problems (the integers are unbounded, so there is no brute force):
    difference constraints, which clingo decides with clingo-dl; with ``general`` also one sum
    of metrics, which only z3 decides (the clingo backend refuses it, naming z3).
    """
    hyps = [f"a{i}" for i in range(draw(st.integers(1, 4)))]
    events = ["e0", "e1", "e2"]
    metrics = ["m0", "m1"]

    def difference() -> str:
        i, j = draw(st.permutations(events))[:2]
        m, n = draw(st.permutations(metrics))
        k = draw(st.integers(-3, 12))
        return draw(
            st.sampled_from(
                [
                    f"before(event:{i}, event:{j})",
                    f"within(event:{i}, {k % 5} min of event:{j})",
                    f"within(event:{i}, {k * 20} s of event:{j})",
                    f"time(event:{i}) - time(event:{j}) <= {k} s",
                    f"value(metric:{m}) <= {k} USD",
                    f"value(metric:{m}) >= {k} USD",
                    f"value(metric:{m}) < value(metric:{n})",
                    f"value(metric:{m}) = {k} USD",
                    f"value(metric:{m}) != {k} USD",
                ]
            )
        )

    def literal() -> str:
        a = draw(st.sampled_from(hyps))
        return f"not {a}" if draw(st.booleans()) else a

    lines = ["hyp " + ", ".join(hyps), "event " + ", ".join(events), "metric m0 : USD", "metric m1 : USD"]
    for i in range(draw(st.integers(1, 6))):
        shape = draw(st.integers(0, 3))
        c = difference()
        body = c if shape == 0 else f"{literal()} implies {c}" if shape < 3 else f"{literal()} iff not ({c})"
        lines.append(f"hard h{i}: {body}")
    if general:
        k = draw(st.integers(0, 20))
        lines.append(
            draw(
                st.sampled_from(
                    [
                        f"hard g: value(metric:m0) + value(metric:m1) <= {k} USD",
                        f"hard g: 2 * value(metric:m0) - value(metric:m1) >= {k - 10} USD",
                        f"hard g: value(metric:m0) + value(metric:m1) = {k} USD",
                    ]
                )
            )
        )
    for i in range(draw(st.integers(0, 2))):
        lines.append(f"soft s{i} weight {draw(st.sampled_from(WEIGHTS))}: {difference()}")
    for _ in range(draw(st.integers(0, 2))):
        claim = draw(st.sampled_from([literal(), difference()]))
        lines.append(f"goal {draw(st.sampled_from(['prove', 'disprove']))} {claim}")
    return "\n".join(lines) + "\n"



def problem_texts() -> st.SearchStrategy[str]:
    """DSL texts of :func:`problems` (declarations, clauses, observations, claims, goals)."""
    return problems().map(lambda p: p.text())


def pigeonhole(n: int) -> str:
    """``n`` pigeons in ``n - 1`` holes, one pigeon a hole, as DSL text: unsatisfiable, and hard for
    both solvers (no short resolution proof exists). For testing what stops a run that would not
    end: a budget, a cancel, Ctrl-C. Measured on 2 shared cores: z3 took 2.7 s for 11 pigeons, 14 s
    for 12 and did not finish 13 in 60 s; clingo did not finish 11 in 60 s.

    >>> pigeonhole(3).splitlines()[:3]
    ['domain P = {p0, p1, p2}', 'domain H = {h0, h1}', 'hyp sits(P, H)']
    """
    pigeons = ", ".join(f"p{i}" for i in range(n))
    holes = ", ".join(f"h{j}" for j in range(n - 1))
    return (f"domain P = {{{pigeons}}}\ndomain H = {{{holes}}}\nhyp sits(P, H)\n"
            "hard every: forall p in P: exists h in H: sits(p, h)\n"
            "hard apart: forall h in H: at_most(1, [" + ", ".join(f"sits(p{i}, h)" for i in range(n)) + "])\n"
            "goal best_explanation top 1\n")
