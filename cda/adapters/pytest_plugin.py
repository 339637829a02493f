"""The CDA pytest plugin: ``.cda`` and ``.fol`` files as test suites (docs/testing.md).

Each ``goal prove``/``goal disprove`` and each ``expect`` of a ``.cda`` file, and each
``claim`` of a ``.fol`` file or of a ``fol { … }`` block, is one test item, so ``-k``, ``-x``, ``--junitxml`` and
pytest-xdist work on them as on any test. A file is solved once, when its first selected item
runs (a file whose items are all deselected is never solved), in the same process as every
other file: the engine and the solvers load once for the whole suite.

Collection is opt-in: ``--cda`` on the command line or ``cda_collect = true`` in the ini file
(a project's example files are not swept into its unit tests by installing CDA). Options:

* ``cda_patterns`` (ini, lines): the file patterns collected, default ``*.cda`` and ``*.fol``;
* ``--cda-backend`` / ``cda_backend``: ``auto``, ``z3`` or ``clingo``;
* ``--cda-timeout`` / ``cda_timeout``: seconds per file (per claim for ``.fol``), default none
  for ``.cda`` and 10 for ``.fol``.

A failing item is reported like an assertion: the claim and its status, the justification core
(the clauses that force the answer), the witness that breaks it and the counter-world (the
abducibles assumed true in a world where the claim fails), or the expectation and what the
answer holds instead. A file that does not parse or check is one failing item, ``check``,
showing the mistake as the compiler prints it.

This module is loaded by pytest at start-up (``pytest11`` entry point): it imports CDA's engine
only when a CDA item runs.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from cda.contracts.fol import ProofResult
    from cda.contracts.result import SolveResult

__all__ = ["CdaFile", "FolFile", "CdaItem", "CdaFailure", "cda_solve"]

_BACKENDS = ("auto", "z3", "clingo")


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("cda", "CDA: .cda/.fol files as tests")
    group.addoption("--cda", action="store_true", default=False, help="collect .cda/.fol files (see cda_patterns)")
    group.addoption("--cda-backend", choices=_BACKENDS, default=None, help="solver for CDA items: auto, z3, clingo")
    group.addoption("--cda-timeout", type=float, default=None, help="seconds per .cda file / per .fol claim")
    parser.addini("cda_collect", "collect .cda/.fol files without --cda", type="bool", default=False)
    parser.addini("cda_patterns", "file patterns of CDA suites", type="linelist", default=["*.cda", "*.fol"])
    parser.addini("cda_backend", "solver for CDA items: auto, z3, clingo", default="auto")
    parser.addini("cda_timeout", "seconds per .cda file / per .fol claim (empty: the default)", default="")


def _backend(config: pytest.Config) -> str:
    chosen = config.getoption("cda_backend") or config.getini("cda_backend") or "auto"
    if chosen not in _BACKENDS:
        raise pytest.UsageError(f"cda_backend must be one of {', '.join(_BACKENDS)}, not {chosen!r}")
    return str(chosen)


def _timeout(config: pytest.Config, default: float | None) -> float | None:
    given = config.getoption("cda_timeout")
    if given is None and config.getini("cda_timeout"):
        try:
            given = float(config.getini("cda_timeout"))
        except ValueError:
            raise pytest.UsageError(f"cda_timeout must be a number of seconds, not {config.getini('cda_timeout')!r}") from None
    if given is None:
        return default
    from cda.contracts import limits
    from cda.errors import OptionError

    try:
        return limits.seconds("--cda-timeout", given)
    except OptionError as exc:
        raise pytest.UsageError(str(exc)) from None


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    config = parent.config
    if not (config.getoption("cda") or config.getini("cda_collect")):
        return None
    if not any(fnmatch.fnmatch(file_path.name, pattern) for pattern in config.getini("cda_patterns")):
        return None
    if file_path.suffix == ".fol":
        return FolFile.from_parent(parent, path=file_path)
    return CdaFile.from_parent(parent, path=file_path)


@pytest.fixture
def cda_solve(request: pytest.FixtureRequest) -> Callable[..., SolveResult]:
    """``cda_solve(text_or_path, **options)``: ``cda.solve`` with this run's ``--cda-backend``
    (a ``str`` is DSL text, a :class:`~pathlib.Path` a file)."""
    from cda.api import solve

    backend = _backend(request.config)

    def run(source: str | Path, **options: Any) -> SolveResult:
        options.setdefault("backend", backend)
        return solve(source, **options)

    return run


class CdaFailure(Exception):
    """An item's failure: the report :meth:`CdaItem.repr_failure` prints."""


class _SuiteFile(pytest.File):
    """A file answered once, on demand, for all its items."""

    _answer: Any = None
    _error: str | None = None

    def answer(self) -> Any:
        if self._answer is None and self._error is None:
            from cda.errors import CDAError

            try:
                self._answer = self.compute()
            except CDAError as exc:
                self._error = exc.render()
        if self._error is not None:
            raise CdaFailure(self._error)
        return self._answer

    def compute(self) -> Any:  # pragma: no cover - overridden
        raise NotImplementedError

    def bad_file(self, message: str) -> Iterator[CdaItem]:
        self._error = message
        yield CdaItem.from_parent(self, name="check", kind="check", key="", line=0)


class CdaFile(_SuiteFile):
    """A ``.cda`` file: one item per goal and per ``expect``."""

    def collect(self) -> Iterator[CdaItem]:
        from cda.encodings import ast as A
        from cda.encodings.format import format_expectation, format_formula
        from cda.encodings.parse import parse_problem
        from cda.errors import CDAError
        from cda.files import TEXT_MAX_BYTES, read_text

        try:
            problem = parse_problem(read_text(self.path, limit=TEXT_MAX_BYTES), str(self.path))
        except CDAError as exc:
            yield from self.bad_file(exc.render())
            return
        names: set[str] = set()
        shown: set[str] = set()
        any_item = False
        kind: str
        for st in problem.statements:
            if isinstance(st, A.GoalClaim):
                kind, key = st.mode, _unique(names, None, st.mode, st.pos)
                label = f"{st.mode} {format_formula(st.formula)}"
            elif isinstance(st, A.Expect):
                kind, key = "expect", _unique(names, st.name, "expect", st.pos)
                label = f"expect {st.name}" if st.name is not None else f"expect {format_expectation(st)}"
            else:
                continue
            if label in shown:  # two items of one name: the second says where it is
                label = f"{label} @{st.pos[0]}"
            shown.add(label)
            any_item = True
            yield CdaItem.from_parent(self, name=label, kind=kind, key=key, line=st.pos[0])
        if any(isinstance(st, A.FolBlock) for st in problem.statements):  # first-order claims in fol { … }
            from cda.operations.fol import read_fol_file

            try:
                claims = read_fol_file(self.path).claims
            except CDAError as exc:
                yield from self.bad_file(exc.render())
                return
            for claim in claims:
                any_item = True
                yield CdaItem.from_parent(self, name=f"claim {claim.name}", kind="claim", key=claim.name,
                                          line=claim.line)
        if not any_item:  # a file with nothing to assert is still checked
            yield CdaItem.from_parent(self, name="check", kind="check", key="", line=0)

    def compute(self) -> SolveResult:
        from cda.api import solve

        return solve(self.path, backend=_backend(self.config), timeout=_timeout(self.config, None))

    def claims_answer(self) -> dict[str, ProofResult]:
        """The answers to the file's first-order claims (its ``fol { … }`` blocks), proved once."""
        if self._claims is None:
            from cda.errors import CDAError

            try:
                self._claims = FolFile.prove(self)
            except CDAError as exc:
                raise CdaFailure(exc.render()) from None
        return self._claims

    _claims: dict[str, ProofResult] | None = None


class FolFile(_SuiteFile):
    """A ``.fol`` file: one item per claim."""

    def collect(self) -> Iterator[CdaItem]:
        from cda.errors import CDAError
        from cda.operations.fol import read_fol_file

        try:
            problem = read_fol_file(self.path)
        except CDAError as exc:
            yield from self.bad_file(exc.render())
            return
        if not problem.claims:
            yield from self.bad_file(f"{self.path}: no claim to prove (add a line 'claim φ')")
            return
        for claim in problem.claims:
            yield CdaItem.from_parent(self, name=f"claim {claim.name}", kind="claim", key=claim.name, line=claim.line)

    def compute(self) -> dict[str, ProofResult]:
        return self.prove(self)

    @staticmethod
    def prove(node: _SuiteFile) -> dict[str, ProofResult]:
        """Every claim of ``node``'s file (a ``.fol`` file, or the fol blocks of a ``.cda`` file)."""
        from cda.fol.prove import prove_all
        from cda.operations.fol import read_fol_file

        problem = read_fol_file(node.path)
        results = prove_all(problem, _timeout(node.config, 10.0), backend=_backend(node.config))
        return {r.claim_name: r for r in results}


def _unique(names: set[str], given: str | None, prefix: str, pos: tuple[int, int]) -> str:
    """The name the grounder gives a statement (``prove@12``, ``expect@3:9`` when two share a line)."""
    if given is not None:
        names.add(given)
        return given
    name = f"{prefix}@{pos[0]}"
    if name in names:
        name = f"{prefix}@{pos[0]}:{pos[1]}"
    names.add(name)
    return name


class CdaItem(pytest.Item):
    """One goal, expectation or claim of a suite file."""

    def __init__(self, *, kind: str, key: str, line: int, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.kind, self.key, self.line = kind, key, line

    def runtest(self) -> None:
        assert isinstance(self.parent, _SuiteFile)
        if self.kind == "claim" and isinstance(self.parent, CdaFile):  # a claim of a fol { … } block
            _check_claim(self.parent.claims_answer()[self.key])
            return
        answer = self.parent.answer()
        if self.kind == "check":
            return
        if self.kind == "claim":
            _check_claim(answer[self.key])
            return
        _check_solved(answer, self.kind, self.key)

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> str:
        if isinstance(excinfo.value, CdaFailure):  # it quotes the suite's text: shown escaped on the terminal
            from cda.terminal_text import for_terminal

            return for_terminal(str(excinfo.value))
        return str(super().repr_failure(excinfo, style))

    def reportinfo(self) -> tuple[Path, int, str]:
        return self.path, max(self.line - 1, 0), f"{self.path.name}: {self.name}"


def _check_solved(result: SolveResult, kind: str, key: str) -> None:
    """Raise :class:`CdaFailure` unless the goal/expectation ``key`` of ``result`` holds."""
    if kind == "expect":
        for e in result.expectations:
            if e.name == key:
                if not e.passed:
                    raise CdaFailure(f"expect {e.text}: FAILED\n  {e.reason}")
                return
        raise CdaFailure(f"{key}: no such expectation in the answer (status {result.status})")
    for v in result.verdicts:
        if v.name == key:
            if v.status == "supported":
                return
            lines = [f"{v.goal} {v.claim}: {str(v.status).upper()} (confidence {v.confidence:.4g})"]
            if v.justification:
                lines.append(f"  justification core: {', '.join(v.justification)}")
            breaking = [w for w in v.witnesses if not w.holds]
            for w in breaking:
                lines.append(f"  breaking witness: the goal fails under {{{', '.join(w.assumed)}}}")
                lines.append(f"  counter-world: {', '.join(w.assumed) or '(nothing)'} true, every other abducible false")
            lines += [f"  holds under: {{{', '.join(w.assumed)}}}" for w in v.witnesses if w.holds]
            if v.reason:
                lines.append(f"  {v.reason}")
            if result.partial or result.status == "unknown":
                lines.append(f"  (the solve was {'partial' if result.partial else 'unknown'}: {'; '.join(result.notes)})")
            raise CdaFailure("\n".join(lines))
    raise CdaFailure(f"{key}: no verdict in the answer (status {result.status}; {'; '.join(result.notes)})")


def _check_claim(result: ProofResult) -> None:
    if result.status != "supported":
        raise CdaFailure(result.text())
