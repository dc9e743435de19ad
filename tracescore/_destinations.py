"""Where scores go besides the spans, set up by ``configure()``: the ``LoggerProvider`` of the
``gen_ai.evaluation.result`` log records, and the Phoenix annotation writer (issue 12).

Log records: when the application passes ``configure(logger_provider=...)`` or has set a global
SDK ``LoggerProvider``, that one is used. Otherwise, when spans are exported where the
environment says (no ``exporter=`` given), tracescore makes a ``LoggerProvider`` of its own with
the span resource and a batch processor: OTLP from the same ``OTEL_EXPORTER_OTLP_*`` variables
(``..._LOGS_ENDPOINT``/``..._LOGS_PROTOCOL`` first), or the sibling file of the span file
(``tracescore-logs.jsonl``). That provider is **not** set as the global one: it carries only
tracescore's score records, so it never captures the application's logs nor takes the place a
later ``set_logger_provider`` of the application expects to fill. With a custom ``exporter=``
or ``exporter=False``, tracescore makes no provider (pass ``logger_provider=`` for records);
``TRACESCORE_LOG_RECORDS=false`` turns tracescore's own provider off (a backend without an OTLP
logs endpoint, such as Arize Phoenix, answers the records with HTTP 405).

Metrics (issue 24) follow the log records: when the application passes no
``configure(meter_provider=...)`` and has set no global ``MeterProvider``, and spans are exported
where the environment says, tracescore makes a ``MeterProvider`` of its own with the span
resource and a periodic reader (``OTEL_METRIC_EXPORT_INTERVAL``, 60 s by default; every flush
exports too): OTLP from ``OTEL_EXPORTER_OTLP_METRICS_ENDPOINT``/``OTEL_EXPORTER_OTLP_ENDPOINT``,
or ``tracescore-metrics.jsonl`` beside the span file. It is not set globally either, so the
application's own instruments are untouched. ``TRACESCORE_METRICS=false`` (or the standard
``OTEL_METRICS_EXPORTER=none``) turns it off.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from . import _env
from ._errors import ConfigurationError

logger = logging.getLogger("tracescore")


@dataclass
class Destinations:
    """What ``configure()`` built for scores beyond the spans.

    Attributes:
        logger_provider: the provider score records go to (None: the global one).
        owned_logger_provider: True when tracescore made it (and flushes and shuts it down).
        logs_description: where records go (``file ...``, ``OTLP ...``), or ``""``.
        writers: extra writers for the engine (the Phoenix writer).
        meter_provider: the provider metrics go to (None: the global one).
        owned_meter_provider: True when tracescore made it (and flushes and shuts it down).
        metrics_description: where metrics go (``file ...``, ``OTLP ...``), or ``""``.
    """

    logger_provider: Any = None
    owned_logger_provider: bool = False
    logs_description: str = ""
    writers: list[Any] = field(default_factory=list)
    meter_provider: Any = None
    owned_meter_provider: bool = False
    metrics_description: str = ""

    def force_flush(self, timeout_millis: float) -> bool:
        """Flush the writers and the owned provider within ``timeout_millis``."""
        ok = True
        for writer in self.writers:
            flush = getattr(writer, "force_flush", None)
            if flush is not None:
                ok = bool(flush(timeout_millis)) and ok
        if self.owned_logger_provider:
            ok = bool(self.logger_provider.force_flush(int(timeout_millis))) and ok
        if self.owned_meter_provider:
            try:
                ok = bool(self.meter_provider.force_flush(max(1, int(timeout_millis)))) and ok
            except Exception:  # the SDK raises when the deadline passes mid-collection
                logger.debug("tracescore metrics flush failed", exc_info=True)
                ok = False
        return ok

    def shutdown(self, timeout_millis: float) -> None:
        """Flush and stop the writers and the owned provider."""
        for writer in self.writers:
            stop = getattr(writer, "shutdown", None)
            if stop is not None:
                try:
                    stop(timeout_millis)
                except Exception:
                    logger.debug("tracescore writer shutdown failed", exc_info=True)
        if self.owned_logger_provider:
            try:
                self.logger_provider.shutdown()
            except Exception:
                logger.debug("tracescore log provider shutdown failed", exc_info=True)
        if self.owned_meter_provider:
            try:  # collects and exports what was recorded since the last export
                self.meter_provider.shutdown(timeout_millis=max(1, int(timeout_millis)))
            except Exception:
                logger.debug("tracescore meter provider shutdown failed", exc_info=True)


def resolve_phoenix_url(value: Any) -> str | None:
    """``configure(phoenix_url=...)``, else ``TRACESCORE_PHOENIX_URL``; ``False`` turns it off.

    Raises:
        ConfigurationError: ``value`` is not an http(s) URL, False or None.
    """
    if value is False:
        return None
    if value is None:
        return _env.phoenix_url()
    if not isinstance(value, str) or not value.startswith(("http://", "https://")):
        raise ConfigurationError(
            "configure(phoenix_url=...) takes Phoenix's base URL, e.g. 'http://127.0.0.1:6006'"
        )
    return value.rstrip("/")


def build(*, resource: Any, logger_provider: Any, export_from_env: bool,
          phoenix_url: str | None, telemetry_holder: list[Any],
          meter_provider: Any = None) -> Destinations:
    """Set up the log records' and metrics' providers and the Phoenix writer (see the module
    docstring).

    Args:
        resource: the span resource, shared by tracescore's own providers.
        logger_provider: ``configure(logger_provider=...)`` or None.
        meter_provider: ``configure(meter_provider=...)`` or None.
        export_from_env: spans are exported where the environment says (no ``exporter=``).
        phoenix_url: Phoenix's base URL, or None.
        telemetry_holder: filled later with the ``Telemetry`` the Phoenix writer counts in.
    """
    dest = Destinations(logger_provider=logger_provider)
    if (logger_provider is None and export_from_env and _env.log_records()
            and not _global_sdk_logger_provider()):
        chosen = _exporters_log_exporter()
        if chosen is not None:
            from opentelemetry.sdk._logs import LoggerProvider
            from opentelemetry.sdk._logs.export import BatchLogRecordProcessor

            exporter, description = chosen
            provider = LoggerProvider(resource=resource)
            provider.add_log_record_processor(BatchLogRecordProcessor(exporter))
            dest.logger_provider = provider
            dest.owned_logger_provider = True
            dest.logs_description = description
    dest.meter_provider = meter_provider
    if (meter_provider is None and export_from_env and _env.own_metrics()
            and not _global_meter_provider()):
        chosen_metrics = _exporters_metric_exporter()
        if chosen_metrics is not None:
            from opentelemetry.sdk.metrics import MeterProvider
            from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader

            metric_exporter, description = chosen_metrics
            dest.meter_provider = MeterProvider(
                resource=resource,
                metric_readers=[PeriodicExportingMetricReader(metric_exporter)],
            )
            dest.owned_meter_provider = True
            dest.metrics_description = description
    if phoenix_url is not None:
        from ._writers.phoenix import PhoenixAnnotationWriter

        dest.writers.append(PhoenixAnnotationWriter(phoenix_url, _Deferred(telemetry_holder)))
    return dest


class _Deferred:
    """The ``Telemetry`` of the configuration, which is built after the writers."""

    def __init__(self, holder: list[Any]) -> None:
        self._holder = holder

    def record_annotations(self, outcome: str, count: int) -> None:
        if self._holder:
            self._holder[0].record_annotations(outcome, count)


def _global_sdk_logger_provider() -> bool:
    from opentelemetry import _logs

    provider = _logs.get_logger_provider()
    return not (isinstance(provider, _logs.NoOpLoggerProvider)
                or type(provider).__name__ == "ProxyLoggerProvider")


def _global_meter_provider() -> bool:
    from opentelemetry import metrics

    provider = metrics.get_meter_provider()
    return not (isinstance(provider, metrics.NoOpMeterProvider)
                or type(provider).__name__ == "_ProxyMeterProvider")


def _exporters_metric_exporter() -> Any:
    from ._exporters import metric_exporter_from_env

    return metric_exporter_from_env()


def _exporters_log_exporter() -> Any:
    from ._exporters import log_exporter_from_env

    return log_exporter_from_env()
