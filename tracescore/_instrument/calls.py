"""A decorated call's full values, and the reader of its span.

A decorated call records its input and output on its span truncated (``max_content_length``) or
not at all (content capture off), but scoring must see the full values. The decorator therefore
puts its ``CallRecord`` in the runtime's table of calls ending now (``Runtime.ending``, keyed by
the span's ids) for as long as ``span.end()`` runs; the scoring processor's ``on_end``, which
runs inside that call, finds it there and reads the span through it: a ``CallRecord`` *is* the
reader of its own span (a ``tracescore._readers.Reader``: ``kind``, ``observe``, ``read``).
A span without a record (made by another tracer with tracescore's conventions, or received by
``tracescore serve``) is read from its attributes by ``_readers.tracescore``.

Only the standard library and ``_readers._base`` are imported.
"""

from __future__ import annotations

from typing import Any

from tracescore._core import semconv as sc
from tracescore._pipeline.trace_buffer import TraceBuffer
from tracescore._readers._base import Content, attributes_of


class CallRecord:
    """What a decorated call hands to scoring: full, untruncated values.

    Attributes:
        operation: the decorator: ``agent`` | ``retrieval`` | ``tool`` | ``llm`` (``kind()``
            returns it, as a reader does).
        input: the single argument when the function took one (``self`` aside), else a dict
            of the bound arguments by name.
        arguments: the bound arguments by name.
        output: the return value (for generators: the yielded items, joined when all are
            strings).
        documents: for retrieval spans, the normalised documents.
        error: the exception the call raised, if any.
    """

    __slots__ = ("operation", "input", "arguments", "output", "documents", "error")

    name = "tracescore"
    explicit = True  # a span someone decorated is always judged, whatever it wraps

    def __init__(self, operation: str, arguments: dict[str, Any]) -> None:
        self.operation = operation
        self.arguments = arguments
        self.input: Any = next(iter(arguments.values())) if len(arguments) == 1 else arguments
        self.output: Any = None
        self.documents: list[Any] | None = None
        self.error: BaseException | None = None

    # -- the reader of this call's span --------------------------------------------------------
    def accepts(self, span: Any) -> bool:
        """True: the record is asked only about its own span."""
        return True

    def kind(self, span: Any) -> str | None:
        """The decorator's kind (known even when the span's attribute was pushed out)."""
        return self.operation

    def observe(self, span: Any, kind: str | None, buffer: TraceBuffer) -> None:
        """A retrieval's documents and a tool call into the trace buffer."""
        ctx = span.context
        if kind == "retrieval":
            if self.documents is not None:
                buffer.add_documents(ctx.trace_id, span.start_time or 0,
                                     tuple(d.content for d in self.documents))
            return
        if kind != "tool":
            return
        call: dict[str, Any] = {
            "name": str(attributes_of(span).get(sc.GEN_AI_TOOL_NAME, span.name)),
            "arguments": self.arguments,
            "result": self.output,
        }
        if self.error is not None:
            call["error"] = describe(self.error)
        buffer.add_tool_call(ctx.trace_id, ctx.span_id, span.start_time or 0, call)

    def read(self, span: Any, kind: str | None) -> Content:
        """The full input and output (a retrieval's output: its documents' contents)."""
        output = self.output
        if kind == "retrieval" and self.documents is not None:
            output = [d.content for d in self.documents]
        error = describe(self.error) if self.error is not None else None
        return Content(self.input, output, error)


def describe(exc: BaseException) -> str:
    """``"Type: message"`` of an exception (its type alone when ``str()`` fails)."""
    try:
        return f"{type(exc).__name__}: {exc}"
    except Exception:
        return type(exc).__name__
