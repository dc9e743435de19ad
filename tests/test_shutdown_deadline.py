"""``force_flush()`` then ``shutdown()`` against a hung backend waits one deadline, not two
(issue 10, item 8).

Asserted on the deadline each step hands down (recorded at the processor), never on wall time.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

import tracescore


class HungExporter(SpanExporter):
    """An exporter whose backend does not answer until ``release`` is set."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.entered = threading.Event()

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.entered.set()
        self.release.wait(60)
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        self.release.set()


@pytest.fixture
def hung() -> Iterator[tuple[HungExporter, list[list[Any]]]]:
    exporter = HungExporter()
    # A long default deadline: the shutdown's must visibly be the short one, not this.
    inst = tracescore.configure(exporter=exporter,
                                limits=tracescore.LimitsOptions(flush_timeout=30))
    processor = inst.processor
    calls: list[list[Any]] = []
    original = processor.force_flush

    def recording(timeout_millis: float = 30_000) -> bool:
        entry: list[Any] = [timeout_millis]
        calls.append(entry)
        result = original(timeout_millis)
        entry.append(result)
        return result

    # shutdown() flushes through this attribute: each step's deadline is recorded.
    processor.force_flush = recording  # type: ignore[method-assign]

    @tracescore.agent
    def answer(q: str) -> str:
        return "a"

    answer("q")
    try:
        yield exporter, calls
    finally:
        exporter.release.set()
        tracescore.shutdown(5000)


def test_shutdown_after_a_flush_that_timed_out_gets_the_short_deadline(
    hung: tuple[HungExporter, list[list[Any]]],
) -> None:
    exporter, calls = hung
    assert tracescore.force_flush(300) is False  # the backend hangs: the flush misses
    assert exporter.entered.is_set()
    tracescore.shutdown()  # no deadline given: flush_timeout (30 s) before the fix
    assert calls[0] == [300, False]
    (shutdown_flush,) = calls[1:]
    assert shutdown_flush[0] <= 1000  # one second, as after the exit hook's missed flush


def test_shutdown_after_the_backend_came_back_gets_its_whole_deadline(
    hung: tuple[HungExporter, list[list[Any]]],
) -> None:
    exporter, calls = hung
    assert tracescore.force_flush(300) is False
    exporter.release.set()  # the backend answers again
    assert tracescore.force_flush(10_000) is True
    tracescore.shutdown()
    assert [c[0] for c in calls] == [300, 10_000, 30_000]


def test_a_span_is_exported_once_when_the_routing_thread_cannot_start(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The routing thread cannot start (at interpreter shutdown, or at the thread limit): the
    span is exported by its caller, once, and the spans after it reach the exporter."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    tracescore.configure(tracer_provider=provider, exporter=exporter)
    tracer = provider.get_tracer("other.instrumentation")
    start = threading.Thread.start
    refuse = [True]

    def refusing_start(self: threading.Thread) -> None:
        if self.name == "tracescore-route" and refuse[0]:
            raise RuntimeError("can't create new thread at interpreter shutdown")
        start(self)

    monkeypatch.setattr(threading.Thread, "start", refusing_start)
    try:
        with tracer.start_as_current_span("first"):
            pass
        refuse[0] = False
        for i in range(5):
            with tracer.start_as_current_span(f"later{i}"):
                pass
        assert tracescore.force_flush(5_000)
        names = [s.name for s in exporter.get_finished_spans()]
    finally:
        tracescore.shutdown(5_000)
    assert names.count("first") == 1
    assert sorted(n for n in names if n.startswith("later")) == [f"later{i}" for i in range(5)]
