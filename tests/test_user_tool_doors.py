"""A user's own conductor tools where an agent chooses the inputs (docs/conductor.md, "Inputs in a
command", "Your own tools"), through ``cda conduct`` in a child process: an input with shell syntax,
quotes, spaces or a leading ``-`` reaches a ``command`` tool as one argument and never as code or an
option; a registry that would let an input choose the program or be code is refused at load; an
``impl = "module:function"`` tool that never returns is stopped at its ``timeout_s`` and leaves no
process behind."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from cda.conductor.registry import load_registry
from cda.conductor.tooling import ConductorError
from cda.operations.conductor_tools import cda_toolbox
from tests.audit_helpers import one_tool_registry as _registry
from tests.timing import process_alive, wait_until

ECHO = r'''import json, sys
print(json.dumps({"argv": sys.argv[1:], "stdin": json.load(sys.stdin)}))
'''


NASTY = ["a b", "x; touch pwned", "$(touch pwned)", "`touch pwned`", "'\"", "*", "> pwned", "a\nb", "{x}", "{{"]


def _conduct(folder: Path, obligations: list[dict[str, object]], timeout: float = 600) -> tuple[int, dict, str]:
    (folder / "o.json").write_text(json.dumps({"obligations": obligations}))
    done = subprocess.run([sys.executable, "-m", "cda", "conduct", "--obligations", str(folder / "o.json"),
                           "--db", str(folder / "ir.sqlite"), "--registry", str(folder / "tools.toml"), "--json"],
                          capture_output=True, text=True, cwd=folder, timeout=timeout)
    return done.returncode, json.loads(done.stdout) if done.stdout else {}, done.stderr


def _runs(trace: dict) -> list[dict]:
    return sorted(trace["tool_runs"], key=lambda run: (run["obligation_id"], run["id"]))


def _outputs(trace: dict) -> list[dict]:
    return [run["outputs"] for run in _runs(trace) if run["status"] == "ok"]


def test_inputs_with_shell_syntax_reach_the_program_as_one_argument_each(tmp_path: Path) -> None:
    (tmp_path / "echo.py").write_text(ECHO)
    _registry(tmp_path, f'command = [{json.dumps(sys.executable)}, "echo.py", "--", "{{x}}", "pre-{{x}}-post", "{{{{x}}}}"]')
    code, trace, err = _conduct(tmp_path, [{"type": "t", "inputs": {"x": v}} for v in NASTY + ["-rf", "--help"]])
    assert code == 0, (err, trace)
    for value, answer in zip(NASTY + ["-rf", "--help"], _outputs(trace), strict=True):
        assert answer["argv"] == ["--", value, f"pre-{value}-post", "{x}"]
        assert answer["stdin"] == {"x": value}
    assert not (tmp_path / "pwned").exists()


def test_an_input_that_would_be_an_option_is_refused_without_running_the_program(tmp_path: Path) -> None:
    (tmp_path / "echo.py").write_text(ECHO + 'open("ran.log", "a").write(repr(sys.argv[1:]) + "\\n")\n')
    _registry(tmp_path, f'command = [{json.dumps(sys.executable)}, "echo.py", "{{x}}", "--flag={{x}}"]')
    code, trace, err = _conduct(tmp_path, [{"type": "t", "inputs": {"x": "--output=/etc/passwd"}},
                                           {"type": "t", "inputs": {"x": "fine"}}])
    assert code == 1, err
    first = _runs(trace)[0]
    assert first["status"] == "error"
    assert "input x = '--output=/etc/passwd' begins with '-' and would be read as an option" in first["detail"]
    ran = (tmp_path / "ran.log").read_text().splitlines()
    assert ran and all(line == "['fine', '--flag=fine']" for line in ran)  # only the second obligation ran it


@pytest.mark.parametrize(("command", "said"), [
    (["{x}", "a"], "the program is the registry's choice"),
    (["sh", "-c", "echo {x}"], "is code for sh"),
    (["bash", "-ec", "echo {x}"], "is code for bash"),
    (["/usr/bin/python3.12", "-c", "print('{x}')"], "is code for python3.12"),
    (["perl", "-e", "print '{x}'"], "is code for perl"),
    (["prog", "{y}"], "{y} is not one of the tool's inputs"),
    (["prog", "a{b"], "a lone '{'"),
    (["prog", "a}b"], "a lone '}'"),
])
def test_a_command_that_would_let_an_input_be_code_or_the_program_is_refused_at_load(
        tmp_path: Path, command: list[str], said: str) -> None:
    _registry(tmp_path, f"command = {json.dumps(command)}")
    with pytest.raises(ConductorError, match="tool 1") as raised:
        load_registry(tmp_path / "tools.toml", cda_toolbox())
    assert said in str(raised.value)


def test_a_shell_reads_an_input_as_a_positional_argument_and_braces_are_written_doubled(tmp_path: Path) -> None:
    # the documented way round: the code is fixed, the input is "$1"; {{ }} is a brace (python -c "print({'a': 1})")
    _registry(tmp_path, 'command = ["sh", "-c", "printf \'{{\\"argv\\": [\\"%s\\"]}}\' \\"$1\\"", "sh", "{x}"]')
    code, trace, err = _conduct(tmp_path, [{"type": "t", "inputs": {"x": "$(touch pwned);x"}}])
    assert code == 0, (err, trace)
    assert _outputs(trace)[0] == {"argv": ["$(touch pwned);x"]}
    assert not (tmp_path / "pwned").exists()


HANG = '''import os, time


def hang(x: str) -> dict:
    with open("child.pid", "w") as f:
        f.write(str(os.getpid()))
    while True:
        time.sleep(1)


def answer(x: str) -> dict:
    print('{"outputs": {"forged": true}}')
    return {"x": x}


def garble(x: str) -> dict:  # writes a JSON list where the answer goes, then leaves without one
    for fd in range(3, 16):
        try:
            os.write(fd, b"[1]")
        except OSError:
            pass
    os._exit(0)
'''


def test_a_python_tool_that_never_returns_is_stopped_at_its_timeout(tmp_path: Path) -> None:
    (tmp_path / "slow.py").write_text(HANG)
    _registry(tmp_path, 'impl = "slow:hang"', timeout=2)
    code, trace, err = _conduct(tmp_path, [{"type": "t", "inputs": {"x": "a"}}], timeout=300)
    assert code == 1, err  # it returned at all: the old conductor waited for ever
    run = _runs(trace)[0]
    assert run["status"] == "error" and run["detail"] == "slow:hang: stopped after 2 s (timeout_s)"
    child = int((tmp_path / "child.pid").read_text())
    # SIGKILL is delivered at once; a loaded machine may take a moment to reap
    wait_until(lambda: not process_alive(child), "the function's process to end with its timeout", timeout=60)


def test_a_python_tool_that_writes_something_else_than_an_answer_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "slow.py").write_text(HANG)
    _registry(tmp_path, 'impl = "slow:garble"')
    code, trace, err = _conduct(tmp_path, [{"type": "t", "inputs": {"x": "a"}}])
    assert code == 1 and "Traceback" not in err, err
    run = _runs(trace)[0]
    assert run["status"] == "error" and run["detail"].startswith("slow:garble: its process ended with status 0 and no answer")


def test_a_python_tools_prints_cannot_forge_its_answer(tmp_path: Path) -> None:
    (tmp_path / "slow.py").write_text(HANG)
    _registry(tmp_path, 'impl = "slow:answer"')
    code, trace, err = _conduct(tmp_path, [{"type": "t", "inputs": {"x": "a b"}}])
    assert code == 0, (err, trace)
    assert _outputs(trace)[0] == {"x": "a b"}
