"""Checking ``--otel-endpoint`` before a server starts: a URL a collector can be at, and the SDK there.

Kept apart from :mod:`cda.adapters.otel_export` so the check imports nothing of OpenTelemetry
(``importlib.util.find_spec`` only looks the packages up).

>>> check_otel_endpoint("http://127.0.0.1:4318/v1/metrics") is None
True
>>> check_otel_endpoint("ftp://collector")
Traceback (most recent call last):
...
cda.errors.OptionError: --otel-endpoint 'ftp://collector': an http:// or https:// URL of an OTLP/HTTP collector, e.g. http://127.0.0.1:4318/v1/metrics
"""

from __future__ import annotations

import importlib.util
from urllib.parse import urlsplit

from cda.errors import OptionError

__all__ = ["OTEL_MODULES", "check_otel_endpoint"]

OTEL_MODULES = ("opentelemetry.sdk.metrics", "opentelemetry.exporter.otlp.proto.http.metric_exporter")
"""What the export imports: the SDK and its OTLP/HTTP exporter (the ``otel`` extra)."""

_MAX_URL = 2048


def check_otel_endpoint(url: str) -> None:
    """An :class:`~cda.errors.OptionError` naming ``--otel-endpoint`` unless ``url`` is an http(s)
    URL with a host and the ``otel`` extra is installed."""
    shown = url[:80]
    expected = "an http:// or https:// URL of an OTLP/HTTP collector, e.g. http://127.0.0.1:4318/v1/metrics"
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        raise OptionError(f"--otel-endpoint {shown!r}: {expected}") from None
    if len(url) > _MAX_URL or parts.scheme not in ("http", "https") or not parts.hostname or port == 0:
        raise OptionError(f"--otel-endpoint {shown!r}: {expected}")
    for name in OTEL_MODULES:
        try:
            found = importlib.util.find_spec(name) is not None
        except ModuleNotFoundError:
            found = False
        if not found:
            raise OptionError(f"--otel-endpoint needs the OpenTelemetry SDK and its OTLP exporter: "
                              f"pip install 'cda[otel]' ({name} is missing)")
