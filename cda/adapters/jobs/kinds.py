"""The job kinds: a registry from a kind's name to what its parameters may be and a function of
the job that returns a JSON-able result.

A kind is one :class:`JobKind`: ``params`` maps each parameter name to a checker (a parameter
not named there is refused when the manifest is read), ``required`` names those a job must give,
``paths`` names the parameters that are files (read relative to the manifest; their bytes go into the job key), and ``run`` takes a
:class:`JobInput` and returns plain JSON (dicts, lists, str, int, bool, None). ``run`` executes in
the job's own process (:mod:`cda.adapters.jobs.child`), so it may use all the memory and time
the job is given; what it raises is recorded as the job's error.

Registering a kind is one call, :func:`register`. The Cedar kinds (``cedar-test``,
``policy-analysis``, ``request-batch``) are registered here already and import ``cda.policy``
only when such a job runs; without that package the job fails with "cda.policy not available".

>>> sorted(KINDS)
['cedar-test', 'check', 'diagnose', 'guard', 'policy-analysis', 'prove', 'request-batch', 'solve']
>>> KINDS["solve"].params["backend"]("backend", "z3")
'z3'
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cda.contracts import limits
from cda.contracts.locations import problem_message
from cda.errors import AccessDenied, CDAError, OptionError

__all__ = ["JobInput", "JobKind", "KINDS", "Negative", "operation_kind", "register"]

Checker = Callable[[str, Any], Any]
"""Checks one parameter: ``(name, value) -> value``, raising :class:`~cda.errors.OptionError`."""


@dataclass(frozen=True)
class JobInput:
    """What a kind's ``run`` gets: the main file (``None`` for a kind without one) and the
    checked parameters, path parameters as :class:`~pathlib.Path` relative to the manifest's
    folder (the job process runs there)."""

    file: Path | None
    params: dict[str, Any]
    #: the manifest's folder: the one root of the files the job may read (None: any file, as a test
    #: that runs a kind directly gives absolute paths)
    base: Path | None = None


@dataclass(frozen=True)
class JobKind:
    name: str
    run: Callable[[JobInput], Any]
    params: dict[str, Checker] = field(default_factory=dict)
    paths: frozenset[str] = frozenset()
    required: frozenset[str] = frozenset()
    needs_file: bool = True
    doc: str = ""
    #: the further files the main file names, found in its bytes (read once when the manifest is),
    #: by a label: their bytes go into the job key too, so editing one makes a new job; a path that
    #: cannot be read is keyed as absent (the job itself reports it)
    inputs: Callable[[Path, bytes], dict[str, Path]] | None = None
    #: for a kind whose result is a verdict: a :class:`Negative` when the result is not a pass
    #: (a goal refuted or inconclusive, a property that fails, a test that disagrees: ``failed``;
    #: a solver budget run out: ``partial``; a solver's unknown: ``unknown``), else None; the job is then
    #: recorded with that status and error and its result kept, so the batch exits as the CLI does
    verdict: Callable[[Any], Negative | None] | None = None
    #: checks the parameters together once each is checked (when the manifest is read):
    #: ``(parameter, message)`` for a mistake, else None
    check: Callable[[dict[str, Any]], tuple[str, str] | None] | None = None
    #: the operation's parameter the job's ``file`` is (an operation's kind)
    main: str = "path"


@dataclass(frozen=True)
class Negative:
    """A result that is not a pass, and why: ``failed`` (exit 1 on the CLI: a goal, claim or
    property that does not hold), or exit 3, no complete answer: ``partial`` (a budget inside the
    job ran out; what was found is kept), ``unknown`` (a solver could not decide; nothing was cut
    short) or ``escalated`` (held for a person). docs/jobs.md, "Results"."""

    status: str
    error: str


class _Kinds(dict[str, JobKind]):
    """The kinds by name; a kind made from an operation is built when it is first looked up, so
    a job's process imports its own operation only (under its memory cap every byte is the job's)."""

    def __init__(self) -> None:
        super().__init__()
        self.later: dict[str, Callable[[], JobKind]] = {}

    def __missing__(self, name: str) -> JobKind:
        make = self.later.pop(name, None)
        if make is None:
            raise KeyError(name)
        kind = make()
        dict.__setitem__(self, name, kind)
        return kind

    def __contains__(self, name: object) -> bool:
        return dict.__contains__(self, name) or name in self.later

    def __iter__(self) -> Any:
        return iter(sorted({*dict.keys(self), *self.later}))

    def __len__(self) -> int:
        return dict.__len__(self) + len(self.later)

    def keys(self) -> Any:
        return list(self)

    def items(self) -> Any:
        return [(name, self[name]) for name in self]

    def values(self) -> Any:
        return [self[name] for name in self]


KINDS: _Kinds = _Kinds()


def register(kind: JobKind | tuple[str, Callable[[], JobKind]]) -> JobKind | None:
    """Add ``kind`` to :data:`KINDS` (a name already taken is a programming error); ``(name,
    make)`` adds a kind built on first use."""
    if isinstance(kind, tuple):
        name, make = kind
        if name in KINDS:
            raise ValueError(f"job kind {name!r} is registered twice")
        KINDS.later[name] = make
        return None
    if kind.name in KINDS:
        raise ValueError(f"job kind {kind.name!r} is registered twice")
    missing = (kind.paths | kind.required) - set(kind.params)
    if missing:
        raise ValueError(f"job kind {kind.name!r}: parameters {sorted(missing)} have no checker")
    KINDS[kind.name] = kind
    return kind


# --- parameter checkers --------------------------------------------------------------------


def choice(*allowed: str) -> Checker:
    def check(name: str, value: Any) -> str:
        if not isinstance(value, str) or value not in allowed:
            raise OptionError(f"{name} must be one of {', '.join(allowed)}, not {value!r}")
        return value

    return check


def text(name: str, value: Any) -> str:
    if not isinstance(value, str) or not value or len(value) > 4096:
        raise OptionError(f"{name} must be a non-empty string (at most 4096 characters), not {value!r}")
    return value


def flag(name: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise OptionError(f"{name} must be true or false, not {value!r}")
    return value


def budget(name: str, value: Any) -> float:
    """A solver budget in seconds inside the job (the job's own ``timeout_s`` kills it)."""
    return limits.seconds(name, value, unlimited=False, positive=True)


def count(name: str, value: Any) -> int:
    return limits.count(name, value)


def seed(name: str, value: Any) -> int:
    return limits.seed(name, value)


_BACKEND = choice("auto", "z3", "clingo")


def _policy(kind: str) -> Any:
    from cda.operations.policy import policy_package

    return policy_package(kind)


# --- the kinds the operation registry declares for this door (cda.operations) ---------------


def operation_kind(name: str, *, main: str = "path", doc: str = "", shape: Callable[[Any], Any] | None = None,
                   inputs: Callable[[Path, bytes], dict[str, Path]] | None = None,
                   verdict: Callable[[Any], Negative | None] | None = None,
                   before: Callable[[], Any] | None = None) -> JobKind:
    """The job kind of operation ``name``: its manifest ``kind``, its ``params`` checked as the
    operation checks them, ``file`` as its ``main`` path parameter; a job runs the operation through
    the gate as the manifest's author (the local user), in the manifest's folder."""
    from cda.operations import get
    from cda.operations.registry import Door

    op = get(name)
    names = {p: op.name_at(Door.JOBS, p) for p in op.params_at(Door.JOBS) if p != main}
    fields = op.params.model_fields
    checkers = {door: _field_checker(fields[p]) for p, door in names.items()}
    from cda.operations.params import PathParam, marker

    paths = frozenset(door for p, door in names.items() if marker(list(fields[p].metadata), PathParam) is not None)
    required = frozenset(door for p, door in names.items() if fields[p].is_required())

    def run(job: JobInput) -> Any:
        from pydantic import ValidationError

        from cda.operations import LOCAL_USER, MemorySink, invoke, local_user

        if before is not None:
            before()  # what the kind needs installed, said before its parameters are looked at
        params = {p: job.params[door] for p, door in names.items() if door in job.params}
        if job.file is not None:
            params[main] = str(job.file)
        # the manifest's author, held to the manifest's folder: what the job's file names (a ken graph,
        # a Cedar test's policies) passes the same access check as its top-level paths (docs/jobs.md)
        principal = LOCAL_USER if job.base is None else local_user(roots=(job.base,))
        try:
            result = invoke(op, {k: str(v) if isinstance(v, Path) else v for k, v in params.items()},
                            principal=principal, door=Door.JOBS, base_dir=Path.cwd(), egress_cap="local",
                            sink=MemorySink())
        except ValidationError as exc:
            first = exc.errors()[0]
            where = names.get(str(first["loc"][0]), str(first["loc"][0])) if first["loc"] else "params"
            raise CDAError(f"params.{where}: {problem_message(first)}") from None
        except AccessDenied as exc:
            if exc.need != "files" or job.base is None:
                raise
            named = f" {exc.file!r}" if exc.file else ""  # the job's own author wrote it: named to them
            raise CDAError(f"the job read a file{named} outside the manifest's folder {job.base}; a job reads only "
                           "files inside it (what its file names included)") from None
        data = result.model_dump(mode="json", by_alias=True)
        return shape(data) if shape is not None else data

    def check(params: dict[str, Any]) -> tuple[str, str] | None:
        from pydantic import ValidationError

        given = {p: params[door] for p, door in names.items() if door in params}
        try:
            op.params.model_validate({**given, main: "file"})
        except ValidationError as exc:
            first = exc.errors()[0]
            where = str(first["loc"][0]) if first["loc"] else next(iter(names), main)
            return names.get(where, where), problem_message(first)
        return None

    return JobKind(op.job, run, checkers, paths=paths, required=required, doc=doc or op.summary, inputs=inputs,
                   verdict=verdict, check=check, main=main)


def _field_checker(field: Any) -> Checker:
    """One parameter's check in a manifest: the operation's own checker for a checked number,
    the choices of a ``Literal``, true/false, a non-empty string (a path, a name)."""
    import types
    import typing

    from cda.operations.params import checker_of

    checked = checker_of(list(field.metadata))
    if checked is not None:
        return checked.check
    annotation = field.annotation
    args = [a for a in typing.get_args(annotation) if a is not type(None)] if typing.get_origin(annotation) in (
        typing.Union, types.UnionType) else [annotation]
    inner = args[0] if len(args) == 1 else annotation
    if typing.get_origin(inner) is typing.Annotated:
        inner = typing.get_args(inner)[0]
    if typing.get_origin(inner) is typing.Literal:
        return choice(*typing.get_args(inner))
    if inner is bool:
        return flag
    return text


def _no_time(data: dict[str, Any]) -> dict[str, Any]:
    data.pop("time_s", None)  # a timing: results are compared byte for byte across runs and runners
    return data


def _dsl_inputs(file: Path, data: bytes) -> dict[str, Path]:
    """The Ken graphs a ``.cda`` file loads (``ken "…"``, relative to its folder), as
    :func:`cda.api.ground` reads them. A file that does not parse names none (the job fails on it)."""
    from cda.encodings.ast import KenLoad
    from cda.encodings.parse import parse_problem
    from cda.files import decode_text

    try:
        ast = parse_problem(decode_text(data, file), str(file))
    except (CDAError, RecursionError):
        return {}
    return {f"ken {st.path}": file.parent / st.path for st in ast.statements if isinstance(st, KenLoad)}


def _solve_verdict(result: Any) -> Negative | None:
    """As ``cda solve`` exits (the one rule, :func:`cda.contracts.result.incomplete`): 3 for a
    partial answer (``partial``: a budget ran out) or an undecided one (``unknown``: a solver could
    not decide), 1 for a goal not supported or an ``expect`` that failed."""
    from cda.contracts.result import incomplete

    why_not = incomplete(result["status"], bool(result.get("partial")), [v["status"] for v in result["verdicts"]])
    if why_not is not None:
        undecided = [f"{v['goal']} {v['claim']}: {v.get('reason') or 'unknown'}" for v in result["verdicts"]
                     if v["status"] == "unknown"]
        why = "; ".join([*(result.get("notes") or []), *undecided]) or f"status {result['status']}"
        what = ("a budget ran out; what was found is kept" if why_not == "partial"
                else "a solver could not decide; nothing was cut short")
        return Negative(why_not, f"no complete answer ({what}; as `cda solve` exits 3): {why}")
    failed = [f"{v['goal']} {v['claim']}: {v['status']}" for v in result["verdicts"] if v["status"] != "supported"]
    failed += [f"expect {e['text']}: failed" for e in result.get("expectations") or [] if not e["passed"]]
    if failed:
        return Negative("failed", f"{'; '.join(failed)} (as `cda solve` exits 1; the result has the details)")
    return None


def _prove_verdict(result: Any) -> Negative | None:
    """As ``cda prove`` exits: 3 when a claim is unknown — ``partial`` when the budget (or a
    cancel) cut it off, ``unknown`` when the solvers could not decide it in time to spare — 1 when
    a claim is refuted or inconclusive."""
    claims = result["results"]
    cut = [r["claim_name"] for r in claims if r["unknown"] and r.get("partial")]
    undecided = [r["claim_name"] for r in claims if r["unknown"] and not r.get("partial")]
    if cut:
        more = f"; undecided by the solvers: {', '.join(undecided)}" if undecided else ""
        return Negative("partial", f"claim(s) {', '.join(cut)} cut off: the time budget ran out{more} "
                        "(as `cda prove` exits 3; the reasons are in the result)")
    if undecided:
        return Negative("unknown", f"claim(s) {', '.join(undecided)} undecided: a solver said unknown, nothing was cut "
                        "short (as `cda prove` exits 3; the reasons are in the result)")
    failed = [f"{r['claim_name']}: {r['status']}" for r in claims if r["status"] != "supported"]
    if failed:
        return Negative("failed", f"{'; '.join(failed)} (as `cda prove` exits 1; the result has the details)")
    return None


def _diagnose_verdict(result: Any) -> Negative | None:
    """As ``cda diagnose`` exits: 3 when the search ran out of time (``partial``: the diagnoses
    found are kept)."""
    if result["timed_out"]:
        return Negative("partial", "the search ran out of its budget; the diagnoses found so far are in the result "
                        "(as `cda diagnose` exits 3)")
    return None


def _guard_verdict(result: Any) -> Negative | None:
    """As ``cda guard`` exits: 1 for a REJECT, 3 for an ESCALATE (no verdict here: a person decides
    the escalation the result names)."""
    why = f"{result['decision']} {result['reason']}"
    if result["decision"] == "REJECT":
        return Negative("failed", f"{why} (as `cda guard` exits 1; the result has the details)")
    if result["decision"] == "ESCALATE":
        held = result.get("escalation") or {}
        return Negative("escalated", f"{why}: held for a person as escalation {held.get('escalation_id')} "
                        f"({held.get('state')}; as `cda guard` exits 3, no verdict here)")
    return None


def _later(kind: str, operation: str, **hooks: Any) -> tuple[str, Callable[[], JobKind]]:
    return kind, lambda: operation_kind(operation, **hooks)


register(_later("solve", "solve", doc="rank explanations, check claims (a .cda file)", inputs=_dsl_inputs,
                verdict=_solve_verdict))
register(_later("check", "check", doc="parse and type-check a .cda file", inputs=_dsl_inputs))
register(_later("prove", "prove", doc="prove the claims of a .fol file", verdict=_prove_verdict))
register(_later("guard", "guard.evaluate", main="action_path", verdict=_guard_verdict,
                doc="the guardian on one proposed action (JSON): APPROVE, REJECT, or ESCALATE to a person"))
register(_later("diagnose", "diagnose", doc="minimal diagnoses of a circuit (.bench or .wcnf[.gz])", shape=_no_time,
                verdict=_diagnose_verdict))


# --- the Cedar kinds (cda.policy, imported when such a job runs) ---------------------------


def _cedar_test_inputs(file: Path, raw: bytes) -> dict[str, Path]:
    """The policy, schema and entities files a Cedar test file names, where the test reads them
    (relative to the folder above ``tests/`` or ``corpus-tests/``). A file that is not a readable
    test names none (the job fails on it with the reason)."""
    try:
        data = json.loads(raw.decode("utf-8-sig"))
    except (ValueError, RecursionError):
        return {}
    if not isinstance(data, dict):
        return {}
    root = next((d.parent for d in file.resolve().parents if d.name in ("tests", "corpus-tests")),
                file.resolve().parent)  # as cda.policy.cedar_tests.test_root
    return {name: root / data[name] for name in ("policies", "schema", "entities")
            if isinstance(data.get(name), str) and data[name]}


def _cedar_test_verdict(result: Any) -> Negative | None:
    bad = int(result["imported"]) - int(result["agreed"])
    if bad:
        return Negative("failed", f"{bad} of {result['imported']} imported request(s) disagree with Cedar's expected answer "
                "(as `cda policy test` exits 1; the result lists them)")
    return None


def _analysis_verdict(result: Any) -> Negative | None:
    if result["status"] == "holds":
        return None
    failed = [e["environment"] for e in result["environments"] if e["status"] == result["status"]]
    where = "; ".join(f"({e['principal_type']}, {e['action']}, {e['resource_type']})" for e in failed)
    if result["status"] == "unknown":
        cut = any(e.get("partial") for e in result["environments"] if e["status"] == "unknown")
        return Negative("partial" if cut else "unknown", f"{result['analysis']}: no verdict for {where} "
                        f"({'its time budget ran out' if cut else 'the solver could not decide'}; "
                        "as `cda policy analyze` exits 3; the note says why)")
    return Negative("failed", f"{result['analysis']} does not hold for {where} (as `cda policy analyze` exits 1; "
                    "the counterexample is in the result)")


# The plug-in point for cda.policy: each kind is an operation of cda.operations.policy, which calls
# cda.policy.jobs.<function>; parameters are checked when the manifest is read, so a bad manifest is
# refused before anything runs.
register(_later("cedar-test", "policy.test", inputs=_cedar_test_inputs, verdict=_cedar_test_verdict,
                before=lambda: _policy("cedar-test")))
register(_later("policy-analysis", "policy.analyze", verdict=_analysis_verdict, before=lambda: _policy("policy-analysis")))
register(_later("request-batch", "policy.authorize_batch", before=lambda: _policy("request-batch")))
