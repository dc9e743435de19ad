"""Export durability: nothing lost while the backend is down, batches that fit the backend's
limits, and counters that agree with what the backend received.

Backends are real OTLP receivers on loopback (``tests/otlp_receiver.py``), stopped and started
again on the same port; synchronisation is ``force_flush`` (which returns when the export thread
settled everything it was asked to), never a sleep.
"""

from __future__ import annotations

import json
import random
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (
    OTLPSpanExporter as GrpcExporter,
)
from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
    OTLPSpanExporter as HttpExporter,
)
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Link, SpanKind, Status, StatusCode

import tracescore
from tests.helpers import ProbeScorer
from tests.otlp_receiver import GrpcOtlpReceiver, HttpOtlpReceiver

NO_DROPS = {"queue_full": 0, "export_failed": 0, "too_large": 0, "shutdown": 0}
HANG_BOUND = 30.0  # generous: only a hang reaches it


@pytest.fixture(autouse=True)
def _shut_down() -> Iterator[None]:
    yield
    tracescore.shutdown(5000)


def _http_exporter(port: int) -> HttpExporter:
    # A short exporter timeout: against a closed port each export gives up within a second
    # instead of the SDK's 10 s of retries.
    return HttpExporter(endpoint=f"http://127.0.0.1:{port}/v1/traces", timeout=1)


def _produce(names: Sequence[str], size: int = 0) -> None:
    @tracescore.tool(name="step")
    def step(name: str, payload: str) -> str:
        return name

    for name in names:
        step(name, "x" * size)


def _names(received: Any) -> list[str]:
    with received.lock:
        return [json.loads(s.attributes["input.value"])["name"] for s in received.spans]


def _metric_points(reader: InMemoryMetricReader, name: str) -> dict[str, int]:
    out: dict[str, int] = {}
    data = reader.get_metrics_data()
    for rm in data.resource_metrics if data else ():
        for sm in rm.scope_metrics:
            for metric in sm.metrics:
                if metric.name == name:
                    for point in metric.data.data_points:
                        key = str(point.attributes.get("tracescore.drop.reason", ""))
                        out[key] = out.get(key, 0) + int(point.value)
    return out


# --- 1. Backend outage ----------------------------------------------------------------------


def test_outage_loses_nothing_and_replays_in_order(tmp_path: Path) -> None:
    reader = InMemoryMetricReader()
    first = HttpOtlpReceiver()
    port = first.port
    with first:
        tracescore.configure(exporter=_http_exporter(port),
                             export=tracescore.ExportOptions(retry_dir=str(tmp_path)),
                             output=tracescore.OutputOptions(
                                 meter_provider=MeterProvider(metric_readers=[reader])))
        _produce([f"before-{i}" for i in range(20)])
        assert tracescore.force_flush(10_000)
    # The backend is gone: what ends now waits on disk.
    during = [f"during-{i}" for i in range(300)]
    _produce(during[:150])
    assert not tracescore.force_flush(10_000)
    _produce(during[150:])
    assert not tracescore.force_flush(10_000)
    spooled = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert spooled, "failed batches are kept on disk"
    stats = tracescore.stats()
    assert stats.spans_exported == 20
    assert stats.spans_dropped == NO_DROPS

    with HttpOtlpReceiver(port=port) as second:
        _produce(["after-0"])
        assert tracescore.force_flush(10_000)
        names = _names(second.received)
    # Every span arrived once, the spooled ones first and in the order they ended.
    assert names == [*during, "after-0"]
    assert _names(first.received) == [f"before-{i}" for i in range(20)]
    stats = tracescore.stats()
    assert stats.spans_exported == 20 + 301
    assert stats.spans_dropped == NO_DROPS
    assert not [p for p in tmp_path.rglob("*") if p.is_file()], "replayed batches are removed"
    assert _metric_points(reader, "tracescore.spans.exported") == {"": 321}
    assert _metric_points(reader, "tracescore.spans.dropped") == {}


def test_counters_match_the_receiver_when_retry_is_off() -> None:
    reader = InMemoryMetricReader()
    first = HttpOtlpReceiver()
    with first:
        tracescore.configure(exporter=_http_exporter(first.port),
                             export=tracescore.ExportOptions(retry=False),
                             output=tracescore.OutputOptions(
                                 meter_provider=MeterProvider(metric_readers=[reader])))
        _produce([f"a{i}" for i in range(30)])
        assert tracescore.force_flush(10_000)
    _produce([f"b{i}" for i in range(40)])
    assert not tracescore.force_flush(10_000)
    stats = tracescore.stats()
    assert stats.spans_exported == len(first.received.spans) == 30
    assert stats.spans_dropped == {**NO_DROPS, "export_failed": 40}
    assert _metric_points(reader, "tracescore.spans.exported") == {"": 30}
    assert _metric_points(reader, "tracescore.spans.dropped") == {"export_failed": 40}


def test_retry_spool_is_bounded_by_age(tmp_path: Path) -> None:
    first = HttpOtlpReceiver()
    port = first.port
    with first:
        tracescore.configure(exporter=_http_exporter(port),
                             export=tracescore.ExportOptions(retry_dir=str(tmp_path),
                                                             retry_max_age=1e-6))
        _produce(["a"])
        assert tracescore.force_flush(10_000)
    _produce([f"old{i}" for i in range(25)])
    assert not tracescore.force_flush(10_000)
    with HttpOtlpReceiver(port=port) as second:
        _produce(["fresh"])
        assert tracescore.force_flush(10_000)
        assert _names(second.received) == ["fresh"]
    stats = tracescore.stats()
    assert stats.spans_exported == 2
    assert stats.spans_dropped == {**NO_DROPS, "export_failed": 25}


def test_retry_spool_is_bounded_by_bytes_and_keeps_the_newest(tmp_path: Path) -> None:
    first = HttpOtlpReceiver()
    port = first.port
    with first:
        # Room for one batch of these spans on disk (~20 KB compressed each), not two.
        tracescore.configure(exporter=_http_exporter(port),
                             export=tracescore.ExportOptions(retry_dir=str(tmp_path),
                                                             retry_max_bytes=30_000))
        tracescore.force_flush(1000)
    rng = random.Random(7)
    rounds = [[f"r{r}-{i}-{rng.randbytes(1000).hex()}" for i in range(20)] for r in range(3)]
    for names in rounds:
        _produce(names)
        assert not tracescore.force_flush(10_000)
    with HttpOtlpReceiver(port=port) as second:
        assert tracescore.force_flush(10_000)
        got = _names(second.received)
    stats = tracescore.stats()
    every = [name for names in rounds for name in names]
    # The oldest batches made room: what arrives is the newest stretch, unbroken, in order.
    assert 0 < len(got) < len(every)
    assert got == every[-len(got):]
    assert stats.spans_exported == len(got)
    assert stats.spans_dropped == {**NO_DROPS, "export_failed": len(every) - len(got)}


def test_shutdown_counts_what_is_still_waiting_and_removes_the_spool(tmp_path: Path) -> None:
    first = HttpOtlpReceiver()
    with first:
        inst = tracescore.configure(exporter=_http_exporter(first.port),
                                    export=tracescore.ExportOptions(retry_dir=str(tmp_path)))
        _produce(["x"])
        assert tracescore.force_flush(10_000)
    _produce([f"y{i}" for i in range(15)])
    assert not tracescore.force_flush(10_000)
    assert [p for p in tmp_path.rglob("*") if p.is_file()]
    tracescore.shutdown(10_000)
    # The flush missed its deadline, so the shutdown gets one second: the export thread may
    # still be inside the exporter's own retries then, and counts what it drops when it
    # returns (the first span of a batch wakes it, so it is often mid-export here).
    deadline = time.monotonic() + HANG_BOUND
    while inst.stats().spans_dropped["shutdown"] < 15 and time.monotonic() < deadline:
        time.sleep(0.02)
    stats = inst.stats()
    assert stats.spans_exported == 1
    assert stats.spans_dropped == {**NO_DROPS, "shutdown": 15}
    assert list(tmp_path.iterdir()) == []


def test_stats_after_shutdown_are_the_final_counts_and_count_spans_ended_after_it() -> None:
    with HttpOtlpReceiver() as receiver:
        provider = TracerProvider(shutdown_on_exit=False)
        tracescore.configure(tracer_provider=provider, exporter=_http_exporter(receiver.port))
        _produce(["a", "b"])
        tracescore.shutdown(10_000)
        # Another instrumentation's spans on the provider go nowhere now, and are counted.
        tracer = provider.get_tracer("another.instrumentation")
        for _ in range(3):
            tracer.start_span("late").end()
        stats = tracescore.stats()
        assert _names(receiver.received) == ["a", "b"]
    assert stats.spans_exported == 2
    assert stats.spans_dropped == {**NO_DROPS, "shutdown": 3}
    tracescore.configure(tracer_provider=TracerProvider(shutdown_on_exit=False),
                         exporter=InMemorySpanExporter())
    assert tracescore.stats().spans_exported == 0  # a new configuration counts from zero


# --- 2. Bursts --------------------------------------------------------------------------------


class _GatedExporter(SpanExporter):
    """Accepts batches only once ``gate`` is set: a backend that stalls."""

    def __init__(self) -> None:
        self.gate = threading.Event()
        self.entered = threading.Event()
        self.spans: list[ReadableSpan] = []

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.entered.set()
        self.gate.wait(HANG_BOUND)
        self.spans.extend(spans)
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        self.gate.set()


def test_queue_is_bounded_by_bytes_and_every_drop_is_counted() -> None:
    exporter = _GatedExporter()
    reader = InMemoryMetricReader()
    tracescore.configure(exporter=exporter, export=tracescore.ExportOptions(queue_bytes=200_000),
                         output=tracescore.OutputOptions(
                             meter_provider=MeterProvider(metric_readers=[reader])))
    threads = [threading.Thread(target=_produce, args=([f"t{t}-{i}" for i in range(100)], 2000))
               for t in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(HANG_BOUND)
    exporter.gate.set()
    assert tracescore.force_flush(10_000)
    stats = tracescore.stats()
    assert stats.spans_dropped["queue_full"] > 0
    assert stats.spans_exported == len(exporter.spans)
    assert stats.spans_exported + stats.spans_dropped["queue_full"] == 800
    assert _metric_points(reader, "tracescore.spans.dropped") == {
        "queue_full": stats.spans_dropped["queue_full"]}


def test_flush_honours_its_deadline_with_a_stalled_exporter() -> None:
    exporter = _GatedExporter()
    tracescore.configure(exporter=exporter)
    _produce(["a"])
    results: list[bool] = []
    flusher = threading.Thread(target=lambda: results.append(tracescore.force_flush(200)))
    flusher.start()
    flusher.join(HANG_BOUND)
    # It returned while the exporter was still stalled (the gate opens only now).
    assert results == [False]
    exporter.gate.set()
    assert tracescore.force_flush(10_000)
    assert [s.name for s in exporter.spans] == ["execute_tool step"]


# --- 3. Large batches -------------------------------------------------------------------------


def test_a_thousand_fat_spans_reach_a_grpc_backend() -> None:
    # 12 KB in, 12 KB out per span: 24 MB in all, far over gRPC's 4 MiB message limit, which
    # the receiver (like the Collector) enforces by default.
    with GrpcOtlpReceiver() as receiver:
        tracescore.configure(exporter=GrpcExporter(endpoint=f"127.0.0.1:{receiver.port}",
                                                   insecure=True, timeout=10))

        @tracescore.tool(name="fat")
        def fat(i: int, text: str) -> str:
            return text

        for i in range(1000):
            fat(i, f"{i:05d}" + "y" * 12_000)
        assert tracescore.force_flush(60_000)
        with receiver.received.lock:
            sizes = [len(r) for r in receiver.received.requests]
            count = len(receiver.received.spans)
    assert count == 1000
    assert len(sizes) > 1 and max(sizes) <= 4 * 1024 * 1024
    stats = tracescore.stats()
    assert stats.spans_exported == 1000
    assert stats.spans_dropped == NO_DROPS


def test_a_span_larger_than_a_request_is_cut_and_says_so() -> None:
    with HttpOtlpReceiver() as receiver:
        tracescore.configure(exporter=_http_exporter(receiver.port),
                             export=tracescore.ExportOptions(batch_bytes=64 * 1024),
                             content=tracescore.ContentOptions(max_length=1_000_000))
        _produce(["small"])
        _produce(["huge"], size=300_000)
        assert tracescore.force_flush(10_000)
        with receiver.received.lock:
            spans = list(receiver.received.spans)
            sizes = [len(r) for r in receiver.received.requests]
    assert max(sizes) <= 64 * 1024
    (cut,) = [s for s in spans if "tracescore.export.truncated" in s.attributes]
    (whole,) = [s for s in spans if "tracescore.export.truncated" not in s.attributes]
    assert json.loads(whole.attributes["input.value"])["name"] == "small"
    assert cut.attributes["tracescore.export.truncated"] is True
    assert '"huge"' in cut.attributes["input.value"][:40]
    assert 1000 < len(cut.attributes["input.value"]) < 64 * 1024
    assert tracescore.stats().spans_dropped == NO_DROPS


def test_retrieval_content_is_written_once() -> None:
    exporter = InMemorySpanExporter()
    tracescore.configure(exporter=exporter)

    @tracescore.retrieval(name="kb")
    def search(query: str) -> list[dict[str, Any]]:
        return [{"id": "d1", "score": 0.5, "content": "the unique passage"}]

    search("q")
    assert tracescore.force_flush(5000)
    (span,) = exporter.get_finished_spans()
    carrying = [k for k, v in span.attributes.items()
                if isinstance(v, str) and "the unique passage" in v]
    assert carrying == ["gen_ai.retrieval.documents"]
    assert span.attributes["retrieval.documents.0.document.id"] == "d1"


# --- Sizes and the spool's encoding -----------------------------------------------------------


def _spans() -> list[ReadableSpan]:
    provider = TracerProvider(resource=Resource({"service.name": "svc", "k": "v" * 50}))
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    memory = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("scope", "1.2")
    with tracer.start_as_current_span("root", kind=SpanKind.SERVER) as root:
        root.set_attribute("text", "héllo wörld " * 500)
        root.set_attribute("n", 12345678901)
        root.set_attribute("f", 0.25)
        root.set_attribute("flag", True)
        root.set_attribute("list", ["a", "bb", "ccc"])
        root.add_event("evt", {"e": "x" * 300, "i": 3})
        root.set_status(Status(StatusCode.ERROR, "broke"))
        with tracer.start_as_current_span(
                "child", links=[Link(root.get_span_context(), {"l": "y"})]) as child:
            child.set_attribute("emoji", "😀" * 100)
    tracer.start_span("bare").end()
    provider.shutdown()
    return list(memory.get_finished_spans())


def test_size_bound_is_never_below_the_encoded_size() -> None:
    from tracescore._export.size import envelope_size, span_size

    for span in _spans():
        encoded = encode_spans([span]).ByteSize()
        bound = span_size(span) + envelope_size(span)
        assert encoded <= bound, span.name
    root = [s for s in _spans() if s.name == "root"][0]
    # Tight where it matters: a span that is mostly text.
    assert span_size(root) + envelope_size(root) < encode_spans([root]).ByteSize() * 1.1


def test_spool_encoding_round_trips_what_otlp_carries() -> None:
    from tracescore._export import codec

    spans = _spans()
    again = codec.decode(codec.encode(spans))
    assert encode_spans(again) == encode_spans(spans)


def test_spans_ended_on_many_threads_arrive_once_each_in_the_order_each_thread_ended_them() -> \
        None:
    # Six threads hand their spans to the routing thread, which puts them on the export
    # queue; with two spans a batch the export thread is woken for nearly every pair while
    # the threads keep ending spans. Nothing may be lost, doubled or reordered within a
    # thread.
    memory, provider = InMemorySpanExporter(), TracerProvider()
    tracescore.configure(exporter=memory, tracer_provider=provider,
                         export=tracescore.ExportOptions(max_batch_spans=2))
    tracer = provider.get_tracer("acme")

    def produce(t: int) -> None:
        for i in range(500):
            tracer.start_span(f"t{t}", attributes={"i": i}).end()

    threads = [threading.Thread(target=produce, args=(t,)) for t in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(HANG_BOUND)
    assert tracescore.force_flush(10_000)
    by_thread: dict[str, list[int]] = {}
    for span in memory.get_finished_spans():
        by_thread.setdefault(span.name, []).append(span.attributes["i"])
    assert by_thread == {f"t{t}": list(range(500)) for t in range(6)}
    stats = tracescore.stats()
    assert stats.spans_exported == 3000
    assert stats.spans_dropped == NO_DROPS


def test_a_flush_while_other_threads_keep_ending_spans_returns_once_what_ended_before_is_out(
) -> None:
    # The routing thread never runs out of work here. A flush waits for what ended before it,
    # not for the queue to be empty, which never happens under a steady stream of spans (it
    # used to wait out its whole deadline and return False).
    memory, provider = InMemorySpanExporter(), TracerProvider()
    tracescore.configure(exporter=memory, tracer_provider=provider)
    tracer = provider.get_tracer("acme")
    stop, running = threading.Event(), threading.Event()

    def produce() -> None:
        n = 0
        while not stop.is_set():
            tracer.start_span("background").end()
            n += 1
            if n == 200:
                running.set()

    threads = [threading.Thread(target=produce) for _ in range(3)]
    for thread in threads:
        thread.start()
    try:
        assert running.wait(HANG_BOUND)
        for round_ in range(3):
            tracer.start_span(f"marker-{round_}").end()
            assert tracescore.force_flush(10_000)
            assert f"marker-{round_}" in {span.name for span in memory.get_finished_spans()}
            assert tracescore.stats().spans_dropped == NO_DROPS
    finally:
        stop.set()
        for thread in threads:
            thread.join(HANG_BOUND)


def test_a_flush_while_scored_calls_keep_coming_waits_for_the_scores_of_what_ended_before() -> \
        None:
    # The engine always has jobs here (a slow scorer, a small queue, calls without pause). A
    # flush waits for the jobs of the spans that ended before it and exports those spans with
    # their scores; it used to wait for an empty engine, which never came, and at its deadline
    # exported every held span, later ones too, without their scores.
    memory, provider = InMemorySpanExporter(), TracerProvider()
    tracescore.configure(exporter=memory, tracer_provider=provider,
                         limits=tracescore.LimitsOptions(max_queue_size=16, max_concurrency=4),
                         scoring=[tracescore.ScoringRule(scorer=ProbeScorer(delay=0.05))])

    @tracescore.agent(name="answer")
    def answer(question: str) -> str:
        return "an answer"

    stop, running = threading.Event(), threading.Event()

    def call() -> None:
        n = 0
        while not stop.is_set():
            answer("q")
            n += 1
            if n == 100:
                running.set()

    threads = [threading.Thread(target=call) for _ in range(3)]
    for thread in threads:
        thread.start()
    try:
        assert running.wait(HANG_BOUND)
        for _ in range(3):
            assert tracescore.force_flush(10_000)
            assert tracescore.stats().deadline_exports == 0
    finally:
        stop.set()
        for thread in threads:
            thread.join(HANG_BOUND)
    scored = [s for s in memory.get_finished_spans() if s.name == "invoke_agent answer"
              and any(e.name == "gen_ai.evaluation.result" for e in s.events)]
    assert scored
