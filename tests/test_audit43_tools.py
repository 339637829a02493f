"""Wave G's conductor tools audited as an attacker (docs/conductor.md, "Inputs in a command", "Your
own tools"): a registry whose code position hides behind a bundled flag, an attached code
argument, a wrapper program (``env``, ``timeout``, ``nice``) or an option between ``sh -c`` and its
code is refused at load like ``sh -c {x}``; a tool that leaves a process in a session of its own
holding its output open does not hold the conductor past its ``timeout_s``, and that process does
not outlive the call."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from cda.conductor.registry import load_registry
from cda.conductor.tooling import ConductorError
from cda.operations.conductor_tools import cda_toolbox
from tests.audit_helpers import one_tool_registry as _registry
from tests.timing import process_alive, wait_until


@pytest.mark.parametrize(("command", "said"), [
    (["python3", "-Ic", "{x}"], "is code for python3"),  # -I and -c in one bundle
    (["python3", "-c{x}"], "is code for python3"),  # the code attached to its flag
    (["pypy3", "-c", "{x}"], "is code for pypy3"),
    (["perl", "-ne", "print '{x}'"], "is code for perl"),
    (["perl", "-lE", "say '{x}'"], "is code for perl"),
    (["ruby", "-ne", "{x}"], "is code for ruby"),
    (["node", "-p", "{x}"], "is code for node"),
    (["node", "--eval", "{x}"], "is code for node"),
    (["node", "--eval={x}"], "is code for node"),
    (["sh", "-c", "-e", "echo {x}"], "is code for sh"),  # the code is the first operand after the options
    (["bash", "-c", "--", "{x}"], "is code for bash"),
    (["env", "sh", "-c", "{x}"], "is code for sh"),
    (["/usr/bin/env", "-i", "A=1", "python3", "-c", "{x}"], "is code for python3"),
    (["timeout", "5", "bash", "-ec", "{x}"], "is code for bash"),
    (["nice", "-n", "5", "perl", "-e", "{x}"], "is code for perl"),
    (["env", "{x}", "a"], "the program is the registry's choice"),
    (["nohup", "{x}"], "the program is the registry's choice"),
    (["sudo", "-u", "svc", "{x}"], "the program is the registry's choice"),
    (["ssh", "-p", "22", "host", "cat", "{x}"], "is code for ssh"),  # the remote shell reads the joined words
    (["watch", "-n", "5", "ls", "{x}"], "is code for watch"),  # run through sh -c
    (["ssh", "-o", "{x}", "host", "uptime"], "is code for ssh"),  # -o ProxyCommand=… runs locally
    (["env", "LD_PRELOAD={x}", "prog"], "is code for env"),  # a library of the input's choosing loads first
    (["env", "-i", "BASH_ENV={x}", "bash", "script.sh"], "is code for env"),  # a file bash runs first
    (["env", "NODE_OPTIONS=--require {x}", "node", "tool.js"], "is code for env"),
    (["timeout", "5", "env", "PYTHONSTARTUP={x}", "python3", "-i"], "is code for env"),
])
def test_a_code_or_program_position_is_refused_however_it_is_spelled(
        tmp_path: Path, command: list[str], said: str) -> None:
    with pytest.raises(ConductorError, match="tool 1") as raised:
        load_registry(_registry(tmp_path, f"command = {json.dumps(command)}"), cda_toolbox())
    assert said in str(raised.value)


@pytest.mark.parametrize("command", [
    ["python3", "-u", "tool.py", "{x}"],  # -u takes no code
    ["python3", "-c", "import sys; print(sys.argv)", "{x}"],  # the input is an argument of the code
    ["sh", "-c", 'echo "$1"', "sh", "{x}"],
    ["perl", "-ne", "print", "{x}"],  # the input is the file perl reads
    ["env", "A=1", "python3", "tool.py", "{x}"],
    ["timeout", "5", "prog", "--", "{x}"],
    ["node", "tool.js", "-p", "{x}"],  # after the script: the script's own arguments
    ["sudo", "-u", "svc", "prog", "--", "{x}"],
    ["ssh", "-p", "{x}", "host", "uptime"],  # an option's value
])
def test_an_input_in_an_argument_position_is_accepted(tmp_path: Path, command: list[str]) -> None:
    registry = load_registry(_registry(tmp_path, f"command = {json.dumps(command)}"), cda_toolbox())
    assert registry is not None


ESCAPE = r'''import json, os, sys, time
if os.fork() == 0:  # a child in a session of its own: out of the tool's process group, holding its stdout
    os.setsid()
    with open("escaped.pid", "w") as f:
        f.write(str(os.getpid()))
    time.sleep(600)
    os._exit(0)
while not os.path.exists("escaped.pid"):
    time.sleep(0.01)
print(json.dumps({"x": json.load(sys.stdin)["x"]}))
'''


def test_a_process_that_leaves_its_session_does_not_hold_the_conductor_or_outlive_the_call(tmp_path: Path) -> None:
    (tmp_path / "escape.py").write_text(ESCAPE)
    _registry(tmp_path, f'command = [{json.dumps(sys.executable)}, "escape.py"]', timeout=10)  # room at load
    (tmp_path / "o.json").write_text(json.dumps({"obligations": [{"type": "t", "inputs": {"x": "a"}}]}))
    try:
        done = subprocess.run([sys.executable, "-m", "cda", "conduct", "--obligations", str(tmp_path / "o.json"),
                               "--db", str(tmp_path / "ir.sqlite"), "--registry", str(tmp_path / "tools.toml"),
                               "--json"], capture_output=True, text=True, cwd=tmp_path, timeout=240)
        # the old conductor waited on the escaped process's pipe for ever (the subprocess timeout fired)
        trace = json.loads(done.stdout)
        runs = trace["tool_runs"]
        assert [run["status"] for run in runs] == ["ok"] and runs[0]["outputs"] == {"x": "a"}, (done.stderr, trace)
        escaped = int((tmp_path / "escaped.pid").read_text())
        wait_until(lambda: not process_alive(escaped), "the escaped process to be stopped with its tool", timeout=60)
    finally:
        if (tmp_path / "escaped.pid").exists():
            pid = int((tmp_path / "escaped.pid").read_text())
            if process_alive(pid):
                os.kill(pid, signal.SIGKILL)


def _conduct(folder: Path, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    (folder / "o.json").write_text(json.dumps({"obligations": [{"type": "t", "inputs": {"x": "a"}}]}))
    return subprocess.run([sys.executable, "-m", "cda", "conduct", "--obligations", str(folder / "o.json"),
                           "--db", str(folder / "ir.sqlite"), "--registry", str(folder / "tools.toml"), "--json"],
                          capture_output=True, text=True, cwd=folder, timeout=timeout)


@pytest.mark.parametrize(("module", "said"), [
    ("import sys\nsys.exit(0)\n", "the module does not import: it exited (status 0)"),
    ("import os\nos._exit(7)\n", "the module does not import: it exited (status 7)"),
    ("import os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n", "the module does not import: it exited (signal 9)"),
    ("import time\nwhile True:\n    time.sleep(1)\n", "the module does not import: stopped after 2 s (timeout_s)"),
    ("raise KeyboardInterrupt\n", "the module does not import: KeyboardInterrupt"),
])
def test_a_python_tools_module_that_exits_or_hangs_as_it_imports_is_a_registry_mistake(
        tmp_path: Path, module: str, said: str) -> None:
    # the registry's check imported the module in the conductor's own process: its exit was the
    # conductor's (a silent exit 0 with no answer), its endless loop the conductor's too
    (tmp_path / "bad.py").write_text("def f(x: str) -> dict:\n    return {'x': x}\n\n" + module)
    # a short limit only where the limit is what is tested (the endless loop); the import check's
    # child gets room to start on a loaded machine everywhere else
    _registry(tmp_path, 'impl = "bad:f"', timeout=2 if "stopped after" in said else 60)
    done = _conduct(tmp_path)
    assert done.returncode == 2 and "Traceback" not in done.stderr, (done.returncode, done.stdout, done.stderr)
    assert "tool 1" in done.stderr and f"impl 'bad:f': {said}" in done.stderr, done.stderr


ECHO = r'''import json, sys
print(json.dumps({"argv": sys.argv[1:]}))
'''


def test_a_double_dash_that_ends_a_wrappers_options_does_not_end_the_programs(tmp_path: Path) -> None:
    # "--" here ends env's options; echo.py still reads "-rf" as an option: the value is refused
    (tmp_path / "echo.py").write_text(ECHO)
    _registry(tmp_path, f'command = ["env", "--", {json.dumps(sys.executable)}, "echo.py", "{{x}}"]')
    (tmp_path / "o.json").write_text(json.dumps({"obligations": [{"type": "t", "inputs": {"x": "-rf"}},
                                                                  {"type": "t", "inputs": {"x": "fine"}}]}))
    done = subprocess.run([sys.executable, "-m", "cda", "conduct", "--obligations", str(tmp_path / "o.json"),
                           "--db", str(tmp_path / "ir.sqlite"), "--registry", str(tmp_path / "tools.toml"), "--json"],
                          capture_output=True, text=True, cwd=tmp_path, timeout=240)
    runs = sorted(json.loads(done.stdout)["tool_runs"], key=lambda run: (run["obligation_id"], run["id"]))
    assert runs[0]["status"] == "error", runs  # was: ok, argv ["-rf"]
    assert "input x = '-rf' begins with '-' and would be read as an option" in runs[0]["detail"]
    assert runs[1]["status"] == "ok" and runs[1]["outputs"] == {"argv": ["fine"]}
