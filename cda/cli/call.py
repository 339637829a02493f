"""How a CLI command calls its operation: as the local user, through the gate, with the command's
own facilities (``env``: the files it keeps, the Ken graphs it loaded), relative paths read from
the working directory; and how a failure that is not the operation's answer is printed."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

from cda.contracts.locations import problem_message
from cda.errors import CDAError

__all__ = ["LocalEnv", "call_local", "failure"]


class LocalEnv(SimpleNamespace):
    """A command's facilities for its operation (attributes as the operations look them up)."""


def call_local(op: Any, params: dict[str, Any], env: Any = None) -> Any:
    """Run ``op`` for the local user at the CLI (any file, its own code and approvals, any egress
    its inputs allow); what stops it before it answers is a :class:`~cda.errors.CDAError` to print
    (malformed parameters, a refusal, bad input)."""
    from cda.operations import LOCAL_USER, Door, MemorySink, invoke

    sink = getattr(env, "sink", None) or MemorySink()  # the local user's refusals are printed, not kept
    try:
        return invoke(op, params, principal=LOCAL_USER, door=Door.CLI, env=env if env is not None else LocalEnv(),
                      base_dir=Path("."), egress_cap="external", sink=sink)
    except Exception as exc:  # noqa: BLE001 - a ValidationError as the CLI prints it; a CDAError as it is
        raise failure(exc) from None


def failure(exc: Exception) -> CDAError:
    """A failure before the operation answered, as the error the CLI prints (exit 2)."""
    from pydantic import ValidationError

    if isinstance(exc, ValidationError):
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        message = problem_message(first)
        return CDAError(f"{where}: {message}" if where else message)
    if isinstance(exc, CDAError):
        return exc
    raise exc
