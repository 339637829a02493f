"""Hypotheses: the distinct models projected on the abducibles, priced and ranked.

A hypothesis assumes some abducibles true and all others false. Its cost is the least total
weight of violated soft clauses over its models, its ``violated`` list the canonical one (see
:func:`_cheapest`); the ranking is by cost, then fewer assumed atoms, then the sorted names, and
the posterior is exp(−cost) normalised over the hypotheses enumerated. When more hypotheses
exist than the cap, those kept are the first of that order (asked of the backend's optimiser),
not the ones its enumeration happened to meet first: the same on every backend.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from itertools import compress
from operator import itemgetter

from cda.encodings.construct import fast_constructor
from cda.encodings.evaluate import BatchEvaluator, evaluate_many
from cda.encodings.ir import Atom, Linear, SoftClause, walk
from cda.errors import EvaluatorDisagreement
from cda.solver.backbone import forced
from cda.solver.backend import Lit, Model
from cda.solver.information import posterior
from cda.solver.recheck import CheckedBackend

__all__ = ["RankedHypothesis", "Ranking", "rank_hypotheses"]

_ZERO = Fraction(0)


@dataclass(frozen=True)
class RankedHypothesis:
    """One hypothesis: what it assumes, its cost, the soft clauses it violates at that cost and
    one of its models of that cost (re-checked)."""

    assumed: frozenset[str]
    cost: Fraction
    violated: tuple[str, ...]
    model: Model

    def lits(self, hyps: Sequence[str]) -> list[Lit]:
        """The assumptions that pin every abducible to this hypothesis."""
        return [(a, a in self.assumed) for a in hyps]


@dataclass(frozen=True)
class Ranking:
    """The hypotheses, most probable first, with their posteriors (same order, summing to 1).

    ``complete``: every hypothesis is here. Otherwise ``capped`` (more than ``cap`` exist) or
    ``timed_out``; the posteriors are then normalised over those enumerated.
    """

    hypotheses: list[RankedHypothesis]
    posteriors: list[float]
    complete: bool
    capped: bool
    timed_out: bool
    cap: int

    @property
    def unsatisfiable(self) -> bool:
        """No hypothesis, and the enumeration finished: no model satisfies every clause."""
        return not self.hypotheses and not self.timed_out

    def __len__(self) -> int:
        return len(self.hypotheses)


def rank_hypotheses(solver: CheckedBackend, cap: int) -> Ranking:
    """Enumerate at most ``cap`` hypotheses under every clause, re-check them, price and rank them."""
    hyps = solver.hyps
    enum = solver.enumerate(hyps, solver.base, cap + 1)
    models = enum.models[:cap]
    capped = not enum.timed_out and len(enum.models) > cap
    if capped:
        # more than the cap: which ones the enumeration met first is the solver's choice, so
        # the list is asked again in the canonical order, the first ``cap`` on every backend
        ranked = solver.enumerate_ranked(hyps, solver.base, cap)
        if ranked.timed_out:
            enum = ranked
        models = ranked.models
    complete = not capped and (enum.complete or not enum.timed_out)
    solver.verify_all(models, "hypothesis enumeration")
    pricer = _Pricer(solver)
    out: list[RankedHypothesis] = []
    seen: set[frozenset[str]] = set()
    soft_values = pricer.values(models)
    values = itemgetter(*hyps) if len(hyps) > 1 else (lambda model: (model[hyps[0]],) if hyps else ())
    priced = pricer.priced
    for i, model in enumerate(models):
        assumed = frozenset(compress(hyps, values(model)))  # one C call reads every abducible's value
        if assumed in seen:
            raise EvaluatorDisagreement(f"{solver.name} enumerated hypothesis {sorted(assumed)} twice")
        seen.add(assumed)
        if soft_values is None:
            model = pricer.cheapest_model(assumed, model)
            cost, violated = pricer.cost_of(model)
        else:
            cost, violated = priced(soft_values[i]) if pricer.soft else _FREE
        out.append(_Ranked(assumed, cost, violated, model))
    # costs are Fractions, whose comparisons run in Python: sort by each distinct cost's rank.
    # Names: two sets of one size compare as their sorted lists do exactly when the sets less the
    # atoms every hypothesis assumes do (those sit in both lists alike), so only what is left is
    # sorted (on bench_core's 400,000-clause problem every hypothesis assumed 10,000 pinned atoms)
    # (a Fraction's hash is a modular inverse, a microsecond each: the distinct costs are found by
    # their (numerator, denominator), equal exactly for equal Fractions, both being in lowest terms)
    # (the keys are made in one comprehension and the hypotheses put in their order: a stable
    # sort of the indices by key, the order ``list.sort`` with a key function gives)
    distinct = {(h.cost.numerator, h.cost.denominator): h.cost for h in out}
    rank = {key: i for i, key in enumerate(sorted(distinct, key=distinct.__getitem__))}
    common = frozenset.intersection(*(h.assumed for h in out)) if out else frozenset()
    keys = [
        (rank[h.cost.numerator, h.cost.denominator], len(h.assumed), sorted(h.assumed - common)) for h in out
    ]
    out = [out[i] for i in sorted(range(len(out)), key=keys.__getitem__)]
    return Ranking(
        hypotheses=out, posteriors=posterior([h.cost for h in out]), complete=complete, capped=capped,
        timed_out=enum.timed_out, cap=cap,
    )


_Ranked = fast_constructor(RankedHypothesis)  # one per hypothesis enumerated
_FREE: tuple[Fraction, tuple[str, ...]] = (_ZERO, ())  # the price where there is no soft clause


class _Pricer:
    """The cost of a hypothesis and its canonical violated soft clauses."""

    def __init__(self, solver: CheckedBackend) -> None:
        self.solver = solver
        self.soft: list[SoftClause] = solver.problem.soft
        self._nodes = [s.node for s in self.soft]
        soft_atoms = {n.name for n in walk(self._nodes) if isinstance(n, Atom)}
        numeric = any(isinstance(n, Linear) for n in walk(self._nodes))
        hyps = set(solver.hyps)
        #: soft clauses read only abducibles: every model of a hypothesis has the same cost
        self.on_hyps_only = soft_atoms <= hyps and not numeric
        #: the atoms besides the abducibles that soft clauses read: when a hypothesis fixes them
        #: all, every one of its models has the same cost and the same violations
        self._open_atoms = None if numeric else sorted(soft_atoms - hyps)

    def values(self, models: Sequence[Model]) -> list[bytes] | None:
        """Per model, each soft clause's truth (a byte, 0 or 1) when that settles the cost of
        the models' hypotheses; ``None`` when a hypothesis must be priced on its own."""
        if self.soft and not self.on_hyps_only:
            return None
        return BatchEvaluator(self._nodes).rows(models)

    def priced(self, ok: Sequence[bool] | bytes) -> tuple[Fraction, tuple[str, ...]]:
        broken = [s for s, good in zip(self.soft, ok) if not good]
        if not broken:
            return _ZERO, ()
        return sum((s.weight for s in broken), _ZERO), tuple(s.name for s in broken)

    def cost_of(self, model: Model) -> tuple[Fraction, tuple[str, ...]]:
        return self.priced(evaluate_many(self._nodes, model) if self._nodes else [])

    def cheapest_model(self, assumed: frozenset[str], model: Model) -> Model:
        """``model`` when it is as cheap as any model of the hypothesis, else a least-cost one
        whose violated soft clauses are canonical.

        Several cheapest models may violate different soft clauses. The canonical ones: going
        through the soft clauses in source order, each is kept satisfied when some cheapest
        model satisfies it together with those kept before — a question about the problem, not
        about the backend, so both backends report the same ``violated`` list. That is the
        lexicographic optimum below the cost, which both backends compute in one optimisation
        (one priority level per soft clause); asking it clause by clause took one optimisation
        per violated soft clause and hypothesis (3,850 on a 1,000-service graph).
        """
        lits = self.solver.base + [(a, a in assumed) for a in self.solver.hyps]
        if self._fixed(lits, model):
            return model
        best = self.solver.cheapest(lits, "cost of a hypothesis")
        if best is None:
            raise EvaluatorDisagreement(f"{self.solver.name}: hypothesis {sorted(assumed)} has no model when minimising")
        return best

    def _fixed(self, lits: list[Lit], model: Model) -> bool:
        """Whether every model of the hypothesis gives the atoms soft clauses read the values
        ``model`` gives them (one solver call, usually unsat). Then its cost and violations are
        ``model``'s and no optimisation is needed: in a root-cause problem the hypothesis
        determines what is slow, and z3 spent most of a minute optimising 70 such hypotheses
        over 343 soft clauses."""
        atoms = self._open_atoms
        return atoms is not None and len(forced(self.solver, lits, model, atoms)) == len(atoms)
