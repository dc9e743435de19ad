"""Issue 22, point 1 in ``tracescore serve``: received spans are redacted before they are
forwarded (or spooled); ``redaction: {foreign_spans: false}`` forwards them as received."""

from __future__ import annotations

from typing import Any

import pytest
from test_serve import _config, _send, _span
from test_serve_support import GATE, FullReceiver

from tracescore._serve import start

PASSWORD = "Sv7Pw2Rd9Xq4Lm1Kz6Bn"


@pytest.mark.parametrize("redact", [True, False])
def test_received_spans_are_redacted_before_they_are_forwarded(redact: bool) -> None:
    with FullReceiver() as receiver:
        extra = "" if redact else "redaction: {foreign_spans: false}"
        running = start(_config(receiver.endpoint, extra=extra), telemetry_enabled=False)
        try:
            span = _span(f"login with token {PASSWORD}", 0xABC, 0x1, attributes={
                "db.password": PASSWORD, "http.url": f"https://u:{PASSWORD}@h/x"})
            assert _send(running.grpc_port, [span]) is None
            assert receiver.received.wait_for(lambda s: len(s) == 1)
        finally:
            GATE.set()
            running.stop(10)
            GATE.clear()
        (got,) = receiver.received.spans
        raw: Any = receiver.received.raw_bytes()
        if redact:
            assert got.name == "login with token [REDACTED]"
            assert got.attributes == {"db.password": "[REDACTED]",
                                      "http.url": "https://u:[REDACTED]@h/x"}
            assert PASSWORD.encode() not in raw
        else:
            assert got.attributes["db.password"] == PASSWORD


@pytest.mark.parametrize("redact", [True, False])
def test_received_log_records_are_redacted_before_they_are_forwarded(redact: bool) -> None:
    # Instrumentations in EVENT_ONLY mode put message content in log records: a credential in
    # a body, an attribute (nested), an attribute name or the resource goes out redacted too.
    import grpc
    from opentelemetry.proto.collector.logs.v1 import logs_service_pb2, logs_service_pb2_grpc
    from opentelemetry.proto.common.v1 import common_pb2
    from opentelemetry.proto.logs.v1 import logs_pb2

    key = "sk-proj-Lg7Rc3Bd9Yq2Wm5Xn8Tz"
    disguised = key[:8] + "\u200b" + key[8:]

    def kv(name: str, value: Any) -> Any:
        if isinstance(value, dict):
            return common_pb2.KeyValue(key=name, value=common_pb2.AnyValue(
                kvlist_value=common_pb2.KeyValueList(values=[kv(k, v) for k, v in
                                                             value.items()])))
        return common_pb2.KeyValue(key=name, value=common_pb2.AnyValue(string_value=value))

    record = logs_pb2.LogRecord(event_name="gen_ai.user.message", trace_id=b"\x01" * 16,
                                attributes=[kv("gen_ai.message", {"content": f"use {key}",
                                                                  "api_key": "Kx1Kx2Kx3Kx4"}),
                                            kv(key, "filed under a key"),
                                            kv("db.password", PASSWORD)])
    record.body.string_value = f"my key is {disguised}, the password is {PASSWORD}"
    request = logs_service_pb2.ExportLogsServiceRequest(resource_logs=[logs_pb2.ResourceLogs(
        resource={"attributes": [kv("deploy.token", PASSWORD), kv("team", "checkout")]},
        scope_logs=[logs_pb2.ScopeLogs(log_records=[record])])])
    with FullReceiver() as receiver:
        extra = "" if redact else "redaction: {foreign_spans: false}"
        running = start(_config(receiver.endpoint, extra=extra), telemetry_enabled=False)
        try:
            with grpc.insecure_channel(f"127.0.0.1:{running.grpc_port}") as channel:
                logs_service_pb2_grpc.LogsServiceStub(channel).Export(request, timeout=10)
            assert receiver.wait(lambda: len(receiver.log_bodies()) == 1)
        finally:
            GATE.set()
            running.stop(10)
            GATE.clear()
    (forwarded,) = receiver.logs
    raw = forwarded.SerializeToString()
    if not redact:
        assert forwarded == request
        return
    (body,) = receiver.log_bodies()
    assert body == "my key is [REDACTED], the password is [REDACTED]"
    (got,) = forwarded.resource_logs[0].scope_logs[0].log_records
    attributes = {a.key: a.value for a in got.attributes}
    message = {a.key: a.value.string_value
               for a in attributes["gen_ai.message"].kvlist_value.values}
    assert message == {"content": "use [REDACTED]", "api_key": "[REDACTED]"}
    assert attributes["[REDACTED]"].string_value == "[REDACTED]"
    assert attributes["db.password"].string_value == "[REDACTED]"
    resource = {a.key: a.value.string_value for a in forwarded.resource_logs[0].resource.attributes}
    assert resource == {"deploy.token": "[REDACTED]", "team": "checkout"}
    for secret in (key, disguised, PASSWORD, "Kx1Kx2Kx3Kx4", key[8:]):
        assert secret.encode() not in raw
