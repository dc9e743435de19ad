"""Span exporters tracescore chooses from the environment, and the local default.

The local default, ``FileSpanExporter``, appends one OTLP/JSON ``ExportTraceServiceRequest`` per
line to a file: the format of the OTLP file exporter specification, which the OpenTelemetry
Collector's ``otlpjsonfile`` receiver reads back. It needs no server.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from . import _env

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
    """Append spans to a file as OTLP/JSON lines.

    Args:
        path: the file; default ``TRACESCORE_EXPORT_FILE``, else ``tracescore-traces.jsonl`` in
            the working directory. Parent folders are created.

    Each ``export()`` call writes one line: an ``ExportTraceServiceRequest`` in OTLP/JSON.

    Example:
        >>> tracescore.configure(exporter=tracescore.FileSpanExporter("traces.jsonl"))
    """

    def __init__(self, path: str | os.PathLike[str] | None = None) -> None:
        chosen = path or _env.export_file()
        self.path = Path(chosen)
        self._lock = threading.Lock()
        self._closed = False

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        if self._closed:
            return SpanExportResult.FAILURE
        try:
            line = json.dumps(spans_to_otlp_json(spans), ensure_ascii=False, separators=(",", ":"))
            with self._lock:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                with self.path.open("a", encoding="utf-8") as fh:
                    fh.write(line + "\n")
            return SpanExportResult.SUCCESS
        except Exception:
            logger.warning("tracescore could not write spans to %s", self.path, exc_info=True)
            return SpanExportResult.FAILURE

    def shutdown(self) -> None:
        self._closed = True

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return True


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
