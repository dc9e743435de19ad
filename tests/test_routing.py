"""Spans that may be scored are routed on the scoring loop, after the call that ended them.

The thread that ends such a span only queues it with its decorator's record; the loop reads it,
matches it against the rules, holds it and queues its jobs. These tests pin what that must keep:
the full values, the end order, the bounds, and every span exported exactly once whatever the
loop is doing (blocked, stopped, shutting down).
"""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

import tracescore
from tests.helpers import ProbeScorer, eval_events, finished, memory_configure, routed
from tracescore import _loop


@pytest.fixture(autouse=True)
def _cleanup() -> Any:
    yield
    tracescore.shutdown(3000)


def _ids(spans: list[Any]) -> list[int]:
    return [s.context.span_id for s in spans if not s.name.startswith("evaluation ")]


def test_the_calling_thread_does_not_route_a_sampled_span() -> None:
    # The rule's predicate runs where the span is routed: on the loop's thread, not the
    # caller's, and still with the decorator's full (untruncated) values.
    where: list[str] = []

    def on(span: Any) -> bool:
        where.append(threading.current_thread().name)
        return True

    probe = ProbeScorer(id="probe")
    _, exp = memory_configure(scoring=[tracescore.ScoringRule(scorer=probe, on=on)],
                              max_content_length=20)

    @tracescore.agent
    def answer(q: str) -> str:
        return "a" * 500

    answer("q" * 300)
    deadline = time.monotonic() + 10
    while not where and time.monotonic() < deadline:  # routed by the loop, not by a flush
        threading.Event().wait(0.01)
    (span,) = finished(exp)
    assert where == [_loop.THREAD_NAME]
    (event,) = eval_events(span)
    assert event["gen_ai.evaluation.name"] == "probe"
    (call,) = probe.calls
    assert call["input"] == "q" * 300 and call["output"] == "a" * 500


def test_a_trace_is_routed_in_end_order() -> None:
    # A retrieval's documents reach the trace buffer before the agent span that ends after it
    # is routed: the context scorer of the agent sees them.
    probe = ProbeScorer(id="ctx", uses_context=True)
    _, exp = memory_configure(scoring=[tracescore.ScoringRule(scorer=probe)])

    @tracescore.retrieval
    def search(q: str) -> list[str]:
        return [f"doc {q} {i}" for i in range(3)]

    @tracescore.agent
    def answer(q: str) -> str:
        return " ".join(search(q))

    for i in range(50):
        answer(str(i))
    finished(exp)
    assert len(probe.calls) == 50
    for call in probe.calls:
        q = call["input"]
        assert list(call["context"]) == [f"doc {q} {i}" for i in range(3)]


def test_spans_waiting_for_a_blocked_loop_stay_within_the_queue_size() -> None:
    # While a scorer blocks the loop, at most max_queue_size spans wait to be routed: past
    # that, the thread that ends a span routes them (holds or skips them, counted), and every
    # span still goes out exactly once.
    blocking = threading.Event()
    release = threading.Event()

    class Blocker(ProbeScorer):
        async def arun(self, **kwargs: Any) -> Any:
            if kwargs.get("input") == "block":
                blocking.set()
                release.wait(10)  # noqa: ASYNC251 - the scenario: the loop's thread is stuck
            return await super().arun(**kwargs)

    inst, exp = memory_configure(scoring=[tracescore.ScoringRule(scorer=Blocker(id="b"))],
                                 max_queue_size=5, max_concurrency=1, score_timeout=30)

    @tracescore.agent
    def answer(q: str) -> str:
        return "x"

    answer("block")
    assert blocking.wait(5)
    most = 0
    for i in range(40):
        answer(f"q{i}")
        most = max(most, len(inst.processor._routes))
    assert most <= 5
    stats = tracescore.stats()
    assert stats.skipped_queue_full > 0  # routed by the callers, against the full queue
    release.set()
    spans = finished(exp)
    assert sorted(_ids(spans)) == sorted(set(_ids(spans))) and len(_ids(spans)) == 41
    routed()
    stats = tracescore.stats()
    assert stats.spans_scored + stats.skipped_queue_full == 41


def test_the_backstop_routes_spans_a_blocked_loop_leaves_waiting() -> None:
    # A scorer blocks the loop's thread for good: the spans that end meanwhile are routed by
    # the deadline backstop and exported at their deadline, without a flush and before the
    # loop is free again.
    blocking = threading.Event()
    release = threading.Event()

    class Blocker(ProbeScorer):
        async def arun(self, **kwargs: Any) -> Any:
            if kwargs.get("input") == "block":
                blocking.set()
                release.wait(30)  # noqa: ASYNC251 - the scenario: the loop's thread is stuck
            return await super().arun(**kwargs)

    inst, exp = memory_configure(scoring=[tracescore.ScoringRule(scorer=Blocker(id="b"))],
                                 score_timeout=0.2)

    @tracescore.agent
    def answer(q: str) -> str:
        return "x"

    try:
        answer("block")
        assert blocking.wait(5)
        later = [answer(f"q{i}") for i in range(3)]
        assert later == ["x"] * 3
        deadline = time.monotonic() + 20
        while len(exp.get_finished_spans()) < 4 and time.monotonic() < deadline:
            inst.processor._downstream.force_flush(100)  # the export queue, not scoring
            threading.Event().wait(0.05)
        assert not release.is_set()
        assert len(set(_ids(list(exp.get_finished_spans())))) == 4
    finally:
        release.set()


def test_spans_ending_while_shutdown_runs_are_each_exported_once() -> None:
    # Threads keep ending sampled spans while another shuts tracescore down: every span goes
    # out exactly once (routed by the loop, by the shutdown, or by its own thread once
    # shutdown closed the processor).
    _, exp = memory_configure(scoring=[tracescore.ScoringRule(scorer=ProbeScorer(id="p"))])

    @tracescore.agent
    def answer(q: str) -> str:
        return "x"

    stop = threading.Event()
    counts = [0] * 4

    def work(n: int) -> None:
        while not stop.is_set():
            answer(str(n))
            counts[n] += 1

    threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    while sum(counts) < 2000:
        threading.Event().wait(0.01)
    tracescore.shutdown(5000)
    stop.set()
    for t in threads:
        t.join(10)
    # Spans that ended after the shutdown went nowhere; none went out twice.
    ids = _ids(list(exp.get_finished_spans()))
    assert len(ids) == len(set(ids))
    assert len(ids) >= 2000


def test_a_loop_that_cannot_start_routes_on_the_calling_thread(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # No loop can be woken (no thread can start): the span is routed where it ended, scored
    # or skipped with a count, and exported; nothing waits for a loop that never comes.
    _, exp = memory_configure(scoring=[tracescore.ScoringRule(scorer=ProbeScorer(id="p"))])

    def no_loop() -> Any:
        raise RuntimeError("can't start new thread")

    monkeypatch.setattr(_loop, "get_loop", no_loop)
    inst = tracescore._config._current
    engine = inst.processor._engine
    with engine._lock:
        engine._polling = False

    @tracescore.agent
    def answer(q: str) -> str:
        return "x"

    answer("q")
    assert len(inst.processor._routes) == 0  # routed here, not left waiting
    monkeypatch.undo()
    spans = finished(exp)
    assert len(_ids(spans)) == 1


def test_the_loop_stops_polling_only_with_nothing_waiting() -> None:
    # The loop decides to stop polling while a span is being queued: the span is not left
    # waiting (its thread wakes the loop, or the loop sees it before it stops).
    _, exp = memory_configure(scoring=[tracescore.ScoringRule(scorer=ProbeScorer(id="p"))])
    inst = tracescore._config._current
    processor = inst.processor
    engine = processor._engine

    @tracescore.agent
    def answer(q: str) -> str:
        return "x"

    processor._backstop.also = None  # the backstop would route it within seconds: not this
    answer("first")
    routed(processor)
    assert engine.wait_idle(5)
    # Make the loop's next drain its last poll (work seemingly long ago), and end a span
    # right then from the loop's own thread, after the feed ran and before the decision.
    real_feed = processor._route_waiting
    raced = threading.Event()

    def feed() -> int:
        routed_now = real_feed()
        if not raced.is_set():
            engine._last_work = time.monotonic() - 3600
            answer("raced")  # queued after this feed: the producer sees the loop polling
            raced.set()
        return routed_now

    engine._feed = feed  # the loop's next poll runs it (or a wake, once it stopped polling)
    engine.wake()
    assert raced.wait(5)
    deadline = time.monotonic() + 10
    while processor._routes and time.monotonic() < deadline:
        threading.Event().wait(0.01)
    engine._feed = real_feed
    assert not processor._routes
    assert len(_ids(finished(exp))) >= 2


def test_a_rule_predicate_that_flushes_off_the_loop_does_not_stall_the_loop() -> None:
    # A span is routed off the loop (here by a flush, while a scorer blocks the loop) and its
    # rule's predicate flushes: the loop, free again, must not wait for the routing lock that
    # flush's thread holds, or the inner flush waits for jobs only the loop can run.
    blocking = threading.Event()
    release = threading.Event()
    inner: list[bool] = []

    class Blocker(ProbeScorer):
        async def arun(self, **kwargs: Any) -> Any:
            if kwargs.get("input") == "block":
                blocking.set()
                release.wait(20)  # noqa: ASYNC251 - the scenario: the loop's thread is stuck
            return await super().arun(**kwargs)

    def on(span: Any) -> bool:
        if "flusher" in span.name and not _loop.is_loop_thread() and not inner:
            release.set()
            inner.append(tracescore.force_flush(4000))
        return True

    _, exp = memory_configure(scoring=[tracescore.ScoringRule(scorer=Blocker(id="b"), on=on)],
                              score_timeout=30)

    @tracescore.agent
    def answer(q: str) -> str:
        return "x"

    @tracescore.agent
    def flusher(q: str) -> str:
        return "y"

    answer("block")
    assert blocking.wait(5)
    answer("a")
    flusher("f")  # waits to be routed: the loop is blocked
    spans = finished(exp, 10000)
    assert inner == [True]  # every score came in: the loop ran while the predicate flushed
    ids = _ids(spans)
    assert len(ids) == len(set(ids)) == 3


def test_a_loop_drain_routes_only_the_spans_that_waited_when_it_began() -> None:
    # Under sustained load from several threads the loop must get back to its jobs between
    # routings (one drain routed a 25k-span stream for two seconds, scoring next to nothing):
    # a drain routes one batch at most, of the spans that waited when it began; spans that end
    # while it routes wait for the next drain.
    ended_meanwhile: list[str] = []

    def on(span: Any) -> bool:
        if span.name.endswith("first") and not ended_meanwhile:
            ended_meanwhile.append("late")
            late("x")  # ends (and is queued) while this drain routes
        return False  # nothing is scored: only the routing is looked at

    _, exp = memory_configure(scoring=[tracescore.ScoringRule(scorer=ProbeScorer(id="p"),
                                                              on=on)])
    processor = tracescore._config._current.processor

    @tracescore.agent
    def first(q: str) -> str:
        return "x"

    @tracescore.agent
    def late(q: str) -> str:
        return "y"

    @tracescore.agent
    def more(q: str) -> str:
        return "z"

    # The loop cannot route while this thread holds the router's lock (it never waits for
    # it); drains as the loop makes them (its feed) run here.
    with processor._routing:
        first("q")
        for i in range(299):
            more(str(i))
        assert len(processor._routes) == 300
        assert processor._route_on_loop() == 256  # one batch, not all 300 (nor the late span)
        assert ended_meanwhile == ["late"]
        assert processor._route_on_loop() == 45  # the rest that waited, with the late span
    ids = _ids(finished(exp))
    assert len(ids) == len(set(ids)) == 301


def test_a_span_ending_during_shutdowns_flush_counts_its_jobs_as_dropped() -> None:
    # A span ends (and is queued) while shutdown flushes; shutdown closes the processor before
    # routing it: it goes out unscored, once, and the job it would have had is counted as
    # dropped, as shutdown counts the jobs it stops.
    _, exp = memory_configure(scoring=[tracescore.ScoringRule(scorer=ProbeScorer(id="p"))])
    processor = tracescore._config._current.processor

    @tracescore.agent
    def answer(q: str) -> str:
        return "x"

    flush = processor.force_flush

    def flush_then_a_span_ends(timeout_millis: float = 30_000) -> bool:
        done = flush(timeout_millis)
        answer("during shutdown")  # queued: the processor is not closed yet
        assert len(processor._routes) == 1
        return done

    processor.force_flush = flush_then_a_span_ends  # type: ignore[method-assign]
    # The loop cannot route while this thread holds the router's lock (it never waits for
    # it); shutdown, on this thread, still can.
    with processor._routing:
        tracescore.shutdown(5000)
    (span,) = exp.get_finished_spans()
    assert eval_events(span) == []
    assert processor.stats.jobs_dropped == 1
