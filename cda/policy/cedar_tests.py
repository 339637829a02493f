"""Cedar's integration-test JSON files run through CDA: ``cda policy test`` and the benchmark.

A test file names a policy file, an entities file and a schema (paths relative to the folder
that holds ``tests/`` and ``sample-data/``, or ``corpus-tests/``) and lists requests with the
expected ``decision``, ``reason`` and ``errors``. A request CDA cannot import (a refused
construct, :class:`~cda.policy.syntax.UnsupportedConstruct`) is reported with the refusal and
its construct, never answered. Broken test data is no refusal: a test file that is not JSON, a
policy, schema or entities file that is missing or does not parse, a request that cannot be read
raise :class:`~cda.errors.CDAError` naming the test file.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from cda.errors import CDAError, DSLError
from cda.files import parse_json, read_text
from cda.policy.authorization import PolicySet, load_policy_set
from cda.policy.entities import read_request
from cda.policy.syntax import UnsupportedConstruct

__all__ = ["RequestResult", "run_test_file", "run_test_dir", "summarize", "test_root", "construct_of"]


@dataclass
class RequestResult:
    """One request of a test file: what Cedar expects, what CDA answered, whether they agree."""

    file: str
    index: int
    expected: dict[str, Any]
    decision: dict[str, Any] | None
    imported: bool
    agree: bool
    refusal: str | None = None
    construct: str | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def test_root(path: Path) -> Path:
    """The folder the paths inside a test file are relative to: the parent of ``tests/`` or
    ``corpus-tests/`` (else the file's own folder)."""
    for parent in path.resolve().parents:
        if parent.name in ("tests", "corpus-tests"):
            return parent.parent
    return path.resolve().parent


def construct_of(message: str) -> str:
    """A short name of the construct a refusal names (for the per-construct share)."""
    m = re.search(r"the (\w+)\(\) extension function|method (\w+)\(\)|the (\w+) extension type|(template slot)", message)
    if m:
        return next(g for g in m.groups() if g)
    return "parse error" if "expected" in message else "other"


def _expected(r: dict[str, Any]) -> dict[str, Any]:
    return {
        "decision": str(r.get("decision", "")).lower(),
        "reason": sorted(r.get("reason") or []),
        "errors": sorted(r.get("errors") or []),
    }


def run_test_file(path: str | Path, root: str | Path | None = None) -> list[RequestResult]:
    """Every request of one Cedar integration-test JSON file, answered and compared."""
    path = Path(path)
    base = Path(root) if root is not None else test_root(path)
    data = parse_json(read_text(path), str(path), DSLError)
    if not isinstance(data, dict) or not isinstance(data.get("requests"), list):
        raise CDAError(f"{path}: not a Cedar test file (an object with 'requests')")
    requests: list[dict[str, Any]] = data["requests"]
    if not all(isinstance(r, dict) for r in requests):
        raise CDAError(f"{path}: every entry of 'requests' must be a JSON object")
    ps: PolicySet | None = None
    refusal: UnsupportedConstruct | None = None
    try:
        ps = load_policy_set(
            base / data["policies"],
            base / data["schema"] if data.get("schema") else None,
            base / data["entities"] if data.get("entities") else None,
        )
    except UnsupportedConstruct as e:  # a construct CDA does not encode: a refusal, counted per construct
        refusal = e
    except CDAError as e:  # a missing file, a syntax error: broken test data, not a refusal
        raise CDAError(f"{path}: cannot load the test's policies, schema or entities: {e}") from None
    except KeyError as e:
        raise CDAError(f"{path}: the test file has no {e} field") from None
    out: list[RequestResult] = []
    for i, r in enumerate(requests):
        exp = _expected(r)
        if ps is None:
            msg = str(refusal)
            out.append(RequestResult(str(path), i, exp, None, False, False, msg, construct_of(msg)))
            continue
        try:
            req = read_request(r, ps.schema, f"{path}: requests[{i}]")
        except UnsupportedConstruct as e:
            out.append(RequestResult(str(path), i, exp, None, False, False, str(e), construct_of(str(e))))
            continue
        except CDAError as e:
            raise CDAError(f"{path}: requests[{i}] cannot be read: {e}") from None
        ans = ps.decide(req)
        got = {"decision": ans.decision, "reason": sorted(ans.reason), "errors": sorted(ans.errors)}
        out.append(RequestResult(str(path), i, exp, got, True, got == exp))
    return out


def run_test_dir(folder: str | Path) -> list[RequestResult]:
    """Every test file under ``folder`` (recursively, sorted; a file is a test when it is JSON
    with ``requests``), or the one file ``folder`` names."""
    folder = Path(folder)
    if folder.is_file():
        return run_test_file(folder)
    results: list[RequestResult] = []
    for f in sorted(folder.rglob("*.json")):
        if f.name.endswith(".entities.json") or f.name.startswith("entities"):
            continue
        try:
            head = parse_json(read_text(f), str(f), DSLError)
        except CDAError as e:  # a test file that cannot be read is reported, never skipped
            raise CDAError(f"{f}: not readable JSON, so not run: {e}") from None
        if isinstance(head, dict) and "requests" in head:
            results.extend(run_test_file(f))
    return results


def summarize(results: list[RequestResult]) -> dict[str, Any]:
    """``total``, ``imported``, ``agreed``, refusals per construct, and the results."""
    by_construct: dict[str, int] = {}
    for r in results:
        if not r.imported:
            key = r.construct or "other"
            by_construct[key] = by_construct.get(key, 0) + 1
    return {
        "total": len(results),
        "imported": sum(r.imported for r in results),
        "agreed": sum(r.agree for r in results),
        "refused_by_construct": dict(sorted(by_construct.items())),
        "results": [r.to_json() for r in results],
    }
