"""Adversarial regressions of the deadline backstop (``_held.DeadlineBackstop``): the thread
that exports held spans when a scorer or an ``on_score`` callback blocks the loop's thread.

Each span must reach the export processor exactly once, before a flush or shutdown of that
processor that follows; a score arriving after the backstop took its span goes on a carrier.
Spans are counted at the export processor (a recording ``SpanProcessor`` behind the scoring
processor). The backstop looks every 50 ms here (``fast``) so the tests do not wait seconds.
"""

from __future__ import annotations

import collections
import logging
import os
import sys
import threading
import time
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider

import tracescore
from tracescore import _semconv as sc
from tracescore._processor import ScoringSpanProcessor

BACKSTOP = "tracescore-deadlines"


class Recording(SpanProcessor):
    """The export processor: records every span, flush and shutdown in order, and how many
    spans the backstop thread was still handing over when a flush or shutdown began.

    ``hang`` (an Event) makes an ``on_end`` on the backstop thread wait for it (30 s at most);
    ``raise_once`` makes the first ``on_end`` on the backstop thread raise."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.log: list[tuple[str, Any]] = []
        self.ids: collections.Counter[tuple[int, int]] = collections.Counter()
        self.carriers = 0
        self.in_backstop = 0
        self.backstop_entered = threading.Event()
        self.hang: threading.Event | None = None
        self.raise_once = False
        self.received = threading.Condition(self.lock)

    def on_end(self, span: ReadableSpan) -> None:
        on_backstop = threading.current_thread().name == BACKSTOP
        if on_backstop:
            with self.lock:
                self.in_backstop += 1
            self.backstop_entered.set()
        try:
            if on_backstop and self.hang is not None:
                self.hang.wait(30)
            if on_backstop and self.raise_once:
                self.raise_once = False
                raise RuntimeError("exporter broke")
            with self.lock:
                ctx = span.context
                assert ctx is not None
                if (span.attributes or {}).get(sc.TRACESCORE_EVALUATION_CARRIER):
                    self.carriers += 1
                else:
                    self.ids[(ctx.trace_id, ctx.span_id)] += 1
                self.log.append(("span", span.name))
                self.received.notify_all()
        finally:
            if on_backstop:
                with self.lock:
                    self.in_backstop -= 1

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        with self.lock:
            self.log.append(("flush", self.in_backstop))
        return True

    def shutdown(self) -> None:
        with self.lock:
            self.log.append(("shutdown", self.in_backstop))

    def wait(self, condition: Any, timeout: float = 20.0) -> bool:
        with self.lock:
            return self.received.wait_for(lambda: condition(self), timeout)


class Blocking:
    """A scorer doing blocking work in async code: the loop's thread stops until ``release``."""

    id = "blocking"
    uses_context = False
    uses_tool_calls = False
    requires_ground_truth = False
    higher_is_better = True
    scale = 1.0

    def __init__(self) -> None:
        self.started = threading.Event()
        self.release = threading.Event()

    async def arun(self, **kwargs: Any) -> Any:
        self.started.set()
        self.release.wait(30)

        class Result:
            score = 1.0
            reason = "late"
            judge_model = None

        return Result()


def make(scorer: Any, **kw: Any) -> tuple[ScoringSpanProcessor, Any, Recording]:
    rule = tracescore.ScoringRule(scorer=scorer, on=lambda s: True).compile()
    down = Recording()
    kw.setdefault("score_timeout", 0.05)
    kw.setdefault("max_concurrency", 1)
    kw.setdefault("max_queue_size", 1000)
    kw.setdefault("flush_timeout", 5.0)
    processor = ScoringSpanProcessor(down, [rule], **kw)
    fast(processor)
    provider = TracerProvider()
    provider.add_span_processor(processor)
    return processor, provider.get_tracer("test"), down


def fast(processor: ScoringSpanProcessor) -> None:
    processor._backstop.period = 0.05
    processor._backstop.grace = 0.05


def emit(tracer: Any, name: str = "s") -> tuple[int, int]:
    with tracer.start_as_current_span(name, attributes={sc.INPUT_VALUE: "q",
                                                        sc.OUTPUT_VALUE: "a"}) as span:
        ctx = span.get_span_context()
    return (ctx.trace_id, ctx.span_id)


def backstops() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == BACKSTOP]


def wait_until(condition: Any, timeout: float = 20.0) -> bool:
    """Poll observable state (threads, frames) that offers nothing to wait on."""
    end = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > end:
            return False
        time.sleep(0.01)
    return True


def waiting_in(thread: threading.Thread, function: str) -> bool:
    frame = sys._current_frames().get(thread.ident or -1)
    while frame is not None:
        if frame.f_code.co_name == function:
            return True
        frame = frame.f_back
    return False


# -- a backstop export in flight vs flush and shutdown -----------------------------------------

def test_shutdown_waits_for_a_span_the_backstop_is_handing_over() -> None:
    # The backstop took the span off the held spans and is handing it to the export processor
    # when the application shuts down: the export processor's flush and shutdown must come
    # after that hand-off, or the span is dropped (an export processor drops spans it gets
    # after its shutdown).
    scorer = Blocking()
    processor, tracer, down = make(scorer)
    down.hang = threading.Event()
    key = emit(tracer, "held")
    assert scorer.started.wait(20)
    assert down.backstop_entered.wait(20)  # the backstop is inside on_end with the span
    scorer.release.set()  # the loop runs again: the score goes on a carrier span
    assert down.wait(lambda d: d.carriers == 1)
    stopper = threading.Thread(target=processor.shutdown, args=(20_000,))
    stopper.start()
    # Let the hand-off finish once the shutdown either reached the export processor (the bug)
    # or waits for the hand-off.
    assert wait_until(lambda: any(e[0] in ("flush", "shutdown") for e in list(down.log))
                      or waiting_in(stopper, "wait_handed_over"))
    down.hang.set()
    stopper.join(30)
    assert not stopper.is_alive()
    assert down.ids[key] == 1
    calls = [e for e in down.log if e[0] in ("flush", "shutdown")]
    assert calls and all(in_backstop == 0 for _, in_backstop in calls), down.log
    assert down.log.index(("span", "held")) < down.log.index(calls[0])


def test_a_hung_export_on_the_backstop_does_not_hold_shutdown_past_its_deadline() -> None:
    scorer = Blocking()
    processor, tracer, down = make(scorer)
    down.hang = threading.Event()
    try:
        emit(tracer)
        assert down.backstop_entered.wait(20)
        scorer.release.set()
        stopper = threading.Thread(target=processor.shutdown, args=(300,))
        stopper.start()
        stopper.join(30)
        assert not stopper.is_alive()  # returned while the export still hangs
        assert not down.hang.is_set()
    finally:
        down.hang.set()


def test_an_exporter_raising_on_the_backstop_does_not_end_it() -> None:
    scorer = Blocking()
    processor, tracer, down = make(scorer)
    down.raise_once = True
    try:
        first = emit(tracer, "first")
        assert scorer.started.wait(20)
        # The first hand-off raised (its span is lost, and the processor says so in a log).
        assert wait_until(lambda: not down.raise_once and down.in_backstop == 0)
        second = emit(tracer, "second")
        assert down.wait(lambda d: d.ids[second] == 1)  # the backstop still runs
        assert down.ids[first] == 0
    finally:
        scorer.release.set()
        processor.shutdown(5000)
    assert down.ids[second] == 1
    assert down.carriers == 2  # both late scores, once each


def test_each_span_goes_out_once_and_each_late_score_on_one_carrier() -> None:
    scorer = Blocking()
    processor, tracer, down = make(scorer, max_concurrency=1)
    keys = [emit(tracer, f"s{i}") for i in range(20)]
    assert scorer.started.wait(20)
    assert down.wait(lambda d: all(d.ids[k] == 1 for k in keys))
    scorer.release.set()
    assert down.wait(lambda d: d.carriers == 20)
    processor.shutdown(5000)
    assert all(down.ids[k] == 1 for k in keys)
    assert sum(down.ids.values()) == 20 and down.carriers == 20
    assert processor.stats.scores_late == 20 and processor.stats.scores_attached == 0


# -- lifecycle: configure cycles, fork ---------------------------------------------------------

def test_configure_cycles_leave_no_backstop_threads_behind() -> None:
    from tests.helpers import ProbeScorer, memory_configure

    processors = []
    for _ in range(5):
        provider = TracerProvider()
        inst, _ = memory_configure(tracer_provider=provider, score_timeout=0.05,
                                   scoring=[tracescore.ScoringRule(scorer=ProbeScorer(),
                                                                    on=lambda s: True)])
        fast(inst.processor)
        emit(provider.get_tracer("test"))  # a held span starts this processor's backstop
        assert inst.processor._backstop._thread is not None
        processors.append(inst.processor)
    # Each configure() shut the previous processor down: its backstop ends. (Only these
    # processors' threads are counted: processors other tests made without shutting them
    # down keep theirs.)
    def alive() -> list[Any]:
        return [p for p in processors
                if p._backstop._thread is not None and p._backstop._thread.is_alive()]

    assert wait_until(lambda: alive() == processors[-1:])
    tracescore.shutdown(5000)
    assert wait_until(lambda: not alive())
    assert all(p._backstop._thread is not None for p in processors)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork()")
def test_a_forked_child_starts_its_own_backstop_and_exports_none_of_the_parents_spans() -> None:
    scorer = Blocking()
    processor, tracer, down = make(scorer)
    parent_key = emit(tracer, "parent")
    assert scorer.started.wait(20)  # the loop is blocked; the parent's span is held ...
    assert down.wait(lambda d: d.ids[parent_key] == 1)  # ... and the backstop took it
    late = emit(tracer, "parent-late")  # held in the parent at fork()
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report through the pipe, exit without the parent's hooks
        code = 1
        try:
            scorer.release.set()  # the child's copy of the event: its loop is a new one
            child_key = emit(tracer, "child")
            ok = down.wait(lambda d: d.ids[child_key] >= 1, 20)
            names = [t.name for t in threading.enumerate()]
            processor.shutdown(5000)
            report = (f"{int(ok)} {names.count(BACKSTOP)} {down.ids[child_key]} "
                      f"{down.ids[late]} {down.ids[parent_key]}")
            os.write(write, report.encode())
            code = 0
        finally:
            os._exit(code)
    os.close(write)
    with os.fdopen(read) as pipe:
        report = pipe.read()
    _, status = os.waitpid(pid, 0)
    scorer.release.set()
    processor.shutdown(5000)
    assert os.WEXITSTATUS(status) == 0, report
    ok, threads, child, child_late, child_parent = report.split()
    assert ok == "1" and threads == "1"  # a fresh backstop in the child
    assert child == "1"
    # The spans the parent held at fork() are the parent's to export; the child had only
    # copies of the parent's earlier exports in its recording (1), never a new one.
    assert child_late == "0" and child_parent == "1"
    assert down.ids[late] == 1


# -- the warning -------------------------------------------------------------------------------

def test_one_warning_per_stall(caplog: pytest.LogCaptureFixture) -> None:
    # One blocking call holds the loop while spans keep ending, one at a time, each after
    # the previous went out: one stall, one warning (not one per span).
    scorer = Blocking()
    processor, tracer, down = make(scorer)
    try:
        with caplog.at_level(logging.WARNING, logger="tracescore"):
            for i in range(4):
                key = emit(tracer, f"s{i}")
                assert down.wait(lambda d, key=key: d.ids[key] == 1)
                # The next span is due a look or more after this one went out: in between,
                # the backstop looks and finds nothing due, though the loop still blocks.
        warnings = [r for r in caplog.records if "blocking its thread" in r.getMessage()]
        assert len(warnings) == 1
    finally:
        scorer.release.set()
        processor.shutdown(5000)
