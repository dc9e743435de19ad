"""Decorators: span names, attributes, content capture, parentage, generators, errors."""

from __future__ import annotations

import asyncio
import json
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from opentelemetry.trace import StatusCode

import tracescore
from tests.helpers import finished, memory_configure


@pytest.fixture
def exporter() -> Any:
    _, exp = memory_configure(service_name="test-svc")
    yield exp
    tracescore.shutdown(2000)


def by_name(spans: list[Any]) -> dict[str, Any]:
    return {s.name: s for s in spans}


def pop_common(attrs: dict[str, Any], op: str, oi: str, kind: str) -> None:
    assert attrs.pop("gen_ai.operation.name") == op
    assert attrs.pop("openinference.span.kind") == oi
    assert attrs.pop("tracescore.span.kind") == kind


def test_agent_span_attributes_exact(exporter: Any) -> None:
    @tracescore.agent
    def answer(question: str) -> str:
        return "Paris is the capital."

    assert answer("What is the capital of France?") == "Paris is the capital."
    (span,) = finished(exporter)
    assert span.name == "invoke_agent test_agent_span_attributes_exact.<locals>.answer"
    assert span.kind.name == "INTERNAL"
    assert span.resource.attributes["service.name"] == "test-svc"
    attrs = dict(span.attributes)
    pop_common(attrs, "invoke_agent", "AGENT", "agent")
    assert attrs.pop("gen_ai.agent.name") == "test_agent_span_attributes_exact.<locals>.answer"
    assert json.loads(attrs.pop("input.value")) == {"question": "What is the capital of France?"}
    assert attrs.pop("input.mime_type") == "application/json"
    assert json.loads(attrs.pop("output.value")) == "Paris is the capital."
    assert attrs.pop("output.mime_type") == "application/json"
    assert attrs == {}


def test_named_tool_and_llm_spans(exporter: Any) -> None:
    @tracescore.tool(name="lookup_order")
    def lookup(order_id: str) -> dict[str, Any]:
        return {"id": order_id, "status": "shipped"}

    @tracescore.llm(model="gpt-4o-mini", provider="openai")
    def call_model(messages: list[dict[str, str]]) -> str:
        return "hi"

    lookup("A1")
    call_model([{"role": "user", "content": "hello"}])
    spans = by_name(finished(exporter))
    tool_attrs = dict(spans["execute_tool lookup_order"].attributes)
    pop_common(tool_attrs, "execute_tool", "TOOL", "tool")
    assert tool_attrs.pop("gen_ai.tool.name") == "lookup_order"
    assert tool_attrs.pop("tool.name") == "lookup_order"
    assert json.loads(tool_attrs.pop("gen_ai.tool.call.arguments")) == {"order_id": "A1"}
    assert json.loads(tool_attrs.pop("gen_ai.tool.call.result")) == {"id": "A1",
                                                                      "status": "shipped"}
    for key in ("input.value", "input.mime_type", "output.value", "output.mime_type"):
        tool_attrs.pop(key)
    assert tool_attrs == {}
    assert spans["execute_tool lookup_order"].kind.name == "INTERNAL"
    llm_span = spans["chat gpt-4o-mini"]
    assert llm_span.kind.name == "CLIENT"  # a model in another process, as the conventions ask
    llm_attrs = dict(llm_span.attributes)
    pop_common(llm_attrs, "chat", "LLM", "llm")
    assert llm_attrs.pop("gen_ai.request.model") == "gpt-4o-mini"
    assert llm_attrs.pop("llm.model_name") == "gpt-4o-mini"
    assert llm_attrs.pop("gen_ai.provider.name") == "openai"
    assert llm_attrs.pop("llm.provider") == "openai"
    assert llm_attrs.pop("gen_ai.system") == "openai"  # the older name, without the opt-in
    assert json.loads(llm_attrs.pop("gen_ai.input.messages")) == [
        {"role": "user", "parts": [{"type": "text", "content": "hello"}]}]
    assert json.loads(llm_attrs.pop("gen_ai.output.messages")) == [
        {"role": "assistant", "parts": [{"type": "text", "content": "hi"}],
         "finish_reason": "stop"}]
    assert llm_attrs.pop("llm.input_messages.0.message.role") == "user"
    assert llm_attrs.pop("llm.input_messages.0.message.content") == "hello"
    assert llm_attrs.pop("llm.output_messages.0.message.role") == "assistant"
    assert llm_attrs.pop("llm.output_messages.0.message.content") == "hi"
    assert json.loads(llm_attrs.pop("input.value")) == {
        "messages": [{"role": "user", "content": "hello"}]}
    assert json.loads(llm_attrs.pop("output.value")) == "hi"
    for key in ("input.mime_type", "output.mime_type"):
        llm_attrs.pop(key)
    assert llm_attrs == {}


def test_llm_system_instructions_tool_calls_and_in_process_model(exporter: Any) -> None:
    @tracescore.llm(model="local-7b", remote=False)
    def call_model(messages: list[dict[str, Any]], system: str) -> dict[str, Any]:
        return {"role": "assistant", "content": "Paris."}

    call_model([{"role": "user", "content": "Capital?"},
                {"role": "assistant", "content": None, "tool_calls": [
                    {"id": "c1", "function": {"name": "lookup", "arguments": '{"q": "x"}'}}]},
                {"role": "tool", "tool_call_id": "c1", "content": "France: Paris"}],
               system="Answer briefly.")
    (span,) = finished(exporter)
    assert span.kind.name == "INTERNAL"  # remote=False: the model runs in this process
    attrs = dict(span.attributes)
    assert json.loads(attrs["gen_ai.system_instructions"]) == [
        {"type": "text", "content": "Answer briefly."}]
    assert json.loads(attrs["gen_ai.input.messages"]) == [
        {"role": "user", "parts": [{"type": "text", "content": "Capital?"}]},
        {"role": "assistant", "parts": [
            {"type": "tool_call", "id": "c1", "name": "lookup", "arguments": {"q": "x"}}]},
        {"role": "tool", "parts": [
            {"type": "tool_call_response", "id": "c1", "response": "France: Paris"}]}]
    assert attrs["llm.input_messages.2.message.role"] == "tool"
    assert "gen_ai.provider.name" not in attrs and "gen_ai.system" not in attrs
    assert json.loads(attrs["gen_ai.output.messages"])[0]["parts"] == [
        {"type": "text", "content": "Paris."}]


def test_llm_without_content_capture_writes_no_messages(exporter: Any) -> None:
    @tracescore.llm(capture_content=False)
    def call_model(prompt: str) -> str:
        return "secret answer"

    call_model("secret question")
    (span,) = finished(exporter)
    assert not [k for k in span.attributes if "messages" in k or "value" in k]


def test_latest_conventions_opt_in_drops_the_older_provider_name(
        exporter: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_SEMCONV_STABILITY_OPT_IN", "http, gen_ai_latest_experimental")

    @tracescore.llm(model="m", provider="anthropic")
    def call_model(prompt: str) -> str:
        return "x"

    call_model("p")
    (span,) = finished(exporter)
    assert span.attributes["gen_ai.provider.name"] == "anthropic"
    assert "gen_ai.system" not in span.attributes


def test_retrieval_is_a_client_span_with_its_data_source(exporter: Any) -> None:
    @tracescore.retrieval(name="kb", data_source="kb-articles")
    def search(query: str) -> list[str]:
        return ["alpha"]

    @tracescore.retrieval(name="local", remote=False)
    def search_here(query: str) -> list[str]:
        return ["beta"]

    search("q")
    search_here("q")
    spans = by_name(finished(exporter))
    assert spans["retrieval kb"].kind.name == "CLIENT"
    assert spans["retrieval kb"].attributes["gen_ai.data_source.id"] == "kb-articles"
    assert spans["retrieval local"].kind.name == "INTERNAL"
    assert "gen_ai.data_source.id" not in spans["retrieval local"].attributes


def test_retrieval_documents_recorded(exporter: Any) -> None:
    class Doc:
        def __init__(self, text: str) -> None:
            self.page_content = text
            self.metadata = {"source": "x"}

    @tracescore.retrieval(name="kb")
    def search(query: str, k: int = 2) -> list[Any]:
        return [{"content": "alpha", "id": "d1", "score": 0.9}, "beta", Doc("gamma")]

    search("q")
    (span,) = finished(exporter)
    assert span.name == "retrieval kb"
    attrs = dict(span.attributes)
    docs = json.loads(attrs["gen_ai.retrieval.documents"])
    assert docs == [
        {"id": "d1", "score": 0.9, "content": "alpha"},
        {"content": "beta"},  # absent id and score left out, never null
        {"content": "gamma"},
    ]
    assert attrs["retrieval.documents.0.document.id"] == "d1"
    assert attrs["retrieval.documents.0.document.score"] == 0.9
    # Content once, in gen_ai.retrieval.documents; not again in the flattened form.
    assert not any(key.endswith(".document.content") for key in attrs)
    assert json.loads(attrs["input.value"]) == {"query": "q", "k": 2}
    assert "output.value" not in attrs


def test_exception_recorded_and_reraised_unchanged(exporter: Any) -> None:
    class Boom(Exception):
        pass

    err = Boom("bad")

    @tracescore.agent
    def answer(q: str) -> str:
        raise err

    with pytest.raises(Boom) as info:
        answer("x")
    assert info.value is err
    (span,) = finished(exporter)
    assert span.status.status_code == StatusCode.ERROR
    assert span.attributes["error.type"].endswith("Boom")
    assert [e.name for e in span.events] == ["exception"]


def test_async_and_parentage_across_gather(exporter: Any) -> None:
    @tracescore.retrieval
    async def search(q: str) -> list[str]:
        await asyncio.sleep(0.01)  # the scenario: the three searches interleave under gather
        return [q]

    @tracescore.agent
    async def answer(q: str) -> str:
        docs = await asyncio.gather(search("a"), search("b"), search("c"))
        return str(docs)

    assert asyncio.run(answer("q")) == "[['a'], ['b'], ['c']]"
    spans = finished(exporter)
    root = [s for s in spans if s.name.startswith("invoke_agent")][0]
    children = [s for s in spans if s.name.startswith("retrieval")]
    assert len(children) == 3
    for child in children:
        assert child.parent.span_id == root.context.span_id
        assert child.context.trace_id == root.context.trace_id


def test_thread_pool_parentage_with_bind_context(exporter: Any) -> None:
    @tracescore.tool
    def work(i: int) -> int:
        return i * 2

    @tracescore.agent
    def answer() -> list[int]:
        with ThreadPoolExecutor(max_workers=3) as pool:
            return list(pool.map(tracescore.bind_context(work), range(5)))

    assert answer() == [0, 2, 4, 6, 8]
    spans = finished(exporter)
    root = [s for s in spans if s.name.startswith("invoke_agent")][0]
    tools = [s for s in spans if s.name.startswith("execute_tool")]
    assert len(tools) == 5
    assert all(t.parent.span_id == root.context.span_id for t in tools)


def test_generator_single_span_for_whole_life(exporter: Any) -> None:
    @tracescore.tool
    def inner() -> str:
        return "x"

    @tracescore.agent
    def stream(n: int) -> Any:
        for i in range(n):
            inner()
            yield f"tok{i} "

    gen = stream(3)
    assert finished(exporter) == []  # nothing ends before the generator does
    assert list(gen) == ["tok0 ", "tok1 ", "tok2 "]
    spans = finished(exporter)
    agent_span = [s for s in spans if s.name.startswith("invoke_agent")][0]
    inners = [s for s in spans if s.name.startswith("execute_tool")]
    assert len(inners) == 3
    assert all(s.parent.span_id == agent_span.context.span_id for s in inners)
    assert json.loads(agent_span.attributes["output.value"]) == "tok0 tok1 tok2 "
    assert agent_span.end_time >= max(s.end_time for s in inners)


def test_generator_closed_early_ends_span(exporter: Any) -> None:
    @tracescore.agent
    def stream() -> Any:
        yield 1
        yield 2
        yield 3

    gen = stream()
    assert next(gen) == 1
    gen.close()
    (span,) = finished(exporter)
    assert json.loads(span.attributes["output.value"]) == [1]
    assert span.status.status_code != StatusCode.ERROR


def test_generator_send_and_throw(exporter: Any) -> None:
    @tracescore.agent
    def echo() -> Any:
        received = []
        try:
            while True:
                value = yield len(received)
                received.append(value)
        except KeyError:
            yield "caught"

    gen = echo()
    assert next(gen) == 0
    assert gen.send("a") == 1
    assert gen.throw(KeyError("k")) == "caught"
    with pytest.raises(StopIteration):
        next(gen)
    (span,) = finished(exporter)
    assert json.loads(span.attributes["output.value"]) == [0, 1, "caught"]


def test_generator_error_recorded(exporter: Any) -> None:
    @tracescore.agent
    def stream() -> Any:
        yield 1
        raise ValueError("mid-stream")

    with pytest.raises(ValueError, match="mid-stream"):
        list(stream())
    (span,) = finished(exporter)
    assert span.status.status_code == StatusCode.ERROR


def test_async_generator(exporter: Any) -> None:
    @tracescore.tool
    async def inner() -> int:
        return 1

    @tracescore.agent
    async def stream(n: int) -> Any:
        for i in range(n):
            await inner()
            yield str(i)

    async def consume() -> list[str]:
        return [x async for x in stream(3)]

    assert asyncio.run(consume()) == ["0", "1", "2"]
    spans = finished(exporter)
    agent_span = [s for s in spans if s.name.startswith("invoke_agent")][0]
    assert json.loads(agent_span.attributes["output.value"]) == "012"
    inners = [s for s in spans if s.name.startswith("execute_tool")]
    assert all(s.parent.span_id == agent_span.context.span_id for s in inners)


def test_methods_keep_self_out_of_input(exporter: Any) -> None:
    class Bot:
        @tracescore.agent(name="bot")
        def answer(self, question: str) -> str:
            return question.upper()

        @tracescore.tool
        async def fetch(self, key: str) -> str:
            return key

    bot = Bot()
    assert bot.answer("hi") == "HI"
    assert asyncio.run(bot.fetch("k")) == "k"
    spans = by_name(finished(exporter))
    assert json.loads(spans["invoke_agent bot"].attributes["input.value"]) == {"question": "hi"}
    assert json.loads(spans["execute_tool test_methods_keep_self_out_of_input.<locals>.Bot.fetch"]
                      .attributes["input.value"]) == {"key": "k"}


def test_signature_and_metadata_preserved() -> None:
    import inspect

    def plain(question: str, k: int = 3) -> str:
        """Doc."""
        return question

    answer = tracescore.agent(plain)

    @tracescore.agent
    async def aanswer(question: str) -> str:
        return question

    assert inspect.signature(answer) == inspect.signature(plain)
    assert answer.__doc__ == "Doc."
    assert answer.__name__ == "plain"
    assert inspect.iscoroutinefunction(aanswer)


def test_capture_content_off_keeps_content_off_spans() -> None:
    _, exp = memory_configure(capture_content=False)
    try:
        @tracescore.agent
        def answer(q: str) -> str:
            return "secret answer"

        answer("secret question")
        (span,) = finished(exp)
        assert not any("secret" in str(v) for v in span.attributes.values())
        assert "input.value" not in span.attributes
    finally:
        tracescore.shutdown(2000)


def test_capture_content_env_false(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "false")
    _, exp = memory_configure()
    try:
        @tracescore.agent
        def answer(q: str) -> str:
            return "a"

        answer("q")
        (span,) = finished(exp)
        assert "output.value" not in span.attributes
    finally:
        tracescore.shutdown(2000)


class Cyclic:
    def __init__(self) -> None:
        self.me = self

    def __repr__(self) -> str:
        return "<Cyclic>"


@pytest.mark.parametrize(
    "value",
    [None, b"\xff\xfebytes", "x" * 10_000_000, object(), Cyclic(), {"a": [1, 2]},
     [1, [2, [3]]]],
    ids=["none", "bytes", "10MB", "object", "cyclic-object", "dict", "nested"],
)
def test_bad_return_values_are_safe(value: Any) -> None:
    _, exp = memory_configure(content=tracescore.ContentOptions(max_length=1000))
    try:
        cyc: list[Any] = [1]
        cyc.append(cyc)

        @tracescore.agent
        def answer(q: Any) -> Any:
            return value

        assert answer(cyc) is value
        (span,) = finished(exp)
        assert len(span.attributes["output.value"]) <= 1000
        assert len(span.attributes["input.value"]) <= 1000
        assert "cycle" in span.attributes["input.value"]
    finally:
        tracescore.shutdown(2000)


def test_disabled_env_makes_pass_through(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRACESCORE_DISABLED", "true")

    def plain(q: str) -> str:
        return q

    assert tracescore.agent(plain) is plain
    assert tracescore.tool(name="x")(plain) is plain


def test_not_callable_is_a_clear_error() -> None:
    with pytest.raises(tracescore.ConfigurationError, match="decorates a function"):
        tracescore.agent(42)  # type: ignore[call-overload]


def test_concurrent_threads_each_get_their_own_trace(exporter: Any) -> None:
    @tracescore.agent
    def answer(i: int) -> int:
        return i

    threads = [threading.Thread(target=answer, args=(i,)) for i in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    spans = finished(exporter)
    assert len(spans) == 20
    assert len({s.context.trace_id for s in spans}) == 20


def test_suppressed_instrumentation_creates_no_span(exporter: Any) -> None:
    # The judge's own calls run with instrumentation suppressed, so scoring never traces itself.
    from opentelemetry import context

    @tracescore.llm
    def call_model(prompt: str) -> str:
        return "x"

    token = context.attach(context.set_value(context._SUPPRESS_INSTRUMENTATION_KEY, True))
    try:
        assert call_model("p") == "x"
    finally:
        context.detach(token)
    call_model("p")
    assert len(finished(exporter)) == 1
