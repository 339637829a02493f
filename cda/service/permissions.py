"""Who may do what on this server: the one place the action handling asks, until the gate decides.

The service's action handling asks exactly two questions about a caller, both here: may ``who``
start these inputs (a partner may not name a file on the server, ``ken.path``, nor run code,
``functions``), and may ``who`` grant an approval (on a server with ``--auth`` an internal
reviewer only; a partner may deny). :mod:`cda.operations`' gate is to decide both for every door
(docs/service.md, "Who may do what"): it replaces :class:`ServerRules` as the
:class:`~cda.service.actions.ActionManager`'s ``rules``, and nothing else in
:mod:`cda.service` decides a permission.
"""

from __future__ import annotations

from typing import Protocol

from cda.contracts.action import CDAInputs
from cda.service.auth import Principal
from cda.service.live import EdgeError

__all__ = ["Rules", "ServerRules"]


class Rules(Protocol):
    """The questions the action handling asks (see the module's docstring)."""

    def check_start(self, who: Principal, inputs: CDAInputs) -> None:
        """Raise :class:`~cda.service.live.EdgeError` (``forbidden``) when ``who`` may not start ``inputs``."""
        ...

    def may_grant(self, who: Principal) -> bool:
        """Whether ``who`` may grant an approval (anyone may deny)."""
        ...


class ServerRules:
    """The rules ``cda serve`` has kept at its edge: profiles of ``--auth``, ``self_approval`` on
    an open server (its one anonymous partner approves its own actions)."""

    def __init__(self, self_approval: bool) -> None:
        self.self_approval = self_approval

    def check_start(self, who: Principal, inputs: CDAInputs) -> None:
        if who.profile == "internal":
            return
        if inputs.ken is not None and inputs.ken.path is not None:
            raise EdgeError("forbidden", "a partner cannot name a file on the server; give the Ken graph inline",
                            ["params", "inputs", "ken", "path"])
        if inputs.functions:
            raise EdgeError("forbidden", "function checks run code on the server: internal profile only",
                            ["params", "inputs", "functions"])

    def may_grant(self, who: Principal) -> bool:
        return self.self_approval or who.profile == "internal"
