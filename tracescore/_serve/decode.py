"""OTLP export requests into SDK ``ReadableSpan`` objects (resource and scope included).

Built with the public ``ReadableSpan(...)`` constructor through the export codec's span reader,
so a received span takes exactly the path of a span made in process: readers, rules, the held
copy with its events, the export processor. A parent marked remote in OTLP's span flags stays
remote.
"""

from __future__ import annotations

from typing import Any

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.util.instrumentation import InstrumentationScope

from .._export.codec import _attributes, _span


def spans_of(request: Any) -> list[ReadableSpan]:
    """The spans of an ``ExportTraceServiceRequest``, in the order they came.

    Args:
        request: a parsed ``ExportTraceServiceRequest`` message.
    """
    spans: list[ReadableSpan] = []
    for resource_spans in request.resource_spans:
        resource = Resource(_attributes(resource_spans.resource.attributes),
                            resource_spans.schema_url or None)
        for scope_spans in resource_spans.scope_spans:
            pb_scope = scope_spans.scope
            scope = InstrumentationScope(pb_scope.name, pb_scope.version or None,
                                         scope_spans.schema_url or None,
                                         _attributes(pb_scope.attributes) or None)
            spans.extend(_span(pb, resource, scope) for pb in scope_spans.spans)
    return spans


def parse_traces(body: bytes) -> Any:
    """Parse protobuf bytes as an ``ExportTraceServiceRequest``.

    Raises:
        google.protobuf.message.DecodeError: not such a message.
    """
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    request = ExportTraceServiceRequest()
    request.ParseFromString(body)
    return request


def parse_logs(body: bytes) -> Any:
    """Parse protobuf bytes as an ``ExportLogsServiceRequest``.

    Raises:
        google.protobuf.message.DecodeError: not such a message.
    """
    from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest

    request = ExportLogsServiceRequest()
    request.ParseFromString(body)
    return request


def count_log_records(request: Any) -> int:
    """Log records in an ``ExportLogsServiceRequest``."""
    return sum(len(sl.log_records) for rl in request.resource_logs for sl in rl.scope_logs)
