"""Streams: a generator's span is the child of the span current when the generator function
was called, however late and wherever it is consumed (issue 10, item 7)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

import tracescore
from tests.helpers import finished, memory_configure


@pytest.fixture
def exporter() -> Any:
    _, exp = memory_configure(service_name="streams")
    yield exp
    tracescore.shutdown(2000)


def _one(spans: list[Any], prefix: str) -> Any:
    (span,) = [s for s in spans if s.name.startswith(prefix)]
    return span


def test_stream_consumed_after_the_agent_returned_is_its_child(exporter: Any) -> None:
    @tracescore.llm(name="stream")
    def stream(n: int) -> Iterator[str]:
        for i in range(n):
            yield f"t{i}"

    @tracescore.agent
    def answer(question: str) -> Iterator[str]:
        return stream(3)  # the caller consumes it after answer() returned

    tokens = answer("q")
    assert [s.name for s in finished(exporter)] == ["invoke_agent " + answer.__qualname__]
    assert list(tokens) == ["t0", "t1", "t2"]

    spans = finished(exporter)
    agent, llm = _one(spans, "invoke_agent"), _one(spans, "chat")
    assert llm.context.trace_id == agent.context.trace_id
    assert llm.parent is not None and llm.parent.span_id == agent.context.span_id
    assert json.loads(llm.attributes["output.value"]) == "t0t1t2"


def test_stream_consumed_inside_another_span_keeps_its_caller(exporter: Any) -> None:
    @tracescore.llm(name="stream")
    def stream() -> Iterator[str]:
        yield "a"
        yield "b"

    @tracescore.tool(name="lookup")
    def lookup() -> str:
        return "x"

    @tracescore.agent(name="producer")
    def producer() -> Iterator[str]:
        return stream()

    @tracescore.agent(name="consumer")
    def consumer(tokens: Iterator[str]) -> list[str]:
        return list(tokens)

    assert consumer(producer()) == ["a", "b"]
    spans = finished(exporter)
    made_by, eaten_by = _one(spans, "invoke_agent producer"), _one(spans, "invoke_agent consumer")
    llm = _one(spans, "chat")
    assert made_by.context.trace_id != eaten_by.context.trace_id  # two root calls
    assert llm.context.trace_id == made_by.context.trace_id
    assert llm.parent is not None and llm.parent.span_id == made_by.context.span_id


def test_spans_inside_a_late_stream_are_children_of_the_stream(exporter: Any) -> None:
    @tracescore.tool(name="lookup")
    def lookup(i: int) -> int:
        return i

    @tracescore.llm(name="stream")
    def stream() -> Iterator[int]:
        for i in range(2):
            yield lookup(i)

    @tracescore.agent(name="answer")
    def answer() -> Iterator[int]:
        return stream()

    assert list(answer()) == [0, 1]
    spans = finished(exporter)
    agent, llm = _one(spans, "invoke_agent"), _one(spans, "chat")
    tools = [s for s in spans if s.name.startswith("execute_tool")]
    assert llm.parent is not None and llm.parent.span_id == agent.context.span_id
    assert len(tools) == 2
    assert all(t.parent is not None and t.parent.span_id == llm.context.span_id for t in tools)
    assert {t.context.trace_id for t in tools} == {agent.context.trace_id}


def test_a_stream_never_iterated_leaves_no_open_span(exporter: Any) -> None:
    # The span starts with the iteration: a generator dropped unstarted ends nothing and
    # leaves nothing open (a span started at the call could never end).
    @tracescore.llm(name="stream")
    def stream() -> Iterator[int]:
        yield 1

    @tracescore.agent(name="answer")
    def answer() -> Iterator[int]:
        return stream()

    gen = answer()
    del gen
    assert [s.name for s in finished(exporter)] == ["invoke_agent answer"]


def test_async_stream_consumed_after_the_agent_returned_is_its_child(exporter: Any) -> None:
    @tracescore.llm(name="stream")
    async def stream(n: int) -> AsyncIterator[str]:
        for i in range(n):
            await asyncio.sleep(0)  # yield to the loop between tokens, as a real stream does
            yield f"t{i}"

    @tracescore.agent(name="answer")
    async def answer() -> AsyncIterator[str]:
        return stream(3)

    @tracescore.agent(name="consumer")
    async def consumer() -> list[str]:
        tokens = await answer()
        return [t async for t in tokens]

    assert asyncio.run(consumer()) == ["t0", "t1", "t2"]
    spans = finished(exporter)
    agent, outer = _one(spans, "invoke_agent answer"), _one(spans, "invoke_agent consumer")
    llm = _one(spans, "chat")
    assert agent.parent is not None and agent.parent.span_id == outer.context.span_id
    assert llm.parent is not None and llm.parent.span_id == agent.context.span_id
    assert llm.context.trace_id == agent.context.trace_id
    assert json.loads(llm.attributes["output.value"]) == "t0t1t2"


def test_async_stream_consumed_in_another_task_keeps_its_caller(exporter: Any) -> None:
    @tracescore.llm(name="stream")
    async def stream() -> AsyncIterator[str]:
        yield "a"
        yield "b"

    @tracescore.agent(name="producer")
    async def producer() -> AsyncIterator[str]:
        return stream()

    async def main() -> list[str]:
        tokens = await producer()

        async def drain() -> list[str]:
            return [t async for t in tokens]

        # A separate task starts from a copy of the context current here: no span at all.
        return await asyncio.create_task(drain())

    assert asyncio.run(main()) == ["a", "b"]
    spans = finished(exporter)
    agent, llm = _one(spans, "invoke_agent producer"), _one(spans, "chat")
    assert llm.parent is not None and llm.parent.span_id == agent.context.span_id
    assert llm.context.trace_id == agent.context.trace_id
