"""Microsoft Agent Framework, traced by its own OpenTelemetry instrumentation (the OTel GenAI
conventions: ``invoke_agent``, ``chat``, ``execute_tool`` spans), with no reader of its own in
tracescore: an ``Agent`` with ``OpenAIChatCompletionClient(base_url=...)`` and one tool (a
plain function), ``await agent.run(question)``. Content is recorded once sensitive data is on
(``enable_instrumentation(enable_sensitive_data=True)``, as the framework's observability docs
show). It traces through the global tracer provider: the module sets the capture's provider as
the global one once, and every test shares that capture.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from agent_framework import Agent
from agent_framework.observability import enable_instrumentation
from agent_framework.openai import OpenAIChatCompletionClient
from checks import TOOL_ONLY, Echo, kinds, record, scored, scripted_judge
from model_server import API_KEY, ModelServer
from opentelemetry import trace

import tracescore
from tracescore.scorers import (
    create_answer_relevancy_scorer,
    create_faithfulness_scorer,
    create_tool_call_accuracy_scorer_code,
)
from tracescore.testing import CaptureScores

QUESTION = "What landmarks are in Paris?"
ANSWER = "Paris has the Eiffel Tower and the Louvre."
TOOL_ARGUMENTS = {"city": "Paris"}
TOOL_RESULT = "Eiffel Tower; Louvre"


def lookup_landmarks(city: str) -> str:
    """The landmarks of a city."""
    return TOOL_RESULT


@pytest.fixture(scope="module")
def _shared() -> Iterator[CaptureScores]:
    with scripted_judge(ANSWER) as judge, CaptureScores(
            judge, flush_timeout_millis=30_000) as cap:
        trace.set_tracer_provider(cap.tracer_provider)
        enable_instrumentation(enable_sensitive_data=True)
        yield cap


@pytest.fixture
def capture(request: pytest.FixtureRequest, _shared: CaptureScores) -> Iterator[CaptureScores]:
    _shared.exporter.clear()
    yield _shared
    record(request, _shared)


def run_app(model: ModelServer, capture: CaptureScores) -> str:
    async def main() -> str:
        client = OpenAIChatCompletionClient(model="gpt-4o-mini", base_url=model.base_url,
                                            api_key=API_KEY)
        agent = Agent(client=client, name="Guide", instructions="You are a travel guide.",
                      tools=[lookup_landmarks])
        return str((await agent.run(QUESTION)).text)

    try:
        return asyncio.run(main())
    finally:
        assert capture.flush()


def test_agent_turn_is_judged_once_on_the_question_and_final_text(
        model: ModelServer, capture: CaptureScores, echo: Echo) -> None:
    capture.configure(scoring=[
        tracescore.ScoringRule(scorer=echo.scorer(), on="agent"),
        tracescore.ScoringRule(scorer=create_answer_relevancy_scorer(), on="agent")])
    assert run_app(model, capture) == ANSWER
    assert len(scored(capture, "echo")) == 1, kinds(capture)
    assert echo.seen == [{"id": "echo", "input": QUESTION, "output": ANSWER, "context": [],
                          "tool_calls": []}], kinds(capture)
    (_, relevancy), = scored(capture, "answer-relevancy")
    assert relevancy["gen_ai.evaluation.score.value"] == 1.0


def test_each_model_call_is_judged_once_and_the_tool_only_turn_says_so(
        model: ModelServer, capture: CaptureScores, echo: Echo) -> None:
    capture.configure(scoring=[
        tracescore.ScoringRule(scorer=echo.scorer(), on="llm"),
        tracescore.ScoringRule(scorer=create_tool_call_accuracy_scorer_code(
            expected_tool="lookup_landmarks"), on="llm")])
    run_app(model, capture)
    events = scored(capture, "echo")
    assert len(events) == 2, kinds(capture)
    first, second = (attrs for _, attrs in events)
    assert first["gen_ai.evaluation.score.label"] == "not_scorable"
    assert TOOL_ONLY in first["gen_ai.evaluation.explanation"]
    assert [e["output"] for e in echo.seen] == [ANSWER], kinds(capture)
    tools = [attrs for _, attrs in scored(capture, "tool-call-accuracy-code")]
    assert tools[0]["gen_ai.evaluation.score.value"] == 1.0, tools


def test_tool_results_are_context_when_the_rule_asks_and_the_reason_says_how(
        model: ModelServer, capture: CaptureScores, echo: Echo) -> None:
    capture.configure(scoring=[
        tracescore.ScoringRule(scorer=echo.scorer(context=True), on="agent",
                               tool_results_as_context=True),
        tracescore.ScoringRule(scorer=create_faithfulness_scorer(), on="agent")])
    run_app(model, capture)
    assert [e["context"] for e in echo.seen] == [[TOOL_RESULT]], kinds(capture)
    (_, faithfulness), = scored(capture, "faithfulness")
    assert "no retrieval span" in faithfulness["gen_ai.evaluation.explanation"]
