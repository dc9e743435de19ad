"""Deadlines that hold whatever a destination does (issue 22, point 4).

The OpenTelemetry SDK's batch log processor exports on the caller's thread in ``force_flush``
and ignores its deadline; its ``shutdown`` waits 30 s for its worker; an OTLP exporter retries
a dropped connection for its whole timeout, batch after batch. So each destination besides the
span export path (tracescore's own log records and metrics providers, the Phoenix writer) is
flushed and shut down on a helper thread (``within``) and the caller waits only until the
deadline. At the deadline the destination is cut off (``CountingLogExporter.cut``): whatever it
still exports goes nowhere at once and is counted, so the helper thread drains quickly instead
of retrying in the background for minutes.

What was not sent is counted: log records emitted and never accepted by the exporter
(``CountingLogExporter.not_sent``: failed, cut off, or still queued when a flush gave up), metric
data points whose export failed or was cut off. ``Destinations.not_sent()`` gathers them for
``tracescore.stats().not_sent``.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from typing import Any

from opentelemetry.sdk._logs.export import (
    BatchLogRecordProcessor,
    LogRecordExporter,
    LogRecordExportResult,
)
from opentelemetry.sdk.metrics.export import MetricExporter, MetricExportResult

logger = logging.getLogger("tracescore")


class Pending:
    """A flush or shutdown running on a daemon helper thread (``tracescore-flush-<what>``).

    Args:
        what: the destination, for the thread's name.
        fn: the flush or shutdown to run; its return value is ``result`` (None when it
            raised, logged at debug level).
        exporter: what ``cut_off`` cuts (a ``CountingLogExporter`` or
            ``CountingMetricExporter``), or None.
        resume: when ``fn`` returns after a cut-off, let the exporter send again (a flush:
            what comes later is sent; a shutdown: nothing comes later).
    """

    def __init__(self, what: str, fn: Callable[[], Any], exporter: Any = None,
                 resume: bool = True) -> None:
        self.result: Any = None
        self._done = threading.Event()
        self._fn = fn
        self._what = what
        self._exporter = exporter
        self._resume = resume
        self._lock = threading.Lock()
        self._cut = False
        threading.Thread(target=self._run, name=f"tracescore-flush-{what}", daemon=True).start()

    def _run(self) -> None:
        try:
            self.result = self._fn()
        except Exception:
            logger.debug("tracescore: flushing %s failed", self._what, exc_info=True)
        finally:
            with self._lock:
                self._done.set()
                if self._cut and self._resume:
                    self._exporter.resume()

    def wait(self, seconds: float) -> bool:
        """Whether it finished within ``seconds`` from now."""
        return self._done.wait(max(0.0, seconds))

    def cut_off(self) -> None:
        """The deadline passed: unless it just finished, its exporter drops (and counts)
        everything until it has drained."""
        with self._lock:
            if not self._done.is_set() and self._exporter is not None:
                self._cut = True
                self._exporter.cut()


class CountingLogExporter(LogRecordExporter):
    """A log exporter that counts what it delivered and can be cut off.

    Args:
        inner: the exporter that sends (OTLP, the file default).
    """

    def __init__(self, inner: LogRecordExporter) -> None:
        self.inner = inner
        self.exported = 0
        self.failed = 0
        self._cut = threading.Event()
        self._lock = threading.Lock()

    def cut(self) -> None:
        """From now on every batch is dropped at once (counted), until ``resume``."""
        self._cut.set()

    def resume(self) -> None:
        """Send again."""
        self._cut.clear()

    def export(self, batch: Sequence[Any]) -> LogRecordExportResult:
        n = len(batch)
        if self._cut.is_set():
            result = LogRecordExportResult.FAILURE
        else:
            try:
                result = self.inner.export(batch)
            except Exception:
                logger.debug("tracescore: the log exporter raised", exc_info=True)
                result = LogRecordExportResult.FAILURE
        with self._lock:
            if result is LogRecordExportResult.SUCCESS:
                self.exported += n
            else:
                self.failed += n
        return result

    def shutdown(self) -> None:
        self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        flush = getattr(self.inner, "force_flush", None)
        return True if flush is None else bool(flush(timeout_millis))


class CountingLogProcessor(BatchLogRecordProcessor):
    """The SDK's batch processor, counting the records emitted into it, so that
    ``emitted - exported`` is what was not sent (dropped by its full queue, failed, cut off,
    or still waiting)."""

    def __init__(self, exporter: CountingLogExporter) -> None:
        super().__init__(exporter)
        self.counting = exporter
        self.emitted = 0
        self._emit_lock = threading.Lock()

    def on_emit(self, *args: Any, **kwargs: Any) -> None:
        with self._emit_lock:
            self.emitted += 1
        super().on_emit(*args, **kwargs)

    def not_sent(self) -> int:
        """Records emitted that the exporter has not accepted."""
        return max(0, self.emitted - self.counting.exported)


class CountingMetricExporter(MetricExporter):
    """A metric exporter that counts the data points it could not deliver and can be cut off.

    Args:
        inner: the exporter that sends; its temporality and aggregation preferences are kept.
    """

    def __init__(self, inner: MetricExporter) -> None:
        super().__init__(preferred_temporality=getattr(inner, "_preferred_temporality", None),
                         preferred_aggregation=getattr(inner, "_preferred_aggregation", None))
        self.inner = inner
        self.not_sent = 0
        self._cut = threading.Event()

    def cut(self) -> None:
        """From now on every export is dropped at once (counted), until ``resume``."""
        self._cut.set()

    def resume(self) -> None:
        """Send again."""
        self._cut.clear()

    def export(self, metrics_data: Any, timeout_millis: float = 10_000,
               **kwargs: Any) -> MetricExportResult:
        if self._cut.is_set():
            result = MetricExportResult.FAILURE
        else:
            try:
                result = self.inner.export(metrics_data, timeout_millis=timeout_millis,
                                           **kwargs)
            except Exception:
                logger.debug("tracescore: the metric exporter raised", exc_info=True)
                result = MetricExportResult.FAILURE
        if result is not MetricExportResult.SUCCESS:
            self.not_sent += _points(metrics_data)
        return result

    def force_flush(self, timeout_millis: float = 10_000) -> bool:
        return bool(self.inner.force_flush(timeout_millis=timeout_millis))

    def shutdown(self, timeout_millis: float = 30_000, **kwargs: Any) -> None:
        self.inner.shutdown(timeout_millis=timeout_millis, **kwargs)


def _points(metrics_data: Any) -> int:
    try:
        return sum(len(metric.data.data_points)
                   for rm in metrics_data.resource_metrics
                   for sm in rm.scope_metrics for metric in sm.metrics)
    except Exception:
        return 1
