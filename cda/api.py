"""The Python API: ``cda.parse``, ``cda.check``, ``cda.ground``, ``cda.solve``.

A problem reaches the engine as DSL text (a string, or a :class:`~pathlib.Path` to a ``.cda``
file), as a :class:`Vocabulary` with clause strings (a product that declares its names as
structure and lets the user write only the formulas), or as a
:class:`~cda.ir.GroundProblem` built with :mod:`cda.ir`. Every path meets in one
:func:`solve`; options travel as one :class:`~cda.engine.Options` (docs/architecture.md).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from cda.contracts.deadline import NO_DEADLINE, Deadline, OutOfTime, deadline_scope
from cda.contracts.result import CheckReport, SolveResult
from cda.encodings.assemble import Origin, Piece, assemble
from cda.encodings.ast import MetricDecl, PredDecl, ProblemAST
from cda.encodings.ir import GroundProblem, NodeFactory
from cda.encodings.numbers import exact_number
from cda.encodings.parse import parse_problem
from cda.errors import DSLError, DSLTypeError, EmptyProblem, OptionError
from cda.files import TEXT_MAX_BYTES, read_text
from cda.gcpause import gc_paused

if TYPE_CHECKING:
    from cda.ken.graph import KenGraph
    from cda.ken.loaders import load_ken
    from cda.solver.engine import EngineOptions

__all__ = [
    "parse", "check", "ground", "solve", "solve_cross_checked", "Source", "Vocabulary", "KenGraph", "load_ken",
]

SoftSpec = str | tuple[str, float]


@dataclass(frozen=True)
class Vocabulary:
    """The names a problem declares, given as structure rather than DSL text: free Boolean atoms
    (the DSL's ``var``) and metrics with their unit (``metric cost : USD``). A product whose
    problems are a fixed vocabulary plus formulas its user wrote (the guardian's policies)
    grounds them with ``ground(Vocabulary(...), hard=[...])`` and adds its facts with
    :mod:`cda.ir`, writing no DSL of its own.

    >>> gp = ground(Vocabulary(booleans=("deletes", "prod"), metrics={"cost": "USD"}),
    ...             hard=["not (deletes and prod)", "value(metric:cost) <= 5000 USD"])
    >>> sorted(gp.atoms), sorted(gp.numvars), [c.name for c in gp.clauses]
    (['deletes', 'prod'], ['metric:cost'], ['hard#1', 'hard#2'])
    """

    booleans: Sequence[str] = ()
    metrics: Mapping[str, str] = field(default_factory=dict)

    def statements(self) -> list[PredDecl | MetricDecl]:
        """The declarations, checked: each name as the DSL would read it (the grounder then
        checks each unit as it checks a written one)."""
        out: list[PredDecl | MetricDecl] = []
        for i, name in enumerate(self.booleans, 1):
            _declared_name(name, f"booleans[{i - 1}]")
            out.append(PredDecl("var", name, (), (i, 1), ()))
        for j, (name, unit) in enumerate(self.metrics.items(), len(out) + 1):
            _declared_name(name, f"metrics[{name!r}]")
            if not isinstance(unit, str) or not _identifier(unit) or len(unit) > 32:
                raise DSLTypeError(f"metric {name}: the unit {unit!r} is not a unit name ('count', 'ms', 'USD')",
                                   filename="vocabulary")
            out.append(MetricDecl(name, unit, (j, 1), (j, 1)))
        return out


def _identifier(text: str) -> bool:
    """ASCII letters, digits and ``_``, not starting with a digit (a name the DSL's lexer reads)."""
    return text.isascii() and text.isidentifier()


def _declared_name(name: object, where: str) -> None:
    if not isinstance(name, str) or not _identifier(name) or not (name[0].islower() or name[0] == "_") \
            or len(name) > 128:
        raise DSLTypeError(f"{where}: {name!r} is not a name the DSL can declare (a lowercase letter or _, then "
                           "letters, digits and _)", filename="vocabulary")


Source = str | Path | Vocabulary


def _read(source: str | Path) -> tuple[str, str | None]:
    if isinstance(source, Path):
        return read_text(source, limit=TEXT_MAX_BYTES), str(source)
    return source, None


def __getattr__(name: str) -> object:
    """``KenGraph`` and ``load_ken``, the types a caller of :func:`solve` passes as ``ken``,
    loaded when first asked for (networkx is not imported by a plain solve)."""
    if name == "KenGraph":
        from cda.ken.graph import KenGraph

        return KenGraph
    if name == "load_ken":
        from cda.ken.loaders import load_ken

        return load_ken
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def parse(source: str | Path) -> ProblemAST:
    """Parse DSL text (or a :class:`~pathlib.Path` to a ``.cda`` file) into a syntax tree.

    >>> len(parse("hyp leak\\nhard: leak").statements)
    2
    """
    text, filename = _read(source)
    try:
        return parse_problem(text, filename)
    except DSLError as exc:
        if isinstance(source, str) and _names_a_file(source):
            exc.message += f" (the string was read as DSL text; to read the file, pass pathlib.Path({source!r}))"
            exc.args = (exc.render(),)
        raise


def _names_a_file(text: str) -> bool:
    """Whether DSL text that failed to parse is the name of a file (a common slip: a ``str``
    where a :class:`~pathlib.Path` was meant)."""
    try:
        return "\n" not in text and len(text) < 4096 and Path(text).is_file()
    except (OSError, ValueError):  # a name the OS cannot take (a NUL byte, too long)
        return False


def _ken_for(ast: ProblemAST, ken: KenGraph | None) -> KenGraph | None:
    from cda.encodings.ken_loads import with_ken_loads

    base = Path(ast.filename).parent if ast.filename else Path.cwd()
    merged: KenGraph | None = with_ken_loads(ast.statements, ken, base, ast.filename)
    return merged


def ground(
    source: Source,
    *,
    hard: Sequence[str] = (),
    soft: Sequence[SoftSpec] = (),
    ken: KenGraph | None = None,
    deadline: Deadline = NO_DEADLINE,
) -> GroundProblem:
    """Parse, check and ground; ``hard``/``soft`` are extra clause strings from Python, named
    ``hard#1``, ``soft#2`` (their names and their origins in errors). Grounding stops with
    :class:`~cda.contracts.deadline.OutOfTime` when ``deadline`` passes."""
    if isinstance(source, Vocabulary):
        ast = ProblemAST(list(source.statements()), "", "vocabulary")
    else:
        with deadline_scope(deadline):  # reading counts against the budget too (docs/cli.md, --timeout)
            ast = parse(source)
    if not ast.statements and not hard and not soft:
        # nothing to answer: a "sat, no hypotheses" would hide an empty or truncated file
        raise EmptyProblem(
            "the problem is empty: it has no statements (no declarations, clauses or goals; only blanks and "
            "comments). Write at least one, e.g. 'hyp rain' (docs/dsl.md)",
            line=1,
            column=1,
            filename=ast.filename,
        )
    pieces = [Piece("hard", text, Origin(f"hard#{i}"), name=f"hard#{i}") for i, text in enumerate(hard, 1)]
    for i, spec in enumerate(soft, 1):
        text, given = (spec, None) if isinstance(spec, str) else spec
        weight = None
        if given is not None:
            try:
                weight = exact_number(given)
            except ValueError as exc:  # nan, inf, text that is no number, or out of range
                shown = repr(given) if not isinstance(given, int) or given.bit_length() < 200 else "a huge integer"
                raise DSLTypeError(
                    f"a soft clause's weight must be a positive number, given {shown} ({exc})"
                ).with_filename(f"soft#{i}") from None
        pieces.append(Piece("soft", text, Origin(f"soft#{i}"), name=f"soft#{i}", weight=weight))
    with gc_paused():
        return assemble(ast, pieces, _ken_for(ast, ken), deadline).gp


def check(source: Source, *, hard: Sequence[str] = (), soft: Sequence[SoftSpec] = (), ken: KenGraph | None = None) -> CheckReport:
    """Parse and type-check without solving; raises ``DSLSyntaxError``/``DSLTypeError``.

    >>> check("hyp leak\\nobservable wet\\nhard: leak implies wet").abducibles
    1
    """
    gp = ground(source, hard=hard, soft=soft, ken=ken)
    return CheckReport(
        abducibles=len(gp.hyp_atoms),
        observables=len(gp.observable_atoms),
        atoms=len(gp.atoms),
        numeric_variables=len(gp.numvars),
        clauses=len(gp.clauses),
        soft_clauses=len(gp.soft),
        claims=len(gp.claims),
        ir_nodes=len(gp.factory),
    )


def _top(gp: GroundProblem, top: int | None) -> int:
    """How many hypotheses to list: the argument, else the problem's goal, else 3; more when an
    ``expect best`` needs them (one past its sets, to see whether another hypothesis ties)."""
    k = top if top is not None else gp.top if gp.top is not None else 3  # EngineOptions checks it
    for e in gp.expectations:
        if e.kind == "best":
            k = max(k, len(e.sets) + 1)
    return k


def _check_expectations(gp: GroundProblem, result: SolveResult, extra: Callable[[GroundProblem], SolveResult] | None) -> None:
    """Check the ``expect`` statements against ``result``. An ``expect minimal_explanations``
    in a problem without that goal has them computed by ``extra`` (a second engine run on the
    same ground problem asking for all of them), added to the result it is checked against."""
    if not gp.expectations:
        return
    from cda.verifiers.expectations import check_expectations

    if extra is not None and gp.minimal is None and any(e.kind == "minimal" for e in gp.expectations):
        from cda.encodings.ir import MinimalGoal

        found = extra(replace(gp, minimal=MinimalGoal("all")))
        result.minimal_explanations, result.minimal_complete = found.minimal_explanations, found.minimal_complete
        result.partial = result.partial or found.partial
    result.expectations = check_expectations(gp.expectations, result)


def solve(
    source: Source | GroundProblem,
    backend: str = "auto",
    top: int | None = None,
    seed: int = 0,
    timeout: float | None = None,
    *,
    hard: Sequence[str] = (),
    soft: Sequence[SoftSpec] = (),
    ken: KenGraph | None = None,
    max_hypotheses: int = 10_000,
    options: EngineOptions | None = None,
) -> SolveResult:
    """Solve a problem: ranked hypotheses, verdicts, next-best tests, or the conflict.

    ``source`` is DSL text, a :class:`~pathlib.Path`, a :class:`Vocabulary`, or a
    :class:`~cda.ir.GroundProblem` built with :mod:`cda.ir` (checked by
    :func:`cda.ir.check_problem`; then ``hard``, ``soft`` and ``ken`` are not taken). The
    options are the keywords, or all at once as ``options`` (a :class:`cda.engine.Options`).

    >>> r = solve("hyp leak, spill\\nobservable wet\\nobserve wet\\nhard: wet iff (leak or spill)\\n"
    ...           "soft: not spill weight 2\\ngoal prove leak or spill")
    >>> [h.assumed for h in r.hypotheses], r.verdicts[0].status
    ([['leak'], ['spill'], ['leak', 'spill']], 'supported')
    """
    # The collector stays paused from parsing to the answer: re-enabled between the stages it
    # re-walked every node the paused stages had made (a tenth of the time at 10,000 clauses);
    # what a solve allocates is acyclic and freed by reference counting, the problem included
    from cda.solver.engine import run  # on first solve: `cda check` needs no solver
    from cda.solver.route import choose_backend

    options = _options(options, backend, top, seed, timeout, max_hypotheses)
    # one budget from parsing to the answer: grounding and encoding count against it too
    deadline = Deadline(options.timeout)
    with gc_paused():
        try:
            if isinstance(source, GroundProblem):
                gp = _given(source, hard, soft, ken)
            else:
                gp = ground(source, hard=hard, soft=soft, ken=ken, deadline=deadline)
        except OutOfTime as exc:  # the backend is still checked, as a solve would
            if options.backend != "auto":
                choose_backend(GroundProblem(NodeFactory()), options.backend)
            return _unsolved(options.backend, options.seed, exc)
        name = choose_backend(gp, options.backend)
        options = replace(options, top=_top(gp, options.top))
        result = run(gp, name, options, deadline)
        _check_expectations(gp, result, lambda minimal: run(minimal, name, options, deadline))
        result.notes.extend(gp.notes)
        if gp.fol_blocks:
            result.notes.append(f"{gp.fol_blocks} fol block(s) not answered here: run `cda prove` on this file")
        del gp  # freed here, before the collector is back and would walk it once more
    return result


def _options(options: EngineOptions | None, backend: str, top: int | None, seed: int, timeout: float | None,
             max_hypotheses: int) -> EngineOptions:
    """The run's one options object: ``options`` as given, or built (and checked) from the keywords."""
    from cda.solver.engine import EngineOptions

    if options is None:
        return EngineOptions(backend=backend, top=top, seed=seed, timeout=timeout, max_hypotheses=max_hypotheses)
    if not isinstance(options, EngineOptions):
        raise OptionError(f"options must be a cda.engine.Options, not {type(options).__name__}")
    if (backend, top, seed, timeout, max_hypotheses) != ("auto", None, 0, None, 10_000):
        raise OptionError("give the options either as keywords or as options=, not both")
    return options


def _given(source: GroundProblem, hard: Sequence[str], soft: Sequence[SoftSpec], ken: KenGraph | None) -> GroundProblem:
    """A problem built with :mod:`cda.ir`, checked as the grounder checks one it makes."""
    if hard or soft or ken is not None:
        raise OptionError("hard=, soft= and ken= add to DSL text; a GroundProblem carries its clauses itself")
    from cda.ir import check_problem

    return check_problem(source)


def _unsolved(backend: str, seed: int, exc: OutOfTime) -> SolveResult:
    """The labelled partial result of a run whose budget ran out before solving began: status
    unknown, nothing found, a note saying where time ran out (exit code 3 at the CLI)."""
    from cda.contracts.status import SolverStatus

    return SolveResult(
        status=SolverStatus.UNKNOWN, backend=backend, seed=seed, hypotheses=[], hypotheses_enumerated=0,
        enumeration_complete=False, verdicts=[], next_tests=[], conflict=None, partial=True,
        notes=[f"time ran out {exc.where}; the problem was not solved (the result is partial)"],
    )


def solve_cross_checked(
    source: Source | GroundProblem,
    top: int | None = None,
    seed: int = 0,
    timeout: float | None = None,
    *,
    hard: Sequence[str] = (),
    soft: Sequence[SoftSpec] = (),
    ken: KenGraph | None = None,
    max_hypotheses: int = 10_000,
    options: EngineOptions | None = None,
) -> SolveResult:
    """Solve on both backends and compare; a disagreement downgrades the verdicts it may touch to
    inconclusive (see :mod:`cda.verifiers.agreement`). ``source`` and ``options`` as for
    :func:`solve` (``options.backend`` is not read: both backends run)."""
    from cda.verifiers.agreement import cross_check

    options = _options(options, "auto", top, seed, timeout, max_hypotheses)
    try:  # grounding is done once, for both: it may take the whole budget
        if isinstance(source, GroundProblem):
            gp = _given(source, hard, soft, ken)
        else:
            gp = ground(source, hard=hard, soft=soft, ken=ken, deadline=Deadline(options.timeout))
    except OutOfTime as exc:
        return _unsolved("z3+clingo", options.seed, exc)
    half = None if options.timeout is None else options.timeout / 2  # checked before halving
    report = cross_check(gp, replace(options, top=_top(gp, options.top), timeout=half))
    assert report.result is not None
    _check_expectations(gp, report.result, None)
    report.result.notes.extend(note for note in gp.notes if note not in report.result.notes)
    return report.result
