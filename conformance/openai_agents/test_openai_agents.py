"""The OpenAI Agents SDK, traced through OpenInference (``OpenAIAgentsInstrumentor``: the SDK's
docs list it among the external tracing processors; the SDK exports to OpenTelemetry through
no processor of its own), as the SDK's docs show for another OpenAI-compatible provider: an
``Agent`` with ``OpenAIChatCompletionsModel(openai_client=AsyncOpenAI(base_url=...))``, one
``@function_tool``, ``Runner.run_sync``.

Spans per run: ``Agent workflow`` (``AGENT``, the root) > ``Agent workflow`` (``CHAIN``) >
``Guide`` (``AGENT``) > ``turn`` (``CHAIN``) > ``generation`` (``LLM``) and ``lookup_landmarks``
(``TOOL``). Neither ``AGENT`` span carries ``input.value``/``output.value``.
"""

from __future__ import annotations

from agents import Agent, OpenAIChatCompletionsModel, Runner, function_tool
from checks import TOOL_ONLY, Echo, kinds, scored
from model_server import API_KEY, ModelServer
from openai import AsyncOpenAI
from openinference.instrumentation.openai_agents import OpenAIAgentsInstrumentor

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


@function_tool
def lookup_landmarks(city: str) -> str:
    """The landmarks of a city."""
    return TOOL_RESULT


def run_app(model: ModelServer, capture: CaptureScores) -> str:
    instrumentor = OpenAIAgentsInstrumentor()
    instrumentor.instrument(tracer_provider=capture.tracer_provider)
    try:
        client = AsyncOpenAI(base_url=model.base_url, api_key=API_KEY)
        agent = Agent(name="Guide", instructions="You are a travel guide.",
                      model=OpenAIChatCompletionsModel(model="gpt-4o-mini",
                                                       openai_client=client),
                      tools=[lookup_landmarks])
        return str(Runner.run_sync(agent, QUESTION).final_output)
    finally:
        instrumentor.uninstrument()
        assert capture.flush()


def test_agent_turn_is_judged_once_on_the_question_and_final_text(
        model: ModelServer, capture: CaptureScores, echo: Echo) -> None:
    capture.configure(scoring=[
        tracescore.ScoringRule(scorer=echo.scorer(), on="agent"),
        tracescore.ScoringRule(scorer=create_answer_relevancy_scorer(), on="agent")])
    assert run_app(model, capture) == ANSWER
    # two AGENT spans per run (the workflow's and the agent's): one judged, the agent's
    assert [s.name for s, _ in scored(capture, "echo")] == ["Guide"], kinds(capture)
    assert echo.seen == [{"id": "echo", "input": QUESTION, "output": ANSWER, "context": [],
                          "tool_calls": []}]
    (_, relevancy), = scored(capture, "answer-relevancy")
    assert relevancy["gen_ai.evaluation.score.value"] == 1.0


def test_the_workflow_span_is_judged_too_when_the_rule_asks(
        model: ModelServer, capture: CaptureScores, echo: Echo) -> None:
    capture.configure(scoring=[tracescore.ScoringRule(scorer=echo.scorer(), on="agent",
                                                      score_wrappers=True)])
    run_app(model, capture)
    assert sorted(s.name for s, _ in scored(capture)) == ["Agent workflow", "Guide"]
    assert [(e["input"], e["output"]) for e in echo.seen] == [(QUESTION, ANSWER)] * 2


def test_each_generation_is_judged_once_and_the_tool_only_turn_says_so(
        model: ModelServer, capture: CaptureScores, echo: Echo) -> None:
    capture.configure(scoring=[
        tracescore.ScoringRule(scorer=echo.scorer(), on="llm"),
        tracescore.ScoringRule(scorer=create_tool_call_accuracy_scorer_code(
            expected_tool="lookup_landmarks"), on="llm")])
    run_app(model, capture)
    events = scored(capture, "echo")
    assert [s.name for s, _ in events] == ["generation", "generation"], kinds(capture)
    first, second = (attrs for _, attrs in events)
    assert first["gen_ai.evaluation.score.label"] == "not_scorable"
    assert TOOL_ONLY in first["gen_ai.evaluation.explanation"]
    assert "output is empty" not in first["gen_ai.evaluation.explanation"]
    assert [e["output"] for e in echo.seen] == [ANSWER]
    tools = [attrs for _, attrs in scored(capture, "tool-call-accuracy-code")]
    assert tools[0]["gen_ai.evaluation.score.value"] == 1.0


def test_tool_results_are_context_when_the_rule_asks_and_the_reason_says_how(
        model: ModelServer, capture: CaptureScores, echo: Echo) -> None:
    capture.configure(scoring=[
        tracescore.ScoringRule(scorer=echo.scorer(context=True), on="agent",
                               tool_results_as_context=True),
        tracescore.ScoringRule(scorer=create_faithfulness_scorer(), on="agent")])
    run_app(model, capture)
    assert echo.seen[0]["context"] == [TOOL_RESULT]
    (_, faithfulness), = scored(capture, "faithfulness")
    reason = faithfulness["gen_ai.evaluation.explanation"]
    assert "no retrieval span" in reason and "OPENINFERENCE_HIDE" not in reason


def test_a_handoff_judges_each_agents_turn_and_the_triage_says_it_only_handed_off(
        model: ModelServer, capture: CaptureScores, echo: Echo) -> None:
    """A triage agent hands off to the guide (the SDK's ``handoffs=[...]``, a tool call to
    ``transfer_to_guide``): the triage turn only called a tool, the guide's turn answers."""
    capture.configure(scoring=[tracescore.ScoringRule(scorer=echo.scorer(), on="agent")])
    instrumentor = OpenAIAgentsInstrumentor()
    instrumentor.instrument(tracer_provider=capture.tracer_provider)
    try:
        client = AsyncOpenAI(base_url=model.base_url, api_key=API_KEY)
        llm = OpenAIChatCompletionsModel(model="gpt-4o-mini", openai_client=client)
        guide = Agent(name="Guide", instructions="You are a travel guide.", model=llm)
        triage = Agent(name="Triage", instructions="Hand travel questions to the guide.",
                       model=llm, handoffs=[guide])
        assert Runner.run_sync(triage, QUESTION).final_output == ANSWER
    finally:
        instrumentor.uninstrument()
        assert capture.flush()
    events = {s.name: attrs for s, attrs in scored(capture)}
    assert sorted(events) == ["Guide", "Triage"], kinds(capture)
    assert TOOL_ONLY in events["Triage"]["gen_ai.evaluation.explanation"]
    assert "transfer_to_guide" in events["Triage"]["gen_ai.evaluation.explanation"]
    assert [(e["input"], e["output"]) for e in echo.seen] == [(QUESTION, ANSWER)]
