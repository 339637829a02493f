"""A user's own tools, named in the registry (docs/conductor.md, "Your own tools"): a Python
function, a program, or every tool of an MCP server.

* ``impl = "package.module:function"``: the function is imported (the registry's folder first on
  the import path, for a module beside it) and called with the tool's inputs as keyword
  arguments, through :func:`pydantic.validate_call`: its annotated parameter types check the
  inputs and its annotated return type the outputs (a pydantic model is returned as its JSON).
* ``command = ["prog", "--service", "{service}"]``: the program runs with each ``{input}``
  replaced by that input's value — one argument each, never through a shell — with the inputs
  also as a JSON object on its standard input, in the registry's folder, stopped after ``timeout_s``.
  Its standard output must be one JSON object (the outputs); a non-zero exit is the tool's error.
* ``mcp = {command = [...], env = {NAME = "value"}}`` or ``mcp = {url = "http://…/mcp"}``: the
  program is started with ``env`` over the few variables the SDK passes on (values never shown,
  :class:`~cda.contracts.conductor.McpServer`), and the server is asked for its
  tools (the official SDK's client, over stdio or streamable HTTP); each becomes a tool named
  ``PREFIX.TOOL``, satisfying the obligation type ``TOOL`` unless the manifest says otherwise,
  its inputs the schema's required properties, its ``side_effects`` read from the tool's
  annotations (read-only: none; idempotent: idempotent; otherwise once) and ``deterministic``
  false unless declared — so an unknown server's tool is never re-run to verify it. Each call's
  arguments are checked against the tool's input schema before they are sent.

Running any of them is running the user's code: it is allowed only for a call that may run code
(:func:`cda.access.may_run_code`, which the gate grants), and an MCP server at a URL other than
loopback is network egress of class ``external``.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cda.conductor.mcp_transport import capped_http, capped_stdio
from cda.conductor.tooling import ConductorError, Outputs, Tool, ToolContext, ToolError, kind_named, kind_of, said
from cda.contracts.conductor import NAME_PATTERN, McpServer, SideEffects, ToolSpec

__all__ = ["command_tool", "mcp_tools", "python_tool"]

MAX_OUTPUT = 10_000_000
"""A program's standard output is read up to this many bytes (more is the tool's error)."""

_ERR_TAIL = 65_536
"""The most bytes of a program's standard error kept (its last lines are the tool's error)."""

def python_tool(target: str, base_dir: Path, where: str, timeout: int = 60) -> Tool:
    """The function ``package.module:function`` as a tool. It is imported now, in a child process
    of its own (a wrong name is a registry mistake, found at load time), and each call runs in one
    (:mod:`cda.conductor.impl_child`, which says why): stopped after ``timeout`` seconds or on
    Ctrl-C/cancel like a ``command`` tool, its inputs and outputs crossing as JSON."""
    from cda.access import may_run_code

    module_name, _, function_name = target.partition(":")
    if not module_name or not function_name.isidentifier():
        raise ConductorError(f"{where}: impl {target!r}: write package.module:function")
    may_run_code()
    child = [sys.executable, str(Path(__file__).with_name("impl_child.py"))]
    _check_in_child(child, target, base_dir, where, timeout)

    def run(inputs: Mapping[str, Any], ctx: ToolContext) -> Outputs:
        may_run_code()
        request = {"path": list(sys.path), "base_dir": str(base_dir), "target": target, "inputs": dict(inputs)}
        try:
            given = json.dumps(request, allow_nan=False).encode()
        except (TypeError, ValueError) as exc:
            raise ToolError(f"{target}: its inputs are not JSON ({exc})") from None
        ran = _run_program(child, given, Path.cwd(), timeout)
        if ran.stopped is not None:
            raise ToolError(f"{target}: {ran.stopped}")
        try:
            reply = json.loads(ran.stdout.decode("utf-8"))
            # the answer is the child's: {"outputs": {...}} or {"error": "..."}; anything else (the
            # user's code writing to the answer's descriptor itself) is no answer
            if not isinstance(reply, dict) or not ("error" in reply or isinstance(reply.get("outputs"), dict)):
                raise ValueError(reply)
        except (UnicodeDecodeError, ValueError):  # (json.JSONDecodeError is a ValueError)
            tail = ran.stderr.decode("utf-8", "replace").strip().splitlines()[-3:]
            raise ToolError(f"{target}: its process ended with status {ran.returncode} and no answer"
                            + (f": {' / '.join(tail)}" if tail else "")) from None
        if "error" in reply:
            raise ToolError(str(reply["error"]))
        return dict(reply["outputs"])

    return Tool(run)


Template = list[tuple[str, bool]]
"""One argument of a ``command``: its pieces, each literal text (False) or an input's name (True)."""


def _template(arg: str, inputs: list[str], where: str) -> Template:
    """``arg`` cut at its placeholders: ``{name}`` is the input ``name``, ``{{`` and ``}}`` are a
    literal brace (as in Python's ``str.format``), any other brace is a registry mistake."""
    pieces: Template = []
    literal, i = "", 0
    while i < len(arg):
        two = arg[i:i + 2]
        if two in ("{{", "}}"):
            literal, i = literal + two[0], i + 2
            continue
        if arg[i] == "}":
            raise ConductorError(f"{where}: command argument {arg!r}: a lone '}}' (write '}}}}' for a brace)")
        if arg[i] == "{":
            end = arg.find("}", i)
            name = arg[i + 1:end] if end > 0 else ""
            if end < 0 or "{" in name:
                raise ConductorError(f"{where}: command argument {arg!r}: a lone '{{' (write '{{{{' for a brace)")
            if name not in inputs:
                raise ConductorError(f"{where}: command argument {arg!r}: {{{name}}} is not one of the tool's inputs "
                                     f"({', '.join(inputs) or 'none'}; write '{{{{' and '}}}}' for a brace)")
            if literal:
                pieces.append((literal, False))
            pieces.append((name, True))
            literal, i = "", end + 1
            continue
        literal, i = literal + arg[i], i + 1
    if literal or not pieces:
        pieces.append((literal, False))
    return pieces


def _check_in_child(child: list[str], target: str, base_dir: Path, where: str, timeout: int) -> None:
    """The registry's check that ``target`` imports and names a function, made in the child a
    call runs in (:func:`cda.conductor.impl_child._check`): importing runs the module's code, and
    a module that exits, loops or kills itself as it imports must not do so in the conductor (a
    ``sys.exit(0)`` there once ended ``cda conduct`` with status 0 and no answer)."""
    request = {"path": list(sys.path), "base_dir": str(base_dir), "target": target, "check": True}
    ran = _run_program(child, json.dumps(request).encode(), Path.cwd(), timeout)
    said_so = f"{where}: impl {target!r}: "
    if ran.stopped is not None:
        raise ConductorError(f"{said_so}the module does not import: {ran.stopped}")
    try:
        reply = json.loads(ran.stdout.decode("utf-8"))
        if not isinstance(reply, dict) or not ("error" in reply or reply.get("outputs") == {}):
            raise ValueError(reply)
    except (UnicodeDecodeError, ValueError):
        status = ran.returncode or 0
        how = f"signal {-status}" if status < 0 else f"status {status}"
        raise ConductorError(f"{said_so}the module does not import: it exited ({how})") from None
    if "error" not in reply:
        return
    raised = [str(name) for name in reply.get("raised") or []]
    if not raised:  # the child's own words (an exit, no such function)
        raise ConductorError(said_so + str(reply["error"]))
    kind = kind_named(raised)
    raise ConductorError(f"{said_so}the module does not import: {kind}: {reply['error']}")


_SHELLS = {"sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "fish"}
"""Programs whose ``-c`` makes their first operand shell code."""

_WRAPPERS: dict[str, tuple[frozenset[str], int]] = {
    "env": (frozenset({"-u", "--unset", "-C", "--chdir"}), 0),
    "nice": (frozenset({"-n", "--adjustment"}), 0),
    "nohup": (frozenset(), 0),
    "setsid": (frozenset(), 0),
    "stdbuf": (frozenset({"-i", "-o", "-e", "--input", "--output", "--error"}), 0),
    "ionice": (frozenset({"-c", "-n", "-p", "-P", "-u", "--class", "--classdata"}), 0),
    "timeout": (frozenset({"-s", "--signal", "-k", "--kill-after"}), 1),
    "chrt": (frozenset(), 1),
    "taskset": (frozenset(), 1),
    "time": (frozenset({"-f", "-o", "--format", "--output"}), 0),
    "busybox": (frozenset(), 0),
    "sudo": (frozenset({"-u", "-g", "-C", "-D", "-h", "-p", "-r", "-t", "-U", "-T"}), 0),
    "doas": (frozenset({"-u", "-C"}), 0),
    "chroot": (frozenset(), 1),
}
"""Programs that run the program named after their own options (and ``operands`` more arguments:
``timeout 5 prog``): the options that take a value as the next argument, and those operands."""

_JOINED: dict[str, frozenset[str]] = {
    "ssh": frozenset({"-b", "-c", "-D", "-E", "-e", "-F", "-I", "-i", "-J", "-L", "-l", "-m", "-O", "-o", "-p",
                      "-Q", "-R", "-S", "-W", "-w"}),
    "watch": frozenset({"-n", "--interval", "-q", "--equexit"}),
}
"""Programs that join the arguments after their options into one line of shell code (``ssh HOST
ARGS…`` on the remote host, ``watch ARGS…`` through ``sh -c``): every one of them is code. The
options that take a value as the next argument."""

_INTERPRETERS: dict[str, tuple[str, str, frozenset[str], bool]] = {
    "python": ("cm", "WX", frozenset(), True),
    "pypy": ("cm", "WX", frozenset(), True),
    "perl": ("eEMm", "I", frozenset(), False),
    "ruby": ("er", "CIE", frozenset(), False),
    "node": ("epr", "", frozenset({"--eval", "--print", "--require", "--import", "--loader",
                                   "--experimental-loader"}), False),
    "php": ("rRBE", "cdz", frozenset(), False),
    "lua": ("el", "", frozenset(), False),
    "Rscript": ("e", "", frozenset(), False),
}
"""Interpreters by name (``python3.12`` is ``python``): the short options whose value (the rest of
the argument, else the next one) is code or a module run as code, the short options whose value is
something else, the long options whose value is code (``--eval CODE``, ``--eval=CODE``), and
whether the first code ends the options (``python -c CODE ARGS…``; perl takes several ``-e``)."""

_OPERAND_CODE: dict[str, tuple[str, str, frozenset[str]]] = {
    "awk": ("e", "vF", frozenset({"--source"})), "gawk": ("e", "vF", frozenset({"--source"})),
    "mawk": ("", "vF", frozenset()), "nawk": ("", "vF", frozenset()),
    "sed": ("e", "l", frozenset({"--expression"})),
}
"""Programs whose first operand is their program text unless an option gave it (``awk 'CODE'
file``, ``sed -e CODE``; a ``-f FILE`` names it instead): code options, valued options, long code
options, as for :data:`_INTERPRETERS`."""


def _program_and_code(command: list[str]) -> tuple[list[int], dict[int, str]]:
    """The positions in ``command`` that name the program run (the first item, and the program
    a wrapper such as ``env`` or ``timeout 5`` runs), and those that a shell or an interpreter
    reads as code (``sh -c CODE``, ``sh -c -e CODE``, ``python3 -Ic CODE``, ``python3 -cCODE``,
    ``perl -ne CODE``, ``node --eval=CODE``, ``awk CODE``), each with the program that reads it.
    An input in either would choose what runs, not a value it runs on. ``env NAME=VALUE``'s
    assignments count as code: an environment chooses what runs too (``LD_PRELOAD``, ``BASH_ENV``,
    ``PYTHONSTARTUP``, ``NODE_OPTIONS``…)."""
    programs: list[int] = []
    assigned: dict[int, str] = {}
    p = 0
    while p < len(command):
        programs.append(p)
        name = Path(command[p]).name
        wrapper = _WRAPPERS.get(name)
        if wrapper is None:
            return programs, {**assigned, **_code_of(re.sub(r"[0-9.]+$", "", name), name, command, p)}
        valued, operands = wrapper
        i = p + 1
        while i < len(command):
            arg = command[i]
            if arg == "--":
                i += 1
                break
            if name == "env" and arg in ("-S", "--split-string") or arg.startswith("--split-string="):
                programs.append(i + (arg == "-S" or arg == "--split-string"))  # a command line: its program
                return programs, assigned
            if arg.startswith("-") and len(arg) > 1:
                i += 2 if arg in valued else 1
            elif name == "env" and re.match(r"[A-Za-z_][A-Za-z0-9_]*=", arg):
                assigned[i] = f"{name} (the environment of the program it runs, where LD_PRELOAD, BASH_ENV or " \
                              "PYTHONSTARTUP choose what runs)"
                i += 1
            else:
                break
        p = i + operands
    return programs, assigned


def _code_of(base: str, name: str, command: list[str], p: int) -> dict[int, str]:
    """:func:`_program_and_code`'s code positions for the program ``command[p]`` (called ``name``)."""
    n = len(command)
    code: set[int] = set()
    joined = _JOINED.get(base)
    if joined is not None:
        i, options = p + 1, set()
        while i < n and command[i].startswith("-") and command[i] != "--":
            if base == "ssh" and command[i] == "-o":  # -o ProxyCommand=… runs a local command
                options.add(i + 1)
            i += 2 if command[i] in joined else 1
        i += (i < n and command[i] == "--") + (base == "ssh")  # ssh: the host, then the remote command
        return {j: name for j in [*sorted(options), *range(i, n)] if j < n}
    if base in _SHELLS:
        i, after_c = p + 1, False
        while i < n and command[i] != "--" and command[i][:1] in "-+" and len(command[i]) > 1:
            letters = command[i][1:]
            after_c = after_c or (command[i][0] == "-" and not letters.startswith("-") and "c" in letters)
            i += 2 if not letters.startswith("-") and ("o" in letters or "O" in letters) else 1
        i += i < n and command[i] == "--"
        if after_c and i < n:
            code.add(i)
        return {i: name for i in code}
    spec = _INTERPRETERS.get(base)
    operand_code = base in _OPERAND_CODE
    if operand_code:
        code_letters, valued, long_code = _OPERAND_CODE[base]
        stop_at_code = False
    elif spec is not None:
        code_letters, valued, long_code, stop_at_code = spec
    else:
        return {}
    given = False  # a program text given by an option (-e CODE, -f FILE): no operand is code
    i = p + 1
    while i < n:
        arg = command[i]
        if arg == "--":
            i += 1
            break
        if not arg.startswith("-") or arg == "-":
            break
        if arg.startswith("--"):
            option, eq, _ = arg.partition("=")
            if option in long_code:
                code.add(i if eq else i + 1)
                given = True
                i += 1 if eq else 2
                if stop_at_code:
                    break
            else:
                i += 1
            continue
        letters, step = arg[1:], 1
        for k, letter in enumerate(letters):
            if letter in code_letters or (operand_code and letter == "f"):
                if letter != "f":
                    code.add(i if letters[k + 1:] else i + 1)
                given = True
                step = 1 if letters[k + 1:] else 2
                break
            if letter in valued:
                step = 1 if letters[k + 1:] else 2
                break
        i += step
        if given and stop_at_code:
            break
    if operand_code and not given and i < n:
        code.add(i)
    return {i: name for i in code if i < n}


def command_tool(spec: ToolSpec, base_dir: Path, where: str) -> Tool:
    """The program ``spec.command`` as a tool, run in ``base_dir`` (the registry's folder, where a
    program named by a relative path is), with no shell: each argument reaches it as one argument
    whatever the inputs hold (quotes, spaces, ``;``, ``$(…)``). An agent may choose the inputs, so
    the registry is held to what keeps them values (docs/conductor.md, "Inputs in a command"): every
    ``{name}`` is one of the inputs; the program (the first item, or the one a wrapper such as
    ``env`` runs) and the code of ``sh -c``/``python -c`` and their kin (:func:`_program_and_code`)
    are never filled from an input; and an input that begins an argument
    with no ``--`` before it may not begin with ``-`` (it would be read as an option)."""
    from cda.access import may_run_code

    assert spec.command is not None
    may_run_code()
    templates = [_template(arg, spec.inputs, where) for arg in spec.command]
    programs, code = _program_and_code(spec.command)
    for i in programs:
        if any(is_input for _, is_input in templates[i]):
            raise ConductorError(f"{where}: command {spec.command[i]!r}: the program is the registry's choice, "
                                 "not an input's (name it, and pass the input as an argument)")
    for i, reader in sorted(code.items()):
        if any(is_input for _, is_input in templates[i]):
            raise ConductorError(f"{where}: command argument {spec.command[i]!r} is code for "
                                 f"{reader}: an input there would run as code; pass it as "
                                 "an argument of its own (sh -c '... \"$1\"' sh {name}) or read it from stdin")
    # the "--" that ends the options of the program run (not a wrapper's: env -- prog {x})
    start = programs[-1] + 1
    ended = spec.command.index("--", start) if "--" in spec.command[start:] else len(spec.command)
    option_places = {templates[i][0][0] for i in range(1, ended) if templates[i][0][1]}
    program, timeout = spec.command[0], spec.timeout_s

    def run(inputs: Mapping[str, Any], ctx: ToolContext) -> Outputs:
        may_run_code()
        values = {name: _text(value) for name, value in inputs.items()}
        for name in sorted(option_places):
            if values[name].startswith("-"):
                raise ToolError(f"{program}: input {name} = {values[name][:80]!r} begins with '-' and would "
                                "be read as an option (the registry can put \"--\" before it if the program takes it)")
        if any("\0" in values[text] for t in templates for text, is_input in t if is_input):
            raise ToolError(f"{program}: an input holds a NUL character, which no argument can carry")
        argv = ["".join(values[text] if is_input else text for text, is_input in t) for t in templates]
        ran = _run_program(argv, json.dumps(dict(inputs), sort_keys=True).encode(), base_dir, timeout)
        if ran.stopped is not None:
            raise ToolError(f"{argv[0]}: {ran.stopped}")
        if ran.returncode != 0:
            tail = ran.stderr.decode("utf-8", "replace").strip().splitlines()[-3:]
            raise ToolError(f"{argv[0]} exited with status {ran.returncode}" + (f": {' / '.join(tail)}" if tail else ""))
        try:
            outputs = json.loads(ran.stdout.decode("utf-8"))
        except UnicodeDecodeError:
            raise ToolError(f"{argv[0]}: its output is not UTF-8 text") from None
        except json.JSONDecodeError as exc:
            raise ToolError(f"{argv[0]}: its output is not JSON ({exc.msg} at line {exc.lineno}, "
                            f"column {exc.colno})") from None
        if not isinstance(outputs, dict):
            raise ToolError(f"{argv[0]}: its output is {kind_of(outputs)}, not a JSON object")
        return outputs

    return Tool(run)


@dataclass
class _Ran:
    """What a program left: its exit status, its output, the tail of its errors, and why it was
    stopped (None when it ended by itself)."""

    returncode: int | None = None
    stdout: bytes = b""
    stderr: bytes = b""
    stopped: str | None = None


def _run_program(argv: list[str], given: bytes, cwd: Path, timeout: float) -> _Ran:
    """Run ``argv`` in a process group of its own, ``given`` on its standard input. Its output is
    read as it comes and never held past :data:`MAX_OUTPUT` bytes (its errors: the last
    :data:`_ERR_TAIL`): the program is stopped at once when it writes more, as when it runs past
    ``timeout`` — and so is every process it started that is still in its group (a ``sh -c
    'daemon & …'`` once outlived the timeout; 1.5 GB of output once took 4.4 GB of memory before
    it was refused)."""
    ran = _Ran()
    try:
        proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                cwd=cwd, shell=False, start_new_session=True)
    except OSError as exc:
        raise ToolError(f"{argv[0]}: cannot start: {exc.strerror or exc}") from None
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    out, err = bytearray(), bytearray()
    too_much = threading.Event()

    def stop_group() -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)

    def feed() -> None:
        with contextlib.suppress(OSError):  # a program that does not read its input closes the pipe
            proc.stdin.write(given)  # type: ignore[union-attr]
        with contextlib.suppress(OSError):
            proc.stdin.close()  # type: ignore[union-attr]

    def read_out() -> None:
        while chunk := proc.stdout.read1(1 << 16):  # type: ignore[union-attr]
            if len(out) + len(chunk) > MAX_OUTPUT:
                too_much.set()
                stop_group()
                return
            out.extend(chunk)

    def read_err() -> None:
        while chunk := proc.stderr.read1(1 << 16):  # type: ignore[union-attr]
            err.extend(chunk)
            del err[:-_ERR_TAIL]

    threads = [threading.Thread(target=f, daemon=True) for f in (feed, read_out, read_err)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + timeout
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        ran.stopped = f"stopped after {timeout} s (timeout_s)"
        stop_group()
    except BaseException:  # Ctrl-C: the program and what it started do not outlive the call
        stop_group()
        raise
    for t in threads[1:]:  # a process it left behind may hold the pipes open: it gets the time left
        t.join(max(0.0, deadline - time.monotonic()))
    if any(t.is_alive() for t in threads[1:]):
        stop_group()
        _kill_holders(proc.stdout, proc.stderr)  # and what left the group (setsid) still holding a pipe
        for t in threads[1:]:
            t.join(_REAP_S)
    if any(t.is_alive() for t in threads[1:]):  # not found (no /proc): the readers are left to it
        ran.stopped = ran.stopped or "left a process holding its output open (stopped waiting for it)"
        proc.wait()
        ran.returncode, ran.stdout, ran.stderr = proc.returncode, bytes(out), bytes(err)
        return ran
    proc.wait()
    for stream in (proc.stdout, proc.stderr):
        stream.close()
    if too_much.is_set():
        ran.stopped = f"more than {MAX_OUTPUT} bytes of output (stopped)"
    ran.returncode, ran.stdout, ran.stderr = proc.returncode, bytes(out), bytes(err)
    return ran


_REAP_S = 5.0
"""How long the readers get to see the end of the pipes once their holders are killed."""


def _kill_holders(*pipes: Any) -> None:
    """SIGKILL every process other than this one that holds one of ``pipes`` open: what a tool
    started and moved out of its process group (``setsid``), which :func:`os.killpg` misses and
    which would otherwise keep the call waiting on its output for ever. A pipe is held only by
    the tool's processes and this one (:class:`subprocess.Popen` closes every other descriptor
    in the children it starts), so each holder found through ``/proc/PID/fd`` is the tool's."""
    wanted = set()
    for pipe in pipes:
        with contextlib.suppress(OSError, ValueError):
            wanted.add(f"pipe:[{os.fstat(pipe.fileno()).st_ino}]")
    me = os.getpid()
    with contextlib.suppress(OSError):
        for pid in os.listdir("/proc"):
            if not pid.isdigit() or int(pid) == me:
                continue
            try:
                held = any(os.readlink(f"/proc/{pid}/fd/{fd}") in wanted for fd in os.listdir(f"/proc/{pid}/fd"))
            except OSError:  # ended meanwhile, or another user's
                continue
            if held:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(int(pid), signal.SIGKILL)


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


# ---- MCP servers


class _Session:
    """One MCP client session held open on a background event loop for the registry's life
    (a conductor answering a request calls its tools from ordinary, blocking code)."""

    def __init__(self, server: McpServer, base_dir: Path, stack: ExitStack) -> None:
        from anyio.from_thread import start_blocking_portal
        from mcp import Client

        self.timeout = server.timeout_s
        portal = stack.enter_context(start_blocking_portal())
        transport: Any
        if server.command is not None:  # a reply is never held past max_reply_bytes (cda.conductor.mcp_transport)
            transport = capped_stdio(list(server.command), env=server.environment(), cwd=str(base_dir),
                                     max_bytes=server.max_reply_bytes)
            self.name = " ".join(server.command)  # never the env's values (they are the user's secrets)
        else:
            assert server.url is not None
            transport = capped_http(server.url, max_bytes=server.max_reply_bytes)
            self.name = server.url
        self.portal = portal
        self.client = stack.enter_context(portal.wrap_async_context_manager(
            Client(transport, read_timeout_seconds=server.timeout_s)))

    def tools(self) -> list[Any]:
        return list(self.portal.call(self.client.list_tools).tools)

    def call(self, name: str, arguments: dict[str, Any]) -> Any:
        return self.portal.call(self.client.call_tool, name, arguments)


def _egress(server: McpServer) -> None:
    from urllib.parse import urlsplit

    from cda.access import may_egress, may_run_code

    if server.command is not None:
        may_run_code()
        return
    host = (urlsplit(server.url or "").hostname or "").lower()
    may_egress("local" if host in {"127.0.0.1", "localhost", "::1"} else "external")


def _type_of(name: str) -> str:
    """An MCP tool's name as an obligation type: lower-case words joined by ``_``."""
    return re.sub(r"[^a-z0-9_]+", "_", name.lower()).strip("_") or "tool"


def _side_effects(annotations: Any) -> SideEffects:
    if annotations is None:
        return SideEffects.ONCE
    if annotations.read_only_hint:
        return SideEffects.NONE
    if annotations.idempotent_hint:
        return SideEffects.IDEMPOTENT
    return SideEffects.ONCE


def mcp_tools(spec: ToolSpec, base_dir: Path, stack: ExitStack, where: str,
              ) -> list[tuple[ToolSpec, Tool]]:
    """Every tool of ``spec.mcp``'s server as a (spec, tool) pair, the session kept on ``stack``."""
    assert spec.mcp is not None
    _egress(spec.mcp)
    try:
        import jsonschema  # noqa: F401 - the SDK's own dependency, which checks each call's arguments
        import mcp  # noqa: F401
    except ImportError:
        raise ConductorError(f"{where}: an MCP server's tools need the MCP SDK: pip install 'cda[mcp]'") from None
    try:
        session = _Session(spec.mcp, base_dir, stack)
        offered = session.tools()
    except Exception as exc:  # a server that does not start or answer is the registry's problem
        raise ConductorError(f"{where}: the MCP server does not answer: {said(exc)}") from None
    names = {t.name for t in offered}
    unknown = sorted(set(spec.each) - names)
    if unknown:
        raise ConductorError(f"{where}: each.{unknown[0]}: the server has no such tool (it offers "
                             f"{', '.join(sorted(names)) or 'none'})")
    out: list[tuple[ToolSpec, Tool]] = []
    for offer in sorted(offered, key=lambda t: t.name):
        over = spec.each.get(offer.name)
        schema = dict(offer.input_schema or {})
        required = [str(r) for r in schema.get("required", []) if str(r).isidentifier()]
        fields: dict[str, Any] = {
            "name": f"{spec.name}.{_type_of(offer.name)}", "satisfies": [_type_of(offer.name)], "inputs": required,
            "preconditions": list(spec.preconditions), "postconditions": list(spec.postconditions),
            "reliability": spec.reliability, "cost": spec.cost, "latency_ms": spec.latency_ms,
            "side_effects": _side_effects(offer.annotations), "deterministic": False,
            "verify": spec.verify, "description": (offer.description or "")[:2000],
        }
        if "side_effects" in spec.model_fields_set:
            fields["side_effects"] = spec.side_effects
        if "deterministic" in spec.model_fields_set:
            fields["deterministic"] = spec.deterministic
        if over is not None:
            fields.update({k: v for k, v in over.model_dump(exclude_unset=True).items()})
        if not re.match(NAME_PATTERN, fields["name"]):
            raise ConductorError(f"{where}: the server's tool {offer.name!r} gives no usable tool name")
        tool_spec = ToolSpec.model_validate(fields)
        out.append((tool_spec, Tool(_mcp_run(session, offer.name, schema))))
    return out


def _mcp_run(session: _Session, name: str, schema: dict[str, Any]) -> Callable[[Mapping[str, Any], ToolContext],
                                                                                Outputs]:
    def run(inputs: Mapping[str, Any], ctx: ToolContext) -> Outputs:
        import jsonschema

        arguments = {k: v for k, v in inputs.items() if k in (schema.get("properties") or {}) or
                     schema.get("additionalProperties", True) is not False}
        try:
            jsonschema.validate(arguments, schema)
        except jsonschema.ValidationError as exc:
            at = ".".join(str(p) for p in exc.absolute_path) or "arguments"
            raise ToolError(f"{name}: {at}: {exc.message} (the tool's input schema)") from None
        try:
            result = session.call(name, arguments)
        except Exception as exc:  # the session or the server failing is this run's error
            raise ToolError(f"{name} on {session.name}: {said(exc)}") from None
        text = "\n".join(getattr(c, "text", "") for c in result.content or [])
        if result.is_error:
            raise ToolError(f"{name}: {text[:2000] or 'the server reported an error'}")
        if isinstance(result.structured_content, dict):
            return dict(result.structured_content)
        try:
            data = json.loads(text)
        except json.JSONDecodeError:
            return {"text": text}
        return data if isinstance(data, dict) else {"result": data}

    return run
