"""The real OpenAI SDK, instrumented by the real upstream packages, against a loopback
OpenAI-protocol server as the model; scores from a second loopback server as the judge.

- ``tracescore_openai.instrument()`` (OpenInference): the LLM span is scored with the right
  input and output (asserted on the judge's recorded prompts).
- The OTel GenAI instrumentation (``opentelemetry-instrumentation-genai-openai``, formerly
  ``-openai-v2``): with content
  capture on, the same; with it off (its default), the score is *not scorable* and says which
  switch to turn on.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import openai
import pytest
import tracescore_openai

import tracescore
from tracescore.scorers import create_answer_relevancy_scorer
from tracescore.testing import InMemoryScoreExporter, ScriptedJudge, evaluation_events

os.environ.setdefault("LITELLM_OFFLINE_MODE", "true")

QUESTION = "What is the capital of France?"
ANSWER = "Paris is the capital of France."


@pytest.fixture
def exporter(judge: ScriptedJudge) -> Iterator[InMemoryScoreExporter]:
    exp = InMemoryScoreExporter()
    tracescore.configure(judge=judge.as_judge(), exporter=exp, scoring=[
        tracescore.ScoringRule(scorer=create_answer_relevancy_scorer(), on="llm")])
    yield exp
    tracescore.shutdown(5000)


def _ask(model: ScriptedJudge) -> str:
    # Closed here: an open keep-alive socket would surface as a ResourceWarning (an error).
    with openai.OpenAI(base_url=model.api_base, api_key="sk-loopback-model") as client:
        reply = client.chat.completions.create(
            model="gpt-4o-mini",
            messages=[{"role": "system", "content": "Answer in one sentence."},
                      {"role": "user", "content": QUESTION}])
    return str(reply.choices[0].message.content)


def _llm_span(exp: InMemoryScoreExporter) -> Any:
    tracescore.force_flush(10_000)
    spans = [s for s in exp.get_finished_spans() if evaluation_events(s)]
    assert len(spans) == 1, [s.name for s in exp.get_finished_spans()]
    return spans[0]


def test_openinference_openai_call_is_scored_with_its_question_and_answer(
        model: ScriptedJudge, judge: ScriptedJudge, exporter: InMemoryScoreExporter) -> None:
    tracescore_openai.instrument()
    try:
        assert _ask(model) == ANSWER
    finally:
        tracescore_openai.uninstrument()
    span = _llm_span(exporter)
    assert span.attributes["openinference.span.kind"] == "LLM"
    (event,) = evaluation_events(span)
    assert event["gen_ai.evaluation.name"] == "answer-relevancy"
    assert event["gen_ai.evaluation.score.value"] == 1.0
    statements_prompt = judge.prompts[0]
    assert ANSWER in statements_prompt  # the model's answer, read from the span
    verdicts_prompt = judge.prompts[1]
    assert QUESTION in verdicts_prompt  # the user's question, read from the span
    assert "sk-loopback-model" not in "".join(judge.prompts)


def test_openinference_with_content_hidden_is_not_scorable(
        model: ScriptedJudge, judge: ScriptedJudge, exporter: InMemoryScoreExporter) -> None:
    tracescore_openai.instrument(capture_content=False)
    try:
        _ask(model)
    finally:
        tracescore_openai.uninstrument()
    (event,) = evaluation_events(_llm_span(exporter))
    assert event["gen_ai.evaluation.score.label"] == "not_scorable"
    assert "OPENINFERENCE_HIDE_INPUTS" in event["gen_ai.evaluation.explanation"]
    assert judge.requests == []


def _genai_instrumentor() -> Any:
    from opentelemetry.instrumentation.genai.openai import OpenAIInstrumentor

    return OpenAIInstrumentor()


def test_otel_genai_openai_with_content_capture_is_scored(
        model: ScriptedJudge, judge: ScriptedJudge, exporter: InMemoryScoreExporter,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "SPAN_ONLY")
    monkeypatch.setenv("OTEL_SEMCONV_STABILITY_OPT_IN", "gen_ai_latest_experimental")
    instrumentor = _genai_instrumentor()
    instrumentor.instrument()
    try:
        assert _ask(model) == ANSWER
    finally:
        instrumentor.uninstrument()
    span = _llm_span(exporter)
    assert span.attributes["gen_ai.operation.name"] == "chat"
    (event,) = evaluation_events(span)
    assert event["gen_ai.evaluation.score.value"] == 1.0
    assert ANSWER in judge.prompts[0]
    assert QUESTION in judge.prompts[1]


def test_otel_genai_openai_without_content_capture_is_not_scorable(
        model: ScriptedJudge, judge: ScriptedJudge, exporter: InMemoryScoreExporter,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", raising=False)
    monkeypatch.setenv("OTEL_SEMCONV_STABILITY_OPT_IN", "gen_ai_latest_experimental")
    instrumentor = _genai_instrumentor()
    instrumentor.instrument()
    try:
        _ask(model)
    finally:
        instrumentor.uninstrument()
    (event,) = evaluation_events(_llm_span(exporter))
    assert event["gen_ai.evaluation.score.label"] == "not_scorable"
    assert "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT" in event[
        "gen_ai.evaluation.explanation"]
    assert judge.requests == []
