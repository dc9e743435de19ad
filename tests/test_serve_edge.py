"""``tracescore serve`` at the network edge (issue 21): every attack of the issue, garbage,
truncated, deeply nested and huge bodies on both protocols; TLS, mutual TLS and bearer tokens;
permanent downstream errors; admission that charges what the queue charges.

Each test talks to a real service on loopback (aiohttp and grpcio receivers) with a decoding
OTLP receiver downstream, over raw sockets where the attack is in the HTTP framing.
"""

from __future__ import annotations

import gzip
import json
import logging
import os
import socket
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from test_serve import _agent, _span
from test_serve_support import GATE, FullReceiver
from tls_certs import Pki, make_pki

from tracescore._serve import parse, start
from tracescore._serve.app import RunningService

TESTS = Path(__file__).parent
MIB = 1024 * 1024


def _config(endpoint: str, receivers: str = "", extra: str = "", rules: str = "[]") -> Any:
    return parse(f"""
exporter: {{endpoint: "{endpoint}", protocol: grpc, compression: none}}
receivers: {{grpc: {{endpoint: "127.0.0.1:0"}}, http: {{endpoint: "127.0.0.1:0"}}{receivers}}}
metrics_interval: 0.2
limits: {{flush_timeout: 10}}
rules: {rules}
{extra}
""", toml=False)


@pytest.fixture
def receiver() -> Iterator[FullReceiver]:
    with FullReceiver() as recv:
        yield recv


@pytest.fixture
def serve(receiver: FullReceiver) -> Iterator[Any]:
    started: list[RunningService] = []

    def make(receivers: str = "", extra: str = "", rules: str = "[]",
             **options: Any) -> RunningService:
        options.setdefault("telemetry_enabled", False)
        running = start(_config(receiver.endpoint, receivers, extra, rules), **options)
        started.append(running)
        return running

    yield make
    GATE.set()
    for running in started:
        running.stop(10)
    GATE.clear()


def _request(spans: list[Any]) -> Any:
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

    return encode_spans(spans)


def _body(spans: list[Any]) -> bytes:
    return bytes(_request(spans).SerializeToString())


def _raw_http(port: int, head: bytes, body: bytes = b"", timeout: float = 30.0) -> bytes:
    """Send ``head`` (request line and headers, CRLF-terminated) and ``body`` on a fresh
    connection; return everything the server sent until it closed or went quiet."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(head + body)
        chunks = []
        try:
            while True:
                data = sock.recv(65536)
                if not data:
                    break
                chunks.append(data)
                if b"\r\n\r\n" in b"".join(chunks):
                    text = b"".join(chunks)
                    head_end = text.index(b"\r\n\r\n") + 4
                    length = 0
                    for line in text[:head_end].split(b"\r\n"):
                        if line.lower().startswith(b"content-length:"):
                            length = int(line.split(b":", 1)[1])
                    if len(text) >= head_end + length:
                        break
        except (TimeoutError, ConnectionResetError):
            pass
    return b"".join(chunks)


def _status(response: bytes) -> int:
    return int(response.split(b" ", 2)[1])


def _post(port: int, body: bytes, headers: dict[str, str] | None = None,
          path: str = "/v1/traces", scheme: str = "http",
          context: ssl.SSLContext | None = None) -> tuple[int, bytes, dict[str, str]]:
    req = urllib.request.Request(f"{scheme}://127.0.0.1:{port}{path}", data=body,
                                 method="POST", headers={"Content-Type": "application/x-protobuf",
                                                         **(headers or {})})
    try:
        with urllib.request.urlopen(req, timeout=30, context=context) as resp:
            return resp.status, resp.read(), dict(resp.headers)
    except urllib.error.HTTPError as exc:
        with exc:
            return exc.code, exc.read(), dict(exc.headers)


def _grpc_export(port: int, payload: bytes, *, compression: Any = None,
                 credentials: Any = None, metadata: Any = None,
                 method: str = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"
                 ) -> Any:
    """Send raw bytes as the request message; returns the RpcError or None."""
    import grpc

    target = f"127.0.0.1:{port}"
    options = [("grpc.max_send_message_length", 2 ** 31 - 1)]
    channel = (grpc.secure_channel(target, credentials, options=options
                                   + [("grpc.ssl_target_name_override", "127.0.0.1")])
               if credentials is not None else grpc.insecure_channel(target, options=options))
    with channel:
        call = channel.unary_unary(method, request_serializer=None,
                                   response_deserializer=None)
        try:
            call(payload, timeout=30, compression=compression, metadata=metadata)
        except grpc.RpcError as exc:
            return exc
    return None


def _no_traceback(caplog: pytest.LogCaptureFixture) -> None:
    for record in caplog.records:
        assert record.exc_info is None and "Traceback" not in record.getMessage(), \
            record.getMessage()


def _bomb(size: int, encoding: str) -> bytes:
    zeros = bytes(MIB)
    if encoding == "gzip":
        compressor = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    else:
        compressor = zlib.compressobj(9, zlib.DEFLATED, zlib.MAX_WBITS)
    parts = [compressor.compress(zeros) for _ in range(size // MIB)]
    parts.append(compressor.flush())
    return b"".join(parts)


def _nested(depth: int) -> bytes:
    """An ExportTraceServiceRequest whose one span carries an attribute nested ``depth``
    kvlists deep (protobuf's parser stops at 100 by default)."""
    from opentelemetry.proto.common.v1 import common_pb2

    request = _request([_span("nested", 0x7E, 0x1)])
    value = common_pb2.AnyValue(string_value="bottom")
    for _ in range(depth):
        outer = common_pb2.AnyValue()
        outer.kvlist_value.values.add(key="k").value.CopyFrom(value)
        value = outer
    attr = request.resource_spans[0].scope_spans[0].spans[0].attributes.add(key="deep")
    attr.value.CopyFrom(value)
    return bytes(request.SerializeToString())


# -- exposure ------------------------------------------------------------------------------------
def test_defaults_bind_loopback_and_deploy_files_set_the_address(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRACESCORE_SERVE_TOKEN", "t")
    config = parse('exporter: {endpoint: "http://127.0.0.1:1"}', toml=False)
    assert config.receivers.grpc is not None and config.receivers.http is not None
    assert config.receivers.grpc.host == "127.0.0.1" and config.receivers.http.host == "127.0.0.1"
    assert config.receivers.tls is None and config.receivers.auth is None
    deployed = parse((TESTS.parent / "deploy" / "tracescore-serve.yaml").read_text(), toml=False)
    assert deployed.receivers.grpc is not None and deployed.receivers.grpc.host == "0.0.0.0"
    assert deployed.receivers.admin is not None  # probes on their own port


def test_bearer_token_guards_both_receivers_and_the_stats(
        serve: Any, receiver: FullReceiver, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setenv("TS_EDGE_TOKEN", "s3cret-token")
    running = serve(', auth: {token: "${TS_EDGE_TOKEN}"}')
    body = _body([_span("authed", 0xA1, 0x1)])
    assert _post(running.http_port, body)[0] == 401
    assert _post(running.http_port, body, {"Authorization": "Bearer wrong"})[0] == 401
    assert _post(running.http_port, body, {"Authorization": "Basic s3cret-token"})[0] == 401
    assert _grpc_export(running.grpc_port, body).code().name == "UNAUTHENTICATED"
    assert _grpc_export(running.grpc_port, body,
                        metadata=[("authorization", "Bearer nope")]).code().name == \
        "UNAUTHENTICATED"
    for path in ("/stats", "/healthz", "/readyz", "/metrics"):
        req = urllib.request.Request(f"http://127.0.0.1:{running.http_port}{path}")
        with pytest.raises(urllib.error.HTTPError) as denied:
            urllib.request.urlopen(req, timeout=10)
        assert denied.value.code == 401
        denied.value.close()
    assert running.service.snapshot()["spans_received"] == 0
    assert _post(running.http_port, body, {"Authorization": "Bearer s3cret-token"})[0] == 200
    assert _grpc_export(running.grpc_port, _body([_span("authed-grpc", 0xA2, 0x1)]),
                        metadata=[("authorization", "Bearer s3cret-token")]) is None
    assert receiver.received.wait_for(lambda s: len(s) == 2, 30)
    req = urllib.request.Request(f"http://127.0.0.1:{running.http_port}/stats",
                                 headers={"Authorization": "Bearer s3cret-token"})
    with urllib.request.urlopen(req, timeout=10) as resp:
        stats = json.loads(resp.read())
    assert stats["requests_invalid"]["unauthenticated"] == 5
    text = caplog.text
    assert "s3cret-token" not in text
    _no_traceback(caplog)


def test_token_file_and_admin_port(serve: Any, receiver: FullReceiver, tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("from-a-file\n")
    running = serve(f', auth: {{token_file: "{token}"}}, admin: {{endpoint: "127.0.0.1:0"}}')
    assert running.admin_port
    # Probes and the scraper: no token on the admin port; the OTLP port no longer serves them.
    for path in ("/healthz", "/readyz", "/stats", "/metrics"):
        with urllib.request.urlopen(f"http://127.0.0.1:{running.admin_port}{path}",
                                    timeout=10) as resp:
            assert resp.status == 200
    with pytest.raises(urllib.error.HTTPError) as missing:
        urllib.request.urlopen(f"http://127.0.0.1:{running.http_port}/stats", timeout=10)
    assert missing.value.code in (401, 404)
    missing.value.close()
    assert _post(running.http_port, _body([_span("filed", 0xA3, 0x1)]),
                 {"Authorization": "Bearer from-a-file"})[0] == 200
    with urllib.request.urlopen(f"http://127.0.0.1:{running.admin_port}/metrics",
                                timeout=10) as resp:
        metrics = resp.read().decode()
    for name in ("tracescore_serve_spans_deferred", "tracescore_serve_spans_held",
                 "tracescore_serve_export_queued", "tracescore_serve_requests_rejected_total"):
        assert f"# TYPE {name} " in metrics


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    pytest.importorskip("cryptography")
    return make_pki(tmp_path_factory.mktemp("pki"))


def test_tls_on_both_receivers(serve: Any, receiver: FullReceiver, pki: Pki) -> None:
    import grpc

    running = serve(f', tls: {{cert_file: "{pki.server_cert}", key_file: "{pki.server_key}"}}')
    body = _body([_span("over-tls", 0xB1, 0x1)])
    trusted = ssl.create_default_context(cafile=str(pki.ca))
    assert _post(running.http_port, body, scheme="https", context=trusted)[0] == 200
    # Plain HTTP on the TLS port gets nothing taken.
    reply = _raw_http(running.http_port, b"POST /v1/traces HTTP/1.1\r\nHost: x\r\n"
                      b"Content-Type: application/x-protobuf\r\nContent-Length: "
                      + str(len(body)).encode() + b"\r\n\r\n", body, timeout=10)
    assert not reply.startswith(b"HTTP/1.1 200")
    untrusting = ssl.create_default_context(cafile=str(pki.other_ca))
    with pytest.raises(urllib.error.URLError):
        _post(running.http_port, body, scheme="https", context=untrusting)
    creds = grpc.ssl_channel_credentials(root_certificates=pki.ca.read_bytes())
    assert _grpc_export(running.grpc_port, _body([_span("grpc-tls", 0xB2, 0x1)]),
                        credentials=creds) is None
    assert _grpc_export(running.grpc_port, body).code().name == "UNAVAILABLE"  # plaintext
    assert receiver.received.wait_for(lambda s: len(s) == 2, 30)
    assert sorted(s.name for s in receiver.received.spans) == ["grpc-tls", "over-tls"]


def test_mutual_tls_requires_a_client_certificate(serve: Any, receiver: FullReceiver,
                                                  pki: Pki) -> None:
    import grpc

    running = serve(f', tls: {{cert_file: "{pki.server_cert}", key_file: "{pki.server_key}", '
                    f'client_ca_file: "{pki.ca}"}}')
    body = _body([_span("mtls", 0xB3, 0x1)])
    anonymous = ssl.create_default_context(cafile=str(pki.ca))
    with pytest.raises((urllib.error.URLError, ConnectionError, ssl.SSLError)):
        _post(running.http_port, body, scheme="https", context=anonymous)
    client = ssl.create_default_context(cafile=str(pki.ca))
    client.load_cert_chain(str(pki.client_cert), str(pki.client_key))
    assert _post(running.http_port, body, scheme="https", context=client)[0] == 200
    no_cert = grpc.ssl_channel_credentials(root_certificates=pki.ca.read_bytes())
    assert _grpc_export(running.grpc_port, body, credentials=no_cert) is not None
    with_cert = grpc.ssl_channel_credentials(
        root_certificates=pki.ca.read_bytes(), private_key=pki.client_key.read_bytes(),
        certificate_chain=pki.client_cert.read_bytes())
    assert _grpc_export(running.grpc_port, _body([_span("mtls-grpc", 0xB4, 0x1)]),
                        credentials=with_cert) is None
    assert receiver.received.wait_for(lambda s: len(s) == 2, 30)


# -- HTTP framing ----------------------------------------------------------------------------------
def test_gzip_and_deflate_bombs_are_refused_while_inflating(
        serve: Any, receiver: FullReceiver, caplog: pytest.LogCaptureFixture) -> None:
    running = serve(", max_request_bytes: 1048576")
    for encoding in ("gzip", "deflate"):
        bomb = _bomb(64 * MIB, encoding)  # ~64 KiB that inflate to 64 MiB
        assert len(bomb) < MIB
        code, body, _ = _post(running.http_port, bomb, {"Content-Encoding": encoding})
        assert code == 413, (encoding, code)
        assert b"inflates to more than 1048576 bytes" in body
    # The same on gRPC: grpcio inflates within max_receive_message_length.
    import grpc

    error = _grpc_export(running.grpc_port, gzip.decompress(_bomb(4 * MIB, "gzip")),
                         compression=grpc.Compression.Gzip)
    assert error is not None and error.code().name == "RESOURCE_EXHAUSTED"
    assert running.service.snapshot()["spans_received"] == 0
    assert running.service.snapshot()["requests_invalid"]["inflated_too_large"] == 2
    _no_traceback(caplog)


def test_bad_content_lengths_get_400(serve: Any, receiver: FullReceiver,
                                     caplog: pytest.LogCaptureFixture) -> None:
    running = serve()
    body = _body([_span("framed", 0xC1, 0x1)])
    for value in (b"-1", b"abc", b"12, 13", b"99999999999999999999999"):
        reply = _raw_http(running.http_port, b"POST /v1/traces HTTP/1.1\r\nHost: x\r\n"
                          b"Content-Type: application/x-protobuf\r\nContent-Length: " + value
                          + b"\r\n\r\n", body)
        assert reply and _status(reply) in (400, 413), (value, reply[:80])
    assert running.service.snapshot()["spans_received"] == 0
    _no_traceback(caplog)


def test_chunked_body_is_read(serve: Any, receiver: FullReceiver) -> None:
    running = serve()
    body = _body([_span(f"chunk{i}", 0xC2, i + 1) for i in range(3)])
    chunks = b"".join(b"%x\r\n" % len(body[i:i + 50]) + body[i:i + 50] + b"\r\n"
                      for i in range(0, len(body), 50)) + b"0\r\n\r\n"
    reply = _raw_http(running.http_port, b"POST /v1/traces HTTP/1.1\r\nHost: x\r\n"
                      b"Content-Type: application/x-protobuf\r\n"
                      b"Transfer-Encoding: chunked\r\n\r\n", chunks)
    assert _status(reply) == 200
    assert receiver.received.wait_for(lambda s: len(s) == 3, 30)
    # A chunked body past the limit: 413 while reading, the rest never read.
    running2 = serve(", max_request_bytes: 65536")
    big = b"".join(b"10000\r\n" + bytes(65536) + b"\r\n" for _ in range(4)) + b"0\r\n\r\n"
    reply = _raw_http(running2.http_port, b"POST /v1/traces HTTP/1.1\r\nHost: x\r\n"
                      b"Transfer-Encoding: chunked\r\n\r\n", big)
    assert _status(reply) == 413


def test_slow_headers_are_cut_off_and_the_backlog_is_normal(serve: Any,
                                                            receiver: FullReceiver) -> None:
    running = serve(", header_timeout: 0.5, backlog: 512")
    with socket.create_connection(("127.0.0.1", running.http_port), timeout=60) as sock:
        sock.sendall(b"POST /v1/traces HTTP/1.1\r\nHost: x\r\n")  # never finished
        assert sock.recv(1024) == b""  # closed by the server (the header timeout)
    listening = subprocess.run(["ss", "-ltnH", f"sport = :{running.http_port}"],
                               capture_output=True, text=True, check=False).stdout.split()
    if listening:  # State Recv-Q Send-Q ...: Send-Q of a listening socket is its backlog
        assert int(listening[2]) == 512


def test_many_slow_connections_take_no_thread_each_and_do_not_block_others(
        serve: Any, receiver: FullReceiver) -> None:
    import threading

    running = serve(", header_timeout: 60")
    threads_before = threading.active_count()
    sockets = []
    try:
        for _ in range(300):
            sock = socket.create_connection(("127.0.0.1", running.http_port), timeout=30)
            sock.sendall(b"POST /v1/traces HTTP/1.1\r\nHost: x\r\n")  # and nothing more
            sockets.append(sock)
        assert _post(running.http_port, _body([_span("through", 0xC3, 0x1)]))[0] == 200
        assert receiver.received.wait_for(lambda s: len(s) == 1, 30)
        # The standard library's server held a thread per connection (800 for 800 clients).
        assert threading.active_count() - threads_before < 20
    finally:
        for sock in sockets:
            sock.close()


def test_slow_body_gets_408(serve: Any, receiver: FullReceiver) -> None:
    running = serve(", body_timeout: 0.5")
    with socket.create_connection(("127.0.0.1", running.http_port), timeout=60) as sock:
        sock.sendall(b"POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\nab")
        reply = sock.recv(1024)
    assert _status(reply) == 408


# -- malformed and invalid requests, both protocols --------------------------------------------
def _ids_request(trace_id: bytes, span_id: bytes, parent: bytes = b"") -> bytes:
    request = _request([_span("good", 0xD1, 0x1), _span("bad", 0xD1, 0x2)])
    bad = request.resource_spans[0].scope_spans[0].spans[1]
    bad.trace_id, bad.span_id, bad.parent_span_id = trace_id, span_id, parent
    return bytes(request.SerializeToString())


@pytest.mark.parametrize("case", ["span_id_20", "trace_id_0", "trace_id_3", "parent_5",
                                  "duplicate", "kind", "status"])
def test_invalid_spans_refuse_the_request_naming_the_span(
        serve: Any, receiver: FullReceiver, case: str,
        caplog: pytest.LogCaptureFixture) -> None:
    running = serve()
    trace = (0xD1).to_bytes(16, "big")
    if case == "duplicate":
        request = _request([_agent(0xD2, 0x7, i) for i in range(5)])
        payload = bytes(request.SerializeToString())
        expected = "same span_id"
    elif case in ("kind", "status"):
        request = _request([_span("good", 0xD1, 0x1), _span("bad", 0xD1, 0x2)])
        bad = request.resource_spans[0].scope_spans[0].spans[1]
        if case == "kind":
            bad.kind = 9
        else:
            bad.status.code = 7
        payload = bytes(request.SerializeToString())
        expected = "is not a SpanKind" if case == "kind" else "is not a StatusCode"
    else:
        payload = {"span_id_20": _ids_request(trace, b"\x01" * 20),
                   "trace_id_0": _ids_request(b"", b"\x01" * 8),
                   "trace_id_3": _ids_request(b"\x01\x02\x03", b"\x01" * 8),
                   "parent_5": _ids_request(trace, b"\x02" * 8, b"\x05" * 5)}[case]
        expected = {"span_id_20": "span_id has 20 bytes", "trace_id_0": "trace_id has 0 bytes",
                    "trace_id_3": "trace_id has 3 bytes",
                    "parent_5": "parent_span_id has 5 bytes"}[case]
    code, body, _ = _post(running.http_port, payload)
    assert code == 400
    from google.rpc import status_pb2

    message = status_pb2.Status.FromString(body).message
    assert expected in message and "spans[" in message
    error = _grpc_export(running.grpc_port, payload)
    assert error is not None and error.code().name == "INVALID_ARGUMENT"
    assert expected in error.details()
    assert running.service.snapshot()["spans_received"] == 0  # nothing of it was taken
    # The good spans, sent alone, go through.
    assert _post(running.http_port, _body([_span("good", 0xD1, 0x1)]))[0] == 200
    assert receiver.received.wait_for(lambda s: [x.name for x in s] == ["good"], 30)
    _no_traceback(caplog)
    # One line per refused request, at most one a second per reason (the next says how many
    # it stood for): the HTTP one, and the gRPC one unless it came within that second.
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert 1 <= len(warnings) <= 2 and all(expected in w for w in warnings), warnings


@pytest.mark.parametrize("case", ["garbage", "truncated", "nested", "json", "empty_gzip"])
def test_malformed_bodies_get_400_on_both_protocols(
        serve: Any, receiver: FullReceiver, case: str,
        caplog: pytest.LogCaptureFixture) -> None:
    running = serve()
    good = _body([_span("whole", 0xE1, 0x1, attributes={"k": "v" * 200})])
    payload = {"garbage": os.urandom(4096), "truncated": good[:len(good) // 2],
               "nested": _nested(150), "json": b'{"resourceSpans": []}',
               "empty_gzip": b"\x1f\x8b\x08\x00"}[case]
    headers = {"Content-Type": "application/json"} if case == "json" else \
        {"Content-Encoding": "gzip"} if case == "empty_gzip" else {}
    code, _, _ = _post(running.http_port, payload, headers)
    assert code == (415 if case == "json" else 400), code
    if case not in ("json", "empty_gzip"):
        error = _grpc_export(running.grpc_port, payload)
        assert error is not None and error.code().name == "INVALID_ARGUMENT", error
    assert running.service.snapshot()["spans_received"] == 0
    _no_traceback(caplog)


def test_a_nested_attribute_within_the_limit_is_forwarded(serve: Any,
                                                          receiver: FullReceiver) -> None:
    running = serve()
    assert _post(running.http_port, _nested(25))[0] == 200
    assert receiver.received.wait_for(lambda s: [x.name for x in s] == ["nested"], 30)


def test_huge_bodies_get_413_on_both_protocols(serve: Any, receiver: FullReceiver,
                                               caplog: pytest.LogCaptureFixture) -> None:
    running = serve(", max_request_bytes: 262144")
    huge = _body([_span("huge", 0xE2, 0x1, attributes={"blob": "x" * 300_000})])
    assert _post(running.http_port, huge)[0] == 413
    error = _grpc_export(running.grpc_port, huge)
    assert error is not None and error.code().name == "RESOURCE_EXHAUSTED"
    # No RetryInfo: the OTLP specification makes RESOURCE_EXHAUSTED without it final.
    assert "grpc-status-details-bin" not in dict(error.trailing_metadata() or ())
    assert running.service.snapshot()["spans_received"] == 0
    _no_traceback(caplog)


# -- admission charges what the queue charges ---------------------------------------------------
def test_many_tiny_spans_are_refused_whole_or_forwarded_whole(
        serve: Any, receiver: FullReceiver) -> None:
    # 1 MiB export queue, high water 0.5: 512 KiB for a request's spans, which the queue
    # charges ~1.1 KiB each however small they are on the wire.
    running = serve(extra="export: {queue_bytes: 1048576}")
    tiny = [_span("t", 0xF1, i + 1) for i in range(1000)]  # ~70 KiB on the wire
    code, body, _ = _post(running.http_port, _body(tiny))
    assert code == 413
    from google.rpc import status_pb2

    assert "send smaller batches" in status_pb2.Status.FromString(body).message
    some = [_span("t", 0xF2, i + 1) for i in range(300)]
    assert _post(running.http_port, _body(some))[0] == 200
    assert receiver.received.wait_for(lambda s: len(s) == 300, 60)
    assert running.service.export.force_flush(30_000)  # counted once the exporter returned
    stats = running.service.snapshot()
    assert stats["spans_dropped"] == {} and stats["spans_forwarded"] == 300


# -- permanent downstream errors ----------------------------------------------------------------
def test_a_batch_the_downstream_rejects_for_good_is_dropped_and_never_blocks_admission(
        serve: Any, receiver: FullReceiver, caplog: pytest.LogCaptureFixture) -> None:
    receiver.reject_name = "poison"
    running = serve(extra="export: {max_batch_spans: 1}")
    assert _post(running.http_port, _body([_span("poison", 0xF3, 0x1)]))[0] == 200
    assert running.service.export.force_flush(30_000)
    for i in range(5):
        assert _post(running.http_port, _body([_span(f"fine{i}", 0xF4, i + 1)]))[0] == 200
    assert receiver.received.wait_for(lambda s: len(s) == 5, 30)
    assert running.service.export.force_flush(30_000)
    stats = running.service.snapshot()
    assert stats["spans_dropped"] == {"rejected": 1}
    assert stats["spans_rejected_downstream"] == {"grpc INVALID_ARGUMENT": 1}
    assert stats["rejected"] == {} and stats["spool_batches"] == 0
    assert stats["spans_forwarded"] == 5
    rejections = [r for r in caplog.records if "rejected" in r.getMessage()
                  and r.levelno >= logging.ERROR]
    assert len(rejections) == 1


def test_stats_file_healthy_exports_apart_from_drops(serve: Any, receiver: FullReceiver) -> None:
    running = serve()
    assert _post(running.http_port, _body([_span("ok", 0xF5, 0x1)]))[0] == 200
    assert receiver.received.wait_for(lambda s: len(s) == 1, 30)
    assert running.service.export.force_flush(30_000)
    stats = running.service.snapshot()
    assert stats["spans_forwarded"] == 1 and "exported" not in stats["spans_dropped"]


# -- memory under attack -------------------------------------------------------------------------
def _status_of(port: int, body: bytes, headers: dict[str, str]) -> int:
    return _post(port, body, headers)[0]


def _raw_attack(port: int, parts: list[bytes]) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=120) as sock:
        try:
            for part in parts:
                sock.sendall(part)
        except OSError:
            pass
        try:
            return sock.recv(100)[:12]
        except OSError as exc:
            return repr(exc).encode()


def _grpc_attack(port: int, payload: bytes, compression: Any) -> str:
    error = _grpc_export(port, payload, compression=compression)
    return "ok" if error is None else str(error.code().name)


def _memory(pid: int) -> tuple[int, int]:
    """(VmRSS, VmHWM) in bytes."""
    values = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, rest = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            values[key] = int(rest.split()[0]) * 1024
    return values["VmRSS"], values["VmHWM"]


@pytest.mark.skipif(not Path("/proc/self/clear_refs").exists(), reason="needs /proc")
def test_attacks_keep_peak_memory_under_twice_the_request_bound(tmp_path: Path) -> None:
    """Each attack in turn against a replica in its own process, its peak resident memory
    (VmHWM, reset before each through /proc/PID/clear_refs) against its resident memory just
    before: under twice ``max_request_bytes`` (16 MiB, the default)."""
    import grpc

    limit = 16 * MIB
    head = b"POST /v1/traces HTTP/1.1\r\nHost: x\r\n"
    attacks: list[tuple[str, Any, Any]] = [
        # 200 MiB inflated is 12 times the bound: an unbounded inflate would show a peak far
        # over twice the bound, as with 1000 MiB, whose bombs took 27 s to build under load.
        ("gzip bomb, 200 MiB inflated", lambda h, g: _status_of(
            h, _bomb(200 * MIB, "gzip"), {"Content-Encoding": "gzip"}), 413),
        ("deflate bomb", lambda h, g: _status_of(
            h, _bomb(200 * MIB, "deflate"), {"Content-Encoding": "deflate"}), 413),
        ("4x the bound, Content-Length", lambda h, g: _status_of(h, bytes(4 * limit), {}), 413),
        ("Content-Length: -1", lambda h, g: _raw_attack(
            h, [head + b"Content-Length: -1\r\n\r\n", bytes(limit)]).split()[1], b"400"),
        ("chunked, 4x the bound", lambda h, g: _raw_attack(
            h, [head + b"Transfer-Encoding: chunked\r\n\r\n"]
            + [b"10000\r\n" + bytes(65536) + b"\r\n"] * (4 * limit // 65536)).split()[1],
         b"413"),
        ("gRPC gzip bomb, 200 MiB", lambda h, g: _grpc_attack(
            g, bytes(200 * MIB), grpc.Compression.Gzip), "RESOURCE_EXHAUSTED"),
        ("gRPC 4x the bound", lambda h, g: _grpc_attack(g, bytes(4 * limit), None),
         "RESOURCE_EXHAUSTED"),
        ("garbage at the bound", lambda h, g: _status_of(h, os.urandom(limit - 1024), {}), 400),
    ]
    with FullReceiver() as downstream:
        from test_serve_collector import free_port, wait_http

        grpc_port, http_port = free_port(), free_port()
        config = tmp_path / "serve.yaml"
        config.write_text(f"""
exporter: {{endpoint: "{downstream.endpoint}", protocol: grpc, compression: none}}
receivers: {{grpc: {{endpoint: "127.0.0.1:{grpc_port}"}},
             http: {{endpoint: "127.0.0.1:{http_port}"}}, max_request_bytes: {limit}}}
rules: []
""")
        log = tmp_path / "serve.log"
        with open(log, "wb") as out:
            proc = subprocess.Popen([sys.executable, "-m", "tracescore", "serve", "--config",
                                     str(config)], stdout=out, stderr=subprocess.STDOUT,
                                    env={**os.environ, "LITELLM_OFFLINE_MODE": "true"})
        peaks = {}
        try:
            wait_http(f"http://127.0.0.1:{http_port}/readyz", proc=proc)
            assert _post(http_port, _body([_span("warm", 0x1, 0x1)]))[0] == 200
            assert _grpc_export(grpc_port, _body([_span("warm", 0x1, 0x2)])) is None
            for name, attack, expected in attacks:
                before, _ = _memory(proc.pid)
                Path(f"/proc/{proc.pid}/clear_refs").write_text("5")  # resets VmHWM
                assert attack(http_port, grpc_port) == expected, name
                peaks[name] = _memory(proc.pid)[1] - before
            assert proc.poll() is None  # still serving
            assert _post(http_port, _body([_span("after", 0x2, 0x1)]))[0] == 200
            assert downstream.received.wait_for(lambda s: len(s) == 3, 30)
        finally:
            proc.terminate()
            proc.wait(60)
    print({name: f"{peak / MIB:.1f} MiB" for name, peak in peaks.items()})
    assert all(peak < 2 * limit for peak in peaks.values()), peaks
    assert "Traceback" not in log.read_text()


# -- forward_first -------------------------------------------------------------------------------
def test_forward_first_forwards_every_span_before_answering_and_sends_scores_after(
        serve: Any, receiver: FullReceiver) -> None:
    from test_serve import _retrieval
    from test_serve_support import expected_score

    rules = '[{factory: "test_serve_support:grounding_scorer", on: agent}]'
    running = serve(extra="mode: forward_first\n"
                    "trace: {idle: 60, settle_after_root: 60, max_wait: 120}", rules=rules)
    agent, retrieval = _agent(0x5A, 0x1, 5), _retrieval(0x5A, 0x2, 0x1, 5)
    assert _post(running.http_port, _body([agent, retrieval]))[0] == 200
    # Answered only once both spans were handed downstream: the scored one too, although
    # its trace waits a minute to complete.
    assert running.service.export.wait_settled(running.service.export.mark(), 0)
    assert receiver.received.wait_for(lambda s: len(s) == 2, 30)
    assert running.service.snapshot()["deferred_spans"] == 1
    assert all(not s.events for s in receiver.received.spans)
    assert running.stop(30)  # the drain completes the trace and scores it
    spans = receiver.received.spans
    carriers = [s for s in spans if s.name == "evaluation grounding"]
    assert len(spans) == 3 and len(carriers) == 1, [s.name for s in spans]
    carrier = carriers[0]
    assert carrier.parent_span_id == f"{0x1:016x}" and carrier.trace_id == f"{0x5A:032x}"
    assert carrier.events[0][1]["gen_ai.evaluation.score.value"] == expected_score(5)
    assert carrier.attributes["tracescore.score.grounding"] == expected_score(5)
    assert sorted(s.name for s in spans if s is not carrier) == ["invoke_agent answer",
                                                                 "retrieval search"]


def test_sigterm_drain_waits_for_waiting_traces_to_complete(serve: Any,
                                                            receiver: FullReceiver) -> None:
    """The drain turns the replica unready but still takes requests until the traces with
    spans waiting are complete: the late retrieval of a trace whose agent span waits arrives
    during the drain and the score uses its documents (before: refused with 503, and the agent
    span scored without them)."""
    import threading

    from test_serve import _retrieval
    from test_serve_support import expected_score, scores_by_trace

    now = [1000.0]
    rules = '[{factory: "test_serve_support:grounding_scorer", on: agent}]'
    running = serve(extra="trace: {idle: 5, settle_after_root: 3, max_wait: 60}", rules=rules,
                    settle_clock=lambda: now[0])
    assert _post(running.http_port, _body([_agent(0x6B, 0x1, 7)]))[0] == 200
    assert running.service.snapshot()["deferred_spans"] == 1
    stopped: list[bool] = []
    stopper = threading.Thread(target=lambda: stopped.append(running.stop(30)))
    stopper.start()
    deadline = time.monotonic() + 30
    while running.service.ready() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not running.service.ready()
    assert urllib.request.urlopen(  # still unready, not gone
        f"http://127.0.0.1:{running.http_port}/healthz", timeout=10).status == 200
    assert _post(running.http_port, _body([_retrieval(0x6B, 0x2, 0x1, 7)]))[0] == 200
    now[0] += 4  # the trace's root came 4 s ago: complete
    stopper.join(60)
    assert stopped == [True]
    assert scores_by_trace(receiver.received.spans) == {f"{0x6B:032x}": [expected_score(7)]}


# -- serve --check ---------------------------------------------------------------------------------
def test_check_fails_an_llm_rule_without_a_judge_and_lists_every_problem(
        tmp_path: Path) -> None:
    config = tmp_path / "serve.yaml"
    config.write_text('exporter: {endpoint: "http://127.0.0.1:1"}\n'
                      "rules:\n"
                      "  - scorer: faithfulness\n    on: agent\n"
                      "  - scorer: nope\n    on: agent\n"
                      "  - scorer: content-similarity\n    on: agent\n    sample_rate: 0.5\n"
                      "  - factory: 'no_such_module:make'\n")
    env = {k: v for k, v in os.environ.items() if k != "TRACESCORE_JUDGE_MODEL"}
    env["PYTHONPATH"] = str(TESTS)
    result = subprocess.run([sys.executable, "-m", "tracescore", "serve", "--config",
                             str(config), "--check"], capture_output=True, text=True, env=env,
                            timeout=120)
    assert result.returncode == 2, result.stdout
    err = result.stderr
    assert "3 invalid rule(s)" in err, err
    assert "rules[0].scorer: 'faithfulness' is judged by an LLM and no judge is configured" in err
    assert "rules[1].scorer: unknown scorer 'nope'; known: " in err
    assert "rules[3].factory: cannot import no_such_module:make" in err
    known = err.split("known: ", 1)[1].split("\n", 1)[0].split(", ")
    assert "" not in known and "answer-relevancy" in known
    assert "Traceback" not in err


def test_log_records_the_downstream_rejects_for_good_are_dropped_not_retried(
        serve: Any, receiver: FullReceiver) -> None:
    from opentelemetry.proto.collector.logs.v1 import logs_service_pb2
    from opentelemetry.proto.logs.v1 import logs_pb2

    def logs(body: str) -> bytes:
        request = logs_service_pb2.ExportLogsServiceRequest(resource_logs=[
            logs_pb2.ResourceLogs(scope_logs=[logs_pb2.ScopeLogs(log_records=[
                logs_pb2.LogRecord(event_name="gen_ai.user.message")])])])
        request.resource_logs[0].scope_logs[0].log_records[0].body.string_value = body
        return bytes(request.SerializeToString())

    receiver.reject_log_body = "poison"
    running = serve()
    assert _post(running.http_port, logs("poison"), path="/v1/logs")[0] == 200
    for i in range(3):
        assert _post(running.http_port, logs(f"fine{i}"), path="/v1/logs")[0] == 200
    assert receiver.wait(lambda: receiver.log_bodies() == ["fine0", "fine1", "fine2"])
    assert running.service.logs.flush(30)  # counted once the send returned
    stats = running.service.snapshot()
    assert stats["log_records_rejected_downstream"] == {"grpc INVALID_ARGUMENT": 1}
    assert stats["log_records_forwarded"] == 3 and stats["log_records_dropped"] == 1


def test_hold_mode_counts_what_a_crash_would_lose(serve: Any, receiver: FullReceiver) -> None:
    """In hold mode a replica holds accepted spans (waiting for their trace, for scores): the
    backlog a crash would lose is on /stats and /metrics as spans_at_risk."""
    rules = '[{factory: "test_serve_support:grounding_scorer", on: agent}]'
    running = serve(", admin: {endpoint: \"127.0.0.1:0\"}",
                    "trace: {idle: 60, settle_after_root: 60, max_wait: 120}", rules=rules)
    assert _post(running.http_port, _body([_agent(0x7C, 0x1, 3), _span("plain", 0x7C, 0x2,
                                                                        0x1)]))[0] == 200
    assert receiver.received.wait_for(lambda s: [x.name for x in s] == ["plain"], 30)
    assert running.service.export.force_flush(30_000)
    stats = running.service.snapshot()
    assert stats["deferred_spans"] == 1 and stats["spans_at_risk"] == 1
    with urllib.request.urlopen(f"http://127.0.0.1:{running.admin_port}/metrics",
                                timeout=10) as resp:
        assert "tracescore_serve_spans_at_risk 1" in resp.read().decode()
