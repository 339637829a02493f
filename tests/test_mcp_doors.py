"""The MCP door refuses what the other doors refuse (the audit's door findings, docs/operations.md):
an argument a tool does not take is an error naming it, never dropped; the tool's input schema
says so. Driven by the official ``mcp`` SDK client against a real ``cda mcp`` subprocess."""

from __future__ import annotations

import json
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


_BAD_TYPES = [  # arguments of the wrong JSON type, refused by the SDK's argument model before the gate saw them
    ("solve", {"timeout": "abc"}, "timeout", "timeout must be a number of seconds"),
    ("solve", {"timeout": [1, 2]}, "timeout", "timeout must be a number of seconds"),
    ("solve", {"top": "x"}, "top", "top must be a whole number"),
    ("solve", {"backend": ["z3"]}, "backend", "'auto', 'z3' or 'clingo'"),
    ("check", {"dsl": 5}, "dsl", "a valid string"),
    ("solve", {"timeout": -1}, "timeout", "0 or more"),  # the right type, out of range: the gate's own refusal
]


def _answers(client: Client) -> Any:
    async def calls() -> list[Any]:
        out = []
        for tool, args, _, _ in _BAD_TYPES:
            out.append(await client.call_tool(tool, {"dsl": "hyp a\nobservable b\nobserve b\nhard: b iff a\n", **args}))
        out.append(await client.call_tool("check", {"dsl": "hyp a"}))  # the server goes on answering
        return out

    return calls()


def _assert_invalid_params(results: list[Any]) -> None:
    *refused, ok = results
    assert not ok.is_error
    for (tool, args, field, expected), result in zip(_BAD_TYPES, refused):
        assert result.is_error, (tool, args, result.content)
        text = result.content[0].text
        for internal in ("pydantic", "validation error for", "Arguments", "input_value", "input_type", "[type="):
            assert internal not in text, (args, text)
        head, data = text.split("\n", 1)
        error = json.loads(data)
        assert error["kind"] == "invalid_params" and error["path"] == [field], (args, error)
        assert error["message"].startswith(f"{field}: ") and expected in error["message"], (args, error)
        assert head.endswith(f"cda: error: {error['message']}"), (args, head)


def test_an_argument_of_the_wrong_type_is_the_gate_s_invalid_params_over_stdio(tmp_path: Any) -> None:
    """Before: ``{"timeout": "abc"}`` was answered with pydantic's report (``1 validation error for
    solveArguments``, ``[type=value_error, input_value=…]``, a pydantic.dev URL); now the gate's
    refusal, as a value out of range is: ``invalid_params``, the argument's path, the check's words."""
    _assert_invalid_params(_run(_answers, tmp_path))


def test_an_argument_of_the_wrong_type_is_the_gate_s_invalid_params_over_streamable_http(tmp_path: Any) -> None:
    from tests.mcp_harness import started_http

    proc, url = started_http(["mcp"], tmp_path, "cda mcp --http")
    try:
        async def main() -> Any:
            async with Client(url, read_timeout_seconds=60) as client:
                return await _answers(client)

        _assert_invalid_params(anyio.run(main))
    finally:
        proc.terminate()
        proc.communicate(timeout=60)
