"""IR → SMT-LIB 2 text, parsed by z3 in one call: the fast way to add a large Boolean part.

Building z3 terms through its Python API costs some tens of microseconds a node (argument
coercion, sort checks, reference counting); one c3540 circuit copy (12k nodes) took 1.4 s.
Printing the same nodes as ``define-fun`` macros and handing the text to
``z3.parse_smt2_string`` takes 0.1 s. z3 hash-conses what it parses, so a declared constant
is the very term ``z3.Bool(name)`` gives, and a node shared by many formulas stays shared.

Only Boolean nodes; atom names must be quotable (no ``|`` or ``\\``). :func:`smt_assertions`
returns ``None`` for anything else and the caller uses :mod:`cda.encodings.to_z3`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import z3

from cda.encodings.ir import And, Atom, Card, Const, Iff, Node, Not, Or, Xor, walk

__all__ = ["smt_assertions"]

_PB = {">=": "pbge", "<=": "pble", "=": "pbeq"}
_INTERNAL = re.compile(r"_n[0-9]+")


def _quote(name: str) -> str | None:
    """``|name|``, or ``None`` when it cannot be quoted or would be one of our macro names
    (``|_n12|`` and ``_n12`` are the same SMT-LIB symbol)."""
    if "|" in name or "\\" in name or _INTERNAL.fullmatch(name):
        return None
    return f"|{name}|"


def smt_assertions(
    ctx: z3.Context, declare: Sequence[str], implications: Sequence[tuple[str, Node]]
) -> z3.AstVector | None:
    """Assertions ``guard ⇒ node`` for each ``(guard atom, node)``, with ``declare`` and every
    atom the nodes mention declared as Bool constants; ``None`` when a node or a name does not fit.

    >>> from cda.encodings.ir import NodeFactory
    >>> f = NodeFactory(); ctx = z3.Context()
    >>> v = smt_assertions(ctx, ["g"], [("g", f.xor([f.atom("a"), f.atom("b")]))])
    >>> s = z3.Solver(ctx=ctx); s.add(v)
    >>> s.check(z3.Bool("g", ctx), z3.Bool("a", ctx), z3.Bool("b", ctx))
    unsat
    """
    out: list[str] = []
    names: dict[int, str] = {}
    declared: set[str] = set()

    def decl(atom: str) -> str | None:
        q = _quote(atom)
        if q is not None and atom not in declared:
            declared.add(atom)
            out.append(f"(declare-const {q} Bool)")
        return q

    for atom in declare:
        if decl(atom) is None:
            return None
    for node in walk([n for _, n in implications]):
        kind = type(node)
        if kind is Atom:
            q = decl(node.name)  # type: ignore[attr-defined]
            if q is None:
                return None
            names[node.uid] = q
            continue
        if kind is Const:
            names[node.uid] = "true" if node.value else "false"  # type: ignore[attr-defined]
            continue
        if kind is Not:
            body = f"(not {names[node.arg.uid]})"  # type: ignore[attr-defined]
        elif kind is And:
            body = "(and " + " ".join(names[a.uid] for a in node.args) + ")"  # type: ignore[attr-defined]
        elif kind is Or:
            body = "(or " + " ".join(names[a.uid] for a in node.args) + ")"  # type: ignore[attr-defined]
        elif kind is Iff:
            body = f"(= {names[node.lhs.uid]} {names[node.rhs.uid]})"  # type: ignore[attr-defined]
        elif kind is Xor:
            body = "(xor " + " ".join(names[a.uid] for a in node.args) + ")"  # type: ignore[attr-defined]
        elif kind is Card:
            assert isinstance(node, Card)
            ones = " ".join("1" for _ in node.args)
            body = f"((_ {_PB[node.op]} {node.k} {ones}) " + " ".join(names[a.uid] for a in node.args) + ")"
        else:
            return None
        names[node.uid] = f"_n{node.uid}"
        out.append(f"(define-fun _n{node.uid} () Bool {body})")
    for guard, node in implications:
        q = decl(guard)
        if q is None:
            return None
        out.append(f"(assert (=> {q} {names[node.uid]}))")
    return z3.parse_smt2_string("\n".join(out), ctx=ctx)
