"""Errors name the input at fault (audit finding C): a refused observations file at ``cda mcp``'s
``diagnose`` is named, not the netlist sent as text; a bad ``[defaults]`` limit of a jobs manifest
is at its key's line, not the table's."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.conftest import ROOT
from tests.test_mcp import BENCH


def test_mcp_names_the_refused_observations_file(tmp_path: Path) -> None:
    pytest.importorskip("mcp", reason="the MCP SDK is in the test extra (cda[mcp])")
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    inside, outside = tmp_path / "inside", tmp_path / "outside"
    inside.mkdir()
    outside.mkdir()
    refused = outside / "obs.txt"
    refused.write_text("a=1 b=1 z=1\n")
    server = StdioServerParameters(command=sys.executable, args=["-m", "cda", "mcp", "--allow-root", str(inside)],
                                   env={**os.environ, "PYTHONPATH": str(ROOT)}, cwd=str(inside))

    async def main() -> Any:
        async with Client(server, read_timeout_seconds=60) as client:
            return await client.call_tool("diagnose", {"bench": BENCH, "observations_path": str(refused)})

    result = anyio.run(main)
    assert result.is_error, result
    error = json.loads(result.content[0].text.splitlines()[-1])
    assert error["kind"] == "refused" and error["file"] == str(refused), error  # on main: "circuit.bench"
    assert "allowed roots" in error["message"], error


def test_a_bad_defaults_limit_is_at_its_own_line(tmp_path: Path) -> None:
    from cda.adapters.jobs.manifest import read_manifest
    from cda.errors import CDAError

    (tmp_path / "a.cda").write_text("hyp a\nhard: a\n")
    manifest = tmp_path / "m.toml"
    manifest.write_text('[defaults]\nmemory_mb = 512\ntimeout_s = nan\n\n[[job]]\nkind = "solve"\nfile = "a.cda"\n')
    with pytest.raises(CDAError, match=r"m\.toml:3: \[defaults\] timeout_s must be a number"):
        read_manifest(manifest)
    manifest.write_text('[defaults]\ntimeout_s = 5\nmemory_mb = -1\n\n[[job]]\nkind = "solve"\nfile = "a.cda"\n')
    with pytest.raises(CDAError, match=r"m\.toml:3: \[defaults\] memory_mb"):
        read_manifest(manifest)
