"""Receipts that mean what they say (docs/jobs.md, "Vouched receipts"; docs/actions.md, "The audit log").

Three holes, each attacked as an attacker would (a real SQLite file edited with ``sqlite3``, the
real ``cda`` in a child process; ``cda receipts verify`` once per exit code as a child, its other
answers read in process through ``cda_here``), and the key's holder as the oracle of what is genuine:

1. a receipt's vouch named no place: a vouched receipt copied from another log signed by the same
   key, moved within its log or appended twice still counted as vouched;
2. ``cda run`` and the service vouched for nothing, so their tails were indistinguishable from
   rows anyone appended, and the next signer signed over both;
3. a ``job_results`` row inserted by hand, with no receipt, was given one (vouched) by the next
   batch, which signed it and put its answer in results.jsonl.
"""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
import subprocess
import sys
from contextlib import closing
from pathlib import Path

import pytest

from cda.actions.log_guard import AuditLogError, check_signed_head
from cda.actions.receipts import GENESIS_HASH, TRIGGERS, ReceiptLog, entry_hash
from cda.adapters.action_entry import load_inputs, run_inputs
from cda.adapters.jobs.batch import DB_NAME
from cda.adapters.jobs.results_store import JOBS_FORMAT
from cda.contracts.receipt import Receipt
from cda.keys.signing import VouchState, head_path, load_signer, read_head, vouch_state, write_head
from tests.cli_run import cda_here
from tests.conftest import ROOT
from tests.timing import HANG

EXAMPLE = ROOT / "examples" / "action" / "service_outage.json"
ENTAILED = "hyp a, b\nobservable o\nobserve o\nhard: o iff (a or b)\ngoal prove a or b\n"


def _cda(*args: str | Path, cwd: Path | None = None, keys: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "CDA_KEY_DIR": str(keys)}
    return subprocess.run([sys.executable, "-m", "cda", *map(str, args)], env=env, cwd=cwd, capture_output=True,
                          text=True, timeout=HANG)


def _verify(db: Path, keys: Path) -> subprocess.CompletedProcess[str]:
    """``cda receipts verify DB`` in this process (``tests/cli_run.py``'s ``cda_here``): its words and
    exit code are what is read; a real child answers each of its exit codes (0, 1, 3) once below."""
    return cda_here("receipts", "verify", db, env={"CDA_KEY_DIR": str(keys)})


def _rows(db: Path) -> list[tuple[int, str, str, str]]:
    """(seq, body, prev_hash, entry_hash) of every entry, read as an attacker reads the file."""
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT seq, body, prev_hash, entry_hash FROM receipts ORDER BY rowid").fetchall()
    conn.close()
    return rows


def _append_raw(db: Path, bodies: list[str]) -> None:
    """Append ``bodies`` as entries that extend the chain (the triggers allow it: no key is needed)."""
    conn = sqlite3.connect(db, isolation_level=None)
    try:
        conn.execute("BEGIN IMMEDIATE")
        seq, prev = conn.execute("SELECT seq, entry_hash FROM receipts ORDER BY rowid DESC LIMIT 1").fetchone()
        for body in bodies:
            seq, digest = seq + 1, entry_hash(prev, body)
            conn.execute("INSERT INTO receipts (seq, action_id, body, prev_hash, entry_hash) VALUES (?, ?, ?, ?, ?)",
                         (seq, json.loads(body)["action_id"], body, prev, digest))
            prev = digest
        conn.execute("COMMIT")
    finally:
        conn.close()


def _rewrite_tail(db: Path, keep: int, bodies: list[str]) -> None:
    """Replace every entry after the first ``keep`` with ``bodies``, the chain recomputed and the
    triggers put back word for word: only the vouches can give it away."""
    conn = sqlite3.connect(db, isolation_level=None)
    try:
        conn.execute("BEGIN IMMEDIATE")
        for name in TRIGGERS:
            conn.execute(f"DROP TRIGGER {name}")
        conn.execute("DELETE FROM receipts WHERE seq >= ?", (keep,))
        prev = conn.execute("SELECT entry_hash FROM receipts ORDER BY rowid DESC LIMIT 1").fetchone()
        prev = GENESIS_HASH if prev is None else prev[0]
        for seq, body in enumerate(bodies, start=keep):
            digest = entry_hash(prev, body)
            conn.execute("INSERT INTO receipts (seq, action_id, body, prev_hash, entry_hash) VALUES (?, ?, ?, ?, ?)",
                         (seq, json.loads(body)["action_id"], body, prev, digest))
            prev = digest
        for sql in TRIGGERS.values():
            conn.execute(sql)
        conn.execute("COMMIT")
    finally:
        conn.close()


def _sign_back(db: Path, keys: Path, count: int) -> None:
    """Sign the head at entry ``count``: the state a writer killed before its next signature leaves."""
    head = read_head(head_path(db))
    write_head(head_path(db), load_signer(keys).sign_head(_rows(db)[count - 1][3], count, head["action_id"],
                                                          head["attempt"], "start"))


@pytest.fixture
def keys(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "keys"
    monkeypatch.setenv("CDA_KEY_DIR", str(folder))
    return folder


def _batch(folder: Path, keys: Path, names: list[str]) -> Path:
    """A signed results store: one `cda jobs run` of ``check`` jobs on the files ``names``."""
    folder.mkdir(parents=True, exist_ok=True)
    for index, name in enumerate(names):
        (folder / name).write_text(ENTAILED.replace("hyp a, b", f"hyp a, b, x{index}"), encoding="utf-8")
    (folder / "m.toml").write_text("".join(f'[[job]]\nkind = "check"\nfile = "{n}"\nname = "{n}"\n\n' for n in names),
                                   encoding="utf-8")
    done = _cda("jobs", "run", "m.toml", cwd=folder, keys=keys)
    assert done.returncode == 0, done.stdout + done.stderr
    return folder / "m.results" / DB_NAME


# --- 1. a vouch is bound to its place ------------------------------------------------------------


def test_a_vouched_receipt_copied_from_another_log_is_not_vouched_there(tmp_path: Path, keys: Path) -> None:
    """Two batches signed by one key. The last receipt of one, copied after the signed head of the
    other (extending its chain, as anyone can): it passed as vouched (verify exit 0, and the next
    batch signed over it). Now verify names the entry as tampered (exit 1) and the batch refuses."""
    first = _batch(tmp_path / "one", keys, ["a.cda"])
    second = _batch(tmp_path / "two", keys, ["b.cda"])
    stolen = _rows(first)[-1][1]
    assert json.loads(stolen)["result"]["vouched"]["key"] == load_signer(keys).public_key
    before = read_head(head_path(second))
    _append_raw(second, [stolen])
    done = _cda("receipts", "verify", second, keys=keys)
    assert done.returncode == 1, done.stdout + done.stderr
    at = len(_rows(second))
    assert f"entry {at} (seq {at - 1}): the trusted key's vouch does not hold at this place" in done.stdout, done.stdout
    again = _cda("jobs", "run", "m.toml", cwd=tmp_path / "two", keys=keys)
    assert again.returncode == 2 and f"(entries {at})" in again.stderr, again.stdout + again.stderr
    assert read_head(head_path(second)) == before  # nothing signed over it


def test_reordered_and_duplicated_vouched_receipts_are_named(tmp_path: Path, keys: Path) -> None:
    """A tail of receipts the key's holder vouched for (a writer killed before its signature) is
    believed as it was written (the oracle: exit 0). Swapped, with the chain recomputed and the
    triggers put back, both entries are named; one appended again, the copy is named."""
    db = tmp_path / "log.sqlite"
    signer = load_signer(keys)
    receipts = [Receipt(action_id="act", seq=n, kind="action", name=f"step.{n}", inputs_hash="h") for n in range(4)]
    with ReceiptLog(db, signer=signer) as log:
        log.append_many(receipts)
    write_head(head_path(db), signer.sign_head(_rows(db)[1][3], 2, "act", 1, "start"))
    assert _cda("receipts", "verify", db, keys=keys).returncode == 0
    bodies = [row[1] for row in _rows(db)]
    _rewrite_tail(db, 2, [bodies[3], bodies[2]])
    swapped = _verify(db, keys)
    assert swapped.returncode == 1, swapped.stdout
    assert "entry 3 (seq 2), entry 4 (seq 3): the trusted key's vouch does not hold" in swapped.stdout, swapped.stdout
    _rewrite_tail(db, 2, bodies[2:])
    assert _verify(db, keys).returncode == 0  # put back as written: believed again
    _append_raw(db, [bodies[3]])
    twice = _verify(db, keys)
    assert twice.returncode == 1 and "entry 5 (seq 4): the trusted key's vouch" in twice.stdout, twice.stdout
    assert "entry 4 (seq 3)" not in twice.stdout  # the original stays believed


def test_a_vouch_of_the_old_form_is_not_trusted_more(tmp_path: Path, keys: Path) -> None:
    """A receipt vouched for as CDA did before (a signature of the receipt alone, which any copy
    passes) counts as not vouched for: verify says UNVERIFIED (exit 3) and names it in a note."""
    from cda.contracts.receipt import canonical_json

    db = tmp_path / "log.sqlite"
    signer = load_signer(keys)
    with ReceiptLog(db, signer=signer) as log:
        log.append(Receipt(action_id="act", seq=0, kind="action", name="step", inputs_hash="h"))
    write_head(head_path(db), signer.sign_head(_rows(db)[0][3], 1, "act", 1, "start"))
    old = Receipt(action_id="act", seq=1, kind="action", name="step", inputs_hash="h")
    old = old.model_copy(update={"result": {"vouched": signer.sign_bytes(canonical_json(old.model_dump(mode="json"))
                                                                         .encode("utf-8"))}})
    _append_raw(db, [canonical_json(old.model_dump(mode="json"))])
    done = _cda("receipts", "verify", db, keys=keys)
    assert done.returncode == 3, done.stdout
    assert "entry 2 (seq 1): vouched for in the form CDA wrote before" in done.stdout, done.stdout
    with ReceiptLog(db) as log, pytest.raises(AuditLogError, match=r"\(entries 2\).*form CDA wrote before"):
        check_signed_head(db, log, signer.public_key)  # no writer signs over it


def test_a_tail_vouched_by_another_key_is_not_believed(tmp_path: Path, keys: Path) -> None:
    """Entries vouched for by a key that is not the trusted one: unverified (exit 3), named."""
    from cda.keys.signing import Signer

    db = tmp_path / "log.sqlite"
    signer = load_signer(keys)
    with ReceiptLog(db, signer=signer) as log:
        log.append(Receipt(action_id="act", seq=0, kind="action", name="step", inputs_hash="h"))
    write_head(head_path(db), signer.sign_head(_rows(db)[0][3], 1, "act", 1, "start"))
    with ReceiptLog(db, signer=Signer("22" * 32)) as log:
        log.append(Receipt(action_id="act", seq=1, kind="action", name="step", inputs_hash="h"))
    done = _verify(db, keys)
    assert done.returncode == 3 and "entry 2 (seq 1): vouched for by another key" in done.stdout, done.stdout
    with ReceiptLog(db) as log, pytest.raises(AuditLogError, match=r"\(entries 2\)"):
        check_signed_head(db, log, signer.public_key)


# --- 2. every writer with a key vouches --------------------------------------------------------------


def test_cda_run_vouches_for_every_receipt_and_refuses_a_tail_it_did_not_write(tmp_path: Path, keys: Path) -> None:
    """`cda run` vouches for every receipt where it lands: a run killed before its last signature
    leaves a tail verify believes (exit 0, where it said "ended after the signed head": exit 1).
    A receipt appended by hand after it is named (exit 3), and the next `cda run` on the folder
    refuses to sign over it (exit 2), the head untouched."""
    out = tmp_path / "out"
    run_inputs(load_inputs(EXAMPLE), out, base_dir=EXAMPLE.parent)
    db = out / "receipts.sqlite"
    key = load_signer(keys).public_key
    rows = _rows(db)
    states = {vouch_state(Receipt.model_validate_json(body), key, seq, prev) for seq, body, prev, _ in rows}
    assert states == {VouchState.VOUCHED}, states
    _sign_back(db, keys, 3)  # the start head a run writes, as a kill after its action.end leaves it
    done = _verify(db, keys)
    assert done.returncode == 0, done.stdout
    assert f"{len(rows) - 3} entries after the signed head are each vouched for" in done.stdout, done.stdout
    forged = Receipt(action_id=json.loads(rows[-1][1])["action_id"], seq=999, kind="action", name="reflection.put",
                     inputs_hash="h", result={"sha256": "0" * 64})
    from cda.contracts.receipt import canonical_json

    _append_raw(db, [canonical_json(forged.model_dump(mode="json"))])
    done = _verify(db, keys)
    assert done.returncode == 3 and f"(entry {len(rows) + 1} (seq {len(rows)}))" in done.stdout, done.stdout
    head = read_head(head_path(db))
    again = _cda("run", EXAMPLE, "--out", out, keys=keys)
    assert again.returncode == 1, again.stdout + again.stderr  # `cda run`'s exit for a log it will not extend
    assert f"(entries {len(rows) + 1})" in again.stderr and "Traceback" not in again.stderr, again.stderr
    assert read_head(head_path(db)) == head


def test_the_service_writers_vouch_for_what_they_append(tmp_path: Path, keys: Path) -> None:
    """The server's own receipts (Attempts, in its process) are vouched for where they land."""
    from cda.service.attempts import Attempts
    from cda.service.streams import Hub

    db = tmp_path / "s.sqlite"

    async def serve() -> None:  # the hub lives in the server's event loop
        attempts = Attempts(db, Hub(db))
        try:
            attempts.receipt("act", "action.cancelled", {"x": 1}, {"why": "test"})
            attempts.begin("act", "action.queued", {"x": 1}, {})
        finally:
            attempts.close_stores()

    asyncio.run(serve())
    key = load_signer(keys).public_key
    rows = _rows(db)
    assert len(rows) == 2
    assert all(vouch_state(Receipt.model_validate_json(body), key, seq, prev) is VouchState.VOUCHED
               for seq, body, prev, _ in rows)


def test_a_served_action_is_vouched_for_by_the_server_and_its_runner(tmp_path: Path) -> None:
    """A real `cda serve` on loopback runs an action (its runner process appends the run's
    receipts, the server its own): every entry of the file is vouched for by the key where it is,
    so a later signer can tell them from anything appended by hand."""
    from tests.service_harness import call, example_inputs, follow, serving, toolbus

    db = tmp_path / "receipts.sqlite"
    with serving(db) as server:
        with toolbus(server) as ws:
            action_id = call(ws, "actions.start", {"ability": "cda", "inputs": example_inputs("vouch")})["result"][
                "action_id"]
        follow(server, action_id)
        assert server.stop() == 0
    key = load_signer().public_key  # the key tests/conftest.py gives every process of this test
    rows = _rows(db)
    names = {json.loads(body)["name"] for _, body, _, _ in rows}
    assert {"action.start", "action.end"} <= names and len(rows) > 10, names
    states = [vouch_state(Receipt.model_validate_json(body), key, seq, prev) for seq, body, prev, _ in rows]
    assert set(states) == {VouchState.VOUCHED}, [(row[0], state) for row, state in zip(rows, states, strict=True)
                                                 if state is not VouchState.VOUCHED]


# --- 3. a results row no receipt accounts for ----------------------------------------------------------


def _insert_row(db: Path, key: str, answer: dict[str, object]) -> None:
    with sqlite3.connect(db) as conn:
        conn.execute("INSERT OR REPLACE INTO job_results VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                     (key, "check", "ok", json.dumps(answer), None, 0.5, 0, "f" * 32, 1.0))
    conn.close()


def test_a_forged_results_row_is_flagged_and_never_signed(tmp_path: Path, keys: Path) -> None:
    """A row for the manifest's second job, inserted by hand with no receipt: the batch took it as
    finished, wrote a vouched receipt for it, signed it, and put its forged answer in results.jsonl.
    Now verify flags the row (exit 1), the batch leaves it out, runs the job, and says so; the
    JSONL holds the real answer, and the store verifies intact afterwards."""
    from cda.adapters.jobs.manifest import read_manifest

    db = _batch(tmp_path, keys, ["a.cda"])
    (tmp_path / "b.cda").write_text(ENTAILED.replace("hyp a, b", "hyp a, b, y"), encoding="utf-8")
    (tmp_path / "m.toml").write_text('[[job]]\nkind = "check"\nfile = "a.cda"\nname = "a.cda"\n\n'
                                     '[[job]]\nkind = "check"\nfile = "b.cda"\nname = "b.cda"\n', encoding="utf-8")
    spec = read_manifest(tmp_path / "m.toml").jobs[1]
    _insert_row(db, spec.key, {"forged": True})
    done = _verify(db, keys)
    assert done.returncode == 1, done.stdout
    assert f"1 row(s) no receipt accounts for (job {spec.key[:16]}…)" in done.stdout, done.stdout
    entries = len(_rows(db))
    again = _cda("jobs", "run", "m.toml", "--json", cwd=tmp_path, keys=keys)
    assert again.returncode == 0, again.stdout + again.stderr
    summary = json.loads(again.stdout)
    assert summary["ran"] == 1 and summary["unaccounted"] == [spec.key], summary
    assert "no receipt accounts for" in again.stderr, again.stderr
    lines = [json.loads(line) for line in (tmp_path / "m.results" / "results.jsonl").read_text().splitlines()]
    assert [line["status"] for line in lines] == ["ok", "ok"] and "forged" not in json.dumps(lines)
    assert len(_rows(db)) == entries + 1  # one receipt: the job's real run
    assert _verify(db, keys).returncode == 0


def test_a_forged_row_outside_the_manifest_stays_flagged_and_an_edited_row_is_refused(tmp_path: Path,
                                                                                      keys: Path) -> None:
    """A forged row no manifest job names is left out of results.jsonl and keeps verify failing; a
    row edited under its receipt makes the batch refuse (exit 2) before it signs anything."""
    db = _batch(tmp_path, keys, ["a.cda"])
    _insert_row(db, "9" * 64, {"forged": True})
    again = _cda("jobs", "run", "m.toml", cwd=tmp_path, keys=keys)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "forged" not in (tmp_path / "m.results" / "results.jsonl").read_text()
    assert _verify(db, keys).returncode == 1
    with sqlite3.connect(db) as conn:
        conn.execute("DELETE FROM job_results WHERE key = ?", ("9" * 64,))
        conn.execute("UPDATE job_results SET result = ?", (json.dumps({"edited": True}),))
    conn.close()
    head = read_head(head_path(db))
    refused = _cda("jobs", "run", "m.toml", cwd=tmp_path, keys=keys)
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert "is not the answer its receipt vouches for (edited)" in refused.stderr, refused.stderr
    assert read_head(head_path(db)) == head


def test_a_row_and_its_receipt_are_one_transaction(tmp_path: Path, keys: Path) -> None:
    """The row is written inside the receipt's transaction: a receipt that cannot be made after
    the row was written (a kill, an error) leaves no row either."""
    from cda.adapters.jobs.isolate import Outcome
    from cda.adapters.jobs.results_store import ResultStore

    db = tmp_path / DB_NAME
    store = ResultStore(db)
    log = ReceiptLog(db, fmt=JOBS_FORMAT, signer=load_signer(keys))
    try:
        def write(conn: sqlite3.Connection) -> Receipt:
            store.record_into(conn, "check", Outcome(key="k" * 64, status="ok", result={"x": 1}, error=None,
                                                     seconds=0.1), "r" * 32)
            raise KeyboardInterrupt  # between the row and its receipt

        with pytest.raises(KeyboardInterrupt):
            log.append_with(write)
        assert store.finished() == {} and log.count() == 0
        log.append_with(lambda conn: (store.record_into(conn, "check", Outcome(
            key="k" * 64, status="ok", result={"x": 1}, error=None, seconds=0.1), "r" * 32), Receipt(
            action_id="job-" + "k" * 64, seq=0, kind="action", name="job.check", inputs_hash="h"))[1])
        assert list(store.finished()) == ["k" * 64] and log.count() == 1
    finally:
        log.close()
        store.close()


# --- around it: the signed head itself -----------------------------------------------------------------


def test_a_deleted_head_file_does_not_let_a_writer_sign_over_an_append(tmp_path: Path, keys: Path) -> None:
    """The head file deleted and a forged receipt appended: a writer that found no head signed over
    the whole log, forgery included. A log with receipts this key vouched for was written by a CDA
    that vouches, so without a head the whole log is a tail, believed entry by entry: verify exit 1
    (a results store with jobs and no head), the batch refuses (exit 2) naming the forged entry."""
    from cda.contracts.receipt import canonical_json

    db = _batch(tmp_path, keys, ["a.cda"])
    head_path(db).unlink()
    forged = Receipt(action_id="job-" + "9" * 64, seq=0, kind="action", name="job.check", inputs_hash="9" * 64)
    _append_raw(db, [canonical_json(forged.model_dump(mode="json"))])
    done = _verify(db, keys)
    assert done.returncode == 1 and "is missing" in done.stdout, done.stdout
    again = _cda("jobs", "run", "m.toml", cwd=tmp_path, keys=keys)
    assert again.returncode == 2, again.stdout + again.stderr
    assert "1 entries of a log with no signed head are covered by no signature" in again.stderr, again.stderr
    assert "(entries 2)" in again.stderr and not head_path(db).exists()


def test_a_server_killed_before_its_first_signature_is_believed_entry_by_entry(tmp_path: Path, keys: Path) -> None:
    """A new log whose writer died before it signed anything: every entry vouched for where it is.
    Verify believes it with a note (exit 0: no attempt ended), and the next writer extends it."""
    db = tmp_path / "log.sqlite"
    with ReceiptLog(db, signer=load_signer(keys)) as log:
        log.append_many([Receipt(action_id="act", seq=n, kind="action", name=f"step.{n}", inputs_hash="h")
                         for n in range(3)])
    done = _verify(db, keys)
    assert done.returncode == 0 and "3 entries after the signed head are each vouched for" in done.stdout, done.stdout
    with ReceiptLog(db) as log:
        check_signed_head(db, log, load_signer(keys).public_key)  # no refusal
    _append_raw(db, [_rows(db)[0][1]])  # the first entry again: its vouch names seq 0
    done = _verify(db, keys)
    assert done.returncode == 1 and "entry 4 (seq 3): the trusted key's vouch does not hold" in done.stdout, done.stdout


def test_a_head_signed_by_another_key_is_refused_by_every_writer(tmp_path: Path, keys: Path) -> None:
    """The head re-signed (over the same log) by a key that is not the local one: verify says
    tampered, and neither `cda jobs run` nor the guardian's log writer extends it."""
    from cda.actions.log_guard import SignedLog
    from cda.keys.signing import Signer

    db = _batch(tmp_path, keys, ["a.cda"])
    head = read_head(head_path(db))
    write_head(head_path(db), Signer("33" * 32).sign_head(head["head"], head["count"], head["action_id"], 1, "end"))
    done = _verify(db, keys)
    assert done.returncode == 1 and "signed by another key" in done.stdout, done.stdout
    again = _cda("jobs", "run", "m.toml", cwd=tmp_path, keys=keys)
    assert again.returncode == 2 and "signed by another key" in again.stderr, again.stderr
    log = tmp_path / "guard.sqlite"
    with closing(SignedLog(log, "guard")) as signed:
        signed.append(Receipt(action_id="g", seq=0, kind="action", name="guard.decision", inputs_hash="h"))
    doc = read_head(head_path(log))
    write_head(head_path(log), Signer("33" * 32).sign_head(doc["head"], doc["count"], "guard", 1, "end"))
    with pytest.raises(AuditLogError, match="signed by another key"):
        SignedLog(log, "guard")


def test_a_vouch_has_one_spelling() -> None:
    """A vouch with an extra field, or its signature in capitals (the same bytes to a hex reader),
    is another body with a valid signature in it: it counts as no vouch, so that a vouched entry of
    a tail cannot be rewritten (its chain recomputed) and still pass."""
    from cda.keys.signing import Signer, vouch

    signer = Signer("11" * 32)
    receipt = vouch(signer, Receipt(action_id="a", seq=0, kind="action", name="x", inputs_hash="h"), 4, "ab" * 32)
    good = receipt.result["vouched"]
    assert vouch_state(receipt, signer.public_key, 4, "ab" * 32) is VouchState.VOUCHED
    for spelling in ({**good, "note": "x"}, {**good, "signature": good["signature"].upper()}, {"key": good["key"]}):
        respelled = receipt.model_copy(update={"result": {"vouched": spelling}})
        assert vouch_state(respelled, signer.public_key, 4, "ab" * 32) is VouchState.NONE, spelling
