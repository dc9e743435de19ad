"""Span exporters tracescore chooses from the environment, and the local default.

The local default, ``FileSpanExporter``, appends one OTLP/JSON ``ExportTraceServiceRequest`` per
line to a file: the format of the OTLP file exporter specification, which the OpenTelemetry
Collector's ``otlpjsonfile`` receiver reads back. It needs no server.
"""

from __future__ import annotations

import base64
import json
import logging
import logging.handlers
import os
import stat
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from tracescore._core.errors import ConfigurationError
from tracescore._setup import env as _env

logger = logging.getLogger("tracescore")

DEFAULT_EXPORT_FILE = _env.DEFAULT_EXPORT_FILE
_ID_KEYS = ("traceId", "spanId", "parentSpanId")


def _ids_to_hex(node: Any) -> None:
    # protobuf's JSON mapping renders bytes as base64; OTLP/JSON wants trace and span ids hex.
    if isinstance(node, dict):
        for key, value in node.items():
            if key in _ID_KEYS and isinstance(value, str):
                node[key] = base64.b64decode(value).hex()
            else:
                _ids_to_hex(value)
    elif isinstance(node, list):
        for item in node:
            _ids_to_hex(item)


def spans_to_otlp_json(spans: Sequence[ReadableSpan]) -> dict[str, Any]:
    """Encode spans as an OTLP/JSON ``ExportTraceServiceRequest`` (a dict ready for
    ``json.dumps``): lowerCamelCase keys, hex ids, enums as integers."""
    from google.protobuf.json_format import MessageToDict  # type: ignore[import-untyped]
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

    doc: dict[str, Any] = MessageToDict(encode_spans(spans), use_integers_for_enums=True)
    _ids_to_hex(doc)
    return doc


class FileSpanExporter(SpanExporter):
    """Append spans to a file as OTLP/JSON lines, rotated by size so the disk used stays bounded.

    Each ``export()`` call writes one line: an ``ExportTraceServiceRequest`` in OTLP/JSON. When
    a line would take the file past ``max_bytes``, the file is rotated first, as the standard
    library's ``logging.handlers.RotatingFileHandler`` does it (and by its code): ``path``
    becomes ``path.1``, ``path.1`` becomes ``path.2``, ... and ``path.{backup_count}`` is
    deleted. The newest spans are always in ``path``; the disk used stays under
    ``(backup_count + 1) * max_bytes`` plus one line per file (a line is never split). A file
    that is not a regular file (``/dev/stdout``, a pipe) is never rotated.

    The file is opened for each line, so a file deleted or moved away by someone else is
    started afresh; several processes should still each write their own path, since their
    rotations do not coordinate.

    Args:
        path: the file; default ``TRACESCORE_EXPORT_FILE``, else ``tracescore-traces.jsonl`` in
            the working directory. Parent folders are created.
        max_bytes: size in bytes at which the file rotates; default
            ``TRACESCORE_EXPORT_FILE_MAX_BYTES``, else 50 MiB.
        backup_count: rotated files kept (``path.1`` newest ... ``path.N`` oldest); default
            ``TRACESCORE_EXPORT_FILE_BACKUP_COUNT``, else 4. With the defaults the files use at
            most 250 MiB, about 120,000 spans of 2 KB.

    Raises:
        ConfigurationError: ``max_bytes`` or ``backup_count`` is not a positive integer (a
            ``ValueError``).

    Examples:
        >>> tracescore.configure(exporter=tracescore.FileSpanExporter(
        ...     "traces.jsonl", max_bytes=10_000_000, backup_count=2))
    """

    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        *,
        max_bytes: int | None = None,
        backup_count: int | None = None,
    ) -> None:
        chosen = path or _env.export_file()
        self.path = Path(chosen)
        self.max_bytes = _positive_int("max_bytes", max_bytes, _env.export_file_max_bytes,
                                       _env.MAXIMA[_env.TRACESCORE_EXPORT_FILE_MAX_BYTES])
        self.backup_count = _positive_int(
            "backup_count", backup_count, _env.export_file_backup_count,
            _env.MAXIMA[_env.TRACESCORE_EXPORT_FILE_BACKUP_COUNT],
        )
        self._rotator: logging.handlers.RotatingFileHandler | None = None
        self._lock = threading.Lock()
        self._closed = False

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        if self._closed:
            return SpanExportResult.FAILURE
        try:
            line = json.dumps(spans_to_otlp_json(spans), ensure_ascii=False, separators=(",", ":"))
            data = (line + "\n").encode("utf-8")
            with self._lock:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                self._rotate_before(len(data))
                with self.path.open("ab") as fh:
                    fh.write(data)
            return SpanExportResult.SUCCESS
        except Exception:
            logger.warning("tracescore could not write spans to %s", self.path, exc_info=True)
            return SpanExportResult.FAILURE

    def _rotate_before(self, incoming: int) -> None:
        """Rotate when ``incoming`` more bytes would take the file past ``max_bytes``. An empty
        file is not rotated (a line bigger than the limit goes in alone), nor is anything but a
        regular file. Holds the lock."""
        try:
            info = os.stat(self.path)
        except FileNotFoundError:
            return
        if not stat.S_ISREG(info.st_mode) or info.st_size == 0:
            return
        if info.st_size + incoming <= self.max_bytes:
            return
        if self._rotator is None:
            # Only its rename scheme is used (doRollover with no open stream): the standard
            # library's, not ours. delay=True: it never opens the file itself.
            self._rotator = logging.handlers.RotatingFileHandler(
                self.path,
                maxBytes=self.max_bytes,
                backupCount=self.backup_count,
                encoding="utf-8",
                delay=True,
            )
        self._rotator.doRollover()

    def shutdown(self) -> None:
        self._closed = True
        with self._lock:
            if self._rotator is not None:
                self._rotator.close()  # leaves logging's list of handlers

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return True


def _positive_int(name: str, value: Any, from_env: Any, maximum: float) -> int:
    """An explicit positive integer, checked and clamped to ``maximum`` (with a warning);
    ``None`` takes the environment's (or default)."""
    if value is None:
        return int(from_env())
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ConfigurationError(f"FileSpanExporter({name}={value!r}) takes a positive integer")
    return int(_env.clamp(f"FileSpanExporter({name}=...)", value, maximum))


def exporter_from_env() -> tuple[SpanExporter, str]:
    """Pick the exporter the standard OTel environment asks for.

    OTLP when ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` or ``OTEL_EXPORTER_OTLP_ENDPOINT`` is set,
    over the protocol ``OTEL_EXPORTER_OTLP_TRACES_PROTOCOL``/``OTEL_EXPORTER_OTLP_PROTOCOL``
    names (``http/protobuf`` default, ``grpc``); the OTLP exporters read the endpoint, headers,
    timeout and compression variables themselves. Otherwise a ``FileSpanExporter``.

    Returns:
        The exporter and a short description of where spans go (for logs and the demo).
    """
    endpoint = _env.otlp_traces_endpoint()
    if endpoint is None:
        exporter = FileSpanExporter()
        return exporter, f"file {exporter.path}"
    # An unsupported protocol (http/json) has already warned and become http/protobuf.
    if _env.otlp_traces_protocol() == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (
            OTLPSpanExporter as GrpcExporter,
        )

        return GrpcExporter(), f"OTLP grpc {endpoint}"
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
        OTLPSpanExporter as HttpExporter,
    )

    return HttpExporter(), f"OTLP http/protobuf {endpoint}"


# --- Score log records (issue 12) --------------------------------------------------------------
# Each score is also a gen_ai.evaluation.result log record. Where spans go to OTLP, so do the
# records (same OTEL_EXPORTER_OTLP_* variables); where spans go to the local file, records go to
# a sibling file in the same OTLP/JSON lines format, rotated the same way.


def log_file_for(span_file: str | os.PathLike[str]) -> Path:
    """The sibling log file of a span file: ``tracescore-traces.jsonl`` ->
    ``tracescore-logs.jsonl``; any other ``name.ext`` -> ``name-logs.ext``."""
    path = Path(span_file)
    head, found, tail = path.name.rpartition("traces")
    if found:  # the last "traces": "tracescore-traces" must not become "logscore-traces"
        return path.with_name(f"{head}logs{tail}")
    return path.with_name(f"{path.stem}{_env.DEFAULT_LOG_FILE_SUFFIX}{path.suffix}")


def logs_to_otlp_json(batch: Sequence[Any]) -> dict[str, Any]:
    """Encode log records as an OTLP/JSON ``ExportLogsServiceRequest`` (hex ids)."""
    from google.protobuf.json_format import MessageToDict
    from opentelemetry.exporter.otlp.proto.common._log_encoder import encode_logs

    doc: dict[str, Any] = MessageToDict(encode_logs(batch), use_integers_for_enums=True)
    _ids_to_hex(doc)
    return doc


def _log_exporter_base() -> Any:
    from opentelemetry.sdk._logs import export

    # LogRecordExporter is the newer name; LogExporter the one of the 1.38 floor.
    return getattr(export, "LogRecordExporter", None) or export.LogExporter


def _log_result(ok: bool) -> Any:
    from opentelemetry.sdk._logs import export

    result = getattr(export, "LogRecordExportResult", None) or export.LogExportResult
    return result.SUCCESS if ok else result.FAILURE


class FileLogExporter(_log_exporter_base()):  # type: ignore[misc]
    """Append log records to a file as OTLP/JSON lines (one ``ExportLogsServiceRequest`` per
    export), rotated by size exactly as ``FileSpanExporter`` rotates spans.

    Args:
        path: the file; default the sibling of the span file (``tracescore-logs.jsonl`` next to
            ``tracescore-traces.jsonl``, see ``log_file_for``).
        max_bytes: as ``FileSpanExporter`` (``TRACESCORE_EXPORT_FILE_MAX_BYTES``).
        backup_count: as ``FileSpanExporter`` (``TRACESCORE_EXPORT_FILE_BACKUP_COUNT``).

    Examples:
        >>> exporter = FileLogExporter("scores.jsonl")
    """

    def __init__(self, path: str | os.PathLike[str] | None = None, *,
                 max_bytes: int | None = None, backup_count: int | None = None) -> None:
        # The span file exporter's writer and rotation, reused: one code path for both files.
        self._file = FileSpanExporter(path or log_file_for(_env.export_file()),
                                      max_bytes=max_bytes, backup_count=backup_count)
        self.path = self._file.path

    def export(self, batch: Sequence[Any]) -> Any:
        if self._file._closed:
            return _log_result(False)
        try:
            line = json.dumps(logs_to_otlp_json(batch), ensure_ascii=False,
                              separators=(",", ":"))
            data = (line + "\n").encode("utf-8")
            with self._file._lock:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                self._file._rotate_before(len(data))
                with self.path.open("ab") as fh:
                    fh.write(data)
            return _log_result(True)
        except Exception:
            logger.warning("tracescore could not write score log records to %s", self.path,
                           exc_info=True)
            return _log_result(False)

    def shutdown(self) -> None:
        self._file.shutdown()

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return True


def log_exporter_from_env() -> tuple[Any, str] | None:
    """The log exporter for score records that matches where spans go by default: OTLP when
    ``OTEL_EXPORTER_OTLP_LOGS_ENDPOINT`` or ``OTEL_EXPORTER_OTLP_ENDPOINT`` is set (protocol
    from ``OTEL_EXPORTER_OTLP_[LOGS_]PROTOCOL``); None when only a traces endpoint is set (there
    is no logs endpoint to send to); else a ``FileLogExporter`` next to the span file."""
    endpoint = _env.otlp_logs_endpoint()
    if endpoint is None:
        if _env.otlp_traces_endpoint() is not None:
            return None
        exporter = FileLogExporter()
        return exporter, f"file {exporter.path}"
    if _env.otlp_logs_protocol() == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc._log_exporter import (
            OTLPLogExporter as GrpcLogExporter,
        )

        return GrpcLogExporter(), f"OTLP grpc {endpoint}"
    from opentelemetry.exporter.otlp.proto.http._log_exporter import (
        OTLPLogExporter as HttpLogExporter,
    )

    return HttpLogExporter(), f"OTLP http/protobuf {endpoint}"


# --- Score metrics (issue 24) ------------------------------------------------------------------
# Where log records go, metrics go too: OTLP from the same variables (OTEL_EXPORTER_OTLP_METRICS_*
# first), or a sibling file of the span file in OTLP/JSON lines, rotated the same way.


def metric_file_for(span_file: str | os.PathLike[str]) -> Path:
    """The sibling metrics file of a span file: ``tracescore-traces.jsonl`` ->
    ``tracescore-metrics.jsonl``; any other ``name.ext`` -> ``name-metrics.ext``."""
    path = Path(span_file)
    head, found, tail = path.name.rpartition("traces")
    if found:
        return path.with_name(f"{head}metrics{tail}")
    return path.with_name(f"{path.stem}{_env.DEFAULT_METRICS_FILE_SUFFIX}{path.suffix}")


def metrics_to_otlp_json(data: Any) -> dict[str, Any]:
    """Encode an SDK ``MetricsData`` as an OTLP/JSON ``ExportMetricsServiceRequest`` (exemplars'
    trace and span ids in hex, as the OTLP/JSON format writes them)."""
    from google.protobuf.json_format import MessageToDict
    from opentelemetry.exporter.otlp.proto.common.metrics_encoder import encode_metrics

    doc: dict[str, Any] = MessageToDict(encode_metrics(data), use_integers_for_enums=True)
    _ids_to_hex(doc)
    return doc


def _metric_exporter_base() -> Any:
    from opentelemetry.sdk.metrics.export import MetricExporter

    return MetricExporter


class FileMetricExporter(_metric_exporter_base()):  # type: ignore[misc]
    """Append metrics to a file as OTLP/JSON lines (one ``ExportMetricsServiceRequest`` per
    export, cumulative temporality), rotated by size exactly as ``FileSpanExporter`` rotates
    spans. The OpenTelemetry Collector's ``otlpjsonfile`` receiver reads the format.

    Args:
        path: the file; default the sibling of the span file (``tracescore-metrics.jsonl`` next
            to ``tracescore-traces.jsonl``, see ``metric_file_for``).
        max_bytes: as ``FileSpanExporter`` (``TRACESCORE_EXPORT_FILE_MAX_BYTES``).
        backup_count: as ``FileSpanExporter`` (``TRACESCORE_EXPORT_FILE_BACKUP_COUNT``).

    Examples:
        >>> exporter = FileMetricExporter("metrics.jsonl")
    """

    def __init__(self, path: str | os.PathLike[str] | None = None, *,
                 max_bytes: int | None = None, backup_count: int | None = None) -> None:
        super().__init__()
        self._file = FileSpanExporter(path or metric_file_for(_env.export_file()),
                                      max_bytes=max_bytes, backup_count=backup_count)
        self.path = self._file.path

    def export(self, metrics_data: Any, timeout_millis: float = 10_000, **kwargs: Any) -> Any:
        from opentelemetry.sdk.metrics.export import MetricExportResult

        if self._file._closed:
            return MetricExportResult.FAILURE
        try:
            doc = metrics_to_otlp_json(metrics_data)
            if not doc.get("resourceMetrics"):
                return MetricExportResult.SUCCESS  # nothing recorded yet: no empty line
            line = json.dumps(doc, ensure_ascii=False, separators=(",", ":"))
            data = (line + "\n").encode("utf-8")
            with self._file._lock:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                self._file._rotate_before(len(data))
                with self.path.open("ab") as fh:
                    fh.write(data)
            return MetricExportResult.SUCCESS
        except Exception:
            logger.warning("tracescore could not write metrics to %s", self.path, exc_info=True)
            return MetricExportResult.FAILURE

    def force_flush(self, timeout_millis: float = 10_000) -> bool:
        return True

    def shutdown(self, timeout_millis: float = 30_000, **kwargs: Any) -> None:
        self._file.shutdown()


def metric_exporter_from_env() -> tuple[Any, str] | None:
    """The metric exporter that matches where spans go by default: OTLP when
    ``OTEL_EXPORTER_OTLP_METRICS_ENDPOINT`` or ``OTEL_EXPORTER_OTLP_ENDPOINT`` is set (protocol
    from ``OTEL_EXPORTER_OTLP_[METRICS_]PROTOCOL``; temporality, headers, timeout and compression
    from the exporter's own ``OTEL_EXPORTER_OTLP_*`` variables); None when only a traces
    endpoint is set (no metrics endpoint to send to); else a ``FileMetricExporter`` next to the
    span file."""
    endpoint = _env.otlp_metrics_endpoint()
    if endpoint is None:
        if _env.otlp_traces_endpoint() is not None:
            return None
        exporter = FileMetricExporter()
        return exporter, f"file {exporter.path}"
    if _env.otlp_metrics_protocol() == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import (
            OTLPMetricExporter as GrpcMetricExporter,
        )

        return GrpcMetricExporter(), f"OTLP grpc {endpoint}"
    from opentelemetry.exporter.otlp.proto.http.metric_exporter import (
        OTLPMetricExporter as HttpMetricExporter,
    )

    return HttpMetricExporter(), f"OTLP http/protobuf {endpoint}"
