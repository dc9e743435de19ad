"""Haystack, traced through OpenLLMetry (traceloop's ``opentelemetry-instrumentation-haystack``
for the pipeline, a ``workflow`` span, and its components, ``task`` spans, with its
``opentelemetry-instrumentation-openai`` for the model calls: what ``Traceloop.init()`` turns on
for a Haystack app, here without the SDK, each instrumentor given the provider), with no reader
of its own in tracescore. The same app as ``conformance/haystack`` (the docs' first RAG pipeline
and an ``Agent`` with one tool), another convention.
"""

from __future__ import annotations

from checks import TOOL_ONLY, Echo, kinds, scored
from haystack import Document, Pipeline
from haystack.components.agents import Agent
from haystack.components.builders import ChatPromptBuilder
from haystack.components.generators.chat import OpenAIChatGenerator
from haystack.components.retrievers.in_memory import InMemoryBM25Retriever
from haystack.dataclasses import ChatMessage
from haystack.document_stores.in_memory import InMemoryDocumentStore
from haystack.tools import tool
from haystack.utils import Secret
from model_server import API_KEY, ModelServer
from opentelemetry.instrumentation.haystack import HaystackInstrumentor
from opentelemetry.instrumentation.openai import OpenAIInstrumentor

import tracescore
from tracescore.scorers import (
    create_answer_relevancy_scorer,
    create_faithfulness_scorer,
    create_tool_call_accuracy_scorer_code,
)
from tracescore.testing import CaptureScores

QUESTION = "When was the Eiffel Tower completed?"
ANSWER = "The Eiffel Tower was completed in 1889."
DOCUMENTS = ["The Eiffel Tower in Paris was completed in 1889.",
             "The tower is 330 metres tall.", "Bananas are yellow and curved."]
TOOL_ARGUMENTS = {"landmark": "Eiffel Tower"}
TOOL_RESULT = "Completed in 1889."
TEMPLATE = [ChatMessage.from_user(
    "Answer from these documents.\n{% for document in documents %}{{ document.content }}\n"
    "{% endfor %}\nQuestion: {{ question }}")]


@tool
def lookup_landmark(landmark: str) -> str:
    """Facts about a landmark."""
    return TOOL_RESULT


def _generator(model: ModelServer) -> OpenAIChatGenerator:
    return OpenAIChatGenerator(model="gpt-4o-mini", api_base_url=model.base_url,
                               api_key=Secret.from_token(API_KEY))


def run_rag(model: ModelServer, capture: CaptureScores) -> str:
    instrumentors = (HaystackInstrumentor(), OpenAIInstrumentor())
    for instrumentor in instrumentors:
        instrumentor.instrument(tracer_provider=capture.tracer_provider)
    try:
        store = InMemoryDocumentStore()
        store.write_documents([Document(content=t) for t in DOCUMENTS])
        pipe = Pipeline()
        pipe.add_component("retriever", InMemoryBM25Retriever(document_store=store, top_k=1))
        pipe.add_component("prompt_builder", ChatPromptBuilder(template=TEMPLATE,
                                                               required_variables="*"))
        pipe.add_component("llm", _generator(model))
        pipe.connect("retriever", "prompt_builder.documents")
        pipe.connect("prompt_builder.prompt", "llm.messages")
        result = pipe.run({"retriever": {"query": QUESTION},
                           "prompt_builder": {"question": QUESTION}})
        return str(result["llm"]["replies"][0].text)
    finally:
        for instrumentor in instrumentors:
            instrumentor.uninstrument()
        assert capture.flush()


def run_agent(model: ModelServer, capture: CaptureScores) -> str:
    instrumentors = (HaystackInstrumentor(), OpenAIInstrumentor())
    for instrumentor in instrumentors:
        instrumentor.instrument(tracer_provider=capture.tracer_provider)
    try:
        agent = Agent(chat_generator=_generator(model), tools=[lookup_landmark],
                      system_prompt="You are a travel guide.")
        result = agent.run(messages=[ChatMessage.from_user(QUESTION)])
        return str(result["messages"][-1].text)
    finally:
        for instrumentor in instrumentors:
            instrumentor.uninstrument()
        assert capture.flush()


def test_rag_pipeline_is_judged_once_on_the_question_and_answer(
        model: ModelServer, capture: CaptureScores, echo: Echo) -> None:
    capture.configure(scoring=[
        tracescore.ScoringRule(scorer=echo.scorer(), on="agent"),
        tracescore.ScoringRule(scorer=create_answer_relevancy_scorer(), on="agent")])
    assert run_rag(model, capture) == ANSWER
    assert [s.name for s, _ in scored(capture, "echo")] == ["haystack_pipeline.workflow"]
    assert echo.seen == [{"id": "echo", "input": QUESTION, "output": ANSWER, "context": [],
                          "tool_calls": []}], kinds(capture)
    (_, relevancy), = scored(capture, "answer-relevancy")
    assert relevancy["gen_ai.evaluation.score.value"] == 1.0


def test_the_retriever_is_not_traced_and_faithfulness_says_so(
        model: ModelServer, capture: CaptureScores) -> None:
    """OpenLLMetry's Haystack instrumentation traces the pipeline and its generators, not its
    retrievers: a context scorer has no documents and says how to pass them."""
    capture.configure(scoring=[tracescore.ScoringRule(scorer=create_faithfulness_scorer(),
                                                      on="agent")])
    run_rag(model, capture)
    (_, faithfulness), = scored(capture, "faithfulness")
    assert faithfulness["gen_ai.evaluation.score.label"] == "not_scorable"
    assert "no retrieval span" in faithfulness["gen_ai.evaluation.explanation"]
    assert "@tracescore.retrieval" in faithfulness["gen_ai.evaluation.explanation"]


def test_the_agent_turn_is_the_apps_span_around_the_run(
        model: ModelServer, capture: CaptureScores, echo: Echo) -> None:
    """The instrumentation makes no span for an ``Agent`` run (each model call is a trace of its
    own): the turn is the span the app puts around the request (an OpenLLMetry app's
    ``@workflow``), here a plain OpenTelemetry span."""
    capture.configure(scoring=[tracescore.ScoringRule(scorer=echo.scorer(), on="agent")])
    tracer = capture.tracer_provider.get_tracer("my.app")
    with tracer.start_as_current_span("ask"):
        assert run_agent(model, capture) == ANSWER
    assert capture.flush()
    assert [s.name for s, _ in scored(capture, "echo")] == ["ask"], kinds(capture)
    assert echo.seen == [{"id": "echo", "input": QUESTION, "output": ANSWER, "context": [],
                          "tool_calls": []}], kinds(capture)


def test_each_model_call_is_judged_once_and_the_tool_only_turn_says_so(
        model: ModelServer, capture: CaptureScores, echo: Echo) -> None:
    capture.configure(scoring=[
        tracescore.ScoringRule(scorer=echo.scorer(), on="llm"),
        tracescore.ScoringRule(scorer=create_tool_call_accuracy_scorer_code(
            expected_tool="lookup_landmark"), on="llm")])
    run_agent(model, capture)
    events = scored(capture, "echo")
    assert len(events) == 2, kinds(capture)
    first, second = (attrs for _, attrs in events)
    assert first["gen_ai.evaluation.score.label"] == "not_scorable"
    assert TOOL_ONLY in first["gen_ai.evaluation.explanation"]
    assert [e["output"] for e in echo.seen] == [ANSWER], kinds(capture)
    tools = [attrs for _, attrs in scored(capture, "tool-call-accuracy-code")]
    assert tools[0]["gen_ai.evaluation.score.value"] == 1.0, tools
