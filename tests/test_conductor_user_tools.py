"""The conductor with a user's own tools (docs/conductor.md, "Your own tools"): a Python function,
a program and an MCP server (the SDK's MCPServer, started by the test) in one manifest; side
effects counted (never repeated by the verify loop, a ``once`` tool at most once across a kill -9);
a live tool verified without being re-run; a CLARIFY answered in a second call; the LLM translator
naming a user's tool and falling back to rules; facts scoped to their request and retracted; a
tie said as a tie; the conductor's operations through the ToolBus and MCP doors."""

from __future__ import annotations

import io
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from cda.cli.main import main
from cda.conductor.conduct import Conductor
from cda.conductor.irdb import IRDatabase
from cda.conductor.registry import load_registry
from cda.conductor.tooling import ConductorError, ToolContext
from cda.conductor.translate import LLMTranslatorIn
from cda.operations.conductor_tools import cda_toolbox

pytest.importorskip("mcp", reason="the MCP SDK is in the test extra (cda[mcp])")

ROOT = Path(__file__).resolve().parents[1]

METRICS = r'''"""A user's Python tools for tests/test_conductor_user_tools.py: a live metric (another number on
each call, each call counted in a file) and a strict checker that ranks first and fails its
postcondition."""

from pathlib import Path

from pydantic import BaseModel


class Latency(BaseModel):
    service: str
    p99_ms: int
    facts: list[str]


def latency(service: str) -> Latency:
    calls = Path("metric_calls.txt")
    n = int(calls.read_text()) + 1 if calls.exists() else 1
    calls.write_text(str(n))
    return Latency(service=service, p99_ms=100 + n, facts=[f"slow({service})"])


def latency_cached(service: str) -> dict:
    return {"service": service}  # no p99_ms: its postcondition has(p99_ms) fails


def latency_ok(service: str, p99_ms: int) -> dict:
    return {"ok": p99_ms > 0, "detail": f"p99 {p99_ms} ms is not a latency"}
'''

TICKET = r'''"""A user's program tool: opens a ticket (a line in tickets.log per call), answers JSON on stdout.
With HANG_AFTER_ACTING set it acts, then waits to be killed (the kill -9 test)."""
import json
import re
import shlex
import os
import sys
import time

inputs = json.load(sys.stdin)
with open("tickets.log", "a") as f:
    f.write(sys.argv[1] + "\n")
if os.environ.get("HANG_AFTER_ACTING"):
    time.sleep(600)
print(json.dumps({"ticket": "T-" + str(len(open("tickets.log").read().splitlines())), "service": inputs["service"]}))
'''

OPS_SERVER = r'''"""A user's MCP server for tests/test_conductor_user_tools.py (the SDK's MCPServer over stdio): a
paging tool with side effects (each page a line in pages.log) and a read-only owner lookup."""
from pathlib import Path
from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

server = MCPServer("ops")


@server.tool(annotations=ToolAnnotations(read_only_hint=False, idempotent_hint=False))
def page_oncall(service: str, message: str) -> dict:
    """Page the on-call engineer."""
    with open("pages.log", "a") as f:
        f.write(f"{service}: {message}\n")
    return {"paged": True, "service": service}


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def owner(service: str) -> dict:
    """Who owns a service."""
    return {"owner": "team-" + service}


if __name__ == "__main__":
    import sys

    if sys.argv[1:] == ["http"]:  # streamable HTTP on a free loopback port, printed first
        import socket

        import uvicorn

        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        sock.listen(64)  # listening before the port is told: a client may connect before uvicorn starts
        print(sock.getsockname()[1], flush=True)
        config = uvicorn.Config(server.streamable_http_app(), log_level="warning")
        uvicorn.Server(config).run(sockets=[sock])
    else:
        server.run()
'''

MANIFEST = f'''
[[tool]]
name = "acme.latency_cached"          # ranks first (cheaper), fails its postcondition
impl = "acme_metrics:latency_cached"
satisfies = ["latency"]
inputs = ["service"]
postconditions = ["has(p99_ms)"]
reliability = "high"
cost = "tiny"
latency_ms = 1

[[tool]]
name = "acme.latency"
impl = "acme_metrics:latency"
satisfies = ["latency"]
inputs = ["service"]
postconditions = ["has(p99_ms)"]
reliability = "high"
cost = "low"
latency_ms = 5
deterministic = false
verify = "acme.latency_ok"

[[tool]]
name = "acme.latency_ok"
impl = "acme_metrics:latency_ok"
satisfies = ["latency_check"]
inputs = ["service", "p99_ms"]
reliability = "high"
cost = "tiny"
latency_ms = 1

[[tool]]
name = "ticket"
command = ["{sys.executable}", "ticket.py", "{{service}}"]
satisfies = ["open_ticket"]
inputs = ["service"]
postconditions = ["has(ticket)"]
side_effects = "once"
reliability = "high"
cost = "low"
latency_ms = 50
timeout_s = 120

[[tool]]
name = "ops"
mcp = {{ command = ["{sys.executable}", "ops_server.py"], timeout_s = 120 }}
reliability = "high"
cost = "low"
latency_ms = 100

[tool.each.page_oncall]
satisfies = ["page"]
'''


def _folder(tmp_path: Path) -> Path:
    for name, text in (("acme_metrics.py", METRICS), ("ticket.py", TICKET), ("ops_server.py", OPS_SERVER),
                       ("tools.toml", MANIFEST)):
        (tmp_path / name).write_text(text, encoding="utf-8")
    return tmp_path


def _cda(args: list[str], cwd: Path) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    here = os.getcwd()
    os.chdir(cwd)
    try:
        code = main(args, out, err)
    finally:
        os.chdir(here)
    return code, out.getvalue(), err.getvalue()


def _lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def test_three_kinds_of_user_tool_answer_one_request_and_no_side_effect_is_repeated(tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    code, out, err = _cda(["conduct", "latency api; open ticket api; page api the db is down", "--db", "ir.sqlite",
                           "--registry", "tools.toml", "--json"], folder)
    assert code == 0, out + err
    trace = json.loads(out)
    assert trace["status"] == "answered"
    runs = [(r["tool"], r["status"]) for r in trace["tool_runs"]]
    assert runs == [("acme.latency_cached", "postcondition_failed"), ("acme.latency", "ok"), ("ticket", "ok"),
                    ("ops.page_oncall", "ok")]
    assert "has(p99_ms)" in trace["tool_runs"][0]["detail"]
    kinds = [(v["kind"], v["ok"]) for v in trace["verifications"]]
    assert kinds == [("verifier", True), ("recorded", True), ("recorded", True)]
    # each side effect happened once: the live metric was read once (not re-run to verify it),
    # one ticket opened, one page sent
    assert _lines(folder / "metric_calls.txt") == ["1"]
    assert _lines(folder / "tickets.log") == ["api"]
    assert _lines(folder / "pages.log") == ["api: the db is down"]
    assert "page [ops.page_oncall]" in trace["answer"] and '"paged": true' in trace["answer"]
    # the user's folder holds what the user put there: no byte code written beside their tools
    assert not list(folder.rglob("__pycache__")), sorted(map(str, folder.rglob("__pycache__")))


def test_a_live_tool_whose_check_fails_is_uncertain_without_being_run_again(tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    (folder / "acme_metrics.py").write_text(METRICS.replace("p99_ms > 0", "p99_ms > 1000"), encoding="utf-8")
    code, out, _ = _cda(["conduct", "latency web", "--db", "ir.sqlite", "--registry", "tools.toml"], folder)
    assert code == 1 and "UNCERTAIN (latency)" in out and "acme.latency_ok says: p99 101 ms" in out
    assert _lines(folder / "metric_calls.txt") == ["1"]


_KILLED = '''
import sys
from pathlib import Path
from cda.conductor.conduct import Conductor
from cda.conductor.irdb import IRDatabase
from cda.conductor.registry import load_registry
from cda.conductor.tooling import ToolContext
from cda.operations.conductor_tools import cda_toolbox

folder = Path(sys.argv[1])
with load_registry(folder / "tools.toml", cda_toolbox()) as registry, IRDatabase(folder / "ir.sqlite") as db:
    print(Conductor(db, registry, context=ToolContext(folder)).handle("open ticket db").answer)
'''


@pytest.mark.slow
def test_a_once_tool_runs_once_across_a_kill_between_intent_and_result(tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    script = folder / "conduct.py"
    script.write_text(_KILLED, encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HANG_AFTER_ACTING": "1"}
    proc = subprocess.Popen([sys.executable, str(script), str(folder)], env=env, cwd=folder,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not _lines(folder / "tickets.log"):
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)  # the conductor and the program it started: intent recorded, no result
    proc.communicate()
    assert _lines(folder / "tickets.log") == ["db"]
    env.pop("HANG_AFTER_ACTING")
    again = subprocess.run([sys.executable, str(script), str(folder)], env=env, cwd=folder, capture_output=True,
                           text=True, timeout=120)
    assert again.returncode == 0, again.stderr
    assert "CLARIFY: ticket (side_effects once) was stopped during run 1" in again.stdout
    assert _lines(folder / "tickets.log") == ["db"]  # not called a second time
    with IRDatabase(folder / "ir.sqlite") as db:
        clarify = next(o for o in db.obligations(1) if o.type == "clarify")
    code, out, err = _cda(["conduct", "--answer", str(clarify.id), '{"ticket": "T-1", "service": "db"}',
                           "--db", "ir.sqlite", "--registry", "tools.toml", "--json"], folder)
    assert code == 0, out + err
    trace = json.loads(out)
    assert [(r["tool"], r["status"]) for r in trace["tool_runs"]] == [("ticket", "interrupted"), ("user", "ok")]
    assert "open_ticket [user]" in trace["answer"]
    assert _lines(folder / "tickets.log") == ["db"]


def test_a_clarify_is_answered_in_a_second_call(tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    code, out, _ = _cda(["conduct", "page api", "--db", "ir.sqlite", "--registry", "tools.toml", "--json"], folder)
    trace = json.loads(out)
    assert code == 1 and trace["status"] == "unanswered"
    clarify = next(o for o in trace["obligations"] if o["type"] == "clarify")
    assert clarify["inputs"]["missing"] == ["message"]
    code, out, err = _cda(["conduct", "--answer", str(clarify["id"]), " ", "--db", "ir.sqlite", "--registry",
                           "tools.toml"], folder)
    assert code == 2 and "an empty answer" in err
    code, out, err = _cda(["conduct", "--answer", str(clarify["id"]), "the db is down", "--db", "ir.sqlite",
                           "--registry", "tools.toml"], folder)
    assert code == 0, out + err
    assert "answered:" in out and "page [ops.page_oncall]" in out
    assert _lines(folder / "pages.log") == ["api: the db is down"]
    code, out, err = _cda(["conduct", "--answer", str(clarify["id"]), "again", "--db", "ir.sqlite",
                           "--registry", "tools.toml"], folder)
    assert code == 2 and f"obligation {clarify['id']} was answered already" in err
    code, out, err = _cda(["conduct", "--answer", "1", "x", "--db", "ir.sqlite", "--registry", "tools.toml"], folder)
    assert code == 2 and "only a question is answered" in err


def test_the_llm_translator_names_a_users_tool_and_falls_back_to_rules(tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    prompts: list[str] = []
    replies = iter([
        "not json at all",
        json.dumps({"obligations": [{"type": "open_ticket", "inputs": {"service": "auth"}}]}),
    ])

    def fake(system: str, user: str) -> str:
        prompts.append(system)
        return next(replies)

    with load_registry(folder / "tools.toml", cda_toolbox()) as registry, IRDatabase(":memory:") as db:
        translator = LLMTranslatorIn(fake, registry.obligation_types())
        trace = Conductor(db, registry, translator, ToolContext(folder)).handle("the auth service needs a ticket")
        assert trace.status == "answered" and trace.tool_runs[-1].tool == "ticket"
        assert "- open_ticket {service}" in prompts[0] and "- page {service, message}" in prompts[0]
        assert '"obligations"' in prompts[0]  # the document's schema
        receipt = next(e for e in trace.events if e.kind == "translated").body["receipt"]
        assert receipt["translator"] == "llm" and "not JSON" in receipt["attempts"][0]["problem"]

        bad = iter([json.dumps({"obligations": [{"type": "launch_rocket"}]}), "[]"])
        fallback = LLMTranslatorIn(lambda s, u: next(bad), registry.obligation_types())
        trace = Conductor(db, registry, fallback, ToolContext(folder)).handle("open ticket cache")
        receipt = next(e for e in trace.events if e.kind == "translated").body["receipt"]
        assert receipt["translator"].startswith("rules") and len(receipt["attempts"]) == 2
        assert "launch_rocket are not in the registry" in receipt["attempts"][0]["problem"]
        # the rules' reading is acted on, under the failure that says the model did not read it
        assert [o.type for o in trace.obligations] == ["translation_failed", "open_ticket"]
        assert trace.status == "translation_failed"
    assert _lines(folder / "tickets.log") == ["auth", "cache"]


def test_the_rule_translator_reads_real_phrasings_and_says_what_it_skipped(tmp_path: Path) -> None:
    with IRDatabase(":memory:") as db:
        c = Conductor(db, context=ToolContext(ROOT))
        trace = c.handle("please solve the problem in examples/service_outage.cda and compute 2*3")
    assert [o.type for o in trace.obligations] == ["solve", "compute"]
    assert trace.status == "answered" and "(words not read: please)" in trace.answer
    # an exact tie between explanations is said as one
    assert "best explanations, tied at cost 1: {down(api)}; {down(auth)}" in trace.answer


def test_a_fact_belongs_to_its_request_and_can_be_retracted(tmp_path: Path) -> None:
    ken = ROOT / "examples" / "action" / "ken_services.json"
    code, out, _ = _cda(["conduct", "given not depends(api, auth); look up api", "--db", "ir.sqlite", "--ken",
                         str(ken), "--json"], tmp_path)
    first = json.loads(out)
    assert code == 1 and first["status"] == "uncertain"
    code, out, err = _cda(["conduct", "look up api", "--db", "ir.sqlite", "--ken", str(ken)], tmp_path)
    assert code == 0, out + err  # the first request's fact does not poison this one
    clarify = next(o for o in first["obligations"] if o["type"] == "clarify")
    user_fact = next(a for a in first["assertions"] if a["key"] == "fact" and a["obligation_id"] is None)
    code, out, err = _cda(["conduct", "--answer", str(clarify["id"]), "--retract", str(user_fact["id"]), "--db",
                           "ir.sqlite", "--ken", str(ken), "--json"], tmp_path)
    assert code == 0, out + err
    trace = json.loads(out)
    assert trace["status"] == "answered" and [v["ok"] for v in trace["verifications"]] == [True]
    assert any(e["kind"] == "fact_retracted" for e in trace["events"])
    code, out, err = _cda(["conduct", "--answer", str(clarify["id"]), "--retract", str(user_fact["id"]), "--db",
                           "ir.sqlite"], tmp_path)
    assert code == 2


def test_user_tools_are_refused_where_code_may_not_run(tmp_path: Path) -> None:
    from cda.operations import Door, Principal, Refused, invoke
    from cda.operations.principals import local_user

    folder = _folder(tmp_path)
    env = type("Env", (), {"conductor_db": folder / "ir.sqlite"})()
    no_code = local_user((folder,), code=False, approves=False)
    with pytest.raises(Refused) as refused:  # by the gate, before the registry is read
        invoke("conduct.request", {"utterance": "open ticket api", "registry": "tools.toml"}, principal=no_code,
               door=Door.TOOLBUS, env=env, base_dir=folder)
    assert refused.value.need == "code"
    trace = invoke("conduct.request", {"utterance": "compute 1 + 2"}, principal=no_code, door=Door.TOOLBUS, env=env,
                   base_dir=folder)  # the shipped tools need no code of the caller's
    assert trace.status == "answered"  # type: ignore[attr-defined]
    assert not (folder / "tickets.log").exists()
    with pytest.raises(Refused):
        invoke("conduct.request", {"utterance": "compute 1", "registry": "tools.toml"},
               principal=Principal("p", "partner"), door=Door.TOOLBUS, env=env, base_dir=folder)


@pytest.mark.parametrize("text, message", [
    ('impl = "nowhere_module:f"', "the module does not import"),
    ('impl = "acme_metrics:nothing"', "has no function 'nothing'"),
    ('command = ["prog", "{nope}"]', "{nope} is not one of the tool's inputs"),
    ('command = ["prog"]\nimpl = "a:b"', "a tool is one of impl, command or mcp"),
    ('verify = "ticket"', "has side effects (once)"),
    ('verify = "nothing.here"', "verify names no tool of the registry"),
    ('command = ["prog"]\ntimeout_s = 0', "timeout_s must be a whole number from 1 to 3600, not 0"),
    ('command = ["prog"]\ntimeout_s = nan', "timeout_s must be a whole number from 1 to 3600, not nan"),
    ('side_effects = "twice"', "side_effects: Input should be 'none', 'idempotent' or 'once'"),
    ('mcp = { command = ["x"], url = "http://127.0.0.1:1/mcp" }', "write either command = [...] or url"),
    ('mcp = { url = "http://127.0.0.1:1/mcp", env = { TOKEN = "s3cret" } }', "env is for a server CDA starts"),
    ('mcp = { command = ["x"], env = { "BAD-NAME" = "s3cret" } }', "String should match pattern"),
    ('mcp = { command = ["x"], env = { TOKEN = 7 } }', "mcp.env.TOKEN: Input should be a valid string"),
    ('mcp = { command = ["x"], env = { TOKEN = "s3cret\\u0000" } }', "TOKEN: the value contains a NUL character"),
    ('mcp = { command = ["x"], env = { TOKEN = "s3cret' + "x" * 40_000 + '" } }', "TOKEN: the value is 40006 characters"),
])
def test_user_tool_mistakes_are_named_at_load_time(tmp_path: Path, text: str, message: str) -> None:
    folder = _folder(tmp_path)
    without_server = MANIFEST.split('[[tool]]\nname = "ops"')[0]  # no MCP server to start for each case
    (folder / "bad.toml").write_text(without_server + f'''
[[tool]]
name = "bad"
satisfies = ["latency"]
inputs = ["service"]
reliability = "low"
cost = "high"
latency_ms = 1
{text if "impl" in text or "command" in text else 'impl = "acme_metrics:latency"' + chr(10) + text}
''', encoding="utf-8")
    with pytest.raises(ConductorError) as exc:
        load_registry(folder / "bad.toml", cda_toolbox()).close()
    assert message in str(exc.value)
    assert "s3cret" not in str(exc.value)  # an env value is never shown, even in the error about it


ENV_SERVER = r'''"""A user's MCP server that pages with a token from its environment (tests/test_conductor_user_tools.py)."""
import os
from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

server = MCPServer("pager")


@server.tool(annotations=ToolAnnotations(read_only_hint=False, idempotent_hint=False))
def page_oncall(service: str, message: str) -> dict:
    """Page the on-call engineer, authenticated by PAGER_TOKEN."""
    token = os.environ.get("PAGER_TOKEN")
    with open("pages.log", "a") as f:  # what the paging service received: the user's file, not CDA's
        f.write(f"{service}: {message} token={token} region={os.environ.get('PAGER_REGION')} "
                f"leaked={os.environ.get('CDA_ONLY_VARIABLE')}\n")
    return {"paged": token is not None, "service": service}


if __name__ == "__main__":
    server.run()
'''


def test_an_mcp_server_over_stdio_gets_its_env_and_the_values_are_written_nowhere(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``env`` in a stdio MCP server's manifest reaches the program (and only what it names, over
    the SDK's few defaults: CDA's own environment does not); its values appear in no output,
    trace, database or receipt of CDA's, its names may."""
    folder = tmp_path
    secret = "pg-tok-9f8e7d6c5b4a"
    monkeypatch.setenv("CDA_ONLY_VARIABLE", "not for the user's server")
    (folder / "pager.py").write_text(ENV_SERVER, encoding="utf-8")
    (folder / "tools.toml").write_text(f'''
[[tool]]
name = "pager"
mcp = {{ command = ["{sys.executable}", "pager.py"], env = {{ PAGER_TOKEN = "{secret}", PAGER_REGION = "eu-1" }}, timeout_s = 120 }}
reliability = "high"
cost = "low"
latency_ms = 100

[tool.each.page_oncall]
satisfies = ["page"]
''', encoding="utf-8")
    code, out, err = _cda(["conduct", "page api the db is down", "--db", "ir.sqlite", "--registry", "tools.toml",
                           "--json"], folder)
    assert code == 0, out + err
    trace = json.loads(out)
    assert [(r["tool"], r["status"]) for r in trace["tool_runs"]] == [("pager.page_oncall", "ok")]
    assert _lines(folder / "pages.log") == [f"api: the db is down token={secret} region=eu-1 leaked=None"]
    assert secret not in out + err
    written = [p for p in folder.rglob("*") if p.is_file() and p.name not in {"tools.toml", "pages.log"}]
    assert any(p.name.startswith("ir.sqlite") for p in written)
    for path in written:  # the IR database (and its WAL), receipts, anything else CDA left here
        assert secret.encode() not in path.read_bytes(), path
    from cda.contracts.conductor import ToolSpec

    given = ToolSpec.model_validate({"name": "pager", "mcp": {"command": ["x"], "env": {"PAGER_TOKEN": secret}},
                                     "reliability": "high", "cost": "low", "latency_ms": 1})
    assert given.mcp is not None and given.mcp.env_names() == ["PAGER_TOKEN"]
    assert secret not in given.model_dump_json() + repr(given) + str(given.model_dump())


def test_the_conductor_through_mcp_request_answer_trace(tmp_path: Path) -> None:
    import anyio
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    params = StdioServerParameters(command=sys.executable, args=["-m", "cda", "mcp", "--out", str(tmp_path / "out")],
                                   env={**os.environ, "PYTHONPATH": str(ROOT)}, cwd=str(ROOT))

    async def body() -> list[Any]:
        async with Client(params, read_timeout_seconds=120) as client:
            names = {t.name for t in (await client.list_tools()).tools}
            asked = await client.call_tool("conduct_request", {"utterance": "compute 6 * 7; frobnicate"})
            data = asked.structured_content
            clarify = next(o for o in data["obligations"] if o["type"] == "clarify")
            answered = await client.call_tool("conduct_answer", {"obligation": clarify["id"], "text": "compute 1/3"})
            shown = await client.call_tool("conduct_trace", {"request": data["request_id"]})
            return [names, data, answered.structured_content, shown.structured_content]

    names, asked, answered, shown = anyio.run(body)
    assert {"conduct_request", "conduct_answer", "conduct_trace"} <= names
    assert asked["status"] == "unanswered"
    assert answered["status"] == "answered" and "1/3 = 1/3" in answered["answer"]
    assert shown == answered


def test_the_conductor_over_the_toolbus_keeps_each_partners_requests_their_own(tmp_path: Path) -> None:
    from tests.service_harness import call, serving, toolbus, write_tokens

    tokens = write_tokens(tmp_path / "tokens.json", {"alice": ("tok-alice", "partner"), "bob": ("tok-bob", "partner")})
    with serving(tmp_path / "receipts.sqlite", "--auth", str(tokens)) as server:
        with toolbus(server, "tok-alice") as alice:
            asked = call(alice, "conduct.request", {"utterance": "compute 2 ** 10; what is the answer"})["result"]
            clarify = next(o for o in asked["obligations"] if o["type"] == "clarify")
            with toolbus(server, "tok-bob") as bob:
                theirs = call(bob, "conduct.trace", {"request": asked["request_id"]})["error"]
                answer = call(bob, "conduct.answer", {"obligation": clarify["id"], "text": "compute 1"})["error"]
                again = call(bob, "conduct.request", {"utterance": "compute 2 ** 10; what is the answer"})["result"]
            answered = call(alice, "conduct.answer", {"obligation": clarify["id"], "text": "6 * 7"})["result"]
            shown = call(alice, "conduct.trace", {"request": asked["request_id"]})["result"]
            registry = call(alice, "conduct.request", {"utterance": "compute 1", "registry": str(tmp_path / "t.toml")})
            called = call(alice, "conduct.request", {"utterance": "compute abs(1)"})["result"]
            alice.send('{"id": 99, "method": "conduct.trace", "params": {"request": ' + "1" * 5000 + "}}")
            digits = json.loads(alice.recv(timeout=30))["error"]
    assert asked["status"] == "unanswered" and "1024" in asked["answer"]
    assert theirs["code"] == "not_found" and answer["code"] == "not_found" and "no obligation" in answer["message"]
    assert "sqlite" not in answer["message"]  # the server's file is not the partner's business (audit 14)
    assert "a function call" in called["answer"] and "Call" not in called["answer"]  # words, not Python's node names
    assert digits["code"] == "invalid_frame" and "longer than 4300 digits" in digits["message"]
    assert "sys." not in digits["message"]
    assert again["request_id"] != asked["request_id"]  # bob's same words are bob's own request
    assert answered["status"] == "answered" and "6 * 7 = 42" in answered["answer"] and shown == answered
    assert registry["error"]["code"] == "forbidden"  # a partner names no registry (no code, no files)


def test_an_mcp_server_over_streamable_http_and_an_obligations_document(tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    proc = subprocess.Popen([sys.executable, "ops_server.py", "http"], cwd=folder, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        port = int(proc.stdout.readline())  # type: ignore[union-attr]
        (folder / "http.toml").write_text(f'''
[[tool]]
name = "remote"
mcp = {{ url = "http://127.0.0.1:{port}/mcp" }}
reliability = "medium"
cost = "low"
latency_ms = 20
side_effects = "once"

[tool.each.owner]
side_effects = "none"
deterministic = true
''', encoding="utf-8")
        (folder / "request.json").write_text(json.dumps({"obligations": [
            {"type": "owner", "inputs": {"service": "db"}},
            {"type": "page_oncall", "inputs": {"service": "db", "message": "disk full"}},
            {"type": "page_oncall", "inputs": {"service": 7, "message": "a number is not a service"}},
        ]}), encoding="utf-8")
        code, out, err = _cda(["conduct", "--obligations", "request.json", "--db", "ir.sqlite", "--registry",
                               "http.toml", "--json"], folder)
    finally:
        proc.terminate()
        proc.communicate(timeout=60)
    assert code == 1 and out, err
    trace = json.loads(out)
    runs = {(r["obligation_id"], r["tool"], r["status"]) for r in trace["tool_runs"]}
    assert runs == {(1, "remote.owner", "ok"), (2, "remote.page_oncall", "ok"), (3, "remote.page_oncall", "error")}
    bad = next(r for r in trace["tool_runs"] if r["obligation_id"] == 3)
    assert "service: 7 is not of type 'string' (the tool's input schema)" in bad["detail"]
    assert [(v["obligation_id"], v["kind"], v["ok"]) for v in trace["verifications"]] == [
        (1, "rules", True), (2, "recorded", True)]  # the read-only owner re-asked; the page never
    assert _lines(folder / "pages.log") == ["db: disk full"]
    assert trace["utterance"] == "the obligations in request.json"
    code, out, err = _cda(["conduct", "--obligations", "tools.toml", "--db", "ir.sqlite"], folder)
    assert code == 2 and "not an obligations document" in err


def _shown(text: str) -> re.Pattern[str]:
    """A console block's output as a pattern: ``…`` stands for any text (a live value, a long line)."""
    lines = []
    for line in text.rstrip("\n").split("\n"):
        lines.append(".*?".join(re.escape(piece) for piece in line.rstrip().split("…")) + r"[ \t]*")
    return re.compile("\n".join(lines) + "\n?", re.S)


def test_the_walk_from_an_empty_folder_to_three_own_tools_runs_as_written(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """docs/conductor.md, "Your own tools" to "At every door": its files written, its commands run
    in order, each printing what the page shows."""
    page = (ROOT / "docs" / "conductor.md").read_text(encoding="utf-8")
    section = page[page.index("## Your own tools"):page.index("## At every door")]
    fence = re.compile(r"^```(?P<info>[^\n]*)\n(?P<body>.*?)^```$", re.M | re.S)
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    monkeypatch.setenv("CDA_KEY_DIR", str(tmp_path / "keys"))
    ran = 0
    for block in fence.finditer(section):
        info = block["info"].split()
        if len(info) > 1 and info[1].startswith("file="):
            target = tmp_path / info[1].removeprefix("file=")
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(block["body"], encoding="utf-8")
            continue
        assert info == ["console"], info
        for step in re.split(r"^\$ ", block["body"], flags=re.M)[1:]:
            command, _, shown = step.partition("\n")
            while command.endswith("\\"):
                more, _, shown = shown.partition("\n")
                command = command[:-1] + " " + more.strip()
            words = shlex.split(command)
            if words[0] == "cda":
                code, out, err = _cda(words[1:], tmp_path)
                printed = out + err
            else:
                done = subprocess.run(words, cwd=tmp_path, capture_output=True, text=True, timeout=60)
                printed = done.stdout + done.stderr
            assert _shown(shown).fullmatch(printed), f"$ {command}\n--- the page\n{shown}\n--- printed\n{printed}"
            ran += 1
    assert ran == 5
