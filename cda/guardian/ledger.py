"""The CFO ledger: per-agent budgets, atomic reservations, settlements and releases, in exact money.

The seed's budget step asks one question, ``within_budget(agent_id, cost_estimate)``; spending
needs more: a reservation must be atomic, or two agents' requests that each fit the budget
alone would both pass and overspend it together. Every change here runs inside one
``BEGIN IMMEDIATE`` transaction of the guardian's SQLite file (:mod:`cda.guardian.guardian_db`): the
write lock is taken before the budget is read, so check-then-reserve cannot interleave with
another process's, and the sum of reserved and settled amounts never passes the budget.

The API, small on purpose (``ggate``'s ``evaluate()`` calls the first two)::

    ledger = Ledger.open("guardian.sqlite")             # or Ledger(GuardianStore)
    ledger.set_budget("agent-42", "USD", Decimal("500"))
    ledger.within_budget("agent-42", Decimal("150"), "USD")   # -> bool, reserves nothing
    entry = ledger.reserve("agent-42", Decimal("150"), "USD", evidence=["receipt:…"])
    ledger.settle(entry.tx_id, Decimal("120.50"))        # the actual cost; frees the rest
    ledger.release(entry.tx_id)                          # (instead of settle) frees it all
    ledger.balance("agent-42", "USD").remaining          # Decimal

Amounts are ``Decimal`` or ``int`` checked by :func:`cda.guardian.money.amount` (a float, NaN,
infinity, a negative or a huge amount is an :class:`~cda.errors.OptionError` naming the field)
and stored as exact decimal text. A ledger entry (the seed's FINANCIAL_LEDGER row) has a
``status``: ``reserved`` -> ``settled`` | ``released``, once; and ``evidence``: references (receipt
ids, decision digests, URLs) that say why money moved. An agent with no budget in a currency can
reserve nothing there but zero.

>>> from cda.guardian.guardian_db import GuardianStore
>>> ledger = Ledger(GuardianStore.open(":memory:"))
>>> _ = ledger.set_budget("a", "USD", Decimal("1.00"))
>>> ledger.reserve("a", Decimal("0.70"), "USD").tx_id
'tx-1'
>>> ledger.within_budget("a", Decimal("0.31"), "USD"), ledger.balance("a", "USD").remaining
(False, Decimal('0.3'))
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable
from datetime import datetime
from decimal import Decimal
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from cda.errors import CDAError
from cda.guardian.guardian_db import Clock, GuardianStore, GuardianStoreError, Moment, is_identifier, utc_now
from cda.guardian.money import CURRENCY_PATTERN, Amount, amount, currency, dump_exact, plain, text

__all__ = [
    "DEFAULT_CURRENCY",
    "Balance",
    "EntryStatus",
    "InsufficientBudget",
    "Ledger",
    "LedgerEntry",
    "LedgerError",
    "TX_ID_PATTERN",
]

DEFAULT_CURRENCY = "USD"
"""The currency of an amount given without one (the seed's actions carry only ``cost_estimate``)."""

EntryStatus = Literal["reserved", "settled", "released"]
_TX_ID_PUNCTUATION = "_.:@/-"
TX_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.:@/-]{0,127}$"


class LedgerError(CDAError, ValueError):
    """A ledger operation that cannot be done: an unknown entry, one already settled or released."""


class InsufficientBudget(LedgerError):
    """A reservation (or a settlement above its reservation) that the budget left does not cover."""


class LedgerEntry(BaseModel):
    """One row of the seed's FINANCIAL_LEDGER: a reservation and what became of it.

    ``amount`` is what was reserved; ``settled_amount`` the actual cost once settled (None before);
    ``evidence`` the references that justify the entry, oldest first.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    tx_id: str = Field(pattern=TX_ID_PATTERN)
    agent_id: str = Field(min_length=1, max_length=256)
    tx_type: Literal["reservation"]
    amount: Amount
    currency: str = Field(pattern=CURRENCY_PATTERN)
    status: EntryStatus
    created_at: Moment
    updated_at: Moment
    settled_amount: Amount | None = None
    evidence: list[str]
    tool_id: str | None = None

    @property
    def committed(self) -> Decimal:
        """What this entry holds of its budget: the reservation, the settled cost, or nothing."""
        if self.status == "reserved":
            return self.amount
        return self.settled_amount if self.status == "settled" and self.settled_amount is not None else Decimal(0)

    def to_json(self) -> str:
        """The entry as exact canonical JSON (amounts as the numbers they are)."""
        return dump_exact(plain(self.model_dump()))


class Balance(BaseModel):
    """An agent's budget in one currency: ``committed`` is reserved plus settled; ``remaining``
    is ``budget - committed`` (negative when a budget was lowered below what is committed)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    agent_id: str
    currency: str
    budget: Decimal
    committed: Decimal

    @property
    def remaining(self) -> Decimal:
        return self.budget - self.committed


_COLUMNS = ("tx_id", "agent_id", "tx_type", "amount", "currency", "status", "created_at", "updated_at",
            "settled_amount", "evidence", "tool_id")


def _refs(evidence: Iterable[str]) -> list[str]:
    refs = list(evidence)
    for ref in refs:
        if not isinstance(ref, str) or not ref or len(ref) > 2048:
            raise LedgerError(f"an evidence reference must be text of 1 to 2048 characters, not {ref!r}")
    return refs


class Ledger:
    """The CFO ledger over one guardian store (see the module's docstring)."""

    def __init__(self, store: GuardianStore) -> None:
        self.store = store

    @classmethod
    def open(cls, path: Path | str, clock: Clock = utc_now) -> Ledger:
        """The ledger in the guardian file at ``path`` (created or migrated as needed)."""
        return cls(GuardianStore.open(path, clock))

    def close(self) -> None:
        self.store.close()

    # ------------------------------------------------------------------ budgets

    def set_budget(self, agent_id: str, currency_code: str, budget: Decimal | int) -> Balance:
        """Set the agent's budget in a currency (lowering it below what is committed is allowed:
        nothing more can be reserved until entries are released)."""
        limit, code = amount("budget", budget), currency("currency", currency_code)
        with self.store.transaction() as conn:
            self.store.ensure_agent(agent_id)
            conn.execute(
                "INSERT INTO budgets VALUES (?, ?, ?, '0', ?) ON CONFLICT (agent_id, currency) "
                "DO UPDATE SET budget = excluded.budget, updated_at = excluded.updated_at",
                (agent_id, code, text(limit), self.store.now()))
            return self._balance(conn, agent_id, code)

    def balance(self, agent_id: str, currency_code: str = DEFAULT_CURRENCY) -> Balance:
        """The agent's budget, committed and remaining amounts (a budget of 0 when none was set)."""
        return self._balance(self.store.conn, agent_id, currency("currency", currency_code))

    def remaining(self, agent_id: str, currency_code: str = DEFAULT_CURRENCY) -> Decimal:
        return self.balance(agent_id, currency_code).remaining

    def within_budget(self, agent_id: str, cost: Decimal | int, currency_code: str = DEFAULT_CURRENCY) -> bool:
        """Whether ``cost`` fits what the agent has left (0 always fits). Reserves nothing: only
        :meth:`reserve` is atomic against concurrent spending."""
        asked = amount("cost_estimate", cost)
        return asked == 0 or asked <= self.balance(agent_id, currency_code).remaining

    @staticmethod
    def _balance(conn: sqlite3.Connection, agent_id: str, code: str) -> Balance:
        row = conn.execute("SELECT budget, committed FROM budgets WHERE agent_id = ? AND currency = ?",
                           (agent_id, code)).fetchone()
        budget, committed = (Decimal(row[0]), Decimal(row[1])) if row else (Decimal(0), Decimal(0))
        return Balance(agent_id=agent_id, currency=code, budget=budget, committed=committed)

    def _commit(self, conn: sqlite3.Connection, agent_id: str, code: str, delta: Decimal, what: str,
                over_budget: bool = False) -> None:
        """Add ``delta`` to the agent's committed amount, refusing to pass the budget when it grows
        (unless ``over_budget``: a person's signed approval of this very spend)."""
        if delta == 0:
            return
        balance = self._balance(conn, agent_id, code)
        if delta > 0 and not over_budget and balance.committed + delta > balance.budget:
            raise InsufficientBudget(
                f"{what}: {text(delta)} {code} does not fit the budget of {agent_id!r} "
                f"({text(balance.budget)} {code}, {text(balance.remaining)} {code} left)")
        conn.execute("UPDATE budgets SET committed = ?, updated_at = ? WHERE agent_id = ? AND currency = ?",
                     (text(balance.committed + delta), self.store.now(), agent_id, code))

    # ------------------------------------------------------------------ entries

    def reserve(self, agent_id: str, cost: Decimal | int, currency_code: str = DEFAULT_CURRENCY, *,
                tx_id: str | None = None, evidence: Iterable[str] = (), tool_id: str | None = None) -> LedgerEntry:
        """Reserve ``cost`` of the agent's budget, atomically; :class:`InsufficientBudget` when it
        does not fit (nothing is written then). ``tx_id`` defaults to ``tx-<n>``, ``n`` counting
        the file's entries from 1, so the same operations give the same ids."""
        with self.store.transaction() as conn:
            return self._reserve_in(conn, agent_id, cost, currency_code, tx_id=tx_id, evidence=evidence, tool_id=tool_id)

    def _reserve_in(self, conn: sqlite3.Connection, agent_id: str, cost: Decimal | int, currency_code: str, *,
                    tx_id: str | None = None, evidence: Iterable[str] = (), tool_id: str | None = None,
                    over_budget: bool = False) -> LedgerEntry:
        """:meth:`reserve` inside the caller's open transaction, so a reservation and another write
        (a task's execution record) commit together or not at all. Private: the arguments are
        checked again here (an amount, a currency, a tx_id), as :meth:`reserve` checks them."""
        asked, code, refs = amount("cost_estimate", cost), currency("currency", currency_code), _refs(evidence)
        if tx_id is not None and not is_identifier(tx_id, _TX_ID_PUNCTUATION):
            raise LedgerError(f"tx_id must match {TX_ID_PATTERN}, not {tx_id!r}")
        try:
            self.store.ensure_agent(agent_id)
            seq = int(conn.execute("SELECT COALESCE(MAX(seq), 0) + 1 FROM financial_ledger").fetchone()[0])
            ident = tx_id if tx_id is not None else f"tx-{seq}"
            self._commit(conn, agent_id, code, asked, f"reservation {ident}", over_budget)
            now = self.store.now()
            conn.execute(
                "INSERT INTO financial_ledger (tx_id, agent_id, tx_type, amount, currency, status, created_at, "
                "seq, settled_amount, evidence, tool_id, updated_at) VALUES (?, ?, 'reservation', ?, ?, "
                "'reserved', ?, ?, NULL, ?, ?, ?)",
                (ident, agent_id, text(asked), code, now, seq, json.dumps(refs), tool_id, now))
            return self._entry(conn, ident)
        except sqlite3.IntegrityError as exc:
            raise LedgerError(f"reservation {tx_id or ''} cannot be recorded ({exc}): a tx_id is used once, "
                              f"a tool_id must be registered") from None
        except GuardianStoreError as exc:
            raise LedgerError(str(exc)) from None

    def settle(self, tx_id: str, actual: Decimal | int, *, evidence: Iterable[str] = ()) -> LedgerEntry:
        """Settle a reservation at its actual cost: the difference returns to the budget (or, when
        the cost exceeds the reservation, must fit what is left: :class:`InsufficientBudget`)."""
        cost, refs = amount("actual", actual), _refs(evidence)
        with self.store.transaction() as conn:
            entry = self._open_entry(conn, tx_id, "settle")
            self._commit(conn, entry.agent_id, entry.currency, cost - entry.amount, f"settlement of {tx_id}")
            conn.execute("UPDATE financial_ledger SET status = 'settled', settled_amount = ?, evidence = ?, "
                         "updated_at = ? WHERE tx_id = ?",
                         (text(cost), json.dumps(entry.evidence + refs), self.store.now(), tx_id))
            return self._entry(conn, tx_id)

    def release(self, tx_id: str, *, evidence: Iterable[str] = ()) -> LedgerEntry:
        """Cancel a reservation: its whole amount returns to the budget."""
        refs = _refs(evidence)
        with self.store.transaction() as conn:
            entry = self._open_entry(conn, tx_id, "release")
            self._commit(conn, entry.agent_id, entry.currency, -entry.amount, f"release of {tx_id}")
            conn.execute("UPDATE financial_ledger SET status = 'released', evidence = ?, updated_at = ? "
                         "WHERE tx_id = ?", (json.dumps(entry.evidence + refs), self.store.now(), tx_id))
            return self._entry(conn, tx_id)

    def _open_entry(self, conn: sqlite3.Connection, tx_id: str, verb: str) -> LedgerEntry:
        entry = self._find(conn, tx_id)
        if entry is None:
            raise LedgerError(f"cannot {verb} {tx_id!r}: no such ledger entry")
        if entry.status != "reserved":
            raise LedgerError(f"cannot {verb} {tx_id!r}: it is {entry.status} already")
        return entry

    def entry(self, tx_id: str) -> LedgerEntry | None:
        """The entry ``tx_id`` (None when there is none)."""
        return self._find(self.store.conn, tx_id)

    def entries(self, agent_id: str | None = None) -> list[LedgerEntry]:
        """Every entry (of one agent), in the order they were made."""
        where, args = ("WHERE agent_id = ?", (agent_id,)) if agent_id is not None else ("", ())
        rows = self.store.conn.execute(f"SELECT {', '.join(_COLUMNS)} FROM financial_ledger {where} ORDER BY seq",
                                       args).fetchall()
        return [_row_entry(row) for row in rows]

    def recount(self, agent_id: str, currency_code: str = DEFAULT_CURRENCY) -> Decimal:
        """The agent's committed amount summed again from its entries (an audit of ``budgets``)."""
        return sum((e.committed for e in self.entries(agent_id) if e.currency == currency_code), Decimal(0))

    def _entry(self, conn: sqlite3.Connection, tx_id: str) -> LedgerEntry:
        found = self._find(conn, tx_id)
        assert found is not None, tx_id
        return found

    @staticmethod
    def _find(conn: sqlite3.Connection, tx_id: str) -> LedgerEntry | None:
        row = conn.execute(f"SELECT {', '.join(_COLUMNS)} FROM financial_ledger WHERE tx_id = ?", (tx_id,)).fetchone()
        return None if row is None else _row_entry(row)


def _row_entry(row: tuple[object, ...]) -> LedgerEntry:
    found = dict(zip(_COLUMNS, row))
    found["amount"] = Decimal(str(found["amount"]))
    if found["settled_amount"] is not None:
        found["settled_amount"] = Decimal(str(found["settled_amount"]))
    found["evidence"] = json.loads(str(found["evidence"]))
    for name in ("created_at", "updated_at"):
        found[name] = datetime.fromisoformat(str(found[name] or found["created_at"]))
    return LedgerEntry.model_validate(found)
