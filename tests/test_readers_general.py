"""The general turn model: a framework with no reader of its own is judged on the right turn and
text when its instrumentation follows a convention (OTel GenAI, OpenInference, OpenLLMetry) and
its spans nest; where it does not, the reason says what was found and what is missing.

The span shapes are those of frameworks tracescore has no reader for (smolagents, Haystack,
Strands Agents, recorded from the apps in ``conformance/``), and of an app's own root span
around a client library's model calls.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

import tracescore
from tests.helpers import ProbeScorer
from tracescore.testing import CaptureScores

QUESTION = "What landmarks are in Paris?"
ANSWER = "Paris has the Eiffel Tower and the Louvre."
TOOL_RESULT = "Eiffel Tower; Louvre"
TOOL_ONLY = "this model turn only called tools"


@dataclass
class Probe(ProbeScorer):
    uses_context: bool = True
    uses_tool_calls: bool = True


@pytest.fixture
def capture() -> Iterator[CaptureScores]:
    with CaptureScores() as cap:
        yield cap


def _judged(capture: CaptureScores) -> list[str]:
    return [s.name for s in capture.spans() if capture.evaluation_events(s)]


def _oi_llm(tracer: Any, name: str, answer: str | None, *, role: str = "user",
            question: str = QUESTION, call: str | None = None) -> None:
    attrs: dict[str, Any] = {"openinference.span.kind": "LLM",
                             "llm.input_messages.0.message.role": role,
                             "llm.input_messages.0.message.content": question}
    if answer is not None:
        attrs["llm.output_messages.0.message.role"] = "assistant"
        attrs["llm.output_messages.0.message.content"] = answer
    if call:
        prefix = "llm.output_messages.0.message.tool_calls.0.tool_call.function."
        attrs[prefix + "name"] = call
        attrs[prefix + "arguments"] = json.dumps({"answer": ANSWER})
    with tracer.start_as_current_span(name, attributes=attrs):
        pass


def _genai_chat(tracer: Any, answer: str | None, *, tool: str | None = None) -> None:
    """A model call as Strands Agents records it: GenAI operation, content in the per-message
    events of the GenAI conventions (v1.36), Bedrock-style content blocks."""
    with tracer.start_as_current_span("chat", attributes={
            "gen_ai.operation.name": "chat", "gen_ai.request.model": "m"}) as span:
        span.add_event("gen_ai.system.message", {"content": json.dumps([{"text": "Guide."}])})
        span.add_event("gen_ai.user.message", {"content": json.dumps([{"text": QUESTION}])})
        if tool:
            message = [{"toolUse": {"toolUseId": "c1", "name": tool, "input": {"city": "P"}}}]
        else:
            message = [{"text": answer}]
        span.add_event("gen_ai.choice", {"message": json.dumps(message),
                                         "finish_reason": "tool_use" if tool else "end_turn"})


def test_an_apps_own_root_around_model_calls_is_the_agent_turn(capture: CaptureScores) -> None:
    """A root span of no convention (an app's request handler) whose subtree holds the model
    calls is the turn: judged once, on the first call's user message and the last call's text;
    a root without a model call beneath is never a turn."""
    probe = Probe(id="agent")
    capture.configure(scoring=[tracescore.ScoringRule(scorer=probe, on="agent")])
    app = capture.tracer_provider.get_tracer("my.app")
    client = capture.tracer_provider.get_tracer("openinference.instrumentation.openai")
    with app.start_as_current_span("POST /ask"):
        _oi_llm(client, "ChatCompletion", None, call="lookup")
        _oi_llm(client, "ChatCompletion", ANSWER)
    with app.start_as_current_span("GET /health"):
        pass
    assert _judged(capture) == ["POST /ask"]
    assert [(c["input"], c["output"]) for c in probe.calls] == [(QUESTION, ANSWER)]


def test_a_root_above_an_agent_span_is_not_a_second_turn(capture: CaptureScores) -> None:
    probe = Probe(id="agent")
    capture.configure(scoring=[tracescore.ScoringRule(scorer=probe, on="agent")])
    tracer = capture.tracer_provider.get_tracer("openinference.instrumentation.agno")
    app = capture.tracer_provider.get_tracer("my.app")
    with app.start_as_current_span("POST /ask"), tracer.start_as_current_span(
            "Agent.run", attributes={"openinference.span.kind": "AGENT",
                                     "input.value": QUESTION, "output.value": ANSWER}):
        _oi_llm(tracer, "OpenAIChat.invoke", ANSWER)
    assert _judged(capture) == ["Agent.run"]


def test_an_agent_input_envelope_is_read_as_the_question_the_model_got(
        capture: CaptureScores) -> None:
    """smolagents' AGENT span records its run's arguments as JSON (no mime type) and answers
    through a ``final_answer`` tool: the question is the argument the first model call's user
    message quotes, the answer the span's own text; the final answer's tool result is no
    context for itself."""
    probe = Probe(id="agent")
    capture.configure(scoring=[tracescore.ScoringRule(scorer=probe, on="agent",
                                                      tool_results_as_context=True)])
    tracer = capture.tracer_provider.get_tracer("openinference.instrumentation.smolagents")
    envelope = json.dumps({"task": QUESTION, "stream": False, "reset": True, "images": None})
    with tracer.start_as_current_span("ToolCallingAgent.run", attributes={
            "openinference.span.kind": "AGENT", "input.value": envelope,
            "output.value": ANSWER}):
        _oi_llm(tracer, "OpenAIModel.generate", None, question=f"New task:\n{QUESTION}",
                call="lookup_landmarks")
        for name, result in (("lookup_landmarks", TOOL_RESULT), ("final_answer", ANSWER)):
            with tracer.start_as_current_span(name, attributes={
                    "openinference.span.kind": "TOOL", "tool.name": name,
                    "input.value": "{}", "output.value": result}):
                pass
        _oi_llm(tracer, "OpenAIModel.generate", None, question=f"New task:\n{QUESTION}",
                call="final_answer")
    assert capture.flush()
    (call,) = probe.calls
    assert (call["input"], call["output"]) == (QUESTION, ANSWER)
    assert call["context"] == [TOOL_RESULT]


def test_a_pipeline_root_is_judged_on_the_question_answer_and_documents(
        capture: CaptureScores) -> None:
    """Haystack's pipeline root: its data and its replies as JSON of reprs, the roles spelled as
    an enum (``ChatRole.USER``): the question is the value the prompt quotes, the answer the
    model call's text, the documents the retriever's."""
    probe = Probe(id="agent")
    capture.configure(scoring=[tracescore.ScoringRule(scorer=probe, on="agent")])
    tracer = capture.tracer_provider.get_tracer("openinference.instrumentation.haystack")
    data = {"data": {"retriever": {"query": QUESTION}, "prompt_builder": {"question": QUESTION}}}
    replies = {"llm": {"replies": [
        f"ChatMessage(_role=<ChatRole.ASSISTANT: 'assistant'>, _content=[TextContent(text="
        f"'{ANSWER}')], _meta={{}})"]}}
    with tracer.start_as_current_span("Pipeline.run", attributes={
            "openinference.span.kind": "CHAIN", "input.value": json.dumps(data),
            "input.mime_type": "application/json", "output.value": json.dumps(replies),
            "output.mime_type": "application/json"}):
        with tracer.start_as_current_span("InMemoryBM25Retriever.run", attributes={
                "openinference.span.kind": "RETRIEVER",
                "retrieval.documents.0.document.content": "Paris has the Louvre."}):
            pass
        _oi_llm(tracer, "OpenAIChatGenerator.run", ANSWER, role="ChatRole.USER",
                question=f"Documents: Paris has the Louvre.\nQuestion: {QUESTION}")
    assert capture.flush()
    (call,) = probe.calls
    assert (call["input"], call["output"], call["context"]) == (
        QUESTION, ANSWER, ["Paris has the Louvre."])


def test_a_structured_answer_that_does_not_hold_the_models_text_stays_structured(
        capture: CaptureScores) -> None:
    probe = Probe(id="agent")
    capture.configure(scoring=[tracescore.ScoringRule(scorer=probe, on="agent")])
    tracer = capture.tracer_provider.get_tracer("openinference.instrumentation.some_framework")
    fields = {"city": "Paris", "landmarks": ["Eiffel Tower", "Louvre"]}
    with tracer.start_as_current_span("Program.forward", attributes={
            "openinference.span.kind": "CHAIN", "input.value": QUESTION,
            "output.value": json.dumps(fields), "output.mime_type": "application/json"}):
        _oi_llm(tracer, "LM.__call__", "[[ ## city ## ]]\nParis\n[[ ## landmarks ## ]]\n...")
    assert capture.flush()
    (call,) = probe.calls
    assert (call["input"], call["output"]) == (QUESTION, fields)


def test_genai_content_in_per_message_events_is_read(capture: CaptureScores) -> None:
    """Strands Agents' spans: GenAI operations, content only in the conventions' per-message
    span events; the tool's arguments and result in the tool span's events."""
    agent, llm = Probe(id="agent"), ProbeScorer(id="llm")
    capture.configure(scoring=[
        tracescore.ScoringRule(scorer=agent, on="agent", tool_results_as_context=True),
        tracescore.ScoringRule(scorer=llm, on="llm")])
    tracer = capture.tracer_provider.get_tracer("strands.telemetry.tracer")
    with tracer.start_as_current_span("invoke_agent Guide", attributes={
            "gen_ai.operation.name": "invoke_agent"}) as span:
        span.add_event("gen_ai.user.message", {"content": json.dumps([{"text": QUESTION}])})
        span.add_event("gen_ai.choice", {"message": ANSWER + "\n", "finish_reason": "end_turn"})
        _genai_chat(tracer, None, tool="lookup_landmarks")
        with tracer.start_as_current_span("execute_tool lookup_landmarks", attributes={
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": "lookup_landmarks"}) as tool:
            tool.add_event("gen_ai.tool.message", {"role": "tool",
                                                   "content": '{"city": "Paris"}'})
            tool.add_event("gen_ai.choice", {"message": json.dumps([{"text": TOOL_RESULT}])})
        _genai_chat(tracer, ANSWER)
    assert capture.flush()
    (turn,) = agent.calls
    assert (turn["input"], turn["output"], turn["context"]) == (QUESTION, ANSWER, [TOOL_RESULT])
    assert turn["tool_calls"][0]["arguments"] == {"city": "Paris"}
    assert [c["output"] for c in llm.calls] == [ANSWER]
    first = next(s for s in capture.spans() if s.name == "chat")
    (event,) = capture.evaluation_events(first)
    assert TOOL_ONLY in event["gen_ai.evaluation.explanation"]
    assert llm.calls[0]["input"][-1] == {"role": "user", "content": QUESTION}


def test_model_spans_no_convention_marks_give_a_reason_not_silence(
        capture: CaptureScores) -> None:
    """An instrumentation that names the model but marks no operation or kind: the root is
    reported not scorable, with what was found and what is missing."""
    probe = Probe(id="agent")
    capture.configure(scoring=[tracescore.ScoringRule(scorer=probe, on="agent")])
    tracer = capture.tracer_provider.get_tracer("acme.llm")
    with tracer.start_as_current_span("handle"), tracer.start_as_current_span(
            "acme.complete", attributes={"gen_ai.request.model": "m", "prompt": QUESTION}):
        pass
    (span,) = [s for s in capture.spans() if capture.evaluation_events(s)]
    (event,) = capture.evaluation_events(span)
    assert span.name == "handle" and probe.calls == []
    assert event["gen_ai.evaluation.score.label"] == "not_scorable"
    reason = event["gen_ai.evaluation.explanation"]
    # What was found: the span, its instrumentation and the model it names.
    assert "span 'acme.complete' (instrumentation 'acme.llm') names a model" in reason
    assert "gen_ai.request.model='m'" in reason
    # What is missing: any convention's mark of a model call, and how to add one.
    assert "gen_ai.operation.name" in reason and "@tracescore.llm" in reason


def test_a_root_model_span_no_convention_marks_says_so_too(capture: CaptureScores) -> None:
    """A trace that is one model call of an instrumentation no convention marks (no span
    around it): the agent rule still reports it, with what was found and what is missing."""
    probe = Probe(id="agent")
    capture.configure(scoring=[tracescore.ScoringRule(scorer=probe, on="agent")])
    tracer = capture.tracer_provider.get_tracer("acme.llm")
    with tracer.start_as_current_span("acme.complete", attributes={
            "llm.model_name": "m", "prompt": QUESTION, "completion": ANSWER}):
        pass
    (span,) = [s for s in capture.spans() if capture.evaluation_events(s)]
    (event,) = capture.evaluation_events(span)
    assert span.name == "acme.complete" and probe.calls == []
    assert event["gen_ai.evaluation.score.label"] == "not_scorable"
    reason = event["gen_ai.evaluation.explanation"]
    assert "span 'acme.complete' (instrumentation 'acme.llm') names a model" in reason
    assert "llm.model_name='m'" in reason and "@tracescore.llm" in reason


def test_a_decorated_agent_keeps_its_own_values(capture: CaptureScores) -> None:
    probe = Probe(id="agent")
    capture.configure(scoring=[tracescore.ScoringRule(scorer=probe, on="agent",
                                                      scope="tracescore")])
    client = capture.tracer_provider.get_tracer("openinference.instrumentation.openai")

    @tracescore.agent
    def answer(question: str) -> str:
        _oi_llm(client, "ChatCompletion", "model text", question=f"Context...\n{question}")
        return ANSWER

    assert answer(QUESTION) == ANSWER
    assert capture.flush()
    (call,) = probe.calls
    assert call["output"] == ANSWER


def test_an_agents_output_transcript_is_read_as_its_last_assistant_text(
        capture: CaptureScores) -> None:
    """Microsoft Agent Framework's ``invoke_agent`` records the run's messages as its output:
    the tool call, the tool's result, then the answer. The answer is the last assistant text,
    also with no model call span beneath."""
    probe = Probe(id="agent")
    capture.configure(scoring=[tracescore.ScoringRule(scorer=probe, on="agent")])
    tracer = capture.tracer_provider.get_tracer("agent_framework")
    transcript = [
        {"role": "assistant", "parts": [{"type": "tool_call", "id": "c1", "name": "lookup",
                                         "arguments": '{"city": "Paris"}'}]},
        {"role": "tool", "parts": [{"type": "tool_call_response", "id": "c1",
                                    "response": TOOL_RESULT}]},
        {"role": "assistant", "parts": [{"type": "text", "content": ANSWER}]}]
    with tracer.start_as_current_span("invoke_agent Guide", attributes={
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.input.messages": json.dumps([
                {"role": "user", "parts": [{"type": "text", "content": QUESTION}]}]),
            "gen_ai.output.messages": json.dumps(transcript)}):
        pass
    assert capture.flush()
    (call,) = probe.calls
    assert call["output"] == ANSWER


def test_a_function_response_envelope_is_read_as_the_tools_result(
        capture: CaptureScores) -> None:
    """Google ADK records a tool's result as Gemini's function response,
    ``{"id", "name", "response": {"result": ...}}``: the context is the result itself."""
    probe = Probe(id="agent")
    capture.configure(scoring=[tracescore.ScoringRule(scorer=probe, on="agent",
                                                      tool_results_as_context=True)])
    tracer = capture.tracer_provider.get_tracer("openinference.instrumentation.google_adk")
    envelope = {"id": "c1", "name": "lookup", "response": {"result": TOOL_RESULT}}
    with tracer.start_as_current_span("agent_run [guide]", attributes={
            "openinference.span.kind": "AGENT"}):
        _oi_llm(tracer, "call_llm", None, call="lookup")
        with tracer.start_as_current_span("execute_tool lookup", attributes={
                "openinference.span.kind": "TOOL", "tool.name": "lookup",
                "input.value": "{}", "input.mime_type": "application/json",
                "output.value": json.dumps(envelope),
                "output.mime_type": "application/json"}):
            pass
        _oi_llm(tracer, "call_llm", ANSWER)
    assert capture.flush()
    (call,) = probe.calls
    assert (call["input"], call["output"], call["context"]) == (QUESTION, ANSWER, [TOOL_RESULT])
