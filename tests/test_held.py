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


def test_a_scorer_blocking_the_loop_does_not_hold_its_span_past_the_deadline(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    # Blocking work in async code stops the loop's thread, its deadline sweep included: the
    # backstop thread exports the span anyway (without its score) and says why.
    import threading
    from collections.abc import Sequence

    from opentelemetry.sdk.trace.export import SpanExportResult

    from tests.helpers import SimpleResult
    from tracescore.testing import InMemoryScoreExporter

    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "50")  # the export processor sends at once
    started, release, exported = threading.Event(), threading.Event(), threading.Event()

    class Blocking:
        id = "blocking"
        uses_context = False
        requires_ground_truth = False
        higher_is_better = True

        async def arun(self, **kwargs: Any) -> SimpleResult:
            started.set()
            release.wait(30)  # a blocking call in async code: the loop's thread stops here
            return SimpleResult(1.0, "late")

    class Signalling(InMemoryScoreExporter):
        def export(self, spans: Sequence[Any]) -> SpanExportResult:
            result = super().export(spans)
            if any(s.name == "invoke_agent blocked" for s in spans):
                exported.set()
            return result

    exp = Signalling()
    memory_configure(exporter=exp, scoring=[tracescore.ScoringRule(scorer=Blocking())],
                     score_timeout=0.2)

    @tracescore.agent(name="blocked")
    def answer(question: str) -> str:
        return "an answer"

    try:
        with caplog.at_level("WARNING", logger="tracescore"):
            answer("q")
            assert started.wait(10)
            assert exported.wait(20)  # exported while the scorer still blocks the loop
            assert not release.is_set()
        (span,) = [s for s in exp.get_finished_spans() if s.name == "invoke_agent blocked"]
        assert eval_events(span) == []  # without its score, which follows on a carrier span
        assert any("blocking its thread" in r.getMessage() for r in caplog.records)
    finally:
        release.set()
