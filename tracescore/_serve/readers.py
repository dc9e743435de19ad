"""Reading received spans: the in-process readers, except that tracescore's own spans are read
from their attributes only.

In process, tracescore's reader takes a retrieval's documents and a tool call's arguments from
the decorator's hand-off (``_handoff``), which a span received over OTLP never has. Here the
documents come from ``gen_ai.retrieval.documents`` (the ``content`` of each entry, as the
GenAI reader reads them) and the tool call from ``input.value``/``output.value``. Values the
sender truncated (``max_content_length``) are what the service scores: raise that length in the
sending processes when the service must score the full text.
"""

from __future__ import annotations

import json
from typing import Any

from .. import _handoff
from .. import _semconv as sc
from .._readers import Content, attributes_of, register, unregister
from .._readers.genai import observe_documents, observe_tool_call, retrieval_documents
from .._readers.tracescore import TracescoreReader
from .._trace_buffer import TraceBuffer


class ReceivedTracescoreReader(TracescoreReader):
    """tracescore's reader for spans that come without the decorator's hand-off."""

    name = "tracescore-received"
    # A received span's values are its attributes: nothing is gone once on_end returns, so the
    # processor may read it later, on the loop.
    volatile = False

    def accepts(self, span: Any) -> bool:
        return super().accepts(span) and _handoff_record(span) is None

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
        content = super().read(span, kind)
        value_in = _json_attribute(attrs, sc.INPUT_VALUE, sc.INPUT_MIME_TYPE)
        value_out = _json_attribute(attrs, sc.OUTPUT_VALUE, sc.OUTPUT_MIME_TYPE)
        if kind == "retrieval":
            documents = retrieval_documents(attrs)
            value_out = list(documents) if documents else value_out
        return Content(value_in, value_out, content.error, content.missing)


def install() -> ReceivedTracescoreReader:
    """Register the reader ahead of the others (the service's own processor reads through the
    registry too); ``uninstall`` removes it. It only takes spans without a hand-off record, so
    spans made in the same process keep their in-process reader."""
    reader = ReceivedTracescoreReader()
    register(reader, first=True)
    return reader


def uninstall(reader: ReceivedTracescoreReader) -> None:
    """Remove a reader ``install`` registered."""
    unregister(reader)


def _handoff_record(span: Any) -> Any:
    ctx = span.context
    return None if ctx is None else _handoff.record_of(ctx.trace_id, ctx.span_id)


def _json_attribute(attrs: Any, key: str, mime_key: str) -> Any:
    """The attribute's value, decoded when the decorator wrote it as JSON (a returned string is
    the JSON string ``"..."`` on the span; in process the scorer saw the string itself)."""
    value = attrs.get(key)
    if attrs.get(mime_key) == "application/json":
        return _decoded(value)
    return value


def _decoded(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value
