"""Files an earlier CDA wrote still open, migrate, and keep what they held.

``tests/data/stores-37fbddd/`` holds one file of each kind as the code of commit 37fbddd (the last
before the stores moved onto :mod:`cda.store`) wrote it (its README says with which commands).
Each test copies them to a temporary folder and uses them with today's code, through the same
doors a user would (``cda investigate``, ``cda jobs run``, ``cda receipts verify``, ``cda
conduct``, the guardian's and the server's stores).

Oracles: what the old commands printed and wrote (the fixture's own ``results.jsonl``, the
session id, the pinned digest, the ledger), the bytes of a file a reader must not change, and
``cda receipts verify``'s verdict.
"""

from __future__ import annotations

import hashlib
import io
import json
import shutil
import sqlite3
from pathlib import Path

import pytest

from cda.cli.main import main
from tests.conftest import ROOT

OLD = ROOT / "tests" / "data" / "stores-37fbddd"
SESSION = "7211262bff094072"


def _pragmas(path: Path) -> tuple[int, int]:
    conn = sqlite3.connect(path)
    try:
        return int(conn.execute("PRAGMA application_id").fetchone()[0]), int(conn.execute("PRAGMA user_version").fetchone()[0])
    finally:
        conn.close()


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _cli(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(args), out, err)
    return code, out.getvalue(), err.getvalue()


@pytest.fixture
def old(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The old files in a folder of their own (the working directory), the old keys as the key folder."""
    folder = tmp_path / "old"
    shutil.copytree(OLD, folder)
    for key in (folder / "keys").rglob("*.key"):
        key.chmod(0o600)
    (folder / "keys").chmod(0o700)
    (folder / "keys" / "signers").chmod(0o700)
    monkeypatch.setenv("CDA_KEY_DIR", str(folder / "keys"))
    monkeypatch.chdir(folder)
    return folder


def test_an_old_receipt_log_verifies_before_and_after_a_writer_migrates_it(old: Path) -> None:
    from cda.actions.receipts import ReceiptLog
    from cda.adapters.event_store import EventStore
    from cda.contracts.receipt import Receipt

    db = old / "receipts.sqlite"
    assert _pragmas(db) == (0x43444131, 2)
    code, out, err = _cli("receipts", "verify", str(db))  # a reader: the file stays as it was
    assert code == 0 and "intact" in out.lower(), out + err
    assert _pragmas(db) == (0x43444131, 2)
    with ReceiptLog(db) as log:
        entries = log.count()
        assert entries > 100 and log.file.found_version == 2
    events = EventStore(db)
    assert events.since("cda-fd6aa87cd8b19525")[-1].type == "action_completed"
    events.close()
    assert _pragmas(db) == (0x43444131, 3)
    code, out, err = _cli("receipts", "verify", str(db))
    assert code == 0 and "intact" in out.lower(), out + err
    with ReceiptLog(db) as log:  # and it goes on: the chain extends, the signed head covers what it did
        log.append(Receipt(action_id="later", seq=0, kind="solver", name="z3.check", inputs_hash="0" * 64))
        assert log.count() == entries + 1
    code, out, _ = _cli("receipts", "verify", str(db))  # an entry no signature covers and no key vouched for
    assert code == 3 and "UNVERIFIED" in out and "1 of the 1 entries after the signed head" in out, out


def test_an_old_investigations_file_is_read_without_a_change_then_stepped(old: Path) -> None:
    db = old / "inv.sqlite"
    before = _digest(db)
    code, out, err = _cli("investigate", "status", SESSION, "--db", str(db), "--json")
    assert code == 0, err
    assert json.loads(out)["observations"] == ["slow(auth)"]
    assert _digest(db) == before and sorted(p.name for p in old.glob("inv.sqlite*")) == ["inv.sqlite"]
    code, out, err = _cli("investigate", "observe", SESSION, "slow(db)", "--db", str(db))
    assert code == 0, err
    assert _pragmas(db) == (0x43444149, 3)
    code, out, _ = _cli("investigate", "history", SESSION, "--db", str(db), "--json")
    assert [s["kind"] for s in json.loads(out)["steps"]] == ["start", "observe", "observe"]


def test_an_old_conductor_database_resumes_and_answers_the_same(old: Path) -> None:
    from cda.conductor.irdb import IRDatabase

    db = old / "ir.sqlite"
    assert _pragmas(db) == (0x43444131, 2)  # the old conductor marked its file as a receipt log
    with IRDatabase(db) as ir:
        utterance, stage, status, answer = ir.request(1)
    assert (utterance, stage) == ("compute (1 + 2) * 0.1", "answered") and answer is not None
    assert _pragmas(db) == (0x43444143, 3)
    code, out, err = _cli("conduct", "compute (1 + 2) * 0.1", "--db", str(db), "--json")
    assert code == 0, err
    assert json.loads(out)["answer"] == answer
    code, _, err = _cli("receipts", "verify", str(db))  # it is not a receipt log, and says so
    assert code == 2 and "a CDA conductor IR database, not a CDA receipt log" in err


def test_an_old_jobs_folder_resumes_and_its_results_verify(old: Path) -> None:
    (old / "jobs").mkdir()
    shutil.move(old / "results.sqlite", old / "jobs" / "results.sqlite")
    shutil.copy(old / "results.jsonl", old / "jobs" / "results.jsonl")
    code, out, err = _cli("jobs", "run", "checks.toml", "--out", "jobs", "--workers", "1")
    assert "2 ran now" not in out and "0 ran now, 2 were done before" in out, out + err
    assert (old / "jobs" / "results.jsonl").read_bytes() == (old / "results.jsonl").read_bytes()
    assert _pragmas(old / "jobs" / "results.sqlite") == (0x4344414A, 2)
    code, out, err = _cli("receipts", "verify", "jobs/results.sqlite")
    assert code == 0 and "intact" in out.lower(), out + err


def test_an_old_guardian_file_keeps_its_ledger_and_pins(old: Path) -> None:
    from decimal import Decimal

    from cda.guardian.guardian_db import SCHEMA_VERSION, GuardianStore
    from cda.guardian.ledger import Ledger

    with GuardianStore.open(old / "guardian.db") as store:
        assert store.version == SCHEMA_VERSION
        tables = {r[0] for r in store.conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        assert "schema_version" not in tables
        balance = Ledger(store).balance("agent-7", "USD")
        assert balance.budget == Decimal("2000") and balance.committed == Decimal("1500")
        assert store.setting("policy_digest") == "cf6f5d7331634b19e35ac082997e5889d260763d00e0e107e46b07692f855332"


def test_an_old_servers_state_and_sessions_open(old: Path) -> None:
    from types import SimpleNamespace

    from cda.operations import Principal
    from cda.operations.base import OperationError
    from cda.operations.investigate import InvestigateObserveParams, SessionRef, desk_for
    from cda.service.state import ServiceState

    db = old / "server.sqlite"
    shutil.copy(old / "receipts.sqlite", db)
    state = ServiceState(db)
    try:
        assert state.owner("act-1") == "alice" and state.source("sub-1") is not None
        assert state.offers("act-1") == ["sub-1.r1"]
    finally:
        state.close()
    desk = desk_for(db)
    alice = SimpleNamespace(principal=Principal("alice", "partner"), base_dir=old)  # a ToolBus call's principal
    bob = SimpleNamespace(principal=Principal("bob", "partner"), base_dir=old)
    sessions = sqlite3.connect(old / "server.sqlite.investigations.sqlite")
    (sid,) = sessions.execute("SELECT session_id FROM owners").fetchone()
    sessions.close()
    memory = desk.call(alice, "investigate.status", SessionRef(session_id=sid))
    assert memory.memory.observations == ["slow(auth)"]  # type: ignore[attr-defined]
    with pytest.raises(OperationError):  # the owner recorded by the old server still holds
        desk.call(bob, "investigate.observe", InvestigateObserveParams(session_id=sid, observation="slow(db)"))
    assert _pragmas(old / "server.sqlite.investigations.sqlite") == (0x43444149, 3)
