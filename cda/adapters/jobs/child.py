"""The job's own process: ``python -m cda.adapters.jobs.child`` reads one job (JSON) on stdin,
caps its address space, runs the kind and writes one JSON object on stdout.

The cap is set here, first thing, with ``RLIMIT_AS``: an allocation past it fails inside this
process only (Python raises ``MemoryError``, recorded as ``memory``), and the batch goes on.
The process asks the kernel to kill it when its parent dies (``PR_SET_PDEATHSIG``), so a
batch killed with ``kill -9`` leaves no job running behind it.

What the kind prints goes to stderr: stdout carries the answer only.
"""

from __future__ import annotations

import ctypes
import json
import os
import resource
import signal
import sys
from pathlib import Path
from typing import Any

__all__ = ["main", "outcome_of"]


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


def outcome_of(wire: dict[str, Any]) -> dict[str, Any]:
    """Run one job in this process: ``{"status": "ok", "result": …}``,
    ``{"status": "failed" | "memory", "error": …}``, or for a result that is not a pass (the
    kind's ``verdict``) ``{"status": "failed" | "timeout", "error": …, "result": …}``; each with ``reads``: every file
    the job read and the SHA-256 of what it parsed (:func:`cda.files.recording`). Never raises for
    what the job does."""
    from cda.files import recording

    with recording() as reads:
        outcome = _outcome(wire)
    return {**outcome, "reads": dict(reads)}


def _outcome(wire: dict[str, Any]) -> dict[str, Any]:
    from cda.adapters.jobs.kinds import KINDS, JobInput
    from cda.errors import CDAError

    kind = KINDS[wire["kind"]]
    params = dict(wire["params"])
    for name in kind.paths & set(params):
        params[name] = Path(params[name])
    job = JobInput(Path(wire["file"]) if wire["file"] is not None else None, params)
    try:
        result = kind.run(job)
        text = json.dumps(result, sort_keys=True, ensure_ascii=False, allow_nan=False)
        answer = json.loads(text)
        negative = kind.verdict(answer) if kind.verdict is not None else None
    except MemoryError:
        return {"status": "memory", "error": f"the job went over its memory cap of {wire['memory_mb']} MiB"}
    except CDAError as exc:
        return {"status": "failed", "error": exc.render()}
    except RecursionError:
        return {"status": "failed", "error": "internal error: RecursionError (the input nests too deeply)"}
    except Exception as exc:  # recorded, never a stop of the batch
        return {"status": "failed", "error": f"internal error: {type(exc).__name__}: {exc}"}
    if negative is not None:  # not a pass: failed (the CLI's 1) or timeout (its 3), the result kept
        return {"status": negative.status, "error": negative.error, "result": answer}
    return {"status": "ok", "result": answer}


def main() -> int:
    wire = json.loads(sys.stdin.read())
    _die_with_parent(int(os.environ.get("CDA_JOB_PARENT", os.getppid())))
    answer = sys.stdout
    sys.stdout = sys.stderr  # a kind's prints must not mix with the answer
    from cda.adapters.jobs.kinds import KINDS

    if wire.get("kind") in KINDS:  # the kind and its operation's module, loaded before the cap: the cap is the job's
        KINDS[wire["kind"]]
    _cap(int(wire["memory_mb"]))
    outcome = outcome_of(wire)
    answer.write(json.dumps(outcome, sort_keys=True, ensure_ascii=False) + "\n")
    answer.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
