"""Model-based diagnosis of circuits: ``.bench`` and WCNF import, diagnosis problems, minimal
diagnoses, probing and fault injection.

A client of the engine like any other: it builds ground problems and calls the solver's
public entry points; nothing in the engine imports it.
"""
