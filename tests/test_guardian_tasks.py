"""The task lifecycle: exact drafts, HITL signatures, execution once and only on APPROVE, schemas."""

from __future__ import annotations

import copy
import json
import os
import threading
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from cda.guardian.decision import Decision, DecisionRecord
from cda.guardian.execution import ExecutionRefused, execute, task_state
from cda.guardian.guardian_db import GuardianStore
from cda.guardian.ledger import Ledger
from cda.guardian.money import load_exact
from cda.guardian.proposal import ProposedAction, read_action
from cda.guardian.schemas import (
    SCHEMA_IDS,
    check_guardian_schemas,
    guardian_schemas,
    render_guardian_schemas,
    schema_registry,
)
from cda.guardian.signers import (
    SignerError,
    SignerRegistry,
    create_signer_key,
    load_signer_key,
    pin_policy_store,
    public_key_of,
    sign,
    signer_key_path,
    verify_problems,
)
from cda.guardian.tasks import TaskDraft, TaskError, TaskExecuted, TaskSigned, read_task
from tests.timing import HANG

ROOT = Path(__file__).resolve().parents[1]
T0 = datetime(2026, 11, 24, 20, 0, tzinfo=UTC)
CLOCK = lambda: T0  # noqa: E731
ALICE, BOB = "11" * 32, "22" * 32
PIN = "cd" * 32  # the policy store digest the test files pin


def _action(**change: Any) -> ProposedAction:
    doc = {"action_id": "a1", "agent_id": "agent-42", "tool": {"name": "render", "version": "1"},
           "action_type": "video.render", "cost_estimate": Decimal("150.25"), "task_id": "t-1", **change}
    action = read_action(doc)
    assert isinstance(action, ProposedAction), action
    return action


def _world(path: Path | str = ":memory:") -> tuple[Ledger, SignerRegistry]:
    store = GuardianStore.open(path, CLOCK)
    ledger, registry = Ledger(store), SignerRegistry(store)
    ledger.set_budget("agent-42", "USD", 500)
    registry.register("alice", public_key_of(ALICE))  # the file's first signer: its owner
    registry.register("bob", public_key_of(BOB), by="alice", key=ALICE)
    pin_policy_store(registry, PIN, "alice", ALICE)
    return ledger, registry


def _draft(**change: Any) -> TaskDraft:
    fields = {"cost_estimate": Decimal("150.25"), "resources": ["s3://bucket/hero.mp4"], "priority": "high",
              "action_digest": _action().digest(), **change}
    return TaskDraft.new("t-1", "agent-42", "Render hero video", clock=CLOCK, **fields)


def _approve(ledger: Ledger, digest: str | None = None, decision: Decision = Decision.APPROVE, *,
             policy_digest: str = PIN, action: ProposedAction | None = None) -> DecisionRecord:
    """Record a decision as ``cda guard`` does: with its action (the default one unless another
    digest is given, then without one unless ``action`` is)."""
    reason = {Decision.APPROVE: "policy_clear", Decision.ESCALATE: "causal_risk", Decision.REJECT: "policy:p1"}[decision]
    record = DecisionRecord(decision=decision, reason=reason, action_digest=digest or _action().digest(),
                            policy_digest=policy_digest)
    ledger.store.record_decision(record, action or (_action() if digest is None else None))
    return record


# ---------------------------------------------------------------- drafts


def test_a_draft_round_trips_exactly_and_the_same_bytes_every_time() -> None:
    draft = _draft(cost_estimate=load_exact("12345678.123456789", "x"))
    text = draft.to_json()
    assert '"cost_estimate":12345678.123456789' in text and text == _draft(
        cost_estimate=Decimal("12345678.1234567890")).to_json()
    assert TaskDraft.from_json(text) == draft and read_task(text) == draft


@pytest.mark.parametrize("change, words", [
    ({"cost_estimate": 150.25}, "not a float"),
    ({"cost_estimate": -1}, "0 or more"),
    ({"cost_estimate": Decimal("NaN")}, "finite"),
    ({"priority": "urgent"}, "priority"),
    ({"state": "signed"}, "has state 'draft'"),
    ({"created_at": datetime(2026, 1, 1)}, "timezone"),
    ({"surprise": 1}, "surprise"),
    ({"action_digest": "xyz"}, "action_digest"),
])
def test_bad_drafts_are_refused_naming_the_field(change: dict[str, Any], words: str) -> None:
    fields = {"task_id": "t-1", "agent_id": "a", "description": "d", "created_at": T0, "state": "draft", **change}
    with pytest.raises(TaskError, match=words):
        TaskDraft.from_document(fields)


def test_json_numbers_are_never_floats_on_the_way_in() -> None:
    text = '{"task_id": "t", "agent_id": "a", "description": "d", "created_at": "2026-11-24T20:00:00Z", ' \
           '"cost_estimate": 0.1, "state": "draft"}'
    assert TaskDraft.from_json(text).cost_estimate + Decimal("0.2") == Decimal("0.3")
    with pytest.raises(TaskError, match=r"x.json:1:\d+: not valid JSON"):
        TaskDraft.from_json('{"task_id": ', "x.json")
    with pytest.raises(TaskError, match="x.json: not valid JSON"):
        TaskDraft.from_json(text.replace("0.1", "NaN"), "x.json")


# ---------------------------------------------------------------- signatures


def test_a_registered_signer_signs_and_the_signature_verifies() -> None:
    _, registry = _world()
    signed = sign(_draft(), "alice", ALICE, registry, CLOCK)
    assert signed.state == "signed" and signed.signature.sig_type == "HITL" and verify_problems(signed, registry) == []
    assert sign(_draft(), "alice", ALICE, registry, CLOCK) == signed  # Ed25519 is deterministic: same bytes
    assert TaskSigned.from_json(signed.to_json()) == signed and read_task(signed.to_json()) == signed


def test_sign_refuses_an_unknown_signer_and_a_key_that_is_not_the_registered_one() -> None:
    _, registry = _world()
    with pytest.raises(SignerError, match="does not speak for"):
        sign(_draft(), "mallory", "33" * 32, registry, CLOCK)
    with pytest.raises(SignerError, match="not the one registered for 'alice'"):
        sign(_draft(), "alice", BOB, registry, CLOCK)
    with pytest.raises(SignerError, match="registered with another key"):
        registry.register("alice", public_key_of(BOB))


def test_only_a_draft_is_signed() -> None:
    _, registry = _world()
    signed = sign(_draft(), "alice", ALICE, registry, CLOCK)
    with pytest.raises(TaskError, match="only a draft can be signed"):
        sign(signed, "alice", ALICE, registry, CLOCK)


@pytest.mark.parametrize("field, value", [
    ("description", "Render hero video and delete prod"), ("cost_estimate", 15025), ("resources", []),
    ("priority", "low"), ("agent_id", "agent-43"), ("task_id", "t-2"), ("currency", "EUR"),
    ("created_at", "2026-11-24T20:00:01+00:00"), ("action_digest", "0" * 64),
])
def test_a_field_changed_after_signing_is_detected(field: str, value: Any) -> None:
    _, registry = _world()
    doc = load_exact(sign(_draft(), "alice", ALICE, registry, CLOCK).to_json(), "t")
    doc[field] = value
    tampered = TaskSigned.from_document(doc)
    assert verify_problems(tampered, registry) and "does not match" in verify_problems(tampered, registry)[0]


@pytest.mark.parametrize("field, value", [
    ("signer_id", "bob"), ("signed_at", "2026-11-24T21:00:00+00:00"), ("signature", "0" * 128),
])
def test_a_changed_signature_block_is_detected(field: str, value: str) -> None:
    _, registry = _world()
    doc = load_exact(sign(_draft(), "alice", ALICE, registry, CLOCK).to_json(), "t")
    doc["signature"][field] = value
    assert verify_problems(TaskSigned.from_document(doc), registry) != []


def test_a_signature_by_an_unregistered_signer_does_not_verify() -> None:
    _, registry = _world()
    other_store = GuardianStore.open(":memory:", CLOCK)
    SignerRegistry(other_store).register("mallory", public_key_of("33" * 32))
    forged = sign(_draft(), "mallory", "33" * 32, SignerRegistry(other_store), CLOCK)
    assert verify_problems(forged, registry) == ["the signer 'mallory' does not speak for :memory: (not registered, or not endorsed back to its first signer)"]


def test_signer_keys_are_private_files_made_once(tmp_path: Path) -> None:
    public = create_signer_key("alice", tmp_path)
    path = signer_key_path("alice", tmp_path)
    assert path.stat().st_mode & 0o777 == 0o600 and path.parent.stat().st_mode & 0o777 == 0o700
    assert public_key_of(load_signer_key(path)) == public
    with pytest.raises(SignerError, match="exists already"):
        create_signer_key("alice", tmp_path)
    os.chmod(path, 0o644)
    with pytest.raises(SignerError, match="readable by others"):
        load_signer_key(path)
    with pytest.raises(SignerError, match="a signer id matches"):
        signer_key_path("../evil", tmp_path)


# ---------------------------------------------------------------- execution


def test_an_approved_signed_task_executes_once_referencing_its_ledger_entry() -> None:
    ledger, registry = _world()
    signed = sign(_draft(), "alice", ALICE, registry, CLOCK)
    calls: list[str] = []
    done = execute(signed, _approve(ledger), ledger, action=_action(), receipts=["receipt:7"], clock=CLOCK,
                   run=lambda task: calls.append(task.task_id) or {"artifact_url": "https://x/hero.mp4"})
    assert calls == ["t-1"] and isinstance(done, TaskExecuted) and done.state == "executed"
    assert done.audit_ref == "ledger://tx-1" and done.receipts == ["receipt:7"]
    entry = ledger.entry("tx-1")
    assert entry is not None and entry.status == "settled" and entry.settled_amount == Decimal("150.25")
    assert "receipt:7" in entry.evidence and "task:t-1" in entry.evidence
    assert ledger.remaining("agent-42", "USD") == Decimal("349.75") and task_state(ledger, "t-1") == "executed"
    assert verify_problems(done, registry) == []  # the signature still covers the executed task's draft
    assert TaskExecuted.from_json(done.to_json()) == done
    with pytest.raises(ExecutionRefused, match="executed already: a task id executes once"):
        execute(signed, _approve(ledger), ledger, run=lambda task: calls.append("again") or {})
    assert calls == ["t-1"] and ledger.remaining("agent-42", "USD") == Decimal("349.75")


@pytest.mark.parametrize("decision", [Decision.REJECT, Decision.ESCALATE])
def test_a_decision_other_than_approve_runs_nothing(decision: Decision) -> None:
    ledger, registry = _world()
    signed = sign(_draft(), "alice", ALICE, registry, CLOCK)
    calls: list[str] = []
    with pytest.raises(ExecutionRefused, match=f"decision is {decision}"):
        execute(signed, _approve(ledger, decision=decision), ledger, run=lambda t: calls.append("ran") or {})
    assert calls == [] and ledger.entries() == [] and task_state(ledger, "t-1") is None


def test_a_decision_about_another_action_or_not_recorded_runs_nothing() -> None:
    ledger, registry = _world()
    signed = sign(_draft(), "alice", ALICE, registry, CLOCK)
    other = _action(cost_estimate=Decimal("1"))
    with pytest.raises(ExecutionRefused, match="about another action"):
        execute(signed, _approve(ledger, other.digest()), ledger)
    with pytest.raises(ExecutionRefused, match="not the one the task names"):
        execute(signed, _approve(ledger), ledger, action=other)
    forged = DecisionRecord(decision=Decision.APPROVE, reason="policy_clear", action_digest=_action().digest(),
                            seed=7)
    with pytest.raises(ExecutionRefused, match="not one the guardian recorded"):
        execute(signed, forged, ledger)
    unbound = sign(_draft(action_digest=None), "alice", ALICE, registry, CLOCK)
    with pytest.raises(ExecutionRefused, match="names no action_digest"):
        execute(unbound, _approve(ledger), ledger)
    assert ledger.entries() == []


def test_a_tampered_or_unsigned_task_runs_nothing() -> None:
    ledger, registry = _world()
    doc = load_exact(sign(_draft(), "alice", ALICE, registry, CLOCK).to_json(), "t")
    doc["cost_estimate"] = Decimal("1.00")
    with pytest.raises(ExecutionRefused, match="signature does not match"):
        execute(TaskSigned.from_document(doc), _approve(ledger), ledger)
    with pytest.raises(ExecutionRefused, match="only a signed task"):
        execute(_draft(), _approve(ledger), ledger)  # type: ignore[arg-type]


def test_a_task_over_budget_is_refused_and_may_run_once_the_budget_allows() -> None:
    ledger, registry = _world()
    ledger.set_budget("agent-42", "USD", 100)
    signed = sign(_draft(), "alice", ALICE, registry, CLOCK)
    with pytest.raises(ExecutionRefused, match="does not fit the budget"):
        execute(signed, _approve(ledger), ledger)
    assert task_state(ledger, "t-1") is None  # the claim was rolled back with the reservation
    ledger.set_budget("agent-42", "USD", 200)
    assert execute(signed, _approve(ledger), ledger).audit_ref == "ledger://tx-1"


def test_a_run_that_fails_releases_its_money_and_is_not_run_again() -> None:
    ledger, registry = _world()
    signed = sign(_draft(), "alice", ALICE, registry, CLOCK)

    def boom(task: TaskSigned) -> dict[str, Any]:
        raise RuntimeError("the tool fell over")

    with pytest.raises(RuntimeError, match="fell over"):
        execute(signed, _approve(ledger), ledger, run=boom)
    assert task_state(ledger, "t-1") == "failed" and ledger.remaining("agent-42", "USD") == 500
    assert ledger.entry("tx-1").status == "released"  # type: ignore[union-attr]
    with pytest.raises(ExecutionRefused, match="failed already"):
        execute(signed, _approve(ledger), ledger)


def test_racing_executions_of_one_signed_task_run_it_once(tmp_path: Path) -> None:
    path = tmp_path / "g.sqlite"
    ledger, registry = _world(path)
    signed = sign(_draft(), "alice", ALICE, registry, CLOCK)
    decision = _approve(ledger)
    ledger.close()
    ran, refused, barrier = [], [], threading.Barrier(8)

    def racer() -> None:
        mine = Ledger.open(path, CLOCK)  # one connection each: the race is between SQLite connections
        barrier.wait()
        try:
            execute(signed, decision, mine, run=lambda t: ran.append(1) or {})
        except ExecutionRefused as exc:
            refused.append(str(exc))
        finally:
            mine.close()

    threads = [threading.Thread(target=racer) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(HANG)
    assert len(ran) == 1 and len(refused) == 7 and all("a task id executes once" in r for r in refused)
    after = Ledger.open(path, CLOCK)
    assert len(after.entries()) == 1 and after.remaining("agent-42", "USD") == Decimal("349.75")


# ---------------------------------------------------------------- the committed schemas


def test_committed_guardian_schemas_are_current() -> None:
    folder = ROOT / "schemas" / "guardian"
    assert check_guardian_schemas(folder) == [], "run: python -c 'from pathlib import Path; from " \
        "cda.guardian.schemas import write_guardian_schemas; write_guardian_schemas(Path(\"schemas/guardian\"))'"
    assert render_guardian_schemas() == render_guardian_schemas()
    for stem, schema_id in SCHEMA_IDS.items():
        assert json.loads((folder / f"{stem}.schema.json").read_text())["$id"] == schema_id
    assert SCHEMA_IDS["task.signed"] == "https://chimera.ai/schemas/task.signed.json"
    assert guardian_schemas()["task.executed"]["allOf"] == [{"$ref": "https://chimera.ai/schemas/task.signed.json"}]


def _validator(stem: str) -> Any:
    from jsonschema import Draft202012Validator

    return Draft202012Validator(guardian_schemas()[stem], registry=schema_registry())


def _samples() -> dict[str, tuple[Any, dict[str, Any]]]:
    """stem -> (the model's reader, a document the model wrote)."""
    ledger, registry = _world()
    signed = sign(_draft(), "alice", ALICE, registry, CLOCK)
    done = execute(signed, _approve(ledger), ledger, receipts=["r1"], clock=lambda: T0 + timedelta(seconds=3),
                   run=lambda t: {"url": "https://x", "frames": 240, "score": Decimal("0.5")})
    tool = ledger.store.register_tool("render", "render", "1.0", {"type": "object"})
    from cda.guardian.guardian_db import ToolRegistration
    from cda.guardian.ledger import LedgerEntry

    entry = ledger.entry("tx-1")
    assert entry is not None
    return {
        "task.draft": (TaskDraft.from_document, load_exact(_draft().to_json(), "d")),
        "task.signed": (TaskSigned.from_document, load_exact(signed.to_json(), "s")),
        "task.executed": (TaskExecuted.from_document, load_exact(done.to_json(), "e")),
        "ledger.entry": (LedgerEntry.model_validate, load_exact(entry.to_json(), "l")),
        "tool.registration": (lambda d: ToolRegistration.model_validate(d), tool.to_document()),
    }


_ODD_VALUES: list[Any] = [None, True, 0, -1, Decimal("0.5"), Decimal("1E+16"), "", "x", "2026-11-24T20:00:00+00:00",
                          "0" * 64, [], ["x"], [1], {}, {"k": "v"}]


def _mutations(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """Every way to drop a field or give one (or a signature's field) an odd value."""
    out = []
    for key in doc:
        dropped = copy.deepcopy(doc)
        del dropped[key]
        out.append(dropped)
        for value in _ODD_VALUES:
            changed = copy.deepcopy(doc)
            changed[key] = value
            out.append(changed)
            if isinstance(doc[key], dict):
                for inner in doc[key]:
                    deep = copy.deepcopy(doc)
                    deep[key][inner] = value
                    out.append(deep)
    return out


@pytest.mark.parametrize("stem", sorted(SCHEMA_IDS))
def test_every_model_output_validates_and_what_the_schema_refuses_the_model_refuses(stem: str) -> None:
    read, doc = _samples()[stem]
    validator = _validator(stem)
    assert list(validator.iter_errors(doc)) == [], "the model's own output must validate"
    read(doc)
    refused_by_schema = 0
    for mutated in _mutations(doc):
        if validator.is_valid(mutated):
            continue
        refused_by_schema += 1
        with pytest.raises((TaskError, ValueError)):
            read(mutated)
    assert refused_by_schema > 20  # the mutations do exercise the schema


def test_the_signed_schema_refuses_a_draft_and_the_executed_schema_a_signed_task() -> None:
    samples = _samples()
    assert not _validator("task.signed").is_valid(samples["task.draft"][1])
    assert not _validator("task.executed").is_valid(samples["task.signed"][1])
    assert _validator("task.draft").is_valid(samples["task.executed"][1])  # the seed's allOf: a base for all


def test_the_same_inputs_and_clock_give_the_same_bytes() -> None:
    def run() -> tuple[str, str]:
        ledger, registry = _world()
        signed = sign(_draft(), "alice", ALICE, registry, CLOCK)
        done = execute(signed, _approve(ledger), ledger, receipts=["r"], clock=CLOCK, run=lambda t: {"n": 0.25})
        entry = ledger.entry("tx-1")
        assert entry is not None
        return done.to_json(), entry.to_json()

    assert run() == run()


def test_a_draft_for_an_action_is_bound_to_it_and_executes_with_its_approval() -> None:
    ledger, registry = _world()
    action = _action(resources=["s3://bucket/hero.mp4"], priority="high", description="Render hero video")
    draft = TaskDraft.for_action(action, clock=CLOCK)
    assert (draft.task_id, draft.action_digest, draft.cost_estimate) == ("t-1", action.digest(), Decimal("150.25"))
    signed = sign(draft, "alice", ALICE, registry, CLOCK)
    assert execute(signed, _approve(ledger, action.digest()), ledger, action=action).state == "executed"
    with pytest.raises(TaskError, match="names no task_id"):
        TaskDraft.for_action(_action(task_id=None), clock=CLOCK)


# ---------------------------------------------------------------- what an APPROVE must be


def test_only_the_latest_decision_under_the_pinned_policy_store_counts() -> None:
    """An earlier REJECT is not undone by an older APPROVE, nor by a later APPROVE made under
    another (e.g. empty) policy store, unless a signer pins that store."""
    ledger, registry = _world()
    signed = sign(_draft(), "alice", ALICE, registry, CLOCK)
    approve = _approve(ledger)
    _approve(ledger, decision=Decision.REJECT)
    with pytest.raises(ExecutionRefused, match=r"not the latest .* REJECT \(policy:p1"):
        execute(signed, approve, ledger)
    lax = _approve(ledger, policy_digest="ee" * 32)  # e.g. `cda guard --policies empty.toml`
    with pytest.raises(ExecutionRefused, match="not the one this file pins"):
        execute(signed, lax, ledger)
    assert ledger.entries() == [] and task_state(ledger, "t-1") is None
    pin_policy_store(registry, "ee" * 32, "bob", BOB)  # a signer decides that store is the one
    assert execute(signed, lax, ledger).state == "executed"


def test_a_file_without_a_pinned_or_with_a_forged_pin_executes_nothing() -> None:
    store = GuardianStore.open(":memory:", CLOCK)
    ledger, registry = Ledger(store), SignerRegistry(store)
    ledger.set_budget("agent-42", "USD", 500)
    registry.register("alice", public_key_of(ALICE))
    signed = sign(_draft(), "alice", ALICE, registry, CLOCK)
    decision = _approve(ledger)
    with pytest.raises(ExecutionRefused, match="pins no policy store"):
        execute(signed, decision, ledger)
    with pytest.raises(SignerError, match="not the one registered"):
        pin_policy_store(registry, PIN, "alice", BOB)
    store.set_setting("policy_digest", PIN, "alice", "00" * 64)  # written behind the signers' back
    with pytest.raises(ExecutionRefused, match="not signed by a signer who speaks for it"):
        execute(signed, decision, ledger)
    assert ledger.entries() == []


def test_a_second_signer_needs_a_registered_signers_signature() -> None:
    _, registry = _world()
    carol = public_key_of("44" * 32)
    with pytest.raises(SignerError, match="has signers already"):
        registry.register("carol", carol)
    with pytest.raises(SignerError, match="not the one registered for 'alice'"):
        registry.register("carol", carol, by="alice", key="44" * 32)
    with pytest.raises(SignerError, match="does not speak for"):
        registry.register("carol", carol, by="mallory", key="44" * 32)
    assert registry.public_key("carol") is None
    registry.register("carol", carol, by="bob", key=BOB)
    row = registry.store.conn.execute("SELECT endorsed_by, endorsement FROM signers WHERE signer_id = 'carol'").fetchone()
    assert row[0] == "bob" and len(row[1]) == 128


def test_the_task_must_cost_what_the_recorded_action_costs() -> None:
    """Without --action the recorded decision's action still fixes the task's cost and currency."""
    ledger, registry = _world()
    _approve(ledger)
    cheap = sign(_draft(cost_estimate=Decimal(0)), "alice", ALICE, registry, CLOCK)
    with pytest.raises(ExecutionRefused, match="the action's cost 150.25 USD is not the task's 0 USD"):
        execute(cheap, _approve(ledger), ledger)
    assert ledger.entries() == []
    bare = DecisionRecord(decision=Decision.APPROVE, reason="policy_clear", action_digest=_action().digest(),
                          policy_digest=PIN, seed=3)
    ledger.store.record_decision(bare)  # recorded without its action: nothing says what it costs
    with pytest.raises(ExecutionRefused, match="recorded without its action"):
        execute(sign(_draft(), "alice", ALICE, registry, CLOCK), bare, ledger)


def test_a_result_that_cannot_be_recorded_still_settles_the_spend() -> None:
    ledger, registry = _world()
    signed = sign(_draft(), "alice", ALICE, registry, CLOCK)
    ran: list[int] = []
    with pytest.raises(TaskError, match=r"ran and its cost was settled \(tx-1\).*result"):
        execute(signed, _approve(ledger), ledger, run=lambda t: ran.append(1) or {"x": float("nan")})
    entry = ledger.entry("tx-1")
    assert ran == [1] and entry is not None and entry.status == "settled"
    assert ledger.remaining("agent-42", "USD") == Decimal("349.75") and task_state(ledger, "t-1") == "executed"
    with pytest.raises(ExecutionRefused, match="executed already"):
        execute(signed, _approve(ledger), ledger)


def test_a_reservation_inside_a_transaction_checks_its_amount() -> None:
    from cda.errors import OptionError

    ledger, _ = _world()
    assert not hasattr(ledger, "reserve_in")
    with pytest.raises(OptionError, match="0 or more"), ledger.store.transaction() as conn:
        ledger._reserve_in(conn, "agent-42", Decimal(-5), "USD")
    assert ledger.balance("agent-42", "USD").committed == 0


def test_a_pinned_causal_model_must_have_simulated_the_decision() -> None:
    """Leaving --sim out skips the causal step, so a file that pins a model refuses its APPROVE."""
    ledger, registry = _world()
    pin_policy_store(registry, PIN, "alice", ALICE, model_digest="9f" * 32, samples=1000)
    signed = sign(_draft(), "alice", ALICE, registry, CLOCK)
    with pytest.raises(ExecutionRefused, match="not simulated, but this file pins the causal model 9f9f.* 1000 samples"):
        execute(signed, _approve(ledger), ledger)
    few = DecisionRecord(decision=Decision.APPROVE, reason="policy_clear", action_digest=_action().digest(),
                         policy_digest=PIN, sim_id="s1", samples=10, model_digest="9f" * 32)
    ledger.store.record_decision(few, _action())
    with pytest.raises(ExecutionRefused, match="simulated with 9f9f"):
        execute(signed, few, ledger)
    simulated = few.model_copy(update={"samples": 1000})
    ledger.store.record_decision(simulated, _action())
    assert execute(signed, simulated, ledger).state == "executed"


def test_one_approve_runs_its_action_once_whatever_the_task_id() -> None:
    """An action that names no task: signed tasks under new ids cannot run its one APPROVE again
    (budget raised or not); a run that failed does not use the approval up."""
    ledger, registry = _world()
    ledger.set_budget("agent-42", "USD", 10_000)
    doc = {"action_id": "a2", "agent_id": "agent-42", "tool": {"name": "render", "version": "1"},
           "action_type": "video.render", "cost_estimate": Decimal("150.25")}
    action = read_action(doc)
    assert isinstance(action, ProposedAction) and action.task_id is None
    record = _approve(ledger, action.digest(), action=action)

    def task(task_id: str) -> TaskSigned:
        draft = TaskDraft.new(task_id, "agent-42", "Render hero video", clock=CLOCK, cost_estimate=Decimal("150.25"),
                              action_digest=action.digest())
        return sign(draft, "alice", ALICE, registry, CLOCK)

    def boom(t: TaskSigned) -> dict[str, Any]:
        raise RuntimeError("the tool fell over")

    with pytest.raises(RuntimeError):
        execute(task("t-0"), record, ledger, run=boom)
    calls: list[str] = []
    assert execute(task("t-1"), record, ledger, run=lambda t: calls.append(t.task_id) or {}).state == "executed"
    for again in ("t-2", "t-3"):
        with pytest.raises(ExecutionRefused, match="executed already by task 't-1'"):
            execute(task(again), record, ledger, run=lambda t: calls.append(t.task_id) or {})
    assert calls == ["t-1"] and ledger.remaining("agent-42", "USD") == Decimal("9849.75")


@pytest.mark.parametrize("text", ["NaN", "  5", "0x10"])
def test_a_cost_given_as_bad_text_is_malformed_with_that_text_in_the_message(text: str) -> None:
    from cda.guardian.proposal import Malformed

    parsed = read_action({"action_id": "a3", "agent_id": "agent-42", "tool": {"name": "render", "version": "1"},
                          "action_type": "video.render", "cost_estimate": text})
    assert isinstance(parsed, Malformed) and parsed.path == "$.cost_estimate"
    assert repr(text) in parsed.message and "{" not in parsed.message, parsed.message


def test_an_action_escalated_for_its_simulated_risk_cannot_be_reseeded_into_an_approve() -> None:
    """causal_risk under one seed, APPROVE under another (the latest): the task is refused; a
    budget ESCALATE followed by an APPROVE (the budget was raised) is not held against it."""
    ledger, registry = _world()
    signed = sign(_draft(), "alice", ALICE, registry, CLOCK)
    digest = _action().digest()
    ledger.store.record_decision(DecisionRecord(decision=Decision.ESCALATE, reason="causal_risk", action_digest=digest,
                                                policy_digest=PIN, seed=0), _action())
    approve = _approve(ledger)  # recorded after: the latest
    calls: list[str] = []
    with pytest.raises(ExecutionRefused, match="simulated risk before"):
        execute(signed, approve, ledger, run=lambda t: calls.append("ran") or {})
    assert calls == [] and ledger.entries() == []

    ledger2, registry2 = _world()
    signed2 = sign(_draft(), "alice", ALICE, registry2, CLOCK)
    ledger2.store.record_decision(DecisionRecord(decision=Decision.ESCALATE, reason="budget_exceeded",
                                                 action_digest=digest, policy_digest=PIN), _action())
    assert execute(signed2, _approve(ledger2), ledger2).state == "executed"


def test_a_signer_written_into_the_file_by_hand_speaks_for_no_one() -> None:
    """A row added past register() (no endorsement, or one that does not verify) is not a signer:
    its signatures do not verify and it cannot endorse others; the endorsed signer still is."""
    ledger, registry = _world()
    mallory = "33" * 32
    conn = ledger.store.conn
    conn.execute("INSERT INTO signers (signer_id, public_key, registered_at) VALUES ('mallory', ?, 'now')",
                 (public_key_of(mallory),))
    conn.execute("INSERT INTO signers (signer_id, public_key, registered_at, endorsed_by, endorsement) "
                 "VALUES ('eve', ?, 'now', 'alice', ?)", (public_key_of("44" * 32), "00" * 64))
    assert registry.public_key("mallory") is None and registry.public_key("eve") is None
    assert registry.public_key("bob") == public_key_of(BOB)  # endorsed by alice, the first
    with pytest.raises(SignerError):
        sign(_draft(), "mallory", mallory, registry, CLOCK)
    with pytest.raises(SignerError):
        registry.register("trudy", public_key_of("55" * 32), by="mallory", key=mallory)
