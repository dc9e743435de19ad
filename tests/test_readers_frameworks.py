"""The framework readers on recorded span shapes, and a span's place in its trace.

Spans are plain ``ReadableSpan``s with the attributes each framework emits (recorded from
pydantic-ai-slim 2.68, openai-agents 0.24 with openinference-instrumentation-openai-agents
2.6, llama-index-core 0.14.25, langgraph 1.2.22, crewai 1.15.30 and dspy 3.4.1 with their
OpenInference instrumentations; the apps that made them run in ``conformance/``). The bad
inputs: half the attributes, content cut by a length limit, renamed attributes, reprs. Each
must come out not scorable with a reason naming the attribute: never an exception, never a
text that is not the answer.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import SpanContext, Status, StatusCode, TraceFlags

import tracescore
from tests.helpers import ProbeScorer, eval_events, finished, memory_configure
from tracescore._readers import Content, _values, reader_for
from tracescore.scorers import create_faithfulness_scorer

PAI = "pydantic-ai"
AGENTS = "openinference.instrumentation.openai_agents"
LLAMA = "openinference.instrumentation.llama_index"
LANGCHAIN = "openinference.instrumentation.langchain"
CREW = "openinference.instrumentation.crewai"
DSPY = "openinference.instrumentation.dspy"
OPENAI = "openinference.instrumentation.openai"
TOOL_ONLY = "this model turn only called tools"


@pytest.fixture(autouse=True)
def _cleanup() -> Any:
    yield
    tracescore.shutdown(2000)


@dataclass
class Probe(ProbeScorer):
    uses_context: bool = True
    uses_tool_calls: bool = True


def _span(name: str, *, scope: str, attributes: dict[str, Any], root: bool = False
          ) -> ReadableSpan:
    ctx = SpanContext(trace_id=0xABC, span_id=0xDEF, is_remote=False,
                      trace_flags=TraceFlags(TraceFlags.SAMPLED))
    parent = None if root else SpanContext(trace_id=0xABC, span_id=0x123, is_remote=False)
    return ReadableSpan(name=name, context=ctx, parent=parent, attributes=attributes,
                        instrumentation_scope=InstrumentationScope(scope),
                        status=Status(StatusCode.UNSET), start_time=1, end_time=2)


def _read(span: ReadableSpan, kind: str) -> Content:
    return reader_for(span).read(span, kind)


def _parts(role: str, *parts: dict[str, Any]) -> dict[str, Any]:
    return {"role": role, "parts": list(parts)}


# -- which reader ----------------------------------------------------------------------------------


@pytest.mark.parametrize(("scope", "attributes", "reader"), [
    (PAI, {"gen_ai.operation.name": "invoke_agent"}, "pydantic-ai"),
    (AGENTS, {"openinference.span.kind": "AGENT"}, "openai-agents"),
    (LLAMA, {"openinference.span.kind": "CHAIN"}, "llama-index"),
    (LANGCHAIN, {"openinference.span.kind": "CHAIN"}, "langchain"),
    (CREW, {"openinference.span.kind": "AGENT"}, "crewai"),
    (DSPY, {"openinference.span.kind": "CHAIN"}, "dspy"),
    (OPENAI, {"openinference.span.kind": "LLM"}, "openinference"),
    (PAI, {"other": 1}, "generic"),  # pydantic-ai's scope alone is not enough
])
def test_each_framework_has_its_reader(scope: str, attributes: dict[str, Any],
                                       reader: str) -> None:
    assert reader_for(_span("s", scope=scope, attributes=attributes)).name == reader


# -- pydantic-ai -----------------------------------------------------------------------------------

PAI_MESSAGES = [
    _parts("system", {"type": "text", "content": "You are a travel guide."}),
    _parts("user", {"type": "text", "content": "What landmarks are in Paris?"}),
    _parts("assistant", {"type": "tool_call", "id": "c1", "name": "lookup_landmarks",
                         "arguments": '{"city": "Paris"}'}),
    _parts("user", {"type": "tool_call_response", "id": "c1", "name": "lookup_landmarks",
                    "result": "Eiffel Tower; Louvre"}),
    _parts("assistant", {"type": "text", "content": "The Eiffel Tower and the Louvre."}),
]
PAI_AGENT = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "agent",
             "pydantic_ai.all_messages": json.dumps(PAI_MESSAGES),
             "final_result": "The Eiffel Tower and the Louvre."}


def test_pydantic_ai_agent_run_reads_the_users_question_and_the_final_result() -> None:
    span = _span("invoke_agent agent", scope=PAI, attributes=PAI_AGENT, root=True)
    assert _read(span, "agent") == Content("What landmarks are in Paris?",
                                           "The Eiffel Tower and the Louvre.")


def test_pydantic_ai_structured_output_is_read_as_its_text_or_its_object() -> None:
    one = _span("invoke_agent agent", scope=PAI, root=True,
                attributes={**PAI_AGENT, "final_result": json.dumps({"answer": "Louvre."})})
    assert _read(one, "agent").output == "Louvre."
    two = _span("invoke_agent agent", scope=PAI, root=True, attributes={
        **PAI_AGENT, "final_result": json.dumps({"city": "Paris", "sights": 2})})
    assert _read(two, "agent").output == {"city": "Paris", "sights": 2}


@pytest.mark.parametrize(("change", "named"), [
    ({"final_result": None}, "final_result"),  # half the attributes
    ({"pydantic_ai.all_messages": None}, "pydantic_ai.all_messages"),
    # an older format version's name: the one looked for is named
    ({"pydantic_ai.all_messages": None, "all_messages_events": "[]"},
     "pydantic_ai.all_messages"),
    ({"pydantic_ai.all_messages": json.dumps(PAI_MESSAGES)[:50]},  # cut by a limit
     "pydantic_ai.all_messages"),
])
def test_pydantic_ai_agent_bad_input_names_the_attribute(change: dict[str, Any],
                                                          named: str) -> None:
    attrs = {k: v for k, v in {**PAI_AGENT, **change}.items() if v is not None}
    content = _read(_span("invoke_agent agent", scope=PAI, attributes=attrs, root=True), "agent")
    assert content.input is None and content.output is None
    assert content.missing is not None and named in content.missing
    if "all_messages_events" in attrs:  # what the span carries instead is named too
        assert "found instead: all_messages_events" in content.missing


def test_pydantic_ai_content_off_names_pydantic_ais_switch() -> None:
    withheld = [_parts("user", {"type": "text"}), _parts("assistant", {"type": "text"})]
    agent = _span("invoke_agent agent", scope=PAI, root=True, attributes={
        "gen_ai.operation.name": "invoke_agent",
        "pydantic_ai.all_messages": json.dumps(withheld)})
    chat = _span("chat gpt-4o-mini", scope=PAI, attributes={
        "gen_ai.operation.name": "chat", "gen_ai.input.messages": json.dumps(withheld[:1]),
        "gen_ai.output.messages": json.dumps(withheld[1:])})
    for span, kind in ((agent, "agent"), (chat, "llm")):
        content = _read(span, kind)
        assert content.output is None and content.missing is not None
        assert "include_content" in content.missing
        assert "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT" not in content.missing


def test_a_model_turn_that_only_called_tools_is_no_answer_for_every_source() -> None:
    question = [{"role": "user", "content": "What landmarks are in Paris?"}]
    call = {"name": "lookup_landmarks", "arguments": {"city": "Paris"}}
    spans = [
        _span("chat gpt-4o-mini", scope=PAI, attributes={
            "gen_ai.operation.name": "chat",
            "gen_ai.input.messages": json.dumps([_parts("user", {
                "type": "text", "content": "What landmarks are in Paris?"})]),
            "gen_ai.output.messages": json.dumps([_parts("assistant", {
                "type": "tool_call", "id": "c1", "name": "lookup_landmarks",
                "arguments": '{"city": "Paris"}'})])}),
        _span("generation", scope=AGENTS, attributes={
            "openinference.span.kind": "LLM",
            "llm.input_messages.0.message.role": "user",
            "llm.input_messages.0.message.content": "What landmarks are in Paris?",
            "output.value": json.dumps([{"content": None, "tool_calls": [{}]}]),
            "output.mime_type": "application/json",
            "llm.output_messages.0.message.role": "assistant",
            "llm.output_messages.0.message.tool_calls.0.tool_call.function.name":
                "lookup_landmarks",
            "llm.output_messages.0.message.tool_calls.0.tool_call.function.arguments":
                '{"city": "Paris"}'}),
        _span("OpenAI.astream_chat", scope=LLAMA, attributes={  # an empty text part too
            "openinference.span.kind": "LLM",
            "llm.input_messages.0.message.role": "user",
            "llm.input_messages.0.message.content": "What landmarks are in Paris?",
            "output.value": "assistant: ",
            "llm.output_messages.0.message.role": "assistant",
            "llm.output_messages.0.message.contents.0.message_content.type": "text",
            "llm.output_messages.0.message.contents.0.message_content.text": "",
            "llm.output_messages.0.message.tool_calls.0.tool_call.function.name":
                "lookup_landmarks",
            "llm.output_messages.0.message.tool_calls.0.tool_call.function.arguments":
                '{"city": "Paris"}'}),
        _span("openai.chat", scope="opentelemetry.instrumentation.openai.v0", attributes={
            "llm.request.type": "chat",
            "gen_ai.prompt.0.role": "user",
            "gen_ai.prompt.0.content": "What landmarks are in Paris?",
            "gen_ai.completion.0.role": "assistant",
            "gen_ai.completion.0.tool_calls.0.name": "lookup_landmarks",
            "gen_ai.completion.0.tool_calls.0.arguments": '{"city": "Paris"}'}),
    ]
    for span in spans:
        content = _read(span, "llm")
        assert content.input == question, span.name
        assert content.output is None and content.missing is not None
        assert TOOL_ONLY in content.missing and "lookup_landmarks" in content.missing
        assert list(content.tool_calls) == [call], span.name


# -- OpenInference frameworks ----------------------------------------------------------------------


def test_openai_agents_agent_span_says_its_content_is_on_the_generations() -> None:
    span = _span("Guide", scope=AGENTS, attributes={"openinference.span.kind": "AGENT",
                                                    "agent.name": "Guide"})
    content = _read(span, "agent")
    assert content.missing is not None and "by design" in content.missing
    assert "OPENINFERENCE_HIDE" not in content.missing


CREW_TASK = {"description": "What landmarks are in Paris?", "expected_output": "Short.",
             "raw": "The Eiffel Tower and the Louvre.", "pydantic": None, "json_dict": None,
             "agent": "Travel guide", "messages": [{"role": "system", "content": "..."}]}


def test_crewai_agent_is_read_as_its_task_and_raw_answer() -> None:
    span = _span("Travel guide._execute_core", scope=CREW, attributes={
        "openinference.span.kind": "AGENT",
        "input.value": json.dumps({"agent": {"role": "Travel guide"}, "context": ""}),
        "input.mime_type": "application/json",
        "output.value": json.dumps(CREW_TASK), "output.mime_type": "application/json"})
    assert _read(span, "agent") == Content("What landmarks are in Paris?",
                                           "The Eiffel Tower and the Louvre.")


@pytest.mark.parametrize(("output", "named"), [
    ({k: v for k, v in CREW_TASK.items() if k != "raw"}, "'raw'"),  # renamed or missing
    (json.dumps(CREW_TASK)[:60], "output.value"),  # cut
])
def test_crewai_bad_output_is_not_scorable_and_never_the_json(output: Any, named: str) -> None:
    span = _span("Travel guide._execute_core", scope=CREW, attributes={
        "openinference.span.kind": "AGENT", "input.value": "{}",
        "input.mime_type": "application/json",
        "output.value": output if isinstance(output, str) else json.dumps(output),
        "output.mime_type": "application/json"})
    content = _read(span, "agent")
    assert content.output is None and content.missing is not None
    assert named in content.missing


def test_dspy_prediction_is_read_without_its_chain_of_thought() -> None:
    span = _span("RAG.forward", scope=DSPY, root=True, attributes={
        "openinference.span.kind": "CHAIN", "input.value": json.dumps({"question": "When?"}),
        "input.mime_type": "application/json",
        "output.value": json.dumps({"reasoning": "It says 1889.", "response": "In 1889."}),
        "output.mime_type": "application/json"})
    assert _read(span, "agent") == Content("When?", "In 1889.")
    lm = _span("LM.__call__", scope=DSPY, attributes={
        "openinference.span.kind": "LLM",
        "llm.input_messages.0.message.role": "user",
        "llm.input_messages.0.message.content": "[[ ## question ## ]]\nWhen?",
        "llm.output_messages.0.message.role": "assistant",
        "llm.output_messages.0.message.content":
            "[[ ## reasoning ## ]]\nIt says 1889.\n\n[[ ## response ## ]]\nIn 1889.\n\n"
            "[[ ## completed ## ]]"})
    assert _read(lm, "llm").output == "In 1889."


def test_dspy_output_with_only_reasoning_is_not_scorable() -> None:
    span = _span("RAG.forward", scope=DSPY, root=True, attributes={
        "openinference.span.kind": "CHAIN", "input.value": json.dumps({"question": "When?"}),
        "input.mime_type": "application/json",
        "output.value": json.dumps({"reasoning": "It says 1889."}),
        "output.mime_type": "application/json"})
    content = _read(span, "agent")
    assert content.output is None and "chain of thought (reasoning)" in str(content.missing)


def test_langgraph_state_is_read_as_the_last_user_and_ai_messages() -> None:
    state_out = {"messages": [
        {"type": "human", "data": {"content": "What landmarks are in Paris?"}},
        {"type": "ai", "data": {"content": "", "tool_calls": [
            {"name": "lookup_landmarks", "args": {"city": "Paris"}}]}},
        {"type": "tool", "data": {"content": "Eiffel Tower; Louvre"}},
        {"type": "ai", "data": {"content": "The Eiffel Tower and the Louvre."}}]}
    attrs = {"openinference.span.kind": "CHAIN", "metadata": '{"ls_integration": "langgraph"}',
             "input.value": json.dumps({"messages": [
                 {"role": "user", "content": "What landmarks are in Paris?"}]}),
             "input.mime_type": "application/json",
             "output.value": json.dumps(state_out), "output.mime_type": "application/json"}
    span = _span("LangGraph", scope=LANGCHAIN, root=True, attributes=attrs)
    assert _read(span, "agent") == Content("What landmarks are in Paris?",
                                           "The Eiffel Tower and the Louvre.")
    stopped = {"messages": state_out["messages"][:2]}  # the graph ended on a tool call
    span = _span("LangGraph", scope=LANGCHAIN, root=True,
                 attributes={**attrs, "output.value": json.dumps(stopped)})
    assert TOOL_ONLY in str(_read(span, "agent").missing)
    renamed = {"history": state_out["messages"], "step": 3}
    span = _span("LangGraph", scope=LANGCHAIN, root=True,
                 attributes={**attrs, "input.value": json.dumps({"history": []}),
                             "output.value": json.dumps(renamed)})
    content = _read(span, "agent")
    assert content.output is None and "'messages'" in str(content.missing)


def test_langgraph_node_named_agent_is_no_agent() -> None:
    span = _span("agent", scope=LANGCHAIN, attributes={
        "openinference.span.kind": "AGENT",
        "metadata": '{"langgraph_step": 1, "langgraph_node": "agent"}'})
    assert reader_for(span).kind(span) is None


@pytest.mark.parametrize(("name", "attributes", "side"), [
    ("OpenAI.predict", {"openinference.span.kind": "LLM", "input.value": json.dumps(
        {"prompt": "SelectorPromptTemplate(metadata={'prompt_type': 'text_qa'}, ..."}),
        "input.mime_type": "application/json", "output.value": "In 1889."}, "input"),
    ("FunctionAgent.run", {"openinference.span.kind": "AGENT", "input.value": "Hi",
                           "output.value": "StopEvent(result=AgentOutput(response=ChatMe..."},
     "output"),
    ("Retriever.retrieve", {"openinference.span.kind": "AGENT", "input.value": "Hi",
                            "output.value": "<llama_index.core.Node object at 0x7f3a2c>"},
     "output"),
])
def test_a_repr_is_never_judged(name: str, attributes: dict[str, Any], side: str) -> None:
    span = _span(name, scope=LLAMA, attributes=attributes)
    content = _read(span, "llm" if "predict" in name else "agent")
    assert content.input is None and content.output is None
    assert f"the {side} of span" in str(content.missing) and "repr" in str(content.missing)


def test_a_value_exactly_as_long_as_the_sdk_limit_is_taken_for_cut(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_values, "_limit_cache", [40])
    span = _span("Travel guide._execute_core", scope=CREW, attributes={
        "openinference.span.kind": "AGENT", "input.value": "What landmarks are in Paris?",
        "output.value": "x" * 40})
    content = _read(span, "agent")
    assert content.output is None and "output.value" in str(content.missing)
    assert "OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT" in str(content.missing)


# -- a span's place in its trace (through the processor) -------------------------------------------


def _llm(tracer: Any, name: str, answer: str | None, *, calls: bool = False, **extra: Any) -> None:
    attrs: dict[str, Any] = {"openinference.span.kind": "LLM",
                             "llm.input_messages.0.message.role": "user",
                             "llm.input_messages.0.message.content": "What is in Paris?", **extra}
    if answer is not None:
        attrs["llm.output_messages.0.message.role"] = "assistant"
        attrs["llm.output_messages.0.message.content"] = answer
    if calls:
        attrs["llm.output_messages.0.message.tool_calls.0.tool_call.function.name"] = "lookup"
        attrs["llm.output_messages.0.message.tool_calls.0.tool_call.function.arguments"] = "{}"
    with tracer.start_as_current_span(name, attributes=attrs):
        pass


def test_a_model_call_wrapped_by_another_is_judged_once_unless_the_rule_asks() -> None:
    for wrappers, expected in ((False, ["OpenAI.chat"]), (True, ["OpenAI.chat",
                                                                  "OpenAI.predict"])):
        probe = Probe(id="llm")
        _, exp = memory_configure(scoring=[tracescore.ScoringRule(
            scorer=probe, on="llm", score_wrappers=wrappers)])
        tracer = tracescore._setup.config.current().tracer_provider.get_tracer(LLAMA)
        with tracer.start_as_current_span("query", attributes={
                "openinference.span.kind": "CHAIN", "input.value": "q", "output.value": "a"}
                ), tracer.start_as_current_span("OpenAI.predict", attributes={
                    "openinference.span.kind": "LLM", "output.value": "In Paris.",
                    "input.value": '{"prompt": "PromptTemplate(template=...)"}',
                    "input.mime_type": "application/json"}):
            _llm(tracer, "OpenAI.chat", "In Paris.")
        spans = finished(exp)
        assert sorted(s.name for s in spans if eval_events(s)) == expected
        tracescore.shutdown(2000)


def test_a_root_chain_without_a_model_call_beneath_is_no_agent() -> None:
    probe = Probe(id="agent")
    _, exp = memory_configure(scoring=[tracescore.ScoringRule(scorer=probe, on="agent")])
    tracer = tracescore._setup.config.current().tracer_provider.get_tracer(LLAMA)
    with tracer.start_as_current_span("SentenceSplitter.__call__", attributes={
            "openinference.span.kind": "CHAIN", "input.value": '{"nodes": ["<Document>"]}',
            "input.mime_type": "application/json", "output.value": "[]"}):
        pass
    with tracer.start_as_current_span("RetrieverQueryEngine.query", attributes={
            "openinference.span.kind": "CHAIN", "input.value": "Where?",
            "output.value": "In Paris."}):
        _llm(tracer, "OpenAI.chat", "In Paris.")
    spans = finished(exp)
    assert [s.name for s in spans if eval_events(s)] == ["RetrieverQueryEngine.query"]
    assert [(c["input"], c["output"]) for c in probe.calls] == [("Where?", "In Paris.")]


def test_an_agent_without_content_is_read_from_its_model_calls() -> None:
    probe = Probe(id="agent")
    _, exp = memory_configure(scoring=[tracescore.ScoringRule(scorer=probe, on="agent")])
    tracer = tracescore._setup.config.current().tracer_provider.get_tracer(AGENTS)
    with tracer.start_as_current_span("Agent workflow", attributes={
            "openinference.span.kind": "AGENT"}), tracer.start_as_current_span(
                "Guide", attributes={"openinference.span.kind": "AGENT"}):
        _llm(tracer, "generation", None, calls=True)
        with tracer.start_as_current_span("lookup", attributes={
                "openinference.span.kind": "TOOL", "tool.name": "lookup",
                "input.value": "{}", "input.mime_type": "application/json",
                "output.value": "Eiffel Tower"}):
            pass
        _llm(tracer, "generation", "The Eiffel Tower.")
    spans = finished(exp)
    assert [s.name for s in spans if eval_events(s)] == ["Guide"]  # the workflow wraps it
    (call,) = probe.calls
    assert (call["input"], call["output"]) == ("What is in Paris?", "The Eiffel Tower.")
    assert [c["name"] for c in call["tool_calls"]] == ["lookup"]


def test_an_agent_whose_last_model_turn_only_called_tools_is_no_answer() -> None:
    probe = ProbeScorer(id="agent")  # an answer scorer (no tool calls)
    _, exp = memory_configure(scoring=[tracescore.ScoringRule(scorer=probe, on="agent")])
    tracer = tracescore._setup.config.current().tracer_provider.get_tracer(AGENTS)
    with tracer.start_as_current_span("Triage", attributes={"openinference.span.kind": "AGENT"}):
        _llm(tracer, "generation", None, calls=True)
    (span,) = [s for s in finished(exp) if eval_events(s)]
    (event,) = eval_events(span)
    assert TOOL_ONLY in event["gen_ai.evaluation.explanation"]


def test_tool_results_are_context_only_when_the_rule_asks() -> None:
    asked, plain = Probe(id="asked"), Probe(id="plain")
    _, exp = memory_configure(scoring=[
        tracescore.ScoringRule(scorer=asked, on="agent", tool_results_as_context=True),
        tracescore.ScoringRule(scorer=plain, on="agent")])
    tracer = tracescore._setup.config.current().tracer_provider.get_tracer(AGENTS)
    with tracer.start_as_current_span("Guide", attributes={
            "openinference.span.kind": "AGENT", "input.value": "Q", "output.value": "A"}):
        with tracer.start_as_current_span("search", attributes={
                "openinference.span.kind": "TOOL", "tool.name": "search",
                "input.value": "{}", "input.mime_type": "application/json",
                "output.value": "Paris has the Louvre."}):
            pass
        _llm(tracer, "generation", "A")
    finished(exp)
    assert asked.calls[0]["context"] == ["Paris has the Louvre."]
    assert plain.calls[0]["context"] == []


def test_no_retrieval_span_gives_a_reason_that_says_how_to_pass_context() -> None:
    _, exp = memory_configure(judge="openai/never-called", scoring=[tracescore.ScoringRule(
        scorer=create_faithfulness_scorer(), on="agent")])
    tracer = tracescore._setup.config.current().tracer_provider.get_tracer(DSPY)
    with tracer.start_as_current_span("RAG.forward", attributes={
            "openinference.span.kind": "CHAIN", "input.value": "When?",
            "output.value": "In 1889."}):
        _llm(tracer, "LM.__call__", "In 1889.")
    (span,) = [s for s in finished(exp) if eval_events(s)]
    (event,) = eval_events(span)
    reason = event["gen_ai.evaluation.explanation"]
    assert event["gen_ai.evaluation.score.label"] == "not_scorable"
    assert "no retrieval span" in reason and "dspy.retrievers.Embeddings" in reason
    assert "context_extractor" in reason and "@tracescore.retrieval" in reason
