"""The reader of tracescore's own spans (``@tracescore.agent``, ``retrieval``, ``tool``,
``llm``): it scores the full, untruncated values the decorator handed over in process
(``tracescore._handoff``), whatever content capture put on the span.
"""

from __future__ import annotations

from typing import Any

from .. import _handoff
from .. import _semconv as sc
from .._trace_buffer import TraceBuffer
from ._base import Content, attributes_of, scope_name


class TracescoreReader:
    """Reads spans of the ``tracescore`` instrumentation scope."""

    name = "tracescore"
    volatile = True
    explicit = True  # a span someone decorated is always judged, whatever it wraps

    def accepts(self, span: Any) -> bool:
        # The attribute also marks spans made with tracescore's conventions by other tracers.
        return (scope_name(span) == sc.INSTRUMENTATION_SCOPE
                or sc.TRACESCORE_SPAN_KIND in attributes_of(span))

    def kind(self, span: Any) -> str | None:
        record = _record(span)
        if record is not None:  # it knows the kind even when the attribute was pushed out
            return record.kind
        kind = attributes_of(span).get(sc.TRACESCORE_SPAN_KIND)
        return kind if isinstance(kind, str) else None

    def observe(self, span: Any, kind: str | None, buffer: TraceBuffer) -> None:
        if kind not in ("retrieval", "tool"):
            return
        record = _record(span)
        if record is None:
            return
        ctx = span.context
        if kind == "retrieval":
            if record.documents is not None:
                buffer.add_documents(ctx.trace_id, span.start_time or 0,
                                     tuple(d.content for d in record.documents))
            return
        call: dict[str, Any] = {
            "name": str(attributes_of(span).get(sc.GEN_AI_TOOL_NAME, span.name)),
            "arguments": record.arguments,
            "result": record.output,
        }
        if record.error is not None:
            call["error"] = _describe(record.error)
        buffer.add_tool_call(ctx.trace_id, ctx.span_id, span.start_time or 0, call)

    def read(self, span: Any, kind: str | None) -> Content:
        record = _record(span)
        if record is None:
            # Ended outside the decorator's end() call (an asynchronous span processor): the
            # span's attributes are all there is, truncated to max_content_length.
            attrs = attributes_of(span)
            return Content(attrs.get(sc.INPUT_VALUE), attrs.get(sc.OUTPUT_VALUE))
        output = record.output
        if kind == "retrieval" and record.documents is not None:
            output = [d.content for d in record.documents]
        error = _describe(record.error) if record.error is not None else None
        return Content(record.input, output, error)


def _record(span: Any) -> _handoff.CallRecord | None:
    ctx = span.context
    return None if ctx is None else _handoff.record_of(ctx.trace_id, ctx.span_id)


def _describe(exc: BaseException) -> str:
    try:
        return f"{type(exc).__name__}: {exc}"
    except Exception:
        return type(exc).__name__
