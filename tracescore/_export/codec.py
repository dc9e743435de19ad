"""Spans to bytes and back, for the retry spool: OTLP protobuf (an ``ExportTraceServiceRequest``,
the OTel SDK's own encoder) compressed with zlib.

Decoding gives ``ReadableSpan`` objects again, so a retried batch goes through the same
``SpanExporter.export()`` as a fresh one, whatever the exporter (OTLP, the file default, a
user's own). What OTLP carries survives the round trip: names, ids, parents, kinds, times,
status, attributes, events, links, trace state, resource and scope. The dropped-attribute counts
do not (the SDK derives them from its bounded containers); they are zero on a retried span.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from typing import Any

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import Link, SpanContext, SpanKind, Status, StatusCode, TraceFlags
from opentelemetry.trace.span import TraceState

# zlib level 1: LLM text compresses 3-5x at a few hundred MB/s; higher levels cost more CPU on
# the export thread for a few percent less disk.
_LEVEL = 1
_KINDS = {0: SpanKind.INTERNAL, 1: SpanKind.INTERNAL, 2: SpanKind.SERVER, 3: SpanKind.CLIENT,
          4: SpanKind.PRODUCER, 5: SpanKind.CONSUMER}
_REMOTE_MASK = 0x200  # SPAN_FLAGS_CONTEXT_IS_REMOTE_MASK


def encode(spans: Sequence[ReadableSpan]) -> bytes:
    """``spans`` as compressed OTLP protobuf bytes."""
    return encode_sized(spans)[0]


def encode_sized(spans: Sequence[ReadableSpan]) -> tuple[bytes, int]:
    """``spans`` as compressed OTLP protobuf bytes, and the size they inflate to."""
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

    raw = encode_spans(spans).SerializeToString()
    return zlib.compress(raw, _LEVEL), len(raw)


def inflate(data: bytes, max_size: int) -> bytes:
    """``data`` inflated, never to more than ``max_size`` bytes (a damaged or planted stream
    that would inflate further is refused before it takes the memory).

    Raises:
        ValueError: the stream inflates past ``max_size``.
        zlib.error: the stream is damaged.
    """
    inflater = zlib.decompressobj()
    out = inflater.decompress(data, max_size + 1)
    if len(out) > max_size or inflater.unconsumed_tail:
        raise ValueError(f"the stream inflates past {max_size} bytes")
    return out


def count(data: bytes, max_size: int = 64 << 20) -> int:
    """The number of spans in what ``encode`` wrote, from the decoded request (no span objects
    are built).

    Raises:
        The same as ``decode``.
    """
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    request = ExportTraceServiceRequest()
    request.ParseFromString(inflate(data, max_size))
    return sum(len(scope_spans.spans) for resource_spans in request.resource_spans
               for scope_spans in resource_spans.scope_spans)


def decode(data: bytes, max_size: int = 64 << 20) -> list[ReadableSpan]:
    """The spans ``encode`` wrote.

    Args:
        data: what ``encode`` returned.
        max_size: bytes the stream may inflate to at most (default 64 MiB).

    Raises:
        ValueError: the stream inflates past ``max_size``.
        zlib.error, google.protobuf.message.DecodeError: the bytes are damaged.
    """
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    request = ExportTraceServiceRequest()
    request.ParseFromString(inflate(data, max_size))
    spans: list[ReadableSpan] = []
    for resource_spans in request.resource_spans:
        resource = Resource(_attributes(resource_spans.resource.attributes),
                            resource_spans.schema_url or None)
        for scope_spans in resource_spans.scope_spans:
            pb_scope = scope_spans.scope
            scope = InstrumentationScope(pb_scope.name, pb_scope.version or None,
                                         scope_spans.schema_url or None,
                                         _attributes(pb_scope.attributes) or None)
            for pb in scope_spans.spans:
                spans.append(_span(pb, resource, scope))
    return spans


def _span(pb: Any, resource: Resource, scope: InstrumentationScope) -> ReadableSpan:
    trace_id = int.from_bytes(pb.trace_id, "big")
    state = TraceState.from_header([pb.trace_state]) if pb.trace_state else None
    context = SpanContext(trace_id, int.from_bytes(pb.span_id, "big"), is_remote=False,
                          trace_flags=TraceFlags(TraceFlags.SAMPLED), trace_state=state)
    parent = None
    if pb.parent_span_id:
        parent = SpanContext(trace_id, int.from_bytes(pb.parent_span_id, "big"),
                             is_remote=bool(pb.flags & _REMOTE_MASK),
                             trace_flags=TraceFlags(TraceFlags.SAMPLED))
    events = [Event(e.name, _attributes(e.attributes), e.time_unix_nano) for e in pb.events]
    links = [
        Link(SpanContext(int.from_bytes(lk.trace_id, "big"), int.from_bytes(lk.span_id, "big"),
                         is_remote=bool(lk.flags & _REMOTE_MASK),
                         trace_state=(TraceState.from_header([lk.trace_state])
                                      if lk.trace_state else None)),
             _attributes(lk.attributes))
        for lk in pb.links
    ]
    code = StatusCode(pb.status.code)
    # The SDK only keeps a description on ERROR (and warns about any other).
    status = Status(code, (pb.status.message or None) if code is StatusCode.ERROR else None)
    return ReadableSpan(
        name=pb.name,
        context=context,
        parent=parent,
        resource=resource,
        attributes=_attributes(pb.attributes),
        events=events,
        links=links,
        kind=_KINDS.get(pb.kind, SpanKind.INTERNAL),
        status=status,
        start_time=pb.start_time_unix_nano,
        end_time=pb.end_time_unix_nano,
        instrumentation_scope=scope,
    )


def _attributes(kvs: Any) -> dict[str, Any]:
    return {kv.key: _value(kv.value) for kv in kvs}


def _value(v: Any) -> Any:
    kind = v.WhichOneof("value")
    if kind is None:
        return None
    if kind == "array_value":
        return tuple(_value(x) for x in v.array_value.values)
    if kind == "kvlist_value":
        return {kv.key: _value(kv.value) for kv in v.kvlist_value.values}
    return getattr(v, kind)
