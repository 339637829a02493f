"""Every operation CDA offers, declared once; the principals who call them; the one gate.

* :mod:`~cda.operations.registry` — :class:`Operation` (name, params model, result model, function,
  what it needs) and :func:`operation`, the one declaration that adds one; the doors (the CLI, the
  ToolBus, MCP, batch jobs, the conductor's tools) are generated from it.
* :mod:`~cda.operations.principals` — who is calling: the local user, a partner, an internal
  reviewer, an approver.
* :mod:`~cda.operations.gate` — :func:`invoke`: validate, decide (:func:`decide`), run under the
  principal's access (:mod:`cda.access`); every refusal a receipt.
* the operations, by product: ``engine`` (check, solve, explain_conflict), ``fol`` (prove),
  ``diagnosis`` (diagnose, probe), ``actions`` (actions.run here; actions.start … on a server),
  ``investigate``, ``guard``, ``conduct``, ``reflect``, ``artifacts``, ``policy`` (batch jobs),
  ``sessions`` (an agent's clause sessions).

Nothing here knows a transport: a door turns its own input into parameters, calls
:func:`invoke` with its principal and facilities, and turns the result or the refusal into its
own output (exit code, error frame, tool error).
"""

from __future__ import annotations

from cda.operations.gate import Call, Decision, LogSink, MemorySink, Refused, decide, invoke
from cda.operations.principals import LOCAL_USER, Principal, Role, anonymous, local_user
from cda.operations.registry import ConductorTool, Door, Needs, Operation, all_operations, for_door, get, operation

__all__ = [
    "LOCAL_USER",
    "Call",
    "ConductorTool",
    "Decision",
    "Door",
    "LogSink",
    "MemorySink",
    "Needs",
    "Operation",
    "Principal",
    "Refused",
    "Role",
    "all_operations",
    "anonymous",
    "cda_version",
    "decide",
    "for_door",
    "get",
    "invoke",
    "local_user",
    "operation",
]


def cda_version() -> str:
    """The installed distribution's version (``0+unknown`` from a bare checkout): what every door reports."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("cda")
    except PackageNotFoundError:
        return "0+unknown"
