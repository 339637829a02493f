"""Files at the doors (rule 4: files CDA did not create are never modified): what a command writes
goes only where CDA's own files are, never through a planted link; what it reads is a regular file
under a size cap, so a FIFO or a huge (or decompression-bomb) file is a clear error, exit 2, not a
blocked or swollen process. Each case goes through a real door: the ``cda`` command in a child
process, or ``cda mcp`` driven by the MCP SDK's client (docs/dsl.md, "Size and time limits";
docs/actions.md, "Receipts, artifacts, reflection")."""

from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from cda.errors import CDAError
from cda.files import read_bytes, text_stream
from tests.cli_run import cda_here
from tests.conftest import EXAMPLES, ROOT

ACTION = EXAMPLES / "action" / "service_outage.json"


def _cda(*argv: str, cwd: Path, env: dict[str, str] | None = None, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    full = {**os.environ, "PYTHONPATH": str(ROOT), "CDA_KEY_DIR": str(cwd / "keys"), **(env or {})}
    return subprocess.run([sys.executable, "-m", "cda", *argv], cwd=cwd, env=full, capture_output=True, text=True,
                          timeout=timeout)


def _refused(done: subprocess.CompletedProcess[str], *words: str) -> None:
    assert done.returncode == 2, (done.returncode, done.stderr[-2000:])
    assert "Traceback" not in done.stderr, done.stderr[-2000:]
    for word in words:
        assert word in done.stderr, done.stderr[-2000:]


def _action_folder(tmp_path: Path) -> tuple[Path, str]:
    """The inputs copied in, and the id ``cda run`` gives them (a first run in a scratch folder)."""
    for f in (EXAMPLES / "action").glob("*.json"):
        shutil.copy(f, tmp_path / f.name)
    first = _cda("run", ACTION.name, "--out", "first", cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    (ident,) = [p.name for p in (tmp_path / "first").iterdir() if p.is_dir()]
    return tmp_path, ident


# ---------------------------------------------------------------- cda run --out DIR


@pytest.mark.slow
def test_run_out_never_touches_files_it_did_not_write(tmp_path: Path) -> None:
    folder, ident = _action_folder(tmp_path)
    # a second run over its own folder is fine, and gives the same files
    again = _cda("run", ACTION.name, "--out", "first", cwd=folder)
    assert again.returncode == 0, again.stderr
    # the user's files at the predictable names: held, exit 2
    planted = folder / "out" / ident
    (planted / "cda_plan").mkdir(parents=True)
    for name in ("summary.md", "evidence.json", "cda_plan/context_pack.json"):
        (planted / name).write_text("precious\n")
    _refused(_cda("run", ACTION.name, "--out", "out", cwd=folder), "CDA never modifies files it did not create")
    for name in ("summary.md", "evidence.json", "cda_plan/context_pack.json"):
        assert (planted / name).read_text() == "precious\n", name
    # a plain file where the cda_plan folder goes: a clear error, not a FileExistsError traceback
    (folder / "out2" / ident).mkdir(parents=True)
    (folder / "out2" / ident / "cda_plan").write_text("x\n")
    _refused(_cda("run", ACTION.name, "--out", "out2", cwd=folder), "CDA never modifies files it did not create")
    assert (folder / "out2" / ident / "cda_plan").read_text() == "x\n"
    # a link planted at summary.md: the file outside --out is untouched
    victim = folder / "victim.txt"
    victim.write_text("victim\n")
    (folder / "out3" / ident).mkdir(parents=True)
    (folder / "out3" / ident / "summary.md").symlink_to(victim)
    _refused(_cda("run", ACTION.name, "--out", "out3", cwd=folder), "CDA never modifies files it did not create")
    # … even inside a folder CDA made (its manifest there): the link is no file CDA wrote
    shutil.copytree(folder / "first" / ident, folder / "out4" / ident)
    (folder / "out4" / ident / "summary.md").unlink()
    (folder / "out4" / ident / "summary.md").symlink_to(victim)
    _refused(_cda("run", ACTION.name, "--out", "out4", cwd=folder), "summary.md is not a regular file CDA wrote")
    assert victim.read_text() == "victim\n"
    # a file CDA wrote, then changed by someone: refused, kept as changed
    summary = folder / "first" / ident / "summary.md"
    summary.write_text(summary.read_text() + "my note\n")
    _refused(_cda("run", ACTION.name, "--out", "first", cwd=folder), "changed since CDA wrote it")
    assert summary.read_text().endswith("my note\n")


def test_a_dangling_link_at_the_receipt_store_is_refused(tmp_path: Path) -> None:
    for f in (EXAMPLES / "action").glob("*.json"):
        shutil.copy(f, tmp_path / f.name)
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "receipts.sqlite").symlink_to(tmp_path / "elsewhere.sqlite")
    _refused(_cda("run", ACTION.name, "--out", "out", cwd=tmp_path), "symbolic link")
    assert not (tmp_path / "elsewhere.sqlite").exists()


def _mcp(folder: Path, body: Any, env: dict[str, str] | None = None) -> Any:
    pytest.importorskip("mcp", reason="the MCP SDK is in the test extra (cda[mcp])")
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    params = StdioServerParameters(
        command=sys.executable, args=["-m", "cda", "mcp", "--allow-root", str(folder), "--out", str(folder / "out")],
        env={**os.environ, "PYTHONPATH": str(ROOT), "CDA_KEY_DIR": str(folder / "keys"), **(env or {})},
        cwd=str(folder))

    async def main() -> Any:
        async with Client(params, read_timeout_seconds=120) as client:
            return await body(client)

    return anyio.run(main)


def _text(result: Any) -> str:
    return " ".join(getattr(c, "text", "") for c in result.content)


def test_mcp_run_action_uses_the_same_guarded_writer(tmp_path: Path) -> None:
    folder, ident = _action_folder(tmp_path)
    planted = folder / "out" / ident
    planted.mkdir(parents=True)
    (planted / "summary.md").write_text("precious\n")
    inputs = json.loads(ACTION.read_text())

    async def body(client: Any) -> tuple[Any, Any]:
        refused = await client.call_tool("run_action", {"path": str(folder / ACTION.name)})
        alive = await client.call_tool("check", {"dsl": "hyp a"})
        return refused, alive

    refused, alive = _mcp(folder, body)
    assert refused.is_error and "CDA never modifies files it did not create" in _text(refused), _text(refused)
    assert not alive.is_error
    assert (planted / "summary.md").read_text() == "precious\n"
    assert inputs == json.loads(ACTION.read_text())


# ---------------------------------------------------------------- reading: size caps, regular files


def test_a_text_file_over_the_cap_is_refused_before_it_is_parsed(tmp_path: Path) -> None:
    with open(tmp_path / "z.cda", "wb") as fh:  # sparse: 2 MB of NUL bytes, no disk used
        fh.truncate(2 * 1024 * 1024)
    done = _cda("check", "z.cda", cwd=tmp_path)
    _refused(done, "z.cda", "2,097,152 bytes", "the limit is 1,000,000 bytes")
    assert len(done.stderr) < 1000


def test_policy_text_gets_the_text_cap_at_both_products(tmp_path: Path) -> None:
    """Cedar policies (cda policy) and the guardian's TOML policy file are text parsed whole: the
    text cap, as DSL text, not the data cap their schemas and entities get."""
    schema = EXAMPLES / "cedar" / "schema.cedarschema"
    (tmp_path / "big.cedar").write_text("permit(principal, action, resource);\n//" + "x" * 1_000_001 + "\n")
    _refused(_cda("policy", "analyze", "always-allows", "big.cedar", "--schema", str(schema), cwd=tmp_path),
             "big.cedar", "the limit is 1,000,000 bytes")
    (tmp_path / "policies.toml").write_text("# " + "x" * 1_000_001 + "\n")
    from cda.guardian.policies import load_policy_store

    with pytest.raises(CDAError, match="the limit is 1,000,000 bytes"):
        load_policy_store(tmp_path / "policies.toml")


def test_the_cap_is_checked_on_what_is_read_too() -> None:
    # /proc files say 0 bytes to fstat and hold more: the read itself must stop at cap + 1
    with pytest.raises(CDAError, match="more than the limit of 10 bytes"):
        read_bytes(Path("/proc/self/maps"), limit=10)
    assert read_bytes(Path("/proc/self/maps"), limit=10_000_000).count(b"\n") > 1
    with pytest.raises(CDAError, match="more than the limit of 10 bytes"), text_stream(Path("/proc/self/maps"),
                                                                                     limit=10) as stream:
        while stream.read(4):
            pass


def test_a_file_exactly_at_the_cap_reads(tmp_path: Path) -> None:
    path = tmp_path / "a.txt"
    path.write_bytes(b"x" * 100)
    assert read_bytes(path, limit=100) == b"x" * 100
    with pytest.raises(CDAError, match="100 bytes; the limit is 99 bytes"):
        read_bytes(path, limit=99)


def test_a_fifo_is_refused_not_read(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "f.cda")
    _refused(_cda("solve", "f.cda", "--timeout", "2", cwd=tmp_path, timeout=60), "not a regular file")
    _refused(cda_here("check", str(tmp_path), cwd=tmp_path, env={"CDA_KEY_DIR": str(tmp_path / "keys")}),
             "a folder, not a file")  # main's words in process: the fifo's refusal above is the child


def test_a_fifo_over_mcp_answers_and_the_server_stays_alive(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "f.cda")

    async def body(client: Any) -> tuple[Any, Any]:
        with anyio.fail_after(100):
            refused = await client.call_tool("solve", {"path": "f.cda", "timeout": 2})
            alive = await client.call_tool("check", {"dsl": "hyp a"})
        return refused, alive

    refused, alive = _mcp(tmp_path, body)
    assert refused.is_error and "not a regular file" in _text(refused), _text(refused)
    assert not alive.is_error


def _bomb(folder: Path) -> Path:
    """A gzipped .wcnf of 2 MB once decompressed (a few KB on disk)."""
    path = folder / "bomb.wcnf.gz"
    path.write_bytes(gzip.compress(b"c " + b"x" * (2 * 1024 * 1024) + b"\n", 9))
    assert path.stat().st_size < 20_000
    return path


def test_a_gzip_bomb_is_refused_at_the_data_cap_from_the_cli(tmp_path: Path) -> None:
    _bomb(tmp_path)
    cap = {"CDA_MAX_DATA_BYTES": "1000000"}
    _refused(_cda("diagnose", "bomb.wcnf.gz", cwd=tmp_path, env=cap), "bomb.wcnf.gz",
             "decompressed file is too large", "1,000,000 bytes")
    # under the default cap the same file decompresses (and is then read as the empty instance it is)
    # the other two read main's words in process (the cap is read from the environment at each read)
    keys = {"CDA_KEY_DIR": str(tmp_path / "keys")}
    assert "too large" not in cda_here("diagnose", "bomb.wcnf.gz", cwd=tmp_path, env=keys).stderr
    _refused(cda_here("diagnose", "bomb.wcnf.gz", cwd=tmp_path, env={**keys, "CDA_MAX_DATA_BYTES": "-1"}),
             "CDA_MAX_DATA_BYTES")


def test_a_gzip_bomb_is_refused_over_mcp(tmp_path: Path) -> None:
    _bomb(tmp_path)

    async def body(client: Any) -> Any:
        return await client.call_tool("diagnose", {"path": "bomb.wcnf.gz"})

    refused = _mcp(tmp_path, body, env={"CDA_MAX_DATA_BYTES": "1000000"})
    assert refused.is_error and "decompressed file is too large" in _text(refused), _text(refused)


def test_a_multi_member_gzip_reads_whole(tmp_path: Path) -> None:
    from cda.diagnosis.wcnf_import import read_wcnf

    raw = b"c mutated gates: g\nc corresp. vars: 2\np wcnf 3 3 10\n10 -3 2 1 0\n10 -3 -2 -1 0\n1 3 0\no 1 2 0\n"
    half = len(raw) // 2
    cut = raw.rindex(b"\n", 0, half) + 1
    (tmp_path / "two.wcnf.gz").write_bytes(gzip.compress(raw[:cut]) + gzip.compress(raw[cut:]))
    (tmp_path / "one.wcnf").write_bytes(raw)
    assert vars(read_wcnf(tmp_path / "two.wcnf.gz")) == vars(read_wcnf(tmp_path / "one.wcnf"))


def test_a_syntax_error_echoes_the_part_of_a_huge_line_around_the_caret(tmp_path: Path) -> None:
    (tmp_path / "long.cda").write_text("hyp a\nhyp " + "b" * 500_000 + " ) c\n")
    done = _cda("check", "long.cda", cwd=tmp_path)
    assert done.returncode == 2 and len(done.stderr) < 2000, len(done.stderr)
    source, caret = done.stderr.splitlines()[-2:]
    assert caret.strip() == "^" and source[len(caret) - 1] == ")", (source, caret)


# ---------------------------------------------------------------- other outputs


@pytest.mark.slow
def test_task_draft_out_and_schema_never_overwrite_a_users_file(tmp_path: Path) -> None:
    (tmp_path / "draft.json").write_text("precious\n")
    _refused(_cda("task", "draft", str(EXAMPLES / "guardian" / "launch.json"), "--task-id", "t1", "--out", "draft.json",
                  cwd=tmp_path), "draft.json", "exists")
    assert (tmp_path / "draft.json").read_text() == "precious\n"
    (tmp_path / "link.json").symlink_to(tmp_path / "nowhere.json")
    _refused(_cda("task", "draft", str(EXAMPLES / "guardian" / "launch.json"), "--task-id", "t1", "--out", "link.json",
                  cwd=tmp_path), "link.json")
    assert not (tmp_path / "nowhere.json").exists()
    made = _cda("task", "draft", str(EXAMPLES / "guardian" / "launch.json"), "--task-id", "t1", "--out", "new.json",
                cwd=tmp_path)
    assert made.returncode == 0 and json.loads((tmp_path / "new.json").read_text()), made.stderr

    (tmp_path / "sch").mkdir()
    (tmp_path / "sch" / "Receipt.schema.json").write_text("precious\n")
    _refused(_cda("schema", "sch", cwd=tmp_path), "Receipt.schema.json", "not a schema file CDA wrote")
    assert [p.name for p in (tmp_path / "sch").iterdir()] == ["Receipt.schema.json"]
    (tmp_path / "sch" / "Receipt.schema.json").unlink()
    assert _cda("schema", "sch", cwd=tmp_path).returncode == 0
    assert _cda("schema", "sch", cwd=tmp_path).returncode == 0  # its own files: rewritten freely
    assert _cda("schema", "--check", "sch", cwd=tmp_path).returncode == 0
