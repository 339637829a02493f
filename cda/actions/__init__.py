"""The CDA Action (spec §4): the verification loop, budgets, artifacts, receipts and events."""
