"""``ExportProcessor``: tracescore's export span processor, in place of the SDK's
``BatchSpanProcessor``.

Its shape is the SDK's (a deque, a condition, one daemon thread); what differs:

- the queue is bounded by bytes (each span's ``size.span_size`` plus ``SPAN_OVERHEAD``), not by
  a count, so a burst of small spans fits where a few huge ones would not;
- a batch is bounded by encoded bytes as well as by count (``batch_bytes``: under gRPC's 4 MiB
  message limit by default), and a span that alone exceeds it is cut (``size.fit``) and marked;
- a batch the exporter fails goes to the retry spool on disk (``spool.Spool``), and while the
  spool holds anything, newer batches queue up behind it there: the spool is retried with
  exponential backoff and replayed oldest first once the backend answers again;
- a batch the backend rejects for good (an exporter raises ``PermanentExportError``: in OTLP,
  an HTTP status other than 429/502/503/504, a gRPC code other than the retryable ones) is
  dropped and counted as ``rejected``, by cause, with one log line per cause: retrying it would
  only fail again and hold up every batch behind it;
- spans count as exported when the exporter accepted them, and every span that will never go
  out is counted once, with its cause: ``queue_full``, ``export_failed`` (the exporter failed
  and the spool could not keep it: off, full, expired, unwritable), ``rejected`` (the backend
  refused it for good), ``too_large`` (could not be cut to fit) or ``shutdown`` (still waiting
  when the processor shut down);
- ``mark``/``wait_settled`` let a caller wait until the spans it queued have left memory
  (exported, spooled or counted as dropped): the scoring service answers a request only then
  in its ``forward_first`` mode;
- ``force_flush`` honours its deadline.

``on_start``/``on_end`` never block and never raise: ``on_end`` measures the span (a walk over
its attributes) and appends it under one lock.
"""

from __future__ import annotations

import logging
import os
import threading
import time
import weakref
from collections import Counter, deque
from collections.abc import Callable
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor
from opentelemetry.sdk.trace.export import SpanExporter
from opentelemetry.trace import TraceFlags

from tracescore._core.otel_compat import span_context

from .scrub import Scrub
from .sender import (
    EXPORT_FAILED,
    REJECTED,
    SHUTDOWN,
    Sender,
)
from .size import span_size
from .spool import Spool
from .worker import SPAN_OVERHEAD, TOO_LARGE, ExportThread

logger = logging.getLogger("tracescore")


_SAMPLED = TraceFlags.SAMPLED
QUEUE_FULL = "queue_full"
DROP_CAUSES = (QUEUE_FULL, EXPORT_FAILED, REJECTED, TOO_LARGE, SHUTDOWN)


Report = Callable[[str, int], None]


class ExportProcessor(ExportThread, SpanProcessor):
    """Queue ended spans by bytes, export them in size-bounded batches on one thread, keep what
    fails on disk and retry it in order.

    Args:
        exporter: any OTel ``SpanExporter``.
        queue_bytes: bytes of spans waiting at most (``TRACESCORE_EXPORT_QUEUE_BYTES``, default
            64 MiB); past it new spans are dropped and counted as ``queue_full``.
        batch_bytes: encoded bytes of one export call at most (``TRACESCORE_EXPORT_BATCH_BYTES``,
            default 3 MiB).
        max_batch_spans: spans of one export call at most (``OTEL_BSP_MAX_EXPORT_BATCH_SIZE``,
            default 512).
        schedule_delay: seconds a span waits for a full batch at most (``OTEL_BSP_SCHEDULE_DELAY``,
            default 5).
        max_queue_spans: a cap on queued spans on top of the bytes (``OTEL_BSP_MAX_QUEUE_SIZE``);
            None: bytes only.
        spool: where failed batches wait for a retry; None: a failed batch is dropped (counted as
            ``export_failed``).
        scrub: applied to every batch as it leaves the queue, before it is exported or spooled
            (``scrub.Scrubber``: redaction); None: batches go out as they are.

    Examples:
        >>> processor = ExportProcessor(OTLPSpanExporter(), spool=Spool(None, 512 << 20, 3600))
    """

    def __init__(
        self,
        exporter: SpanExporter,
        *,
        queue_bytes: int,
        batch_bytes: int,
        max_batch_spans: int = 512,
        schedule_delay: float = 5.0,
        max_queue_spans: int | None = None,
        spool: Spool | None = None,
        scrub: Scrub | None = None,
    ) -> None:
        self.exporter = exporter
        self.queue_bytes = queue_bytes
        self.batch_bytes = batch_bytes
        self.max_batch_spans = max_batch_spans
        self.schedule_delay = schedule_delay
        self.max_queue_spans = max_queue_spans
        self.spool = spool
        self.scrub = scrub
        self.counts: Counter[str] = Counter()
        #: Spans the backend rejected for good, by cause (``PermanentExportError.cause``).
        self._counts_lock = threading.Lock()
        self._report: Report | None = None
        self._sender = Sender(exporter, spool, self._count)
        self.rejections = self._sender.rejections
        self._init_state()
        _instances.add(self)

    def _init_state(self) -> None:
        self._lock = threading.Lock()
        # on_end takes the lock itself (a plain lock's ``with`` runs in C; the condition's
        # ``__enter__`` is a Python call on the thread that ends every span).
        self._cond = threading.Condition(self._lock)
        self._queue: deque[tuple[ReadableSpan, int]] = deque()
        self._queued_bytes = 0  # with SPAN_OVERHEAD per span
        self._queued_encoded = 0  # encoded sizes only, for the batch threshold
        self._queued_total = 0  # spans ever queued (``mark``)
        self._settled_total = 0  # of those, spans that left memory (``wait_settled``)
        self._waiting_since = 0.0
        self._closed = False
        self._flush_asked = 0
        self._flush_done = 0
        self._flush_ok = True
        self._thread: threading.Thread | None = None
        self._sender.backoff = 0.0
        self._sender.retry_at = 0.0
        self._warned_truncated = False

    # -- counters ------------------------------------------------------------------------------
    def report_to(self, report: Report) -> None:
        """Send every count to ``report(outcome, spans)`` as well, where ``outcome`` is
        ``exported`` or a drop cause (``queue_full``, ``export_failed``, ``too_large``,
        ``shutdown``). Called from any thread; it must be quick and must not raise."""
        self._report = report

    def _count(self, outcome: str, spans: int) -> None:
        if spans <= 0:
            return
        with self._counts_lock:
            self.counts[outcome] += spans
        report = self._report
        if report is not None:
            try:
                report(outcome, spans)
            except Exception:
                logger.debug("tracescore could not count exported spans", exc_info=True)

    @property
    def queued_bytes(self) -> int:
        """Bytes of spans waiting in memory (encoded size plus ``SPAN_OVERHEAD`` each)."""
        return self._queued_bytes

    @property
    def queued_spans(self) -> int:
        """Spans waiting in memory."""
        return len(self._queue)

    # -- SpanProcessor -------------------------------------------------------------------------
    #: ``on_start`` does nothing: a processor that forwards to this one may skip the call.
    starts_nothing = True

    def on_start(self, span: Any, parent_context: Any = None) -> None:
        return None

    def on_end(self, span: ReadableSpan) -> None:
        self.put(span, None)

    def put(self, span: ReadableSpan, encoded: int | None) -> None:
        """``on_end`` with the span's ``size.span_size`` already known (None: measured here).
        Never blocks, never raises."""
        try:
            context = span_context(span)
            if context is not None and not context.trace_flags & _SAMPLED:
                return
            if encoded is None:
                encoded = span_size(span)
            size = encoded + SPAN_OVERHEAD
            with self._lock:
                if self._closed:
                    cause: str | None = SHUTDOWN
                elif size > self.queue_bytes:
                    cause = TOO_LARGE
                elif self._queued_bytes + size > self.queue_bytes or (
                        self.max_queue_spans is not None
                        and len(self._queue) >= self.max_queue_spans):
                    cause = QUEUE_FULL
                else:
                    cause = None
                    first = not self._queue
                    if first:
                        self._waiting_since = time.monotonic()
                    self._queue.append((span, encoded))
                    self._queued_bytes += size
                    self._queued_encoded += encoded
                    self._queued_total += 1
                    if self._thread is None:
                        self._start()
                    # Waking the thread for every span would cost a context switch each: only
                    # when a batch is full, or for the first span of a batch (the thread waits
                    # without a deadline on an empty queue: it must learn this one's).
                    if (first or self._queued_encoded >= self.batch_bytes
                            or len(self._queue) == self.max_batch_spans):
                        self._cond.notify()
            if cause is not None:
                self._count(cause, 1)
        except Exception:
            logger.debug("tracescore could not queue a span for export", exc_info=True)

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        """Export everything queued, and try the spool once whatever its backoff, within
        ``timeout_millis``.

        Returns:
            True when the queue and the spool were empty at the end, every batch accepted;
            False when an export failed (its batches wait in the spool) or the deadline passed.
        """
        deadline = time.monotonic() + max(0.0, timeout_millis / 1000)
        with self._cond:
            if self._closed:
                return False
            if self._thread is None:
                if not self._queue and not (self.spool is not None and len(self.spool)):
                    return True  # nothing was ever queued
                self._start()
            self._flush_asked += 1
            wanted = self._flush_asked
            self._cond.notify_all()
            while self._flush_done < wanted:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(min(left, threading.TIMEOUT_MAX))
            return self._flush_ok

    def mark(self) -> int:
        """A mark past every span queued so far (for ``wait_settled``)."""
        with self._lock:
            return self._queued_total

    def wait_settled(self, mark: int, timeout: float) -> bool:
        """Wait until every span queued before ``mark`` left memory: exported, written to the
        spool, or counted as dropped. False when ``timeout`` seconds passed first."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while self._settled_total < mark:
                left = deadline - time.monotonic()
                if left <= 0 or self._closed and self._thread is None:
                    return self._settled_total >= mark
                self._cond.wait(min(left, 1.0))
        return True

    def shutdown(self, timeout_millis: float = 30_000) -> None:
        """Flush once more, drop (and count as ``shutdown``) what is still waiting, remove the
        spool folder and shut the exporter down. Waits ``timeout_millis`` at most for an export
        in progress."""
        with self._cond:
            if self._closed:
                return
            self._closed = True
            thread = self._thread
            self._cond.notify_all()
        if thread is not None:
            thread.join(max(0.0, timeout_millis / 1000))
        if thread is None or thread.is_alive():
            # The thread never started, or hangs in the exporter: count what it left.
            self._discard()
        try:
            self.exporter.shutdown()
        except Exception:
            logger.warning("tracescore: the exporter failed to shut down", exc_info=True)

    def _after_fork_in_child(self) -> None:
        # The parent exports what it queued and spooled; the child starts empty, with its own
        # thread (on first use) and its own spool folder.
        closed = self._closed
        self._init_state()
        self._closed = closed
        if self.spool is not None:
            self.spool.after_fork_in_child()


_instances: weakref.WeakSet[ExportProcessor] = weakref.WeakSet()


def _reset_after_fork() -> None:
    for processor in list(_instances):
        processor._after_fork_in_child()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset_after_fork)
