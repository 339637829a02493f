"""The CDA Action (docs/actions.md, "The loop"): the verification loop, budgets, artifacts, receipts and events."""
