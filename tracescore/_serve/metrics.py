"""The service's own metrics, sent to the same downstream as everything else.

Counters: ``tracescore.serve.spans.received``, ``tracescore.serve.spans.passed_through``
(forwarded at once, no rule picked them), ``tracescore.serve.log_records.received``,
``tracescore.serve.requests.rejected`` (by ``tracescore.serve.reason`` and
``tracescore.serve.signal``). Gauges: ``tracescore.serve.spans.scored`` (spans held for scores
since start), ``tracescore.serve.spans.held`` (held now), ``tracescore.serve.spans.deferred``
(waiting for their trace now). Histogram: ``tracescore.serve.request.duration`` (seconds to
take one request). The score metrics of ``tracescore._telemetry`` (scores, jobs, judge tokens,
export drops) go through the same provider.
"""

from __future__ import annotations

from typing import Any

_DURATION_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0)


class ServiceMetrics:
    """Instruments of one service on ``meter_provider``.

    Args:
        meter_provider: an OTel ``MeterProvider``.
        service: the ``ScoringService`` whose gauges are read at collection time (its
            ``processor``, ``settler`` and ``admission``).
    """

    def __init__(self, meter_provider: Any, service: Any) -> None:
        from opentelemetry.metrics import Observation

        meter = meter_provider.get_meter("tracescore.serve")
        self.received = meter.create_counter(
            "tracescore.serve.spans.received", unit="{span}", description="Spans received.")
        self.passed = meter.create_counter(
            "tracescore.serve.spans.passed_through", unit="{span}",
            description="Spans no rule picked, forwarded at once.")
        self.records = meter.create_counter(
            "tracescore.serve.log_records.received", unit="{record}",
            description="Log records received (forwarded unchanged).")
        self.rejected = meter.create_counter(
            "tracescore.serve.requests.rejected", unit="{request}",
            description="Requests refused with backpressure, by reason.")
        self.duration = meter.create_histogram(
            "tracescore.serve.request.duration", unit="s",
            description="Time to take one export request.",
            explicit_bucket_boundaries_advisory=_DURATION_BUCKETS)

        def scored(_: Any) -> list[Any]:
            return [Observation(service.processor.stats.spans_scored)]

        def held(_: Any) -> list[Any]:
            return [Observation(service.processor.held_spans())]

        def deferred(_: Any) -> list[Any]:
            return [Observation(service.settler.deferred_spans)]

        meter.create_observable_counter(
            "tracescore.serve.spans.scored", [scored], unit="{span}",
            description="Spans held for their scores since start.")
        meter.create_observable_gauge(
            "tracescore.serve.spans.held", [held], unit="{span}",
            description="Spans held for their scores now.")
        meter.create_observable_gauge(
            "tracescore.serve.spans.deferred", [deferred], unit="{span}",
            description="Scored spans waiting for their trace to complete now.")
        service.admission.on_reject = self.reject

    def request_done(self, signal: str, items: int, passed: int, seconds: float) -> None:
        """Count one taken request."""
        if signal == "logs":
            self.records.add(items)
            return
        self.received.add(items)
        if passed:
            self.passed.add(passed)
        self.duration.record(seconds, {"tracescore.serve.signal": signal})

    def reject(self, reason: str, signal: str, items: int) -> None:
        """Count one refused request."""
        self.rejected.add(1, {"tracescore.serve.reason": reason,
                              "tracescore.serve.signal": signal})
