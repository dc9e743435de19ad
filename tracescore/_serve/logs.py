"""Log records received by the service, forwarded downstream as they came.

Instrumentations in the GenAI conventions' ``EVENT_ONLY`` mode put message content in log
records rather than on spans; the service accepts them and forwards each request unchanged
(its bytes re-sent) to the downstream's logs endpoint, in order, from one thread. An export
that failed for a retryable cause (per the OTLP specification, as ``exporter`` tells them) is
retried with backoff while the request waits at the head of a queue bounded by bytes. Unless
``redaction: {foreign_spans: false}`` says to forward as received, each request is redacted as
received spans are (``redact_logs_request``: every string of every body and attribute, at any
depth, attribute names included, the resource's and the scope's), on the forwarding thread,
once, before it is sent;
``has_room`` tells the admission to refuse new requests (OTLP backpressure) instead of dropping
any. A request the downstream rejects for good is dropped and counted (``rejected``, by cause,
logged once per cause), so it never holds up the ones behind it. Reading content out of
these records for scoring is not done yet (README).
"""

from __future__ import annotations

import gzip
import logging
import threading
import time
from collections import deque
from typing import Any

from tracescore._core import redact as _redact

logger = logging.getLogger("tracescore")

_BACKOFF_FIRST = 0.5
_BACKOFF_MAX = 8.0


class LogForwarder:
    """Forward raw ``ExportLogsServiceRequest`` bytes to the downstream, in order.

    Args:
        endpoint: the downstream base URL (``http://host:4317`` for gRPC, ``http://host:4318``
            for HTTP; ``/v1/logs`` is appended for HTTP).
        protocol: ``grpc`` or ``http/protobuf``.
        headers: extra headers or gRPC metadata.
        timeout: seconds per export call.
        compression: ``gzip`` or ``none``.
        max_bytes: bytes of requests waiting at most.
        redact: redact each request before it is sent (``redact_logs_request``).
        redactor: the service's redactor (its file's patterns); None: the process's.
    """

    def __init__(self, endpoint: str, protocol: str, headers: dict[str, str], timeout: float,
                 compression: str, max_bytes: int, redact: bool = True,
                 redactor: _redact.Redactor | None = None) -> None:
        self.endpoint = endpoint
        self.protocol = protocol
        self.headers = dict(headers)
        self.timeout = timeout
        self.compression = compression
        self.max_bytes = max_bytes
        self.redact = redact
        self.redactor = redactor or _redact.PROCESS
        # The request at the head of the queue, redacted once however often it is retried.
        self._redacted: tuple[bytes, bytes] | None = None
        self._cond = threading.Condition(threading.Lock())
        self._queue: deque[tuple[bytes, int]] = deque()
        self._bytes = 0
        self._closed = False
        self._busy = False
        self._thread: threading.Thread | None = None
        self._send_fn: Any = None
        self.forwarded_records = 0
        self.failures = 0
        self.dropped_records = 0
        #: Records the downstream rejected for good, by cause (``http 400``, ``grpc ...``).
        self.rejected: dict[str, int] = {}

    @property
    def queued_bytes(self) -> int:
        """Bytes of requests waiting."""
        return self._bytes

    def has_room(self, size: int) -> bool:
        """Whether a request of ``size`` bytes fits now."""
        return self._bytes + size <= self.max_bytes

    def put(self, raw: bytes, records: int) -> None:
        """Queue one request (its protobuf bytes) of ``records`` log records."""
        with self._cond:
            self._queue.append((raw, records))
            self._bytes += len(raw)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="tracescore-serve-logs",
                                                daemon=True)
                self._thread.start()
            self._cond.notify()

    def flush(self, timeout: float) -> bool:
        """Wait until everything queued went out, ``timeout`` seconds at most."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while self._queue or self._busy:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(left)
        return True

    def shutdown(self, timeout: float) -> None:
        """Flush within ``timeout``, then stop; what is still waiting is counted as dropped."""
        self.flush(timeout)
        with self._cond:
            self._closed = True
            self.dropped_records += sum(n for _, n in self._queue)
            if self._queue:
                logger.warning("tracescore serve: %d log records could not be forwarded before "
                               "the shutdown deadline", sum(n for _, n in self._queue))
            self._queue.clear()
            self._bytes = 0
            self._cond.notify_all()

    def _run(self) -> None:
        backoff = 0.0
        while True:
            with self._cond:
                while not self._queue and not self._closed:
                    self._cond.wait()
                if self._closed:
                    return
                raw, records = self._queue[0]
                self._busy = True
            verdict = self._send(raw)
            ok = verdict is True
            with self._cond:
                self._busy = False
                if verdict is not False and self._queue and self._queue[0][0] is raw:
                    self._queue.popleft()
                    self._bytes -= len(raw)
                    if ok:
                        self.forwarded_records += records
                    else:
                        self.dropped_records += records
                        first = verdict not in self.rejected
                        self.rejected[str(verdict)] = self.rejected.get(str(verdict), 0) \
                            + records
                        if first:
                            logger.error("tracescore serve: the downstream rejected %d log "
                                         "records for good (%s); dropped, not retried "
                                         "(logged once per cause)", records, verdict)
                    ok = True  # no backoff: the next request goes now
                self._cond.notify_all()
                if not ok:
                    self.failures += 1
                    backoff = min(_BACKOFF_MAX, backoff * 2 or _BACKOFF_FIRST)
                    self._cond.wait(backoff)
                else:
                    backoff = 0.0

    def _send(self, raw: bytes) -> bool | str:
        """True: sent; False: a retryable failure; a string: rejected for good (the cause)."""
        try:
            if self._send_fn is None:
                self._send_fn = self._grpc() if self.protocol == "grpc" else self._http()
            body = raw
            if self.redact:
                done = self._redacted
                if done is not None and done[0] is raw:
                    body = done[1]
                else:
                    with _redact.using(self.redactor):
                        body = redact_logs_request(raw)
                    self._redacted = (raw, body)
            result: bool | str = self._send_fn(body)
            return result
        except Exception:
            logger.warning("tracescore serve: forwarding log records to %s failed; retrying",
                           self.endpoint, exc_info=logger.isEnabledFor(logging.DEBUG))
            return False

    def _grpc(self) -> Any:
        import grpc  # type: ignore[import-untyped, unused-ignore]
        from opentelemetry.proto.collector.logs.v1 import logs_service_pb2_grpc

        from .decode import parse_logs
        from .exporter import grpc_error_is_retryable

        target = self.endpoint.split("://", 1)[-1]
        channel = (grpc.secure_channel(target, grpc.ssl_channel_credentials())
                   if self.endpoint.startswith("https://") else grpc.insecure_channel(target))
        stub = logs_service_pb2_grpc.LogsServiceStub(channel)  # type: ignore[no-untyped-call]
        metadata = list(self.headers.items())
        compression = grpc.Compression.Gzip if self.compression == "gzip" else None

        def send(raw: bytes) -> bool | str:
            try:
                stub.Export(parse_logs(raw), timeout=self.timeout, metadata=metadata,
                            compression=compression)
            except grpc.RpcError as exc:
                if grpc_error_is_retryable(exc):
                    raise
                return f"grpc {exc.code().name}"
            return True

        return send

    def _http(self) -> Any:
        import requests

        session = requests.Session()
        url = self.endpoint + "/v1/logs"
        headers = {"Content-Type": "application/x-protobuf", **self.headers}
        if self.compression == "gzip":
            headers["Content-Encoding"] = "gzip"

        def send(raw: bytes) -> bool | str:
            from .exporter import RETRYABLE_HTTP

            body = gzip.compress(raw, 1) if self.compression == "gzip" else raw
            response = session.post(url, data=body, headers=headers, timeout=self.timeout)
            if response.ok:
                return True
            if response.status_code in RETRYABLE_HTTP:
                return False
            return f"http {response.status_code}"

        return send


def redact_logs_request(raw: bytes) -> bytes:
    """An ``ExportLogsServiceRequest`` (protobuf bytes) with every string redacted
    (``tracescore._core.redact``): each log record's body and attributes at any depth (maps and
    arrays included), attribute names (a name holding a credential is redacted and its value
    becomes ``[REDACTED]``), values under secret names, the event name, and the resource's and
    the instrumentation scope's attributes and names. The same bytes when nothing changed; a
    request that cannot be parsed goes out as it came (the receiver validated it already).
    """
    from opentelemetry.proto.collector.logs.v1 import logs_service_pb2

    try:
        request = logs_service_pb2.ExportLogsServiceRequest.FromString(raw)
    except Exception:  # noqa: BLE001 - validated on intake: nothing to redact in what is not one
        return raw
    changed = False
    for resource_logs in request.resource_logs:
        changed |= _redact_pairs(resource_logs.resource.attributes)
        for scope_logs in resource_logs.scope_logs:
            scope = scope_logs.scope
            changed |= _redact_field(scope, "name") | _redact_field(scope, "version")
            changed |= _redact_pairs(scope.attributes)
            for record in scope_logs.log_records:
                changed |= _redact_field(record, "event_name")
                changed |= _redact_value(record.body, False)
                changed |= _redact_pairs(record.attributes)
    return request.SerializeToString() if changed else raw


def _redact_field(message: Any, field: str) -> bool:
    value = getattr(message, field)
    if not value:
        return False
    redacted = _redact.redact_name(value)
    if redacted == value:
        return False
    setattr(message, field, redacted)
    return True


def _redact_pairs(pairs: Any) -> bool:
    """Redact a repeated ``KeyValue`` in place; whether anything changed."""
    changed = False
    for pair in pairs:
        name = _redact.redact_name(pair.key) if pair.key else pair.key
        if name != pair.key:
            pair.key = name
            pair.value.Clear()
            pair.value.string_value = _redact.REDACTED
            changed = True
        else:
            changed |= _redact_value(pair.value, _redact.is_secret_key(pair.key))
    return changed


def _redact_value(value: Any, secret: bool) -> bool:
    """Redact an ``AnyValue`` in place (under a secret name: any text or structure becomes
    ``[REDACTED]``; numbers and booleans stay); whether anything changed."""
    kind = value.WhichOneof("value")
    if kind is None or kind in ("int_value", "double_value", "bool_value"):
        return False
    if secret:
        value.Clear()
        value.string_value = _redact.REDACTED
        return True
    if kind == "string_value":
        text = value.string_value
        redacted = _redact.redact_text(text)
        if redacted == text:
            return False
        value.string_value = redacted
        return True
    if kind == "bytes_value":
        text = value.bytes_value.decode("utf-8", errors="replace")
        redacted = _redact.redact_text(text)
        if redacted == text:
            return False
        value.bytes_value = redacted.encode("utf-8", errors="replace")
        return True
    if kind == "array_value":
        changed = False
        for item in value.array_value.values:
            changed |= _redact_value(item, False)
        return changed
    return _redact_pairs(value.kvlist_value.values)
