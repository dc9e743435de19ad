"""The OTel GenAI OpenAI instrumentation in ``EVENT_ONLY`` mode: the messages go to a
``gen_ai.client.inference.operation.details`` log record, not onto the span.

- With no SDK ``LoggerProvider`` set globally, the records go nowhere tracescore can see: the
  score is *not scorable* and the reason says so (this test runs first in this file: the global
  provider can be set only once per process).
- With the app's SDK ``LoggerProvider`` set globally, tracescore reads the content from the
  record and scores the span with the right question and answer (the judge's prompts).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import openai
import pytest
from opentelemetry import _logs
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor

import tracescore
from tracescore.scorers import create_answer_relevancy_scorer
from tracescore.testing import ScriptedJudge

QUESTION = "What is the capital of France?"
ANSWER = "Paris is the capital of France."
EVENT = "gen_ai.evaluation.result"


@pytest.fixture
def event_only(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "EVENT_ONLY")
    monkeypatch.setenv("OTEL_SEMCONV_STABILITY_OPT_IN", "gen_ai_latest_experimental")
    yield


def _ask_instrumented(model: ScriptedJudge) -> str:
    from opentelemetry.instrumentation.genai.openai import OpenAIInstrumentor

    instrumentor = OpenAIInstrumentor()
    instrumentor.instrument()
    try:
        with openai.OpenAI(base_url=model.api_base, api_key="sk-loopback-model") as client:
            reply = client.chat.completions.create(
                model="gpt-4o-mini",
                messages=[{"role": "system", "content": "Answer in one sentence."},
                          {"role": "user", "content": QUESTION}])
    finally:
        instrumentor.uninstrument()
    return str(reply.choices[0].message.content)


def _scored_event(receiver: Any) -> tuple[Any, dict[str, Any]]:
    assert tracescore.force_flush(20_000)
    assert receiver.wait_for(lambda spans: any(
        name == EVENT for s in spans for name, _ in s.events), 20)
    scored = [s for s in receiver.spans if any(name == EVENT for name, _ in s.events)]
    assert len(scored) == 1, [(s.name, s.scope, s.attributes) for s in scored]
    (span,) = scored
    (event,) = [attrs for name, attrs in span.events if name == EVENT]
    return span, event


def test_event_only_without_a_global_sdk_logger_provider_says_why(
        model: ScriptedJudge, judge: ScriptedJudge, receiver: Any, event_only: None) -> None:
    assert not isinstance(_logs.get_logger_provider(), LoggerProvider), "runs first"
    tracescore.configure(judge=judge.as_judge(), scoring=[
        tracescore.ScoringRule(scorer=create_answer_relevancy_scorer(), on="llm")])
    assert _ask_instrumented(model) == ANSWER
    span, event = _scored_event(receiver)
    assert span.attributes["gen_ai.operation.name"] == "chat"
    assert "gen_ai.input.messages" not in span.attributes  # EVENT_ONLY: not on the span
    assert event["gen_ai.evaluation.score.label"] == "not_scorable"
    reason = event["gen_ai.evaluation.explanation"]
    assert "no OpenTelemetry SDK LoggerProvider is set globally" in reason
    assert "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT" in reason
    assert judge.requests == []


def test_event_only_content_is_read_from_the_apps_log_records(
        model: ScriptedJudge, judge: ScriptedJudge, receiver: Any, event_only: None) -> None:
    app_logs = InMemoryLogRecordExporter()
    provider = LoggerProvider()
    provider.add_log_record_processor(SimpleLogRecordProcessor(app_logs))
    _logs.set_logger_provider(provider)  # the app's own logging set-up
    tracescore.configure(judge=judge.as_judge(), scoring=[
        tracescore.ScoringRule(scorer=create_answer_relevancy_scorer(), on="llm")])
    assert _ask_instrumented(model) == ANSWER
    span, event = _scored_event(receiver)
    assert "gen_ai.input.messages" not in span.attributes
    assert event.get("gen_ai.evaluation.score.value") == 1.0, event
    prompts = dict(zip(judge.schema_names, judge.prompts, strict=True))
    assert QUESTION in prompts["answer_relevancy_verdicts"]  # from the log record
    assert ANSWER in prompts["answer_relevancy_statements"]
    # The app's own log pipeline still got its record, untouched.
    (record,) = [r.log_record for r in app_logs.get_finished_logs()
                 if r.log_record.event_name == "gen_ai.client.inference.operation.details"]
    assert format(record.span_id, "016x") == span.span_id
