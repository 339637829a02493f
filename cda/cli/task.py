"""``cda task add-signer | pin-policies | budget | draft | sign | verify | execute``: the seed's task
lifecycle from the command line.

* ``cda task add-signer ID --store G.sqlite [--public-key HEX] [--by SIGNER [--by-key FILE]]``
  registers a HITL signer in the guardian file (created if missing); without ``--public-key`` a
  new private key is made in ``$CDA_KEY_DIR/signers/ID.ed25519.key`` (mode 0600; default folder
  ``~/.config/cda``, which the check sandbox hides) and its public key registered. The file's
  first signer needs no authority: it is fixed in the file's signed header, and its fingerprint
  printed; every later one needs ``--by`` a signer who speaks for the file, whose key signs the
  registration.
* ``cda task anchor ID --store G [--key FILE]`` anchors a guardian file from before signed
  headers: ``ID`` (with its key) becomes its first signer; the signers endorsed back to it are kept.
* ``--root FINGERPRINT`` (on every command that reads signers): trust the file's first signer by
  this fingerprint, given from outside the file, instead of by this CDA's key (another user's
  process, another machine).
* ``cda task pin-policies POLICIES.toml --store G --by SIGNER [--key FILE]`` pins the policy store
  whose decisions ``execute`` accepts (its digest, signed by a registered signer).
* ``cda task draft ACTION.json [--task-id T] [--out FILE]`` writes the draft task bound to a
  proposed action (its digest, agent, cost, currency, resources, priority).
* ``cda task budget AGENT AMOUNT --store G [--currency USD]`` sets an agent's budget in the CFO
  ledger (the amount read as an exact decimal) and prints its balance.
* ``cda task sign DRAFT.json --store G --signer ID [--key FILE] [--out FILE]`` signs a draft with
  the signer's key (default: its file in the key folder) and writes the signed task.
* ``cda task verify SIGNED.json --store G`` checks the signature against the registry.
* ``cda task execute SIGNED.json --store G --decision DECISION.json [--action ACTION.json]
  [--result RESULT.json] [--receipt ID]... [--out FILE]`` records the execution of an approved
  signed task once: its ledger reservation, its result, its receipts. ``--escalation ID
  [--policies P]`` instead of ``--decision``: the task runs the action a person approved in that
  escalation, once (cda.guardian.execution, "An approved escalation").

Exit codes: 0 done (signed, verified, executed); 1 refused (a signature that does not verify, an
execution the guardian does not allow, a signer not registered); 2 bad input (a missing or
malformed file, a bad option: one line on stderr, or with ``--json`` one JSON object on stdout,
never a traceback). Only argparse is imported here; pydantic, sqlite and ``cryptography`` load
when a command runs.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

__all__ = ["add_task_parser", "main_task"]

EXIT_OK, EXIT_REFUSED, EXIT_BAD_INPUT = 0, 1, 2
_STORE_HELP = "the guardian's SQLite file (its signer registry, ledger and decisions)"
_JSON_HELP = "print one JSON object"


def add_task_parser(sub: Any, count: Callable[[str], Callable[[str], Any]], *,
                    samples: Callable[[str], Any] | None = None) -> None:
    """Register ``cda task …`` on the main parser's subparsers (``count`` is cli.py's checked
    option type for a count)."""
    task = sub.add_parser("task", help="the guardian's task lifecycle: draft -> signed -> executed (docs/guardian.md)")
    tsub = task.add_subparsers(dest="task_command", required=True)
    ad = tsub.add_parser("add-signer", help="register a HITL signer (making its key unless --public-key is given)")
    ad.add_argument("signer", help="the signer's id, e.g. orchestrator:alice")
    ad.add_argument("--store", type=Path, required=True, help=_STORE_HELP + "; created if missing")
    ad.add_argument("--public-key", default=None, help="the signer's Ed25519 public key (64 hex digits)")
    ad.add_argument("--by", default=None, help="a registered signer who authorises this one (needed once the file has a signer)")
    ad.add_argument("--by-key", type=Path, default=None,
                    help="the --by signer's private key file (default: signers/BY.ed25519.key in $CDA_KEY_DIR)")
    ad.add_argument("--json", action="store_true", help=_JSON_HELP)
    an = tsub.add_parser("anchor", help="name the first signer of a guardian file from before signed headers")
    an.add_argument("signer", help="the signer who becomes the file's first signer")
    an.add_argument("--store", type=Path, required=True, help=_STORE_HELP)
    an.add_argument("--key", type=Path, default=None,
                    help="the signer's private key file (default: signers/ID.ed25519.key in $CDA_KEY_DIR)")
    an.add_argument("--json", action="store_true", help=_JSON_HELP)
    pin = tsub.add_parser("pin-policies", help="pin the policy store whose decisions `cda task execute` accepts")
    pin.add_argument("policies", type=Path, help="the policy store (TOML) cda guard is run with")
    pin.add_argument("--store", type=Path, required=True, help=_STORE_HELP)
    pin.add_argument("--by", required=True, help="the registered signer who pins it")
    pin.add_argument("--sim", type=Path, default=None,
                     help="also require decisions simulated with this causal model (cda guard --sim)")
    pin.add_argument("--samples", type=samples or count("--samples"), default=1000, help="... at this many samples (default 1000, as cda guard)")
    pin.add_argument("--key", type=Path, default=None,
                     help="the signer's private key file (default: signers/BY.ed25519.key in $CDA_KEY_DIR)")
    pin.add_argument("--json", action="store_true", help=_JSON_HELP)
    dr = tsub.add_parser("draft", help="write the draft task bound to a proposed action (what a human signs)")
    dr.add_argument("action", type=Path, help="the proposed action (JSON), as given to cda guard")
    dr.add_argument("--task-id", default=None, help="the task's id (default: the action's task_id)")
    dr.add_argument("--out", type=Path, default=None, help="write the draft here (default: stdout)")
    dr.add_argument("--json", action="store_true", help=_JSON_HELP)
    bu = tsub.add_parser("budget", help="set an agent's budget in the CFO ledger (and print its balance)")
    bu.add_argument("agent", help="the agent's id")
    bu.add_argument("amount", help="the budget, an exact decimal number (e.g. 2000 or 150.25)")
    bu.add_argument("--currency", default="USD", help="the currency code (default USD)")
    bu.add_argument("--store", type=Path, required=True, help=_STORE_HELP + "; created if missing")
    bu.add_argument("--json", action="store_true", help=_JSON_HELP)
    sg = tsub.add_parser("sign", help="sign a draft task as a registered signer")
    sg.add_argument("task", type=Path, help="the draft task (JSON)")
    sg.add_argument("--store", type=Path, required=True, help=_STORE_HELP)
    sg.add_argument("--signer", required=True, help="the registered signer's id")
    sg.add_argument("--key", type=Path, default=None,
                    help="the signer's private key file (default: signers/ID.ed25519.key in $CDA_KEY_DIR)")
    sg.add_argument("--out", type=Path, default=None, help="write the signed task here (default: stdout)")
    sg.add_argument("--json", action="store_true", help=_JSON_HELP)
    ve = tsub.add_parser("verify", help="check a signed task's signature against the signer registry")
    ve.add_argument("task", type=Path, help="the signed (or executed) task (JSON)")
    ve.add_argument("--store", type=Path, required=True, help=_STORE_HELP)
    ve.add_argument("--json", action="store_true", help=_JSON_HELP)
    ex = tsub.add_parser("execute", help="execute an approved signed task once (ledger entry, result, receipts)")
    ex.add_argument("task", type=Path, help="the signed task (JSON)")
    ex.add_argument("--store", type=Path, required=True, help=_STORE_HELP)
    approval = ex.add_mutually_exclusive_group(required=True)
    approval.add_argument("--decision", type=Path, default=None, help="the guardian's DecisionRecord (cda guard --json)")
    approval.add_argument("--escalation", default=None, metavar="ID",
                          help="an escalation a person approved (cda guard resolve ID --approve): runs its exact "
                          "action once")
    ex.add_argument("--policies", type=Path, default=None,
                    help="with --escalation: the policy store in force (the pinned one), judged again on the action")
    ex.add_argument("--action", type=Path, default=None, help="the proposed action the decision is about")
    ex.add_argument("--result", type=Path, default=None, help="the result to record (a JSON object; default {})")
    ex.add_argument("--receipt", action="append", default=[], help="a receipt id of the run (repeatable)")
    ex.add_argument("--out", type=Path, default=None, help="write the executed task here (default: stdout)")
    ex.add_argument("--json", action="store_true", help=_JSON_HELP)
    _root_option(ad, an, pin, sg, ve, ex)


_ROOT_HELP = ("the fingerprint of the file's first signer (64 hex digits, printed by add-signer): trust it by "
              "this instead of by this CDA's key")
def _root_option(*parsers: argparse.ArgumentParser) -> None:
    for parser in parsers:
        parser.add_argument("--root", default=None, metavar="FINGERPRINT", help=_ROOT_HELP)


def main_task(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Run ``cda task …``; see the module's docstring for the exit codes. Without ``--json`` what
it prints is text built from inputs (a store's path, signer ids, an agent's name): every write
passes :func:`~cda.terminal_text.for_terminal` (docs/architecture.md, "What CDA prints"); a task
document printed whole is JSON and written as it is (:func:`_write_task`)."""
    from cda.errors import CDAError

    if not args.json:
        from cda.cli.terminal import escaped

        out, err = escaped(out), escaped(err)
    try:
        if args.task_command == "add-signer":
            return _add_signer(args, out)
        if args.task_command == "anchor":
            return _anchor(args, out)
        if args.task_command == "pin-policies":
            return _pin(args, out)
        if args.task_command == "draft":
            return _draft(args, out, err)
        if args.task_command == "budget":
            return _budget(args, out)
        if args.task_command == "sign":
            return _sign(args, out, err)
        if args.task_command == "verify":
            return _verify(args, out)
        return _execute(args, out, err)
    except _Refused as refused:
        return _report(args, out, err, {"ok": False, "problems": refused.problems}, EXIT_REFUSED)
    except CDAError as exc:
        if args.json:
            where = getattr(args, "task", None) or getattr(args, "action", None) or getattr(args, "store", "")
            out.write(json.dumps(exc.as_dict(str(where)), ensure_ascii=False) + "\n")
        else:
            err.write(exc.render() + "\n")
        return EXIT_BAD_INPUT


class _Refused(Exception):
    def __init__(self, problems: list[str]) -> None:
        super().__init__("; ".join(problems))
        self.problems = problems


def _report(args: argparse.Namespace, out: TextIO, err: TextIO, doc: dict[str, Any], code: int) -> int:
    if args.json:
        out.write(json.dumps(doc, sort_keys=True, ensure_ascii=False) + "\n")
    else:
        for problem in doc.get("problems", []):
            err.write(f"cda: refused: {problem}\n")
    return code


def _open_existing(path: Path, root: str | None = None) -> Any:
    from cda.guardian.guardian_db import GuardianStore, GuardianStoreError

    if not path.exists():
        raise GuardianStoreError(f"{path}: no such guardian file (cda task add-signer creates one)")
    return GuardianStore.open(path, root=root)


def _speaking(registry: Any, signer: str) -> str:
    """The public key of ``signer`` in ``registry``, or refused (it speaks for no one, or the
    file's header cannot be trusted)."""
    from cda.guardian.signers import SignerError

    try:
        key = registry.public_key(signer)
    except SignerError as exc:
        raise _Refused([str(exc)]) from None
    if key is None:
        raise _Refused([f"{signer!r} does not speak for {registry.store.where} (not registered, or not endorsed "
                        f"back to its first signer)"])
    return str(key)


def _read(path: Path, what: str) -> str:
    from cda.files import read_text

    return read_text(path)  # `-` is standard input (cda.files.standard_input)


def _bad(message: str) -> Exception:
    from cda.errors import CDAError

    return CDAError(message)


def _write_task(doc_text: str, path: Path | None, out: TextIO) -> None:
    if path is None:  # a JSON document: json.dumps escaped what it must; the escaping stream would spoil it
        getattr(out, "unescaped", out).write(doc_text + "\n")
        return
    from cda.files import create_file

    create_file(path, (doc_text + "\n").encode("utf-8"))  # a new file: an existing one (or a link) is refused


def _add_signer(args: argparse.Namespace, out: TextIO) -> int:
    from cda.guardian.guardian_db import GuardianStore
    from cda.guardian.signers import (
        SignerError,
        SignerRegistry,
        create_signer_key,
        fingerprint,
        load_signer_key,
        public_key_of,
        signer_key_path,
    )

    with GuardianStore.open(args.store, root=args.root) as store:
        registry = SignerRegistry(store)
        first = not registry.signers()
        if not first and args.public_key is None and args.signer in registry.signers():
            raise _bad(f"{args.signer!r} is registered already")
        by_key = None
        if not first:
            if args.by is None:
                raise _Refused([f"{args.store} has signers already: a new signer is added only by a registered one "
                                f"(--by SIGNER, with its key)"])
            by_key = load_signer_key(args.by_key or signer_key_path(args.by))
            # checked before a key is made, so a refused signer leaves no key file behind
            if _speaking(registry, args.by) != public_key_of(by_key):
                raise _Refused([f"--by {args.by!r}: the key given is not its registered one"])
        key_file, private = None, None
        public = args.public_key
        if public is None:
            path = signer_key_path(args.signer)
            if not path.exists():  # a person registered in a second guardian file keeps the key they have
                create_signer_key(args.signer)
            key_file, private = str(path), load_signer_key(path)
            public = public_key_of(private)
        try:
            if first:
                registry.register_root(args.signer, public, private)
            else:
                registry.register(args.signer, public, by=args.by, key=by_key)
        except SignerError as exc:
            raise _Refused([str(exc)]) from None
    root = fingerprint(public) if first else None
    if args.json:
        out.write(json.dumps({"signer_id": args.signer, "public_key": public, "key_file": key_file,
                              "endorsed_by": None if first else args.by, "root_fingerprint": root},
                             sort_keys=True) + "\n")
    else:
        out.write(f"registered {args.signer} {public}" + (f" (private key: {key_file})" if key_file else "") + "\n")
        if root is not None:
            out.write(f"first signer of {args.store}: fingerprint {root} (give it as --root where this CDA's key "
                      f"is not at hand)\n")
    return EXIT_OK


def _anchor(args: argparse.Namespace, out: TextIO) -> int:
    from cda.guardian.signers import (
        SignerError,
        SignerRegistry,
        fingerprint,
        load_signer_key,
        public_key_of,
        signer_key_path,
    )

    key = load_signer_key(args.key or signer_key_path(args.signer))
    with _open_existing(args.store, args.root) as store:
        try:
            kept, dropped = SignerRegistry(store).anchor(args.signer, key)
        except SignerError as exc:
            raise _Refused([str(exc)]) from None
    root = fingerprint(public_key_of(key))
    if args.json:
        out.write(json.dumps({"ok": True, "root": args.signer, "root_fingerprint": root, "signers": kept,
                              "speak_for_no_one": dropped}, sort_keys=True) + "\n")
    else:
        out.write(f"anchored {args.store}: first signer {args.signer}, fingerprint {root}; signers {', '.join(kept)}"
                  + (f"; speaking for no one: {', '.join(dropped)}" if dropped else "") + "\n")
    return EXIT_OK


def _pin(args: argparse.Namespace, out: TextIO) -> int:
    from cda.guardian.policies import load_policy_store
    from cda.guardian.signers import SignerError, SignerRegistry, load_signer_key, pin_policy_store, signer_key_path

    digest = load_policy_store(args.policies).digest
    model_digest, samples = None, None
    if args.sim is not None:
        from cda.guardian.causal_model import load_causal_model

        model_digest, samples = load_causal_model(args.sim).digest, args.samples
    with _open_existing(args.store, args.root) as store:
        registry = SignerRegistry(store)
        _speaking(registry, args.by)
        key = load_signer_key(args.key or signer_key_path(args.by))
        try:
            pin_policy_store(registry, digest, args.by, key, model_digest=model_digest, samples=samples)
        except SignerError as exc:
            raise _Refused([str(exc)]) from None
    if args.json:
        out.write(json.dumps({"ok": True, "policy_digest": digest, "model_digest": model_digest, "samples": samples,
                              "by": args.by}, sort_keys=True) + "\n")
    else:
        sim = f" and causal model {model_digest} at {samples} samples" if model_digest else ""
        out.write(f"pinned policy store {digest}{sim} by {args.by}\n")
    return EXIT_OK


def _draft(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from cda.guardian.proposal import Malformed, read_action
    from cda.guardian.tasks import TaskDraft

    parsed = read_action(_read(args.action, "the action"))
    if isinstance(parsed, Malformed):
        raise _bad(f"{args.action}: not a proposed action: {parsed.path}: {parsed.message}")
    draft = TaskDraft.for_action(parsed, task_id=args.task_id)
    _write_task(draft.to_json(), args.out, out)
    _tell_written(args, out, err, {"task_id": draft.task_id, "action_digest": draft.action_digest},
                  f"drafted {draft.task_id} for action {parsed.action_id}")
    return EXIT_OK


def _tell_written(args: argparse.Namespace, out: TextIO, err: TextIO, fields: dict[str, str | None], done: str) -> None:
    """With ``--out``, the task went to a file: say so (one JSON object with ``--json``, else a line
    on stderr); without it, the task itself was the output."""
    if args.out is None:
        return
    if args.json:
        out.write(json.dumps({"ok": True, **fields, "out": str(args.out)}, sort_keys=True) + "\n")
    else:
        err.write(f"{done} -> {args.out}\n")


def _budget(args: argparse.Namespace, out: TextIO) -> int:
    from decimal import Decimal, InvalidOperation

    from cda.guardian.ledger import Ledger
    from cda.guardian.money import amount, currency, text

    try:
        number = Decimal(args.amount.strip())
    except InvalidOperation:
        raise _bad(f"AMOUNT must be an exact decimal number such as 2000 or 150.25, not {args.amount[:40]!r}") from None
    limit, code = amount("AMOUNT", number), currency("--currency", args.currency)
    ledger = Ledger.open(args.store)
    try:
        balance = ledger.set_budget(args.agent, code, limit)
    finally:
        ledger.close()
    doc = {"agent_id": args.agent, "currency": code, "budget": text(balance.budget),
           "committed": text(balance.committed), "remaining": text(balance.remaining)}
    if args.json:
        out.write(json.dumps(doc, sort_keys=True) + "\n")
    else:
        out.write(f"{args.agent}: budget {doc['budget']} {code}, committed {doc['committed']}, "
                  f"remaining {doc['remaining']}\n")
    return EXIT_OK


def _sign(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from cda.guardian.signers import SignerError, SignerRegistry, load_signer_key, sign, signer_key_path
    from cda.guardian.tasks import TaskDraft

    draft = TaskDraft.from_json(_read(args.task, "the draft"), str(args.task))
    with _open_existing(args.store, args.root) as store:
        registry = SignerRegistry(store)
        _speaking(registry, args.signer)
        key = load_signer_key(args.key or signer_key_path(args.signer))
        try:
            signed = sign(draft, args.signer, key, registry)
        except SignerError as exc:  # the key is not the registered signer's
            raise _Refused([str(exc)]) from None
    _write_task(signed.to_json(), args.out, out)
    _tell_written(args, out, err, {"task_id": signed.task_id, "signer_id": args.signer},
                  f"signed {signed.task_id} as {args.signer}")
    return EXIT_OK


def _verify(args: argparse.Namespace, out: TextIO) -> int:
    from cda.guardian.signers import SignerRegistry, verify_problems
    from cda.guardian.tasks import TaskSigned, read_task

    with _open_existing(args.store, args.root) as store:
        task = read_task(_read(args.task, "the task"), str(args.task))
        if not isinstance(task, TaskSigned):
            raise _Refused([f"{args.task}: task {task.task_id!r} is a draft: it carries no signature"])
        problems = verify_problems(task, SignerRegistry(store))
    if problems:
        raise _Refused(problems)
    doc = {"ok": True, "task_id": task.task_id, "signer_id": task.signature.signer_id, "problems": []}
    if args.json:
        out.write(json.dumps(doc, sort_keys=True) + "\n")
    else:
        out.write(f"verified: {task.task_id} signed by {task.signature.signer_id}\n")
    return EXIT_OK


def _execute(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from pydantic import ValidationError

    from cda.guardian.decision import DecisionRecord
    from cda.guardian.execution import ExecutionRefused, execute
    from cda.guardian.ledger import Ledger
    from cda.guardian.money import load_exact
    from cda.guardian.proposal import Malformed, read_action
    from cda.guardian.tasks import TaskExecuted, TaskSigned, read_task

    task = read_task(_read(args.task, "the task"), str(args.task))
    if not isinstance(task, TaskSigned) or isinstance(task, TaskExecuted):
        raise _Refused([f"{args.task}: task {task.task_id!r} is {task.state}: only a signed task can be executed"])
    from cda.contracts.locations import problem_message
    from cda.files import parse_json

    decision = None
    if args.decision is not None:
        decision_doc = parse_json(_read(args.decision, "the decision"), str(args.decision))
        if isinstance(decision_doc, dict):  # cda guard --json adds where an ESCALATE waits; not part of the record
            decision_doc.pop("escalation", None)
        try:
            decision = DecisionRecord.model_validate(decision_doc)
        except ValidationError as exc:
            first = exc.errors(include_url=False)[0]
            where = ".".join(map(str, first["loc"])) or "the document"
            raise _bad(f"{args.decision}: not a guardian DecisionRecord ({where}: {problem_message(first)})") from None
    policy_store = None
    if args.policies is not None:
        if args.escalation is None:
            raise _bad("--policies goes with --escalation (a decision names the policy store it was made under)")
        from cda.guardian.policies import load_policy_store

        policy_store = load_policy_store(args.policies)
    action = None
    if args.action is not None:
        parsed = read_action(_read(args.action, "the action"))
        if isinstance(parsed, Malformed):
            raise _bad(f"{args.action}: not a proposed action: {parsed.path}: {parsed.message}")
        action = parsed
    result: dict[str, Any] = {}
    if args.result is not None:
        loaded = load_exact(_read(args.result, "the result"), str(args.result))
        if not isinstance(loaded, dict):
            raise _bad(f"{args.result}: the result is a JSON object")
        result = loaded
    with _open_existing(args.store, args.root) as store:
        try:
            done = execute(task, decision, Ledger(store), action=action, run=lambda _task: result,
                           receipts=args.receipt, escalation=args.escalation, policy_store=policy_store)
        except ExecutionRefused as exc:
            hint = " (cda guard records its decisions in the guardian file it is given)" \
                if "not one the guardian recorded" in str(exc) else ""
            raise _Refused([str(exc) + hint]) from None
    _write_task(done.to_json(), args.out, out)
    _tell_written(args, out, err, {"task_id": done.task_id, "audit_ref": done.audit_ref},
                  f"executed {done.task_id}: {done.audit_ref}")
    return EXIT_OK
