"""``tracescore.span(...)``: a span for code that is not a function call (issue 24).

A block gets the span the decorator of its ``kind`` would make (name, GenAI and OpenInference
attributes, span kind) and takes its input and output from ``set_input``/``set_output``, so a
scoring rule reads it like a decorated call; without a ``kind`` it is a plain span that keeps
its input and output as ``input.value``/``output.value``. The conversation around it
(``tracescore.conversation``) is on it as on every decorated span. Like the decorators, it never
raises into the block's code: an exception of the block is recorded and re-raised unchanged.
"""

from __future__ import annotations

from types import TracebackType
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind

from tracescore._core import semconv as sc
from tracescore._core.errors import ConfigurationError
from tracescore._core.serialize import to_json
from tracescore._instrument import decorators as deco
from tracescore._instrument.calls import CallRecord
from tracescore._instrument.conversation import with_conversation
from tracescore._pipeline.runtime import RUNTIME, Runtime
from tracescore._pipeline.runtime import current as _current

_KINDS = ("agent", "retrieval", "tool", "llm")


class SpanBlock:
    """The span of a ``with tracescore.span(...)`` block (what ``as`` binds).

    Use ``set_input`` and ``set_output`` to give the block the input and output a decorated
    function would have had (they are what scorers judge); ``set_attribute`` for anything else.
    Every method is safe to call at any time and never raises; outside tracing (tracescore
    disabled, or called while instrumentation is suppressed) they do nothing.

    Attributes:
        span: the OpenTelemetry span, or a non-recording one when the block is not traced.
    """

    def __init__(self, name: str, *, kind: str | None = None,
                 attributes: dict[str, Any] | None = None, capture_content: bool | None = None,
                 model: str | None = None, provider: str | None = None,
                 remote: bool | None = None, data_source: str | None = None) -> None:
        if not isinstance(name, str) or not name:
            raise ConfigurationError("tracescore.span(name) takes a non-empty string")
        if kind is not None and kind not in _KINDS:
            raise ConfigurationError(
                f"tracescore.span(kind=...) takes one of {', '.join(_KINDS)} or None, "
                f"got {kind!r}")
        if attributes is not None and not isinstance(attributes, dict):
            raise ConfigurationError("tracescore.span(attributes=...) takes a dict")
        self._kind = kind
        self._name = name
        self._capture = capture_content
        self._spec: deco._Spec | None = None
        if kind is not None:
            self._spec = deco._Spec(kind, None, name, capture_content, model, provider,
                                    attributes, remote=remote, data_source=data_source)
        self._attributes = dict(attributes or {})
        self.span: Span = trace.INVALID_SPAN
        self._payload: CallRecord | None = None
        self._token: Any = None
        self._output: Any = None
        self._has_output = False
        self._active = False
        self._rt: Runtime = RUNTIME  # the runtime current when the block starts

    # -- what the block reports ------------------------------------------------------------------
    def set_input(self, value: Any) -> None:
        """The block's input (a question, messages, a query): on the span as ``input.value``
        (with content capture on) and, in full, what scorers judge."""
        if not self._active:
            return
        try:
            arguments = {"input": value}
            if self._payload is not None:
                self._payload.arguments = arguments
                self._payload.input = value
            if self._capturing():
                limit = self._rt.max_length
                text = to_json(value, limit)
                self.span.set_attribute(sc.INPUT_VALUE, text)
                self.span.set_attribute(sc.INPUT_MIME_TYPE, sc.MIME_JSON)
                if self._kind == "tool":
                    self.span.set_attribute(sc.GEN_AI_TOOL_CALL_ARGUMENTS, text)
                if self._kind == "llm":
                    name = "messages" if isinstance(value, list) else "input"
                    deco._record_input_messages(self.span, {name: value}, limit)
        except Exception:
            deco._internal_error("recording a block's input")

    def set_output(self, value: Any) -> None:
        """The block's output (an answer; for a retrieval, the documents): recorded when the
        block ends, as a decorated function's return value is."""
        self._output = value
        self._has_output = True

    def set_attribute(self, key: str, value: Any) -> None:
        """One more span attribute (rules can filter on it)."""
        if not self._active:
            return
        try:
            self.span.set_attribute(key, value)
        except Exception:
            deco._internal_error("setting a block's attribute")

    # -- the context manager ---------------------------------------------------------------------
    def __enter__(self) -> SpanBlock:
        self._rt = _current()
        if deco._bypass(self._rt):
            return self
        try:
            self._start()
        except Exception:
            deco._internal_error("starting a block's span")
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if not self._active:
            return
        self._active = False
        if exc is not None:
            deco._fail(self._rt, self.span, self._payload, exc)
        elif self._has_output:
            self._finish()
        deco._end(self._rt, self.span, self._payload, self._token)

    async def __aenter__(self) -> SpanBlock:
        return self.__enter__()

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        self.__exit__(exc_type, exc, tb)

    # -- internals -------------------------------------------------------------------------------
    def _capturing(self) -> bool:
        return self._capture if self._capture is not None else bool(self._rt.capture)

    def _start(self) -> None:
        rt = self._rt
        tracer = rt.tracer or trace.get_tracer(sc.INSTRUMENTATION_SCOPE)
        spec = self._spec
        if spec is not None:
            name, kind, attributes = spec.span_name, spec.span_kind, spec.attributes
        else:
            name, kind, attributes = self._name, SpanKind.INTERNAL, self._attributes
        span = tracer.start_span(name, kind=kind, attributes=with_conversation(attributes))
        self.span = span
        self._active = True
        if spec is not None and rt.scoring and span.is_recording():
            picks = rt.picks
            if picks is None or picks(span.get_span_context().trace_id):
                self._payload = CallRecord(spec.kind, {})
        self._token = otel_context.attach(deco.span_context(spec, span) if spec is not None
                                          else trace.set_span_in_context(span))

    def _finish(self) -> None:
        if self._spec is not None:
            deco._finish(self._rt, self._spec, self.span, self._payload, self._output)
            return
        try:
            if self._capturing():
                self.span.set_attribute(sc.OUTPUT_VALUE,
                                        to_json(self._output, self._rt.max_length))
                self.span.set_attribute(sc.OUTPUT_MIME_TYPE, sc.MIME_JSON)
        except Exception:
            deco._internal_error("recording a block's output")


def span(name: str, *, kind: str | None = None, attributes: dict[str, Any] | None = None,
         capture_content: bool | None = None, model: str | None = None,
         provider: str | None = None, remote: bool | None = None,
         data_source: str | None = None) -> SpanBlock:
    """A span around a block of code that is not a function call, as a context manager
    (``with`` or ``async with``).

    With ``kind``, the span is the one ``@tracescore.<kind>`` makes (``invoke_agent {name}``,
    ``retrieval {name}``, ``execute_tool {name}``, ``chat {model or name}``, with their GenAI and
    OpenInference attributes), and scoring rules select and read it like a decorated call: the
    input is what ``block.set_input(...)`` was given and the output what
    ``block.set_output(...)`` was (for ``retrieval``, the documents). Without ``kind`` it is a
    plain ``INTERNAL`` span named ``name`` (no rule with a kind selects it). An exception raised
    in the block is recorded on the span (status ERROR) and propagates unchanged. Spans started
    inside are its children; the conversation around it (``tracescore.conversation``) is on it.

    Args:
        name: the span's ``{name}`` (with ``kind``) or its whole name.
        kind: ``"agent"``, ``"retrieval"``, ``"tool"``, ``"llm"`` or None.
        attributes: extra span attributes (rules can filter on them).
        capture_content: as the decorators' option; default ``configure(content=...)``.
        model: for ``kind="llm"``, the model (span name and ``gen_ai.request.model``).
        provider: for ``kind="llm"``, ``gen_ai.provider.name``.
        remote: for ``llm`` and ``retrieval``, False makes the span ``INTERNAL`` (default
            ``CLIENT``), as the decorators' option.
        data_source: for ``retrieval``, ``gen_ai.data_source.id``.

    Returns:
        A ``SpanBlock``; ``as`` binds it.

    Raises:
        ConfigurationError: an empty name, an unknown kind, attributes that are not a dict.

    Examples:
        >>> with tracescore.span("support-bot", kind="agent") as turn:
        ...     turn.set_input(question)
        ...     turn.set_output(reply)
    """
    return SpanBlock(name, kind=kind, attributes=attributes, capture_content=capture_content,
                     model=model, provider=provider, remote=remote, data_source=data_source)
