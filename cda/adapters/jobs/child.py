"""The job's own process: ``python -m cda.adapters.jobs.child`` reads one job (JSON) on stdin,
caps its address space, runs the kind and writes one JSON object on stdout.

The cap is set here, first thing, with ``RLIMIT_AS``: an allocation past it fails inside this
process only (Python raises ``MemoryError``, recorded as ``memory``), and the batch goes on.
A native library the cap leaves no room to map fails to load: that is ``memory`` too, naming the
loader's error. z3's loader hides it ("libz3.so not found": a job capped at 64 MiB was recorded
``failed`` with that message), so that one is loaded again to see why (:func:`_z3_refused`).
The libraries are not loaded before the cap, which would count z3's 33 MB against every job,
also one that only needs clingo (a clingo solve fits in 64 MiB).
The process asks the kernel to kill it when its parent dies (``PR_SET_PDEATHSIG``), so a
batch killed with ``kill -9`` leaves no job running behind it.

What the kind prints goes to stderr: stdout carries the answer only.
"""

from __future__ import annotations

import ctypes
import errno
import importlib.util
import json
import os
import resource
import signal
import sys
from pathlib import Path
from typing import Any

__all__ = ["MAX_ERROR_CHARS", "clipped", "job_error", "main", "outcome_of"]


def _die_with_parent(parent: int) -> None:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # not Linux: the parent's kill of the process group still applies
        return
    if os.getppid() != parent:  # the parent died before the request was made
        os._exit(1)


def _cap(memory_mb: int) -> None:
    limit = memory_mb * 1024 * 1024
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    resource.setrlimit(resource.RLIMIT_AS, (limit, hard))


def _over_cap(exc: BaseException) -> bool:
    """Whether a library failed to load because the cap left no room to map it."""
    text = str(exc).lower()
    return isinstance(exc, MemoryError) or "cannot allocate memory" in text or "failed to map" in text \
        or "cannot map" in text or getattr(exc, "errno", None) == errno.ENOMEM


def _z3_refused(exc: BaseException) -> str | None:
    """The loader's own error when ``exc`` is z3's "libz3 not found" and the cap is why (loading
    the library again, here, gives the real one), else ``None``."""
    if type(exc).__name__ != "Z3Exception" or "not found" not in str(exc):
        return None
    spec = importlib.util.find_spec("z3")
    for folder in (spec.submodule_search_locations or []) if spec is not None else []:
        for lib in sorted(Path(folder, "lib").glob("libz3.*")):
            try:
                ctypes.CDLL(str(lib))
            except OSError as error:  # "<path>: failed to map segment from shared object": no path in results
                return f"{lib.name}: {str(error).rsplit(': ', 1)[-1]}" if _over_cap(error) else None
            return None
    return None


def _memory(wire: dict[str, Any], why: str = "") -> dict[str, Any]:
    error = f"the job went over its memory cap of {wire['memory_mb']} MiB"
    return {"status": "memory", "error": f"{error} ({why})" if why else error}


MAX_ERROR_CHARS = 2000
"""The most characters of a job's error kept in its results: a parser's error echoes at most a
clipped line of the input (:data:`cda.errors.ECHO_WIDTH`), and nothing longer of a file's
contents is copied into a results file that may be shared (docs/jobs.md, "Results")."""


def job_error(exc: BaseException) -> str:
    """The job's error as its results record it: the message as the CLI prints it, without the
    CLI's ``cda: error:`` prefix that no other job error has (a located DSL error keeps its
    ``file:line:col:`` form).

    >>> from cda.errors import CDAError
    >>> job_error(CDAError("x.cda: no fol { … } block to prove"))
    'x.cda: no fol { … } block to prove'
    """
    from cda.errors import CDAError

    return (exc.render() if isinstance(exc, CDAError) else str(exc)).removeprefix("cda: error: ")


def clipped(text: str) -> str:
    """``text`` cut to :data:`MAX_ERROR_CHARS` characters (``…`` where it was cut).

    >>> len(clipped("x" * 5000)), clipped("short")
    (2000, 'short')
    """
    return text if len(text) <= MAX_ERROR_CHARS else text[:MAX_ERROR_CHARS - 1] + "…"


def outcome_of(wire: dict[str, Any]) -> dict[str, Any]:
    """Run one job in this process: ``{"status": "ok", "result": …}``,
    ``{"status": "failed" | "memory", "error": …}``, or for a result that is not a pass (the
    kind's ``verdict``) ``{"status": "failed" | "partial" | "unknown" | "escalated", "error": …, "result": …}``; each with ``reads``: every file
    the job read and the SHA-256 of what it parsed (:func:`cda.files.recording`). Never raises for
    what the job does."""
    from cda.files import recording

    with recording() as reads:
        outcome = _outcome(wire)
    if isinstance(outcome.get("error"), str):
        outcome["error"] = clipped(outcome["error"])
    return {**outcome, "reads": dict(reads)}


def _outcome(wire: dict[str, Any]) -> dict[str, Any]:
    from cda.errors import CDAError

    try:
        from cda.adapters.jobs.kinds import KINDS, JobInput

        kind = KINDS[wire["kind"]]
        params = dict(wire["params"])
        for name in kind.paths & set(params):
            params[name] = Path(params[name])
        base = Path(wire["base"]) if wire.get("base") else None
        job = JobInput(Path(wire["file"]) if wire["file"] is not None else None, params, base)
        result = kind.run(job)
        text = json.dumps(result, sort_keys=True, ensure_ascii=False, allow_nan=False)
        answer = json.loads(text)
        negative = kind.verdict(answer) if kind.verdict is not None else None
    except MemoryError:
        return _memory(wire)
    except CDAError as exc:
        return {"status": "failed", "error": job_error(exc)}
    except (ImportError, OSError) as exc:
        if _over_cap(exc):  # a library the cap left no room to load
            return _memory(wire, f"{type(exc).__name__}: {exc}")
        return {"status": "failed", "error": f"internal error: {type(exc).__name__}: {exc}"}
    except RecursionError:
        return {"status": "failed", "error": "internal error: RecursionError (the input nests too deeply)"}
    except Exception as exc:  # recorded, never a stop of the batch
        refused = _z3_refused(exc)
        if refused is not None:
            return _memory(wire, f"z3's library could not be loaded: {refused}")
        return {"status": "failed", "error": f"internal error: {type(exc).__name__}: {exc}"}
    if negative is not None:  # not a pass: failed (the CLI's 1) or timeout (its 3), the result kept
        return {"status": negative.status, "error": negative.error, "result": answer}
    return {"status": "ok", "result": answer}


def main() -> int:
    wire = json.loads(sys.stdin.read())
    _die_with_parent(int(os.environ.get("CDA_JOB_PARENT", os.getppid())))
    answer = sys.stdout
    sys.stdout = sys.stderr  # a kind's prints must not mix with the answer
    over = json.dumps(_memory(wire), sort_keys=True, ensure_ascii=False) + "\n"  # made before the cap
    from cda.adapters.jobs.kinds import KINDS

    if wire.get("kind") in KINDS:  # the kind and its operation's module, loaded before the cap: the cap is the job's
        KINDS[wire["kind"]]
    _cap(int(wire["memory_mb"]))
    try:
        text = json.dumps(outcome_of(wire), sort_keys=True, ensure_ascii=False) + "\n"
    except MemoryError:  # even the answer found no room: the one made before the cap
        text = over
    answer.write(text)
    answer.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
