"""``cda mcp`` end to end: a real ``cda mcp`` subprocess over stdio, driven by the MCP SDK's own
client — tools with structured output, a tool error carrying the DSL position (and the server
still answering after it), progress notifications from an Action's events, resources, and a
session edited item by item and re-solved."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

pytest.importorskip("mcp", reason="the MCP SDK is in the test extra (cda[mcp])")

from mcp import Client  # noqa: E402
from mcp.client.stdio import StdioServerParameters  # noqa: E402

from tests.conftest import EXAMPLES, ROOT  # noqa: E402
from tests.timing import HANG

PUMP = "hyp leak, spill\nobservable wet\nobserve wet\nhard: wet iff (leak or spill)\nsoft: not spill weight 2\n" \
       "goal prove leak or spill\n"


BENCH = "INPUT(a)\nINPUT(b)\nOUTPUT(z)\ny = AND(a, b)\nz = NOT(y)\n"


def _server() -> StdioServerParameters:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return StdioServerParameters(command=sys.executable, args=["-m", "cda", "mcp"], env=env, cwd=str(ROOT))


def _run(body: Any) -> Any:
    async def main() -> Any:
        async with Client(_server(), read_timeout_seconds=60) as client:
            return await body(client)

    return anyio.run(main)


def _structured(result: Any) -> dict[str, Any]:
    assert not result.is_error, result.content
    data = result.structured_content
    assert isinstance(data, dict)
    return data


def test_tools_answer_with_structured_output_and_errors_keep_the_server_alive() -> None:
    async def body(client: Client) -> dict[str, Any]:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        out: dict[str, Any] = {"tools": set(tools), "schema": tools["solve"].output_schema}
        out["check"] = _structured(await client.call_tool("check", {"dsl": PUMP}))
        out["solve"] = _structured(await client.call_tool("solve", {"dsl": PUMP, "backend": "z3"}))
        out["bad"] = await client.call_tool("solve", {"dsl": "hyp a\nhard: a and\n"})
        out["type"] = await client.call_tool("check", {"dsl": "hyp a\nhard: b\n"})
        out["conflict"] = _structured(await client.call_tool(
            "explain_conflict", {"dsl": "observable o\nobserve x: o\nobserve y: not o\n"}))
        out["prove"] = _structured(await client.call_tool("prove", {"fol": (EXAMPLES / "syllogism.fol").read_text()}))
        out["after"] = _structured(await client.call_tool("solve", {"dsl": "hyp a\nhard: a"}))  # still serving
        circuit = {"bench": BENCH, "observations": "a=1 b=1 z=1\n"}
        out["diagnose"] = _structured(await client.call_tool("diagnose", circuit))
        out["probe"] = _structured(await client.call_tool("probe", circuit))
        out["bad_bench"] = await client.call_tool("diagnose", {"bench": "INPUT(a)\nz = FOO(a)\n", "observations": ""})
        return out

    out = _run(body)
    assert {"check", "solve", "prove", "explain_conflict", "diagnose", "probe", "run_action",
            "session_put", "session_remove", "session_show", "session_solve"} <= out["tools"]
    assert "hypotheses" in json.dumps(out["schema"])
    assert out["check"]["abducibles"] == 2
    import cda

    assert out["solve"] == json.loads(cda.solve(PUMP, backend="z3").json_text())  # the engine's own answer
    bad = out["bad"]
    assert bad.is_error
    text = bad.content[0].text
    assert "dsl:2:12: syntax error: unexpected end of input" in text.splitlines()[0]
    error = json.loads(text.splitlines()[-1])
    assert (error["line"], error["column"], error["kind"]) == (2, 12, "syntax error") and "a name" in error["expected"]
    assert out["type"].is_error and "dsl:2:7: type error: unknown predicate 'b'" in out["type"].content[0].text
    assert out["conflict"]["conflict"]["cores"] == [["x", "y"]]
    assert [r["status"] for r in out["prove"]["results"]] == ["supported", "refuted", "inconclusive"]
    assert out["after"]["hypotheses"][0]["assumed"] == ["a"]
    # z = NOT(AND(a, b)) reads 1 with a = b = 1: either gate may be broken; measuring y tells them apart
    assert out["diagnose"]["diagnoses"] == [["y"], ["z"]] and out["diagnose"]["complete"]
    assert out["probe"]["probes"][0]["net"] == "y" and out["probe"]["probes"][0]["gain_bits"] == 1.0
    assert out["bad_bench"].is_error and "FOO" in out["bad_bench"].content[0].text
    # issue 27: the server's scratch folder for a netlist never reaches the client, in an error or an answer
    assert "cda: error: circuit.bench:2: unknown gate type" in out["bad_bench"].content[0].text.splitlines()[0]
    for leaked in (out["bad_bench"].content[0].text, json.dumps(out["diagnose"]), json.dumps(out["probe"])):
        assert "cda-mcp-" not in leaked and "/tmp" not in leaked, leaked
    assert out["diagnose"]["file"] == "circuit.bench"


def test_session_edits_by_name_and_resolves_only_when_changed() -> None:
    async def body(client: Client) -> list[Any]:
        steps = []
        for name, statement in [("decl", "hyp leak, spill\nobservable wet"), ("obs", "observe wet"),
                                ("model", "hard model: wet iff (leak or spill)"), ("prior", "soft: not spill weight 2")]:
            steps.append(_structured(await client.call_tool("session_put", {"session": "s", "name": name,
                                                                            "statement": statement})))
        steps.append(_structured(await client.call_tool("session_solve", {"session": "s", "backend": "z3"})))
        steps.append(_structured(await client.call_tool("session_solve", {"session": "s", "backend": "z3"})))
        steps.append(_structured(await client.call_tool("session_put", {"session": "s", "name": "prior",
                                                                        "statement": "soft: not leak weight 2"})))
        steps.append(_structured(await client.call_tool("session_solve", {"session": "s", "backend": "z3"})))
        steps.append(await client.call_tool("session_put", {"session": "s", "name": "bad", "statement": "hard: (wet"}))
        steps.append(await client.call_tool("session_put", {"session": "s", "name": "typo", "statement": "hard: wett"}))
        steps.append(await client.call_tool("session_solve", {"session": "s"}))
        steps.append(_structured(await client.call_tool("session_remove", {"session": "s", "name": "typo"})))
        steps.append(_structured(await client.call_tool("session_solve", {"session": "s", "backend": "z3"})))
        return steps

    steps = _run(body)
    assert steps[0]["changed"] == "added decl" and steps[3]["items"] == ["decl", "obs", "model", "prior"]
    first, again = steps[4], steps[5]
    assert first["solved_again"] and not again["solved_again"] and first["result"] == again["result"]
    assert [h["assumed"] for h in first["result"]["hypotheses"]][0] == ["leak"]
    assert steps[6]["changed"] == "replaced prior"
    assert steps[7]["solved_again"] and steps[7]["result"]["hypotheses"][0]["assumed"] == ["spill"]
    bad = steps[8]
    assert bad.is_error and "item 'bad' at line 1, column 11" in bad.content[0].text
    assert not steps[9].is_error  # a type error shows only with the whole problem: at the solve
    typo = steps[10]
    assert typo.is_error and "item 'typo' at line 1, column 7: unknown predicate 'wett'" in typo.content[0].text
    assert json.loads(typo.content[0].text.splitlines()[-1])["item"] == "typo"
    assert steps[11]["items"] == ["decl", "obs", "model", "prior"]
    assert steps[12]["result"] == steps[7]["result"] and not steps[12]["solved_again"]


def test_run_action_reports_progress_and_resources_are_listed(tmp_path: Path) -> None:
    inputs = json.loads((EXAMPLES / "action" / "service_outage.json").read_text())
    if isinstance(inputs.get("ken"), dict) and "path" in inputs["ken"]:
        inputs["ken"]["path"] = str(EXAMPLES / "action" / inputs["ken"]["path"])
    progress: list[tuple[float, float | None, str | None]] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append((value, total, message))

    async def body(client: Client) -> dict[str, Any]:
        resources = [str(r.uri) for r in (await client.list_resources()).resources]
        dsl = await client.read_resource("cda://docs/dsl")
        result = await client.call_tool("run_action", {"inputs": inputs}, progress_callback=on_progress)
        bad = await client.call_tool("run_action", {"inputs": {"problem": 3}})
        return {"resources": resources, "dsl": dsl, "result": result, "bad": bad}

    out = _run(body)
    assert "cda://docs/dsl" in out["resources"] and "cda://examples/service_outage.cda" in out["resources"]
    assert "# The CDA constraint DSL" in out["dsl"].contents[0].text
    outputs = _structured(out["result"])
    assert outputs["status"] in ("completed", "abstained")
    assert progress and all(0.0 <= v <= 1.0 and t == 1.0 for v, t, _ in progress)
    assert [v for v, _, _ in progress] == sorted(v for v, _, _ in progress)  # in the order of the events
    assert out["bad"].is_error and "inputs.problem" in out["bad"].content[0].text  # the tool's input schema refused it


def test_streamable_http_serves_the_same_tools(tmp_path: Path) -> None:
    import socket
    import subprocess
    import time

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    log = (tmp_path / "server.log").open("w")
    proc = subprocess.Popen([sys.executable, "-m", "cda", "mcp", "--http", "--port", str(port)],
                            env=env, cwd=str(ROOT), stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                assert proc.poll() is None and time.monotonic() < deadline, (tmp_path / "server.log").read_text()
                time.sleep(0.1)

        async def main() -> Any:
            async with Client(f"http://127.0.0.1:{port}/mcp", read_timeout_seconds=60) as client:
                good = await client.call_tool("solve", {"dsl": PUMP, "backend": "clingo"})
                bad = await client.call_tool("check", {"dsl": "hyp a\nhard: (a"})
                return good, bad

        good, bad = anyio.run(main)
        assert _structured(good)["verdicts"][0]["status"] == "supported"
        assert bad.is_error and "dsl:2:9: syntax error" in bad.content[0].text
    finally:
        proc.terminate()
        proc.wait(timeout=HANG)
        log.close()
