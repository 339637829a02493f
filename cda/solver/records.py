"""Hypothesis records computed by the solver (docs/investigate.md, "The records").

For hard clauses H (the hard clauses and facts), observations O and each ranked hypothesis h
(its abducibles pinned: those it assumes true, every other one false):

* **evidence for** h: the observations H ∧ h entails and H alone does not — what h explains;
* **evidence against** h: the soft clauses its cheapest model violates, and the observations h
  leaves unexplained (H ∧ h entails neither them nor their negation, and H alone does not
  entail them): under the engine's likelihood model P(o | h) is ½ there, against 1 for a
  hypothesis that explains o, so each one halves h's odds against an explaining rival;
* **falsifiers** of h: the unobserved observables whose value H ∧ O ∧ h determines (the backbone
  under h, :func:`cda.solver.backbone.forced`), each with the value that would refute h; a
  hypothesis that predicts no unobserved observable has none, and its record says so;
* **next probe** of h: the falsifier with the greatest expected information gain over the
  posterior of every hypothesis considered (ties: the observable's name); none when no falsifier
  gains anything (every hypothesis predicts the same value there);
* the **step rule**: the hypothesis whose next probe gains most is selected (ties: the more
  probable), with a sentence saying why.

Entailment is asked a block at a time, as the backbone is: "is there a model of H ∧ h that
falsifies any observation still open?", each model freeing those it falsifies, so a hypothesis
that explains every observation costs one unsat call.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from cda.contracts.hypothesis_record import HypothesisRecord
from cda.contracts.refs import SpanRef
from cda.contracts.result import NextTest
from cda.contracts.status import SolverStatus
from cda.encodings.evaluate import evaluate_many
from cda.encodings.ir import Clause, GroundProblem, Node
from cda.errors import EvaluatorDisagreement
from cda.solver.backbone import forced
from cda.solver.backend import Deadline, Lit, Model, _OutOfTime, integer_weights, make_backend, selector
from cda.solver.hypotheses import RankedHypothesis, Ranking, rank_hypotheses
from cda.solver.information import expected_gains, rounded
from cda.solver.recheck import CheckedBackend

__all__ = ["Falsifier", "ComputedRecord", "Records", "compute_records", "solve_records", "hypothesis_cap", "entailed", "hypothesis_record", "cite"]

NO_FALSIFIER = "predicts no unobserved observable: no single observation can refute it"


class Falsifier(NamedTuple):
    """An unobserved observable h determines: ``predicted`` is h's value; observing the other
    one refutes h. ``gain``: expected information gain (bits) of observing it. (A named tuple:
    a record lists up to every observable, and a frozen dataclass took 65 ms a step to build
    5,000 of them.)"""

    observable: str
    predicted: bool
    gain: float

    @property
    def refuting(self) -> str:
        """The observation that would refute the hypothesis, in the DSL's words."""
        return f"{'not ' if self.predicted else ''}{self.observable}"


@dataclass(frozen=True)
class ComputedRecord:
    """One hypothesis's record, with clause names rather than prose (see :func:`hypothesis_record`)."""

    id: str
    assumed: tuple[str, ...]
    posterior: float
    violated: tuple[str, ...]
    evidence_for: tuple[str, ...]  # observation clause names, source order
    unexplained: tuple[str, ...]  # observation clause names h leaves open
    falsifiers: tuple[Falsifier, ...]  # observable order of the problem
    next_probe: Falsifier | None


@dataclass
class Records:
    """Every record, the gains of every unobserved observable, and the step rule's choice."""

    records: list[ComputedRecord]
    tests: list[NextTest]
    selected: str | None
    reason: str
    considered: int
    #: unobserved observables every hypothesis considered forces to one and the same value
    agreed: dict[str, bool] = field(default_factory=dict)
    #: each hypothesis considered: the unobserved observables it determines
    fixed: list[set[str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def entailed(solver: CheckedBackend, lits: Sequence[Lit], nodes: dict[str, Node], model: Model | None = None) -> set[str]:
    """The names of ``nodes`` true in every model under ``lits`` (which must have a model;
    ``model`` is one when the caller has it, already re-checked, and saves a call).

    One call asks for a model falsifying any node still open; unsat settles them all, a model
    frees every node it falsifies.
    """
    f = solver.problem.factory
    if model is None:
        first = solver.backend.check(list(lits))
        status = SolverStatus(first.status)
        if status is SolverStatus.UNKNOWN:
            raise _OutOfTime()
        if status is SolverStatus.UNSAT:
            raise EvaluatorDisagreement(f"{solver.name}: no model under the assumptions of an entailment question")
        model = solver.verified(first.model, lits, "entailment")
    names = list(nodes)
    open_names = [n for n, v in zip(names, evaluate_many([nodes[n] for n in names], model)) if v]
    while open_names:
        flip = solver.add_clause(f.or_([f.not_(nodes[n]) for n in open_names]))
        out = solver.backend.check([*lits, (flip, True)])
        status = SolverStatus(out.status)
        if status is SolverStatus.UNKNOWN:
            raise _OutOfTime()
        if status is SolverStatus.UNSAT:
            break
        other = solver.verified(out.model, lits, "a model falsifying some observation")
        values = evaluate_many([nodes[n] for n in open_names], other)
        still = [n for n, v in zip(open_names, values) if v]
        if len(still) == len(open_names):
            raise EvaluatorDisagreement(f"{solver.name} returned a model that falsifies none of the nodes it had to")
        open_names = still
    return set(open_names)


def _entailed_memo(solver: CheckedBackend, lits: Sequence[Lit], nodes: dict[str, Node],
                   memo: dict[tuple[frozenset[str] | None, str], bool], key: frozenset[str] | None,
                   model: Model | None) -> set[str]:
    """:func:`entailed`, asking only about the nodes ``memo`` has no answer for under ``key``
    (a hypothesis, or ``None`` for H alone): whether H ∧ h entails an observation does not
    depend on the other observations, so an investigation asks it once per observation."""
    missing = {n: node for n, node in nodes.items() if (key, n) not in memo}
    if missing:
        yes = entailed(solver, lits, missing, model)
        for n in missing:
            memo[(key, n)] = n in yes
    return {n for n in nodes if memo[(key, n)]}


def hypothesis_cap(problem: GroundProblem, max_hypotheses: int) -> int:
    """The engine's enumeration cap for ``problem`` (:data:`cda.solver.engine.MAX_MODEL_VALUES`)."""
    from cda.solver.engine import MAX_MODEL_VALUES

    width = len(problem.atoms) + len(problem.numvars)
    return min(max_hypotheses, max(1, MAX_MODEL_VALUES // max(1, width)))


def solve_records(problem: GroundProblem, backend_name: str, top: int, *, seed: int = 0,
                  timeout: float | None = None, max_hypotheses: int = 10_000) -> Records | None:
    """The records of ``problem``'s ``top`` hypotheses on a fresh backend, ranked as the engine
    ranks them (so ``h1``… are the engine's ids); ``None`` when H ∧ O has no model. Raises
    :class:`~cda.contracts.deadline.OutOfTime` when ``timeout`` passes."""
    deadline = Deadline(timeout)
    backend = make_backend(backend_name, problem, seed=seed, deadline=deadline, weights=integer_weights(problem))
    solver = CheckedBackend(problem, backend)
    if not solver.holds(solver.base, "hard clauses and observations"):
        return None
    return compute_records(solver, rank_hypotheses(solver, hypothesis_cap(problem, max_hypotheses)), top)


def compute_records(
    solver: CheckedBackend,
    ranking: Ranking,
    top: int,
    limit: int = 256,
    observations: Sequence[Clause] | None = None,
    fixed: list[set[str]] | None = None,
    entailments: dict[tuple[frozenset[str] | None, str], bool] | None = None,
) -> Records:
    """The records of the ``top`` most probable hypotheses of ``ranking``, gains over at most
    ``limit`` of them. ``observations``: the observation clauses switched on by ``solver.base``
    (default: those of the problem); every other clause of the problem is H. ``fixed``: the
    backbone of each hypothesis considered over the unobserved observables, when the caller
    knows it already (:class:`Records` returns it). ``entailments``: answers kept from an earlier
    call on the same clauses (an investigation's), filled in as they are asked."""
    problem = solver.problem
    if observations is None:
        observations = [c for c in problem.clauses if c.kind == "observation"]
    obs_names = {c.name for c in observations}
    hard_lits: list[Lit] = [(selector(c.name), True) for c in problem.clauses if c.name not in obs_names
                            and c.kind != "observation"]
    obs_nodes = {c.name: c.node for c in observations}
    order = {c.name: i for i, c in enumerate(observations)}
    candidates = [o for o in problem.observable_atoms if o not in problem.observed]
    considered = ranking.hypotheses[:limit]
    weights = ranking.posteriors[: len(considered)]
    total = math.fsum(weights)
    prior = [w / total for w in weights] if total > 0 else []
    if fixed is None or len(fixed) != len(considered):
        fixed = [forced(solver, solver.base + h.lits(solver.hyps), h.model, candidates) if candidates else set()
                 for h in considered]
    gains: dict[str, float] = {}
    tests: list[NextTest] = []
    agreed: dict[str, bool] = {}
    if candidates and considered:
        import numpy as np  # the gains of every observable at once: a loop was 0.5 s at 1,000 × 1,000

        lik = _likelihoods(np, considered, fixed, candidates)
        gain_of, p_true = expected_gains(prior, lik)
        every = (lik == 1.0).all(axis=0).tolist(), (lik == 0.0).all(axis=0).tolist()
        agreed = {o: yes for o, yes, no in zip(candidates, *every) if yes or no}
        for obs, g, p1 in zip(candidates, gain_of.tolist(), p_true.tolist()):
            gains[obs] = rounded(g)
            tests.append(NextTest(observable=obs, expected_information_gain=rounded(g),
                                  probability_true=rounded(min(1.0, max(0.0, p1)))))
    tests.sort(key=lambda t: (-t.expected_information_gain, t.observable))
    memo = entailments if entailments is not None else {}
    # a model of H ∧ O ∧ h is one of H ∧ h and of H: the first model of each question
    first = ranking.hypotheses[0].model if ranking.hypotheses else None
    by_h = _entailed_memo(solver, hard_lits, obs_nodes, memo, None, first)
    out: list[ComputedRecord] = []
    for i, (h, p) in enumerate(zip(ranking.hypotheses[:top], ranking.posteriors)):
        out.append(_record(solver, f"h{i + 1}", h, p, hard_lits, obs_nodes, by_h, order, candidates,
                           fixed[i] if i < len(fixed) else None, gains, memo))
    selected, reason = step_rule(out)
    notes = [] if len(considered) == len(ranking) else [
        f"gains computed over the {len(considered)} most probable hypotheses"]
    return Records(records=out, tests=tests, selected=selected, reason=reason, considered=len(considered),
                   agreed=agreed, fixed=fixed, notes=notes)


def _likelihoods(np: Any, considered: Sequence[RankedHypothesis], fixed: Sequence[set[str]],
                 candidates: list[str]) -> Any:
    """P(o | h) for every hypothesis (rows) and candidate (columns): its value when h determines
    o, else ½. Read a row at a time (``itemgetter``), the usual case (h determines every
    candidate) without a loop in Python."""
    from operator import itemgetter

    values = itemgetter(*candidates)
    lik = np.empty((len(considered), len(candidates)))
    for i, (h, known) in enumerate(zip(considered, fixed)):
        got = values(h.model)
        lik[i] = got if len(candidates) > 1 else (got,)
        if len(known) < len(candidates):
            lik[i, [j for j, o in enumerate(candidates) if o not in known]] = 0.5
    return lik


def _record(
    solver: CheckedBackend, hid: str, h: RankedHypothesis, p: float, hard_lits: list[Lit],
    obs_nodes: dict[str, Node], by_h: set[str], order: dict[str, int], candidates: list[str],
    known: set[str] | None, gains: dict[str, float], memo: dict[tuple[frozenset[str] | None, str], bool],
) -> ComputedRecord:
    lits = hard_lits + h.lits(solver.hyps)
    explained = _entailed_memo(solver, lits, obs_nodes, memo, h.assumed, h.model)
    rest = {n: node for n, node in obs_nodes.items() if n not in explained and n not in by_h}
    # an observation H ∧ O ∧ h holds is not contradicted by H ∧ h (h is consistent with O), so the
    # rest is open under h: unexplained
    evidence_for = tuple(sorted(explained - by_h, key=order.__getitem__))
    unexplained = tuple(sorted(rest, key=order.__getitem__))
    if known is None:  # beyond the gains' limit: its backbone asked on its own
        known = forced(solver, solver.base + h.lits(solver.hyps), h.model, candidates) if candidates else set()
    falsifiers = tuple(Falsifier(o, bool(h.model[o]), gains.get(o, 0.0)) for o in candidates if o in known)
    useful = [f for f in falsifiers if f.gain > 0]
    probe = min(useful, key=lambda f: (-f.gain, f.observable)) if useful else None
    return ComputedRecord(
        id=hid, assumed=tuple(sorted(h.assumed)), posterior=rounded(p), violated=tuple(h.violated),
        evidence_for=evidence_for, unexplained=unexplained, falsifiers=falsifiers, next_probe=probe,
    )


def step_rule(records: Sequence[ComputedRecord]) -> tuple[str | None, str]:
    """Seed 004's step rule: the hypothesis whose next probe gives the greatest expected
    reduction in uncertainty (ties: the more probable, i.e. earlier); why, in one sentence."""
    if not records:
        return None, "no hypothesis is consistent with the hard clauses and observations"
    probing = [r for r in records if r.next_probe is not None]
    if not probing:
        best = records[0]
        return best.id, (
            f"no hypothesis has a probe that would tell it from the others; {best.id} is the most probable "
            f"(posterior {best.posterior:g})"
        )
    best = min(probing, key=lambda r: -r.next_probe.gain if r.next_probe else 0.0)
    probe = best.next_probe
    assert probe is not None
    return best.id, (
        f"{best.id}'s next probe, {probe.observable}, has the greatest expected information gain "
        f"({probe.gain:g} bits) among the hypotheses' next probes; {best.id} predicts "
        f"{'' if probe.predicted else 'not '}{probe.observable}, so observing {probe.refuting} refutes it"
    )


def _line(lines: Sequence[str] | None, line: int) -> str | None:
    return lines[line - 1].strip() if lines is not None and 0 < line <= len(lines) else None


def _span(source: str, line: int, excerpt: str) -> SpanRef:
    return SpanRef(source=f"{source}:line:{line}" if line else source, excerpt=excerpt)


def cite(clause: Clause, source: str, lines: Sequence[str] | None, prefix: str = "") -> SpanRef:
    """A clause as a citation: its name and its source line (``source`` names where it is)."""
    text = _line(lines, clause.line)
    return _span(source, clause.line, prefix + (f"{clause.name}: {text}" if text else clause.name))


def hypothesis_record(rec: ComputedRecord, clauses: dict[str, Clause], soft_lines: dict[str, int],
                      source: str, lines: Sequence[str] | None) -> HypothesisRecord:
    """The seed's record of ``rec``: evidence cited (clause name and source line), falsifiers
    as the observations that would refute it, the next probe as the observation to make."""
    against: list[str | SpanRef] = []
    for name in rec.violated:
        line = soft_lines.get(name, 0)
        text = _line(lines, line)
        against.append(_span(source, line, f"violates soft clause {name}" + (f": {text}" if text else "")))
    against.extend(cite(clauses[n], source, lines, "unexplained ") for n in rec.unexplained)
    return HypothesisRecord(
        id=rec.id,
        statement="assume " + (", ".join(rec.assumed) or "nothing"),
        assumptions=list(rec.assumed),
        evidence_for=[cite(clauses[n], source, lines) for n in rec.evidence_for],
        evidence_against=against,
        falsifiers=[f"observe {f.refuting}" for f in rec.falsifiers],
        falsifiers_note=None if rec.falsifiers else NO_FALSIFIER,
        confidence=rec.posterior,
        next_probe=rec.next_probe.observable if rec.next_probe else None,
    )
