"""The third audit's findings (audit3/REPORT.md), each through the door it was found at: the
guardian's policy store, the conductor's `command` tools, the gateway's upstream schemas."""

from __future__ import annotations

import io
import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from cda.cli.main import main
from cda.guardian.ledger import Ledger
from tests.audit_helpers import one_tool_registry
from tests.timing import process_alive, wait_until

ACTION = {"action_id": "x1", "agent_id": "a", "tool": {"name": "t", "version": "1"}, "action_type": "read",
          "resources": ["r/1"], "cost_estimate": "1", "currency": "USD", "parameters": {}}


def _guard(tmp_path: Path, cost: str) -> tuple[int, str, str]:
    ledger = Ledger.open(tmp_path / "g.db")
    ledger.set_budget("a", "USD", Decimal(300))
    ledger.close()
    (tmp_path / "p.toml").write_text('[[policy]]\nid = "cap"\ndsl = "value(metric:cost) <= 5000 USD"\n'
                                     f'[[tool]]\nname = "t*"\ncost = {cost}\n')
    (tmp_path / "a.json").write_text(json.dumps(ACTION))
    out, err = io.StringIO(), io.StringIO()
    code = main(["guard", str(tmp_path / "a.json"), "--policies", str(tmp_path / "p.toml"), "--ledger",
                 str(tmp_path / "g.db")], stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


@pytest.mark.parametrize(("cost", "said"), [("nan", "a cost is a finite number, not NaN"),
                                            ("inf", "a cost is a finite number, not Infinity"),
                                            ("-inf", "a cost is a finite number, not -Infinity"),
                                            ('"NaN"', "a cost is a finite number, not NaN"),
                                            ('"0.1e-50"', "at most 9 decimal places"),
                                            ('"0.0000000001"', "at most 9 decimal places"),
                                            ("0.0000000001", "at most 9 decimal places"),
                                            ('"lots"', "'lots' is not a decimal number")])
def test_a_tool_rule_cost_that_is_not_a_finite_exact_amount_is_refused_in_one_line(
        tmp_path: Path, cost: str, said: str) -> None:
    # a TOML nan or inf was a TypeError traceback; a string cost skipped the decimal-places check
    code, out, err = _guard(tmp_path, cost)
    assert (code, out) == (2, ""), err
    assert "tool[0].cost" in err and said in err and "Traceback" not in err
    assert "Value error" not in err  # pydantic's prefix is not the user's business (leftovers41)
    assert len(err.strip().splitlines()) == 1


def test_a_tool_rule_cost_as_text_or_number_is_read_exactly(tmp_path: Path) -> None:
    for cost in ('"0.25"', "0.25", '"1e2"'):
        code, out, err = _guard(tmp_path, cost)
        assert (code, err) == (0, ""), cost
        assert out.startswith("APPROVE")


# ---- the conductor's `command` tools: output read as it comes, the process group stopped

def _registry(folder: Path, name: str, command: list[str], timeout: int = 60) -> Path:
    return one_tool_registry(folder, f"command = {json.dumps(command)}", timeout, name)


def _conduct(folder: Path, request: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(["conduct", request, "--db", str(folder / "ir.sqlite"), "--registry", str(folder / "tools.toml")],
                stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def test_a_tool_that_floods_its_output_is_stopped_at_the_cap_without_holding_it(tmp_path: Path) -> None:
    import subprocess
    import sys

    # 400 MB as fast as a pipe takes it: the conductor held all of it (and its text) before the check
    flood = "import sys\nchunk = b'a' * (1 << 20)\nfor _ in range(400):\n    sys.stdout.buffer.write(chunk)\n"
    (tmp_path / "flood.py").write_text(flood)
    _registry(tmp_path, "flood", [sys.executable, "flood.py", "{x}"])
    measure = ("import resource, subprocess, sys\n"
               "done = subprocess.run(sys.argv[1:], capture_output=True, text=True)\n"
               "print(done.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
               "print(done.stdout)")
    done = subprocess.run([sys.executable, "-c", measure, sys.executable, "-m", "cda", "conduct", "flood x=1",
                           "--db", str(tmp_path / "ir.sqlite"), "--registry", str(tmp_path / "tools.toml")],
                          capture_output=True, text=True, cwd=tmp_path, check=True)
    status, peak_kb = done.stdout.splitlines()[0].split()
    assert status == "1", done.stdout  # the obligation is owed: its one tool failed
    assert "more than 10000000 bytes of output (stopped)" in done.stdout
    assert int(peak_kb) < 300_000, f"peak {int(peak_kb) // 1024} MiB for a 10 MB cap"


def test_a_tool_stopped_after_its_timeout_leaves_no_process_behind(tmp_path: Path) -> None:
    _registry(tmp_path, "hang", ["sh", "-c", "sleep 300 & echo $! > child.pid; sleep 300", "{x}"], timeout=1)
    code, out, _ = _conduct(tmp_path, "hang x=1")
    assert code == 1 and "tool hang: error — sh: stopped after 1 s (timeout_s)" in out
    child = int((tmp_path / "child.pid").read_text())
    # SIGKILL is delivered at once; a loaded machine may take a moment to reap
    wait_until(lambda: not process_alive(child), "the tool's background process to end with its timeout", timeout=60)


def test_a_tool_whose_leftover_process_holds_its_output_still_answers(tmp_path: Path) -> None:
    # the program printed its answer and ended; a process it left keeps the pipe open until the
    # tool's time is up, then is stopped: the answer stands (it was a timeout before)
    (tmp_path / "lingers.sh").write_text('sleep 300 &\nprintf \'{"seen": "%s"}\\n\' "$1"\n')
    _registry(tmp_path, "lingers", ["sh", "lingers.sh", "{x}"], timeout=2)
    code, out, err = _conduct(tmp_path, "lingers x=7")
    assert (code, err) == (0, ""), out
    assert "tool lingers: ok" in out and '"seen": "7"' in out


# ---- the gateway in front of an upstream whose tool schema loops

LOOPING_UPSTREAM = '''
import sys

import anyio
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

TOOLS = [types.Tool(name="selfref", description="x", input_schema={"$ref": "#", "type": "object"}),
         types.Tool(name="plain", description="x", input_schema={"type": "object"})]


async def list_tools(ctx, params):
    return types.ListToolsResult(tools=TOOLS)


async def call_tool(ctx, params):
    with open(sys.argv[1], "a") as calls:
        calls.write(params.name + "\\n")
    return types.CallToolResult(content=[types.TextContent(type="text", text='{"ok": true}')])


async def main():
    async with stdio_server() as (read, write):
        server = Server("liar", version="1.0", on_list_tools=list_tools, on_call_tool=call_tool)
        await server.run(read, write, server.create_initialization_options())

anyio.run(main)
'''


def _gateway_in_front_of(upstream: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    """`cda guard proxy` (agent ``a``, a 300 USD budget, one cost cap) in front of the upstream
    server whose source is ``upstream``, which writes each tool it runs to ``tmp_path/calls``."""
    import os
    import sys

    from mcp.client.stdio import StdioServerParameters

    from tests.conftest import ROOT

    monkeypatch.setenv("CDA_KEY_DIR", str(tmp_path / "keys"))
    (tmp_path / "liar.py").write_text(upstream)
    (tmp_path / "p.toml").write_text('[[policy]]\nid = "cap"\ndsl = "value(metric:cost) <= 5000 USD"\n')
    ledger = Ledger.open(tmp_path / "g.db")
    ledger.set_budget("a", "USD", Decimal(300))
    ledger.close()
    return StdioServerParameters(
        command=sys.executable, cwd=str(tmp_path), env={**os.environ, "PYTHONPATH": str(ROOT)},
        args=["-m", "cda", "guard", "proxy", "--upstream", f"liar={sys.executable} liar.py {tmp_path / 'calls'}",
              "--agent", "a", "--policies", "p.toml", "--ledger", "g.db"])


def test_an_upstream_schema_that_loops_is_a_receipted_reject_not_an_internal_error(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import sqlite3

    import anyio

    pytest.importorskip("mcp", reason="the MCP SDK is in the test extra (cda[mcp])")
    from mcp import Client


    gateway = _gateway_in_front_of(LOOPING_UPSTREAM, tmp_path, monkeypatch)

    async def agent() -> list[tuple[bool, str]]:
        async with Client(gateway, read_timeout_seconds=120) as client:
            answers = []
            for name in ("selfref", "plain"):
                result = await client.call_tool(name, {"x": 1})  # was an MCPError: Internal server error
                answers.append((bool(result.is_error), result.content[0].text))
            return answers

    (refused, said), (failed, _) = anyio.run(agent)
    assert refused and said.startswith("REJECT malformed_action")
    assert "the schema of selfref@1.0 cannot be checked: it refers to itself without end" in said
    assert not failed  # the gateway goes on serving the upstream's other tools
    assert (tmp_path / "calls").read_text().split() == ["plain"]  # the looping tool was never called
    with sqlite3.connect(tmp_path / "g.db") as db:  # the REJECT is a decision on record, as every one
        reasons = [r[0] for r in db.execute("SELECT reason FROM decisions ORDER BY rowid")]
    assert reasons[0] == "malformed_action"
    out = io.StringIO()  # the gateway's receipt log: the REJECT and the call, under a signed head
    assert main(["receipts", "verify", str(tmp_path / "g.db.receipts.sqlite")], stdout=out, stderr=out) == 0
    assert "signed head at entry" in out.getvalue() and "(0 entries after it)" in out.getvalue()


# ---- the guardian's receipt log: its head signed, so the newest receipts cannot be cut off unseen

NO_DELETE = '[facts]\ndeletes = { action_type = ["*delete*"] }\n[[policy]]\nid = "no_delete"\ndsl = "not deletes"\n'


def _decide(tmp_path: Path, action_type: str) -> tuple[int, str, str]:
    (tmp_path / "p.toml").write_text(NO_DELETE)
    (tmp_path / "a.json").write_text(json.dumps({**ACTION, "action_id": action_type, "action_type": action_type}))
    out, err = io.StringIO(), io.StringIO()
    code = main(["guard", str(tmp_path / "a.json"), "--policies", str(tmp_path / "p.toml"), "--ledger",
                 str(tmp_path / "g.db"), "--receipts", str(tmp_path / "r.sqlite")], stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def _verify(tmp_path: Path) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(["receipts", "verify", str(tmp_path / "r.sqlite")], stdout=out, stderr=err)
    return code, out.getvalue() + err.getvalue()


def _cut_newest(db: Path) -> None:
    import sqlite3

    with sqlite3.connect(db) as conn:  # what anyone who can write the file can do
        trigger = conn.execute("SELECT sql FROM sqlite_master WHERE name = 'receipts_no_delete'").fetchone()[0]
        conn.execute("DROP TRIGGER receipts_no_delete")
        conn.execute("DELETE FROM receipts WHERE rowid = (SELECT MAX(rowid) FROM receipts)")
        conn.execute(trigger)


def test_cutting_the_newest_guardian_receipt_is_found_and_stops_the_next_decision(tmp_path: Path) -> None:
    ledger = Ledger.open(tmp_path / "g.db")
    ledger.set_budget("a", "USD", Decimal(300))
    ledger.close()
    assert _decide(tmp_path, "read")[1].startswith("APPROVE")
    assert _decide(tmp_path, "delete")[1].startswith("REJECT policy:no_delete")
    code, said = _verify(tmp_path)
    assert code == 0 and "signed head at entry 2" in said
    _cut_newest(tmp_path / "r.sqlite")  # the REJECT's receipt: verified "intact: 1 entries" before
    code, said = _verify(tmp_path)
    assert code == 1 and "TAMPERED" in said and "the signed head (entry 2" in said
    code, out, err = _decide(tmp_path, "read")  # nothing is signed on top of the cut log
    assert (code, out) == (2, "") and "will not extend this receipt log" in err


def test_investigating_a_folder_says_it_is_a_folder(tmp_path: Path) -> None:
    (tmp_path / "d.cda").mkdir()
    out, err = io.StringIO(), io.StringIO()
    code = main(["investigate", "start", str(tmp_path / "d.cda"), "--db", str(tmp_path / "i.sqlite")],
                stdout=out, stderr=err)
    assert (code, out.getvalue()) == (2, "")
    assert "d.cda: a folder, not a file" in err.getvalue()  # was "no such file"


# ---- TOML nested past Python's recursion limit, at every TOML door

@pytest.mark.parametrize("door", ["conduct --registry", "guard --policies", "guard --sim", "jobs run"])
@pytest.mark.parametrize("nesting", ["array", "table"])
def test_toml_nested_too_deeply_is_a_one_line_error_at_every_door(tmp_path: Path, door: str, nesting: str) -> None:
    deep = 50_000
    value = "[" * deep + "]" * deep if nesting == "array" else "{a = " * deep + "1" + "}" * deep
    toml = tmp_path / "deep.toml"
    toml.write_text(f"x = {value}\n")  # a RecursionError traceback from tomllib before
    ledger = Ledger.open(tmp_path / "g.db")
    ledger.set_budget("a", "USD", Decimal(300))
    ledger.close()
    (tmp_path / "a.json").write_text(json.dumps(ACTION))
    (tmp_path / "p.toml").write_text(NO_DELETE)
    argv = {"conduct --registry": ["conduct", "compute 1 + 1", "--db", str(tmp_path / "ir.sqlite"), "--registry", str(toml)],
            "guard --policies": ["guard", str(tmp_path / "a.json"), "--policies", str(toml), "--ledger", str(tmp_path / "g.db")],
            "guard --sim": ["guard", str(tmp_path / "a.json"), "--policies", str(tmp_path / "p.toml"), "--ledger",
                            str(tmp_path / "g.db"), "--sim", str(toml)],
            "jobs run": ["jobs", "run", str(toml), "--out", str(tmp_path / "out")]}[door]
    out, err = io.StringIO(), io.StringIO()
    code = main(argv, stdout=out, stderr=err)
    assert (code, out.getvalue()) == (2, "")
    said = err.getvalue()
    assert "deep.toml" in said and "nested too deeply to read" in said and "Traceback" not in said
    assert len(said.strip().splitlines()) == 1


FAILING_LIST = '''
import anyio
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server


async def list_tools(ctx, params):
    raise ValueError("this server cannot list its tools")


async def main():
    async with stdio_server() as (read, write):
        server = Server("broken", version="1.0", on_list_tools=list_tools)
        await server.run(read, write, server.create_initialization_options())

anyio.run(main)
'''


def test_an_upstream_that_cannot_list_its_tools_stops_the_gateway_with_one_line(tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    pytest.importorskip("mcp", reason="the MCP SDK is in the test extra (cda[mcp])")
    from tests.conftest import ROOT

    (tmp_path / "broken.py").write_text(FAILING_LIST)
    (tmp_path / "p.toml").write_text(NO_DELETE)
    ledger = Ledger.open(tmp_path / "g.db")
    ledger.set_budget("a", "USD", Decimal(300))
    ledger.close()
    done = subprocess.run(
        [sys.executable, "-m", "cda", "guard", "proxy", "--upstream", f"broken={sys.executable} broken.py",
         "--agent", "a", "--policies", "p.toml", "--ledger", "g.db"],
        stdin=subprocess.DEVNULL, capture_output=True, text=True, cwd=tmp_path, timeout=300,
        env={**os.environ, "PYTHONPATH": str(ROOT), "CDA_KEY_DIR": str(tmp_path / "keys")})
    # an ExceptionGroup traceback and exit 1 before (the CDAError was wrapped by the upstream's task group)
    ours = [line for line in done.stderr.splitlines() if line.startswith("cda: error:")]
    assert done.returncode == 2, done.stderr[-2000:]
    assert ours == ["cda: error: upstream broken: cannot connect or list its tools (MCPError: Internal server error)"]
    assert "Exception Group" not in done.stderr


def test_a_registry_mcp_server_that_does_not_start_is_named_in_words(tmp_path: Path) -> None:
    import sys

    pytest.importorskip("mcp", reason="the MCP SDK is in the test extra (cda[mcp])")
    (tmp_path / "tools.toml").write_text(f'[[tool]]\nname = "gone"\nmcp = {{ command = ["{sys.executable}", '
                                         '"missing.py"] }\nreliability = "high"\ncost = "low"\nlatency_ms = 1\n')
    code, out, err = _conduct(tmp_path, "x")
    assert (code, out) == (2, "")
    assert "the MCP server does not answer" in err
    assert "TaskGroup" not in err and "sub-exception" not in err  # "unhandled errors in a TaskGroup" before


def test_digits_before_ken_in_dsl_text_do_not_stall_the_gates_scan(tmp_path: Path) -> None:
    import os
    import sys

    import anyio

    pytest.importorskip("mcp", reason="the MCP SDK is in the test extra (cda[mcp])")
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    from tests.conftest import ROOT

    # the gate scans every DSL text a door receives for `ken "…"` lines before anything runs: 27
    # digits before `ken` held it 25 s (each 2 more: 3.5 times longer); 60 would be centuries
    server = StdioServerParameters(command=sys.executable, args=["-m", "cda", "mcp"], cwd=str(tmp_path),
                                   env={**os.environ, "PYTHONPATH": str(ROOT), "CDA_KEY_DIR": str(tmp_path / "keys")})
    base = "hyp a\nobservable o\nobserve o\nhard: o iff a\n"

    async def agent() -> list[tuple[bool, str]]:
        async with Client(server, read_timeout_seconds=300) as client:
            answers = []
            for dsl in (base + "0" * 60 + "zken\n", base + 'observe o 12ken "/etc/hostname"\n'):
                result = await client.call_tool("check", {"dsl": dsl})
                answers.append((bool(result.is_error), result.content[0].text))
            return answers

    (stalled_error, stalled), (ken_error, ken) = anyio.run(agent)
    assert stalled_error and "syntax error" in stalled  # answered: the DSL's own error, at once
    # a `ken` after digits is still found by the scan: the file it names is refused at its place
    assert ken_error and "outside the allowed roots" in ken and '"path": ["dsl", 5, 17]' in ken


def test_redaction_of_a_long_almost_address_is_linear_and_finds_what_it_found() -> None:
    import random
    import re

    from cda.verifiers.redact import redact

    def emails(text: str) -> list[str]:
        found = redact(text).mapping
        return sorted(v for k, v in found.items() if k.startswith("[EMAIL_"))

    # the address pattern as it was (the oracle on short texts): it tried each start of a long run
    was = re.compile(r"[A-Za-z0-9._%+-]+@(?:[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?\.)+[A-Za-z]{2,}")
    rng = random.Random(11)
    for _ in range(3000):
        text = "".join(rng.choice("ab.-@_+% 1!x") for _ in range(rng.randrange(1, 30)))
        assert set(emails(text)) <= set(was.findall(text)), text  # another kind may win an overlap
    assert emails("a@bb.cc and x.y@ex-1.example.org") == ["a@bb.cc", "x.y@ex-1.example.org"]
    assert emails("a" * 100_000 + "@" + "a" * 100_000) == []  # quadratic before: minutes
    assert emails("write to " + "x" * 50_000 + "@example.com now") == ["x" * 50_000 + "@example.com"]


# ---- the gateway in front of an upstream whose tool schema has a regex that backtracks without end

BACKTRACKING_UPSTREAM = LOOPING_UPSTREAM.replace(
    '''TOOLS = [types.Tool(name="selfref", description="x", input_schema={"$ref": "#", "type": "object"}),''',
    '''TOOLS = [types.Tool(name="nested", description="x", input_schema={
             "type": "object", "properties": {"x": {"type": "string", "pattern": "^(a+)+$"}}}),''')


def test_an_upstream_pattern_that_backtracks_is_checked_in_a_child_with_a_deadline(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A schema regex of the exponential kind (``^(a+)+$``) met by an agent's argument built to
    backtrack held a gateway thread for 16.6 s at 28 characters, twice as long for each more
    (audit3, finding 11). Such a tool's arguments are now checked in a child process with a
    deadline: an argument that matches is passed on, one that does not is refused with the
    schema's message, and one whose check does not end is refused, on record, in bounded time."""
    import time

    import anyio

    pytest.importorskip("mcp", reason="the MCP SDK is in the test extra (cda[mcp])")
    from mcp import Client


    assert 'pattern": "^(a+)+$"' in BACKTRACKING_UPSTREAM
    gateway = _gateway_in_front_of(BACKTRACKING_UPSTREAM, tmp_path, monkeypatch)

    async def agent() -> tuple[list[tuple[bool, str]], float]:
        async with Client(gateway, read_timeout_seconds=300) as client:
            answers = []
            for x in ("aaa", "b"):
                result = await client.call_tool("nested", {"x": x})
                answers.append((bool(result.is_error), result.content[0].text))
            started = time.monotonic()
            result = await client.call_tool("nested", {"x": "a" * 60 + "!"})  # years of backtracking in-process
            answers.append((bool(result.is_error), result.content[0].text))
            return answers, time.monotonic() - started

    [(failed, _), (_, mismatch), (_, cut)], seconds = anyio.run(agent)
    assert not failed  # a matching argument reaches the upstream
    assert mismatch.startswith("REJECT malformed_action") and "'b' does not match '^(a+)+$'" in mismatch
    assert cut.startswith("REJECT malformed_action")
    assert "could not be checked against its schema in 5 s (its pattern '^(a+)+$' can take exponential time" in cut
    # the refusal is the deadline's: the call waited the child's whole CHILD_SECONDS (one monotonic clock
    # encloses the other) and then returned at all — 60 characters in process are 2^60 steps, and the
    # client's own read timeout (300 s) fails the test rather than hang it. How long past the deadline
    # the refusal comes is the load's (the child's kill and the gateway's reply), not a promise of the code.
    from cda.guardian.schema_check import CHILD_SECONDS

    assert seconds >= CHILD_SECONDS
    assert (tmp_path / "calls").read_text().split() == ["nested"]  # only the matching call was made


def test_which_schema_regexes_are_checked_in_a_child() -> None:
    """Repetition inside repetition, alternation inside repetition and backreferences, at any
    depth of the schema (``pattern`` values, ``patternProperties`` keys); plain ones stay in process."""
    from cda.guardian.schema_check import backtracking_patterns

    schema = {"type": "object", "properties": {
        "a": {"pattern": "^[a-z0-9_]{1,64}$"}, "b": {"pattern": "^(a+)+$"}, "c": {"pattern": "^(x|xy)*z$"},
        "d": {"items": {"pattern": r"(\w+)\s\1"}}, "e": {"pattern": "^abc$"}, "f": {"pattern": "^(ab)?c+$"}},
        "patternProperties": {"^(k*)*$": {}, "^k[0-9]+$": {}}}
    assert backtracking_patterns(schema) == sorted(["^(a+)+$", "^(x|xy)*z$", r"(\w+)\s\1", "^(k*)*$"])
    assert backtracking_patterns({"type": "object"}) == []


def test_the_child_check_reads_the_arguments_as_the_gate_holds_them() -> None:
    """The child gets the parameters exactly: a JSON fraction is a ``Decimal`` in the gate (not a
    float: it was a TypeError that reached the agent as an internal error), an integer an ``int``,
    and a dict shaped like the tag the decimals travel in stays a dict. Each answer is the one
    ``jsonschema`` gives in process."""
    from decimal import Decimal

    from jsonschema.validators import validator_for

    from cda.guardian.proposal import read_action
    from cda.guardian.schema_check import errors_in_child

    schema = {"type": "object", "properties": {
        "x": {"type": "string", "pattern": "^(a+)+$"}, "n": {"type": "number", "maximum": 1.5},
        "k": {"type": "integer"}, "d": {"type": "object", "additionalProperties": {"type": "string"}}}}
    action = read_action(json.dumps({
        "action_id": "x", "agent_id": "a", "action_type": "t", "tool": {"name": "n", "version": "1.0"},
        "cost_estimate": "1", "currency": "USD",
        "parameters": {"x": "aa", "n": "N", "k": 3, "d": {"0" * 32: "1.5"}}}).replace('"N"', "1.50000000000000001"))
    cases = [dict(action.parameters),  # type: ignore[union-attr]
             {"x": "aa", "n": Decimal("1.4"), "k": Decimal("2.5")}, {"x": "b", "n": Decimal("1.5"), "k": 1}]
    assert isinstance(cases[0]["n"], Decimal)
    for instance in cases:
        local = sorted(validator_for(schema)(schema).iter_errors(instance), key=lambda e: [str(p) for p in e.absolute_path])
        expected = [(list(local[0].absolute_path), local[0].message)] if local else []
        assert errors_in_child(schema, instance) == expected, instance
    assert errors_in_child(schema, cases[0]) == [(["n"], "Decimal('1.50000000000000001') is greater than the maximum of 1.5")]
