"""pydantic-ai, traced by its own instrumentation (``Agent.instrument_all()``), as its docs
show: an ``Agent`` with an OpenAI-compatible model (``OpenAIChatModel`` with an
``OpenAIProvider(base_url=...)``) and one tool (``@agent.tool_plain``), run with
``run_sync``.

Spans per run: ``invoke_agent agent`` (the run: ``pydantic_ai.all_messages``, ``final_result``),
``chat gpt-4o-mini`` twice (GenAI message JSON; the first only calls the tool), ``execute_tool
lookup_landmarks``.
"""

from __future__ import annotations

from typing import Any

from checks import TOOL_ONLY, Echo, kinds, scored
from model_server import API_KEY, ModelServer
from pydantic_ai import Agent
from pydantic_ai.models.instrumented import InstrumentationSettings
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

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


def run_app(model: ModelServer, capture: CaptureScores, **settings: Any) -> str:
    Agent.instrument_all(InstrumentationSettings(tracer_provider=capture.tracer_provider,
                                                 **settings))
    try:
        llm = OpenAIChatModel("gpt-4o-mini",
                              provider=OpenAIProvider(base_url=model.base_url, api_key=API_KEY))
        agent = Agent(llm, system_prompt="You are a travel guide.")

        @agent.tool_plain
        def lookup_landmarks(city: str) -> str:
            """The landmarks of a city."""
            return TOOL_RESULT

        return str(agent.run_sync(QUESTION).output)
    finally:
        Agent.instrument_all(False)
        assert capture.flush()  # the scores are in


def test_agent_run_is_judged_on_the_users_question_and_the_final_text(
        model: ModelServer, capture: CaptureScores, echo: Echo) -> None:
    capture.configure(scoring=[
        tracescore.ScoringRule(scorer=echo.scorer(), on="agent"),
        tracescore.ScoringRule(scorer=create_answer_relevancy_scorer(), on="agent")])
    assert run_app(model, capture) == ANSWER
    spans = {s.name for s, _ in scored(capture)}
    assert spans == {"invoke_agent agent"}, kinds(capture)
    assert echo.seen == [{"id": "echo", "input": QUESTION, "output": ANSWER, "context": [],
                          "tool_calls": []}]
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
    assert [s.name for s, _ in events] == ["chat gpt-4o-mini"] * 2, kinds(capture)
    first, second = (attrs for _, attrs in events)
    # The first model turn only asked for the tool: not an answer, and not 'lookup_landmarks(...)'
    assert first["gen_ai.evaluation.score.label"] == "not_scorable"
    assert TOOL_ONLY in first["gen_ai.evaluation.explanation"]
    assert second["gen_ai.evaluation.score.value"] == 1.0
    assert [e["output"] for e in echo.seen] == [ANSWER]
    assert "lookup_landmarks" not in echo.seen[0]["output"]
    # ... and the tool-call scorer sees that turn's call.
    tools = [attrs for _, attrs in scored(capture, "tool-call-accuracy-code")]
    assert tools[0]["gen_ai.evaluation.score.value"] == 1.0


def test_tool_results_are_context_when_the_rule_asks(
        model: ModelServer, capture: CaptureScores, echo: Echo) -> None:
    capture.configure(scoring=[
        tracescore.ScoringRule(scorer=echo.scorer(context=True), on="agent",
                               tool_results_as_context=True),
        tracescore.ScoringRule(scorer=create_faithfulness_scorer(), on="agent")])
    run_app(model, capture)
    assert echo.seen[0]["context"] == [TOOL_RESULT]
    # Without the option there is no retrieval span: the reason names the cause and the way out.
    (_, faithfulness), = scored(capture, "faithfulness")
    reason = faithfulness["gen_ai.evaluation.explanation"]
    assert "no retrieval span" in reason and "tool_results_as_context" in reason


def test_content_off_is_not_scorable_with_pydantic_ais_own_switch(
        model: ModelServer, capture: CaptureScores, echo: Echo) -> None:
    capture.configure(scoring=[tracescore.ScoringRule(scorer=echo.scorer(), on="agent"),
                               tracescore.ScoringRule(scorer=echo.scorer("echo-llm"), on="llm")])
    run_app(model, capture, include_content=False)
    events = scored(capture)
    assert events and echo.seen == []
    for _, attrs in events:
        reason = attrs["gen_ai.evaluation.explanation"]
        assert attrs["gen_ai.evaluation.score.label"] == "not_scorable"
        # the turn that asked for the tool still shows its call (names are not content)
        assert "include_content" in reason or TOOL_ONLY in reason, reason
        assert "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT" not in reason
