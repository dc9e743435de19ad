"""The service's own metrics, sent to the same downstream as everything else.

Counters: ``tracescore.serve.spans.received``, ``tracescore.serve.spans.passed_through``
(forwarded at once, no rule picked them), ``tracescore.serve.log_records.received``,
``tracescore.serve.requests.rejected`` (backpressure, by ``tracescore.serve.reason`` and
``tracescore.serve.signal``), ``tracescore.serve.requests.invalid`` (refused before admission:
malformed, too large, unauthenticated, timeouts; by reason and signal). Gauges (the backlog):
``tracescore.serve.spans.scored`` (spans held for scores since start),
``tracescore.serve.spans.held`` (held now), ``tracescore.serve.spans.deferred`` (waiting for
their trace now), ``tracescore.serve.export.queued`` (spans waiting for export now),
``tracescore.serve.export.spooled`` (batches in the retry spool now),
``tracescore.serve.spans.at_risk`` (accepted, not yet handed downstream: what a crash now
would lose). Histogram:
``tracescore.serve.request.duration`` (seconds to take one request). The score metrics of
``tracescore._writers.instruments`` (scores, jobs, judge tokens, export drops) go through the same
provider.

The same figures are served in Prometheus' text format on ``/metrics``
(``prometheus_text``), so the backlog can be scraped where the Collector's metrics stop.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tracescore._core import semconv as sc
from tracescore._writers.instruments import create_instrument


class ServiceMetrics:
    """Instruments of one service on ``meter_provider``.

    Args:
        meter_provider: an OTel ``MeterProvider``.
        service: the ``ScoringService`` whose gauges are read at collection time (its
            ``processor``, ``settler`` and ``admission``).
    """

    def __init__(self, meter_provider: Any, service: Any) -> None:
        meter = meter_provider.get_meter(sc.SERVE_INSTRUMENTATION_SCOPE)

        def spooled() -> int:
            spool = service.export.spool
            return len(spool) if spool is not None else 0

        def at_risk() -> int:
            queued_now = int(service.export.queued_spans)
            if getattr(service, "forward_first", False):
                return queued_now
            return (queued_now + int(service.processor.held_spans())
                    + int(service.settler.deferred_spans))

        gauges: dict[str, Callable[[], int]] = {
            "serve_scored": lambda: int(service.processor.stats.spans_scored),
            "serve_held": lambda: int(service.processor.held_spans()),
            "serve_deferred": lambda: int(service.settler.deferred_spans),
            "serve_queued": lambda: int(service.export.queued_spans),
            "serve_spooled": spooled,
            "serve_at_risk": at_risk,
        }
        made = {
            key: create_instrument(meter, spec, gauges.get(key))
            for key, spec in sc.METRICS.items()
            if key.startswith("serve_")
        }
        self.received = made["serve_received"]
        self.passed = made["serve_passed"]
        self.records = made["serve_records"]
        self.rejected = made["serve_rejected"]
        self.duration = made["serve_duration"]
        self.invalid = made["serve_invalid"]
        self._service = service
        service.admission.on_reject = self.reject
        intake = getattr(service, "intake", None)
        if intake is not None:
            intake.on_refuse = self.refuse

    def request_done(self, signal: str, items: int, passed: int, seconds: float) -> None:
        """Count one taken request."""
        if signal == "logs":
            self.records.add(items)
            return
        self.received.add(items)
        if passed:
            self.passed.add(passed)
        self.duration.record(seconds, {sc.TRACESCORE_SERVE_SIGNAL: signal})

    def reject(self, reason: str, signal: str, items: int) -> None:
        """Count one refused request."""
        self.rejected.add(1, {sc.TRACESCORE_SERVE_REASON: reason,
                              sc.TRACESCORE_SERVE_SIGNAL: signal})

    def refuse(self, reason: str, signal: str) -> None:
        """Count one request refused before admission."""
        self.invalid.add(1, {sc.TRACESCORE_SERVE_REASON: reason,
                             sc.TRACESCORE_SERVE_SIGNAL: signal})

    def prometheus_text(self) -> str:
        """The backlog and the counters in Prometheus' text exposition format (0.0.4)."""
        snap = self._service.snapshot()
        lines: list[str] = []

        def metric(name: str, kind: str, help_text: str, value: Any,
                   label: str | None = None) -> None:
            lines.append(f"# HELP {name} {help_text}")
            lines.append(f"# TYPE {name} {kind}")
            if label is None:
                lines.append(f"{name} {float(value or 0):g}")
                return
            for key, count in sorted(dict(value or {}).items()):
                escaped = str(key).replace("\\", "\\\\").replace('"', '\\"')
                lines.append(f'{name}{{{label}="{escaped}"}} {float(count):g}')

        metric("tracescore_serve_spans_received_total", "counter", "Spans received.",
               snap.get("spans_received"))
        metric("tracescore_serve_spans_forwarded_total", "counter",
               "Spans the downstream accepted.", snap.get("spans_forwarded"))
        metric("tracescore_serve_spans_dropped_total", "counter",
               "Spans that will never be forwarded, by cause.", snap.get("spans_dropped"),
               "cause")
        metric("tracescore_serve_spans_deferred", "gauge",
               "Scored spans waiting for their trace to complete.", snap.get("deferred_spans"))
        metric("tracescore_serve_spans_held", "gauge", "Spans held for their scores.",
               snap.get("held_spans"))
        metric("tracescore_serve_export_queued", "gauge", "Spans waiting to be forwarded.",
               snap.get("export_queue_spans"))
        metric("tracescore_serve_spans_at_risk", "gauge",
               "Spans accepted and not yet handed downstream (a crash now loses them).",
               snap.get("spans_at_risk"))
        metric("tracescore_serve_export_queued_bytes", "gauge",
               "Bytes the export queue charges for them.", snap.get("export_queue_bytes"))
        metric("tracescore_serve_export_spooled", "gauge",
               "Batches in the retry spool.", snap.get("spool_batches"))
        metric("tracescore_serve_scoring_pending", "gauge", "Scoring jobs pending.",
               snap.get("pending_jobs"))
        metric("tracescore_serve_requests_rejected_total", "counter",
               "Requests refused with backpressure, by reason.", snap.get("rejected"), "reason")
        metric("tracescore_serve_requests_invalid_total", "counter",
               "Requests refused before admission, by reason.", snap.get("requests_invalid"),
               "reason")
        return "\n".join(lines) + "\n"
