"""Google's Agent Development Kit, traced through OpenInference (``GoogleADKInstrumentor``, as
ADK's observability docs show for Arize Phoenix), with no reader of its own in tracescore: an
``Agent`` with ``LiteLlm(model="openai/...", api_base=...)`` (ADK's route to any
OpenAI-compatible model) and one tool (a plain function), run by an ``InMemoryRunner``. The
instrumentor records the model calls on ADK's own spans, which ADK makes with the global tracer
provider: as in the docs (Phoenix's ``register()`` sets it), the provider the instrumentor gets
is the global one. The module sets the capture's provider as the global one once, and every
test shares that capture.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from checks import Echo, kinds, record, scored, scripted_judge
from google.adk.agents import Agent
from google.adk.models.lite_llm import LiteLlm
from google.adk.runners import InMemoryRunner
from google.genai import types
from model_server import API_KEY, ModelServer
from openinference.instrumentation.google_adk import GoogleADKInstrumentor
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
        yield cap


@pytest.fixture
def capture(request: pytest.FixtureRequest, _shared: CaptureScores) -> Iterator[CaptureScores]:
    _shared.exporter.clear()
    yield _shared
    record(request, _shared)


def run_app(model: ModelServer, capture: CaptureScores) -> str:
    instrumentor = GoogleADKInstrumentor()
    instrumentor.instrument(tracer_provider=capture.tracer_provider)
    try:
        async def main() -> str:
            agent = Agent(name="guide", instruction="You are a travel guide.",
                          model=LiteLlm(model="openai/gpt-4o-mini", api_base=model.base_url,
                                        api_key=API_KEY),
                          tools=[lookup_landmarks])
            runner = InMemoryRunner(agent=agent, app_name="guide")
            session = await runner.session_service.create_session(app_name="guide",
                                                                  user_id="user")
            answer = ""
            async for event in runner.run_async(
                    user_id="user", session_id=session.id,
                    new_message=types.Content(role="user", parts=[types.Part(text=QUESTION)])):
                if event.is_final_response() and event.content and event.content.parts:
                    answer = str(event.content.parts[0].text)
            return answer

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


def test_the_model_calls_span_is_judged_once_on_the_final_text(
        model: ModelServer, capture: CaptureScores, echo: Echo) -> None:
    """OpenInference's ADK instrumentation records both model calls of the run (the tool call,
    then the answer) on one span, ADK's ``invoke_agent``, marked ``LLM``: the first call's own
    messages are not kept anywhere, so that span is judged once, on the final text, and the
    tool-call scorer sees the call made under it."""
    capture.configure(scoring=[
        tracescore.ScoringRule(scorer=echo.scorer(), on="llm"),
        tracescore.ScoringRule(scorer=create_tool_call_accuracy_scorer_code(
            expected_tool="lookup_landmarks"), on="llm")])
    run_app(model, capture)
    assert [s.name for s, _ in scored(capture, "echo")] == ["invoke_agent guide"], kinds(capture)
    assert [(e["input"], e["output"]) for e in echo.seen] == [(QUESTION, ANSWER)], kinds(capture)
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
