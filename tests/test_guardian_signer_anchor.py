"""Signers anchored in a signature, not a row order: every hand edit of the signers table leaves
the guardian refusing (issue 35).

A guardian file made through the CLI (alice its first signer, bob endorsed by alice, alice's pin
of the strict policy store, decisions recorded by ``cda guard``) is copied for each attack; the
attacker, mallory, holds her own key and can write the file (sqlite3 on it, past every trigger),
but not this CDA's key folder. After each edit, mallory's ``cda task pin-policies`` (of a policy
store that allows everything), ``sign``, ``verify`` and ``execute`` (of the production delete
``cda guard`` approved under that lax store) all exit 1, and the pins are what alice set.

Oracles: the exit codes and the file's pins read back with sqlite3; the same commands by alice
and bob on the untouched file succeed (exit 0), so the refusals are not a guardian that refuses
everyone.
"""

from __future__ import annotations

import io
import json
import shutil
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from cda.cli.main import main
from tests.conftest import EXAMPLES

MALLORY = "77" * 32
GUARDIAN = EXAMPLES / "guardian"


def _cli(*args: str | Path) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main([str(a) for a in args], out, err)
    return code, out.getvalue(), err.getvalue()


def _ok(*args: str | Path) -> str:
    code, out, err = _cli(*args)
    assert code == 0, (args, out, err)
    return out


@dataclass(frozen=True)
class World:
    folder: Path  # the baseline: guardian.db and the documents made for it
    owner_keys: Path


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> World:
    folder = tmp_path_factory.mktemp("guardian-world")
    owner_keys = tmp_path_factory.getbasetemp() / "cda-keys"  # the suite's key folder (conftest)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("CDA_KEY_DIR", str(owner_keys))
        patch.chdir(folder)
        db = folder / "guardian.db"
        _ok("task", "budget", "agent-7", "100000", "--store", db)
        _ok("task", "add-signer", "alice", "--store", db)
        _ok("task", "add-signer", "bob", "--store", db, "--by", "alice")
        _ok("task", "pin-policies", GUARDIAN / "policies.toml", "--store", db, "--by", "alice")
        (folder / "lax.toml").write_text("[config]\nmax_auto_launch_risk = 1\nmin_soft_score = 0\n")
        decision = _ok("guard", GUARDIAN / "launch.json", "--policies", GUARDIAN / "policies.toml", "--ledger", db,
                       "--json")
        (folder / "decision.json").write_text(decision)
        lax = _ok("guard", GUARDIAN / "delete.json", "--policies", folder / "lax.toml", "--ledger", db, "--json")
        assert json.loads(lax)["decision"] == "APPROVE"  # the lax store lets the production delete through
        (folder / "delete_decision.json").write_text(lax)
        _ok("task", "draft", GUARDIAN / "launch.json", "--task-id", "t-1", "--out", folder / "draft.json")
        _ok("task", "draft", GUARDIAN / "delete.json", "--task-id", "t-del", "--out", folder / "draft_delete.json")
        _ok("task", "sign", folder / "draft.json", "--store", db, "--signer", "bob", "--out", folder / "bob.json")
        mallory_key = folder / "mallory.key"
        mallory_key.write_text(MALLORY + "\n")
        mallory_key.chmod(0o600)
        # mallory's signature on the delete, made where she is the first signer (a file of her own)
        from cda.guardian.guardian_db import GuardianStore
        from cda.guardian.signers import SignerRegistry, public_key_of, sign
        from cda.guardian.tasks import TaskDraft

        own = GuardianStore.open(":memory:")
        SignerRegistry(own).register("mallory", public_key_of(MALLORY))
        draft = TaskDraft.from_json((folder / "draft_delete.json").read_text(), "draft_delete.json")
        (folder / "mallory_delete.json").write_text(sign(draft, "mallory", MALLORY, SignerRegistry(own)).to_json())
        own.close()
    return World(folder, owner_keys)


@pytest.fixture
def victim(world: World, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A copy of the baseline, the owner's key folder in force."""
    folder = tmp_path / "victim"
    shutil.copytree(world.folder, folder)
    monkeypatch.setenv("CDA_KEY_DIR", str(world.owner_keys))
    monkeypatch.chdir(folder)
    return folder


def _pins(db: Path) -> list[tuple[str, str, str]]:
    conn = sqlite3.connect(db)
    try:
        return conn.execute("SELECT key, value, set_by FROM guardian_config ORDER BY key").fetchall()
    finally:
        conn.close()


def _mallory_is_refused(folder: Path, signer: str = "mallory") -> None:
    """pin-policies, sign, verify and execute by ``signer`` (mallory's key) all exit 1; no pin changes."""
    db = folder / "guardian.db"
    pins = _pins(db)
    key = folder / "mallory.key"
    tried = {
        "pin-policies": _cli("task", "pin-policies", folder / "lax.toml", "--store", db, "--by", signer, "--key", key),
        "sign": _cli("task", "sign", folder / "draft_delete.json", "--store", db, "--signer", signer, "--key", key,
                     "--out", folder / "signed_by_mallory.json"),
        "verify": _cli("task", "verify", folder / "mallory_delete.json", "--store", db),
        "execute": _cli("task", "execute", folder / "mallory_delete.json", "--store", db, "--decision",
                        folder / "delete_decision.json"),
    }
    for command, (code, out, err) in tried.items():
        assert code == 1 and "cda: refused:" in err and "Traceback" not in err, (command, code, out, err)
    assert not (folder / "signed_by_mallory.json").exists()
    assert _pins(db) == pins


def _sql(folder: Path, *statements: str) -> None:
    conn = sqlite3.connect(folder / "guardian.db", isolation_level=None)
    try:
        for statement in statements:
            conn.execute(statement)
    finally:
        conn.close()


def _mallory_public() -> str:
    from cda.guardian.signers import public_key_of

    return public_key_of(MALLORY)


def _row(folder: Path, signer: str) -> tuple[str, str | None, str | None]:
    conn = sqlite3.connect(folder / "guardian.db")
    try:
        return conn.execute("SELECT public_key, endorsed_by, endorsement FROM signers WHERE signer_id = ?",
                            (signer,)).fetchone()
    finally:
        conn.close()


def test_on_the_untouched_file_the_signers_can_and_mallory_cannot(victim: Path) -> None:
    db = victim / "guardian.db"
    _ok("task", "verify", victim / "bob.json", "--store", db)
    _ok("task", "sign", victim / "draft.json", "--store", db, "--signer", "alice", "--out", victim / "alice.json")
    _ok("task", "verify", victim / "alice.json", "--store", db)
    _ok("task", "execute", victim / "bob.json", "--store", db, "--decision", victim / "decision.json")
    _mallory_is_refused(victim)


ATTACKS: dict[str, Callable[[Path], None]] = {
    # the attack of issue 35: a row with the lowest rowid made the first signer
    "insert mallory at rowid -1": lambda f: _sql(
        f, f"INSERT INTO signers (rowid, signer_id, public_key, registered_at) VALUES (-1, 'mallory', "
           f"'{_mallory_public()}', '2026-01-01T00:00:00+00:00')"),
    "insert mallory at rowid -1 claiming alice's endorsement": lambda f: _sql(
        f, f"INSERT INTO signers (rowid, signer_id, public_key, registered_at, endorsed_by, endorsement) VALUES "
           f"(-1, 'mallory', '{_mallory_public()}', '2026-01-01T00:00:00+00:00', 'alice', '{'ab' * 64}')"),
    "insert mallory with bob's endorsement copied": lambda f: _sql(
        f, f"INSERT INTO signers (signer_id, public_key, registered_at, endorsed_by, endorsement) SELECT 'mallory', "
           f"'{_mallory_public()}', registered_at, endorsed_by, endorsement FROM signers WHERE signer_id = 'bob'"),
    "delete alice, mallory the only unendorsed row": lambda f: _sql(
        f, "DELETE FROM signers WHERE signer_id = 'alice'",
        f"INSERT INTO signers (rowid, signer_id, public_key, registered_at) VALUES (0, 'mallory', "
        f"'{_mallory_public()}', '2026-01-01T00:00:00+00:00')"),
    "alice's row moved past mallory's": lambda f: _sql(
        f, "UPDATE signers SET rowid = 1000 WHERE signer_id = 'alice'",
        f"INSERT INTO signers (rowid, signer_id, public_key, registered_at) VALUES (1, 'mallory', "
        f"'{_mallory_public()}', '2026-01-01T00:00:00+00:00')"),
    "alice's key updated to mallory's (mallory signs as alice)": lambda f: _sql(
        f, f"UPDATE signers SET public_key = '{_mallory_public()}' WHERE signer_id = 'alice'"),
    "bob's key updated to mallory's (mallory signs as bob)": lambda f: _sql(
        f, f"UPDATE signers SET public_key = '{_mallory_public()}' WHERE signer_id = 'bob'"),
    "bob's row renamed to mallory with her key": lambda f: _sql(
        f, f"UPDATE signers SET signer_id = 'mallory', public_key = '{_mallory_public()}' WHERE signer_id = 'bob'"),
    "the header deleted": lambda f: _sql(f, "DELETE FROM guardian_header"),
    "the header names mallory as the first signer": lambda f: _sql(
        f, f"UPDATE guardian_header SET body = replace(replace(body, '\"root\":\"alice\"', '\"root\":\"mallory\"'), "
           f"(SELECT public_key FROM signers WHERE signer_id = 'alice'), '{_mallory_public()}')",
        f"UPDATE signers SET public_key = '{_mallory_public()}' WHERE signer_id = 'alice'",
        f"INSERT INTO signers (signer_id, public_key, registered_at) VALUES ('mallory', '{_mallory_public()}', "
        "'2026-01-01T00:00:00+00:00')"),
    "the header's signatures dropped": lambda f: _sql(
        f, "UPDATE guardian_header SET root_signature = '', anchor_signature = ''"),
}


@pytest.mark.parametrize("attack", sorted(ATTACKS))
def test_a_hand_edit_of_the_signers_table_speaks_for_no_one(victim: Path, attack: str) -> None:
    ATTACKS[attack](victim)
    signer = "alice" if "signs as alice" in attack else "bob" if "signs as bob" in attack else "mallory"
    _mallory_is_refused(victim, signer)


def test_a_header_mallory_made_with_her_own_cda_is_not_trusted(world: World, victim: Path, tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """mallory runs CDA with her own key folder on a file of her own, where she is the first
    signer, and copies its header and her row into the victim's file."""
    monkeypatch.setenv("CDA_KEY_DIR", str(tmp_path / "mallory-keys"))
    own = tmp_path / "own.db"
    (tmp_path / "mallory-keys" / "signers").mkdir(parents=True, mode=0o700)
    shutil.copy(victim / "mallory.key", tmp_path / "mallory-keys" / "signers" / "mallory.ed25519.key")
    (tmp_path / "mallory-keys" / "signers" / "mallory.ed25519.key").chmod(0o600)
    _ok("task", "add-signer", "mallory", "--store", own, "--public-key", _mallory_public())
    conn = sqlite3.connect(own)
    header = conn.execute("SELECT body, root_signature, anchor_signature FROM guardian_header").fetchone()
    conn.close()
    conn = sqlite3.connect(victim / "guardian.db")
    conn.execute("DELETE FROM guardian_header")
    conn.execute("INSERT INTO guardian_header VALUES (1, ?, ?, ?)", header)
    conn.execute("INSERT INTO signers (signer_id, public_key, registered_at) VALUES ('mallory', ?, "
                 "'2026-01-01T00:00:00+00:00')", (_mallory_public(),))
    conn.commit()
    conn.close()
    monkeypatch.setenv("CDA_KEY_DIR", str(world.owner_keys))  # the owner's CDA, as it runs the guardian
    _mallory_is_refused(victim)


def test_a_deleted_endorsement_silences_its_signer_and_everyone_it_endorsed(victim: Path) -> None:
    db = victim / "guardian.db"
    carol_key = victim / "carol.key"
    carol_key.write_text("66" * 32 + "\n")
    carol_key.chmod(0o600)
    from cda.guardian.signers import public_key_of

    _ok("task", "add-signer", "carol", "--store", db, "--public-key", public_key_of("66" * 32), "--by", "bob")
    _ok("task", "sign", victim / "draft.json", "--store", db, "--signer", "carol", "--key", carol_key,
        "--out", victim / "carol.json")
    _sql(victim, "UPDATE signers SET endorsement = NULL WHERE signer_id = 'bob'")
    for signed in ("bob.json", "carol.json"):
        code, _, err = _cli("task", "verify", victim / signed, "--store", db)
        assert code == 1 and "does not speak for" in err, err
    code, _, err = _cli("task", "sign", victim / "draft.json", "--store", db, "--signer", "carol", "--key", carol_key)
    assert code == 1 and "does not speak for" in err
    code, _, err = _cli("task", "execute", victim / "bob.json", "--store", db, "--decision", victim / "decision.json")
    assert code == 1 and "does not speak for" in err
    _ok("task", "sign", victim / "draft.json", "--store", db, "--signer", "alice", "--out", victim / "alice.json")
    _ok("task", "verify", victim / "alice.json", "--store", db)  # the root still speaks


def test_another_users_process_trusts_the_root_by_its_fingerprint(victim: Path, tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """Without this CDA's key (another user, another machine) the header is trusted only by the
    first signer's fingerprint given from outside the file: the right one works, none or a wrong
    one is refused."""
    from cda.guardian.signers import fingerprint, public_key_of

    db = victim / "guardian.db"
    alice = _row(victim, "alice")[0]
    monkeypatch.setenv("CDA_KEY_DIR", str(tmp_path / "elsewhere"))
    code, _, err = _cli("task", "verify", victim / "bob.json", "--store", db)
    assert code == 1 and "--root FINGERPRINT" in err
    _ok("task", "verify", victim / "bob.json", "--store", db, "--root", fingerprint(alice))
    code, _, err = _cli("task", "verify", victim / "bob.json", "--store", db, "--root",
                        fingerprint(public_key_of(MALLORY)))
    assert code == 1 and "is not the one given" in err


def test_an_old_file_speaks_only_once_its_first_signer_anchors_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A guardian file from 37fbddd (first signer by row order): after its migration no signer
    speaks until alice anchors it with her key; then alice, bob (endorsed by her) and her pin are
    kept, and a row mallory inserted before the anchoring is not adopted."""
    from tests.conftest import ROOT

    old = tmp_path / "old"
    shutil.copytree(ROOT / "tests" / "data" / "stores-37fbddd", old)
    for key in (old / "keys").rglob("*.key"):
        key.chmod(0o600)
    monkeypatch.setenv("CDA_KEY_DIR", str(old / "keys"))
    monkeypatch.chdir(old)
    db = old / "guardian.db"
    _sql(old, f"INSERT INTO signers (rowid, signer_id, public_key, registered_at) VALUES (-1, 'mallory', "
              f"'{_mallory_public()}', '2026-01-01T00:00:00+00:00')")
    code, _, err = _cli("task", "verify", old / "signed.json", "--store", db)
    assert code == 1 and "cda task anchor" in err, err
    code, _, err = _cli("task", "anchor", "mallory", "--store", db, "--key", tmp_path / "none.key")
    assert code == 2  # no key of mallory's in the owner's folder
    out = _ok("task", "anchor", "orchestrator:alice", "--store", db, "--json")
    doc = json.loads(out)
    assert doc["signers"] == ["orchestrator:alice", "orchestrator:bob"] and doc["speak_for_no_one"] == ["mallory"]
    _ok("task", "verify", old / "signed.json", "--store", db)
    _ok("task", "verify", old / "signed2.json", "--store", db)  # bob, endorsed by alice before headers
    from cda.guardian.guardian_db import GuardianStore
    from cda.guardian.signers import SignerRegistry, pinned_policy_digest

    with GuardianStore.open(db) as store:
        assert pinned_policy_digest(SignerRegistry(store)) == (
            "cf6f5d7331634b19e35ac082997e5889d260763d00e0e107e46b07692f855332", "")
    code, _, err = _cli("task", "anchor", "orchestrator:alice", "--store", db)
    assert code == 1 and "anchored already" in err
