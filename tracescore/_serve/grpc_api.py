"""The OTLP/gRPC receiver: ``TraceService/Export`` and ``LogsService/Export`` on ``grpcio``.

The methods take the request's raw bytes (a generic handler without a deserializer), so the
service parses and validates them itself (``intake``): a message that does not parse is
``INVALID_ARGUMENT`` with one log line, not the traceback and ``INTERNAL`` that grpcio gives a
failing deserializer. gRPC itself refuses a message whose size, received or decompressed,
passes ``max_request_bytes`` (``RESOURCE_EXHAUSTED``), and closes connections idle for
``idle_timeout`` and handshakes slower than ``header_timeout``.

A throttled request ends with ``RESOURCE_EXHAUSTED`` and a ``google.rpc.RetryInfo`` detail in
``grpc-status-details-bin`` (the OTLP specification makes it retryable only with that detail,
and the Collector waits the ``retry_delay`` it finds there); a draining service answers
``UNAVAILABLE`` with the same detail; a request too large for the queues ever to take is
``RESOURCE_EXHAUSTED`` without it (not retried); a missing or wrong bearer token is
``UNAUTHENTICATED``.
"""

from __future__ import annotations

import logging
from concurrent import futures
from typing import Any

from .config import Receivers
from .intake import (
    INVALID,
    OK,
    THROTTLED,
    TOO_LARGE,
    UNAUTHENTICATED,
    UNAVAILABLE,
    UNSUPPORTED,
    Intake,
    Outcome,
)

logger = logging.getLogger("tracescore")

_TRACES = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"
_LOGS = "/opentelemetry.proto.collector.logs.v1.LogsService/Export"


def _abort(context: Any, outcome: Outcome) -> None:
    import grpc  # type: ignore[import-untyped, unused-ignore]
    from google.protobuf.duration_pb2 import Duration  # type: ignore[import-untyped, unused-ignore]
    from google.rpc import (  # type: ignore[import-untyped, unused-ignore]
        code_pb2,
        error_details_pb2,
        status_pb2,
    )

    code, rpc_code = {
        INVALID: (grpc.StatusCode.INVALID_ARGUMENT, code_pb2.INVALID_ARGUMENT),
        UNSUPPORTED: (grpc.StatusCode.INVALID_ARGUMENT, code_pb2.INVALID_ARGUMENT),
        TOO_LARGE: (grpc.StatusCode.RESOURCE_EXHAUSTED, code_pb2.RESOURCE_EXHAUSTED),
        THROTTLED: (grpc.StatusCode.RESOURCE_EXHAUSTED, code_pb2.RESOURCE_EXHAUSTED),
        UNAVAILABLE: (grpc.StatusCode.UNAVAILABLE, code_pb2.UNAVAILABLE),
        UNAUTHENTICATED: (grpc.StatusCode.UNAUTHENTICATED, code_pb2.UNAUTHENTICATED),
    }[outcome.code]
    message = f"tracescore serve: {outcome.message}"
    if outcome.retry_after is not None and outcome.code in (THROTTLED, UNAVAILABLE):
        info = error_details_pb2.RetryInfo()
        info.retry_delay.CopyFrom(Duration(seconds=int(outcome.retry_after),
                                           nanos=int(outcome.retry_after % 1 * 1e9)))
        status = status_pb2.Status(code=rpc_code, message=message)
        status.details.add().Pack(info)
        context.set_trailing_metadata((("grpc-status-details-bin",
                                        status.SerializeToString()),))
    context.abort(code, message)


def _peer(context: Any) -> str:
    try:
        return str(context.peer())
    except Exception:
        return ""


def start_grpc(intake: Intake, recv: Receivers, *, credentials: Any = None,
               token_check: Any = None) -> tuple[Any, int]:
    """Start the gRPC receiver on ``recv.grpc``. Returns the server and the port it bound.

    Args:
        intake: takes the requests.
        recv: the receivers' section (address, limits, workers).
        credentials: server TLS credentials, or None for plaintext.
        token_check: the bearer-token check, or None.

    Raises:
        RuntimeError: the address cannot be bound.
    """
    import grpc  # type: ignore[import-untyped, unused-ignore]

    assert recv.grpc is not None

    def handler(signal: str) -> Any:
        take = intake.traces if signal == "traces" else intake.logs

        def export(raw: bytes, context: Any) -> bytes:
            if token_check is not None:
                # Every entry counts, not the last (what dict() of the metadata would keep).
                values = [value for key, value in context.invocation_metadata()
                          if key.lower() == "authorization"]
                refusal = token_check.refusal(values)
                if refusal is not None:
                    _abort(context, intake.refuse(UNAUTHENTICATED, "unauthenticated", signal,
                                                  _peer(context), refusal))
            # grpcio has already inflated a compressed message (within the size bound).
            outcome = take(raw, "", _peer(context))
            if outcome.code != OK:
                _abort(context, outcome)
            return b""  # an empty Export*ServiceResponse

        return grpc.unary_unary_rpc_method_handler(export)

    class Handlers(grpc.GenericRpcHandler):  # type: ignore[misc]
        def __init__(self) -> None:
            self._methods = {_TRACES: handler("traces"), _LOGS: handler("logs")}

        def service(self, details: Any) -> Any:
            return self._methods.get(details.method)

    options = [
        ("grpc.max_receive_message_length", recv.max_request_bytes),
        ("grpc.so_reuseport", 0),
        ("grpc.max_connection_idle_ms", int(recv.idle_timeout * 1000)),
        ("grpc.server_handshake_timeout_ms", int(recv.header_timeout * 1000)),
        ("grpc.max_concurrent_streams", 100),
    ]
    # No maximum_concurrent_rpcs: grpcio would refuse the excess with RESOURCE_EXHAUSTED and no
    # RetryInfo, which a Collector takes as final and drops; calls wait for a worker instead.
    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=recv.grpc_workers,
                                   thread_name_prefix="tracescore-grpc"),
        handlers=[Handlers()], options=options)
    if credentials is not None:
        port = server.add_secure_port(recv.grpc.endpoint, credentials)
    else:
        port = server.add_insecure_port(recv.grpc.endpoint)
    if not port:
        raise RuntimeError(f"cannot listen on {recv.grpc.endpoint} (gRPC)")
    server.start()
    return server, port
