"""ISCAS ``.bench`` netlists and observation files → a diagnosis problem (docs/diagnosis.md).

A netlist::

    INPUT(1)
    OUTPUT(22)
    10 = NAND(1, 3)

Gate types AND, NAND, OR, NOR, XOR, XNOR (parity over any number of inputs), NOT, BUFF/BUF,
case-insensitive. Gate names are the names of their output nets.

An observation file holds one observation per line, either ``net=0/1`` pairs separated by
spaces, or a header line of net names followed by rows of 0/1 (space-separated, or one
string of digits). ``#`` starts a comment.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from cda.diagnosis.circuit import Circuit, Gate, gate_function
from cda.diagnosis.problem import CircuitInstance, GateConstraint, TemplateClauses, build_grouped
from cda.errors import CDAError
from cda.files import read_text
from cda.ir import GroupedProblem, MinimalGoal, Node, NodeFactory

__all__ = [
    "Netlist",
    "read_bench",
    "parse_bench",
    "read_observations",
    "parse_observations",
    "load_bench",
    "circuit_of",
    "GATE_TYPES",
]

GATE_TYPES = ("AND", "NAND", "OR", "NOR", "XOR", "XNOR", "NOT", "BUFF", "BUF")
_INPUT = re.compile(r"^(INPUT|OUTPUT)\s*\(\s*([^\s()]+)\s*\)$", re.IGNORECASE)
_GATE = re.compile(r"^([^\s=()]+)\s*=\s*([A-Za-z]+)\s*\(([^()]*)\)$")


class BenchError(CDAError, ValueError):
    """A malformed netlist or observation file; the message names the file and line."""


@dataclass
class Netlist:
    inputs: list[str]
    outputs: list[str]
    gates: list[tuple[str, str, tuple[str, ...]]]  # (output net, type, input nets), in file order

    @property
    def nets(self) -> list[str]:
        return self.inputs + [g for g, _, _ in self.gates]


def parse_bench(text: str, filename: str = "<bench>") -> Netlist:
    inputs: list[str] = []
    outputs: list[str] = []
    gates: list[tuple[str, str, tuple[str, ...]]] = []
    defined: dict[str, int] = {}
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        m = _INPUT.match(line)
        if m:
            kind, name = m.group(1).upper(), m.group(2)
            if kind == "INPUT":
                if name in defined:
                    raise BenchError(f"{filename}:{lineno}: net {name} is defined twice (first on line {defined[name]})")
                defined[name] = lineno
                inputs.append(name)
            else:
                if name in outputs:
                    raise BenchError(f"{filename}:{lineno}: OUTPUT({name}) is declared twice")
                outputs.append(name)
            continue
        m = _GATE.match(line)
        if not m:
            raise BenchError(f"{filename}:{lineno}: cannot read {line!r}; expected INPUT(x), OUTPUT(x) or z = TYPE(a, b)")
        out, kind, args = m.group(1), m.group(2).upper(), m.group(3)
        if kind not in GATE_TYPES:
            raise BenchError(f"{filename}:{lineno}: unknown gate type {m.group(2)!r} (known: {', '.join(GATE_TYPES)})")
        ins = tuple(a.strip() for a in args.split(",") if a.strip())
        if kind in ("NOT", "BUFF", "BUF") and len(ins) != 1:
            raise BenchError(f"{filename}:{lineno}: {kind} takes one input, given {len(ins)}")
        if not ins:
            raise BenchError(f"{filename}:{lineno}: gate {out} has no inputs")
        if out in defined:
            raise BenchError(f"{filename}:{lineno}: net {out} is defined twice (first on line {defined[out]})")
        defined[out] = lineno
        gates.append((out, "BUFF" if kind == "BUF" else kind, ins))
    for out, _, ins in gates:
        for net in ins:
            if net not in defined:
                raise BenchError(f"{filename}: gate {out} reads net {net}, which is neither an input nor a gate output")
    for net in outputs:
        if net not in defined:
            raise BenchError(f"{filename}: output {net} is neither an input nor a gate output")
    if not gates:
        raise BenchError(f"{filename}: the netlist has no gates")
    netlist = Netlist(inputs, outputs, gates)
    try:
        circuit_of(netlist)  # orders the gates, which finds a cycle if there is one
    except ValueError as exc:
        raise BenchError(f"{filename}: {exc}") from None
    return netlist


def read_bench(path: Path) -> Netlist:
    return parse_bench(read_text(path), str(path))


def _bit(token: str, where: str) -> bool:
    if token not in ("0", "1"):
        raise BenchError(f"{where}: expected 0 or 1, found {token!r}")
    return token == "1"


def parse_observations(text: str, nets: set[str] | None = None, filename: str = "<observations>") -> list[dict[str, bool]]:
    """Observations, one per line: ``a=1 b=0 …``, or a header of net names then rows of 0/1.

    Read strictly: a net named twice on one line (or in the header) is an error, as is a net
    the netlist does not have (``nets``); each error names its line.
    """
    rows = [(i, line.split("#", 1)[0].strip()) for i, line in enumerate(text.splitlines(), 1)]
    rows = [(i, line) for i, line in rows if line]
    out: list[dict[str, bool]] = []
    header: list[str] | None = None
    header_line = 0
    for lineno, line in rows:
        where = f"{filename}:{lineno}"
        if "=" in line:
            obs: dict[str, bool] = {}
            for pair in line.split():
                name, sep, value = pair.partition("=")
                if not sep or not name:
                    raise BenchError(f"{where}: expected net=0 or net=1, found {pair!r}")
                bit = _bit(value, where)
                if name in obs:
                    raise BenchError(
                        f"{where}: net {name} is named twice on one line ({name}={int(obs[name])} and {pair})"
                    )
                obs[name] = bit
            _known(obs, nets, where)
            out.append(obs)
        elif header is None:
            header, header_line = line.replace(",", " ").split(), lineno
            twice = sorted({n for n in header if header.count(n) > 1})
            if twice:
                raise BenchError(f"{where}: net {twice[0]} is named twice in the header")
            _known(dict.fromkeys(header, False), nets, where)
        else:
            tokens = line.replace(",", " ").split()
            if len(tokens) == 1 and len(header) > 1 and len(tokens[0]) == len(header):
                tokens = list(tokens[0])
            if len(tokens) != len(header):
                raise BenchError(
                    f"{where}: {len(tokens)} values for the {len(header)} nets of the header (line {header_line})"
                )
            out.append({name: _bit(t, where) for name, t in zip(header, tokens)})
    if not out:
        raise BenchError(f"{filename}: no observations")
    return out


def _known(obs: Mapping[str, bool], nets: set[str] | None, where: str) -> None:
    """Refuse a net the netlist does not have (when ``nets`` is given)."""
    unknown = [] if nets is None else sorted(set(obs) - nets)
    if unknown:
        raise BenchError(f"{where}: unknown net(s) {', '.join(unknown[:5])} (not an input or a gate of the netlist)")


def read_observations(path: Path, nets: set[str] | None = None) -> list[dict[str, bool]]:
    return parse_observations(read_text(path), nets, str(path))


def _function(kind: str) -> Callable[[NodeFactory, list[Node]], Node]:
    table: dict[str, Callable[[NodeFactory, list[Node]], Node]] = {
        "AND": lambda f, xs: f.and_(xs),
        "NAND": lambda f, xs: f.not_(f.and_(xs)),
        "OR": lambda f, xs: f.or_(xs),
        "NOR": lambda f, xs: f.not_(f.or_(xs)),
        "XOR": lambda f, xs: f.xor(xs),
        "XNOR": lambda f, xs: f.not_(f.xor(xs)),
        "NOT": lambda f, xs: f.not_(xs[0]),
        "BUFF": lambda f, xs: xs[0],
    }
    return table[kind]


#: gate types as ``o iff and(lits)``: (the output negated, the inputs negated)
_AND_FORMS = {
    "AND": (False, False), "NAND": (True, False), "OR": (True, True), "NOR": (False, True),
    "NOT": (False, True), "BUFF": (False, False),
}


def _gate(out: str, kind: str, ins: tuple[str, ...]) -> GateConstraint:
    """The gate's constraint: its clauses (Tseitin: ``o iff l1 and … and ln`` is ``not o or li``
    for each i, and ``o or not l1 or … or not ln``) for the gates of that form, which the ASP
    encoder writes one rule a clause; ``out iff xor(ins)`` for the parity gates."""
    form = _AND_FORMS.get(kind)
    if form is None:
        fn = _function(kind)

        def build(f: NodeFactory, net: Callable[[str], Node]) -> Node:
            return f.iff(net(out), fn(f, [net(i) for i in ins]))

        return build
    negate_out, negate_ins = form

    def clauses(f: NodeFactory, net: Callable[[str], Node]) -> Node:
        o = f.not_(net(out)) if negate_out else net(out)
        lits = [f.not_(net(i)) if negate_ins else net(i) for i in ins]
        not_o = f.not_(o)
        return f.and_([*(f.or_([not_o, x]) for x in lits), f.or_([o, *(f.not_(x) for x in lits)])])

    return clauses


#: parity gates up to this many inputs are written as clauses (2^n of them) in the groups' template
_PARITY_CLAUSES = 8


def _clauses(netlist: Netlist) -> TemplateClauses | None:
    """Every gate's constraint as clauses over the nets, each with ``ab(g)`` added: the groups'
    template (:func:`~cda.diagnosis.problem.build_grouped`). ``None`` when a parity gate has too
    many inputs to write it so (the groups are then built one by one)."""
    nets = netlist.nets
    net = {name: j + 1 for j, name in enumerate(nets)}
    gates = [g for g, _, _ in netlist.gates]
    out: list[tuple[int, ...]] = []
    for k, (g, kind, ins) in enumerate(netlist.gates):
        ab = len(nets) + 1 + k
        form = _AND_FORMS.get(kind)
        if form is not None:  # o iff (l1 and … and ln)
            o = -net[g] if form[0] else net[g]
            lits = [-net[i] if form[1] else net[i] for i in ins]
            out.extend((ab, -o, x) for x in lits)
            out.append((ab, o, *(-x for x in lits)))
            continue
        distinct = list(dict.fromkeys(ins))
        if len(distinct) > _PARITY_CLAUSES:
            return None
        odd = kind == "XOR"
        for bits in range(1 << len(distinct)):  # these input values imply the output's value
            values = [bool(bits >> b & 1) for b in range(len(distinct))]
            count = sum(ins.count(i) for i, v in zip(distinct, values) if v)
            right = (count % 2 == 1) == odd
            out.append((ab, *(-net[i] if v else net[i] for i, v in zip(distinct, values)), net[g] if right else -net[g]))
    return gates, tuple(out)


def circuit_of(netlist: Netlist) -> Circuit:
    """The simulator's view of a netlist (gates named by their output nets)."""
    return Circuit(netlist.inputs, [Gate(out, out, ins, gate_function(kind), kind) for out, kind, ins in netlist.gates])


def load_bench(
    netlist: Netlist, observations: Sequence[Mapping[str, bool]], goal: MinimalGoal, filename: str | None = None
) -> CircuitInstance:
    """The diagnosis problem of ``netlist`` under ``observations`` (copies built on demand)."""
    known = set(netlist.nets)
    for k, obs in enumerate(observations, 1):
        unknown = sorted(set(obs) - known)
        if unknown:
            raise BenchError(f"observation {k} names unknown net(s) {', '.join(unknown[:5])}")
    gates = [(out, _gate(out, kind, ins)) for out, kind, ins in netlist.gates]
    circuit = circuit_of(netlist)

    clauses = _clauses(netlist)

    def remake(obs: Sequence[Mapping[str, bool]]) -> GroupedProblem:
        return build_grouped(gates, netlist.nets, obs, goal, filename, circuit=circuit, clauses=clauses)

    return CircuitInstance(
        remake(observations), [g for g, _ in gates], len(observations), circuit=circuit,
        observed=[dict(o) for o in observations], remake=remake, outputs=list(netlist.outputs),
    )
