"""Function evaluator: run a user's deterministic ``check(claim) -> bool`` in a kernel sandbox.

The user's code never runs inside CDA's process. It runs in a fresh interpreter (standard
library only, clean environment ``PYTHONHASHSEED=0`` so sets of strings iterate the same on
every run, stdin and stderr ``/dev/null``, stdout a pipe CDA reads) inside Linux namespaces
(:mod:`cda.verifiers.sandbox`): no network but a down loopback, a read-only filesystem except its
own tmpfs directory (:data:`~cda.verifiers.sandbox.CHECK_DIR`, its working directory), its own
``/proc``, a seccomp filter that refuses the system calls through which it could hold memory
outside its limits or reach other processes, at most
:data:`~cda.verifiers.sandbox.MAX_PROCESSES` processes, and the whole process tree killed when
the check ends or times out. Before the user's source is read, the check's process lowers its
own limits, soft and hard alike so the code cannot raise them again:

* ``RLIMIT_AS`` — ``memory_mb`` of address space per process (an allocation beyond it is a
  ``MemoryError``);
* ``RLIMIT_CPU`` — the timeout plus one to two seconds (a wall-clock timeout in the parent
  kills the process tree as well, which also covers code that sleeps);
* ``RLIMIT_FSIZE`` — :data:`OUTPUT_LIMIT` bytes per file it writes; CDA reads as much of its
  stdout and then closes the pipe (the next write fails: "exceeded the output limit");
* ``RLIMIT_NPROC`` — :data:`~cda.verifiers.sandbox.MAX_PROCESSES` processes in the namespaces (0 in a
  ``process`` run); ``RLIMIT_NOFILE`` — :data:`~cda.verifiers.sandbox.MAX_DESCRIPTORS` descriptors;
  ``RLIMIT_SIGPENDING`` — :data:`~cda.verifiers.sandbox.MAX_PENDING_SIGNALS`; ``RLIMIT_CORE``,
  ``RLIMIT_RTPRIO`` and ``RLIMIT_NICE`` 0.

**Fail closed.** Where the kernel refuses namespaces (or the seccomp filter) the check is *not
run*: the outcome is ``skipped`` with the refused step, never ``passed``. A caller who accepts
less says so by name, ``isolation="process"``: the check then runs in a plain child process with
the same limits and filter (see :mod:`cda.verifiers.sandbox`). Every outcome's data names the
isolation used: ``namespaces``, ``process`` or ``none`` (not run).

Every way the code can go wrong is an outcome, never an exception out of CDA: ``True`` is
*passed*; ``False`` is *failed* (confidence cap 0); an exception, a non-bool, ``sys.exit``, a
crash, a timeout or exhausted memory is *failed* with the reason (confidence cap 0.5: the check
could not answer); a check not run (isolation refused, budget spent) is *skipped* (cap 0.5).
Outcome data holds the limits as configured and nothing timed. The parent believes only the
first JSON object on the result channel (at most :data:`~cda.verifiers.sandbox.RESULT_LIMIT`
bytes), and copies at most a few hundred characters of any text in it.
"""

from __future__ import annotations

import json
import math
import signal
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from cda.contracts.action import MAX_FUNCTION_MB, MAX_FUNCTION_SECONDS, MIN_FUNCTION_MB
from cda.contracts.receipt import sha256_hex
from cda.contracts.verification import VerifierOutcome, VerifierStatus
from cda.verifiers.sandbox import ISOLATIONS, Isolation, SandboxRun, run_sandboxed

__all__ = ["run_function_check", "OUTPUT_LIMIT"]

#: bytes the user's code may write to each of stdout and stderr
OUTPUT_LIMIT = 1 << 20
_EXCERPT = 200  # characters of stdout kept in the outcome
_TEXT = 200  # characters of any text the check reported that reach the outcome
_KINDS = frozenset({"value", "non_bool", "no_check", "memory", "output", "exit", "raised"})


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
    if not isinstance(value, dict) or value.get("kind") not in _KINDS:
        return None
    return value


def _text(value: object) -> str:
    """A field the check reported, as bounded text (the check chose it: trust nothing about it)."""
    return (value if isinstance(value, str) else repr(value)[:_TEXT])[:_TEXT]


def _classify(
    result: dict[str, Any] | None, timed_out: bool, returncode: int, limits: dict[str, Any],
    budget_cut: bool = False,
) -> tuple[VerifierStatus, str, str]:
    """(status, reason code, readable detail) from what the child reported and how it ended."""
    timeout_text = f"timed out after {limits['timeout_s']} s"
    if budget_cut:
        timeout_text = "stopped when the action's search budget ran out"
    if result is not None:
        kind = result["kind"]
        where = " while loading the source" if result.get("phase") == "loading" else ""
        if kind == "value":
            value = result.get("value") is True
            return ("passed" if value else "failed"), "returned", f"check returned {value}"
        if kind == "non_bool":
            return "failed", "non_bool", f"check returned {_text(result.get('type'))}, not bool"
        if kind == "no_check":
            return "failed", "no_check", "the source defines no function check(claim)"
        if kind == "memory":
            return "failed", "memory", f"exceeded memory limit ({limits['memory_mb']} MB){where}"
        if kind == "output":
            return "failed", "output", f"exceeded the output limit ({OUTPUT_LIMIT} bytes){where}"
        if kind == "exit":
            return "failed", "exit", f"called sys.exit({_text(result.get('code'))}){where}"
        if kind == "raised":
            text = f"raised {_text(result.get('type'))}"
            if result.get("message"):
                text += f": {_text(result.get('message'))}"
            return "failed", "raised", text + where
    if timed_out or returncode in (-signal.SIGXCPU, -signal.SIGKILL):
        return "failed", ("budget" if budget_cut else "timeout"), timeout_text
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


def _limits_problem(timeout_s: object, memory_mb: object, isolation: object) -> str | None:
    if not (isinstance(timeout_s, int | float) and not isinstance(timeout_s, bool) and math.isfinite(timeout_s)
            and 0 < timeout_s <= MAX_FUNCTION_SECONDS):
        return f"timeout_s must be a number of seconds, more than 0 and at most {MAX_FUNCTION_SECONDS}, got {timeout_s!r}"
    if not (isinstance(memory_mb, int) and not isinstance(memory_mb, bool) and MIN_FUNCTION_MB <= memory_mb <= MAX_FUNCTION_MB):
        return f"memory_mb must be a whole number from {MIN_FUNCTION_MB} to {MAX_FUNCTION_MB}, got {memory_mb!r}"
    if isolation not in ISOLATIONS:
        return f"isolation must be one of {', '.join(ISOLATIONS)}, got {isolation!r}"
    return None


def run_function_check(
    name: str, source: str, claim: str, timeout_s: float = 5.0, memory_mb: int = 256,
    *, isolation: Isolation = "namespaces", budget_s: float | None = None, cover: Sequence[Path] = (),
) -> VerifierOutcome:
    """Run ``check(claim)`` from ``source`` in the sandbox; never raises.

    ``isolation`` is the weakest isolation the caller accepts: ``namespaces`` (the default; the
    check is not run where the kernel refuses them) or ``process`` (namespaces where the kernel
    allows, else a plain process). ``budget_s`` is what is left of the caller's wall budget: the
    check is stopped when it runs out (``None``: no budget). ``cover``: files the check must read as
    empty (the run's SQLite stores: other actions' data, the approval secret).

    >>> src = "def check(claim):\\n    return claim.count('a') == 2\\n"
    >>> run_function_check("two_as", src, "banana").detail, run_function_check("two_as", src, "aa").status
    ('check returned False', 'passed')
    """
    limits: dict[str, Any] = {"timeout_s": timeout_s, "memory_mb": memory_mb}
    base: dict[str, Any] = {"isolation": "none", "limits": limits, "source_sha256": sha256_hex(source)}
    problem = _limits_problem(timeout_s, memory_mb, isolation)
    if problem is not None:
        return _outcome(name, claim, "failed", "invalid_limits", problem, base)
    if budget_s is not None and not budget_s > 0:
        return _outcome(name, claim, "skipped", "budget", "not run: the action's search budget ran out", base)
    from cda.access import may_run_code
    from cda.errors import AccessDenied

    try:  # cda.access: whatever door the call came by, its caller may not run code here
        may_run_code()
    except AccessDenied as exc:
        return _outcome(name, claim, "skipped", "not_allowed", f"not run: {exc}", base)
    try:
        return _run(name, source, claim, limits, base, isolation, budget_s, cover)
    except Exception as exc:  # the promise is "never an exception out of CDA": report instead
        return _outcome(name, claim, "failed", "sandbox_error", f"the sandbox could not run: {type(exc).__name__}: {exc}", base)


def _run(name: str, source: str, claim: str, limits: dict[str, Any], base: dict[str, Any],
         accepted: Isolation, budget_s: float | None, cover: Sequence[Path] = ()) -> VerifierOutcome:
    timeout_s = float(limits["timeout_s"])
    budget_cut = budget_s is not None and budget_s < timeout_s
    wall = min(timeout_s, budget_s) if budget_s is not None else timeout_s
    deadline = time.monotonic() + wall
    payload = json.dumps({"source": source, "claim": claim}).encode("utf-8")

    def attempt(isolation: Isolation) -> SandboxRun:
        return run_sandboxed(
            payload, isolation, timeout_s=timeout_s, memory_bytes=int(limits["memory_mb"]) << 20,
            output_bytes=OUTPUT_LIMIT, deadline=deadline, cover=cover, stdout_kept=_EXCERPT * 4,
        )

    run = attempt("namespaces")
    if run.refused is not None and accepted == "process":
        run = attempt("process")
    if run.refused is not None:
        instead = ("isolation 'process' accepts a plain child process instead" if accepted == "namespaces"
                   else "a plain child process (isolation 'process') was refused as well")
        detail = f"not run: the kernel refused the sandbox ({run.refused}); {instead}"
        return _outcome(name, claim, "skipped", "isolation_refused", detail, base)
    if run.isolation is None:  # the boot never said what it set up: no user code was trusted to run
        if run.eof:
            return _outcome(name, claim, "failed", "sandbox_error", "the sandbox did not start: no word from its boot", base)
        _status, reason, detail = _classify(None, True, run.returncode, limits, budget_cut=budget_cut)
        return _outcome(name, claim, "failed", reason, detail, base)
    result = _parse_result(run.raw)
    status, reason, detail = _classify(result, not run.eof and result is None, run.returncode, limits,
                                       budget_cut=budget_cut)
    data = {**base, "isolation": run.isolation}
    stdout = run.stdout.decode("utf-8", errors="replace")[:_EXCERPT]
    if stdout:
        data["stdout_excerpt"] = stdout
    return _outcome(name, claim, status, reason, detail, data)
