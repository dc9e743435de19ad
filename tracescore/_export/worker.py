"""The export thread's half of ``ExportProcessor``: what runs on its one daemon thread.

``ExportProcessor`` (``processor.py``) is the callers' half: ``on_end`` queues a span under the
lock, ``force_flush`` and ``shutdown`` ask this thread for work and wait. Here the thread waits
for a full or overdue batch, a flush, a due retry of the spool or the shutdown; takes batches
off the queue (bounded by encoded bytes and by count, an oversized span cut to fit), scrubs
them and hands them to the ``Sender``. The state both halves use is declared below and set by
``ExportProcessor._init_state``; ``_cond`` guards it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable

from opentelemetry.sdk.trace import ReadableSpan

from .scrub import Scrub
from .sender import EXPORT_FAILED, SHUTDOWN, Sender
from .size import envelope_size, fit, span_size
from .spool import Spool

logger = logging.getLogger("tracescore")

# Bytes a queued span costs beyond its encoded size: the Python objects that hold it. A rough
# figure (a ReadableSpan with a few attributes takes 1-3 KiB of objects); it keeps a flood of
# tiny spans from filling memory within a byte bound meant for encoded data.
SPAN_OVERHEAD = 1024
TOO_LARGE = "too_large"


class ExportThread:
    """The export thread's methods; ``ExportProcessor`` is the class that has them."""

    queue_bytes: int
    batch_bytes: int
    max_batch_spans: int
    schedule_delay: float
    spool: Spool | None
    scrub: Scrub | None
    _sender: Sender
    _count: Callable[[str, int], None]
    _cond: threading.Condition
    _queue: deque[tuple[ReadableSpan, int]]
    _queued_bytes: int
    _queued_encoded: int
    _settled_total: int
    _waiting_since: float
    _closed: bool
    _flush_asked: int
    _flush_done: int
    _flush_ok: bool
    _thread: threading.Thread | None
    _warned_truncated: bool

    def _settled(self, spans: int) -> None:
        """``spans`` taken off the queue have left memory (the caller does not hold the lock)."""
        if spans:
            with self._cond:
                self._settled_total += spans
                self._cond.notify_all()

    def _start(self) -> None:
        """Start the export thread (holding ``_cond``)."""
        self._thread = threading.Thread(target=self._run, name="tracescore-export", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            if self.spool is not None:
                # Batches of a process that died on the same spool directory, dropped when
                # they were adopted (past the age bound): counted here, once reporting is set.
                self._count(EXPORT_FAILED, self.spool.take_dropped())
            while True:
                with self._cond:
                    flush, closing = self._wait()
                    wanted = self._flush_asked
                if flush or closing:
                    ok = self._drain(final=closing)
                    with self._cond:
                        self._flush_done = wanted
                        self._flush_ok = ok
                        self._cond.notify_all()
                    if closing:
                        return
                else:
                    self._step()
        except Exception:
            logger.warning("tracescore's export thread failed; spans still queued are dropped "
                           "(the application is unaffected)", exc_info=True)
            self._discard()
            with self._cond:
                self._thread = None  # the next span starts a new one
                self._flush_done = self._flush_asked
                self._flush_ok = False
                self._cond.notify_all()

    def _wait(self) -> tuple[bool, bool]:
        """Wait (holding ``_cond``) until there is work: a flush, the shutdown, a full or
        overdue batch, or a spool retry that is due. Returns (flush, closing)."""
        while True:
            if self._closed:
                return False, True
            if self._flush_asked > self._flush_done:
                return True, False
            now = time.monotonic()
            spooled = self.spool is not None and len(self.spool) > 0
            if spooled and now >= self._sender.retry_at:
                return False, False
            timeout = threading.TIMEOUT_MAX
            if self._queue:
                due = self._waiting_since + self.schedule_delay
                if (now >= due or self._queued_encoded >= self.batch_bytes
                        or len(self._queue) >= self.max_batch_spans):
                    return False, False
                timeout = due - now
            if spooled:
                timeout = min(timeout, self._sender.retry_at - now)
            self._cond.wait(min(timeout, threading.TIMEOUT_MAX))

    def _step(self) -> None:
        """One unit of work outside a flush: retry the spool's oldest batch when due, else
        export (or, behind a non-empty spool, spool) the next batch."""
        spool = self.spool
        if spool is not None and len(spool):
            if self._queued_bytes > self.queue_bytes // 2:
                # Replaying (or waiting to) while spans keep coming: move them behind the spool
                # before the queue fills up and has to drop.
                batch = self._take(everything=True)
                self._count(EXPORT_FAILED, spool.append(batch))
                self._settled(len(batch))
                return
            if time.monotonic() >= self._sender.retry_at:
                self._sender.retry_head()
                return
        batch = self._take()
        if batch:
            self._sender.deliver(batch, self._closed)
            self._settled(len(batch))

    def _drain(self, final: bool) -> bool:
        """A flush: the spool first (one attempt, backoff or not), then every queued batch.
        With ``final`` (shutdown) nothing is kept: what did not go out is counted. Returns True
        when everything went out."""
        ok = self._sender.retry_spool(final)
        while True:
            batch = self._take(everything=True)
            if not batch:
                break
            if ok and not self._sender.spooled:
                if self._sender.send(batch):
                    self._settled(len(batch))
                    continue
                ok = False
            self._sender.keep(batch, final)
            self._settled(len(batch))
        if final:
            self._discard()
        return ok and not self._sender.spooled

    def _take(self, everything: bool = False) -> list[ReadableSpan]:
        """The next batch off the queue, bounded by ``batch_bytes`` and ``max_batch_spans``;
        empty when no batch is due (or, with ``everything``, when the queue is empty)."""
        batch: list[ReadableSpan] = []
        too_large = 0
        with self._cond:
            if not self._queue:
                return batch
            if not everything:
                due = self._waiting_since + self.schedule_delay
                if (time.monotonic() < due and self._queued_encoded < self.batch_bytes
                        and len(self._queue) < self.max_batch_spans):
                    return batch
            used = 0
            envelopes: set[tuple[int, int]] = set()
            while self._queue and len(batch) < self.max_batch_spans:
                span, encoded = self._queue[0]
                key = (id(span.resource), id(span.instrumentation_scope))
                extra = 0 if key in envelopes else envelope_size(span)
                if batch and used + encoded + extra > self.batch_bytes:
                    break
                self._queue.popleft()
                self._queued_bytes -= encoded + SPAN_OVERHEAD
                self._queued_encoded -= encoded
                if not batch and encoded + extra > self.batch_bytes:
                    cut = fit(span, self.batch_bytes)
                    if cut is None:
                        too_large += 1
                        continue
                    self._note_truncated(span, encoded)
                    span = cut
                    encoded = span_size(cut)
                envelopes.add(key)
                used += encoded + extra
                batch.append(span)
            if self._queue:
                self._waiting_since = time.monotonic()
        self._count(TOO_LARGE, too_large)
        self._settled(too_large)
        if self.scrub is not None and batch:
            batch = self.scrub(batch)  # before it is sent or spooled (issue 22)
        return batch

    def _note_truncated(self, span: ReadableSpan, encoded: int) -> None:
        if not self._warned_truncated:
            self._warned_truncated = True
            logger.warning("tracescore cut span %r (%d bytes) to fit one export request of %d "
                           "bytes; it carries tracescore.export.truncated=true (logged once)",
                           span.name, encoded, self.batch_bytes)

    def _discard(self) -> None:
        """Count (as ``shutdown``) and forget everything queued and spooled."""
        with self._cond:
            left = len(self._queue)
            self._queue.clear()
            self._queued_bytes = 0
            self._queued_encoded = 0
            self._settled_total += left
            self._cond.notify_all()
        if self.spool is not None:
            left += self.spool.close()
        self._count(SHUTDOWN, left)
