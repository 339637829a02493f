"""OpenTelemetry export of spec §10: each finished run's metrics on OTel instruments (off by default).

Turned on by ``cda serve --otel-endpoint URL`` (an OTLP/HTTP collector, e.g.
``http://127.0.0.1:4318/v1/metrics``; needs the ``otel`` extra: ``pip install 'cda[otel]'``).
The SDK is imported here only, and this module only when an endpoint is configured, so neither
``cda --help`` nor a server without an endpoint loads it. The service's ``metrics`` topic
(:mod:`cda.service.metrics_stream`) hands every run it reads to :meth:`OtelExport.record`.

The instruments carry the same numbers ``cda metrics --json`` prints for the same runs (a test
compares them through the SDK's in-memory reader): a histogram's count, sum, min and max are the
distribution's ``count``, ``sum``, ``min`` and ``max``; a ratio is two counters, its numerator
and its denominator (a collector divides them; a rate is never pre-averaged). Times are integer
microseconds (unit ``us``), and the histograms' bucket edges include both SLO thresholds (700 ms
and 3 s), so a collector can count the runs over either exactly.

=============================  =========  ==============================================
instrument                     kind       ``cda metrics --json`` field
=============================  =========  ==============================================
cda.runs {status}              counter    ``statuses`` (and ``partial_ratio.denominator``)
cda.runs.partial               counter    ``partial_ratio.numerator``
cda.ttfs                       histogram  ``ttfs_us`` (from ``actions.start``: ``queued_us`` + the run's)
cda.ken.query.p95              histogram  ``ken_query_p95_us`` (each run's p95)
cda.ken.query.max              histogram  ``ken_query_max_us``
cda.ken.queries                histogram  ``ken_queries``
cda.approval.wait              histogram  ``approval_wait_us`` (each wait)
cda.run.duration               histogram  ``run_total_us``
cda.frontier.size              histogram  ``frontier_size``
cda.constraints.satisfied      histogram  ``constraints_satisfied``
cda.constraints.violated       histogram  ``constraints_violated``
cda.verifiers.passed/decided   counters   ``verifier_pass_rate`` numerator/denominator
cda.claims.cited/supported     counters   ``citation_coverage`` numerator/denominator
=============================  =========  ==============================================
"""

from __future__ import annotations

from typing import Any

from cda.actions.metrics_report import ttfs_sample
from cda.actions.metrics_runs import RunMetrics
from cda.errors import CDAError

__all__ = ["BUCKETS_US", "OtelExport"]

BUCKETS_US = (1_000, 5_000, 10_000, 50_000, 100_000, 250_000, 500_000, 700_000, 1_000_000, 2_000_000,
              3_000_000, 5_000_000, 10_000_000, 30_000_000, 60_000_000)
"""Histogram bucket edges for times (microseconds): the SLO thresholds 700 ms and 3 s are edges."""

_COUNT_BUCKETS = (0, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1000)


class OtelExport:
    """The instruments, on a meter of the given ``MeterProvider``; :meth:`record` feeds them."""

    def __init__(self, meter_provider: Any) -> None:
        meter = meter_provider.get_meter("cda")

        def times(name: str, what: str) -> Any:
            return meter.create_histogram(name, unit="us", description=what,
                                          explicit_bucket_boundaries_advisory=list(BUCKETS_US))

        def counts(name: str, unit: str, what: str) -> Any:
            return meter.create_histogram(name, unit=unit, description=what,
                                          explicit_bucket_boundaries_advisory=list(_COUNT_BUCKETS))

        self.provider = meter_provider
        self.runs = meter.create_counter("cda.runs", unit="{run}", description="finished runs, by status")
        self.partial = meter.create_counter("cda.runs.partial", unit="{run}", description="runs that ended partial")
        self.ttfs = times("cda.ttfs", "actions.start (a server's queue included) to the first draft boundary summary "
                          "(no draft: first summary, else the run)")
        self.ken_p95 = times("cda.ken.query.p95", "each run's Ken query p95")
        self.ken_max = times("cda.ken.query.max", "each run's slowest Ken query")
        self.ken_queries = counts("cda.ken.queries", "{query}", "Ken queries per run")
        self.approval_wait = times("cda.approval.wait", "each approval an action waited for")
        self.duration = times("cda.run.duration", "a run's start to its terminal event")
        self.frontier = counts("cda.frontier.size", "{hypothesis}", "the hypothesis frontier a run reported")
        self.satisfied = counts("cda.constraints.satisfied", "{clause}", "constraints satisfied")
        self.violated = counts("cda.constraints.violated", "{clause}", "constraints violated")
        self.passed = meter.create_counter("cda.verifiers.passed", unit="{outcome}", description="verifier passes")
        self.decided = meter.create_counter("cda.verifiers.decided", unit="{outcome}",
                                            description="verifier outcomes that passed or failed")
        self.cited = meter.create_counter("cda.claims.cited", unit="{claim}",
                                          description="supported claims with a citation")
        self.supported = meter.create_counter("cda.claims.supported", unit="{claim}", description="supported claims")

    @classmethod
    def to_endpoint(cls, endpoint: str, interval_s: float = 10.0) -> OtelExport:
        """Exporting to an OTLP/HTTP collector every ``interval_s``; a :class:`CDAError` that names
        the extra when the SDK is not installed."""
        try:
            from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
            from opentelemetry.sdk.metrics import MeterProvider
            from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
        except ImportError as exc:
            raise CDAError(f"--otel-endpoint needs the OpenTelemetry SDK: pip install 'cda[otel]' ({exc.name} "
                           "is missing)") from None
        reader = PeriodicExportingMetricReader(OTLPMetricExporter(endpoint=endpoint),
                                               export_interval_millis=interval_s * 1000)
        return cls(MeterProvider(metric_readers=[reader]))

    def record(self, run: RunMetrics) -> None:
        """One finished run onto the instruments."""
        self.runs.add(1, {"status": run.status})
        if run.status == "partial":
            self.partial.add(1)
        m = run.metrics
        if m is None:
            return
        self.frontier.record(m.frontier.final)
        self.satisfied.record(m.constraints.satisfied)
        self.violated.record(m.constraints.violated)
        self.ken_queries.record(m.ken_queries)
        self.passed.add(m.verifiers.pass_rate.numerator)
        self.decided.add(m.verifiers.pass_rate.denominator)
        self.cited.add(m.citations.coverage.numerator)
        self.supported.add(m.citations.coverage.denominator)
        x = m.measurements
        if x is None:
            return
        self.duration.record(x.total_us)
        sample = ttfs_sample(run)  # the sample cda metrics judges TTFS on (a draft, else a fallback)
        if sample is not None:
            self.ttfs.record(sample)
        if x.ken.p95_us is not None:
            self.ken_p95.record(x.ken.p95_us)
        if x.ken.max_us is not None:
            self.ken_max.record(x.ken.max_us)
        for wait in x.approval_waits:
            self.approval_wait.record(wait.waited_us)

    def shutdown(self) -> None:
        """Flush and stop the provider (the server's shutdown)."""
        self.provider.shutdown()
