"""The symbolic guardian (docs/guardian.md): a deterministic gate that answers APPROVE, REJECT or ESCALATE
before any side-effecting tool call an agent makes.

It is a client of the engine, not part of it: hard policies are decided by CDA's solvers (and Cedar
policy sets by :mod:`cda.policy`), budgets by a SQLite ledger, first-order effects by a seeded
causal simulation. Nothing here is imported by ``import cda``; the ``cda guard`` and ``cda task``
commands load it when they run.
"""
