"""The SDK's private fields are read in one module, ``tracescore._core.otel_compat``, and only
after a
check at import: with every check failed (an SDK release that renamed the fields), the public
properties give the same sizes, copies and contexts."""

from __future__ import annotations

from typing import Any

import pytest
from opentelemetry.sdk.trace import Event, SpanLimits, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tracescore._core import otel_compat as _otel_compat
from tracescore._export.size import span_size
from tracescore._pipeline.held import with_events


def ended_spans() -> list[Any]:
    exporter = InMemorySpanExporter()
    # Tight limits, so that the copies must keep the counts the SDK dropped.
    provider = TracerProvider(span_limits=SpanLimits(max_attributes=3, max_events=2,
                                                     max_links=1))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("test")
    with tracer.start_as_current_span("plain") as span:
        span.set_attribute("input.value", "What is the capital of France?")
    with tracer.start_as_current_span("crowded") as span:
        for i in range(5):
            span.set_attribute(f"k{i}", "ünïcode" * i)
            span.add_event(f"e{i}", {"n": i})
    provider.shutdown()
    return list(exporter.get_finished_spans())


def described(span: Any) -> dict[str, Any]:
    copy = with_events(span, [Event("gen_ai.evaluation.result", {"score": 1.0})],
                       {"tracescore.score.x": 1.0})
    return {
        "context": _otel_compat.span_context(span),
        "fields": _otel_compat.span_fields(span)[:3],
        "size": span_size(span),
        "attributes": dict(copy.attributes or {}),
        "dropped": (copy.dropped_attributes, copy.dropped_events, copy.dropped_links),
        "events": [(e.name, dict(e.attributes or {})) for e in copy.events],
    }


def test_the_sdk_fields_are_readable_here() -> None:
    # Turns red when an SDK upgrade renames a field: then the slower public path is in use.
    assert (_otel_compat.FAST_SPANS, _otel_compat.FAST_ATTRIBUTES,
            _otel_compat.FAST_LISTS) == (True, True, True)


def test_without_the_private_fields_the_results_are_the_same(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    spans = ended_spans()
    fast = [described(s) for s in spans]
    for flag in ("FAST_SPANS", "FAST_ATTRIBUTES", "FAST_LISTS"):
        monkeypatch.setattr(_otel_compat, flag, False)
    slow = [described(s) for s in spans]
    assert slow == fast
    assert fast[1]["dropped"] == (2, 3, 0)
    assert fast[1]["events"][-1][0] == "gen_ai.evaluation.result"
