"""Adversarial regressions of the scoring engine, the held spans and the trace buffer: each test
reproduces a way the engine redesign lost a span, overran a deadline, blocked a thread, let
memory grow past its bound or miscounted, and pins the fix.

Spans are counted at the export processor (a counting ``SpanProcessor`` behind the scoring
processor), never inferred from tracescore's own counters.
"""

from __future__ import annotations

import asyncio
import collections
import os
import signal
import sys
import threading
import time
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.id_generator import IdGenerator

import tracescore
from tracescore._core import semconv as sc
from tracescore._pipeline.processor import ScoringSpanProcessor
from tracescore._pipeline.trace_buffer import TraceBuffer


class Counting(SpanProcessor):
    """The export processor: counts every span it gets, carriers apart."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.ids: collections.Counter[tuple[int, int]] = collections.Counter()
        self.carriers = 0

    def on_end(self, span: ReadableSpan) -> None:
        with self.lock:
            if (span.attributes or {}).get(sc.TRACESCORE_EVALUATION_CARRIER):
                self.carriers += 1
            else:
                assert span.context is not None
                self.ids[(span.context.trace_id, span.context.span_id)] += 1

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return True


class Result:
    score = 0.5
    reason = "ok"
    judge_model = None


class Scorer:
    """A scorer calling ``hook(**kwargs)`` (sync or async) before it scores."""

    uses_judge = False
    uses_context = False
    uses_tool_calls = False
    requires_ground_truth = False
    higher_is_better = True
    scale = 1.0

    def __init__(self, hook: Any = None, id: str = "probe") -> None:
        self.hook = hook
        self.id = id

    async def arun(self, **kwargs: Any) -> Result:
        if self.hook is not None:
            ran = self.hook(**kwargs)
            if asyncio.iscoroutine(ran):
                await ran
        return Result()


def make(scorer: Any, **kw: Any) -> tuple[ScoringSpanProcessor, Any, Counting]:
    rule_kw = {k: kw.pop(k) for k in ("inputs", "max_per_minute") if k in kw}
    rule = tracescore.ScoringRule(scorer=scorer, on=lambda s: True, **rule_kw).compile()
    down = Counting()
    kw.setdefault("score_timeout", 10.0)
    kw.setdefault("max_concurrency", 4)
    kw.setdefault("max_queue_size", 1000)
    kw.setdefault("flush_timeout", 5.0)
    processor = ScoringSpanProcessor(down, [rule], **kw)
    provider = TracerProvider()
    provider.add_span_processor(processor)
    return processor, provider, down


def emit(tracer: Any) -> tuple[int, int]:
    """End one scorable span (it carries ``output.value``); its ids."""
    with tracer.start_as_current_span("s", attributes={sc.INPUT_VALUE: "q",
                                                       sc.OUTPUT_VALUE: "a"}) as span:
        ctx = span.get_span_context()
    return (ctx.trace_id, ctx.span_id)


def wait_for(condition: Any, timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.01)
    return condition()


def accounted(processor: ScoringSpanProcessor) -> int:
    st = processor.stats
    return st.scores_attached + st.scores_late + st.jobs_dropped


# -- flush/shutdown on the loop thread --------

@pytest.mark.parametrize("call", ["shutdown", "force_flush"])
def test_flush_or_shutdown_from_on_score_does_not_stall_the_loop(call: str) -> None:
    box: dict[str, Any] = {}

    def on_score(event: Any) -> None:
        if "took" not in box:
            box["took"] = True
            # A deadline the test cannot outwait: waiting on the loop for jobs only the loop
            # can finish used to take all of it.
            getattr(box["processor"], call)(600_000)
            box["returned"] = True

    gate = threading.Event()

    async def hold(**_: Any) -> None:
        while not gate.is_set():
            await asyncio.sleep(0.005)

    processor, provider, down = make(Scorer(hold), on_score=on_score)
    box["processor"] = processor
    tracer = provider.get_tracer("t")
    produced = {emit(tracer) for _ in range(10)}
    gate.set()
    assert wait_for(lambda: "returned" in box, timeout=60)
    processor.shutdown(2000)
    assert set(down.ids) == produced and max(down.ids.values()) == 1
    assert wait_for(lambda: accounted(processor) == 10)
    assert accounted(processor) == 10  # the calling job is finished, not counted as dropped


def test_shutdown_from_a_scorer_does_not_stall_the_loop() -> None:
    box: dict[str, Any] = {}
    # The first job may start before the last span ended: the scorer waits for all five, so
    # each is scored or counted, none ends after shutdown.
    all_ended = threading.Event()

    def hook(**_: Any) -> None:
        if "took" not in box:
            box["took"] = True
            all_ended.wait(5)
            box["processor"].shutdown(600_000)  # a deadline the test cannot outwait
            box["returned"] = True

    processor, provider, down = make(Scorer(hook), max_concurrency=1)
    box["processor"] = processor
    tracer = provider.get_tracer("t")
    produced = {emit(tracer) for _ in range(5)}
    all_ended.set()
    assert wait_for(lambda: "returned" in box, timeout=60)
    assert wait_for(lambda: set(down.ids) == produced)
    assert max(down.ids.values()) == 1
    assert wait_for(lambda: accounted(processor) == 5)
    assert accounted(processor) == 5


# -- shutdown while a scorer blocks the loop --------

def test_shutdown_keeps_its_deadline_and_counts_jobs_dropped_late() -> None:
    first = threading.Event()
    released = threading.Event()

    async def hook(**_: Any) -> None:
        if not first.is_set():
            first.set()
            released.wait(5)  # blocks the loop: nothing else runs
        await asyncio.sleep(30)

    processor, provider, down = make(Scorer(hook), max_concurrency=5)
    tracer = provider.get_tracer("t")
    produced = {emit(tracer) for _ in range(5)}
    assert first.wait(5)
    processor.shutdown(0)  # returns while the loop is blocked (it used to wait past 0)
    released.set()
    assert set(down.ids) == produced and max(down.ids.values()) == 1
    # The loop stops the jobs once it can; they are counted then, not lost from the counts.
    assert wait_for(lambda: processor.stats.jobs_dropped == 5)


# -- held spans --------

class _SameIds(IdGenerator):
    def generate_span_id(self) -> int:
        return 0xABC

    def generate_trace_id(self) -> int:
        return 0xDEF


def test_two_held_spans_with_the_same_ids_are_both_exported() -> None:
    gate = threading.Event()

    async def hold(**_: Any) -> None:
        while not gate.is_set():
            await asyncio.sleep(0.005)

    processor, _, down = make(Scorer(hold))
    provider = TracerProvider(id_generator=_SameIds())
    provider.add_span_processor(processor)
    tracer = provider.get_tracer("t")
    emit(tracer)
    emit(tracer)
    gate.set()
    assert processor.force_flush(3000)
    assert sum(down.ids.values()) == 2  # one used to be overwritten and never exported
    assert processor.stats.spans_held == 0


def test_refused_jobs_are_counted_when_a_flush_took_the_span_meanwhile() -> None:
    processor, provider, down = make(Scorer())
    engine = processor._engine

    def refuse(jobs: Any) -> bool:
        processor._held.release_all()  # a force_flush() on another thread, right then
        return False

    engine.submit = refuse  # type: ignore[method-assign]
    key = emit(provider.get_tracer("t"))
    assert processor.stats.skipped_queue_full == 1  # once the routing thread routed it
    assert down.ids[key] == 1


def test_an_extractor_raising_a_base_exception_is_a_scoring_error() -> None:
    def extractor(span: Any, call_input: Any) -> Any:
        raise SystemExit(3)

    processor, provider, down = make(Scorer(), inputs={"foo": extractor}, score_timeout=30)
    key = emit(provider.get_tracer("t"))
    # Without an outcome the span waited for its deadline and its score was never written.
    assert wait_for(lambda: down.ids[key] == 1, timeout=3)
    assert processor.stats.scoring_errors == 1
    assert processor.stats.deadline_exports == 0


# -- fork --------

@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork()")
def test_child_does_not_deadlock_on_a_limiter_lock_held_at_fork() -> None:
    processor, provider, down = make(Scorer(), max_per_minute=6000)
    tracer = provider.get_tracer("t")
    limiter = processor._rules[0].rate_limiter
    assert limiter is not None
    limiter._lock.acquire()  # another thread is inside try_take() when fork() happens
    try:
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child
            code = 1
            try:
                signal.alarm(5)
                key = emit(tracer)
                code = 0 if processor.force_flush(2000) and down.ids[key] == 1 else 2
            finally:
                os._exit(code)
    finally:
        limiter._lock.release()
    deadline = time.monotonic() + 10
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            pytest.fail("the child blocked on the lock it inherited")
        time.sleep(0.01)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
    processor.shutdown(1000)


# -- trace buffer --------

def test_one_trace_alone_stays_within_max_bytes() -> None:
    buffer = TraceBuffer(max_bytes=1_000_000)
    for i in range(100):
        buffer.add_documents(1, i, ("y" * 100_000 + str(i),))
    # A long-lived root with big retrievals used to keep all of them (max_items of them).
    assert buffer.size_bytes <= buffer.max_bytes
    assert buffer.evictions["bytes"] >= 90
    docs = buffer.documents(1)
    assert docs and docs[-1].endswith("99")  # the newest are kept


def test_mutated_tool_call_values_do_not_skew_the_byte_count() -> None:
    buffer = TraceBuffer(max_items_per_trace=2)
    results = [[0] for _ in range(3)]
    for i, result in enumerate(results):
        buffer.add_tool_call(1, 10 + i, i, {"name": "t", "arguments": {}, "result": result})
        result.extend(range(10_000))  # the tool's caller keeps using the list it returned
    # Sizes are taken off as they were counted: evicting the first call must not drive the
    # total negative (or, the other way round, leave it growing without bound).
    assert 0 < buffer.size_bytes < 2_000
    buffer.end_trace(1)
    assert buffer.size_bytes == 0


if sys.platform == "win32":  # pragma: no cover
    pytestmark = pytest.mark.skip("POSIX only")
