"""CDA's one SQLite layer: every file CDA keeps is opened, marked, migrated and read here.

A product describes its file once, as a :class:`FileFormat` (its name, its mark in
``PRAGMA application_id``, its list of migrations, and how to recognise what an earlier CDA
wrote), in a schema module of its own; this package does the rest the same way for all:

- :func:`open_store` — a writer's :class:`Store`: created and marked, or recognised and
  migrated, in one transaction; WAL; a busy timeout; the :class:`Durability` asked for
  (``cda serve --fsync``); a file that is not the product's own (another program's, another
  CDA product's, a newer CDA's, a folder, a text file) is refused by name and left untouched;
- :func:`read_store` / :func:`read_snapshot` — a reader that never creates or changes a file;
- :func:`companion` / :func:`family` — the files kept beside a store.

As Hypothesis's ``ExampleDatabase`` is a few methods with several backends, this is a few
functions with six products on them: the receipt log (:mod:`cda.actions.store_file`), the
service's state, investigations (:mod:`cda.investigation.session_store`), the guardian
(:mod:`cda.guardian.guardian_db`), the conductor's IR database (:mod:`cda.conductor.irdb`) and the
jobs' results (:mod:`cda.adapters.jobs.results_store`). docs/architecture.md lists them.
"""

from __future__ import annotations

from cda.store.family import companion, family
from cda.store.file import Store, open_store, read_store, share_lock
from cda.store.format import (
    CONDUCTOR_IR_MARK,
    GUARDIAN_MARK,
    INVESTIGATIONS_MARK,
    JOBS_RESULTS_MARK,
    MARKS,
    RECEIPT_LOG_MARK,
    SERVICE_STATE_MARK,
    FileFormat,
    Migration,
    StoreFileError,
    columns_of,
    has_columns,
    recognise,
    recognise_any,
    tables_of,
)
from cda.store.policy import BUSY_TIMEOUT_S, Durability
from cda.store.snapshot import connect_read_only, read_snapshot

__all__ = [
    "BUSY_TIMEOUT_S",
    "CONDUCTOR_IR_MARK",
    "GUARDIAN_MARK",
    "INVESTIGATIONS_MARK",
    "JOBS_RESULTS_MARK",
    "MARKS",
    "RECEIPT_LOG_MARK",
    "SERVICE_STATE_MARK",
    "Durability",
    "FileFormat",
    "Migration",
    "Store",
    "StoreFileError",
    "columns_of",
    "companion",
    "connect_read_only",
    "family",
    "has_columns",
    "open_store",
    "read_snapshot",
    "read_store",
    "recognise",
    "recognise_any",
    "share_lock",
    "tables_of",
]
