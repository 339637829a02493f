"""``cda guard``: exit 0 approve, 1 reject, 3 escalate; 2 (one clear line, no traceback) when it
cannot decide; ``--json`` prints the decision record as one object."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from cda.cli.main import main
from cda.guardian.ledger import Ledger
from cda.guardian.proposal import ProposedAction, read_action

POLICIES = '''\
[config]
max_auto_launch_risk = 0.2

[facts]
deletes = { action_type = ["db.delete"] }
touches_prod = { resource = ["prod/*"] }

[[policy]]
id = "no_prod_delete"
dsl = "not (deletes and touches_prod)"

[[policy]]
id = "spend_cap"
dsl = """
value(metric:cost) <= 500 USD"""
'''


def doc(**changes: Any) -> str:
    base: dict[str, Any] = {"action_id": "a1", "agent_id": "agent-7", "tool": {"name": "sql", "version": "1.0"},
                            "action_type": "db.read", "resources": ["staging/db"], "cost_estimate": 12.5}  # fmt: skip
    base.update(changes)
    return json.dumps(base)


@pytest.fixture
def files(tmp_path: Path) -> Path:
    (tmp_path / "policies.toml").write_text(POLICIES)
    ledger = Ledger.open(tmp_path / "guardian.db")
    ledger.set_budget("agent-7", "USD", Decimal(100))
    ledger.close()
    return tmp_path


def guard(folder: Path, action_text: str | None, *extra: str) -> tuple[int, str, str]:
    if action_text is not None:
        (folder / "action.json").write_text(action_text)
    out, err = io.StringIO(), io.StringIO()
    code = main(["guard", str(folder / "action.json"), "--policies", str(folder / "policies.toml"),
                 "--ledger", str(folder / "guardian.db"), *extra], stdout=out, stderr=err)  # fmt: skip
    return code, out.getvalue(), err.getvalue()


def test_each_decision_has_its_exit_status_and_json_record(files: Path) -> None:
    cases = [
        (doc(), 0, "APPROVE", "policy_clear"),
        (doc(action_type="db.delete", resources=["prod/users"]), 1, "REJECT", "policy:no_prod_delete"),
        (doc(cost_estimate="250"), 3, "ESCALATE", "budget_exceeded"),
        (doc(cost_estimate=-5), 1, "REJECT", "malformed_action"),
        ("{not json", 1, "REJECT", "malformed_action"),
    ]
    for text, status, decision, reason in cases:
        code, out, err = guard(files, text, "--json")
        record = json.loads(out)
        assert (code, record["decision"], record["reason"], err) == (status, decision, reason, ""), text
        assert set(record) >= {"decision", "reason", "details", "action_digest", "seed", "receipt"}


def test_each_decision_is_recorded_in_the_guardian_file(files: Path) -> None:
    """`cda task execute` accepts only a decision the guardian recorded in its file."""
    from cda.contracts.receipt import canonical_json
    from cda.guardian.decision import DecisionRecord
    from cda.guardian.guardian_db import GuardianStore

    _, out, _ = guard(files, doc(), "--json")
    record = DecisionRecord.model_validate_json(out)
    store = GuardianStore.open(files / "guardian.db")
    rows = store.conn.execute("SELECT action_digest, decision, body FROM decisions").fetchall()
    store.close()
    assert rows == [(record.action_digest, "APPROVE", canonical_json(record.model_dump(mode="json")))]


def test_the_text_report_names_the_violating_facts(files: Path) -> None:
    code, out, _ = guard(files, doc(action_type="db.delete", resources=["x", "prod/users"]))
    assert code == 1
    assert out.splitlines()[:3] == ["REJECT policy:no_prod_delete", "  fact deletes = True  ($.action_type)",
                                    "  fact touches_prod = True  ($.resources[1])"]  # fmt: skip


def test_the_same_action_gives_the_same_bytes(files: Path) -> None:
    first, second = guard(files, doc(), "--json"), guard(files, None, "--json")
    assert first == second


def test_receipts_are_appended(files: Path) -> None:
    from cda.actions.receipts import ReceiptLog

    guard(files, doc(), "--receipts", str(files / "receipts.db"))
    guard(files, doc(cost_estimate=900), "--receipts", str(files / "receipts.db"))
    log = ReceiptLog(files / "receipts.db")
    assert [e.receipt.result["reason"] for e in log.entries()] == ["policy_clear", "policy:spend_cap"]
    log.close()


def test_what_cannot_be_decided_exits_2_with_one_clear_line(files: Path) -> None:
    (files / "action.json").write_text(doc())
    code, out, err = guard(files, None, "--ledger", str(files / "missing.db"))
    assert (code, out) == (2, "") and "cannot read" in err and "missing.db" in err
    (files / "action.json").unlink()
    code, _, err = guard(files, None)
    assert code == 2 and "cannot read" in err and "action.json" in err
    (files / "policies.toml").write_text(POLICIES.replace("<= 500 USD", "<= 500 USD and nonesuch"))
    code, _, err = guard(files, doc())
    assert code == 2 and err.startswith(f"{files / 'policies.toml'}:15:35: error: policy spend_cap: ")
    (files / "policies.toml").write_text("[config\n")
    code, _, err = guard(files, doc())
    assert code == 2 and "policies.toml:1:8: error: not valid TOML" in err
    code, _, err = guard(files, doc(), "--seed", "nan")
    assert code == 2 and "--seed" in err and "Traceback" not in err


def test_sim_says_clearly_when_the_model_cannot_be_used(files: Path) -> None:
    (files / "model.json").write_text("{}")
    code, out, err = guard(files, doc(), "--sim", str(files / "model.json"))
    assert code == 2 and out == "" and "Traceback" not in err
    assert "nodes: a model needs a table of nodes" in err and str(files / "model.json") in err, err


def test_the_console_command_decides_the_same_bytes_in_two_processes(files: Path) -> None:
    """Two processes with different string hashing (set and dict orders) print the same record."""
    import os

    (files / "action.json").write_text(doc(action_type="db.delete", resources=["prod/x", "prod/y"]))
    outs = []
    for hash_seed in ("1", "2"):
        run = subprocess.run([sys.executable, "-m", "cda", "guard", str(files / "action.json"), "--policies", str(files / "policies.toml"),
                              "--ledger", str(files / "guardian.db"), "--json"], capture_output=True, text=True, timeout=120,
                             env={**os.environ, "PYTHONHASHSEED": hash_seed})  # fmt: skip
        assert run.returncode == 1 and json.loads(run.stdout)["reason"] == "policy:no_prod_delete" and run.stderr == ""
        outs.append(run.stdout)
    assert outs[0] == outs[1]


def test_the_documented_examples_decide_as_docs_guardian_md_says(tmp_path: Path) -> None:
    """docs/guardian.md walks examples/guardian/ through the gate; without --sim the causal step
    is skipped, which the page says turns the fourth action's ESCALATE into APPROVE."""
    root = Path(__file__).resolve().parent.parent / "examples" / "guardian"
    ledger = Ledger.open(tmp_path / "guardian.db")
    ledger.set_budget("agent-7", "USD", Decimal(2000))
    ledger.close()
    expected = {"launch": (0, "APPROVE policy_clear"), "delete": (1, "REJECT policy:no_prod_delete"),
                "big_launch": (3, "ESCALATE budget_exceeded"), "pushy_launch": (0, "APPROVE policy_clear"),
                "malformed": (1, "REJECT malformed_action")}  # fmt: skip
    page = (root.parent.parent / "docs" / "guardian.md").read_text()
    for name, (status, first) in expected.items():
        out = io.StringIO()
        code = main(["guard", str(root / f"{name}.json"), "--policies", str(root / "policies.toml"),
                     "--ledger", str(tmp_path / "guardian.db")], stdout=out, stderr=io.StringIO())  # fmt: skip
        assert (code, out.getvalue().splitlines()[0]) == (status, first), name
        if name in ("delete", "big_launch", "malformed"):  # not simulated: as the page shows them, receipt and all
            assert out.getvalue() in page, name


def test_an_approved_action_executes_as_a_signed_task_and_a_rejected_one_does_not(files: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The gate and the task lifecycle together: `cda guard` decides and records; the task drafted
    from the same action (`cda task draft`) is signed and executes on the APPROVE made under the
    pinned policy store, and is refused on a REJECT."""
    monkeypatch.setenv("CDA_KEY_DIR", str(files / "keys"))
    monkeypatch.chdir(files)
    db = str(files / "guardian.db")

    def cli(*argv: str) -> tuple[int, str, str]:
        out, err = io.StringIO(), io.StringIO()
        return main(list(argv), stdout=out, stderr=err), out.getvalue(), err.getvalue()

    assert cli("task", "add-signer", "alice", "--store", db)[0] == 0
    assert cli("task", "pin-policies", "policies.toml", "--store", db, "--by", "alice")[0] == 0
    for name, text, status in (("ok", doc(task_id="t-ok"), 0), ("bad", doc(task_id="t-bad", action_type="db.delete", resources=["prod/x"]), 1)):
        (files / f"{name}.json").write_text(text)
        code, out, _ = cli("guard", f"{name}.json", "--policies", "policies.toml", "--ledger", db, "--json")
        assert code == status
        (files / f"{name}.decision.json").write_text(out)
        assert cli("task", "draft", f"{name}.json", "--out", f"{name}.draft.json")[0] == 0
        assert cli("task", "sign", f"{name}.draft.json", "--store", db, "--signer", "alice", "--out", f"{name}.signed.json")[0] == 0
        code, out, err = cli("task", "execute", f"{name}.signed.json", "--store", db, "--decision", f"{name}.decision.json")
        if status == 0:
            assert code == 0 and json.loads(out)["state"] == "executed", err
        else:
            assert code == 1 and "not APPROVE" in err


def test_an_approve_from_a_laxer_policy_store_does_not_execute(files: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The review's repro: REJECT under the real policies, then APPROVE under an empty store
    recorded in the same file; the signed task is refused (the file pins the real store), and a
    caller without a signer's key cannot register a signer of its own."""
    monkeypatch.setenv("CDA_KEY_DIR", str(files / "keys"))
    monkeypatch.chdir(files)
    db = str(files / "guardian.db")

    def cli(*argv: str) -> tuple[int, str, str]:
        out, err = io.StringIO(), io.StringIO()
        return main(list(argv), stdout=out, stderr=err), out.getvalue(), err.getvalue()

    assert cli("task", "add-signer", "alice", "--store", db)[0] == 0
    assert cli("task", "pin-policies", "policies.toml", "--store", db, "--by", "alice")[0] == 0
    (files / "empty.toml").write_text("")
    (files / "delete.json").write_text(doc(task_id="t-2", action_type="db.delete", resources=["prod/x"], cost_estimate=0))
    assert cli("guard", "delete.json", "--policies", "policies.toml", "--ledger", db)[0] == 1
    code, forged, _ = cli("guard", "delete.json", "--policies", "empty.toml", "--ledger", db, "--json")
    assert code == 0 and json.loads(forged)["policy_digest"] != ""
    (files / "forged.json").write_text(forged)
    assert cli("task", "draft", "delete.json", "--out", "draft.json")[0] == 0
    assert cli("task", "sign", "draft.json", "--store", db, "--signer", "alice", "--out", "signed.json")[0] == 0
    code, _, err = cli("task", "execute", "signed.json", "--store", db, "--decision", "forged.json")
    assert code == 1 and "not the one this file pins" in err
    code, _, err = cli("task", "add-signer", "mallory", "--store", db)
    assert code == 1 and "has signers already" in err
    code, _, err = cli("task", "pin-policies", "empty.toml", "--store", db, "--by", "mallory")
    assert code == 1 and "does not speak for" in err


def test_a_simulation_is_stored_as_a_causal_hypothesis(tmp_path: Path) -> None:
    from cda.guardian.guardian_db import GuardianStore

    root = Path(__file__).resolve().parent.parent / "examples" / "guardian"
    ledger = Ledger.open(tmp_path / "guardian.db")
    ledger.set_budget("agent-7", "USD", Decimal(2000))
    ledger.close()
    argv = ["guard", str(root / "launch.json"), "--policies", str(root / "policies.toml"), "--ledger",
            str(tmp_path / "guardian.db"), "--sim", str(root / "marketing_launch.toml"), "--json"]
    out = io.StringIO()
    assert main(argv, stdout=out, stderr=io.StringIO()) == 0
    assert main(argv, stdout=io.StringIO(), stderr=io.StringIO()) == 0  # the same simulation: stored once
    record = json.loads(out.getvalue())
    assert record["samples"] == 1000 and record["sim_id"] == record["details"]["sim_id"] and record["model_digest"]
    with GuardianStore.open(tmp_path / "guardian.db") as store:
        rows = store.conn.execute("SELECT hypothesis_id, agent_id, risk_score, state FROM causal_hypothesis").fetchall()
        found = store.hypothesis(f"hyp-{record['sim_id']}")
    assert rows == [(f"hyp-{record['sim_id']}", "agent-7", repr(record["details"]["risk"]), "simulated")]
    assert found is not None and found["inputs"]["samples"] == 1000 and found["inputs"]["model_digest"] == record["model_digest"]


def test_a_directory_where_a_file_belongs_is_named_as_one(files: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    code, _, err = guard(files, doc(), "--ledger", str(files))
    assert code == 2 and "it is a directory" in err and "No such file" not in err
    monkeypatch.setenv("CDA_KEY_DIR", str(files / "keys"))
    out, errs = io.StringIO(), io.StringIO()
    main(["task", "add-signer", "alice", "--store", str(files / "guardian.db")], stdout=out, stderr=errs)
    (files / "d.json").write_text(doc(task_id="t-1"))
    main(["task", "draft", str(files / "d.json"), "--out", str(files / "draft.json")], stdout=out, stderr=errs)
    errs = io.StringIO()
    code = main(["task", "sign", str(files / "draft.json"), "--store", str(files / "guardian.db"), "--signer", "alice",
                 "--key", str(files)], stdout=io.StringIO(), stderr=errs)  # fmt: skip
    assert code == 2 and "a directory, not a signer's key file" in errs.getvalue() and "readable" not in errs.getvalue()


def test_the_gate_reports_the_simulators_own_risk_and_id() -> None:
    """The gate with gsim's real simulator: the record's risk and sim_id are those of a direct
    ``simulate`` of the action's parameters with the gate's seed and samples (no rounding, no
    other seed), and the risk decides against the store's threshold."""
    from cda.guardian.causal import simulate
    from cda.guardian.causal_model import load_causal_model
    from cda.guardian.decide import evaluate
    from cda.guardian.policies import load_policy_store
    from cda.guardian.simulation import load_simulator

    root = Path(__file__).resolve().parent.parent / "examples" / "guardian"
    store = load_policy_store(root / "policies.toml")
    model = load_causal_model(root / "marketing_launch.toml")
    for name, seed in (("launch", 0), ("launch", 7), ("pushy_launch", 3)):
        action = read_action((root / f"{name}.json").read_text())
        assert isinstance(action, ProposedAction)
        record = evaluate(action, store, load_simulator(root / "marketing_launch.toml", samples=1000), None, seed=seed)
        direct = simulate(model, dict(action.parameters), samples=1000, seed=seed)
        assert (record.details["risk"], record.details["sim_id"]) == (direct.risk_score, direct.id), name
        over = direct.risk_score > store.get_threshold("max_auto_launch_risk")
        assert record.reason == ("causal_risk" if over else "policy_clear"), (name, direct.risk_score)


@pytest.mark.parametrize("samples", ["100000000", "1", "0", "-3", "2.5"])
def test_a_bad_samples_option_is_exit_2_before_any_decision(tmp_path: Path, samples: str) -> None:
    """Issue 27: `--samples 100000000` passed the option check, then recorded an ESCALATE whose
    receipt said samples must be 2–1,000,000. A bad option is a usage error: exit 2, nothing
    decided and nothing recorded in the ledger."""
    from cda.guardian.guardian_db import GuardianStore

    root = Path(__file__).resolve().parent.parent / "examples" / "guardian"
    ledger = Ledger.open(tmp_path / "guardian.db")
    ledger.set_budget("agent-7", "USD", Decimal(2000))
    ledger.close()
    before = (tmp_path / "guardian.db").read_bytes()
    out, err = io.StringIO(), io.StringIO()
    code = main(["guard", str(root / "launch.json"), "--policies", str(root / "policies.toml"), "--ledger",
                 str(tmp_path / "guardian.db"), "--sim", str(root / "marketing_launch.toml"), "--samples", samples],
                stdout=out, stderr=err)  # fmt: skip
    assert (code, out.getvalue()) == (2, ""), out.getvalue()
    assert "--samples" in err.getvalue() and "Traceback" not in err.getvalue()
    assert (tmp_path / "guardian.db").read_bytes() == before
    with GuardianStore.open(tmp_path / "guardian.db") as store:
        assert store.conn.execute("SELECT count(*) FROM decisions").fetchone() == (0,)
    # the same range at every door: the Python simulator refuses it too, before simulating
    from cda.errors import OptionError
    from cda.guardian.simulation import load_simulator

    if samples == "100000000":
        with pytest.raises(OptionError, match="from 2 to 1000000"):
            load_simulator(root / "marketing_launch.toml", samples=int(samples))


def test_a_signer_registered_in_a_second_guardian_file_keeps_their_key(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """One person, two guardian files: the second registration uses the key the first made (it was
    refused: 'a signer's key exists already'), and the key file is not rewritten."""
    monkeypatch.setenv("CDA_KEY_DIR", str(tmp_path / "keys"))
    answers = []
    for store in ("a.db", "b.db"):
        out = io.StringIO()
        assert main(["task", "add-signer", "alice", "--store", str(tmp_path / store), "--json"], stdout=out,
                    stderr=io.StringIO()) == 0
        answers.append(json.loads(out.getvalue()))
    key = Path(answers[0]["key_file"])
    assert answers[0]["public_key"] == answers[1]["public_key"] and answers[0]["key_file"] == answers[1]["key_file"]
    assert key.stat().st_mode & 0o777 == 0o600
