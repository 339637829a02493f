"""A brute-force oracle for ground CDA problems, independent of both solver backends.

Everything here is computed by enumerating *every* assignment of the Boolean atoms, so it is
only for small problems (at most :data:`MAX_ATOMS` atoms). An assignment is a bit index
``a`` in ``range(2 ** n)``: atom ``i`` is true in ``a`` when bit ``i`` of ``a`` is set. A set
of assignments is a Python ``int`` used as a bitset, so "the clause is true" for all ``2 ** n``
assignments is one integer and conjunction is ``&`` -- fast enough to brute-force subsets of
clauses too.

The evaluator below reads the IR node classes of :mod:`cda.encodings.ir` as data, but shares
no code with ``cda.encodings.evaluate`` nor with the compilers. Hypothesis atoms get the low
bits, so the projection of assignment ``a`` onto the abducibles is ``a & (2 ** n_hyp - 1)``.

Nothing here imports the solver layer.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np

from cda.encodings import ir

__all__ = [
    "MAX_ATOMS",
    "Bitsets",
    "Oracle",
    "analyse",
    "entropy_bits",
    "information_gain_bits",
    "all_muses_mcses",
]

#: brute force is over 2 ** MAX_ATOMS assignments at most
MAX_ATOMS = 16
#: the engine computes next tests over at most this many hypotheses, the most probable
#: (``EngineOptions.max_tested_hypotheses``; claim confidences use every hypothesis); the oracle
#: mirrors that documented cap
MAX_TESTED = 256


class Bitsets:
    """Truth tables of formulas over a fixed list of Boolean atoms, as integer bitsets."""

    def __init__(self, atoms: Sequence[str]) -> None:
        if len(atoms) > MAX_ATOMS:
            raise ValueError(f"{len(atoms)} atoms is too many to brute-force (max {MAX_ATOMS})")
        self.atoms = list(atoms)
        self.n = len(atoms)
        self.size = 1 << self.n  # number of assignments
        self.full = (1 << self.size) - 1  # every assignment
        self.var: dict[str, int] = {name: self._column(i) for i, name in enumerate(self.atoms)}
        self._memo: dict[int, int] = {}

    def _column(self, i: int) -> int:
        """The bitset of assignments in which atom ``i`` is true."""
        half = 1 << i  # run length of equal values of bit i
        period = half << 1
        block = ((1 << half) - 1) << half  # within one period: the upper half is "true"
        repeat = ((1 << self.size) - 1) // ((1 << period) - 1)  # 1 at every period start
        return block * repeat

    def neg(self, x: int) -> int:
        return self.full & ~x

    def count_exactly(self, args: Sequence[int]) -> list[int]:
        """``out[j]``: assignments in which exactly ``j`` of ``args`` are true."""
        out = [self.full]
        for x in args:
            nx = self.neg(x)
            nxt = [out[0] & nx]
            for j in range(1, len(out)):
                nxt.append((out[j] & nx) | (out[j - 1] & x))
            nxt.append(out[-1] & x)
            out = nxt
        return out

    def card(self, op: str, k: int, args: Sequence[int]) -> int:
        exact = self.count_exactly(args)
        if op == "<=":
            chosen = [exact[j] for j in range(len(exact)) if j <= k]
        elif op == ">=":
            chosen = [exact[j] for j in range(len(exact)) if j >= k]
        elif op == "=":
            chosen = [exact[j] for j in range(len(exact)) if j == k]
        else:  # pragma: no cover - the IR has no other operators
            raise ValueError(op)
        out = 0
        for c in chosen:
            out |= c
        return out

    def parity(self, args: Iterable[int]) -> int:
        out = 0
        for x in args:
            out ^= x
        return out

    def all_of(self, args: Iterable[int]) -> int:
        out = self.full
        for x in args:
            out &= x
        return out

    def any_of(self, args: Iterable[int]) -> int:
        out = 0
        for x in args:
            out |= x
        return out

    # ---- IR nodes (read as data; interned, so the memo is by uid)
    def of(self, node: ir.Node) -> int:
        """The truth table of an IR node."""
        got = self._memo.get(node.uid)
        if got is None:
            got = self._memo[node.uid] = self._table(node)
        return got

    def _table(self, node: ir.Node) -> int:
        if isinstance(node, ir.Const):
            return self.full if node.value else 0
        if isinstance(node, ir.Atom):
            return self.var[node.name]
        if isinstance(node, ir.Not):
            return self.neg(self.of(node.arg))
        if isinstance(node, ir.And):
            return self.all_of(self.of(a) for a in node.args)
        if isinstance(node, ir.Or):
            return self.any_of(self.of(a) for a in node.args)
        if isinstance(node, ir.Iff):
            return self.neg(self.of(node.lhs) ^ self.of(node.rhs))
        if isinstance(node, ir.Xor):
            return self.parity(self.of(a) for a in node.args)
        if isinstance(node, ir.Card):
            return self.card(node.op, node.k, [self.of(a) for a in node.args])
        raise TypeError(f"the brute-force oracle cannot evaluate {type(node).__name__}")

    # ---- bitsets → numpy
    def to_bool_array(self, bits: int) -> np.ndarray:
        nbytes = max(1, (self.size + 7) // 8)
        raw = np.frombuffer(bits.to_bytes(nbytes, "little"), dtype=np.uint8)
        return np.unpackbits(raw, bitorder="little")[: self.size].astype(bool)


def entropy_bits(ps: Iterable[float]) -> float:
    return -math.fsum(p * math.log2(p) for p in ps if p > 0)


def information_gain_bits(prior: Sequence[float], q: Sequence[float]) -> tuple[float, float]:
    """(IG in bits, P(o)) by the definition: H(prior) - E_o[H(posterior | o)]."""
    p_true = math.fsum(p * x for p, x in zip(prior, q))
    expected_after = 0.0
    for p_outcome, lik in ((p_true, list(q)), (1.0 - p_true, [1.0 - x for x in q])):
        if p_outcome <= 1e-15:
            continue
        post = [p * x / p_outcome for p, x in zip(prior, lik)]
        expected_after += p_outcome * entropy_bits(post)
    return entropy_bits(prior) - expected_after, p_true


def all_muses_mcses(
    names: Sequence[str], vectors: Sequence[int], background: int
) -> tuple[list[list[str]], list[list[str]]]:
    """Every MUS and every MCS of the named clauses, by brute force over all subsets.

    A subset is satisfiable when some assignment satisfies the background and all its clauses.
    Lists are in source order, sorted by size then positions (the engine's canonical order).
    """
    m = len(names)
    sat = [False] * (1 << m)
    val = [0] * (1 << m)
    val[0] = background
    sat[0] = background != 0
    for mask in range(1, 1 << m):
        low = (mask & -mask).bit_length() - 1
        val[mask] = val[mask & (mask - 1)] & vectors[low]
        sat[mask] = val[mask] != 0
    full = (1 << m) - 1
    muses, mcses = [], []
    for mask in range(1 << m):
        members = [i for i in range(m) if mask >> i & 1]
        if not sat[mask] and all(sat[mask & ~(1 << i)] for i in members):
            muses.append(members)
        rest = full & ~mask  # the MCS candidate is `mask`: keep `rest`
        if sat[rest] and all(not sat[rest | (1 << i)] for i in members):
            mcses.append(members)

    def canon(sets: list[list[int]]) -> list[list[str]]:
        return [[names[i] for i in s] for s in sorted(sets, key=lambda s: (len(s), s))]

    return canon(muses), canon(mcses)


@dataclass
class RankedHypothesis:
    code: int
    assumed: list[str]
    cost: Fraction
    #: the soft clauses violated by each cheapest model of this hypothesis (several when tied)
    optimal_violations: set[tuple[str, ...]] = field(default_factory=set)


@dataclass
class Oracle:
    """What the brute force says about a ground problem."""

    bits: Bitsets
    hyps: list[str]
    clause_names: list[str]
    clause_vec: dict[str, int]
    background: int
    sat: int  # assignments satisfying every clause and the background
    claim_vec: dict[str, int] = field(default_factory=dict)
    soft: list[tuple[str, int, Fraction]] = field(default_factory=list)
    ranked: list[RankedHypothesis] = field(default_factory=list)
    posterior: list[float] = field(default_factory=list)

    @property
    def satisfiable(self) -> bool:
        return self.sat != 0

    def canonical_violations(self, h: RankedHypothesis) -> tuple[str, ...]:
        """The engine's canonical choice among ``h``'s cheapest violation sets: going through
        the soft clauses in source order, keep each satisfied when some cheapest model satisfies
        it together with those kept before."""
        candidates = [set(v) for v in h.optimal_violations]
        for name, _, _ in self.soft:
            keeping = [v for v in candidates if name not in v]
            if keeping:
                candidates = keeping
        assert len({frozenset(v) for v in candidates}) == 1
        return tuple(n for n, _, _ in self.soft if n in candidates[0])

    @property
    def violations_tied(self) -> bool:
        """Some hypothesis has cheapest models that violate different soft clauses."""
        return any(len(h.optimal_violations) > 1 for h in self.ranked)

    def subset_sat(self, names: Iterable[str], extra: int | None = None) -> bool:
        v = self.background
        for n in names:
            v &= self.clause_vec[n]
        if extra is not None:
            v &= extra
        return v != 0

    # ---- per-hypothesis likelihoods of a formula's truth (1, 0 or 0.5)
    def likelihoods(self, vec: int) -> list[float]:
        codes = self._sat_codes
        truth = self.bits.to_bool_array(vec)[self._sat_index]
        nh = 1 << len(self.hyps)
        total = np.bincount(codes, minlength=nh)
        true = np.bincount(codes, weights=truth.astype(np.float64), minlength=nh)
        out = []
        for h in self.ranked:
            t, n = int(true[h.code]), int(total[h.code])
            assert n > 0
            out.append(1.0 if t == n else 0.0 if t == 0 else 0.5)
        return out

    def possible(self, h: RankedHypothesis, vec: int) -> bool:
        """Some satisfying assignment with projection ``h`` is in ``vec``."""
        codes = self._sat_codes
        truth = self.bits.to_bool_array(vec)[self._sat_index]
        return bool(np.any(truth & (codes == h.code)))

    #: indices of the satisfying assignments, and their projections onto the abducibles
    _sat_index: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64), repr=False)
    _sat_codes: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64), repr=False)


def analyse(gp: ir.GroundProblem) -> Oracle:
    """Brute-force a ground problem with Boolean atoms only (no metrics or event times)."""
    if gp.numvars:
        raise ValueError("the brute-force oracle handles Boolean problems only")
    hyps = [a.name for a in gp.atoms.values() if a.kind == "hyp"]
    others = [a.name for a in gp.atoms.values() if a.kind != "hyp"]
    bits = Bitsets(hyps + others)
    clause_vec = {c.name: bits.of(c.node) for c in gp.clauses}
    background = bits.all_of(bits.of(n) for n in gp.background)
    sat = bits.all_of(clause_vec.values()) & background
    o = Oracle(
        bits=bits,
        hyps=hyps,
        clause_names=[c.name for c in gp.clauses],
        clause_vec=clause_vec,
        background=background,
        sat=sat,
        claim_vec={c.name: bits.of(c.node) for c in gp.claims},
        soft=[(s.name, bits.of(s.node), s.weight) for s in gp.soft],
    )
    if not sat:
        return o
    # cost of every assignment, exactly: weights scaled to integers
    scale = math.lcm(*(w.denominator for _, _, w in o.soft)) if o.soft else 1
    cost = np.zeros(bits.size, dtype=np.int64)
    violation_mask = np.zeros(bits.size, dtype=np.int64)  # bit j: soft clause j violated
    for j, (_, vec, w) in enumerate(o.soft):
        violated = ~bits.to_bool_array(vec)
        cost += violated.astype(np.int64) * int(w * scale)
        violation_mask |= violated.astype(np.int64) << j
    sat_index = np.flatnonzero(bits.to_bool_array(sat))
    codes = sat_index & ((1 << len(hyps)) - 1)
    o._sat_index, o._sat_codes = sat_index, codes
    best = np.full(1 << len(hyps), np.iinfo(np.int64).max, dtype=np.int64)
    np.minimum.at(best, codes, cost[sat_index])
    sat_cost, sat_mask = cost[sat_index], violation_mask[sat_index]
    optimal = sat_cost == best[codes]
    ranked = []
    for code in np.unique(codes):
        assumed = sorted(h for i, h in enumerate(hyps) if int(code) >> i & 1)
        masks = np.unique(sat_mask[optimal & (codes == code)])
        violations = {tuple(n for j, (n, _, _) in enumerate(o.soft) if int(m) >> j & 1) for m in masks}
        ranked.append(RankedHypothesis(int(code), assumed, Fraction(int(best[code]), scale), violations))
    ranked.sort(key=lambda h: (h.cost, len(h.assumed), h.assumed))
    o.ranked = ranked
    low = ranked[0].cost
    weights = [math.exp(-float(h.cost - low)) for h in ranked]
    total = math.fsum(weights)
    o.posterior = [w / total for w in weights]
    return o
