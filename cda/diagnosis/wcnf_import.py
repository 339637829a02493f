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
import zlib
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from cda.diagnosis.circuit import Circuit, Gate, gate_function, table_function, table_kind, truth_table
from cda.diagnosis.problem import CircuitInstance, GateConstraint, ab_atom, build_grouped
from cda.errors import AccessDenied, CDAError
from cda.files import data_max_bytes, read_bytes, too_large
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
    body = lits[:-1]
    fast = {abs(v): v > 0 for v in body}
    if len(fast) == len(body) and 0 not in fast:
        return fast
    out: dict[int, bool] = {}  # a slip: find it, in order, for the message
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
    hard, health, nvars = w.hard, w.health, 0
    for lineno, raw in enumerate(text.splitlines(), 1):
        tokens = raw.split()
        if not tokens:
            continue
        first = tokens[0]
        if header is not None and first not in ("c", "o", "p"):  # a clause: the common case, first
            try:
                nums = list(map(int, tokens))
            except ValueError:
                nums = _ints(tokens, f"{filename}:{lineno}")
            lits = nums[1:-1]
            if len(nums) < 2 or nums[-1] != 0:
                raise WcnfError(f"{filename}:{lineno}: a clause is a weight, literals, and a final 0")
            weight = nums[0]
            if weight < 1:
                raise WcnfError(f"{filename}:{lineno}: a clause's weight must be 1 or more, found {weight}")
            if lits:
                lo, hi = min(lits), max(lits)
                if hi > nvars or -lo > nvars or 0 in lits:
                    raise WcnfError(
                        f"{filename}:{lineno}: a literal outside 1..{nvars} (the header declares {nvars} variables)"
                    )
                used = max(used, hi, -lo)
            if weight >= w.top:
                hard.append(lits)
            elif len(lits) == 1 and lits[0] > 0:
                health.append(lits[0])
            else:
                raise WcnfError(f"{filename}:{lineno}: a soft clause must be one positive health variable")
            continue
        line = raw.strip()
        where = f"{filename}:{lineno}"
        if first == "o" or (first == "c" and len(tokens) > 1 and tokens[1] == "o"):
            w.observations.append(_observation(_ints(tokens[1:] if first == "o" else tokens[2:], where), where))
            observed_at.append(lineno)
            continue
        if first == "c":
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
            header, nvars = lineno, w.nvars
            continue
        raise WcnfError(f"{where}: a clause before the 'p wcnf' header")
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
    gates = set(w.health)
    for lineno, obs in zip(observed_at, w.observations):
        if max(obs, default=0) > w.nvars:
            raise WcnfError(
                f"{filename}:{lineno}: the observation names variable {min(v for v in obs if v > w.nvars)}, "
                f"outside 1..{w.nvars} (the header's variable count)"
            )
        named = gates.intersection(obs)
        if named:
            raise WcnfError(
                f"{filename}:{lineno}: the observation names health variable {min(named)} "
                "(a gate's health is what a diagnosis decides)"
            )
    return w


def _gunzip(raw: bytes, path: Path, limit: int | None = None) -> bytes:
    """``raw`` (gzip, possibly several members) decompressed a piece at a time, never past ``limit``
    bytes: a small file that would decompress to gigabytes (a "gzip bomb": 200 KB to 1 GB) is
    refused once its output passes the cap, having held at most the cap (docs/dsl.md, Size and
    time limits)."""
    limit = data_max_bytes() if limit is None else limit
    out = bytearray()
    rest = raw
    while rest:
        unzip = zlib.decompressobj(wbits=31)  # 31: a gzip header and trailer
        while True:
            out += unzip.decompress(rest, limit + 1 - len(out))
            if len(out) > limit:
                raise WcnfError(str(too_large(path, None, limit, "decompressed file")))
            rest = unzip.unconsumed_tail
            if unzip.eof or not rest:
                break
        if not unzip.eof:
            raise EOFError("the gzip stream ends before its end marker")
        rest = unzip.unused_data.lstrip(b"\x00")  # the next member, if any (padding zeros skipped, as gzip does)
    return bytes(out)


def read_wcnf(path: Path) -> Wcnf:
    try:
        raw = read_bytes(path)  # read once: what is parsed is what a digest of the file covers
    except AccessDenied:
        raise  # cda.access: not this caller's to read (refused before it was opened)
    except CDAError as exc:
        raise WcnfError(str(exc)) from None
    try:
        text = (_gunzip(raw, path) if raw[:2] == b"\x1f\x8b" else raw).decode("utf-8")
    except (OSError, EOFError, gzip.BadGzipFile, zlib.error, UnicodeDecodeError) as exc:
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

    # the same clauses for the groups' template: a net is its position among the nets, and a
    # health literal h is "not ab(h)"
    code = {int(name): j + 1 for j, name in enumerate(nets)}
    code.update((h, -(len(nets) + 1 + k)) for k, h in enumerate(w.health))
    clauses = ([gate_of[h] for h in w.health], tuple(tuple(code[v] if v > 0 else -code[-v] for v in c) for c in w.hard))

    def remake(obs: Sequence[Mapping[str, bool]]) -> GroupedProblem:
        return build_grouped(gates, nets, obs, goal, filename, structure=shared, circuit=circuit, clauses=clauses)

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
        mentioned = {abs(v) for c in body for v in c}
        if out < 1 or out not in mentioned or len(mentioned) > 13:
            return None
        mentioned.discard(out)
        ins = sorted(mentioned)
        kind = _standard_gate(body, out, ins)
        if kind is not None:
            gates.append(Gate(gate_of[h], str(out), tuple(str(v) for v in ins), gate_function(kind), kind))
            continue
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


def _gate_cnf(kind: str, out: int, ins: Sequence[int]) -> set[frozenset[int]]:
    """The clauses that say ``out = kind(ins)`` as the mbd-mobs files write them (Tseitin)."""
    if kind in ("ZERO", "ONE"):
        return {frozenset([out if kind == "ONE" else -out])}
    if kind in ("AND", "NAND", "OR", "NOR"):
        # AND: out -> each input, and all inputs -> out; the others by negating out and/or inputs
        o = out if kind in ("AND", "NOR") else -out
        s = 1 if kind in ("AND", "NAND") else -1
        return {frozenset([-o, s * i]) for i in ins} | {frozenset([o, *(-s * i for i in ins)])}
    # parity: every assignment of (ins, out) with the wrong parity is excluded by one clause
    clauses = set()
    for bits in range(1 << len(ins)):
        values = [bool(bits >> k & 1) for k in range(len(ins))]
        right = (sum(values) % 2 == 1) == (kind == "XOR")  # the output's value under these inputs
        lits = [-i if v else i for i, v in zip(ins, values)]
        clauses.add(frozenset([*lits, out if right else -out]))  # these inputs imply that value
    return clauses


def _standard_gate(body: list[list[int]], out: int, ins: Sequence[int]) -> str | None:
    """The gate type whose Tseitin clauses are exactly ``body`` (as a set of clauses), or ``None``.

    Exact, and the common case: the mbd-mobs files write each gate's clauses this way, so the
    truth table (2^inputs rows, each checked against every clause: most of the import's time
    on c432's 9-input gates) is only the fallback for anything else. The clauses' count and the
    signs in the longest one name the type, which is then checked clause for clause. A 1-input
    AND is a buffer and a 1-input NAND an inverter, which is how the simulator reads them too.
    """
    clauses = {frozenset(c) for c in body}  # a clause or a literal written twice says nothing more
    n = len(ins)
    if n == 0:
        kinds: tuple[str, ...] = ("ZERO", "ONE")
    elif n == 1:
        kinds = ("AND", "NAND")
    elif len(clauses) == n + 1:  # o iff (l1 and … and ln): the long clause holds o and every "not l"
        long = max(clauses, key=len)
        kinds = _AND_FAMILY[(out in long, -ins[0] in long)]
    elif len(clauses) == 1 << n and n <= 6:
        kinds = ("XOR", "XNOR")
    else:
        return None
    for kind in kinds:
        if _gate_cnf(kind, out, ins) == clauses:
            return kind
    return None


#: the type of an AND-like gate by the signs in its long clause: (output positive, inputs negated)
_AND_FAMILY = {(True, True): ("AND",), (False, True): ("NAND",), (False, False): ("OR",), (True, False): ("NOR",)}
