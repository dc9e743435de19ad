"""``ScoringService``: what ``tracescore serve`` does with each OTLP request, protocol aside.

Per received span, in the order of the request:

1. the trace settler notes it (``settle``);
2. it goes to the ``ScoringSpanProcessor``'s router (``_processor``), exactly as a span ended in
   process does: the readers say what it is, the rules whether any picks it (the same code and
   the same trace-id sampling as in process), and a span no rule picks goes straight to the
   export processor (``_export``), after its documents and tool calls are noted for later spans
   of its trace: no added latency;
3. a picked span whose scorers judge the trace's documents or tool calls is handed to the
   settler (the processor's ``defer`` hook) until its trace is complete, then scored with the
   rules selected when it arrived (``score_deferred``); any other picked span is held and
   scored at once, and exported once with its scores (span event and attributes), or on a
   carrier span past ``score_timeout``; score log records and metrics go to the same
   downstream. In ``forward_first`` mode every span is forwarded first and the processor only
   sends the scores (``forward.ScoresOnly``).

The service builds a ``Runtime`` of its own (``_runtime``: readers, processor, telemetry, input
caps, redactor) with the same builder as ``configure()`` (``_config.build_scoring``); it writes
nothing global: its redaction patterns apply to its runtime's redactor only (the export thread,
the log forwarder and its scoring jobs use it), not to ``configure()``'s.

Admission (``admission``) is decided for the whole request before any span of it is taken:
either every span is accepted, and each is forwarded exactly once, or the request is refused
with a retry hint and nothing of it is kept, so the sender's retry delivers it once later.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan

from tracescore._core import semconv as sc
from tracescore._pipeline.runtime import Runtime
from tracescore._setup.config import build_scoring, export_processor

from .._export.processor import SPAN_OVERHEAD
from .._export.size import span_size
from .admission import Admission, Refusal
from .config import ServeConfig
from .decode import count_log_records, spans_of
from .exporter import OtlpSpanExporter
from .forward import ScoresOnly
from .intake import Intake
from .logs import LogForwarder
from .metrics import ServiceMetrics
from .settle import ServiceTraceBuffer, TraceSettler
from .wiring import (
    build_judge,
    build_rules,
    fleet_limits,
    log_exporter,
    metric_exporter,
)

logger = logging.getLogger("tracescore")

# Counters of ``/stats`` that read 0 before anything happened.
_COUNTS = ("spans_received", "spans_passed_through", "spans_deferred", "spans_to_scoring",
           "log_records_received")


class ScoringService:
    """The service's pipeline: admission, reading, rules, settling, scoring, forwarding.

    Args:
        config: the validated configuration.
        span_exporter_override: an exporter in place of the downstream OTLP one (tests).
        telemetry_enabled: send self-metrics and score log records downstream (default True).
        settle_clock: the trace settler's monotonic clock (tests drive it).

    Raises:
        ServeConfigError: a rule's scorer cannot be built.
    """

    def __init__(self, config: ServeConfig, *, span_exporter_override: Any = None,
                 telemetry_enabled: bool = True,
                 settle_clock: Callable[[], float] = time.monotonic) -> None:
        self.config = config
        self.runtime = Runtime()
        # Every scorer factory that takes a judge is given the file's (``build_rules``).
        self.judge = build_judge(config)
        self.runtime.judge = self.judge
        self.runtime.set_limits(config.limits)  # the file's max_scoring_* (resolved)
        # The file's patterns (checked by RedactionOptions), on this service's runtime only.
        self.runtime.redactor.configure(list(config.redaction.patterns or ()), None)
        rules = build_rules(config, self.judge)
        self.rules, self.limit_store = fleet_limits(rules, config)
        self._wants_tool_calls = any(r.scorer.uses_tool_calls for r in self.rules)
        down = config.exporter
        exp = config.export
        self.export = export_processor(span_exporter_override or OtlpSpanExporter(down), exp,
                                       config.redaction, redactor=self.runtime.redactor)
        self._meter_provider: Any = None
        self._logger_provider: Any = None
        resource_attrs = {sc.SERVICE_NAME: config.service_name,
                          sc.SERVICE_INSTANCE_ID: f"{socket.gethostname()}-{os.getpid()}"}
        if telemetry_enabled:
            self._meter_provider, self._logger_provider = _providers(config, resource_attrs)
        trace = config.trace
        self.buffer = ServiceTraceBuffer(reads_tool_calls=self._wants_tool_calls,
                                         clock=settle_clock, max_traces=trace.max_traces,
                                         max_bytes=trace.max_bytes)
        self.forward_first = config.mode == "forward_first"
        self.processor, self.telemetry = build_scoring(
            self.runtime, self.rules, config.limits,
            downstream=ScoresOnly(self.export) if self.forward_first else self.export,
            flush_timeout=float(config.limits.flush_timeout or 0),
            meter_provider=self._meter_provider or _noop_meter_provider(),
            logger_provider=self._logger_provider or _noop_logger_provider(),
            trace_buffer=self.buffer, defer=self._defer)
        self.runtime.processor = self.processor
        self.runtime.telemetry = self.telemetry
        self.settler = TraceSettler(
            self.processor.score_deferred, self.buffer.finish, idle=trace.idle,
            settle_after_root=trace.settle_after_root, max_wait=trace.max_wait,
            max_bytes=trace.max_bytes, max_bytes_per_trace=trace.max_bytes_per_trace,
            max_traces=trace.max_traces, capacity=self._scoring_room,
            expect=self.buffer.expect, on_sweep=self.buffer.expire, clock=settle_clock)
        self.logs = LogForwarder(down.endpoint, down.protocol, dict(down.headers), down.timeout,
                                 down.compression, max_bytes=exp.queue_bytes // 4,
                                 redact=config.redaction.foreign_spans is not False,
                                 redactor=self.runtime.redactor)
        self.admission = Admission(self, config)
        self.intake = Intake(self, config.receivers.max_request_bytes)
        self.counts: Counter[str] = Counter()
        self._counts_lock = threading.Lock()
        self.metrics = ServiceMetrics(self._meter_provider or _noop_meter_provider(), self)
        self.draining = False
        self.stopping = False  # unready, still taking requests (``finish_traces``)
        self._stopped = False

    # -- requests ------------------------------------------------------------------------------
    def accept_traces(self, request: Any, size: int) -> Refusal | None:
        """Take an ``ExportTraceServiceRequest`` of ``size`` bytes whole, or refuse it whole.

        Returns:
            None when every span was taken; a ``Refusal`` (reason, retry-after seconds) when
            nothing was.
        """
        started = time.perf_counter()
        spans = spans_of(request)
        # Charged what the export queue will charge each span, so that an accepted request
        # fits (``size`` on the wire is not the measure: a tiny span costs SPAN_OVERHEAD).
        sizes = [span_size(span) for span in spans]
        charge = sum(sizes) + SPAN_OVERHEAD * len(spans)
        refusal = self.admission.reserve("traces", charge, len(spans))
        if refusal is not None:
            # They come back with the retry: their traces are not complete meanwhile.
            self.settler.refused()
            return refusal
        mark = 0
        try:
            passed = deferred = scored = 0
            if self.forward_first:
                for span, encoded in zip(spans, sizes, strict=True):
                    self.export.put(span, encoded)
                mark = self.export.mark()
            for span, encoded in zip(spans, sizes, strict=True):
                route = self._route(span, encoded)
                if route == "passed":
                    passed += 1
                elif route == "deferred":
                    deferred += 1
                else:
                    scored += 1
        finally:
            self.admission.release(charge)
        with self._counts_lock:
            self.counts["spans_received"] += len(spans)
            self.counts["spans_passed_through"] += passed
            self.counts["spans_deferred"] += deferred
            self.counts["spans_to_scoring"] += scored
        if mark and not self.export.wait_settled(mark, self.config.exporter.timeout + 5.0):
            # Still in memory: answered retryable, so the sender keeps its copy (the spans go
            # out here too once the downstream answers: a duplicate rather than a loss).
            return Refusal("not_forwarded", self.admission.retry_after,
                           "the downstream did not take the spans in time; retry")
        self.metrics.request_done("traces", len(spans), passed, time.perf_counter() - started)
        return None

    def accept_logs(self, raw: bytes, request: Any) -> Refusal | None:
        """Take an ``ExportLogsServiceRequest`` (its bytes and the parsed message) whole, or
        refuse it whole."""
        records = count_log_records(request)
        refusal = self.admission.reserve_logs(len(raw), records)
        if refusal is not None:
            return refusal
        self.logs.put(raw, records)
        with self._counts_lock:
            self.counts["log_records_received"] += records
        self.metrics.request_done("logs", records, records, 0.0)
        return None

    def _route(self, span: ReadableSpan, encoded: int | None = None) -> str:
        """``passed``, ``deferred`` or ``scored``: the processor's router decides (in
        ``forward_first`` mode every span went to export already, in ``accept_traces``)."""
        if span.context is not None:
            self.settler.seen(span)
        return self.processor.route(span, encoded, forward=not self.forward_first)

    def _defer(self, span: ReadableSpan) -> bool:
        """The processor's ``defer`` hook: the settler keeps a picked span whose scorers need
        its whole trace, and gives it back (``score_deferred``) once the trace is complete."""
        return self.settler.defer(span, span_size(span))

    def _scoring_room(self) -> int:
        """Spans the engine can take now (each may need one job per rule)."""
        per_span = max(1, len(self.rules))
        limit = int(self.config.limits.max_queue_size or 0)
        return (limit - self.processor.pending_jobs()) // per_span

    # -- state ---------------------------------------------------------------------------------
    def ready(self) -> bool:
        """Accepting requests and wanting more (started, not stopping)."""
        return not self.draining and not self._stopped and not self.stopping

    def finish_traces(self, timeout: float) -> bool:
        """The first step of a drain: readiness turns false (the Collector's DNS resolver and
        the Kubernetes endpoints drop the replica) while requests are still taken, so the late
        spans of the traces that have spans waiting arrive; returns once those traces are
        complete (by their own windows), or after ``timeout`` seconds (False)."""
        self.stopping = True
        waiting = self.settler.waiting_traces()
        deadline = time.monotonic() + timeout
        while waiting and self.settler.any_waiting(waiting):
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.05)
        return True

    def snapshot(self) -> dict[str, Any]:
        """Counters and gauges (``/stats``)."""
        stats = self.processor.stats
        with self._counts_lock:
            out: dict[str, Any] = {key: 0 for key in _COUNTS}
            out.update(self.counts)
        export_counts = dict(self.export.counts)
        out.update(
            mode=self.config.mode,
            spans_scored=stats.spans_scored,
            spans_exported=stats.spans_exported,
            # Healthy exports are not drops: forwarded and dropped (by cause) apart.
            spans_forwarded=export_counts.pop("exported", 0),
            spans_dropped=export_counts,
            spans_rejected_downstream=dict(self.export.rejections),
            skipped_queue_full=stats.skipped_queue_full,
            skipped_held_full=stats.skipped_held_full,
            skipped_rate_limited=stats.skipped_rate_limited,
            skipped_budget=stats.skipped_budget,
            jobs_dropped=stats.jobs_dropped,
            held_spans=self.processor.held_spans(),
            pending_jobs=self.processor.pending_jobs(),
            deferred_spans=self.settler.deferred_spans,
            traces_tracked=len(self.settler),
            trace_overflow=dict(self.settler.overflow),
            trace_buffer_evictions=dict(self.buffer.evictions),
            export_queue_bytes=self.export.queued_bytes,
            export_queue_spans=self.export.queued_spans,
            spool_batches=len(self.export.spool) if self.export.spool is not None else 0,
            log_records_forwarded=self.logs.forwarded_records,
            log_records_dropped=self.logs.dropped_records,
            log_records_rejected_downstream=dict(self.logs.rejected),
            rejected=dict(self.admission.rejected),
            requests_invalid=dict(self.intake.refused),
            draining=self.draining,
        )
        # What a crash now would lose: accepted, not yet handed downstream (forward_first:
        # held and deferred copies are scores only, the spans went out).
        out["spans_at_risk"] = out["export_queue_spans"] + (
            0 if self.forward_first else out["held_spans"] + out["deferred_spans"])
        return out

    # -- lifecycle -----------------------------------------------------------------------------
    def drain(self) -> None:
        """Refuse new requests from now on (readiness turns false)."""
        self.draining = True

    def shutdown(self, timeout: float | None = None) -> bool:
        """Score and forward everything accepted, within ``timeout`` seconds (default
        ``limits.flush_timeout``). Returns True when everything went out in time."""
        if self._stopped:
            return True
        self.draining = True
        self._stopped = True
        budget = self.config.shutdown_timeout if timeout is None else timeout
        deadline = time.monotonic() + budget
        self.settler.release_all()
        pending_scores = self.processor.force_flush(int(max(0.0, (deadline - time.monotonic())
                                                           * 0.8) * 1000))
        self.processor.shutdown(max(0.0, deadline - time.monotonic()) * 1000)
        logs_ok = self.logs.flush(max(0.0, deadline - time.monotonic()))
        self.logs.shutdown(0.0)
        for provider in (self._logger_provider, self._meter_provider):
            if provider is not None:
                try:
                    provider.shutdown()
                except Exception:
                    logger.debug("tracescore serve: a telemetry provider failed to shut down",
                                 exc_info=True)
        if self.limit_store is not None:
            self.limit_store.stop()
        lost = sum(self.export.counts.values()) - self.export.counts.get("exported", 0)
        return bool(pending_scores and logs_ok and lost == 0)


def _providers(config: ServeConfig, resource_attrs: dict[str, str]) -> tuple[Any, Any]:
    from opentelemetry.sdk._logs import LoggerProvider
    from opentelemetry.sdk._logs.export import BatchLogRecordProcessor
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
    from opentelemetry.sdk.resources import Resource

    resource = Resource.create(resource_attrs)
    reader = PeriodicExportingMetricReader(metric_exporter(config.downstream),
                                           export_interval_millis=config.metrics_interval * 1000)
    meters = MeterProvider(resource=resource, metric_readers=[reader])
    loggers = LoggerProvider(resource=resource)
    loggers.add_log_record_processor(BatchLogRecordProcessor(
        log_exporter(config.downstream), schedule_delay_millis=500))
    return meters, loggers


def _noop_meter_provider() -> Any:
    from opentelemetry.metrics import NoOpMeterProvider

    return NoOpMeterProvider()


def _noop_logger_provider() -> Any:
    from opentelemetry._logs import NoOpLoggerProvider

    return NoOpLoggerProvider()
