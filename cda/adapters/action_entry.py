"""Running a CDA Action on the embedded defaults: files in, artifacts and SQLite stores out.

This is where the edge concerns live — reading ``inputs.json``, loading a Ken file, the HTTP LLM
provider, the SQLite receipt log, event store and reflection store — so the Action itself
(``cda.actions.runner``) stays free of files and transports.

Layout of an output folder::

    OUT/receipts.sqlite      the append-only, hash-chained receipt log (WAL); also events and traces
    OUT/receipts.sqlite.head.json   its head, signed with the key in $CDA_KEY_DIR (cda.keys.signing)
    OUT/<action_id>/summary.md, cda_plan/…, evidence.json
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence
from pathlib import Path

from pydantic import ValidationError

from cda.actions.artifacts import ArtifactWriter
from cda.actions.audit import file_meta_digest
from cda.actions.event_chain import events_head
from cda.actions.log_guard import AuditLogError, check_signed_head, refuse_lost_log
from cda.actions.receipts import ReceiptLog
from cda.actions.reflection import ReflectionStore
from cda.actions.runner import ActionRun, RunSettings, run_action
from cda.actions.stream import Subscriber
from cda.adapters.event_store import EventStore
from cda.contracts.abstain import AbstainThresholds
from cda.contracts.action import CDAInputs
from cda.contracts.events import ActionEvent
from cda.contracts.json_numbers import exact_float
from cda.contracts.locations import validation_problems
from cda.contracts.receipt import canonical_json
from cda.errors import CDAError, KenError
from cda.files import parse_json, read_text
from cda.ken.graph import KenGraph
from cda.ken.loaders import load_ken
from cda.keys.signing import head_path, load_signer, write_head
from cda.verifiers.llm_gate import LLMProvider

__all__ = ["AuditLogError", "InputsError", "check_signed_head", "load_inputs", "refuse_lost_log", "run_inputs"]


class InputsError(CDAError, ValueError):
    """``inputs.json`` is not JSON or does not match CDAInputs; names the field at fault."""


def load_inputs(path: Path) -> CDAInputs:
    """Read and validate ``inputs.json`` (a relative Ken path stays relative: the run's seed must
    not depend on where the file sits; :func:`run_inputs` resolves it against ``base_dir``)."""
    text = read_text(path)
    data = parse_json(text, str(path), InputsError, parse_float=exact_float)  # a weight's digits, exactly
    try:
        inputs = CDAInputs.model_validate(data)
    except ValidationError as exc:
        raise InputsError(f"{path}: inputs do not match CDAInputs: {validation_problems(exc)}") from None
    return inputs


def _http_provider(inputs: CDAInputs) -> LLMProvider:
    from cda.actions.approvals import egress_decision, pii_decision
    from cda.adapters.llm_http import OpenAICompatibleProvider

    s = inputs.llm
    assert s.base_url is not None and s.model is not None  # checked by LLMSettings
    # the run asks for the approvals (and receipts them) before it builds a provider; here they
    # only decide the class the call leaves under and whether consent lifts redaction
    granted = egress_decision(inputs, s.egress_class).allowed
    return OpenAICompatibleProvider(
        s.base_url, s.model, timeout_s=s.timeout_s, egress=s.egress_class if granted else inputs.policies.egress,
        pii_posture=inputs.policies.pii_posture, pii_consent=pii_decision(inputs).allowed,
    )


def run_inputs(
    inputs: CDAInputs,
    out_dir: Path | None = None,
    *,
    subscribers: Sequence[Subscriber] = (),
    settings: RunSettings | None = None,
    base_dir: Path | None = None,
) -> ActionRun:
    """Run one Action with its Ken file loaded, receipts/events/trace in ``out_dir/receipts.sqlite``.

    With no ``out_dir`` everything stays in memory (receipts in an in-memory hash chain). A
    relative Ken path is read from ``base_dir`` (the inputs file's folder for ``cda run``).
    """
    thresholds = AbstainThresholds.from_env(os.environ)
    ken: KenGraph | None = None
    if inputs.ken is not None and inputs.ken.path is not None:
        ken_path = Path(inputs.ken.path)
        try:
            ken = load_ken(ken_path if ken_path.is_absolute() or base_dir is None else base_dir / ken_path)
        except KenError as exc:  # name the input field, as every other Action input error does
            raise KenError(f"ken.path: {exc}") from None
    if out_dir is None:
        return run_action(inputs, ken=ken, subscribers=subscribers, settings=settings, llm_factory=_http_provider,
                          thresholds=thresholds, base_dir=base_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    db = out_dir / "receipts.sqlite"
    signer = load_signer()  # before anything is written: a key problem stops the run at once
    refuse_lost_log(db)
    events = EventStore(db)
    log = ReceiptLog(db, signer=signer)  # every receipt vouched for where it lands
    try:
        check_signed_head(db, log, signer.public_key)

        def sign_start(event: ActionEvent) -> None:
            if event.type == "action_started":
                head, count = log.tip()
                write_head(head_path(db), signer.sign_head(head, count, event.action_id, event.attempt or 1, "start"))

        run = run_action(inputs, ken=ken, out_dir=out_dir, receipts=log, settings=settings, base_dir=base_dir,
                         subscribers=[events.append, sign_start, *subscribers], llm_factory=_http_provider,
                         thresholds=thresholds, audit=events.confirm)
        store = ReflectionStore(db, log)
        try:
            put = store.put(run.outputs.action_id, run.trace, attempt=run.attempt)
        finally:
            store.close()
        problems = log.confirm([*run.appended, put]) + events.confirm(run.events)
        if problems:
            raise AuditLogError(f"{db}: the receipt log was changed during the run; its head is not signed: "
                                + "; ".join(problems[:3]))
        head, count = log.tip()
        doc = signer.sign_head(head, count, run.outputs.action_id, run.attempt, "end", len(run.events),
                               events_head(run.events, timeless=False), file_meta_digest(db))
        write_head(head_path(db), doc)
        if run.artifact_dir is not None and (run.artifact_dir / "cda_plan").is_dir():
            ArtifactWriter(run.artifact_dir).write_file("cda_plan/receipts_head.json", canonical_json(doc) + "\n")
        return dataclasses.replace(run, receipts_head=head)
    finally:
        log.close()
        events.close()
