"""Before a writer extends a signed receipt log: is it still the log that was signed?

Shared by every writer that signs a head (:mod:`cda.keys.signing`): ``cda run``, the service's
attempts, ``cda jobs run`` and the guardian's logs (:class:`SignedLog`). Signing on top of a
rewritten log would vouch for the rewrite, signing over entries after the signed head that this
key did not vouch for where they are would claim them as the writer's, and starting a new log
where a signed one was wiped would bury the evidence.
"""

from __future__ import annotations

import threading
from pathlib import Path

from cda.actions.audit import file_schema_problems
from cda.actions.receipts import GENESIS_HASH, ReceiptLog, tail_vouches
from cda.actions.store_file import LOG_FORMAT
from cda.contracts.receipt import Receipt
from cda.errors import CDAError
from cda.keys.signing import VouchState, head_path, read_head, signature_problems
from cda.store import Durability, FileFormat

__all__ = ["AuditLogError", "SignedLog", "check_signed_head", "refuse_lost_log", "tail_problem", "tail_states"]


class AuditLogError(CDAError):
    """The receipt log was changed behind the run's back (or its signed head no longer holds)."""


def refuse_lost_log(db: Path) -> None:
    """Refuse to start a new receipt log where one was signed and is now gone or wiped (its
    signed head still beside it): creating a fresh file there would bury the evidence."""
    if head_path(db).exists() and (not db.exists() or (db.is_file() and db.stat().st_size == 0)):
        raise AuditLogError(f"{db}: will not start a new receipt log: the log is gone or wiped, but its signed "
                            f"head is still beside it (run `cda receipts verify {db}`)")


def check_signed_head(db: Path, log: ReceiptLog, public_key: str, *, recorded: bool = True,
                      fmt: FileFormat = LOG_FORMAT) -> None:
    """Refuse to extend a log (every writer that signs passes here before it writes) whose schema
    is not CDA's (an extra trigger could drop the run's receipts), whose last signed head it no
    longer holds (signing on top of a rewritten log would vouch for the rewrite), or whose entries
    after that head are not each vouched for by this key where they are
    (:func:`tail_problem`: the next head would sign them as if this key's holder wrote them).
    ``recorded``: also refuse a log in which a run recorded ``action.tampered`` (a scan of every
    receipt: a long-lived writer that checked it once and tracks its own findings may skip it
    before each signature). ``fmt``: the file's format (a jobs results store holds a receipt log too)."""
    problems = file_schema_problems(db, fmt)
    if recorded and log.named("action.tampered"):
        problems.append("an earlier run found this log rewritten while it ran (keep it as evidence, use a new --out)")
    path = head_path(db)
    if path.exists():
        doc = read_head(path)
        problems += signature_problems(doc, public_key)
        if not log.holds(doc["head"], doc["count"]):
            problems.append(f"the head signed after the last run (entry {doc['count']}) is no longer in the log")
        elif not problems:
            problems += tail_problem(log, int(doc["count"]), str(doc["head"]), public_key)
    elif log.vouched_for_by(public_key):
        # no head yet (a writer killed before its first signature), or one deleted: then the whole
        # log is the tail, and only entries this key vouched for where they are may be signed over
        # (a log CDA wrote before it vouched has no vouch at all, and is extended as before)
        problems += tail_problem(log, 0, GENESIS_HASH, public_key)
    if problems:
        raise AuditLogError(f"{db}: will not extend this receipt log: " + "; ".join(problems)
                            + f" (run `cda receipts verify {db}`; keep the file as evidence and write to a new one)")


def tail_states(log: ReceiptLog, count: int, head: str, public_key: str | None) -> dict[VouchState, list[int]]:
    """The entries after entry ``count`` (whose hash is ``head``) by what their vouch shows for
    ``public_key`` where they are (:func:`cda.actions.receipts.tail_vouches`): only
    :attr:`~cda.keys.signing.VouchState.VOUCHED` ones were appended there by the key's holder; the
    others by something without the key, with a vouch of the older form that names no place, or
    copied there from another log, moved or appended twice. Only the tail is read: a long-lived
    writer checks it before each signature."""
    return tail_vouches([(e.receipt, e.entry_hash) for e in log.entries(after=count)], count, head, public_key)


def tail_problem(log: ReceiptLog, count: int, head: str, public_key: str) -> list[str]:
    """Why the entries after the signed head (entry ``count``, hash ``head``) may not be signed
    over (empty: each is vouched for by this key where it is: a writer killed before it signed
    its last receipts)."""
    found = tail_states(log, count, head, public_key)
    foreign = sorted(at for state, places in found.items() if state is not VouchState.VOUCHED for at in places)
    if not foreign:
        return []
    shown = ", ".join(map(str, foreign[:5])) + (" …" if len(foreign) > 5 else "")
    after = f"after its signed head (entry {count})" if count else "of a log with no signed head"
    why = ("; some carry a vouch of the form CDA wrote before a vouch named its place, which a copy from another log "
           "also passes" if VouchState.OLD_FORM in found else "")
    return [f"{len(foreign)} entries {after} are covered by no signature and were not vouched for by this key "
            f"where they are (entries {shown}): nothing shows CDA wrote them there{why}"]


_SIGNING = threading.Lock()  # this process's writers of guardian logs sign one at a time


class SignedLog:
    """A receipt log whose head is signed after every append, for the writers that have no runs
    to end: the guardian's decisions and escalations (every door of ``guard.evaluate``), the
    gateway's calls (``cda guard proxy``) and ``cda mcp``'s refusals. Without it such a log had no
    signed head, so deleting its newest receipts (a REJECT, an upstream call) still verified
    intact (audit3). Opening it refuses a log whose last signed head it no longer holds, as
    every signing writer does; ``append`` and ``count`` make it a gate's receipt sink."""

    def __init__(self, db: Path, label: str, *, durability: Durability = Durability.FULL) -> None:
        from cda.keys.signing import load_signer

        self.signer = load_signer()  # before anything is written: a key problem stops the writer at once
        refuse_lost_log(db)
        self.db, self.label = db, label
        self.log = ReceiptLog(db, durability=durability, signer=self.signer)  # every receipt vouched for
        try:
            check_signed_head(db, self.log, self.signer.public_key, recorded=False)
        except BaseException:
            self.log.close()
            raise

    def append(self, receipt: Receipt) -> str:
        """Append ``receipt`` and sign the new head (callers serialise their appends)."""
        entry = self.log.append(receipt)
        self.sign()
        return entry

    def count(self, action_id: str) -> int:
        return int(self.log.count(action_id))

    def sign(self) -> None:
        """Sign the log's tip, unless a head already signed covers as much: writers of one log
        (a pool's jobs, a server and a gateway) never put an older head back over a newer one."""
        from cda.actions.audit import file_meta_digest
        from cda.keys.signing import write_head

        path = head_path(self.db)
        with _SIGNING:
            head, count = self.log.tip()
            if path.exists() and read_head(path)["count"] >= count:
                return
            write_head(path, self.signer.sign_head(head, count, self.label, 1, "end", meta=file_meta_digest(self.db)))

    def close(self) -> None:
        self.log.close()
