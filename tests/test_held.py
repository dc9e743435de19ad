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


def test_a_flush_exports_a_span_whose_scorer_blocks_the_loop_and_the_score_follows(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # Blocking work in async code stops the loop's thread, its deadline sweep included: a
    # flush on the caller's thread still exports the held span (without its score) within its
    # deadline, once; the score follows on a carrier span once the scorer returns.
    import threading

    from tests.helpers import SimpleResult

    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "50")  # the export processor sends at once
    started, release = threading.Event(), threading.Event()

    class Blocking:
        id = "blocking"
        uses_context = False
        requires_ground_truth = False
        higher_is_better = True

        async def arun(self, **kwargs: Any) -> SimpleResult:
            started.set()
            release.wait(30)  # a blocking call in async code: the loop's thread stops here
            return SimpleResult(1.0, "late")

    _, exp = memory_configure(scoring=[tracescore.ScoringRule(scorer=Blocking())],
                              limits=tracescore.LimitsOptions(score_timeout=0.2))

    @tracescore.agent(name="blocked")
    def answer(question: str) -> str:
        return "an answer"

    try:
        answer("q")
        assert started.wait(10)
        assert not tracescore.force_flush(2000)  # the score is still pending
        assert not release.is_set()
        (span,) = [s for s in exp.get_finished_spans() if s.name == "invoke_agent blocked"]
        assert eval_events(span) == []
    finally:
        release.set()
    assert tracescore.force_flush(10_000)
    spans = exp.get_finished_spans()
    assert [s.name for s in spans].count("invoke_agent blocked") == 1
    (carrier,) = [s for s in spans if s.name == "evaluation blocking"]
    assert len(eval_events(carrier)) == 1
    assert tracescore.stats().scores_late == 1
