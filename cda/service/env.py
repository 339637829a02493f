"""What the server offers its operations (``call.env``): the action manager, the investigations
desk, the reflection store, the artifact shelf, the guardian and the conductor's database, all
beside the server's store; and where the gate's receipts go (the server's receipt log)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cda.operations.artifacts import ArtifactShelf
from cda.operations.guard import GuardDesk
from cda.operations.investigate import InvestigationDesk, desk_for
from cda.operations.principals import Principal

__all__ = ["ServiceEnv", "ServiceSink", "service_env"]


class ServiceSink:
    """The gate's receipts in the server's receipt log (``gate.refused``, ``gate.approvals_ignored``,
    ``access.refused``), under the action they concern or ``gate``."""

    def __init__(self, manager: Any) -> None:
        self.manager = manager

    def record(self, name: str, op: str, principal: Principal, detail: dict[str, Any]) -> None:
        action_id = str(detail.get("action_id") or "gate")
        self.manager.receipt(action_id, name, {"operation": op, "principal": principal.name, "role": principal.role,
                                               "need": detail.get("need"), "where": detail.get("where")},
                             {k: v for k, v in detail.items() if k != "action_id"}, "denied")


@dataclass
class ServiceEnv:
    actions: Any  # ActionManager
    sink: ServiceSink
    artifacts: ArtifactShelf
    reflection: Any
    read_trace: Any
    conductor_db: Path
    guardian: GuardDesk | None = None

    @property
    def investigations(self) -> InvestigationDesk:
        return desk_for(self.actions.db)


def service_env(state: Any) -> ServiceEnv:
    """The env of the running server (made once, kept on its state)."""
    env: ServiceEnv | None = getattr(state, "env", None)
    if env is None:
        manager = state.manager
        db: Path = manager.db
        config = state.config
        guardian = None
        if getattr(config, "guard_policies", None) is not None and getattr(config, "guard_ledger", None) is not None:
            guardian = GuardDesk.beside(config.guard_policies, config.guard_ledger)
        env = ServiceEnv(actions=manager, sink=ServiceSink(manager),
                         artifacts=ArtifactShelf(db.parent, db, manager.state.owner), reflection=manager.reflection,
                         read_trace=manager.read_trace, conductor_db=db.with_name(db.name + ".conductor.sqlite"),
                         guardian=guardian)
        state.env = env
    return env
