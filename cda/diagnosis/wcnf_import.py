"""mbd-mobs WCNF instances (IJCAI 2019) → a diagnosis problem (docs/diagnosis.md).

Format: an old-style ``p wcnf nvars nclauses top`` header; hard clauses (weight = top) encode
the circuit; one soft unit clause per gate on its health variable ``h`` (true = healthy; the
gate's output is ``h - 1``). Observations are comment lines ``o <literals> 0`` (also written
``c o …``); ``c mutated gates:`` / ``c corresp. vars:`` name the injected fault.

Each hard clause is copied per observation with the health literals replaced by the shared
``ab`` atoms (``h`` is ``not ab(h)``), and the observed variables folded to constants. Gates are
named by their health variable number, as the files name no other gate.
"""

from __future__ import annotations

import gzip
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from cda.diagnosis.circuit import Circuit, Gate, table_function, table_kind, truth_table
from cda.diagnosis.problem import CircuitInstance, GateConstraint, ab_atom, build_grouped
from cda.errors import AccessDenied, CDAError
from cda.files import read_bytes
from cda.ir import GroupedProblem, MinimalGoal, Node, NodeFactory

__all__ = ["WcnfError", "Wcnf", "parse_wcnf", "read_wcnf", "load_wcnf"]


class WcnfError(CDAError, ValueError):
    """A malformed WCNF file; the message names the file and line."""


class Wcnf:
    """The parsed file: hard clauses, health variables, observations, the injected fault."""

    def __init__(self) -> None:
        self.nvars = 0
        self.top = 0
        self.hard: list[list[int]] = []
        self.health: list[int] = []
        self.observations: list[dict[int, bool]] = []
        self.mutated_names: list[str] = []
        self.mutated_vars: list[int] = []


def _ints(tokens: list[str], where: str) -> list[int]:
    try:
        return [int(t) for t in tokens]
    except ValueError:
        raise WcnfError(f"{where}: expected whole numbers, found {' '.join(tokens)!r}") from None


def _observation(lits: list[int], where: str) -> dict[int, bool]:
    """One ``o`` line's literals (its final 0 included) as variable → value; a variable named
    twice is an error even with the same sign (a copy-paste slip is never a second reading)."""
    if not lits or lits[-1] != 0:
        raise WcnfError(f"{where}: an observation line ends with 0")
    out: dict[int, bool] = {}
    for v in lits[:-1]:
        if v == 0:
            raise WcnfError(f"{where}: a 0 before the end of an observation line")
        if abs(v) in out:
            raise WcnfError(
                f"{where}: variable {abs(v)} is observed twice on one line "
                f"({'' if out[abs(v)] else '-'}{abs(v)} and {v})"
            )
        out[abs(v)] = v > 0
    return out


def parse_wcnf(text: str, filename: str = "<wcnf>") -> Wcnf:
    """The file read strictly: the header's variable and clause counts must match the body, and
    every observation names variables of the instance, each once; errors carry line numbers."""
    w = Wcnf()
    header: int | None = None  # the header's line number
    nclauses = 0
    observed_at: list[int] = []  # the line of each observation
    used = 0  # the largest variable a clause mentions
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        where = f"{filename}:{lineno}"
        if not line:
            continue
        tokens = line.split()
        if tokens[0] == "o" or (tokens[0] == "c" and len(tokens) > 1 and tokens[1] == "o"):
            w.observations.append(_observation(_ints(tokens[1:] if tokens[0] == "o" else tokens[2:], where), where))
            observed_at.append(lineno)
            continue
        if tokens[0] == "c":
            rest = line[1:].strip()
            if rest.startswith("mutated gates:"):
                w.mutated_names = rest.split(":", 1)[1].split()
            elif rest.startswith("corresp. vars:"):
                w.mutated_vars = _ints(rest.split(":", 1)[1].split(), where)
            continue
        if tokens[0] == "p":
            if header is not None:
                raise WcnfError(f"{where}: a second 'p wcnf' header (the first is on line {header})")
            if len(tokens) != 5 or tokens[1] != "wcnf":
                raise WcnfError(f"{where}: expected 'p wcnf nvars nclauses top'")
            w.nvars, nclauses, w.top = _ints(tokens[2:], where)
            if w.nvars < 1 or nclauses < 1 or w.top < 1:
                raise WcnfError(f"{where}: the header's nvars, nclauses and top must be 1 or more")
            header = lineno
            continue
        if header is None:
            raise WcnfError(f"{where}: a clause before the 'p wcnf' header")
        nums = _ints(tokens, where)
        if len(nums) < 2 or nums[-1] != 0:
            raise WcnfError(f"{where}: a clause is a weight, literals, and a final 0")
        weight, lits = nums[0], nums[1:-1]
        if weight < 1:
            raise WcnfError(f"{where}: a clause's weight must be 1 or more, found {weight}")
        if any(abs(v) > w.nvars or v == 0 for v in lits):
            raise WcnfError(f"{where}: a literal outside 1..{w.nvars} (the header declares {w.nvars} variables)")
        used = max([used, *(abs(v) for v in lits)])
        if weight >= w.top:
            w.hard.append(lits)
        elif len(lits) == 1 and lits[0] > 0:
            w.health.append(lits[0])
        else:
            raise WcnfError(f"{where}: a soft clause must be one positive health variable")
    if header is None:
        raise WcnfError(f"{filename}: no 'p wcnf' header")
    found = len(w.hard) + len(w.health)
    if found != nclauses:
        raise WcnfError(f"{filename}:{header}: the header declares {nclauses} clauses, the file has {found}")
    if used != w.nvars:
        raise WcnfError(
            f"{filename}:{header}: the header declares {w.nvars} variables, the clauses use 1..{used}"
        )
    if not w.health:
        raise WcnfError(f"{filename}: no soft clauses (no gates)")
    if not w.observations:
        raise WcnfError(f"{filename}: no observation lines ('o <literals> 0')")
    health = set(w.health)
    for lineno, obs in zip(observed_at, w.observations):
        outside = sorted(v for v in obs if v > w.nvars)
        if outside:
            raise WcnfError(
                f"{filename}:{lineno}: the observation names variable {outside[0]}, outside 1..{w.nvars} "
                "(the header's variable count)"
            )
        if health & set(obs):
            raise WcnfError(
                f"{filename}:{lineno}: the observation names health variable {min(health & set(obs))} "
                "(a gate's health is what a diagnosis decides)"
            )
    return w


def read_wcnf(path: Path) -> Wcnf:
    try:
        raw = read_bytes(path)  # read once: what is parsed is what a digest of the file covers
    except AccessDenied:
        raise  # cda.access: not this caller's to read (refused before it was opened)
    except CDAError as exc:
        raise WcnfError(str(exc)) from None
    try:
        text = (gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw).decode("utf-8")
    except (OSError, EOFError, gzip.BadGzipFile, UnicodeDecodeError) as exc:
        raise WcnfError(f"cannot read {path}: {exc}") from None
    return parse_wcnf(text, str(path))


def load_wcnf(w: Wcnf, goal: MinimalGoal, filename: str | None = None) -> CircuitInstance:
    """The diagnosis problem of a parsed instance: every observation in the file."""
    health = set(w.health)
    gate_of = {h: str(h) for h in w.health}
    # each hard clause goes to the gate whose health variable it mentions; the rest is structure
    by_gate: dict[int, list[list[int]]] = {h: [] for h in w.health}
    structure: list[list[int]] = []
    for clause in w.hard:
        hs = [abs(v) for v in clause if abs(v) in health]
        if len(hs) == 1 and -hs[0] in clause:
            by_gate[hs[0]].append(clause)
        else:
            structure.append(clause)
    nets = [str(v) for v in range(1, w.nvars + 1) if v not in health]

    def cnf(clauses: list[list[int]], own: int | None) -> GateConstraint:
        """The clauses on one observation's copy; ``own`` (the gate's ``-h`` guard) is dropped,
        as the builder puts ``ab(h) or …`` around a gate's constraint."""

        def build(f: NodeFactory, net: Callable[[str], Node]) -> Node:
            parts = []
            for clause in clauses:
                lits = []
                for v in clause:
                    if v == -own if own is not None else False:
                        continue
                    if abs(v) in health:
                        healthy = f.not_(f.atom(ab_atom(gate_of[abs(v)])))
                        lits.append(healthy if v > 0 else f.not_(healthy))
                    else:
                        node = net(str(abs(v)))
                        lits.append(node if v > 0 else f.not_(node))
                parts.append(f.or_(lits))
            return f.and_(parts)

        return build

    gates = [(gate_of[h], cnf(by_gate[h], h)) for h in w.health]
    observations = [{str(v): value for v, value in obs.items()} for obs in w.observations]
    circuit = None if structure else _circuit(w, by_gate, gate_of)
    shared = cnf(structure, None) if structure else None

    def remake(obs: Sequence[Mapping[str, bool]]) -> GroupedProblem:
        return build_grouped(gates, nets, obs, goal, filename, structure=shared, circuit=circuit)

    gp = remake(observations)
    injected = [gate_of[v + 1] for v in w.mutated_vars if v + 1 in gate_of] or None
    notes = _injected_notes(w, injected)
    if circuit is None:
        notes.append("the hard clauses are not one function per gate: candidates are checked by the solver")
    return CircuitInstance(
        gp, [gate_of[h] for h in w.health], len(w.observations), injected, notes, circuit=circuit,
        observed=observations, remake=remake,
        outputs=[] if circuit is None else [n for n in observations[0] if n not in set(circuit.inputs)],
    )


def _injected_notes(w: Wcnf, injected: list[str] | None) -> list[str]:
    """The injected fault in this instance's gate names (health variables), as ``injected`` has it.

    The file names the mutated gate in the original netlist's numbering (``c mutated gates: 11``)
    and its output variable (``c corresp. vars: 8``); here gate ``h`` drives variable ``h - 1``, so
    that fault is gate 9, and the original name is only quoted beside it.
    """
    if not w.mutated_names and not w.mutated_vars:
        return []
    original = f"the file's gate {', '.join(w.mutated_names)}" if w.mutated_names else "the file's fault"
    if injected:
        return [f"injected fault (from the file): {', '.join(injected)} ({original}, output variable "
                f"{', '.join(map(str, w.mutated_vars))}; gates are named by their health variable)"]
    return [f"injected fault (from the file): {original} (variable {', '.join(map(str, w.mutated_vars)) or '?'}) "
            "drives no gate of this instance"]


def _circuit(w: Wcnf, by_gate: dict[int, list[list[int]]], gate_of: dict[int, str]) -> Circuit | None:
    """The simulator's view: gate ``h`` drives variable ``h - 1`` with the function its clauses define.

    ``None`` when some gate's clauses do not define its output as a function of the other
    variables they mention (or the gates form a cycle): the engine then checks with the solver.
    """
    gates = []
    for h, clauses in by_gate.items():
        out = h - 1
        body = [[v for v in c if v != -h] for c in clauses]
        ins = sorted({abs(v) for c in body for v in c} - {out})
        if out < 1 or not any(abs(v) == out for c in body for v in c) or len(ins) > 12:
            return None
        position = {v: i for i, v in enumerate(ins)}

        def value(
            bits: list[bool], body: list[list[int]] = body, out: int = out, position: dict[int, int] = position
        ) -> bool | None:
            fits = [
                o for o in (False, True)
                if all(any((o if abs(v) == out else bits[position[abs(v)]]) == (v > 0) for v in c) for c in body)
            ]
            return fits[0] if len(fits) == 1 else None

        table = truth_table(value, len(ins))
        if table is None:
            return None
        gates.append(Gate(gate_of[h], str(out), tuple(str(v) for v in ins), table_function(table), table_kind(table)))
    driven = {h - 1 for h in by_gate}
    health = set(by_gate)
    inputs = [str(v) for v in range(1, w.nvars + 1) if v not in driven and v not in health]
    try:
        return Circuit(inputs, gates)
    except ValueError:
        return None
