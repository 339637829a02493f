"""Choosing a backend: by name, or ``auto`` by what the problem needs."""

from __future__ import annotations

from cda.encodings.ir import GroundProblem
from cda.errors import BackendUnavailable, BackendUnsupported
from cda.solver.backend import BACKENDS, CLINGO_MAX_WEIGHT, _load, available_backends, integer_weights

__all__ = ["choose_backend"]


def choose_backend(problem: GroundProblem, requested: str) -> str:
    """``auto`` picks clingo for purely Boolean problems (fast projective enumeration) and z3
    when there are metrics or event times (native integer arithmetic) or soft weights too
    precise or too large for clingo's 32-bit weights; clingo decides metrics and event times
    too, through clingo-dl, when asked for by name and all constraints are differences.

    >>> from cda.encodings.ir import NodeFactory
    >>> choose_backend(GroundProblem(NodeFactory()), "auto")
    'clingo'
    """
    if requested not in ("auto", *BACKENDS):
        raise BackendUnsupported(f"unknown backend '{requested}' (choose auto, {', '.join(BACKENDS)})")
    # each backend is imported only when it is the one asked about: a clingo answer never loads z3
    if requested != "auto":
        if not _installed(requested):
            raise BackendUnavailable(
                f"backend '{requested}' is not installed (available: {', '.join(available_backends())})"
            )
        return requested
    wide_weights = sum(integer_weights(problem).values()) > CLINGO_MAX_WEIGHT  # costs sum them: each fits then
    preferred = ["z3", "clingo"] if problem.has_arithmetic or wide_weights else ["clingo", "z3"]
    for name in preferred:
        if _installed(name):
            return name
    raise BackendUnavailable("no solver backend is installed: pip install z3-solver clingo")


def _installed(name: str) -> bool:
    """Whether backend ``name`` imports (loading it, and it alone)."""
    try:
        _load(name)  # the package-private loader of backend.py
    except BackendUnavailable:
        return False
    return True
