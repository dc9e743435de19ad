"""The trace buffer: bounded by traces, bytes and items per trace; every eviction counted."""

from __future__ import annotations

import functools
import tracemalloc
from dataclasses import dataclass
from typing import Any

import pytest
from opentelemetry import trace

import tracescore
from tests.helpers import ProbeScorer, finished, memory_configure
from tracescore._pipeline import processor as _processor
from tracescore._pipeline.trace_buffer import TraceBuffer


@pytest.fixture(autouse=True)
def _cleanup() -> Any:
    yield
    tracescore.shutdown(2000)


def test_fifty_thousand_traces_with_documents_stay_bounded_and_evictions_are_counted() -> None:
    buffer = TraceBuffer()  # defaults: 10,000 traces, 64 MiB
    document = "d" * 1_000
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for trace_id in range(1, 50_001):
            buffer.add_documents(trace_id, trace_id, (document,))
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert len(buffer) == buffer.max_traces == 10_000
    assert buffer.evictions == {"traces": 40_000}
    # The documents share one string; what grows is the per-trace bookkeeping, bounded by the
    # trace count: about 10,000 x a few hundred bytes, far from 50,000 x anything.
    assert held < 20 * 1024 * 1024
    # The newest traces are the ones kept.
    assert buffer.documents(50_000) == (document,)
    assert buffer.documents(1) == ()


def test_bytes_bound_evicts_the_oldest_traces() -> None:
    buffer = TraceBuffer(max_traces=1_000_000, max_bytes=100_000)
    for trace_id in range(1, 1_001):
        buffer.add_documents(trace_id, 0, ("x" * 1_000,))
    assert buffer.size_bytes <= 100_000
    assert buffer.evictions["bytes"] == 1_000 - len(buffer)
    assert 50 < len(buffer) < 100
    assert buffer.documents(1_000) == ("x" * 1_000,)


def test_items_per_trace_keep_the_latest_and_are_counted() -> None:
    buffer = TraceBuffer(max_items_per_trace=3)
    for i in range(5):
        buffer.add_documents(7, i, (f"doc {i}",))
    assert buffer.documents(7) == ("doc 2", "doc 3", "doc 4")
    assert buffer.evictions == {"items_per_trace": 2}


def test_a_huge_tool_result_is_estimated_without_serialising_it() -> None:
    buffer = TraceBuffer(max_bytes=10_000_000)
    buffer.add_tool_call(1, 2, 0, {"name": "t", "arguments": {}, "result": ["x" * 10] * 1_000_000})
    # Estimated from a sample: ~60 bytes x 1,000,000 items, so it does not fit and the bytes
    # bound would evict it as soon as another trace arrives.
    assert buffer.size_bytes > 10_000_000
    buffer.add_tool_call(3, 4, 0, {"name": "t", "arguments": {}, "result": None})
    assert buffer.evictions["bytes"] == 1
    assert buffer.tool_calls_under(1, 2) == ()


def test_ending_the_local_root_frees_its_trace() -> None:
    buffer = TraceBuffer()
    buffer.add_documents(9, 0, ("abc",))
    assert buffer.size_bytes > 0
    buffer.end_trace(9)
    assert len(buffer) == 0 and buffer.size_bytes == 0


def test_evictions_reach_stats(monkeypatch: pytest.MonkeyPatch) -> None:
    @dataclass
    class ContextProbe(ProbeScorer):
        uses_context: bool = True

    monkeypatch.setattr(_processor, "TraceBuffer", functools.partial(TraceBuffer, max_traces=5))
    inst, exp = memory_configure(scoring=[tracescore.ScoringRule(
        scorer=ContextProbe(id="ctx"), on="agent")])
    tracer = inst.tracer_provider.get_tracer("test")

    @tracescore.retrieval
    def search(q: str) -> list[str]:
        return ["doc"]

    roots = []
    for _ in range(12):  # twelve traces whose roots are still open: their documents wait
        root = tracer.start_span("request")
        roots.append(root)
        with trace.use_span(root, end_on_exit=False):
            search("q")
    finished(exp)
    assert tracescore.stats().trace_buffer_evictions == 7
    for root in roots:
        root.end()


# -- what ended beneath a span ---------------------------------------------------------------------


@dataclass
class _Call:
    name: str
    start_time: int
    end_time: int


def test_beneath_passes_kinds_and_the_innermost_model_calls_up_the_tree() -> None:
    buffer = TraceBuffer()
    # root(1) > agent(2) > wrapper llm(3) > client llm(4); agent(2) > llm(5) later
    inner, later = _Call("chat", 10, 11), _Call("chat", 20, 21)
    buffer.pass_up(7, 3, "llm", buffer.beneath(7, 4), inner)
    below_wrapper = buffer.beneath(7, 3)
    assert below_wrapper.kinds == {"llm"} and below_wrapper.first_call is inner
    buffer.pass_up(7, 2, "llm", below_wrapper, _Call("predict", 9, 12))  # wraps: passes `inner`
    buffer.pass_up(7, 2, "llm", buffer.beneath(7, 5), later)
    below_agent = buffer.beneath(7, 2)
    assert below_agent.kinds == {"llm"}
    assert (below_agent.first_call, below_agent.last_call) == (inner, later)
    buffer.pass_up(7, 1, "agent", below_agent)
    below_root = buffer.beneath(7, 1)
    assert below_root.kinds == {"llm", "agent"} and below_root.last_call is later
    assert buffer.beneath(7, 1).kinds == frozenset()  # asked once, then forgotten
    assert buffer.size_bytes == 0


def test_beneath_entries_are_bounded_and_go_with_their_trace() -> None:
    buffer = TraceBuffer(max_bytes=1_000_000)
    for parent in range(20_000):  # a root whose children never end: bounded per trace
        buffer.pass_up(9, parent, "tool", buffer.beneath(9, 100_000 + parent))
    assert buffer.evictions["items_per_trace"] == 20_000 - 10_000
    buffer.end_trace(9)
    assert buffer.size_bytes == 0 and len(buffer) == 0
