"""First-order claims: syntax, parsing, checks, fragments, grounding and proving (z3, finite
models, clingo cross-check), and the FOLIO scorer.

A client of the engine like any other; nothing in the engine imports it.
"""
