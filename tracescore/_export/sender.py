"""How a batch leaves: ``Sender`` hands it to the exporter, and keeps what the exporter failed in
the retry spool, retried with exponential backoff (``ExportProcessor``'s export thread calls
it). A batch the backend rejects for good (``PermanentExportError``) is dropped and counted,
with one log line per cause.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections import Counter
from collections.abc import Callable

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from tracescore._core import suppress as _suppress

from .spool import Spool

logger = logging.getLogger("tracescore")

EXPORT_FAILED = "export_failed"
SHUTDOWN = "shutdown"
REJECTED = "rejected"
EXPORTED = "exported"
# Backoff between retries of the spool's oldest batch, seconds: doubling from the first, with
# jitter so that many processes do not retry in step.
_BACKOFF_FIRST = 1.0
_BACKOFF_MAX = 16.0


class PermanentExportError(Exception):
    """Raised by an exporter when the backend rejected a batch for good (retrying it cannot
    succeed): the export processor drops the batch and counts it as ``rejected``.

    Args:
        cause: a short, low-cardinality cause, e.g. ``http 400`` or ``grpc INVALID_ARGUMENT``
            (the key of ``ExportProcessor.rejections``).
        message: what the backend said (logged once per cause).
    """

    def __init__(self, cause: str, message: str = "") -> None:
        super().__init__(f"{cause}: {message}" if message else cause)
        self.cause = cause
        self.message = message


class Sender:
    """Export batches, spool what fails, retry the spool's oldest batch with backoff.

    Args:
        exporter: any OTel ``SpanExporter``.
        spool: where failed batches wait for a retry; None: a failed batch is dropped.
        count: ``(outcome, spans)``: called for every count (``exported`` or a drop cause).
    """

    def __init__(self, exporter: SpanExporter, spool: Spool | None,
                 count: Callable[[str, int], None]) -> None:
        self.exporter = exporter
        self.spool = spool
        self._count = count
        self._lock = threading.Lock()
        #: Spans the backend rejected for good, by cause (``PermanentExportError.cause``).
        self.rejections: Counter[str] = Counter()
        self.backoff = 0.0  # seconds of the last wait between retries
        self.retry_at = 0.0  # monotonic time of the next retry of the spool's oldest batch

    @property
    def spooled(self) -> bool:
        """Whether failed batches wait in the spool."""
        return self.spool is not None and len(self.spool) > 0

    def deliver(self, batch: list[ReadableSpan], closed: bool) -> None:
        """A fresh batch: behind the spool's batches when it holds any (in order), else to
        the exporter (``failed`` when it fails)."""
        if self.spool is not None and len(self.spool):
            self._count(EXPORT_FAILED, self.spool.append(batch))
        elif not self.send(batch):
            self.failed(batch, closed)

    def retry_spool(self, final: bool) -> bool:
        """A flush's turn at the spool: its batches retried oldest first, once each, whatever
        the backoff, until one fails. True when the spool is empty. With ``final`` (shutdown)
        while backing off, no try: the flush before it just failed to reach the backend, and
        another try would only spend the deadline the caller has left."""
        if final and self.spooled and time.monotonic() < self.retry_at:
            return False
        while self.spooled:
            if not self.retry_head():
                return False
        return True

    def keep(self, batch: list[ReadableSpan], final: bool) -> None:
        """A flushed batch that did not go out: spooled (counted as ``export_failed`` when it
        cannot be), or with ``final`` counted as ``shutdown``."""
        if final:
            self._count(SHUTDOWN, len(batch))
        elif self.spool is not None:
            self._count(EXPORT_FAILED, self.spool.append(batch))
        else:
            self._count(EXPORT_FAILED, len(batch))

    def retry_head(self) -> bool:
        """Export the spool's oldest batch; True when it went out (or nothing was left)."""
        spool = self.spool
        assert spool is not None
        spans, dropped = spool.head()
        self._count(EXPORT_FAILED, dropped)
        if spans is None:
            return True
        if self.send(spans):
            spool.pop()
            self.backoff = 0.0
            self.retry_at = 0.0
            return True
        self.back_off()
        return False

    def failed(self, batch: list[ReadableSpan], closed: bool) -> None:
        """A fresh batch the exporter failed: into the spool (or counted), and back off;
        counted as ``shutdown`` when the processor is ``closed``."""
        if closed:
            self._count(SHUTDOWN, len(batch))
            return
        if self.spool is None:
            self._count(EXPORT_FAILED, len(batch))
            return
        self._count(EXPORT_FAILED, self.spool.append(batch))
        self.back_off()

    def _rejected(self, exc: PermanentExportError, spans: int) -> None:
        with self._lock:
            first = exc.cause not in self.rejections
            self.rejections[exc.cause] += spans
        if first:
            logger.error("tracescore: the backend rejected %d spans for good (%s); they are "
                         "dropped, not retried, and counted as rejected (logged once per cause)",
                         spans, exc)
        self._count(REJECTED, spans)

    def back_off(self) -> None:
        self.backoff = min(_BACKOFF_MAX, self.backoff * 2 if self.backoff else _BACKOFF_FIRST)
        self.retry_at = time.monotonic() + self.backoff * random.uniform(0.8, 1.2)

    def send(self, batch: list[ReadableSpan]) -> bool:
        """Export one batch; True when it is done with: the exporter accepted it (counted as
        exported) or the backend rejected it for good (counted as rejected). False: a retryable
        failure."""
        try:
            with _suppress.suppressed():
                result = self.exporter.export(batch)
        except PermanentExportError as exc:
            self._rejected(exc, len(batch))
            return True
        except Exception:
            logger.warning("tracescore: the exporter raised while exporting %d spans; they are "
                           "kept for a retry", len(batch), exc_info=True)
            result = SpanExportResult.FAILURE
        if result is SpanExportResult.SUCCESS:
            self._count(EXPORTED, len(batch))
            return True
        return False
