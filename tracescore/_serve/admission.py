"""Backpressure: whether the service takes a request, decided before it takes any span of it.

A request is refused whole, with a retry hint, when taking it could make the service drop
something later. The sender (the Collector's OTLP exporter) then keeps the data in its sending
queue and retries: gRPC ``RESOURCE_EXHAUSTED`` with a ``RetryInfo`` detail, HTTP 429 with
``Retry-After`` (503 while draining). Refused when:

- ``draining``: the service is shutting down;
- ``export_queue``: spans waiting for export, plus the requests being taken right now, plus
  this one would pass ``high_water`` of the export queue's bytes, each span charged what the
  queue charges it (its encoded size plus ``SPAN_OVERHEAD``; the rest of the queue is headroom
  for held spans released later, so an accepted span never meets a full queue);
- ``too_large``: the request alone would pass that mark (not retryable: HTTP 413);
- ``downstream``: the export spool holds batches that failed for a retryable cause (the
  downstream is failing: better the Collector's queue than this replica's disk and memory); a
  batch the downstream rejected for good is dropped and counted instead, never spooled;
- ``scoring_queue``: scoring jobs pending reach ``high_water`` of ``max_queue_size`` (a full
  engine would skip scores instead). Spans waiting for their trace are not counted here: they
  are bounded by bytes (``trace_buffer``) and enter the engine only as it has room, and
  counting them would let deferred spans refuse the very spans their traces wait for;
- ``held_spans``: held spans reach ``high_water`` of ``max_held_spans``;
- ``trace_buffer``: spans waiting for their trace pass ``high_water`` of the settler's bytes;
- ``logs_queue``: log requests waiting to be forwarded fill their queue.

Each refusal is counted by reason (``rejected``, ``/stats``, the
``tracescore.serve.requests.rejected`` metric).
"""

from __future__ import annotations

import threading
from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from .config import ServeConfig


class Queues(Protocol):
    """What admission measures (``ScoringService`` has it)."""

    draining: bool
    export: Any  # ExportProcessor: queued_bytes, queue_bytes, spool
    processor: Any  # ScoringSpanProcessor: pending_jobs(), held_spans()
    settler: Any  # TraceSettler: deferred_bytes
    logs: Any  # LogForwarder: has_room(size)


@dataclass(frozen=True)
class Refusal:
    """A refused request: why, after how many seconds to retry, and what to tell the sender.
    ``too_large`` is the one reason a retry cannot cure."""

    reason: str
    retry_after: float
    message: str = ""


class Admission:
    """Admission control of one service.

    Args:
        service: the service whose queues are measured.
        config: high water mark (fraction 0..1] and the retry hint in seconds.
    """

    def __init__(self, service: Queues, config: ServeConfig) -> None:
        self._service = service
        self.high_water = config.backpressure.high_water
        self.retry_after = config.backpressure.retry_after
        self._max_queue = config.scoring.max_queue_size
        self._max_held = config.scoring.max_held_spans
        self._trace_bytes = config.trace.max_bytes
        self._lock = threading.Lock()
        self._reserved = 0
        self.rejected: Counter[str] = Counter()
        self.on_reject: Any = None

    def _refuse(self, reason: str, signal: str, items: int) -> Refusal:
        self.rejected[reason] += 1
        hook = self.on_reject
        if hook is not None:
            hook(reason, signal, items)
        return Refusal(reason, self.retry_after)

    def reserve(self, signal: str, size: int, items: int) -> Refusal | None:
        """Reserve room for a traces request whose spans charge the export queue ``size``
        bytes (their encoded sizes plus the queue's per-span overhead: what the queue will
        charge) and number ``items``; None when it may be taken (then call ``release(size)``
        once its spans are queued).

        A request that could not fit even into an empty queue is refused as ``too_large``:
        no retry would help (the sender should send smaller batches)."""
        room = self.high_water * self._service.export.queue_bytes
        if size > room:
            self._refuse("too_large", signal, items)
            return Refusal("too_large", self.retry_after,
                           f"the request's {items} spans take {size} bytes in the export "
                           f"queue, more than it ever takes at once ({int(room)} bytes: "
                           "high_water x export.queue_bytes); send smaller batches")
        with self._lock:
            reason = self._reason(size)
            if reason is None:
                self._reserved += size
                return None
        return self._refuse(reason, signal, items)

    def release(self, size: int) -> None:
        """The reserved request's spans are queued (or held): they count by themselves now."""
        with self._lock:
            self._reserved -= size

    def reserve_logs(self, size: int, records: int) -> Refusal | None:
        """Whether a logs request of ``size`` bytes may be taken."""
        service = self._service
        if service.draining:
            return self._refuse("draining", "logs", records)
        if not service.logs.has_room(size):
            return self._refuse("logs_queue", "logs", records)
        return None

    def _reason(self, size: int) -> str | None:
        service = self._service
        if service.draining:
            return "draining"
        export = service.export
        if export.queued_bytes + self._reserved + size > self.high_water * export.queue_bytes:
            return "export_queue"
        if export.spool is not None and len(export.spool):
            return "downstream"
        if service.processor.pending_jobs() >= self.high_water * self._max_queue:
            return "scoring_queue"
        if self._max_held is not None and (
                service.processor.held_spans() >= self.high_water * self._max_held):
            return "held_spans"
        if service.settler.deferred_bytes > self.high_water * self._trace_bytes:
            return "trace_buffer"
        return None
