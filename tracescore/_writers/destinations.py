"""Where scores go besides the spans, set up by ``configure()``: the ``LoggerProvider`` of the
``gen_ai.evaluation.result`` log records, and the Phoenix annotation writer (issue 12).

Log records: when the application passes ``OutputOptions(logger_provider=...)`` or has set a global
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
``OutputOptions(meter_provider=...)`` and has set no global ``MeterProvider``, and spans are
exported where the environment says, tracescore makes a ``MeterProvider`` of its own with the span
resource and a periodic reader (``OTEL_METRIC_EXPORT_INTERVAL``, 60 s by default; every flush
exports too): OTLP from ``OTEL_EXPORTER_OTLP_METRICS_ENDPOINT``/``OTEL_EXPORTER_OTLP_ENDPOINT``,
or ``tracescore-metrics.jsonl`` beside the span file. It is not set globally either, so the
application's own instruments are untouched. ``TRACESCORE_METRICS=false`` (or the standard
``OTEL_METRICS_EXPORTER=none``) turns it off.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any

from tracescore._setup import env as _env

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
    # The counting wrappers of the owned providers (``_cutoff``), None when not owned.
    log_processor: Any = None
    metric_exporter: Any = None

    def phoenix_writer(self, phoenix_url: str) -> Any:
        """A function ``(telemetry) -> writer`` making the Phoenix annotation writer (which
        counts its posts in ``telemetry``) and keeping it here for flush and shutdown."""

        def make(telemetry: Any) -> Any:
            from tracescore._writers.phoenix import PhoenixAnnotationWriter

            writer = PhoenixAnnotationWriter(phoenix_url, telemetry)
            self.writers.append(writer)
            return writer

        return make

    def _jobs(self, timeout_millis: float, stop: bool) -> list[tuple[str, Any, Any]]:
        """(name, the flush or shutdown to run, the exporter to cut off at the deadline)."""
        ms = max(1, int(timeout_millis))
        jobs: list[tuple[str, Any, Any]] = []
        for writer in self.writers:
            call = getattr(writer, "shutdown" if stop else "force_flush", None)
            if call is not None:
                jobs.append(("annotations", lambda call=call: call(timeout_millis), None))
        if self.owned_logger_provider:
            provider = self.logger_provider
            cut = self.log_processor.counting if self.log_processor is not None else None
            jobs.append(("logs", provider.shutdown if stop
                         else (lambda: provider.force_flush(ms)), cut))
        if self.owned_meter_provider:
            meters = self.meter_provider
            jobs.append(("metrics", (lambda: meters.shutdown(timeout_millis=ms)) if stop
                         else (lambda: meters.force_flush(ms)), self.metric_exporter))
        return jobs

    def _run(self, timeout_millis: float, stop: bool) -> bool:
        """Run every destination's flush (or shutdown) at once on helper threads; at the
        deadline, cut off those still running (their exports then fail at once, counted), and
        let them send again once they have drained (after a flush)."""
        from tracescore._writers.cutoff import Pending

        deadline = time.monotonic() + max(0.0, timeout_millis) / 1000
        running = [(name, Pending(name, call, cut, resume=not stop))
                   for name, call, cut in self._jobs(timeout_millis, stop)]
        ok = True
        for name, pending in running:
            if not pending.wait(deadline - time.monotonic()):
                ok = False
                pending.cut_off()
                logger.warning("tracescore: the %s of %s missed its deadline; it is cut off "
                               "and what it had not sent is counted (stats().not_sent). The "
                               "application is unaffected.",
                               "shutdown" if stop else "flush", name)
            elif not stop and pending.result is not None and not pending.result:
                ok = False
        return ok

    def force_flush(self, timeout_millis: float) -> bool:
        """Flush the writers and the owned providers within ``timeout_millis``, whatever they
        do (see ``tracescore._writers.cutoff``)."""
        return self._run(timeout_millis, stop=False)

    def shutdown(self, timeout_millis: float) -> None:
        """Flush and stop the writers and the owned providers within ``timeout_millis``."""
        self._run(timeout_millis, stop=True)

    def not_sent(self) -> dict[str, int]:
        """What the destinations besides the span exporter did not deliver: ``log_records``
        (emitted, never accepted by the exporter: failed, cut off at a deadline, dropped by a
        full queue, or still waiting), ``metric_points`` (data points of failed or cut-off
        exports), ``annotations`` (Phoenix annotations dropped or failed)."""
        return {
            "log_records": self.log_processor.not_sent() if self.log_processor else 0,
            "metric_points": self.metric_exporter.not_sent if self.metric_exporter else 0,
            "annotations": sum(int(getattr(w, "dropped", 0)) + int(getattr(w, "failed", 0))
                               for w in self.writers),
        }


def build(*, resource: Any, logger_provider: Any, export_from_env: bool,
          meter_provider: Any = None) -> Destinations:
    """Set up the log records' and metrics' providers (see the module docstring); the Phoenix
    writer is added with ``phoenix_writer`` once the configuration's telemetry exists.

    Args:
        resource: the span resource, shared by tracescore's own providers.
        logger_provider: ``OutputOptions(logger_provider=...)`` or None.
        meter_provider: ``OutputOptions(meter_provider=...)`` or None.
        export_from_env: spans are exported where the environment says (no ``exporter=``).
    """
    dest = Destinations(logger_provider=logger_provider)
    if (logger_provider is None and export_from_env and _env.log_records()
            and not _global_sdk_logger_provider()):
        chosen = _exporters_log_exporter()
        if chosen is not None:
            from opentelemetry.sdk._logs import LoggerProvider

            from tracescore._writers.cutoff import CountingLogExporter, CountingLogProcessor

            exporter, description = chosen
            # shutdown_on_exit=False: tracescore's exit hook shuts it down within its deadline,
            # and a configure() that replaces this one already did (the SDK's own hook would
            # shut it down a second time, with a warning).
            provider = LoggerProvider(resource=resource, shutdown_on_exit=False)
            dest.log_processor = CountingLogProcessor(CountingLogExporter(exporter))
            provider.add_log_record_processor(dest.log_processor)
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

            from tracescore._writers.cutoff import CountingMetricExporter

            metric_exporter, description = chosen_metrics
            dest.metric_exporter = CountingMetricExporter(metric_exporter)
            dest.meter_provider = MeterProvider(
                resource=resource,
                metric_readers=[PeriodicExportingMetricReader(dest.metric_exporter)],
                shutdown_on_exit=False,  # as the LoggerProvider above
            )
            dest.owned_meter_provider = True
            dest.metrics_description = description
    return dest


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
    from tracescore._export.exporters import metric_exporter_from_env

    return metric_exporter_from_env()


def _exporters_log_exporter() -> Any:
    from tracescore._export.exporters import log_exporter_from_env

    return log_exporter_from_env()
