"""The policy package's entry points for batch jobs (``cda jobs run``: kinds ``cedar-test``,
``policy-analysis``, ``request-batch``; docs/jobs.md).

Each takes the job as the batch runner hands it (its main ``file`` and its checked ``params``,
paths relative to the manifest's folder, where the job process runs) and returns plain JSON with
no timings, so the same job gives the same bytes on the process pool and on Dask.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

from cda.errors import CDAError
from cda.files import parse_json, read_text

__all__ = ["authorize_request", "cedar_test", "policy_analysis", "request_batch"]


class Job(Protocol):
    """What the batch runner passes (``cda.adapters.jobs.kinds.JobInput``)."""

    file: Path | None
    params: dict[str, Any]


def _file(job: Job) -> Path:
    if job.file is None:
        raise CDAError("this job needs a file")
    return Path(job.file)


def authorize_request(job: Job) -> dict[str, Any]:
    """One request (the JSON file ``params.request``) authorized against the policy file
    (``cda policy authorize``)."""
    from cda.policy.authorization import authorize

    p = job.params
    return authorize(_file(job), Path(p["request"]), schema=p.get("schema"), entities=p.get("entities"),
                     links=p.get("links")).to_json()


def cedar_test(job: Job) -> dict[str, Any]:
    """A Cedar integration-test JSON file, or every one under a folder: agreement per request
    (``cda policy test``; its ``--json``)."""
    from cda.policy.cedar_tests import run_test_dir, run_test_file, summarize

    path = _file(job)
    if not path.exists():
        raise CDAError(f"{path}: no such file or folder")
    folder = path.is_dir()
    summary = summarize(run_test_dir(path) if folder else run_test_file(path))
    if summary["total"] == 0:
        raise CDAError(f"{path}: no Cedar test request found (no JSON file with 'requests', or only empty ones): "
                       "nothing checked" if folder else f"{path}: the test file has no request: nothing checked")
    return summary


def policy_analysis(job: Job) -> dict[str, Any]:
    """An analysis of the policy file, against ``other`` for the binary properties, for every
    entity store the schema allows (for the store ``entities`` when given), each file's
    templates linked by ``links`` (``other_links``), and with ``every_link`` by every link. The job's
    ``file`` is the policy set under review and ``other`` the one it is compared with, so
    ``implies`` asks "file implies other" (``equivalent``, ``disjoint``: file and other) and
    ``no-new-access`` asks "file (NEW) allows nothing other (OLD) denies", i.e. it runs
    ``cda policy analyze no-new-access OTHER FILE``."""
    from cda.policy.analyze import PROPERTIES, analyze_files

    p = job.params
    prop = str(p["analysis"])
    files = [_file(job)] + ([Path(p["other"])] if "other" in p else [])
    links = [p.get("links"), p.get("other_links")][: len(files)]
    if PROPERTIES.get(prop) == 2 and len(files) != 2:
        raise CDAError(f"a {prop} job needs a second policy file: params.other")
    if prop == "no-new-access":  # analyze_files takes OLD NEW; the job's file is NEW, other is OLD
        files.reverse()
        links.reverse()
    if "schema" not in p:
        raise CDAError("a policy-analysis job needs params.schema")
    timeout = p.get("timeout", 60.0)
    results = analyze_files(prop, files, schema=p["schema"], entities=p.get("entities"), action=p.get("action"),
                            principal_type=p.get("principal_type"), resource_type=p.get("resource_type"),
                            links=links if any(links) else (), every_link=bool(p.get("every_link", False)),
                            backend=p.get("backend", "z3"), timeout=float("inf") if timeout is None else timeout,
                            explain=bool(p.get("explain", False)), repair=bool(p.get("repair", False)))
    return {"analysis": prop, "status": str(min(r.status for r in results)),
            "environments": [r.to_json() for r in results]}


def request_batch(job: Job) -> dict[str, Any]:
    """Every request of a JSON list (``params.requests``) authorized against the policy file."""
    from cda.policy.authorization import authorize, load_policy_set

    p = job.params
    ps = load_policy_set(_file(job), p.get("schema"), p.get("entities"), p.get("links"))
    where = str(p["requests"])
    requests = parse_json(read_text(Path(where)), where, CDAError)
    if not isinstance(requests, list) or not all(isinstance(r, dict) for r in requests):
        raise CDAError(f"{where}: a JSON list of request objects")
    return {"answers": [authorize(ps, r).to_json() for r in requests]}
