"""The result of ``cda.solve``: what crosses the boundary to a user, as pydantic models.

Field order is the JSON order, and every list is in a canonical order, so the same problem
gives byte-identical JSON on every run and on both backends (``backend`` aside).
"""

from __future__ import annotations

from fractions import Fraction
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, model_validator

from cda.contracts.json_numbers import EXACT_PATTERN, exact_dumps, exact_text, fraction_of_text
from cda.contracts.status import VerdictStatus
from cda.contracts.status_fields import SolverStatusField, VerdictStatusField

__all__ = ["Hypothesis", "Witness", "Verdict", "NextTest", "Conflict", "ExpectationResult", "SolveResult",
           "CheckReport", "Incomplete", "incomplete"]

Incomplete = Literal["partial", "unknown"]
"""Why an answer is not complete (docs/dsl.md, "Verdicts"): ``partial``, a budget or a cancel cut
the run short and what is there is what was found; ``unknown``, nothing was cut, a solver could not
decide. Either is exit 3 of ``cda solve``; neither is a failure of the check or of CDA."""


def incomplete(status: str, partial: bool, verdicts: list[str]) -> Incomplete | None:
    """What ``cda solve`` and a ``solve`` job both say of an answer (its ``status``, ``partial``
    and its verdicts' statuses): the one rule, so that the two doors cannot drift apart.

    >>> incomplete("sat", False, ["supported", "unknown"]), incomplete("unknown", True, [])
    ('unknown', 'partial')
    """
    if partial:
        return "partial"
    if status == "unknown" or "unknown" in verdicts:
        return "unknown"
    return None


class _Model(BaseModel):
    """Each model builds its validator and serializer on first use (``defer_build``): a
    diagnosis reads its explanations off a :class:`SolveResult` made with ``model_construct``
    and never validates or prints one, so ``cda diagnose`` builds none of these
    (docs/architecture.md, "Start-up")."""

    model_config = ConfigDict(extra="forbid", defer_build=True)


class Hypothesis(_Model):
    """One explanation: the abducibles it assumes true (all others false).

    The engine sums weights exactly (rule 3): ``cost_exact`` is that sum as text, plain digits
    when it is a finite decimal (every cost of decimal weights is), else ``p/q``. ``cost`` is the
    same number for clients that read numbers: CDA's own JSON writers (:func:`~cda.contracts.
    json_numbers.exact_dumps`) write it from ``cost_exact``'s digits, so ``1.0000000000000001``
    and ``1`` differ in the JSON; in Python, and when ``cost_exact`` is ``p/q``
    (``cost_approximate``), it is the nearest float (docs/dsl.md, "Hypotheses").
    """

    id: str
    assumed: list[str] = Field(description="abducible atoms assumed true, e.g. 'down(db)'")
    cost: float = Field(description=(
        "sum of the weights of the soft clauses its cheapest model violates; written from cost_exact's digits "
        "when that is a finite decimal, else the nearest float (cost_approximate)"))
    posterior: float = Field(description="exp(-cost), normalised over the enumerated hypotheses (approximate: nine decimals)")
    violated: list[str] = Field(description="names of the soft clauses violated at that cost")
    cost_exact: str | None = Field(default=None, pattern=EXACT_PATTERN, max_length=200, description=(
        "the exact cost: plain decimal digits when it is a finite decimal, else p/q"))
    cost_approximate: bool = Field(default=False, description=(
        "true when the exact cost is no finite decimal, so cost is only its nearest float"))
    _exact_cost: Fraction | None = PrivateAttr(default=None)

    @model_validator(mode="after")
    def _exact(self) -> Hypothesis:
        """``cost_exact`` read back (a result loaded from JSON keeps its exact cost), or filled
        from ``cost`` (the shortest decimal that reads back as it) when not given."""
        if self.cost_exact is not None:
            self.with_exact_cost(fraction_of_text(self.cost_exact))
        elif self.cost == self.cost and abs(self.cost) != float("inf"):
            self.with_exact_cost(Fraction(repr(self.cost)))
        return self

    def with_exact_cost(self, cost: Fraction) -> Hypothesis:
        """Attach the exact cost the engine computed: ``cost_exact`` its text, ``cost`` its nearest
        float; returns self."""
        self._exact_cost = cost
        self.cost_exact = exact_text(cost)
        self.cost_approximate = "/" in self.cost_exact
        self.cost = float(cost) + 0.0
        return self

    def exact_cost(self) -> Fraction:
        """The cost as an exact rational: the engine's own sum, ``cost_exact`` read back, else the
        shortest decimal that reads back as ``cost`` (``1e+30`` is 10**30).

        >>> Hypothesis(id="h1", assumed=[], cost=1e30, posterior=1.0, violated=[]).exact_cost() == 10**30
        True
        """
        return self._exact_cost if self._exact_cost is not None else Fraction(repr(self.cost))


class Witness(_Model):
    """A hypothesis under which the goal consistently holds (``holds``) or fails: relative to the
    goal, as a verdict's status and confidence are (for ``disprove c``, ``holds`` means c is false)."""

    holds: bool
    assumed: list[str]


class Verdict(_Model):
    """The answer to one ``prove``/``disprove`` goal.

    ``status`` is relative to the goal: a ``disprove c`` goal is *supported* when ``c`` is
    refuted. ``confidence`` is the posterior probability that the goal holds: 1.0 when
    supported, 0.0 when refuted, in between when inconclusive, and none at all when *unknown*
    (the budget cut the claim off before it was decided: ``reason`` says so; docs/dsl.md).
    """

    name: str
    goal: Literal["prove", "disprove"]
    claim: str
    status: VerdictStatusField  # an ordered enum in Python, its string in JSON
    confidence: float | None = Field(
        description="the probability that the goal holds; null exactly when the status is unknown (nothing was computed)"
    )
    justification: list[str] = Field(
        description="a minimal set of clauses that forces the answer (empty when inconclusive)"
    )
    witnesses: list[Witness]
    reason: str | None = None

    @model_validator(mode="after")
    def _confidence_when_decided(self) -> Verdict:
        """A decided claim has a confidence in [0, 1]; an *unknown* one has none and says why."""
        if self.status is VerdictStatus.UNKNOWN:
            if self.confidence is not None or not self.reason:
                raise ValueError("an unknown verdict has no confidence and says why (reason)")
        elif self.confidence is None or not 0.0 <= self.confidence <= 1.0:
            raise ValueError(f"a {self.status} verdict has a confidence in [0, 1], not {self.confidence!r}")
        return self


class NextTest(_Model):
    """An unobserved observable and how well observing it would separate the hypotheses."""

    observable: str
    expected_information_gain: float = Field(description="bits: entropy before minus expected entropy after")
    probability_true: float


class Conflict(_Model):
    """Why hard clauses and observations cannot all hold."""

    cores: list[list[str]] = Field(description="minimal unsatisfiable subsets of the named clauses")
    corrections: list[list[str]] = Field(description="minimal correction sets: drop one to restore consistency")
    complete: bool


class ExpectationResult(_Model):
    """An ``expect`` statement checked against the answer: passed, or why not."""

    name: str = Field(description="the expectation's name (expect NAME: …), else expect@LINE")
    text: str = Field(description="what it asserts, as written after 'expect', in canonical form")
    passed: bool
    reason: str = Field(description="what the answer holds, in words (why it failed, or what it matched)")


class SolveResult(_Model):
    status: SolverStatusField
    backend: str
    seed: int
    hypotheses: list[Hypothesis]
    hypotheses_enumerated: int
    enumeration_complete: bool
    verdicts: list[Verdict]
    next_tests: list[NextTest]
    conflict: Conflict | None
    partial: bool = Field(description="true when a budget ran out; what is here is what was found")
    notes: list[str]
    minimal_explanations: list[list[str]] | None = Field(
        default=None,
        description="goal minimal_explanations: subset-minimal sets of abducibles, by size then names",
    )
    minimal_complete: bool = Field(
        default=False, description="true when every minimal explanation the goal asks for was found"
    )
    expectations: list[ExpectationResult] = Field(
        default_factory=list, description="the problem's expect statements, checked against this answer, in order"
    )

    def incomplete(self) -> Incomplete | None:
        """``partial`` (a budget ran out), ``unknown`` (a solver could not decide) or None: :func:`incomplete`."""
        return incomplete(str(self.status), self.partial, [str(v.status) for v in self.verdicts])

    def json_text(self) -> str:
        """Canonical JSON (stable key order, two-space indent), each hypothesis's ``cost`` written
        from its exact digits (:func:`~cda.contracts.json_numbers.exact_dumps`)."""
        return exact_dumps(self.model_dump(mode="json"), indent=2, ensure_ascii=False)


class CheckReport(_Model):
    """What ``cda check`` reports about a well-formed problem."""

    abducibles: int
    observables: int
    atoms: int
    numeric_variables: int
    clauses: int
    soft_clauses: int
    claims: int
    ir_nodes: int
