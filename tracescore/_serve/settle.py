"""Trace completeness in the service: when a scored span's trace has settled.

In process a scored span usually ends last, after the retrievals and tool calls it used. In the
service the spans of a trace come from several processes, each exporting on its own schedule,
so the retrieval span of another service may arrive after the agent span that used it. A scored
span whose scorer judges the trace's documents or tool calls is therefore *deferred* here until
its trace is complete, and only then read into its ``ScoringRequest``.

A trace is complete when:

- its root span (no parent at all) has arrived and no span of it arrived for
  ``settle_after_root`` seconds (another service's late child of that root still gets that
  long), or
- no span of it arrived for ``idle`` seconds (the root is elsewhere, or never comes),
- and in any case once a deferred span has waited ``max_wait`` seconds.

A request refused for backpressure counts as an arrival for every trace (``refused``): the
sender retries it, and what it queued behind it comes later too, so no trace is quiet while
the service pushes back. A complete trace's spans enter scoring only as fast as the engine's
queue has room (``capacity``).

Bounded: deferred spans by bytes in total (``max_bytes``) and per trace
(``max_bytes_per_trace``); traces tracked by count (``max_traces``). A span that does not fit is
not dropped: it is scored at once with what its trace has so far, and counted
(``overflow_bytes``, ``overflow_trace_bytes``); a trace pushed out by the count completes early
(``overflow_traces``). Once a trace completes, its documents and tool calls leave the trace
buffer; a span of it arriving later starts a new entry.
"""

from __future__ import annotations

import heapq
import logging
import threading
import time
from collections import Counter, OrderedDict
from collections.abc import Callable, Mapping
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan

from tracescore._pipeline.trace_buffer import TraceBuffer

logger = logging.getLogger("tracescore")

# The sweeper looks at most this often (seconds): completion is a matter of seconds, and each
# look walks only the traces already quiet for the shortest window.
_TICK = 0.05


class ServiceTraceBuffer(TraceBuffer):
    """A ``TraceBuffer`` whose traces end when the settler says so, not when a span without a
    local parent ends (in the service, every span of another service has a remote parent).

    A complete trace may still have requests to build: the scoring processor builds a
    released span's request later, on the loop. So ``finish`` forgets the trace only once the
    requests released with it have read its contents (``expect`` counts them; each read of
    the last kind the processor makes counts one down), or after ``grace`` seconds when a
    request never reads (its rule was rate limited, the engine was full).

    Args:
        reads_tool_calls: the processor also reads tool calls (they are its last read).
        grace: seconds a finished trace waits for its reads at most.
        clock: monotonic seconds.
        **bounds: the ``TraceBuffer`` bounds.
    """

    def __init__(self, *, reads_tool_calls: bool = False, grace: float = 60.0,
                 clock: Callable[[], float] = time.monotonic, **bounds: Any) -> None:
        super().__init__(**bounds)
        self._reads_tool_calls = reads_tool_calls
        self._grace = grace
        self._clock = clock
        self._expected: dict[int, int] = {}
        self._finished: dict[int, float] = {}
        self._guard = threading.Lock()

    def end_trace(self, trace_id: int) -> None:
        """Ignored: ``finish`` ends a trace once it is complete."""

    def expect(self, trace_id: int, reads: int) -> None:
        """``reads`` requests of this trace are about to be built."""
        with self._guard:
            self._expected[trace_id] = self._expected.get(trace_id, 0) + reads

    def finish(self, trace_id: int) -> None:
        """The trace is complete: forget it once its expected reads happened."""
        with self._guard:
            if self._expected.get(trace_id, 0) > 0:
                self._finished[trace_id] = self._clock() + self._grace
                return
        super().end_trace(trace_id)

    def expire(self) -> None:
        """Forget finished traces whose reads never came within the grace period."""
        now = self._clock()
        with self._guard:
            late = [t for t, until in self._finished.items() if until <= now]
            for trace_id in late:
                del self._finished[trace_id]
                self._expected.pop(trace_id, None)
        for trace_id in late:
            super().end_trace(trace_id)

    def _read(self, trace_id: int) -> None:
        with self._guard:
            left = self._expected.get(trace_id, 0) - 1
            if left > 0:
                self._expected[trace_id] = left
                return
            self._expected.pop(trace_id, None)
            done = self._finished.pop(trace_id, None) is not None
        if done:
            super().end_trace(trace_id)

    def documents(self, trace_id: int) -> tuple[str, ...]:
        found = super().documents(trace_id)
        if not self._reads_tool_calls:
            self._read(trace_id)
        return found

    def tool_calls_under(self, trace_id: int, span_id: int) -> tuple[Mapping[str, Any], ...]:
        found = super().tool_calls_under(trace_id, span_id)
        self._read(trace_id)
        return found


class _Trace:
    __slots__ = ("last_seen", "root_seen", "deferred", "bytes", "first_deferred")

    def __init__(self, now: float) -> None:
        self.last_seen = now
        self.root_seen = False
        self.deferred: list[ReadableSpan] = []
        self.bytes = 0
        self.first_deferred = 0.0


class TraceSettler:
    """Tracks the traces in flight and releases deferred spans once their trace is complete.

    Args:
        release: called with each deferred span when its trace is complete (on the sweeper
            thread, or on the caller's for an overflow); it builds the request and scores.
        finish: called with a trace id once the trace is complete (after its spans' release).
        idle: seconds without a new span after which a trace is complete.
        settle_after_root: the same once the trace's root span has arrived.
        max_wait: seconds a deferred span waits at most.
        max_bytes: bytes of deferred spans in total.
        max_bytes_per_trace: bytes of deferred spans per trace.
        max_traces: traces tracked at once.
        expect: told (trace id, spans) before a trace's deferred spans are released, so the
            buffer keeps the trace until their requests have read it.
        on_sweep: called at each sweep (the buffer's ``expire``).
        capacity: how many deferred spans the scoring engine can take now; a complete trace
            whose spans do not fit waits for the next sweep (else a burst of completions would
            overflow the engine's queue and go unscored). None: no limit.
        clock: monotonic seconds (tests may drive it).
    """

    def __init__(self, release: Callable[[ReadableSpan], None], finish: Callable[[int], None],
                 *, idle: float, settle_after_root: float, max_wait: float, max_bytes: int,
                 max_bytes_per_trace: int, max_traces: int,
                 capacity: Callable[[], int] | None = None,
                 expect: Callable[[int, int], None] | None = None,
                 on_sweep: Callable[[], None] | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._release = release
        self._on_sweep = on_sweep
        self._capacity = capacity
        self._expect = expect
        self._finish = finish
        self.idle = idle
        self.settle = min(settle_after_root, idle)
        self.max_wait = max_wait
        self.max_bytes = max_bytes
        self.max_bytes_per_trace = max_bytes_per_trace
        self.max_traces = max_traces
        self._clock = clock
        self._cond = threading.Condition(threading.Lock())
        self._traces: OrderedDict[int, _Trace] = OrderedDict()
        self._waits: list[tuple[float, int]] = []  # (first deferred + max_wait, trace id)
        self._bytes = 0
        self._deferred = 0
        self._refused_at = -float("inf")
        self.overflow: Counter[str] = Counter()
        self.released = 0
        self._closed = False
        self._thread: threading.Thread | None = None

    # -- observing -----------------------------------------------------------------------------
    @property
    def deferred_spans(self) -> int:
        """Spans waiting for their trace now."""
        return self._deferred

    @property
    def deferred_bytes(self) -> int:
        """Bytes of the spans waiting now."""
        return self._bytes

    def __len__(self) -> int:
        return len(self._traces)

    def waiting_traces(self) -> set[int]:
        """The traces that have spans waiting now."""
        with self._cond:
            return {t for t, trace in self._traces.items() if trace.deferred}

    def any_waiting(self, trace_ids: set[int]) -> bool:
        """Whether any of ``trace_ids`` still has spans waiting."""
        with self._cond:
            return any((trace := self._traces.get(t)) is not None and trace.deferred
                       for t in trace_ids)

    # -- the hot path --------------------------------------------------------------------------
    def seen(self, span: ReadableSpan) -> None:
        """Note a span's arrival (every received span comes here first)."""
        ctx = span.context
        if ctx is None:
            return
        evicted: _Trace | None = None
        evicted_id = 0
        with self._cond:
            now = self._clock()
            trace = self._traces.get(ctx.trace_id)
            if trace is None:
                trace = self._traces[ctx.trace_id] = _Trace(now)
                if len(self._traces) > self.max_traces:
                    evicted_id, evicted = self._traces.popitem(last=False)
                    self._forget(evicted)
                    self.overflow["traces"] += 1
            else:
                trace.last_seen = now
                self._traces.move_to_end(ctx.trace_id)
            if span.parent is None:
                trace.root_seen = True
            self._ensure_thread()
        if evicted is not None:
            self._complete(evicted_id, evicted)

    def refused(self) -> None:
        """A request was refused (backpressure): its spans, and those queued behind it in the
        sender, come again later, so no trace counts as quiet until the refusals stop for a
        settle window (``max_wait`` still bounds every wait)."""
        with self._cond:
            self._refused_at = self._clock()

    def defer(self, span: ReadableSpan, size: int) -> bool:
        """Keep ``span`` until its trace is complete. False when a bound leaves no room (the
        caller scores it at once; the overflow is counted here)."""
        ctx = span.context
        if ctx is None:
            return False
        with self._cond:
            if self._closed:
                return False
            trace = self._traces.get(ctx.trace_id)
            if trace is None:  # pushed out between seen() and here
                self.overflow["traces"] += 1
                return False
            if self._bytes + size > self.max_bytes:
                self.overflow["bytes"] += 1
                return False
            if trace.bytes + size > self.max_bytes_per_trace:
                self.overflow["trace_bytes"] += 1
                return False
            if not trace.deferred:
                trace.first_deferred = self._clock()
                heapq.heappush(self._waits, (trace.first_deferred + self.max_wait, ctx.trace_id))
            trace.deferred.append(span)
            trace.bytes += size
            self._bytes += size
            self._deferred += 1
            return True

    # -- completion ----------------------------------------------------------------------------
    def _forget(self, trace: _Trace) -> None:
        self._bytes -= trace.bytes
        self._deferred -= len(trace.deferred)

    def _complete(self, trace_id: int, trace: _Trace) -> None:
        if trace.deferred and self._expect is not None:
            self._expect(trace_id, len(trace.deferred))
        for span in trace.deferred:
            try:
                self._release(span)
            except Exception:
                logger.warning("tracescore serve: releasing a span for scoring failed",
                               exc_info=True)
        self.released += len(trace.deferred)
        try:
            self._finish(trace_id)
        except Exception:
            logger.debug("tracescore serve: ending a trace failed", exc_info=True)

    def _due(self, now: float) -> list[tuple[int, _Trace]]:
        """Pop the complete traces (holding the lock)."""
        done: list[tuple[int, _Trace]] = []
        quiet_before = now - self.settle
        refused_at = self._refused_at
        if refused_at <= quiet_before:
            for trace_id, trace in self._traces.items():
                if trace.last_seen > quiet_before:
                    break  # ordered by last arrival: the rest are busier still
                window = self.settle if trace.root_seen else self.idle
                if now - max(trace.last_seen, refused_at) >= window:
                    done.append((trace_id, trace))
        while self._waits and self._waits[0][0] <= now:
            _, trace_id = heapq.heappop(self._waits)
            waited = self._traces.get(trace_id)
            if (waited is not None and waited.deferred
                    and waited.first_deferred + self.max_wait <= now):
                done.append((trace_id, waited))
        seen: set[int] = set()
        unique: list[tuple[int, _Trace]] = []
        room = self._capacity() if self._capacity is not None and not self._closed else None
        for trace_id, trace in done:
            if trace_id in seen or self._traces.get(trace_id) is not trace:
                continue
            if room is not None:
                if trace.deferred and len(trace.deferred) > room and (unique or room <= 0):
                    # Complete, but the engine is full: a later sweep (past max_wait too).
                    heapq.heappush(self._waits, (now + _TICK, trace_id))
                    continue
                room -= len(trace.deferred)
            seen.add(trace_id)
            del self._traces[trace_id]
            self._forget(trace)
            unique.append((trace_id, trace))
        return unique

    def sweep(self) -> int:
        """Complete every trace that is due; returns how many (tests call it directly)."""
        if self._on_sweep is not None:
            self._on_sweep()
        with self._cond:
            done = self._due(self._clock())
        for trace_id, trace in done:
            self._complete(trace_id, trace)
        return len(done)

    def release_all(self) -> int:
        """Complete every trace now (shutdown); later ``defer`` calls return False."""
        with self._cond:
            self._closed = True
            done = list(self._traces.items())
            self._traces.clear()
            self._waits.clear()
            for _, trace in done:
                self._forget(trace)
            self._cond.notify_all()
        for trace_id, trace in done:
            self._complete(trace_id, trace)
        return sum(len(t.deferred) for _, t in done)

    def _ensure_thread(self) -> None:
        if self._thread is None and not self._closed:
            self._thread = threading.Thread(target=self._run, name="tracescore-serve-settle",
                                            daemon=True)
            self._thread.start()

    def _run(self) -> None:
        while True:
            with self._cond:
                if self._closed:
                    return
                self._cond.wait(_TICK)
                if self._closed:
                    return
            try:
                self.sweep()
            except Exception:
                logger.warning("tracescore serve: the trace settler failed a sweep",
                               exc_info=True)
