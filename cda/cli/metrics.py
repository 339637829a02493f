"""``cda metrics STORE [--since T] [--json]``: spec §10 across the runs a store holds, SLOs as a gate.

STORE is the SQLite file ``cda run --out DIR`` writes (``DIR/receipts.sqlite``; the folder DIR
itself is accepted too) or the one ``cda serve DB`` writes. It is opened read-only and leaves no
trace (:func:`cda.actions.metrics_runs.read_runs`); a file CDA did not create is refused.

Exit codes (docs/operations.md, "Gating a deploy"):

* 0 — every SLO with data in the window is met;
* 1 — some SLO is not met (the runs that break it are named);
* 2 — usage error: no such file, not a CDA store, a bad ``--since``; one line, no traceback;
* 3 — not every SLO could be judged: no run ended in the window, or ANY of the three SLOs has
  no data (e.g. no run queried Ken): a gate never passes with a target unmeasured (a broken SLO
  still wins: 1).
"""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import TextIO

from cda.actions.metrics_report import MetricsReport, ms, ratio_json, summarise
from cda.actions.metrics_runs import read_runs
from cda.actions.metrics_window import since_instant
from cda.errors import CDAError
from cda.terminal_text import for_terminal

__all__ = ["EXIT_BROKEN", "EXIT_MET", "EXIT_NO_RUNS", "EXIT_USAGE", "exit_code", "main_metrics", "render_text",
           "store_path"]

EXIT_MET, EXIT_BROKEN, EXIT_USAGE, EXIT_NO_RUNS = 0, 1, 2, 3

_LABELS = {
    "ttfs_us": "TTFS from actions.start (queue included)",
    "ttfs_after_queue_us": "TTFS after the queue (run start)",
    "queue_us": "queue (actions.start to run start)",
    "ken_query_p95_us": "Ken query p95 (per run)",
    "ken_query_max_us": "Ken query max (per run)",
    "ken_queries": "Ken queries",
    "approval_wait_us": "approvals latency (per wait)",
    "run_total_us": "run duration",
    "frontier_size": "hypothesis frontier size",
    "constraints_satisfied": "constraints satisfied",
    "constraints_violated": "constraints violated",
    "verifier_pass_rate": "verifier pass rate",
    "citation_coverage": "citation coverage",
    "partial_ratio": "partial ratio",
}
_WIDTH = max(len(label) for label in _LABELS.values()) + 2


def store_path(path: Path) -> Path:
    """The store file: ``path`` itself, or ``path/receipts.sqlite`` for a ``cda run --out`` folder."""
    if path.is_dir():
        inner = path / "receipts.sqlite"
        if not inner.is_file():
            raise CDAError(f"{path}: a folder without receipts.sqlite (give the store file cda run --out or "
                           "cda serve wrote)")
        return inner
    return path


def exit_code(report: MetricsReport) -> int:
    """0 every SLO met, 1 some SLO broken, 3 some SLO unmeasured (see the module's docstring)."""
    if report.broken:
        return EXIT_BROKEN
    if report.runs == 0 or any(s.status == "no_data" for s in report.slos):
        return EXIT_NO_RUNS
    return EXIT_MET


def _when(ts: float | None) -> str:
    return "?" if ts is None else datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _value(unit: str, value: int | None) -> str:
    if value is None:
        return "-"
    return ms(value) if unit == "us" else str(value)


def render_text(store: Path | str, report: MetricsReport, since: float | None) -> str:
    """The human-readable report: the runs, a table of the metrics, the SLOs, then notes."""
    window = "all runs" if since is None else f"runs ended since {_when(since)}"
    if report.runs == 0:
        return f"{store}: no run in the window ({window}): nothing to judge\n"
    statuses = ", ".join(f"{k} {v}" for k, v in sorted(report.statuses.items()))
    lines = [f"{store}: {report.runs} run(s) ({statuses}), {window}, "
             f"ended {_when(report.first_end)} .. {_when(report.last_end)}", "",
             f"{'metric':<{_WIDTH}}{'n':>6}{'p50':>15}{'p95':>15}{'max':>15}"]
    for key, dist in report.distributions.items():
        lines.append(f"{_LABELS[key]:<{_WIDTH}}{dist.count:>6}{_value(dist.unit, dist.p50):>15}"
                     f"{_value(dist.unit, dist.p95):>15}{_value(dist.unit, dist.max):>15}")
    for key, ratio in report.ratios.items():
        shown = ratio_json(ratio)["percent"]
        lines.append(f"{_LABELS[key]:<{_WIDTH}}{'':>6}{shown:>15}   ({ratio.numerator}/{ratio.denominator})")
    lines += ["", "SLOs (spec §10):"]
    for slo in report.slos:
        mark = {"met": "met", "not_met": "NOT MET", "no_data": "no data"}[slo.status]
        line = f"  {mark:<8} {slo.title} {slo.target}: {slo.value} ({slo.statistic}, {slo.samples} run(s))"
        lines.append(line)
        if slo.over_target:
            shown = ", ".join(slo.over_target[:20]) + (f", ... ({len(slo.over_target)} in all)"
                                                        if len(slo.over_target) > 20 else "")
            label = "breaking runs" if slo.status == "not_met" else "runs over the target"
            lines.append(f"           {label}: {shown}")
    if report.uncited_claims:
        lines.append(f"\nsupported claims without a citation: {report.uncited_claims}")
    if report.without_metrics:
        lines.append(f"runs without metrics (statuses and the partial ratio only): {len(report.without_metrics)}")
    lines += [f"note: {note}" for note in report.notes]
    return "\n".join(lines) + "\n"


def main_metrics(store: Path, since: str | None, as_json: bool, out: TextIO, err: TextIO,
                 now: float | None = None) -> int:
    """The ``cda metrics`` command; returns the exit code."""
    try:
        instant = None if since is None else since_instant(since, now=time.time() if now is None else now)
        path = store_path(store)
        found = read_runs(path, since=instant)
    except CDAError as exc:
        err.write(exc.render() + "\n")
        return EXIT_USAGE
    report = summarise(found.runs)
    report.notes += [f"unreadable: {u}" for u in found.unreadable]
    code = exit_code(report)
    if as_json:
        doc = {"store": str(path), "since": instant, **report.as_json(), "exit_code": code}
        out.write(json.dumps(doc, sort_keys=True) + "\n")
    else:
        out.write(for_terminal(render_text(path, report, instant)))
    return code
