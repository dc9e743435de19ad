"""The service's OTLP span exporter (the file's ``exporter`` section): one attempt per call,
and a verdict the export processor can act on.

The OTLP specification ("Failures", OTLP/gRPC and OTLP/HTTP) splits failures in two. Retryable:
gRPC ``CANCELLED``, ``DEADLINE_EXCEEDED``, ``ABORTED``, ``OUT_OF_RANGE``, ``UNAVAILABLE``,
``DATA_LOSS``, and ``RESOURCE_EXHAUSTED`` when the server sent a ``RetryInfo``; HTTP 429, 502,
503, 504, and a connection that failed. Every other answer is permanent: the same batch would
be refused again. This exporter returns ``FAILURE`` for the first kind (the export processor
spools the batch and retries it with backoff) and raises ``PermanentExportError`` for the second
(the export processor drops the batch, counts it as ``rejected`` by cause and logs the cause
once), so one bad batch never holds up the ones behind it nor the service's admission.

The SDK's OTLP exporters answer both kinds with the same ``FAILURE`` after their own retries,
which is why the service does not use them for spans.
"""

from __future__ import annotations

import gzip
import logging
import threading
from collections.abc import Sequence
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from .._export.sender import PermanentExportError
from .config import Downstream

logger = logging.getLogger("tracescore")

RETRYABLE_GRPC = frozenset({"CANCELLED", "DEADLINE_EXCEEDED", "ABORTED", "OUT_OF_RANGE",
                            "UNAVAILABLE", "DATA_LOSS"})
RETRYABLE_HTTP = frozenset({429, 502, 503, 504})


def grpc_error_is_retryable(error: Any) -> bool:
    """Whether a ``grpc.RpcError`` is retryable per the OTLP specification."""
    code = error.code().name if callable(getattr(error, "code", None)) else "UNKNOWN"
    if code in RETRYABLE_GRPC:
        return True
    if code == "RESOURCE_EXHAUSTED":
        try:
            metadata = dict(error.trailing_metadata() or ())
        except Exception:
            return False
        details = metadata.get("grpc-status-details-bin")
        if not details:
            return False
        from google.rpc import error_details_pb2, status_pb2  # type: ignore[import-untyped]

        status = status_pb2.Status.FromString(details)
        return any(d.Is(error_details_pb2.RetryInfo.DESCRIPTOR) for d in status.details)
    return False


class OtlpSpanExporter(SpanExporter):
    """OTLP spans to the ``exporter`` endpoint (gRPC or HTTP/protobuf), telling permanent
    failures apart.

    Args:
        down: the ``exporter`` section (endpoint, protocol, headers, timeout, compression;
            an ``https://`` endpoint uses TLS with the system's roots).

    Raises (from ``export``):
        PermanentExportError: the downstream rejected the batch for good.
    """

    def __init__(self, down: Downstream) -> None:
        self.down = down
        self._send: Any = None
        self._lock = threading.Lock()
        self._closed = False

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        if self._closed:
            return SpanExportResult.FAILURE
        from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

        request = encode_spans(spans)
        with self._lock:
            if self._send is None:
                self._send = self._grpc() if self.down.protocol == "grpc" else self._http()
        return SpanExportResult.SUCCESS if self._send(request) else SpanExportResult.FAILURE

    def shutdown(self) -> None:
        self._closed = True

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return True

    def _grpc(self) -> Any:
        import grpc  # type: ignore[import-untyped, unused-ignore]
        from opentelemetry.proto.collector.trace.v1 import trace_service_pb2_grpc

        down = self.down
        target = down.endpoint.split("://", 1)[-1]
        channel = (grpc.secure_channel(target, grpc.ssl_channel_credentials())
                   if down.endpoint.startswith("https://") else grpc.insecure_channel(target))
        stub = trace_service_pb2_grpc.TraceServiceStub(channel)  # type: ignore[no-untyped-call]
        metadata = list(down.headers.items())
        compression = grpc.Compression.Gzip if down.compression == "gzip" else None

        def send(request: Any) -> bool:
            try:
                stub.Export(request, timeout=down.timeout, metadata=metadata,
                            compression=compression)
            except grpc.RpcError as exc:
                if grpc_error_is_retryable(exc):
                    logger.debug("tracescore serve: downstream %s: %s (retryable)",
                                 down.endpoint, exc.code())
                    return False
                raise PermanentExportError(f"grpc {exc.code().name}",
                                           str(exc.details() or "")[:300]) from None
            return True

        return send

    def _http(self) -> Any:
        import requests

        down = self.down
        session = requests.Session()
        url = down.endpoint + "/v1/traces"
        headers = {"Content-Type": "application/x-protobuf", **down.headers}
        if down.compression == "gzip":
            headers["Content-Encoding"] = "gzip"

        def send(request: Any) -> bool:
            body = request.SerializeToString()
            if down.compression == "gzip":
                body = gzip.compress(body, 1)
            try:
                response = session.post(url, data=body, headers=headers, timeout=down.timeout)
            except requests.RequestException as exc:
                logger.debug("tracescore serve: downstream %s: %s (retryable)", url, exc)
                return False
            if response.ok:
                return True
            if response.status_code in RETRYABLE_HTTP:
                return False
            raise PermanentExportError(f"http {response.status_code}",
                                       response.text[:300] if response.content else "")

        return send
