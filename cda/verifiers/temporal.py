"""Temporal verifier: evaluate ``before`` / ``within`` claims on concrete timestamps.

The solver decides temporal clauses symbolically (difference constraints in z3 or clingo-dl);
this check takes actual event times — observed ones, or the times of one model — and
evaluates the claim by plain integer and rational arithmetic, with durations converted to
seconds by pint on a registry of its own (:func:`cda.verifiers.units_check.to_seconds`).

Semantics follow ``docs/dsl.md``: ``before(event:X, event:Y)`` is ``t(X) < t(Y)``;
``within(event:X, d of event:Y)`` is ``|t(X) − t(Y)| ≤ d``; ``time(event:X) − time(event:Y)
<= 2 h`` compares seconds. ``not``/``and``/``or``/``implies``/``iff``/``xor`` and cardinality
combine them. Anything else (a Boolean atom, a metric, a path) makes the claim inconclusive,
as does an event with no time: nothing is guessed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from fractions import Fraction
from typing import Any

from cda.contracts.verification import VerifierOutcome
from cda.encodings import ast as A
from cda.encodings.parse import parse_clause
from cda.errors import DSLError
from cda.verifiers.units_check import format_number, to_seconds

__all__ = ["verify_temporal", "verify_temporal_formulas", "event_times"]

_OPS = {
    "<=": lambda a, b: a <= b,
    "<": lambda a, b: a < b,
    ">=": lambda a, b: a >= b,
    ">": lambda a, b: a > b,
    "=": lambda a, b: a == b,
    "!=": lambda a, b: a != b,
}


class _Inconclusive(Exception):
    """The claim cannot be evaluated on the given times; the message says why."""


def event_times(model: Mapping[str, object]) -> dict[str, int]:
    """Event times from a backend model (``{"event:deploy": 120, "down(db)": True, …}``).

    :class:`~cda.contracts.result.SolveResult` carries no numeric values, so this reads the raw
    model of :mod:`cda.solver.backend` (keys ``event:<name>``, whole seconds).

    >>> event_times({"event:deploy": 120, "event:alarm": 180, "metric:cost": 5, "down(db)": True})
    {'alarm': 180, 'deploy': 120}
    """
    out: dict[str, int] = {}
    for key in sorted(model):
        value = model[key]
        if key.startswith("event:") and isinstance(value, int) and not isinstance(value, bool):
            out[key.removeprefix("event:")] = value
    return out


class _Evaluator:
    """Evaluates one claim; records one readable fragment per temporal atom, in source order."""

    def __init__(self, events: Mapping[str, int]) -> None:
        self.events = events
        self.fragments: list[str] = []
        self.used: dict[str, int] = {}

    def time(self, ref: A.ARef) -> int:
        if ref.name not in self.events:
            raise _Inconclusive(f"no time is known for event '{ref.name}'")
        value = self.events[ref.name]
        if isinstance(value, bool) or not isinstance(value, int):
            raise _Inconclusive(f"the time of event '{ref.name}' is not a whole number of seconds: {value!r}")
        self.used[ref.name] = value
        return value

    def seconds(self, q: A.AQuantity) -> Fraction:
        value = to_seconds(q.value, q.unit)
        if value is None:
            raise _Inconclusive(f"{format_number(q.value)} {q.unit} is not a duration")
        return value

    def value(self, node: A.Formula) -> bool:
        if isinstance(node, A.FConst):
            return node.value
        if isinstance(node, A.FNot):
            return not self.value(node.arg)
        if isinstance(node, A.FNary):
            args = [self.value(a) for a in node.args]  # no short cut: every atom gets its fragment
            if node.op == "and":
                return all(args)
            if node.op == "or":
                return any(args)
            if node.op == "xor":
                return sum(args) % 2 == 1
            out = args[0]  # iff chains associate to the left, as in the grounder
            for nxt in args[1:]:
                out = out == nxt
            return out
        if isinstance(node, A.FImplies):
            lhs, rhs = self.value(node.lhs), self.value(node.rhs)
            return (not lhs) or rhs
        if isinstance(node, A.FCard):
            count = sum(self.value(a) for a in node.args)
            return {"at_most": count <= node.k, "at_least": count >= node.k, "exactly": count == node.k}[node.op]
        if isinstance(node, A.FBefore):
            return self.before(node)
        if isinstance(node, A.FWithin):
            return self.within(node)
        if isinstance(node, A.FCompare):
            return self.compare(node)
        what = {A.FAtom: "a Boolean atom", A.FPath: "a Ken path", A.FRisk: "a risk level", A.FQuant: "a quantifier"}
        raise _Inconclusive(f"the claim contains {what.get(type(node), type(node).__name__)}, which is not temporal")

    def before(self, node: A.FBefore) -> bool:
        a, b = self.time(node.first), self.time(node.second)
        ok = a < b
        self.fragments.append(
            f"{node.first.name} at {a} s is {'' if ok else 'not '}before {node.second.name} at {b} s"
        )
        return ok

    def within(self, node: A.FWithin) -> bool:
        a, b = self.time(node.first), self.time(node.second)
        span = self.seconds(node.span)
        gap = abs(a - b)
        ok = gap <= span
        written = f"{format_number(span)} s"
        if node.span.unit not in (None, "s"):
            written = f"{format_number(node.span.value)} {node.span.unit} ({written})"
        self.fragments.append(
            f"{node.first.name} and {node.second.name} are {gap} s apart, {'within' if ok else 'more than'} {written}"
        )
        return ok

    def side(self, arith: A.Arith) -> Fraction:
        total = Fraction(0)
        for term in arith.terms:
            if term.ref is not None:
                if term.ref.kind != "event":
                    raise _Inconclusive(f"the claim compares metric '{term.ref.name}', which is not temporal")
                total += term.coef * self.time(term.ref)
            else:
                assert term.quantity is not None
                total += term.coef * self.seconds(term.quantity)
        return total

    def compare(self, node: A.FCompare) -> bool:
        lhs, rhs = self.side(node.lhs), self.side(node.rhs)
        ok = bool(_OPS[node.op](lhs, rhs))
        self.fragments.append(f"{format_number(lhs)} s {node.op} {format_number(rhs)} s is {'true' if ok else 'false'}")
        return ok


def _one(events: Mapping[str, int], claim: str) -> VerifierOutcome:
    try:
        formula, _weight = parse_clause(claim)
    except DSLError as exc:
        return VerifierOutcome(
            verifier="temporal", claim=claim, status="inconclusive", detail=f"the claim does not parse: {exc.message}"
        )
    return _one_formula(events, claim, formula)


def _one_formula(events: Mapping[str, int], claim: str, formula: A.Formula) -> VerifierOutcome:
    ev = _Evaluator(events)
    try:
        holds = ev.value(formula)
    except _Inconclusive as exc:
        return VerifierOutcome(verifier="temporal", claim=claim, status="inconclusive", detail=str(exc))
    data: dict[str, Any] = {"holds": holds, "events": dict(sorted(ev.used.items()))}
    detail = "; ".join(ev.fragments) if ev.fragments else "no temporal atom; the claim is constant"
    return VerifierOutcome(
        verifier="temporal", claim=claim, status="passed" if holds else "failed", detail=detail,
        confidence_cap=None if holds else 0.0, data=data,
    )


def verify_temporal(events: Mapping[str, int], claims: Sequence[str]) -> list[VerifierOutcome]:
    """One outcome per claim: passed when it holds at these times (seconds), failed when not.

    >>> times = {"deploy": 0, "outage": 5400}
    >>> [o.status for o in verify_temporal(times, ["before(event:deploy, event:outage)",
    ...                                            "within(event:outage, 1h of event:deploy)",
    ...                                            "before(event:deploy, event:audit)"])]
    ['passed', 'failed', 'inconclusive']
    """
    return [_one(events, claim) for claim in claims]


def verify_temporal_formulas(
    events: Mapping[str, int], claims: Sequence[tuple[str, A.Formula]]
) -> list[VerifierOutcome]:
    """One outcome per claim, given as its text (what the outcome names) and its syntax tree
    (what is evaluated): the Action passes the clauses it already parsed.

    >>> f, _ = parse_clause("before(event:deploy, event:outage)")
    >>> verify_temporal_formulas({"deploy": 0, "outage": 60}, [("deploy first", f)])[0].status
    'passed'
    """
    return [_one_formula(events, text, formula) for text, formula in claims]
