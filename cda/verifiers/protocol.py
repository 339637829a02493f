"""One protocol for every independent check, and the one place where a verdict is lowered.

A verifier (units, temporal re-evaluation, arithmetic, the user's function checks, Ken evidence,
cross-backend agreement, the LLM gate, coverage and abstention: docs/actions.md, "What fails
closed") is given the claims the solver decided and a context, and returns :class:`Outcome` s.
Each outcome carries its evidence (a :class:`~cda.contracts.verification.VerifierOutcome`: what
was checked, how it went, its citations; written to the receipts, the event stream and the plan
bundle) and, when the check should weigh on the claims, a :class:`Ceiling`: the highest status and
confidence the claims it names may keep.

Verifiers never change a verdict themselves. The runner collects every ceiling of every verifier
and applies them once, in :func:`under_ceilings`::

    status, confidence = min(status, *statuses), min(confidence, *caps)

Statuses are ordered (:class:`~cda.contracts.status.VerdictStatus`: refuted < inconclusive <
supported) and a ceiling's status is never below *inconclusive* (only a solver refutes), so
*supported* may become *inconclusive*, *refuted* and *inconclusive* stay as they are, and nothing
any verifier says can raise a status or a confidence: "never upgrade" is that one ``min``
(tested as a property in tests/test_verifier_protocol.py).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Protocol, TypeVar

from cda.contracts.status import VerdictStatus
from cda.contracts.verification import VerifierOutcome

__all__ = ["Ceiling", "Outcome", "Verifier", "under_ceilings", "NO_CEILING"]


@dataclass(frozen=True)
class Ceiling:
    """The most a claim may keep after a check: a status (*supported*: no cap on it;
    *inconclusive*: a settled claim becomes open) and a confidence cap, with the caveat that says
    why on each claim it lowers.

    >>> Ceiling(VerdictStatus.REFUTED)
    Traceback (most recent call last):
    ...
    ValueError: a check may cap a verdict at inconclusive at the lowest, never at refuted (only a solver refutes)
    """

    status: VerdictStatus = VerdictStatus.SUPPORTED
    confidence: float = 1.0
    caveats: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        status = VerdictStatus(self.status)
        if status is VerdictStatus.REFUTED:
            raise ValueError("a check may cap a verdict at inconclusive at the lowest, never at refuted "
                             "(only a solver refutes)")
        object.__setattr__(self, "status", status)
        if isinstance(self.confidence, bool) or not isinstance(self.confidence, int | float) \
                or math.isnan(self.confidence) or not 0.0 <= self.confidence <= 1.0:
            raise ValueError(f"a confidence cap is a number in [0, 1], not {self.confidence!r}")

    @classmethod
    def open(cls, confidence: float, *caveats: str) -> Ceiling:
        """*inconclusive* at most, confidence at most ``confidence``: a failed check."""
        return cls(VerdictStatus.INCONCLUSIVE, confidence, caveats)


#: a ceiling that lowers nothing
NO_CEILING = Ceiling()

C = TypeVar("C", contravariant=True)
K = TypeVar("K", contravariant=True)


@dataclass(frozen=True)
class Outcome:
    """What one check found: ``evidence`` to record (None: nothing to record), the ``ceiling`` it
    puts on ``claims`` (positions in the claim list given to the verifier; None: every claim),
    and what the run as a whole should say: a ``caveat`` of the run, a ``notice`` on the stream."""

    evidence: VerifierOutcome | None = None
    ceiling: Ceiling | None = None
    claims: tuple[int, ...] | None = None
    caveat: str = ""
    notice: str = ""
    #: False for a check recorded as a receipt and an event but not listed among the run's
    #: verifier outcomes (the low-coverage review, which the run's review field reports)
    listed: bool = True
    applies_to: frozenset[int] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "applies_to", frozenset(self.claims) if self.claims is not None else frozenset())

    def caps(self, index: int) -> bool:
        """Whether this outcome's ceiling is on claim ``index``."""
        return self.ceiling is not None and (self.claims is None or index in self.applies_to)


class Verifier(Protocol[K, C]):
    """An independent check: ``verify(claims, context)`` returns what it found, one
    :class:`Outcome` per thing it checked; it never edits a claim."""

    name: str

    def verify(self, claims: Sequence[K], context: C) -> list[Outcome]:
        """Check ``claims`` (the solver's verdicts, in order) with what ``context`` holds."""
        ...


def under_ceilings(status: VerdictStatus | str, confidence: float,
                   ceilings: Iterable[Ceiling]) -> tuple[VerdictStatus, float]:
    """``status`` and ``confidence`` under every ceiling at once: the one rule by which any check
    changes a verdict, only ever downwards.

    >>> under_ceilings("supported", 1.0, [Ceiling.open(0.5, "units"), Ceiling(confidence=0.8)])
    ('inconclusive', 0.5)
    >>> under_ceilings("refuted", 0.0, [Ceiling.open(0.5, "llm")])
    ('refuted', 0.0)
    """
    caps = list(ceilings)
    return min([VerdictStatus(status), *(c.status for c in caps)]), min([confidence, *(c.confidence for c in caps)])
