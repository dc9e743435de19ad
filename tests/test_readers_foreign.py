"""Readers of other instrumentations: OpenInference, the OTel GenAI conventions, OpenLLMetry.

Spans are built in each source's real shape (attribute names from
``openinference-semantic-conventions`` 0.1.42, ``opentelemetry-semantic-conventions``'
``gen_ai_attributes``, ``opentelemetry-util-genai`` 1.3b0's message JSON,
``opentelemetry-semantic-conventions-ai`` 0.5.1, traceloop-sdk 0.62.4's decorators and
``opentelemetry-instrumentation-chromadb`` 0.62.4's ``db.query.result`` events). The real
instrumentations driving real libraries are tested under ``integrations/*/tests``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pytest
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import SpanContext, Status, StatusCode, TraceFlags

import tracescore
from tests.helpers import ProbeScorer, eval_events, finished, memory_configure
from tracescore._readers import Content, _values, reader_for

OI_SCOPE = "openinference.instrumentation.langchain"
GENAI_SCOPE = "opentelemetry.instrumentation.openai_v2"
TRACELOOP_SCOPE = "traceloop.tracer"
CHROMA_SCOPE = "opentelemetry.instrumentation.chromadb"


@pytest.fixture(autouse=True)
def _cleanup() -> Any:
    yield
    tracescore.shutdown(2000)


@dataclass
class Probe(ProbeScorer):
    uses_context: bool = True
    uses_tool_calls: bool = True


# -- which reader, which kind ----------------------------------------------------------------------

KIND_CASES = [
    # (scope, attributes, root?, reader, kind)
    (OI_SCOPE, {"openinference.span.kind": "AGENT"}, False, "langchain", "agent"),
    (OI_SCOPE, {"openinference.span.kind": "LLM"}, False, "langchain", "llm"),
    (OI_SCOPE, {"openinference.span.kind": "RETRIEVER"}, False, "langchain", "retrieval"),
    (OI_SCOPE, {"openinference.span.kind": "TOOL"}, False, "langchain", "tool"),
    (OI_SCOPE, {"openinference.span.kind": "CHAIN"}, True, "langchain", "agent"),
    (OI_SCOPE, {"openinference.span.kind": "CHAIN"}, False, "langchain", None),
    (OI_SCOPE, {"openinference.span.kind": "EMBEDDING"}, False, "langchain", None),
    (OI_SCOPE, {"openinference.span.kind": "RERANKER"}, False, "langchain", None),
    (GENAI_SCOPE, {"gen_ai.operation.name": "invoke_agent"}, False, "genai", "agent"),
    (GENAI_SCOPE, {"gen_ai.operation.name": "invoke_workflow"}, False, "genai", "agent"),
    (GENAI_SCOPE, {"gen_ai.operation.name": "chat"}, False, "genai", "llm"),
    (GENAI_SCOPE, {"gen_ai.operation.name": "text_completion"}, False, "genai", "llm"),
    (GENAI_SCOPE, {"gen_ai.operation.name": "generate_content"}, False, "genai", "llm"),
    (GENAI_SCOPE, {"gen_ai.operation.name": "execute_tool"}, False, "genai", "tool"),
    (GENAI_SCOPE, {"gen_ai.operation.name": "retrieval"}, False, "genai", "retrieval"),
    (GENAI_SCOPE, {"gen_ai.operation.name": "embeddings"}, False, "genai", None),
    (GENAI_SCOPE, {"gen_ai.operation.name": "create_agent"}, False, "genai", None),
    (TRACELOOP_SCOPE, {"traceloop.span.kind": "workflow"}, True, "openllmetry", "agent"),
    (TRACELOOP_SCOPE, {"traceloop.span.kind": "agent"}, False, "openllmetry", "agent"),
    (TRACELOOP_SCOPE, {"traceloop.span.kind": "tool"}, False, "openllmetry", "tool"),
    (TRACELOOP_SCOPE, {"traceloop.span.kind": "task"}, False, "openllmetry", None),
    ("opentelemetry.instrumentation.openai.v0", {"llm.request.type": "chat"}, False,
     "openllmetry", "llm"),
    (CHROMA_SCOPE, {"db.system": "chroma", "db.operation": "query"}, False, "openllmetry",
     "retrieval"),
    (CHROMA_SCOPE, {"db.system": "chroma", "db.operation": "add"}, False, "openllmetry", None),
    # Transport spans are never candidates: HTTP clients and servers, database drivers, RPC.
    ("opentelemetry.instrumentation.httpx", {"http.request.method": "POST",
                                             "url.full": "http://127.0.0.1/v1/chat"}, False,
     "generic", None),
    ("opentelemetry.instrumentation.fastapi", {"http.route": "/answer"}, True, "generic", None),
    ("opentelemetry.instrumentation.psycopg", {"db.system": "postgresql",
                                               "db.operation": "query"}, False, "generic", None),
    ("opentelemetry.instrumentation.grpc", {"rpc.system": "grpc"}, False, "generic", None),
]


@pytest.mark.parametrize(("scope", "attributes", "root", "reader", "kind"), KIND_CASES)
def test_each_source_has_a_reader_and_a_kind(scope: str, attributes: dict[str, Any], root: bool,
                                            reader: str, kind: str | None) -> None:
    span = _span("s", scope=scope, attributes=attributes, root=root)
    found = reader_for(span)
    assert (found.name, found.kind(span)) == (reader, kind)


# -- OpenInference ---------------------------------------------------------------------------------


def test_openinference_llm_span_reads_its_flattened_messages() -> None:
    span = _span("ChatOpenAI", scope=OI_SCOPE, attributes={
        "openinference.span.kind": "LLM",
        "input.value": json.dumps({"messages": [{"role": "user", "content": "Hi?"}]}),
        "input.mime_type": "application/json",
        "output.value": json.dumps({"choices": [{"message": {"content": "Hello."}}]}),
        "output.mime_type": "application/json",
        "llm.input_messages.0.message.role": "system",
        "llm.input_messages.0.message.content": "Be brief.",
        "llm.input_messages.1.message.role": "user",
        "llm.input_messages.1.message.contents.0.message_content.type": "text",
        "llm.input_messages.1.message.contents.0.message_content.text": "Hi?",
        "llm.output_messages.0.message.role": "assistant",
        "llm.output_messages.0.message.content": "Hello.",
    })
    assert reader_for(span).read(span, "llm") == Content(
        [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi?"}],
        "Hello.")


def test_openinference_chain_input_is_unwrapped_from_its_json_envelope() -> None:
    span = _span("RunnableSequence", scope=OI_SCOPE, root=True, attributes={
        "openinference.span.kind": "CHAIN",
        "input.value": json.dumps({"question": "Who wrote Dune?"}),
        "input.mime_type": "application/json",
        "output.value": "Frank Herbert.",
    })
    assert reader_for(span).read(span, "agent") == Content("Who wrote Dune?", "Frank Herbert.")


def test_openinference_agent_is_scored_with_its_retriever_documents_and_tool_calls() -> None:
    probe = Probe(id="oi")
    inst, exp = memory_configure(scoring=[tracescore.ScoringRule(scorer=probe, on="agent")])
    tracer = inst.tracer_provider.get_tracer(OI_SCOPE)
    with tracer.start_as_current_span("agent", attributes={
            "openinference.span.kind": "AGENT", "input.value": "Where is order 42?",
            "output.value": "Shipped; Dune is by Herbert."}):
        with tracer.start_as_current_span("retriever", attributes={
                "openinference.span.kind": "RETRIEVER", "input.value": "order 42",
                "retrieval.documents.0.document.id": "d1",
                "retrieval.documents.0.document.content": "Order 42 shipped Monday.",
                "retrieval.documents.1.document.id": "d2",  # no text: left out, not the end
                "retrieval.documents.2.document.content": "Dune is by Frank Herbert."}):
            pass
        with tracer.start_as_current_span("lookup", attributes={
                "openinference.span.kind": "TOOL", "tool.name": "lookup_order",
                "input.value": '{"order_id": "42"}', "input.mime_type": "application/json",
                "output.value": "shipped"}):
            pass
    spans = finished(exp)
    assert probe.calls == [{
        "input": "Where is order 42?", "output": "Shipped; Dune is by Herbert.",
        "context": ["Order 42 shipped Monday.", "Dune is by Frank Herbert."],
        "tool_calls": [{"name": "lookup_order", "arguments": {"order_id": "42"},
                        "result": "shipped"}],
    }]
    agent = next(s for s in spans if s.name == "agent")
    assert [e["gen_ai.evaluation.name"] for e in eval_events(agent)] == ["oi"]


def test_openinference_hidden_inputs_are_not_scorable_and_name_the_switch() -> None:
    span = _span("agent", scope=OI_SCOPE, attributes={
        "openinference.span.kind": "AGENT", "input.value": "__REDACTED__",
        "output.value": "__REDACTED__"})
    content = reader_for(span).read(span, "agent")
    assert content.input is None and content.output is None
    assert content.missing is not None and "OPENINFERENCE_HIDE_INPUTS" in content.missing


# -- OTel GenAI conventions ------------------------------------------------------------------------

GENAI_CHAT = {
    "gen_ai.operation.name": "chat",
    "gen_ai.provider.name": "openai",
    "gen_ai.request.model": "gpt-4o-mini",
    "gen_ai.system_instructions": json.dumps([{"type": "text", "content": "Be brief."}]),
    "gen_ai.input.messages": json.dumps([
        {"role": "user", "parts": [{"type": "text", "content": "Weather in Paris?"}]},
        {"role": "assistant", "parts": [{"type": "tool_call", "id": "c1", "name": "weather",
                                         "arguments": {"city": "Paris"}}]},
        {"role": "tool", "parts": [{"type": "tool_call_response", "id": "c1",
                                    "response": "sunny"}]},
    ]),
    "gen_ai.output.messages": json.dumps([
        {"role": "assistant", "parts": [{"type": "text", "content": "Sunny."}],
         "finish_reason": "stop"}]),
}


def test_genai_chat_span_reads_the_message_json_with_typed_parts() -> None:
    span = _span("chat gpt-4o-mini", scope=GENAI_SCOPE, attributes=GENAI_CHAT)
    reader = reader_for(span)
    assert reader.name == "genai"
    assert reader.read(span, "llm") == Content([
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": 'weather({"city": "Paris"})'},
        {"role": "tool", "content": "sunny"},
    ], "Sunny.")


def test_genai_older_conventions_content_events_are_read() -> None:
    span = _span("chat gpt-4o-mini", scope=GENAI_SCOPE, attributes={
        "gen_ai.operation.name": "chat"}, events=[
        Event("gen_ai.content.prompt", {"gen_ai.prompt": json.dumps(
            [{"role": "user", "content": "Hi?"}])}),
        Event("gen_ai.content.completion", {"gen_ai.completion": json.dumps(
            [{"role": "assistant", "content": "Hello."}])}),
    ])
    assert reader_for(span).read(span, "llm") == Content([{"role": "user", "content": "Hi?"}],
                                                         "Hello.")


def test_genai_span_without_content_is_not_scorable_and_names_the_switch() -> None:
    # Content capture is off by default in the OTel GenAI instrumentations: the span has only
    # the operation's metadata. The score must say so, not be a zero.
    probe = Probe(id="genai")
    inst, exp = memory_configure(scoring=[tracescore.ScoringRule(scorer=probe, on="llm")])
    tracer = inst.tracer_provider.get_tracer(GENAI_SCOPE)
    with tracer.start_as_current_span("chat gpt-4o-mini", attributes={
            "gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o-mini"}):
        pass
    (span,) = finished(exp)
    assert probe.calls == []
    (event,) = eval_events(span)
    assert event["gen_ai.evaluation.score.label"] == "not_scorable"
    assert "gen_ai.evaluation.score.value" not in event
    reason = event["gen_ai.evaluation.explanation"]
    assert "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=SPAN_ONLY" in reason
    assert "EVENT_ONLY" in reason  # content in log records only: said, not silently missed


def test_genai_truncated_message_json_is_not_scorable() -> None:
    attributes = dict(GENAI_CHAT)
    attributes["gen_ai.output.messages"] = attributes["gen_ai.output.messages"][:30]
    span = _span("chat", scope=GENAI_SCOPE, attributes=attributes)
    content = reader_for(span).read(span, "llm")
    assert (content.input, content.output) == (None, None)
    assert content.missing is not None
    assert "gen_ai.output.messages" in content.missing
    assert "OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT" in content.missing


def test_a_value_as_long_as_the_sdk_attribute_limit_is_taken_as_cut(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_values, "_limit_cache", [12])
    span = _span("agent", scope=OI_SCOPE, attributes={
        "openinference.span.kind": "AGENT", "input.value": "x" * 12, "output.value": "ok"})
    content = reader_for(span).read(span, "agent")
    assert content.missing is not None and "exactly 12 characters" in content.missing


def test_genai_retrieval_and_tool_spans_feed_context_and_tool_calls() -> None:
    probe = Probe(id="genai")
    inst, exp = memory_configure(scoring=[tracescore.ScoringRule(scorer=probe, on="agent")])
    tracer = inst.tracer_provider.get_tracer("some.genai.producer")
    with tracer.start_as_current_span("invoke_agent support", attributes={
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.input.messages": json.dumps(
                [{"role": "user", "parts": [{"type": "text", "content": "Refund?"}]}]),
            "gen_ai.output.messages": json.dumps(
                [{"role": "assistant", "parts": [{"type": "text", "content": "Yes."}]}])}):
        with tracer.start_as_current_span("retrieval kb", attributes={
                "gen_ai.operation.name": "retrieval",
                "gen_ai.retrieval.query.text": "refund policy",
                "gen_ai.retrieval.documents": json.dumps([
                    {"id": "p1", "score": 0.9, "content": "Refunds within 30 days."},
                    {"id": "p2", "score": 0.5}])}):  # the conventions' shape: no text
            pass
        with tracer.start_as_current_span("execute_tool refund", attributes={
                "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "refund",
                "gen_ai.tool.call.arguments": '{"order": 7}',
                "gen_ai.tool.call.result": '{"ok": true}'}):
            pass
    finished(exp)
    assert probe.calls == [{
        "input": [{"role": "user", "content": "Refund?"}], "output": "Yes.",
        "context": ["Refunds within 30 days."],
        "tool_calls": [{"name": "refund", "arguments": {"order": 7}, "result": {"ok": True}}],
    }]


# -- OpenLLMetry -----------------------------------------------------------------------------------


def test_openllmetry_workflow_gets_chroma_documents_and_tool_calls() -> None:
    probe = Probe(id="tl")
    inst, exp = memory_configure(scoring=[tracescore.ScoringRule(scorer=probe, on="agent")])
    traceloop = inst.tracer_provider.get_tracer(TRACELOOP_SCOPE)
    chroma = inst.tracer_provider.get_tracer(CHROMA_SCOPE)
    with traceloop.start_as_current_span("answer.workflow", attributes={
            "traceloop.span.kind": "workflow", "traceloop.entity.name": "answer",
            "traceloop.entity.input": json.dumps({"args": ["Who wrote Dune?"], "kwargs": {}}),
            "traceloop.entity.output": json.dumps("Frank Herbert.")}):
        with chroma.start_as_current_span("chroma.query", attributes={
                "db.system": "chroma", "db.operation": "query"}) as query:
            query.add_event("db.query.result", {"db.query.result.id": "a",
                                                "db.query.result.document": "Dune, 1965."})
            query.add_event("db.query.result", {"db.query.result.id": "b",
                                                "db.query.result.document": "By Herbert."})
        with traceloop.start_as_current_span("lookup.tool", attributes={
                "traceloop.span.kind": "tool", "gen_ai.tool.name": "lookup",
                "traceloop.entity.input": json.dumps({"args": [], "kwargs": {"q": "Dune"}}),
                "traceloop.entity.output": json.dumps({"author": "Herbert"})}):
            pass
    finished(exp)
    assert probe.calls == [{
        "input": "Who wrote Dune?", "output": "Frank Herbert.",
        "context": ["Dune, 1965.", "By Herbert."],
        "tool_calls": [{"name": "lookup", "arguments": {"q": "Dune"},
                        "result": {"author": "Herbert"}}],
    }]


def test_openllmetry_older_indexed_prompts_are_read() -> None:
    span = _span("openai.chat", scope="opentelemetry.instrumentation.openai.v0", attributes={
        "llm.request.type": "chat", "gen_ai.system": "openai",
        "gen_ai.prompt.0.role": "system", "gen_ai.prompt.0.content": "Be brief.",
        "gen_ai.prompt.1.role": "user", "gen_ai.prompt.1.content": "Hi?",
        "gen_ai.completion.0.role": "assistant", "gen_ai.completion.0.content": "Hello.",
    })
    assert reader_for(span).read(span, "llm") == Content(
        [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi?"}],
        "Hello.")


def test_openllmetry_cut_entity_json_is_not_scorable() -> None:
    # traceloop-sdk cuts entity JSON at OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT, leaving JSON
    # that no longer parses.
    span = _span("answer.workflow", scope=TRACELOOP_SCOPE, attributes={
        "traceloop.span.kind": "workflow",
        "traceloop.entity.input": '{"args": ["Who wrote Du',
        "traceloop.entity.output": '"Frank Herbert."'})
    content = reader_for(span).read(span, "agent")
    assert (content.input, content.output) == (None, None)
    assert content.missing is not None and "traceloop.entity.input" in content.missing


def test_openllmetry_span_without_content_names_traceloop_trace_content() -> None:
    span = _span("answer.workflow", scope=TRACELOOP_SCOPE,
                 attributes={"traceloop.span.kind": "workflow"})
    content = reader_for(span).read(span, "agent")
    assert content.missing is not None and "TRACELOOP_TRACE_CONTENT=true" in content.missing


# -- mixed sources in one trace --------------------------------------------------------------------


def test_documents_and_tool_calls_come_from_every_source_in_order() -> None:
    probe = Probe(id="mixed")
    inst, exp = memory_configure(scoring=[tracescore.ScoringRule(scorer=probe, on="agent",
                                                                 scope=OI_SCOPE)])
    provider = inst.tracer_provider
    oi = provider.get_tracer(OI_SCOPE)
    genai = provider.get_tracer(GENAI_SCOPE)
    chroma = provider.get_tracer(CHROMA_SCOPE)
    with oi.start_as_current_span("agent", attributes={
            "openinference.span.kind": "AGENT", "input.value": "q", "output.value": "a"}):
        with chroma.start_as_current_span("chroma.query", attributes={
                "db.system": "chroma", "db.operation": "query"}) as query:
            query.add_event("db.query.result", {"db.query.result.document": "first"})
        with genai.start_as_current_span("execute_tool t1", attributes={
                "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "t1"}):
            pass
        with oi.start_as_current_span("retriever", attributes={
                "openinference.span.kind": "RETRIEVER",
                "retrieval.documents.0.document.content": "second"}):
            pass
        with oi.start_as_current_span("t2", attributes={
                "openinference.span.kind": "TOOL", "tool.name": "t2"}):
            pass
    finished(exp)
    (call,) = probe.calls
    assert call["context"] == ["first", "second"]
    assert [c["name"] for c in call["tool_calls"]] == ["t1", "t2"]


def test_a_rule_that_matches_nothing_leaves_foreign_spans_unscored() -> None:
    probe = Probe(id="none")
    inst, exp = memory_configure(scoring=[tracescore.ScoringRule(scorer=probe, on="tool")])
    tracer = inst.tracer_provider.get_tracer("opentelemetry.instrumentation.httpx")
    with tracer.start_as_current_span("POST", attributes={"http.request.method": "POST",
                                                          "input.value": "x"}):
        pass
    (span,) = finished(exp)
    assert probe.calls == [] and eval_events(span) == []


def _span(name: str, *, scope: str, attributes: dict[str, Any] | None = None,
          events: list[Event] | None = None, root: bool = False) -> ReadableSpan:
    ctx = SpanContext(trace_id=0xABC, span_id=0xDEF, is_remote=False,
                      trace_flags=TraceFlags(TraceFlags.SAMPLED))
    parent = None if root else SpanContext(trace_id=0xABC, span_id=0x123, is_remote=False)
    return ReadableSpan(name=name, context=ctx, parent=parent, attributes=attributes or {},
                        events=events or (), instrumentation_scope=InstrumentationScope(scope),
                        status=Status(StatusCode.UNSET), start_time=1, end_time=2)
