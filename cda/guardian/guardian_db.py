"""The guardian's one SQLite file: the seed's data model, created and migrated by CDA.

One file (write-ahead logging, so readers never block the writer) holds everything the guardian
keeps: the seed's ERD — ``agent_identity``, ``causal_hypothesis``, ``financial_ledger``,
``mcp_tool_registry`` — and what the lifecycle needs beside it: ``budgets`` (per agent and
currency), ``signers`` (the HITL signer registry), ``tasks`` and ``decisions``.

*Marked and versioned* by :mod:`cda.store` (:data:`GUARDIAN_FORMAT`): ``PRAGMA application_id``
= :data:`APPLICATION_ID` ("CDAG"), ``PRAGMA user_version`` the number of :data:`MIGRATIONS`
applied; opening a file written by an older CDA applies the missing ones in one transaction, so
a file is always at one version. (CDA up to version 3 kept the version in a ``schema_version``
table: such a file is recognised by it, and migration 4 drops it.)

*Never another program's file.* Before anything is written, an existing file is read without a
trace: a file that is not SQLite, has another ``application_id``, or has tables but no mark is
refused with a :class:`GuardianStoreError` naming what was found, and left byte for byte as it
was. A file written by a newer CDA (a version past :data:`SCHEMA_VERSION`) is refused too. An
empty (0-byte) file counts as new.

Money is stored as exact decimal text (:mod:`cda.guardian.money`), never as SQLite ``REAL``;
a causal hypothesis's ``risk_score`` as the exact text it was given.

>>> import tempfile, pathlib
>>> store = GuardianStore.open(pathlib.Path(tempfile.mkdtemp()) / "guardian.sqlite")
>>> store.version
6
>>> store.close()
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from datetime import UTC, datetime
from decimal import Decimal
from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NamedTuple

from pydantic import AwareDatetime, BaseModel, BeforeValidator, ConfigDict, Field

from cda.store import GUARDIAN_MARK, FileFormat, StoreFileError, open_store, tables_of

if TYPE_CHECKING:
    from cda.guardian.decision import DecisionRecord
    from cda.guardian.proposal import ProposedAction

__all__ = [
    "APPLICATION_ID",
    "GUARDIAN_FORMAT",
    "MIGRATIONS",
    "SCHEMA_VERSION",
    "is_identifier",
    "Clock",
    "GuardianStore",
    "GuardianStoreError",
    "Moment",
    "RecordedDecision",
    "ToolRegistration",
    "utc_now",
]

APPLICATION_ID = GUARDIAN_MARK
"""``PRAGMA application_id`` of a guardian file: the bytes of "CDAG" (CDA's receipt files are "CDA1")."""

Clock = Callable[[], datetime]
"""A source of timezone-aware times; tests inject a fixed one for byte-identical output."""


def _text_or_datetime(value: object) -> object:
    if isinstance(value, int | float | Decimal) and not isinstance(value, bool):
        raise ValueError("a time is ISO 8601 text with a UTC offset, not a number")
    return value


Moment = Annotated[AwareDatetime, BeforeValidator(_text_or_datetime)]
"""A pydantic field type for a time: timezone-aware, from ISO 8601 text (or a ``datetime``), never a
number (pydantic would read one as a Unix time, which the schemas' ``date-time`` refuses)."""


def utc_now() -> datetime:
    """The default clock: now, in UTC."""
    return datetime.now(UTC)


MIGRATIONS: tuple[tuple[str, ...], ...] = (
    # version 1: the seed's ERD as written (technical.md §1)
    (
        "CREATE TABLE agent_identity (agent_id TEXT PRIMARY KEY, persona_ref TEXT NOT NULL DEFAULT '', "
        "wallet_address TEXT NOT NULL DEFAULT '', created_at TEXT NOT NULL)",
        "CREATE TABLE mcp_tool_registry (tool_id TEXT PRIMARY KEY, name TEXT NOT NULL, version TEXT NOT NULL, "
        "schema TEXT NOT NULL, registered_at TEXT NOT NULL)",
        "CREATE TABLE causal_hypothesis (hypothesis_id TEXT PRIMARY KEY, "
        "agent_id TEXT NOT NULL REFERENCES agent_identity(agent_id), description TEXT NOT NULL, "
        "inputs TEXT NOT NULL, prediction TEXT NOT NULL, risk_score TEXT NOT NULL, created_at TEXT NOT NULL, "
        "state TEXT NOT NULL)",
        "CREATE TABLE financial_ledger (tx_id TEXT PRIMARY KEY, "
        "agent_id TEXT NOT NULL REFERENCES agent_identity(agent_id), tx_type TEXT NOT NULL, "
        "amount TEXT NOT NULL, currency TEXT NOT NULL, status TEXT NOT NULL, created_at TEXT NOT NULL)",
    ),
    # version 2: budgets, evidence and settlement on ledger entries, tools on hypotheses and
    # entries (the ERD's used_by / invoked_by), signers, tasks and decisions
    (
        "CREATE TABLE budgets (agent_id TEXT NOT NULL REFERENCES agent_identity(agent_id), "
        "currency TEXT NOT NULL, budget TEXT NOT NULL, committed TEXT NOT NULL, updated_at TEXT NOT NULL, "
        "PRIMARY KEY (agent_id, currency))",
        "ALTER TABLE financial_ledger ADD COLUMN seq INTEGER",
        "ALTER TABLE financial_ledger ADD COLUMN settled_amount TEXT",
        "ALTER TABLE financial_ledger ADD COLUMN evidence TEXT NOT NULL DEFAULT '[]'",
        "ALTER TABLE financial_ledger ADD COLUMN tool_id TEXT REFERENCES mcp_tool_registry(tool_id)",
        "ALTER TABLE financial_ledger ADD COLUMN updated_at TEXT",
        "UPDATE financial_ledger SET seq = rowid, updated_at = created_at",
        "CREATE UNIQUE INDEX financial_ledger_seq ON financial_ledger(seq)",
        "ALTER TABLE causal_hypothesis ADD COLUMN tool_id TEXT REFERENCES mcp_tool_registry(tool_id)",
        "CREATE TABLE signers (signer_id TEXT PRIMARY KEY, public_key TEXT NOT NULL, registered_at TEXT NOT NULL)",
        "CREATE TABLE decisions (decision_id INTEGER PRIMARY KEY, action_digest TEXT NOT NULL, "
        "decision TEXT NOT NULL, reason TEXT NOT NULL, body TEXT NOT NULL, recorded_at TEXT NOT NULL)",
        "CREATE INDEX decisions_action ON decisions(action_digest)",
        "CREATE TABLE tasks (task_id TEXT PRIMARY KEY, agent_id TEXT NOT NULL, state TEXT NOT NULL, "
        "body TEXT NOT NULL, tx_id TEXT REFERENCES financial_ledger(tx_id), updated_at TEXT NOT NULL)",
    ),
    # version 3: what a decision was about (its action's agent, task, cost and currency, so an
    # execution is tied to them), the file's settings (the pinned policy store) and who endorsed
    # each signer after the first
    (
        "ALTER TABLE decisions ADD COLUMN agent_id TEXT",
        "ALTER TABLE decisions ADD COLUMN task_id TEXT",
        "ALTER TABLE decisions ADD COLUMN cost TEXT",
        "ALTER TABLE decisions ADD COLUMN currency TEXT",
        "CREATE TABLE guardian_config (key TEXT PRIMARY KEY, value TEXT NOT NULL, set_by TEXT NOT NULL, "
        "signature TEXT NOT NULL, set_at TEXT NOT NULL)",
        "ALTER TABLE signers ADD COLUMN endorsed_by TEXT",
        "ALTER TABLE signers ADD COLUMN endorsement TEXT",
    ),
    # version 4: the version is PRAGMA user_version (cda.store), no longer a table of its own; the
    # signed header that names the first signer (cda.guardian.signers: the root of every signer)
    (
        "DROP TABLE IF EXISTS schema_version",
        "CREATE TABLE guardian_header (id INTEGER PRIMARY KEY CHECK (id = 1), body TEXT NOT NULL, "
        "root_signature TEXT NOT NULL, anchor_signature TEXT NOT NULL)",
    ),
    # version 5: escalations a person resolves (cda.guardian.escalations): the call held back, and
    # the signed resolution with the reservation an approval holds
    (
        "CREATE TABLE escalations (escalation_id TEXT PRIMARY KEY, call_key TEXT NOT NULL, "
        "action_digest TEXT NOT NULL, agent_id TEXT NOT NULL, tool_id TEXT NOT NULL, action TEXT NOT NULL, "
        "reason TEXT NOT NULL, decision_receipt TEXT NOT NULL, policy_digest TEXT NOT NULL, cost TEXT NOT NULL, "
        "currency TEXT NOT NULL, state TEXT NOT NULL, resolution TEXT, signature TEXT, tx_id TEXT, "
        "created_at TEXT NOT NULL, updated_at TEXT NOT NULL)",
        "CREATE INDEX escalations_call ON escalations(call_key)",
    ),
    # version 6: who proposed an escalated action (the door's principal, so the gate can refuse its
    # own resolution) and what used an approval (a task id, or the gateway's call)
    (
        "ALTER TABLE escalations ADD COLUMN proposed_by TEXT",
        "ALTER TABLE escalations ADD COLUMN used_by TEXT",
    ),
)
"""Every migration, in order: ``MIGRATIONS[i]`` takes a file from version ``i`` to ``i + 1``.
Append only; never edit one that has shipped."""

SCHEMA_VERSION = len(MIGRATIONS)
"""The version a file has once this CDA has opened it."""


class ToolRegistration(BaseModel):
    """One row of the seed's MCP_TOOL_REGISTRY: a tool's id, name, version and capability schema."""

    tool_id: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.:@/-]{0,127}$")
    name: str = Field(min_length=1, max_length=128)
    version: str = Field(min_length=1, max_length=64)
    schema_: dict[str, Any] = Field(alias="schema")
    registered_at: Moment

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    def to_document(self) -> dict[str, Any]:
        return {"tool_id": self.tool_id, "name": self.name, "version": self.version, "schema": self.schema_,
                "registered_at": self.registered_at.isoformat()}


class GuardianStoreError(StoreFileError):
    """A guardian file CDA cannot use: not SQLite, another program's, or written by a newer CDA."""


def _legacy(conn: sqlite3.Connection, app_id: int, version: int, where: str) -> int | None:
    """A file CDA up to version 3 wrote: the guardian mark, no ``user_version``, its version the
    largest row of its ``schema_version`` table."""
    if app_id != APPLICATION_ID or version != 0:
        return None
    if "schema_version" not in tables_of(conn):
        raise GuardianStoreError(f"{where}: not a CDA guardian file (it has the guardian mark but no version)")
    return int(conn.execute("SELECT COALESCE(MAX(version), 0) FROM schema_version").fetchone()[0])


GUARDIAN_FORMAT = FileFormat("a CDA guardian file", APPLICATION_ID, MIGRATIONS, legacy=_legacy)
"""The guardian's file, as :mod:`cda.store` opens it."""


def _exact_text(name: str, value: object) -> str:
    """A number kept as the exact text it was given (a float by its shortest round-trip repr)."""
    if isinstance(value, bool) or not isinstance(value, int | float | Decimal | Fraction | str):
        raise GuardianStoreError(f"{name} must be a number, not {type(value).__name__}")
    try:
        exact = Fraction(value) if not isinstance(value, str) else Fraction(value.strip())
    except (ValueError, ZeroDivisionError, OverflowError):
        raise GuardianStoreError(f"{name} must be a finite number, not {value!r}") from None
    if not 0 <= exact <= 1:
        raise GuardianStoreError(f"{name} must be in [0, 1], not {value}")
    return value.strip() if isinstance(value, str) else repr(value) if isinstance(value, float) else str(value)


class GuardianStore:
    """A read-write connection to one guardian file, created and migrated on open.

    Writers use :meth:`transaction` (``BEGIN IMMEDIATE``: the write lock is taken first, so a
    read-check-write inside it cannot interleave with another process's). Use one store per
    thread or process; the file is shared safely between processes.
    """

    def __init__(self, conn: sqlite3.Connection, where: str, clock: Clock = utc_now, root: str | None = None) -> None:
        self.conn = conn
        self.where = where
        self.clock = clock
        self.root = root
        """The fingerprint of the file's first signer, given from outside the file (``cda task
        --root``): its header is then trusted by it, not by this CDA's key (cda.guardian.signers)."""

    @classmethod
    def open(cls, path: Path | str, clock: Clock = utc_now, *, upto: int = SCHEMA_VERSION,
             root: str | None = None) -> GuardianStore:
        """Open (creating or migrating) the guardian file at ``path``; ``":memory:"`` for a private
        one. ``root``: the first signer's fingerprint, given from outside the file (:attr:`root`).
        (``upto`` below :data:`SCHEMA_VERSION` makes a file of an older version, which is how a
        migration from it is tested.)"""
        fmt = GUARDIAN_FORMAT if upto == SCHEMA_VERSION else replace(GUARDIAN_FORMAT, migrations=MIGRATIONS[:upto])
        try:
            store = open_store(path, fmt)
        except GuardianStoreError:
            raise
        except StoreFileError as exc:
            raise GuardianStoreError(str(exc)) from None
        store.conn.execute("PRAGMA foreign_keys = ON")
        if root is not None and not (len(root) == 64 and set(root) <= set("0123456789abcdef")):
            store.close()
            raise GuardianStoreError(f"a first signer's fingerprint is 64 lowercase hex digits, not {root[:70]!r}")
        return cls(store.conn, str(path), clock, root)

    def close(self) -> None:
        self.conn.close()

    def __enter__(self) -> GuardianStore:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    @property
    def version(self) -> int:
        return int(self.conn.execute("PRAGMA user_version").fetchone()[0])

    def now(self) -> str:
        """The store clock's time as ISO 8601 text (refused when the clock is not timezone-aware)."""
        moment = self.clock()
        if moment.tzinfo is None or moment.utcoffset() is None:
            raise GuardianStoreError("the guardian's clock must give timezone-aware times")
        return moment.isoformat()

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """``BEGIN IMMEDIATE`` … ``COMMIT`` (``ROLLBACK`` on any exception)."""
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            yield self.conn
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise
        self.conn.execute("COMMIT")

    # ------------------------------------------------------------------ the seed's ERD

    def ensure_agent(self, agent_id: str, *, persona_ref: str = "", wallet_address: str = "") -> None:
        """Record the agent (a no-op when it is already known), inside the caller's transaction or its own."""
        if not is_identifier(agent_id, "_.:@-"):  # the tasks' and actions' ids (cda.guardian.tasks.ID_PATTERN)
            raise GuardianStoreError(f"agent_id must match ^[A-Za-z0-9][A-Za-z0-9_.:@-]{{0,127}}$, not {agent_id!r}")
        sql = "INSERT OR IGNORE INTO agent_identity VALUES (?, ?, ?, ?)"
        values = (agent_id, persona_ref, wallet_address, self.now())
        if self.conn.in_transaction:
            self.conn.execute(sql, values)
        else:
            with self.transaction() as conn:
                conn.execute(sql, values)

    def agent(self, agent_id: str) -> dict[str, str] | None:
        row = self.conn.execute("SELECT agent_id, persona_ref, wallet_address, created_at FROM agent_identity "
                                "WHERE agent_id = ?", (agent_id,)).fetchone()
        return None if row is None else dict(zip(("agent_id", "persona_ref", "wallet_address", "created_at"), row))

    def register_tool(self, tool_id: str, name: str, version: str, schema: dict[str, Any]) -> ToolRegistration:
        """Add a tool to the MCP tool registry; a tool id registered twice must say the same thing."""
        from pydantic import ValidationError

        from cda.contracts.receipt import canonical_json

        try:
            entry = ToolRegistration(tool_id=tool_id, name=name, version=version, schema=schema,
                                     registered_at=self.clock())
            body = canonical_json(entry.schema_)
        except (ValidationError, TypeError, ValueError) as exc:
            raise GuardianStoreError(f"tool {tool_id!r} cannot be registered: {exc}") from None
        with self.transaction() as conn:
            row = conn.execute("SELECT name, version, schema FROM mcp_tool_registry WHERE tool_id = ?",
                               (tool_id,)).fetchone()
            if row is None:
                conn.execute("INSERT INTO mcp_tool_registry VALUES (?, ?, ?, ?, ?)",
                             (tool_id, name, version, body, entry.registered_at.isoformat()))
            elif tuple(row) != (name, version, body):
                raise GuardianStoreError(f"tool {tool_id!r} is registered already with another name, version or schema")
        found = self.tool(tool_id)
        assert found is not None
        return found

    def tool(self, tool_id: str) -> ToolRegistration | None:
        """The registered tool ``tool_id`` (None: not registered)."""
        row = self.conn.execute("SELECT tool_id, name, version, schema, registered_at FROM mcp_tool_registry "
                                "WHERE tool_id = ?", (tool_id,)).fetchone()
        if row is None:
            return None
        return ToolRegistration(tool_id=row[0], name=row[1], version=row[2], schema=json.loads(row[3]),
                                registered_at=datetime.fromisoformat(row[4]))

    def record_hypothesis(self, hypothesis_id: str, agent_id: str, description: str,
                          inputs: dict[str, Any] | BaseModel, prediction: dict[str, Any] | BaseModel,
                          risk_score: object, state: str = "simulated", tool_id: str | None = None) -> None:
        """Store one causal simulation as the seed's CAUSAL_HYPOTHESIS: ``inputs`` and
        ``prediction`` as canonical JSON (a dict, or the simulator's pydantic model, dumped in JSON
        mode), ``risk_score`` in [0, 1] as the exact text it was given."""
        from cda.contracts.receipt import canonical_json

        _check_id("hypothesis_id", hypothesis_id)
        score = _exact_text("risk_score", risk_score)
        try:
            inputs_text, prediction_text = (
                canonical_json(part.model_dump(mode="json") if isinstance(part, BaseModel) else part)
                for part in (inputs, prediction))
        except (TypeError, ValueError) as exc:
            raise GuardianStoreError(f"hypothesis {hypothesis_id!r}: inputs and prediction must be JSON ({exc})") from None
        with self.transaction() as conn:
            self.ensure_agent(agent_id)
            try:
                conn.execute("INSERT INTO causal_hypothesis VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                             (hypothesis_id, agent_id, description, inputs_text, prediction_text, score, self.now(),
                              state, tool_id))
            except sqlite3.IntegrityError as exc:
                raise GuardianStoreError(f"hypothesis {hypothesis_id!r} cannot be stored ({exc})") from None

    def hypothesis(self, hypothesis_id: str) -> dict[str, Any] | None:
        cols = ("hypothesis_id", "agent_id", "description", "inputs", "prediction", "risk_score", "created_at",
                "state", "tool_id")
        row = self.conn.execute(f"SELECT {', '.join(cols)} FROM causal_hypothesis WHERE hypothesis_id = ?",
                                (hypothesis_id,)).fetchone()
        if row is None:
            return None
        found = dict(zip(cols, row))
        found["inputs"], found["prediction"] = json.loads(found["inputs"]), json.loads(found["prediction"])
        return found

    def record_decision(self, record: DecisionRecord, action: ProposedAction | None = None) -> int:
        """Store a :class:`~cda.guardian.decision.DecisionRecord` (with the proposed action it
        decided on, whose agent, task id, cost and currency an execution must then match);
        returns its row id. The latest row of an action is the decision that counts."""
        from cda.contracts.receipt import canonical_json
        from cda.guardian.money import text

        body = canonical_json(record.model_dump(mode="json"))
        about: tuple[str | None, ...] = (None, None, None, None)
        if action is not None:
            if action.digest() != record.action_digest:
                raise GuardianStoreError("the action given is not the one the decision is about (its digest differs)")
            about = (action.agent_id, action.task_id, text(action.cost_estimate), action.currency)
        with self.transaction() as conn:
            cursor = conn.execute("INSERT INTO decisions (action_digest, decision, reason, body, recorded_at, agent_id, "
                                  "task_id, cost, currency) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                                  (record.action_digest, str(record.decision), record.reason, body, self.now(), *about))
        return int(cursor.lastrowid or 0)

    def latest_decision(self, action_digest: str) -> RecordedDecision | None:
        """The decision recorded last for the action ``action_digest`` (None: none was)."""
        row = self.conn.execute("SELECT body, agent_id, task_id, cost, currency FROM decisions WHERE action_digest = ? "
                                "ORDER BY decision_id DESC LIMIT 1", (action_digest,)).fetchone()
        if row is None:
            return None
        return RecordedDecision(str(row[0]), row[1], row[2], None if row[3] is None else Decimal(row[3]), row[4])

    # ------------------------------------------------------------------ the file's settings

    def setting(self, key: str) -> str | None:
        """A setting of this guardian file (``policy_digest``: the policy store it accepts)."""
        row = self.conn.execute("SELECT value FROM guardian_config WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def set_setting(self, key: str, value: str, set_by: str, signature: str) -> None:
        """Set a setting, with the id and signature of the signer who authorised it
        (:func:`cda.guardian.signers.pin_policy_store` checks both before calling this)."""
        with self.transaction() as conn:
            conn.execute("INSERT INTO guardian_config VALUES (?, ?, ?, ?, ?) ON CONFLICT (key) DO UPDATE SET "
                         "value = excluded.value, set_by = excluded.set_by, signature = excluded.signature, "
                         "set_at = excluded.set_at", (key, value, set_by, signature, self.now()))


class RecordedDecision(NamedTuple):
    """A row of the ``decisions`` table: the record's canonical JSON and what its action was
    (None for each when the action was not recorded with it)."""

    body: str
    agent_id: str | None
    task_id: str | None
    cost: Decimal | None
    currency: str | None


def is_identifier(value: object, punctuation: str) -> bool:
    """Whether ``value`` is an id: an ASCII letter or digit, then up to 127 ASCII letters, digits
    or characters of ``punctuation`` (the models' ``^[A-Za-z0-9][A-Za-z0-9<punctuation>]{0,127}$``)."""
    return (isinstance(value, str) and 1 <= len(value) <= 128 and value[0].isascii() and value[0].isalnum()
            and all(c.isascii() and (c.isalnum() or c in punctuation) for c in value))


def _check_id(name: str, value: object) -> str:
    if not isinstance(value, str) or not value or len(value) > 256 or not value.isprintable():
        raise GuardianStoreError(f"{name} must be printable text of 1 to 256 characters, not {value!r}")
    return value
