"""Circuits as gate functions on bit-vectors: the diagnosis importers' independent simulator.

This module knows nothing of the IR or the solvers. It is the oracle that re-checks what the
solvers say about a circuit (:class:`CircuitOracle`) and the predictor behind ``cda probe``.

Weak fault model: a healthy gate computes its function; a broken gate's output is anything.
A set D of broken gates is consistent with an observation when some choice of D's outputs
(and of the unobserved primary inputs) reproduces every observed net. The simulator decides
that for many observations and all those choices at once, bit-parallel: each net's value is one
Python integer whose bit ``j·L + t`` is the net's value in observation ``j`` under choice ``t``
(``L = 2^f`` lanes per observation for ``f`` free values: bit ``i`` of ``t`` is free value
``i``). One pass over the gates in topological order, a few integer operations each, answers
the question for every observation; for a diagnosis of three gates and 100 observations the
integers are 800 bits wide.

>>> c = Circuit(["a", "b"], [Gate("g", "g", ("a", "b"), gate_function("AND"))])
>>> sim = Simulator(c, [{"a": True, "b": True, "g": False}])
>>> sim.refuting([], [0]), sim.refuting(["g"], [0])
(0, None)
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from functools import reduce

from cda.contracts.deadline import NO_DEADLINE, Deadline, OutOfTime, current_deadline
from cda.ir import OracleUndecided

__all__ = [
    "BitFn",
    "Gate",
    "Circuit",
    "Simulation",
    "Simulator",
    "CircuitOracle",
    "gate_function",
    "table_function",
    "table_kind",
    "MAX_BITS",
    "MAX_SIM_BITS",
]

#: (input vectors, all-ones mask) -> output vector
BitFn = Callable[[Sequence[int], int], int]

#: widest simulation (bits per net); more observations are split into chunks, more free values
#: in one observation than this allows (2^22 lanes) make the oracle undecided
MAX_BITS = 1 << 22
#: the most bits one consistency check simulates at once, over every net (lanes × observations ×
#: nets: 8 MB of net vectors, a few times that with the temporaries). Bounded by the bits per
#: net alone, c7552's 3,719 nets held 2 GB in one simulation of a 16-gate candidate.
MAX_SIM_BITS = 1 << 26

#: gates between two looks at the run's deadline in a wide simulation pass, and what is wide (bits a net)
CHECK_EVERY = 16
WIDE_BITS = 1 << 16


def _and(xs: Sequence[int], m: int) -> int:
    return reduce(lambda a, b: a & b, xs, m)


def _or(xs: Sequence[int], m: int) -> int:
    return reduce(lambda a, b: a | b, xs, 0)


def _xor(xs: Sequence[int], m: int) -> int:
    return reduce(lambda a, b: a ^ b, xs, 0)


_FUNCTIONS: dict[str, BitFn] = {
    "AND": _and,
    "NAND": lambda xs, m: m ^ _and(xs, m),
    "OR": _or,
    "NOR": lambda xs, m: m ^ _or(xs, m),
    "XOR": _xor,
    "XNOR": lambda xs, m: m ^ _xor(xs, m),
    "NOT": lambda xs, m: m ^ xs[0],
    "BUFF": lambda xs, m: xs[0],
    "ZERO": lambda xs, m: 0,
    "ONE": lambda xs, m: m,
}


def gate_function(kind: str) -> BitFn:
    """The bit-parallel function of a gate type (AND, NAND, OR, NOR, XOR, XNOR, NOT, BUFF, ZERO, ONE)."""
    return _FUNCTIONS[kind]


def table_kind(table: Sequence[bool]) -> str | None:
    """The standard gate type with truth table ``table`` (row ``r``: input ``i`` is bit ``i`` of
    ``r``), or ``None``.

    >>> table_kind([True, True, True, False]), table_kind([False, True, False, False])
    ('NAND', None)
    """
    n = max(0, (len(table) - 1).bit_length())
    if len(table) != 1 << n:
        raise ValueError("a truth table has 2^n rows")
    rows = [[1 if (r >> i) & 1 else 0 for i in range(n)] for r in range(1 << n)]
    for kind in ("AND", "NAND", "OR", "NOR", "XOR", "XNOR", "BUFF", "NOT", "ZERO", "ONE"):
        if kind in ("BUFF", "NOT") and n != 1:
            continue
        if kind not in ("ZERO", "ONE") and n == 0:
            continue
        fn = _FUNCTIONS[kind]
        if all(bool(fn(row, 1)) == table[r] for r, row in enumerate(rows)):
            return kind
    return None


def table_function(table: Sequence[bool]) -> BitFn:
    """The function with truth table ``table`` (row ``r``: input ``i`` is bit ``i`` of ``r``), as a
    standard gate when it is one, else a sum of its true rows.

    >>> f = table_function([False, True, True, False])  # XOR of two inputs
    >>> f([0b1100, 0b1010], 0b1111) == 0b0110
    True
    """
    kind = table_kind(table)
    if kind is not None:
        return _FUNCTIONS[kind]
    n = max(0, (len(table) - 1).bit_length())
    true_rows = [r for r in range(1 << n) if table[r]]

    def minterms(xs: Sequence[int], m: int) -> int:
        out = 0
        for r in true_rows:
            term = m
            for i, x in enumerate(xs):
                term &= x if (r >> i) & 1 else m ^ x
            out |= term
        return out

    return minterms


#: interpreted passes before :meth:`Circuit.run` compiles the circuit
COMPILE_AFTER = 32
_AND, _NAND, _OR, _NOR, _XOR, _XNOR, _NOT, _BUFF, _CALL = range(9)
_OPCODE = {"AND": _AND, "NAND": _NAND, "OR": _OR, "NOR": _NOR, "XOR": _XOR, "XNOR": _XNOR, "NOT": _NOT, "BUFF": _BUFF}


@dataclass(frozen=True)
class Gate:
    """A gate: its reported ``name``, the net it drives, the nets it reads, its function."""

    name: str
    output: str
    inputs: tuple[str, ...]
    fn: BitFn
    kind: str | None = None  # a standard type (AND, …), which the compiled simulator inlines


class Circuit:
    """Gates in topological order; nets no gate drives are the primary inputs."""

    def __init__(self, inputs: Sequence[str], gates: Sequence[Gate]) -> None:
        driver = {g.output: g for g in gates}
        if len(driver) != len(gates):
            raise ValueError("two gates drive the same net")
        self.inputs = list(dict.fromkeys(list(inputs) + [n for g in gates for n in g.inputs if n not in driver]))
        order: list[Gate] = []
        state: dict[str, int] = {}
        for start in gates:
            if start.output in state:
                continue
            stack = [(start, iter(start.inputs))]
            state[start.output] = 1
            while stack:
                gate, it = stack[-1]
                nxt = next(it, None)
                if nxt is None:
                    state[gate.output] = 2
                    order.append(gate)
                    stack.pop()
                elif nxt in driver:
                    if state.get(nxt) == 1:
                        raise ValueError(f"the circuit has a cycle through net {nxt}")
                    if nxt not in state:
                        state[nxt] = 1
                        stack.append((driver[nxt], iter(driver[nxt].inputs)))
        self.gates = order
        self.by_name = {g.name: g for g in gates}
        self.nets = self.inputs + [g.output for g in order]
        self.index = {g.name: k for k, g in enumerate(order)}
        self.position = {net: i for i, net in enumerate(self.nets)}
        self._compiled: Callable[[list[int], list[int | None], int], list[int]] | None = None
        self._passes = 0
        position = self.position
        self._plan = [
            (_OPCODE.get(g.kind or "", _CALL) if g.inputs else _CALL, tuple(position[n] for n in g.inputs), g.fn)
            for g in order
        ]

    def run(self, inputs: list[int], overrides: list[int | None], mask: int) -> list[int]:
        """Every net's vector (inputs, then gates in order) for these input vectors; a gate whose
        override is not ``None`` takes that vector instead of its function.

        The first :data:`COMPILE_AFTER` passes are interpreted; then the circuit is compiled
        into one straight-line function (:meth:`_compile`), five to ten times faster a pass, but
        compiling costs as much as some forty interpreted passes (c5315: 0.06 s), and most
        searches need only a handful of passes.
        """
        if self._compiled is not None:
            return self._compiled(inputs, overrides, mask)
        self._passes += 1
        if self._passes > COMPILE_AFTER or mask.bit_length() > WIDE_BITS:  # a wide pass: seconds, and the
            # compiled one looks at the run's deadline (the interpreter does not)
            self._compiled = self._compile()
            return self._compiled(inputs, overrides, mask)
        return self._interpret(inputs, overrides, mask)

    def _interpret(self, inputs: list[int], overrides: list[int | None], mask: int) -> list[int]:
        v = list(inputs)
        push = v.append
        for (op, args, fn), o in zip(self._plan, overrides):
            if o is not None:
                push(o)
            elif op == _AND:
                r = mask
                for i in args:
                    r &= v[i]
                push(r)
            elif op == _NAND:
                r = mask
                for i in args:
                    r &= v[i]
                push(mask ^ r)
            elif op == _OR:
                r = 0
                for i in args:
                    r |= v[i]
                push(r)
            elif op == _NOR:
                r = 0
                for i in args:
                    r |= v[i]
                push(mask ^ r)
            elif op == _XOR:
                r = 0
                for i in args:
                    r ^= v[i]
                push(r)
            elif op == _XNOR:
                r = 0
                for i in args:
                    r ^= v[i]
                push(mask ^ r)
            elif op == _NOT:
                push(mask ^ v[args[0]])
            elif op == _BUFF:
                push(v[args[0]])
            else:
                push(fn([v[i] for i in args], mask))
        return v

    def _compile(self) -> Callable[[list[int], list[int | None], int], list[int]]:
        """One straight-line Python function for the whole circuit: ``run(inputs, overrides, mask)``
        returns every net's vector (inputs, then gates in order); a gate whose override is not
        ``None`` takes that vector instead of its function. Ten times faster than a loop
        calling each gate's function (c1908: 0.2 ms against 2 ms a pass).

        A wide pass (more than :data:`WIDE_BITS` bits a net) looks at the run's deadline every
        :data:`CHECK_EVERY` gates (:func:`~cda.contracts.deadline.current_deadline`, which a cancel
        also expires): at the widest (2^22 bits a net) one pass over c7552 took 28 s and 1.8 GB, and
        a search that reached one ran 46 s past ``--timeout 20`` and ignored Ctrl-C. A narrow pass
        (milliseconds) runs a copy without the checks."""
        var = {net: f"x{i}" for i, net in enumerate(self.nets)}
        lines = ["def run(V, O, m, F, C):"]
        lines += [f"    {var[net]} = V[{i}]" for i, net in enumerate(self.inputs)]
        templates = {
            "AND": "({and_})", "NAND": "(m ^ ({and_}))", "OR": "({or_})", "NOR": "(m ^ ({or_}))",
            "XOR": "({xor})", "XNOR": "(m ^ ({xor}))", "NOT": "(m ^ {a})", "BUFF": "{a}", "ZERO": "0", "ONE": "m",
        }
        for k, gate in enumerate(self.gates):
            args = [var[n] for n in gate.inputs]
            if gate.kind in templates and (args or gate.kind in ("ZERO", "ONE")):
                expr = templates[gate.kind].format(
                    and_=" & ".join(args), or_=" | ".join(args), xor=" ^ ".join(args), a=args[0] if args else "0"
                )
            else:
                expr = f"F[{k}]([{', '.join(args)}], m)"
            lines.append(f"    t = O[{k}]")
            lines.append(f"    {var[gate.output]} = {expr} if t is None else t")
            if k % CHECK_EVERY == CHECK_EVERY - 1:
                lines.append("    C()  # checked")
        lines.append("    return [" + ", ".join(var[n] for n in self.nets) + "]")
        checked: dict[str, object] = {}
        exec(compile("\n".join(lines), "<circuit>", "exec"), checked)  # noqa: S102 - code generated above
        plain: dict[str, object] = {}
        exec(compile("\n".join(line for line in lines if not line.endswith("# checked")), "<circuit>", "exec"),
             plain)  # noqa: S102 - the same code without the checks
        functions = [g.fn for g in self.gates]

        def bound(inputs: list[int], overrides: list[int | None], mask: int) -> list[int]:
            if mask.bit_length() <= WIDE_BITS:
                return plain["run"](inputs, overrides, mask, functions, None)  # type: ignore[operator, no-any-return]
            deadline = current_deadline()
            return checked["run"](inputs, overrides, mask, functions,  # type: ignore[operator, no-any-return]
                                  lambda: deadline.check("while simulating the circuit"))

        return bound

    def evaluate(self, inputs: Mapping[str, bool], flipped: Collection[str] = ()) -> dict[str, bool]:
        """Every net's value for one input vector, the gates ``flipped`` computing the negation of
        their function (an injected fault that always shows at the gate).

        >>> c = Circuit(["a"], [Gate("n", "n", ("a",), gate_function("NOT"))])
        >>> c.evaluate({"a": True}), c.evaluate({"a": True}, ["n"])
        ({'a': True, 'n': False}, {'a': True, 'n': True})
        """
        values = {n: 1 if inputs[n] else 0 for n in self.inputs}
        bad = set(flipped)
        for gate in self.gates:
            v = gate.fn([values[n] for n in gate.inputs], 1)
            values[gate.output] = v ^ 1 if gate.name in bad else v
        return {n: bool(values[n]) for n in self.nets}


def _spread(flags: Sequence[bool], lanes: int) -> int:
    """Block ``j`` (``lanes`` bits wide) all ones when ``flags[j]``, else zeros."""
    ones, zeros = "1" * lanes, "0" * lanes
    text = "".join(ones if b else zeros for b in reversed(flags))
    return int(text, 2) if text else 0


def _lane_pattern(i: int, lanes: int) -> int:
    """Within one block: the lanes whose index has bit ``i`` set."""
    half = 1 << i
    unit = "1" * half + "0" * half  # most significant first: lane index bits run upwards from the right
    return int(unit * (lanes // (2 * half)), 2)


@dataclass
class Simulation:
    """Net values over ``count`` observations × ``lanes`` choices, and the consistent lanes ``ok``.

    ``vector[position[net]]`` is the net's value (``value(net)``), in the order of ``Circuit.nets``.
    """

    vector: list[int]
    position: Mapping[str, int]
    ok: int
    lanes: int
    count: int

    def value(self, net: str) -> int:
        return self.vector[self.position[net]]

    def block(self, vector: int, j: int) -> int:
        return (vector >> (j * self.lanes)) & ((1 << self.lanes) - 1)

    def consistent(self, j: int) -> bool:
        return self.block(self.ok, j) != 0


class Simulator:
    """Bit-parallel simulation of a circuit under a list of observations (net → value)."""

    def __init__(self, circuit: Circuit, observations: Sequence[Mapping[str, bool]]) -> None:
        known = set(circuit.nets)
        for k, obs in enumerate(observations, 1):
            unknown = sorted(set(obs) - known)
            if unknown:
                raise ValueError(f"observation {k} names unknown net(s) {', '.join(unknown[:5])}")
        self.circuit = circuit
        self.observations = [dict(o) for o in observations]
        self._observed_nets = list(dict.fromkeys(n for o in self.observations for n in o))
        self._everywhere = set.intersection(*(set(o) for o in self.observations)) if self.observations else set()
        self._cache: dict[
            tuple[int, int, int], tuple[dict[str, tuple[int, int]], list[tuple[int, int, int]], list[int] | None]
        ] = {}

    def _observed(
        self, start: int, stop: int, lanes: int
    ) -> tuple[dict[str, tuple[int, int]], list[tuple[int, int, int]], list[int] | None]:
        """For observations ``start:stop`` spread over ``lanes``: each observed net's (values, where
        observed); the checks on gate outputs as (position, values, where); the input vectors when
        every input is observed everywhere (else ``None``). Cached: the search asks again and again."""
        key = (start, stop, lanes)
        found = self._cache.get(key)
        if found is None:
            chunk = self.observations[start:stop]
            observed: dict[str, tuple[int, int]] = {}
            deadline = current_deadline() if lanes * (stop - start) > WIDE_BITS else NO_DEADLINE
            for net in self._observed_nets:
                deadline.check("while spreading the observations for a simulation")  # wide: a second a net
                seen = [net in o for o in chunk]
                if any(seen):
                    observed[net] = (_spread([o.get(net, False) for o in chunk], lanes), _spread(seen, lanes))
            c = self.circuit
            inputs = set(c.inputs)
            checks = [(c.position[n], v, w) for n, (v, w) in observed.items() if n not in inputs]
            full = _spread([True] * len(chunk), lanes)
            fixed = [observed[n][0] for n in c.inputs] if all(
                n in observed and observed[n][1] == full for n in c.inputs) else None
            if len(self._cache) > 64:
                self._cache.clear()
            found = self._cache[key] = (observed, checks, fixed)
        return found

    def _free(self, broken: Collection[str], indices: Sequence[int]) -> list[str]:
        """Nets whose value is chosen freely in some of these observations: unobserved primary
        inputs and unobserved outputs of broken gates."""
        outs = [self.circuit.by_name[g].output for g in sorted(broken)]
        everywhere = self._everywhere
        obs = [self.observations[j] for j in indices]
        return [n for n in self.circuit.inputs + outs if n not in everywhere and not all(n in o for o in obs)]

    def simulate(self, broken: Collection[str], start: int, stop: int) -> Simulation:
        """Observations ``start:stop`` with the gates ``broken`` free."""
        free = self._free(broken, range(start, stop))
        if (1 << len(free)) * (stop - start) > MAX_BITS and stop - start > 1:
            raise OracleUndecided(f"{(1 << len(free)) * (stop - start)} lanes is too wide for one simulation")
        return self._simulate(broken, start, stop, free, {})

    def _simulate(
        self, broken: Collection[str], start: int, stop: int, free: Sequence[str], fixed: Mapping[str, bool]
    ) -> Simulation:
        """Observations ``start:stop``, the nets ``free`` chosen over the lanes and those in ``fixed``
        (free too, where unobserved) set to the value given."""
        lanes = 1 << len(free)
        count = stop - start
        mask = _spread([True] * count, lanes)
        observed, checks, fixed_inputs = self._observed(start, stop, lanes)
        c = self.circuit
        pattern: dict[str, int] = {net: mask if value else 0 for net, value in fixed.items()}
        if free:
            base = _spread_unit(count, lanes)
            deadline = current_deadline() if lanes * count > WIDE_BITS else NO_DEADLINE
            for i, net in enumerate(free):
                deadline.check("while preparing a simulation")
                pattern[net] = _lane_pattern(i, lanes) * base
        overrides: list[int | None] = [None] * len(c.gates)
        exempt: set[int] = set()  # outputs of broken gates: set to what was observed, never checked
        for name in broken:
            gate = c.by_name[name]
            overrides[c.index[name]] = _chosen(gate.output, observed, pattern)
            exempt.add(c.position[gate.output])
        inputs = fixed_inputs if fixed_inputs is not None and not any(n in pattern for n in c.inputs) else [
            _chosen(net, observed, pattern) for net in c.inputs
        ]
        vector = c.run(inputs, overrides, mask)
        ok = mask
        for position, seen, where in checks:
            if position not in exempt:
                ok &= ~((vector[position] ^ seen) & where)
        return Simulation(vector, c.position, ok & mask, lanes, count)

    def refuting(self, broken: Collection[str], order: Sequence[int], deadline: Deadline = NO_DEADLINE) -> int | None:
        """The first observation index in ``order`` with which ``broken`` is inconsistent, or ``None``.

        One simulation holds at most :data:`MAX_SIM_BITS` bits over all nets (lanes ×
        observations × nets), so observations are simulated in ranges, and an observation
        whose lanes alone pass that is simulated in parts: the first free values as lanes, the
        others fixed in turn, until some lane is consistent. More than :data:`MAX_BITS` lanes
        in one observation make the oracle undecided. Raises
        :class:`~cda.contracts.deadline.OutOfTime` when ``deadline`` passes (read between
        simulations: a search streaming candidates must not outlive its budget here).
        """
        if not order:
            return None
        free = self._free(broken, order)
        if len(free) > MAX_BITS.bit_length() - 1:
            raise OracleUndecided(f"{len(broken)} broken gates leave too many values to simulate")
        lanes = 1 << len(free)
        width = max(1, MAX_SIM_BITS // max(1, len(self.circuit.nets)))  # bits per net in one simulation
        wanted = set(order)
        bad: set[int] = set()
        if lanes <= width:
            size = width // lanes
            lo, hi = min(order), max(order) + 1
            for start in range(lo, hi, size):
                stop = min(start + size, hi)
                if not any(j in wanted for j in range(start, stop)):
                    continue
                if deadline.expired():
                    raise OutOfTime("while checking a candidate against the observations by simulation")
                sim = self._simulate(broken, start, stop, free, {})
                bad.update(j for j in range(start, stop) if j in wanted and not sim.consistent(j - start))
            return next((j for j in order if j in bad), None)
        inner = width.bit_length() - 1  # this many free values as lanes, the others fixed in turn
        for j in order:
            own = self._free(broken, [j])
            head, tail = own[:inner], own[inner:]
            for t in range(1 << len(tail)):
                if deadline.expired():
                    raise OutOfTime("while checking a candidate against the observations by simulation")
                fixed = {net: bool(t >> i & 1) for i, net in enumerate(tail)}
                if self._simulate(broken, j, j + 1, head, fixed).consistent(0):
                    break
            else:
                return j
        return None


def _spread_unit(count: int, lanes: int) -> int:
    """Bit ``j·lanes`` set for each block ``j``: multiplying a one-block pattern by it repeats it."""
    return int(("0" * (lanes - 1) + "1") * count, 2) if count else 0


def _chosen(net: str, observed: Mapping[str, tuple[int, int]], pattern: Mapping[str, int]) -> int:
    """An input-like net: its observed value where observed, its free pattern elsewhere."""
    seen = observed.get(net)
    free = pattern.get(net, 0)
    if seen is None:
        return free
    return (seen[0] & seen[1]) | (free & ~seen[1])


class CircuitOracle:
    """:class:`~cda.ir.ConsistencyOracle` for a circuit problem: abducible atom →
    gate, and group ``j`` is observation ``j``."""

    name = "bit-parallel simulation of the netlist"
    monotone = True  # weak fault model: one more broken gate only frees one more output

    def __init__(self, simulator: Simulator, gate_of_atom: Mapping[str, str]) -> None:
        self.simulator = simulator
        self.gate_of_atom = dict(gate_of_atom)

    def refuting(self, assumed: frozenset[str], groups: Sequence[int], deadline: Deadline = NO_DEADLINE) -> int | None:
        return self.simulator.refuting([self.gate_of_atom[a] for a in assumed], groups, deadline)


def truth_table(fn: Callable[[list[bool]], bool | None], n: int) -> list[bool] | None:
    """Rows of ``fn`` over ``n`` inputs (input ``i`` is bit ``i`` of the row); ``None`` if a row is undefined."""
    out: list[bool] = []
    for bits in itertools.product([False, True], repeat=n):
        value = fn(list(reversed(bits)))
        if value is None:
            return None
        out.append(value)
    return out
