"""The OTLP/gRPC receiver: ``TraceService`` and ``LogsService`` on ``grpcio``.

A refused request ends with status ``RESOURCE_EXHAUSTED`` (``UNAVAILABLE`` while draining) and a
``google.rpc.RetryInfo`` detail in ``grpc-status-details-bin``: the OTLP specification makes
both statuses retryable, and the Collector's OTLP exporter waits the ``retry_delay`` it finds
there before its next attempt.
"""

from __future__ import annotations

import logging
from concurrent import futures
from typing import Any

from .admission import Refusal
from .config import Listen
from .service import ScoringService

logger = logging.getLogger("tracescore")


def _abort(context: Any, refusal: Refusal) -> None:
    import grpc  # type: ignore[import-untyped, unused-ignore]
    from google.protobuf.duration_pb2 import Duration  # type: ignore[import-untyped, unused-ignore]
    from google.rpc import (  # type: ignore[import-untyped, unused-ignore]
        code_pb2,
        error_details_pb2,
        status_pb2,
    )

    draining = refusal.reason == "draining"
    code = grpc.StatusCode.UNAVAILABLE if draining else grpc.StatusCode.RESOURCE_EXHAUSTED
    message = f"tracescore serve: {refusal.reason}; retry after {refusal.retry_after:g}s"
    info = error_details_pb2.RetryInfo()
    info.retry_delay.CopyFrom(Duration(seconds=int(refusal.retry_after),
                                       nanos=int(refusal.retry_after % 1 * 1e9)))
    status = status_pb2.Status(
        code=code_pb2.UNAVAILABLE if draining else code_pb2.RESOURCE_EXHAUSTED, message=message)
    status.details.add().Pack(info)
    context.set_trailing_metadata((("grpc-status-details-bin", status.SerializeToString()),))
    context.abort(code, message)


def start_grpc(service: ScoringService, listen: Listen, *, workers: int,
               max_message: int) -> tuple[Any, int]:
    """Start the gRPC receiver. Returns the server and the port it bound.

    Raises:
        RuntimeError: the address cannot be bound.
    """
    import grpc  # type: ignore[import-untyped, unused-ignore]
    from opentelemetry.proto.collector.logs.v1 import logs_service_pb2, logs_service_pb2_grpc
    from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc

    class Traces(trace_service_pb2_grpc.TraceServiceServicer):
        def Export(self, request: Any, context: Any) -> Any:  # noqa: N802 - gRPC's name
            refusal = service.accept_traces(request, request.ByteSize())
            if refusal is not None:
                _abort(context, refusal)
            return trace_service_pb2.ExportTraceServiceResponse()

    class Logs(logs_service_pb2_grpc.LogsServiceServicer):
        def Export(self, request: Any, context: Any) -> Any:  # noqa: N802 - gRPC's name
            refusal = service.accept_logs(request.SerializeToString(), request)
            if refusal is not None:
                _abort(context, refusal)
            return logs_service_pb2.ExportLogsServiceResponse()

    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=workers, thread_name_prefix="tracescore-grpc"),
        options=[("grpc.max_receive_message_length", max_message),
                 ("grpc.so_reuseport", 0)])
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(  # type: ignore[no-untyped-call]
        Traces(), server)
    logs_service_pb2_grpc.add_LogsServiceServicer_to_server(  # type: ignore[no-untyped-call]
        Logs(), server)
    port = server.add_insecure_port(listen.endpoint)
    if not port:
        raise RuntimeError(f"cannot listen on {listen.endpoint} (gRPC)")
    server.start()
    return server, port
