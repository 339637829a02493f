"""The guardian's SQLite file: created, marked, migrated from an older version, foreign files refused."""

from __future__ import annotations

import hashlib
import sqlite3
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cda.guardian.decision import Decision, DecisionRecord
from cda.guardian.guardian_db import APPLICATION_ID, MIGRATIONS, SCHEMA_VERSION, GuardianStore, GuardianStoreError
from cda.guardian.ledger import Ledger

CLOCK = lambda: datetime(2026, 11, 24, 20, 0, tzinfo=UTC)  # noqa: E731


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_new_file_is_marked_versioned_and_in_wal_mode(tmp_path: Path) -> None:
    path = tmp_path / "g.sqlite"
    with GuardianStore.open(path, CLOCK) as store:
        assert store.version == SCHEMA_VERSION == len(MIGRATIONS)
        assert store.conn.execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID
        assert store.conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        tables = {r[0] for r in store.conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        assert {"agent_identity", "causal_hypothesis", "financial_ledger", "mcp_tool_registry", "budgets", "signers",
                "tasks", "decisions"} <= tables and "schema_version" not in tables
    before = _digest(path)
    with GuardianStore.open(path, CLOCK) as again:  # opening again changes nothing
        assert again.version == SCHEMA_VERSION
    assert _digest(path) == before


def test_an_older_file_is_migrated_keeping_its_rows(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite"
    GuardianStore.open(path, CLOCK, upto=1).close()  # a file as version 1 (the seed's ERD alone) wrote it
    conn = sqlite3.connect(path)
    conn.execute("INSERT INTO agent_identity VALUES ('agent-1', 'persona', 'wallet', '2026-01-01T00:00:00+00:00')")
    conn.execute("INSERT INTO financial_ledger VALUES ('old-tx', 'agent-1', 'reservation', '12.50', 'USD', "
                 "'reserved', '2026-01-01T00:00:00+00:00')")
    conn.commit()
    conn.close()
    with GuardianStore.open(path, CLOCK) as store:
        assert store.version == SCHEMA_VERSION
        assert store.agent("agent-1") == {"agent_id": "agent-1", "persona_ref": "persona", "wallet_address": "wallet",
                                          "created_at": "2026-01-01T00:00:00+00:00"}
        ledger = Ledger(store)
        old = ledger.entry("old-tx")
        assert old is not None and old.amount == Decimal("12.5") and old.evidence == [] and old.status == "reserved"
        ledger.set_budget("agent-1", "USD", 20)
        assert ledger.reserve("agent-1", 1, "USD").tx_id == "tx-2"  # numbering continues after the migrated row
        assert ledger.release("old-tx").status == "released"


@pytest.mark.parametrize("make, words", [
    (lambda c: c.execute("CREATE TABLE notes (x)"), "not a CDA file.*no CDA mark; it holds notes"),
    (lambda c: c.execute("PRAGMA application_id = 1234"), "not a CDA file.*application_id is 0x000004d2"),
    (lambda c: c.execute("PRAGMA user_version = 1"), "not a CDA file.*no CDA mark and no table"),
    (lambda c: c.execute(f"PRAGMA application_id = {0x43444131}"), "a CDA receipt log, not a CDA guardian file"),
])
def test_a_file_that_is_not_ours_is_refused_and_never_modified(tmp_path: Path, make, words: str) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "other.sqlite"
    conn = sqlite3.connect(path)
    make(conn)
    conn.commit()
    conn.close()
    before, files = _digest(path), sorted(p.name for p in tmp_path.iterdir())
    with pytest.raises(GuardianStoreError, match=words):
        GuardianStore.open(path)
    assert _digest(path) == before and sorted(p.name for p in tmp_path.iterdir()) == files


def test_a_file_that_is_not_sqlite_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "text.sqlite"
    path.write_text("hello, not a database\n" * 100)
    with pytest.raises(GuardianStoreError, match="not an SQLite database"):
        GuardianStore.open(path)
    assert path.read_text() == "hello, not a database\n" * 100
    with pytest.raises(GuardianStoreError, match="not a file"):
        GuardianStore.open(tmp_path)


def test_an_empty_file_is_made_ours(tmp_path: Path) -> None:
    path = tmp_path / "empty.sqlite"
    path.touch()
    with GuardianStore.open(path) as store:
        assert store.version == SCHEMA_VERSION


def test_hypotheses_keep_json_and_the_exact_risk_score() -> None:
    store = GuardianStore.open(":memory:", CLOCK)
    inputs = {"budget": "150.25", "channel": "ads"}
    prediction = {"kpis": {"ctr": {"mean": "0.031", "variance": "0.0001"}}}
    store.record_hypothesis("h-1", "agent-42", "launch ads", inputs, prediction, 0.1 + 0.2)
    found = store.hypothesis("h-1")
    assert found is not None and found["inputs"] == inputs and found["prediction"] == prediction
    assert found["risk_score"] == "0.30000000000000004" and found["agent_id"] == "agent-42"
    from pydantic import BaseModel

    class Prediction(BaseModel):  # as a simulator's model would be
        kpis: dict[str, Decimal]

    store.record_hypothesis("h-2", "agent-42", "x", {}, Prediction(kpis={"ctr": Decimal("0.031")}), Decimal("0.125"))
    assert store.hypothesis("h-2")["prediction"] == {"kpis": {"ctr": "0.031"}}  # type: ignore[index]
    assert store.hypothesis("h-2")["risk_score"] == "0.125"  # type: ignore[index]
    for bad in (1.5, -0.1, float("nan"), "abc", True):
        with pytest.raises(GuardianStoreError, match="risk_score"):
            store.record_hypothesis("h-3", "agent-42", "x", {}, {}, bad)
    with pytest.raises(GuardianStoreError, match="cannot be stored"):
        store.record_hypothesis("h-1", "agent-42", "again", {}, {}, 0)


def test_tools_are_registered_once_with_one_meaning() -> None:
    store = GuardianStore.open(":memory:", CLOCK)
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}}
    tool = store.register_tool("mcp-twitter.post", "post", "1.0", schema)
    assert tool.schema_ == schema and store.tool("mcp-twitter.post") == tool
    assert store.register_tool("mcp-twitter.post", "post", "1.0", dict(schema)) == tool  # the same again: no-op
    with pytest.raises(GuardianStoreError, match="another name, version or schema"):
        store.register_tool("mcp-twitter.post", "post", "2.0", schema)
    assert store.tool("nope") is None


def test_decisions_are_recorded() -> None:
    store = GuardianStore.open(":memory:", CLOCK)
    record = DecisionRecord(decision=Decision.REJECT, reason="policy:no_prod_delete", action_digest="b" * 64)
    first = store.record_decision(record)
    assert store.conn.execute("SELECT decision, reason FROM decisions WHERE decision_id = ?", (first,)).fetchone() == (
        "REJECT", "policy:no_prod_delete")


def test_a_naive_clock_is_refused() -> None:
    store = GuardianStore.open(":memory:", lambda: datetime(2026, 1, 1))
    with pytest.raises(GuardianStoreError, match="timezone-aware"):
        store.ensure_agent("a")


@settings(max_examples=300, deadline=None)
@given(text=st.text(alphabet=st.sampled_from("aZ09_.:@/-é \n"), max_size=130) | st.text(max_size=5))
def test_the_id_check_without_regexes_agrees_with_the_schemas_patterns(text: str) -> None:
    import re

    from cda.guardian.guardian_db import is_identifier
    from cda.guardian.ledger import TX_ID_PATTERN
    from cda.guardian.tasks import ID_PATTERN, ID_PUNCTUATION

    assert is_identifier(text, ID_PUNCTUATION) == bool(re.fullmatch(ID_PATTERN, text))
    assert is_identifier(text, "_.:@/-") == bool(re.fullmatch(TX_ID_PATTERN, text))
    assert is_identifier("a" * 128, "_") and not is_identifier("a" * 129, "_")
