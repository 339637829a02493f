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
['cedar-test', 'check', 'diagnose', 'policy-analysis', 'prove', 'request-batch', 'solve']
>>> KINDS["solve"].params["backend"]("backend", "z3")
'z3'
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from cda.contracts import limits
from cda.errors import CDAError, OptionError

__all__ = ["JobInput", "JobKind", "KINDS", "PolicyUnavailable", "register"]

Checker = Callable[[str, Any], Any]
"""Checks one parameter: ``(name, value) -> value``, raising :class:`~cda.errors.OptionError`."""


@dataclass(frozen=True)
class JobInput:
    """What a kind's ``run`` gets: the main file (``None`` for a kind without one) and the
    checked parameters, path parameters as :class:`~pathlib.Path` relative to the manifest's
    folder (the job process runs there)."""

    file: Path | None
    params: dict[str, Any]


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
    #: for a kind whose result is a verdict: the error when the result is a negative one (a
    #: property that fails, a test that disagrees), else None; the job is then recorded as
    #: ``failed`` with that error and its result kept, so the batch exits 1 as the CLI does
    verdict: Callable[[Any], str | None] | None = None
    #: checks the parameters together once each is checked (when the manifest is read):
    #: ``(parameter, message)`` for a mistake, else None
    check: Callable[[dict[str, Any]], tuple[str, str] | None] | None = None


KINDS: dict[str, JobKind] = {}


def register(kind: JobKind) -> JobKind:
    """Add ``kind`` to :data:`KINDS` (a name already taken is a programming error)."""
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


# --- the engine's kinds --------------------------------------------------------------------


def _json(text_: str) -> Any:
    return json.loads(text_)


def _solve(job: JobInput) -> Any:
    from cda.api import solve

    p = job.params
    assert job.file is not None
    result = solve(job.file, backend=p.get("backend", "auto"), top=p.get("top"), seed=p.get("seed", 0),
                   timeout=p.get("timeout"))
    return _json(result.json_text())


def _check(job: JobInput) -> Any:
    from cda.api import check

    assert job.file is not None
    return check(job.file).model_dump(mode="json")


def _prove(job: JobInput) -> Any:
    from cda.cli.fol import read_fol_file
    from cda.fol.prove import prove_all

    p = job.params
    assert job.file is not None
    problem = read_fol_file(job.file)
    if not problem.claims:
        raise CDAError(f"{job.file}: no claim to prove (add a line 'claim φ')")
    results = prove_all(problem, p.get("timeout", 10.0), backend=p.get("backend", "auto"),
                        cross_check=p.get("cross_check", False), unique_names=p.get("unique_names", False))
    return {"results": [r.model_dump(mode="json") for r in results]}


def _diagnose(job: JobInput) -> Any:
    from cda.diagnosis.diagnose import diagnose

    p = job.params
    assert job.file is not None
    mode = p.get("mode", "all")
    report = diagnose(job.file, p.get("observations"), backend=p.get("backend", "auto"), mode=mode,
                      k=p.get("k"), timeout=p.get("timeout"), seed=p.get("seed", 0))
    data = report.model_dump(mode="json")
    del data["time_s"]  # a timing: results are compared byte for byte across runs and runners
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


register(JobKind("solve", _solve, {"backend": _BACKEND, "top": count, "seed": seed, "timeout": budget},
                 doc="rank explanations, check claims (a .cda file)", inputs=_dsl_inputs))
register(JobKind("check", _check, doc="parse and type-check a .cda file", inputs=_dsl_inputs))
register(JobKind("prove", _prove, {"backend": _BACKEND, "timeout": budget, "cross_check": flag, "unique_names": flag},
                 doc="prove the claims of a .fol file"))
register(JobKind("diagnose", _diagnose,
                 {"observations": text, "backend": _BACKEND, "mode": choice("all", "top", "min_cardinality"),
                  "k": count, "timeout": budget, "seed": seed},
                 paths=frozenset({"observations"}), doc="minimal diagnoses of a circuit (.bench or .wcnf[.gz])"))


# --- the Cedar kinds (cda.policy, imported when such a job runs) ---------------------------


class PolicyUnavailable(CDAError, RuntimeError):
    """A Cedar job ran where the ``cda.policy`` package is not installed."""


def _policy(kind: str) -> ModuleType:
    """``cda.policy.jobs``, the policy package's entry points for batch jobs, or a
    :class:`PolicyUnavailable` naming the kind (an import error inside the package is not hidden)."""
    try:
        return importlib.import_module("cda.policy.jobs")
    except ModuleNotFoundError as exc:
        if exc.name not in ("cda.policy", "cda.policy.jobs"):
            raise
        raise PolicyUnavailable(
            f"cda.policy not available: a {kind!r} job needs the Cedar policy package (cda/policy/), "
            "which this installation lacks"
        ) from None


def _cedar_test(job: JobInput) -> Any:
    return _policy("cedar-test").cedar_test(job)


def _policy_analysis(job: JobInput) -> Any:
    return _policy("policy-analysis").policy_analysis(job)


def _request_batch(job: JobInput) -> Any:
    return _policy("request-batch").request_batch(job)


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


def _cedar_test_verdict(result: Any) -> str | None:
    bad = int(result["imported"]) - int(result["agreed"])
    if bad:
        return (f"{bad} of {result['imported']} imported request(s) disagree with Cedar's expected answer "
                "(as `cda policy test` exits 1; the result lists them)")
    return None


def _analysis_verdict(result: Any) -> str | None:
    if result["holds"]:
        return None
    failed = [e["environment"] for e in result["environments"] if not e["holds"]]
    where = "; ".join(f"({e['principal_type']}, {e['action']}, {e['resource_type']})" for e in failed)
    return (f"{result['analysis']} does not hold for {where} (as `cda policy analyze` exits 1; the "
            "counterexample is in the result)")


#: analyses that compare the job's file with a second policy set (params.other)
_BINARY_ANALYSES = frozenset({"implies", "equivalent", "disjoint", "no-new-access"})


def _check_analysis(params: dict[str, Any]) -> tuple[str, str] | None:
    analysis = params["analysis"]
    if analysis in _BINARY_ANALYSES and "other" not in params:
        return "analysis", f"{analysis} compares two policy sets: a policy-analysis job needs params.other (the second file)"
    if analysis not in _BINARY_ANALYSES and "other" in params:
        return "other", f"{analysis} analyses one policy set: params.other would not be read"
    return None


_ANALYSES = choice("always-allows", "always-denies", "implies", "equivalent", "disjoint", "never-errors",
                   "no-new-access")

# The plug-in point for cda.policy: each kind calls cda.policy.jobs.<function>(job: JobInput)
# -> JSON. Parameters are checked here, so a bad manifest is refused before anything runs.
register(JobKind("cedar-test", _cedar_test, doc="a Cedar integration-test JSON file: agreement per request",
                 inputs=_cedar_test_inputs, verdict=_cedar_test_verdict))
register(JobKind("policy-analysis", _policy_analysis,
                 {"analysis": _ANALYSES, "other": text, "schema": text, "entities": text,
                  "principal_type": text, "action": text, "resource_type": text},
                 paths=frozenset({"other", "schema", "entities"}), required=frozenset({"analysis", "schema"}),
                 check=_check_analysis,
                 doc="an analysis of a Cedar policy set (file), against 'other' for implies/equivalent/disjoint/no-new-access",
                 verdict=_analysis_verdict))
register(JobKind("request-batch", _request_batch, {"schema": text, "entities": text, "requests": text},
                 paths=frozenset({"schema", "entities", "requests"}), required=frozenset({"requests"}),
                 doc="authorize every request of a JSON list against a Cedar policy set (file)"))
