"""How many bytes a span takes in an OTLP request, bounded from above without encoding it, and
how to cut a span that alone exceeds a request's limit.

The bound follows the protobuf wire format (protobuf.dev, "Encoding"): a length-delimited field
costs one tag byte (every OTLP field number is below 16), a length varint of at most five bytes,
then its content; a varint field at most eleven bytes, a fixed64 nine. Counting every field at
those maxima gives a bound that is never below what ``encode_spans(...).ByteSize()`` reports
(``tests/test_export_durability.py`` checks that) and within a few percent of it for spans whose
size is mostly text, which is the case that matters for limits. It costs a walk over the
attributes, a few microseconds per span, against tens for the encoding itself.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from opentelemetry.sdk.trace import Event, ReadableSpan

from tracescore._core import semconv as sc
from tracescore._core.otel_compat import attribute_dict, span_fields, trace_state_of

logger = logging.getLogger("tracescore")

_FIELD = 6  # tag + length varint of a length-delimited field, at most
_VARINT = 11  # tag + a 64-bit varint
_FIXED64 = 9  # tag + 8 bytes
# trace id (18), span id (10), parent id (10), kind, two timestamps, three dropped counts,
# flags and the status message's framing: every fixed-size field of a span, at their maxima.
_SPAN_FIXED = _FIELD + 18 + 10 + 10 + _VARINT + 2 * _FIXED64 + 3 * _VARINT + 5 + 3 * _FIELD + 2
_EVENT_FIXED = _FIELD + _FIXED64 + _FIELD + _VARINT
_LINK_FIXED = _FIELD + 18 + 10 + _FIELD + _VARINT + 5
# What a single string kept when a span is cut: enough to recognise it.
_MIN_KEPT = 64


def text_size(text: str) -> int:
    """UTF-8 length of ``text`` (the bytes protobuf writes)."""
    if text.isascii():
        return len(text)
    return len(text.encode("utf-8", "surrogatepass"))


def value_size(value: Any) -> int:
    """Upper bound of the bytes of an ``AnyValue`` holding ``value`` (without its own framing)."""
    if value is None:
        return 0
    if isinstance(value, str):
        return _FIELD + text_size(value)
    if isinstance(value, (bool, int, float)):
        return _VARINT
    if isinstance(value, bytes):
        return _FIELD + len(value)
    if isinstance(value, Mapping):
        return _FIELD + sum(_FIELD + _FIELD + text_size(str(k)) + _FIELD + value_size(v)
                            for k, v in value.items())
    if isinstance(value, Sequence):
        return _FIELD + sum(_FIELD + value_size(v) for v in value)
    return _FIELD + text_size(str(value))


def attributes_size(attributes: Mapping[str, Any] | None) -> int:
    """Upper bound of the bytes of an OTLP ``KeyValue`` list."""
    if attributes is None:
        return 0
    # The SDK's BoundedAttributes of an ended span is immutable: its dict is read directly
    # (the Mapping view would look every key up again through a Python method).
    inner = attribute_dict(attributes, frozen_only=True)
    plain: Mapping[str, Any] = attributes if inner is None else inner
    if not plain:
        return 0
    if plain.__class__ is dict:
        # The common shape, counted in C (this runs on the thread that ends every span): every
        # key and value an ASCII string, so characters are bytes. Joining copies the text once,
        # a fraction of what making it cost; anything else raises or is not ASCII, and is
        # counted item by item below.
        try:
            keys = "".join(plain)
            values = "".join(plain.values())
        except TypeError:
            pass
        else:
            if keys.isascii() and values.isascii():
                return 4 * _FIELD * len(plain) + len(keys) + len(values)
    total = 3 * _FIELD * len(plain)
    for key, value in plain.items():
        kind = value.__class__
        if kind is str:
            total += _FIELD + (len(value) if value.isascii() else text_size(value))
        elif kind is int or kind is float or kind is bool:
            total += _VARINT
        else:
            total += value_size(value)
        total += len(key) if key.isascii() else text_size(key)
    return total


def span_size(span: ReadableSpan) -> int:
    """Upper bound of the bytes ``span`` takes in an OTLP ``ExportTraceServiceRequest``, its
    resource and scope left out (see ``envelope_size``).

    Args:
        span: an ended span.

    Returns:
        Bytes, never fewer than the protobuf encoder writes for it.
    """
    # Each property is a Python call, and ``attributes``/``events``/``links`` copy.
    name, context, status, attributes, events, links = span_fields(span)
    total = _SPAN_FIXED + (len(name) if name.isascii() else text_size(name))
    total += attributes_size(attributes)
    state = trace_state_of(context) if context is not None else None
    if state is not None:
        total += _FIELD + sum(text_size(k) + text_size(v) + 2 for k, v in state.items())
    if status is not None and status.description:
        total += _FIELD + text_size(status.description)
    if events:
        for event in events:
            total += _EVENT_FIXED + text_size(event.name) + attributes_size(event.attributes)
    if links:
        for link in links:
            total += _LINK_FIXED + attributes_size(link.attributes)
            if link.context.trace_state:
                total += _FIELD + sum(text_size(k) + text_size(v) + 2 for k, v in
                                      link.context.trace_state.items())
    return total


def envelope_size(span: ReadableSpan) -> int:
    """Upper bound of the bytes of the resource and scope a request carries once for ``span``
    and the spans that share them."""
    scope = span.instrumentation_scope
    total = 4 * _FIELD + attributes_size(span.resource.attributes)
    total += _FIELD + text_size(span.resource.schema_url or "")
    if scope is not None:
        total += 3 * _FIELD + text_size(scope.name) + text_size(scope.version or "")
        total += attributes_size(scope.attributes) + _FIELD + text_size(scope.schema_url or "")
    return total


def fit(span: ReadableSpan, max_bytes: int) -> ReadableSpan | None:
    """A copy of ``span`` cut to at most ``max_bytes``, or None when even cutting every text
    value cannot make it fit (too many attributes, a huge name).

    The longest string values (of the span's attributes and its events' attributes) are cut to a
    common length, as little as needed, and the copy carries ``tracescore.export.truncated``
    (True) so a reader knows the values are incomplete.

    Args:
        span: a span whose ``span_size`` plus ``envelope_size`` exceeds ``max_bytes``.
        max_bytes: the request limit in bytes.
    """
    marker = {sc.TRACESCORE_EXPORT_TRUNCATED: True}
    budget = max_bytes - envelope_size(span) - attributes_size(marker)
    excess = span_size(span) - budget
    if excess <= 0:
        return span
    attrs = dict(span.attributes or {})
    events = [dict(e.attributes or {}) for e in span.events]
    sources: list[dict[str, Any]] = [attrs, *events]
    lengths = sorted((text_size(v) for src in sources for v in src.values()
                      if isinstance(v, str)), reverse=True)
    cap = _water_level(lengths, excess)
    if cap is None:
        return None
    for src in sources:
        for key, value in src.items():
            if isinstance(value, str) and text_size(value) > cap:
                src[key] = value.encode("utf-8", "surrogatepass")[:cap].decode("utf-8", "ignore")
    attrs.update(marker)
    cut = ReadableSpan(
        name=span.name,
        context=span.context,
        parent=span.parent,
        resource=span.resource,
        attributes=attrs,
        events=[Event(e.name, a, e.timestamp) for e, a in zip(span.events, events, strict=True)],
        links=span.links,
        kind=span.kind,
        status=span.status,
        start_time=span.start_time,
        end_time=span.end_time,
        instrumentation_scope=span.instrumentation_scope,
    )
    if span_size(cut) + envelope_size(cut) > max_bytes:
        return None
    return cut


def _water_level(lengths: list[int], excess: int) -> int | None:
    """The largest length ``cap`` (at least ``_MIN_KEPT``) such that cutting every length above
    it to ``cap`` removes at least ``excess`` bytes; None when no such cap exists."""
    removed_above = 0  # bytes removed if every length before index i is cut to lengths[i]
    for i in range(1, len(lengths) + 1):
        level = lengths[i] if i < len(lengths) else 0
        level = max(level, _MIN_KEPT)
        removed = sum(length - level for length in lengths[:i] if length > level)
        if removed >= excess:
            # Between lengths[i] and lengths[i-1]: the i longest share the cut equally.
            removed_above = removed
            over = removed_above - excess
            return max(_MIN_KEPT, level + over // i)
        if level == _MIN_KEPT:
            break
    return None
