"""The MCP door refuses what the other doors refuse (the audit's door findings, docs/operations.md):
an argument a tool does not take is an error naming it, never dropped; the tool's input schema
says so. Driven by the official ``mcp`` SDK client against a real ``cda mcp`` subprocess."""

from __future__ import annotations

import os
import sys
from typing import Any

import anyio
import pytest

pytest.importorskip("mcp", reason="the MCP SDK is in the test extra (cda[mcp])")

from mcp import Client  # noqa: E402
from mcp.client.stdio import StdioServerParameters  # noqa: E402

from tests.conftest import ROOT  # noqa: E402


def _run(body: Any, tmp: Any) -> Any:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "CDA_KEY_DIR": str(tmp / "keys")}
    server = StdioServerParameters(command=sys.executable, args=["-m", "cda", "mcp"], env=env, cwd=str(tmp))

    async def main() -> Any:
        async with Client(server, read_timeout_seconds=60) as client:
            return await body(client)

    return anyio.run(main)


def test_an_unknown_argument_is_refused_and_the_schema_says_none_are_taken(tmp_path: Any) -> None:
    async def body(client: Client) -> dict[str, Any]:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        return {"schemas": {name: t.input_schema for name, t in tools.items()},
                "bogus": await client.call_tool("check", {"dsl": "hyp a", "bogus": 1}),
                "timout": await client.call_tool("solve", {"dsl": "hyp a", "timout": 5}),
                "ok": await client.call_tool("check", {"dsl": "hyp a"})}

    out = _run(body, tmp_path)
    assert all(schema.get("additionalProperties") is False for schema in out["schemas"].values()), out["schemas"]
    for name, argument in (("bogus", "bogus"), ("timout", "timout")):
        result = out[name]
        assert result.is_error, result.content
        assert f"{argument}: Extra inputs are not permitted" in result.content[0].text
    assert not out["ok"].is_error  # the same call without the stray argument is answered


def test_refusals_name_what_the_client_named_and_no_more(tmp_path: Any) -> None:
    """Audit finding 13: a refused ``ken`` line in ``dsl`` is named ``dsl`` (not the whole text),
    a refused ``ken`` list item by its own path (not the problem's file), and ``report_check`` with
    neither draft says so (not "…not both")."""
    import json

    (tmp_path / "ok.cda").write_text("hyp a\n", encoding="utf-8")
    outside = "/etc/hostname"

    async def body(client: Client) -> dict[str, Any]:
        return {"dsl": await client.call_tool("solve", {"dsl": f'ken "{outside}"\nhyp a\n'}),
                "ken": await client.call_tool("solve", {"path": "ok.cda", "ken": [outside]}),
                "neither": await client.call_tool("report_check", {"observations": ["x"]}),
                "typed": await client.call_tool("solve", {"path": "ok.cda", "ken": "k.json"})}

    out = _run(body, tmp_path)
    for name, file in (("dsl", "dsl"), ("ken", outside)):
        assert out[name].is_error
        error = json.loads(out[name].content[0].text.splitlines()[-1])
        assert error["file"] == file and error["kind"] == "refused", error
    assert out["neither"].is_error and "neither was given" in out["neither"].content[0].text
    assert "not both" not in out["neither"].content[0].text
    assert out["typed"].is_error and "Passing" not in out["typed"].content[0].text  # no helper class of ours named
