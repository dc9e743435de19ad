"""The reader of spans made with tracescore's conventions but without their decorator's
``CallRecord``: spans received by ``tracescore serve``, spans made by another tracer with the
``tracescore.span.kind`` attribute, spans ended outside the decorator's ``end()`` call. What the
span carries is all there is (truncated to ``max_content_length`` by the sender).

Spans made by the decorators in this process are read through their ``CallRecord``
(``tracescore._instrument.calls``), which has the full values. Here a retrieval's documents come
from
``gen_ai.retrieval.documents`` and a tool call from ``input.value``/``output.value``, decoded
from JSON when the decorator wrote them as JSON.
"""

from __future__ import annotations

import json
from typing import Any

from tracescore._core import semconv as sc
from tracescore._pipeline.trace_buffer import TraceBuffer

from ._base import Content, attributes_of, scope_name
from ._values import error_of
from .genai import observe_documents, observe_tool_call, retrieval_documents


class TracescoreReader:
    """Reads spans of the ``tracescore`` instrumentation scope (or carrying its kind
    attribute) from their attributes."""

    name = "tracescore"
    explicit = True  # a span someone decorated is always judged, whatever it wraps

    def accepts(self, span: Any) -> bool:
        # The attribute also marks spans made with tracescore's conventions by other tracers.
        return (scope_name(span) == sc.INSTRUMENTATION_SCOPE
                or sc.TRACESCORE_SPAN_KIND in attributes_of(span))

    def kind(self, span: Any) -> str | None:
        kind = attributes_of(span).get(sc.TRACESCORE_SPAN_KIND)
        return kind if isinstance(kind, str) else None

    def observe(self, span: Any, kind: str | None, buffer: TraceBuffer) -> None:
        if kind == "retrieval":
            observe_documents(span, buffer, retrieval_documents(attributes_of(span)))
        elif kind == "tool":
            attrs = attributes_of(span)
            call: dict[str, Any] = {
                "name": str(attrs.get(sc.GEN_AI_TOOL_NAME, span.name)),
                "arguments": _decoded(attrs.get(sc.INPUT_VALUE)),
                "result": _decoded(attrs.get(sc.OUTPUT_VALUE)),
            }
            observe_tool_call(span, buffer, call)

    def read(self, span: Any, kind: str | None) -> Content:
        attrs = attributes_of(span)
        value_in = _json_attribute(attrs, sc.INPUT_VALUE, sc.INPUT_MIME_TYPE)
        value_out = _json_attribute(attrs, sc.OUTPUT_VALUE, sc.OUTPUT_MIME_TYPE)
        if kind == "retrieval":
            documents = retrieval_documents(attrs)
            value_out = list(documents) if documents else value_out
        return Content(value_in, value_out, error_of(span))


def _json_attribute(attrs: Any, key: str, mime_key: str) -> Any:
    """The attribute's value, decoded when the decorator wrote it as JSON (a returned string is
    the JSON string ``"..."`` on the span; in process the scorer saw the string itself)."""
    value = attrs.get(key)
    if attrs.get(mime_key) == sc.MIME_JSON:
        return _decoded(value)
    return value


def _decoded(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value
