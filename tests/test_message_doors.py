"""The last audit's small messages, each through the ``cda`` command in a child process: an entity
store's mistake is named by the file the user gave (never ``<input>``), pydantic's ``Value error, ``
never reaches a user, and an empty problem file says it is empty and what to write (not "type
error")."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest


def _cda(args: list[str], cwd: Path) -> tuple[int, str, str]:
    done = subprocess.run([sys.executable, "-m", "cda", *args], capture_output=True, text=True, cwd=cwd, timeout=600)
    return done.returncode, done.stdout, done.stderr


def _policy(tmp_path: Path) -> None:
    (tmp_path / "p.cedar").write_text("permit(principal, action, resource);\n")
    (tmp_path / "r.json").write_text(json.dumps({"principal": 'User::"a"', "action": 'Action::"r"',
                                                 "resource": 'Doc::"d"', "context": {}}))


USER_A = {"uid": {"type": "User", "id": "a"}, "attrs": {}, "parents": []}


@pytest.mark.parametrize(("entities", "said"), [
    (json.dumps([USER_A, USER_A]), "e.json: error: [1].uid: User::\"a\" is in the store twice (also e.json[0])"),
    (json.dumps([{**USER_A, "attrs": {"x": 1.5}}]), "e.json: error: [0].attrs.x: 1.5 is not a Cedar value"),
    (json.dumps({"uid": 1}), "e.json: error: the entities file is a JSON list"),
    ("{bad", "e.json:1:2: error: not valid JSON: Expecting property name"),
])
def test_an_entity_store_mistake_is_named_by_its_file(tmp_path: Path, entities: str, said: str) -> None:
    _policy(tmp_path)
    (tmp_path / "e.json").write_text(entities)
    code, out, err = _cda(["policy", "authorize", "p.cedar", "--request", "r.json", "--entities", "e.json"], tmp_path)
    assert (code, out) == (2, ""), err
    assert err.startswith(said) and "<input>" not in err, err
    code, out, err = _cda(["policy", "authorize", "p.cedar", "--request", "r.json", "--entities", "e.json",
                           "--json"], tmp_path)
    assert code == 2 and json.loads(err if err.startswith("{") else out)["file"] == "e.json", (out, err)


def test_a_registry_field_refused_by_a_validator_reads_without_pydantics_prefix(tmp_path: Path) -> None:
    (tmp_path / "tools.toml").write_text('[[tool]]\nname = "t"\ncommand = ["prog"]\nsatisfies = ["t"]\n'
                                         'reliability = "high"\ncost = "low"\nlatency_ms = 1\ntimeout_s = -1\n')
    code, out, err = _cda(["conduct", "t", "--db", "ir.sqlite", "--registry", "tools.toml"], tmp_path)
    assert (code, out) == (2, ""), err
    assert "timeout_s" in err and "Value error" not in err and len(err.strip().splitlines()) == 1, err


@pytest.mark.parametrize("text", ["", "\n\n", "# only a comment\n"])
def test_an_empty_problem_file_says_so_and_what_to_write(tmp_path: Path, text: str) -> None:
    (tmp_path / "empty.cda").write_text(text)
    code, out, err = _cda(["solve", "empty.cda"], tmp_path)
    assert (code, out) == (2, "")
    assert err.startswith("empty.cda:1:1: error: the problem is empty: it has no statements"), err
    assert "type error" not in err and "Write at least one, e.g. 'hyp rain'" in err
