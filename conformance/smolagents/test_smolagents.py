"""smolagents, traced through OpenInference (``SmolagentsInstrumentor``, as smolagents' docs on
inspecting runs show), with no reader of its own in tracescore: a ``ToolCallingAgent`` with one
``@tool`` and ``OpenAIServerModel(api_base=...)``, ``agent.run(question)``. A ToolCallingAgent
answers through its ``final_answer`` tool (the model server plays that protocol).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from checks import TOOL_ONLY, Echo, kinds, scored
from model_server import API_KEY, ModelServer, final_tool_agent
from openinference.instrumentation.smolagents import SmolagentsInstrumentor
from smolagents import OpenAIServerModel, ToolCallingAgent, tool

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


@tool
def lookup_landmarks(city: str) -> str:
    """The landmarks of a city.

    Args:
        city: the city's name.
    """
    return TOOL_RESULT


@pytest.fixture
def model() -> Iterator[ModelServer]:
    with ModelServer(final_tool_agent(ANSWER, TOOL_ARGUMENTS)) as server:
        yield server


def run_app(model: ModelServer, capture: CaptureScores) -> str:
    instrumentor = SmolagentsInstrumentor()
    instrumentor.instrument(tracer_provider=capture.tracer_provider)
    try:
        llm = OpenAIServerModel(model_id="gpt-4o-mini", api_base=model.base_url,
                                api_key=API_KEY)
        agent = ToolCallingAgent(tools=[lookup_landmarks], model=llm, max_steps=4,
                                 verbosity_level=0)
        return str(agent.run(QUESTION))
    finally:
        instrumentor.uninstrument()
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


def test_each_model_call_is_judged_once_and_the_tool_only_turns_say_so(
        model: ModelServer, capture: CaptureScores, echo: Echo) -> None:
    capture.configure(scoring=[
        tracescore.ScoringRule(scorer=echo.scorer(), on="llm"),
        tracescore.ScoringRule(scorer=create_tool_call_accuracy_scorer_code(
            expected_tool="lookup_landmarks"), on="llm")])
    run_app(model, capture)
    events = scored(capture, "echo")
    # two model calls: lookup_landmarks, then final_answer (both only call tools)
    assert len(events) == 2, kinds(capture)
    for _, attrs in events:
        assert attrs["gen_ai.evaluation.score.label"] == "not_scorable"
        assert TOOL_ONLY in attrs["gen_ai.evaluation.explanation"]
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
