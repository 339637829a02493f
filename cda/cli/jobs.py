"""``cda jobs run MANIFEST.toml``: run a batch, print a summary. Exit codes are the CLI's table
(:data:`EXIT_OF_STATUS`, the worst job's as over several files): 0 every job ok, 1 some job
failed (a negative verdict, an error, a crash), 3 some job has no complete answer (a budget's
partial, a solver's unknown, an escalation, killed at its time limit, over its memory), 2 a bad manifest or option, 130 interrupted (Ctrl-C: the
running jobs are killed, the finished ones kept).

On a terminal a one-line progress bar is drawn on stderr (plain text, redrawn with ``\\r``); a job's
name in it is shown with its control characters escaped (:func:`~cda.terminal_text.for_terminal`).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TextIO

from cda.adapters.jobs.batch import BatchReport, run_batch
from cda.adapters.jobs.isolate import EXIT_OF_STATUS
from cda.adapters.jobs.manifest import JobSpec, read_manifest
from cda.errors import CDAError
from cda.terminal_text import for_terminal

__all__ = ["EXIT_OF_STATUS", "main_jobs_run", "default_workers"]

_BAR = 24


def default_workers() -> int:
    """One job process per core this process may use."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


def _bar(err: TextIO) -> object:
    def show(report: BatchReport, spec: JobSpec | None) -> None:
        todo = report.total - report.skipped
        filled = _BAR if todo == 0 else report.ran * _BAR // todo
        last = f"  {for_terminal(spec.name, keep='')[:40]}" if spec is not None else ""  # a manifest's text
        err.write(f"\r[{'#' * filled}{'-' * (_BAR - filled)}] {report.ran}/{todo} jobs"
                  f" ({report.skipped} done before){last:<42}")
        err.flush()

    return show


def main_jobs_run(manifest_path: Path, out_dir: Path | None, workers: int | None, dask: str | None,
                  retry_failed: bool, out: TextIO, err: TextIO, as_json: bool = False) -> int:
    """Run the batch and print its summary (``as_json``: one object, ``{"jobs", "statuses", "ran",
    "done_before", "results", "exit_code"}``); returns the exit code."""
    try:
        manifest = read_manifest(manifest_path)
        if out_dir is None and str(manifest_path) == "-":
            raise CDAError("a manifest read from standard input has no folder to put its results beside: give --out DIR")
        target = out_dir if out_dir is not None else manifest_path.parent / f"{manifest_path.stem}.results"
        if target.exists() and not target.is_dir():
            raise CDAError(f"--out {target}: a file of that name exists; give a folder")
        bar = _bar(err) if err.isatty() else None
        report = run_batch(manifest, target, workers=workers or default_workers(), dask=dask,
                           retry_failed=retry_failed, progress=bar)  # type: ignore[arg-type]
    except CDAError as exc:
        err.write(exc.render() + "\n")
        return 2
    except KeyboardInterrupt:  # the running jobs were killed; the finished ones are in the store
        err.write("\ncda: interrupted: the finished jobs are kept; run the same command again to resume\n")
        return 130
    if err.isatty():
        err.write("\r" + " " * (_BAR + 80) + "\r")
    from cda.cli.ci_report import worst_exit_code

    code = worst_exit_code([EXIT_OF_STATUS[status] for status in report.statuses])
    if report.unaccounted:  # rows nobody can show a batch wrote: left out, their jobs run again
        from cda.adapters.jobs.results_store import unaccounted_problem

        err.write(f"cda: warning: {for_terminal(unaccounted_problem(report.unaccounted))}\n")
    if as_json:
        out.write(json.dumps({"jobs": report.total, "statuses": dict(sorted(report.statuses.items())), "ran": report.ran,
                              "done_before": report.skipped, "results": str(report.jsonl), "exit_code": code,
                              "unaccounted": report.unaccounted}) + "\n")
        return code
    counts = ", ".join(f"{n} {status}" for status, n in sorted(report.statuses.items()))
    out.write(f"{report.total} jobs: {counts}; {report.ran} ran now, {report.skipped} were done before\n")
    out.write(f"results: {for_terminal(str(report.jsonl), keep='')}\n")
    return code
