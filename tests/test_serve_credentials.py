"""``tracescore serve`` with a bearer token, given more than one credential: two
``Authorization`` headers (HTTP) or two ``authorization`` metadata entries (gRPC) are refused
the same way on both protocols, whatever their order and whether one of them is right.

A real ``tracescore serve`` process on loopback ports, real clients (``http.client``, which
sends repeated headers as given, and a grpcio channel), a decoding OTLP receiver downstream.
"""

from __future__ import annotations

import http.client
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanContext, TraceFlags

from tests.otlp_receiver import GrpcOtlpReceiver

ROOT = Path(__file__).resolve().parent.parent
TOKEN = "s3cret-token"
RIGHT, WRONG = f"Bearer {TOKEN}", "Bearer wrong"
TRACES = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"


def _body(name: str, span_id: int) -> bytes:
    span = ReadableSpan(name=name, context=SpanContext(0xAB, span_id, False,
                                                       TraceFlags(TraceFlags.SAMPLED)),
                        start_time=1, end_time=2)
    return bytes(encode_spans([span]).SerializeToString())


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[int, int, Any]]:
    """(http port, grpc port, downstream receiver) of a running ``tracescore serve``."""
    folder = tmp_path_factory.mktemp("serve")
    with GrpcOtlpReceiver() as downstream:
        config = folder / "serve.yaml"
        config.write_text(f"""
exporter: {{endpoint: "{downstream.endpoint}", protocol: grpc, compression: none}}
receivers: {{grpc: {{endpoint: "127.0.0.1:0"}}, http: {{endpoint: "127.0.0.1:0"}},
             auth: {{token: "{TOKEN}"}}}}
rules: []
""", encoding="utf-8")
        env = {**os.environ, "LITELLM_OFFLINE_MODE": "true", "PYTHONPATH": str(ROOT)}
        proc = subprocess.Popen([sys.executable, "-m", "tracescore", "serve", "--config",
                                 str(config)], stderr=subprocess.PIPE, text=True, env=env)
        try:
            assert proc.stderr is not None
            line = proc.stderr.readline()  # printed once both receivers listen
            ports = re.search(r"grpc port (\d+), http port (\d+)", line)
            assert ports, line + (proc.stderr.read() if proc.poll() is not None else "")
            yield int(ports.group(2)), int(ports.group(1)), downstream
        finally:
            proc.terminate()
            proc.communicate(timeout=60)


def _http(port: int, credentials: list[str], path: str = "/v1/traces",
          body: bytes = b"", names: tuple[str, ...] = ("Authorization",)) -> tuple[int, str]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.putrequest("POST" if path == "/v1/traces" else "GET", path)
        conn.putheader("Content-Type", "application/x-protobuf")
        conn.putheader("Content-Length", str(len(body)))
        for n, value in enumerate(credentials):
            # One header line each, the name spelled as ``names`` says (cycling).
            conn.putheader(names[n % len(names)], value)
        conn.endheaders(body)
        response = conn.getresponse()
        return response.status, response.read().decode("utf-8", "replace")
    finally:
        conn.close()


def _grpc(port: int, credentials: list[str], body: bytes) -> tuple[str, str]:
    import grpc

    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        call = channel.unary_unary(TRACES, request_serializer=None, response_deserializer=None)
        try:
            call(body, timeout=30, metadata=[("authorization", v) for v in credentials])
        except grpc.RpcError as exc:
            return exc.code().name, exc.details() or ""
    return "OK", ""


@pytest.mark.parametrize("credentials", [[RIGHT, WRONG], [WRONG, RIGHT], [RIGHT, RIGHT],
                                         [RIGHT, ""], [RIGHT, "Basic x"]],
                         ids=["right-wrong", "wrong-right", "right-right", "right-empty",
                              "right-basic"])
def test_more_than_one_credential_is_refused_on_both_protocols(
        served: tuple[int, int, Any], credentials: list[str]) -> None:
    http_port, grpc_port, downstream = served
    status, text = _http(http_port, credentials, body=_body("two-headers", 0x10))
    code, details = _grpc(grpc_port, credentials, _body("two-entries", 0x11))
    assert (status, code) == (401, "UNAUTHENTICATED"), (text, details)
    assert "more than one" in text and "more than one" in details
    assert TOKEN not in text + details
    # The admin endpoints on the same port too.
    assert _http(http_port, credentials, path="/stats")[0] == 401
    with downstream.received.lock:
        names = {s.name for s in downstream.received.spans}
    assert not names & {"two-headers", "two-entries"}


def test_exactly_one_right_credential_is_let_in_on_both_protocols(
        served: tuple[int, int, Any]) -> None:
    # The control: the same clients with one credential.
    http_port, grpc_port, downstream = served
    assert _http(http_port, [RIGHT], body=_body("one-header", 0x20))[0] == 200
    assert _grpc(grpc_port, [RIGHT], _body("one-entry", 0x21)) == ("OK", "")
    assert _http(http_port, [WRONG], body=_body("wrong", 0x22))[0] == 401
    assert _grpc(grpc_port, [WRONG], _body("wrong", 0x23))[0] == "UNAUTHENTICATED"
    assert downstream.received.wait_for(
        lambda spans: {"one-header", "one-entry"} <= {s.name for s in spans}, 30)


def test_two_headers_spelled_in_different_cases_are_two_credentials(
        served: tuple[int, int, Any]) -> None:
    http_port, _, _ = served
    for order in ([RIGHT, WRONG], [WRONG, RIGHT]):
        status, text = _http(http_port, order, body=_body("cases", 0x30),
                             names=("Authorization", "authorization"))
        assert status == 401 and "more than one" in text
