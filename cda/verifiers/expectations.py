"""``expect`` statements checked against a solve's answer (docs/dsl.md, "Expectations").

A regression suite states what it knows about the whole answer — its status, the hypotheses of
least cost, that cost, a clause every conflict core holds, how many minimal explanations there
are — and each is checked here from the result alone, with a reason in words either way. An
expectation that the answer cannot settle (an enumeration that stopped early, a partial solve)
fails and says so: a suite is never green on an answer that was not looked at whole.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence
from fractions import Fraction

from cda.contracts.result import ExpectationResult, SolveResult
from cda.encodings.ir import Expectation

__all__ = ["check_expectations", "check_expectation"]

_OPS: dict[str, Callable[[Fraction | int, Fraction | int], bool]] = {
    "<=": operator.le, ">=": operator.ge, "<": operator.lt, ">": operator.gt, "=": operator.eq, "!=": operator.ne,
}


def _show(value: Fraction) -> str:
    return str(value.numerator) if value.denominator == 1 else f"{value.numerator}/{value.denominator}"


def _sets(sets: Sequence[frozenset[str]]) -> str:
    return "[" + ", ".join("{" + ", ".join(sorted(s)) + "}" for s in sorted(sets, key=lambda s: (len(s), sorted(s)))) + "]"


def _verdict(e: Expectation, result: SolveResult) -> tuple[bool, str]:
    if e.kind == "status":
        return str(result.status) == e.value, f"the status is {result.status}"
    if result.partial:
        return False, "the solve ran out of budget (partial): the answer cannot settle this"
    if e.kind in ("best", "cost"):
        if not result.hypotheses:
            return False, f"there is no hypothesis (status {result.status})"
        least = min(h.exact_cost() for h in result.hypotheses)
        if e.kind == "cost":
            assert e.op is not None and isinstance(e.value, Fraction)
            return bool(_OPS[e.op](least, e.value)), f"the least cost is {_show(least)}"
        tied = [h for h in result.hypotheses if h.exact_cost() == least]
        if len(tied) == len(result.hypotheses) and not result.enumeration_complete:
            return False, (f"all {len(tied)} hypotheses listed tie at cost {_show(least)} and the enumeration "
                           "stopped: more may tie")
        found = {frozenset(h.assumed) for h in tied}
        expected = set(e.sets)
        shown = f"the least-cost hypotheses (cost {_show(least)}) are {_sets(list(found))}"
        if found == expected:
            return True, shown
        missing, extra = expected - found, found - expected
        parts = [shown]
        if missing:
            parts.append(f"expected but not among them: {_sets(list(missing))}")
        if extra:
            parts.append(f"not expected: {_sets(list(extra))}")
        return False, "; ".join(parts)
    if e.kind == "core":
        conflict = result.conflict
        if conflict is None:
            return False, f"there is no conflict (status {result.status})"
        if not conflict.complete:
            return False, "the search for conflict cores stopped early: not every core is known"
        without = [core for core in conflict.cores if e.value not in core]
        if without:
            return False, f"the core {{{', '.join(without[0])}}} does not hold {e.value}"
        return True, f"each of the {len(conflict.cores)} core(s) holds {e.value}"
    if e.kind == "minimal":
        explanations = result.minimal_explanations
        if explanations is None:
            return False, "no minimal explanations were computed (cross-checked solves need goal minimal_explanations)"
        if not result.minimal_complete:
            return False, f"the search stopped after {len(explanations)} minimal explanation(s): more may exist"
        assert e.op is not None and isinstance(e.value, int)
        return bool(_OPS[e.op](len(explanations), e.value)), f"there are {len(explanations)} minimal explanation(s)"
    raise ValueError(f"unknown expectation kind {e.kind!r}")  # pragma: no cover - the grammar has no other


def check_expectation(e: Expectation, result: SolveResult) -> ExpectationResult:
    """One expectation against ``result``."""
    passed, reason = _verdict(e, result)
    return ExpectationResult(name=e.name, text=e.text, passed=passed, reason=reason)


def check_expectations(expectations: Sequence[Expectation], result: SolveResult) -> list[ExpectationResult]:
    """Every expectation against ``result``, in order.

    >>> from cda.api import solve
    >>> r = solve("hyp a, b\\nhard: a or b\\nsoft: not b weight 2\\nexpect best [{a}]\\nexpect cost = 1")
    >>> [(e.text, e.passed, e.reason) for e in r.expectations]  # doctest: +NORMALIZE_WHITESPACE
    [('best [{a}]', True, 'the least-cost hypotheses (cost 0) are [{a}]'), ('cost = 1', False, 'the least cost is 0')]
    """
    return [check_expectation(e, result) for e in expectations]
