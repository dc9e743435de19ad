"""Held spans: the exported copy keeps everything the SDK recorded, dropped counts included."""

from __future__ import annotations

from typing import Any

import pytest
from opentelemetry.sdk.trace import SpanLimits, TracerProvider

import tracescore
from tests.helpers import ProbeScorer, eval_events, finished, memory_configure


@pytest.fixture(autouse=True)
def _cleanup() -> Any:
    yield
    tracescore.shutdown(2000)


def test_the_exported_copy_keeps_the_dropped_counts() -> None:
    provider = TracerProvider(span_limits=SpanLimits(max_span_attributes=3, max_events=1,
                                                     max_links=0))
    inst, exp = memory_configure(tracer_provider=provider, scoring=[tracescore.ScoringRule(
        scorer=ProbeScorer(), on=lambda span: span.name == "limited")])
    tracer = provider.get_tracer("test")
    with tracer.start_as_current_span("limited", attributes={f"a{i}": i for i in range(5)},
                                      links=[]) as span:
        span.add_event("one")
        span.add_event("two")
        span.set_attribute("output.value", "an output")
    (exported,) = finished(exp)
    assert len(eval_events(exported)) == 1  # the score was attached to a copy ...
    assert exported.dropped_attributes == 3  # ... that says what the SDK dropped
    assert exported.dropped_events == 1
    assert [e.name for e in exported.events] == ["two", "gen_ai.evaluation.result"]
    # The span's 3 attributes the SDK kept, plus the score as a searchable attribute.
    assert dict(exported.attributes) == {"a3": 3, "a4": 4, "output.value": "an output",
                                         "tracescore.score.probe": pytest.approx(0.09)}
    inst.shutdown()
