"""AutoGen AgentChat, traced through OpenInference (``AutogenAgentChatInstrumentor``), with no
reader of its own in tracescore: an ``AssistantAgent`` with one tool (a plain function) and
``OpenAIChatCompletionClient(base_url=..., model_info=...)`` as AutoGen's docs show for an
OpenAI-compatible endpoint, ``reflect_on_tool_use=True`` (the model answers from the tool's
result), ``await agent.run(task=question)``.
"""

from __future__ import annotations

import asyncio

from autogen_agentchat.agents import AssistantAgent
from autogen_ext.models.openai import OpenAIChatCompletionClient
from checks import TOOL_ONLY, Echo, kinds, scored
from model_server import API_KEY, ModelServer
from openinference.instrumentation.autogen_agentchat import AutogenAgentChatInstrumentor

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
MODEL_INFO = {"vision": False, "function_calling": True, "json_output": False,
              "family": "unknown", "structured_output": False}


async def lookup_landmarks(city: str) -> str:
    """The landmarks of a city."""
    return TOOL_RESULT


def run_app(model: ModelServer, capture: CaptureScores) -> str:
    instrumentor = AutogenAgentChatInstrumentor()
    instrumentor.instrument(tracer_provider=capture.tracer_provider)
    try:
        async def main() -> str:
            client = OpenAIChatCompletionClient(model="gpt-4o-mini", base_url=model.base_url,
                                                api_key=API_KEY, model_info=MODEL_INFO)
            agent = AssistantAgent("guide", model_client=client, tools=[lookup_landmarks],
                                   system_message="You are a travel guide.",
                                   reflect_on_tool_use=True)
            result = await agent.run(task=QUESTION)
            await client.close()
            return str(result.messages[-1].content)

        return asyncio.run(main())
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
