"""CrewAI, traced through OpenInference (``CrewAIInstrumentor``, with ``OpenAIInstrumentor`` for
the model calls, as its docs pair them: CrewAI's own spans include no model call), as CrewAI's
docs build a crew: an ``Agent`` with an ``LLM(model="openai/...", base_url=...)`` and one
``@tool``, a ``Task`` whose description takes the crew's input, ``crew.kickoff(inputs=...)``.

Spans per kickoff: ``Crew_<id>.kickoff`` (root ``CHAIN``: the inputs in, the ``CrewOutput`` JSON
out, task descriptions and messages included) > ``Travel guide._execute_core`` (``AGENT``: the
agent's configuration in, the ``TaskOutput`` JSON out, the answer in ``raw``) >
``ChatCompletion`` (``LLM``, OpenInference's OpenAI instrumentation) twice and
``lookup_landmarks.run`` (``TOOL``).
"""

from __future__ import annotations

import os

from checks import TOOL_ONLY, Echo, kinds, scored
from model_server import API_KEY, ModelServer
from openinference.instrumentation.crewai import CrewAIInstrumentor
from openinference.instrumentation.openai import OpenAIInstrumentor

import tracescore
from tracescore.scorers import create_faithfulness_scorer, create_tool_call_accuracy_scorer_code
from tracescore.testing import CaptureScores

os.environ.setdefault("CREWAI_DISABLE_TELEMETRY", "true")
os.environ.setdefault("CREWAI_TRACING_ENABLED", "false")

from crewai import LLM, Agent, Crew, Task  # noqa: E402 - after its telemetry switches
from crewai.tools import tool  # noqa: E402

QUESTION = "What landmarks are in Paris?"
ANSWER = "Paris has the Eiffel Tower and the Louvre."
TOOL_ARGUMENTS = {"city": "Paris"}
TOOL_RESULT = "Eiffel Tower; Louvre"


@tool("lookup_landmarks")
def lookup_landmarks(city: str) -> str:
    """The landmarks of a city."""
    return TOOL_RESULT


def run_app(model: ModelServer, capture: CaptureScores) -> str:
    instrumentors = [CrewAIInstrumentor(), OpenAIInstrumentor()]
    for instrumentor in instrumentors:
        instrumentor.instrument(tracer_provider=capture.tracer_provider)
    try:
        llm = LLM(model="openai/gpt-4o-mini", base_url=model.base_url, api_key=API_KEY)
        guide = Agent(role="Travel guide", goal="Answer travel questions",
                      backstory="You know every city's landmarks.", llm=llm,
                      tools=[lookup_landmarks])
        task = Task(description="{question}", expected_output="A short answer.", agent=guide)
        crew = Crew(agents=[guide], tasks=[task])
        return str(crew.kickoff(inputs={"question": QUESTION}).raw)
    finally:
        for instrumentor in instrumentors:
            instrumentor.uninstrument()
        assert capture.flush()


def test_the_agents_task_is_judged_on_its_question_and_raw_answer(
        model: ModelServer, capture: CaptureScores, echo: Echo) -> None:
    capture.configure(scoring=[tracescore.ScoringRule(scorer=echo.scorer(), on="agent")])
    assert run_app(model, capture) == ANSWER
    assert [s.name for s, _ in scored(capture)] == ["Travel guide._execute_core"], kinds(capture)
    assert echo.seen == [{"id": "echo", "input": QUESTION, "output": ANSWER, "context": [],
                          "tool_calls": []}]


def test_the_crew_is_judged_on_its_inputs_and_raw_output_when_the_rule_asks(
        model: ModelServer, capture: CaptureScores, echo: Echo) -> None:
    capture.configure(scoring=[tracescore.ScoringRule(scorer=echo.scorer(), on="agent",
                                                      score_wrappers=True)])
    run_app(model, capture)
    names = [s.name for s, _ in scored(capture)]
    assert len(names) == 2 and names[1].endswith(".kickoff"), kinds(capture)
    assert [(e["input"], e["output"]) for e in echo.seen] == [(QUESTION, ANSWER)] * 2
    assert all("tasks_output" not in e["output"] for e in echo.seen)


def test_each_model_call_is_judged_once_and_the_tool_only_turn_says_so(
        model: ModelServer, capture: CaptureScores, echo: Echo) -> None:
    capture.configure(scoring=[
        tracescore.ScoringRule(scorer=echo.scorer(), on="llm"),
        tracescore.ScoringRule(scorer=create_tool_call_accuracy_scorer_code(
            expected_tool="lookup_landmarks"), on="llm")])
    run_app(model, capture)
    events = scored(capture, "echo")
    assert [s.name for s, _ in events] == ["ChatCompletion"] * 2, kinds(capture)
    assert TOOL_ONLY in events[0][1]["gen_ai.evaluation.explanation"]
    assert [e["output"] for e in echo.seen] == [ANSWER]
    tools = [attrs for _, attrs in scored(capture, "tool-call-accuracy-code")]
    assert tools[0]["gen_ai.evaluation.score.value"] == 1.0


def test_tool_results_are_context_when_the_rule_asks(
        model: ModelServer, capture: CaptureScores, echo: Echo) -> None:
    capture.configure(scoring=[
        tracescore.ScoringRule(scorer=echo.scorer(context=True), on="agent",
                               tool_results_as_context=True),
        tracescore.ScoringRule(scorer=create_faithfulness_scorer(), on="agent",
                               tool_results_as_context=True)])
    run_app(model, capture)
    assert echo.seen[0]["context"] == [TOOL_RESULT]
    (_, faithfulness), = scored(capture, "faithfulness")
    assert faithfulness["gen_ai.evaluation.score.value"] == 1.0
