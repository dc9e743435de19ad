"""Conversations and users (issue 24): ``tracescore.conversation(...)`` puts
``gen_ai.conversation.id``, ``session.id`` and ``user.id`` on the spans of a turn (the
decorators', ``tracescore.span``'s and other instrumentations'), rules select on them, and scores
carry them on the event, the log record and ``on_score``, never on metrics; ``tracescore.span``
makes the span of a decorated call for code that is not a function call."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs import export as logs_export
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.trace import SpanKind, StatusCode

import tracescore
from tests.helpers import ProbeScorer, eval_events, finished, memory_configure

CONV, SESSION, USER = "gen_ai.conversation.id", "session.id", "user.id"


@pytest.fixture(autouse=True)
def _shutdown() -> Iterator[None]:
    yield
    tracescore.shutdown()


@tracescore.retrieval
def search(query: str) -> list[str]:
    return [f"a passage about {query}"]


@tracescore.agent(name="support-bot")
def answer(question: str) -> str:
    search(question)
    return "The answer, at some length so that the probe scores it."


# InMemoryLogRecordExporter is the newer name; InMemoryLogExporter the one of the 1.38 floor.
InMemoryLogs = getattr(logs_export, "InMemoryLogRecordExporter", None) or \
    logs_export.InMemoryLogExporter


def question(span: Any) -> str:
    return str(json.loads(span.attributes["input.value"])["question"])


def ids(span: Any) -> dict[str, Any]:
    return {k: span.attributes[k] for k in (CONV, SESSION, USER) if k in span.attributes}


def test_the_spans_of_a_turn_carry_the_conversation() -> None:
    _, exporter = memory_configure()
    with tracescore.conversation("chat-42", session_id="s-1", user_id="u-7") as attrs:
        answer("How do I reset my password?")
    answer("outside")

    assert attrs == {CONV: "chat-42", SESSION: "s-1", USER: "u-7"}
    spans = finished(exporter)
    inside = [s for s in spans if "outside" not in str(s.attributes.get("input.value"))]
    assert {s.name for s in inside} == {"invoke_agent support-bot", "retrieval search"}
    for span in inside:
        assert ids(span) == {CONV: "chat-42", SESSION: "s-1", USER: "u-7"}
    outside = [s for s in spans if s not in inside]
    assert len(outside) == 2 and all(ids(s) == {} for s in outside)


def test_blocks_nest_and_only_given_ids_are_written() -> None:
    _, exporter = memory_configure()
    with tracescore.conversation("chat-1", user_id="u-1"):
        with tracescore.conversation("chat-2"):
            answer("inner")
        answer("outer")
    by_input = {question(s): s for s in finished(exporter) if s.name.startswith("invoke_agent")}
    assert ids(by_input["inner"]) == {CONV: "chat-2", USER: "u-1"}
    assert ids(by_input["outer"]) == {CONV: "chat-1", USER: "u-1"}


def test_tasks_and_bound_threads_inherit_it_plain_threads_do_not() -> None:
    _, exporter = memory_configure()

    async def turn() -> None:
        await asyncio.gather(asyncio.to_thread(tracescore.bind_context(answer), "bound"),
                             asyncio.create_task(asyncio.to_thread(answer, "to_thread")))

    with tracescore.conversation("chat-9"):
        asyncio.run(turn())
        plain = threading.Thread(target=answer, args=("plain thread",))
        plain.start()
        plain.join()
    got = {question(s): ids(s) for s in finished(exporter) if s.name.startswith("invoke_agent")}
    # asyncio.to_thread copies the context, as bind_context does; a bare Thread starts empty.
    assert got == {"bound": {CONV: "chat-9"}, "to_thread": {CONV: "chat-9"},
                   "plain thread": {}}


def test_spans_of_other_instrumentations_in_the_turn_get_it_too() -> None:
    inst, exporter = memory_configure()
    # Another instrumentation's tracer, on the provider tracescore configured (the global one
    # only when no earlier configure in this process took the global slot first).
    other = inst.tracer_provider.get_tracer("some.other.instrumentation")
    with tracescore.conversation("chat-3", user_id="u-3"), other.start_as_current_span("foreign"):
        answer("q")
    with other.start_as_current_span("foreign outside"):
        pass
    spans = {s.name: s for s in finished(exporter)}
    assert ids(spans["foreign"]) == {CONV: "chat-3", USER: "u-3"}
    assert ids(spans["foreign outside"]) == {}
    # The foreign parent's ids are not written twice over the agent's own.
    assert ids(spans["invoke_agent support-bot"]) == {CONV: "chat-3", USER: "u-3"}


def test_scores_carry_it_on_the_event_log_record_and_callback_not_on_metrics() -> None:
    logs = InMemoryLogs()
    logger_provider = LoggerProvider()
    logger_provider.add_log_record_processor(logs_export.SimpleLogRecordProcessor(logs))
    reader = InMemoryMetricReader()
    received: list[tracescore.ScoreEvent] = []
    _, exporter = memory_configure(
        scoring=[tracescore.ScoringRule(scorer=ProbeScorer(), on="agent")],
        output=tracescore.OutputOptions(logger_provider=logger_provider,
                                        meter_provider=MeterProvider(metric_readers=[reader])),
        on_score=received.append)
    with tracescore.conversation("chat-5", session_id="s-5", user_id="u-5"):
        answer("q")
    (agent,) = [s for s in finished(exporter) if s.name.startswith("invoke_agent")]

    (event,) = eval_events(agent)
    expected = {CONV: "chat-5", SESSION: "s-5", USER: "u-5"}
    assert {k: event[k] for k in expected} == expected
    (record,) = [r.log_record for r in logs.get_finished_logs()]
    assert {k: record.attributes[k] for k in expected} == expected
    (score,) = received
    assert {k: score.attributes[k] for k in expected} == expected
    # Metrics: bounded dimensions only; an id per conversation would be a series per user.
    data = reader.get_metrics_data()
    for rm in data.resource_metrics:
        for sm in rm.scope_metrics:
            for metric in sm.metrics:
                for point in metric.data.data_points:
                    assert not set(point.attributes) & set(expected), metric.name


def test_rules_select_on_the_conversations_attributes() -> None:
    probe = ProbeScorer()
    memory_configure(scoring=[tracescore.ScoringRule(scorer=probe, on="agent",
                                                     attributes={USER: "u-vip"})])
    with tracescore.conversation("c", user_id="u-vip"):
        answer("vip")
    with tracescore.conversation("c", user_id="u-other"):
        answer("other")
    tracescore.force_flush(10_000)
    assert [call["input"] for call in probe.calls] == ["vip"]


def test_ids_must_be_strings() -> None:
    with pytest.raises(tracescore.ConfigurationError, match="user.id takes a string"), \
            tracescore.conversation("c", user_id=7):  # type: ignore[arg-type]
        pass


# -- tracescore.span ----------------------------------------------------------------------------


def test_a_block_with_a_kind_is_the_decorators_span_and_is_scored() -> None:
    probe = ProbeScorer()
    _, exporter = memory_configure(scoring=[tracescore.ScoringRule(scorer=probe, on="agent")])
    with tracescore.conversation("chat-7"), \
            tracescore.span("support-bot", kind="agent", attributes={"team": "care"}) as turn:
        turn.set_input("Where is my order?")
        docs = search("order")
        turn.set_output("It ships tomorrow, as the order page says.")
    spans = {s.name: s for s in finished(exporter)}
    agent = spans["invoke_agent support-bot"]
    assert agent.kind == SpanKind.INTERNAL
    assert agent.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert agent.attributes["gen_ai.agent.name"] == "support-bot"
    assert agent.attributes["openinference.span.kind"] == "AGENT"
    assert agent.attributes["team"] == "care"
    assert agent.attributes["input.value"] == '"Where is my order?"'
    assert agent.attributes["output.value"] == '"It ships tomorrow, as the order page says."'
    assert ids(agent) == {CONV: "chat-7"}
    assert spans["retrieval search"].parent.span_id == agent.context.span_id
    assert docs == ["a passage about order"]
    (call,) = probe.calls
    assert call["input"] == "Where is my order?"
    assert call["output"] == "It ships tomorrow, as the order page says."
    assert len(eval_events(agent)) == 1


def test_a_retrieval_block_feeds_the_traces_context_scorers() -> None:
    probe = ProbeScorer(uses_context=True)
    memory_configure(scoring=[tracescore.ScoringRule(scorer=probe, on="agent")])

    @tracescore.agent
    def rag(question: str) -> str:
        with tracescore.span("vector-index", kind="retrieval") as block:
            block.set_input(question)
            block.set_output([{"content": "Doc one."}, {"content": "Doc two."}])
        return "An answer."

    rag("q")
    tracescore.force_flush(10_000)
    (call,) = probe.calls
    assert call["context"] == ["Doc one.", "Doc two."]


def test_an_exception_in_a_block_is_recorded_and_propagates() -> None:
    _, exporter = memory_configure()
    with pytest.raises(KeyError, match="missing"), \
            tracescore.span("lookup_order", kind="tool") as block:
        block.set_input({"order_id": "42"})
        raise KeyError("missing")
    (span,) = finished(exporter)
    assert span.name == "execute_tool lookup_order"
    assert span.status.status_code == StatusCode.ERROR
    assert span.attributes["error.type"] == "KeyError"
    assert span.attributes["gen_ai.tool.call.arguments"] == '{"order_id": "42"}'
    assert [e.name for e in span.events] == ["exception"]


def test_a_plain_block_and_an_async_block() -> None:
    _, exporter = memory_configure()

    async def main() -> None:
        async with tracescore.span("rerank") as block:
            block.set_input(["a", "b"])
            block.set_attribute("rerank.model", "bm25")
            block.set_output(["b", "a"])

    asyncio.run(main())
    (span,) = finished(exporter)
    assert span.name == "rerank"
    assert span.kind == SpanKind.INTERNAL
    assert "gen_ai.operation.name" not in span.attributes
    assert span.attributes["input.value"] == '["a", "b"]'
    assert span.attributes["output.value"] == '["b", "a"]'
    assert span.attributes["rerank.model"] == "bm25"


def test_an_llm_block_records_its_messages() -> None:
    _, exporter = memory_configure()
    with tracescore.span("replay", kind="llm", model="gpt-4o-mini", provider="openai") as block:
        block.set_input([{"role": "user", "content": "Hi"}])
        block.set_output("Hello!")
    (span,) = finished(exporter)
    assert span.name == "chat gpt-4o-mini"
    assert span.kind == SpanKind.CLIENT
    assert span.attributes["gen_ai.request.model"] == "gpt-4o-mini"
    assert span.attributes["llm.input_messages.0.message.content"] == "Hi"
    assert span.attributes["llm.output_messages.0.message.content"] == "Hello!"


@pytest.mark.parametrize("bad", [{"name": ""}, {"name": "x", "kind": "chain"},
                                 {"name": "x", "attributes": [("a", 1)]}])
def test_bad_arguments_fail_early(bad: dict[str, Any]) -> None:
    with pytest.raises(tracescore.ConfigurationError):
        tracescore.span(**bad)


def test_a_block_outside_tracing_does_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    from tracescore.testing import runtime

    _, exporter = memory_configure()
    monkeypatch.setattr(runtime(), "disabled", True)
    with tracescore.span("quiet", kind="agent") as block:
        block.set_input("q")
        block.set_output("a")
    assert not block.span.is_recording()
    assert finished(exporter) == []
