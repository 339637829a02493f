"""The CFO ledger: exact money, budgets, reservations that never overspend, even racing."""

from __future__ import annotations

import multiprocessing
from decimal import Decimal
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cda.errors import OptionError
from cda.guardian.guardian_db import GuardianStore
from cda.guardian.ledger import InsufficientBudget, Ledger, LedgerEntry, LedgerError
from cda.guardian.money import amount, dump_exact, load_exact
from tests.timing import HANG


def _ledger(tmp_path: Path | None = None) -> Ledger:
    return Ledger(GuardianStore.open(":memory:" if tmp_path is None else tmp_path / "g.sqlite"))


# ---------------------------------------------------------------- exact amounts


def test_json_numbers_are_read_exactly_and_written_back_the_same() -> None:
    doc = load_exact('{"cost": 0.1, "budget": 12345678901234.12345678, "n": 3}', "x.json")
    assert doc["cost"] == Decimal("0.1") and doc["budget"] == Decimal("12345678901234.12345678")
    assert amount("cost", doc["cost"]) + amount("c", Decimal("0.2")) == Decimal("0.3")
    assert dump_exact(doc) == '{"budget":12345678901234.12345678,"cost":0.1,"n":3}'


@pytest.mark.parametrize("bad, words", [
    (0.5, "not a float"), (True, "exact amount"), ("1.5", "exact amount"), (Decimal("NaN"), "finite"),
    (Decimal("Infinity"), "finite"), (-1, "0 or more"), (Decimal("-0.01"), "0 or more"),
    (10**16, "at most"), (10**400, "at most"), (Decimal("1e400"), "at most"), (Decimal("0.1234567891"), "9 decimal places"),
])
def test_bad_amounts_are_refused_naming_the_field(bad: object, words: str) -> None:
    with pytest.raises(OptionError, match=f"^cost_estimate .*{words}"):
        amount("cost_estimate", bad)


def test_json_constants_nan_and_infinity_are_not_numbers() -> None:
    from cda.errors import CDAError

    for text in ('{"c": NaN}', '{"c": Infinity}', '{"c": -Infinity}'):
        with pytest.raises(CDAError, match="x.json: not valid JSON"):
            load_exact(text, "x.json")


# ---------------------------------------------------------------- budgets and entries


def test_reserve_settle_release_move_exact_money() -> None:
    ledger = _ledger()
    ledger.set_budget("agent-42", "USD", Decimal("500"))
    first = ledger.reserve("agent-42", Decimal("150.10"), "USD", evidence=["receipt:1"])
    second = ledger.reserve("agent-42", 300, "USD")
    assert (first.tx_id, second.tx_id) == ("tx-1", "tx-2") and first.amount == Decimal("150.1")
    assert ledger.remaining("agent-42", "USD") == Decimal("49.9")
    assert not ledger.within_budget("agent-42", Decimal("49.91"), "USD")
    assert ledger.within_budget("agent-42", Decimal("49.9"), "USD")
    with pytest.raises(InsufficientBudget, match="49.91 USD does not fit.*49.9 USD left"):
        ledger.reserve("agent-42", Decimal("49.91"), "USD")
    settled = ledger.settle("tx-1", Decimal("120.05"), evidence=["receipt:2"])
    assert settled.status == "settled" and settled.settled_amount == Decimal("120.05")
    assert settled.evidence == ["receipt:1", "receipt:2"]
    assert ledger.remaining("agent-42", "USD") == Decimal("79.95")
    released = ledger.release("tx-2")
    assert released.status == "released" and ledger.remaining("agent-42", "USD") == Decimal("379.95")
    assert ledger.recount("agent-42", "USD") == ledger.balance("agent-42", "USD").committed == Decimal("120.05")
    with pytest.raises(LedgerError, match="settled already"):
        ledger.release("tx-1")
    with pytest.raises(LedgerError, match="released already"):
        ledger.settle("tx-2", 1)
    with pytest.raises(LedgerError, match="no such ledger entry"):
        ledger.settle("tx-9", 1)


def test_budgets_are_per_agent_and_currency_and_none_means_nothing() -> None:
    ledger = _ledger()
    ledger.set_budget("a", "USD", 10)
    assert not ledger.within_budget("a", 1, "EUR") and not ledger.within_budget("b", 1, "USD")
    assert ledger.within_budget("b", 0, "USD")  # a zero cost needs no budget
    with pytest.raises(InsufficientBudget):
        ledger.reserve("a", 1, "EUR")
    assert ledger.reserve("b", 0, "USD").amount == 0  # recorded for the audit trail, nothing committed
    with pytest.raises(OptionError, match="currency must be a currency code"):
        ledger.reserve("a", 1, "usd")


def test_settling_above_the_reservation_must_fit_the_budget() -> None:
    ledger = _ledger()
    ledger.set_budget("a", "USD", 10)
    ledger.reserve("a", 6, "USD")
    ledger.reserve("a", 3, "USD")
    with pytest.raises(InsufficientBudget, match="settlement of tx-1"):
        ledger.settle("tx-1", Decimal("7.01"))
    assert ledger.entry("tx-1").status == "reserved"  # type: ignore[union-attr]  # nothing written on refusal
    assert ledger.settle("tx-1", 7).settled_amount == 7 and ledger.remaining("a", "USD") == 0


def test_a_tx_id_is_used_once() -> None:
    ledger = _ledger()
    ledger.set_budget("a", "USD", 10)
    ledger.reserve("a", 1, "USD", tx_id="task-1")
    with pytest.raises(LedgerError, match="used once"):
        ledger.reserve("a", 1, "USD", tx_id="task-1")
    assert ledger.remaining("a", "USD") == 9  # the refused one committed nothing


def test_lowering_a_budget_below_what_is_committed_blocks_new_reservations() -> None:
    ledger = _ledger()
    ledger.set_budget("a", "USD", 10)
    ledger.reserve("a", 8, "USD")
    assert ledger.set_budget("a", "USD", 5).remaining == -3
    assert not ledger.within_budget("a", Decimal("0.01"), "USD")


def test_entries_round_trip_through_exact_json() -> None:
    ledger = _ledger()
    ledger.set_budget("a", "BTC", Decimal("0.00000003"))
    entry = ledger.reserve("a", Decimal("0.00000002"), "BTC", evidence=["decision:abc"])
    doc = entry.to_json()
    assert '"amount":0.00000002' in doc
    assert LedgerEntry.model_validate(load_exact(doc, "entry")) == entry


@settings(max_examples=30, deadline=None)
@given(costs=st.lists(st.integers(min_value=0, max_value=500), min_size=1, max_size=12),
       budget=st.integers(min_value=0, max_value=2000), cut=st.integers(min_value=0, max_value=2000))
def test_lowering_a_budget_never_lets_a_refused_reservation_succeed(costs: list[int], budget: int, cut: int) -> None:
    """At every state of a ledger, what the budget refuses a lower budget refuses too."""
    high, low = Decimal(budget) / 100, Decimal(min(cut, budget)) / 100
    ledger = _ledger()
    for cost in (Decimal(c) / 100 for c in costs):
        ledger.set_budget("a", "USD", low)
        try:
            ledger.release(ledger.reserve("a", cost, "USD").tx_id)  # try under the lower budget, then undo
            ok_low = True
        except InsufficientBudget:
            ok_low = False
        ledger.set_budget("a", "USD", high)
        try:
            ledger.reserve("a", cost, "USD")
            ok_high = True
        except InsufficientBudget:
            ok_high = False
        assert ok_high or not ok_low
        assert ledger.balance("a", "USD").committed == ledger.recount("a", "USD") <= high


@settings(max_examples=30, deadline=None)
@given(cost=st.integers(min_value=1, max_value=500), tries=st.integers(min_value=0, max_value=15),
       budget=st.integers(min_value=0, max_value=3000), cut=st.integers(min_value=0, max_value=3000))
def test_lowering_a_budget_never_lets_more_equal_reservations_succeed(cost: int, tries: int, budget: int,
                                                                      cut: int) -> None:
    def successes(limit: int) -> int:
        ledger = _ledger()
        ledger.set_budget("a", "USD", Decimal(limit) / 100)
        won = 0
        for _ in range(tries):
            try:
                ledger.reserve("a", Decimal(cost) / 100, "USD")
                won += 1
            except InsufficientBudget:
                pass
        return won

    high, low = successes(budget), successes(min(cut, budget))
    assert low <= high == min(tries, budget // cost)


# ---------------------------------------------------------------- the race

_AMOUNT = Decimal("0.37")
_ALLOWED = 1337  # the budget covers exactly this many reservations of _AMOUNT
_BUDGET = _AMOUNT * _ALLOWED + Decimal("0.36")


def _racer(path: str, worker: int, count: int, start: object, out: object) -> None:
    ledger = Ledger.open(path)
    start.wait()  # type: ignore[attr-defined]
    won = 0
    for i in range(count):
        try:
            ledger.reserve("agent-42", _AMOUNT, "USD", evidence=[f"worker:{worker}:{i}"])
            won += 1
        except InsufficientBudget:
            pass
    ledger.close()
    out.put(won)  # type: ignore[attr-defined]


def test_four_processes_racing_500_reservations_each_never_overspend(tmp_path: Path) -> None:
    path = tmp_path / "guardian.sqlite"
    Ledger.open(path).set_budget("agent-42", "USD", _BUDGET)
    ctx = multiprocessing.get_context("spawn")
    start, out = ctx.Barrier(4), ctx.Queue()
    procs = [ctx.Process(target=_racer, args=(str(path), w, 500, start, out)) for w in range(4)]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(HANG)
    assert all(proc.exitcode == 0 for proc in procs)
    won = sum(out.get(timeout=5) for _ in procs)
    ledger = Ledger.open(path)
    balance = ledger.balance("agent-42", "USD")
    entries = ledger.entries("agent-42")
    assert won == _ALLOWED == len(entries)
    assert balance.committed == _AMOUNT * _ALLOWED == ledger.recount("agent-42", "USD") <= _BUDGET
    assert balance.remaining == Decimal("0.36")
    assert sorted(e.tx_id for e in entries) == sorted(f"tx-{i}" for i in range(1, _ALLOWED + 1))
