"""``cda task add-signer|sign|verify|execute``: exit codes, --json, clear refusals, no tracebacks."""

from __future__ import annotations

import io
import json
import os
from decimal import Decimal
from pathlib import Path

import pytest

from cda.cli.main import main
from cda.guardian.decision import Decision, DecisionRecord
from cda.guardian.guardian_db import GuardianStore
from cda.guardian.ledger import Ledger
from cda.guardian.proposal import ProposedAction, read_action

ACTION = {"action_id": "a1", "agent_id": "agent-42", "tool": {"name": "render", "version": "1"},
          "action_type": "video.render", "cost_estimate": "0.150250001", "task_id": "t-1"}
DIGEST = read_action(ACTION).digest()  # type: ignore[union-attr]
PIN = "cd" * 32
DRAFT = {"task_id": "t-1", "agent_id": "agent-42", "description": "Render hero video", "cost_estimate": 150.25,
         "state": "draft", "created_at": "2026-11-24T20:00:00Z", "action_digest": DIGEST}


def _cda(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), stdout=out, stderr=err)
    assert "Traceback" not in out.getvalue() + err.getvalue()
    return code, out.getvalue(), err.getvalue()


@pytest.fixture()
def world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("CDA_KEY_DIR", str(tmp_path / "keys"))
    monkeypatch.chdir(tmp_path)
    Path("draft.json").write_text(json.dumps(DRAFT).replace("150.25", "0.150250001"))
    code, out, _ = _cda("task", "add-signer", "alice", "--store", "g.sqlite", "--json")
    assert code == 0 and json.loads(out)["key_file"].endswith("signers/alice.ed25519.key")
    assert os.stat(json.loads(out)["key_file"]).st_mode & 0o777 == 0o600
    ledger = Ledger.open("g.sqlite")
    ledger.set_budget("agent-42", "USD", 1000)
    ledger.close()
    return tmp_path


def _record(decision: Decision = Decision.APPROVE) -> None:
    """Record a decision on ACTION under the policy store the file pins (pinned by alice)."""
    from cda.guardian.signers import SignerRegistry, load_signer_key, pin_policy_store, signer_key_path

    record = DecisionRecord(decision=decision, reason="policy_clear" if decision is Decision.APPROVE else "causal_risk",
                            action_digest=DIGEST, policy_digest=PIN)
    action = read_action(ACTION)
    assert isinstance(action, ProposedAction)
    with GuardianStore.open("g.sqlite") as store:
        pin_policy_store(SignerRegistry(store), PIN, "alice", load_signer_key(signer_key_path("alice")))
        store.record_decision(record, action)
    Path("decision.json").write_text(record.model_dump_json())


def test_sign_verify_execute_end_to_end(world: Path) -> None:
    assert _cda("task", "sign", "draft.json", "--store", "g.sqlite", "--signer", "alice", "--out", "signed.json")[0] == 0
    signed = json.loads(Path("signed.json").read_text(), parse_float=str)
    assert signed["state"] == "signed" and signed["cost_estimate"] == "0.150250001"  # exact, as written
    code, out, _ = _cda("task", "verify", "signed.json", "--store", "g.sqlite", "--json")
    assert code == 0 and json.loads(out) == {"ok": True, "problems": [], "signer_id": "alice", "task_id": "t-1"}
    _record()
    Path("result.json").write_text('{"artifact_url": "https://x/hero.mp4", "seconds": 12.5}')
    code, out, _ = _cda("task", "execute", "signed.json", "--store", "g.sqlite", "--decision", "decision.json",
                        "--result", "result.json", "--receipt", "receipt:1")
    done = json.loads(out, parse_float=str)
    assert code == 0 and done["state"] == "executed" and done["audit_ref"] == "ledger://tx-1"
    assert done["result"] == {"artifact_url": "https://x/hero.mp4", "seconds": "12.5"} and done["receipts"] == ["receipt:1"]
    code, _, err = _cda("task", "execute", "signed.json", "--store", "g.sqlite", "--decision", "decision.json")
    assert code == 1 and "executes once" in err
    # `-` is standard input (as everywhere a text file is read): the signed task from a pipe verifies
    out, err = io.StringIO(), io.StringIO()
    assert main(["task", "verify", "-", "--store", "g.sqlite"], stdout=out, stderr=err,
                stdin=io.StringIO(Path("signed.json").read_text())) == 0, err.getvalue()
    assert main(["task", "verify", "-", "--store", "g.sqlite"], stdout=io.StringIO(), stderr=io.StringIO(),
                stdin=io.StringIO("not a task")) == 2


def test_a_tampered_task_fails_verification_and_execution(world: Path) -> None:
    _cda("task", "sign", "draft.json", "--store", "g.sqlite", "--signer", "alice", "--out", "signed.json")
    Path("bad.json").write_text(Path("signed.json").read_text().replace("Render hero video", "Delete prod"))
    code, out, _ = _cda("task", "verify", "bad.json", "--store", "g.sqlite", "--json")
    assert code == 1 and "does not match" in json.loads(out)["problems"][0]
    _record()
    code, _, err = _cda("task", "execute", "bad.json", "--store", "g.sqlite", "--decision", "decision.json")
    assert code == 1 and "signature does not match" in err


def test_execute_needs_an_approve_the_guardian_recorded(world: Path) -> None:
    _cda("task", "sign", "draft.json", "--store", "g.sqlite", "--signer", "alice", "--out", "signed.json")
    Path("decision.json").write_text(DecisionRecord(decision=Decision.APPROVE, reason="policy_clear",
                                                    action_digest=DIGEST).model_dump_json())
    code, _, err = _cda("task", "execute", "signed.json", "--store", "g.sqlite", "--decision", "decision.json")
    assert code == 1 and "not one the guardian recorded" in err
    _record(Decision.ESCALATE)
    code, out, _ = _cda("task", "execute", "signed.json", "--store", "g.sqlite", "--decision", "decision.json", "--json")
    assert code == 1 and "decision is ESCALATE" in json.loads(out)["problems"][0]


def test_unknown_signer_and_wrong_key_are_refused(world: Path) -> None:
    code, _, err = _cda("task", "sign", "draft.json", "--store", "g.sqlite", "--signer", "mallory")
    assert code == 1 and "does not speak for" in err
    code, _, err = _cda("task", "add-signer", "bob", "--store", "g.sqlite")
    assert code == 1 and "has signers already" in err
    assert _cda("task", "add-signer", "bob", "--store", "g.sqlite", "--by", "alice")[0] == 0
    code, _, err = _cda("task", "add-signer", "carol", "--store", "g.sqlite", "--by", "alice",
                        "--by-key", str(world / "keys" / "signers" / "bob.ed25519.key"))
    assert code == 1 and "not its registered one" in err and not (world / "keys" / "signers" / "carol.ed25519.key").exists()
    code, _, err = _cda("task", "sign", "draft.json", "--store", "g.sqlite", "--signer", "alice",
                        "--key", str(world / "keys" / "signers" / "bob.ed25519.key"))
    assert code == 1 and "not the one registered for 'alice'" in err


@pytest.mark.parametrize("argv, words", [
    (["task", "verify", "missing.json", "--store", "g.sqlite"], "cannot read missing.json"),
    (["task", "verify", "draft.json", "--store", "nope.sqlite"], "no such guardian file"),
    (["task", "sign", "notjson.json", "--store", "g.sqlite", "--signer", "alice"], "notjson.json:1:2: not valid JSON"),
    (["task", "sign", "negative.json", "--store", "g.sqlite", "--signer", "alice"], "cost_estimate must be 0 or more"),
    (["task", "execute", "signed.json", "--store", "g.sqlite", "--decision", "notjson.json"], "not valid JSON"),
    (["task", "execute", "signed.json", "--store", "g.sqlite", "--decision", "draft.json"],
     "not a guardian DecisionRecord"),
    (["task", "verify", "draft.json", "--store", "foreign.sqlite"], "not a CDA file"),
])
def test_bad_input_exits_2_with_a_clear_line(world: Path, argv: list[str], words: str) -> None:
    import sqlite3

    _cda("task", "sign", "draft.json", "--store", "g.sqlite", "--signer", "alice", "--out", "signed.json")
    Path("notjson.json").write_text("{nope")
    Path("negative.json").write_text(json.dumps({**DRAFT, "cost_estimate": -1}))
    conn = sqlite3.connect("foreign.sqlite")
    conn.execute("CREATE TABLE mine (x)")
    conn.close()
    code, out, err = _cda(*argv)
    assert code == 2 and words in err and err.startswith("cda: error: ") and out == ""
    code, out, err = _cda(*argv, "--json")
    assert code == 2 and words in json.loads(out)["message"] and err == ""


@pytest.mark.parametrize("argv, words", [
    (["task", "sign", "draft.json", "--store", "g.sqlite"], "the following arguments are required: --signer"),
    (["task", "frobnicate"], "invalid choice"),
])
def test_bad_options_are_usage_errors(world: Path, argv: list[str], words: str) -> None:
    code, _, err = _cda(*argv)
    assert code == 2 and words in err


def test_budget_is_set_exactly_and_bad_amounts_exit_2(world: Path) -> None:
    code, out, _ = _cda("task", "budget", "agent-7", "2000.10", "--store", "g.sqlite", "--json")
    assert code == 0 and json.loads(out) == {"agent_id": "agent-7", "currency": "USD", "budget": "2000.1",
                                             "committed": "0", "remaining": "2000.1"}
    ledger = Ledger.open("g.sqlite")
    assert ledger.within_budget("agent-7", Decimal("2000.1"), "USD") and not ledger.within_budget("agent-7", 2001, "USD")
    ledger.close()
    for bad, words in (("NaN", "finite"), ("-5", "0 or more"), ("1e400", "at most"), ("ten", "exact decimal"),
                       ("0.0000000001", "decimal places")):
        code, _, err = _cda("task", "budget", "agent-7", bad, "--store", "g.sqlite")
        assert code == 2 and words in err, (bad, err)
    code, _, err = _cda("task", "budget", "agent-7", "5", "--currency", "usd", "--store", "g.sqlite")
    assert code == 2 and "--currency must be a currency code" in err
