"""``cda probe``: the next net to measure, by expected information gain, and a simulated probing loop.

Given a circuit, its observations (test vectors: inputs and outputs) and the current minimal
diagnoses, a *probe* is an unmeasured net in one test vector. Its value is predicted under
each diagnosis D by simulating the circuit with D's gates' outputs free (weak fault model,
:mod:`cda.diagnosis.circuit`): the net is 1 (or 0) under D when every choice of D's outputs
that reproduces what was observed gives it that value, and undetermined otherwise. With a
prior over the diagnoses, the expected information gain of a probe is the entropy of the
prior minus the expected entropy of the posterior after seeing the net's value; an
undetermined diagnosis stays possible either way (likelihood 1/2, as the engine's next tests
count it). The prior comes from a per-gate failure probability ``p_g`` (default 0.01, the
same for every gate): P(D) ∝ Π_{g ∈ D} p_g / (1 − p_g), the usual independent-failure prior
restricted to the minimal diagnoses. Ties are broken by test vector, then by the net's
position in the netlist (inputs, then gates in topological order).

The simulated loop injects a fault (gates whose output is the negation of their function),
draws test vectors that expose it, diagnoses, measures the best net in the faulty circuit,
adds the value to that vector's observation, and repeats until one diagnosis remains or no
net is informative. A measurement that some diagnosis predicted the other way refutes it and
the diagnoses are recomputed by the engine; one that none contradicted leaves them all
minimal and adds none (every new diagnosis contains an old one, still consistent), so they
are kept: exact, and much cheaper.
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, TextIO

from cda.contracts import limits
from cda.contracts.deadline import NO_DEADLINE, Deadline, OutOfTime
from cda.diagnosis.circuit import Circuit, Simulation, Simulator
from cda.diagnosis.names import counted, diagnosis_order, sorted_gates
from cda.diagnosis.problem import CircuitInstance, ab_atom
from cda.diagnosis.reports import ProbeOption, ProbeReport, ProbeRun, ProbeStep
from cda.engine import Options, choose_backend, expected_gains, run
from cda.errors import CDAError
from cda.ir import OracleUndecided

if TYPE_CHECKING:  # numpy is imported where probing first needs it: `cda diagnose` never does
    import numpy as np

__all__ = [
    "DEFAULT_FAILURE",
    "ProbeChoice",
    "ProbeState",
    "ProbeReport",
    "ProbeStep",
    "ProbeRun",
    "diagnosis_prior",
    "failing_vectors",
    "probe",
    "simulate_probing",
    "interactive_probing",
    "MAX_NET_COPIES",
    "vector_budget",
]

#: the most nets a simulated probing session holds: test vectors × the circuit's nets. Each
#: test vector is one more copy of the circuit for the engine, the simulator and the candidate
#: probes (a (vector, net) pair each, with a likelihood per diagnosis): 100,000 vectors of c432
#: took 2.6 GB and 28 s. 250,000 is 1,275 vectors of c432 (196 nets), 25 of c6288 (2,448)
MAX_NET_COPIES = 250_000

DEFAULT_FAILURE = 0.01
_NO_GAIN = 1e-12  # bits: below this a probe is uninformative

FailureProbability = float | Mapping[str, float]


@dataclass(frozen=True)
class ProbeChoice:
    """Measure ``net`` in test vector ``observation`` (0-based): ``gain`` bits expected, P(1) = ``p_one``."""

    observation: int
    net: str
    gain: float
    p_one: float


def diagnosis_prior(diagnoses: Sequence[Sequence[str]], failure: FailureProbability = DEFAULT_FAILURE) -> list[float]:
    """P(D) ∝ Π_{g ∈ D} p_g / (1 − p_g), normalised over ``diagnoses``.

    >>> [round(p, 4) for p in diagnosis_prior([["a"], ["b", "c"]], 0.1)]
    [0.9, 0.1]
    """
    if not diagnoses:
        return []

    def p(gate: str) -> float:
        value = failure.get(gate, DEFAULT_FAILURE) if isinstance(failure, Mapping) else failure
        if not 0 < value < 1:
            raise CDAError(f"a failure probability must lie strictly between 0 and 1 (gate {gate}: {value})")
        return value

    logs = [math.fsum(math.log(p(g) / (1 - p(g))) for g in d) for d in diagnoses]
    top = max(logs)
    weights = [math.exp(x - top) for x in logs]
    total = math.fsum(weights)
    return [w / total for w in weights]


class ProbeState:
    """The diagnoses, their prior, and one simulation of each under the current observations."""

    def __init__(
        self,
        circuit: Circuit,
        observations: Sequence[Mapping[str, bool]],
        diagnoses: Sequence[Sequence[str]],
        failure: FailureProbability = DEFAULT_FAILURE,
    ) -> None:
        self.circuit = circuit
        self.observations = [dict(o) for o in observations]
        self.diagnoses = [sorted_gates(d) for d in diagnoses]
        self.prior = diagnosis_prior(self.diagnoses, failure)
        simulator = Simulator(circuit, self.observations)
        n = len(self.observations)
        try:
            self.sims: list[Simulation] = [simulator.simulate(d, 0, n) for d in self.diagnoses]
        except OracleUndecided as exc:
            raise CDAError(f"cda probe: a diagnosis leaves too many values open to simulate ({exc})") from None
        self._position = {net: i for i, net in enumerate(circuit.nets)}

    def candidates(self) -> list[tuple[int, str]]:
        """Every net not yet observed in each test vector."""
        return [(j, net) for j, obs in enumerate(self.observations) for net in self.circuit.nets if net not in obs]

    def likelihoods(self, candidates: Sequence[tuple[int, str]], deadline: Deadline = NO_DEADLINE) -> np.ndarray:
        """P(net reads 1 | D) for each diagnosis (row) and candidate (column): 1, 0, or 1/2.

        Raises :class:`~cda.contracts.deadline.OutOfTime` when ``deadline`` passes (read once
        per diagnosis and test vector)."""
        import numpy as np

        out = np.empty((len(self.sims), len(candidates)), dtype=float)
        by_vector: dict[int, list[tuple[int, str]]] = {}
        for c, (j, net) in enumerate(candidates):
            by_vector.setdefault(j, []).append((c, net))
        position = self.circuit.position
        for d, sim in enumerate(self.sims):
            width = (1 << sim.lanes) - 1
            vector = sim.vector
            for j, items in by_vector.items():
                if deadline.tick():
                    raise OutOfTime(f"while ranking probes ({d:,} of {len(self.sims):,} diagnoses)")
                shift = j * sim.lanes
                ok = (sim.ok >> shift) & width
                row = out[d]
                for c, net in items:
                    v = (vector[position[net]] >> shift) & ok
                    row[c] = 1.0 if v == ok else 0.0 if v == 0 else 0.5
        return out

    def rank(
        self, candidates: Sequence[tuple[int, str]] | None = None, deadline: Deadline = NO_DEADLINE
    ) -> list[ProbeChoice]:
        """Probes by expected information gain, best first; ties by test vector, then netlist position."""
        cands = self.candidates() if candidates is None else list(candidates)
        if not cands or not self.sims:
            return []
        gains, p1 = expected_gains(self.prior, self.likelihoods(cands, deadline))
        choices = [
            ProbeChoice(j, net, round(float(g), 12) + 0.0, round(float(p), 12) + 0.0)
            for (j, net), g, p in zip(cands, gains, p1)
        ]
        choices.sort(key=lambda c: (-c.gain, c.observation, self._position[c.net]))
        return choices

    def survivors(self) -> list[list[str]]:
        """The diagnoses still consistent with every observation (after :meth:`measure`)."""
        out = []
        for d, sim in zip(self.diagnoses, self.sims):
            width = (1 << sim.lanes) - 1
            if all((sim.ok >> (j * sim.lanes)) & width for j in range(sim.count)):
                out.append(d)
        return out

    def measure(self, j: int, net: str, value: bool) -> bool:
        """Record ``net = value`` in test vector ``j``; ``True`` when it refutes some diagnosis.

        A measurement only removes choices of the broken gates' outputs (lanes), so each
        simulation is updated by masking its consistent lanes, with no re-simulation.
        """
        self.observations[j][net] = value
        refuted = False
        for sim in self.sims:
            width = (1 << sim.lanes) - 1
            shift = j * sim.lanes
            seen = (sim.value(net) >> shift) & width
            agree = seen if value else width ^ seen
            keep = ~(width << shift) | (agree << shift)
            sim.ok &= keep
            if (sim.ok >> shift) & width == 0:
                refuted = True
        return refuted


# ---- diagnosing through the engine -----------------------------------------------------------
def _diagnoses(
    inst: CircuitInstance,
    observations: Sequence[Mapping[str, bool]],
    backend: str,
    max_size: int | None,
    cap: int,
    timeout: float | None,
    known: Sequence[Sequence[str]] = (),
) -> tuple[list[list[str]], bool, bool]:
    """(diagnoses in canonical order, complete, timed out). ``known``: diagnoses minimal under
    fewer observations and consistent with these, which the engine re-checks and then skips."""
    if inst.remake is None:
        raise CDAError("cda probe needs a circuit it can rebuild under new observations")
    problem = inst.remake(observations)
    options = Options(
        backend=backend, timeout=timeout, max_hypotheses=cap, max_explanation_size=max_size,
        known_explanations=tuple(tuple(ab_atom(g) for g in d) for d in known),
    )
    result = run(problem, options)
    gate_of = {a.name: a.args[0] for a in problem.base.atoms.values() if a.kind == "hyp"}
    found = [sorted_gates(gate_of[a] for a in d) for d in (result.minimal_explanations or [])]
    ranked = sorted(found, key=diagnosis_order)  # 7 before 15
    return ranked, result.minimal_complete and not result.partial, result.partial


def vector_budget(circuit: Circuit, asked: int) -> tuple[int, str | None]:
    """How many test vectors to draw when ``asked`` for, and why fewer, if fewer: never more
    than the circuit has distinct input vectors (2^inputs), nor more copies than
    :data:`MAX_NET_COPIES` nets allow.

    >>> from cda.diagnosis.circuit import Gate, gate_function
    >>> circuit = Circuit(["a", "b"], [Gate("g", "g", ("a", "b"), gate_function("AND"), "AND")])
    >>> vector_budget(circuit, 100)
    (4, 'the circuit has 2 inputs, so 4 distinct test vectors: 4 drawn, not 100')
    >>> vector_budget(circuit, 3)
    (3, None)
    """
    distinct = 1 << len(circuit.inputs) if len(circuit.inputs) < 63 else asked
    room = max(1, MAX_NET_COPIES // max(1, len(circuit.nets)))
    if asked > distinct and distinct <= room:
        n = len(circuit.inputs)
        return distinct, f"the circuit has {n} input{'s' if n != 1 else ''}, so {distinct:,} distinct test vectors: {distinct:,} drawn, not {asked:,}"
    if asked > room:
        return room, (
            f"{room:,} test vectors drawn, not {asked:,}: each is one more copy of the circuit's "
            f"{len(circuit.nets):,} nets, and a probing session holds at most {MAX_NET_COPIES:,}"
        )
    return asked, None


def failing_vectors(
    circuit: Circuit,
    outputs: Sequence[str],
    flipped: Sequence[str],
    count: int,
    rng: random.Random,
    tries: int = 10_000,
    deadline: Deadline = NO_DEADLINE,
) -> list[dict[str, bool]]:
    """``count`` distinct random test vectors (inputs and outputs of the faulty circuit), the first
    one failing (some output differs from the healthy circuit's); ``[]`` if none of ``tries`` draws
    fails. ``tries`` bounds only the search for that first vector: the others are drawn as they
    come, a vector drawn twice is drawn again (the same inputs are the same observation), and at
    most 2^inputs are returned. Raises :class:`~cda.contracts.deadline.OutOfTime` when
    ``deadline`` passes."""
    return [observed for observed, _ in _failing(circuit, outputs, flipped, count, rng, tries, deadline)]


def _failing(
    circuit: Circuit,
    outputs: Sequence[str],
    flipped: Sequence[str],
    count: int,
    rng: random.Random,
    tries: int,
    deadline: Deadline,
) -> list[tuple[dict[str, bool], dict[str, bool]]]:
    """:func:`failing_vectors`, each with every net's value in the faulty circuit (the truth a
    simulated probe reads: computed once, while drawing)."""
    names = circuit.inputs
    distinct = 1 << len(names) if len(names) < 63 else count + 1
    count = min(count, distinct)
    if 2 * count > distinct:  # most of the vectors: every one, in a random order (no long tail of repeats)
        order = list(range(distinct))
        rng.shuffle(order)
        pool: Sequence[int] | None = order
    else:
        pool = None

    def draw(k: int) -> dict[str, bool]:
        if pool is not None:
            bits = pool[k]
            return {name: bool(bits >> i & 1) for i, name in enumerate(names)}
        return {i: rng.random() < 0.5 for i in names}

    def progress(done: int) -> OutOfTime:
        return OutOfTime(f"while drawing test vectors ({done:,} of {count:,})")

    first: tuple[dict[str, bool], dict[str, bool]] | None = None
    k = 0
    for k in range(len(pool) if pool is not None else tries):  # the pool: search it all
        if deadline.tick():
            raise progress(0)
        vector = draw(k)
        bad = circuit.evaluate(vector, flipped)
        good = circuit.evaluate(vector)
        if any(good[o] != bad[o] for o in outputs):
            first = {**vector, **{o: bad[o] for o in outputs}}, bad
            break
    if first is None:
        return []
    out = [first]
    seen = {tuple(first[0][i] for i in names)}
    rest = (j for j in range(len(pool)) if j != k) if pool is not None else None
    while len(out) < count:
        if deadline.tick():
            raise progress(len(out))
        vector = draw(next(rest)) if rest is not None else draw(0)
        key = tuple(vector[i] for i in names)
        if key in seen:
            continue
        seen.add(key)
        bad = circuit.evaluate(vector, flipped)
        out.append(({**vector, **{o: bad[o] for o in outputs}}, bad))
    return out


class _Session:
    """The diagnoses under a growing set of measurements: what both probing loops share.

    A measurement only removes lanes from the diagnoses' simulations (:meth:`ProbeState.measure`);
    when it refutes one of them, the engine diagnoses again, seeded with the survivors (still
    minimal, so it re-checks and skips them), and the state is rebuilt.
    """

    def __init__(
        self,
        inst: CircuitInstance,
        observed: Sequence[Mapping[str, bool]],
        backend: str,
        failure: FailureProbability,
        max_size: int | None,
        cap: int,
        timeout: float | None,
        file: str,
        deadline: Deadline | None = None,
    ) -> None:
        if inst.circuit is None:
            raise CDAError(f"{file}: cda probe needs a plain circuit (one function per gate)")
        self.inst, self.circuit = inst, inst.circuit
        self.backend = choose_backend(inst.problem.base, backend)
        self.failure, self.max_size, self.cap, self.timeout = failure, max_size, cap, timeout
        #: the whole session's budget, when it has one (else each diagnosis gets ``timeout``)
        self.deadline = deadline
        self.observed = [dict(o) for o in observed]
        self.diagnoses, self.complete, self.timed_out = _diagnoses(
            inst, self.observed, self.backend, max_size, cap, self._timeout()
        )
        self.state = ProbeState(self.circuit, self.observed, self.diagnoses, failure)

    def _timeout(self) -> float | None:
        """The time one diagnosis may take: what is left of the session's budget, else ``timeout``."""
        if self.deadline is None:
            return self.timeout
        return self.deadline.remaining()

    def measure(self, j: int, net: str, value: bool) -> None:
        """Record ``net = value`` in test vector ``j`` and bring the diagnoses up to date."""
        self.observed[j][net] = value
        if self.state.measure(j, net, value):
            known = self.state.survivors()
            self.diagnoses, done, late = _diagnoses(
                self.inst, self.observed, self.backend, self.max_size, self.cap, self._timeout(), known
            )
            self.complete, self.timed_out = self.complete and done, self.timed_out or late
            self.state = ProbeState(self.circuit, self.observed, self.diagnoses, self.failure)

    def resolved(self) -> bool:
        """One diagnosis left of a complete list (within ``max_size``, which the notes state): a
        list cut by time or by the cap proves nothing about the diagnoses it did not hold."""
        return len(self.diagnoses) == 1 and self.complete and not self.timed_out

    def bound_notes(self) -> list[str]:
        """What ``max_size`` hid: said whenever the bound is set, loudest when nothing is left."""
        k = self.max_size
        if k is None or self.timed_out:
            return []
        gates = f"{k} gate{'s' if k != 1 else ''}"
        if not self.diagnoses:
            return [
                f"no diagnosis has at most {gates}: the observations need more broken gates than "
                f"--max-size {k} allows, so the bound hid every diagnosis (raise it or drop it)"
            ]
        return [f"only diagnoses of at most {gates} were sought (--max-size {k}): larger ones may exist"]

    def report(self, top: int, file: str, time_s: float, notes: Sequence[str] = ()) -> ProbeReport:
        """The diagnoses and the ``top`` informative probes, best first."""
        out = list(notes) + self.bound_notes()
        if self.timed_out:
            out.append("time ran out while diagnosing: the diagnoses (and gains) are over those found")
        elif not self.complete:
            out.append(f"the diagnoses are not all enumerated: the gains are over the {len(self.diagnoses)} found")
        several = len(self.diagnoses) > 1
        try:
            ranked = [c for c in self.state.rank(None, self.deadline or NO_DEADLINE) if c.gain > _NO_GAIN][:top] if several else []
        except OutOfTime as exc:
            self.timed_out, ranked, several = True, [], False
            out.append(f"time ran out {exc.where}: no probe is proposed")
        if several and not ranked:
            out.append("no unmeasured net is informative: every diagnosis predicts the same for each")
        return ProbeReport(
            file=file, backend=self.backend, diagnoses=self.diagnoses, complete=self.complete,
            timed_out=self.timed_out, observations=len(self.observed), max_size=self.max_size,
            probes=[ProbeOption(observation=c.observation + 1, net=c.net, gain_bits=c.gain, p_one=c.p_one) for c in ranked],
            time_s=round(time_s, 4), notes=out,
        )


def probe(
    inst: CircuitInstance,
    *,
    backend: str = "auto",
    top: int = 5,
    failure: FailureProbability = DEFAULT_FAILURE,
    max_size: int | None = None,
    cap: int = 1000,
    timeout: float | None = None,
    file: str = "<circuit>",
) -> ProbeReport:
    """The current minimal diagnoses and the ``top`` probes by expected information gain.

    With more than ``cap`` diagnoses (or ``max_size``), the gain is computed over the first
    ``cap`` in canonical order (size, then names), the most probable under a uniform prior.
    """
    start = time.perf_counter()
    deadline = Deadline(None if timeout is None else limits.seconds("timeout", timeout))
    session = _Session(inst, inst.observed, backend, failure, max_size, cap, timeout, file, deadline)
    return session.report(top, file, time.perf_counter() - start, inst.notes)


def simulate_probing(
    inst: CircuitInstance,
    flipped: Sequence[str],
    *,
    strategy: str = "ig",
    vectors: int = 1,
    seed: int = 0,
    backend: str = "auto",
    failure: FailureProbability = DEFAULT_FAILURE,
    max_size: int | None = None,
    cap: int = 1000,
    max_probes: int | None = None,
    timeout: float | None = None,
    file: str = "<circuit>",
    observations: Sequence[Mapping[str, bool]] | None = None,
) -> ProbeRun:
    """Inject ``flipped``, draw ``vectors`` test vectors exposing it (seeded), then measure and
    re-diagnose until one diagnosis remains, no probe is informative, or ``max_probes``.

    ``strategy``: ``ig`` (best expected information gain) or ``random`` (a random unmeasured
    net, as a baseline). ``observations`` replaces the drawn vectors (their outputs must be
    the faulty circuit's).
    """
    start = time.perf_counter()
    deadline = Deadline(None if timeout is None else limits.seconds("timeout", timeout))
    circuit = inst.circuit
    if circuit is None:
        raise CDAError(f"{file}: cda probe needs a plain circuit (one function per gate)")
    if strategy not in ("ig", "random"):
        raise CDAError(f"unknown probing strategy {strategy!r} (choose ig or random)")
    unknown = sorted(set(flipped) - set(circuit.by_name))
    if unknown or not flipped:
        raise CDAError(f"--inject names no gate of the circuit: {', '.join(unknown) or '(none given)'}")
    rng = random.Random(limits.seed("seed", seed))
    notes: list[str] = []
    if observations is None:
        count, why = vector_budget(circuit, vectors)
        if why is not None:
            notes.append(why)
        try:
            pairs = _failing(circuit, inst.outputs, flipped, count, rng, 10_000, deadline)
        except OutOfTime as exc:  # the budget's note said how many would be drawn: not so; the
            return _out_of_time(file, strategy, flipped, exc, [], start)  # note says how many were
        if not pairs:
            raise CDAError(f"no random test vector exposes the fault {', '.join(flipped)} at the outputs")
        drawn, truth = [o for o, _ in pairs], [t for _, t in pairs]
    else:
        drawn = [dict(o) for o in observations]
        truth = [circuit.evaluate({i: o[i] for i in circuit.inputs}, flipped) for o in drawn]
    session = _Session(inst, drawn, backend, failure, max_size, cap, timeout, file, deadline)
    initial = len(session.diagnoses)
    unmeasured = session.state.candidates()
    steps: list[ProbeStep] = []
    limit = len(unmeasured) if max_probes is None else max_probes
    while len(session.diagnoses) > 1 and len(steps) < limit and unmeasured:
        if deadline.expired():
            if not session.timed_out:  # else the diagnoses ran out, said below
                notes.append(f"time ran out while probing (after {len(steps)} probe{'s' if len(steps) != 1 else ''})")
            session.timed_out = True
            break
        if strategy == "ig":
            try:
                ranked = session.state.rank(unmeasured, deadline)
            except OutOfTime as exc:
                session.timed_out = True
                notes.append(f"time ran out {exc.where}, after {len(steps)} probe{'s' if len(steps) != 1 else ''}")
                break
            if not ranked or ranked[0].gain <= _NO_GAIN:
                notes.append("stopped: no unmeasured net is informative")
                break
            choice = ranked[0]
            j, net, gain = choice.observation, choice.net, choice.gain
        else:
            j, net = unmeasured[rng.randrange(len(unmeasured))]
            gain = None
        unmeasured.remove((j, net))
        value = truth[j][net]
        session.measure(j, net, value)
        steps.append(ProbeStep(observation=j + 1, net=net, value=value, gain_bits=gain, diagnoses=len(session.diagnoses)))
    notes = session.bound_notes() + notes
    if session.timed_out:
        if not any(n.startswith("time ran out") for n in notes):
            notes.append("time ran out while diagnosing: some diagnosis lists were partial")
    elif not session.complete:
        notes.append("some diagnosis lists were capped")
    return ProbeRun(
        file=file, backend=session.backend, strategy=strategy, injected=sorted_gates(flipped), vectors=len(drawn),
        timed_out=session.timed_out, initial_diagnoses=initial, steps=steps, final=session.diagnoses,
        resolved=session.resolved(), probes=len(steps), time_s=round(time.perf_counter() - start, 4),
        notes=notes,
    )


def _out_of_time(
    file: str, strategy: str, flipped: Sequence[str], exc: OutOfTime, notes: list[str], start: float
) -> ProbeRun:
    """The labelled partial run of a session whose budget ran out before any diagnosis."""
    return ProbeRun(
        file=file, backend="none", strategy=strategy, injected=sorted_gates(flipped), vectors=0, timed_out=True,
        initial_diagnoses=0, steps=[], final=[], resolved=False, probes=0,
        time_s=round(time.perf_counter() - start, 4),
        notes=[*notes, f"time ran out {exc.where}: nothing was diagnosed"],
    )


# ---- the CLI entry ----------------------------------------------------------------------------
def interactive_probing(
    inst: CircuitInstance,
    ask: Callable[[str], str | None],
    out: TextIO,
    *,
    backend: str = "auto",
    top: int = 5,
    failure: FailureProbability = DEFAULT_FAILURE,
    max_size: int | None = None,
    timeout: float | None = None,
    file: str = "<circuit>",
) -> tuple[list[dict[str, bool]], bool]:
    """Probe, ask for the measured value, add it to its test vector, diagnose again; until one
    diagnosis remains, no net is informative, or the person stops (``q`` or end of input).

    ``ask`` shows a prompt and returns the answer (``None`` at end of input): ``0`` or ``1`` for
    the proposed net, ``NET=0``/``NET=1`` for another net of the same test vector, ``q`` to stop.
    Returns the observations with every measurement added (also printed at the end, in the
    observation-file format, so that the session can be resumed from them) and whether time ran
    out while diagnosing.
    """
    start = time.perf_counter()
    session = _Session(inst, inst.observed, backend, failure, max_size, 1000, timeout, file)
    nets = set(session.circuit.nets)
    notes: Sequence[str] = inst.notes
    while True:
        report = session.report(top, file, time.perf_counter() - start, notes)
        notes = ()
        out.write(render_report(report))
        if len(report.diagnoses) <= 1 or not report.probes:
            break
        best = report.probes[0]
        j = best.observation - 1
        measured: tuple[str, bool] | None = None
        while measured is None:
            answer = ask(f"measure net {best.net} in observation {best.observation}: 0, 1, NET=0|1, or q? ")
            if answer is None or answer.strip().lower() in ("q", "quit"):
                if answer is None:
                    out.write("\n")  # the input ended on the prompt's line
                break
            net, sep, value = answer.strip().rpartition("=") if "=" in answer else ("", "", answer.strip())
            net = net.strip() if sep else best.net
            if value.strip() not in ("0", "1"):
                out.write(f"error: expected 0, 1, NET=0, NET=1 or q, got {answer.strip()!r}\n")
            elif net not in nets:
                out.write(f"error: {file} has no net {net!r}\n")
            elif net in session.observed[j]:
                out.write(f"error: net {net} is already observed in observation {best.observation}\n")
            else:
                measured = (net, value.strip() == "1")
        if measured is None:
            break
        start = time.perf_counter()
        session.measure(j, *measured)
    out.write("observations so far (an --observations file):\n")
    for vector in session.observed:
        out.write(" ".join(f"{net}={int(v)}" for net, v in vector.items()) + "\n")
    return session.observed, session.timed_out


def render_report(report: ProbeReport) -> str:
    lines = [
        f"{report.file}: {counted(len(report.diagnoses), 'diagnosis', 'diagnoses')}"
        f" ({_completeness(report.complete, report.max_size)}), {report.observations} observation(s), "
        f"backend {report.backend}, {report.time_s:.3f} s"
    ]
    lines += ["  " + ", ".join(d) for d in report.diagnoses[:20]]
    if len(report.diagnoses) > 20:
        lines.append(f"  … {len(report.diagnoses) - 20} more")
    if report.probes:
        lines.append("next probes (expected information gain, bits):")
        for p in report.probes:
            lines.append(f"  observation {p.observation}, net {p.net:<12} {p.gain_bits:.4f}   P(1)={p.p_one:.4f}")
    lines += [f"note: {n}" for n in report.notes]
    return "\n".join(lines) + "\n"


def _completeness(complete: bool, max_size: int | None) -> str:
    if not complete:
        return "INCOMPLETE"
    return "complete" if max_size is None else f"complete up to {max_size} gate{'s' if max_size != 1 else ''}"


def render_run(run_: ProbeRun) -> str:
    lines = [
        f"{run_.file}: injected {', '.join(run_.injected)}; {run_.vectors} test vector(s); "
        f"{counted(run_.initial_diagnoses, 'diagnosis', 'diagnoses')} at first; strategy {run_.strategy}"
    ]
    for k, s in enumerate(run_.steps, 1):
        gain = "" if s.gain_bits is None else f" (gain {s.gain_bits:.4f} bits)"
        lines.append(f"  probe {k}: vector {s.observation}, net {s.net} = {int(s.value)}{gain} -> {counted(s.diagnoses, 'diagnosis', 'diagnoses')}")
    verdict = "resolved" if run_.resolved else "not resolved"
    lines.append(f"{verdict} after {run_.probes} probe(s), {run_.time_s:.3f} s; final diagnoses:")
    lines += ["  " + ", ".join(d) for d in run_.final[:20]]
    lines += [f"note: {n}" for n in run_.notes]
    return "\n".join(lines) + "\n"
