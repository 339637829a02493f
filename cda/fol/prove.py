"""Proving and refuting first-order claims: supported / refuted / inconclusive, honestly.

For premises P1…Pn and a claim C (DESIGN.md, "Verdicts"):

* **supported** when P ∧ ¬C is unsatisfiable; ``premises_used`` is the canonical minimal set
  (QuickXplain over the premises in source order, with ¬C as fixed context);
* **refuted** when P ∧ C is unsatisfiable; ``premises_used`` is found the same way with C as
  the fixed context;
* **inconclusive** otherwise, with two small worlds — one where C holds, one where it fails —
  each re-checked against every premise by the independent evaluator
  (:func:`cda.fol.structures.evaluate`) before it is shown. A solver ``unknown`` or a timeout is
  also *inconclusive* (``unknown`` is true and ``reason`` says why), never supported or refuted.
  When the premises contradict each other, ``conflict`` holds a minimal inconsistent subset.

Backends: every question is put to a backend of the engine's registry, as literals of its
one scheme (:mod:`cda.fol.backends`). Open-domain FOL goes to ``fol-z3``, compiled to z3 with
one uninterpreted sort, one z3 function per predicate and function symbol, constants as z3
constants; z3 decides the effectively propositional (EPR) fragment. Outside it, z3 may answer
``unknown``; then ``fol-finite`` (domains of 1…6 elements, quantifiers expanded) looks for the
worlds. ASP cannot decide open-domain FOL, so ``clingo`` is offered only when the domain is
declared finite: the problem is then grounded (:func:`cda.fol.to_ir.ground_claim`) and solved
by the ordinary clingo backend. ``cross_check=True`` solves again on the other backend (for an open domain,
clingo over the Herbrand universe of an EPR problem) and lowers a verdict the two disagree on.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import suppress
from dataclasses import replace
from itertools import product
from typing import TYPE_CHECKING, Any

from cda.contracts import limits
from cda.contracts.deadline import Deadline, stop_signal
from cda.contracts.fol import ProofResult, World
from cda.contracts.status import VerdictStatus
from cda.engine import Backend, claim_key, make_backend, quickxplain, selector
from cda.errors import BackendUnavailable, BackendUnsupported, CDAError, EvaluatorDisagreement
from cda.fol.backends import FINITE_SEARCH_SIZES, FolQuestion, search_sizes
from cda.fol.budget import OutOfTime, spend
from cda.fol.fragments import Fragment, fragment
from cda.fol.parse import build_problem
from cda.fol.structures import Structure, evaluate, minimise
from cda.fol.syntax import FOLProblem, Statement
from cda.fol.to_z3 import AtomValue, Check

if TYPE_CHECKING:  # grounding (cda.fol.to_ir, the IR) only for declared domains and cross-checks
    from cda.fol.to_ir import GroundedClaim

__all__ = [
    "World",
    "ProofResult",
    "prove",
    "prove_all",
    "choose_fol_backend",
    "OPEN_DOMAIN_NOTE",
    "FINITE_SEARCH_SIZES",
    "checked_timeout",
    "search_sizes",
]

#: the router's one sentence about open domains
OPEN_DOMAIN_NOTE = (
    "ASP (clingo) cannot decide first-order logic over an open domain, so z3 decides this problem."
)


# ---- routing --------------------------------------------------------------------------------
def choose_fol_backend(problem: FOLProblem, requested: str = "auto") -> tuple[str, str | None]:
    """The backend for ``problem`` and the router's note, if any.

    >>> p = build_problem(["∀x (Cat(x) → Pet(x))"], "Pet(tom)")
    >>> choose_fol_backend(p, "auto")[1]
    'ASP (clingo) cannot decide first-order logic over an open domain, so z3 decides this problem.'
    >>> choose_fol_backend(build_problem(["Cat(tom)"], "Cat(tom)", domain=["tom"]), "clingo")
    ('clingo', None)
    """
    if requested not in ("auto", "z3", "clingo"):
        raise BackendUnsupported(f"unknown backend '{requested}' (choose auto, z3, clingo)")
    if problem.domain is None:
        if requested == "clingo":
            raise BackendUnsupported(
                "ASP (clingo) cannot decide first-order logic over an open domain; declare a finite "
                "domain ('domain a, b, c') or use backend='z3'"
            )
        return "z3", (OPEN_DOMAIN_NOTE if requested == "auto" else None)
    return ("z3" if requested == "auto" else requested), None


# ---- asking: "are these premises, with the claim true/false/absent, satisfiable?" --------------


class _Oracle:
    """The decision's one question, put to a backend of the engine's registry as literals of its
    scheme: premises by their selectors, the claim by its key, fixed atoms by name."""

    def __init__(self, backend: Backend, structure: Callable[[Any], Structure] | None, *,
                 takes: Callable[[str], bool] = lambda key: True) -> None:
        self.backend = backend
        self.name = backend.name
        self._structure = structure
        self._takes = takes  # whether the backend knows an atom (a grounded problem leaves out unmentioned ones)

    @property
    def open_domain(self) -> bool:
        """Whether this is z3 deciding an open domain (where the finite-model search may help)."""
        return bool(getattr(self.backend, "open_domain", False))

    def check(self, premises: Sequence[str], claim: bool | None, atoms: Sequence[AtomValue] = ()) -> Check:
        """``sat``/``unsat``/``unknown`` for the named premises with the claim true, false or
        absent, and (declared domains) the ground ``atoms`` fixed to the values given."""
        lits = [(selector(n), True) for n in premises]
        if claim is not None:
            lits.append((claim_key("claim" if claim else "negated"), True))
        if atoms:
            from cda.fol.to_ir import atom_name  # atoms are fixed only over a declared domain
        for pred, args, value in atoms:
            key = atom_name(pred, args)
            if self._takes(key):  # an atom no formula mentions is free (and shown false)
                lits.append((key, value))
        try:
            out = self.backend.check(lits)
        except OutOfTime:
            out = None
        deadline: Deadline | None = getattr(self.backend, "deadline", None)
        stopped = deadline is not None and deadline.cancelled()  # a cancel says who stopped it, not "time"
        if out is None:
            return "unknown", None, deadline.why() if stopped and deadline is not None else "time ran out"
        if out.status == "unknown":
            if stopped and deadline is not None:
                return "unknown", None, f"{self.name} returned unknown ({deadline.why()})"
            return "unknown", None, out.reason or f"{self.name} returned unknown (time ran out)"
        return out.status, out.witness if out.witness is not None else out.model, ""

    def structure(self, model: Any) -> Structure:
        """The finite structure a ``sat`` answer's model describes."""
        assert self._structure is not None
        return self._structure(model)

    def core(self) -> tuple[list[str], bool | None] | None:
        """After an ``unsat`` answer: the premises it rests on and the claim's value if it
        rests on the claim (None: the backend cannot say; the question is then its own core)."""
        core = getattr(self.backend, "core", None)
        return core() if core is not None else None

    def satisfied(self, model: Any) -> tuple[list[str], bool | None]:
        """The premises a ``sat`` answer's model is known to make true beyond those asked, and
        the claim's value there (None: not known); nothing when the backend cannot say."""
        satisfied = getattr(self.backend, "satisfied", None)
        return satisfied(model) if satisfied is not None else ([], None)


class _GroundOracle(_Oracle):
    """The problem grounded to the IR and asked of an ordinary backend (clingo or z3)."""

    def __init__(self, problem: FOLProblem, claim: Statement, deadline: Deadline, backend: str) -> None:
        from cda.fol.to_ir import ground_claim

        self.grounded: GroundedClaim = ground_claim(problem, claim, deadline)
        built = make_backend(backend, self.grounded.problem, seed=0, deadline=deadline, weights={})
        super().__init__(built, None, takes=self.grounded.problem.atoms.__contains__)

    def structure(self, model: Any) -> Structure:
        # overridden, not passed in: a callable over self would make a cycle that keeps the
        # solver alive until the cyclic collector runs
        from cda.fol.to_ir import herbrand_structure

        return herbrand_structure(self.grounded, model)


def _fol_oracle(name: str, question: FolQuestion, deadline: Deadline) -> _Oracle:
    """A first-order backend of the registry (``fol-z3``, ``fol-finite``) for ``question``."""
    backend = make_backend(name, question, seed=0, deadline=deadline, weights={})
    return _Oracle(backend, backend.structure)  # type: ignore[attr-defined]


# ---- the decision -----------------------------------------------------------------------
class _Undecided(CDAError):
    """Internal: an oracle call inside QuickXplain came back unknown."""


def _world(s: Structure, claim_holds: bool, problem: FOLProblem) -> World:
    order = {name: i for i, name in enumerate(s.domain)}
    atoms: list[str] = []
    for p in problem.signature.predicates:
        rows = sorted(s.relations.get(p, frozenset()), key=lambda r: [order[x] for x in r])
        atoms.extend(f"{p}({', '.join(r)})" if r else p for r in rows)
    functions = [
        f"{f}({', '.join(args)}) = {v}"
        for f, table in s.functions.items()
        for args, v in sorted(table.items(), key=lambda kv: [order[x] for x in kv[0]])
    ]
    aliases = {c: e for c, e in s.constants.items() if c != e}
    return World(claim_holds=claim_holds, domain=list(s.domain), aliases=aliases, functions=functions, true_atoms=atoms)


def _recheck(s: Structure, problem: FOLProblem, claim: Statement, claim_holds: bool, who: str, deadline: Deadline) -> None:
    """The independent evaluator's verdict on a world a solver returned: every premise true,
    the claim ``claim_holds``, and under the unique-names reading no two constants alike."""
    for st in problem.premises:
        if not evaluate(st.formula, s, deadline=deadline):
            raise EvaluatorDisagreement(f"{who} returned a world in which premise {st.name} is false")
    if evaluate(claim.formula, s, deadline=deadline) != claim_holds:
        raise EvaluatorDisagreement(f"{who} returned a world in which the claim is {not claim_holds}")
    if problem.unique_names and len(set(s.constants.values())) != len(s.constants):
        raise EvaluatorDisagreement(f"{who} returned a world in which two constants denote one element")


def _verified(
    s: Structure,
    problem: FOLProblem,
    claim: Statement,
    claim_holds: bool,
    who: str,
    deadline: Deadline,
    oracle: _Oracle | None = None,
    notes: list[str] | None = None,
) -> Structure:
    """Re-check a world with the independent evaluator, then make it small. Over a declared
    domain, with the ``oracle`` that found it: the canonical world (:func:`_least_world`, the
    same on every backend), re-checked in turn; otherwise (or when that runs out of time) the
    world shrunk by :func:`~cda.fol.structures.minimise`."""
    _recheck(s, problem, claim, claim_holds, who, deadline)
    if oracle is not None and problem.domain is not None:
        least = _least_world(oracle, problem, claim_holds, s, deadline)
        if least is not None:
            _recheck(least, problem, claim, claim_holds, who, deadline)
            return least
        if notes is not None:
            notes.append(f"{_NOT_CANONICAL} (a solver call was undecided); it may differ by backend")
    hold = [st.formula for st in problem.premises]
    return minimise(
        s, hold + [claim.formula] if claim_holds else hold, [] if claim_holds else [claim.formula],
        deadline=deadline, keep_elements=problem.domain is not None,
    )


_NOT_CANONICAL = "a world is not the canonical one"


def _least_world(
    oracle: _Oracle, problem: FOLProblem, claim_holds: bool, start: Structure, deadline: Deadline
) -> Structure | None:
    """The least world over the declared domain in a fixed order: the ground atoms of each
    predicate (signature order), their tuples in domain order, each false unless the premises
    and the claim's value force it true given the atoms before it. It is unique, so z3 and
    clingo show the same bytes; None when a solver call is undecided.

    ``start`` is a model of the prefix fixed so far; an atom it already makes false costs no
    solver call, so the calls are at most the true atoms met on the way.
    """
    names = [st.name for st in problem.premises]
    current, fixed = start, list[AtomValue]()
    for pred, n in problem.signature.predicates.items():
        for args in product(problem.domain or (), repeat=n):
            spend(deadline, "choosing the canonical world")
            if args not in current.relations.get(pred, frozenset()):
                fixed.append((pred, args, False))
                continue
            status, model, _ = oracle.check(names, claim_holds, [*fixed, (pred, args, False)])
            if status == "unknown":
                return None
            fixed.append((pred, args, status == "unsat"))
            if status == "sat":
                current = oracle.structure(model)
    return current


class _Decision:
    """One claim's questions, each asked once. What an answer implies is kept too: a set of
    premises that is unsatisfiable (with the claim's value, or without the claim) stays so in
    every larger set, and a world that satisfies some premises satisfies every subset of them,
    so QuickXplain's questions that an earlier answer settles cost no solver call. The premise
    sets come from the backend where it can say (z3's unsat core; the premises z3 evaluates
    true in a model), else from the question itself. The answers are those the solver would
    give (a decision procedure is monotone), so the premises listed do not change
    (docs/fol.md, "Minimal premise sets")."""

    #: whether earlier answers settle later questions (off: every question goes to the solver;
    #: the tests compare the two)
    infer = True

    def __init__(self, oracle: _Oracle, problem: FOLProblem, claim: Statement, backend: str) -> None:
        self.oracle = oracle
        self.problem = problem
        self.claim = claim
        self.backend = backend
        self.names = [st.name for st in problem.premises]
        self._memo: dict[tuple[frozenset[str], bool | None], Check] = {}
        #: (premises, claim value or None) found unsatisfiable / satisfiable
        self._unsat: list[tuple[frozenset[str], bool | None]] = []
        self._sat: list[tuple[frozenset[str], bool | None]] = []
        self.notes: list[str] = []

    def ask(self, premises: Sequence[str], claim: bool | None) -> Check:
        """The solver's answer, its model included (a question asked once)."""
        key = (frozenset(premises), claim)
        if key not in self._memo:
            self._memo[key] = answer = self.oracle.check(premises, claim)
            self._learn(key[0], claim, answer, read_model=False)
        return self._memo[key]

    def is_sat(self, premises: Sequence[str], claim: bool | None) -> bool:
        """Whether ``premises`` with the claim ``claim`` are satisfiable, from an earlier answer
        where one implies it (no model); ``_Undecided`` when the solver cannot say."""
        key = (frozenset(premises), claim)
        known = self._memo.get(key)
        if known is None:
            chosen, value = key
            if not self.infer:
                pass
            elif any(core <= chosen and c in (None, value) for core, c in self._unsat):
                return False
            elif any(chosen <= held and value in (None, c) for held, c in self._sat):
                return True
            self._memo[key] = known = self.oracle.check(premises, claim)
            self._learn(chosen, claim, known, read_model=True)
        if known[0] == "unknown":
            raise _Undecided()
        return known[0] == "sat"

    def _learn(self, chosen: frozenset[str], claim: bool | None, answer: Check, read_model: bool) -> None:
        """Keep what ``answer`` implies. ``read_model``: whether the model may be evaluated
        (z3 completes a model it evaluates; one that is read back as a world is left alone)."""
        status, model, _ = answer
        if status == "unsat":
            core = self.oracle.core()
            self._unsat.append((frozenset(core[0]), core[1]) if core is not None else (chosen, claim))
        elif status == "sat":
            held, value = self.oracle.satisfied(model) if read_model else ([], claim)
            self._sat.append((chosen.union(held), claim if claim is not None else value))

    def core(self, claim: bool | None) -> tuple[list[str], bool]:
        def is_sat(subset: Sequence[str]) -> bool:
            return self.is_sat(subset, claim)

        if len(self.names) > 1 and self.infer:
            # QuickXplain asks about the first half of the premises once it has asked about
            # none; asked first, a model of that half also says that none is satisfiable. An
            # unknown is kept and raised only if QuickXplain gets there
            with suppress(_Undecided):
                is_sat(self.names[: len(self.names) // 2])
        try:
            found = quickxplain(self.names, is_sat)
        except _Undecided:
            self.notes.append("a solver call came back unknown while minimising; all premises are listed")
            return list(self.names), False
        return (found if found is not None else list(self.names)), True


def _result(problem: FOLProblem, claim: Statement, frag: Fragment, backend: str, **fields: Any) -> ProofResult:
    base: dict[str, Any] = dict(
        claim_name=claim.name, claim=claim.text, premises_used=[], minimal=True, conflict=None, worlds=[],
        fragment=frag.name, fragment_detail=frag.detail, backend=backend, unknown=False, cross_check=None, notes=[],
        unique_names=problem.unique_names,
    )
    base.update(fields)
    return ProofResult(**base)


def _finite_search(
    problem: FOLProblem, claim: Statement, value: bool, deadline: Deadline
) -> tuple[Structure | None, str]:
    """A model of the premises with the claim ``value`` from ``fol-finite`` (:func:`search_sizes`
    elements), re-checked; or None and why not when time ran out ("" when there is no world that
    small)."""
    oracle = _fol_oracle("fol-finite", FolQuestion(problem, claim), deadline)
    try:
        status, model, reason = oracle.check([st.name for st in problem.premises], value)
        if status == "sat":
            size = model[0]
            return _verified(oracle.structure(model), problem, claim, value, f"finite-model search (size {size})",
                             deadline), ""
    except OutOfTime as exc:
        return None, str(exc)
    return None, reason if reason.startswith("time ran out") else ""


def _decide(oracle: _Oracle, problem: FOLProblem, claim: Statement, frag: Fragment, backend: str, deadline: Deadline) -> ProofResult:
    d = _Decision(oracle, problem, claim, backend)
    names = d.names
    a_status, a_model, a_reason = d.ask(names, False)  # premises ∧ ¬claim
    b_status, b_model, b_reason = d.ask(names, True)  # premises ∧ claim
    if a_status == "unsat" and b_status == "unsat":
        conflict, minimal = d.core(None)
        return _result(
            problem, claim, frag, backend, status=VerdictStatus.INCONCLUSIVE, conflict=conflict, minimal=minimal,
            reason="the premises contradict each other, so they entail the claim and its negation alike",
            notes=d.notes,
        )
    if a_status == "unsat" or b_status == "unsat":
        supported = a_status == "unsat"
        if (b_status if supported else a_status) == "unknown":
            d.notes.append("could not confirm that the premises are consistent with the answer (unknown)")
        used, minimal = d.core(not supported)
        reason = "the premises entail the claim" if supported else "the premises entail the negation of the claim"
        return _result(
            problem, claim, frag, backend, status=VerdictStatus.settled(supported),
            premises_used=used, minimal=minimal, reason=reason, notes=d.notes,
        )
    worlds: dict[bool, Structure] = {}
    used_backend = backend
    for value, (status, model) in ((True, (b_status, b_model)), (False, (a_status, a_model))):
        if status == "sat":
            worlds[value] = _verified(oracle.structure(model), problem, claim, value, backend, deadline, oracle, d.notes)
    missing = [v for v in (True, False) if v not in worlds]
    searched = ""
    if missing and oracle.open_domain:
        for value in missing:
            found, why_not = _finite_search(problem, claim, value, deadline)
            searched = searched or why_not
            if found is not None:
                worlds[value] = found
                used_backend = f"{backend} + finite-model search"
        if used_backend != backend:
            d.notes.append("z3 could not decide one side; finite-model search (1–6 elements) found its world")
    if len(worlds) == 2:
        return _result(
            problem, claim, frag, used_backend, status=VerdictStatus.INCONCLUSIVE,
            worlds=[_world(worlds[True], True, problem), _world(worlds[False], False, problem)],
            reason="the premises allow the claim to hold and to fail", notes=d.notes,
        )
    reasons = [r for r in (a_reason, b_reason, searched) if r]
    why = "; ".join(dict.fromkeys(reasons)) or "undecided"
    if not frag.decidable:
        why += f" — the problem is outside the decidable fragments ({frag.detail})"
        if oracle.open_domain and not searched:
            sizes = search_sizes(problem)
            why += f"; no world with {sizes.start} to {sizes.stop - 1} elements settles it"
    return _result(
        problem, claim, frag, used_backend, status=VerdictStatus.INCONCLUSIVE, unknown=True,
        worlds=[_world(s, v, problem) for v, s in sorted(worlds.items(), reverse=True)],
        reason=why, notes=d.notes,
    )


def _oracle(problem: FOLProblem, claim: Statement, backend: str, deadline: Deadline, frag: Fragment) -> _Oracle:
    if backend == "clingo":
        return _GroundOracle(problem, claim, deadline, "clingo")
    cap = None
    if problem.domain is None and not frag.decidable and deadline.seconds is not None:
        cap = max(0.05, deadline.seconds / 4)  # leave time for the finite-model search
    return _fol_oracle("fol-z3", FolQuestion(problem, claim, cap), deadline)


def _can_ground(problem: FOLProblem, frag: Fragment) -> bool:
    if problem.domain is not None:
        return not problem.signature.function_symbols
    return frag.name in ("ground", "epr") and not problem.has_equality and not problem.signature.function_symbols


def _compare(first: ProofResult, second: ProofResult, worlds: bool = False) -> list[str]:
    """What two backends disagree on. Premise sets are canonical only when both were
    minimised: a side whose minimisation was cut short lists every premise instead; worlds
    are compared when both are canonical (``worlds``: a declared domain, neither cut short)."""
    fields = ["status", "unknown"]
    if first.minimal and second.minimal:
        fields += ["premises_used", "conflict"]
    if worlds and not any(n.startswith(_NOT_CANONICAL) for n in first.notes + second.notes):
        fields.append("worlds")
    diffs = []
    for field in fields:
        a, b = getattr(first, field), getattr(second, field)
        if a != b:
            if field == "worlds":
                diffs.append(f"worlds: {first.backend} and {second.backend} show different canonical worlds")
            else:
                diffs.append(f"{field}: {first.backend} says {a}, {second.backend} says {b}")
    return diffs


def _out_of_time(
    problem: FOLProblem, claim: Statement, frag: Fragment, backend: str, exc: OutOfTime, deadline: Deadline
) -> ProofResult:
    """The honest answer when the budget ran out inside FOL's own loops (grounding, quantifier
    expansion, reading or re-checking a world): inconclusive, ``unknown``, saying where."""
    if deadline.cancelled():  # a cancel (Ctrl-C, a client's), not the budget
        reason = f"{deadline.why()} {exc.where}".strip()
    else:
        budget = f" (budget {deadline.seconds:g} s)" if deadline.seconds is not None else ""
        reason = f"timeout: {exc}{budget}"
    return _result(problem, claim, frag, backend, status=VerdictStatus.INCONCLUSIVE, unknown=True, reason=reason)


def _prove_one(
    problem: FOLProblem, claim: Statement, timeout: float | None, backend: str, cross_check: bool
) -> ProofResult:
    """One claim within ``timeout``: an answer that came after it (a stage that read no clock)
    is not given as if on time, but as the budget's inconclusive (docs/fol.md, "Budgets")."""
    deadline = Deadline(checked_timeout(timeout))
    result = _within(problem, claim, deadline, backend, cross_check)
    if not result.unknown and deadline.expired():
        late = OutOfTime("before the answer was complete")
        result = _out_of_time(problem, claim, fragment(problem, claim), result.backend, late, deadline)
    # an undecided claim is a cut when the budget (or a cancel) ended it; else the solvers could not decide
    result.partial = result.unknown and deadline.expired()
    return result


def _within(problem: FOLProblem, claim: Statement, deadline: Deadline, backend: str, cross_check: bool) -> ProofResult:
    name, note = choose_fol_backend(problem, backend)
    frag = fragment(problem, claim)
    try:
        result = _decide(_oracle(problem, claim, name, deadline, frag), problem, claim, frag, name, deadline)
    except Exception as error:  # noqa: BLE001 - a stop (a solver interrupted by a cancel), or raised again
        result = _out_of_time(problem, claim, frag, name, stop_signal(error, deadline), deadline)
    short = result.unknown or not result.minimal  # undecided, or its premise set not minimised
    if short and name == "z3" and problem.domain is None and _can_ground(problem, frag) and deadline.remaining() != 0:
        # EPR without equality or functions: its Herbrand universe is finite and grounding over
        # it decides the problem, where z3's quantifier instantiation may give up
        try:
            grounded = _decide(_GroundOracle(problem, claim, deadline, "z3"), problem, claim, frag, name, deadline)
        except Exception as error:  # noqa: BLE001 - as above
            grounded = _out_of_time(problem, claim, frag, name, stop_signal(error, deadline), deadline)
        if not grounded.unknown and (grounded.minimal or result.unknown):
            what = result.reason if result.unknown else "a call came back unknown while minimising"
            grounded.notes.insert(
                0, f"z3's quantifier instantiation did not decide ({what}); decided over the Herbrand universe"
            )
            result = grounded
    if note:
        result.notes.insert(0, note)
    if not cross_check:
        return result
    other = "clingo" if name == "z3" else "z3"
    if result.unknown or not _can_ground(problem, frag):
        why = "a side is undecided" if result.unknown else "the problem cannot be grounded (not EPR, or equality/functions)"
        result.cross_check = "skipped"
        result.notes.append(f"cross-check skipped: {why}")
        return result
    try:
        second = _decide(_oracle(problem, claim, other, deadline, frag), problem, claim, frag, other, deadline)
    except (BackendUnavailable, BackendUnsupported, OutOfTime) as exc:
        result.cross_check = "skipped"
        result.notes.append(f"cross-check skipped: {exc}")
        return result
    diffs = _compare(result, second, worlds=problem.domain is not None)
    if second.unknown:
        result.cross_check = "skipped"
        result.notes.append(f"cross-check skipped: {other} did not decide ({second.reason})")
    elif diffs:
        result.cross_check = "disagree"
        result.notes.extend(f"BACKENDS DISAGREE: {d}" for d in diffs)
        if result.status != VerdictStatus.INCONCLUSIVE:
            result.status = VerdictStatus.INCONCLUSIVE
            result.reason = f"{name} and {other} disagree; see notes"
    else:
        result.cross_check = "agree"
        how = "over the declared domain" if problem.domain is not None else "grounded over the Herbrand universe"
        result.notes.append(f"cross-checked: {other} ({how}) agrees")
    return result


def checked_timeout(timeout: float | None) -> float | None:
    """``timeout`` when the engine would take it (seconds, 0 or more, ``inf`` or None for no
    limit); else ``OptionError`` with the same message ``cda solve`` gives (one check, the
    engine's: :class:`cda.engine.Options` checks it with :func:`cda.contracts.limits.seconds` too;
    building the engine's options here would import the solve engine, which ``cda prove`` never runs).

    >>> checked_timeout(float("nan"))
    Traceback (most recent call last):
    ...
    cda.errors.OptionError: timeout must be a number of seconds, 0 or more (inf for no limit), not nan
    """
    if timeout is None:
        return None
    return limits.seconds("timeout", timeout)  # as the engine keeps it: 10**400 s is a float, no limit


def prove(
    premises: Sequence[str | tuple[str, str]] | FOLProblem,
    claim: str | tuple[str, str] | Statement | None = None,
    timeout: float | None = 10.0,
    *,
    backend: str = "auto",
    domain: Sequence[str] | None = None,
    cross_check: bool = False,
    unique_names: bool = False,
) -> ProofResult:
    """Decide whether ``premises`` support, refute, or leave open ``claim``.

    ``premises`` are formula strings or ``(name, formula)`` pairs (unnamed ones are ``p1, p2,
    …``), or an already checked :class:`~cda.fol.syntax.FOLProblem` (then ``claim`` may be
    one of its claims or None for its only claim). Raises ``DSLSyntaxError``/``DSLTypeError``
    for malformed logic; never guesses. ``unique_names``: read distinct constants as distinct
    objects (an axiom of the reading, not a premise: it is never listed in ``premises_used``).

    >>> r = prove(["∀x (Cat(x) → Pet(x))", "Cat(tom)", "Dog(rex)"], "Pet(tom)")
    >>> r.status, r.premises_used, r.fragment
    ('supported', ['p1', 'p2'], 'epr')
    >>> r = prove(["∀x (Cat(x) → Pet(x))", "Cat(tom)"], "Pet(rex)")
    >>> r.status, [w.claim_holds for w in r.worlds]
    ('inconclusive', [True, False])
    """
    if isinstance(premises, FOLProblem):
        problem = premises
        if isinstance(claim, Statement):
            target = claim
        elif claim is None and len(problem.claims) == 1:
            target = problem.claims[0]
        else:
            raise CDAError("pass one of the problem's claims (or a problem with exactly one claim)")
    else:
        if claim is None or isinstance(claim, Statement):
            raise CDAError("a claim is required")
        problem = build_problem(premises, [claim], domain=domain)
        target = problem.claims[0]
    return _prove_one(_reading(problem, unique_names), target, timeout, backend, cross_check)


def prove_all(
    problem: FOLProblem,
    timeout: float | None = 10.0,
    *,
    backend: str = "auto",
    cross_check: bool = False,
    unique_names: bool = False,
) -> list[ProofResult]:
    """Every claim of ``problem``, each against all premises; ``timeout`` is per claim."""
    checked_timeout(timeout)
    problem = _reading(problem, unique_names)
    return [_prove_one(problem, c, timeout, backend, cross_check) for c in problem.claims]


def _reading(problem: FOLProblem, unique_names: bool) -> FOLProblem:
    """``problem`` under the unique-names reading when asked for (a copy; the caller's is kept)."""
    return replace(problem, unique_names=True) if unique_names and not problem.unique_names else problem
