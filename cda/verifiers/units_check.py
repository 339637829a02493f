"""Units verifier: every pair of quantities a claim compares has the same dimension.

The grounder already rejects mismatched units, but through its own conversion code
(:mod:`cda.encodings.units`, pint in its exact ``Fraction`` mode). This check asks pint
directly, on a registry of its own, about the quantities *as
written* in the claim: ``value(metric:latency) <= 1.5 s`` passes when ``latency`` is declared in
``ms`` and fails, naming both units, when it is declared in ``USD``. Parsing reuses the DSL
parser (reading the text is not what is being verified; dimensional consistency is).

Outcome per claim: ``passed`` when at least one pair of quantities with units was compared and
all agree; ``failed`` (confidence cap 0) on a mismatch or a unit pint does not know;
``inconclusive`` when the claim does not parse or names an undeclared metric; ``skipped`` when
nothing with a unit is compared (a bare number takes the unit of the other side).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from cda.contracts.verification import VerifierOutcome, VerifierStatus
from cda.encodings import ast as A
from cda.encodings.numbers import show
from cda.encodings.parse import parse_clause, parse_problem
from cda.encodings.units import CURRENCIES
from cda.errors import DSLError

if TYPE_CHECKING:
    import pint

__all__ = [
    "verify_units",
    "verify_units_declared",
    "verify_units_formulas",
    "metric_units",
    "exact_registry",
    "dimension_of",
    "to_seconds",
    "format_number",
]


@lru_cache(maxsize=1)
def exact_registry() -> pint.UnitRegistry:
    """A pint registry of the verifiers' own, with one dimension per currency, built once on
    first use (pint is not imported at start-up).

    Not the encoder's registry (:func:`cda.encodings.units.registry`): that one runs in pint's
    exact ``Fraction`` mode, in which pint cannot even parse some units (``J``: a format error
    inside pint), and the check should not run through the code it checks. This one runs in
    pint's float mode, and :func:`to_seconds` reads its time factors back as the decimal
    constants they are.
    """
    import pint

    ureg: pint.UnitRegistry = pint.UnitRegistry()
    for code in CURRENCIES:
        ureg.define(f"{code} = [currency_{code}]")
    return ureg


@lru_cache(maxsize=1024)
def dimension_of(unit: str) -> str | None:
    """pint's dimensionality of ``unit`` as text (``[time]``), or None when pint cannot read it.

    >>> dimension_of("km/h"), dimension_of("USD"), dimension_of("furlongs_per_jiffy")
    ('[length] / [time]', '[currency_USD]', None)
    """
    try:
        return str(exact_registry().parse_units(unit).dimensionality)
    except Exception:  # pint raises many error types for odd strings; any of them means "unknown"
        return None


@lru_cache(maxsize=256)
def _seconds_per(unit: str) -> Fraction:
    # pint's factors for time units are decimal constants (0.001, 3600.0, 86400.0); the shortest
    # repr of the float is that constant, so reading it back as a decimal is exact
    return Fraction(repr(float(exact_registry().Quantity(1, unit).to("s").magnitude)))


def to_seconds(value: Fraction, unit: str | None) -> Fraction | None:
    """``value unit`` in seconds, exactly; a bare number is seconds; None when not a time.

    >>> to_seconds(Fraction(14), "d"), to_seconds(Fraction(3, 2), "h"), to_seconds(Fraction(1), "ms")
    (Fraction(1209600, 1), Fraction(5400, 1), Fraction(1, 1000))
    >>> to_seconds(Fraction(1), "USD") is None
    True
    """
    if unit is None:
        return value
    if dimension_of(unit) != "[time]":
        return None
    return value * _seconds_per(unit)


#: a rational as the user would write it (``1.5``, ``200``, ``1/3``): the DSL's own rule
format_number = show


@dataclass(frozen=True)
class _Operand:
    text: str  # how the claim wrote it: "value(metric:latency)", "1.5 s"
    unit: str
    literal: bool  # a written quantity (its unit is in its text) rather than a metric or event


class _Unknown(Exception):
    """The claim names something the check cannot resolve (an undeclared metric)."""


def _walk(node: A.Formula) -> Iterator[A.Formula]:
    """Every sub-formula in source order."""
    yield node
    if isinstance(node, A.FNot):
        yield from _walk(node.arg)
    elif isinstance(node, A.FNary | A.FCard):
        for arg in node.args:
            yield from _walk(arg)
    elif isinstance(node, A.FImplies):
        yield from _walk(node.lhs)
        yield from _walk(node.rhs)
    elif isinstance(node, A.FQuant):
        yield from _walk(node.body)


def _operand(term: A.ATerm, metrics: Mapping[str, str]) -> _Operand | None:
    if term.ref is not None:
        if term.ref.kind == "event":
            return _Operand(f"time(event:{term.ref.name})", "s", False)
        if term.ref.name not in metrics:
            known = ", ".join(sorted(metrics)) or "none declared"
            raise _Unknown(f"unknown metric '{term.ref.name}' (declared: {known})")
        return _Operand(f"value(metric:{term.ref.name})", metrics[term.ref.name], False)
    assert term.quantity is not None
    if term.quantity.unit is None:
        return None
    return _Operand(f"{format_number(term.quantity.value)} {term.quantity.unit}", term.quantity.unit, True)


def _describe(op: _Operand, dimension: str | None) -> str:
    if op.literal:
        return f"{op.text} ({dimension})"
    return f"{op.text} is in {op.unit} ({dimension})"


def _check_group(group: list[_Operand], checked: list[dict[str, Any]]) -> str | None:
    """Compare every operand with the first; the reason of the first failure, else None."""
    for op in group:
        if dimension_of(op.unit) is None:
            return f"unknown unit '{op.unit}' in {op.text}"
    reference = group[0]
    ref_dim = dimension_of(reference.unit)
    for other in group[1:]:
        dim = dimension_of(other.unit)
        ok = dim == ref_dim
        checked.append(
            {"left": reference.text, "left_unit": reference.unit, "left_dimension": ref_dim,
             "right": other.text, "right_unit": other.unit, "right_dimension": dim, "compatible": ok}
        )
        if not ok:
            return f"unit mismatch: {_describe(reference, ref_dim)} but {_describe(other, dim)}"
    return None


def _groups(formula: A.Formula, metrics: Mapping[str, str]) -> list[list[_Operand]]:
    """The operands that must share a dimension, one list per comparison or ``within``."""
    groups: list[list[_Operand]] = []
    for node in _walk(formula):
        if isinstance(node, A.FCompare):
            ops = [_operand(t, metrics) for t in node.lhs.terms + node.rhs.terms]
            groups.append([o for o in ops if o is not None])
        elif isinstance(node, A.FWithin) and node.span.unit is not None:
            span = _Operand(f"{format_number(node.span.value)} {node.span.unit}", node.span.unit, True)
            groups.append([_Operand(f"time(event:{node.first.name})", "s", False), span])
    return groups


def _one(claim: str, metrics: Mapping[str, str]) -> VerifierOutcome:
    try:
        formula, _weight = parse_clause(claim)
    except DSLError as exc:
        return _outcome(claim, "inconclusive", f"the claim does not parse: {exc.message}")
    return _one_formula(claim, formula, metrics)


def _outcome(claim: str, status: VerifierStatus, detail: str, **data: Any) -> VerifierOutcome:
    cap = 0.0 if status == "failed" else None
    return VerifierOutcome(verifier="units", claim=claim, status=status, detail=detail, confidence_cap=cap, data=data)


def _one_formula(claim: str, formula: A.Formula, metrics: Mapping[str, str]) -> VerifierOutcome:
    def out(status: VerifierStatus, detail: str, **data: Any) -> VerifierOutcome:
        return _outcome(claim, status, detail, **data)

    try:
        groups = _groups(formula, metrics)
    except _Unknown as exc:
        return out("inconclusive", str(exc))
    checked: list[dict[str, Any]] = []
    for group in groups:
        if not group:
            continue
        reason = _check_group(group, checked)
        if reason is not None:
            return out("failed", reason, checked=checked)
    if not checked:
        return out("skipped", "no pair of quantities with units is compared (a bare number takes the other side's unit)")
    pairs = len(checked)
    return out("passed", f"{pairs} compared pair{'s' if pairs != 1 else ''} of quantities share a dimension", checked=checked)


def verify_units_declared(metrics: Mapping[str, str], claims: Sequence[str]) -> list[VerifierOutcome]:
    """One outcome per claim, given the metric declarations as ``{name: unit}``.

    >>> [o.status for o in verify_units_declared({"latency": "ms"}, ["value(metric:latency) <= 1.5 s"])]
    ['passed']
    >>> verify_units_declared({"latency": "USD"}, ["value(metric:latency) <= 1.5 s"])[0].detail
    'unit mismatch: value(metric:latency) is in USD ([currency_USD]) but 1.5 s ([time])'
    """
    return [_one(claim, metrics) for claim in claims]


def verify_units_formulas(
    metrics: Mapping[str, str], claims: Sequence[tuple[str, A.Formula]]
) -> list[VerifierOutcome]:
    """One outcome per claim, given as its text (what the outcome names) and its syntax tree
    (what is checked): the Action passes the clauses it already parsed, so nothing is read twice.

    >>> f, _ = parse_clause("value(metric:cost) <= 5000 USD")
    >>> verify_units_formulas({"cost": "EUR"}, [("the budget", f)])[0].status
    'failed'
    """
    return [_one_formula(text, formula, metrics) for text, formula in claims]


def metric_units(ast: A.ProblemAST) -> dict[str, str]:
    """The problem's metric declarations as ``{name: unit}`` (the first one of a name)."""
    metrics: dict[str, str] = {}
    for st in ast.statements:
        if isinstance(st, A.MetricDecl):
            metrics.setdefault(st.name, st.unit)
    return metrics


def verify_units(problem_text: str, claims: Sequence[str]) -> list[VerifierOutcome]:
    """One outcome per claim; metrics are read from the ``metric name : unit`` lines of the problem.

    When the problem text itself does not parse, every claim is inconclusive with the reason.

    >>> verify_units("metric cost : EUR", ["value(metric:cost) <= 5000 USD"])[0].status
    'failed'
    """
    try:
        ast = parse_problem(problem_text)
    except DSLError as exc:
        return [
            VerifierOutcome(
                verifier="units", claim=claim, status="inconclusive",
                detail=f"the problem text does not parse: {exc.message}",
            )
            for claim in claims
        ]
    return verify_units_declared(metric_units(ast), claims)
