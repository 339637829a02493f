"""Function evaluator: run a user's deterministic ``check(claim) -> bool`` in a child process.

The user's code never runs inside CDA's process. A fresh interpreter is started with
``-s -S -P`` (no user or system site-packages, no script directory on ``sys.path``: only the
standard library), in a fresh temporary directory, with stdin closed and an environment that
holds nothing but ``PYTHONHASHSEED=0`` (so the iteration order of sets of strings, and with it
the result, is the same on every run; ``-I`` would ignore that variable, which is why its
parts are given one by one). Before the user's source is read, the runner lowers its own
limits, soft and hard alike so the code cannot raise them again:

* ``RLIMIT_AS`` — ``memory_mb`` of address space (an allocation beyond it is a ``MemoryError``);
* ``RLIMIT_CPU`` — the timeout plus one to two seconds (a wall-clock timeout in the parent
  kills the process group as well, which also covers code that sleeps);
* ``RLIMIT_FSIZE`` — :data:`OUTPUT_LIMIT` bytes per file, which bounds what stdout/stderr (files
  in the temporary directory) can grow to;
* ``RLIMIT_NPROC`` 0 and ``RLIMIT_CORE`` 0 — no child processes (not enforced for root) and no
  core dumps.

The limits are set by the runner rather than in a ``preexec_fn``: ``preexec_fn`` is not safe
when the calling process has threads (Python's documentation), and CDA's servers do.

Network: the runner replaces ``socket.socket`` (and ``_socket.socket``), ``create_connection``,
``create_server``, ``socketpair``, ``fromfd`` and the resolver functions with ones that raise
``PermissionError`` before it loads the user's code. That is **best effort**, not a sandbox: code
that works hard enough (``ctypes``, or a child process where ``RLIMIT_NPROC`` does not hold,
as for root) can still reach the network. Run untrusted code in a real
sandbox (a container without a network) on top of this.

Every way the code can go wrong is an outcome, never an exception out of CDA: ``True`` is
*passed*; ``False`` is *failed* (confidence cap 0); an exception, a non-bool, ``sys.exit``, a
crash, a timeout or exhausted memory is *failed* with the reason (confidence cap 0.5: the check
could not answer). Outcome data holds the limits as configured and nothing timed.
"""

from __future__ import annotations

import json
import math
import os
import select
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from cda.contracts.receipt import sha256_hex
from cda.contracts.verification import VerifierOutcome, VerifierStatus

__all__ = ["run_function_check", "OUTPUT_LIMIT"]

#: bytes the user's code may write to each of stdout and stderr
OUTPUT_LIMIT = 1 << 20
_RESULT_LIMIT = 1 << 16  # bytes read from the result channel
_EXCERPT = 200  # characters of stdout kept in the outcome

_RUNNER = r"""
import sys


def _main():
    import resource

    timeout_s, memory, output, fd = float(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    cpu = int(timeout_s) + 2
    for limit, value in ((resource.RLIMIT_AS, memory), (resource.RLIMIT_CPU, cpu), (resource.RLIMIT_FSIZE, output),
                         (resource.RLIMIT_NPROC, 0), (resource.RLIMIT_CORE, 0)):
        soft, hard = resource.getrlimit(limit)
        if hard != resource.RLIM_INFINITY:
            value = min(value, hard)
        hard_value = value + 1 if limit == resource.RLIMIT_CPU else value
        if hard != resource.RLIM_INFINITY:
            hard_value = min(hard_value, hard)
        resource.setrlimit(limit, (value, hard_value))

    import errno
    import json
    import os

    def report(**fields):
        os.write(fd, json.dumps(fields, ensure_ascii=True).encode("ascii"))
        os.close(fd)

    def message(exc):
        try:
            text = str(exc)
        except BaseException:
            text = "<unprintable>"
        return text[:200]

    import _socket
    import socket

    def deny(*args, **kwargs):
        raise PermissionError("network access is disabled in the CDA function sandbox")

    class NoSocket(socket.socket):
        def __init__(self, *args, **kwargs):
            deny()

    socket.socket = socket.SocketType = NoSocket
    _socket.socket = _socket.SocketType = NoSocket
    for name in ("create_connection", "create_server", "socketpair", "fromfd", "getaddrinfo",
                 "gethostbyname", "gethostbyname_ex", "gethostbyaddr"):
        if hasattr(socket, name):
            setattr(socket, name, deny)
        if hasattr(_socket, name):
            setattr(_socket, name, deny)

    with open("input.json", "rb") as fh:
        data = json.loads(fh.read().decode("utf-8"))
    phase = "loading"
    try:
        namespace = {"__name__": "cda_check", "__builtins__": __builtins__}
        exec(compile(data["source"], "<check>", "exec"), namespace)
        check = namespace.get("check")
        if not callable(check):
            report(kind="no_check")
            return
        phase = "calling"
        value = check(data["claim"])
        if type(value) is bool:
            report(kind="value", value=value)
        else:
            report(kind="non_bool", type=type(value).__name__[:100])
    except MemoryError:
        report(kind="memory", phase=phase)
    except SystemExit as exc:
        report(kind="exit", code=repr(exc.code)[:100], phase=phase)
    except BaseException as exc:
        if isinstance(exc, OSError) and exc.errno == errno.EFBIG:
            report(kind="output", phase=phase)
        else:
            report(kind="raised", type=type(exc).__name__[:100], message=message(exc), phase=phase)


_main()
"""


def _read_result(fd: int, deadline: float) -> tuple[bytes, bool]:
    """Read the result channel until end of file or the deadline; (bytes, reached end of file)."""
    chunks: list[bytes] = []
    size = 0
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return b"".join(chunks), False
        ready, _, _ = select.select([fd], [], [], remaining)
        if not ready:
            return b"".join(chunks), False
        chunk = os.read(fd, 4096)
        if not chunk:
            return b"".join(chunks), True
        if size < _RESULT_LIMIT:
            chunks.append(chunk[: _RESULT_LIMIT - size])
            size += len(chunk)


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    """Kill the child's process group; called only while the child is unreaped, so the id is ours."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def _parse_result(raw: bytes) -> dict[str, Any] | None:
    """The first JSON object on the channel (a process forked by the check may add a second)."""
    try:
        value, _end = json.JSONDecoder().raw_decode(raw.decode("ascii"))
    except (UnicodeDecodeError, ValueError):
        return None
    return value if isinstance(value, dict) and isinstance(value.get("kind"), str) else None


def _classify(
    result: dict[str, Any] | None, timed_out: bool, returncode: int, limits: dict[str, Any]
) -> tuple[VerifierStatus, str, str]:
    """(status, reason code, readable detail) from what the child reported and how it ended."""
    timeout_text = f"timed out after {limits['timeout_s']} s"
    if result is not None:
        kind = result["kind"]
        where = " while loading the source" if result.get("phase") == "loading" else ""
        if kind == "value":
            value = result.get("value") is True
            return ("passed" if value else "failed"), "returned", f"check returned {value}"
        if kind == "non_bool":
            return "failed", "non_bool", f"check returned {result.get('type')}, not bool"
        if kind == "no_check":
            return "failed", "no_check", "the source defines no function check(claim)"
        if kind == "memory":
            return "failed", "memory", f"exceeded memory limit ({limits['memory_mb']} MB){where}"
        if kind == "output":
            return "failed", "output", f"exceeded the output limit ({OUTPUT_LIMIT} bytes){where}"
        if kind == "exit":
            return "failed", "exit", f"called sys.exit({result.get('code')}){where}"
        if kind == "raised":
            text = f"raised {result.get('type')}"
            if result.get("message"):
                text += f": {result.get('message')}"
            return "failed", "raised", text + where
    if timed_out or returncode in (-signal.SIGXCPU, -signal.SIGKILL):
        return "failed", "timeout", timeout_text
    if returncode < 0:
        return "failed", "crash", f"crashed with {_signal_name(-returncode)} before returning"
    return "failed", "exit", f"exited with status {returncode} without a result"


def _outcome(name: str, claim: str, status: VerifierStatus, reason: str, detail: str, data: dict[str, Any]) -> VerifierOutcome:
    if status == "passed":
        cap = None
    elif reason == "returned":
        cap = 0.0  # the check ran and said no
    else:
        cap = 0.5  # the check could not answer
    return VerifierOutcome(
        verifier="function", claim=claim, status=status, detail=detail,
        confidence_cap=cap, data={"name": name, "reason": reason, **data},
    )


def run_function_check(
    name: str, source: str, claim: str, timeout_s: float = 5.0, memory_mb: int = 256
) -> VerifierOutcome:
    """Run ``check(claim)`` from ``source`` in a limited child process; never raises.

    >>> src = "def check(claim):\\n    return claim.count('a') == 2\\n"
    >>> run_function_check("two_as", src, "banana").detail, run_function_check("two_as", src, "aa").status
    ('check returned False', 'passed')
    """
    limits: dict[str, Any] = {"timeout_s": timeout_s, "memory_mb": memory_mb}
    base = {"limits": limits, "source_sha256": sha256_hex(source)}
    if not (isinstance(timeout_s, int | float) and math.isfinite(timeout_s) and timeout_s > 0):
        return _outcome(name, claim, "failed", "invalid_limits", f"timeout_s must be a positive number, got {timeout_s!r}", base)
    if not (isinstance(memory_mb, int) and memory_mb >= 32):
        return _outcome(name, claim, "failed", "invalid_limits", f"memory_mb must be a whole number >= 32, got {memory_mb!r}", base)
    try:
        return _run(name, source, claim, limits, base)
    except Exception as exc:  # the promise is "never an exception out of CDA": report instead
        return _outcome(name, claim, "failed", "sandbox_error", f"the sandbox could not run: {type(exc).__name__}: {exc}", base)


def _run(name: str, source: str, claim: str, limits: dict[str, Any], base: dict[str, Any]) -> VerifierOutcome:
    timeout_s = float(limits["timeout_s"])
    with tempfile.TemporaryDirectory(prefix="cda-fn-", ignore_cleanup_errors=True) as tmp:
        work = Path(tmp)
        (work / "input.json").write_text(json.dumps({"source": source, "claim": claim}), encoding="utf-8")
        read_fd, write_fd = os.pipe()
        try:
            with open(work / "stdout.txt", "wb") as out, open(work / "stderr.txt", "wb") as err:
                args = [
                    sys.executable, "-s", "-S", "-P", "-c", _RUNNER,
                    repr(timeout_s), str(int(limits["memory_mb"]) << 20), str(OUTPUT_LIMIT), str(write_fd),
                ]
                try:
                    proc = subprocess.Popen(
                        args, stdin=subprocess.DEVNULL, stdout=out, stderr=err, cwd=tmp,
                        env={"PYTHONHASHSEED": "0"}, pass_fds=(write_fd,), start_new_session=True,
                    )
                finally:
                    os.close(write_fd)
                deadline = time.monotonic() + timeout_s
                raw, eof = _read_result(read_fd, deadline)
                timed_out = not eof
                if not timed_out:
                    try:
                        proc.wait(timeout=max(0.0, deadline - time.monotonic()))
                    except subprocess.TimeoutExpired:
                        timed_out = True
                if timed_out:
                    _kill_group(proc)
                    proc.wait()
        finally:
            os.close(read_fd)
        result = _parse_result(raw)
        status, reason, detail = _classify(result, timed_out and result is None, proc.returncode, limits)
        data = dict(base)
        stdout = (work / "stdout.txt").read_bytes()[: _EXCERPT * 4].decode("utf-8", errors="replace")[:_EXCERPT]
        if stdout:
            data["stdout_excerpt"] = stdout
    return _outcome(name, claim, status, reason, detail, data)
