"""Ordered statuses: a solver's answer and a verdict, each an enum whose order means something.

Both are :class:`~enum.StrEnum` s, so a status *is* its JSON string (``"sat"``, ``"supported"``:
equal to it, hashed like it, printed and repr'd as it) and every output keeps its bytes. Their order is the
order of declaration, not the alphabet, chosen so that a rule that may only lower a status is a
``min``:

* :class:`VerdictStatus`: ``REFUTED < UNKNOWN < INCONCLUSIVE < SUPPORTED``, how far the evidence
  backs the goal (CrossHair orders its verdicts the same way). *unknown* is a claim nobody
  decided (the time budget or a cancel cut it off, a solver said unknown): no evidence was
  computed, so it sits below *inconclusive* (where the premises were shown to allow both) and
  carries no confidence (docs/dsl.md, "Verdicts"). A check that can only demote, such as the
  LLM gate or a disagreement between backends, takes ``min(status, ceiling)``: *supported*
  under a ceiling of *inconclusive* becomes *inconclusive*, *refuted* and *unknown* stay as they are.
* :class:`SolverStatus`: ``UNSAT < UNKNOWN < SAT``, Kleene's order of the three truth values of
  "a model exists" (false < unknown < true), so ``min`` over several calls says whether *every*
  one of them has a model and ``max`` whether *some* does; an ``unknown`` is never read as sat.

>>> min(VerdictStatus.SUPPORTED, VerdictStatus.INCONCLUSIVE) is VerdictStatus.INCONCLUSIVE
True
>>> min(VerdictStatus("refuted"), VerdictStatus.INCONCLUSIVE), min(VerdictStatus.UNKNOWN, VerdictStatus.INCONCLUSIVE)
('refuted', 'unknown')
>>> min(SolverStatus.SAT, SolverStatus.UNKNOWN), max(SolverStatus.UNSAT, SolverStatus.UNKNOWN)
('unknown', 'unknown')
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

__all__ = ["OrderedStrEnum", "PropertyStatus", "SolverStatus", "VerdictStatus"]


class _Ordered(StrEnum):
    """A string enum whose members compare by declaration order. A plain string that names a
    member compares as that member; any other string compares as strings do (a status among
    labels, sorted, must not raise)."""

    def __repr__(self) -> str:
        """As its string's: a status shows as it always did (doctests, logs, tuples of results)."""
        return repr(self.value)

    def _rank(self) -> int:
        return type(self)._member_names_.index(self.name)

    def _other_rank(self, other: object) -> int | None:
        if isinstance(other, type(self)):
            return other._rank()
        if isinstance(other, str) and other in type(self)._value2member_map_:
            return type(self)(other)._rank()
        return None

    def __lt__(self, other: object) -> bool:
        rank = self._other_rank(other)
        if rank is None:
            return str(self) < other if isinstance(other, str) else NotImplemented
        return self._rank() < rank

    def __le__(self, other: object) -> bool:
        rank = self._other_rank(other)
        if rank is None:
            return str(self) <= other if isinstance(other, str) else NotImplemented
        return self._rank() <= rank

    def __gt__(self, other: object) -> bool:
        rank = self._other_rank(other)
        if rank is None:
            return str(self) > other if isinstance(other, str) else NotImplemented
        return self._rank() > rank

    def __ge__(self, other: object) -> bool:
        rank = self._other_rank(other)
        if rank is None:
            return str(self) >= other if isinstance(other, str) else NotImplemented
        return self._rank() >= rank

    @classmethod
    def json_schema(cls, title: str = "Status") -> dict[str, Any]:
        """The JSON schema of a field holding one: the string ``enum`` a ``Literal`` of the values
        would give, so typing a contract field with the enum leaves the committed schemas as
        they were (values listed in the order given by :meth:`schema_order`)."""
        return {"enum": list(cls.schema_order()), "title": title, "type": "string"}

    @classmethod
    def schema_order(cls) -> tuple[str, ...]:
        return tuple(m.value for m in cls)


class SolverStatus(_Ordered):
    """What one solver call found: ``UNSAT < UNKNOWN < SAT`` (see the module docstring)."""

    UNSAT = "unsat"
    UNKNOWN = "unknown"
    SAT = "sat"

    @classmethod
    def schema_order(cls) -> tuple[str, ...]:
        return ("sat", "unsat", "unknown")  # the order the contract has always listed them in

    @property
    def has_model(self) -> bool | None:
        """``True`` sat, ``False`` unsat, ``None`` unknown (never read as either)."""
        return None if self is SolverStatus.UNKNOWN else self is SolverStatus.SAT


class VerdictStatus(_Ordered):
    """The answer to a goal: ``REFUTED < UNKNOWN < INCONCLUSIVE < SUPPORTED`` (see the module docstring)."""

    REFUTED = "refuted"
    UNKNOWN = "unknown"
    INCONCLUSIVE = "inconclusive"
    SUPPORTED = "supported"

    @classmethod
    def schema_order(cls) -> tuple[str, ...]:
        return ("supported", "refuted", "inconclusive", "unknown")  # the contract's order, unknown added last

    @property
    def decided(self) -> bool:
        """Whether the claim was decided at all (every status but *unknown* carries a confidence).

        >>> VerdictStatus.INCONCLUSIVE.decided, VerdictStatus.UNKNOWN.decided
        (True, False)
        """
        return self is not VerdictStatus.UNKNOWN

    @classmethod
    def settled(cls, goal_holds: bool) -> VerdictStatus:
        """*supported* when the goal provably holds, *refuted* when it provably fails.

        >>> VerdictStatus.settled(False) is VerdictStatus.REFUTED
        True
        """
        return cls.SUPPORTED if goal_holds else cls.REFUTED


class PropertyStatus(_Ordered):
    """Whether a property of a policy set holds: ``FAILS < UNKNOWN < HOLDS`` (a counterexample
    was found and confirmed; the solver gave no verdict in time; none exists). Several
    environments' answers combine with ``min``: one failure fails the whole, one unknown
    leaves it unknown (docs/policy.md).

    >>> min(PropertyStatus.HOLDS, PropertyStatus.UNKNOWN)
    'unknown'
    """

    FAILS = "fails"
    UNKNOWN = "unknown"
    HOLDS = "holds"


#: The base for any other enum whose declaration order means something (the guardian's decisions).
OrderedStrEnum = _Ordered
