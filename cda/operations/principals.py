"""Who is calling: one principal model for every door (docs/service.md, "Who may do what").

Four roles:

* ``local`` — the person at the machine: the CLI, the pytest plugin, ``cda mcp`` over stdio (and
  over HTTP on loopback without ``--auth``). Reads files (under its allowed roots, where the door
  sets any), may run its own code where the door allows it, and approves its own runs at the CLI.
* ``partner`` — a client of a server, by its token (or the one anonymous client of an open
  loopback server). Names no server file, runs no code, gives no approval.
* ``internal`` — an internal reviewer's token: sees every action, reads raw traces with a
  reflection approval, issues those approvals, approves an action's egress. Names no server file;
  runs code only on a server started with ``--allow-code``.
* ``approver`` — a token that may approve or deny what actions wait for (and resolve escalations);
  its own calls run as a partner's do, and it does not act on another caller's investigation
  sessions (approving is not investigating: docs/service.md).

A principal carries its capabilities explicitly, so the gate (:mod:`cda.operations.gate`) never
asks "which door is this": the door decided that when it built the principal.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Literal

from cda.access import Access, EgressClass

__all__ = ["LOCAL_USER", "Principal", "Role", "ROLES", "anonymous", "local_user", "server"]

Role = Literal["local", "partner", "internal", "approver"]
ROLES: tuple[Role, ...] = ("local", "partner", "internal", "approver")


@dataclass(frozen=True)
class Principal:
    """A caller: its name (a token's name; ``local`` at the machine), its role and what it may do.

    ``roots``: ``None`` reads any file the process can, a tuple only below those folders (empty:
    no file). ``code``: may run a user's ``functions``. ``approves``: may grant what an action
    waits for (egress above the cap, PII consent) and reflection approvals where the operation
    allows its role. ``endpoints``: may send to an LLM endpoint of its own choosing (else only to
    the ones the operator lists in ``CDA_LLM_ENDPOINTS``): a caller that names the URL a server
    posts evidence to, with the server's own key, could read both. The positional form
    ``Principal(name, role)`` is a token's principal.
    """

    name: str
    role: Role
    roots: tuple[Path, ...] | None = field(default=())
    code: bool = False
    approves: bool = False
    endpoints: bool = False

    def __post_init__(self) -> None:
        if self.role not in ROLES:
            raise ValueError(f"unknown role {self.role!r} (one of {', '.join(ROLES)})")
        if self.role != "local" and self.roots != ():
            raise ValueError("only the local user reads files by path")

    @property
    def profile(self) -> str:
        """The role under the name the service's store records (``owners.profile``)."""
        return self.role

    @property
    def sees_all(self) -> bool:
        """Whether it may act on another caller's actions and sessions (to review or approve them)."""
        return self.role in ("internal", "approver")

    @property
    def reviews_sessions(self) -> bool:
        """Whether it may act on another caller's investigation sessions: the internal role only
        (an approver approves; it does not take steps in someone else's session)."""
        return self.role == "internal"

    def access(self, egress: EgressClass = "external") -> Access:
        """The :class:`~cda.access.Access` its calls run under, with the door's egress cap."""
        return Access(roots=self.roots, code=self.code, egress=egress, who=f"{self.role} {self.name!r}")

    def with_roots(self, roots: tuple[Path, ...] | None) -> Principal:
        return replace(self, roots=roots, endpoints=self.endpoints and roots is None)


def local_user(roots: tuple[Path, ...] | None = None, *, code: bool = True, approves: bool = True) -> Principal:
    """The person at the machine; ``roots`` limit the files it names (``None``: any). Only the
    unrestricted one (the CLI's) chooses its own LLM endpoints: a door that limits the files an
    agent names limits where it sends them too."""
    return Principal("local", "local", roots=roots, code=code, approves=approves, endpoints=roots is None)


LOCAL_USER = local_user()
"""The CLI's caller: any file it names, its own code, its own approvals."""


def anonymous() -> Principal:
    """The one client of an open server (loopback only, Host and Origin checked): a partner that
    approves its own actions and chooses its own LLM endpoints, as there is nobody else to ask
    (the person at the machine; a server with ``--auth`` lists the endpoints instead)."""
    return Principal("anonymous", "partner", approves=True, endpoints=True)


def server() -> Principal:
    """The server itself, owner of what it starts on its own (sub-action revisions, interruptions)."""
    return Principal("server", "internal")
