"""Grounding a first-order problem to the IR (:class:`~cda.encodings.ir.GroundProblem`), so the
ordinary backends (clingo, z3) decide it: over a declared domain any problem without function
symbols; over an open domain a problem in the EPR fragment without equality, after
Skolemisation, over its Herbrand universe.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from cda.contracts.deadline import Deadline
from cda.errors import BackendUnsupported
from cda.fol.budget import spend
from cda.fol.structures import Structure
from cda.fol.syntax import (
    And,
    Atom,
    BoolConst,
    Eq,
    FOLProblem,
    Formula,
    Iff,
    Implies,
    Not,
    Or,
    Quant,
    Statement,
    Term,
    Xor,
    free_names,
)
from cda.ir import AtomInfo, Claim, Clause, GroundProblem, Node, NodeFactory

__all__ = ["GroundedClaim", "ground_claim", "herbrand_structure", "atom_name"]


@dataclass
class GroundedClaim:
    """A problem grounded for one claim: clauses are the premises (by name, in order); the
    claims are ``claim`` (the claim) and ``negated`` (its negation), each grounded on its own
    (they differ after Skolemisation); ``universe`` is the finite domain grounded over."""

    problem: GroundProblem
    universe: tuple[str, ...]
    skolem: tuple[str, ...]


def atom_name(pred: str, args: Sequence[str]) -> str:
    return f"{pred}({', '.join(args)})" if args else pred


class _Grounder:
    """Declared domain: ∀ → ∧ and ∃ → ∨ over the domain. Open domain (EPR, no equality, no
    functions): negation normal form with existentials replaced by Skolem constants, then
    ∀ → ∧ over the Herbrand universe (the constants and the Skolem constants)."""

    def __init__(
        self, problem: FOLProblem, factory: NodeFactory, gp: GroundProblem, deadline: Deadline | None = None
    ) -> None:
        self.p = problem
        self.deadline = deadline
        self.f = factory
        self.gp = gp
        self.closed = problem.domain is not None
        self.universe: tuple[str, ...] = problem.domain or ()
        self.skolem: list[str] = []
        self._taken = set(problem.signature.functions)

    def refuse(self, what: str) -> BackendUnsupported:
        return BackendUnsupported(
            f"clingo cannot ground {what}: only a declared finite domain, or an open domain in the EPR "
            "fragment without equality and function symbols, can be grounded; use z3"
        )

    def fresh(self) -> str:
        i = len(self.skolem) + 1
        name = f"sk{i}"
        while name in self._taken:
            i += 1
            name = f"sk{i}"
        self._taken.add(name)
        self.skolem.append(name)
        return name

    # -- open domain: negation normal form + Skolem constants (still a Formula)
    def nnf(self, f: Formula, pol: bool, env: dict[str, Term], universals: frozenset[str]) -> Formula:
        if isinstance(f, Atom):
            atom = Atom(f.pred, tuple(self.subst(t, env) for t in f.args), f.pos)
            return atom if pol else Not(atom, f.pos)
        if isinstance(f, Eq):
            raise self.refuse("equality over an open domain")
        if isinstance(f, BoolConst):
            return BoolConst(f.value == pol, f.pos)
        if isinstance(f, Not):
            return self.nnf(f.arg, not pol, env, universals)
        if isinstance(f, And | Or):
            conj = isinstance(f, And) == pol
            parts = tuple(self.nnf(g, pol, env, universals) for g in f.args)
            return And(parts, f.pos) if conj else Or(parts, f.pos)
        if isinstance(f, Implies):
            left, right = self.nnf(f.lhs, not pol, env, universals), self.nnf(f.rhs, pol, env, universals)
            return Or((left, right), f.pos) if pol else And((left, right), f.pos)
        if isinstance(f, Iff | Xor):
            same = isinstance(f, Iff) == pol  # the formula says: lhs and rhs have the same value
            a1, b1 = self.nnf(f.lhs, True, env, universals), self.nnf(f.rhs, True, env, universals)
            a0, b0 = self.nnf(f.lhs, False, env, universals), self.nnf(f.rhs, False, env, universals)
            if same:
                return And((Or((a0, b1), f.pos), Or((a1, b0), f.pos)), f.pos)
            return And((Or((a1, b1), f.pos), Or((a0, b0), f.pos)), f.pos)
        universal = (f.kind == "forall") == pol
        if universal:
            inner = {**env, f.var: Term(f.var, (), f.var_pos)}
            return Quant("forall", f.var, self.nnf(f.body, pol, inner, universals | {f.var}), f.pos, f.var_pos)
        if free_names(f) & universals - {f.var}:
            raise self.refuse("an existential that depends on a universal (it needs a Skolem function)")
        sk = Term(self.fresh(), (), f.var_pos)
        return self.nnf(f.body, pol, {**env, f.var: sk}, universals - {f.var})

    def subst(self, t: Term, env: dict[str, Term]) -> Term:
        if t.args:
            raise self.refuse(f"the function symbol '{t.name}'")
        return env.get(t.name, t)

    # -- ground a formula (closed domain: any formula; open: the output of nnf)
    def term(self, t: Term, env: Mapping[str, str]) -> str:
        if t.args:
            raise self.refuse(f"the function symbol '{t.name}'")
        return env.get(t.name, t.name)

    def ground(self, f: Formula, env: dict[str, str]) -> Node:
        fac = self.f
        if isinstance(f, Atom):
            args = tuple(self.term(t, env) for t in f.args)
            name = atom_name(f.pred, args)
            if name not in self.gp.atoms:
                self.gp.atoms[name] = AtomInfo(name, "var", f.pred, args)
            return fac.atom(name)
        if isinstance(f, Eq):
            if not self.closed:
                raise self.refuse("equality over an open domain")
            return fac.const(self.term(f.lhs, env) == self.term(f.rhs, env))
        if isinstance(f, BoolConst):
            return fac.const(f.value)
        if isinstance(f, Not):
            return fac.not_(self.ground(f.arg, env))
        if isinstance(f, And):
            return fac.and_(self.ground(a, env) for a in f.args)
        if isinstance(f, Or):
            return fac.or_(self.ground(a, env) for a in f.args)
        if isinstance(f, Implies):
            return fac.implies(self.ground(f.lhs, env), self.ground(f.rhs, env))
        if isinstance(f, Iff):
            return fac.iff(self.ground(f.lhs, env), self.ground(f.rhs, env))
        if isinstance(f, Xor):
            return fac.xor([self.ground(f.lhs, env), self.ground(f.rhs, env)])
        parts = []
        for e in self.universe:
            spend(self.deadline, "grounding quantifiers")
            parts.append(self.ground(f.body, {**env, f.var: e}))
        return fac.and_(parts) if f.kind == "forall" else fac.or_(parts)


def ground_claim(problem: FOLProblem, claim: Statement, deadline: Deadline | None = None) -> GroundedClaim:
    """Ground ``problem`` for ``claim`` into the IR both ordinary backends decide; with a
    ``deadline``, raises ``OutOfTime`` once it passes.

    >>> from cda.fol.parse import build_problem
    >>> p = build_problem(["∀x (Cat(x) → Pet(x))", "∃x Cat(x)"], "∃x Pet(x)")
    >>> g = ground_claim(p, p.claims[0])
    >>> g.universe, [c.name for c in g.problem.clauses], [c.name for c in g.problem.claims]
    (('sk1', 'sk2'), ['p1', 'p2'], ['claim', 'negated'])
    """
    factory = NodeFactory()
    gp = GroundProblem(factory=factory, filename=problem.filename)
    g = _Grounder(problem, factory, gp, deadline)
    stmts = problem.premises + [claim]
    if problem.domain is None:
        if problem.signature.function_symbols:
            raise g.refuse(f"the function symbol '{problem.signature.function_symbols[0]}'")
        normal = [g.nnf(st.formula, True, {}, frozenset()) for st in stmts]
        negated = g.nnf(claim.formula, False, {}, frozenset())
        consts = [c for c in problem.signature.constants if any(c in free_names(st.formula) for st in stmts)]
        g.universe = tuple(consts + g.skolem) or ("e1",)
        premise_nodes = [g.ground(f, {}) for f in normal[:-1]]
        claim_node, negated_node = g.ground(normal[-1], {}), g.ground(negated, {})
    else:
        premise_nodes = [g.ground(st.formula, {}) for st in problem.premises]
        claim_node = g.ground(claim.formula, {})
        negated_node = factory.not_(claim_node)
    for st, node in zip(problem.premises, premise_nodes):
        gp.clauses.append(Clause(st.name, "hard", node, st.line))
    gp.claims.append(Claim("claim", "prove", claim_node, claim.text, claim.line))
    gp.claims.append(Claim("negated", "prove", negated_node, f"¬({claim.text})", claim.line))
    return GroundedClaim(gp, g.universe, tuple(g.skolem))


def herbrand_structure(grounded: GroundedClaim, true_atoms: Mapping[str, bool | int]) -> Structure:
    """The structure a ground model describes: every name denotes itself."""
    relations: dict[str, set[tuple[str, ...]]] = {}
    for name, info in grounded.problem.atoms.items():
        relations.setdefault(info.pred, set())
        if true_atoms.get(name):
            relations[info.pred].add(info.args)
    return Structure(
        grounded.universe,
        {c: c for c in grounded.universe},
        {},
        {k: frozenset(v) for k, v in relations.items()},
    )
