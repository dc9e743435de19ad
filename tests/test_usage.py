"""Token usage, response model/id, finish reasons and cost on ``@tracescore.llm`` spans, from
OpenAI (chat and Responses API), litellm and Anthropic response objects, typed and as dicts,
streams included; and the per-agent token and cost metrics, read through a real metric reader.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

import tracescore
from tests.helpers import finished, memory_configure
from tests.otlp_receiver import HttpOtlpReceiver
from tracescore.testing import ScriptedJudge

openai_types = pytest.importorskip("openai.types.chat", reason="the openai package (litellm's)")
anthropic_types = pytest.importorskip(
    "anthropic.types", reason="the anthropic package (the test extra) is not installed")

USAGE_KEYS = ("gen_ai.usage.", "gen_ai.response.", "llm.token_count.", "llm.cost.")


@pytest.fixture
def reader() -> Any:
    return InMemoryMetricReader()


@pytest.fixture
def exporter(reader: Any) -> Any:
    _, exp = memory_configure(
        output=tracescore.OutputOptions(meter_provider=MeterProvider(metric_readers=[reader])))
    yield exp
    tracescore.shutdown(2000)


def usage_attrs(span: Any) -> dict[str, Any]:
    """The span's usage and response attributes (tuples as lists)."""
    return {k: list(v) if isinstance(v, tuple) else v for k, v in span.attributes.items()
            if k.startswith(USAGE_KEYS)}


def points(reader: Any, name: str) -> list[tuple[dict[str, Any], float]]:
    """(attributes, value) of each data point of metric ``name`` (a histogram's sum)."""
    out = []
    data = reader.get_metrics_data()
    for rm in data.resource_metrics if data else ():
        for sm in rm.scope_metrics:
            for metric in sm.metrics:
                if metric.name == name:
                    for p in metric.data.data_points:
                        out.append((dict(p.attributes), getattr(p, "sum", None)
                                    if hasattr(p, "bucket_counts") else p.value))
    return out


def chat_completion(model: str = "gpt-4o-mini-2024-07-18", *, prompt: int = 1000,
                    completion: int = 200, cached: int = 400, **extra: Any) -> dict[str, Any]:
    body = {
        "id": "chatcmpl-abc123", "object": "chat.completion", "created": 1_700_000_000,
        "model": model,
        "choices": [{"index": 0, "finish_reason": "stop",
                     "message": {"role": "assistant", "content": "Paris."}}],
        "usage": {"prompt_tokens": prompt, "completion_tokens": completion,
                  "total_tokens": prompt + completion,
                  "prompt_tokens_details": {"cached_tokens": cached}},
    }
    body.update(extra)
    return body


# gpt-4o-mini: input 0.15, cached input 0.075, output 0.60 USD per million tokens
# (tracescore/_instrument/prices.json): 600 x 0.15 + 400 x 0.075 = 120; 200 x 0.6 = 120.
GPT4O_MINI = {
    "gen_ai.usage.input_tokens": 1000, "gen_ai.usage.output_tokens": 200,
    "gen_ai.usage.cache_read.input_tokens": 400,
    "llm.token_count.prompt": 1000, "llm.token_count.completion": 200,
    "llm.token_count.total": 1200, "llm.token_count.prompt_details.cache_read": 400,
    "gen_ai.response.model": "gpt-4o-mini-2024-07-18", "gen_ai.response.id": "chatcmpl-abc123",
    "gen_ai.response.finish_reasons": ["stop"],
    "gen_ai.usage.cost": pytest.approx(240e-6), "llm.cost.total": pytest.approx(240e-6),
    "llm.cost.prompt": pytest.approx(120e-6), "llm.cost.completion": pytest.approx(120e-6),
}


@pytest.mark.parametrize("typed", [True, False], ids=["typed", "dict"])
def test_openai_chat_completion(exporter: Any, typed: bool) -> None:
    body = chat_completion()
    result = openai_types.ChatCompletion.model_validate(body) if typed else body

    @tracescore.llm(provider="openai")
    def call(messages: list[dict[str, str]]) -> Any:
        return result

    assert call([{"role": "user", "content": "Capital of France?"}]) is result
    (span,) = finished(exporter)
    assert usage_attrs(span) == GPT4O_MINI
    assert span.attributes["llm.model_name"] == "gpt-4o-mini-2024-07-18"  # none was requested


def test_openai_responses_api(exporter: Any) -> None:
    from openai.types.responses import Response

    body = {
        "id": "resp_1", "object": "response", "created_at": 1_700_000_000.0,
        "model": "gpt-4.1-2025-04-14", "status": "completed", "output": [],
        "parallel_tool_calls": True, "tool_choice": "auto", "tools": [],
        "usage": {"input_tokens": 2000, "output_tokens": 100, "total_tokens": 2100,
                  "input_tokens_details": {"cached_tokens": 1000, "cache_write_tokens": 0},
                  "output_tokens_details": {"reasoning_tokens": 40}},
    }

    @tracescore.llm(model="gpt-4.1")
    def typed(prompt: str) -> Any:
        return Response.model_validate(body)

    @tracescore.llm(model="gpt-4.1", name="plain")
    def plain(prompt: str) -> Any:
        return body

    typed("hi")
    plain("hi")
    spans = finished(exporter)
    # gpt-4.1: 1000 x 2.0 + 1000 x 0.5 = 2500; 100 x 8.0 = 800 (per million)
    expected = {
        "gen_ai.usage.input_tokens": 2000, "gen_ai.usage.output_tokens": 100,
        "gen_ai.usage.cache_read.input_tokens": 1000,
        "llm.token_count.prompt": 2000, "llm.token_count.completion": 100,
        "llm.token_count.total": 2100, "llm.token_count.prompt_details.cache_read": 1000,
        "gen_ai.response.model": "gpt-4.1-2025-04-14", "gen_ai.response.id": "resp_1",
        "gen_ai.response.finish_reasons": ["stop"],
        "gen_ai.usage.cost": pytest.approx(3300e-6), "llm.cost.total": pytest.approx(3300e-6),
        "llm.cost.prompt": pytest.approx(2500e-6), "llm.cost.completion": pytest.approx(800e-6),
    }
    assert [usage_attrs(s) for s in spans] == [expected, expected]


@pytest.mark.parametrize("typed", [True, False], ids=["typed", "dict"])
def test_anthropic_message(exporter: Any, typed: bool) -> None:
    body = {
        "id": "msg_01", "type": "message", "role": "assistant",
        "model": "claude-sonnet-4-5-20250929",
        "content": [{"type": "text", "text": "Paris."}],
        "stop_reason": "end_turn", "stop_sequence": None,
        "usage": {"input_tokens": 100, "output_tokens": 50, "cache_read_input_tokens": 2000,
                  "cache_creation_input_tokens": 300},
    }
    result = anthropic_types.Message.model_validate(body) if typed else body

    @tracescore.llm(provider="anthropic")
    def call(messages: list[dict[str, str]]) -> Any:
        return result

    call([{"role": "user", "content": "Capital of France?"}])
    (span,) = finished(exporter)
    # claude-sonnet-4-5: 100 x 3 + 2000 x 0.3 + 300 x 3.75 = 2025; 50 x 15 = 750 (per million)
    assert usage_attrs(span) == {
        # the GenAI conventions' input_tokens counts cached input too: 100 + 2000 + 300
        "gen_ai.usage.input_tokens": 2400, "gen_ai.usage.output_tokens": 50,
        "gen_ai.usage.cache_read.input_tokens": 2000,
        "gen_ai.usage.cache_creation.input_tokens": 300,
        "llm.token_count.prompt": 2400, "llm.token_count.completion": 50,
        "llm.token_count.total": 2450, "llm.token_count.prompt_details.cache_read": 2000,
        "llm.token_count.prompt_details.cache_write": 300,
        "gen_ai.response.model": "claude-sonnet-4-5-20250929", "gen_ai.response.id": "msg_01",
        "gen_ai.response.finish_reasons": ["end_turn"],
        "gen_ai.usage.cost": pytest.approx(2775e-6), "llm.cost.total": pytest.approx(2775e-6),
        "llm.cost.prompt": pytest.approx(2025e-6), "llm.cost.completion": pytest.approx(750e-6),
    }


def test_litellm_model_response(exporter: Any) -> None:
    # Built directly: a sync litellm.completion() leaves an event loop set on the calling
    # thread, which would be collected (a ResourceWarning) in whichever test runs next.
    import litellm
    from litellm.types.utils import Usage

    openai_like = litellm.ModelResponse(**chat_completion())
    # litellm's shape of an Anthropic answer: prompt_tokens counts the cache's tokens, which
    # are also given apart (they must not be counted twice)
    anthropic_like = litellm.ModelResponse(
        id="chatcmpl-lite", model="claude-sonnet-4-5-20250929",
        choices=[{"index": 0, "finish_reason": "stop",
                  "message": {"role": "assistant", "content": "Paris."}}],
        usage=Usage(prompt_tokens=2400, completion_tokens=50, total_tokens=2450,
                    prompt_tokens_details={"cached_tokens": 2000,
                                           "cache_creation_tokens": 300},
                    cache_creation_input_tokens=300, cache_read_input_tokens=2000))

    @tracescore.llm(name="openai")
    def call(prompt: str) -> Any:
        return openai_like

    @tracescore.llm(name="anthropic")
    def call2(prompt: str) -> Any:
        return anthropic_like

    call("hi")
    call2("hi")
    spans = {s.name: usage_attrs(s) for s in finished(exporter)}
    assert spans["chat openai"] == GPT4O_MINI
    claude = spans["chat anthropic"]
    assert (claude["gen_ai.usage.input_tokens"], claude["gen_ai.usage.output_tokens"]) == (2400,
                                                                                           50)
    assert claude["gen_ai.usage.cache_read.input_tokens"] == 2000
    assert claude["gen_ai.usage.cache_creation.input_tokens"] == 300
    assert claude["gen_ai.response.finish_reasons"] == ["stop"]
    # as the Anthropic SDK's own Message: 100 x 3 + 2000 x 0.3 + 300 x 3.75 + 50 x 15
    assert claude["gen_ai.usage.cost"] == pytest.approx(2775e-6)


def test_openai_sdk_against_a_loopback_server(exporter: Any) -> None:
    import openai

    with ScriptedJudge() as server:
        server.route("*", "Paris.")
        client = openai.OpenAI(base_url=server.api_base, api_key="sk-test", max_retries=0)

        @tracescore.llm(provider="openai")
        def call(messages: list[dict[str, str]]) -> Any:
            return client.chat.completions.create(model="gpt-4.1-nano", messages=messages)

        response = call([{"role": "user", "content": "Capital of France?"}])
        client.close()
    (span,) = finished(exporter)
    attrs = usage_attrs(span)
    assert attrs["gen_ai.usage.input_tokens"] == response.usage.prompt_tokens
    assert attrs["gen_ai.response.id"] == response.id
    assert attrs["gen_ai.usage.cost"] == pytest.approx(
        (response.usage.prompt_tokens * 0.1 + response.usage.completion_tokens * 0.4) / 1e6)


def openai_chunks(typed: bool) -> list[Any]:
    base = {"id": "chatcmpl-s1", "object": "chat.completion.chunk", "created": 1,
            "model": "gpt-4o-2024-08-06"}
    bodies = [
        {**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": "Par"},
                              "finish_reason": None}]},
        {**base, "choices": [{"index": 0, "delta": {"content": "is."}, "finish_reason": None}]},
        {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
        # stream_options={"include_usage": True}: one last chunk, no choices, the usage
        {**base, "choices": [], "usage": {"prompt_tokens": 30, "completion_tokens": 2,
                                          "total_tokens": 32}},
    ]
    if not typed:
        return bodies
    return [openai_types.ChatCompletionChunk.model_validate(b) for b in bodies]


@pytest.mark.parametrize("typed", [True, False], ids=["typed", "dict"])
def test_openai_stream_sync_generator(exporter: Any, typed: bool) -> None:
    chunks = openai_chunks(typed)

    @tracescore.llm(model="gpt-4o")
    def stream(prompt: str) -> Any:
        yield from chunks

    assert list(stream("Capital of France?")) == chunks
    (span,) = finished(exporter)
    # gpt-4o: 30 x 2.5 = 75; 2 x 10 = 20 (per million)
    assert usage_attrs(span) == {
        "gen_ai.usage.input_tokens": 30, "gen_ai.usage.output_tokens": 2,
        "llm.token_count.prompt": 30, "llm.token_count.completion": 2,
        "llm.token_count.total": 32,
        "gen_ai.response.model": "gpt-4o-2024-08-06", "gen_ai.response.id": "chatcmpl-s1",
        "gen_ai.response.finish_reasons": ["stop"],
        "gen_ai.usage.cost": pytest.approx(95e-6), "llm.cost.total": pytest.approx(95e-6),
        "llm.cost.prompt": pytest.approx(75e-6), "llm.cost.completion": pytest.approx(20e-6),
    }


def test_stream_without_usage_records_ids_only(exporter: Any) -> None:
    chunks = openai_chunks(False)[:3]  # no include_usage: no usage chunk

    @tracescore.llm(model="gpt-4o")
    def stream(prompt: str) -> Any:
        yield from chunks

    list(stream("hi"))
    (span,) = finished(exporter)
    assert usage_attrs(span) == {
        "gen_ai.response.model": "gpt-4o-2024-08-06", "gen_ai.response.id": "chatcmpl-s1",
        "gen_ai.response.finish_reasons": ["stop"]}


def anthropic_events(typed: bool) -> list[Any]:
    bodies = [
        {"type": "message_start", "message": {
            "id": "msg_s1", "type": "message", "role": "assistant",
            "model": "claude-haiku-4-5-20251001", "content": [], "stop_reason": None,
            "stop_sequence": None,
            "usage": {"input_tokens": 400, "output_tokens": 1, "cache_read_input_tokens": 1000,
                      "cache_creation_input_tokens": 0}}},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text",
                                                                       "text": ""}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta",
                                                              "text": "Paris."}},
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {"stop_reason": "max_tokens", "stop_sequence": None},
         "usage": {"output_tokens": 64}},
        {"type": "message_stop"},
    ]
    if not typed:
        return bodies
    from anthropic.types import RawMessageStreamEvent
    from pydantic import TypeAdapter

    adapter: Any = TypeAdapter(RawMessageStreamEvent)
    return [adapter.validate_python(b) for b in bodies]


@pytest.mark.parametrize("typed", [True, False], ids=["typed", "dict"])
def test_anthropic_stream_async_generator(exporter: Any, typed: bool) -> None:
    events = anthropic_events(typed)

    @tracescore.llm(provider="anthropic")
    async def stream(prompt: str) -> Any:
        for event in events:
            yield event

    async def consume() -> list[Any]:
        return [e async for e in stream("Capital of France?")]

    assert asyncio.run(consume()) == events
    (span,) = finished(exporter)
    # claude-haiku-4-5: 400 x 1 + 1000 x 0.1 = 500; 64 x 5 = 320 (per million)
    assert usage_attrs(span) == {
        "gen_ai.usage.input_tokens": 1400, "gen_ai.usage.output_tokens": 64,
        "gen_ai.usage.cache_read.input_tokens": 1000,
        "llm.token_count.prompt": 1400, "llm.token_count.completion": 64,
        "llm.token_count.total": 1464, "llm.token_count.prompt_details.cache_read": 1000,
        "gen_ai.response.model": "claude-haiku-4-5-20251001", "gen_ai.response.id": "msg_s1",
        "gen_ai.response.finish_reasons": ["max_tokens"],
        "gen_ai.usage.cost": pytest.approx(820e-6), "llm.cost.total": pytest.approx(820e-6),
        "llm.cost.prompt": pytest.approx(500e-6), "llm.cost.completion": pytest.approx(320e-6),
    }


def test_responses_api_stream_and_litellm_chunks(exporter: Any) -> None:
    from litellm.types.utils import ModelResponseStream

    done = {"id": "resp_9", "object": "response", "model": "o4-mini-2025-04-16",
            "status": "incomplete", "incomplete_details": {"reason": "max_output_tokens"},
            "usage": {"input_tokens": 10, "output_tokens": 20, "total_tokens": 30}}
    events = [{"type": "response.created", "response": {**done, "status": "in_progress",
                                                        "usage": None}},
              {"type": "response.output_text.delta", "delta": "Par"},
              {"type": "response.incomplete", "response": done}]

    @tracescore.llm(name="responses")
    def responses(prompt: str) -> Any:
        yield from events

    chunks = [ModelResponseStream(id="c-9", model="gpt-5-mini", choices=[
                  {"index": 0, "delta": {"content": "Paris."}, "finish_reason": "stop"}]),
              ModelResponseStream(id="c-9", model="gpt-5-mini", choices=[],
                                  usage={"prompt_tokens": 8, "completion_tokens": 4,
                                         "total_tokens": 12})]

    @tracescore.llm(name="litellm")
    def litellm_stream(prompt: str) -> Any:
        yield from chunks

    list(responses("hi"))
    list(litellm_stream("hi"))
    spans = {s.name: usage_attrs(s) for s in finished(exporter)}
    resp = spans["chat responses"]
    assert resp.pop("gen_ai.usage.cost") == pytest.approx((10 * 1.1 + 20 * 4.4) / 1e6)
    assert resp["gen_ai.usage.input_tokens"] == 10 and resp["gen_ai.usage.output_tokens"] == 20
    assert resp["gen_ai.response.finish_reasons"] == ["max_output_tokens"]
    assert resp["gen_ai.response.id"] == "resp_9"
    lite = spans["chat litellm"]
    assert lite["gen_ai.usage.cost"] == pytest.approx((8 * 0.25 + 4 * 2.0) / 1e6)
    assert (lite["gen_ai.response.model"], lite["gen_ai.response.id"]) == ("gpt-5-mini", "c-9")
    assert lite["gen_ai.response.finish_reasons"] == ["stop"]


@pytest.mark.parametrize("case", [
    pytest.param({"model": "my-fine-tune-7"}, id="unknown model"),
    pytest.param({"model": "gpt-4o-mini-2099-01-01"}, id="unknown snapshot is not guessed"),
    pytest.param({"service_tier": "flex"}, id="non-standard tier"),
    pytest.param({"model": "gpt-4o-2024-05-13"}, id="cached tokens the table cannot price"),
])
def test_no_cost_when_the_call_cannot_be_priced(exporter: Any, reader: Any,
                                                case: dict[str, Any]) -> None:
    model = case.get("model", "gpt-4o-mini-2024-07-18")
    extra = {k: v for k, v in case.items() if k != "model"}

    @tracescore.llm
    def call(prompt: str) -> Any:
        return chat_completion(model, **extra)

    call("hi")
    (span,) = finished(exporter)
    attrs = usage_attrs(span)
    assert not [k for k in attrs if "cost" in k]
    assert attrs["gen_ai.usage.input_tokens"] == 1000  # usage is still recorded
    assert [v for _, v in points(reader, "tracescore.llm.unpriced")] == [1]
    assert points(reader, "tracescore.llm.cost") == []


def test_long_context_prompt_is_not_priced(exporter: Any) -> None:
    @tracescore.llm
    def call(prompt: str) -> Any:
        return chat_completion("gemini-2.5-pro", prompt=250_000, cached=0)

    @tracescore.llm(name="short")
    def short(prompt: str) -> Any:
        return chat_completion("gemini-2.5-pro", prompt=150_000, cached=0)

    call("hi")
    short("hi")
    spans = {s.name: usage_attrs(s) for s in finished(exporter)}
    assert "gen_ai.usage.cost" not in spans["chat test_long_context_prompt_is_not_priced."
                                            "<locals>.call"]
    assert spans["chat short"]["gen_ai.usage.cost"] == pytest.approx(
        (150_000 * 1.25 + 200 * 10) / 1e6)


def test_metrics_per_agent_beside_score_metrics(exporter: Any, reader: Any) -> None:
    @tracescore.llm(model="gpt-4o-mini", provider="openai")
    def call(prompt: str) -> Any:
        return chat_completion()

    @tracescore.agent(name="support-bot")
    def support(question: str) -> str:
        call(question)
        call(question)
        return "ok"

    @tracescore.agent(name="triage")
    async def triage(question: str) -> str:
        call(question)
        return "ok"

    support("a")
    asyncio.run(triage("b"))
    call("outside any agent")
    finished(exporter)
    common = {"gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o-mini",
              "gen_ai.response.model": "gpt-4o-mini-2024-07-18", "gen_ai.provider.name": "openai"}
    cost = sorted((p["gen_ai.agent.name"], v) for p, v in points(reader, "tracescore.llm.cost"))
    assert cost == [("_none", pytest.approx(240e-6)), ("support-bot", pytest.approx(480e-6)),
                    ("triage", pytest.approx(240e-6))]
    for attributes, _ in points(reader, "tracescore.llm.cost"):
        assert {k: v for k, v in attributes.items() if k != "gen_ai.agent.name"} == common
    tokens = sorted((p["gen_ai.agent.name"], p["gen_ai.token.type"], v)
                    for p, v in points(reader, "gen_ai.client.token.usage"))
    assert tokens == [("_none", "input", 1000), ("_none", "output", 200),
                      ("support-bot", "input", 2000), ("support-bot", "output", 400),
                      ("triage", "input", 1000), ("triage", "output", 200)]


def test_agent_of_a_stream_consumed_outside_it(exporter: Any, reader: Any) -> None:
    chunks = openai_chunks(False)

    @tracescore.llm(model="gpt-4o")
    def stream(prompt: str) -> Any:
        yield from chunks

    @tracescore.agent(name="streamer")
    def agent(question: str) -> Any:
        return stream(question)  # consumed by the caller, after the agent returned

    list(agent("hi"))
    finished(exporter)
    assert [p["gen_ai.agent.name"] for p, _ in points(reader, "tracescore.llm.cost")] == [
        "streamer"]


def test_usage_needs_no_content_capture_and_spares_other_kinds(reader: Any) -> None:
    _, exporter = memory_configure(
        capture_content=False,
        output=tracescore.OutputOptions(meter_provider=MeterProvider(metric_readers=[reader])))
    try:
        @tracescore.llm
        def call(prompt: str) -> Any:
            return chat_completion()

        @tracescore.tool
        def tool(prompt: str) -> Any:
            return chat_completion()  # not a model call: no usage read

        with tracescore.span("manual", kind="llm") as block:
            block.set_output(anthropic_types.Message.model_validate({
                "id": "msg_b", "type": "message", "role": "assistant",
                "model": "claude-opus-4-5", "content": [], "stop_reason": "end_turn",
                "stop_sequence": None, "usage": {"input_tokens": 10, "output_tokens": 10}}))
        call("hi")
        tool("hi")
        spans = {s.name.rsplit(".", 1)[-1].split(" ")[-1]: s for s in finished(exporter)}
    finally:
        tracescore.shutdown(2000)
    assert usage_attrs(spans["call"]) == GPT4O_MINI
    assert "output.value" not in spans["call"].attributes
    assert usage_attrs(spans["tool"]) == {}
    manual = usage_attrs(spans["manual"])
    assert manual["gen_ai.usage.cost"] == pytest.approx((10 * 5 + 10 * 25) / 1e6)


def test_price_file_option_and_environment(tmp_path: Any, monkeypatch: Any,
                                           caplog: Any) -> None:
    mine = tmp_path / "prices.json"
    mine.write_text(json.dumps({"models": {
        "my-fine-tune-7": {"input": 1.0, "output": 2.0, "cache_read": 0.5},
        "gpt-4o-mini-2024-07-18": {"input": 10.0, "output": 10.0, "cache_read": 10.0}}}))

    def run(**kwargs: Any) -> dict[str, Any]:
        _, exporter = memory_configure(**kwargs)
        try:
            @tracescore.llm
            def mine_call(prompt: str) -> Any:
                return chat_completion("my-fine-tune-7")

            @tracescore.llm
            def known(prompt: str) -> Any:
                return chat_completion()

            mine_call("hi")
            known("hi")
            return {s.name.rsplit(".", 1)[-1]: s.attributes.get("gen_ai.usage.cost")
                    for s in finished(exporter)}
        finally:
            tracescore.shutdown(2000)

    given = run(content=tracescore.ContentOptions(price_file=str(mine)))
    # 600 x 1 + 400 x 0.5 = 800, 200 x 2 = 400; the user's gpt-4o-mini entry wins: 1200 x 10
    assert given == {"mine_call": pytest.approx(1200e-6), "known": pytest.approx(12000e-6)}

    toml = tmp_path / "prices.toml"
    toml.write_text('[models."my-fine-tune-7"]\ninput = 2.0\noutput = 2.0\ncache_read = 2.0\n')
    monkeypatch.setenv("TRACESCORE_PRICE_FILE", str(toml))
    assert run() == {"mine_call": pytest.approx(2400e-6), "known": pytest.approx(240e-6)}

    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"models": {"x": {"input": -1, "output": 1}}}))
    with pytest.raises(tracescore.ConfigurationError, match="x.input takes a number >= 0"):
        tracescore.configure(content=tracescore.ContentOptions(price_file=str(bad)),
                             exporter=False)
    monkeypatch.setenv("TRACESCORE_PRICE_FILE", str(bad))
    with caplog.at_level(logging.WARNING, logger="tracescore"):
        assert run() == {"mine_call": None, "known": pytest.approx(240e-6)}
    assert "x.input takes a number >= 0" in caplog.text


def test_usage_reaches_an_otlp_receiver(monkeypatch: Any) -> None:
    with HttpOtlpReceiver() as receiver:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.endpoint)
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
        tracescore.configure(service_name="usage-e2e")
        try:
            @tracescore.llm(provider="anthropic")
            def call(prompt: str) -> Any:
                return anthropic_types.Message.model_validate({
                    "id": "msg_e2e", "type": "message", "role": "assistant",
                    "model": "claude-haiku-4-5", "content": [{"type": "text", "text": "Hi"}],
                    "stop_reason": "end_turn", "stop_sequence": None,
                    "usage": {"input_tokens": 1000, "output_tokens": 100}})

            call("hi")
            tracescore.force_flush(5000)
        finally:
            tracescore.shutdown(3000)
        (span,) = receiver.received.spans
    got = {k: v for k, v in span.attributes.items() if k.startswith(USAGE_KEYS)}
    assert got.pop("gen_ai.usage.cost") == pytest.approx((1000 * 1 + 100 * 5) / 1e6)
    assert got.pop("llm.cost.total") == pytest.approx(1500e-6)
    assert got.pop("llm.cost.prompt") == pytest.approx(1000e-6)
    assert got.pop("llm.cost.completion") == pytest.approx(500e-6)
    assert got == {
        "gen_ai.usage.input_tokens": 1000, "gen_ai.usage.output_tokens": 100,
        "llm.token_count.prompt": 1000, "llm.token_count.completion": 100,
        "llm.token_count.total": 1100, "gen_ai.response.model": "claude-haiku-4-5",
        "gen_ai.response.id": "msg_e2e", "gen_ai.response.finish_reasons": ["end_turn"]}


def test_other_instrumentations_model_calls_count_once_per_agent(reader: Any) -> None:
    inst, exporter = memory_configure(
        output=tracescore.OutputOptions(meter_provider=MeterProvider(metric_readers=[reader])))
    oi = inst.tracer_provider.get_tracer("openinference.instrumentation.openai")
    langchain = inst.tracer_provider.get_tracer("openinference.instrumentation.langchain")
    genai = inst.tracer_provider.get_tracer("opentelemetry.instrumentation.genai.openai")
    try:
        def oi_call(model: str = "gpt-4o-mini") -> None:
            # what OpenInference's OpenAI instrumentation records on its LLM span
            with oi.start_as_current_span("ChatCompletion", attributes={
                    "openinference.span.kind": "LLM", "llm.model_name": model,
                    "llm.provider": "openai", "llm.token_count.prompt": 1000,
                    "llm.token_count.completion": 200, "llm.token_count.total": 1200,
                    "llm.token_count.prompt_details.cache_read": 400}):
                pass

        @tracescore.agent(name="support-bot")
        def support() -> None:
            oi_call("gpt-4o-mini-2024-07-18")
            # LangChain's LLM span around the client's: one call, counted at the client's
            with langchain.start_as_current_span("ChatOpenAI", attributes={
                    "openinference.span.kind": "LLM", "llm.model_name": "gpt-4o-mini",
                    "llm.token_count.prompt": 1000, "llm.token_count.completion": 200}):
                oi_call()

        @tracescore.llm(provider="openai")
        def wrapped() -> Any:
            oi_call()  # the instrumented SDK call inside a decorated one: counted once
            return chat_completion()

        @tracescore.agent(name="triage")
        def triage() -> None:
            wrapped()
            with genai.start_as_current_span("chat gpt-4o-mini", attributes={
                    "gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai",
                    "gen_ai.request.model": "gpt-4o-mini", "gen_ai.usage.input_tokens": 10,
                    "gen_ai.usage.output_tokens": 5, "gen_ai.usage.cost": 0.5}):
                pass  # its own recorded cost is taken as it is
            oi_call("not-a-listed-model")

        support()
        triage()
        spans = finished(exporter)
    finally:
        tracescore.shutdown(2000)
    # the foreign spans keep what their instrumentation wrote (no second copy of the usage);
    # the cost is added at export where they have none, on the innermost span of a call only
    client = [s for s in spans if s.name == "ChatCompletion"]
    assert len(client) == 4
    assert all(s.attributes["llm.token_count.prompt"] == 1000 for s in client)
    assert all("gen_ai.usage.input_tokens" not in s.attributes for s in client)
    assert [s.attributes.get("llm.model_name") for s in client] == [
        "gpt-4o-mini-2024-07-18", "gpt-4o-mini", "gpt-4o-mini", "not-a-listed-model"]
    costs = [s.attributes.get("gen_ai.usage.cost") for s in client]
    assert costs == [pytest.approx(240e-6)] * 3 + [None]
    assert [s.attributes.get("llm.cost.total") for s in client] == costs
    assert client[0].attributes["llm.cost.prompt"] == pytest.approx(120e-6)
    by_name = {s.name: s.attributes for s in spans}
    assert "gen_ai.usage.cost" not in by_name["ChatOpenAI"]  # wraps the client's span
    wrapper = by_name["chat test_other_instrumentations_model_calls_count_once_per_agent"
                      ".<locals>.wrapped"]
    assert wrapper["gen_ai.usage.input_tokens"] == 1000
    assert not [k for k in wrapper if "cost" in k]  # its cost is on the SDK call's span
    genai_attrs = by_name["chat gpt-4o-mini"]
    assert genai_attrs["gen_ai.usage.cost"] == 0.5  # its own, left as it was
    assert "llm.cost.total" not in genai_attrs
    cost: dict[str, float] = {}
    for attributes, value in points(reader, "tracescore.llm.cost"):
        agent = attributes["gen_ai.agent.name"]
        cost[agent] = cost.get(agent, 0.0) + value
    assert cost == {"support-bot": pytest.approx(480e-6), "triage": pytest.approx(240e-6 + 0.5)}
    inputs: dict[str, int] = {}
    for attributes, value in points(reader, "gen_ai.client.token.usage"):
        if attributes["gen_ai.token.type"] == "input":
            agent = attributes["gen_ai.agent.name"]
            inputs[agent] = inputs.get(agent, 0) + int(value)
    # support-bot: two calls; triage: the wrapped one, the GenAI one and the unlisted model
    assert inputs == {"support-bot": 2000, "triage": 1000 + 10 + 1000}
    unpriced = [(a["gen_ai.agent.name"], a["gen_ai.response.model"], v)
                for a, v in points(reader, "tracescore.llm.unpriced")]
    assert unpriced == [("triage", "not-a-listed-model", 1)]


def test_a_local_runtime_counts_other_instrumentations_calls_in_its_own_metrics(
        reader: Any) -> None:
    """Another instrumentation's model call ended on a local runtime's provider is counted
    in that runtime's metrics, under the agent it ran in, and not in configure()'s."""
    from tracescore.testing import local_runtime

    _, _exporter = memory_configure(
        output=tracescore.OutputOptions(meter_provider=MeterProvider(metric_readers=[reader])))
    own = InMemoryMetricReader()
    local = local_runtime(output=tracescore.OutputOptions(
        meter_provider=MeterProvider(metric_readers=[own])))
    try:
        oi = local.tracer_provider.get_tracer("openinference.instrumentation.openai")

        @tracescore.agent(name="local-bot")
        def bot() -> None:
            with oi.start_as_current_span("ChatCompletion", attributes={
                    "openinference.span.kind": "LLM", "llm.model_name": "gpt-4o-mini",
                    "llm.token_count.prompt": 1000, "llm.token_count.completion": 200}):
                pass

        with local.activate():
            bot()
        assert local.force_flush()
        tracescore.force_flush(5000)
        counted = [(a["gen_ai.agent.name"], a["gen_ai.token.type"], int(v))
                   for a, v in points(own, "gen_ai.client.token.usage")]
        assert sorted(counted) == [("local-bot", "input", 1000), ("local-bot", "output", 200)]
        assert [v for _, v in points(own, "tracescore.llm.cost")] == [pytest.approx(270e-6)]
        assert points(reader, "gen_ai.client.token.usage") == []
    finally:
        local.shutdown()
        tracescore.shutdown(2000)
